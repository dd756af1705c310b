"""Regularizers Ω(w) of the objective J(w) = lam·Ω(w) + R(w), as small objects.

Each regularizer carries what the solver needs from it:

* ``value(w)``: Ω(w);
* ``expression(w)`` and ``constraints(w)``: Ω and its domain as cvxpy objects of the
  variable ``w`` (for the cvxpy master problem);
* ``dual_term(v, lam)``: min_w lam·Ω(w) + <v, w> over the domain of Ω, in closed form
  (coordinate by coordinate), or None when there is none; with ``v = Aᵀα`` for the planes'
  weights α this gives the Lagrangian dual of the master problem,
  D(α) = bᵀα + min_w lam·Ω(w) + <Aᵀα, w> (Teo, Vishwanathan, Smola & Le, JMLR 2010, §4),
  a lower bound on min_w J(w) at *any* α of the simplex;
* ``dual_scale(v, lam)``: the largest t in (0, 1] for which ``dual_term(t·v, lam)`` is
  finite (mixing α with the zero plane, weight 1 − t, scales Aᵀα and bᵀα by t);
* ``qp``: whether the dedicated dual QP of :mod:`bmrm.solver.qp` solves the master (the
  unconstrained L2 case only);
* ``spec()``: a JSON value that :func:`from_spec` turns back into the regularizer (for
  model files).

:func:`make_regularizer` builds one from the public arguments of :func:`bmrm.fit`
(``regularizer="l2" | "l1" | "elastic_net" | callable | Regularizer``, ``l1_ratio``,
``bounds``, ``nonneg``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = [
    "NAMES",
    "Box",
    "Convex",
    "ElasticNet",
    "L1",
    "L2",
    "Regularizer",
    "from_spec",
    "make_regularizer",
]

NAMES = ("l2", "l1", "elastic_net")


class Regularizer:
    """Base class; see the module docstring for what a regularizer carries."""

    name = ""
    # the master of lam/2‖w‖² without constraints is the dual QP (bmrm.solver.qp)
    qp = False
    # the domain is a box: iterates are projected onto it
    bounded = False
    lower = None
    upper = None

    def value(self, w: np.ndarray) -> float:
        """The value Ω(w).

        Parameters
        ----------
        w : ndarray
            The weights.

        Returns
        -------
        float
            Ω(w).
        """
        raise NotImplementedError

    def expression(self, w):
        """Ω as a cvxpy expression of the variable ``w``.

        Parameters
        ----------
        w : cvxpy.Variable
            The weights.

        Returns
        -------
        cvxpy.Expression
            Ω(w), convex in ``w``.
        """
        raise NotImplementedError

    def constraints(self, w) -> list:
        """The cvxpy constraints on the variable ``w`` (the domain of Ω); none by default.

        Parameters
        ----------
        w : cvxpy.Variable
            The weights.

        Returns
        -------
        list
            The constraints (an empty list here).
        """
        return []

    def dual_term(self, v: np.ndarray, lam: float) -> float | None:
        """The dual term min_w lam·Ω(w) + ⟨v, w⟩, or None when no closed form is known.

        Parameters
        ----------
        v : ndarray
            The linear term.
        lam : float
            The regularization constant.

        Returns
        -------
        float or None
            The dual term's value, or None.
        """
        return None

    def dual_scale(self, v: np.ndarray, lam: float) -> float:
        """The largest t in (0, 1] for which ``dual_term(t·v, lam)`` is finite.

        Parameters
        ----------
        v : ndarray
            The linear term.
        lam : float
            The regularization constant.

        Returns
        -------
        float
            The scale t.
        """
        return 1.0

    def project(self, w: np.ndarray) -> np.ndarray:
        """The point of the domain of Ω nearest to ``w`` (``w`` itself without constraints).

        Parameters
        ----------
        w : ndarray
            The weights.

        Returns
        -------
        ndarray
            The nearest point of the domain.
        """
        return w

    def slope(self, w: np.ndarray, d: np.ndarray) -> float:
        """The right derivative of Ω(w + s·d) at s = 0.

        A forward difference unless the regularizer knows it in closed form.

        Parameters
        ----------
        w : ndarray
            The point.
        d : ndarray
            The direction.

        Returns
        -------
        float
            The right derivative.
        """
        h = 1e-7 * (1.0 + float(np.abs(w).max())) / max(float(np.abs(d).max()), 1e-300)
        return (self.value(w + h * d) - self.value(w)) / h

    def segment_slope(
        self, w: np.ndarray, d: np.ndarray, t: float, slope0: float, dd: float
    ) -> float:
        """The slope of Ω along a segment, at w = w_a + t·d.

        :meth:`slope` there, for a segment whose slope at t = 0 is ``slope0`` and ``dd`` = ‖d‖²
        (a quadratic Ω answers without touching w).

        Parameters
        ----------
        w : ndarray
            The point w_a + t·d.
        d : ndarray
            The direction.
        t : float
            The step.
        slope0 : float
            The slope at t = 0.
        dd : float
            ‖d‖².

        Returns
        -------
        float
            The slope at ``t``.
        """
        return self.slope(w, d)

    def clean(self, w: np.ndarray, J: float, objective) -> tuple[np.ndarray, float]:
        """The final point of a fit from its best iterate ``w`` (objective ``J``).

        ``(w, J)`` unchanged unless the regularizer knows a point that is no worse (L1's exact
        zeros, :meth:`ElasticNet.clean`).

        Parameters
        ----------
        w : ndarray
            The best iterate.
        J : float
            Its objective.
        objective : callable
            ``objective(v)`` evaluates J at v.

        Returns
        -------
        tuple
            ``(w, J)``, the final point and its objective.
        """
        return w, J

    def spec(self):
        """A JSON value that :func:`from_spec` turns back into this regularizer.

        Returns
        -------
        object
            The JSON value.
        """
        raise NotImplementedError

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self), repr(self._key())))

    def _key(self):
        return ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class ElasticNet(Regularizer):
    """Ω(w) = l1_ratio·‖w‖₁ + (1 − l1_ratio)·½‖w‖².

    The dual term is separable: per coordinate, min over [lo, hi] of
    lam·(r|x| + (1 − r)x²/2) + v x is attained at the clip to [lo, hi] of the unconstrained
    minimiser, the soft threshold x = −sign(v)·max(|v| − lam·r, 0) / (lam·(1 − r)) (a convex
    function of one variable is minimised over an interval at the projection of its
    minimiser). For r = 1 the minimiser is 0 when |v| <= lam and ∓inf otherwise, so the term
    is −inf unless the box stops w on that side.

    Parameters
    ----------
    l1_ratio : float in [0, 1] or None, default=0.5
        The weight r of the L1 part. None only for models read from files that did not
        record it (its value and dual term are then unknown).
    """

    name = "elastic_net"

    def __init__(self, l1_ratio: float | None = 0.5):
        if l1_ratio is not None:
            if isinstance(l1_ratio, bool) or not isinstance(l1_ratio, int | float | np.number):
                raise ValueError(f"l1_ratio must be a number in [0, 1]; got {l1_ratio!r}")
            if not 0.0 <= l1_ratio <= 1.0:
                raise ValueError(f"l1_ratio must lie in [0, 1]; got {l1_ratio!r}")
            l1_ratio = float(l1_ratio)
        self.l1_ratio = l1_ratio

    def _ratio(self) -> float:
        if self.l1_ratio is None:
            raise ValueError(
                "this elastic net's l1_ratio was not recorded (a model file written before "
                "l1_ratio was stored)"
            )
        return self.l1_ratio

    def value(self, w: np.ndarray) -> float:
        """The value Ω(w).

        Parameters
        ----------
        w : ndarray
            The weights.

        Returns
        -------
        float
            Ω(w).
        """
        r = self._ratio()
        return r * float(np.abs(w).sum()) + (1.0 - r) * 0.5 * float(w @ w)

    def slope(self, w: np.ndarray, d: np.ndarray) -> float:
        """The right derivative of Ω(w + s·d) at s = 0.

        A forward difference unless the regularizer knows it in closed form.

        Parameters
        ----------
        w : ndarray
            The point.
        d : ndarray
            The direction.

        Returns
        -------
        float
            The right derivative.
        """
        r = self._ratio()
        if r == 0.0:
            return float(w @ d)
        l1 = float(np.where(w != 0, np.sign(w) * d, np.abs(d)).sum())
        return r * l1 + (1.0 - r) * float(w @ d)

    def clean(self, w: np.ndarray, J: float, objective) -> tuple[np.ndarray, float]:
        """Set to 0 the weights that the solution only holds as solver residue.

        Only where that does not raise the objective. The L1 master problem's solutions, and
        the bundle iterates built from them, carry weights of 1e-9 to 1e-5 where the
        minimiser has exact zeros (an interior-point solver's tolerance; a step of in-out or
        line-search methods between two iterates). They cost nothing in J, but they decide
        the ranking when the minimiser is w = 0 (every weight a residue: a model that ranks
        by noise), and they hide the sparsity L1 is chosen for. Candidates, sparsest first:
        w = 0, then w with the coordinates below t·‖w‖∞ zeroed for t = 0.1, 0.01, ..., 1e-12
        (one risk evaluation per distinct support, at most 13); the first whose objective is
        no higher than J replaces w, so a certified gap J − lower bound holds for it
        unchanged.

        Parameters
        ----------
        w : ndarray
            The best iterate.
        J : float
            Its objective.
        objective : callable
            ``objective(v)`` evaluates J at v.

        Returns
        -------
        tuple
            ``(w, J)``, the final point and its objective.
        """
        if self.l1_ratio in (None, 0.0):
            return w, J
        w = np.asarray(w, dtype=np.float64)
        magnitude = np.abs(w)
        scale = float(magnitude.max())
        if not scale > 0.0 or not math.isfinite(J):
            return w, J
        n_nonzero = int(np.count_nonzero(w))
        last_kept = -1  # supports only grow as t falls: a repeat is the previous candidate
        for t in [math.inf, *(scale * 10.0**-k for k in range(1, 13))]:
            keep = magnitude >= t
            n_kept = int(np.count_nonzero(keep))
            if n_kept == n_nonzero:
                break  # this and every smaller t leave w as it is
            if n_kept == last_kept:
                continue
            last_kept = n_kept
            candidate = np.where(keep, w, 0.0)
            value = objective(candidate)
            if value <= J:
                return candidate, value
        return w, J

    def expression(self, w):
        """Ω as a cvxpy expression of the variable ``w``.

        Parameters
        ----------
        w : cvxpy.Variable
            The weights.

        Returns
        -------
        cvxpy.Expression
            Ω(w), convex in ``w``.
        """
        import cvxpy as cp

        r = self._ratio()
        return r * cp.norm1(w) + (1.0 - r) * 0.5 * cp.sum_squares(w)

    def dual_term(self, v, lam, lower=None, upper=None) -> float:
        """The dual term min over lower <= w <= upper of lam·Ω(w) + ⟨v, w⟩.

        Parameters
        ----------
        v : ndarray
            The linear term.
        lam : float
            The regularization constant.
        lower, upper : ndarray, float or None
            The box (None: unbounded).

        Returns
        -------
        float
            The dual term's value.
        """
        r = self._ratio()
        lo = -np.inf if lower is None else lower
        hi = np.inf if upper is None else upper
        shrunk = np.maximum(np.abs(v) - lam * r, 0.0)
        if r < 1.0:
            x = -np.sign(v) * shrunk / (lam * (1.0 - r))
        else:
            x = np.where(shrunk > 0, np.copysign(np.inf, -v), 0.0)
        x = np.clip(x, lo, hi)
        if not np.all(np.isfinite(x)):
            return -math.inf
        return lam * (r * float(np.abs(x).sum()) + (1.0 - r) * 0.5 * float(x @ x)) + float(v @ x)

    def dual_scale(self, v, lam, lower=None, upper=None) -> float:
        """The largest t in (0, 1] for which ``dual_term(t·v, lam, lower, upper)`` is finite.

        Parameters
        ----------
        v : ndarray
            The linear term.
        lam : float
            The regularization constant.
        lower, upper : ndarray, float or None
            The box (None: unbounded).

        Returns
        -------
        float
            The scale t.
        """
        if self._ratio() < 1.0:
            return 1.0
        # coordinates where w can run off to ∓inf while |v| > lam
        v = np.asarray(v, dtype=np.float64)
        free_up = np.ones(v.shape, bool) if upper is None else ~np.isfinite(upper)
        free_down = np.ones(v.shape, bool) if lower is None else ~np.isfinite(lower)
        free = np.where(v < 0, free_up, free_down)
        worst = float(np.abs(v[free]).max()) if np.any(free) else 0.0
        if worst <= lam:
            return 1.0
        # a hair below lam / worst, so that |t·v| <= lam survives rounding
        return lam / worst * (1.0 - 4 * np.finfo(float).eps)

    def spec(self):
        """A JSON value that :func:`from_spec` turns back into this regularizer.

        Returns
        -------
        object
            The JSON value.
        """
        return {"name": self.name, "l1_ratio": self.l1_ratio}

    def _key(self):
        return (self.l1_ratio,)

    def __repr__(self) -> str:
        return f"ElasticNet(l1_ratio={self.l1_ratio!r})"


class L2(ElasticNet):
    """Ω(w) = ½‖w‖²; without constraints the dedicated dual QP solves its master."""

    name = "l2"
    qp = True

    def __init__(self):
        super().__init__(0.0)

    def value(self, w: np.ndarray) -> float:
        """The value Ω(w).

        Parameters
        ----------
        w : ndarray
            The weights.

        Returns
        -------
        float
            Ω(w).
        """
        return 0.5 * float(w @ w)

    def segment_slope(self, w, d, t, slope0, dd) -> float:
        """Return <w_a + t·d, d> = slope0 + t·‖d‖², without touching ``w``.

        Parameters
        ----------
        w : ndarray of shape (n_features,)
            The point w_a + t·d (not read).
        d : ndarray of shape (n_features,)
            The direction of the segment (not read).
        t : float
            The step from the segment's start w_a.
        slope0 : float
            The slope <w_a, d> at t = 0.
        dd : float
            ‖d‖².

        Returns
        -------
        float
            The derivative of Ω along ``d`` at w.
        """
        return slope0 + t * dd

    def expression(self, w):
        """Ω as a cvxpy expression of the variable ``w``.

        Parameters
        ----------
        w : cvxpy.Variable
            The weights.

        Returns
        -------
        cvxpy.Expression
            Ω(w), convex in ``w``.
        """
        import cvxpy as cp

        return 0.5 * cp.sum_squares(w)

    def spec(self):
        """A JSON value that :func:`from_spec` turns back into this regularizer.

        Returns
        -------
        object
            The JSON value.
        """
        return self.name

    def __repr__(self) -> str:
        return "L2()"


class Direction(L2):
    """½‖w‖² for a scale-invariant risk, R(t w) = R(w) for t > 0 (the cosine loss with the
    linear ranking function), whose clean-up returns the unit direction.

    lam·½‖w‖² + R(w) then has no minimiser (its infimum is approached as w → 0 along the
    best direction, whatever lam), so the problem is R alone (lam = 0 in it) and the point
    it finds is returned with ‖w‖ = 1 (:func:`bmrm.solver.choice.make_problem`).
    """

    def clean(self, w: np.ndarray, J: float, objective) -> tuple[np.ndarray, float]:
        """The unit direction of ``w`` and its objective (``w`` itself when it is zero).

        Parameters
        ----------
        w : ndarray
            The solver's final point.
        J : float
            Its objective.
        objective : callable
            ``objective(v) -> J(v)``, one oracle call.

        Returns
        -------
        tuple
            ``(w / ‖w‖, J(w / ‖w‖))``, or ``(w, J)`` for w = 0.
        """
        norm = float(np.linalg.norm(w))
        if not norm > 0.0:
            return w, J
        unit = w / norm
        return unit, float(objective(unit))

    def __repr__(self) -> str:
        return "Direction()"


class L1(ElasticNet):
    """Ω(w) = ‖w‖₁; the cvxpy master is then a linear program."""

    name = "l1"

    def __init__(self):
        super().__init__(1.0)

    def value(self, w: np.ndarray) -> float:
        """The value Ω(w).

        Parameters
        ----------
        w : ndarray
            The weights.

        Returns
        -------
        float
            Ω(w).
        """
        return float(np.abs(w).sum())

    def expression(self, w):
        """Ω as a cvxpy expression of the variable ``w``.

        Parameters
        ----------
        w : cvxpy.Variable
            The weights.

        Returns
        -------
        cvxpy.Expression
            Ω(w), convex in ``w``.
        """
        import cvxpy as cp

        return cp.norm1(w)

    def spec(self):
        """A JSON value that :func:`from_spec` turns back into this regularizer.

        Returns
        -------
        object
            The JSON value.
        """
        return self.name

    def __repr__(self) -> str:
        return "L1()"


class Convex(Regularizer):
    """A user's convex regularizer: ``function`` maps a cvxpy variable to a convex expression.

    It has no closed-form dual term; the cvxpy master reports the solver's optimal value as
    the lower bound instead (valid to the solver's tolerance). It cannot be stored in a
    model file.

    Parameters
    ----------
    function : callable
        Maps a cvxpy variable to a convex scalar expression.
    """

    name = "convex"

    def __init__(self, function: Callable):
        if not callable(function):
            raise ValueError(f"regularizer must be callable; got {function!r}")
        self.function = function

    def check(self, n_features: int) -> None:
        """Refuse a function the master problem cannot minimise.

        The function is called once on a cvxpy variable of ``n_features`` entries: an exception,
        anything but a cvxpy expression, a non-scalar, or an expression cvxpy cannot prove convex
        (DCP rules) raises ``ValueError``.

        Parameters
        ----------
        n_features : int
            The number of weights.
        """
        if getattr(self, "_checked_for", None) == n_features:
            return  # make_regularizer is called again with the object by the solver
        import cvxpy as cp

        name = getattr(self.function, "__name__", repr(self.function))
        where = f"regularizer {name} (a callable)"
        try:
            expr = self.function(cp.Variable(n_features))
        except Exception as exc:
            reason = " ".join(str(exc).split()) or "no message"
            raise ValueError(
                f"{where} raised {type(exc).__name__} ({reason}) when called on a cvxpy "
                f"Variable of shape ({n_features},); it must map one to a convex scalar "
                "cvxpy expression"
            ) from exc
        if not isinstance(expr, cp.Expression):
            raise ValueError(
                f"{where} must return a convex scalar cvxpy expression of its argument; "
                f"got {type(expr).__name__} {expr!r}"
            )
        if not expr.is_scalar():
            raise ValueError(
                f"{where} must return a scalar cvxpy expression; got shape {expr.shape} "
                "(sum or norm it, for example cp.norm1(w) rather than cp.abs(w))"
            )
        if not expr.is_convex():
            raise ValueError(
                f"{where} must return a cvxpy expression that is convex by cvxpy's DCP "
                f"rules; got {expr} (curvature {expr.curvature})"
            )
        self._checked_for = n_features

    def value(self, w: np.ndarray) -> float:
        """The value Ω(w).

        Parameters
        ----------
        w : ndarray
            The weights.

        Returns
        -------
        float
            Ω(w).
        """
        import cvxpy as cp

        return float(self.function(cp.Constant(w)).value)

    def expression(self, w):
        """Ω as a cvxpy expression of the variable ``w``.

        Parameters
        ----------
        w : cvxpy.Variable
            The weights.

        Returns
        -------
        cvxpy.Expression
            Ω(w), convex in ``w``.
        """
        return self.function(w)

    def spec(self):
        """A JSON value that :func:`from_spec` turns back into this regularizer.

        Returns
        -------
        object
            The JSON value.
        """
        raise ValueError(
            f"cannot save a model with regularizer {self.function!r}: a callable cannot be "
            "stored in a model file"
        )

    def _key(self):
        return (self.function,)

    def __repr__(self) -> str:
        return f"Convex({self.function!r})"


class Box(Regularizer):
    """Ω restricted to the box lower <= w <= upper (the indicator of the box added to Ω).

    Parameters
    ----------
    base : Regularizer
        Ω, not itself a box.
    lower, upper : float, ndarray of shape (n_features,) or None, default=None
        The bounds; None (or ±inf entries) leaves that side open.
    """

    name = "box"
    bounded = True

    def __init__(self, base: Regularizer, lower=None, upper=None):
        if isinstance(base, Box):
            raise ValueError("a box regularizer's base must not itself be a box")
        self.base = base
        self.lower = None if lower is None else np.asarray(lower, dtype=np.float64)
        self.upper = None if upper is None else np.asarray(upper, dtype=np.float64)

    def value(self, w: np.ndarray) -> float:
        """The value Ω(w) for w in the box (the solver only evaluates points of the box).

        Parameters
        ----------
        w : ndarray
            The weights.

        Returns
        -------
        float
            Ω(w).
        """
        return self.base.value(w)

    def expression(self, w):
        """Ω as a cvxpy expression of the variable ``w``.

        Parameters
        ----------
        w : cvxpy.Variable
            The weights.

        Returns
        -------
        cvxpy.Expression
            Ω(w), convex in ``w``.
        """
        return self.base.expression(w)

    def constraints(self, w) -> list:
        """The cvxpy constraints ``w >= lower`` and ``w <= upper`` where finite.

        Parameters
        ----------
        w : cvxpy.Variable
            The weights.

        Returns
        -------
        list
            The constraints (empty when no side is finite).
        """
        out = []
        n = w.shape[0]
        for bound, sign in ((self.lower, 1.0), (self.upper, -1.0)):
            if bound is None:
                continue
            bound = np.broadcast_to(bound, (n,))
            finite = np.flatnonzero(np.isfinite(bound))
            if len(finite) == n:
                out.append(sign * w >= sign * bound)
            elif len(finite):
                out.append(sign * w[finite] >= sign * bound[finite])
        return out

    def dual_term(self, v, lam) -> float | None:
        """The dual term min_w lam·Ω(w) + ⟨v, w⟩, or None when no closed form is known.

        Parameters
        ----------
        v : ndarray
            The linear term.
        lam : float
            The regularization constant.

        Returns
        -------
        float or None
            The dual term's value, or None.
        """
        if not isinstance(self.base, ElasticNet):
            return None
        return self.base.dual_term(v, lam, self.lower, self.upper)

    def dual_scale(self, v, lam) -> float:
        """The largest t in (0, 1] for which ``dual_term(t·v, lam)`` is finite.

        Parameters
        ----------
        v : ndarray
            The linear term.
        lam : float
            The regularization constant.

        Returns
        -------
        float
            The scale t.
        """
        if not isinstance(self.base, ElasticNet):
            return 1.0
        return self.base.dual_scale(v, lam, self.lower, self.upper)

    def project(self, w: np.ndarray) -> np.ndarray:
        """The point of the domain of Ω nearest to ``w`` (``w`` itself without constraints).

        Parameters
        ----------
        w : ndarray
            The weights.

        Returns
        -------
        ndarray
            The point of the box nearest to ``w``.
        """
        lo = -np.inf if self.lower is None else self.lower
        hi = np.inf if self.upper is None else self.upper
        return np.clip(w, lo, hi)

    def slope(self, w: np.ndarray, d: np.ndarray) -> float:
        """The right derivative of Ω(w + s·d) at s = 0.

        A forward difference unless the regularizer knows it in closed form.

        Parameters
        ----------
        w : ndarray
            The point.
        d : ndarray
            The direction.

        Returns
        -------
        float
            The right derivative.
        """
        return self.base.slope(w, d)

    def clean(self, w: np.ndarray, J: float, objective) -> tuple[np.ndarray, float]:
        """The base's clean-up, its candidates outside the box left out (not evaluated).

        Parameters
        ----------
        w : ndarray
            The best iterate.
        J : float
            Its objective.
        objective : callable
            ``objective(v)`` evaluates J at v.

        Returns
        -------
        tuple
            ``(w, J)``, the final point and its objective.
        """

        def inside(v):
            return objective(v) if np.array_equal(self.project(v), v) else math.inf

        return self.base.clean(w, J, inside)

    def spec(self):
        """A JSON value that :func:`from_spec` turns back into this regularizer.

        Returns
        -------
        object
            The JSON value.
        """

        def side(bound):
            if bound is None:
                return None
            # JSON has no infinity: an open side of one coordinate is written null
            values = [None if not np.isfinite(x) else float(x) for x in np.ravel(bound)]
            return values[0] if bound.ndim == 0 else values

        return {
            "name": self.name,
            "base": self.base.spec(),
            "lower": side(self.lower),
            "upper": side(self.upper),
        }

    def _key(self):
        def side(bound):
            return None if bound is None else (bound.shape, bound.tobytes())

        return (self.base, side(self.lower), side(self.upper))

    def __repr__(self) -> str:
        return f"Box({self.base!r}, lower={self.lower!r}, upper={self.upper!r})"


def _check_bounds(bounds, nonneg: bool, n_features: int | None):
    """(lower, upper) as float arrays or None, from ``bounds`` or ``nonneg``."""
    if nonneg:
        if bounds is not None:
            raise ValueError("give either nonneg=True or bounds, not both")
        return np.float64(0.0), None
    if bounds is None:
        return None, None
    if not isinstance(bounds, tuple | list) or len(bounds) != 2:
        raise ValueError(f"bounds must be a pair (lower, upper); got {bounds!r}")
    out = []
    for value, side in zip(bounds, ("lower", "upper"), strict=True):
        if value is None:
            out.append(None)
            continue
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"bounds {side} must be a number or an array of numbers; got {value!r}"
            ) from None
        if arr.ndim not in (0, 1) or (
            arr.ndim == 1 and n_features is not None and arr.shape[0] != n_features
        ):
            raise ValueError(
                f"bounds {side} must be a scalar or have one entry per weight ({n_features}); "
                f"got shape {arr.shape}"
            )
        if np.any(np.isnan(arr)):
            raise ValueError(f"bounds {side} must not contain NaN")
        # a side at the far infinity admits no weight (None or the near one leaves it open)
        empty, relation, open_side = (
            ("+inf", ">=", "-inf") if side == "lower" else ("-inf", "<=", "+inf")
        )
        if np.any(arr == float(empty)):
            raise ValueError(
                f"bounds {side} must not contain {empty}: no weight is {relation} {empty}, so "
                f"the box would be empty (None or {open_side} leaves a side open)"
            )
        out.append(arr)
    if out[0] is not None and out[1] is not None and np.any(out[0] > out[1]):
        raise ValueError("bounds lower must not exceed upper")
    return out[0], out[1]


def make_regularizer(
    regularizer="l2",
    *,
    l1_ratio: float = 0.5,
    bounds=None,
    nonneg: bool = False,
    n_features: int | None = None,
) -> Regularizer:
    """Return the :class:`Regularizer` for the public arguments of :func:`bmrm.fit`.

    Parameters
    ----------
    regularizer : {"l2", "l1", "elastic_net"}, callable or Regularizer, default="l2"
        A name, a callable mapping a cvxpy variable to a convex expression, or an object.
    l1_ratio : float in [0, 1], default=0.5
        The elastic net's mixing (used with ``"elastic_net"`` only).
    bounds : (lower, upper) or None, default=None
        Box constraints (scalars, arrays of ``n_features`` entries, or None).
    nonneg : bool, default=False
        The box (0, None).
    n_features : int or None, default=None
        The number of weights, to check the length of array bounds (and to call a
        callable regularizer once, :meth:`Convex.check`).

    Returns
    -------
    Regularizer
        The regularizer, wrapped in a :class:`Box` when bounds are given.

    Raises
    ------
    ValueError
        Naming the argument, for an unknown name, an l1_ratio outside [0, 1], or malformed
        bounds (NaN, lower above upper, or an empty side: a lower bound of +inf or an upper
        bound of -inf).
    """
    if isinstance(regularizer, Regularizer):
        reg = regularizer
    elif isinstance(regularizer, str):
        if regularizer not in NAMES:
            raise ValueError(
                f"regularizer must be one of {NAMES}, a callable or a Regularizer; "
                f"got {regularizer!r}"
            )
        if regularizer == "elastic_net":
            reg = ElasticNet(l1_ratio)
        else:
            reg = L2() if regularizer == "l2" else L1()
    elif callable(regularizer):
        reg = Convex(regularizer)
    else:
        raise ValueError(
            f"regularizer must be one of {NAMES}, a callable or a Regularizer; got {regularizer!r}"
        )
    if n_features is not None:
        base = reg.base if isinstance(reg, Box) else reg
        if isinstance(base, Convex):
            base.check(n_features)
    if isinstance(reg, Box):
        # the checks of the bounds argument, on a box given as an object
        if not isinstance(reg.base, Regularizer):
            raise ValueError(f"a box regularizer's base must be a Regularizer; got {reg.base!r}")
        try:
            _check_bounds((reg.lower, reg.upper), False, n_features)
        except ValueError as exc:
            reason = str(exc).replace("bounds ", "its ", 1)
            raise ValueError(f"regularizer {reg!r}: {reason}") from None
    lower, upper = _check_bounds(bounds, nonneg, n_features)
    if lower is None and upper is None:
        return reg
    if isinstance(reg, Box):
        raise ValueError("give bounds either in the Box regularizer or as bounds, not both")
    return Box(reg, lower, upper)


def from_spec(spec) -> Regularizer:
    """Return the regularizer a model file's JSON ``spec`` describes.

    The bare name ``"elastic_net"`` (files that did not record the mixing) gives
    ``ElasticNet(l1_ratio=None)``.

    Parameters
    ----------
    spec : str or dict
        The JSON value.

    Returns
    -------
    Regularizer
        The regularizer.

    Raises
    ------
    ValueError
        For a spec that names no known regularizer or is malformed.
    """
    known = "one of 'l2', 'l1', 'elastic_net' or an object with name 'elastic_net' or 'box'"
    if spec == "l2":
        return L2()
    if spec == "l1":
        return L1()
    if spec == "elastic_net":
        return ElasticNet(None)
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise ValueError(f"expected regularizer {known}; got {spec!r}")
    name = spec["name"]
    if name == "elastic_net" and set(spec) == {"name", "l1_ratio"}:
        return ElasticNet(spec["l1_ratio"])
    if name == "box" and set(spec) == {"name", "base", "lower", "upper"}:
        try:
            return _box_from_spec(spec)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"malformed box regularizer {spec!r}: {exc}") from None
    raise ValueError(f"expected regularizer {known}; got {spec!r}")


def _box_from_spec(spec) -> Box:
    def side(value, fill):
        if value is None:
            return None
        values = np.array(
            [fill if x is None else x for x in np.ravel(np.array(value, dtype=object))],
            dtype=np.float64,
        )
        return values if isinstance(value, list) else values[0]

    base = from_spec(spec["base"])
    lower, upper = side(spec["lower"], -np.inf), side(spec["upper"], np.inf)
    return make_regularizer(base, bounds=(lower, upper))

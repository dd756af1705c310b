"""Solver methods: where to evaluate the risk next, behind one small protocol.

A method is any object with a ``step(state)`` method; :func:`bmrm.solver.loop.minimize_bmrm`
calls it once per iteration with a :class:`SolverState` and then checks the gap
``state.best_J − state.lower_bound``. A step evaluates the risk where it wants
(:meth:`SolverState.evaluate` for an oracle call with its cut, :meth:`SolverState.segment`
for a line search), solves the master problem (:meth:`SolverState.solve_master`) and
leaves the certificate in ``state.lower_bound``, a lower bound on min J. Every evaluated
point counts for the best iterate and for ``nfev``, whatever the method does with it.

Methods
-------
``"bmrm"`` (:class:`PlainBMRM`)
    Evaluate at the master problem's minimiser (Teo, Vishwanathan, Smola & Le, JMLR 11,
    2010, Algorithm 1).
``"ls-bmrm"`` (:class:`LineSearchBMRM`)
    Line search from the best point towards the master's minimiser, cut at the line-search
    point (Teo et al. 2010, Section 5, "ls-bmrm").
``"ocas"`` (:class:`OCAS`)
    The optimized cutting plane algorithm (Franc & Sonnenburg, JMLR 10, 2009): the same
    line search, then the cut at a point a fraction ``mu`` beyond it towards the master's
    minimiser, which keeps the convergence guarantee of the cutting-plane method.
``"inout"`` (:class:`InOut`)
    The in-out cutting-plane method (Ben-Ameur & Neto, Networks 49, 2007): OCAS's cut
    point without its line search, the cut a fraction ``mu`` of the way from the best
    point to the master's minimiser; one oracle call per iteration.
``"level"`` (:class:`bmrm.solver.level.LevelBundle`)
    The level bundle method (Lemaréchal, Nemirovskii & Nesterov, Math. Programming 69,
    1995), in :mod:`bmrm.solver.level`.
``"nrbm"`` (:class:`bmrm.solver.nrbm.NRBM`)
    The non-convex regularized bundle method (Do & Artières, JMLR 13, 2012) for risks
    that are not convex: serious and null steps, planes lowered where they conflict with
    the serious point, and a stationary point (not a certified optimum) at the end. Kept
    out of :data:`METHODS`, the methods with a certified gap on convex risks.

Per-query cut cache
-------------------
:class:`PlainBMRM`, :class:`OCAS`, :class:`LineSearchBMRM` and
:class:`~bmrm.solver.level.LevelBundle` take ``cut_cache=True`` (or ``"auto"``, or a
:class:`~bmrm.solver.cut_cache.CutCache` with its options): for per-query losses they keep
each query's planes from earlier oracle calls and, where the per-query maximum of those planes
is violated enough at the point the method chose, add it instead of calling the oracle (the
constraint cache of SVM^rank's 1-slack solver; :mod:`bmrm.solver.cut_cache`). For example
``bmrm.fit(X, y, "ordinal", qid, lam=1e-2, method=PlainBMRM(cut_cache=True))``. Its
planes are counted in ``n_cache_cuts``, apart from ``nfev``. :class:`PlainBMRM` (``"bmrm"``)
uses it by default (``cut_cache="auto"``) with the QP master of the L2 problem: with the
cache it needed 3–90× fewer oracle calls and 2.5–19× less time on every problem of
``experiments/bench_iterations.py`` it was measured on (``experiments/RESULTS.md`` has the
figures); ``PlainBMRM(cut_cache=False)`` is the method of Teo et al. as published.

Along a segment w(t) = w_a + t·(w_b − w_a) the scores are affine, f(t) = f_a + t·(f_b − f_a),
so for the package's risk oracle the line search costs one product X w_b and loss
evaluations on scores, with no further pass over X.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import time
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from bmrm.solver.bundle import Bundle
from bmrm.solver.cut_cache import make_cut_cache
from bmrm.solver.level import LevelBundle
from bmrm.solver.nrbm import NRBM
from bmrm.solver.regularizers import L1, L2, Box, ElasticNet, make_regularizer
from losses.validation import check_int, check_positive

__all__ = [
    "METHODS",
    "NONCONVEX_METHODS",
    "LineSearchBMRM",
    "Method",
    "InOut",
    "OCAS",
    "PlainBMRM",
    "SolverState",
    "check_method",
    "get_method",
]


class Method(Protocol):
    """The solver-method protocol: one iteration per call of :meth:`step`."""

    def step(self, state: SolverState) -> None:
        """Evaluate the risk where the method wants, update the bundle and solve the master
        problem, leaving a valid lower bound on min J in ``state.lower_bound``."""


@dataclass(eq=False)
class SolverState:
    """Everything a method sees and changes during a fit.

    Attributes
    ----------
    oracle : callable
        ``oracle(w) -> (R, a)``; the package's :class:`~bmrm.solver.oracle.RiskOracle` also
        offers ``scores``, ``risk_at`` and ``cut_at``, which the line searches use.
    lam : float
    regularizer, l1_ratio :
        Ω, as in :func:`bmrm.fit`.
    bundle : Bundle
    master :
        The master problem (``solve(bundle, accuracy) -> (w, lower, alpha)``).
    J_of : callable
        ``J_of(w, R) = lam·Ω(w) + R``.
    w0 : ndarray
        The starting point.
    best_w, best_J :
        The best evaluated point and its objective.
    lower_bound : float
        The largest master optimum so far (a lower bound on min J).
    w_master : ndarray or None
        The last master minimiser.
    last_J : float
        The lowest objective among the points evaluated in the current iteration (the
        loop resets it to inf before each step).
    nit, nfev, n_passes : int
        Iterations, risk evaluations (with or without a subgradient) and passes over X
        (products X w and Xᵀ g).
    n_cache_cuts : int
        Planes taken from a per-query cut cache (:mod:`bmrm.solver.cut_cache`) instead of an
        oracle call; not counted in ``nfev``.
    oracle_seconds, master_seconds, cache_seconds : float
    master_rtol : float
        The master problem is solved to within this fraction of the current gap (its
        objective's absolute tolerance; 0: to the solver's own precision). Its optimum's
        bound stays valid at any accuracy (the dual objective of a feasible α).
    zero_checked : bool
        Whether a zero subgradient has been checked against the risk nearby
        (:meth:`check_zero_subgradient`, at most once per fit).
    slope_checked : bool
        Whether a user's subgradient has been checked against the risk along a line
        (:meth:`check_slope`, at most once per fit).
    """

    oracle: Any
    lam: float
    regularizer: Any
    l1_ratio: float | None
    bundle: Bundle
    master: Any
    J_of: Any
    w0: np.ndarray
    bounded: bool = False
    best_w: np.ndarray | None = None
    best_J: float = math.inf
    lower_bound: float = -math.inf
    w_master: np.ndarray | None = None
    last_J: float = math.inf
    nit: int = 0
    nfev: int = 0
    n_passes: int = 0
    n_cache_cuts: int = 0
    oracle_seconds: float = 0.0
    master_seconds: float = 0.0
    cache_seconds: float = 0.0
    master_rtol: float = 1e-3
    zero_checked: bool = False
    slope_checked: bool = False

    def __post_init__(self):
        # a name or a callable becomes its Regularizer (:mod:`bmrm.solver.regularizers`)
        self.regularizer = make_regularizer(self.regularizer, l1_ratio=self.l1_ratio)

    def buffer(self, name: str, like: np.ndarray) -> np.ndarray:
        """A work array shaped like ``like``, allocated once per fit (allocating n-sized
        arrays on every call costs page faults comparable to a pass over X)."""
        buffers = self.__dict__.setdefault("_buffers", {})
        buf = buffers.get(name)
        if buf is None or buf.shape != like.shape:
            buf = buffers[name] = np.empty_like(like)
        return buf

    @property
    def gap(self) -> float:
        return self.best_J - self.lower_bound

    def check_risk(self, w: np.ndarray, R: float) -> None:
        """Raise if the planes over-estimate the risk R at ``w``: every plane must lie below
        R (the subgradient inequality), so this means a wrong subgradient. O(k·d)."""
        bundle = self.bundle
        k = bundle.size
        # einsum's own loop: a BLAS product would wake BLAS's thread pool (see products)
        values = np.einsum("ij,j->i", bundle.A[:k], w) + bundle.b[:k]
        i = int(np.argmax(values))
        scale = 1.0 + abs(R) + float(np.abs(values).max()) + float(np.abs(bundle.b[:k]).max())
        if R < values[i] - 1e-8 * scale:
            raise ValueError(
                f"the risk {R:.6g} at an evaluated point lies below the cutting plane of an "
                f"earlier point ({values[i]:.6g}): the oracle's gradient is not a subgradient "
                "of its risk (check its sign and scale)"
            )

    def record(self, w: np.ndarray, J: float) -> None:
        """Count an evaluated point for the best iterate."""
        self.last_J = min(self.last_J, J)
        if J < self.best_J:
            self.best_J, self.best_w = J, w

    def evaluate(self, w: np.ndarray, cut: bool = True, cache=None):
        """One oracle call at ``w`` (two passes over X); adds its plane to the bundle when
        ``cut``, and its per-query planes to ``cache`` (a bound, active
        :class:`~bmrm.solver.cut_cache.CutCache`) when given. Returns ``(J, R, a)``."""
        t0 = time.perf_counter()
        if cache is not None and cache.active:
            R, a = cache.oracle_cut(self, w)
        else:
            R, a = self.oracle(w)
            self.n_passes += 2
        self.oracle_seconds += time.perf_counter() - t0
        self.nfev += 1
        self.check_risk(w, R)
        self.check_subgradient(w, R, a)
        J = self.J_of(w, R)
        self.record(w, J)
        if cut:
            self.bundle.add(a, R - float(a @ w))
        return J, R, a

    def check_subgradient(self, w: np.ndarray, R: float, a: np.ndarray) -> None:
        """A user's subgradient at an evaluated point, probed once per fit against its risk
        nearby: :meth:`check_zero_subgradient` when it is zero, else :meth:`check_slope`."""
        if a.any():
            self.check_slope(w, R, a)
        else:
            self.check_zero_subgradient(w, R, a)

    def check_zero_subgradient(self, w: np.ndarray, R: float, a: np.ndarray) -> None:
        """Raise if a zero subgradient ``a`` at ``w`` is disproved by the risk nearby.

        A zero subgradient of the convex risk says that ``w`` minimises it (R(w + t d) >=
        R(w) for every d and t), and its plane alone certifies the regularizer's minimiser:
        an oracle that returns a placeholder zero gradient would end the fit "converged" at
        the start. The risk of a user's oracle or loss is evaluated along two random
        directions, both ways, at four step lengths (16 calls, at most once per fit;
        not for the package's own losses, which are exact); a value lower by more than
        rounding raises ``ValueError``.
        """
        if R <= 0.0 or self.zero_checked or a.any():
            return
        self.zero_checked = True
        if self._exact_oracle():
            return
        rng = np.random.default_rng(0)
        with self._probing():
            for _ in range(2):
                d = rng.standard_normal(w.shape)
                for _, lower in self._risks_along(w, d, (1.0, 1e-2, 1e-4, 1e-6)):
                    if np.isfinite(lower) and lower < R - 1e-9 * R:
                        raise ValueError(
                            f"the oracle returned a zero subgradient where the risk "
                            f"({R:.6g}) is not least: at a nearby point it is {lower:.6g}, "
                            "so zero is not a subgradient of the convex risk there (a loss's "
                            "loss_grad must return the gradient of the values it returns)"
                        )

    @contextlib.contextmanager
    def _probing(self):
        """The probes overwrite the oracle's work arrays: its last gradient is put back."""
        last = getattr(self.oracle, "last_gradient", None)
        saved = None if last is None else last.copy()
        try:
            yield
        finally:
            if saved is not None:
                self.oracle.last_gradient = last
                np.copyto(last, saved)

    def _risks_along(self, w: np.ndarray, d: np.ndarray, lengths):
        """Yield ``(step, R(w + step·d))`` for each length, both ways, the steps scaled by
        w's root mean square (at least 1); each is an oracle call."""
        scale = max(1.0, float(np.sqrt(np.mean(np.square(w))))) if w.size else 1.0
        for t in lengths:
            for step in (t * scale, -t * scale):
                value = float(self.oracle(w + step * d)[0])
                self.nfev += 1
                self.n_passes += 2
                yield step, value

    def _exact_oracle(self) -> bool:
        """Whether the risk is one of the package's own losses (exact, tested), which the
        probes leave alone."""
        loss = getattr(self.oracle, "loss", None)
        return loss is not None and type(loss).__module__.split(".")[0] == "losses"

    def check_slope(self, w: np.ndarray, R: float, a: np.ndarray) -> None:
        """Raise if a user's subgradient ``a`` at ``w`` is disproved by the risk along a line.

        For a convex R and a subgradient a, R(w + s d) >= R(w) + s·⟨a, d⟩ for every d and s
        (the subgradient inequality). A gradient off by a few per cent (scaled, shifted, a
        term left out) passes the checks made at the points the solver evaluates, yet its
        planes over-estimate R along descent directions and make the certified gap too
        small. Once per fit, the risk of a user's oracle or loss is evaluated along a random
        direction, both ways, at three step lengths (6 calls; not for the package's own
        losses); a value below the plane by more than rounding raises ``ValueError``.
        Small steps see a wrong slope where R is close to linear, large ones where it bends.
        """
        if self.slope_checked:
            return
        self.slope_checked = True
        if self._exact_oracle():
            return
        # the risk's rounding: relative 1e-9 in float64, more for float32 products or an
        # oracle that answers in float32
        kinds = [np.dtype(getattr(self.oracle, "dtype", np.float64))]
        kinds += [np.asarray(R).dtype, np.asarray(a).dtype]
        eps = max(float(np.finfo(k).eps) for k in kinds if k.kind == "f")
        rounding = max(1e-9, 100.0 * eps)
        d = np.random.default_rng(1).standard_normal(w.shape)
        d /= max(float(np.linalg.norm(d)), 1e-300)
        slope = float(a @ d)
        with self._probing():
            for step, value in self._risks_along(w, d, (1e-1, 1e-3, 1e-5)):
                plane = R + step * slope
                tolerance = rounding * (abs(R) + abs(value) + abs(step * slope))
                if np.isfinite(value) and value < plane - tolerance:
                    raise ValueError(
                        f"the oracle's subgradient at an evaluated point is contradicted by "
                        f"its risk along a line: {value:.10g} at step {step:.3g}, below "
                        f"the subgradient's plane {plane:.10g}, so it is not a subgradient "
                        "of a convex risk there (a loss's loss_grad must return the gradient "
                        "of the values it returns; losses.check_oracle tests it)"
                    )

    def solve_master(self) -> np.ndarray:
        """Minimise the regularized cutting-plane model; raises the lower bound to its
        optimum and returns its minimiser (also kept in ``w_master``)."""
        t1 = time.perf_counter()
        # the master's own error need not be below a small fraction of the gap
        accuracy = self.master_rtol * self.gap if math.isfinite(self.lower_bound) else 0.0
        w_master, lb, alpha = self.master.solve(self.bundle, accuracy)
        self.bundle.set_weights(alpha)
        self.bundle.prune_idle()
        self.master_seconds += time.perf_counter() - t1
        self.lower_bound = max(self.lower_bound, lb)
        self.w_master = w_master
        return w_master

    def segment(self, w_a: np.ndarray, w_b: np.ndarray, f_a: np.ndarray | None = None):
        """The objective along w(t) = w_a + t·(w_b − w_a): a :class:`Segment`.

        With an oracle that evaluates on scores (``risk_at`` and ``cut_at``) and ``f_a``
        = X w_a given, it costs one product X w_b and then the loss alone per point.
        """
        if f_a is not None and hasattr(self.oracle, "risk_at"):
            return _ScoreSegment(self, w_a, w_b, f_a)
        return _PointSegment(self, w_a, w_b)

    def regularizer_slope(self, w: np.ndarray, d: np.ndarray) -> float:
        """The right derivative of Ω(w + s·d) at s = 0."""
        reg = self.regularizer
        base = reg.base if isinstance(reg, Box) else reg
        if isinstance(base, ElasticNet):  # L2 and L1 included
            r = base._ratio()
            if r == 0.0:
                return float(w @ d)
            l1 = float(np.where(w != 0, np.sign(w) * d, np.abs(d)).sum())
            return r * l1 + (1.0 - r) * float(w @ d)
        h = 1e-7 * (1.0 + float(np.abs(w).max())) / max(float(np.abs(d).max()), 1e-300)
        return (self.J_of(w + h * d, 0.0) - self.J_of(w, 0.0)) / (h * self.lam)


class _ScoreSegment:
    """A segment evaluated on scores: f(t) = f_a + t·Δf, no pass over X per point."""

    def __init__(self, state: SolverState, w_a, w_b, f_a):
        self.state = state
        self.w_a, self.d = w_a, w_b - w_a
        t0 = time.perf_counter()
        self.f_a = f_a
        self.df = state.oracle.scores(w_b, out=state.buffer("df", f_a))
        self.df -= f_a
        state.oracle_seconds += time.perf_counter() - t0
        state.n_passes += 1
        self.f = state.buffer("f", f_a)
        self._work = state.buffer("work", f_a)
        self.slope_reg0 = state.regularizer_slope(w_a, self.d)
        self.dd = float(self.d @ self.d)

    def start_slope(self, g_a: np.ndarray) -> float:
        """dJ/dt at t = 0 from g_a = ∂R/∂f at f_a."""
        return self.state.lam * self.slope_reg0 + self.slope_of(g_a)

    def slope_of(self, g: np.ndarray) -> float:
        """<g, Δf>, without BLAS: numpy's dot wakes BLAS's thread pool, which on a busy
        machine costs far more than this product of n numbers."""
        return float(np.multiply(g, self.df, out=self._work).sum())

    def scores(self, t: float) -> np.ndarray:
        """f(t), a fresh array."""
        return self.f_a + t * self.df

    def value(self, t: float):
        """``(J(t), dJ/dt, g)`` with g = ∂R/∂f at f(t) (a work array)."""
        state = self.state
        t0 = time.perf_counter()
        np.multiply(self.df, t, out=self.f)
        self.f += self.f_a
        R, g = state.oracle.risk_at(self.f)
        slope_R = self.slope_of(g)
        state.oracle_seconds += time.perf_counter() - t0
        state.nfev += 1
        w = self.w_a + t * self.d
        state.check_risk(w, R)
        J = state.J_of(w, R)
        state.record(w, J)
        if isinstance(state.regularizer, L2):
            slope_reg = self.slope_reg0 + t * self.dd
        else:
            slope_reg = state.regularizer_slope(w, self.d)
        return J, state.lam * slope_reg + slope_R, g

    def cut(self, t: float, cache=None):
        """An oracle call with its plane at w(t) (one pass, Xᵀg), its per-query planes
        offered to ``cache`` when active. Returns ``(w, f, J, g)``."""
        state = self.state
        t0 = time.perf_counter()
        f = self.scores(t)
        w = self.w_a + t * self.d
        if cache is not None and cache.active:
            R, a = cache.oracle_cut(state, w, f)
        else:
            R, a = state.oracle.cut_at(f)
            state.n_passes += 1
        g = state.oracle.last_gradient.copy()
        state.oracle_seconds += time.perf_counter() - t0
        state.nfev += 1
        state.check_risk(w, R)
        state.check_subgradient(w, R, a)
        J = state.J_of(w, R)
        state.record(w, J)
        state.bundle.add(a, R - float(a @ w))
        return w, f, J, g


class _PointSegment:
    """A segment for an oracle without scores: every point is a full oracle call, whose
    plane joins the bundle (it is valid and already paid for)."""

    def __init__(self, state: SolverState, w_a, w_b):
        self.state = state
        self.w_a, self.d = w_a, w_b - w_a

    def value(self, t: float):
        state = self.state
        w = self.w_a + t * self.d
        J, R, a = state.evaluate(w, cut=True)
        slope = state.lam * state.regularizer_slope(w, self.d) + float(a @ self.d)
        return J, slope, a

    def start_slope(self, a_a: np.ndarray) -> float:
        """dJ/dt at t = 0 from a subgradient a_a of R at w_a."""
        return self.state.lam * self.state.regularizer_slope(self.w_a, self.d) + float(
            a_a @ self.d
        )

    def cut(self, t: float, cache=None):
        w = self.w_a + t * self.d
        J, _, a = self.state.evaluate(w, cut=True, cache=cache)
        return w, None, J, a


def line_search(segment, J0: float, slope0: float, t_max: float, atol: float, max_evals: int):
    """Minimise the convex J(t) over [0, t_max] along ``segment``.

    Brackets the minimum by doubling from t = 1, then shrinks the bracket [lo, hi] with
    secant steps on the (sub)derivative, each kept at least a tenth of the bracket from its
    ends. It stops when the best value found is within ``atol`` of the bracket's lower bound
    (where the tangents at lo and hi cross; valid by convexity), or after ``max_evals``
    points. Piecewise-linear risks make the slope a step function, which this tolerates.
    Returns ``(t, J(t), g(t))`` for the best point evaluated (t = 0 if none is better than
    t = 0, with g None).
    """
    best_t, best_J, best_g = 0.0, J0, None
    if not slope0 < 0.0:
        return best_t, best_J, best_g
    lo, J_lo, s_lo = 0.0, J0, slope0
    hi = J_hi = s_hi = None
    t, evals = min(1.0, t_max), 0
    while evals < max_evals:
        J, s, g = segment.value(t)
        _check_convexity(t, J, s, 0.0, J0, slope0)
        evals += 1
        if J < best_J:
            best_t, best_J, best_g = t, J, (None if g is None else g.copy())
        if s >= 0.0:
            hi, J_hi, s_hi = t, J, s
            break
        lo, J_lo, s_lo = t, J, s
        if t >= t_max:
            return best_t, best_J, best_g
        t = min(2.0 * t, t_max)
    while hi is not None and evals < max_evals and s_hi > 0.0:
        width = hi - lo
        # where the tangents at lo and hi cross: a lower bound on J over the bracket
        t_cross = (J_lo - J_hi + s_hi * hi - s_lo * lo) / (s_hi - s_lo)
        if best_J - (J_lo + s_lo * (t_cross - lo)) <= atol:
            break
        t = min(max(t_cross, lo + 0.1 * width), hi - 0.1 * width)
        J, s, g = segment.value(t)
        _check_convexity(t, J, s, 0.0, J0, slope0)
        evals += 1
        if J < best_J:
            best_t, best_J, best_g = t, J, (None if g is None else g.copy())
        if s < 0.0:
            lo, J_lo, s_lo = t, J, s
        elif s > 0.0:
            hi, J_hi, s_hi = t, J, s
        else:
            break
    return best_t, best_J, best_g


def _check_convexity(t, J, s, t0, J0, s0) -> None:
    """Raise unless the tangents at t and t0 (slopes from the oracle's subgradients) lie
    below J at the other point, as they must for a convex J and true subgradients."""
    scale = 1.0 + abs(J) + abs(J0) + abs(s * (t - t0)) + abs(s0 * (t - t0))
    if J0 < J + s * (t0 - t) - 1e-8 * scale or J < J0 + s0 * (t - t0) - 1e-8 * scale:
        raise ValueError(
            f"the objective along a line ({J0:.6g} at t={t0:g}, {J:.6g} at t={t:g}) "
            f"contradicts its slopes ({s0:.3g}, {s:.3g}): the oracle's gradient is not a "
            "subgradient of its risk (check its sign and scale)"
        )


def _check_mu(mu) -> float:
    """The cut's fraction of the way from the best point to the master minimiser (OCAS,
    InOut): a real number in (0, 1]. At 0 the cut is taken at the best point, whose plane
    the bundle may hold already, and the method stalls."""
    if isinstance(mu, bool) or not isinstance(mu, numbers.Real) or not 0.0 < mu <= 1.0:
        raise ValueError(f"mu must lie in (0, 1]; got {mu!r}")
    return float(mu)


class PlainBMRM:
    """Plain BMRM: evaluate the risk at the master problem's minimiser (Teo et al., JMLR
    2010, Algorithm 1). One oracle call (two passes over X) per iteration.

    Parameters
    ----------
    cut_cache : bool, "auto" or CutCache
        With a per-query cut cache (:mod:`bmrm.solver.cut_cache`; Joachims, Finley & Yu,
        2009), an iteration whose cache cut at the master minimiser is violated enough adds
        that plane instead of calling the oracle (``n_cache_cuts``). ``"auto"`` (default):
        on where it applies, that is for a per-query loss of the package's risk oracle whose
        cache fits its memory cap (:func:`~bmrm.solver.cut_cache.supports_cut_cache`), with
        the dedicated QP master of the L2 problem (every cache cut costs a master solve,
        which the cvxpy master of the other regularizers makes far dearer); False: off;
        True or a :class:`~bmrm.solver.cut_cache.CutCache`: on, an error for an oracle or
        loss without per-query cuts.
    master_rtol : float >= 0 or None
        The master problem's accuracy as a fraction of the gap
        (:attr:`SolverState.master_rtol`; 0: to the QP's own tolerance). None: the loop's
        default, 1e-3. With the cache, solving exactly changed the planes needed to
        SVM^rank's objective by −13 % to +3 % on the problems of
        ``experiments/bench_iterations.py`` (medium set, C = 1: 17 oracle calls and 213
        cache cuts against 18 and 245; C = 100: 29 and 18,348 against 28 and 17,775) at
        equal seconds within the noise, so the default stays.
    """

    name = "bmrm"
    # subclasses that do not call __init__ run without a cache, at the loop's master accuracy
    cache = None
    _cache_required = False
    master_rtol = None

    def __init__(self, cut_cache="auto", master_rtol: float | None = None):
        self.cache, self._cache_required = make_cut_cache(cut_cache)
        if master_rtol is not None and not (
            isinstance(master_rtol, numbers.Real)
            and not isinstance(master_rtol, bool)
            and 0.0 <= master_rtol < math.inf
        ):
            raise ValueError(f"master_rtol must be a finite number >= 0; got {master_rtol!r}")
        self.master_rtol = None if master_rtol is None else float(master_rtol)

    def step(self, state: SolverState) -> None:
        cache = self.cache
        if cache is not None and not self._cache_required:
            # "auto": with the QP master only ("auto" or "qp"; measured there)
            if getattr(state.master, "name", None) not in ("auto", "qp"):
                cache = None
        if cache is not None:
            cache.bind(state.oracle, self._cache_required)
        if self.master_rtol is not None:
            state.master_rtol = self.master_rtol
        w = state.w0 if state.w_master is None else self.next_point(state.w_master, state)
        if cache is not None and cache.try_cut(state, w):
            state.solve_master()
            return
        state.evaluate(w, cache=cache)
        state.solve_master()

    def next_point(self, w_master: np.ndarray, state: SolverState) -> np.ndarray:
        """Where to evaluate after the master problem; its minimiser."""
        return w_master


class OCAS:
    """The optimized cutting plane algorithm (Franc & Sonnenburg, JMLR 10, 2009, Alg. 2).

    Keeps a best point w_b with g_b = ∂R/∂f at its scores (a subgradient of R at w_b for
    an oracle without scores). Each iteration takes the master minimiser w_c, searches the
    line w_b + t·(w_c − w_b) (t ≥ 0; t ≤ 1 under bounds) for the lowest J, moves w_b there,
    and adds the cut at w_b + mu·(w_c − w_b), which Franc & Sonnenburg show keeps the
    cutting-plane method's convergence (they use mu = 0.1). The line search runs on scores:
    one product X w_c, the loss at a few points, then Xᵀg for the cut, so an iteration
    costs two passes over X like plain BMRM's. The certificate is the master optimum.

    Parameters
    ----------
    mu : float in (0, 1]
        Where the cut is taken between the new best point (0) and the master minimiser (1).
        (:class:`LineSearchBMRM` cuts at the line-search point itself, mu = 0.)
    line_search_tol : float >= 0
        The line search stops when its best value is within this fraction of the current
        gap of the minimum along the line (bounded by convexity).
    max_evals : int >= 1
        Loss evaluations per line search, at most.
    cut_cache : bool, "auto" or CutCache
        As for :class:`PlainBMRM`: a cache cut at the master minimiser, when violated
        enough, replaces the iteration's line search and oracle call.
    """

    name = "ocas"
    cache = None
    _cache_required = False

    def __init__(
        self,
        mu: float = 0.1,
        line_search_tol: float = 0.01,
        max_evals: int = 10,
        cut_cache=False,
    ):
        self.mu = _check_mu(mu)
        self._init_line_search(line_search_tol, max_evals, cut_cache)

    def _init_line_search(self, line_search_tol, max_evals, cut_cache) -> None:
        """The options OCAS shares with :class:`LineSearchBMRM`, checked before any work."""
        self.line_search_tol = check_positive(line_search_tol, "line_search_tol", strict=False)
        self.max_evals = check_int(max_evals, "max_evals", 1)
        self.cache, self._cache_required = make_cut_cache(cut_cache)
        self._w_b = self._f_b = self._g_b = None
        self._J_b = math.inf

    def step(self, state: SolverState) -> None:
        cache = self.cache
        if cache is not None:
            cache.bind(state.oracle, self._cache_required)
        if state.w_master is None:
            self._start(state)
            state.solve_master()
            return
        w_c = state.w_master
        if cache is not None and cache.try_cut(state, w_c):
            state.solve_master()
            return
        seg = state.segment(self._w_b, w_c, self._f_b)
        slope0 = seg.start_slope(self._g_b)
        t_max = 1.0 if state.bounded else math.inf
        # a line search closer than this to its optimum would not change the gap visibly
        atol = self.line_search_tol * state.gap
        t, J_t, g_t = line_search(seg, self._J_b, slope0, t_max, atol, self.max_evals)
        if t > 0.0:
            self._set_best(seg, t, J_t, g_t)
        t_cut = t + self._cut_fraction(t) * (1.0 - t)
        w, f, J, g = seg.cut(t_cut, cache)
        if J < self._J_b:
            self._w_b, self._f_b, self._g_b, self._J_b = w, f, g, J
        state.solve_master()

    def _cut_fraction(self, t: float) -> float:
        return self.mu

    def _start(self, state: SolverState) -> None:
        w = state.w0
        cache = self.cache
        if hasattr(state.oracle, "cut_at"):
            t0 = time.perf_counter()
            f = state.oracle.scores(w)
            state.n_passes += 1
            if cache is not None and cache.active:
                R, a = cache.oracle_cut(state, w, f)
            else:
                R, a = state.oracle.cut_at(f)
                state.n_passes += 1
            self._g_b = state.oracle.last_gradient.copy()
            state.oracle_seconds += time.perf_counter() - t0
            state.nfev += 1
            state.check_subgradient(w, R, a)
            J = state.J_of(w, R)
            state.record(w, J)
            state.bundle.add(a, R - float(a @ w))
            self._f_b = f
        else:
            J, _, self._g_b = state.evaluate(w, cache=cache)
        self._w_b, self._J_b = w, J

    def _set_best(self, seg, t, J_t, g_t) -> None:
        self._w_b = seg.w_a + t * seg.d
        self._f_b = seg.scores(t) if isinstance(seg, _ScoreSegment) else None
        self._g_b = g_t
        self._J_b = J_t


class LineSearchBMRM(OCAS):
    """Line-search BMRM (Teo et al., JMLR 2010, Section 5): the line search of
    :class:`OCAS`, with the cut taken at the line-search point itself.

    When the line search makes no progress (t = 0) the cut is taken at the master minimiser
    instead, as plain BMRM would, so the method cannot stall on a repeated plane.
    """

    name = "ls-bmrm"

    def __init__(self, line_search_tol: float = 0.01, max_evals: int = 10, cut_cache=False):
        # the cut is taken at the line-search point itself (see _cut_fraction), which OCAS's
        # mu in (0, 1] cannot express
        self.mu = 0.0
        self._init_line_search(line_search_tol, max_evals, cut_cache)

    def _cut_fraction(self, t: float) -> float:
        return 1.0 if t == 0.0 else 0.0


class InOut:
    """The in-out cutting-plane method (Ben-Ameur & Neto, Networks 49, 2007): cut between
    the best point and the master's minimiser, without a line search.

    Keeps the best evaluated point w_b (the *in* point, with the lowest J) and, after each
    master solve, evaluates the risk with its cut at w = w_b + mu·(w_c − w_b), w_c the
    master minimiser (the *out* point); w becomes the best point when its J is lower. This
    is the cut point of OCAS (Franc & Sonnenburg, JMLR 10, 2009, Alg. 2) with the best
    point kept instead of line-searched, so an iteration costs one oracle call (two passes
    over X) and no loss evaluation besides: on losses whose evaluation costs more than the
    passes (the structured NDCG / NERU losses, the ordinal loss on long queries) OCAS's
    line search costs several evaluations per iteration.

    Every iteration makes progress (the argument of Ben-Ameur & Neto): with
    Ĵ(w) = lam·Ω(w) + (the new plane at w) a convex minorant of J that equals J(w) at
    w, either J(w) < J(w_b) and the best point improves, or Ĵ(w) >= J(w_b) >= Ĵ(w_b) and
    by convexity along the segment Ĵ(w_c) >= J(w) + (1/mu − 1)(J(w) − J(w_b)) >= J(w_b),
    so the new plane lifts the model at w_c above the best objective: the old master
    optimum, below J(w_b) by the gap, is cut off. The certificate is the master optimum.

    Parameters
    ----------
    mu : float in (0, 1]
        Where the cut is taken between the best point (0) and the master minimiser (1);
        ``mu = 1`` is plain BMRM.
    """

    name = "inout"

    def __init__(self, mu: float = 0.1):
        self.mu = _check_mu(mu)

    def step(self, state: SolverState) -> None:
        if state.w_master is None:
            state.evaluate(state.w0)
        else:
            w_b, J_b = state.best_w, state.best_J
            w = w_b + self.mu * (state.w_master - w_b)
            if state.bounded:
                # a convex combination of two feasible points is feasible but for rounding
                w = state.regularizer.project(w)
            _, R, a = state.evaluate(w)
            # the new plane must lie below R at w_b too (the progress argument rests on it)
            R_b = J_b - state.J_of(w_b, 0.0)
            plane_b = R + float(a @ (w_b - w))
            if plane_b > R_b + 1e-8 * (1.0 + abs(R) + abs(R_b) + abs(plane_b)):
                raise ValueError(
                    f"the cutting plane at an evaluated point ({plane_b:.6g}) lies above the "
                    f"risk {R_b:.6g} at the best point: the oracle's gradient is not a "
                    "subgradient of its risk (check its sign and scale)"
                )
        state.solve_master()


METHODS = {
    "bmrm": PlainBMRM,
    "inout": InOut,
    "level": LevelBundle,
    "ls-bmrm": LineSearchBMRM,
    "ocas": OCAS,
}
# methods without a certified lower bound on a non-convex risk
NONCONVEX_METHODS = {"nrbm": NRBM}


class CarriedPlanes:
    """A method that runs ``method`` (a name or an object with ``step``) from a bundle
    carried in from an earlier solve, or an empty one, and keeps its bundle for the next.

    Valid wherever the planes a_i, b_i under-estimate the next solve's risk: the same risk
    at another lam (R(w) >= <a_i, w> + b_i is a property of R alone, ``bmrm.path``), or the
    next concave-convex surrogate once the planes are shifted to it
    (:mod:`bmrm.solver.cccp`).
    """

    def __init__(self, method, bundle: Bundle | None):
        self.method = get_method(method)
        self.bundle = bundle

    @property
    def name(self) -> str:
        """The carried method's name (the result's ``method``)."""
        return getattr(self.method, "name", type(self.method).__name__)

    def step(self, state: SolverState) -> None:
        if state.nit == 1 and self.bundle is not None:
            state.bundle = self.bundle
        self.method.step(state)
        self.bundle = state.bundle


def check_method(method, *, lbfgs: bool = True) -> None:
    """Raise unless ``method`` is None, a method name (``"auto"``, one of :data:`METHODS`
    or :data:`NONCONVEX_METHODS`, and ``"lbfgs"`` when ``lbfgs``) or an object with a
    ``step(state)`` method; :func:`bmrm.fit` calls it with its other argument checks.

    A method class (``PlainBMRM`` for ``PlainBMRM()``) is refused with a ``TypeError`` that
    asks for an instance: its ``step`` is a function of two arguments, which the loop would
    call with one.
    """
    names = ["auto"] + sorted(METHODS) + sorted(NONCONVEX_METHODS) + (["lbfgs"] if lbfgs else [])
    if method is None:
        return
    if isinstance(method, str):
        if method not in names:
            raise ValueError(
                f"method must be one of {names} or an object with a step(state) method; "
                f"got {method!r}"
            )
        return
    if isinstance(method, type) and callable(getattr(method, "step", None)):
        raise TypeError(
            f"method must be a method name or an object with a step(state) method; got the "
            f"class {method.__name__} itself: pass an instance, e.g. {method.__name__}()"
        )
    if not callable(getattr(method, "step", None)):
        raise TypeError(
            f"method must be one of {names} or an object with a step(state) method; "
            f"got {type(method).__name__}"
        )


def auto_method(regularizer) -> str:
    """The method ``"auto"`` stands for with ``regularizer``, as measured
    (``experiments/RESULTS.md``, "Solver" and "L1 fits"): the level bundle method for L2
    without bounds (the QP master), in-out cutting planes for L1 without bounds (3.3–3.6 times
    less time than plain BMRM over ``experiments/bench_l1.py``'s MQ2008 grid at tol 1e-6,
    its linear-programme master dominating), plain BMRM otherwise (elastic net, bounds,
    callable regularizers: not measured)."""
    if regularizer.qp:
        return "level"
    if type(regularizer) is L1:
        return "inout"
    return "bmrm"


def get_method(method) -> Method:
    """A method object from a name in :data:`METHODS`, an object with ``step``, or None
    (plain BMRM; :func:`~bmrm.solver.loop.minimize_bmrm` resolves its default ``"auto"``
    before calling this)."""
    if method is None:
        return PlainBMRM()
    names = ["auto"] + sorted(METHODS) + sorted(NONCONVEX_METHODS)
    if isinstance(method, str):
        if method in NONCONVEX_METHODS:
            return NONCONVEX_METHODS[method]()
        if method == "lbfgs":
            raise ValueError(
                "method='lbfgs' fits smooth non-convex objectives only (a non-linear scorer "
                "or a smooth loss declaring convex = False), without a certificate; for "
                f"this fit use one of {names}"
            )
        if method not in METHODS:
            raise ValueError(
                f"method must be one of {names} or an object with a step(state) method; "
                f"got {method!r}"
            )
        return METHODS[method]()
    check_method(method, lbfgs=False)
    return method

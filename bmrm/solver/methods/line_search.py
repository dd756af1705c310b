"""Line searches of the bundle methods along w(t) = w_a + t·(w_b − w_a).

Along a segment the scores are affine, f(t) = f_a + t·(f_b − f_a), so for an oracle that
evaluates on scores (``capabilities.on_scores``, the package's risk oracle) a line search
costs one product X w_b and then loss evaluations on scores, with no further pass over X
(:class:`ScoreSegment`); other oracles are called at every point (:class:`PointSegment`).
"""

from __future__ import annotations

import numpy as np

from bmrm.solver.methods.base import BundleState

__all__ = ["PointSegment", "ScoreSegment", "line_search", "segment"]


def segment(state: BundleState, w_a: np.ndarray, w_b: np.ndarray, f_a: np.ndarray | None = None):
    """The objective along w(t) = w_a + t·(w_b − w_a).

    A :class:`ScoreSegment` when the oracle evaluates on scores and ``f_a`` = X w_a is given,
    else a :class:`PointSegment`.

    Parameters
    ----------
    state : BundleState
        The bundle method's state (its oracle, regularizer and work arrays).
    w_a, w_b : ndarray
        The ends of the segment.
    f_a : ndarray or None
        The scores X w_a.

    Returns
    -------
    ScoreSegment or PointSegment
        The objective along the segment.
    """
    if f_a is not None and state.problem.capabilities.on_scores:
        return ScoreSegment(state, w_a, w_b, f_a)
    return PointSegment(state, w_a, w_b)


class ScoreSegment:
    """A segment evaluated on scores: f(t) = f_a + t·Δf, no pass over X per point.

    Parameters
    ----------
    state : BundleState
        The bundle method's state.
    w_a, w_b : ndarray
        The ends of the segment.
    f_a : ndarray
        The scores X w_a.
    """

    def __init__(self, state: BundleState, w_a, w_b, f_a):
        self.state = state
        self.w_a, self.d = w_a, w_b - w_a
        self.f_a = f_a
        self.df = state.oracle.scores(w_b, out=state.buffer("df", f_a))
        self.df -= f_a
        self.f = state.buffer("f", f_a)
        self._work = state.buffer("work", f_a)
        self.slope_reg0 = state.regularizer.slope(w_a, self.d)
        self.dd = float(self.d @ self.d)

    def start_slope(self, g_a: np.ndarray) -> float:
        """The slope dJ/dt at t = 0 from g_a = ∂R/∂f at f_a.

        Parameters
        ----------
        g_a : ndarray
            ∂R/∂f at f_a.

        Returns
        -------
        float
            The slope dJ/dt at t = 0.
        """
        return self.state.lam * self.slope_reg0 + self.slope_of(g_a)

    def slope_of(self, g: np.ndarray) -> float:
        """The product ⟨g, Δf⟩, without BLAS.

        numpy's dot wakes BLAS's thread pool, which on a busy machine costs far more than this
        product of n numbers.

        Parameters
        ----------
        g : ndarray
            A gradient with respect to the scores.

        Returns
        -------
        float
            The product ⟨g, Δf⟩.
        """
        return float(np.multiply(g, self.df, out=self._work).sum())

    def scores(self, t: float) -> np.ndarray:
        """The scores f(t), a fresh array.

        Parameters
        ----------
        t : float
            The step.

        Returns
        -------
        ndarray
            The scores f_a + t·Δf.
        """
        return self.f_a + t * self.df

    def scores_at(self, t: float) -> np.ndarray:
        """The scores f(t), a fresh array (what a caller keeps of a point).

        Parameters
        ----------
        t : float
            The step.

        Returns
        -------
        ndarray
            The scores f_a + t·Δf.
        """
        return self.scores(t)

    def value(self, t: float):
        """The objective, its slope and ∂R/∂f at the point t (no pass over X).

        Parameters
        ----------
        t : float
            The step.

        Returns
        -------
        tuple
            ``(J(t), dJ/dt, g)`` with g = ∂R/∂f at f(t) (a work array).
        """
        state = self.state
        np.multiply(self.df, t, out=self.f)
        self.f += self.f_a
        R, g = state.oracle.risk_at(self.f)
        slope_R = self.slope_of(g)
        w = self.w_a + t * self.d
        state.check_risk(w, R)
        J = state.J_of(w, R)
        state.record(w, J)
        slope_reg = state.regularizer.segment_slope(w, self.d, t, self.slope_reg0, self.dd)
        return J, state.lam * slope_reg + slope_R, g

    def cut(self, t: float):
        """An oracle call with its plane at w(t) (one pass, Xᵀg).

        Its per-query planes go to the state's cut cache when active.

        Parameters
        ----------
        t : float
            The step.

        Returns
        -------
        tuple
            ``(w, f, J, g)``.
        """
        state = self.state
        f = self.scores(t)
        w = self.w_a + t * self.d
        R, a = state.cut_at(w, f)
        g = state.oracle.last_gradient.copy()
        state.check_risk(w, R)
        state.check_subgradient(w, R, a)
        J = state.J_of(w, R)
        state.record(w, J)
        state.bundle.add(a, R - float(a @ w))
        return w, f, J, g


class PointSegment:
    """A segment for an oracle without scores: every point is a full oracle call.

    Its plane joins the bundle (it is valid and already paid for).

    Parameters
    ----------
    state : BundleState
        The bundle method's state.
    w_a, w_b : ndarray
        The ends of the segment.
    """

    def __init__(self, state: BundleState, w_a, w_b):
        self.state = state
        self.w_a, self.d = w_a, w_b - w_a

    def value(self, t: float):
        """The objective, its slope and a subgradient at the point t (one oracle call).

        Parameters
        ----------
        t : float
            The step.

        Returns
        -------
        tuple
            ``(J(t), dJ/dt, a)`` with a a subgradient of R at w(t).
        """
        state = self.state
        w = self.w_a + t * self.d
        J, R, a = state.evaluate(w, cut=True)
        slope = state.lam * state.regularizer.slope(w, self.d) + float(a @ self.d)
        return J, slope, a

    def scores_at(self, t: float) -> None:
        """No scores: the oracle has none.

        Parameters
        ----------
        t : float
            The step.
        """
        return None

    def start_slope(self, a_a: np.ndarray) -> float:
        """The slope dJ/dt at t = 0 from a subgradient a_a of R at w_a.

        Parameters
        ----------
        a_a : ndarray
            A subgradient of R at w_a.

        Returns
        -------
        float
            The slope dJ/dt at t = 0.
        """
        return self.state.lam * self.state.regularizer.slope(self.w_a, self.d) + float(
            a_a @ self.d
        )

    def cut(self, t: float):
        """An oracle call with its plane at w(t).

        Parameters
        ----------
        t : float
            The step.

        Returns
        -------
        tuple
            ``(w, None, J, a)``.
        """
        w = self.w_a + t * self.d
        J, _, a = self.state.evaluate(w, cut=True)
        return w, None, J, a


def line_search(segment, J0: float, slope0: float, t_max: float, atol: float, max_evals: int):
    """Minimise the convex J(t) over [0, t_max] along ``segment``.

    Brackets the minimum by doubling from t = 1, then shrinks the bracket [lo, hi] with
    secant steps on the (sub)derivative, each kept at least a tenth of the bracket from its
    ends. It stops when the best value found is within ``atol`` of the bracket's lower bound
    (where the tangents at lo and hi cross; valid by convexity), or after ``max_evals``
    points. Piecewise-linear risks make the slope a step function, which this tolerates.

    Parameters
    ----------
    segment : ScoreSegment or PointSegment
        The objective along the segment.
    J0 : float
        J at t = 0.
    slope0 : float
        The slope dJ/dt at t = 0.
    t_max : float
        The largest step (inf: unbounded).
    atol : float
        The absolute tolerance on J.
    max_evals : int
        Points evaluated at most.

    Returns
    -------
    tuple
        ``(t, J(t), g(t))`` for the best point evaluated (t = 0 if none is better than t = 0,
        with g None).
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

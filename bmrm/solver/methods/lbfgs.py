r"""Limited-memory BFGS for smooth objectives J(θ) = (λ/2)‖θ‖² + R(θ) that are not convex.

For a differentiable risk that is not convex (a non-linear ranking function, a smooth loss
declaring ``convex = False``) no cutting plane is a lower bound and nothing global can be
certified; a quasi-Newton method finds a stationary point (a local minimum in practice) in
few oracle calls. Each iteration (Nocedal & Wright, *Numerical Optimization*, 2nd ed.,
2006):

1. the direction d = −H ∇J by the two-loop recursion over the last ``memory`` pairs
   s = θ_{k+1} − θ_k, y = ∇J_{k+1} − ∇J_k, with H₀ = (sᵀy / yᵀy) I (their Algorithm 7.4 and
   eq. (7.20)); −∇J when d does not descend;
2. a line search for the strong Wolfe conditions J(θ + t d) <= J(θ) + c₁ t ⟨∇J, d⟩ and
   |⟨∇J(θ + t d), d⟩| <= c₂ |⟨∇J, d⟩| with c₁ = 10⁻⁴, c₂ = 0.9 (their Algorithms 3.5 and
   3.6, cubic interpolation safeguarded by bisection), from t = 1 (t = 1/‖d‖ while the
   memory is empty); each trial is one oracle call;
3. the pair (s, y) is kept when sᵀy > 0 (the Wolfe conditions ensure it), so H stays
   positive definite.

It stops, as scipy's L-BFGS-B does with ``gtol = tol`` and ``ftol = tol²``, when the largest
gradient entry max |∂J/∂θ_i| is at most ``tol`` (or ``atol``), or when an iteration
decreases J by at most tol²·max(|J|, 1); and when no step along −∇J decreases J (float64's
resolution). Its ``gap`` is that largest gradient entry; no lower bound is certified.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from bmrm.solver.methods.base import SolverOptions, State
from bmrm.solver.problem import Problem

__all__ = ["LBFGS", "LBFGSState"]

_C1, _C2 = 1e-4, 0.9


@dataclass(eq=False)
class LBFGSState(State):
    """The state of L-BFGS.

    :class:`~bmrm.solver.methods.base.State`, whose ``best_w`` is the iterate (J decreases
    at every accepted step), and L-BFGS's own.

    Parameters
    ----------
    problem, w0, best_w, best_J, lower_bound, last_J, nit, n_cache_cuts : see State
        As for :class:`~bmrm.solver.methods.base.State`.
    master_seconds, cache_seconds : float
        As for :class:`~bmrm.solver.methods.base.State` (zero).
    tol, atol : float
        The stopping tolerances (module docstring).
    R : float
        The risk at the iterate.
    grad : ndarray
        ∇J at the iterate.
    pairs : deque of (s, y, 1 / sᵀy)
        The curvature pairs, newest last.
    decrease : float
        The decrease of J in the last iteration (inf before one).
    stalled : bool
        No step along −∇J decreased J.
    n_trials : int
        Oracle calls of the line searches.
    J0 : float
        J at the start.
    """

    tol: float = 1e-6
    atol: float = 0.0
    R: float = math.nan
    grad: np.ndarray | None = None
    pairs: deque = field(default_factory=deque)
    decrease: float = math.inf
    stalled: bool = False
    n_trials: int = 0
    J0: float = math.nan

    @property
    def stop_gap(self) -> float:
        """The largest gradient entry max |∂J/∂θ_i| at the iterate."""
        return float(np.max(np.abs(self.grad))) if self.grad.size else 0.0

    def stop_status(self, tol: float, atol: float) -> int:
        """The loop's status after a step, by L-BFGS's stopping rule.

        0 when the largest gradient entry is at most ``tol``, J decreased by at most
        tol²·max(|J|, 1) in the last iteration, or the search stalled; 1 when the largest
        gradient entry is at most ``atol``; else 2.

        Parameters
        ----------
        tol : float
            The tolerance on the largest gradient entry (tol² on the decrease).
        atol : float
            An absolute tolerance on the largest gradient entry.

        Returns
        -------
        int
            0 (stop: ``tol`` met, or stalled), 1 (stop: ``atol`` met) or 2 (go on).
        """
        gap = self.stop_gap
        if gap <= tol or self.stalled:
            return 0
        if self.decrease <= tol * tol * max(abs(self.best_J), 1.0):
            return 0
        return 1 if gap <= atol else 2


class LBFGS:
    """Limited-memory BFGS with a strong Wolfe line search (module docstring).

    ``method="lbfgs"`` of :func:`bmrm.fit` for smooth objectives that are not convex.

    Parameters
    ----------
    memory : int, default 10
        Curvature pairs kept.
    max_trials : int, default 20
        Oracle calls per line search at most.
    """

    name = "lbfgs"
    certifies = False

    def __init__(self, memory: int = 10, max_trials: int = 20):
        for name, value in (("memory", memory), ("max_trials", max_trials)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be an integer of at least 1; got {value!r}")
        self.memory = int(memory)
        self.max_trials = int(max_trials)

    def check(self, problem: Problem) -> None:
        """Refuse a regularizer other than ½‖θ‖² without bounds.

        The objective must be differentiable; the risk's smoothness is its caller's to
        check.

        Parameters
        ----------
        problem : Problem
            The problem to solve.
        """
        if not problem.regularizer.qp:
            raise ValueError(
                "method='lbfgs' needs regularizer='l2' without bounds (a differentiable "
                f"objective); got regularizer={problem.regularizer!r}"
            )

    def init(self, problem: Problem, w0: np.ndarray, options: SolverOptions) -> LBFGSState:
        """The state at ``w0``, evaluated (one oracle call).

        Parameters
        ----------
        problem : Problem
            The problem to solve.
        w0 : ndarray
            The starting point.
        options : SolverOptions
            The loop's options (``tol``, ``atol``).

        Returns
        -------
        LBFGSState
            The state at ``w0``, with its objective and gradient.
        """
        state = LBFGSState(problem=problem, w0=w0, tol=options.tol, atol=options.atol)
        R, a = problem.oracle(w0)
        state.record(w0, problem.objective(w0, R))
        state.R, state.grad = R, a + problem.lam * w0
        state.J0 = state.best_J
        return state

    def step(self, state: LBFGSState) -> None:
        """One iteration: the two-loop direction, the line search, the new pair.

        Parameters
        ----------
        state : LBFGSState
            Updated in place.
        """
        if state.stalled:
            return
        d = self._direction(state)
        slope = float(state.grad @ d)
        if not slope < 0.0:
            state.pairs.clear()
            d = -state.grad
            slope = float(state.grad @ d)
        if not self._search(state, d, slope):
            # no step along the quasi-Newton direction: once along −∇J with a fresh memory
            state.pairs.clear()
            d = -state.grad
            state.stalled = not self._search(state, d, float(state.grad @ d))

    def _direction(self, state: LBFGSState) -> np.ndarray:
        """−H ∇J by the two-loop recursion (Nocedal & Wright, Algorithm 7.4)."""
        q = state.grad.copy()
        alphas = []
        for s, y, rho in reversed(state.pairs):
            alpha = rho * float(s @ q)
            q -= alpha * y
            alphas.append(alpha)
        if state.pairs:
            s, y, rho = state.pairs[-1]
            q *= 1.0 / (rho * float(y @ y))
        for (s, y, rho), alpha in zip(state.pairs, reversed(alphas), strict=True):
            beta = rho * float(y @ q)
            q += (alpha - beta) * s
        return -q

    def _search(self, state: LBFGSState, d: np.ndarray, slope: float) -> bool:
        """The strong Wolfe line search along ``d``; moves the iterate and keeps the pair,
        or returns False when no trial decreases J enough."""
        problem = state.problem
        w, J0, g0 = state.best_w, state.best_J, state.grad
        norm = float(np.linalg.norm(d))
        if not norm > 0.0:
            return False
        trials = {}

        def phi(t: float) -> tuple[float, float]:
            w_t = w + t * d
            R, a = problem.oracle(w_t)
            state.n_trials += 1
            J = problem.objective(w_t, R)
            g = a + problem.lam * w_t
            trials[t] = (w_t, J, R, g)
            return J, float(g @ d)

        t = 1.0 if state.pairs else min(1.0, 1.0 / norm)
        found = _wolfe(phi, J0, slope, t, self.max_trials)
        if found is None:
            return False
        w_t, J, R, g = trials[found]
        state.record(w_t, J)
        state.best_w, state.best_J = w_t, J  # the iterate (J decreased)
        state.decrease = J0 - J
        s, y = w_t - w, g - g0
        sy = float(s @ y)
        if sy > 1e-10 * float(y @ y):
            state.pairs.append((s, y, 1.0 / sy))
            if len(state.pairs) > self.memory:
                state.pairs.popleft()
        state.R, state.grad = R, g
        return True

    def finish(self, state: LBFGSState, result):
        """Add L-BFGS's figures to the result.

        ``risk`` (R at x), ``jac`` (∇J at x), ``fun0`` (J at the start) and ``n_trials``
        (line-search calls).

        Parameters
        ----------
        state : LBFGSState
            The final state.
        result : BMRMResult
            The loop's result.

        Returns
        -------
        BMRMResult
            ``result``, with L-BFGS's figures added.
        """
        result.risk = float(state.R)
        result.jac = state.grad.copy()
        result.n_trials = state.n_trials
        result.fun0 = float(state.J0)
        return result


def _wolfe(phi, f0: float, d0: float, t: float, max_trials: int) -> float | None:
    """A step t meeting the strong Wolfe conditions for φ(t) = J(θ + t d), φ(0) = f0,
    φ'(0) = d0 < 0 (Nocedal & Wright, Algorithm 3.5), or the best step with sufficient
    decrease found within ``max_trials`` calls of ``phi(t) -> (φ(t), φ'(t))``, or None."""
    t_prev, f_prev, d_prev = 0.0, f0, d0
    best = None
    for i in range(max_trials):
        f, d = phi(t)
        left = max_trials - i - 1
        armijo = f <= f0 + _C1 * t * d0
        if armijo and (best is None or f < best[1]):
            best = (t, f)
        if not armijo or (i > 0 and f >= f_prev):
            return _zoom(phi, f0, d0, (t_prev, f_prev, d_prev), (t, f, d), left, best)
        if abs(d) <= -_C2 * d0:
            return t
        if d >= 0.0:
            return _zoom(phi, f0, d0, (t, f, d), (t_prev, f_prev, d_prev), left, best)
        t_prev, f_prev, d_prev = t, f, d
        t *= 2.0
    return None if best is None else best[0]


def _zoom(phi, f0, d0, lo, hi, max_trials, best):
    """Nocedal & Wright's Algorithm 3.6 between ``lo`` (sufficient decrease, the lower
    value) and ``hi``, each ``(t, φ, φ')``: cubic interpolation kept inside the middle 80 %
    of the bracket, else bisection."""
    for _ in range(max_trials):
        if abs(hi[0] - lo[0]) <= 1e-10 * max(abs(hi[0]), abs(lo[0])):
            break  # the bracket is at float64's resolution
        t = _cubic_min(lo, hi)
        f, d = phi(t)
        armijo = f <= f0 + _C1 * t * d0
        if armijo and (best is None or f < best[1]):
            best = (t, f)
        if not armijo or f >= lo[1]:
            hi = (t, f, d)
        else:
            if abs(d) <= -_C2 * d0:
                return t
            if d * (hi[0] - lo[0]) >= 0.0:
                hi = lo
            lo = (t, f, d)
    return None if best is None else best[0]


def _cubic_min(lo, hi) -> float:
    """The minimiser of the cubic through both ends' values and slopes (Nocedal & Wright,
    eq. (3.59)), kept within the middle 80 % of the bracket; its midpoint otherwise."""
    (a, fa, da), (b, fb, db) = lo, hi
    width = b - a
    mid = a + 0.5 * width
    d1 = da + db - 3.0 * (fa - fb) / (a - b) if a != b else math.nan
    radicand = d1 * d1 - da * db
    if not (math.isfinite(radicand) and radicand >= 0.0):
        return mid
    d2 = math.copysign(math.sqrt(radicand), b - a)
    denominator = db - da + 2.0 * d2
    if denominator == 0.0:
        return mid
    t = b - (b - a) * (db + d2 - d1) / denominator
    low, high = sorted((a + 0.1 * width, b - 0.1 * width))
    return t if low <= t <= high else mid

"""The level bundle method (Lemaréchal, Nemirovskii & Nesterov, Math. Programming 69, 1995).

For J(w) = lam/2 ‖w‖² + R(w) and the cutting-plane model
J_k(w) = lam/2 ‖w‖² + max_i (⟨a_i, w⟩ + b_i) <= J(w), iteration k

1. solves the master problem (plain BMRM's): its optimum lb_k = min J_k is a lower bound on
   min J, and the certificate of the method;
2. sets the level ℓ_k = lb_k + θ·(ub_k − lb_k), ub_k the best objective evaluated;
3. projects the last iterate w_k onto the level set {w : J_k(w) <= ℓ_k} (non-empty and
   convex: it holds the master minimiser) and evaluates the risk there with its cut.

Lemaréchal, Nemirovskii & Nesterov bound the iterations to a gap ε by c(θ)·(LD/ε)² for a
Lipschitz constant L and a domain diameter D, independently of the dimension; unlike Kelley's
method (plain BMRM) the iterates move by projections, so they do not jump between far
corners of the model. The certificate is the master optimum, as for every method of
:mod:`bmrm.solver.methods`.

The projection
--------------
For a multiplier s > 0 of the level constraint, the Lagrangian's minimiser is

    w(s) = argmin_w  1/(2s) ‖w − x‖² + J_k(w)
         = z + argmin_v  μ/2 ‖v‖² + max_i (⟨a_i, v⟩ + b_i + ⟨a_i, z⟩),

with μ = lam + 1/s and z = x / (1 + s·lam): the L2 master problem with shifted offsets,
solved by the dual QP of :mod:`bmrm.solver.qp` on the bundle's Gram matrix. h(s) =
J_k(w(s)) − ℓ is non-increasing in s, from J_k(x) − ℓ (s → 0) to lb_k − ℓ < 0 (s → ∞,
the master minimiser), so the projection is w(s*) with h(s*) = 0 when J_k(x) > ℓ, found by
bisection on log s; a point with −(ℓ − lb_k)/4 <= h(s) <= 0 is accepted. When J_k(x) <= ℓ
(the plane of x was pruned) x itself is the projection.
"""

from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass

import numpy as np

from bmrm.solver.cut_cache import make_cut_cache
from bmrm.solver.masters import QPMaster
from bmrm.solver.methods.base import BundleState, SolverOptions
from bmrm.solver.problem import Problem
from losses.validation import check_int

__all__ = ["LevelBundle", "LevelState"]

# entries per block of the projection's w = z + v (a temporary of this size, not of w's)
_BLOCK = 1 << 16


@dataclass(eq=False)
class LevelState(BundleState):
    """The level method's state: :class:`BundleState` and the level method's own.

    Parameters
    ----------
    problem, w0, best_w, best_J, lower_bound, last_J, nit, n_cache_cuts : see State
        As for :class:`~bmrm.solver.methods.base.State`.
    master_seconds, cache_seconds : float
        As for :class:`~bmrm.solver.methods.base.State`.
    bundle, master, w_master, cache, proposed, master_rtol : see BundleState
        As for :class:`~bmrm.solver.methods.base.BundleState`; ``w_master`` is None
        again once a projection has used it (until the next master solve).
    zero_checked, slope_checked : bool
        As for :class:`~bmrm.solver.methods.base.BundleState`.
    buffers : dict
        As for :class:`~bmrm.solver.methods.base.BundleState`.
    x : ndarray or None
        The last iterate (None before the first).
    s : float
        The last multiplier of the projection.
    projector : QPMaster or None
        The QP master that solves the projections (its own active-set factor).
    projection_solves : int
        Their count.
    """

    x: np.ndarray | None = None
    s: float = 1.0
    projector: QPMaster | None = None
    projection_solves: int = 0


class LevelBundle:
    """The level bundle method (Lemaréchal, Nemirovskii & Nesterov, 1995).

    For the L2 regularizer without bounds (module docstring).

    Parameters
    ----------
    theta : float in (0, 1)
        The level's place between the lower bound (0) and the best objective (1). Their
        bound holds for every θ in (0, 1), with a constant smallest near θ = 0.3; θ = 0.7
        is the default because it took fewer iterations on the problems of
        ``experiments/bench_iterations.py``.
    max_projection_steps : int
        Master solves per projection, at most (bisection on the multiplier).
    cut_cache : bool, "auto" or CutCache
        As for :class:`~bmrm.solver.methods.PlainBMRM`: a cache cut at the projected point,
        when violated enough, replaces the iteration's oracle call
        (:mod:`bmrm.solver.cut_cache`); the next iteration projects the same point again.

    Notes
    -----
    An iteration costs one oracle call (two passes over X), the master solve of plain BMRM
    and a few more master solves for the projection, each warm-started from the last.
    """

    name = "level"
    certifies = True
    cut_cache = False

    def __init__(self, theta: float = 0.7, max_projection_steps: int = 40, cut_cache=False):
        if isinstance(theta, bool) or not isinstance(theta, numbers.Real) or not 0 < theta < 1:
            raise ValueError(f"theta must lie in (0, 1); got {theta!r}")
        self.theta = float(theta)
        self.max_projection_steps = check_int(max_projection_steps, "max_projection_steps", 1)
        make_cut_cache(cut_cache)  # checked now, used by CutCached (get_method)
        self.cut_cache = cut_cache

    def finish(self, state: LevelState, result):
        """The loop's result as it is: no figures of its own.

        Parameters
        ----------
        state : LevelState
            The final state.
        result : BMRMResult
            The loop's result.

        Returns
        -------
        BMRMResult
            ``result``, unchanged.
        """
        return result

    def check(self, problem: Problem) -> None:
        """Raise ``ValueError`` unless ``problem`` has L2 without bounds.

        Parameters
        ----------
        problem : Problem
            The problem to solve.
        """
        if not problem.regularizer.qp:
            raise ValueError(
                f"method='level' needs regularizer='l2' without bounds; got "
                f"{problem.regularizer!r}"
            )

    def init(self, problem: Problem, w0: np.ndarray, options: SolverOptions) -> LevelState:
        """The state at ``w0``, with an empty bundle.

        Parameters
        ----------
        problem : Problem
            The problem to solve.
        w0 : ndarray
            The starting point.
        options : SolverOptions
            The loop's options.

        Returns
        -------
        LevelState
            A fresh state at ``w0``.
        """
        return LevelState.start(problem, w0, options)

    def proposal(self, state: LevelState) -> np.ndarray:
        """The point the next step evaluates.

        ``w0`` first, then the last iterate projected onto the level set (kept in
        ``state.proposed`` for the step).

        Parameters
        ----------
        state : LevelState
            The current state.

        Returns
        -------
        ndarray
            The point the next step evaluates.
        """
        if state.x is None or state.w_master is None:
            w = state.w0
        else:
            level = state.lower_bound + self.theta * (state.best_J - state.lower_bound)
            t0 = time.perf_counter()
            w = self._project(state, state.x, level)
            state.master_seconds += time.perf_counter() - t0
            if w is not state.w_master:
                # nothing reads the master's minimiser before the next master solve replaces
                # it (every proposal follows one): one vector of w's size fewer during the
                # oracle call
                state.w_master = None
        state.proposed = w
        return w

    def step(self, state: LevelState) -> None:
        """One iteration (class docstring).

        Parameters
        ----------
        state : LevelState
            Updated in place.
        """
        w = state.proposed if state.proposed is not None else self.proposal(state)
        state.proposed = None
        state.x = w  # the previous iterate goes before the oracle call, not after it
        state.evaluate(w)
        state.solve_master()

    def _solve(self, state: LevelState, x: np.ndarray, s: float) -> tuple[np.ndarray, float]:
        """w(s) and h(s) + ℓ = J_k(w(s)) (module docstring), holding one vector of w's size
        besides x at a time."""
        bundle = state.bundle
        lam = state.lam
        k = bundle.size
        mu = lam + 1.0 / s
        scale = 1.0 + s * lam
        z = x / scale
        b_shift = np.einsum("ij,j->i", bundle.A[:k], z) + bundle.b[:k]
        del z
        if state.projector is None:
            state.projector = QPMaster(mu)
        # warm start from the master's weights (the bundle's), the factor from the last solve
        state.projector.lam = mu
        w = state.projector.solve_offsets(bundle, b_shift)
        state.projection_solves += 1
        # w = z + v in v's memory, z = x / scale recomputed a block at a time (the same sum)
        for first in range(0, len(w), _BLOCK):
            last = first + _BLOCK
            w[first:last] += x[first:last] / scale
        return w, 0.5 * lam * float(w @ w) + bundle.model_value(w)

    def _project(self, state: LevelState, x: np.ndarray, level: float) -> np.ndarray:
        lower = state.lower_bound
        if not (math.isfinite(lower) and level > lower):
            return state.w_master
        if 0.5 * state.lam * float(x @ x) + state.bundle.model_value(x) <= level:
            return x
        slack = 0.25 * (level - lower)
        # bracket the root of h(s) = J_k(w(s)) − ℓ on a log scale, from the last multiplier
        s = state.s
        lo = hi = None  # h(lo) > 0 >= h(hi)
        for _ in range(self.max_projection_steps):
            w = None  # the last trial goes before the next is made (one at a time)
            w, value = self._solve(state, x, s)
            h = value - level
            feasible = h <= 0.0  # whether w, the last trial, lies in the level set
            if not feasible:
                lo = s
            else:
                hi = s
                if h >= -slack:
                    break
            if lo is None:
                s /= 8.0
            elif hi is None:
                s *= 8.0
            else:
                s = math.sqrt(lo * hi)
        if hi is None:
            return state.w_master  # feasible (J_k = lb < ℓ)
        state.s = hi
        if not feasible:  # the loop ran out on an infeasible trial: the last feasible one
            w = None
            w, _ = self._solve(state, x, hi)
        return w

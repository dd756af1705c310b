"""The optimized cutting plane algorithm (Franc & Sonnenburg, JMLR 10, 2009)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from bmrm.solver.cut_cache import make_cut_cache
from bmrm.solver.methods.base import BundleState, SolverOptions
from bmrm.solver.methods.line_search import line_search, segment
from bmrm.solver.problem import Problem
from losses.validation import check_int, check_positive

__all__ = ["OCAS", "OCASState", "check_mu"]


@dataclass(eq=False)
class OCASState(BundleState):
    """OCAS's state: :class:`BundleState` and OCAS's best point.

    Parameters
    ----------
    problem, w0, best_w, best_J, lower_bound, last_J, nit, n_cache_cuts : see State
        As for :class:`~bmrm.solver.methods.base.State`.
    master_seconds, cache_seconds : float
        As for :class:`~bmrm.solver.methods.base.State`.
    bundle, master, w_master, cache, proposed, master_rtol : see BundleState
        As for :class:`~bmrm.solver.methods.base.BundleState`.
    zero_checked, slope_checked : bool
        As for :class:`~bmrm.solver.methods.base.BundleState`.
    buffers : dict
        As for :class:`~bmrm.solver.methods.base.BundleState`.
    w_b : ndarray or None
        The best point.
    f_b : ndarray or None
        Its scores (None for an oracle without scores).
    g_b : ndarray or None
        ∂R/∂f there (a subgradient of R for an oracle without scores).
    J_b : float
        J(w_b).
    """

    w_b: np.ndarray | None = None
    f_b: np.ndarray | None = None
    g_b: np.ndarray | None = None
    J_b: float = math.inf


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
        Where the cut is taken between the new best point (0) and the master minimiser (1);
        :class:`LineSearchBMRM` cuts at the line-search point itself, mu = 0.
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
    certifies = True
    cut_cache = False

    def __init__(
        self,
        mu: float = 0.1,
        line_search_tol: float = 0.01,
        max_evals: int = 10,
        cut_cache=False,
    ):
        self.mu = check_mu(mu)
        self._init_line_search(line_search_tol, max_evals, cut_cache)

    def _init_line_search(self, line_search_tol, max_evals, cut_cache) -> None:
        """The options OCAS shares with :class:`LineSearchBMRM`, checked before any work."""
        self.line_search_tol = check_positive(line_search_tol, "line_search_tol", strict=False)
        self.max_evals = check_int(max_evals, "max_evals", 1)
        make_cut_cache(cut_cache)  # checked now, used by CutCached (get_method)
        self.cut_cache = cut_cache

    def finish(self, state: OCASState, result):
        """The loop's result as it is: no figures of its own.

        Parameters
        ----------
        state : OCASState
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
        """Accept every problem (the regularizer answers the method's questions).

        Parameters
        ----------
        problem : Problem
            The problem to solve.
        """
        pass

    def init(self, problem: Problem, w0: np.ndarray, options: SolverOptions) -> OCASState:
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
        OCASState
            A fresh state at ``w0``.
        """
        return OCASState.start(problem, w0, options)

    def proposal(self, state: OCASState) -> np.ndarray | None:
        """Where a cut cache may cut instead of the step.

        The master minimiser; None before the first step, which evaluates ``w0``.

        Parameters
        ----------
        state : OCASState
            The current state.

        Returns
        -------
        ndarray or None
            The master minimiser, or None before the first step.
        """
        return state.w_master

    def step(self, state: OCASState) -> None:
        """One iteration (class docstring).

        Parameters
        ----------
        state : OCASState
            Updated in place.
        """
        if state.w_master is None:
            self._start(state)
            state.solve_master()
            return
        w_c = state.w_master
        seg = segment(state, state.w_b, w_c, state.f_b)
        slope0 = seg.start_slope(state.g_b)
        t_max = 1.0 if state.regularizer.bounded else math.inf
        # a line search closer than this to its optimum would not change the gap visibly
        atol = self.line_search_tol * state.gap
        t, J_t, g_t = line_search(seg, state.J_b, slope0, t_max, atol, self.max_evals)
        if t > 0.0:
            state.w_b = seg.w_a + t * seg.d
            state.f_b = seg.scores_at(t)
            state.g_b = g_t
            state.J_b = J_t
        t_cut = t + self._cut_fraction(t) * (1.0 - t)
        w, f, J, g = seg.cut(t_cut)
        if J < state.J_b:
            state.w_b, state.f_b, state.g_b, state.J_b = w, f, g, J
        state.solve_master()

    def _cut_fraction(self, t: float) -> float:
        return self.mu

    def _start(self, state: OCASState) -> None:
        w = state.w0
        if state.problem.capabilities.on_scores:
            f = state.oracle.scores(w)
            R, a = state.cut_at(w, f)
            state.g_b = state.oracle.last_gradient.copy()
            state.check_subgradient(w, R, a)
            J = state.J_of(w, R)
            state.record(w, J)
            state.bundle.add(a, R - float(a @ w))
            state.f_b = f
        else:
            J, _, state.g_b = state.evaluate(w)
        state.w_b, state.J_b = w, J


def check_mu(mu) -> float:
    """The cut's fraction of the way from the best point to the master minimiser, checked.

    For OCAS and InOut: a real number in (0, 1]. At 0 the cut is taken at the best point, whose
    plane the bundle may hold already, and the method stalls.

    Parameters
    ----------
    mu : float
        The fraction.

    Returns
    -------
    float
        ``mu`` as a float.
    """
    if isinstance(mu, bool) or not isinstance(mu, numbers.Real) or not 0.0 < mu <= 1.0:
        raise ValueError(f"mu must lie in (0, 1]; got {mu!r}")
    return float(mu)

"""The per-query cut cache as a wrapper around a bundle method (:mod:`bmrm.solver.cut_cache`).

The wrapped method declares where its next step would call the oracle,
``proposal(state) -> w`` (or None when no cache cut may replace the step). Each iteration,
the wrapper asks the cache for its cut at that point first; when the cut lifts the bundle's
model there enough (:meth:`~bmrm.solver.cut_cache.CutCache.try_cut`), its plane joins the
bundle and the master problem is solved again instead of the method's step (no oracle call;
``n_cache_cuts``). Otherwise the method steps as it would alone, and every oracle call it
makes through its state (:meth:`~bmrm.solver.methods.base.BundleState.evaluate`,
:meth:`~bmrm.solver.methods.base.BundleState.cut_at`) feeds the cache with the call's
per-query planes. The method itself knows nothing of the cache.
"""

from __future__ import annotations

import numpy as np

from bmrm.solver.cut_cache import bound_cache, make_cut_cache
from bmrm.solver.methods.base import BundleState, Solver, SolverOptions, Wrapper
from bmrm.solver.problem import Problem

__all__ = ["CutCached"]


class CutCached(Wrapper):
    """A bundle method run with a per-query cut cache (module docstring).

    Parameters
    ----------
    method : solver
        A bundle method with ``proposal(state)`` (:class:`~bmrm.solver.methods.PlainBMRM`,
        :class:`~bmrm.solver.methods.OCAS`, :class:`~bmrm.solver.methods.LineSearchBMRM`,
        :class:`~bmrm.solver.methods.level.LevelBundle`).
    cut_cache : bool, "auto" or CutCache
        True or a :class:`~bmrm.solver.cut_cache.CutCache` (with its options): on, an error
        for an oracle or loss without per-query cuts; ``"auto"``: on where it applies, that
        is for a per-query loss of the package's risk oracle whose cache fits its memory cap,
        with a master whose solves are incremental (the dual QP of the L2 problem: every
        cache cut costs a master solve, which the cvxpy master makes far dearer).
    """

    def __init__(self, method: Solver, cut_cache=True):
        super().__init__(method)
        self.cache, self.required = make_cut_cache(cut_cache)

    def init(self, problem: Problem, w0: np.ndarray, options: SolverOptions) -> BundleState:
        """The wrapped method's state, with the cache bound to the problem's oracle.

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
        BundleState
            The wrapped method's state at ``w0``, its cache bound where it applies.
        """
        state = self.inner.init(problem, w0, options)
        if self.cache is not None and (self.required or state.master.incremental):
            state.cache = bound_cache(self.cache, problem.oracle, self.required)
        return state

    def step(self, state: BundleState) -> None:
        """One iteration: a cache cut at the method's proposal, or the method's step.

        The cache cut is taken when it is violated enough there.

        Parameters
        ----------
        state : BundleState
            Updated in place.
        """
        cache = state.cache
        if cache is not None:
            w = self.inner.proposal(state)
            if w is not None and cache.try_cut(state, w):
                state.proposed = None  # the model moved: the next proposal is computed anew
                state.solve_master()
                return
        self.inner.step(state)

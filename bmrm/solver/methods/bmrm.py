"""Plain BMRM (Teo, Vishwanathan, Smola & Le, JMLR 11, 2010, Algorithm 1): evaluate the
risk at the master problem's minimiser, with a per-query cut cache where it applies."""

from __future__ import annotations

import math
import numbers

import numpy as np

from bmrm.solver.cut_cache import make_cut_cache
from bmrm.solver.methods.base import BundleState, SolverOptions
from bmrm.solver.problem import Problem

__all__ = ["PlainBMRM"]


class PlainBMRM:
    """Plain BMRM: evaluate the risk at the master problem's minimiser.

    Teo et al., JMLR 2010, Algorithm 1. One oracle call (two passes over X) per iteration.

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
        (:attr:`BundleState.master_rtol`; 0: to the QP's own tolerance). None: the loop's
        default, 1e-3. With the cache, solving the master exactly neither saved planes
        nor seconds consistently on the problems of ``experiments/bench_iterations.py``, so
        the default stays.
    """

    name = "bmrm"
    certifies = True
    # subclasses that do not call __init__ run without a cache, at the loop's master accuracy
    cut_cache = False
    master_rtol = None

    def __init__(self, cut_cache="auto", master_rtol: float | None = None):
        make_cut_cache(cut_cache)  # checked now, used by CutCached (get_method)
        self.cut_cache = cut_cache
        if master_rtol is not None and not (
            isinstance(master_rtol, numbers.Real)
            and not isinstance(master_rtol, bool)
            and 0.0 <= master_rtol < math.inf
        ):
            raise ValueError(f"master_rtol must be a finite number >= 0; got {master_rtol!r}")
        self.master_rtol = None if master_rtol is None else float(master_rtol)

    def finish(self, state: BundleState, result):
        """The loop's result as it is: no figures of its own.

        Parameters
        ----------
        state : BundleState
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

    def init(self, problem: Problem, w0: np.ndarray, options: SolverOptions) -> BundleState:
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
        BundleState
            A fresh state at ``w0``.
        """
        state = BundleState.start(problem, w0, options)
        if self.master_rtol is not None:
            state.master_rtol = self.master_rtol
        return state

    def proposal(self, state: BundleState) -> np.ndarray:
        """The point the next step evaluates: the master minimiser (``w0`` first).

        Parameters
        ----------
        state : BundleState
            The current state.

        Returns
        -------
        ndarray
            The point the next step evaluates.
        """
        return state.w0 if state.w_master is None else state.w_master

    def step(self, state: BundleState) -> None:
        """One iteration (class docstring).

        Parameters
        ----------
        state : BundleState
            Updated in place.
        """
        state.evaluate(self.proposal(state))
        state.solve_master()

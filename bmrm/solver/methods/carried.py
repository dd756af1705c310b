"""Carried planes: a solver started from the planes of an earlier solve."""

from __future__ import annotations

import numpy as np

from bmrm.solver.bundle import Bundle
from bmrm.solver.methods.base import Solver, SolverOptions, Wrapper
from bmrm.solver.problem import Problem

__all__ = ["CarriedPlanes"]


class CarriedPlanes(Wrapper):
    """A solver run from a bundle carried in from an earlier solve.

    It runs ``method`` from that bundle, or an empty one; after a solve, ``bundle`` is that
    solve's final bundle, for the next to carry on.

    Valid wherever the planes a_i, b_i under-estimate the next solve's risk: the same risk
    at another lam (R(w) >= <a_i, w> + b_i is a property of R alone, ``bmrm.path``), or the
    next concave-convex surrogate once the planes are shifted to it
    (:mod:`bmrm.solver.cccp`).

    Parameters
    ----------
    method : Solver
        The solver to run.
    bundle : Bundle or None
        The planes to start from.
    """

    def __init__(self, method: Solver, bundle: Bundle | None):
        super().__init__(method)
        self.bundle = bundle

    def init(self, problem: Problem, w0: np.ndarray, options: SolverOptions):
        """The state at ``w0``, with the carried bundle.

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
            The wrapped solver's state at ``w0``, holding the carried planes.
        """
        state = self.inner.init(problem, w0, options)
        if self.bundle is not None:
            state.bundle = self.bundle
        return state

    def finish(self, state, result):
        """Keep the final bundle for the next solve; the wrapped solver's figures.

        Parameters
        ----------
        state : BundleState
            The final state.
        result : BMRMResult
            The loop's result.

        Returns
        -------
        BMRMResult
            ``result``, with the wrapped solver's figures added.
        """
        self.bundle = state.bundle
        return self.inner.finish(state, result)

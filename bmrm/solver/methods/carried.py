"""Carried planes: a solver started from the planes of an earlier solve."""

from __future__ import annotations

import numpy as np

from bmrm.solver.bundle import Bundle
from bmrm.solver.methods.base import Solver, SolverOptions
from bmrm.solver.problem import Problem

__all__ = ["CarriedPlanes"]


class CarriedPlanes:
    """A solver that runs ``method`` from a bundle carried in from an earlier solve.

    Or from an empty one; after a solve, ``bundle`` is that solve's final bundle, for the
    next to carry on.

    Valid wherever the planes a_i, b_i under-estimate the next solve's risk: the same risk
    at another lam (R(w) >= <a_i, w> + b_i is a property of R alone, ``bmrm.path``), or the
    next concave-convex surrogate once the planes are shifted to it
    (:mod:`bmrm.solver.cccp`).

    Parameters
    ----------
    method : Solver
        The bundle method to run (its state has a ``bundle``).
    bundle : Bundle or None
        The planes to start from; None for the method's own empty bundle.
    """

    def __init__(self, method: Solver, bundle: Bundle | None):
        self.method = method
        self.bundle = bundle
        self.name = method.name
        self.certifies = method.certifies

    def check(self, problem: Problem) -> None:
        """Refuse what the wrapped method refuses.

        Parameters
        ----------
        problem : Problem
            The problem of the fit.

        Raises
        ------
        ValueError
            When the wrapped method's ``check`` does.
        """
        self.method.check(problem)

    def init(self, problem: Problem, w0: np.ndarray, options: SolverOptions):
        """Return the wrapped method's state at w0, with the carried bundle in it.

        Parameters
        ----------
        problem : Problem
            The problem of the fit.
        w0 : ndarray of shape (n_weights,)
            The starting point.
        options : SolverOptions
            The loop's options, for the wrapped method.

        Returns
        -------
        BundleState
            The wrapped method's state, its bundle replaced by the carried one (when there
            is one).
        """
        state = self.method.init(problem, w0, options)
        if self.bundle is not None:
            state.bundle = self.bundle
        return state

    def step(self, state) -> None:
        """Take one iteration of the wrapped method.

        Parameters
        ----------
        state : BundleState
            The wrapped method's state, updated in place.
        """
        self.method.step(state)

    def finish(self, state, result):
        """Keep the final bundle for the next solve and let the wrapped method finish.

        Parameters
        ----------
        state : BundleState
            The final state.
        result : BMRMResult
            The loop's result.

        Returns
        -------
        BMRMResult
            What the wrapped method's ``finish`` returns.
        """
        self.bundle = state.bundle
        return self.method.finish(state, result)

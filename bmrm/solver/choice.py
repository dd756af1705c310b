"""The problem and the solver of a fit, chosen from the risk's declared capabilities.

:func:`bmrm.fit` makes the risk oracle for its backend and ranking function, then
:func:`make_problem` gives the :class:`~bmrm.solver.problem.Problem` and
:func:`choose_solver` the solver that :func:`~bmrm.solver.loop.minimize` runs on it, whatever
the risk: convex (the bundle methods, Newton-CG), latent (the concave-convex procedure, or
NRBM), or not convex (a non-linear ranking function or a loss declaring ``convex = False``:
L-BFGS or NRBM, started from a warm start by :class:`Started`). ``method="auto"`` is
:func:`~bmrm.solver.methods.auto_method` of the problem in every case.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from bmrm.solver.cccp import CCCP
from bmrm.solver.loop import BMRMResult, minimize
from bmrm.solver.methods import auto_method, get_method
from bmrm.solver.methods.base import Solver, SolverOptions, Wrapper
from bmrm.solver.methods.lbfgs import LBFGS
from bmrm.solver.methods.nrbm import NRBM
from bmrm.solver.problem import Problem
from bmrm.solver.regularizers import Direction, Regularizer

__all__ = ["Started", "check_regularizer_fits", "choose_solver", "make_problem"]


def make_problem(oracle, regularizer: Regularizer, lam: float, n_features: int) -> Problem:
    """The problem min_w lam·Ω(w) + R(w) of a risk oracle.

    A scale-invariant risk (``capabilities.scale_invariant``, the cosine loss with the linear
    ranking function) has R(t w) = R(w), so lam·½‖w‖² + R(w) has no minimiser: its problem
    is R alone (lam = 0) with the clean-up of :class:`~bmrm.solver.regularizers.Direction`,
    which returns the unit direction found.

    Parameters
    ----------
    oracle : callable
        The risk oracle.
    regularizer : Regularizer
        Ω.
    lam : float
        The regularization constant.
    n_features : int
        The length of w.

    Returns
    -------
    Problem
        The problem, its oracle counting the calls.
    """
    problem = Problem.of(oracle, regularizer, lam, n_features)
    if problem.capabilities.scale_invariant:
        return dataclasses.replace(problem, regularizer=Direction(), lam=0.0)
    return problem


def choose_solver(method, problem: Problem, started: bool = True) -> Solver:
    """The solver of ``method`` for ``problem``, by the risk's declared capabilities.

    * A latent risk: the concave-convex procedure (:class:`~bmrm.solver.cccp.CCCP`) with
      ``method`` as its inner solver (None / ``"auto"``: each subproblem's automatic
      choice), or NRBM (``method="nrbm"``) started from the minimiser of the loss's convex
      ``initial_loss``, as the procedure starts.
    * A risk that is not convex: ``"lbfgs"`` or ``"nrbm"`` (``"auto"``:
      :func:`~bmrm.solver.methods.auto_method`, L-BFGS where the risk is smooth), started
      from the oracle's ``warm_start`` when it offers one.
    * A convex risk: :func:`~bmrm.solver.methods.get_method` of ``method`` (``"auto"``:
      :func:`~bmrm.solver.methods.auto_method`); NRBM there certifies its gap.

    Parameters
    ----------
    method : str, object or None
        The ``method`` argument of :func:`bmrm.fit`, checked.
    problem : Problem
        The problem.
    started : bool
        Whether the solver chooses its start (no ``w0`` was given): the warm start of a
        non-convex risk, the starting problem of a latent one.

    Returns
    -------
    Solver
        The solver.
    """
    caps = problem.capabilities
    if method is None or (isinstance(method, str) and method == "auto"):
        method = None if caps.latent else auto_method(problem.regularizer, caps)
    by_nrbm = _is_nrbm(method)
    start = None
    if caps.latent and not by_nrbm:
        return CCCP(method, initial_loss=started)
    if by_nrbm:
        # a given NRBM object keeps its own options
        kept = {} if isinstance(method, str) else {
            "smooth": method.smooth, "max_backtracks": method.max_backtracks
        }  # fmt: skip
        if not caps.convex and not caps.latent:
            kept.setdefault("smooth", caps.smooth)
        solver = NRBM(convex=caps.convex and not caps.latent, **kept)
        start = _initial_loss_start if caps.latent else None
    elif caps.convex:
        return get_method(method)
    elif isinstance(method, str) and method == "lbfgs":
        solver = LBFGS()
    else:  # bmrm.solver.scorer_oracle.check_nonconvex says why, before any work
        raise ValueError(f"method={method!r} certifies convex objectives only")
    warm_start = getattr(problem.oracle.inner, "warm_start", None)
    if not caps.convex and not caps.latent and callable(warm_start):
        start = functools.partial(warm_start, solver=solver.name)
    return Started(solver, start) if started and start is not None else solver


def _is_nrbm(method) -> bool:
    return (isinstance(method, str) and method == "nrbm") or isinstance(method, NRBM)


def check_regularizer_fits(method, regularizer: Regularizer) -> None:
    """Refuse, before any data is prepared, a method that cannot solve ``regularizer``.

    The check that needs only the regularizer, of the solver :func:`choose_solver` will
    make (NRBM solves L2 without bounds only); the solver's own ``check`` repeats it on the
    problem.

    Parameters
    ----------
    method : str, Solver or None
        As for :func:`choose_solver`.
    regularizer : Regularizer
        Ω.

    Raises
    ------
    ValueError
        When the method cannot solve ``regularizer``.
    """
    if _is_nrbm(method):
        NRBM.check_regularizer(regularizer)


def _initial_loss_start(problem: Problem, options: SolverOptions):
    """The minimiser of the latent loss's convex ``initial_loss`` (its oracle calls counted
    in the fit's), solved to ``tol``; None when the loss offers none."""
    initial = problem.oracle.inner.initial()
    if initial is None:
        return None, {}
    sub = Problem.of(
        problem.oracle.sharing(initial), problem.regularizer, problem.lam, problem.n_features
    )
    limits = SolverOptions(tol=options.tol, max_iter=options.max_iter, max_time=options.max_time)
    solver = get_method(auto_method(sub.regularizer, sub.capabilities))
    return minimize(sub, solver, limits).x, {}


class Started(Wrapper):
    """A solver started from a point that a start function finds (a warm start).

    Parameters
    ----------
    inner : Solver
        The solver.
    start : callable
        ``start(problem, options) -> (w0, figures)``: the starting point (None: the loop's
        ``w0``) and figures for the result (``linear_start``, ...), found once in
        :meth:`init`.
    """

    def __init__(self, inner: Solver, start):
        super().__init__(inner)
        self.start = start
        self.figures: dict = {}

    def init(self, problem: Problem, w0: np.ndarray, options: SolverOptions):
        """The inner solver's state at the start found by ``start`` (``w0`` if none).

        Parameters
        ----------
        problem : Problem
            The problem to solve.
        w0 : ndarray
            The loop's start.
        options : SolverOptions
            The loop's options.

        Returns
        -------
        State
            The inner solver's state.
        """
        found, self.figures = self.start(problem, options)
        return self.inner.init(problem, w0 if found is None else found, options)

    def finish(self, state, result: BMRMResult) -> BMRMResult:
        """The inner solver's figures and the start's.

        Parameters
        ----------
        state : State
            The final state.
        result : BMRMResult
            The loop's result.

        Returns
        -------
        BMRMResult
            ``result`` with both solvers' figures added.
        """
        result = self.inner.finish(state, result)
        result.update(self.figures)
        return result

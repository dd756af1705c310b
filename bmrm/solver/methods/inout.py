"""The in-out cutting-plane method (Ben-Ameur & Neto, Networks 49, 2007)."""

from __future__ import annotations

import numpy as np

from bmrm.solver.methods.base import BundleState, SolverOptions
from bmrm.solver.methods.ocas import check_mu
from bmrm.solver.problem import Problem

__all__ = ["InOut"]


class InOut:
    """The in-out cutting-plane method (Ben-Ameur & Neto, Networks 49, 2007).

    It cuts between the best point and the master's minimiser, without a line search.

    It keeps the best evaluated point w_b (the *in* point, with the lowest J) and, after
    each master solve, evaluates the risk with its cut at w = w_b + mu·(w_c − w_b), w_c the
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
    mu : float in (0, 1], default=0.1
        Where the cut is taken between the best point (0) and the master minimiser (1);
        ``mu = 1`` is plain BMRM.

    Raises
    ------
    ValueError
        When ``mu`` is not a number in (0, 1].
    """

    name = "inout"
    certifies = True

    def __init__(self, mu: float = 0.1):
        self.mu = check_mu(mu)

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
        return BundleState.start(problem, w0, options)

    def step(self, state: BundleState) -> None:
        """One iteration (class docstring).

        Parameters
        ----------
        state : BundleState
            Updated in place.
        """
        if state.w_master is None:
            state.evaluate(state.w0)
        else:
            w_b, J_b = state.best_w, state.best_J
            w = w_b + self.mu * (state.w_master - w_b)
            if state.regularizer.bounded:
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

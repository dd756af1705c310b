"""The non-convex regularized bundle method (NRBM) of Do & Artières (JMLR 13, 2012).

For J(w) = lam·½‖w‖² + R(w) with R non-negative but not necessarily convex, the cutting
planes c_i(w) = <a_i, w> + b_i of R (a_i a (sub)gradient at the point w_i where it was
taken) are no longer lower bounds of R, and the master optimum is no longer a lower bound
of min J. NRBM keeps the bundle method's master problem, with the regularizer exact in it,

    w* = argmin_w  J_t(w),    J_t(w) = lam·½‖w‖² + max_i c_i(w),

and adds what makes the model J_t useful around the best point w_b (the *serious* point):

* **serious and null steps**: the master minimiser w* is
  evaluated; if J(w*) < J(w_b) the step is serious and w_b moves to w*, otherwise the
  step is null and w_b stays (the plane at w* still enriches the model);
* **lowering of conflicting planes** (their "conflict" between a plane and the best
  point): a plane with c_i(w_b) > R(w_b) over-estimates R at the serious point; its
  offset is lowered to b_i = R(w_b) − <a_i, w_b>, so that c_i(w_b) = R(w_b). After a
  serious step every plane is checked, after a null step the new one. Then
  J_t(w_b) = J(w_b) (the plane taken at w_b is exact there, all others lie at or below
  R(w_b)), so J_t is a convex model of J that agrees with J at w_b;
* **the stopping rule** (a stationary point, not a global optimum): the *model gap*
  ε_t = J(w_b) − min J_t ≥ 0 is Do & Artières' criterion: ε_t ≤ tol·J(w_b) means w_b is
  ε_t-optimal for the convex model J_t, which touches J at w_b. But lowered planes of
  distant points are not lower bounds of R and can hold the model up around w_b, so a
  small ε_t alone does not make w_b stationary. The method therefore stops on the
  *stationarity gap*: max(ε_t, ‖lam·w_b + a_b‖² / (2 lam)), a_b the oracle's
  (sub)gradient at w_b, whose second term is J(w_b) minus the minimum of the model made
  of the exact plane at w_b alone (≤ tol·J(w_b) means ‖∇J(w_b)‖ ≤ √(2 lam·tol·J(w_b))
  for a differentiable R). When ε_t is small and the gradient term is not (a kink of a
  non-smooth risk, or distant planes holding the model up), every plane but the one at
  w_b and the zero plane is dropped, once per serious point, and the stationarity gap
  is ε_t alone until the next serious step: the model is then rebuilt from planes taken
  after the restart, at points the master finds from w_b (our addition to the paper's
  method). With ``smooth=True`` the gradient term always counts, so a stop certifies
  ‖∇J(w_b)‖ ≤ √(2 lam·tol·J(w_b)). None of these figures bounds J(w_b) − min J: the
  problem is not convex and other local minima may be lower;
* **backtracking** (our variant of the paper's line search between w_b and w*): when
  the lowered plane of a null step no longer cuts the master minimiser w* (it removes
  less than half of R(w*) − max_i c_i(w*)), the master would return w* again; the
  method then evaluates w_b + θ (w* − w_b) for θ = ½, ¼, ... (at most
  ``max_backtracks`` times) until a serious step or a plane that cuts. For a smooth R,
  w* − w_b is a descent direction of J at w_b, so a short enough step is serious.

The package's losses are non-negative, so the bundle's zero plane (a = 0, b = 0) never
conflicts. Without ``convex=True`` the method certifies no lower bound on min J
(``certifies`` is False): the loop reports ``lower_bound`` NaN and, as ``gap``, the
stationarity gap, the method's stopping measure; a stop on it has status 5 (stationary
point). The result adds ``model_gap``, ``stationarity_gap`` and ``stationarity``
(‖lam·x + a(x)‖).

On a convex risk the planes never conflict (up to rounding) and the iterates are plain
BMRM's (Teo et al., JMLR 2010): with ``convex=True`` (what :func:`bmrm.fit` passes for a
convex loss and the linear scorer) no plane is lowered, every plane is checked against
the subgradient inequality as the other methods do, and the model gap is the usual
certified gap (no restarts, no backtracking: the planes always cut).

Only the L2 regularizer without bounds is supported: the method object raises a
ValueError naming ``regularizer`` otherwise.

References
----------
T.-M.-T. Do and T. Artières, "Regularized bundle methods for convex and non-convex risks",
JMLR 13 (2012), 3539–3583 (the non-convex method, NRBM).
C. H. Teo, S. V. N. Vishwanathan, A. J. Smola and Q. V. Le, "Bundle methods for regularized
risk minimization", JMLR 11 (2010).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from bmrm.solver.bundle import Bundle
from bmrm.solver.methods.base import BundleState, SolverOptions
from bmrm.solver.problem import Problem

__all__ = ["NRBM", "NRBMState", "STATIONARY"]

# the status of a result that stopped on NRBM's stationarity gap without a certificate
# (bmrm.solver.loop.STATUS_MESSAGES)
STATIONARY = 5


@dataclass(eq=False)
class NRBMState(BundleState):
    """NRBM's state: :class:`BundleState` and NRBM's own (module docstring).

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
    tol, atol : float
        The stopping tolerances.
    w_b, a_b : ndarray or None
        The serious point and the (sub)gradient of R there.
    R_b, J_b : float
        R and J there.
    model_gap, stationarity_gap : float
        The model and stationarity gaps.
    restarted : int
        The serious step of the last restart.
    n_serious, n_null, n_lowered, n_backtracks, n_restarts : int
        The counters the result reports.
    serious_objective : list of float
        J at each serious point.
    certified : bool
        Whether the risk is declared convex (the gap certified).
    """

    tol: float = 1e-3
    atol: float = 0.0
    w_b: np.ndarray | None = None
    a_b: np.ndarray | None = None
    R_b: float = math.inf
    J_b: float = math.inf
    model_gap: float = math.inf
    stationarity_gap: float = math.inf
    restarted: int = -1
    n_serious: int = 0
    n_null: int = 0
    n_lowered: int = 0
    n_backtracks: int = 0
    n_restarts: int = 0
    serious_objective: list = field(default_factory=list)

    certified: bool = False

    @property
    def stop_gap(self) -> float:
        """The certified gap for a convex risk, else the stationarity gap."""
        return self.best_J - self.lower_bound if self.certified else self.stationarity_gap

    def stop_status(self, tol: float, atol: float) -> int:
        """The loop's status after a step, 5 (stationary point) for a non-convex risk.

        A risk not declared convex gets 5 in place of 0 and 1: NRBM certifies no gap there.

        Parameters
        ----------
        tol, atol : float
            The relative and absolute tolerances.

        Returns
        -------
        int
            0, 1 (certified, convex risk), 5 (stationary point) or 2 (go on).
        """
        status = super().stop_status(tol, atol)
        return STATIONARY if status in (0, 1) and not self.certified else status


class NRBM:
    """Non-convex regularized bundle method (Do & Artières, JMLR 2012): see the module.

    The result reports ``n_serious`` and ``n_null`` (serious (descent) and null steps; the
    first evaluation counts as serious), ``n_lowered`` (planes whose offset was lowered by
    more than rounding) and ``serious_objective`` (J at each serious point, in order).

    Parameters
    ----------
    convex : bool, default=False
        Declare the risk convex: no plane is lowered, every plane is checked against the
        subgradient inequality (a violation raises), and the model gap is a certified
        bound on J(x) − min J, reported as ``gap`` with the usual status. With
        ``convex=False`` (default) the result has status 5 (stationary point) when the
        stationarity gap reaches the tolerance.
    smooth : bool, default=False
        Declare the risk differentiable: the stationarity gap always includes the
        gradient term, so status 5 certifies ‖lam·x + ∇R(x)‖ ≤ √(2 lam·tol·J(x)).
    max_backtracks : int >= 0 or None, default=None
        Halvings of the step towards the master minimiser per iteration, at most. None:
        20 for a smooth risk (a short enough step is serious) and 3 otherwise. On a
        discontinuous risk (WARP) more halvings cost many oracle calls for no better
        objective (``experiments/bench_nonconvex.py``); a few are kept for
        piecewise-smooth risks, where a lowered plane may stop cutting.
    """

    name = "nrbm"

    def __init__(
        self, *, convex: bool = False, smooth: bool = False, max_backtracks: int | None = None
    ):
        for name, value in (("convex", convex), ("smooth", smooth)):
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be a bool; got {value!r}")
        self.smooth = smooth
        if max_backtracks is None:
            max_backtracks = 20 if smooth else 3
        if (
            isinstance(max_backtracks, bool)
            or not isinstance(max_backtracks, int)
            or (max_backtracks < 0)
        ):
            raise ValueError(f"max_backtracks must be an integer >= 0; got {max_backtracks!r}")
        self.convex = convex
        self.max_backtracks = max_backtracks

    @property
    def certifies(self) -> bool:
        """Only on a risk declared convex (``convex=True``)."""
        return self.convex

    def check(self, problem: Problem) -> None:
        """Raise ``ValueError`` unless ``problem`` has L2 without bounds.

        Parameters
        ----------
        problem : Problem
            The problem to solve.
        """
        self.check_regularizer(problem.regularizer)

    @staticmethod
    def check_regularizer(regularizer) -> None:
        """Raise ``ValueError`` unless ``regularizer`` is L2 without bounds.

        The part of :meth:`check` that needs no problem, so that a fit can refuse before
        it prepares its data.

        Parameters
        ----------
        regularizer : Regularizer
            The regularizer of the problem to solve.
        """
        if not regularizer.qp:
            raise ValueError(
                f"method='nrbm' supports regularizer='l2' without bounds only; got "
                f"regularizer={regularizer!r}"
            )

    def init(self, problem: Problem, w0: np.ndarray, options: SolverOptions) -> NRBMState:
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
        NRBMState
            A fresh state at ``w0``.
        """
        state = NRBMState.start(
            problem, w0, options, tol=options.tol, atol=options.atol, certified=self.convex
        )
        if not self.convex:
            # the QP directly: the automatic master's stall test (the same minimiser after
            # new planes) presumes planes that cut, and NRBM's lowered planes or restarts
            # may legitimately leave the minimiser where it was
            state.master = state.master.exact()
        return state

    def _evaluate(self, state: NRBMState, w: np.ndarray):
        """One oracle call at w with its plane added. Without ``convex`` the subgradient
        inequality is not checked: planes of a non-convex risk may lie above it."""
        if self.convex:
            return state.evaluate(w)
        R, a = state.oracle(w)
        R = float(R)
        J = state.J_of(w, R)
        state.record(w, J)
        state.bundle.add(a, R - float(a @ w))
        return J, R, a

    def _lower(self, state: NRBMState, first: int) -> None:
        """Lower the planes first..k−1 that over-estimate R at the serious point."""
        bundle = state.bundle
        k = bundle.size
        if self.convex or first >= k:
            return
        A, b = bundle.A[first:k], bundle.b[first:k]
        values = np.einsum("ij,j->i", A, state.w_b) + b
        excess = values - state.R_b
        over = excess > 0.0
        if np.any(over):
            b[over] -= excess[over]
            # rounding alone: the plane taken at w_b itself, or a convex risk's planes
            scale = 1e-9 * (1.0 + abs(state.R_b) + np.abs(values[over]))
            state.n_lowered += int(np.count_nonzero(excess[over] > scale))

    def _serious(self, state: NRBMState, w, J, R, a) -> None:
        state.w_b, state.J_b, state.R_b = w, J, R
        state.a_b = np.array(a, dtype=np.float64)
        state.n_serious += 1
        state.serious_objective.append(J)
        self._lower(state, 1)

    def _solve(self, state: NRBMState) -> None:
        """The master problem: min J_t, the certified lower bound on a convex risk; else the
        model gap J(w_b) − min J_t and the stationarity gap."""
        t1 = time.perf_counter()
        # the master's error need not be below a small fraction of the model gap (not of
        # the stationarity gap, whose gradient term the master cannot lower)
        gap = state.gap if self.convex else state.model_gap
        accuracy = 1e-3 * gap if math.isfinite(state.lower_bound) and math.isfinite(gap) else 0.0
        w_master, lb, alpha = state.master.solve(state.bundle, max(accuracy, 0.0))
        state.bundle.set_weights(alpha)
        state.bundle.prune_idle()
        state.master_seconds += time.perf_counter() - t1
        state.w_master = w_master
        if self.convex:
            state.lower_bound = max(state.lower_bound, lb)
            return
        # J_t(w_b) = J(w_b) = best_J, so min J_t <= best_J up to the master's rounding
        state.model_gap = max(state.J_b - lb, 0.0)
        gap = state.model_gap
        if self.smooth or state.restarted != state.n_serious:
            gap = max(gap, self._gradient_gap(state))
        state.stationarity_gap = gap
        # the master's optimum: the next accuracy is a fraction of the model gap
        state.lower_bound = lb

    def _gradient_gap(self, state: NRBMState) -> float:
        """‖lam·w_b + a_b‖² / (2 lam): J(w_b) minus the minimum of the model made of the
        plane at w_b alone (a_b the oracle's (sub)gradient at w_b)."""
        g = state.lam * state.w_b + state.a_b
        return float(g @ g) / (2.0 * state.lam)

    def _try(self, state: NRBMState, w: np.ndarray) -> bool:
        """Evaluate w: a serious step if J(w) < J(w_b), else a null step whose plane is
        lowered. Returns whether the step is done: serious, or null with a plane that
        still cuts the model at w by at least half of R(w) − model(w)."""
        before = state.bundle.model_value(w)
        J, R, a = self._evaluate(state, w)
        if J < state.J_b:
            self._serious(state, w, J, R, a)
            return True
        state.n_null += 1
        k = state.bundle.size
        self._lower(state, k - 1)
        after = float(state.bundle.A[k - 1] @ w + state.bundle.b[k - 1])
        return self.convex or after - before >= 0.5 * (R - before)

    def step(self, state: NRBMState) -> None:
        """One iteration (module docstring).

        Parameters
        ----------
        state : NRBMState
            Updated in place.
        """
        if state.w_b is None:
            w = state.w0
            J, R, a = self._evaluate(state, w)
            self._serious(state, w, J, R, a)
        else:
            w_star = state.w_master
            done = self._try(state, w_star)
            # a lowered plane that no longer cuts w* would let the master return w* again:
            # step back towards w_b, where planes are local and conflict less
            theta = 1.0
            for _ in range(self.max_backtracks):
                if done:
                    break
                theta *= 0.5
                state.n_backtracks += 1
                done = self._try(state, state.w_b + theta * (w_star - state.w_b))
        self._solve(state)
        if (
            not self.convex
            and state.restarted != state.n_serious
            and self._small(state, state.model_gap)
            and not self._small(state, self._gradient_gap(state))
        ):
            self._restart(state)

    def _small(self, state: NRBMState, gap: float) -> bool:
        return gap <= state.tol * abs(state.J_b) or gap <= state.atol

    def _restart(self, state: NRBMState) -> None:
        """Keep only the zero plane and the exact plane at w_b, and solve again (once per
        serious point).

        The model gap fell below the tolerance but the gradient gap did not: the lowered
        planes of distant points, which are not lower bounds of R, hold the model up
        around w_b. Planes taken from here on come from points the master finds with the
        plane at w_b, near w_b, where they conflict little."""
        state.restarted = state.n_serious
        state.n_restarts += 1
        old = state.bundle
        bundle = Bundle(old.n_features, old.capacity, old.max_idle)
        bundle.add(state.a_b, state.R_b - float(state.a_b @ state.w_b))
        state.bundle = bundle
        state.lower_bound = -math.inf
        self._solve(state)

    def finish(self, state: NRBMState, result):
        """Add NRBM's figures to the result (called by the loop at the end of a fit).

        ``model_gap`` (J(x) − min J_t at the end), ``stationarity`` (‖lam·x + a(x)‖),
        ``n_serious``, ``n_null``, ``n_lowered``, ``n_backtracks``, ``n_restarts``,
        ``serious_objective``, ``fun0`` (J at the start) and ``certified``; without
        ``convex``, also ``stationarity_gap`` (the stopping measure, reported by the loop as
        ``gap``; the loop reports no lower bound, NaN, for a solver that does not certify).

        Parameters
        ----------
        state : NRBMState
            The final state.
        result : BMRMResult
            The loop's result.

        Returns
        -------
        BMRMResult
            ``result``, with NRBM's figures added.
        """
        result.model_gap = float(result.gap) if self.convex else state.model_gap
        result.n_serious = state.n_serious
        result.n_null = state.n_null
        result.n_lowered = state.n_lowered
        result.n_backtracks = state.n_backtracks
        result.n_restarts = state.n_restarts
        if state.a_b is not None:
            # ‖lam·x + a(x)‖ with the oracle's (sub)gradient a(x) at x
            result.stationarity = float(np.linalg.norm(state.lam * state.w_b + state.a_b))
        result.serious_objective = np.asarray(state.serious_objective)
        result.fun0 = float(state.serious_objective[0]) if state.serious_objective else math.nan
        result.certified = self.convex
        if not self.convex:
            result.stationarity_gap = state.stationarity_gap
        return result

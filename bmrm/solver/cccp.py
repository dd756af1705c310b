"""The concave-convex procedure for losses with a latent part (Yu & Joachims, ICML 2009).

A *latent* loss is a difference of convex functions of the scores,
l(f) = M(f) − N(f) with N(f) = max_h ⟨φ_h, f⟩ (for the structured NDCG / NERU losses with
``ties="latent"``, h is the tie-breaking of the ideal ordering). It offers, besides the
protocol of :mod:`losses._base`,

``latent`` (True) and ``convexify(f, targets) -> targets``
    targets of the convex surrogate l_f(f') = M(f') − ⟨φ_{h(f)}, f'⟩ with the latent part
    fixed at the scores f, where φ_{h(f)} is a subgradient of N at f. Then l_f >= l
    everywhere (N(f') >= ⟨φ_{h(f)}, f'⟩) and l_f(f) = l(f).

The procedure, for J(w) = lam·Ω(w) + R(w) with R the mean latent loss:

0. start at w_0: ``w0`` if given, else the minimiser of the convex loss that
   ``loss.initial_loss(targets)`` returns (a latent choice at w = 0, where all scores tie,
   can be a fixed point of the procedure);
1. fix the latent part at the scores of the current w_t: J_t(w) = lam·Ω(w) + R_t(w), R_t
   the mean surrogate, a convex function with J_t >= J and J_t(w_t) = J(w_t);
2. minimise J_t with the inner solver started at w_t (a bundle method, which evaluates w_t
   first); its best iterate is w_{t+1}, so J_t(w_{t+1}) <= J_t(w_t);
3. hence J(w_{t+1}) <= J_t(w_{t+1}) <= J_t(w_t) = J(w_t): the objective never increases.
   Stop when it decreases by at most ``tol``·J(w_{t+1}) (or ``atol``) after a subproblem
   solved to ``tol``, or after ``max_outer`` steps.

Two savings keep the iterates' guarantees:

* *Inexact early subproblems* (``inner_tol="adaptive"``). Step 3 only needs
  J_t(w_{t+1}) <= J_t(w_t), which every bundle-method iterate that is the best so far
  satisfies, whatever its gap. So subproblem t is solved to the relative gap
  tol_t = max(tol, min(0.1, ``inner_scale`` · d_{t−1})), d_{t−1} the relative decrease of J
  in the previous step (the first step uses 0.1·``inner_scale``): loosely while the
  outer steps still change J a lot, since only the last step's accuracy is certified. The outer
  loop stops only after a subproblem solved to ``tol`` itself, so the returned point
  carries the same certificate as with ``inner_tol=tol``.
* *Carried cutting planes* (``carry_planes=True``). R_t(w) = M̄(w) − ⟨u_t, w⟩ with M̄ the
  mean of M(X_q w) (it does not depend on t) and u_t the linear part of the fixed latent
  choice. A plane R_t(w) >= ⟨a, w⟩ + b is therefore M̄(w) >= ⟨a + u_t, w⟩ + b, and
  R_{t+1}(w) >= ⟨a + u_t − u_{t+1}, w⟩ + b: every plane (aggregated ones included, being
  convex combinations of planes) of subproblem t, shifted by δ = u_t − u_{t+1}, is a valid
  plane of subproblem t + 1, whose master problem starts from all of them. δ is the
  difference of the two surrogates' subgradients at w = 0, where both share M's
  subgradient (the same scores, the same maximising ordering); the surrogates' equal
  risks there are checked, and on a mismatch the planes are not carried.

Two evaluations are reused rather than repeated, which changes no number of the result:

* J(w_t) needs the latent loss at w_t, which fixes its latent part at the scores X w_t and
  evaluates M − ⟨φ_{h(X w_t)}, ·⟩ there: the very computation (the same scores, the same
  latent choice, the same kernels) of the next surrogate's first evaluation, at its
  starting point w_t. For the package's :class:`~bmrm.solver.oracle.RiskOracle` that
  evaluation's ``(R, a)`` is handed to the next subproblem instead of being repeated
  (saving one evaluation per step; other oracles evaluate again).
* The shift of step t + 1 needs surrogate t + 1 at w = 0, which the shift of step t + 2
  needs again as its ``previous`` value: it is kept (an n_features vector), not recomputed.

The procedure is a solver (:class:`CCCP`) that wraps an inner one: every iteration of
:func:`~bmrm.solver.loop.minimize` is one step of the inner solver on the current convex
problem (the starting one, then the surrogates), and the outer steps happen between them. It
certifies no lower bound: the problem is not convex, and the result is a stationary point in
the CCCP sense. Its stopping measure (``gap``) is the decrease of J in the last outer step
solved to ``tol`` (inf before one); the history adds each iteration's subproblem
(``outer``) and that subproblem's certified gap (``inner_gap``).

References
----------
C.-N. J. Yu and T. Joachims, "Learning structural SVMs with latent variables", ICML 2009.
A. L. Yuille and A. Rangarajan, "The concave-convex procedure", Neural Computation 15 (2003).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bmrm.solver.bundle import Bundle
from bmrm.solver.loop import BMRMResult, minimize_bmrm
from bmrm.solver.methods import auto_method, get_method
from bmrm.solver.methods.base import SolverOptions, State
from bmrm.solver.problem import Capabilities, Problem, capabilities
from losses.validation import check_bool

__all__ = ["CCCP", "CCCPState", "minimize_cccp"]

logger = logging.getLogger("bmrm")


def _shifted_bundle(
    bundle: Bundle, previous_at_zero: tuple, current_at_zero: tuple, n_features: int
) -> Bundle | None:
    """The planes of the previous surrogate's risk moved to the current one's latent
    choice, or None.

    Both risks are M̄(w) − ⟨u, w⟩ with the same M̄; at w = 0 they share M̄'s value and
    subgradient, so their subgradients differ by u_prev − u_cur there, which is the shift.
    ``previous_at_zero`` and ``current_at_zero`` are the two surrogates' ``(R, a)`` at
    w = 0 (the previous one taken before it was dropped, so that its arrays are not held
    beside the current one's).
    """
    r_prev, g_prev = previous_at_zero
    r_cur, g_cur = current_at_zero
    if abs(r_prev - r_cur) > 1e-9 * max(1.0, abs(r_cur)):
        return None
    delta = np.asarray(g_cur, dtype=np.float64) - np.asarray(g_prev, dtype=np.float64)
    shifted = Bundle(n_features, bundle.capacity, bundle.max_idle)
    # slot 0 is the zero plane of every bundle; it is not carried
    for i in range(1, bundle.size):
        shifted.add(bundle.A[i] + delta, float(bundle.b[i]))
    return shifted


@dataclass(eq=False)
class CCCPState(State):
    """The state of the concave-convex procedure.

    :class:`~bmrm.solver.methods.base.State`, whose ``best_w`` and ``best_J`` are the last
    accepted outer iterate and its objective J (during the starting problem, that problem's
    best point and objective), and the procedure's own.

    Parameters
    ----------
    problem, w0, best_w, best_J, lower_bound, last_J, nit, n_cache_cuts : see State
        As for :class:`~bmrm.solver.methods.base.State`.
    master_seconds, cache_seconds : float
        As for :class:`~bmrm.solver.methods.base.State` (all subproblems together).
    options : SolverOptions
        The loop's options (the inner solves take them with their own ``tol``).
    phase : int
        The running subproblem: 0 the starting problem (``loss.initial_loss``), t >= 1 the
        t-th surrogate.
    sub : Problem or None
        The running subproblem (its oracle counts into the procedure's counts).
    inner_solver, inner : object
        The inner solver of the running subproblem and its state.
    sub_tol : float
        The relative-gap tolerance of the running subproblem.
    step_tol : float
        The tolerance of the next surrogate (module docstring, "inexact early
        subproblems").
    w, J : ndarray or None, float
        The current outer iterate w_t and J(w_t) (None and inf before the start).
    outer_objective : list of float
        J at the start and after each subproblem.
    outer_gap : float
        The stopping measure (module docstring).
    converged : bool
        Whether the outer loop met its tolerance.
    carried : Bundle or None
        The finished subproblem's planes.
    finished_oracle : CountingOracle or None
        The finished surrogate's oracle, until the next surrogate is made.
    inner_name : str
        The name of the last inner solver (the result's ``method``).
    surrogate_at_zero : tuple or None
        The running surrogate's ``(R, a)`` at w = 0, once evaluated.
    evaluated : tuple or None
        ``(w, R, a)`` of the last latent evaluation, when it is the next surrogate's first.
    finished : dict
        Figures of the finished subproblems (master and cache seconds, cache cuts,
        aggregations).
    phases, inner_gaps : list
        Per loop iteration: its subproblem and that subproblem's gap.
    note : str
        Added to the result's message (w = 0 returned).
    """

    options: SolverOptions = field(default_factory=SolverOptions)
    phase: int = 0
    sub: Problem | None = None
    inner_solver: Any = None
    inner: Any = None
    sub_tol: float = 0.0
    step_tol: float = 0.0
    w: np.ndarray | None = None
    J: float = math.inf
    outer_objective: list = field(default_factory=list)
    outer_gap: float = math.inf
    converged: bool = False
    carried: Bundle | None = None
    finished_oracle: Any = None
    inner_name: str = ""
    surrogate_at_zero: tuple | None = None
    evaluated: tuple | None = None
    finished: dict = field(
        default_factory=lambda: {"master": 0.0, "cache": 0.0, "cuts": 0, "aggregations": 0}
    )
    phases: list = field(default_factory=list)
    inner_gaps: list = field(default_factory=list)
    note: str = ""

    @property
    def stop_gap(self) -> float:
        """The procedure's stopping measure, ``outer_gap``."""
        return self.outer_gap

    @property
    def bundle_size(self) -> int:
        """Planes held by the running subproblem."""
        return 0 if self.inner is None else self.inner.bundle_size

    @property
    def n_aggregations(self) -> int:
        """Plane aggregations of all subproblems."""
        running = 0 if self.inner is None else self.inner.n_aggregations
        return self.finished["aggregations"] + running

    def latent_objective(self, w: np.ndarray) -> float:
        """The objective J(w) with the latent loss (one oracle call).

        The evaluation is kept for the next surrogate where the oracle declares it the same
        computation (``latent_reuse``).

        Parameters
        ----------
        w : ndarray
            The point.

        Returns
        -------
        float
            J(w).
        """
        oracle = self.problem.oracle
        R, a = oracle(w)
        self.evaluated = (w, R, a) if self.problem.capabilities.latent_reuse else None
        # the latent oracle is called once per step: its work arrays need not stay
        oracle.release()
        return self.problem.objective(w, R)

    def settle(self) -> None:
        """Settle the procedure's point when the loop stops.

        A subproblem cut short (time budget, callback, max_iter) ends as a finished one
        would, and w = 0 replaces the procedure's point where its objective is lower.
        """
        if self.inner is not None:
            w, _ = self.end_subproblem()
            if self.phase == 0:
                self.start_at(w)
            else:
                J_new = self.latent_objective(w)
                self.outer_objective.append(J_new)
                if J_new <= self.J:
                    self.w, self.J = w, J_new
        w, J = self.w, self.J
        # The procedure only decreases J from its start, a stationary point of a non-convex
        # objective; w = 0 (where every query's scores tie) can still be better, as on one
        # very long noisy query: return the better of the two.
        zero = np.zeros(self.problem.n_features)
        if np.any(w) and np.array_equal(self.regularizer.project(zero), zero):
            J_zero = self.latent_objective(zero)
            if J_zero < J:
                self.note = (
                    f"; w = 0 has a lower objective ({J_zero:.8g}) than the stationary point "
                    f"the procedure reached from its start ({J:.8g}), so w = 0 is returned"
                )
                w, J = zero, J_zero
        self.best_w, self.best_J = w, J

    def start_at(self, w: np.ndarray) -> None:
        """Start the procedure at w_0 = ``w``, evaluating J(w_0).

        Parameters
        ----------
        w : ndarray
            The start.
        """
        self.w, self.J = w, self.latent_objective(w)
        self.outer_objective.append(self.J)
        self.best_w, self.best_J = self.w, self.J

    def end_subproblem(self) -> tuple[np.ndarray, float]:
        """End the running subproblem.

        Its figures are added to ``finished`` and it is dropped, its bundle kept in
        ``carried``.

        Returns
        -------
        tuple
            ``(w, J)``: its best iterate after the regularizer's clean-up, and its objective.
        """
        inner, sub = self.inner, self.sub
        w, J = self.regularizer.clean(
            inner.best_w, inner.best_J, lambda v: sub.objective(v, sub.oracle(v)[0])
        )
        done = self.finished
        done["master"] += inner.master_seconds
        done["cache"] += inner.cache_seconds
        done["cuts"] += inner.n_cache_cuts
        done["aggregations"] += inner.n_aggregations
        self.carried = getattr(inner, "bundle", None)
        # called again only once, at 0, for the next shift
        sub.oracle.release()
        self.finished_oracle = sub.oracle
        self.inner = self.inner_solver = self.sub = None
        return w, J


class CCCP:
    """The concave-convex procedure (module docstring) around an inner solver.

    Parameters
    ----------
    method : str, solver or None
        The inner solver of every convex subproblem: a name of
        :data:`~bmrm.solver.methods.METHODS`, a solver object, or None / ``"auto"``
        (:func:`~bmrm.solver.methods.auto_method` of each subproblem).
    initial_loss : bool
        Start from the minimiser of the loss's convex ``initial_loss`` (solved to ``tol``
        by the same inner solver) when the loss offers one; False: start at the loop's
        ``w0``.
    max_outer : int
        Largest number of convex surrogates.
    inner_tol : "adaptive" or float
        Relative-gap tolerance of the surrogates (not of the starting problem, always
        solved to ``tol``): ``"adaptive"`` (module docstring) or a fixed value >= ``tol``
        and below 1. Either way the procedure stops only after a surrogate solved to
        ``tol``.
    inner_scale : float
        The factor κ of the adaptive schedule tol_t = max(tol, min(0.1, κ·d_{t−1})), > 0.
    carry_planes : bool
        Start each surrogate's bundle from the previous one's planes, shifted to the new
        latent choice (module docstring).
    """

    name = "cccp"
    certifies = False

    def __init__(
        self,
        method=None,
        *,
        initial_loss: bool = True,
        max_outer: int = 50,
        inner_tol="adaptive",
        inner_scale: float = 0.1,
        carry_planes: bool = True,
    ):
        self.adaptive = isinstance(inner_tol, str) and inner_tol == "adaptive"
        if not self.adaptive:
            try:
                fixed = float(inner_tol)
            except (TypeError, ValueError):
                fixed = math.nan
            if not (0 < fixed < 1):
                raise ValueError(
                    f"inner_tol must be 'adaptive' or a number >= tol and below 1; "
                    f"got {inner_tol!r}"
                )
        if not (np.isfinite(inner_scale) and inner_scale > 0):
            raise ValueError(f"inner_scale must be a finite number > 0; got {inner_scale!r}")
        self.method = method
        self.initial_loss = check_bool(initial_loss, "initial_loss")
        self.max_outer = max_outer
        self.inner_tol = inner_tol
        self.inner_scale = float(inner_scale)
        self.carry_planes = check_bool(carry_planes, "carry_planes")

    def check(self, problem: Problem) -> None:
        """Refuse a risk without a latent part.

        Parameters
        ----------
        problem : Problem
            The problem of the latent loss.
        """
        if not problem.capabilities.latent:
            raise ValueError(
                "the concave-convex procedure needs a loss with a latent part (loss.latent "
                "True, with convexify)"
            )

    def init(self, problem: Problem, w0: np.ndarray, options: SolverOptions) -> CCCPState:
        """The procedure at its start: the starting problem, or the first surrogate at w0.

        Parameters
        ----------
        problem : Problem
            The problem of the latent loss.
        w0 : ndarray
            The start when ``initial_loss`` is False or the loss offers no starting loss.
        options : SolverOptions
            The loop's options.

        Returns
        -------
        CCCPState
            The state at the start.
        """
        tol = options.tol
        if not self.adaptive and not float(self.inner_tol) >= tol:
            raise ValueError(
                f"inner_tol must be 'adaptive' or a number >= tol ({tol:g}) and below 1; "
                f"got {self.inner_tol!r}"
            )
        if self.adaptive:
            step_tol = max(tol, min(0.1, 0.1 * self.inner_scale))
        else:
            step_tol = float(self.inner_tol)
        state = CCCPState(problem=problem, w0=w0, best_w=w0, options=options, step_tol=step_tol)
        initial = problem.oracle.inner.initial() if self.initial_loss else None
        if initial is None:
            state.start_at(w0)
            self._next_surrogate(state)
            return state
        name = type(getattr(initial, "loss", initial)).__name__
        logger.info(f"starting problem: the convex {name} that starts the procedure")
        sub = problem.oracle.sharing(initial)
        self._start(state, Problem(sub, problem.regularizer, problem.lam, problem.n_features,
                                   _convex(initial)), w0, tol)  # fmt: skip
        return state

    def _start(self, state: CCCPState, sub: Problem, w: np.ndarray, tol: float) -> None:
        method = self.method
        if method is None or (isinstance(method, str) and method == "auto"):
            # the surrogates as measured with the bundle methods: no second-order solver
            method = auto_method(sub.regularizer, sub.capabilities if state.phase == 0 else None)
        solver = get_method(method)
        solver.check(sub)
        state.sub, state.inner_solver, state.sub_tol = sub, solver, tol
        state.inner_name = solver.name
        state.inner = solver.init(sub, w, dataclasses.replace(state.options, tol=tol))

    def _next_surrogate(self, state: CCCPState) -> None:
        """Fix the latent part at the current iterate and start the next surrogate."""
        problem = state.problem
        n = problem.n_features
        carry = self.carry_planes and state.carried is not None
        previous_at_zero = None
        if carry:
            previous_at_zero = state.surrogate_at_zero
            if previous_at_zero is None:
                previous_at_zero = state.finished_oracle(np.zeros(n))
        # the finished surrogate is dropped before the next one is made: two surrogates'
        # targets and work arrays are never held at once
        state.finished_oracle, state.surrogate_at_zero = None, None
        state.phase += 1
        surrogate = problem.oracle.sharing(problem.oracle.inner.convexified(state.w))
        planes = None
        if carry:
            state.surrogate_at_zero = surrogate(np.zeros(n))
            planes = _shifted_bundle(state.carried, previous_at_zero, state.surrogate_at_zero, n)
        state.carried = None
        if state.evaluated is not None and state.evaluated[0] is state.w:
            surrogate.prime(*state.evaluated)
        state.evaluated = None
        logger.info(
            f"cccp step {state.phase}: the convex surrogate with the ties fixed at the "
            f"current scores (J {state.J:.8g}, tol {state.step_tol:.3g})"
        )
        sub = Problem(surrogate, problem.regularizer, problem.lam, n, _convex(surrogate.inner))
        self._start(state, sub, state.w, state.step_tol)
        if planes is not None:
            state.inner.bundle = planes

    def step(self, state: CCCPState) -> None:
        """One step of the inner solver on the running subproblem.

        When that subproblem meets its tolerance, the outer step (module docstring) and the
        next subproblem follow.

        Parameters
        ----------
        state : CCCPState
            The procedure's state, updated in place.
        """
        inner, solver = state.inner, state.inner_solver
        inner.nit += 1
        inner.last_J = math.inf
        solver.step(inner)
        inner.check_step(solver.certifies)
        state.last_J = inner.last_J
        done = state.finished
        state.master_seconds = done["master"] + inner.master_seconds
        state.cache_seconds = done["cache"] + inner.cache_seconds
        state.n_cache_cuts = done["cuts"] + inner.n_cache_cuts
        state.phases.append(state.phase)
        state.inner_gaps.append(inner.stop_gap)
        if state.phase == 0:
            state.best_w, state.best_J = inner.best_w, inner.best_J
        gap, atol = inner.stop_gap, state.options.atol
        if gap <= state.sub_tol * abs(inner.best_J) or gap <= atol:
            self._outer_step(state)

    def _outer_step(self, state: CCCPState) -> None:
        phase, nit = state.phase, state.inner.nit
        w_new, _ = state.end_subproblem()
        if phase == 0:
            state.start_at(w_new)
            state.carried = None  # the starting problem's planes bound another risk
            self._next_surrogate(state)
            return
        tol, atol = state.options.tol, state.options.atol
        J, J_new = state.J, state.latent_objective(w_new)
        logger.info(f"cccp step {phase}: J {J:.8g} -> {J_new:.8g} ({nit} iterations)")
        state.outer_objective.append(J_new)
        solved_to_tol = state.step_tol <= tol
        decrease = J - J_new
        if J_new > J:
            # Only rounding can make a step go up (J_new <= J_t(x) <= J_t(w) = J): keep w.
            if solved_to_tol:
                state.converged = True
            state.step_tol = tol
        else:
            state.w, state.J = w_new, J_new
            state.best_w, state.best_J = w_new, J_new
            if decrease <= tol * abs(J_new) or decrease <= atol:
                if solved_to_tol:
                    state.converged = True
                # a small decrease of a loosely solved step certifies nothing: solve to tol
                state.step_tol = tol
            elif self.adaptive:
                relative = decrease / max(abs(J_new), 1e-300)
                state.step_tol = max(tol, min(0.1, self.inner_scale * relative))
        if state.converged:
            state.outer_gap = max(decrease, 0.0)
            return
        if phase >= self.max_outer:
            # the procedure's step budget: it stops as its last subproblem did
            state.outer_gap = 0.0
            return
        self._next_surrogate(state)

    def finish(self, state: CCCPState, result: BMRMResult) -> BMRMResult:
        """Add the procedure's figures to the result.

        ``n_outer``, ``outer_objective``, ``outer_converged``, the history's ``outer`` and
        ``inner_gap`` columns, the message's last step, and as ``method`` the inner solver's
        name.

        Parameters
        ----------
        state : CCCPState
            The final state.
        result : BMRMResult
            The loop's result.

        Returns
        -------
        BMRMResult
            The loop's result with the procedure's figures added.
        """
        n_outer = state.phase
        result.n_outer = n_outer
        result.outer_objective = np.asarray(state.outer_objective)
        result.outer_converged = state.converged
        result.history["outer"] = np.asarray(state.phases, dtype=np.int64)
        result.history["inner_gap"] = np.asarray(state.inner_gaps, dtype=np.float64)
        result.message = _outer_message(result.message, n_outer) + state.note
        result.method = state.inner_name
        return result


def minimize_cccp(
    oracle,
    n_features: int,
    lam: float,
    *,
    w0: np.ndarray | None = None,
    method=None,
    max_outer: int = 50,
    inner_tol="adaptive",
    inner_scale: float = 0.1,
    carry_planes: bool = True,
    **options,
) -> BMRMResult:
    """Minimise lam·Ω(w) + R(w) for a latent loss by the concave-convex procedure.

    :func:`~bmrm.solver.loop.minimize_bmrm` with the solver :class:`CCCP`.

    Parameters
    ----------
    oracle : RiskOracle or DaskRiskOracle
        The risk of the latent loss (its loss must offer ``convexify``); the oracle gives
        the surrogates' oracles (``convexified(w)``, ``initial()``), so that on Dask each
        partition fixes the latent part from its own scores. Oracles called rarely (the
        latent one, a finished surrogate) drop their work arrays by ``release()``, and
        only one surrogate is held at a time, for the peak memory of large fits.
    n_features : int
        The length of w.
    lam : float
        The regularization constant.
    w0 : ndarray or None
        The start; without it the procedure starts at the minimiser of
        ``loss.initial_loss`` (a convex loss, solved with the same options) when the loss
        offers one, else at 0.
    method : str, solver or None
        The inner solver (:class:`CCCP`).
    max_outer : int
        Largest number of convex surrogates (:class:`CCCP`).
    inner_tol : "adaptive" or float
        Relative-gap tolerance of the surrogates (:class:`CCCP`).
    inner_scale : float
        The factor of the adaptive tolerance schedule (:class:`CCCP`).
    carry_planes : bool
        Start each surrogate's bundle from the previous one's planes (:class:`CCCP`).
    **options
        The options of :func:`~bmrm.solver.loop.minimize_bmrm` (regularizer, tol, atol,
        max_iter, max_time, master, bundle_size, callback, verbose, ...). ``tol`` and
        ``atol`` also end the outer loop (objective decrease at most ``tol``·J or
        ``atol``); ``max_iter`` bounds the iterations of all subproblems together;
        ``max_time`` the whole procedure (the running subproblem's best point is then
        taken as a finished one's).

    Returns
    -------
    BMRMResult
        ``x`` the last accepted iterate (the best: J never increases), or w = 0 when its
        objective is lower (``message`` then says so), ``fun`` J(x) with the latent loss,
        ``nit`` the iterations of all subproblems (the starting one included), ``nfev`` the
        oracle calls made (a reused evaluation counted once), no ``lower_bound`` (NaN),
        ``gap`` the stopping measure (:class:`CCCP`), ``n_outer``, ``outer_objective`` (J
        at the start and after each subproblem), ``outer_converged`` and ``history`` with
        the columns ``outer`` (0 the starting problem) and ``inner_gap``.
    """
    solver = CCCP(
        method, initial_loss=w0 is None, max_outer=max_outer, inner_tol=inner_tol,
        inner_scale=inner_scale, carry_planes=carry_planes,
    )  # fmt: skip
    return minimize_bmrm(oracle, n_features, lam, w0=w0, method=solver, **options)


def _convex(oracle) -> Capabilities:
    """The capabilities of a subproblem's oracle, convex by construction (the starting loss
    and the surrogates), whatever loss the oracle names (a Dask oracle's surrogate keeps the
    latent loss's name)."""
    return dataclasses.replace(capabilities(oracle), convex=True, latent=False)


def _outer_message(message: str, n_outer: int) -> str:
    """The loop's message, said of the procedure's steps: no step ran when the budget ran
    out in the starting problem (``initial_loss``)."""
    if n_outer == 0:
        return f"{message} (in the starting problem, before the first concave-convex step)"
    if n_outer == 1:
        return f"{message} (the only concave-convex step)"
    return f"{message} (last of {n_outer} concave-convex steps)"

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
conflicts, and J ≥ 0 is the only global lower bound the method reports
(``lower_bound = 0``, ``gap = fun``); the figures above are reported as ``model_gap``,
``stationarity_gap`` and ``stationarity`` (‖lam·x + a(x)‖).

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

import numpy as np

from bmrm.solver.bundle import Bundle
from bmrm.solver.regularizers import L2, Box

__all__ = ["NRBM", "STATIONARY"]

# the status of a result that stopped on NRBM's model gap without a global certificate
STATIONARY = 5
STATIONARY_MESSAGE = (
    "stationary point: NRBM's model gap is below tol, with ||lam*x + a(x)||^2/(2 lam) below "
    "tol too or with only planes taken since the bundle was restarted at x; this is not a "
    "certified global optimum (the objective is not convex; lower_bound is the trivial J >= 0)"
)


class NRBM:
    """Non-convex regularized bundle method (Do & Artières, JMLR 2012): see the module.

    Parameters
    ----------
    convex : bool
        Declare the risk convex: no plane is lowered, every plane is checked against the
        subgradient inequality (a violation raises), and the model gap is a certified
        bound on J(x) − min J, reported as ``gap`` with the usual status. With
        ``convex=False`` (default) the result has status 5 (stationary point) when the
        stationarity gap reaches the tolerance.
    smooth : bool
        Declare the risk differentiable: the stationarity gap always includes the
        gradient term, so status 5 certifies ‖lam·x + ∇R(x)‖ ≤ √(2 lam·tol·J(x)).
    max_backtracks : int >= 0 or None
        Halvings of the step towards the master minimiser per iteration, at most. None:
        20 for a smooth risk (a short enough step is serious) and 3 otherwise. Measured on
        WARP (discontinuous; MQ2008 fold 1, lam = 1e-2, 500 iterations), backtracking
        bought nothing: 20 halvings took 9,850 oracle calls and 34 s to J = 1.37395,
        5 took 2,860 calls (8.7 s) to 1.37401, none 500 calls (1.6 s) to 1.37403; a few
        are kept for piecewise-smooth risks, where a lowered plane may stop cutting.

    Attributes (after a fit)
    ------------------------
    n_serious, n_null : int
        Serious (descent) and null steps; the first evaluation counts as serious.
    n_lowered : int
        Planes whose offset was lowered by more than rounding.
    serious_objective : list of float
        J at each serious point, in order (strictly decreasing).
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
        self.n_backtracks = 0
        self.n_restarts = 0
        self._restarted = -1
        self.model_gap = math.inf
        self.tol, self.atol = 1e-3, 0.0
        self._a_b: np.ndarray | None = None
        self._w_b: np.ndarray | None = None
        self._R_b = math.inf
        self._J_b = math.inf
        self.n_serious = 0
        self.n_null = 0
        self.n_lowered = 0
        self.serious_objective: list[float] = []

    def _check_state(self, state) -> None:
        reg = state.regularizer
        if isinstance(reg, Box) or not isinstance(reg, L2):
            raise ValueError(
                f"method='nrbm' supports regularizer='l2' without bounds only; got "
                f"regularizer={reg!r}"
            )

    def _evaluate(self, state, w: np.ndarray):
        """One oracle call at w with its plane added. Without ``convex`` the subgradient
        inequality is not checked: planes of a non-convex risk may lie above it."""
        if self.convex:
            return state.evaluate(w)
        t0 = time.perf_counter()
        R, a = state.oracle(w)
        state.oracle_seconds += time.perf_counter() - t0
        state.nfev += 1
        state.n_passes += 2
        R = float(R)
        J = state.J_of(w, R)
        state.record(w, J)
        state.bundle.add(a, R - float(a @ w))
        return J, R, a

    def _lower(self, state, first: int) -> None:
        """Lower the planes first..k−1 that over-estimate R at the serious point."""
        bundle = state.bundle
        k = bundle.size
        if self.convex or first >= k:
            return
        A, b = bundle.A[first:k], bundle.b[first:k]
        values = np.einsum("ij,j->i", A, self._w_b) + b
        excess = values - self._R_b
        over = excess > 0.0
        if np.any(over):
            b[over] -= excess[over]
            # rounding alone: the plane taken at w_b itself, or a convex risk's planes
            scale = 1e-9 * (1.0 + abs(self._R_b) + np.abs(values[over]))
            self.n_lowered += int(np.count_nonzero(excess[over] > scale))

    def _serious(self, state, w, J, R, a) -> None:
        self._w_b, self._J_b, self._R_b = w, J, R
        self._a_b = np.array(a, dtype=np.float64)
        self.n_serious += 1
        self.serious_objective.append(J)
        self._lower(state, 1)

    def _solve(self, state) -> None:
        """The master problem; the loop's ``lower_bound`` is min J_t (the model minimum),
        so the loop's gap is the model gap J(w_b) − min J_t."""
        t1 = time.perf_counter()
        # the master's error need not be below a small fraction of the model gap (not of
        # the stationarity gap, whose gradient term the master cannot lower)
        gap = state.gap if self.convex else self.model_gap
        accuracy = 1e-3 * gap if math.isfinite(state.lower_bound) and math.isfinite(gap) else 0.0
        master = state.master
        if not self.convex and getattr(master, "fallback", True) is None:
            # the automatic master's QP directly: its stall test (the same minimiser after
            # new planes) presumes planes that cut, and NRBM's lowered planes or restarts
            # may legitimately leave the minimiser where it was
            master = master.qp
        w_master, lb, alpha = master.solve(state.bundle, max(accuracy, 0.0))
        state.bundle.set_weights(alpha)
        state.bundle.prune_idle()
        state.master_seconds += time.perf_counter() - t1
        state.w_master = w_master
        if self.convex:
            state.lower_bound = max(state.lower_bound, lb)
            return
        # J_t(w_b) = J(w_b) = best_J, so min J_t <= best_J up to the master's rounding
        self.model_gap = max(self._J_b - lb, 0.0)
        gap = self.model_gap
        if self.smooth or self._restarted != self.n_serious:
            gap = max(gap, self._gradient_gap())
        state.lower_bound = self._J_b - gap

    def _gradient_gap(self) -> float:
        """‖lam·w_b + a_b‖² / (2 lam): J(w_b) minus the minimum of the model made of the
        plane at w_b alone (a_b the oracle's (sub)gradient at w_b)."""
        g = self._lam * self._w_b + self._a_b
        return float(g @ g) / (2.0 * self._lam)

    def _model_risk(self, state, w: np.ndarray, k: int) -> float:
        """max_{i<k} c_i(w), the model of R from the first k planes."""
        bundle = state.bundle
        return float(np.max(np.einsum("ij,j->i", bundle.A[:k], w) + bundle.b[:k]))

    def _try(self, state, w: np.ndarray) -> bool:
        """Evaluate w: a serious step if J(w) < J(w_b), else a null step whose plane is
        lowered. Returns whether the step is done: serious, or null with a plane that
        still cuts the model at w by at least half of R(w) − model(w)."""
        before = self._model_risk(state, w, state.bundle.size)
        J, R, a = self._evaluate(state, w)
        if J < self._J_b:
            self._serious(state, w, J, R, a)
            return True
        self.n_null += 1
        k = state.bundle.size
        self._lower(state, k - 1)
        after = float(state.bundle.A[k - 1] @ w + state.bundle.b[k - 1])
        return self.convex or after - before >= 0.5 * (R - before)

    def step(self, state) -> None:
        if self._w_b is None:
            self._check_state(state)
            self._lam = state.lam
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
                self.n_backtracks += 1
                done = self._try(state, self._w_b + theta * (w_star - self._w_b))
        self._solve(state)
        if (
            not self.convex
            and self._restarted != self.n_serious
            and self._small(self.model_gap)
            and not self._small(self._gradient_gap())
        ):
            self._restart(state)

    def set_tolerance(self, tol: float, atol: float) -> None:
        """The loop's stopping tolerances (also those of the restart test)."""
        self.tol, self.atol = tol, atol

    def _small(self, gap: float) -> bool:
        return gap <= self.tol * abs(self._J_b) or gap <= self.atol

    def _restart(self, state) -> None:
        """Keep only the zero plane and the exact plane at w_b, and solve again (once per
        serious point).

        The model gap fell below the tolerance but the gradient gap did not: the lowered
        planes of distant points, which are not lower bounds of R, hold the model up
        around w_b. Planes taken from here on come from points the master finds with the
        plane at w_b, near w_b, where they conflict little."""
        self._restarted = self.n_serious
        self.n_restarts += 1
        old = state.bundle
        bundle = Bundle(old.n_features, old.capacity, old.max_idle)
        bundle.add(self._a_b, self._R_b - float(self._a_b @ self._w_b))
        state.bundle = bundle
        state.lower_bound = -math.inf
        self._solve(state)

    def finish(self, result):
        """Name the result's figures honestly (called by the loop at the end of a fit).

        Adds ``model_gap`` (J(x) − min J_t at the end), ``stationarity`` (‖lam·x + a(x)‖),
        ``n_serious``, ``n_null``, ``n_lowered``, ``n_backtracks``, ``n_restarts``,
        ``serious_objective``, ``certified`` and ``method``. Without ``convex`` nothing
        global is certified: ``stationarity_gap`` is the stopping measure (see the module),
        ``lower_bound`` becomes 0 (J >= 0) and ``gap`` becomes ``fun``; a stop on the
        stationarity gap gets status 5 (stationary point), and the history's ``gap`` /
        ``lower_bound`` columns hold those trivial figures, with ``stationarity_gap`` added.
        """
        stationarity_gap = float(result.gap)
        if not self.convex:
            result.model_gap = self.model_gap
        result.n_serious = self.n_serious
        result.n_null = self.n_null
        result.n_lowered = self.n_lowered
        result.n_backtracks = self.n_backtracks
        result.n_restarts = self.n_restarts
        if self._a_b is not None:
            # ‖lam·x + a(x)‖ with the oracle's (sub)gradient a(x) at x
            result.stationarity = float(np.linalg.norm(self._lam * self._w_b + self._a_b))
        result.serious_objective = np.asarray(self.serious_objective)
        result.certified = self.convex
        result.method = self.name
        if self.convex:
            result.model_gap = stationarity_gap
            return result
        result.stationarity_gap = stationarity_gap
        hist = dict(result.history)
        hist["stationarity_gap"] = np.array(hist["gap"])
        hist["lower_bound"] = np.zeros_like(hist["stationarity_gap"])
        hist["gap"] = np.array(hist["best_objective"])
        result.history = hist
        result.lower_bound = 0.0
        result.gap = float(result.fun)
        if result.status in (0, 1):
            result.status = STATIONARY
            result.message = STATIONARY_MESSAGE
            result.success = True
        return result

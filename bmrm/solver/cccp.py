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
2. minimise J_t with the bundle method started at w_t; the bundle method evaluates w_t
   first and returns its best iterate w_{t+1}, so J_t(w_{t+1}) <= J_t(w_t);
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

The result is a stationary point in the CCCP sense, not a certified global minimum: the
problem is not convex. The returned gap is that of the last convex subproblem.

References
----------
C.-N. J. Yu and T. Joachims, "Learning structural SVMs with latent variables", ICML 2009.
A. L. Yuille and A. Rangarajan, "The concave-convex procedure", Neural Computation 15 (2003).
"""

from __future__ import annotations

import logging
import time

import numpy as np

from bmrm.solver.bundle import Bundle
from bmrm.solver.compile_clock import CompileClock
from bmrm.solver.loop import BMRMResult, minimize_bmrm, verbose_log
from bmrm.solver.methods import CarriedPlanes, auto_method, get_method
from bmrm.solver.oracle import RiskOracle
from bmrm.solver.regularizers import make_regularizer
from losses.validation import check_bool

__all__ = ["minimize_cccp"]

logger = logging.getLogger("bmrm")


class _Evaluated:
    """An oracle whose first call, at the point ``w``, returns ``(R, a)`` evaluated before
    (by the latent oracle at ``w``, the same computation: module docstring) instead of
    evaluating again; any other call goes to ``oracle``, as do its other attributes."""

    def __init__(self, oracle, w: np.ndarray, R: float, a: np.ndarray):
        self.oracle = oracle
        self._evaluated = (w, R, a)
        self.reused = 0

    def __call__(self, w: np.ndarray):
        evaluated, self._evaluated = self._evaluated, None
        if evaluated is not None and np.array_equal(evaluated[0], w):
            self.reused += 1
            return evaluated[1], evaluated[2].copy()
        return self.oracle(w)

    def __getattr__(self, name: str):
        if name == "oracle":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.oracle, name)


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


def minimize_cccp(
    oracle: RiskOracle,
    n_features: int,
    lam: float,
    *,
    regularizer="l2",
    l1_ratio: float = 0.5,
    lower=None,
    upper=None,
    tol: float = 1e-3,
    atol: float = 0.0,
    max_time: float | None = None,
    w0: np.ndarray | None = None,
    max_outer: int = 50,
    inner_tol="adaptive",
    inner_scale: float = 0.1,
    carry_planes: bool = True,
    verbose: bool = False,
    **bmrm_options,
) -> BMRMResult:
    """Minimise lam·Ω(w) + R(w) for a latent loss by the concave-convex procedure.

    Parameters
    ----------
    oracle : RiskOracle or DaskRiskOracle
        The risk of the latent loss (its loss must offer ``convexify``); the oracle gives
        the surrogates' oracles (``convexified(w)``, ``initial()``), so that on Dask each
        partition fixes the latent part from its own scores. Oracles called rarely (the
        latent one, a finished surrogate) drop their work arrays by ``release()``, and
        only one surrogate is held at a time, for the peak memory of large fits.
    n_features, lam, regularizer, l1_ratio, lower, upper, tol, atol, w0, verbose
        As for :func:`bmrm.solver.loop.minimize_bmrm`; ``tol`` and ``atol`` also end the
        outer loop (objective decrease at most ``tol``·J or ``atol``).
        Without ``w0`` the procedure starts at the minimiser of ``loss.initial_loss`` (a
        convex loss, solved with the same options) when the loss offers one, else at 0.
    max_time : float or None
        Budget in seconds for the whole procedure, numba's compilation excluded (reported
        as ``compile_seconds``); when it runs out, or a callback raises
        ``StopIteration``, the procedure stops after the current subproblem (status 3 or
        4, as the bundle method reports them).
    max_outer : int
        Largest number of convex subproblems.
    inner_tol : "adaptive" or float
        Relative-gap tolerance of the concave-convex subproblems (not of the starting
        convex problem, always solved to ``tol``): ``"adaptive"`` (module docstring) or a
        fixed value >= ``tol`` for every subproblem. Either way the procedure stops only
        after a subproblem solved to ``tol``.
    inner_scale : float
        κ of the adaptive schedule tol_t = max(tol, min(0.1, κ·d_{t−1})), > 0.
    carry_planes : bool
        Start each subproblem's bundle from the previous one's planes, shifted to the new
        latent choice (module docstring).
    **bmrm_options
        Passed to every :func:`minimize_bmrm` call (master, max_iter, bundle_size, ...).

    Returns
    -------
    BMRMResult
        ``x`` the last accepted iterate (the best: J never increases), ``fun`` J(x) with
        the latent loss, ``nit`` summed over the subproblems (the starting one included),
        ``nfev`` the oracle calls made (the subproblems', the latent objective's and the
        shifts', a reused evaluation counted once), ``lower_bound`` / ``gap`` (of the last
        convex subproblem, not a bound for the non-convex problem), ``status``, ``success``
        and ``message`` from the last subproblem, and
        ``n_outer``, ``outer_objective`` (J at w0 and at each subproblem's solution),
        ``outer_converged`` (the decrease fell below the tolerance) and ``history`` of
        every bundle iteration, with a column ``outer`` numbering the subproblem.
    """
    if not getattr(oracle.loss, "latent", False):
        raise ValueError("minimize_cccp needs a loss with a latent part (loss.latent True)")
    adaptive = isinstance(inner_tol, str) and inner_tol == "adaptive"
    if not adaptive:
        try:
            fixed_tol = float(inner_tol)
        except (TypeError, ValueError):
            fixed_tol = float("nan")
        if not (tol <= fixed_tol < 1):
            raise ValueError(
                f"inner_tol must be 'adaptive' or a number >= tol ({tol:g}) and below 1; "
                f"got {inner_tol!r}"
            )
    if not (np.isfinite(inner_scale) and inner_scale > 0):
        raise ValueError(f"inner_scale must be a finite number > 0; got {inner_scale!r}")
    check_bool(carry_planes, "carry_planes")
    start = time.perf_counter()
    # compilation is excluded from the time budget and reported, as in minimize_bmrm
    with CompileClock() as clock, verbose_log(verbose):
        bounds = None if lower is None and upper is None else (lower, upper)
        regularizer = make_regularizer(
            regularizer, l1_ratio=l1_ratio, bounds=bounds, n_features=n_features
        )
        results = []
        initial = oracle.initial() if w0 is None else None
        if initial is not None:
            if verbose:
                name = type(getattr(initial, "loss", initial)).__name__
                logger.info(f"starting problem: the convex {name} that starts the procedure")
            res = minimize_bmrm(
                initial,
                n_features,
                lam,
                regularizer=regularizer,
                tol=tol,
                atol=atol,
                max_time=max_time,
                verbose=verbose,
                **bmrm_options,
            )
            results.append(res)
            w0 = res.x
        initial = None  # its targets are not needed again
        w = np.zeros(n_features) if w0 is None else np.array(w0, dtype=np.float64)
        w = regularizer.project(w)

        # a RiskOracle's latent evaluation at w is the next surrogate's first (docstring)
        reuse = isinstance(oracle, RiskOracle)
        evaluated = None  # (w, R, a) of the last latent evaluation, kept when reusable

        def objective(w):
            nonlocal evaluated
            R, a = oracle(w)
            evaluated = (w, R, a) if reuse else None
            # the latent oracle is called once per step: its work arrays need not stay
            oracle.release()
            return lam * regularizer.value(w) + R

        J = objective(w)
        outer_objective = [J]
        n_init = len(results)
        converged = False
        # a callback's StopIteration (status 4) or the time budget (status 3) ends the procedure
        stopped = bool(results) and results[-1].status in (3, 4)
        method = bmrm_options.pop("method", None)
        if method is None or (isinstance(method, str) and method == "auto"):
            method = auto_method(regularizer)  # as minimize_bmrm's "auto"
        step_tol = max(tol, min(0.1, 0.1 * inner_scale)) if adaptive else fixed_tol
        surrogate, carried = None, None
        surrogate_at_zero = None  # the current surrogate's (R, a) at w = 0, once evaluated
        extra_calls = 0  # oracle calls at w = 0 for the shifts, counted in nfev
        reused = 0  # evaluations reused, counted in the subproblems' nfev but not made
        for outer in range(1, max_outer + 1):
            if stopped:
                break
            budget = None
            if max_time is not None:
                budget = max_time - (time.perf_counter() - start - clock.current())
                if budget <= 0 and results:
                    break
                budget = max(budget, 1e-9)
            carry = carry_planes and carried is not None
            # the finished surrogate is evaluated at 0 for the shift and dropped before the
            # next one is made: two surrogates' targets and work arrays are never held at once
            previous_at_zero = None
            if carry:
                previous_at_zero = surrogate_at_zero
                if previous_at_zero is None:
                    previous_at_zero = surrogate(np.zeros(n_features))
                    extra_calls += 1
            surrogate, surrogate_at_zero = None, None
            surrogate = oracle.convexified(w)
            planes = None
            if carry:
                surrogate_at_zero = surrogate(np.zeros(n_features))
                extra_calls += 1
                planes = _shifted_bundle(carried, previous_at_zero, surrogate_at_zero, n_features)
            carrier = CarriedPlanes(get_method(method), planes)
            first = surrogate
            if evaluated is not None and evaluated[0] is w:
                first = _Evaluated(surrogate, *evaluated)
            evaluated = None
            if verbose:
                logger.info(
                    f"cccp step {outer}: the convex surrogate with the ties fixed at the "
                    f"current scores (J {J:.8g}, tol {step_tol:.3g})"
                )
            res, final = minimize_bmrm(
                first,
                n_features,
                lam,
                regularizer=regularizer,
                tol=step_tol,
                atol=atol,
                max_time=budget,
                w0=w,
                method=carrier,
                verbose=verbose,
                full_output=True,
                **bmrm_options,
            )
            carried = getattr(final, "bundle", None)
            results.append(res)
            reused += getattr(first, "reused", 0)
            first = None
            surrogate.release()  # called again only once, at 0, for the next shift
            stopped = res.status in (3, 4)
            J_new = objective(res.x)
            if verbose:
                logger.info(f"cccp step {outer}: J {J:.8g} -> {J_new:.8g} ({res.nit} iterations)")
            outer_objective.append(J_new)
            if J_new > J:
                # Only rounding can make a step go up (J_new <= J_t(x) <= J_t(w) = J): keep w.
                if step_tol <= tol:
                    converged = True
                    break
                step_tol = tol
                continue
            decrease = J - J_new
            w, J = res.x, J_new
            if decrease <= tol * abs(J) or decrease <= atol:
                if step_tol <= tol:
                    converged = True
                    break
                # a small decrease of a loosely solved step certifies nothing: solve to tol
                step_tol = tol
            elif adaptive:
                step_tol = max(tol, min(0.1, inner_scale * decrease / max(abs(J), 1e-300)))
        last = results[-1]
        history = {key: np.concatenate([r.history[key] for r in results]) for key in last.history}
        # 0 numbers the iterations of the starting problem (``initial_loss``), if any
        history["outer"] = np.concatenate(
            [np.full(len(r.history["objective"]), i + 1 - n_init) for i, r in enumerate(results)]
        )
        return BMRMResult(
            x=np.array(w, copy=True),
            fun=float(J),
            lower_bound=last.lower_bound,
            gap=last.gap,
            nit=sum(r.nit for r in results),
            nfev=sum(r.nfev for r in results) + len(outer_objective) + extra_calls - reused,
            status=last.status,
            success=last.success,
            message=_outer_message(last.message, len(results) - n_init),
            bundle_size=last.bundle_size,
            n_aggregations=sum(r.n_aggregations for r in results),
            history=history,
            oracle_seconds=sum(r.oracle_seconds for r in results),
            master_seconds=sum(r.master_seconds for r in results),
            total_seconds=time.perf_counter() - start,
            compile_seconds=clock.current(),
            n_outer=len(results) - n_init,
            method=last.get("method"),
            outer_objective=np.asarray(outer_objective),
            outer_converged=converged,
        )


def _outer_message(message: str, n_outer: int) -> str:
    """The last solve's message, said of the procedure's steps: no step ran when the
    budget ran out in the starting problem (``initial_loss``)."""
    if n_outer == 0:
        return f"{message} (in the starting problem, before the first concave-convex step)"
    if n_outer == 1:
        return f"{message} (the only concave-convex step)"
    return f"{message} (last of {n_outer} concave-convex steps)"

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
   Stop when it decreases by at most ``tol``·J(w_{t+1}) (or ``atol``), or after
   ``max_outer`` steps.

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

from bmrm.solver.loop import BMRMResult, minimize_bmrm
from bmrm.solver.oracle import RiskOracle
from bmrm.solver.regularizers import make_regularizer

__all__ = ["minimize_cccp"]

logger = logging.getLogger("bmrm")


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
    verbose: bool = False,
    **bmrm_options,
) -> BMRMResult:
    """Minimise lam·Ω(w) + R(w) for a latent loss by the concave-convex procedure.

    Parameters
    ----------
    oracle : RiskOracle or DaskRiskOracle
        The risk of the latent loss (its loss must offer ``convexify``); the oracle gives
        the surrogates' oracles (``convexified(w)``, ``initial()``), so that on Dask each
        partition fixes the latent part from its own scores.
    n_features, lam, regularizer, l1_ratio, lower, upper, tol, atol, w0, verbose
        As for :func:`bmrm.solver.loop.minimize_bmrm`; ``tol`` and ``atol`` also end the
        outer loop (objective decrease at most ``tol``·J or ``atol``).
        Without ``w0`` the procedure starts at the minimiser of ``loss.initial_loss`` (a
        convex loss, solved with the same options) when the loss offers one, else at 0.
    max_time : float or None
        Budget in seconds for the whole procedure; when it runs out, or a callback raises
        ``StopIteration``, the procedure stops after the current subproblem (status 3 or
        4, as the bundle method reports them).
    max_outer : int
        Largest number of convex subproblems.
    **bmrm_options
        Passed to every :func:`minimize_bmrm` call (master, max_iter, bundle_size, ...).

    Returns
    -------
    BMRMResult
        ``x`` the last accepted iterate (the best: J never increases), ``fun`` J(x) with
        the latent loss, ``nit`` / ``nfev`` summed over the subproblems (the starting one
        included), ``lower_bound`` / ``gap`` (of the last convex subproblem, not a bound
        for the non-convex problem), ``status``, ``success`` and ``message`` from the last
        subproblem, and
        ``n_outer``, ``outer_objective`` (J at w0 and at each subproblem's solution),
        ``outer_converged`` (the decrease fell below the tolerance) and ``history`` of
        every bundle iteration, with a column ``outer`` numbering the subproblem.
    """
    if not getattr(oracle.loss, "latent", False):
        raise ValueError("minimize_cccp needs a loss with a latent part (loss.latent True)")
    start = time.perf_counter()
    bounds = None if lower is None and upper is None else (lower, upper)
    regularizer = make_regularizer(
        regularizer, l1_ratio=l1_ratio, bounds=bounds, n_features=n_features
    )
    results = []
    initial = oracle.initial() if w0 is None else None
    if initial is not None:
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
    w = np.zeros(n_features) if w0 is None else np.array(w0, dtype=np.float64)
    w = regularizer.project(w)

    def objective(w):
        return lam * regularizer.value(w) + oracle(w)[0]

    J = objective(w)
    outer_objective = [J]
    n_init = len(results)
    converged = False
    # a callback's StopIteration (status 4) or the time budget (status 3) ends the procedure
    stopped = bool(results) and results[-1].status in (3, 4)
    for outer in range(1, max_outer + 1):
        if stopped:
            break
        budget = None
        if max_time is not None:
            budget = max_time - (time.perf_counter() - start)
            if budget <= 0 and results:
                break
            budget = max(budget, 1e-9)
        res = minimize_bmrm(
            oracle.convexified(w),
            n_features,
            lam,
            regularizer=regularizer,
            tol=tol,
            atol=atol,
            max_time=budget,
            w0=w,
            verbose=verbose,
            **bmrm_options,
        )
        results.append(res)
        stopped = res.status in (3, 4)
        J_new = objective(res.x)
        if verbose:
            logger.info(f"cccp step {outer}: J {J:.8g} -> {J_new:.8g} ({res.nit} iterations)")
        outer_objective.append(J_new)
        if J_new > J:
            # Only rounding can make a step go up (J_new <= J_t(x) <= J_t(w) = J): keep w.
            converged = True
            break
        decrease = J - J_new
        w, J = res.x, J_new
        if decrease <= tol * abs(J) or decrease <= atol:
            converged = True
            break
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
        nfev=sum(r.nfev for r in results) + len(outer_objective),
        status=last.status,
        success=last.success,
        message=f"{last.message} (last of {len(results) - n_init} concave-convex steps)",
        bundle_size=last.bundle_size,
        n_aggregations=sum(r.n_aggregations for r in results),
        history=history,
        oracle_seconds=sum(r.oracle_seconds for r in results),
        master_seconds=sum(r.master_seconds for r in results),
        total_seconds=time.perf_counter() - start,
        n_outer=len(results) - n_init,
        outer_objective=np.asarray(outer_objective),
        outer_converged=converged,
    )

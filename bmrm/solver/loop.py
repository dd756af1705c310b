"""The bundle-method loop (Teo, Vishwanathan, Smola & Le, JMLR 2010, Algorithm 1).

At iteration t the oracle gives R(w_{t−1}) and a subgradient a_t; the plane
b_t = R(w_{t−1}) − <a_t, w_{t−1}> joins the bundle; the master problem minimises
J_t(w) = lam·Ω(w) + max_{i≤t} (<a_i, w> + b_i), whose optimum lower-bounds min J. The gap
ε_t = min_{i≤t} J(w_{i−1}) − J_t(w_t) is measured from the best iterate, which is returned.

The loop asks a *method* object where to evaluate next and which extra cuts to add, so that
variants (line search, proximal bundle, per-query cut caching) plug in without rewriting it.
"""

from __future__ import annotations

import logging
import math
import sys
import time
import warnings
from collections.abc import Callable

import numpy as np
from scipy.optimize import OptimizeResult

from bmrm.solver.bundle import Bundle
from bmrm.solver.compile_clock import CompileClock
from bmrm.solver.masters import CvxpyMaster, QPMaster, regularizer_value

__all__ = ["BMRMResult", "ConvergenceWarning", "minimize_bmrm", "PlainBMRM"]

logger = logging.getLogger("bmrm")

STATUS_MESSAGES = {
    0: "converged: relative gap below tol",
    1: "converged: absolute gap below atol",
    2: "stopped: max_iter reached",
    3: "stopped: time budget max_time reached",
    4: "stopped: callback raised StopIteration",
}

HISTORY_FIELDS = (
    "objective",
    "best_objective",
    "lower_bound",
    "gap",
    "elapsed",
    "oracle_seconds",
    "master_seconds",
    "bundle_size",
)


class ConvergenceWarning(UserWarning):
    """The solver stopped before reaching the requested gap."""


class BMRMResult(OptimizeResult):
    """Result of a bundle-method fit; a :class:`scipy.optimize.OptimizeResult`.

    Attributes
    ----------
    x : ndarray
        The best iterate (lowest J among evaluated points).
    fun : float
        J(x) = lam·Ω(x) + R(x).
    lower_bound : float
        The largest master optimum seen, a lower bound on min_w J(w).
    gap : float
        ``fun − lower_bound`` ≥ J(x) − min J: a certificate of suboptimality.
    nit, nfev : int
        Iterations and oracle calls.
    status, message, success :
        Why the loop stopped (0, 1 converged; 2 max_iter; 3 max_time; 4 callback).
    bundle_size : int
        Planes held at the end.
    history : dict of ndarray
        Per iteration: objective, best_objective, lower_bound, gap, elapsed (seconds since
        the fit began), oracle_seconds, master_seconds, bundle_size.
    oracle_seconds, master_seconds, total_seconds : float
    compile_seconds : float
        Wall-clock seconds spent in numba's compiler during the fit (compiling kernels on
        their first use, or loading them from the on-disk cache), included in the other
        times but not counted against ``max_time``.
    """


class PlainBMRM:
    """Plain BMRM: evaluate the risk at the master problem's minimiser."""

    def next_point(self, w_master: np.ndarray, state: dict) -> np.ndarray:
        return w_master

    def extra_cuts(self, w: np.ndarray, state: dict):
        return ()


def _make_master(master, regularizer, lam, n_features, capacity, l1_ratio, lower, upper, solver):
    bounded = lower is not None or upper is not None
    if master == "auto":
        master = "qp" if regularizer == "l2" and not bounded else "cvxpy"
    if master == "qp":
        if regularizer != "l2" or bounded:
            raise ValueError(
                "master='qp' solves the unconstrained L2 problem only; use master='cvxpy' "
                f"for regularizer={regularizer!r} or bounds"
            )
        return QPMaster(lam)
    if master == "cvxpy":
        return CvxpyMaster(
            n_features,
            capacity,
            lam,
            regularizer,
            l1_ratio=l1_ratio,
            lower=lower,
            upper=upper,
            solver=solver,
        )
    raise ValueError(f"master must be 'auto', 'qp' or 'cvxpy'; got {master!r}")


def minimize_bmrm(
    oracle: Callable,
    n_features: int,
    lam: float,
    *,
    regularizer="l2",
    l1_ratio: float = 0.5,
    lower=None,
    upper=None,
    master: str = "auto",
    tol: float = 1e-3,
    atol: float = 0.0,
    max_iter: int = 1000,
    max_time: float | None = None,
    bundle_size: int = 200,
    max_idle: int = 50,
    w0: np.ndarray | None = None,
    method=None,
    callback: Callable | None = None,
    verbose: bool = False,
    progress: bool = False,
    cvxpy_solver: str | None = None,
) -> BMRMResult:
    """Minimise J(w) = lam·Ω(w) + R(w) by the bundle method.

    Parameters
    ----------
    oracle : callable
        ``oracle(w) -> (R(w), a)`` with ``a`` a subgradient of the non-negative risk R.
    n_features : int
    lam : float
        Regularization constant (> 0).
    regularizer, l1_ratio, lower, upper, master, cvxpy_solver :
        See :func:`bmrm.fit`.
    tol, atol : float
        Stop when gap <= tol·J(best) or gap <= atol.
    max_iter : int
        Iteration cap (warns with :class:`ConvergenceWarning` when reached).
    max_time : float or None
        Time budget in seconds, not counting time spent in numba's compiler (the first fit
        in a new environment compiles the kernels; ``compile_seconds`` in the result says
        how long that took), so a budget buys the same iterations on a first run as later.
    bundle_size, max_idle : int
        Bundle capacity and idle-plane pruning age (see :class:`bmrm.solver.bundle.Bundle`).
    w0 : ndarray or None
        Starting point (warm start); zero by default (projected onto the bounds).
    method : object or None
        ``next_point(w_master, state)`` and ``extra_cuts(w, state)``; plain BMRM if None.
    callback : callable or None
        ``callback(intermediate_result)`` after every iteration, with an
        :class:`BMRMResult` of the current state; raise ``StopIteration`` to stop.
    verbose : bool
        Log one line per iteration to stderr (iteration, J, lower bound, gap, bundle size,
        seconds).
    progress : bool
        Show a one-line progress bar on stderr: the share of the way, on a log scale, from
        the first gap to the requested one.
    """
    start = time.perf_counter()
    clock = CompileClock().__enter__()
    method = PlainBMRM() if method is None else method
    handler = None
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    try:
        master_obj = _make_master(
            master, regularizer, lam, n_features, bundle_size, l1_ratio, lower, upper, cvxpy_solver
        )
        bundle = Bundle(n_features, bundle_size, max_idle)
        w = np.zeros(n_features) if w0 is None else np.array(w0, dtype=np.float64)
        if lower is not None or upper is not None:
            w = np.clip(w, -np.inf if lower is None else lower, np.inf if upper is None else upper)

        def J_of(w, R):
            return lam * regularizer_value(regularizer, w, l1_ratio) + R

        hist = {key: [] for key in HISTORY_FIELDS}
        columns = [hist[key] for key in HISTORY_FIELDS]
        best_J, best_w = np.inf, w
        lower_bound = -np.inf
        oracle_s = master_s = 0.0
        status, nit, nfev = 2, 0, 0
        state = {"bundle": bundle}
        if verbose:
            logger.info(
                f"{'iter':>5} {'J(best)':>14} {'lower bound':>14} {'gap':>11} {'planes':>6} "
                f"{'seconds':>8}"
            )
        for nit in range(1, max_iter + 1):
            t0 = time.perf_counter()
            R, a = oracle(w)
            nfev += 1
            cuts = [(w, R, a)]
            for w_extra, R_extra, a_extra in method.extra_cuts(w, state):
                cuts.append((w_extra, R_extra, a_extra))
            oracle_s += time.perf_counter() - t0
            J = J_of(w, R)
            if J < best_J:
                best_J, best_w = J, w
            for w_c, R_c, a_c in cuts:
                bundle.add(a_c, R_c - float(a_c @ w_c))
            t1 = time.perf_counter()
            # the master's own error need not be below a small fraction of the gap
            accuracy = 1e-3 * (best_J - lower_bound) if math.isfinite(lower_bound) else 0.0
            w_master, lb, alpha = master_obj.solve(bundle, accuracy)
            bundle.set_weights(alpha)
            bundle.prune_idle()
            master_s += time.perf_counter() - t1
            lower_bound = max(lower_bound, lb)
            gap = best_J - lower_bound
            elapsed = time.perf_counter() - start
            for column, value in zip(
                columns,
                (J, best_J, lower_bound, gap, elapsed, oracle_s, master_s, bundle.size),
                strict=True,
            ):
                column.append(value)
            if progress:
                _show_progress(nit, gap, best_J, tol, atol, hist["gap"][0], elapsed)
            if verbose:
                logger.info(
                    f"{nit:5d} {best_J:14.8g} {lower_bound:14.8g} {gap:11.4e} {bundle.size:6d} "
                    f"{elapsed:8.2f}"
                )
            if gap <= tol * abs(best_J):
                status = 0
            elif gap <= atol:
                status = 1
            elif max_time is not None and elapsed - clock.current() >= max_time:
                status = 3
            if callback is not None and status == 2:
                try:
                    callback(
                        _result(
                            best_w,
                            best_J,
                            lower_bound,
                            nit,
                            nfev,
                            2,
                            bundle,
                            hist,
                            oracle_s,
                            master_s,
                            elapsed,
                        )
                    )
                except StopIteration:
                    status = 4
            if status != 2:
                break
            w = method.next_point(w_master, state)
        total = time.perf_counter() - start
        if progress:
            sys.stderr.write("\n")
        if status == 2:
            warnings.warn(
                f"BMRM reached max_iter={max_iter} with gap {best_J - lower_bound:.3e} "
                f"(relative {(best_J - lower_bound) / max(abs(best_J), 1e-300):.3e}, "
                f"tol={tol})",
                ConvergenceWarning,
                stacklevel=3,
            )
        result = _result(
            best_w, best_J, lower_bound, nit, nfev, status, bundle, hist, oracle_s, master_s, total
        )
        result.compile_seconds = clock.seconds
        return result
    finally:
        clock.__exit__(None, None, None)
        if handler is not None:
            logger.removeHandler(handler)


def _show_progress(nit, gap, best_J, tol, atol, first_gap, elapsed, width=30):
    target = max(tol * abs(best_J), atol, 1e-300)
    if gap <= target or first_gap <= target:
        share = 1.0
    else:
        share = np.log(first_gap / gap) / np.log(first_gap / target)
    share = min(max(share, 0.0), 1.0)
    bar = "#" * int(round(width * share))
    sys.stderr.write(
        f"\r[{bar:<{width}}] {100 * share:5.1f}%  iteration {nit}  gap {gap:.3e}  "
        f"target {target:.3e}  {elapsed:.1f} s"
    )
    sys.stderr.flush()


def _result(w, J, lower_bound, nit, nfev, status, bundle, hist, oracle_s, master_s, total):
    return BMRMResult(
        x=np.array(w, copy=True),
        fun=float(J),
        lower_bound=float(lower_bound),
        gap=float(J - lower_bound),
        nit=nit,
        nfev=nfev,
        status=status,
        success=status in (0, 1),
        message=STATUS_MESSAGES[status],
        bundle_size=bundle.size,
        n_aggregations=bundle.n_aggregations,
        history={key: np.asarray(v) for key, v in hist.items()},
        oracle_seconds=oracle_s,
        master_seconds=master_s,
        total_seconds=total,
    )

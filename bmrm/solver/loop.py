"""The bundle-method loop (Teo, Vishwanathan, Smola & Le, JMLR 2010, Algorithm 1).

At iteration t the oracle gives R(w_{t−1}) and a subgradient a_t; the plane
b_t = R(w_{t−1}) − <a_t, w_{t−1}> joins the bundle; the master problem minimises
J_t(w) = lam·Ω(w) + max_{i≤t} (<a_i, w> + b_i), whose optimum lower-bounds min J. The gap
ε_t = min_{i≤t} J(w_{i−1}) − J_t(w_t) is measured from the best iterate, which is returned.

:func:`minimize` runs every solver of :mod:`bmrm.solver.methods` on a
:class:`~bmrm.solver.problem.Problem`: the solver decides where to evaluate, calls the
master problem and keeps the certificate (its protocol: :mod:`bmrm.solver.methods.base`);
the loop checks the gap, keeps the history and stops. :func:`minimize_bmrm` is the same for
a risk oracle and keyword options.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import time
import warnings
from collections.abc import Callable

import numpy as np
from scipy.optimize import OptimizeResult

from bmrm import exceptions
from bmrm._validation import check_minimize_args
from bmrm.io.model_files import HISTORY_FIELDS
from bmrm.solver.compile_clock import CompileClock
from bmrm.solver.masters import SCALE_ADVICE
from bmrm.solver.methods import auto_method, get_method
from bmrm.solver.methods.base import Solver, SolverOptions, State
from bmrm.solver.problem import Problem
from bmrm.solver.regularizers import make_regularizer

__all__ = ["BMRMResult", "minimize", "minimize_bmrm"]

logger = logging.getLogger("bmrm")

STATUS_MESSAGES = {
    0: "converged: relative gap below tol",
    1: "converged: absolute gap below atol",
    2: "stopped: max_iter reached",
    3: "stopped: time budget max_time reached",
    4: "stopped: callback raised StopIteration",
    5: (
        "stationary point: the solver's stopping measure is below tol; not a certified "
        "global optimum (the objective is not convex: no lower bound)"
    ),
}

# the history's columns: those model files keep, and counters
COUNTER_FIELDS = ("nfev", "n_passes")
_COLUMNS = HISTORY_FIELDS + COUNTER_FIELDS
_INT_FIELDS = ("bundle_size", "nfev", "n_passes")


class BMRMResult(OptimizeResult):
    """Result of a bundle-method fit; a :class:`scipy.optimize.OptimizeResult`.

    Attributes
    ----------
    x : ndarray
        The best iterate (lowest J among evaluated points).
    fun : float
        J(x) = lam·Ω(x) + R(x).
    lower_bound : float
        The largest master optimum seen, a lower bound on min_w J(w); NaN for a solver that
        certifies none (``certifies`` False: NRBM on a non-convex risk, L-BFGS, the
        concave-convex procedure).
    gap : float
        ``fun − lower_bound`` ≥ J(x) − min J: a certificate of suboptimality; for a solver
        that certifies none, its own stopping measure.
    nit, nfev : int
        Iterations and oracle calls.
    method : str
        The solver method's name (``"level"``, ``"bmrm"``, ``"ocas"``, ``"nrbm"``, ...; a
        method object's ``name``, else its class name).
    status, message, success :
        Why the loop stopped (0, 1 converged; 2 max_iter; 3 max_time; 4 callback; 5 a
        stationary point of a solver that certifies no gap, NRBM on a non-convex risk).
    bundle_size : int
        Planes held at the end.
    history : dict of ndarray
        Per iteration: objective (the lowest J among the points the iteration evaluated,
        so best_objective is its running minimum), best_objective, lower_bound,
        gap, elapsed (seconds since the fit began), oracle_seconds, master_seconds,
        bundle_size, nfev and n_passes (cumulative).
    n_passes : int
        Passes over X (products X w and Xᵀ g); plain BMRM makes two per oracle call.
    n_cache_cuts : int
        Planes taken from a per-query cut cache instead of an oracle call
        (:mod:`bmrm.solver.cut_cache`); iterations that add one evaluate nothing, so their
        ``history["objective"]`` is inf.
    oracle_seconds, master_seconds, cache_seconds, total_seconds : float
    compile_seconds : float
        Wall-clock seconds spent in numba's compiler during the fit (compiling kernels on
        their first use, or loading them from the on-disk cache), included in the other
        times but not counted against ``max_time``.
    """


@contextlib.contextmanager
def verbose_log(verbose: bool):
    """Within the block, the "bmrm" logger's INFO lines go to stderr when ``verbose``.

    Nested blocks share the outer block's handler (a procedure that runs several solves,
    :mod:`bmrm.solver.cccp`, logs its own lines between theirs without doubling them).
    """
    if not verbose or any(getattr(h, "bmrm_verbose", False) for h in logger.handlers):
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.bmrm_verbose = True
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _scaled_note(master) -> str:
    """For a cvxpy master that had to scale its variables (planes of large magnitude), what
    that means for the gap and what to do."""
    fallback = getattr(master, "fallback", master)
    if not (getattr(fallback, "scaled", False) or getattr(fallback, "rounding_limited", False)):
        return ""
    return (
        f"; the subgradients reached entries of {fallback.sigma:.3g} (features of large "
        f"magnitude), beyond what float64 certifies at this lam: {SCALE_ADVICE}"
    )


def _bundle_note(regularizer, state: State, options: SolverOptions) -> str:
    """For a polyhedral or general regularizer whose bundle was full, what that costs."""
    if regularizer.qp or state.n_aggregations == 0:
        return ""
    return (
        f"; the bundle was full (bundle_size={options.bundle_size}) and its planes were "
        f"merged {state.n_aggregations} times, which slows the lower bound of the master "
        f"problem with regularizer {regularizer!r}: a larger bundle_size may close the gap "
        "in fewer iterations"
    )


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
    full_output: bool = False,
) -> BMRMResult:
    """Minimise J(w) = lam·Ω(w) + R(w) by the bundle method.

    Parameters
    ----------
    oracle : callable
        ``oracle(w) -> (R(w), a)`` with ``a`` a subgradient of the non-negative risk R.
    n_features : int
        The length of w.
    lam : float
        Regularization constant, in [1e-30, 1e12] (see :func:`bmrm.fit`).
    regularizer : Regularizer, {"l2", "l1", "elastic_net"} or callable
        See :func:`bmrm.fit` and :mod:`bmrm.solver.regularizers`.
    l1_ratio : float
        With a regularizer name: the elastic net's mixing.
    lower, upper : float, array_like or None
        With a regularizer name: box constraints on w (None leaves a side open).
    master : {"auto", "qp", "cvxpy"}
        The master problem's solver (see :func:`bmrm.fit`).
    tol, atol : float
        Stop when gap <= tol·J(best) or gap <= atol; tol is in [0, 1) (the gap never
        exceeds J, so tol >= 1 would accept the starting point), atol >= 0.
    max_iter : int
        Iteration cap (warns with :class:`bmrm.ConvergenceWarning` when reached). An
        iteration that takes its plane from a cut cache (:mod:`bmrm.solver.cut_cache`)
        instead of calling the oracle does not count: ``nit`` counts it, ``max_iter``
        bounds ``nit - n_cache_cuts`` (the cache's ``max_streak`` bounds them in a row).
    max_time : float or None
        Time budget in seconds, not counting time spent in numba's compiler (the first fit
        in a new environment compiles the kernels; ``compile_seconds`` in the result says
        how long that took), so a budget buys the same iterations on a first run as later.
    bundle_size, max_idle : int
        Bundle capacity and idle-plane pruning age (see :class:`bmrm.solver.bundle.Bundle`).
    w0 : ndarray or None
        Starting point (warm start); zero by default (projected onto the bounds). Copied,
        unless it is a read-only float64 array (which nothing can change under the solver).
    method : str, object or None
        ``"auto"`` (when None), ``"bmrm"``, ``"inout"``, ``"level"``, ``"ls-bmrm"``,
        ``"ocas"``, ``"nrbm"`` (for non-convex risks, :mod:`bmrm.solver.methods.nrbm`: its
        result certifies a stationary point, not a global optimum), a solver following the
        protocol of :mod:`bmrm.solver.methods.base` (its ``init`` receives the tolerances in
        its options), or an object with only a ``step(state)`` method (run as a certifying
        bundle method; an optional ``finish(result)`` may rename the result's figures).
        ``"auto"`` is :func:`bmrm.solver.methods.auto_method` of the problem (Newton-CG or
        the level method for L2 without bounds, in-out for L1 without bounds, else plain
        BMRM); a latent risk needs :func:`bmrm.solver.cccp.minimize_cccp` (or
        ``method=bmrm.solver.cccp.CCCP(...)``).
    callback : callable or None
        ``callback(intermediate_result)`` after every iteration, the last included (its
        ``status`` then says why the loop stops), with an :class:`BMRMResult` of the current
        state (its history columns are read-only views, so a call costs O(n_features), not
        O(iterations)); raise ``StopIteration`` to stop.
    verbose : bool
        Log one line per iteration to stderr (iteration, J, lower bound, gap, bundle size,
        seconds since the start without numba's compilation, ``compile_seconds``).
    progress : bool
        Show a one-line progress bar on stderr: the share of the way, on a log scale, from
        the first gap to the requested one.
    cvxpy_solver : str or None
        The solver of the cvxpy master problem (see :func:`bmrm.fit`).
    full_output : bool
        Return ``(result, state)``, the solver's final state too (see :func:`minimize`).

    Returns
    -------
    BMRMResult
        Or ``(BMRMResult, state)`` with ``full_output``.

    Raises
    ------
    ValueError
        If the lower bound exceeds the objective of an evaluated point by more than the
        tolerance (tol·J, atol, or rounding: 1e-9·(1 + J), or 100 ε·(1 + J) for an oracle
        whose ``dtype`` has a machine epsilon ε above that, e.g. float32 data): the oracle's
        gradient is then not a subgradient of its risk.
    FloatingPointError
        If the objective overflows.
    """
    options = SolverOptions(
        tol=tol, atol=atol, master=master, bundle_size=bundle_size, max_idle=max_idle,
        cvxpy_solver=cvxpy_solver, max_iter=max_iter, max_time=max_time, callback=callback,
        verbose=verbose, progress=progress,
    )  # fmt: skip
    # bad arguments and a user's oracle's malformed answers raise ValueError naming them
    oracle, lam, w0, options = check_minimize_args(oracle, n_features, lam, w0, options)
    bounds = None if lower is None and upper is None else (lower, upper)
    regularizer = make_regularizer(
        regularizer, l1_ratio=l1_ratio, bounds=bounds, n_features=n_features
    )
    problem = Problem.of(oracle, regularizer, lam, n_features)
    if method is None or (isinstance(method, str) and method == "auto"):
        method = auto_method(regularizer, problem.capabilities)
    return minimize(problem, get_method(method), options, w0=w0, full_output=full_output)


def minimize(
    problem: Problem,
    solver: Solver,
    options: SolverOptions | None = None,
    *,
    w0: np.ndarray | None = None,
    full_output: bool = False,
):
    """Minimise ``problem``'s J(w) = lam·Ω(w) + R(w) by ``solver``, arguments already checked.

    The one loop of every solver (:mod:`bmrm.solver.methods`).

    The solver's ``check`` runs first, then ``init`` at ``w0`` (zero by default, projected
    onto the regularizer's domain) and one ``step`` per iteration until the solver's
    ``stop_gap`` is at most ``options.tol``·J(best) or ``options.atol``,
    ``options.max_iter`` iterations (not counting cut-cache iterations),
    ``options.max_time`` seconds (numba's compilation excluded) or a ``StopIteration`` of
    ``options.callback``. For a certifying solver a lower
    bound above an evaluated objective by more than rounding raises ``ValueError`` (a wrong
    subgradient). The regularizer's clean-up (:meth:`~bmrm.solver.regularizers.Regularizer.clean`)
    then gives the final point, and the solver's ``finish`` its own figures.

    Parameters
    ----------
    problem : Problem
        The problem.
    solver : Solver
        The solver (:mod:`bmrm.solver.methods.base`).
    options : SolverOptions or None
        Tolerances, limits, callback, logging and the bundle methods' options, checked
        (:meth:`SolverOptions.checked`; the defaults when None).
    w0 : ndarray or None
        The start (zero by default); copied unless it is a read-only float64 array.
    full_output : bool
        Return the final state too.

    Returns
    -------
    BMRMResult
        Or ``(BMRMResult, state)`` with ``full_output`` (the solver's final state, for
        example the bundle that :class:`~bmrm.solver.methods.CarriedPlanes` carries on).
    """
    options = SolverOptions() if options is None else options
    tol, atol, max_iter, max_time = options.tol, options.atol, options.max_iter, options.max_time
    callback, verbose, progress = options.callback, options.verbose, options.progress
    solver.check(problem)
    start = time.perf_counter()
    regularizer = problem.regularizer
    clock = CompileClock().__enter__()
    log = verbose_log(verbose)
    log.__enter__()
    try:
        if w0 is None:
            w = np.zeros(problem.n_features)
        elif isinstance(w0, np.ndarray) and w0.dtype == np.float64 and not w0.flags.writeable:
            w = w0  # read-only: nothing can change it under the solver, so it is not copied
        else:
            w = np.array(w0, dtype=np.float64)
        state = solver.init(problem, regularizer.project(w), options)
        certifies = solver.certifies
        hist = _History()
        status, nit = 2, 0
        if verbose:
            logger.info(
                f"{'iter':>5} {'J(best)':>14} {'lower bound':>14} {'gap':>11} {'planes':>6} "
                f"{'seconds':>8}"
            )
        # iterations that take a plane from a cut cache instead of calling the oracle do not
        # count toward max_iter (at most the cache's max_streak of them in a row)
        while nit - state.n_cache_cuts < max_iter:
            nit += 1
            state.nit = nit
            state.last_J = math.inf
            solver.step(state)
            best_J, gap = state.best_J, state.stop_gap
            lower_bound = state.lower_bound if certifies else math.nan
            elapsed = time.perf_counter() - start
            hist.append(
                state.last_J,
                best_J,
                lower_bound,
                gap,
                elapsed,
                state.oracle_seconds,
                state.master_seconds,
                state.bundle_size,
                state.nfev,
                state.n_passes,
            )
            state.check_step(certifies)
            if progress:
                _show_progress(nit, gap, best_J, tol, atol, hist.first_gap, elapsed)
            if verbose:
                logger.info(
                    f"{nit:5d} {best_J:14.8g} {lower_bound:14.8g} {gap:11.4e} "
                    f"{state.bundle_size:6d} {elapsed - clock.current():8.2f}"
                )
            status = state.stop_status(tol, atol)
            if status == 2 and max_time is not None and elapsed - clock.current() >= max_time:
                status = 3
            # after every iteration, the last one included (with its final status)
            if callback is not None:
                try:
                    callback(_result(state, status, hist, elapsed, solver))
                except StopIteration:
                    if status == 2:
                        status = 4
            if status != 2:
                break
        state.settle()
        if state.best_w is not None:
            state.best_w, state.best_J = regularizer.clean(
                state.best_w, state.best_J, lambda v: problem.objective(v, problem.oracle(v)[0])
            )
        total = time.perf_counter() - start
        if progress:
            sys.stderr.write("\n")
        if status == 2:
            gap = state.stop_gap
            cached = f" and {state.n_cache_cuts} cache cuts" if state.n_cache_cuts else ""
            if certifies:
                message = (
                    f"BMRM reached max_iter={max_iter}{cached} with gap {gap:.3e} "
                    f"(relative {gap / max(abs(state.best_J), 1e-300):.3e}, tol={tol})"
                    + _scaled_note(getattr(state, "master", None))
                    + _bundle_note(regularizer, state, options)
                )
            else:
                message = (
                    f"method {solver.name!r} reached max_iter={max_iter}{cached} with its "
                    f"stopping measure at {gap:.3e} (tol={tol}): not yet converged"
                )
            warnings.warn(message, exceptions.ConvergenceWarning, stacklevel=3)
        result = _result(state, status, hist, total, solver)
        result.compile_seconds = clock.seconds
        result = solver.finish(state, result)
        return (result, state) if full_output else result
    finally:
        clock.__exit__(None, None, None)
        log.__exit__(None, None, None)


class _History:
    """Per-iteration columns in arrays that double when full, so that recording an
    iteration and handing the history to a callback (as views) cost O(1)."""

    def __init__(self, capacity: int = 64):
        self._data = np.empty((len(_COLUMNS), capacity))
        self.size = 0

    def append(self, *values) -> None:
        if self.size == self._data.shape[1]:
            data = np.empty((self._data.shape[0], 2 * self.size))
            data[:, : self.size] = self._data
            self._data = data
        self._data[:, self.size] = values
        self.size += 1

    @property
    def first_gap(self) -> float:
        return float(self._data[HISTORY_FIELDS.index("gap"), 0])

    def view(self) -> dict:
        """Read-only views of the recorded columns (integer columns as int64 copies)."""
        out = {}
        for i, key in enumerate(_COLUMNS):
            column = self._data[i, : self.size]
            if key in _INT_FIELDS:
                column = column.astype(np.int64)
            else:
                column = column.view()
                column.flags.writeable = False
            out[key] = column
        return out


def _show_progress(nit, gap, best_J, tol, atol, first_gap, elapsed, width=30):
    target = max(tol * abs(best_J), atol, 1e-300)
    if gap <= target or first_gap <= target:
        share = 1.0
    elif not (math.isfinite(gap) and math.isfinite(first_gap)):
        share = 0.0  # a solver without a stopping measure yet (bmrm.solver.cccp)
    else:
        share = np.log(first_gap / gap) / np.log(first_gap / target)
    share = min(max(share, 0.0), 1.0)
    bar = "#" * int(round(width * share))
    sys.stderr.write(
        f"\r[{bar:<{width}}] {100 * share:5.1f}%  iteration {nit}  gap {gap:.3e}  "
        f"target {target:.3e}  {elapsed:.1f} s"
    )
    sys.stderr.flush()


def _result(state: State, status: int, hist: _History, total: float, solver) -> BMRMResult:
    J = state.best_J
    lower_bound = state.lower_bound if solver.certifies else math.nan
    return BMRMResult(
        x=np.array(state.best_w, copy=True),
        fun=float(J),
        lower_bound=float(lower_bound),
        gap=float(state.stop_gap),
        nit=state.nit,
        nfev=state.nfev,
        n_passes=state.n_passes,
        n_cache_cuts=state.n_cache_cuts,
        status=status,
        success=status in (0, 1, 5),
        message=STATUS_MESSAGES[status],
        bundle_size=state.bundle_size,
        n_aggregations=state.n_aggregations,
        history=hist.view(),
        oracle_seconds=state.oracle_seconds,
        master_seconds=state.master_seconds,
        cache_seconds=state.cache_seconds,
        total_seconds=total,
        method=solver.name,
    )

"""``bmrm.fit``: check the arguments, make the oracle, choose the solver, minimise, and
return a :class:`~bmrm.linear_model.LinearModel`."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import losses
from bmrm._validation import (
    check_bool,
    check_intercept_scaling,
    check_lam,
    check_loss_data,
    check_loss_params,
    check_w0,
    check_X,
    is_dask,
    warn_one_unstated_query,
)
from bmrm.exceptions import interrupt_in
from bmrm.linear_model import LinearModel, _feature_names, load, save
from bmrm.scorers import ExpectedGainScorer, get_scorer
from bmrm.solver.choice import check_regularizer_fits, choose_solver, make_problem
from bmrm.solver.compile_clock import CompileClock
from bmrm.solver.loop import minimize
from bmrm.solver.masters import _cvxpy
from bmrm.solver.methods import SolverOptions, check_method
from bmrm.solver.oracle import RiskOracle
from bmrm.solver.regularizers import Regularizer, make_regularizer
from bmrm.solver.scorer_oracle import ScorerOracle, check_nonconvex
from losses import check_sample_weight

__all__ = ["LinearModel", "fit", "load", "save"]


def _warn_if_nothing_learned(result, loss) -> None:
    """Warn when the fit ended at w = 0 with objective 0.

    Ω(0) = 0 and every loss is non-negative, so J(0) = R(0) = 0 means that w = 0 minimises
    J exactly: the fit is correct, and the model scores every row alike. For the ranking
    losses this happens when no query holds two documents the loss tells apart (all labels
    of each query equal, or for ``"map"`` all on one side of ``threshold``); for a
    regression loss, when every target is zero. A user who meant to learn something has
    passed the wrong labels, and is told so instead of getting a "converged" constant model.
    """
    if result.fun != 0.0 or np.any(result.x):
        return
    name = getattr(loss, "name", "") or type(loss).__name__
    if name == "map":
        why = " (no query has documents on both sides of the relevance threshold)"
    elif name == "squared":
        why = " (every target is 0)"
    elif name == "preference":
        why = " (pairs= holds no pair of positive cost)"
    elif name in losses.available() and not getattr(loss, "pointwise", False):
        why = " (no query has two documents of different labels)"
    else:
        why = ""
    warnings.warn(
        f"the {name} loss is zero at w = 0 on these targets{why}, so w = 0 minimises the "
        "objective and the model scores every row alike: y gives nothing to learn",
        UserWarning,
        stacklevel=3,
    )


def fit(
    X,
    y,
    loss="squared",
    qid=None,
    *,
    lam: float = 1e-3,
    regularizer: str | Callable | Regularizer = "l2",
    l1_ratio: float = 0.5,
    bounds=None,
    nonneg: bool = False,
    fit_intercept: bool = False,
    intercept_scaling: float = 1.0,
    master: str = "auto",
    tol: float = 1e-3,
    atol: float = 0.0,
    max_iter: int = 1000,
    max_time: float | None = None,
    bundle_size: int = 200,
    w0=None,
    method=None,
    callback: Callable | None = None,
    verbose: bool = False,
    progress: bool = False,
    loss_params: dict | None = None,
    cvxpy_solver: str | None = None,
    ranking_function=None,
    backend: str = "local",
    client=None,
    sample_weight=None,
    scorer=None,
    **loss_data,
) -> LinearModel:
    """Fit a linear model by minimising J(w) = lam·Ω(w) + R(w) with the bundle method.

    R(w) is the mean loss: over samples for pointwise losses (squared, hinge, logistic), over
    queries for query losses (degenerate queries count as zeros); with ``sample_weight``, the
    weighted mean. Teo, Vishwanathan, Smola & Le, "Bundle Methods for Regularized Risk
    Minimization", JMLR 11 (2010).

    Parameters
    ----------
    X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
        Dense or CSR, float32 or float64 (never densified or upcast).
    y : array-like of shape (n_samples,)
        Targets: real values (squared), binary labels in {-1, +1} or {0, 1} (hinge,
        logistic), or integer relevance levels (ranking losses).
    loss : str or loss object
        A name from :func:`losses.available` or any object following the loss protocol.
    qid : array-like of shape (n_samples,) or None
        Query id of each row; ``None`` makes all rows one query.
    lam : float
        Regularization constant, in [1e-30, 1e12]: the master minimiser is −Aᵀα/lam, whose
        squared norm times lam must stay within float64, and above 1e12 the solution is
        w ≈ 0 for any data of a usable scale. For the pairwise ordinal loss with
        ``normalize="none"``, ``lam = 1/C`` reproduces SVM^rank's ``-c C``.
    regularizer : {"l2", "l1", "elastic_net"}, callable or Regularizer
        Ω(w) = ½‖w‖², ‖w‖₁, or l1_ratio·‖w‖₁ + (1 − l1_ratio)·½‖w‖²; a callable maps a
        cvxpy variable to a convex expression (solved with the cvxpy master); or an object
        of :mod:`bmrm.solver.regularizers` (``L2()``, ``L1()``, ``ElasticNet(0.3)``, ...).
    l1_ratio : float in [0, 1]
        The elastic net's mixing (with ``regularizer="elastic_net"``).
    bounds : (lower, upper) or None
        Box constraints on w (scalars, arrays or None); ``nonneg=True`` is (0, None).
    nonneg : bool
        The box (0, None): every weight non-negative.
    fit_intercept : bool
        Fit an intercept as the weight of a constant feature ``intercept_scaling``,
        regularized with the rest.
    intercept_scaling : float
        The value of that constant feature when ``fit_intercept``: finite, > 0 and at most
        1e150 (its square enters the planes' inner products of the master problem, which
        must stay far from float64's overflow at 1.8e308); ignored otherwise.
    master : {"auto", "qp", "cvxpy"}
        "qp" is the dedicated dual solver (L2 without bounds; the "auto" choice there),
        "cvxpy" the general model.
    tol, atol : float
        Stop when the gap is at most tol·J(best) or at most atol. ``tol`` is a relative gap
        in [0, 1): the lower bound is >= 0, so the gap never exceeds J and tol >= 1 would
        accept the starting point; ``atol`` >= 0.
    max_iter : int
        Iteration cap; reaching it warns with :class:`bmrm.ConvergenceWarning`. Iterations
        that take a plane from the cut cache instead of calling the oracle do not count
        (see :func:`bmrm.solver.loop.minimize_bmrm`).
    max_time : float or None
        Time budget in seconds, not counting time spent in numba's compiler: the first fit
        in a new environment compiles the loss and solver kernels (or, later, loads them
        from numba's cache), and ``result_.compile_seconds`` reports how long that took.
        So a budget buys the same iterations on a first run as on later runs.
    bundle_size : int
        Bundle capacity (zero plane included); a full bundle prunes or aggregates planes.
    w0 : array-like or None
        Warm start (with the intercept last when ``fit_intercept``).
    method : str, object or None
        "auto", "bmrm", "inout", "level", "ls-bmrm", "newton", "ocas", "nrbm" or "lbfgs":
        the solver method (:mod:`bmrm.solver.methods`): plain BMRM (with the per-query cut
        cache where it applies, :class:`~bmrm.solver.methods.PlainBMRM`), in-out cutting planes,
        the level bundle method, line-search BMRM, Newton-CG
        (:mod:`bmrm.solver.methods.newton`: L2 without bounds and a convex smooth loss with
        ``hessp``; its gap is the strong-convexity bound ‖∇J‖²/(2 lam)), or the optimized
        cutting plane algorithm (OCAS), or any object with a ``step(state)`` method.
        ``"auto"`` (also None) is Newton-CG where it applies, else the
        level bundle method for ``regularizer="l2"`` without bounds (it needs the fewest
        oracle calls, most of all at small lam and on costly losses), in-out cutting planes
        for ``regularizer="l1"`` without bounds (3.3–3.6 times less time than plain BMRM on
        MQ2008, ``experiments/bench_l1.py``) and plain BMRM otherwise
        (:func:`bmrm.solver.methods.auto_method`).
        For a non-convex objective (a non-linear scorer, or a loss with ``convex = False``
        such as "warp" or "cosine") only ``"nrbm"`` (:mod:`bmrm.solver.methods.nrbm`, any loss) and
        ``"lbfgs"`` (smooth objectives) are valid; ``"auto"`` is L-BFGS where the objective
        is smooth and NRBM otherwise (see ``experiments/bench_nonconvex.py``). For a latent
        loss ("ndcg", "neru" with ``ties="latent"``) ``"nrbm"`` replaces the concave-convex
        procedure; for a convex loss it runs as a certified bundle method.
    callback : callable or None
        Called with an intermediate :class:`bmrm.BMRMResult` after each iteration, the last
        included (for ``method="lbfgs"``, an ``OptimizeResult`` with ``x``, ``fun``, ``nit``);
        raise ``StopIteration`` to stop.
    verbose : bool
        One line per iteration on stderr.
    progress : bool
        A one-line progress bar on stderr (log-scale share of the way to the requested gap).
    loss_params : dict or None
        Parameters for a loss given by name, as ``losses.get(loss, **loss_params)``.
    cvxpy_solver : str or None
        The solver of the cvxpy master problem (cvxpy's choice when None).
    ranking_function : None, "linear", "expected_gain" or a scorer object
        The ranking function (:mod:`bmrm.scorers`); None is f = Xw. With a non-linear
        ranking function, or a loss declaring ``convex = False``, the objective
        lam/2‖θ‖² + R(θ) is not convex: it is minimised by L-BFGS or NRBM (see ``method``;
        :func:`bmrm.solver.choice.choose_solver`, ``regularizer="l2"``, no bounds or
        intercept), warm-started from the linear model of the same loss
        (:meth:`bmrm.solver.scorer_oracle.ScorerOracle.warm_start`,
        ``result_.linear_start``). ``result_`` is then a :class:`BMRMResult` of L-BFGS
        (``tol`` its largest gradient entry, reported as ``gap``) or one with status 5 at a
        stationary point (NRBM; ``tol`` its relative stationarity gap, reported as
        ``gap``): neither certifies a global optimum, and ``lower_bound`` is NaN.
    backend : {"local", "dask"}
        "dask" evaluates the risk on the workers of ``client`` (see
        :class:`bmrm.distributed.DaskRiskOracle`): X may then also be a dask array or dask
        DataFrame (with ``y`` and ``qid`` dask arrays, Series or column names of X), whose
        partitions must hold whole queries; in-memory X is cut at query boundaries and sent
        to the workers. The master problem is solved here. Latent losses go through the
        concave-convex procedure there too, each partition fixing its own latent part.
    client : distributed.Client or None
        The Dask client for ``backend="dask"``; None uses Dask's default client (the
        ``distributed.Client`` created last, or that of a ``with Client(...)`` block).
    sample_weight : array-like of shape (n_samples,) or None
        Non-negative weights, one per row, not all zero: R(w) becomes the weighted mean
        Σ_t s_t l_t(w) / Σ_t s_t of the loss's terms, so an integer weight counts a row that
        many times and a zero weight leaves it out. A query loss weighs whole queries: the
        rows of a query must carry equal weights (its weight). With ``backend="dask"``, like
        ``y`` (for dask X a dask array, Series or column name of X).
    scorer : deprecated
        The former name of ``ranking_function`` (scikit-learn's word for a metric
        callable); it still works, with a ``FutureWarning``, for one release.
    **loss_data
        Loss-specific data, for example ``pairs=`` and ``pair_costs=`` for "preference"
        (with ``backend="dask"``, for in-memory X only).

    Returns
    -------
    LinearModel
        With ``coef_``, ``intercept_``, ``predict`` and ``result_`` (a :class:`BMRMResult`).
        A loss with a latent part (``loss.latent``, the "ndcg" and "neru" losses with
        ``ties="latent"``) is trained by the concave-convex procedure
        (:class:`bmrm.solver.cccp.CCCP`), whose result adds ``n_outer``,
        ``outer_objective`` and the history's ``outer`` and ``inner_gap`` columns, and
        certifies no lower bound (NaN).
    """
    ranking_function = _renamed(ranking_function, scorer)
    data = _check_data(X, y, qid, sample_weight, backend, client)
    lam = check_lam(lam)
    options = SolverOptions(
        tol=tol, atol=atol, master=master, bundle_size=bundle_size, cvxpy_solver=cvxpy_solver,
        max_iter=max_iter, max_time=max_time, callback=callback, verbose=verbose,
        progress=progress,
    ).checked()  # fmt: skip
    # a name, or an object with step (not a class), before the targets are prepared
    check_method(method)
    nonneg = check_bool(nonneg, "nonneg")
    fit_intercept = check_bool(fit_intercept, "fit_intercept")
    check_loss_params(loss_params)
    # the general master needs cvxpy (an extra): an ImportError that says how to install
    # it, before any work (the lengths of array bounds are checked below, against X)
    general = not make_regularizer(
        regularizer, l1_ratio=l1_ratio, bounds=bounds, nonneg=nonneg, n_features=None
    ).qp
    if options.master == "cvxpy" or general:
        _cvxpy()
    if fit_intercept:
        intercept_scaling = check_intercept_scaling(intercept_scaling)
    loss_obj = losses.get(loss, **(loss_params or {}))
    check_loss_data(loss_obj, loss_data, FIT_KEYWORDS, "fit")
    warn_one_unstated_query(loss_obj, qid, X)
    oracle = None
    try:
        if backend == "dask":
            oracle = _dask_oracle(
                data, loss_obj, ranking_function, fit_intercept, intercept_scaling, loss_data
            )
            data.n_features = oracle.n_features - int(fit_intercept)
        d = data.n_features + int(fit_intercept)
        regularizer_obj = make_regularizer(
            regularizer, l1_ratio=l1_ratio, bounds=bounds, nonneg=nonneg, n_features=d
        )
        _check_solver_fits(options, method, regularizer_obj)
        # a non-linear ranking function or a non-convex loss: what its solvers support
        function, method = _check_ranking_function(
            ranking_function, loss_obj, data.y, (regularizer, bounds, nonneg, fit_intercept),
            method,
        )  # fmt: skip
        n_params = d if function is None else function.n_params(data.n_features)
        w0 = _check_start(w0, d, n_params, fit_intercept, function)
        clock = CompileClock()
        if backend == "local":
            with clock:
                oracle = _local_oracle(
                    data, loss_obj, function, loss_data, fit_intercept, intercept_scaling
                )
        problem = make_problem(oracle, regularizer_obj, lam, n_params)
        result = minimize(problem, choose_solver(method, problem, w0 is None), options, w0=w0)
        # compilation while preparing the targets, outside the solver's own clock
        result.compile_seconds = result.get("compile_seconds", 0.0) + clock.seconds
        w, n = result.x, data.n_features
        coef = w[:n] if function is None or function.name == "linear" else w.reshape(-1, n)
        intercept = w[n] * intercept_scaling if fit_intercept else 0.0
        model = LinearModel(coef, intercept, loss_obj, lam, regularizer_obj, result, function)
        return _finished(model, data.feature_names)
    except BaseException as exc:
        # a fit refused or failed on the workers releases the partitions it built there
        # (futures that a traceback would otherwise keep alive until the client closes)
        if hasattr(oracle, "cancel"):
            oracle.cancel()
        # a Ctrl-C that surfaced as numba's SystemError is raised as the interrupt it is
        interrupt = interrupt_in(exc)
        if interrupt is not None:
            raise interrupt from exc
        raise


# the keywords of fit, for the closest name to a misspelt one (bmrm._validation)
FIT_KEYWORDS = tuple(
    name
    for name, p in inspect.signature(fit).parameters.items()
    if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
)


def _renamed(ranking_function, scorer):
    """``ranking_function``, or the deprecated ``scorer`` with a FutureWarning."""
    if scorer is None:
        return ranking_function
    if ranking_function is not None:
        raise ValueError("give ranking_function= only (scorer= is its former name)")
    warnings.warn(
        "fit's scorer= is renamed ranking_function= (scikit-learn's 'scorer' is a metric "
        "callable); scorer= will be removed in a future release",
        FutureWarning,
        stacklevel=3,
    )
    return scorer


def _finished(model: LinearModel, feature_names) -> LinearModel:
    """The fitted model with the DataFrame's column names, warned about when the targets
    gave nothing to learn."""
    _warn_if_nothing_learned(model.result_, model.loss)
    if feature_names is not None:
        model.feature_names_in_ = feature_names
    return model


@dataclass
class _Data:
    """:func:`fit`'s data, checked: X, y, qid and sample_weight (in memory, or Dask
    collections or column names for the Dask backend), the Dask client, the DataFrame's
    feature names, and the shape (in memory; the Dask oracle gives ``n_features``)."""

    X: object
    y: object
    qid: object
    sample_weight: object
    client: object
    feature_names: np.ndarray | None
    n_samples: int | None = None
    n_features: int | None = None


def _check_data(X, y, qid, sample_weight, backend: str, client) -> _Data:
    """The data of a fit, checked before any work (module :func:`fit`)."""
    if backend not in ("local", "dask"):
        raise ValueError(f"backend must be 'local' or 'dask'; got {backend!r}")
    if backend == "dask":
        from bmrm.distributed import resolve_client

        client = resolve_client(client)
        feature_names = None
        if hasattr(X, "columns"):
            # the DataFrame's feature columns: all but those named as y, qid, sample_weight
            named = {v for v in (y, qid, sample_weight) if isinstance(v, str)}
            names = [c for c in X.columns if c not in named]
            if names and all(isinstance(c, str) for c in names):
                feature_names = np.asarray(names, dtype=object)
        return _Data(X, y, qid, sample_weight, client, feature_names)
    if client is not None:
        raise ValueError(
            "client is used with backend='dask' only: pass backend='dask' to fit on its "
            "workers, or leave client=None"
        )
    for name, value in (("X", X), ("y", y), ("qid", qid), ("sample_weight", sample_weight)):
        if is_dask(value):
            raise ValueError(
                f"{name} is a dask {type(value).__name__}: pass backend='dask' (and "
                "client=...) to fit on the Dask workers, or compute it first for a fit "
                "in this process"
            )
    feature_names = _feature_names(X)
    X = check_X(X)
    n_samples, n_features = X.shape
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n_samples:
        raise ValueError(
            f"y must be 1-d with one entry per row of X ({n_samples}); got shape {y.shape}"
        )
    if y.dtype.kind in "biuf" and not np.all(np.isfinite(y.astype(np.float64))):
        raise ValueError("y must not contain NaN or inf")
    if sample_weight is not None:
        # its shape and values now, before any work; its equality within queries when
        # the targets are prepared
        check_sample_weight(sample_weight, losses.group_queries(None, n_samples), True)
    return _Data(X, y, qid, sample_weight, None, feature_names, n_samples, n_features)


def _check_ranking_function(ranking_function, loss, y, model_options, method):
    """The ranking function (None for f = Xw with a convex or latent loss) and the method,
    checked before any work: a non-linear ranking function or a loss that is not convex
    needs ``regularizer="l2"`` without bounds or intercept (``model_options``, fit's
    ``(regularizer, bounds, nonneg, fit_intercept)``) and L-BFGS or NRBM
    (:func:`~bmrm.solver.scorer_oracle.check_nonconvex`)."""
    if ranking_function is not None:
        ranking_function = get_scorer(ranking_function)
    if getattr(ranking_function, "name", None) == "linear":
        ranking_function = None
    # a latent loss is not convex, but the concave-convex procedure trains it
    if ranking_function is None and (
        getattr(loss, "convex", True) or getattr(loss, "latent", False)
    ):
        return None, method
    if isinstance(ranking_function, ExpectedGainScorer):
        ranking_function.check_labels(y)
    return check_nonconvex(ranking_function, loss, y, *model_options, method)


def _local_oracle(data: _Data, loss, function, loss_data, fit_intercept, intercept_scaling):
    """The risk oracle in this process: of f = Xw (:class:`~bmrm.solver.oracle.RiskOracle`)
    or of a ranking function (:class:`~bmrm.solver.scorer_oracle.ScorerOracle`)."""
    prepared = losses.prepare(
        loss, data.y, data.qid, n_samples=data.n_samples, sample_weight=data.sample_weight,
        **loss_data,
    )  # fmt: skip
    if function is None:
        return RiskOracle(data.X, prepared, fit_intercept, intercept_scaling)
    return ScorerOracle(data.X, prepared, function, data.y)


def _check_solver_fits(options: SolverOptions, method, regularizer: Regularizer) -> None:
    """Refuse a master or method that cannot solve ``regularizer``, before any work."""
    if options.master == "qp" and not regularizer.qp:
        raise ValueError(
            "master='qp' solves the unconstrained L2 problem only; use master='cvxpy' "
            f"for regularizer={regularizer!r}"
        )
    check_regularizer_fits(method, regularizer)


def _check_start(w0, d: int, n_params: int, fit_intercept: bool, function):
    """w0 checked: d weights, or a non-linear ranking function's n_params, or d linear
    weights that the ranking function's ``from_linear`` maps to its parameters."""
    if w0 is None:
        return None
    shape = np.shape(w0)
    if n_params != d and shape not in ((d,), (n_params,)):
        raise ValueError(
            f"w0 must have shape ({d},) (a linear warm start) or ({n_params},) (the "
            f"scorer's parameters); got shape {shape}"
        )
    if shape == (d,) and n_params != d:
        return function.from_linear(check_w0(w0, d, fit_intercept))
    return check_w0(w0, n_params, fit_intercept)


def _dask_oracle(data: _Data, loss, ranking_function, fit_intercept, intercept_scaling, loss_data):
    """The risk oracle on the Dask workers (:class:`bmrm.distributed.DaskRiskOracle`)."""
    if ranking_function is not None and ranking_function != "linear":
        raise ValueError(
            "backend='dask' fits the linear scorer only (ranking_function=None or 'linear')"
        )
    if not (getattr(loss, "convex", True) or getattr(loss, "latent", False)):
        raise ValueError(
            f"backend='dask' fits convex losses and latent ones (by the concave-convex "
            f"procedure); {loss!r} is neither"
        )
    from bmrm.distributed import DaskRiskOracle

    return DaskRiskOracle(
        data.client, data.X, data.y, loss, data.qid, fit_intercept=fit_intercept,
        intercept_scaling=intercept_scaling, sample_weight=data.sample_weight, **loss_data,
    )  # fmt: skip

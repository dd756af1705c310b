"""``bmrm.fit`` and the linear model it returns."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import losses
from bmrm._validation import check_int, check_positive, check_X
from bmrm.solver.compile_clock import CompileClock
from bmrm.solver.loop import BMRMResult, minimize_bmrm
from bmrm.solver.oracle import RiskOracle

__all__ = ["LinearModel", "fit", "REGULARIZERS"]

REGULARIZERS = ("l2", "l1", "elastic_net")


class LinearModel:
    """A fitted linear scorer f(x) = <coef_, x> + intercept_.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
        0 unless fitted with ``fit_intercept=True``.
    loss : loss object
    lam : float
    regularizer : str or callable
    result_ : BMRMResult
        The solver's certificate and history.
    n_features_in_ : int
    """

    def __init__(self, coef, intercept, loss, lam, regularizer, result):
        self.coef_ = np.asarray(coef, dtype=np.float64)
        self.intercept_ = float(intercept)
        self.loss = loss
        self.lam = lam
        self.regularizer = regularizer
        self.result_ = result
        self.n_features_in_ = len(self.coef_)

    def decision_function(self, X) -> np.ndarray:
        """Scores X @ coef_ + intercept_ (float64)."""
        X = check_X(X, n_features=self.n_features_in_)
        f = X @ self.coef_.astype(X.dtype, copy=False)
        return np.asarray(f, dtype=np.float64).ravel() + self.intercept_

    def predict(self, X) -> np.ndarray:
        """The scores; rank documents of a query by decreasing score."""
        return self.decision_function(X)

    def save(self, path) -> None:
        """Write a portable model file (arrays plus JSON metadata, no pickle)."""
        from bmrm.io.model_files import save_model

        save_model(self, path)

    def __repr__(self) -> str:
        return (
            f"LinearModel(n_features={self.n_features_in_}, loss={self.loss!r}, "
            f"lam={self.lam!r}, status={self.result_.status if self.result_ else None})"
        )


def _check_bounds(bounds, nonneg, n_features):
    if nonneg:
        if bounds is not None:
            raise ValueError("give either nonneg=True or bounds, not both")
        return 0.0, None
    if bounds is None:
        return None, None
    if not isinstance(bounds, tuple | list) or len(bounds) != 2:
        raise ValueError(f"bounds must be a pair (lower, upper); got {bounds!r}")
    out = []
    for value, side in zip(bounds, ("lower", "upper"), strict=True):
        if value is None:
            out.append(None)
            continue
        arr = np.asarray(value, dtype=np.float64)
        if arr.ndim not in (0, 1) or (arr.ndim == 1 and arr.shape[0] != n_features):
            raise ValueError(
                f"bounds {side} must be a scalar or have one entry per weight ({n_features}); "
                f"got shape {arr.shape}"
            )
        if np.any(np.isnan(arr)):
            raise ValueError(f"bounds {side} must not contain NaN")
        out.append(arr)
    if out[0] is not None and out[1] is not None and np.any(out[0] > out[1]):
        raise ValueError("bounds lower must not exceed upper")
    return out[0], out[1]


def fit(
    X,
    y,
    loss="squared",
    qid=None,
    *,
    lam: float = 1e-3,
    regularizer: str | Callable = "l2",
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
    **loss_data,
) -> LinearModel:
    """Fit a linear model by minimising J(w) = lam·Ω(w) + R(w) with the bundle method.

    R(w) is the mean loss: over samples for pointwise losses (squared, hinge, logistic), over
    queries for query losses (degenerate queries count as zeros). Teo, Vishwanathan, Smola &
    Le, "Bundle Methods for Regularized Risk Minimization", JMLR 11 (2010).

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
        Regularization constant, > 0. For the pairwise ordinal loss with
        ``normalize="none"``, ``lam = 1/C`` reproduces SVM^rank's ``-c C``.
    regularizer : {"l2", "l1", "elastic_net"} or callable
        Ω(w) = ½‖w‖², ‖w‖₁, or l1_ratio·‖w‖₁ + (1 − l1_ratio)·½‖w‖²; a callable maps a
        cvxpy variable to a convex expression (solved with the cvxpy master).
    bounds : (lower, upper) or None
        Box constraints on w (scalars, arrays or None); ``nonneg=True`` is (0, None).
    fit_intercept : bool
        Fit an intercept as the weight of a constant feature ``intercept_scaling``,
        regularized with the rest.
    master : {"auto", "qp", "cvxpy"}
        "qp" is the dedicated dual solver (L2 without bounds; the "auto" choice there),
        "cvxpy" the general model.
    tol, atol : float
        Stop when the gap is at most tol·J(best) or at most atol.
    max_iter : int
        Iteration cap; reaching it warns with :class:`bmrm.ConvergenceWarning`.
    max_time : float or None
        Time budget in seconds, not counting time spent in numba's compiler: the first fit
        in a new environment compiles the loss and solver kernels (or, later, loads them
        from numba's cache), and ``result_.compile_seconds`` reports how long that took.
        So a budget buys the same iterations on a first run as on later runs.
    bundle_size : int
        Bundle capacity (zero plane included); a full bundle prunes or aggregates planes.
    w0 : array-like or None
        Warm start (with the intercept last when ``fit_intercept``).
    method : object or None
        Where to evaluate next and which extra cuts to add; plain BMRM when None.
    callback : callable or None
        Called with an intermediate :class:`bmrm.BMRMResult` after each iteration; raise
        ``StopIteration`` to stop.
    verbose : bool
        One line per iteration on stderr.
    progress : bool
        A one-line progress bar on stderr (log-scale share of the way to the requested gap).
    loss_params : dict or None
        Parameters for a loss given by name, as ``losses.get(loss, **loss_params)``.
    **loss_data
        Loss-specific data, for example ``pairs=`` and ``pair_costs=`` for "preference".

    Returns
    -------
    LinearModel
        With ``coef_``, ``intercept_``, ``predict`` and ``result_`` (a :class:`BMRMResult`).
    """
    X = check_X(X)
    n_samples, n_features = X.shape
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n_samples:
        raise ValueError(
            f"y must be 1-d with one entry per row of X ({n_samples}); got shape {y.shape}"
        )
    if y.dtype.kind in "biuf" and not np.all(np.isfinite(y.astype(np.float64))):
        raise ValueError("y must not contain NaN or inf")
    lam = check_positive(lam, "lam")
    tol = check_positive(tol, "tol", strict=False)
    atol = check_positive(atol, "atol", strict=False)
    max_iter = check_int(max_iter, "max_iter", 1)
    bundle_size = check_int(bundle_size, "bundle_size", 3)
    if max_time is not None:
        max_time = check_positive(max_time, "max_time")
    if not (callable(regularizer) or regularizer in REGULARIZERS):
        raise ValueError(
            f"regularizer must be one of {REGULARIZERS} or a callable; got {regularizer!r}"
        )
    if not 0.0 <= l1_ratio <= 1.0:
        raise ValueError(f"l1_ratio must lie in [0, 1]; got {l1_ratio!r}")
    if master not in ("auto", "qp", "cvxpy"):
        raise ValueError(f"master must be 'auto', 'qp' or 'cvxpy'; got {master!r}")
    d = n_features + int(fit_intercept)
    lower, upper = _check_bounds(bounds, nonneg, d)
    if w0 is not None:
        w0 = np.asarray(w0, dtype=np.float64)
        if w0.shape != (d,) or not np.all(np.isfinite(w0)):
            raise ValueError(f"w0 must be a finite array of shape ({d},); got shape {w0.shape}")
    loss_obj = losses.get(loss, **(loss_params or {}))
    with CompileClock() as clock:
        prepared = losses.prepare(loss_obj, y, qid, n_samples=n_samples, **loss_data)
    oracle = RiskOracle(X, prepared, fit_intercept, intercept_scaling)
    result: BMRMResult = minimize_bmrm(
        oracle,
        d,
        lam,
        regularizer=regularizer,
        l1_ratio=l1_ratio,
        lower=lower,
        upper=upper,
        master=master,
        tol=tol,
        atol=atol,
        max_iter=max_iter,
        max_time=max_time,
        bundle_size=bundle_size,
        w0=w0,
        method=method,
        callback=callback,
        verbose=verbose,
        progress=progress,
        cvxpy_solver=cvxpy_solver,
    )
    result.compile_seconds += clock.seconds
    w = result.x
    coef = w[:n_features]
    intercept = w[n_features] * intercept_scaling if fit_intercept else 0.0
    return LinearModel(coef, intercept, loss_obj, lam, regularizer, result)

"""Ordinal regression: a ranking score from the ordinal loss, then optimal thresholds."""

from __future__ import annotations

import numpy as np
from numba import njit
from sklearn.metrics import accuracy_score, mean_absolute_error
from sklearn.utils._param_validation import HasMethods, StrOptions
from sklearn.utils.validation import validate_data

import losses
from bmrm.estimators.linear import _DTYPES, _BMRMEstimator, _is_dask
from losses import check_sample_weight
from losses.validation import MAX_LEVEL

__all__ = ["OrdinalRegressor", "optimal_thresholds"]


class OrdinalRegressor(_BMRMEstimator):
    """Ordinal regression: a ranking score from the ordinal loss, then optimal thresholds.

    1. Fit w by minimising lam·Ω(w) + (1/M) Σ_{y_i < y_j} C(y_i, y_j) max(0, 1 + f_i − f_j)
       over all M comparable pairs of the training set (:class:`losses.ordinal.OrdinalLoss`
       with all rows as one query; its O(m log m) oracle makes that practical).
    2. On the training scores f, choose thresholds θ_1 <= ... <= θ_{K−1} minimising the
       training MAE Σ_i |pred_i − y_i| (or the number of errors), exactly, by dynamic
       programming over the sorted distinct scores: O(n log n + n·K) time, O(G·K) memory
       for G distinct scores. Rows with equal scores always share a prediction.

    A row with score f is predicted ``classes_[k]``, k = #{j : θ_j < f}. Each θ_j lies
    midway between the last training score predicted at or below level j and the next
    one (±inf when no training row falls on one side: that level is never predicted).

    Parameters
    ----------
    lam : float, default=1e-3
        Regularization constant, > 0.
    cost : {"zero_one", "linear"}, default="zero_one"
        Pair cost C(a, b): 1, or b − a (the label difference).
    threshold_method : {"mae", "zero_one"}, default="mae"
        What the thresholds minimise on the training set: the absolute error of the
        predicted label (in label units), or the number of wrong labels.
    regularizer : {"l2", "l1", "elastic_net"}, default="l2"
        As in :class:`BMRMRanker`.
    l1_ratio : float in [0, 1], default=0.5
        As in :class:`BMRMRanker`.
    tol : float, default=1e-3
        As in :class:`BMRMRanker`.
    max_iter : int, default=1000
        As in :class:`BMRMRanker`.
    bundle_size : int, default=200
        As in :class:`BMRMRanker`.
    warm_start : bool, default=False
        As in :class:`BMRMRanker`.
    verbose : bool, default=False
        As in :class:`BMRMRanker`.
    backend : {"local", "dask"}, default="local"
        Only ``"local"`` fits: ``"dask"`` raises ``ValueError`` before any work. The loss of
        step 1 is one query of all rows, and the Dask risk is exact only as a sum over
        partitions of whole queries (:mod:`bmrm.distributed`), so it cannot be split. Fit
        on one machine (NumPy or SciPy X; a dask X after ``X.compute()``), or, when the
        rows only need ordering within groups, use ``BMRMRanker(loss="ordinal",
        backend="dask")`` with a qid per group.
    client : distributed.Client or None, default=None
        Taken for the interface of the other estimators (code that passes
        ``backend="dask", client=...`` to each gets the refusal above, not a TypeError);
        never used.

    Attributes
    ----------
    classes_ : ndarray of shape (K,)
        The sorted distinct training labels (integers, not necessarily contiguous), of y's
        dtype: :meth:`predict` returns them, so int8 labels predict int8 and a bool y bool.
    model_ : bmrm.LinearModel
        The fitted scorer (:meth:`decision_function` and :meth:`save`).
    coef_ : ndarray of shape (n_features,)
    thresholds_ : ndarray of shape (K − 1,)
        Non-decreasing, possibly ±inf.
    result_ : bmrm.BMRMResult
    n_iter_ : int
    n_features_in_ : int

    Notes
    -----
    :meth:`score` is the negative mean absolute error (higher is better, as scikit-learn's
    ``"neg_mean_absolute_error"`` scorer and mord's ``LogisticAT.score``), the measure
    ordinal regression is usually judged by; :meth:`mae` and :meth:`accuracy` give the MAE
    and the fraction of exact labels.

    References
    ----------
    Teo, Vishwanathan, Smola & Le, JMLR 11 (2010), ranking appendix (the ordinal loss).
    Chu & Keerthi, "New approaches to support vector ordinal regression", ICML 2005 (the
    benchmark data sets and MAE / error-rate evaluation).
    """

    _parameter_constraints: dict = {
        **_BMRMEstimator._parameter_constraints,
        "cost": [StrOptions({"zero_one", "linear"})],
        "threshold_method": [StrOptions({"mae", "zero_one"})],
        "backend": [StrOptions({"local", "dask"})],
        "client": [HasMethods(["submit", "gather"]), None],
    }

    def __init__(
        self,
        *,
        lam: float = 1e-3,
        cost: str = "zero_one",
        threshold_method: str = "mae",
        regularizer: str = "l2",
        l1_ratio: float = 0.5,
        tol: float = 1e-3,
        max_iter: int = 1000,
        bundle_size: int = 200,
        warm_start: bool = False,
        verbose: bool = False,
        backend: str = "local",
        client=None,
    ):
        self.lam = lam
        self.cost = cost
        self.threshold_method = threshold_method
        self.regularizer = regularizer
        self.l1_ratio = l1_ratio
        self.tol = tol
        self.max_iter = max_iter
        self.bundle_size = bundle_size
        self.warm_start = warm_start
        self.verbose = verbose
        self.backend = backend
        self.client = client

    def fit(self, X, y, sample_weight=None) -> OrdinalRegressor:
        """Fit on X and integer ordinal labels y (any integers; order is numeric).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The features (NumPy or SciPy; dask input is refused, see ``backend``).
        y : array-like of shape (n_samples,)
            Labels of any integer dtype, float (integral values), or bool (two levels,
            False < True), within ±2**53; ``classes_`` and the predictions keep y's dtype.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            One non-negative weight per row, not all zero: row i counts as s_i rows. The
            ordinal loss weighs each pair by s_i s_j (its ``row_weight``) and the thresholds
            minimise the weighted training MAE (error count), so integer weights fit as the
            data with rows repeated would.

        Returns
        -------
        OrdinalRegressor
            This estimator, fitted.
        """
        self._validate_params()
        self._check_one_machine(X, y)
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=_DTYPES, y_numeric=True)
        if sample_weight is not None:
            check_sample_weight(sample_weight, losses.group_queries(None, len(y)), True)
            sample_weight = np.asarray(sample_weight, dtype=np.float64)
        if y.dtype.kind not in "biuf" or np.any(y != np.round(y)):
            raise ValueError("y must hold integer ordinal levels (numbers like 1, 2, 5)")
        # checked before the int64 cast below, which would wrap larger labels around, and
        # against both bounds: np.abs wraps -2**63 around to itself
        big = (y < -MAX_LEVEL) | (y > MAX_LEVEL)
        if np.any(big):
            raise ValueError(
                "y must hold integer ordinal levels within ±2**53 (exact integers in "
                f"float64); got {float(y[big][0])!r}"
            )
        classes = np.unique(y)
        # differences in int64, exact for these labels (|y| <= 2**53), never in y's own
        # dtype: int8 labels -100 and 100 differ by 200, which int8 wraps around to -56;
        # a bool y counts False < True as 0 < 1 (and numpy does not subtract bools)
        low, high = (int(v) for v in classes[[0, -1]])
        if high - low > MAX_LEVEL:
            raise ValueError(
                "y must hold integer ordinal levels spanning at most 2**53 (from the lowest "
                f"to the highest); got {float(classes[0])!r} to {float(classes[-1])!r}"
            )
        levels = classes.astype(np.int64) - low
        y_level = y.astype(np.int64) - low
        data = {} if sample_weight is None else {"row_weight": sample_weight}
        model = self._solve(X, y_level, losses.get("ordinal", cost=self.cost), **data)
        f = model.decision_function(X)
        self.thresholds_ = optimal_thresholds(
            f, y_level, levels.astype(np.float64), self.threshold_method, sample_weight
        )
        self.classes_ = classes
        return self

    def _check_one_machine(self, X, y) -> None:
        """Raise when asked to fit on Dask (``backend="dask"`` or dask input): the loss is one
        query of all rows, which partitions of whole queries cannot split exactly."""
        lazy = [name for name, v in (("X", X), ("y", y)) if _is_dask(v)]
        if self.backend != "dask" and not lazy:
            return
        why = (
            "its loss compares every pair of rows with different labels in the whole "
            "training set (one query of all rows), and the Dask risk is exact only as a sum "
            "over partitions of whole queries, so it cannot be split across workers"
        )
        what = (
            "fit on one machine with NumPy or SciPy data (a dask collection after "
            ".compute()), or, if rows only need ordering within groups, use "
            "BMRMRanker(loss='ordinal', backend='dask') with a qid per group"
        )
        if self.backend == "dask":
            raise ValueError(f"OrdinalRegressor cannot fit with backend='dask': {why}; {what}")
        kind = "is a dask collection" if len(lazy) == 1 else "are dask collections"
        raise ValueError(
            f"{' and '.join(lazy)} {kind}: OrdinalRegressor fits on one machine ({why}); {what}"
        )

    def decision_function(self, X) -> np.ndarray:
        """Return the ordinal scores X @ coef_ (higher means a higher level).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The features.

        Returns
        -------
        ndarray of shape (n_samples,)
            The scores, float64.
        """
        return self._scores(X)

    def predict(self, X) -> np.ndarray:
        """Return ``classes_[k]``, k the number of thresholds strictly below the score.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The features.

        Returns
        -------
        ndarray of shape (n_samples,)
            The predicted labels, of the dtype of ``classes_``.
        """
        f = self.decision_function(X)
        return self.classes_[np.searchsorted(self.thresholds_, f, side="left")]

    def score(self, X, y, sample_weight=None) -> float:
        """Return the negative mean absolute error of :meth:`predict` (higher is better).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The features.
        y : array-like of shape (n_samples,)
            The true labels.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Row weights of the mean.

        Returns
        -------
        float
            −MAE.
        """
        return -self.mae(X, y, sample_weight=sample_weight)

    def mae(self, X, y, sample_weight=None) -> float:
        """Return the mean absolute error |predicted label − y|, in label units.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The features.
        y : array-like of shape (n_samples,)
            The true labels.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Row weights of the mean.

        Returns
        -------
        float
            The (weighted) mean absolute error.
        """
        y = _numeric_labels(y)
        return float(mean_absolute_error(y, self.predict(X), sample_weight=sample_weight))

    def accuracy(self, X, y, sample_weight=None) -> float:
        """Return the fraction of rows whose predicted label equals y.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The features.
        y : array-like of shape (n_samples,)
            The true labels.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Row weights of the mean.

        Returns
        -------
        float
            The (weighted) fraction of exact labels.
        """
        y = _numeric_labels(y)
        return float(accuracy_score(y, self.predict(X), sample_weight=sample_weight))


def _numeric_labels(y) -> np.ndarray:
    """y as an array of numbers (the labels are numbers; strings are not parsed)."""
    y = np.asarray(y)
    if y.dtype.kind not in "biuf":
        raise ValueError(
            f"y must hold numeric ordinal levels (numbers like 1, 2, 5); got dtype {y.dtype}"
        )
    return y


def optimal_thresholds(f, y, levels, method: str = "mae", sample_weight=None) -> np.ndarray:
    """Return the thresholds on the scores f minimising the training MAE or error count.

    The minimum is exact.

    Parameters
    ----------
    f : ndarray of shape (n,)
        Scores.
    y : ndarray of shape (n,)
        Labels, each one of ``levels``.
    levels : ndarray of shape (K,)
        The label values, strictly increasing.
    method : {"mae", "zero_one"}, default="mae"
        Minimise Σ_i |levels[k_i] − y_i| or Σ_i [levels[k_i] ≠ y_i] over predictions
        k_i = #{j : θ_j < f_i}.
    sample_weight : ndarray of shape (n,) or None, default=None
        Non-negative row weights s_i: the sums become Σ_i s_i |...| and Σ_i s_i [...], and
        rows of weight 0 are left out (the thresholds are those of the data without them).

    Returns
    -------
    ndarray of shape (K − 1,)
        The thresholds θ, non-decreasing; see :class:`OrdinalRegressor` for where each θ_j
        is placed.

    Notes
    -----
    Predictions by thresholds are exactly the maps from the G distinct sorted scores to
    levels that are non-decreasing. With c(g, k) the cost of giving level k to the rows of
    score group g, D(g, k) = c(g, k) + min_{k' <= k} D(g − 1, k') is the least cost of
    groups 0..g with group g at level k; the running minimum over k' makes each step O(K)
    and computing c costs O(n·K) in all. Among optimal maps the backtracking takes, at each
    step back, the lowest level (ties broken towards lower predictions).

    Examples
    --------
    >>> import numpy as np
    >>> from bmrm.estimators import optimal_thresholds
    >>> f = np.array([0.1, 0.4, 0.5, 0.9])
    >>> y = np.array([0, 0, 1, 2])
    >>> optimal_thresholds(f, y, levels=np.array([0, 1, 2])).tolist()
    [0.45, 0.7]
    """
    f = np.asarray(f, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    levels = np.asarray(levels, dtype=np.float64)
    if f.ndim != 1 or f.shape != y.shape or f.shape[0] == 0:
        raise ValueError(
            f"f and y must be 1-d, non-empty and of equal length; got shapes {f.shape}, {y.shape}"
        )
    if not np.all(np.isfinite(f)):
        raise ValueError("f must not contain NaN or inf")
    if method not in ("mae", "zero_one"):
        raise ValueError(f"method must be 'mae' or 'zero_one'; got {method!r}")
    if levels.ndim != 1 or levels.shape[0] == 0 or np.any(np.diff(levels) <= 0):
        raise ValueError("levels must be a non-empty, strictly increasing 1-d array")
    if sample_weight is None:
        weights = np.ones(f.shape[0])
    else:
        weights = np.asarray(sample_weight, dtype=np.float64)
        if weights.shape != f.shape or not np.all(np.isfinite(weights)) or weights.min() < 0:
            raise ValueError(
                "sample_weight must hold one finite non-negative weight per score; got "
                f"shape {weights.shape}"
            )
        # rows of weight 0 are left out, as if removed: they place no threshold
        keep = weights > 0
        if not keep.any():
            raise ValueError("sample_weight is all zero: at least one row needs a positive weight")
        f, y, weights = f[keep], y[keep], weights[keep]
    n_levels = levels.shape[0]
    order = np.argsort(f, kind="stable")
    f_sorted = f[order]
    label = np.minimum(np.searchsorted(levels, y[order]), n_levels - 1).astype(np.int64)
    if not np.array_equal(levels[label], y[order]):
        raise ValueError("y must hold only values from levels")
    starts = np.flatnonzero(np.concatenate(([True], f_sorted[1:] != f_sorted[:-1])))
    group_ptr = np.append(starts, f.shape[0]).astype(np.int64)
    assign = np.empty(starts.shape[0], dtype=np.int64)
    _assign_levels(group_ptr, label, weights[order], levels, method == "mae", assign)
    group_f = f_sorted[starts]
    n_low = np.searchsorted(assign, np.arange(n_levels - 1), side="right")
    has_low = n_low > 0
    has_high = n_low < group_f.shape[0]
    low = group_f[np.maximum(n_low - 1, 0)]
    high = group_f[np.minimum(n_low, group_f.shape[0] - 1)]
    mid = 0.5 * low + 0.5 * high
    # adjacent floats: the midpoint may round up to `high`, which must stay above θ
    mid = np.where(mid >= high, low, mid)
    return np.where(has_low & has_high, mid, np.where(has_high, -np.inf, np.inf))


@njit(cache=True)
def _assign_levels(group_ptr, label, weight, levels, absolute, assign):
    """Non-decreasing levels of the sorted score groups at least total (weighted) cost (see
    above)."""
    n_groups = group_ptr.shape[0] - 1
    n_levels = levels.shape[0]
    choice = np.empty((n_groups, n_levels), dtype=np.int64)
    prev = np.zeros(n_levels)
    cost = np.empty(n_levels)
    for g in range(n_groups):
        cost[:] = 0.0
        for i in range(group_ptr[g], group_ptr[g + 1]):
            yi = label[i]
            wi = weight[i]
            for k in range(n_levels):
                if absolute:
                    cost[k] += wi * abs(levels[k] - levels[yi])
                elif k != yi:
                    cost[k] += wi
        best = np.inf
        arg = 0
        for k in range(n_levels):
            if prev[k] < best:
                best = prev[k]
                arg = k
            choice[g, k] = arg
            prev[k] = best + cost[k]
    k = 0
    for j in range(1, n_levels):
        if prev[j] < prev[k]:
            k = j
    for g in range(n_groups - 1, -1, -1):
        assign[g] = k
        k = choice[g, k]

"""scikit-learn estimators around :func:`bmrm.fit`.

* :class:`BMRMRanker` — a linear ranker trained with any loss of :mod:`losses` (NDCG,
  ordinal, preference, NERU, squared, ...), queries given per row by ``qid``.
* :class:`BMRMRegressor` — L2- (or L1-) regularized least squares.
* :class:`BMRMClassifier` — binary linear classifier with the hinge or the logistic loss.
* :class:`OrdinalRegressor` — the O(m log m) ordinal ranking loss over all rows, then
  thresholds on the scores chosen to minimise the training MAE (or error rate) exactly.

Every estimator minimises J(w) = lam·Ω(w) + R(w) with the bundle method (Teo,
Vishwanathan, Smola & Le, "Bundle Methods for Regularized Risk Minimization", JMLR 11,
2010); ``result_`` holds the solver's certificate (``result_.gap`` bounds J(coef_) − min J).

Query ids and metadata routing
------------------------------
``BMRMRanker.fit`` and ``BMRMRanker.score`` take ``qid`` (one query id per row). Inside a
:class:`~sklearn.pipeline.Pipeline` or :class:`~sklearn.model_selection.GridSearchCV`,
enable metadata routing and request it, so that each split gets its rows' ids::

    sklearn.set_config(enable_metadata_routing=True)
    ranker = BMRMRanker().set_fit_request(qid=True).set_score_request(qid=True)
    GridSearchCV(ranker, {"lam": [1e-3, 1e-2]}, cv=GroupKFold(3)).fit(
        X, y, qid=qid, groups=qid
    )

Split by query (``GroupKFold`` with ``groups=qid``) so that no query straddles a split.

Dask
----
``BMRMRanker``, ``BMRMRegressor`` and ``BMRMClassifier`` take ``backend="dask"`` and
``client=`` (a :class:`distributed.Client`; None uses Dask's current default client), which
they pass to ``bmrm.fit(..., backend="dask", client=...)`` (:mod:`bmrm.distributed`): the
risk is evaluated on the workers, the master problem here, for the linear scorer with a
convex loss or a latent one (``"ndcg"`` and ``"neru"``, by the concave-convex procedure;
each partition fixes the latent part of its own queries). ``fit`` then also takes a dask
array (``y`` and ``qid`` dask arrays, or arrays, with X's row chunks holding whole queries)
or a dask DataFrame (``y`` and ``qid`` dask Series or column names of X, repartitioned by
qid when a query spans two partitions); in-memory X is cut at query boundaries and sent to
the workers. ``predict`` (and ``decision_function``) of dask input return a dask array of
scores, one task per row block (``map_blocks``), so no score is computed until asked (a
DataFrame's blocks are its partitions, whose rows are counted first, so that the array's
chunks are known); the fitted feature columns of a DataFrame are selected by name, in
the fitted order, so no name is lost on the way to the blocks. In-memory input gives NumPy
scores as usual. Cloning
(``sklearn.base.clone``, grid search) shares the client, it is never copied: a client holds
connections, not data. A pickled estimator drops its client (``client=None`` after
unpickling, the default client then).
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real
from typing import Any

import numpy as np
from scipy.special import expit, log_expit
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

import losses
from bmrm._validation import MAX_INTERCEPT_SCALING
from bmrm._validation import is_dask as _is_dask
from bmrm.io.model_files import write_model_file
from bmrm.model import LinearModel, fit
from bmrm.solver.regularizers import NAMES as REGULARIZERS
from losses import check_sample_weight
from losses.metrics import ndcg_score
from losses.preference import pairs_from_labels

__all__ = ["BMRMClassifier", "BMRMRanker", "BMRMRegressor"]

_DTYPES = [np.float64, np.float32]
# the Dask options of the estimators that take them (see "Dask" in the module docstring)
_DASK_CONSTRAINTS: dict = {
    "backend": [StrOptions({"local", "dask"})],
    "client": [HasMethods(["submit", "gather"]), None],
}


def _dask_array():
    import dask.array

    return dask.array


def _block_scores(block, model: LinearModel) -> np.ndarray:
    return model.decision_function(block)


def _dask_scores(model: LinearModel, X, feature_names, client=None) -> Any:
    """The model's scores of a dask array or DataFrame as a dask array, one task per block.

    A DataFrame's fitted feature columns (all its columns when fitted without names) become
    one row block per partition (:func:`bmrm.distributed.frame_array`, whose rows are counted
    on ``client``, or by Dask's default scheduler when it is None)."""
    if hasattr(X, "columns"):  # a dask DataFrame: the fitted feature columns, in order
        from bmrm.distributed import frame_array

        features = list(X.columns) if feature_names is None else list(feature_names)
        missing = [name for name in features if name not in X.columns]
        if missing:
            raise ValueError(f"X lacks the feature columns {missing[:5]} seen in fit")
        if len(features) != model.n_features_in_:
            raise ValueError(
                f"X has {len(features)} columns, but the model has {model.n_features_in_} features"
            )
        X = frame_array(X, features, client=client)
    if X.ndim != 2 or X.shape[1] != model.n_features_in_:
        raise ValueError(
            f"X has shape {X.shape}, but the model has {model.n_features_in_} features"
        )
    X = X.rechunk({1: -1})
    return X.map_blocks(_block_scores, model, drop_axis=1, dtype=np.float64)


class _BMRMEstimator(BaseEstimator):
    """Solver parameters, warm start and fitted attributes shared by the estimators."""

    _parameter_constraints: dict = {
        "lam": [Interval(Real, 0, None, closed="neither")],
        "regularizer": [StrOptions(set(REGULARIZERS))],
        "l1_ratio": [Interval(Real, 0, 1, closed="both")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "bundle_size": [Interval(Integral, 3, None, closed="left")],
        "warm_start": ["boolean"],
        "verbose": ["verbose"],
    }

    def _warm_start_point(self, n_weights: int, fit_intercept: bool, scaling: float):
        """Previous solution as the solver's w0 when warm starting, else None."""
        if not self.warm_start or not hasattr(self, "coef_"):
            return None
        w0 = self.coef_
        if fit_intercept:
            w0 = np.append(w0, getattr(self, "intercept_", 0.0) / scaling)
        return w0 if w0.shape == (n_weights,) else None

    def _solve(
        self,
        X,
        y,
        loss,
        qid=None,
        *,
        fit_intercept: bool = False,
        intercept_scaling: float = 1.0,
        warm: bool = True,
        sample_weight=None,
        **loss_data,
    ) -> LinearModel:
        """Run :func:`bmrm.fit` and store ``coef_``, ``result_`` and ``n_iter_``."""
        n_weights = self.n_features_in_ + int(fit_intercept)
        w0 = self._warm_start_point(n_weights, fit_intercept, intercept_scaling) if warm else None
        model = fit(
            X,
            y,
            loss,
            qid,
            lam=self.lam,
            regularizer=self.regularizer,
            l1_ratio=self.l1_ratio,
            fit_intercept=fit_intercept,
            intercept_scaling=intercept_scaling,
            tol=self.tol,
            max_iter=self.max_iter,
            bundle_size=self.bundle_size,
            w0=w0,
            verbose=self.verbose,
            sample_weight=sample_weight,
            **self._backend_options(X),
            **loss_data,
        )
        self.model_ = model
        self.coef_ = model.coef_
        self.result_ = model.result_
        self.n_iter_ = int(model.result_.nit)
        return model

    def _backend_options(self, X) -> dict:
        """``backend`` and ``client`` for :func:`bmrm.fit` (nothing for a local fit)."""
        backend = getattr(self, "backend", "local")
        if backend == "local":
            if _is_dask(X):
                raise ValueError(
                    f"X is a dask {type(X).__name__}: set backend='dask' (and client=...) to "
                    "fit it on the Dask workers, or pass NumPy or SciPy data"
                )
            return {}
        from bmrm.distributed import resolve_client

        return {"backend": "dask", "client": resolve_client(self.client)}

    def _check_dask_input(self, X, y, names=()):
        """Checks of dask input before any work; sets ``n_features_in_`` (and
        ``feature_names_in_`` for a DataFrame), which ``validate_data`` sets otherwise."""
        if getattr(self, "backend", "local") != "dask":
            self._backend_options(X)  # the error saying to set backend='dask'
        if y is None:
            raise ValueError(f"{type(self).__name__}.fit needs y")
        if hasattr(X, "columns"):
            columns = {name for name in names if isinstance(name, str)}  # y, qid by name
            features = [c for c in X.columns if c not in columns]
            self.feature_names_in_ = np.asarray(features, dtype=object)
        else:
            if X.ndim != 2:
                raise ValueError(f"X must be 2-d; got shape {X.shape}")
            features = list(range(X.shape[1]))
            if hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        self.n_features_in_ = len(features)

    def _compute(self, *values):
        """``values`` with the dask collections among them computed (on the client of
        ``backend="dask"``, else with Dask's default scheduler) and gathered here."""
        lazy = [i for i, v in enumerate(values) if _is_dask(v)]
        # one compute per collection: arrays and DataFrames build their graphs differently
        if getattr(self, "backend", "local") == "dask":
            client = self._backend_options(values[lazy[0]])["client"]
            done = client.gather([client.compute(values[i]) for i in lazy])
        else:
            done = [values[i].compute() for i in lazy]
        out = list(values)
        for i, value in zip(lazy, done, strict=True):
            out[i] = np.asarray(value)
        return out

    def _scores(self, X):
        """The fitted model's scores X @ coef_ + intercept_ (float64); a dask array of
        them for dask input."""
        check_is_fitted(self)
        if _is_dask(X):
            names = getattr(self, "feature_names_in_", None)
            return _dask_scores(self.model_, X, names, client=getattr(self, "client", None))
        X = validate_data(self, X, accept_sparse="csr", dtype=_DTYPES, reset=False)
        return self.model_.decision_function(X)

    def __sklearn_clone__(self):
        """A clone sharing this estimator's Dask client (a client cannot be deep-copied)."""
        client = getattr(self, "client", None)
        if client is None:
            return super().__sklearn_clone__()
        self.client = None
        try:
            new = super().__sklearn_clone__()
        finally:
            self.client = client
        new.client = client
        return new

    def __getstate__(self):
        state = super().__getstate__()
        if state.get("client") is not None:
            state = {**state, "client": None}  # connections do not travel
        return state

    def save(self, path) -> None:
        """Write the fitted model (``model_``) as a portable model file.

        ``bmrm.load(path)`` reads it back as a :class:`bmrm.LinearModel` (weights,
        intercept, loss, regularization, scorer and the solver's result) whose ``predict``
        gives this estimator's scores (``decision_function``) and, for an estimator fitted
        on a DataFrame, holds its column names (``feature_names_in_``), which it checks
        DataFrames against; estimator-specific attributes such as ``classes_`` or
        ``thresholds_`` are not stored, nor are ``backend`` and ``client``.

        Parameters
        ----------
        path : str or os.PathLike
            The file to write.
        """
        check_is_fitted(self)
        record = self.model_._record()
        names = getattr(self, "feature_names_in_", None)
        if names is not None and all(isinstance(name, str) for name in names):
            record.feature_names = list(names)
        write_model_file(record, path)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.target_tags.required = True
        return tags


def _check_qid(qid, n_samples: int):
    if qid is None:
        return None
    qid = np.asarray(qid)
    if qid.ndim != 1 or qid.shape[0] != n_samples:
        raise ValueError(
            f"qid must be 1-d with one query id per row of X ({n_samples} rows); "
            f"got shape {qid.shape}"
        )
    return qid


class BMRMRanker(_BMRMEstimator):
    """Linear ranker f(x) = <coef_, x> trained by the bundle method with a ranking loss.

    Minimises lam·Ω(w) + (1/n_queries) Σ_q l(X_q w, y_q), the mean over queries of a loss
    from :mod:`losses` (pointwise losses average over rows instead).

    Parameters
    ----------
    loss : str or loss object, default="ndcg"
        A name from :func:`losses.available` ("ndcg", "ordinal", "preference", "neru",
        "squared", ...) or any object following the loss protocol (:class:`losses.Loss`).
        For "preference" without ``pairs`` in ``fit``, all pairs of rows with different
        labels in a query are used (:func:`losses.preference.pairs_from_labels`, unit costs;
        on those pairs the preference loss equals the ordinal loss).
    lam : float, default=1e-3
        Regularization constant, > 0. With ``loss="ordinal"`` and
        ``loss_params={"normalize": "none"}``, ``lam = 1 / C`` is SVM^rank's ``-c C``.
    loss_params : dict or None, default=None
        Parameters of a named loss, as ``losses.get(loss, **loss_params)`` (for example
        ``{"k": 5}`` for "ndcg", ``{"cost": "linear"}`` for "ordinal").
    regularizer : {"l2", "l1", "elastic_net"}, default="l2"
        Ω(w) = ½‖w‖², ‖w‖₁, or l1_ratio·‖w‖₁ + (1 − l1_ratio)·½‖w‖².
    l1_ratio : float in [0, 1], default=0.5
        Mixing of the elastic net.
    tol : float, default=1e-3
        Stop when the certified gap is at most tol·J.
    max_iter : int, default=1000
        Iteration cap (reaching it warns with :class:`bmrm.ConvergenceWarning`).
    bundle_size : int, default=200
        Bundle capacity.
    warm_start : bool, default=False
        Start from the previous ``coef_`` (same number of features) instead of zero; along
        a path of decreasing ``lam`` this typically saves iterations. The solution does not
        depend on the start beyond the certified gap.
    score_k : int or None, default=10
        Cutoff of the NDCG reported by :meth:`score`; None scores whole lists.
    verbose : bool, default=False
        Log one line per solver iteration.
    scorer : None, "linear", "expected_gain" or a scorer object, default=None
        The ranking function (:mod:`bmrm.scorers`); None is f = Xw. A non-linear scorer is
        trained from the linear fit by the non-convex methods of :func:`bmrm.fit`.
    backend : {"local", "dask"}, default="local"
        "dask" evaluates the risk on the workers of ``client`` (see "Dask" in
        :mod:`bmrm.estimators.linear`), with the linear scorer only: the convex losses,
        and the latent ``"ndcg"`` and ``"neru"`` losses (``ties="latent"``, by the
        concave-convex procedure); the smooth non-convex surrogates (``"listnet"``,
        ``"ranknet"``, ...) and a non-linear scorer are refused, as by :func:`bmrm.fit`.
    client : distributed.Client or None, default=None
        The Dask client of ``backend="dask"``; None uses Dask's default client. Shared by
        clones, never copied, and not pickled.

    Attributes
    ----------
    model_ : bmrm.LinearModel
        The fitted model; :meth:`predict` delegates to it and :meth:`save` writes it.
    coef_ : ndarray of shape (n_features,), or (n_levels, n_features) with the
        expected-gain scorer
    scorer_ : scorer object or None
        The fitted non-linear scorer (None for f = Xw).
    loss_ : loss object
        The loss that was minimised.
    result_ : bmrm.BMRMResult or scipy OptimizeResult
        The solver's result (objective, lower bound, gap, history; scipy's result for an
        objective trained by L-BFGS, with ``method``).
    n_iter_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X has string feature names.

    Notes
    -----
    Rank the documents of a query by decreasing :meth:`predict`. There is no intercept: a
    constant shift of the scores changes no ranking and no ranking loss.
    """

    _parameter_constraints: dict = {
        **_BMRMEstimator._parameter_constraints,
        "loss": [StrOptions(set(losses.available())), HasMethods(["validate", "loss_grad"])],
        "loss_params": [dict, None],
        "score_k": [Interval(Integral, 1, None, closed="left"), None],
        "scorer": [StrOptions({"linear", "expected_gain"}), HasMethods(["linearize"]), None],
        **_DASK_CONSTRAINTS,
    }

    def __init__(
        self,
        *,
        loss="ndcg",
        lam: float = 1e-3,
        loss_params: dict | None = None,
        regularizer: str = "l2",
        l1_ratio: float = 0.5,
        tol: float = 1e-3,
        max_iter: int = 1000,
        bundle_size: int = 200,
        warm_start: bool = False,
        score_k: int | None = 10,
        verbose: bool = False,
        scorer=None,
        backend: str = "local",
        client=None,
    ):
        self.loss = loss
        self.lam = lam
        self.loss_params = loss_params
        self.regularizer = regularizer
        self.l1_ratio = l1_ratio
        self.tol = tol
        self.max_iter = max_iter
        self.bundle_size = bundle_size
        self.warm_start = warm_start
        self.score_k = score_k
        self.verbose = verbose
        self.scorer = scorer
        self.backend = backend
        self.client = client

    def fit(self, X, y, qid=None, sample_weight=None, **fit_params) -> BMRMRanker:
        """Fit the ranker.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Or, with ``backend="dask"``, a dask array or dask DataFrame.
        y : array-like of shape (n_samples,)
            Relevance labels (non-negative integers for the ranking losses); for dask X
            also a dask array or Series, or a column name of a dask DataFrame X.
        qid : array-like of shape (n_samples,) or None
            Query id of each row; None makes all rows one query. For dask X like ``y``.
        sample_weight : array-like of shape (n_samples,) or None
            Non-negative weights, one per row: the risk becomes the weighted mean of the
            loss's terms. A query loss weighs queries, so the rows of a query must carry
            equal weights; a pointwise loss ("squared") weighs rows. For dask X like
            ``y``.
        **fit_params
            Loss data, for example ``pairs`` and ``pair_costs`` for "preference" (row
            indices of this X; not splittable by cross-validation, so leave them out
            there and let pairs be built from the labels).

        Returns
        -------
        BMRMRanker
            This estimator, fitted.
        """
        self._validate_params()
        loss = losses.get(self.loss, **(self.loss_params or {}))
        if self.scorer is not None:
            fit_params = {**fit_params, "ranking_function": self.scorer}
        pairs_needed = (
            getattr(loss, "name", None) == "preference" and fit_params.get("pairs") is None
        )
        if _is_dask(X):
            self._check_dask_input(X, y, names=(y, qid, sample_weight))
            if pairs_needed:
                raise ValueError(
                    "loss='preference' builds its pairs from in-memory labels; with dask X "
                    "use loss='ordinal', the same loss on all pairs of different labels"
                )
        else:
            X, y = validate_data(self, X, y, accept_sparse="csr", dtype=_DTYPES, y_numeric=True)
            qid = _check_qid(qid, X.shape[0])
            if pairs_needed:
                pairs, costs = pairs_from_labels(y, qid)
                fit_params = {**fit_params, "pairs": pairs, "pair_costs": costs}
        model = self._solve(X, y, loss, qid, sample_weight=sample_weight, **fit_params)
        self.scorer_ = model.scorer_
        self.loss_ = loss
        self._fitted_with_qid = qid is not None
        return self

    def predict(self, X) -> np.ndarray:
        """Return the scores X @ coef_, or the scorer's; rank by decreasing score.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Or a dask array or DataFrame.

        Returns
        -------
        ndarray of shape (n_samples,), float64
            The scores; for a dask array or DataFrame X, a dask array of them (one task per
            row block, computed when asked).
        """
        return self._scores(X)

    def score(self, X, y, qid=None, sample_weight=None) -> float:
        """Mean over queries of NDCG@score_k of the ranking by :meth:`predict`.

        Gains 2^y − 1, discount 1/log2(1 + position), tied scores averaged over their
        orderings, a query without relevant documents counts as 0
        (:func:`losses.metrics.ndcg_score`).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Or a dask array or DataFrame (scores, labels and ids are then computed and
            gathered here: the metric needs each query's rows in memory).
        y : array-like of shape (n_samples,)
            Non-negative integer relevance labels (dask input: as in :meth:`fit`).
        qid : array-like of shape (n_samples,) or None
            Query id of each row; None makes all rows one query. Scoring without qid a ranker
            fitted with qid warns (``UserWarning``): that is what a cross-validation loop
            without metadata routing does, and its scores would mix all queries into one.
        sample_weight : array-like of shape (n_samples,) or None
            Row weights; a query weighs the mean of its rows' weights in the mean over
            queries (give equal weights within a query to weight queries). For a dask
            DataFrame X, a column name as in :meth:`fit`.

        Returns
        -------
        float
            The mean NDCG@score_k over queries.
        """
        f = self.predict(X)
        if _is_dask(X):  # the scores, labels, ids and weights are gathered for the metric
            y, qid, sample_weight = (
                X[v] if isinstance(v, str) else v for v in (y, qid, sample_weight)
            )
            f, y, qid, sample_weight = self._compute(f, y, qid, sample_weight)
        qid = _check_qid(qid, f.shape[0])
        if qid is None and getattr(self, "_fitted_with_qid", False) and f.shape[0] > 1:
            warnings.warn(
                f"BMRMRanker.score got no qid although fit got one: all {f.shape[0]} rows are "
                "scored as one query. Pass qid=...; inside GridSearchCV, cross_validate or a "
                "Pipeline, enable metadata routing so that each split gets its rows' ids: "
                "sklearn.set_config(enable_metadata_routing=True) and "
                "ranker.set_fit_request(qid=True).set_score_request(qid=True)",
                UserWarning,
                stacklevel=2,
            )
        y_arr = np.asarray(y)
        lowest = np.nanmin(y_arr) if y_arr.dtype.kind in "biuf" and y_arr.size else 0
        if lowest < 0:
            # labels a loss such as "map" trains on (relevant: y > 0), which NDCG cannot score
            raise ValueError(
                f"y has negative labels (min {lowest:g}); BMRMRanker.score is "
                "NDCG@score_k, whose gains 2^y − 1 need labels >= 0. Score such labels with "
                "losses.metrics.map_score(y, ranker.predict(X), qid) (relevant: y > 0), or "
                "give scikit-learn's tools a scoring= of your own"
            )
        per_query = ndcg_score(y, f, qid, k=self.score_k, per_query=True)
        if sample_weight is None:
            return float(np.mean(per_query))
        sample_weight = np.asarray(sample_weight, dtype=np.float64)
        if sample_weight.shape != f.shape:
            raise ValueError(
                f"sample_weight must have one entry per row of X ({f.shape[0]} rows); "
                f"got shape {sample_weight.shape}"
            )
        if not np.all(np.isfinite(sample_weight)) or np.any(sample_weight < 0):
            raise ValueError("sample_weight must be finite and non-negative")
        if not sample_weight.sum() > 0:
            raise ValueError("sample_weight must have a positive sum")
        if qid is None:
            return float(per_query[0])
        _, first, inverse = np.unique(qid, return_index=True, return_inverse=True)
        query_weight = np.bincount(inverse, weights=sample_weight) / np.bincount(inverse)
        # per_query lists queries by first appearance in qid; np.unique sorts the ids
        return float(np.average(per_query, weights=query_weight[np.argsort(first)]))


class BMRMRegressor(RegressorMixin, _BMRMEstimator):
    """Linear least squares, lam·Ω(w) + (1/n) Σ_i ½(<w, x_i> + b − y_i)², by the bundle method.

    With the L2 regularizer and ``fit_intercept=False`` this is ridge regression with
    scikit-learn's ``alpha = lam · n_samples``.

    Parameters
    ----------
    lam : float, default=1e-3
        Regularization constant, > 0.
    fit_intercept : bool, default=True
        Fit b as the weight of a constant feature of value ``intercept_scaling``; that
        weight is regularized like the others (as in liblinear), so raise
        ``intercept_scaling`` to weaken the shrinkage of b.
    intercept_scaling : float in (0, 1e150], default=1.0
        The value of the constant feature whose weight is b.
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
        As in :class:`BMRMRanker`.
    client : distributed.Client or None, default=None
        As in :class:`BMRMRanker`.

    Attributes
    ----------
    model_ : bmrm.LinearModel
        The fitted model (scores and :meth:`save`).
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    result_ : bmrm.BMRMResult
    n_iter_ : int
    n_features_in_ : int
    """

    _parameter_constraints: dict = {
        **_BMRMEstimator._parameter_constraints,
        "fit_intercept": ["boolean"],
        "intercept_scaling": [Interval(Real, 0, MAX_INTERCEPT_SCALING, closed="right")],
        **_DASK_CONSTRAINTS,
    }

    def __init__(
        self,
        *,
        lam: float = 1e-3,
        fit_intercept: bool = True,
        intercept_scaling: float = 1.0,
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
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.regularizer = regularizer
        self.l1_ratio = l1_ratio
        self.tol = tol
        self.max_iter = max_iter
        self.bundle_size = bundle_size
        self.warm_start = warm_start
        self.verbose = verbose
        self.backend = backend
        self.client = client

    def fit(self, X, y, sample_weight=None) -> BMRMRegressor:
        """Fit on the features X and the real targets y.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Or, with ``backend="dask"``, a dask array or dask DataFrame.
        y : array-like of shape (n_samples,)
            Real targets; for dask X also a dask array or Series, or a column name of a
            dask DataFrame X.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            One non-negative weight per row: the risk becomes the weighted mean
            (1/Σ s_i) Σ_i s_i l_i. For dask X like ``y``.

        Returns
        -------
        BMRMRegressor
            This estimator, fitted.
        """
        self._validate_params()
        if _is_dask(X):
            self._check_dask_input(X, y, names=(y, sample_weight))
        else:
            X, y = validate_data(self, X, y, accept_sparse="csr", dtype=_DTYPES, y_numeric=True)
        model = self._solve(
            X,
            y,
            "squared",
            fit_intercept=self.fit_intercept,
            intercept_scaling=self.intercept_scaling,
            sample_weight=sample_weight,
        )
        self.intercept_ = model.intercept_
        return self

    def predict(self, X) -> np.ndarray:
        """Return the predictions X @ coef_ + intercept_.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Or a dask array or DataFrame.

        Returns
        -------
        ndarray of shape (n_samples,), float64
            The predictions (a dask array for dask X).
        """
        return self._scores(X)


def _weighted_classes(y, sample_weight) -> np.ndarray:
    """The labels of the rows of positive weight (after checking ``sample_weight``'s shape
    and values with :func:`losses.check_sample_weight`)."""
    check_sample_weight(sample_weight, losses.group_queries(None, len(y)), True)
    return np.unique(y[np.asarray(sample_weight, dtype=np.float64) > 0])


def _check_weighted_classes(classes, weighted, source: str) -> None:
    """Raise when a class has no row of positive weight; ``source`` names the arguments
    that weighed the rows ("sample_weight", "class_weight" or both)."""
    for label in classes.tolist():
        if label not in weighted.tolist():
            raise ValueError(
                f"{source} gives class {label!r} no positive weight: "
                f"a binary classifier needs both classes {classes.tolist()} weighted"
            )


def _is_logistic(estimator) -> bool:
    return estimator.loss == "logistic"


class BMRMClassifier(ClassifierMixin, _BMRMEstimator):
    """Binary linear classifier: the hinge (linear SVM) or logistic loss, by the bundle method.

    Minimises lam·Ω(w) + (1/n) Σ_i l(y_i (<w, x_i> + b)) with y_i = +1 for ``classes_[1]``
    and −1 for ``classes_[0]``. With the L2 regularizer this is LinearSVC / logistic
    regression with ``C = 1 / (lam · n_samples)``.

    Parameters
    ----------
    loss : {"hinge", "logistic"}, default="hinge"
        The hinge max(0, 1 − y f) (a linear SVM) or the logistic log(1 + exp(−y f)).
    lam : float, default=1e-3
        Regularization constant, > 0.
    fit_intercept : bool, default=True
        Fit b as the weight of a constant feature of value ``intercept_scaling``,
        regularized like the other weights (as in liblinear).
    intercept_scaling : float in (0, 1e150], default=1.0
        The value of the constant feature whose weight is b.
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, multiplied into ``sample_weight``: ``{label: weight}``
        (labels left out weigh 1), or ``"balanced"``, n / (2 n_c) for a class of n_c of the
        n training rows (scikit-learn's rule, from the unweighted counts).
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
        As in :class:`BMRMRanker`. A warm start needs the same classes and features.
    verbose : bool, default=False
        As in :class:`BMRMRanker`.
    backend : {"local", "dask"}, default="local"
        As in :class:`BMRMRanker`.
    client : distributed.Client or None, default=None
        As in :class:`BMRMRanker`.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
        The two labels, sorted; ``classes_[1]`` is the positive class.
    model_ : bmrm.LinearModel
        The fitted model (the decision function and :meth:`save`).
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    result_ : bmrm.BMRMResult
    n_iter_ : int
    n_features_in_ : int
    """

    _parameter_constraints: dict = {
        **_BMRMEstimator._parameter_constraints,
        "loss": [StrOptions({"hinge", "logistic"})],
        "fit_intercept": ["boolean"],
        "intercept_scaling": [Interval(Real, 0, MAX_INTERCEPT_SCALING, closed="right")],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        **_DASK_CONSTRAINTS,
    }

    def __init__(
        self,
        *,
        loss: str = "hinge",
        lam: float = 1e-3,
        fit_intercept: bool = True,
        intercept_scaling: float = 1.0,
        class_weight=None,
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
        self.loss = loss
        self.lam = lam
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.class_weight = class_weight
        self.regularizer = regularizer
        self.l1_ratio = l1_ratio
        self.tol = tol
        self.max_iter = max_iter
        self.bundle_size = bundle_size
        self.warm_start = warm_start
        self.verbose = verbose
        self.backend = backend
        self.client = client

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def fit(self, X, y, sample_weight=None) -> BMRMClassifier:
        """Fit on the features X and the binary labels y (any two values).

        With dask input the classes (and those of positive weight) are computed first.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Or, with ``backend="dask"``, a dask array or dask DataFrame.
        y : array-like of shape (n_samples,)
            Labels of exactly two classes; for dask X also a dask array or Series, or a
            column name of a dask DataFrame X.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            One non-negative weight per row: the risk becomes the weighted mean
            (1/Σ s_i) Σ_i s_i l_i, its weights multiplied by those of ``class_weight``;
            both classes need a positive weight. For dask X like ``y``.

        Returns
        -------
        BMRMClassifier
            This estimator, fitted.

        Raises
        ------
        ValueError
            When y does not hold exactly two classes, or a class has no positive weight.
        """
        self._validate_params()
        if _is_dask(X):
            self._check_dask_input(X, y, names=(y, sample_weight))
            if isinstance(y, str):
                X, y = X.drop(columns=[y]), X[y]
            if isinstance(sample_weight, str):
                X, sample_weight = X.drop(columns=[sample_weight]), X[sample_weight]
            client = self._backend_options(X)["client"]
            labels = [y] if sample_weight is None else [y, y[sample_weight > 0]]
            unique = [
                v.unique() if hasattr(v, "to_frame") else _dask_array().unique(v) for v in labels
            ]
            found = [np.unique(np.asarray(u)) for u in client.gather(client.compute(unique))]
            classes = found[0]
        else:
            X, y = validate_data(self, X, y, accept_sparse="csr", dtype=_DTYPES)
            check_classification_targets(y)
            classes = np.unique(y)
        if classes.shape[0] != 2:
            raise ValueError(
                "Only binary classification is supported: y must hold exactly 2 classes; "
                f"got {classes.shape[0]} class(es) {classes[:5].tolist()}"
            )
        per_class = self._class_weights(y, classes)
        if sample_weight is not None or per_class is not None:
            if sample_weight is None:
                weighted = classes
                source = "class_weight"
            else:
                weighted = found[1] if _is_dask(X) else _weighted_classes(y, sample_weight)
                source = "sample_weight"
            if per_class is not None:
                kept = np.asarray(weighted).tolist()
                pairs = zip(classes.tolist(), per_class, strict=True)
                weighted = [c for c, cw in pairs if cw > 0 and c in kept]
                if sample_weight is not None:
                    source = "sample_weight (with class_weight)"
            _check_weighted_classes(classes, np.asarray(weighted), source)
        same_classes = hasattr(self, "classes_") and np.array_equal(self.classes_, classes)
        positive = y == classes[1]
        y_signed = positive.astype(np.float64) * 2.0 - 1.0
        if per_class is not None:
            w0, w1 = per_class
            rows = positive.astype(np.float64) * (w1 - w0) + w0
            if sample_weight is None:
                sample_weight = rows
            elif _is_dask(rows) or _is_dask(sample_weight):
                sample_weight = rows * sample_weight
            else:
                sample_weight = rows * np.asarray(sample_weight, dtype=np.float64)
        model = self._solve(
            X,
            y_signed,
            self.loss,
            fit_intercept=self.fit_intercept,
            intercept_scaling=self.intercept_scaling,
            warm=same_classes,
            sample_weight=sample_weight,
        )
        self.intercept_ = model.intercept_
        self.classes_ = classes
        return self

    def _class_weights(self, y, classes) -> tuple[float, float] | None:
        """The weights of ``classes`` from ``class_weight`` (None without one)."""
        spec = self.class_weight
        if spec is None:
            return None
        if isinstance(spec, str):  # "balanced": n / (2 n_c), from the unweighted counts
            counts = [y == c for c in classes.tolist()]
            if _is_dask(y):
                client = self._backend_options(y)["client"]
                counts = client.gather(client.compute([c.sum() for c in counts]))
            counts = np.array([float(np.sum(c)) for c in counts])
            return tuple((counts.sum() / (2.0 * counts)).tolist())
        labels = classes.tolist()
        unknown = [key for key in spec if key not in labels]
        if unknown:
            raise ValueError(
                f"class_weight names {unknown[0]!r}, which is not one of the classes {labels}"
            )
        weights = []
        for label in labels:
            value = spec.get(label, 1.0)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
                raise ValueError(f"class_weight[{label!r}] must be a number; got {value!r}")
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"class_weight[{label!r}] must be finite and >= 0; got {value!r}")
            weights.append(float(value))
        return weights[0], weights[1]

    def decision_function(self, X) -> np.ndarray:
        """Return the decision function X @ coef_ + intercept_.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Or a dask array or DataFrame.

        Returns
        -------
        ndarray of shape (n_samples,), float64
            The decision function, positive for ``classes_[1]`` (a dask array for dask X).
        """
        return self._scores(X)

    def predict(self, X) -> np.ndarray:
        """Return ``classes_[1]`` where the decision function is > 0, else ``classes_[0]``.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Or a dask array or DataFrame.

        Returns
        -------
        ndarray of shape (n_samples,)
            The predicted labels (a dask array for dask X).
        """
        f = self.decision_function(X)
        if _is_dask(f):
            return _dask_array().where(f > 0, self.classes_[1], self.classes_[0])
        return self.classes_[(f > 0).astype(np.intp)]

    @available_if(_is_logistic)
    def predict_proba(self, X) -> np.ndarray:
        """Return the class probabilities [1 − σ(f), σ(f)], f the decision function.

        Available with the logistic loss only.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The features.

        Returns
        -------
        ndarray of shape (n_samples, 2)
            The probabilities of ``classes_[0]`` and ``classes_[1]``.
        """
        p = expit(self.decision_function(X))
        return np.column_stack((1.0 - p, p))

    @available_if(_is_logistic)
    def predict_log_proba(self, X) -> np.ndarray:
        """Return the log-probabilities [log σ(−f), log σ(f)], computed without overflow.

        Available with the logistic loss only.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The features.

        Returns
        -------
        ndarray of shape (n_samples, 2)
            The log-probabilities of ``classes_[0]`` and ``classes_[1]``.
        """
        f = self.decision_function(X)
        return np.column_stack((log_expit(-f), log_expit(f)))

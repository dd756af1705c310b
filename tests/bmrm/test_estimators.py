"""The scikit-learn estimators against bmrm.fit, scikit-learn's own solvers and metrics.

Where two solutions of the same L2-regularized problem are compared, the comparison uses the
solver's certificate rather than a tolerance picked by hand: J = lam·½‖w‖² + R is
lam-strongly convex, so for the midpoint m of w1 and w2

    J(m) <= ½ J(w1) + ½ J(w2) − (lam / 8) ‖w1 − w2‖²,   and   J(m) >= min J >= lb

for any certified lower bound lb; hence ‖w1 − w2‖² <= 4 (J(w1) + J(w2) − 2 lb) / lam.
When w2 is the exact optimum, ‖w1 − w2‖² <= 2 (J(w1) − lb) / lam.
"""

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn
from sklearn.base import clone
from sklearn.exceptions import UnsetMetadataPassedError
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import ndcg_score as sklearn_ndcg
from sklearn.model_selection import GridSearchCV, GroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

import bmrm
import losses
from bmrm.estimators import BMRMClassifier, BMRMRanker, BMRMRegressor, OrdinalRegressor

FAST = {"lam": 1e-2, "tol": 1e-2, "max_iter": 100}


def sq_distance_bound(res1, res2, lam):
    """Certified bound on ‖x1 − x2‖² for two solutions of one L2 problem (module doc)."""
    lb = max(res1.lower_bound, res2.lower_bound)
    return 4.0 * (res1.fun + res2.fun - 2.0 * lb) / lam


def make_ranking(seed, n_queries=12, d=5, levels=4):
    """Queries of 1 to 14 rows, some with all-equal labels, rows shuffled across queries."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 15, size=n_queries)
    qid = np.repeat(rng.permutation(1000)[:n_queries], sizes)
    X = rng.normal(size=(qid.size, d)) * rng.uniform(0.5, 2.0, size=d)
    signal = X @ rng.normal(size=d) + rng.normal(scale=0.7, size=qid.size)
    y = np.digitize(signal, np.quantile(signal, np.linspace(0, 1, levels + 1)[1:-1]))
    y[qid == qid[-1]] = 1  # one query whose labels are all equal
    order = rng.permutation(qid.size)
    return np.ascontiguousarray(X[order]), y[order].astype(np.int64), qid[order]


def expected_failures(estimator):
    """The checks an estimator fails by design, with the reason (scikit-learn reports them
    as xfail). Both kinds are tested below with the certified bounds instead."""
    failures = {}
    equivalence = (
        "check_sample_weight_equivalence_on_dense_data",
        "check_sample_weight_equivalence_on_sparse_data",
    )
    if isinstance(estimator, BMRMRanker):
        # without qid all rows are one query, which a query loss weighs as a whole
        why = "a query loss needs equal weights within a query; the check varies them in one"
        failures["check_sample_weights_not_overwritten"] = why
        failures.update(dict.fromkeys(equivalence, why))
    elif isinstance(estimator, BMRMClassifier) and estimator.loss == "hinge":
        # the fits stop at a relative gap of tol = 1e-2; the check compares at rtol 1e-7
        why = "solutions equal only within the certified gap of tol = 1e-2"
        failures.update(dict.fromkeys(equivalence, why))
    return failures


@parametrize_with_checks(
    [
        BMRMRanker(**FAST),
        BMRMRanker(loss="preference", **FAST),
        BMRMRegressor(**FAST),
        BMRMClassifier(**FAST),
        BMRMClassifier(loss="logistic", **FAST),
        OrdinalRegressor(**FAST),
    ],
    expected_failed_checks=expected_failures,
)
@pytest.mark.filterwarnings("ignore::bmrm.ConvergenceWarning")
def test_sklearn_compatible(estimator, check):
    params = estimator.get_params()
    check(estimator)  # raises AssertionError (or the estimator's error) on failure
    # no check may change the constructor parameters it was given
    assert estimator.get_params() == params


@pytest.mark.parametrize("loss", ["ndcg", "ordinal", "neru", "squared"])
def test_ranker_is_bmrm_fit(loss):
    X, y, qid = make_ranking(0)
    params = {"k": 5} if loss == "ndcg" else None
    ranker = BMRMRanker(loss=loss, lam=0.05, loss_params=params, tol=1e-4).fit(X, y, qid)
    model = bmrm.fit(X, y, loss, qid, lam=0.05, tol=1e-4, loss_params=params)
    np.testing.assert_array_equal(ranker.coef_, model.coef_)
    assert ranker.result_.fun == model.result_.fun
    assert ranker.n_iter_ == model.result_.nit
    assert ranker.n_features_in_ == X.shape[1]
    assert ranker.loss_.get_params() == model.loss.get_params()
    np.testing.assert_array_equal(ranker.predict(X), X @ model.coef_)


def brute_force_pairs(y, qid):
    """All (i, j) with y_i < y_j in the same query, by a double loop over rows."""
    return np.array(
        [(i, j) for i in range(len(y)) for j in range(len(y)) if qid[i] == qid[j] and y[i] < y[j]],
        dtype=np.int64,
    )


def test_ranker_preference_builds_all_label_pairs():
    X, y, qid = make_ranking(1)
    lam = 0.02
    auto = BMRMRanker(loss="preference", lam=lam, tol=1e-6).fit(X, y, qid)
    pairs = brute_force_pairs(y, qid)[::-1]
    pairs_before = pairs.copy()
    given = BMRMRanker(loss="preference", lam=lam, tol=1e-6).fit(X, y, qid, pairs=pairs)
    np.testing.assert_array_equal(pairs, pairs_before)
    # unit-cost preferences over all comparable pairs are the ordinal loss
    ordinal = BMRMRanker(loss="ordinal", lam=lam, tol=1e-6).fit(X, y, qid)
    for other in (given, ordinal):
        dist = np.sum((auto.coef_ - other.coef_) ** 2)
        assert dist <= sq_distance_bound(auto.result_, other.result_, lam)
        assert abs(auto.result_.fun - other.result_.fun) <= max(
            auto.result_.gap, other.result_.gap
        )


def test_ranker_score_is_mean_ndcg_of_sklearn():
    rng = np.random.default_rng(2)
    n_queries, m = 9, 7
    X = rng.normal(size=(n_queries * m, 4))
    y = rng.integers(0, 4, size=n_queries * m)
    y[:m] = 0  # a query without relevant documents scores 0, as in scikit-learn
    qid = np.repeat(np.arange(n_queries), m)
    ranker = BMRMRanker(loss="ordinal", lam=0.1, score_k=3).fit(X, y, qid)
    f = ranker.predict(X).reshape(n_queries, m)
    gains = (2.0**y - 1).reshape(n_queries, m)
    per_query = [sklearn_ndcg(gains[[q]], f[[q]], k=3) for q in range(n_queries)]
    assert ranker.score(X, y, qid) == pytest.approx(np.mean(per_query), rel=1e-12)
    whole = [sklearn_ndcg(gains[[q]], f[[q]]) for q in range(n_queries)]
    assert ranker.set_params(score_k=None).score(X, y, qid) == pytest.approx(
        np.mean(whole), rel=1e-12
    )
    query_weight = rng.uniform(0.5, 2.0, size=n_queries)
    weighted = ranker.score(X, y, qid, sample_weight=np.repeat(query_weight, m))
    assert weighted == pytest.approx(np.average(whole, weights=query_weight), rel=1e-12)


@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_regressor_reaches_ridge_optimum(fit_intercept, seed):
    rng = np.random.default_rng(seed)
    n, d, lam, scaling = 60, 5, [1e-3, 1e-2, 1e-1][seed], 2.0
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + 3.0 + rng.normal(size=n)
    reg = BMRMRegressor(
        lam=lam, fit_intercept=fit_intercept, intercept_scaling=scaling, tol=1e-8
    ).fit(X, y)
    # scikit-learn's ridge on [X, scaling] (the constant column regularized like the rest):
    # lam ½‖w‖² + (1/2n)‖Xw − y‖² is Ridge with alpha = lam·n
    Z = np.column_stack((X, np.full(n, scaling))) if fit_intercept else X
    w_ref = Ridge(alpha=lam * n, fit_intercept=False, solver="cholesky").fit(Z, y).coef_
    w = np.append(reg.coef_, reg.intercept_ / scaling) if fit_intercept else reg.coef_
    J_ref = lam * 0.5 * w_ref @ w_ref + 0.5 * np.mean((Z @ w_ref - y) ** 2)
    res = reg.result_
    assert res.lower_bound <= J_ref + 1e-12
    assert res.fun == pytest.approx(lam * 0.5 * w @ w + 0.5 * np.mean((Z @ w - y) ** 2))
    assert np.sum((w - w_ref) ** 2) <= 2.0 * res.gap / lam + 1e-12
    if not fit_intercept:
        assert reg.intercept_ == 0.0
    np.testing.assert_allclose(reg.predict(X), Z @ w, rtol=1e-12, atol=1e-12)
    assert reg.score(X, y) == pytest.approx(
        1 - np.sum((y - Z @ w) ** 2) / np.sum((y - y.mean()) ** 2), rel=1e-12
    )


def classification_data(seed, n=80, d=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X @ rng.normal(size=d) + 0.5 + rng.normal(size=n) > 0, "dog", "cat")
    return X, y


@pytest.mark.parametrize("loss", ["hinge", "logistic"])
@pytest.mark.parametrize("seed", range(2))
def test_classifier_reaches_liblinear_optimum(loss, seed):
    X, y = classification_data(seed)
    n, lam, scaling = X.shape[0], 0.01, 1.5
    clf = BMRMClassifier(loss=loss, lam=lam, intercept_scaling=scaling, tol=1e-7).fit(X, y)
    assert list(clf.classes_) == ["cat", "dog"]
    s = np.where(y == "dog", 1.0, -1.0)
    Z = np.column_stack((X, np.full(n, scaling)))
    # lam ½‖w‖² + mean loss is the C-form with C = 1/(lam·n), intercept as a feature
    C = 1.0 / (lam * n)
    if loss == "hinge":
        ref = LinearSVC(
            C=C, loss="hinge", fit_intercept=False, tol=1e-9, max_iter=10**6, random_state=0
        )
    else:
        ref = LogisticRegression(C=C, fit_intercept=False, tol=1e-12, max_iter=10_000)
    w_ref = ref.fit(Z, s).coef_.ravel()
    margin = s * (Z @ w_ref)
    risk = np.maximum(0, 1 - margin) if loss == "hinge" else np.logaddexp(0, -margin)
    J_ref = lam * 0.5 * w_ref @ w_ref + risk.mean()
    res = clf.result_
    assert res.lower_bound <= J_ref + 1e-12
    w = np.append(clf.coef_, clf.intercept_ / scaling)
    bound = 4.0 * (res.fun + J_ref - 2.0 * res.lower_bound) / lam
    assert np.sum((w - w_ref) ** 2) <= bound
    assert bound <= 1e-3 * (w_ref @ w_ref)  # the certificate is informative here
    f = clf.decision_function(X)
    np.testing.assert_allclose(f, Z @ w, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(clf.predict(X), np.where(f > 0, "dog", "cat"))
    if loss == "logistic":
        proba = clf.predict_proba(X)
        # |σ(a) − σ(b)| <= |a − b| / 4 <= ‖z‖ ‖w − w_ref‖ / 4
        slack = 0.25 * np.linalg.norm(Z, axis=1) * np.sqrt(bound)
        assert np.all(np.abs(proba[:, 1] - ref.predict_proba(Z)[:, 1]) <= slack + 1e-12)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
        np.testing.assert_allclose(np.exp(clf.predict_log_proba(X)), proba, rtol=1e-12)
    else:
        assert not hasattr(clf, "predict_proba")
        assert not hasattr(clf, "predict_log_proba")


def test_classifier_rejects_multiclass_and_one_class():
    X = np.random.default_rng(0).normal(size=(9, 2))
    with pytest.raises(ValueError, match="Only binary classification.*got 3 class"):
        BMRMClassifier().fit(X, np.arange(9) % 3)
    with pytest.raises(ValueError, match="got 1 class"):
        BMRMClassifier().fit(X, np.ones(9))


def test_classifier_weight_errors_name_only_the_arguments_given():
    """A class left without positive weight is blamed on sample_weight, on class_weight or
    on both, whichever were given."""
    X = np.random.default_rng(0).normal(size=(40, 3))
    y = X[:, 0] > 0
    only_true = y.astype(np.float64)
    needs = r"no positive weight: a binary classifier needs both classes \[False, True\] weighted$"
    with pytest.raises(ValueError, match=r"^sample_weight gives class False " + needs) as info:
        BMRMClassifier().fit(X, y, sample_weight=only_true)
    assert "class_weight" not in str(info.value)
    with pytest.raises(ValueError, match=r"^class_weight gives class True " + needs) as info:
        BMRMClassifier(class_weight={True: 0.0}).fit(X, y)
    assert "sample_weight" not in str(info.value)
    with_both = r"^sample_weight \(with class_weight\) gives class "
    with pytest.raises(ValueError, match=with_both + "False " + needs):
        BMRMClassifier(class_weight={True: 2.0}).fit(X, y, sample_weight=only_true)
    with pytest.raises(ValueError, match=with_both + "True " + needs):
        BMRMClassifier(class_weight={True: 0.0}).fit(X, y, sample_weight=np.ones(len(y)))
    clf = BMRMClassifier(class_weight="balanced").fit(X, y, sample_weight=only_true + 0.5)
    np.testing.assert_array_equal(clf.classes_, [False, True])


def routed_ranker(**params):
    return BMRMRanker(**params).set_fit_request(qid=True).set_score_request(qid=True)


def test_grid_search_group_kfold_routes_qid():
    X, y, qid = make_ranking(3, n_queries=15)
    grid = {"lam": [0.01, 0.1]}
    cv = GroupKFold(n_splits=3)
    with sklearn.config_context(enable_metadata_routing=True):
        search = GridSearchCV(routed_ranker(loss="ordinal", tol=1e-4), grid, cv=cv)
        search.fit(X, y, qid=qid, groups=qid)
    splits = list(cv.split(X, y, groups=qid))
    for i, params in enumerate(search.cv_results_["params"]):
        for s, (train, test) in enumerate(splits):
            assert np.intersect1d(qid[train], qid[test]).size == 0
            ranker = BMRMRanker(loss="ordinal", tol=1e-4, **params)
            ranker.fit(X[train], y[train], qid[train])
            expected = ranker.score(X[test], y[test], qid[test])
            assert search.cv_results_[f"split{s}_test_score"][i] == pytest.approx(
                expected, rel=1e-12
            )
    best = BMRMRanker(loss="ordinal", tol=1e-4, **search.best_params_).fit(X, y, qid)
    np.testing.assert_array_equal(search.best_estimator_.coef_, best.coef_)


def test_grid_search_over_the_parameters_of_a_loss_object():
    """A loss given as an object: clone copies it (a distinct, equal object), and a grid
    over loss__k fits each k as a ranker built with losses.get("ndcg", k=k) does."""
    X, y, qid = make_ranking(5)
    cv = GroupKFold(n_splits=3)
    with sklearn.config_context(enable_metadata_routing=True):
        ranker = routed_ranker(loss=losses.get("ndcg", k=5), tol=1e-4)
        copy = clone(ranker)
        assert copy.loss is not ranker.loss
        assert copy.loss.get_params() == ranker.loss.get_params()
        search = GridSearchCV(ranker, {"loss__k": [3, 5]}, cv=cv)
        search.fit(X, y, qid=qid, groups=qid)
    assert ranker.loss.k == 5  # the searched estimator's own loss is left as it was
    splits = list(cv.split(X, y, groups=qid))
    for i, params in enumerate(search.cv_results_["params"]):
        for s, (train, test) in enumerate(splits):
            one = BMRMRanker(loss=losses.get("ndcg", k=params["loss__k"]), tol=1e-4)
            one.fit(X[train], y[train], qid[train])
            expected = one.score(X[test], y[test], qid[test])
            assert search.cv_results_[f"split{s}_test_score"][i] == pytest.approx(
                expected, rel=1e-12
            )
    with pytest.raises(ValueError, match="the ndcg loss has no parameter 'kk'; its parameters"):
        losses.get("ndcg").set_params(kk=3)
    with pytest.raises(ValueError, match="k must be"):
        losses.get("ndcg").set_params(k=0)


@pytest.mark.parametrize("scorer", ["linear", "expected_gain"])
def test_scorer_objects_clone_and_take_nested_parameters(scorer):
    from bmrm.scorers import get_scorer

    ranker = BMRMRanker(loss="listnet", scorer=get_scorer(scorer))
    copy = clone(ranker)
    assert copy.scorer is not ranker.scorer
    assert copy.scorer.get_params() == ranker.scorer.get_params()
    if scorer == "expected_gain":
        copy.set_params(scorer__eps=0.8)
        assert copy.scorer.eps == 0.8 and ranker.scorer.eps is None
        with pytest.raises(ValueError, match="ExpectedGainScorer has no parameter 'epsilon'"):
            copy.set_params(scorer__epsilon=0.8)
    else:
        with pytest.raises(ValueError, match="LinearScorer has no parameters; got"):
            copy.set_params(scorer__eps=0.8)


def test_pipeline_with_scaler_routes_qid():
    X, y, qid = make_ranking(4)
    X = X * [1.0, 10.0, 100.0, 0.1, 1.0] + 5.0
    with sklearn.config_context(enable_metadata_routing=True):
        pipe = make_pipeline(StandardScaler(), routed_ranker(loss="ordinal", lam=0.05))
        pipe.fit(X, y, qid=qid)
        score = pipe.score(X, y, qid=qid)
        with pytest.raises(UnsetMetadataPassedError):
            make_pipeline(StandardScaler(), BMRMRanker()).fit(X, y, qid=qid)
    Xs = StandardScaler().fit_transform(X)
    ranker = BMRMRanker(loss="ordinal", lam=0.05).fit(Xs, y, qid)
    np.testing.assert_array_equal(pipe[-1].coef_, ranker.coef_)
    np.testing.assert_array_equal(pipe.predict(X), ranker.predict(Xs))
    assert score == ranker.score(Xs, y, qid)
    # the ids mattered: one query over all rows is another problem
    assert not np.allclose(BMRMRanker(loss="ordinal", lam=0.05).fit(Xs, y).coef_, ranker.coef_)


def objective(estimator, X, y, qid, w):
    """J(w) computed without the solver: lam ½‖w‖² + the mean loss (losses.risk)."""
    if isinstance(estimator, BMRMRanker):
        risk, _ = losses.risk(estimator.loss, X @ w, y, qid)
    else:
        risk = 0.5 * np.mean((X @ w[:-1] + w[-1] - y) ** 2)
    return estimator.lam * 0.5 * w @ w + risk


@pytest.mark.parametrize("make", [lambda: BMRMRanker(loss="ordinal"), lambda: BMRMRegressor()])
def test_warm_start_path_is_cheaper_and_reaches_the_same_optimum(make):
    X, y, qid = make_ranking(5, n_queries=20, d=8)
    ranker = isinstance(make(), BMRMRanker)
    fit_args = (qid,) if ranker else ()
    warm = make().set_params(warm_start=True, tol=1e-5, max_iter=5000)
    warm_iters, cold_iters = [], []
    w_prev = None
    for lam in [1e-1, 3e-2, 1e-2, 3e-3, 1e-3]:
        warm.set_params(lam=lam).fit(X, y, *fit_args)
        cold = make().set_params(lam=lam, tol=1e-5, max_iter=5000).fit(X, y, *fit_args)
        warm_iters.append(warm.n_iter_)
        cold_iters.append(cold.n_iter_)
        if w_prev is not None:
            # the first point the solver evaluated is the previous solution
            first = warm.result_.history["objective"][0]
            assert first == pytest.approx(objective(warm, X, y, qid, w_prev), rel=1e-12)
        dist = np.sum((warm.coef_ - cold.coef_) ** 2)
        assert dist <= sq_distance_bound(warm.result_, cold.result_, lam)
        assert abs(warm.result_.fun - cold.result_.fun) <= max(warm.result_.gap, cold.result_.gap)
        w_prev = warm.coef_ if ranker else np.append(warm.coef_, warm.intercept_)
    assert warm_iters[0] == cold_iters[0]
    assert sum(warm_iters) < sum(cold_iters)


def test_warm_start_restarts_cold_when_features_change():
    X, y, qid = make_ranking(6)
    ranker = BMRMRanker(loss="ordinal", warm_start=True).fit(X, y, qid)
    X2 = np.column_stack((X, X[:, 0]))
    cold = BMRMRanker(loss="ordinal").fit(X2, y, qid)
    np.testing.assert_array_equal(ranker.fit(X2, y, qid).coef_, cold.coef_)


def test_errors_name_the_argument():
    X, y, qid = make_ranking(7)
    with pytest.raises(ValueError, match=r"qid must be 1-d with one query id per row"):
        BMRMRanker().fit(X, y, qid[:-1])
    ranker = BMRMRanker(loss="ordinal").fit(X, y, qid)
    with pytest.raises(ValueError, match=r"qid .*\(\d+ rows\); got shape"):
        ranker.score(X, y, qid[1:])
    with pytest.raises(ValueError, match="sample_weight must have one entry per row"):
        ranker.score(X, y, qid, sample_weight=np.ones(3))
    with pytest.raises(InvalidParameterError, match="'loss' parameter of BMRMRanker"):
        BMRMRanker(loss="lambdamart").fit(X, y, qid)
    for lam in (0, -1.0):
        for est in (BMRMRanker(), BMRMRegressor(), BMRMClassifier(), OrdinalRegressor()):
            with pytest.raises(InvalidParameterError, match="'lam' parameter"):
                est.set_params(lam=lam).fit(X, y % 2)
    with pytest.raises(InvalidParameterError, match="'loss' parameter of BMRMClassifier"):
        BMRMClassifier(loss="squared").fit(X, y % 2)
    other = np.flatnonzero(qid != qid[0])[0]
    with pytest.raises(ValueError, match="pairs must join rows of the same query"):
        BMRMRanker(loss="preference").fit(X, y, qid, pairs=np.array([[0, other]]))


@pytest.mark.parametrize(
    "estimator, target",
    [
        (BMRMRanker(loss="preference"), "graded"),
        (BMRMRanker(loss="ndcg"), "graded"),
        (BMRMRegressor(), "real"),
        (BMRMClassifier(loss="logistic"), "binary"),
        (OrdinalRegressor(), "graded"),
    ],
)
@pytest.mark.parametrize("sparse", [False, True])
def test_inputs_are_not_mutated(estimator, target, sparse):
    X, y, qid = make_ranking(8)
    X = np.asfortranarray(X)
    y = {"graded": y, "real": y + 0.5, "binary": y % 2}[target]
    X_in = sp.csr_matrix(X) if sparse else X
    before = (X.copy(order="K"), y.copy(), qid.copy())
    qid_arg = (qid,) if isinstance(estimator, BMRMRanker) else ()
    est = clone(estimator).fit(X_in, y, *qid_arg)
    est.predict(X_in)
    est.score(X_in, y, *qid_arg)
    np.testing.assert_array_equal(X, before[0])
    assert X.flags.f_contiguous
    np.testing.assert_array_equal(y, before[1])
    np.testing.assert_array_equal(qid, before[2])
    if sparse:
        np.testing.assert_array_equal(X_in.toarray(), before[0])


def test_sparse_input_solves_the_same_problem():
    X, y, qid = make_ranking(9)
    X[np.abs(X) < 0.5] = 0.0
    lam = 0.02
    # a convex NDCG loss (the distance bound needs strong convexity; the default latent
    # ties are a difference of convex functions)
    kw = dict(loss="ndcg", loss_params={"ties": "increasing"}, lam=lam, tol=1e-5)
    dense = BMRMRanker(**kw).fit(X, y, qid)
    sparse = BMRMRanker(**kw).fit(sp.csr_matrix(X), y, qid)
    dist = np.sum((dense.coef_ - sparse.coef_) ** 2)
    assert dist <= sq_distance_bound(dense.result_, sparse.result_, lam)
    np.testing.assert_allclose(
        sparse.predict(sp.csr_matrix(X)), X @ sparse.coef_, rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda: (BMRMRanker(loss="ordinal", **FAST), "decision"),
        lambda: (BMRMRegressor(**FAST), "regression"),
        lambda: (BMRMClassifier(loss="logistic", **FAST), "classes"),
        lambda: (OrdinalRegressor(**FAST), "levels"),
    ],
)
def test_estimators_keep_a_linear_model_and_save_it(make, tmp_path):
    estimator, kind = make()
    X, y, qid = make_ranking(3)
    if kind == "classes":
        y = np.where(y > 1, "yes", "no")
    estimator.fit(X, y)
    model = estimator.model_
    assert isinstance(model, bmrm.LinearModel)
    assert model.coef_ is estimator.coef_ and model.result_ is estimator.result_
    scores = X @ estimator.coef_ + getattr(estimator, "intercept_", 0.0)
    method = (
        estimator.predict if kind in ("decision", "regression") else estimator.decision_function
    )
    np.testing.assert_allclose(method(X), scores, rtol=1e-12, atol=1e-12)
    estimator.save(tmp_path / "m.json")
    loaded = bmrm.load(tmp_path / "m.json")
    np.testing.assert_array_equal(loaded.coef_, estimator.coef_)
    np.testing.assert_array_equal(loaded.predict(X), method(X))


def test_unfitted_estimator_cannot_save(tmp_path):
    with pytest.raises(sklearn.exceptions.NotFittedError):
        BMRMRanker().save(tmp_path / "m.json")
    assert list(tmp_path.iterdir()) == []


def test_ranker_with_the_expected_gain_scorer_saves_it(tmp_path):
    """The model file keeps the scorer: the loaded model ranks as the estimator does."""
    X, y, qid = make_ranking(5)
    ranker = BMRMRanker(loss="listnet", lam=1e-2, scorer="expected_gain").fit(X, y, qid)
    assert ranker.coef_.shape == (4, X.shape[1])
    ranker.save(tmp_path / "m.json")
    loaded = bmrm.load(tmp_path / "m.json")
    assert loaded.scorer_.get_params() == ranker.scorer_.get_params()
    np.testing.assert_array_equal(loaded.coef_, ranker.coef_)
    np.testing.assert_array_equal(loaded.predict(X), ranker.predict(X))


def test_ranker_score_refuses_negative_labels_and_names_the_measure_that_takes_them():
    # the map loss trains on labels ±1 (relevant: y > 0); NDCG's gains 2^y − 1 cannot score them
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 3))
    qid = np.repeat(np.arange(8), 5)
    y = np.where(X @ np.array([1.0, -0.5, 0.2]) > 0, 1.0, -1.0)
    ranker = BMRMRanker(loss="map", **FAST).fit(X, y, qid=qid)
    with pytest.raises(ValueError, match=r"y has negative labels \(min -1\).*map_score"):
        ranker.score(X, y, qid=qid)
    # what the message points to scores them, as the same ranking with labels 0/1 does
    expected = losses.metrics.map_score((y > 0).astype(float), ranker.predict(X), qid)
    assert losses.metrics.map_score(y, ranker.predict(X), qid) == expected
    assert ranker.score(X, (y > 0).astype(float), qid=qid) == pytest.approx(
        losses.metrics.ndcg_score((y > 0).astype(float), ranker.predict(X), qid, k=10)
    )

"""OrdinalRegressor: its thresholds against brute force, its scores against bmrm.fit."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import accuracy_score, mean_absolute_error
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import bmrm
from bmrm.estimators import OrdinalRegressor, optimal_thresholds


def cost(pred, y, method):
    return np.sum(np.abs(pred - y)) if method == "mae" else np.sum(pred != y)


def predict(f, thresholds, levels):
    return levels[np.searchsorted(thresholds, f, side="left")]


def brute_force_best(f, y, levels, method):
    """Least cost over all non-decreasing thresholds placed at −inf, +inf or a distinct
    score but the largest: θ = s_i splits s_i (below, as θ < f is strict) from s_{i+1}, also
    for adjacent floats, whose midpoint rounds to one of them."""
    s = np.unique(f)
    candidates = np.concatenate(([-np.inf], s[:-1], [np.inf]))
    return min(
        cost(predict(f, np.array(theta), levels), y, method)
        for theta in itertools.combinations_with_replacement(candidates, len(levels) - 1)
    )


def segment_best(f, y, levels, method):
    """Least cost by a DP over levels: level k takes a run of the sorted distinct scores.

    D[k, b] = least cost of giving the first b score groups levels 0..k; O(K·G²).
    """
    s, group = np.unique(f, return_inverse=True)
    n_groups = s.size
    # cost of putting group g at level k, then prefix sums over groups
    per_group = np.zeros((len(levels), n_groups))
    for k, level in enumerate(levels):
        row_cost = np.abs(level - y) if method == "mae" else (level != y).astype(float)
        per_group[k] = np.bincount(group, weights=row_cost, minlength=n_groups)
    prefix = np.concatenate((np.zeros((len(levels), 1)), np.cumsum(per_group, axis=1)), axis=1)
    D = prefix[0].copy()  # level 0 takes groups [0, b)
    for k in range(1, len(levels)):
        # D_new[b] = min_{a <= b} D[a] + prefix[k, b] − prefix[k, a]
        D = np.minimum.accumulate(D - prefix[k]) + prefix[k]
    return D[-1]


levels_strategy = st.lists(st.integers(-6, 9), min_size=1, max_size=4, unique=True).map(sorted)


@st.composite
def threshold_problems(draw):
    levels = np.array(draw(levels_strategy), dtype=np.float64)
    n = draw(st.integers(1, 9))
    y = levels[draw(st.lists(st.integers(0, len(levels) - 1), min_size=n, max_size=n))]
    tied = draw(st.booleans())
    values = st.integers(0, 3) if tied else st.floats(-5, 5, allow_nan=False)
    f = np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype=np.float64)
    return f, y, levels, draw(st.sampled_from(["mae", "zero_one"]))


@given(threshold_problems())
@settings(max_examples=300, deadline=None)
def test_thresholds_are_optimal_against_brute_force(problem):
    f, y, levels, method = problem
    theta = optimal_thresholds(f, y, levels, method)
    assert theta.shape == (len(levels) - 1,)
    assert np.all(theta[1:] >= theta[:-1])
    best = brute_force_best(f, y, levels, method)
    assert cost(predict(f, theta, levels), y, method) == best
    assert segment_best(f, y, levels, method) == best


def test_thresholds_separate_adjacent_floats():
    # the midpoint of 1 + 2^-52 and 1 + 2^-51 rounds (to even) up to the larger one
    low = np.nextafter(1.0, 2.0)
    high = np.nextafter(low, 2.0)
    assert 0.5 * low + 0.5 * high == high
    f = np.array([low, high, 3.0])
    y = np.array([0.0, 1.0, 2.0])
    theta = optimal_thresholds(f, y, np.array([0.0, 1.0, 2.0]))
    np.testing.assert_array_equal(predict(f, theta, np.array([0.0, 1.0, 2.0])), y)


def test_unused_levels_get_infinite_thresholds():
    # levels 0 and 5 present, every score equal: one prediction for all rows, the median
    f = np.zeros(5)
    y = np.array([0.0, 0.0, 0.0, 5.0, 5.0])
    theta = optimal_thresholds(f, y, np.array([0.0, 5.0]))
    np.testing.assert_array_equal(theta, [np.inf])


def ordinal_data(seed, n=60, d=3, labels=(1, 2, 3)):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    signal = X @ rng.normal(size=d) + rng.normal(scale=0.5, size=n)
    cuts = np.quantile(signal, np.linspace(0, 1, len(labels) + 1)[1:-1])
    return X, np.asarray(labels)[np.digitize(signal, cuts)]


@pytest.mark.parametrize("cost_name", ["zero_one", "linear"])
@pytest.mark.parametrize("labels", [(1, 2, 3), (-2, 0, 5, 6)])
def test_fit_is_bmrm_ordinal_plus_optimal_thresholds(cost_name, labels):
    X, y = ordinal_data(0, labels=labels)
    est = OrdinalRegressor(lam=0.01, cost=cost_name, tol=1e-4).fit(X, y)
    model = bmrm.fit(
        X, y - min(labels), "ordinal", lam=0.01, tol=1e-4, loss_params={"cost": cost_name}
    )
    np.testing.assert_array_equal(est.coef_, model.coef_)
    np.testing.assert_array_equal(est.classes_, labels)
    f = X @ model.coef_
    np.testing.assert_array_equal(est.decision_function(X), f)
    levels = np.asarray(labels, dtype=float)
    pred = est.predict(X)
    assert set(pred) <= set(labels)
    train_cost = cost(pred, y, "mae")
    assert train_cost == segment_best(f, y, levels, "mae")
    assert est.mae(X, y) == pytest.approx(train_cost / len(y), rel=1e-12)
    assert est.mae(X, y) == mean_absolute_error(y, pred)
    assert est.score(X, y) == -est.mae(X, y)
    assert est.accuracy(X, y) == accuracy_score(y, pred)
    # the error-count thresholds on the same scores
    est01 = OrdinalRegressor(lam=0.01, cost=cost_name, tol=1e-4, threshold_method="zero_one")
    pred01 = est01.fit(X, y).predict(X)
    assert cost(pred01, y, "zero_one") == segment_best(f, y, levels, "zero_one")
    assert cost(pred01, y, "zero_one") <= cost(pred, y, "zero_one")


def test_single_level_predicts_it():
    X, _ = ordinal_data(1, n=10)
    est = OrdinalRegressor().fit(X, np.full(10, 4))
    assert est.thresholds_.shape == (0,)
    np.testing.assert_array_equal(est.predict(X), 4)
    np.testing.assert_array_equal(est.coef_, 0.0)


@pytest.mark.parametrize(
    ("dtype", "labels"),
    [
        (np.int8, (-100, 0, 100)),  # 100 − (−100) wraps around to −56 in int8
        (np.int16, (-20000, 3, 20000)),
        (np.uint8, (0, 7, 250)),
    ],
)
def test_small_label_dtypes_fit_as_int64(dtype, labels):
    """Labels of any integer dtype give the int64 fit: its coefficients,
    thresholds and predictions, returned in the labels' own dtype."""
    X, y = ordinal_data(5, labels=labels)
    ref = OrdinalRegressor(lam=0.01, tol=1e-4).fit(X, y.astype(np.int64))
    est = OrdinalRegressor(lam=0.01, tol=1e-4).fit(X, y.astype(dtype))
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    np.testing.assert_array_equal(est.thresholds_, ref.thresholds_)
    assert est.classes_.dtype == dtype
    np.testing.assert_array_equal(est.classes_, labels)
    pred = est.predict(X)
    assert pred.dtype == dtype
    np.testing.assert_array_equal(pred, ref.predict(X))
    assert est.mae(X, y.astype(dtype)) == ref.mae(X, y)
    assert ref.accuracy(X, y) > 0.6  # a fit worth comparing


def test_bool_labels_are_two_levels_false_below_true():
    """A bool y fits as the labels 0 < 1 and predicts bools (``classes_`` [False, True])."""
    X, y = ordinal_data(6, labels=(0, 1))
    est = OrdinalRegressor(lam=0.01, tol=1e-4).fit(X, y.astype(bool))
    ref = OrdinalRegressor(lam=0.01, tol=1e-4).fit(X, y)
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    np.testing.assert_array_equal(est.thresholds_, ref.thresholds_)
    assert est.classes_.dtype == bool
    np.testing.assert_array_equal(est.classes_, [False, True])
    pred = est.predict(X)
    assert pred.dtype == bool
    np.testing.assert_array_equal(pred, ref.predict(X).astype(bool))
    assert est.accuracy(X, y.astype(bool)) == ref.accuracy(X, y) > 0.8
    assert est.mae(X, y.astype(bool)) == ref.mae(X, y)
    # one bool level: predicted everywhere
    np.testing.assert_array_equal(
        OrdinalRegressor().fit(X, np.ones(len(y), bool)).predict(X), True
    )


def test_rejects_labels_beyond_2_to_the_53():
    X, _ = ordinal_data(7, n=2)
    for y, message in (
        (np.array([-(2**63), 0]), r"within ±2\*\*53.*got -9.2"),  # np.abs(-2**63) < 0
        (np.array([2**53 + 1, 0], dtype=np.uint64), r"within ±2\*\*53"),
        (np.array([-(2**53), 2**53]), r"spanning at most 2\*\*53"),
        (np.array([-(2.0**53), 1.0]), r"spanning at most 2\*\*53"),
    ):
        with pytest.raises(ValueError, match=message):
            OrdinalRegressor().fit(X, y)


def test_rejects_non_integer_levels():
    X, y = ordinal_data(2)
    with pytest.raises(ValueError, match="y must hold integer ordinal levels"):
        OrdinalRegressor().fit(X, y + 0.5)
    with pytest.raises(ValueError, match="y must hold integer ordinal levels"):
        OrdinalRegressor().fit(X, np.array(["a", "b", "c"] * 20))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # mord's L-BFGS-B options
def test_benchmark_thresholds_are_mae_optimal_and_competitive(shared_data):
    mord = pytest.importorskip("mord")
    path = shared_data / "ordinal" / "stock_ord.csv"
    if not path.exists():
        pytest.skip(f"{path} not found")
    data = np.loadtxt(path, delimiter=",", skiprows=1)
    X, y = data[:, 1:], data[:, 0].astype(np.int64)
    ours, theirs = [], []
    for seed in range(2):
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.2, random_state=seed)
        scaler = StandardScaler().fit(X_tr)
        X_tr, X_te = scaler.transform(X_tr), scaler.transform(X_te)
        est = OrdinalRegressor(lam=1e-3).fit(X_tr, y_tr)
        f = est.decision_function(X_tr)
        levels = est.classes_.astype(float)
        assert cost(est.predict(X_tr), y_tr, "mae") == segment_best(f, y_tr, levels, "mae")
        ours.append(est.mae(X_te, y_te))
        at = mord.LogisticAT(alpha=1.0).fit(X_tr, y_tr)
        theirs.append(mean_absolute_error(y_te, at.predict(X_te)))
    # same model class (linear score + thresholds): within 25% of mord's all-threshold fit
    assert np.mean(ours) <= 1.25 * np.mean(theirs)


def test_optimal_thresholds_rejects_bad_arguments():
    f, levels = np.arange(3.0), np.array([0.0, 2.0])
    with pytest.raises(ValueError, match="y must hold only values from levels"):
        optimal_thresholds(f, np.array([0.0, 1.0, 2.0]), levels)
    with pytest.raises(ValueError, match="levels must be a non-empty, strictly increasing"):
        optimal_thresholds(f, np.zeros(3), np.array([2.0, 0.0]))
    with pytest.raises(ValueError, match="method must be 'mae' or 'zero_one'"):
        optimal_thresholds(f, np.zeros(3), levels, "mse")
    with pytest.raises(ValueError, match="f and y must be 1-d"):
        optimal_thresholds(f, np.zeros(2), levels)


def weighted_cost(pred, y, s, method):
    return np.sum(s * (np.abs(pred - y) if method == "mae" else (pred != y)))


def weighted_brute_force_best(f, y, s, levels, method):
    """Least weighted cost over all non-decreasing thresholds at −inf, +inf or a distinct
    score but the largest (as in :func:`brute_force_best`)."""
    u = np.unique(f)
    candidates = np.concatenate(([-np.inf], u[:-1], [np.inf]))  # as in brute_force_best
    return min(
        weighted_cost(predict(f, np.array(theta), levels), y, s, method)
        for theta in itertools.combinations_with_replacement(candidates, len(levels) - 1)
    )


@given(threshold_problems(), st.lists(st.integers(0, 3), min_size=9, max_size=9))
@settings(max_examples=300, deadline=None)
def test_weighted_thresholds_are_optimal_and_those_of_repeated_rows(problem, weights):
    f, y, levels, method = problem
    s = np.array(weights[: len(f)], dtype=np.float64)
    if not s.any():
        s[0] = 1.0
    theta = optimal_thresholds(f, y, levels, method, sample_weight=s)
    assert np.all(theta[1:] >= theta[:-1])
    best = weighted_brute_force_best(f, y, s, levels, method)
    assert weighted_cost(predict(f, theta, levels), y, s, method) == best
    # integer weights: the thresholds of the data with rows repeated (0: removed)
    rows = np.repeat(np.arange(len(f)), s.astype(np.int64))
    np.testing.assert_array_equal(theta, optimal_thresholds(f[rows], y[rows], levels, method))
    # unit weights: the unweighted thresholds
    np.testing.assert_array_equal(
        optimal_thresholds(f, y, levels, method, sample_weight=np.ones(len(f))),
        optimal_thresholds(f, y, levels, method),
    )


@pytest.mark.parametrize("cost_name", ["zero_one", "linear"])
def test_weighted_fit_is_the_fit_on_repeated_rows(cost_name):
    """Both minimise one objective (each pair weighs s_i s_j): within the certified gaps,
    and the coefficients within the L2 distance bound; the thresholds on the weighted
    fit's scores are those of its rows repeated."""
    X, y = ordinal_data(3, n=50, labels=(1, 2, 4))
    s = np.random.default_rng(3).integers(0, 4, len(y)).astype(np.float64)
    s[:3] = (1.0, 2.0, 3.0)
    rows = np.repeat(np.arange(len(y)), s.astype(np.int64))
    kw = {"lam": 0.01, "cost": cost_name, "tol": 1e-8, "max_iter": 3000}
    weighted = OrdinalRegressor(**kw).fit(X, y, sample_weight=s)
    repeated = OrdinalRegressor(**kw).fit(X[rows], y[rows])
    a, b = weighted.result_, repeated.result_
    assert abs(a.fun - b.fun) <= max(a.gap, b.gap) + 1e-12
    bound = 4.0 * (a.fun + b.fun - 2.0 * max(a.lower_bound, b.lower_bound)) / 0.01
    assert np.sum((weighted.coef_ - repeated.coef_) ** 2) <= bound + 1e-12
    f = weighted.decision_function(X)
    levels = np.array([0.0, 1.0, 3.0])
    np.testing.assert_array_equal(
        weighted.thresholds_,
        optimal_thresholds(f[rows], (y - 1)[rows].astype(float), levels),
    )
    # the weighted MAE of the training predictions is the optimum on these scores
    pred = weighted.predict(X)
    assert weighted.mae(X, y, sample_weight=s) == pytest.approx(
        weighted_brute_force_best(f, y, s, np.array([1.0, 2.0, 4.0]), "mae") / s.sum(), rel=1e-12
    )
    assert set(pred) <= {1, 2, 4}


def test_weighted_fit_errors_name_sample_weight():
    X, y = ordinal_data(4, n=20)
    with pytest.raises(ValueError, match=r"sample_weight must be 1-d with one weight per row"):
        OrdinalRegressor().fit(X, y, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="sample_weight is all zero"):
        OrdinalRegressor().fit(X, y, sample_weight=np.zeros(20))
    with pytest.raises(ValueError, match="sample_weight must be non-negative"):
        OrdinalRegressor().fit(X, y, sample_weight=-np.ones(20))

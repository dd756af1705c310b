"""The ordinal loss against brute force over all pairs (tests/losses/reference_pairs.py)."""

import json
import zlib

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import losses
from losses.ordinal import OrdinalLoss
from tests.losses.reference_pairs import (
    ordinal_query,
    ordinal_query_loops,
    ordinal_risk,
    svmrank_risk,
)

MATRIX_LEVELS = 12


def random_matrix(rng, size=MATRIX_LEVELS, integer=False):
    if integer:
        return rng.integers(0, 4, (size, size)).astype(np.float64)
    c = rng.exponential(size=(size, size))
    c[rng.random((size, size)) < 0.2] = 0.0
    return c


COSTS = {
    "zero_one": lambda rng: "zero_one",
    "linear": lambda rng: "linear",
    "matrix": lambda rng: random_matrix(rng),
    "integer_matrix": lambda rng: random_matrix(rng, integer=True),
}


def random_labels(rng, m, max_label):
    kind = rng.integers(5)
    if kind == 0:
        return np.full(m, rng.integers(0, max_label + 1))
    if kind == 1:
        return rng.integers(0, 2, m)
    if kind == 2:
        return rng.integers(0, 5, m)
    if kind == 3:
        present = rng.choice(max_label + 1, size=min(3, max_label + 1), replace=False)
        return rng.choice(present, m)
    return rng.integers(0, max_label + 1, m)


def random_scores(rng, m):
    kind = rng.integers(4)
    if kind == 0:
        return rng.normal(scale=2.0, size=m)
    if kind == 1:
        # half-integers: ties in f and pairs exactly at the hinge, all exact in floating point
        return rng.integers(-4, 5, m) * 0.5
    if kind == 2:
        return np.full(m, rng.normal())
    return rng.choice(rng.normal(size=3), m)


def random_batch(rng, n_queries, max_label):
    sizes = rng.choice([1, 2, 3, 5, 8, 13, 21, 40], n_queries)
    ys = [random_labels(rng, m, max_label) for m in sizes]
    fs = [random_scores(rng, m) for m in sizes]
    query_ptr = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    return ys, fs, query_ptr


def run(loss, fs, ys, query_ptr):
    targets = loss.validate(np.concatenate(ys), query_ptr)
    f = np.concatenate(fs)
    values, grad = loss.loss_grad(f, targets)
    return values, grad, loss.metric(f, targets)


@pytest.mark.parametrize("normalize", ["query", "none"])
@pytest.mark.parametrize("cost_name", list(COSTS))
def test_many_random_queries_match_brute_force(cost_name, normalize):
    rng = np.random.default_rng(zlib.crc32(f"{cost_name}-{normalize}".encode()))
    cost = COSTS[cost_name](rng)
    max_label = MATRIX_LEVELS - 1 if "matrix" in cost_name else 40
    ys, fs, query_ptr = random_batch(rng, 1500, max_label)
    loss = losses.get("ordinal", cost=cost, normalize=normalize)
    values, grad, metric = run(loss, fs, ys, query_ptr)
    for q, (f, y) in enumerate(zip(fs, ys, strict=True)):
        ref_loss, ref_grad, ref_metric = ordinal_query(f, y, cost, normalize)
        rows = slice(query_ptr[q], query_ptr[q + 1])
        np.testing.assert_allclose(values[q], ref_loss, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(grad[rows], ref_grad, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(metric[q], ref_metric, rtol=1e-12, atol=1e-12)
    assert np.all(values >= metric - 1e-12)


@pytest.mark.parametrize(
    ("m", "n_levels", "cost_name"),
    [
        (2000, 5, "zero_one"),
        (2000, 5, "linear"),
        (2000, 300, "zero_one"),
        (2000, 300, "linear"),
        (2000, 300, "matrix"),
        (1500, 2, "matrix"),
    ],
)
def test_large_query_matches_brute_force(m, n_levels, cost_name):
    rng = np.random.default_rng(m + n_levels)
    cost = random_matrix(rng, n_levels) if cost_name == "matrix" else cost_name
    y = rng.integers(0, n_levels, m)
    loss = OrdinalLoss(cost=cost)
    for f in (rng.normal(size=m), rng.integers(-20, 21, m) * 0.25):
        values, grad, metric = run(loss, [f], [y], np.array([0, m]))
        ref_loss, ref_grad, ref_metric = ordinal_query(f, y, cost)
        np.testing.assert_allclose(values[0], ref_loss, rtol=1e-11)
        np.testing.assert_allclose(grad, ref_grad, rtol=1e-11, atol=1e-14)
        np.testing.assert_allclose(metric[0], ref_metric, rtol=1e-11)


scores = st.one_of(
    st.sampled_from([-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0]),
    st.floats(-3, 3, allow_nan=False),
)


@settings(max_examples=200, deadline=None)
@given(
    data=st.integers(1, 9).flatmap(
        lambda m: st.tuples(
            st.lists(st.integers(0, 4), min_size=m, max_size=m),
            st.lists(scores, min_size=m, max_size=m),
        )
    ),
    cost=st.sampled_from(["zero_one", "linear", "matrix"]),
    normalize=st.sampled_from(["query", "none"]),
)
def test_small_queries_match_loop_reference(data, cost, normalize):
    y, f = np.array(data[0]), np.array(data[1], dtype=np.float64)
    if cost == "matrix":
        cost = np.arange(25, dtype=np.float64).reshape(5, 5) % 7
    values, grad, metric = run(
        OrdinalLoss(cost=cost, normalize=normalize), [f], [y], np.array([0, len(y)])
    )
    ref_loss, ref_grad, ref_metric = ordinal_query_loops(f, y, cost, normalize)
    np.testing.assert_allclose(values[0], ref_loss, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(metric[0], ref_metric, rtol=1e-12, atol=1e-12)


def test_degenerate_queries_give_zero():
    loss = OrdinalLoss()
    ys = [np.array([3]), np.array([2, 2, 2, 2]), np.array([0, 0]), np.array([1, 0])]
    fs = [
        np.array([1.0]),
        np.array([4.0, -1.0, 0.0, 0.0]),
        np.array([1.0, 1.0]),
        np.array([0.0, 0.0]),
    ]
    values, grad, metric = run(loss, fs, ys, np.array([0, 1, 5, 7, 9]))
    np.testing.assert_array_equal(values[:3], 0.0)
    np.testing.assert_array_equal(grad[:7], 0.0)
    np.testing.assert_array_equal(metric[:3], 0.0)
    # two tied rows, one comparable pair: hinge 1, misordered (tie counts)
    assert values[3] == 1.0 and metric[3] == 1.0
    np.testing.assert_array_equal(grad[7:], [-1.0, 1.0])
    value, grad = losses.risk("ordinal", np.zeros(0), np.zeros(0))
    assert value == 0.0 and grad.shape == (0,)


@pytest.mark.parametrize("cost_name", ["zero_one", "linear", "matrix"])
def test_subgradient_inequality_and_directional_derivative(cost_name):
    rng = np.random.default_rng(7)
    cost = random_matrix(rng) if cost_name == "matrix" else cost_name
    ys, fs, query_ptr = random_batch(rng, 300, MATRIX_LEVELS - 1)
    loss = OrdinalLoss(cost=cost)
    targets = loss.validate(np.concatenate(ys), query_ptr)
    f = np.concatenate(fs)
    values, grad = loss.loss_grad(f, targets)
    for _ in range(20):
        g_point = f + rng.normal(scale=rng.choice([0.01, 1.0]), size=f.size)
        other = loss.loss_grad(g_point, targets)[0].sum()
        assert other >= values.sum() + grad @ (g_point - f) - 1e-9
    # at a generic point the loss is locally linear: central differences are exact
    f = rng.normal(size=f.size)
    values, grad = loss.loss_grad(f, targets)
    for _ in range(5):
        d = rng.normal(size=f.size)
        h = 1e-7
        up = loss.loss_grad(f + h * d, targets)[0].sum()
        down = loss.loss_grad(f - h * d, targets)[0].sum()
        np.testing.assert_allclose((up - down) / (2 * h), grad @ d, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("cost_name", ["zero_one", "linear", "matrix"])
def test_permuting_rows_of_a_query_permutes_the_gradient(cost_name):
    rng = np.random.default_rng(11)
    cost = random_matrix(rng) if cost_name == "matrix" else cost_name
    ys, fs, query_ptr = random_batch(rng, 400, MATRIX_LEVELS - 1)
    loss = OrdinalLoss(cost=cost)
    values, grad, metric = run(loss, fs, ys, query_ptr)
    perm = np.concatenate(
        [s + rng.permutation(e - s) for s, e in zip(query_ptr[:-1], query_ptr[1:], strict=True)]
    )
    y, f = np.concatenate(ys), np.concatenate(fs)
    values_p, grad_p, metric_p = run(loss, [f[perm]], [y[perm]], query_ptr)
    np.testing.assert_allclose(values_p, values, rtol=1e-13, atol=1e-15)
    np.testing.assert_array_equal(grad_p, grad[perm])
    np.testing.assert_allclose(metric_p, metric, rtol=1e-13, atol=1e-15)


def test_large_offset_in_scores_keeps_the_loss():
    rng = np.random.default_rng(3)
    m = 5000
    y = rng.integers(0, 5, m)
    f = rng.normal(size=m)
    loss = OrdinalLoss(cost="linear")
    base = run(loss, [f], [y], np.array([0, m]))
    shifted = run(loss, [f + 1e6], [y], np.array([0, m]))
    np.testing.assert_allclose(shifted[0], base[0], rtol=1e-7)


@pytest.mark.parametrize("cost_name", ["zero_one", "matrix"])
def test_parallel_equals_serial(cost_name):
    rng = np.random.default_rng(5)
    cost = random_matrix(rng) if cost_name == "matrix" else cost_name
    ys, fs, query_ptr = random_batch(rng, 2000, MATRIX_LEVELS - 1)
    loss = OrdinalLoss(cost=cost)
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        serial = run(loss, fs, ys, query_ptr)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        parallel = run(loss, fs, ys, query_ptr)
    finally:
        numba.set_num_threads(threads)
    for a, b in zip(serial, parallel, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("normalize", ["query", "none"])
@pytest.mark.parametrize("cost", ["zero_one", "linear"])
def test_risk_with_unsorted_qid_matches_caller_order_reference(cost, normalize):
    rng = np.random.default_rng(13)
    n = 600
    qid = rng.integers(0, 40, n)
    y = rng.integers(0, 4, n)
    f = rng.integers(-6, 7, n) * 0.5
    loss = losses.get("ordinal", cost=cost, normalize=normalize)
    value, grad = losses.risk(loss, f, y, qid)
    ref_value, ref_grad = ordinal_risk(f, y, qid, cost, normalize)
    np.testing.assert_allclose(value, ref_value, rtol=1e-12)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-12, atol=1e-15)


def test_normalize_none_is_svmrank_objective():
    rng = np.random.default_rng(17)
    n = 150
    qid = np.sort(rng.integers(0, 8, n))
    y = rng.integers(0, 3, n)
    f = rng.normal(size=n)
    value, _ = losses.risk(OrdinalLoss(normalize="none"), f, y, qid)
    assert value == pytest.approx(svmrank_risk(f, y, qid), rel=1e-12)


def test_get_params_round_trip_through_json():
    rng = np.random.default_rng(19)
    cost = random_matrix(rng)
    ys, fs, query_ptr = random_batch(rng, 50, MATRIX_LEVELS - 1)
    for loss in (OrdinalLoss(cost=cost, normalize="none"), OrdinalLoss(cost="linear")):
        params = json.loads(json.dumps(loss.get_params()))
        rebuilt = losses.get("ordinal", **params)
        for a, b in zip(
            run(loss, fs, ys, query_ptr), run(rebuilt, fs, ys, query_ptr), strict=True
        ):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"cost": "squared"}, "cost must be one of"),
        ({"cost": np.ones(3)}, "cost matrix must be square"),
        ({"cost": np.ones((2, 3))}, "cost matrix must be square"),
        ({"cost": [[0.0, np.nan], [0.0, 0.0]]}, "cost matrix must not contain NaN"),
        ({"cost": [[0.0, -1.0], [0.0, 0.0]]}, "cost matrix must be non-negative"),
        ({"cost": [["a", "b"], ["c", "d"]]}, "cost must be one of"),
        ({"normalize": "pairs"}, "normalize must be one of"),
    ],
)
def test_invalid_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        losses.get("ordinal", **params)


@pytest.mark.parametrize(
    ("y", "params", "match"),
    [
        ([0, 1, 2, 3], {"cost": np.ones((3, 3))}, r"cost matrix must be at least \(4, 4\)"),
        ([0, -1, 2], {}, "y must hold non-negative integer"),
        ([0, 1.5, 2], {}, "y must hold non-negative integer"),
        ([0, np.nan, 2], {}, "y must not contain NaN"),
    ],
)
def test_invalid_labels(y, params, match):
    with pytest.raises(ValueError, match=match):
        losses.risk(OrdinalLoss(**params), np.zeros(len(y)), np.array(y))


def test_data_keywords_are_rejected():
    with pytest.raises(ValueError, match=r"takes no data keywords but row_weight; got \['cost'\]"):
        losses.risk("ordinal", np.zeros(3), np.arange(3), cost="linear")


@pytest.mark.parametrize("n_long", [10, 200])
def test_hessian_plan_order_is_each_querys_stable_sort_in_four_bytes_per_row(n_long):
    """The squared hinge's Hessian plan sorts each query once for many products: per
    query the stable ascending order of f (numpy's, within the query), held as int32,
    with ties, a one-row, an empty and an all-equal query (radix sort for the long one)."""
    rng = np.random.default_rng(n_long)
    sizes = [1, 3, n_long, 7, 0, 5]
    query_ptr = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    y = rng.integers(0, 4, size=query_ptr[-1])
    f = rng.integers(-3, 3, size=query_ptr[-1]).astype(float)  # many ties
    f[query_ptr[5] : query_ptr[6]] = 0.5  # all equal
    loss = OrdinalLoss(hinge="squared")
    targets = loss.validate(y, query_ptr)
    _, args = loss.hessp_kernel(f, targets)
    order = args[-1]
    assert order.dtype == np.int32 and order.shape == f.shape
    for q in range(len(sizes)):
        s, e = query_ptr[q], query_ptr[q + 1]
        np.testing.assert_array_equal(order[s:e], np.argsort(f[s:e], kind="stable"))


def test_prepared_level_ranks_are_dense_and_four_bytes_per_row():
    """The prepared targets hold each row's dense label rank within its query (0 for the
    lowest label present) in four bytes per row: the array of the loss's size that a
    CofiRank fit keeps for the whole fit."""
    rng = np.random.default_rng(5)
    sizes = [1, 3, 40, 7, 0, 200]
    query_ptr = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    y = rng.choice([0, 2, 3, 7], size=query_ptr[-1])
    y[query_ptr[2] : query_ptr[3]] = 4  # a query whose labels are all equal
    targets = OrdinalLoss().validate(y, query_ptr)
    assert targets.rank.dtype == np.int32
    for q in range(len(sizes)):
        yq = y[query_ptr[q] : query_ptr[q + 1]]
        expected = np.searchsorted(np.unique(yq), yq)
        np.testing.assert_array_equal(targets.rank[query_ptr[q] : query_ptr[q + 1]], expected)

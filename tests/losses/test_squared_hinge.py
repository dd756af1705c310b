"""The squared pairwise hinge of the ordinal and preference losses against brute force over
all pairs (tests/losses/reference_hessians.py): values, gradients and Hessian products."""

import json
import zlib

import numpy as np
import pytest

import losses
from losses.preference import pairs_from_labels
from tests.losses.reference_hessians import ordinal_squared_query, squared_hinge_pairs
from tests.losses.test_ordinal import COSTS, MATRIX_LEVELS, random_batch, random_matrix


def assert_close(actual, desired, labels, rtol=1e-11):
    """Equal up to rounding: relative 1e-11, and an absolute slack for entries that are sums
    of cancelling terms, which scales with the query's largest level (the sweep keeps
    level-weighted sums for the linear cost) and its largest entry."""
    scale = (1.0 + np.max(labels, initial=0)) * (1.0 + np.abs(desired).max(initial=0.0))
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=1e-14 * scale)


def run(loss, fs, ys, query_ptr, row_weight=None, seed=0):
    targets = loss.validate(np.concatenate(ys), query_ptr, row_weight=row_weight)
    f = np.concatenate(fs)
    d = np.random.default_rng(seed).normal(size=f.size)
    values, grad = loss.loss_grad(f, targets)
    return f, d, values, grad, loss.hessp(f, d, targets), loss.metric(f, targets)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("normalize", ["query", "none"])
@pytest.mark.parametrize("cost_name", list(COSTS))
def test_many_random_queries_match_brute_force(cost_name, normalize, weighted):
    rng = np.random.default_rng(zlib.crc32(f"sq-{cost_name}-{normalize}-{weighted}".encode()))
    cost = COSTS[cost_name](rng)
    max_label = MATRIX_LEVELS - 1 if "matrix" in cost_name else 40
    # sizes 1 to 40; labels all equal, binary, few or many levels; scores with ties and
    # pairs exactly at the hinge (half-integers), all equal, or a few values repeated
    ys, fs, query_ptr = random_batch(rng, 600, max_label)
    n = query_ptr[-1]
    row_weight = None
    if weighted:
        row_weight = rng.uniform(0.0, 2.0, n) * (rng.random(n) > 0.15)
    loss = losses.get("ordinal", cost=cost, normalize=normalize, hinge="squared")
    f, d, values, grad, hd, metric = run(loss, fs, ys, query_ptr, row_weight)
    for q, y in enumerate(ys):
        rows = slice(query_ptr[q], query_ptr[q + 1])
        s = None if row_weight is None else row_weight[rows]
        ref_loss, ref_grad, ref_H = ordinal_squared_query(f[rows], y, cost, normalize, s)
        assert_close(values[q], ref_loss, y)
        assert_close(grad[rows], ref_grad, y)
        assert_close(hd[rows], ref_H @ d[rows], y)
    # the bound holds with equality for pairs tied in f (r = 1): up to rounding
    assert np.all(values >= metric * (1.0 - 1e-11) - 1e-12)


@pytest.mark.parametrize("cost_name", ["zero_one", "linear", "matrix"])
def test_large_query_matches_brute_force(cost_name):
    # 1500 rows: the radix sort's path
    rng = np.random.default_rng(7)
    m, n_levels = 1500, 6
    cost = random_matrix(rng, n_levels) if cost_name == "matrix" else cost_name
    y = rng.integers(0, n_levels, m)
    loss = losses.get("ordinal", cost=cost, hinge="squared")
    for f in (rng.normal(size=m), rng.integers(-20, 21, m) * 0.25):
        _, d, values, grad, hd, _ = run(loss, [f], [y], np.array([0, m]))
        ref_loss, ref_grad, ref_H = ordinal_squared_query(f, y, cost)
        assert_close(values[0], ref_loss, y, rtol=1e-10)
        assert_close(grad, ref_grad, y, rtol=1e-10)
        assert_close(hd, ref_H @ d, y, rtol=1e-10)


def test_degenerate_queries_give_zero():
    loss = losses.get("ordinal", hinge="squared")
    y = np.array([3, 1, 1, 1, 0, 2])  # one document, all equal, then a real query
    query_ptr = np.array([0, 1, 4, 6])
    f = np.array([5.0, -1.0, 2.0, 0.0, 1.0, 0.0])
    targets = loss.validate(y, query_ptr)
    values, grad = loss.loss_grad(f, targets)
    hd = loss.hessp(f, np.ones(6) * 3.0, targets)
    np.testing.assert_array_equal(values[:2], [0.0, 0.0])
    np.testing.assert_array_equal(grad[:4], np.zeros(4))
    np.testing.assert_array_equal(hd[:4], np.zeros(4))
    # the last query: pair (row 4, row 5) with r = 1 + 1 − 0 = 2
    assert values[2] == 4.0
    np.testing.assert_array_equal(grad[4:], [4.0, -4.0])


def test_pair_at_the_hinge_is_inactive():
    loss = losses.get("ordinal", hinge="squared")
    targets = loss.validate(np.array([0, 1]), np.array([0, 2]))
    f = np.array([0.0, 1.0])  # 1 + f_0 − f_1 = 0
    values, grad = loss.loss_grad(f, targets)
    assert values[0] == 0.0
    np.testing.assert_array_equal(grad, [0.0, 0.0])
    np.testing.assert_array_equal(loss.hessp(f, np.array([1.0, -1.0]), targets), [0.0, 0.0])


def test_large_offset_in_scores_keeps_the_loss():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 4, 30)
    f = rng.normal(size=30)
    loss = losses.get("ordinal", hinge="squared")
    targets = loss.validate(y, np.array([0, 30]))
    v0, g0 = loss.loss_grad(f, targets)
    v1, g1 = loss.loss_grad(f + 1e8, targets)
    np.testing.assert_allclose(v1, v0, rtol=1e-7)
    np.testing.assert_allclose(g1, g0, rtol=1e-7, atol=1e-7)


def test_parallel_equals_serial(force_threads):
    rng = np.random.default_rng(11)
    ys, fs, query_ptr = random_batch(rng, 3000, 4)
    loss = losses.get("ordinal", cost="linear", hinge="squared")
    f = np.concatenate(fs)
    d = rng.normal(size=f.size)
    targets = loss.validate(np.concatenate(ys), query_ptr)
    outputs = []
    for threads in (1, 3):
        runs = force_threads(threads)
        values, grad = loss.loss_grad(f, targets)
        outputs.append((values, grad, loss.hessp(f, d, targets)))
        assert runs == [threads, threads]
    for a, b in zip(*outputs, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("normalize", ["query", "none"])
@pytest.mark.parametrize("with_costs", [False, True])
def test_preference_matches_brute_force(normalize, with_costs):
    rng = np.random.default_rng(int(with_costs) + 2 * (normalize == "none"))
    sizes = [1, 2, 4, 6, 9, 3, 12]
    qid = np.repeat(np.arange(len(sizes)), sizes)
    y = rng.integers(0, 4, qid.size)
    y[3:7] = 2  # a query of equal labels: no pairs
    pairs, costs = pairs_from_labels(y, qid)
    if with_costs:
        costs = rng.uniform(0.0, 2.0, len(pairs)) * (rng.random(len(pairs)) > 0.2)
    loss = losses.get("preference", normalize=normalize, hinge="squared")
    targets = loss.validate(y, np.r_[0, np.cumsum(sizes)], pairs=pairs, pair_costs=costs)
    for f in (rng.normal(size=qid.size) * 2, rng.integers(-4, 5, qid.size) * 0.5):
        d = rng.normal(size=f.size)
        values, grad = loss.loss_grad(f, targets)
        hd = loss.hessp(f, d, targets)
        ptr = np.r_[0, np.cumsum(sizes)]
        for q in range(len(sizes)):
            mine = qid[pairs[:, 0]] == q
            i, j = pairs[mine, 0] - ptr[q], pairs[mine, 1] - ptr[q]
            weight = (1.0 / max(mine.sum(), 1)) if normalize == "query" else 1.0
            rows = slice(ptr[q], ptr[q + 1])
            ref = squared_hinge_pairs(f[rows], i, j, costs[mine], weight)
            np.testing.assert_allclose(values[q], ref[0], rtol=1e-12, atol=1e-13)
            np.testing.assert_allclose(grad[rows], ref[1], rtol=1e-12, atol=1e-13)
            np.testing.assert_allclose(hd[rows], ref[2] @ d[rows], rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("normalize", ["query", "none"])
@pytest.mark.parametrize("cost", ["zero_one", "linear"])
def test_preference_on_all_label_pairs_equals_ordinal(cost, normalize):
    rng = np.random.default_rng(5)
    qid = np.repeat(np.arange(20), rng.integers(1, 15, 20))
    y = rng.integers(0, 5, qid.size)
    f = rng.normal(size=qid.size)
    d = rng.normal(size=qid.size)
    pairs, costs = pairs_from_labels(y, qid, cost=cost)
    pref = losses.prepare(
        losses.get("preference", normalize=normalize, hinge="squared"), y, qid,
        pairs=pairs, pair_costs=costs,
    )  # fmt: skip
    ordinal = losses.prepare(
        losses.get("ordinal", cost=cost, normalize=normalize, hinge="squared"), y, qid
    )
    np.testing.assert_allclose(pref.risk(f)[0], ordinal.risk(f)[0], rtol=1e-12)
    np.testing.assert_allclose(pref.risk(f)[1], ordinal.risk(f)[1], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(pref.hessp(f, d), ordinal.hessp(f, d), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", ["ordinal", "preference"])
def test_hinge_parameter(name):
    squared = losses.get(name, hinge="squared")
    linear = losses.get(name)
    assert squared.smooth and not linear.smooth
    assert callable(squared.hessp) and linear.hessp is None
    params = json.loads(json.dumps(squared.get_params()))
    assert losses.get(name, **params).get_params() == squared.get_params()
    assert linear.get_params()["hinge"] == "linear"
    with pytest.raises(ValueError, match=r"hinge must be one of \['linear', 'squared'\]"):
        losses.get(name, hinge="quadratic")
    assert repr(linear.set_params(hinge="squared")).endswith("hinge='squared')")
    assert linear.smooth and callable(linear.hessp)


@pytest.mark.parametrize("name", ["ordinal", "preference"])
def test_check_oracle_passes(name):
    loss = losses.get(name, hinge="squared", normalize="none")
    if name == "preference":
        y = np.array([0, 1, 2, 0, 1, 1, 0, 3])
        qid = np.repeat([0, 1, 2], [3, 4, 1])
        pairs, costs = pairs_from_labels(y, qid, cost="linear")
        report = losses.check_oracle(loss, y, qid, pairs=pairs, pair_costs=costs)
    else:
        report = losses.check_oracle(loss)
    assert report.ok, str(report)
    assert report["hessian"].status == "pass"
    assert report["finite_differences"].status == "pass"

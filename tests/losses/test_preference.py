"""The preference loss and pairs_from_labels against brute force (reference_pairs.py)."""

import json

import numpy as np
import pytest

import losses
from losses.ordinal import OrdinalLoss
from losses.preference import PreferenceLoss, pairs_from_labels
from tests.losses.reference_pairs import label_pairs, preference_risk, split_queries


def random_problem(rng, n_queries, grouped=True, with_costs=True):
    """Scores, qid (caller order) and random pairs within queries, in caller indices."""
    sizes = rng.choice([1, 2, 3, 6, 15], n_queries)
    qid = np.repeat(rng.permutation(n_queries) * 3 + 5, sizes)
    if not grouped:
        qid = rng.permutation(qid)
    n = qid.size
    f = np.where(rng.random(n) < 0.5, rng.normal(size=n), rng.integers(-3, 4, n) * 0.5)
    pairs = []
    for rows in split_queries(qid, n):
        if rows.size < 2 or rng.random() < 0.15:
            continue
        k = rng.integers(1, 3 * rows.size)
        i = rng.choice(rows, k)
        j = rng.choice(rows, k)
        keep = i != j
        pairs.append(np.column_stack((i[keep], j[keep])))
    pairs = np.concatenate(pairs).astype(np.int64)
    pairs = pairs[rng.permutation(len(pairs))]
    costs = rng.exponential(size=len(pairs)) if with_costs else np.ones(len(pairs))
    costs[rng.random(len(pairs)) < 0.1] = 0.0
    return f, qid, pairs, costs


@pytest.mark.parametrize("costs_kind", ["random", "uniform", "none"])
@pytest.mark.parametrize("normalize", ["query", "none"])
@pytest.mark.parametrize("grouped", [True, False])
def test_risk_matches_brute_force_in_caller_order(grouped, normalize, costs_kind):
    """Random pairs in random order (a row's pairs not consecutive, repeated pairs), with
    random costs (some zero), one cost of 2.5 for every pair (moved into the query weights:
    the kernel's path without costs) or none (every cost 1, the same path)."""
    rng = np.random.default_rng(23 + grouped)
    f, qid, pairs, costs = random_problem(rng, 800, grouped=grouped)
    if costs_kind != "random":
        costs = np.full(len(pairs), 2.5 if costs_kind == "uniform" else 1.0)
    loss = losses.get("preference", normalize=normalize)
    value, grad = losses.risk(
        loss,
        f,
        np.zeros(len(f)),
        qid,
        pairs=pairs,
        pair_costs=None if costs_kind == "none" else costs,
    )
    ref_value, ref_grad, _ = preference_risk(f, pairs, costs, qid, normalize)
    np.testing.assert_allclose(value, ref_value, rtol=1e-12)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-12, atol=1e-15)


def test_per_query_values_and_metric_match_brute_force():
    rng = np.random.default_rng(29)
    f, qid, pairs, costs = random_problem(rng, 500, grouped=True)
    prepared = losses.prepare(
        PreferenceLoss(), np.zeros(len(f)), qid, pairs=pairs, pair_costs=costs
    )
    values, _ = prepared.loss_grad(f)
    metric = prepared.loss.metric(f, prepared.targets)
    # grouped qid: internal queries are in order of first appearance, as in the reference
    _, _, ref_metric = preference_risk(f, pairs, costs, qid)
    np.testing.assert_allclose(metric, ref_metric, rtol=1e-12, atol=1e-15)
    assert np.all(values >= metric - 1e-12)
    for q, rows in enumerate(split_queries(qid, len(f))):
        mine = np.isin(pairs[:, 0], rows)
        ref_value = preference_risk(f[rows], np.searchsorted(rows, pairs[mine]), costs[mine])[0]
        np.testing.assert_allclose(values[q], ref_value, rtol=1e-12, atol=1e-15)


def test_default_costs_are_one_and_empty_queries_give_zero():
    f = np.array([0.0, 0.5, 2.0, 1.0, 1.0, 3.0])
    qid = np.array([1, 1, 1, 2, 2, 3])
    pairs = np.array([[1, 0], [0, 2], [3, 4]])
    loss = PreferenceLoss(normalize="none")
    prepared = losses.prepare(loss, np.zeros(6), qid, pairs=pairs)
    values, grad = prepared.loss_grad(f)
    # query 1: (1, 0) gives 1 + 0.5 − 0 = 1.5, (0, 2) gives max(0, 1 − 2) = 0;
    # query 2: the tie gives 1; query 3 has no pair
    np.testing.assert_allclose(values, [1.5, 1.0, 0.0])
    np.testing.assert_array_equal(grad, [-1.0, 1.0, 0.0, 1.0, -1.0, 0.0])
    np.testing.assert_array_equal(loss.metric(f, prepared.targets), [1.0, 1.0, 0.0])
    no_pairs = losses.risk(loss, f, np.zeros(6), qid, pairs=np.zeros((0, 2), dtype=int))
    assert no_pairs[0] == 0.0 and not np.any(no_pairs[1])


def test_pair_exactly_at_the_hinge_has_zero_subgradient():
    value, grad = losses.risk(
        "preference", np.array([0.0, 1.0]), np.zeros(2), pairs=np.array([[0, 1]])
    )
    assert value == 0.0
    np.testing.assert_array_equal(grad, [0.0, 0.0])


def test_subgradient_inequality_and_pair_order_invariance():
    rng = np.random.default_rng(31)
    f, qid, pairs, costs = random_problem(rng, 300)
    prepared = losses.prepare(
        PreferenceLoss(), np.zeros(len(f)), qid, pairs=pairs, pair_costs=costs
    )
    values, grad = prepared.loss_grad(f)
    for _ in range(20):
        other = f + rng.normal(scale=rng.choice([0.01, 1.0]), size=f.size)
        assert prepared.loss_grad(other)[0].sum() >= values.sum() + grad @ (other - f) - 1e-9
    perm = rng.permutation(len(pairs))
    shuffled = losses.prepare(
        PreferenceLoss(), np.zeros(len(f)), qid, pairs=pairs[perm], pair_costs=costs[perm]
    )
    values_p, grad_p = shuffled.loss_grad(f)
    np.testing.assert_allclose(values_p, values, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(grad_p, grad, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("normalize", ["query", "none"])
@pytest.mark.parametrize("costs_kind", ["random", "uniform"])
def test_several_blocks_match_brute_force_and_one_block(force_threads, costs_kind, normalize):
    """preference_hinge and preference_violations over three blocks of queries (on the
    thread pool) against brute force, and bit for bit against one block; with random costs
    and with a uniform cost (the kernel's path without costs)."""
    rng = np.random.default_rng(37)
    f, qid, pairs, costs = random_problem(rng, 600)
    if costs_kind == "uniform":
        costs = np.full(len(pairs), 2.5)
    loss = PreferenceLoss(normalize=normalize)
    prepared = losses.prepare(loss, np.zeros(len(f)), qid, pairs=pairs, pair_costs=costs)
    assert prepared.targets.pair_cost.size == (0 if costs_kind == "uniform" else len(pairs))
    force_threads(1)
    serial = prepared.loss_grad(f), loss.metric(f, prepared.targets)
    runs = force_threads(3)
    (values, grad), metric = prepared.loss_grad(f), loss.metric(f, prepared.targets)
    assert runs == [3, 3]  # the loss and the metric, each on three blocks of queries
    # grouped qid: internal queries are in order of first appearance, as in the reference
    ref_value, ref_grad, ref_metric = preference_risk(f, pairs, costs, qid, normalize)
    np.testing.assert_allclose(metric, ref_metric, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(grad, ref_grad * len(values), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(values.mean(), ref_value, rtol=1e-12)
    for q, rows in enumerate(split_queries(qid, len(f))):
        mine = np.isin(pairs[:, 0], rows)
        ref_q = preference_risk(
            f[rows], np.searchsorted(rows, pairs[mine]), costs[mine], normalize=normalize
        )[0]
        np.testing.assert_allclose(values[q], ref_q, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(values, serial[0][0])
    np.testing.assert_array_equal(grad, serial[0][1])
    np.testing.assert_array_equal(metric, serial[1])


def test_get_params_round_trip_through_json():
    loss = PreferenceLoss(normalize="none")
    rebuilt = losses.get("preference", **json.loads(json.dumps(loss.get_params())))
    assert rebuilt.get_params() == {"normalize": "none", "hinge": "linear"}


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("grouped", [True, False])
@pytest.mark.parametrize("cost", ["zero_one", "linear", "gain_difference"])
def test_pairs_from_labels_matches_brute_force(force_threads, cost, grouped, threads):
    """count_label_pairs and fill_label_pairs on one block of queries and on three."""
    rng = np.random.default_rng(41)
    n = 300
    qid = rng.integers(0, 25, n)
    if grouped:
        qid = np.sort(qid)
    y = rng.integers(0, 5, n).astype(np.float64)
    runs = force_threads(threads)
    pairs, costs = pairs_from_labels(y, qid, cost=cost)
    assert runs == [threads, threads]  # counting, then filling
    assert pairs.dtype == np.int64 and pairs.shape == (len(costs), 2)
    found = [tuple(p) for p in pairs.tolist()]
    assert len(found) == len(set(found))
    assert set(found) == label_pairs(y, qid)
    expected = {
        "zero_one": lambda a, b: 1.0,
        "linear": lambda a, b: b - a,
        "gain_difference": lambda a, b: 2.0**b - 2.0**a,
    }[cost]
    for (i, j), c in zip(found, costs.tolist(), strict=True):
        assert c == expected(y[i], y[j])


@pytest.mark.parametrize(
    ("pair_cost", "ordinal_cost"),
    [
        ("zero_one", "zero_one"),
        ("linear", "linear"),
        ("gain_difference", 2.0 ** np.arange(6)[None, :] - 2.0 ** np.arange(6)[:, None]),
    ],
)
def test_preference_on_all_label_pairs_equals_ordinal(pair_cost, ordinal_cost):
    rng = np.random.default_rng(43)
    n = 400
    qid = rng.integers(0, 30, n)
    y = rng.integers(0, 6, n)
    f = rng.integers(-4, 5, n) * 0.5
    pairs, costs = pairs_from_labels(y, qid, cost=pair_cost)
    matrix = np.clip(ordinal_cost, 0, None) if not isinstance(ordinal_cost, str) else None
    ordinal = OrdinalLoss(cost=ordinal_cost if matrix is None else matrix)
    pref = losses.risk("preference", f, y, qid, pairs=pairs, pair_costs=costs)
    ref = losses.risk(ordinal, f, y, qid)
    np.testing.assert_allclose(pref[0], ref[0], rtol=1e-12)
    np.testing.assert_allclose(pref[1], ref[1], rtol=1e-12, atol=1e-15)


def test_pairs_from_labels_invalid():
    with pytest.raises(ValueError, match="cost must be one of"):
        pairs_from_labels([0, 1], cost="ndcg")
    with pytest.raises(ValueError, match="2\\^y overflows"):
        pairs_from_labels([0, 2000], cost="gain_difference")
    with pytest.raises(ValueError, match="y must not contain NaN"):
        pairs_from_labels([0, np.nan])


QUERY_PTR = np.array([0, 3, 5])


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({}, r"needs pairs=.*losses.pairs_from_labels"),
        ({"pairs": np.array([0, 1])}, r"pairs must have shape \(n_pairs, 2\)"),
        ({"pairs": np.array([[0, 1, 2]])}, r"pairs must have shape \(n_pairs, 2\)"),
        ({"pairs": np.array([[0.0, 1.0]])}, "pairs must hold integer row indices"),
        ({"pairs": np.array([[0, 5]])}, r"pairs holds row indices outside \[0, 5\)"),
        ({"pairs": np.array([[-1, 2]])}, r"pairs holds row indices outside \[0, 5\)"),
        ({"pairs": np.array([[0, 1], [2, 2]])}, r"pairs must join two different rows.*\(2, 2\)"),
        ({"pairs": np.array([[0, 1], [2, 3]])}, "pairs must join rows of the same query"),
        ({"pairs": np.array([[0, 1]]), "pair_costs": [1.0, 2.0]}, r"pair_costs must have shape"),
        ({"pairs": np.array([[0, 1]]), "pair_costs": [-1.0]}, "pair_costs must be non-negative"),
        ({"pairs": np.array([[0, 1]]), "pair_costs": [np.inf]}, "pair_costs must not contain"),
        ({"pairs": np.array([[0, 1]]), "pair_costs": ["a"]}, "pair_costs must be numeric"),
        ({"pairs": np.array([[0, 1]]), "cost": "linear"}, r"got \['cost'\]"),
    ],
)
def test_invalid_pairs(data, match):
    with pytest.raises(ValueError, match=match):
        PreferenceLoss().validate(np.zeros(5), QUERY_PTR, **data)


def test_invalid_pairs_through_risk_with_reordered_rows():
    qid = np.array([2, 1, 2, 1])
    with pytest.raises(ValueError, match="pairs must join rows of the same query"):
        losses.risk("preference", np.zeros(4), np.zeros(4), qid, pairs=np.array([[0, 1]]))
    with pytest.raises(ValueError, match="pairs"):
        losses.risk("preference", np.zeros(4), np.zeros(4), qid, pairs=np.array([[0, 4]]))
    value, grad = losses.risk(
        "preference", np.array([0.0, 0.0, 0.5, 0.0]), np.zeros(4), qid, pairs=np.array([[2, 0]])
    )
    # the only pair (caller rows 2 then 0) is in query 2: 1 + 0.5 − 0 over 2 queries
    assert value == 0.75
    np.testing.assert_array_equal(grad, [-0.5, 0.0, 0.5, 0.0])


def test_invalid_normalize():
    with pytest.raises(ValueError, match="normalize must be one of"):
        losses.get("preference", normalize="pairs")

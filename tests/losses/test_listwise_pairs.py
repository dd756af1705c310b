"""The NDCG@k / NERU losses with the pair joint feature map (``ties="pairs"``).

References: :func:`tests.losses.reference_listwise.pairs_brute_force`, every permutation of
queries of up to 7 documents, and :func:`merge_reference` here, a dynamic programme over the
merges of a query's gain levels (checked against the first), for 20–40 documents; larger
queries check that the value is attained by the subgradient's permutation. Convexity, the
bound and listing-order invariance are also in the shared property suite, and bmrm.fit
against cvxpy in tests/losses/test_properties.py.
"""

import itertools

import numpy as np
import pytest

import bmrm
import losses
from tests.losses.reference_listwise import Measure, pairs_brute_force, pessimistic_loss
from tests.losses.test_listwise import blocks, random_batch

CONFIGS = [
    ("ndcg", {}),
    ("ndcg", {"k": 1}),
    ("ndcg", {"k": 3, "gain": "linear"}),
    ("ndcg", {"k": 5, "c": "dcg", "truncate_c": True}),
    ("ndcg", {"k": 4, "discount": "original"}),
    ("neru", {}),
    ("neru", {"alpha": 2.0, "d": 1.0}),
    ("neru", {"k": 2, "d": 0.5}),
]
IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in p.items()) or 'default'}" for name, p in CONFIGS]


def build(name, params):
    loss = losses.get(name, ties="pairs", **params)
    assert not loss.latent
    if name == "ndcg":
        return loss, Measure("ndcg", k=loss.k, gain=loss.gain, discount=loss.discount)
    return loss, Measure("neru", k=loss.k, alpha=loss.alpha, d=loss.d)


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
def test_brute_force(name, params):
    """Value and subgradient (where the maximiser's gradient is unique) against every
    permutation, on 400 queries of 1..7 documents with tied labels and scores."""
    loss, measure = build(name, params)
    rng = np.random.default_rng(500 + CONFIGS.index((name, params)))
    f, y, ptr = random_batch(rng, name, 400, sizes=[1, 2, 3, 4, 5, 6, 7])
    targets = loss.validate(y, ptr)
    values, grad = loss.loss_grad(f, targets)
    metric = loss.metric(f, targets)
    n_unique = 0
    for q, s in enumerate(blocks(ptr)):
        expected, expected_grad, unique = pairs_brute_force(f[s], y[s], measure)
        assert values[q] == pytest.approx(expected, abs=1e-10), (f[s], y[s])
        assert values[q] >= 0.0
        assert grad[s].sum() == pytest.approx(0.0, abs=1e-10)
        if unique:
            n_unique += 1
            np.testing.assert_allclose(grad[s], expected_grad, atol=1e-10)
        assert metric[q] == pytest.approx(pessimistic_loss(f[s], y[s], measure), abs=1e-12)
        assert values[q] >= metric[q] - 1e-12
    assert n_unique > 100


def test_within_level_order_is_not_charged():
    y = np.array([2, 0, 1, 2, 0, 1, 0, 0])
    ptr = np.array([0, 8])
    loss = losses.get("ndcg", k=3, ties="pairs")
    targets = loss.validate(y, ptr)
    base = 10.0 * y
    for spread in (np.zeros(8), np.array([0.0, 3.0, -2.0, 4.0, -3.0, 1.0, 0.5, 2.0])):
        values, grad = loss.loss_grad(base + spread, targets)
        assert values[0] == 0.0
        np.testing.assert_array_equal(grad, 0.0)
    # one inverted pair of different labels is charged
    values, _ = loss.loss_grad(np.array([0.0, 1.0, 0.5, 0.0, 0.0, 0.5, 0.0, 0.0]), targets)
    assert values[0] > 0.0


@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_degenerate_queries(name):
    loss = losses.get(name, ties="pairs")
    y = np.array([3, 0, 0, 0, 2, 2, 2, 1])
    ptr = np.array([0, 1, 4, 7, 7, 8])
    f = np.array([5.0, 1.0, -2.0, 0.5, 3.0, -1.0, 7.0, 0.0])
    values, grad = loss.loss_grad(f, loss.validate(y, ptr))
    np.testing.assert_array_equal(values, 0.0)
    np.testing.assert_array_equal(grad, 0.0)


def pair_gradient(perm, b, scale):
    """The pair map's gradient −(2/P) Σ_{b_i > b_j, π puts j above i} (e_i − e_j) of a
    permutation π given as documents by position."""
    position = np.argsort(perm)
    i, j = np.nonzero((b[:, None] > b[None, :]) & (position[None, :] < position[:, None]))
    grad = np.zeros(len(b))
    np.subtract.at(grad, i, scale)
    np.add.at(grad, j, scale)
    return grad


def permutation_of_gradient(g, b, scale):
    """The permutation (documents by position) whose pair gradient is ``g``.

    For document d at position P_d, r_d documents of its gain above it and H_d documents of
    larger gain in all, g_d / scale = (larger gains below d) − (smaller gains above d)
    = H_d + r_d − P_d. So P_d − r_d = H_d − g_d / scale, the number of documents of other
    gains above d: non-decreasing along the positions within each gain, which orders the
    documents of one gain (those with equal counts are adjacent, in either order)."""
    above_others = (b[None, :] > b[:, None]).sum(axis=1) - g / scale
    counts = np.round(above_others)
    np.testing.assert_allclose(above_others, counts, atol=1e-9)  # whole numbers
    position = np.empty(len(b), dtype=np.int64)
    for level in np.unique(b):
        docs = np.flatnonzero(b == level)
        docs = docs[np.argsort(counts[docs], kind="stable")]
        position[docs] = counts[docs].astype(np.int64) + np.arange(len(docs))
    assert sorted(position.tolist()) == list(range(len(b)))  # a permutation
    return np.argsort(position)


def merge_reference(f, y, measure):
    """The pair-map loss of one query by dynamic programming over the merges of its gain
    levels, each level's documents in decreasing score.

    Some maximiser orders every level by decreasing score: exchanging two documents of one
    gain so that the higher score comes first leaves Δ and the pairs with the documents
    outside the stretch between them unchanged, and changes the term of each document of
    another gain inside the stretch by (2/P)(f_high − f_low) >= 0. The programme's state is
    how many documents of each level are placed, from the top; placing document d at the
    next position adds −a_pos b_d / Z to Δ − 1 and −(2/P) Σ (f_i − f_d) over the documents
    i of larger gain not yet placed (d is above them)."""
    f = np.asarray(f, dtype=np.float64)
    if measure.degenerate(y):
        return 0.0
    b = measure.gains(y)
    m = len(b)
    scale = 2.0 / (b[:, None] > b[None, :]).sum()
    a = measure.discounts(m) / measure.ideal(y)
    levels = np.unique(b)[::-1]  # largest gain first
    scores = [np.sort(f[b == level])[::-1].tolist() for level in levels]
    # tail[l][c]: sum of the scores of level l from its c-th document on
    tail = [np.concatenate((np.cumsum(x[::-1])[::-1], [0.0])).tolist() for x in scores]
    sizes = [len(x) for x in scores]
    best = {}
    for state in itertools.product(*(range(n + 1) for n in sizes)):
        if not any(state):
            best[state] = 0.0
            continue
        pos = sum(state) - 1
        value = -np.inf
        for lv, c in enumerate(state):
            if c == 0:
                continue
            prev = state[:lv] + (c - 1,) + state[lv + 1 :]
            d = scores[lv][c - 1]
            pairs = sum(tail[h][prev[h]] - (sizes[h] - prev[h]) * d for h in range(lv))
            value = max(value, best[prev] - a[pos] * levels[lv] - scale * pairs)
        best[state] = value
    return 1.0 + best[tuple(sizes)]


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
def test_merge_reference_matches_enumeration(name, params):
    """The dynamic programme of :func:`merge_reference` against every permutation."""
    _, measure = build(name, params)
    rng = np.random.default_rng(700 + CONFIGS.index((name, params)))
    f, y, ptr = random_batch(rng, name, 60, sizes=[2, 4, 6, 7])
    for s in blocks(ptr):
        expected = pairs_brute_force(f[s], y[s], measure)[0]
        assert merge_reference(f[s], y[s], measure) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("name", "params"), [CONFIGS[0], CONFIGS[2], CONFIGS[6]])
def test_queries_of_20_to_40_documents_match_dynamic_programming(name, params):
    """Value (exactly) against :func:`merge_reference`; the subgradient's permutation
    attains it."""
    loss, measure = build(name, params)
    rng = np.random.default_rng(90 + CONFIGS.index((name, params)))
    sizes = rng.integers(20, 41, 10)
    ptr = np.concatenate(([0], np.cumsum(sizes)))
    y = rng.integers(0, 4, ptr[-1])
    y[ptr[0] : ptr[1]] = rng.integers(1, 3, sizes[0])  # two levels (for NERU, d = 1 too)
    f = rng.normal(size=y.size)
    f[ptr[1] : ptr[2]] = np.round(f[ptr[1] : ptr[2]])  # tied scores
    values, grad = loss.loss_grad(f, loss.validate(y, ptr))
    for q, s in enumerate(blocks(ptr)):
        expected = merge_reference(f[s], y[s], measure)
        assert expected > 0.0
        assert values[q] == pytest.approx(expected, rel=1e-12, abs=1e-12), q
        b = measure.gains(y[s])
        scale = 2.0 / (b[:, None] > b[None, :]).sum()
        perm = permutation_of_gradient(grad[s], b, scale)
        attained = measure.loss(perm, y[s]) + grad[s] @ f[s]
        assert values[q] == pytest.approx(attained, rel=1e-12, abs=1e-12), q


def test_large_queries_are_a_maximum_over_permutations():
    """Queries of 40–120 documents: the value is attained (the permutation whose pair
    gradient is the returned subgradient has that value) and beats the ideal order, the
    order by score and random orders."""
    loss, measure = build("ndcg", {})
    rng = np.random.default_rng(8)
    sizes = rng.choice([40, 80, 120], 8)
    ptr = np.concatenate(([0], np.cumsum(sizes)))
    y = rng.integers(0, 4, ptr[-1])  # a few levels, as in LETOR data
    y[ptr[0] : ptr[1]] = rng.integers(0, 2, sizes[0])
    f = rng.normal(size=y.size)
    values, grad = loss.loss_grad(f, loss.validate(y, ptr))
    n_checked = 0
    for q, s in enumerate(blocks(ptr)):
        fq, yq = f[s], y[s]
        if measure.degenerate(yq):
            assert values[q] == 0.0
            np.testing.assert_array_equal(grad[s], 0.0)
            continue
        b = measure.gains(yq)
        higher = b[:, None] > b[None, :]
        scale = 2.0 / higher.sum()

        def objective(perm, fq=fq, higher=higher, scale=scale, yq=yq):
            position = np.argsort(perm)
            inverted = higher & (position[None, :] < position[:, None])
            i, j = np.nonzero(inverted)
            return measure.loss(perm, yq) - scale * np.sum(fq[i] - fq[j])

        perm = permutation_of_gradient(grad[s], b, scale)
        np.testing.assert_allclose(pair_gradient(perm, b, scale), grad[s], atol=1e-12)
        assert values[q] == pytest.approx(objective(perm), rel=1e-12, abs=1e-12), q
        candidates = [np.lexsort((-fq, -b)), np.argsort(-fq, kind="stable")]
        candidates += [rng.permutation(len(fq)) for _ in range(50)]
        assert values[q] >= max(objective(p) for p in candidates) - 1e-10
        n_checked += 1
    assert n_checked == 8


def test_too_many_states_are_refused():
    """The programme grows as k^L for L label levels: many levels need a small k."""
    m = 600
    y = np.arange(m) % 6
    with pytest.raises(ValueError, match="set a smaller k"):
        losses.get("neru", ties="pairs").validate(y, np.array([0, m]))
    losses.get("neru", ties="pairs", k=10).validate(y, np.array([0, m]))


def test_a_query_too_long_for_the_tail_table_is_refused_before_any_work():
    """One query of 100,000 documents: the tail table would take 24.8 GiB; validate refuses
    it by name (and bmrm.fit before any oracle call), while 4,000 documents still work."""
    rng = np.random.default_rng(0)
    m = 100_000
    y = rng.integers(0, 3, m)
    loss = losses.get("ndcg", ties="pairs")
    with pytest.raises(ValueError, match=r"ties='pairs': a query of 100000 documents needs .*GiB"):
        loss.validate(y, np.array([0, m]))
    X = rng.normal(size=(m, 2))
    with pytest.raises(ValueError, match=r"use ties='latent' \(the default\)"):
        bmrm.fit(X, y, loss, lam=0.1)
    short = rng.integers(0, 3, 4000)
    values, _ = loss.loss_grad(rng.normal(size=4000), loss.validate(short, np.array([0, 4000])))
    assert values[0] > 0.0

"""The NDCG@k / NERU losses with the pair joint feature map (``ties="pairs"``).

Reference: :func:`tests.losses.reference_listwise.pairs_brute_force`, every permutation of
queries of up to 7 documents. Convexity, the bound and listing-order invariance are also in
the shared property suite, and bmrm.fit against cvxpy in tests/losses/test_properties.py.
"""

import numpy as np
import pytest

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


def test_large_queries_are_a_maximum_over_permutations():
    """Queries of 40–120 documents: the value is attained (the returned subgradient's
    permutation value equals it) and beats the ideal order, the order by score and
    random orders."""
    loss, measure = build("ndcg", {})
    rng = np.random.default_rng(8)
    sizes = rng.choice([40, 80, 120], 8)
    ptr = np.concatenate(([0], np.cumsum(sizes)))
    y = rng.integers(0, 4, ptr[-1])  # a few levels, as in LETOR data
    y[ptr[0] : ptr[1]] = rng.integers(0, 2, sizes[0])
    f = rng.normal(size=y.size)
    values, _ = loss.loss_grad(f, loss.validate(y, ptr))
    for q, s in enumerate(blocks(ptr)):
        fq, yq = f[s], y[s]
        if measure.degenerate(yq):
            assert values[q] == 0.0
            continue
        b = measure.gains(yq)
        higher = b[:, None] > b[None, :]
        scale = 2.0 / higher.sum()

        def objective(perm, fq=fq, higher=higher, scale=scale, yq=yq):
            position = np.argsort(perm)
            inverted = higher & (position[None, :] < position[:, None])
            i, j = np.nonzero(inverted)
            return measure.loss(perm, yq) - scale * np.sum(fq[i] - fq[j])

        candidates = [np.lexsort((-fq, -b)), np.argsort(-fq, kind="stable")]
        candidates += [rng.permutation(len(fq)) for _ in range(50)]
        assert values[q] >= max(objective(p) for p in candidates) - 1e-10


def test_too_many_states_are_refused():
    """The programme grows as k^L for L label levels: many levels need a small k."""
    m = 600
    y = np.arange(m) % 6
    with pytest.raises(ValueError, match="set a smaller k"):
        losses.get("neru", ties="pairs").validate(y, np.array([0, m]))
    losses.get("neru", ties="pairs", k=10).validate(y, np.array([0, m]))

"""A loss's ``query_block``: the targets of a run of queries alone give exactly the values
and gradient rows that the whole batch gives them (see :mod:`losses._base`)."""

import numpy as np
import pytest

import losses

VARIANTS = [
    ("ndcg", {}),
    ("ndcg", {"ties": "increasing"}),
    ("ndcg", {"ties": "pairs"}),
    ("ndcg", {"truncate_c": True, "k": 3}),
    ("ndcg", {"bound": "ramp"}),
    ("ndcg", {"k": 2, "pairwise": 0.7, "average_precision": 0.4}),
    ("neru", {}),
    ("ordinal", {}),
    ("ordinal", {"hinge": "squared"}),
    ("ordinal", {"cost": [[0, 1, 3], [1, 0, 1], [3, 1, 0]]}),
    ("map", {}),
]


def random_batch(seed):
    """Queries of 1 to 14 documents: graded labels, an all-equal query, a one-document
    query, and tied scores."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 15, size=int(rng.integers(6, 14)))
    sizes[int(rng.integers(len(sizes)))] = 1
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    y = rng.integers(0, 3, size=ptr[-1]).astype(float)
    same = int(rng.integers(len(sizes)))
    y[ptr[same] : ptr[same + 1]] = 1.0
    f = np.round(rng.normal(size=ptr[-1]), 1)  # ties in the scores
    qid = np.repeat(np.arange(len(sizes)), sizes)
    return ptr, y, f, qid


@pytest.mark.parametrize("name, params", VARIANTS)
@pytest.mark.parametrize("seed", range(8))
def test_a_query_block_gives_the_batch_values_and_gradient_exactly(name, params, seed):
    ptr, y, f, qid = random_batch(seed)
    loss = losses.get(name, **params)
    prepared = losses.prepare(loss, y, qid)
    targets = prepared.targets
    if getattr(loss, "latent", False) and seed % 2:
        targets = loss.convexify(f, targets)  # the surrogate's targets are cut alike
    values, grad = loss.loss_grad(f, targets)
    rng = np.random.default_rng(seed)
    n_queries = len(ptr) - 1
    cuts = np.unique(np.concatenate([[0, n_queries], rng.integers(1, n_queries, size=3)]))
    for start, stop in zip(cuts[:-1], cuts[1:], strict=True):
        block = loss.query_block(targets, int(start), int(stop))
        part_values, part_grad = loss.loss_grad(f[ptr[start] : ptr[stop]], block)
        np.testing.assert_array_equal(part_values, values[start:stop])
        np.testing.assert_array_equal(part_grad, grad[ptr[start] : ptr[stop]])


@pytest.mark.parametrize("name, params", VARIANTS[:3] + VARIANTS[7:8])
def test_prepared_query_block_matches_the_batch(name, params):
    ptr, y, f, qid = random_batch(3)
    prepared = losses.prepare(losses.get(name, **params), y, qid)
    values, grad = prepared.loss_grad(f)
    block = prepared.query_block(2, 5)
    assert block.n_terms == 3 and block.groups.order is None
    np.testing.assert_array_equal(block.groups.query_ptr, ptr[2:6] - ptr[2])
    part_values, part_grad = block.loss_grad(f[ptr[2] : ptr[5]])
    np.testing.assert_array_equal(part_values, values[2:5])
    np.testing.assert_array_equal(part_grad, grad[ptr[2] : ptr[5]])


@pytest.mark.parametrize("name", ["squared", "hinge", "logistic"])
def test_a_pointwise_loss_is_cut_by_the_rows_of_the_queries(name):
    """A pointwise loss has one term per row: the block's terms are its queries' rows."""
    ptr, y, f, qid = random_batch(5)
    y = (y > 0).astype(float) if name != "squared" else y
    prepared = losses.prepare(name, y, qid)
    values, grad = prepared.loss_grad(f)
    block = prepared.query_block(2, 6)
    assert block.n_terms == ptr[6] - ptr[2]
    part_values, part_grad = block.loss_grad(f[ptr[2] : ptr[6]])
    np.testing.assert_array_equal(part_values, values[ptr[2] : ptr[6]])
    np.testing.assert_array_equal(part_grad, grad[ptr[2] : ptr[6]])
    d = np.random.default_rng(0).normal(size=f.size)
    if name != "hinge":  # the smooth ones: their Hessian products by rows alike
        hd = prepared.loss.hessp(f, d, prepared.targets)
        part_hd = block.loss.hessp(f[ptr[2] : ptr[6]], d[ptr[2] : ptr[6]], block.targets)
        np.testing.assert_array_equal(part_hd, hd[ptr[2] : ptr[6]])


def test_prepared_query_block_is_none_when_the_loss_cannot_be_cut():
    ptr, y, f, qid = random_batch(0)
    assert losses.prepare("listnet", y, qid).query_block(0, 2) is None  # no query_block
    per_query = np.repeat(np.arange(1.0, len(ptr)), np.diff(ptr))  # the terms' weights
    weighted = losses.prepare("ndcg", y, qid, sample_weight=per_query)
    assert weighted.weights is not None and weighted.query_block(0, 2) is None


@pytest.mark.parametrize("seed", range(4))
def test_the_ordinal_loss_with_row_weights_is_cut_exactly(seed):
    """The ordinal loss's own row weights (``row_weight``) are cut with its rows."""
    ptr, y, f, qid = random_batch(seed)
    weights = np.random.default_rng(seed).uniform(0.5, 2.0, size=len(y))
    prepared = losses.prepare("ordinal", y, qid, row_weight=weights)
    assert prepared.weights is None and prepared.targets.row_weight is not None
    values, grad = prepared.loss_grad(f)
    block = prepared.query_block(1, len(ptr) - 2)
    part_values, part_grad = block.loss_grad(f[ptr[1] : ptr[-2]])
    np.testing.assert_array_equal(part_values, values[1:-1])
    np.testing.assert_array_equal(part_grad, grad[ptr[1] : ptr[-2]])


@pytest.mark.parametrize("start, stop", [(-1, 2), (2, 2), (3, 1), (0, 10**6)])
def test_prepared_query_block_refuses_a_bad_range(start, stop):
    ptr, y, f, qid = random_batch(0)
    prepared = losses.prepare("ordinal", y, qid)
    with pytest.raises(ValueError, match="query block must satisfy 0 <= start < stop"):
        prepared.query_block(start, stop)

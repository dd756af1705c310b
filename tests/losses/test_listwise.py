"""The structured NDCG@k / NERU losses against brute force and scipy's assignment solver.

This file checks the convex tie rule (``ties="increasing"``: σ puts equal labels in
increasing score), which :func:`build` selects; the latent rule (the default) is checked in
tests/losses/test_listwise_latent.py.

References live in tests/losses/reference_listwise.py: every permutation for m <= 7, the full
m × m ``scipy.optimize.linear_sum_assignment`` for larger queries, and every tie-breaking of
the scores for the pessimistic metric.
"""

import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import losses
from losses._kernels.listwise import (
    LATTICE_CELLS,
    LATTICE_MEAN_STATES,
    LATTICE_STATES,
    SECANT_SOLVES,
    TRUNCATED_SORT_MAX,
)
from losses._threads import PARALLEL_MIN_ROWS
from losses.listwise import NDCGLoss, NERULoss
from losses.metrics import ndcg_score
from tests.losses.reference_listwise import (
    Measure,
    assignment_reference,
    brute_force,
    pessimistic_loss,
    position_weights,
)

CONFIGS = [
    ("ndcg", {}),
    ("ndcg", {"truncate_c": True}),
    ("ndcg", {"k": 1}),
    ("ndcg", {"k": 1, "truncate_c": True}),
    ("ndcg", {"k": 3, "gain": "linear"}),
    ("ndcg", {"k": 3, "gain": "linear", "truncate_c": True}),
    ("ndcg", {"k": 2, "c": "dcg"}),
    ("ndcg", {"k": 4, "c": "dcg", "truncate_c": True}),
    ("ndcg", {"k": 5, "gain": "linear", "c": "dcg"}),
    ("ndcg", {"k": 3, "discount": "original"}),
    ("ndcg", {"k": 4, "discount": "original", "c": "dcg", "truncate_c": True}),
    ("neru", {}),
    ("neru", {"alpha": 2.0, "d": 1.0}),
    ("neru", {"k": 2}),
    ("neru", {"k": 3, "truncate_c": True, "d": 0.5}),
    ("neru", {"k": 4, "c": "dcg", "alpha": 3.0}),
    ("neru", {"k": 2, "c": "dcg", "truncate_c": True}),
]
IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in p.items()) or 'default'}" for name, p in CONFIGS]


def build(name, params):
    """The loss under test (``ties="increasing"``) and an independent Measure."""
    loss = losses.get(name, **{"ties": "increasing", **params})
    if name == "ndcg":
        measure = Measure("ndcg", k=loss.k, gain=loss.gain, discount=loss.discount)
    else:
        measure = Measure("neru", k=loss.k, alpha=loss.alpha, d=loss.d)
    return loss, measure


def weights(loss, m):
    return position_weights(loss.c, m, loss.k, loss.truncate_c)


def random_labels(rng, name, m):
    kind = int(rng.integers(6))
    if kind == 0:
        y = np.full(m, int(rng.integers(0, 3)))
    elif kind == 1:
        y = rng.integers(0, 2, m)
    elif kind == 2:
        y = rng.integers(0, m + 1, m)  # many levels
    else:
        y = rng.integers(0, 5, m)
    if name == "neru" and rng.random() < 0.5:
        return y + rng.choice([0.0, 0.5], m)
    return y


def random_scores(rng, m):
    kind = int(rng.integers(4))
    if kind == 0:
        return rng.integers(-1, 2, m).astype(np.float64)  # many ties
    if kind == 1:
        return np.full(m, rng.normal())
    return rng.normal(size=m) * rng.choice([0.1, 1.0, 10.0])


def random_batch(rng, name, n_queries, sizes):
    ys, fs, ptr = [], [], [0]
    for _ in range(n_queries):
        m = int(rng.choice(sizes))
        ys.append(random_labels(rng, name, m))
        fs.append(random_scores(rng, m))
        ptr.append(ptr[-1] + m)
    y = np.concatenate(ys) if name == "neru" else np.concatenate(ys).astype(np.int64)
    return np.concatenate(fs), y, np.array(ptr, dtype=np.int64)


def evaluate(loss, f, y, ptr):
    targets = loss.validate(y, ptr)
    values, grad = loss.loss_grad(f, targets)
    return values, grad, targets


def blocks(ptr):
    return [slice(ptr[q], ptr[q + 1]) for q in range(len(ptr) - 1)]


def reference_value(loss, measure, fq, yq):
    """One query's loss by brute force (up to 7 documents) or scipy's full assignment."""
    c = weights(loss, fq.size)
    if fq.size <= 7:
        return brute_force(fq, yq, measure, c)[0]
    return assignment_reference(fq, yq, measure, c)[0]


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
def test_brute_force(name, params):
    """Loss equals max over all π minus min over ideal σ; gradient where both are unique."""
    loss, measure = build(name, params)
    rng = np.random.default_rng(100 + CONFIGS.index((name, params)))
    f, y, ptr = random_batch(rng, name, 250, sizes=[1, 2, 3, 4, 5, 6, 7])
    values, grad, targets = evaluate(loss, f, y, ptr)
    metric = loss.metric(f, targets)
    assert values.shape == (len(ptr) - 1,) and grad.shape == f.shape
    n_unique = 0
    for q, s in enumerate(blocks(ptr)):
        c = weights(loss, s.stop - s.start)
        expected, expected_grad, unique = brute_force(f[s], y[s], measure, c)
        assert values[q] == pytest.approx(expected, abs=1e-10)
        assert values[q] >= 0.0
        assert grad[s].sum() == pytest.approx(0.0, abs=1e-10)
        if unique:
            n_unique += 1
            np.testing.assert_allclose(grad[s], expected_grad, atol=1e-10)
        assert metric[q] == pytest.approx(pessimistic_loss(f[s], y[s], measure), abs=1e-12)
        assert values[q] >= metric[q] - 1e-12
    assert n_unique > 50


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(range(len(CONFIGS))),
    st.integers(1, 6).flatmap(
        lambda m: st.tuples(
            st.lists(st.integers(-2, 2), min_size=m, max_size=m),
            st.lists(st.integers(0, 3), min_size=m, max_size=m),
        )
    ),
)
def test_hypothesis_integer_queries(index, query):
    name, params = CONFIGS[index]
    loss, measure = build(name, params)
    f = np.array(query[0], dtype=np.float64)
    y = np.array(query[1])
    values, grad, targets = evaluate(loss, f, y, np.array([0, len(f)]))
    expected, expected_grad, unique = brute_force(f, y, measure, weights(loss, len(f)))
    assert values[0] == pytest.approx(expected, abs=1e-10)
    if unique:
        np.testing.assert_allclose(grad, expected_grad, atol=1e-10)
    assert values[0] >= loss.metric(f, targets)[0] - 1e-12


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
def test_subgradient_inequality_and_convexity(name, params):
    """l(f') >= l(f) + <g, f' − f> per query, and l is convex along random segments."""
    loss, _ = build(name, params)
    rng = np.random.default_rng(11)
    f, y, ptr = random_batch(rng, name, 60, sizes=[1, 2, 5, 9, 16, 30])
    targets = loss.validate(y, ptr)
    values, grad = loss.loss_grad(f, targets)
    segments = blocks(ptr)
    for _ in range(6):
        other = f + rng.normal(size=f.size) * rng.choice([0.01, 1.0, 10.0])
        if rng.random() < 0.3:
            other = np.round(other)  # land on ties
        v_other, g_other = loss.loss_grad(other, targets)
        for q, s in enumerate(segments):
            assert v_other[q] >= values[q] + grad[s] @ (other[s] - f[s]) - 1e-9
            assert values[q] >= v_other[q] + g_other[s] @ (f[s] - other[s]) - 1e-9
        for theta in (0.25, 0.5, 0.9):
            v_mid, _ = loss.loss_grad(theta * f + (1 - theta) * other, targets)
            np.testing.assert_array_less(v_mid, theta * values + (1 - theta) * v_other + 1e-9)


LARGE = [
    ("ndcg", {}),
    ("ndcg", {"truncate_c": True}),
    ("ndcg", {"k": 3, "c": "dcg", "gain": "linear"}),
    ("ndcg", {"k": 7, "c": "dcg", "truncate_c": True}),
    ("neru", {"k": 5}),
    ("neru", {"k": 10, "truncate_c": True, "d": 1.0}),
    ("neru", {"d": 1.0}),
]


@pytest.mark.parametrize(("name", "params"), LARGE, ids=[f"{n}-{p}" for n, p in LARGE])
def test_large_queries_against_scipy(name, params):
    """The candidate reduction, the chain flow and the k × m assignment against the full
    m × m assignment (scipy) on queries of 50–300 documents."""
    loss, measure = build(name, params)
    rng = np.random.default_rng(5)
    sizes = [50, 80, 120] if loss.k is None else [50, 120, 300]
    _, y, ptr = random_batch(rng, name, 12, sizes=sizes)
    f = rng.normal(size=y.size)
    f[ptr[1] : ptr[2]] = np.round(f[ptr[1] : ptr[2]])  # a query with many tied scores
    values, grad, _ = evaluate(loss, f, y, ptr)
    for q, s in enumerate(blocks(ptr)):
        expected, expected_grad = assignment_reference(
            f[s], y[s], measure, weights(loss, s.stop - s.start)
        )
        assert values[q] == pytest.approx(expected, rel=1e-10, abs=1e-10)
        if q != 1:  # continuous scores: the maximiser is unique
            np.testing.assert_allclose(grad[s], expected_grad, atol=1e-10)


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
def test_equal_scores_against_the_references(name, params):
    """Queries whose scores are all equal (a surrogate at w = 0) skip the assignment: their
    loss equals brute force (m <= 7) or scipy's full assignment, and the subgradient is
    the one of a maximising π (the subgradient inequality against other scores), on every
    path (square, truncated, chain) and under both tie rules."""
    rng = np.random.default_rng(23 + CONFIGS.index((name, params)))
    sizes = [2, 3, 4, 5, 6, 7, 9, 16, 40]
    # the bound given: bound=None chooses by the batch's median query length
    for ties, bound in (("increasing", "hinge"), ("latent", "hinge"), ("latent", "ramp")):
        loss = losses.get(name, **{**params, "ties": ties, "bound": bound})
        _, measure = build(name, params)
        _, y, ptr = random_batch(rng, name, 60, sizes=sizes)
        f = np.repeat(rng.normal(size=len(ptr) - 1) * 3.0, np.diff(ptr))
        targets = loss.validate(y, ptr)
        values, grad = loss.loss_grad(f, targets)
        for q, s in enumerate(blocks(ptr)):
            expected = reference_value(loss, measure, f[s], y[s])
            # the latent rule's σ part is the same at equal scores: every ideal ordering
            # places the same total weight Σ c on scores that are all equal
            assert values[q] == pytest.approx(expected, abs=1e-10)
            assert grad[s].sum() == pytest.approx(0.0, abs=1e-10)
        for _ in range(5):
            other = f + rng.normal(size=f.size) * rng.choice([0.01, 1.0])
            ref = losses.get(name, **{**params, "ties": "increasing"})
            v_other, _ = ref.loss_grad(other, ref.validate(y, ptr))
            if ties == "increasing":
                # convex: the subgradient inequality of the loss itself
                for q, s in enumerate(blocks(ptr)):
                    assert v_other[q] >= values[q] + grad[s] @ (other[s] - f[s]) - 1e-9
            else:
                # the surrogate with the ties fixed at f is convex and its value at f is
                # the latent loss's: the same inequality for the surrogate
                surrogate = loss.convexify(f, targets)
                v_sur, _ = loss.loss_grad(other, surrogate)
                for q, s in enumerate(blocks(ptr)):
                    assert v_sur[q] >= values[q] + grad[s] @ (other[s] - f[s]) - 1e-9


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
def test_equal_score_queries_mixed_with_others(name, params):
    """Queries whose scores are all equal take their own path in the query loop: in a batch
    that mixes them with other queries, on several threads, every query's loss and
    subgradient rows are those of the query evaluated alone, bit for bit, under both tie
    rules and both bounds; and with ``ties="increasing"`` the equal-score queries' losses
    equal brute force or scipy's full assignment."""
    rng = np.random.default_rng(41 + CONFIGS.index((name, params)))
    _, measure = build(name, params)
    # the bound given: bound=None chooses by the batch's median query length
    for ties, bound in (("increasing", "hinge"), ("latent", "hinge"), ("latent", "ramp")):
        loss = losses.get(name, **{**params, "ties": ties, "bound": bound})
        # 1,200 queries of up to 100 documents: over PARALLEL_MIN_ROWS rows, several blocks
        _, y, ptr = random_batch(rng, name, 1200, sizes=[1, 2, 3, 5, 7, 12, 40, 100])
        f = rng.normal(size=y.size)
        tied = rng.random(len(ptr) - 1) < 0.4
        for q, s in enumerate(blocks(ptr)):
            if tied[q]:
                f[s] = rng.normal() * 3.0
        assert ptr[-1] > PARALLEL_MIN_ROWS
        assert sum(tied[q] and ptr[q + 1] - ptr[q] >= 2 for q in range(len(tied))) > 100
        targets = loss.validate(y, ptr)
        values, grad = loss.loss_grad(f, targets)
        assert np.all(values >= 0.0)
        for q, s in enumerate(blocks(ptr)):
            alone = loss.validate(y[s], np.array([0, s.stop - s.start]))
            value_alone, grad_alone = loss.loss_grad(f[s], alone)
            assert values[q] == value_alone[0]
            np.testing.assert_array_equal(grad[s], grad_alone)
            if ties == "increasing" and tied[q] and 2 <= s.stop - s.start:
                expected = reference_value(loss, measure, f[s], y[s])
                assert values[q] == pytest.approx(expected, abs=1e-10)


@pytest.mark.parametrize("truncate_c", [False, True])
@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_kernel_paths_follow_the_query_lengths(name, truncate_c):
    """The kernel's paths for queries longer than k and for queries of 2 to k documents are
    compiled only when such queries are present (``long_queries``, ``short_queries``); a
    kernel compiled with a path the batch does not use gives the same results bit for bit."""
    loss, measure = build(name, {"k": 5, "truncate_c": truncate_c})
    rng = np.random.default_rng(8)
    for sizes, long, short in (
        ([6, 9, 20], True, False),
        ([2, 3, 5], False, True),
        ([1, 4, 12], True, True),
        ([1], False, False),
    ):
        f, y, ptr = random_batch(rng, name, 60, sizes=sizes)
        targets = loss.validate(y, ptr)
        assert (targets.long_queries, targets.short_queries) == (long, short), sizes
        values, grad = loss.loss_grad(f, targets)
        both = loss.loss_grad(f, targets._replace(long_queries=True, short_queries=True))
        np.testing.assert_array_equal(both[0], values)
        np.testing.assert_array_equal(both[1], grad)
        for q, s in enumerate(blocks(ptr)):
            if s.stop - s.start <= 7:
                c = weights(loss, s.stop - s.start)
                expected, _, _ = brute_force(f[s], y[s], measure, c)
                assert values[q] == pytest.approx(expected, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("ties", ["increasing", "latent"])
@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_truncated_path_sorts_or_selects_alike(name, ties):
    """With truncated c, queries longer than k either select each level's best documents
    or sort the whole query, by the batch's longest query (``TRUNCATED_SORT_MAX``); both
    give the same losses and subgradients bit for bit (σ's documents equal in gain and
    score in index order either way), on queries of 1–60 documents with many tied scores,
    under both tie rules and with the latent rule's weights given as the concave-convex
    procedure's steps give them."""
    rng = np.random.default_rng(17)
    n_long = 0
    for trial in range(60):
        for k in (1, 3, 10):
            loss, _ = build(name, {"k": k, "truncate_c": True, "ties": ties})
            f, y, ptr = random_batch(rng, name, 30, sizes=np.arange(1, 61))
            if trial % 2:
                f = np.round(f)  # many tied scores
            targets = loss.validate(y, ptr)
            assert not targets.select  # no query over TRUNCATED_SORT_MAX documents
            n_long += int(np.sum(np.diff(ptr) > k))
            runs = [targets]
            if ties == "latent":
                runs.append(loss.convexify(f + rng.normal(size=f.size), targets))
            for sorted_targets in runs:
                sorting = loss.loss_grad(f, sorted_targets)
                selecting = loss.loss_grad(f, sorted_targets._replace(select=True))
                np.testing.assert_array_equal(sorting[0], selecting[0])
                np.testing.assert_array_equal(sorting[1], selecting[1])
    assert n_long > 3000
    # the batch rule: selection when some query is longer than TRUNCATED_SORT_MAX, and only
    # with truncated c
    for truncate_c in (True, False):
        loss, _ = build(name, {"k": 10, "truncate_c": truncate_c, "ties": ties})
        for longest in (TRUNCATED_SORT_MAX, TRUNCATED_SORT_MAX + 1):
            y = random_labels(rng, name, longest + 20)
            targets = loss.validate(y, [0, longest, longest + 20])
            assert targets.select == (truncate_c and longest > TRUNCATED_SORT_MAX)


UNTRUNCATED = [(name, params) for name, params in CONFIGS if not params.get("truncate_c")]
UNTRUNCATED_IDS = [IDS[CONFIGS.index(config)] for config in UNTRUNCATED]


def lattice_size(yq, k):
    """A query's states and table cells in the dynamic programme, counted by enumerating
    its states (vectors of per-level counts up to min(count, k), sum <= k); None when its
    table is far beyond the limit."""
    caps = [min(count, k) for count in np.unique(yq, return_counts=True)[1]]
    cells = int(np.prod([cap + 1 for cap in caps]))
    if cells > 10 * LATTICE_CELLS:
        return None
    states = sum(sum(n) <= k for n in itertools.product(*(range(cap + 1) for cap in caps)))
    return states, cells


def lattice_fits(queries, k):
    """Whether a batch's queries longer than k (labels ``queries``) take the programme:
    each within the states and cells limits, their mean states within the mean limit."""
    sizes = [lattice_size(yq, k) for yq in queries if yq.size > k]
    if not sizes or None in sizes:
        return False
    states = np.array([size[0] for size in sizes])
    cells = np.array([size[1] for size in sizes])
    return bool(
        np.all(states <= LATTICE_STATES)
        and np.all(cells <= LATTICE_CELLS)
        and states.mean() <= LATTICE_MEAN_STATES
    )


def test_lattice_limits_count_the_states():
    """A batch takes the dynamic programme exactly when some query is longer than k, each
    such query's states and cells (counted here by enumeration) are within the limits and
    so is their mean number of states: over random level counts and k, for single queries
    and for batches; its tables have the largest query's cells."""
    rng = np.random.default_rng(3)
    n_fit = n_batches = 0
    for _ in range(60):
        k = int(rng.integers(1, 16))
        sizes = rng.integers(1, 60, 30)
        ptr = np.concatenate([[0], np.cumsum(sizes)])
        y = np.concatenate([rng.integers(0, rng.integers(1, 8), m) for m in sizes])
        loss = losses.get("ndcg", k=k, ties="increasing")
        queries = [y[s] for s in blocks(ptr)]
        for yq in queries:
            alone = loss.validate(yq, np.array([0, yq.size]))
            fits = lattice_fits([yq], k)
            assert bool(alone.lattice) == fits
            if fits:
                assert alone.lattice == lattice_size(yq, k)[1]
            n_fit += fits
        targets = loss.validate(y, ptr)
        assert bool(targets.lattice) == lattice_fits(queries, k)
        if targets.lattice:
            n_batches += 1
            assert targets.lattice == max(lattice_size(yq, k)[1] for yq in queries if yq.size > k)
    assert 100 < n_fit < 1500
    assert 5 < n_batches < 55


# The chain path's settings: its linearised assignments with the flow behind them (the
# default), one assignment and then the flow (both kinds of query in one batch), the flow
# alone.
CHAIN_SOLVES = [SECANT_SOLVES, 1, 0]


def chain_only(targets, solves=SECANT_SOLVES):
    """The same targets with every query longer than k sent to the chain path, trying up
    to ``solves`` linearised assignments before the chain flow."""
    return targets._replace(lattice=0, secant_solves=solves)


@pytest.mark.parametrize(("name", "params"), UNTRUNCATED, ids=UNTRUNCATED_IDS)
def test_lattice_and_chain_path_against_brute_force(name, params):
    """Queries longer than k with untruncated c: the dynamic programme over per-level
    counts (the default where the lattice is small) and the chain path (forced; its
    linearised assignments, one of them then the flow, the flow alone) all equal brute
    force over all permutations on thousands of queries of 2–7 documents (k below m, ties
    in scores and labels, one-level queries), with the brute-force subgradient where the
    maximiser is unique."""
    loss, measure = build(name, params)
    if loss.k is None or loss.k >= 6:
        loss, measure = build(name, {**params, "k": 2})  # queries longer than k
    rng = np.random.default_rng(300 + UNTRUNCATED.index((name, params)))
    f, y, ptr = random_batch(rng, name, 2500, sizes=[1, 2, 3, 4, 5, 6, 7])
    targets = loss.validate(y, ptr)
    long = np.diff(ptr) > loss.k
    assert targets.lattice
    results = [loss.loss_grad(f, targets)]
    results += [loss.loss_grad(f, chain_only(targets, solves)) for solves in CHAIN_SOLVES]
    n_unique = 0
    for q, s in enumerate(blocks(ptr)):
        if not long[q]:
            continue
        c = weights(loss, s.stop - s.start)
        expected, expected_grad, unique = brute_force(f[s], y[s], measure, c)
        n_unique += unique
        for values, grad in results:
            assert values[q] == pytest.approx(expected, abs=1e-10)
            if unique:
                np.testing.assert_allclose(grad[s], expected_grad, atol=1e-10)
    assert n_unique > 300


def mix_score_kinds(rng, f, ptr):
    """Make every third query's scores rounded to many ties and every third all but a few
    equal (in place); returns each query's kind (0: the continuous scores left)."""
    kinds = np.arange(len(ptr) - 1) % 3
    for q, s in enumerate(blocks(ptr)):
        if kinds[q] == 1:
            f[s] = np.round(f[s])
        elif kinds[q] == 2:
            f[s] = np.where(rng.random(s.stop - s.start) < 0.8, 0.5, f[s])
    return kinds


def assert_matches_full_assignment(loss, measure, f, y, ptr, kinds, values, grad):
    """Every query's loss equals scipy's full m × m assignment, and so does its subgradient
    where its scores are continuous (kind 0 of :func:`mix_score_kinds`: one maximiser)."""
    for q, s in enumerate(blocks(ptr)):
        c = weights(loss, s.stop - s.start)
        expected, expected_grad = assignment_reference(f[s], y[s], measure, c)
        assert values[q] == pytest.approx(expected, rel=1e-10, abs=1e-10)
        if kinds[q] == 0:
            np.testing.assert_allclose(grad[s], expected_grad, atol=1e-10)


@pytest.mark.parametrize("solves", CHAIN_SOLVES)
@pytest.mark.parametrize("levels", [3, 5])
def test_chain_path_against_scipy_on_long_queries(levels, solves):
    """The chain path (its linearised assignments with ``solves`` tries before the flow)
    against scipy's full m × m assignment on 150 queries of 11–200 documents in three levels
    (MQ2008's proportions) or five (an MSLR-like 45 / 25 / 15 / 9 / 6 %), NDCG@10 and
    NERU@10 with untruncated c, scores following the labels more or less: continuous,
    rounded to many ties, or all but a few equal; the subgradient equals scipy's where the
    scores are continuous (the maximiser is then unique)."""
    rng = np.random.default_rng(70 + levels)
    proportions = [0.76, 0.16, 0.08] if levels == 3 else [0.45, 0.25, 0.15, 0.09, 0.06]
    for name in ("ndcg", "neru"):
        loss, measure = build(name, {"k": 10, "d": 0.0} if name == "neru" else {"k": 10})
        sizes = rng.integers(11, 201, 150)
        ptr = np.concatenate([[0], np.cumsum(sizes)])
        y = rng.choice(levels, ptr[-1], p=proportions).astype(float)
        f = rng.normal(size=ptr[-1]) + np.repeat(rng.random(150) * 3.0, sizes) * y
        kinds = mix_score_kinds(rng, f, ptr)
        values, grad = loss.loss_grad(f, chain_only(loss.validate(y, ptr), solves))
        assert_matches_full_assignment(loss, measure, f, y, ptr, kinds, values, grad)


@pytest.mark.parametrize("levels", [2, 3, 4, 5, 6])
def test_lattice_against_scipy_on_long_queries(levels):
    """The dynamic programme against scipy's full m × m assignment on queries of 11–150
    documents (11–60 for five levels, in the demo's proportions 50 / 25 / 15 / 7 / 3 %) in
    ``levels`` gain levels (NDCG@10, untruncated c): scores continuous, rounded to many
    ties, or all but a few equal; the subgradient equals scipy's where the scores are
    continuous (the maximiser is then unique)."""
    loss, measure = build("ndcg", {"k": 10})
    rng = np.random.default_rng(40 + levels)
    sizes = rng.integers(11, 61 if levels == 5 else 151, 40)
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    proportions = [0.5, 0.25, 0.15, 0.07, 0.03] if levels == 5 else None
    y = rng.choice(levels, ptr[-1], p=proportions)
    f = rng.normal(size=ptr[-1]) + rng.random(ptr[-1].size) * y
    kinds = mix_score_kinds(rng, f, ptr)
    targets = loss.validate(y, ptr)
    queries = [y[s] for s in blocks(ptr)]
    # up to four levels every query fits (at most 1,001 states at k = 10), five levels in
    # these proportions too (some queries above 1,024 states, the mean below the limit);
    # six levels of ten documents or more do not, and the batch takes the chain flow
    assert lattice_fits(queries, 10) == (levels <= 5) == bool(targets.lattice)
    if levels == 5:
        assert max(lattice_size(yq, 10)[0] for yq in queries) > 1024
    values, grad = loss.loss_grad(f, targets)
    assert_matches_full_assignment(loss, measure, f, y, ptr, kinds, values, grad)


def test_a_batch_takes_one_path():
    """A batch whose long queries do not all fit the dynamic programme (five levels of ten
    documents or more are above its mean states, three levels are not) takes the chain
    flow for all of them, on
    several threads: every query's loss and subgradient equal those of the query alone,
    which takes the programme where it fits (scores continuous: one maximiser)."""
    loss, _ = build("ndcg", {"k": 10})
    rng = np.random.default_rng(12)
    sizes = rng.integers(60, 130, 300)
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    n_levels = rng.choice([3, 5], size=300)
    y = np.concatenate([rng.integers(0, n_levels[q], sizes[q]) for q in range(300)])
    f = rng.normal(size=y.size) + 0.5 * y
    targets = loss.validate(y, ptr)
    assert ptr[-1] > PARALLEL_MIN_ROWS
    assert not targets.lattice
    values, grad = loss.loss_grad(f, targets)
    for q, s in enumerate(blocks(ptr)):
        alone = loss.validate(y[s], np.array([0, s.stop - s.start]))
        assert bool(alone.lattice) == (n_levels[q] == 3)
        value_alone, grad_alone = loss.loss_grad(f[s], alone)
        assert values[q] == pytest.approx(value_alone[0], rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(grad[s], grad_alone, atol=1e-12)


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
def test_assignment_duals_store_changes_nothing(name, params):
    """Queries of 2 to k documents start their assignment from the duals their last call
    ended with (``targets.duals``). Over a sequence of calls on one set of targets (nearby
    scores, new scores with ties, equal scores, and a store overwritten with arbitrary
    finite values) every result equals, bit for bit, the call on fresh targets, and brute
    force; both tie rules."""
    rng = np.random.default_rng(300 + CONFIGS.index((name, params)))
    _, measure = build(name, params)
    # the bound given: bound=None chooses by the batch's median query length
    for ties, bound in (("increasing", "hinge"), ("latent", "hinge"), ("latent", "ramp")):
        loss = losses.get(name, **{**params, "ties": ties, "bound": bound})
        _, y, ptr = random_batch(rng, name, 80, sizes=[1, 2, 3, 4, 5, 6, 7, 9])
        n_top = int(np.diff(ptr).max()) if loss.k is None else loss.k
        targets = loss.validate(y, ptr)
        square = [s for s in blocks(ptr) if 2 <= s.stop - s.start <= n_top]
        assert (targets.duals is not None) == bool(square)
        f = rng.normal(size=ptr[-1])
        n_warm = 0
        for step in range(8):
            if step in (1, 2, 6):
                f = f + rng.normal(size=f.size) * (0.01 if step != 2 else 0.3)
            elif step == 3:
                f = np.concatenate([random_scores(rng, s.stop - s.start) for s in blocks(ptr)])
            elif step == 4:
                f = np.repeat(rng.normal(size=len(ptr) - 1), np.diff(ptr))
            elif step == 5 and targets.duals is not None:
                targets.duals[:] = rng.normal(size=targets.duals.size) * 100.0
            if targets.duals is not None:
                n_warm += int(np.isfinite(targets.duals).any())
            values, grad = loss.loss_grad(f, targets)
            fresh_values, fresh_grad = loss.loss_grad(f, loss.validate(y, ptr))
            np.testing.assert_array_equal(values, fresh_values)
            np.testing.assert_array_equal(grad, fresh_grad)
            if ties == "increasing":
                for q, s in enumerate(blocks(ptr)):
                    c = weights(loss, s.stop - s.start)
                    expected = brute_force(f[s], y[s], measure, c)[0]
                    assert values[q] == pytest.approx(expected, abs=1e-10)
        if square:
            # the store was filled and then read: it held duals before every call after
            # the first
            assert n_warm == 7
            for s in square:
                live = targets.inv_norm[np.searchsorted(ptr, s.start)] > 0
                if live and np.ptp(f[s]) > 0:
                    assert np.isfinite(targets.duals[s]).all()


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
def test_document_order_does_not_matter(name, params):
    loss, _ = build(name, params)
    rng = np.random.default_rng(21)
    f, y, ptr = random_batch(rng, name, 80, sizes=[1, 2, 4, 7, 12, 40])
    f = f + 1e-3 * rng.normal(size=f.size)  # distinct scores: a unique maximiser
    values, grad, _ = evaluate(loss, f, y, ptr)
    perm = np.concatenate([rng.permutation(np.arange(s.start, s.stop)) for s in blocks(ptr)])
    values_p, grad_p, _ = evaluate(loss, f[perm], y[perm], ptr)
    np.testing.assert_allclose(values_p, values, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad_p, grad[perm], atol=1e-12)


@pytest.mark.parametrize(("name", "params"), CONFIGS[:2] + CONFIGS[9:11] + CONFIGS[12:13])
def test_parallel_equals_serial(force_threads, name, params):
    """Three blocks of queries on the thread pool give the bits of one block (the batch is
    below PARALLEL_MIN_ROWS, so the block count is forced)."""
    loss, _ = build(name, params)
    rng = np.random.default_rng(3)
    f, y, ptr = random_batch(rng, name, 301, sizes=[1, 2, 5, 13, 40, 90])
    targets = loss.validate(y, ptr)
    force_threads(1)
    serial = loss.loss_grad(f, targets)
    runs = force_threads(3)
    parallel = loss.loss_grad(f, targets)
    assert runs and set(runs) == {3}
    np.testing.assert_array_equal(parallel[0], serial[0])
    np.testing.assert_array_equal(parallel[1], serial[1])


@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_degenerate_queries(name):
    loss = losses.get(name)
    y = np.array([3, 0, 0, 0, 2, 2, 2, 1])
    ptr = np.array([0, 1, 4, 7, 7, 8])  # one document, all zero, all equal, empty, one
    f = np.array([5.0, 1.0, -2.0, 0.5, 3.0, -1.0, 7.0, 0.0])
    values, grad, targets = evaluate(loss, f, y, ptr)
    np.testing.assert_array_equal(values, 0.0)
    np.testing.assert_array_equal(grad, 0.0)
    np.testing.assert_array_equal(loss.metric(f, targets), 0.0)


def test_neru_all_labels_at_or_below_neutral_vote_is_degenerate():
    loss = losses.get("neru", d=2.0)
    y = np.array([0.0, 1.0, 2.0, 1.5, 3.0, 1.0])
    ptr = np.array([0, 4, 6])
    f = np.array([0.3, -1.0, 2.0, 0.1, -1.0, 1.0])
    values, grad, _ = evaluate(loss, f, y, ptr)
    assert values[0] == 0.0 and np.all(grad[:4] == 0.0)
    assert values[1] > 0.0


def test_empty_input():
    loss = losses.get("ndcg")
    values, grad, _ = evaluate(loss, np.zeros(0), np.zeros(0, dtype=np.int64), np.array([0]))
    assert values.shape == (0,) and grad.shape == (0,)


def test_perfect_separation_gives_zero_loss():
    """Scores that respect the labels with margin, equal within a level: loss 0."""
    loss = losses.get("ndcg", k=3, ties="increasing")
    y = np.array([2, 0, 1, 2, 0, 1])
    f = 10.0 * y
    values, grad, targets = evaluate(loss, f, y, np.array([0, 6]))
    assert values[0] == 0.0
    np.testing.assert_array_equal(grad, 0.0)
    assert loss.metric(f, targets)[0] == pytest.approx(0.0, abs=1e-15)


def test_risk_with_qid():
    """losses.risk over shuffled query ids equals the mean of brute-force query losses, and
    its gradient is a subgradient of the risk."""
    rng = np.random.default_rng(8)
    for name, params in [("ndcg", {"k": 3}), ("neru", {"d": 1.0, "k": 4, "truncate_c": True})]:
        loss, measure = build(name, params)
        f, y, ptr = random_batch(rng, name, 40, sizes=[1, 2, 3, 5, 6])
        y[ptr[0] : ptr[1]] = 1  # make sure some queries are degenerate
        qid = np.repeat(rng.permutation(40) + 100, np.diff(ptr))
        shuffle = rng.permutation(f.size)
        value, grad = losses.risk(loss, f[shuffle], y[shuffle], qid=qid[shuffle])
        total = 0.0
        for s in blocks(ptr):
            total += brute_force(f[s], y[s], measure, weights(loss, s.stop - s.start))[0]
        assert value == pytest.approx(total / 40, abs=1e-12)
        for _ in range(5):
            other = f[shuffle] + rng.normal(size=f.size)
            v_other, _ = losses.risk(loss, other, y[shuffle], qid=qid[shuffle])
            assert v_other >= value + grad @ (other - f[shuffle]) - 1e-12


def test_risk_gradient_maps_back_to_caller_rows():
    rng = np.random.default_rng(9)
    f, y, ptr = random_batch(rng, "ndcg", 20, sizes=[3, 5, 7])
    f = f + 1e-3 * rng.normal(size=f.size)
    loss, measure = build("ndcg", {"k": 2})
    qid = np.repeat(np.arange(20), np.diff(ptr))
    shuffle = rng.permutation(f.size)
    value, grad = losses.risk(loss, f[shuffle], y[shuffle], qid=qid[shuffle])
    expected = np.zeros(f.size)
    for s in blocks(ptr):
        _, expected[s], unique = brute_force(f[s], y[s], measure, weights(loss, s.stop - s.start))
        assert unique
    np.testing.assert_allclose(grad, expected[shuffle] / 20, atol=1e-12)


@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_c_as_array_and_callable(name):
    rng = np.random.default_rng(4)
    f, y, ptr = random_batch(rng, name, 30, sizes=[2, 5, 9])
    named = evaluate(losses.get(name, k=3, c="dcg"), f, y, ptr)
    array = evaluate(losses.get(name, k=3, c=1.0 / np.log2(np.arange(2, 12))), f, y, ptr)
    func = evaluate(losses.get(name, k=3, c=lambda i: 1.0 / np.log2(i + 1.0)), f, y, ptr)
    for other in (array, func):
        np.testing.assert_allclose(other[0], named[0], rtol=1e-13)
        np.testing.assert_allclose(other[1], named[1], rtol=1e-13)


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
def test_params_round_trip_through_json(name, params):
    loss = losses.get(name, **params)
    params_out = json.loads(json.dumps(loss.get_params()))
    rebuilt = losses.get(name, **params_out)
    assert rebuilt.get_params() == loss.get_params()
    rng = np.random.default_rng(1)
    f, y, ptr = random_batch(rng, name, 10, sizes=[3, 8])
    np.testing.assert_array_equal(evaluate(rebuilt, f, y, ptr)[0], evaluate(loss, f, y, ptr)[0])


def test_default_parameters():
    assert losses.get("ndcg").get_params() == {
        "k": 10,
        "gain": "exp",
        "discount": "log2",
        "c": "power",
        "truncate_c": False,
        "ties": "latent",
        "bound": None,
        "pairwise": 0.0,
        "average_precision": 0.0,
    }
    assert losses.get("neru").get_params() == {
        "alpha": 5.0,
        "d": 0.0,
        "k": None,
        "c": "power",
        "truncate_c": False,
        "ties": "latent",
        "bound": None,
        "pairwise": 0.0,
        "average_precision": 0.0,
    }
    assert isinstance(losses.get("ndcg"), NDCGLoss) and isinstance(losses.get("neru"), NERULoss)
    assert losses.get("ndcg").name == "ndcg" and losses.get("neru").name == "neru"


@pytest.mark.parametrize(
    ("name", "params", "match"),
    [
        ("ndcg", {"k": 0}, "k must be"),
        ("ndcg", {"k": 2.5}, "k must be"),
        ("ndcg", {"k": True}, "k must be"),
        ("ndcg", {"k": None}, "k must be"),
        ("neru", {"k": 0}, "k must be"),
        ("ndcg", {"gain": "log"}, "gain"),
        ("ndcg", {"c": "linear"}, "c must be one of"),
        ("ndcg", {"c": [1.0, 2.0]}, "c must be non-increasing"),
        ("ndcg", {"c": [1.0, -0.5]}, "c must hold"),
        ("ndcg", {"c": [1.0, np.nan]}, "c must hold"),
        ("ndcg", {"c": []}, "c must hold at least"),
        ("ndcg", {"truncate_c": "yes"}, "truncate_c"),
        ("neru", {"alpha": 1.0}, "alpha"),
        ("neru", {"alpha": 0.5}, "alpha"),
        ("neru", {"alpha": np.inf}, "alpha"),
        ("neru", {"d": np.nan}, "d must be"),
        ("neru", {"truncate_c": True}, "truncate_c"),
    ],
)
def test_parameter_validation(name, params, match):
    with pytest.raises(ValueError, match=match):
        losses.get(name, **params)


@pytest.mark.parametrize(
    ("name", "params", "y", "match"),
    [
        ("ndcg", {}, [0, 1, -1], "y must hold non-negative integer"),
        ("ndcg", {}, [0, 1.5, 2], "y must hold non-negative integer"),
        ("ndcg", {}, [0, 2000, 1], "too large"),
        ("neru", {}, [0.0, np.nan, 1.0], "y must not contain NaN"),
        ("ndcg", {"c": [1.0, 0.5]}, [0, 1, 2], "c holds 2 position weights"),
        ("ndcg", {"c": lambda i: np.ones(3)}, [0, 1], "c\\(positions\\)"),
        ("ndcg", {"c": lambda i: 1.0 * i}, [0, 1], "c must be non-increasing"),
    ],
)
def test_target_validation(name, params, y, match):
    loss = losses.get(name, **params)
    with pytest.raises(ValueError, match=match):
        loss.validate(np.array(y), np.array([0, len(y)]))


def test_loss_parameters_passed_as_data_are_rejected():
    with pytest.raises(ValueError, match="no data keywords"):
        losses.risk("ndcg", np.zeros(3), np.array([0, 1, 2]), k=3)


def test_huge_dense_query_is_refused():
    """k >= m on a query too large for a dense m × m assignment: an error naming k."""
    loss = losses.get("neru")
    m = 4097
    with pytest.raises(ValueError, match="set k below"):
        loss.validate(np.arange(m) % 3, np.array([0, m]))
    losses.get("neru", k=10).validate(np.arange(m) % 3, np.array([0, m]))


@pytest.mark.parametrize("k", [1, 2, 3, 10])
def test_original_discount_is_the_metrics_one(k):
    """1 − NDCG@k with ``discount="original"`` is the package metric's NDCG@k with the same
    discount (distinct scores, queries with at least two gain levels)."""
    rng = np.random.default_rng(k)
    sizes = rng.integers(2, 14, 60)
    qid = np.repeat(np.arange(sizes.size), sizes)
    y = rng.integers(0, 3, qid.size)
    for q in range(sizes.size):  # two gain levels in every query
        y[np.flatnonzero(qid == q)[:2]] = (0, 2)
    f = rng.normal(size=qid.size)
    loss = NDCGLoss(k=k, discount="original")
    targets = loss.validate(y, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64))
    expected = 1.0 - ndcg_score(y, f, qid, k=k, discount="original", per_query=True)
    np.testing.assert_allclose(loss.metric(f, targets), expected, atol=1e-12)
    # and it differs from the log2 discount wherever position 2 or a later one counts
    if k > 1:
        other = NDCGLoss(k=k).metric(f, NDCGLoss(k=k).validate(y, targets.query_ptr))
        assert not np.allclose(other, expected)


def test_bad_discount_named():
    with pytest.raises(ValueError, match="discount"):
        NDCGLoss(discount="letor")


@pytest.mark.parametrize("ties", ["latent", "increasing", "pairs"])
@pytest.mark.parametrize("k", [None, 3])
def test_neru_depends_on_the_ratios_of_gains_only_to_the_last_bit(ties, k):
    """Ratings scaled by any power of two, down to subnormal numbers and up to near the
    largest float, give the same loss and gradient: the normaliser is computed on gains
    brought to [0.5, 1), so it neither overflows (a query would look degenerate) nor
    underflows (its inverse would be infinite)."""
    rng = np.random.default_rng(7)
    f, y, ptr = random_batch(rng, "neru", 120, sizes=[1, 2, 3, 5, 8])
    y = np.round(y * 2) / 2  # small multiples of 1/2: exact under every scaling below
    loss = losses.get("neru", d=0.0, k=k, ties=ties)
    values, grad, _ = evaluate(loss, f, y, ptr)
    assert np.any(values > 0)
    for power in (-1060, -1030, -1000, 1000, 1019):
        scaled_values, scaled_grad, _ = evaluate(loss, f, np.ldexp(y, power), ptr)
        np.testing.assert_array_equal(scaled_values, values)
        np.testing.assert_array_equal(scaled_grad, grad)


@pytest.mark.parametrize("ties", ["latent", "increasing", "pairs"])
def test_ndcg_exp_gain_of_the_largest_labels_is_not_a_degenerate_query(ties):
    """Labels of one relevant level: NDCG depends only on which documents are relevant, so
    the level 1 and the level 1023 (2^1023 − 1, whose ideal DCG over several documents
    overflows float64) give the same loss, never the zero of a degenerate query."""
    rng = np.random.default_rng(8)
    f, y, ptr = random_batch(rng, "ndcg", 150, sizes=[2, 3, 4, 6, 9])
    binary = (y > 1).astype(np.int64)
    loss = losses.get("ndcg", ties=ties)
    values, grad, _ = evaluate(loss, f, binary, ptr)
    top_values, top_grad, _ = evaluate(loss, f, binary * 1023, ptr)
    assert np.count_nonzero(values) > 50
    np.testing.assert_allclose(top_values, values, rtol=1e-14, atol=0)
    np.testing.assert_allclose(top_grad, grad, rtol=1e-14, atol=1e-15)


def test_ratings_whose_gains_overflow_are_refused():
    loss = losses.get("neru", d=-1e308)
    with pytest.raises(ValueError, match="^y holds labels whose gains overflow float64"):
        loss.validate(np.array([1.7e308, 0.0]), np.array([0, 2]))


@pytest.mark.parametrize(
    ("c", "message"),
    [
        (["a", "b"], "c must be one of ['power', 'dcg'], an array of numbers or a callable"),
        ({"x": 1}, "c must be one of ['power', 'dcg'], an array of numbers or a callable"),
        (lambda p: ["x"] * len(p), "c(positions) must return an array of numbers; got"),
    ],
)
def test_non_numeric_position_weights_are_named(c, message):
    with pytest.raises(ValueError) as info:
        loss = losses.get("ndcg", c=c)
        loss.validate(np.array([0, 1, 2]), np.array([0, 3]))
    assert str(info.value).startswith(message), str(info.value)


@pytest.mark.parametrize(
    "name, params",
    [
        ("ndcg", {}),
        ("ndcg", {"ties": "increasing"}),
        ("ndcg", {"k": 3, "ties": "pairs"}),
        ("ndcg", {"k": 3, "truncate_c": True}),
        ("neru", {"average_precision": 0.5}),
    ],
)
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_scores_give_nan(name, params, bad):
    """A NaN or infinite score gives NaN values and subgradient (which the solvers refuse
    by name), never a finite answer or a crash in the kernels' sorts."""
    loss = losses.get(name, **params)
    rng = np.random.default_rng(0)
    ptr = np.array([0, 7, 20, 33])
    y = rng.integers(0, 3, ptr[-1])
    f = rng.normal(size=ptr[-1])
    f[[3, 15]] = bad
    targets = loss.validate(y, ptr)
    values, grad = loss.loss_grad(f, targets)
    assert np.all(np.isnan(values)) and np.all(np.isnan(grad))
    assert np.all(np.isnan(loss.metric(f, targets)))
    if loss.latent:
        assert np.all(np.isnan(loss.ideal_weights(f, targets)))
        values, grad = loss.loss_grad(f, loss.convexify(rng.normal(size=f.size), targets))
        assert np.all(np.isnan(values)) and np.all(np.isnan(grad))


@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_prepared_levels_are_dense_gain_ranks_in_four_bytes_per_row(name):
    """Each row's level is the dense rank of its gain within its query (0 for the
    smallest), held in four bytes per row (an array of the ratings' size that a CofiRank
    fit keeps for the whole fit)."""
    rng = np.random.default_rng(6)
    sizes = [1, 4, 30, 6, 150]
    qid = np.repeat(np.arange(len(sizes)), sizes)
    y = rng.choice([0, 1, 3, 4], size=len(qid))
    y[qid == 3] = 2  # all labels equal
    targets = losses.prepare(name, y, qid).targets
    assert targets.level.dtype == np.int32
    for q in range(len(sizes)):
        yq = y[qid == q]
        np.testing.assert_array_equal(targets.level[qid == q], np.searchsorted(np.unique(yq), yq))


@pytest.mark.parametrize(
    "name, params", [("ndcg", {}), ("ndcg", {"gain": "linear"}), ("neru", {})]
)
@pytest.mark.parametrize("seed", range(5))
def test_gains_are_kept_one_per_level(name, params, seed):
    """The targets hold one gain per (query, level), not per document: each document's
    gain level_gain[level_ptr[q] + level[d]] is the loss's gain of its label scaled by its
    query's power of two (largest gain in [0.5, 1)), levels ascending within a query."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 30, size=12)
    qid = np.repeat(np.arange(12), sizes)
    y = rng.integers(0, 5, size=qid.size).astype(float)
    y[qid == 3] = 2.0  # one level
    loss = losses.get(name, **params)
    t = losses.prepare(loss, y, qid).targets
    assert t.level_gain.size == t.n_levels.sum()
    np.testing.assert_array_equal(np.diff(t.level_ptr), t.n_levels)
    gains = loss._gains(y)
    ptr = t.query_ptr
    for q in range(12):
        s = slice(ptr[q], ptr[q + 1])
        levels = t.level_gain[t.level_ptr[q] : t.level_ptr[q + 1]]
        assert np.all(np.diff(levels) > 0)
        per_document = levels[t.level[s]]
        largest = gains[s].max()
        expected = gains[s] if largest == 0 else np.ldexp(gains[s], -np.frexp(largest)[1])
        np.testing.assert_array_equal(per_document, expected)

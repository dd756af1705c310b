"""Ranking measures against independent references: plain-loop definitions (with ties averaged
by enumerating every tie-consistent ranking), scikit-learn, scipy, ir_measures (trec_eval via
pytrec_eval, and gdeval), the worked examples of the source documents, and the LETOR 4.0
evaluation rules on MQ2008."""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import pytest
import scipy.stats
import sklearn.metrics
from hypothesis import given, settings
from hypothesis import strategies as st

from losses import metrics as M
from losses._query import group_queries
from tests.losses import reference_metrics as ref

# ----------------------------------------------------------------------------- random cases


def random_case(rng, n_queries=None):
    """Several queries (1..4 unless given) of 1..6 documents: ties in scores, all-equal
    labels, 2..8 levels, and ids that are sometimes not contiguous (rows shuffled)."""
    if n_queries is None:
        n_queries = int(rng.integers(1, 5))
    levels = int(rng.choice([2, 3, 5, 8]))
    ys, ss, qs = [], [], []
    ids = rng.choice(max(100, 2 * n_queries), size=n_queries, replace=False)
    for q in ids:
        n = int(rng.integers(1, 7))
        if rng.random() < 0.15:
            y = np.full(n, rng.integers(0, levels))
        else:
            y = rng.integers(0, levels, n)
        if rng.random() < 0.5:
            s = rng.integers(0, int(rng.integers(1, 4)), n).astype(float)
        else:
            s = rng.standard_normal(n)
        ys.append(y)
        ss.append(s)
        qs.append(np.full(n, q))
    y, s, qid = (np.concatenate(a) for a in (ys, ss, qs))
    if rng.random() < 0.4:
        perm = rng.permutation(len(y))
        y, s, qid = y[perm], s[perm], qid[perm]
    return y.astype(float), s, qid


def per_query_reference(y, s, qid, measure, ties):
    return np.array(
        [ref.over_rankings(measure, ys, ss, ties) for ys, ss in ref.split_queries(y, s, qid)],
        dtype=float,
    )


def binary(labels, threshold):
    return [(r > 0) if threshold is None else (r >= threshold) for r in labels]


def cases_for(y):
    """(our call, reference measure on ranked labels) pairs exercising every option."""
    g_max = float(max(y.max(), 1.0))
    out = []
    for k in (None, 1, 2, 3, 5):
        for convention, gain_kind, disc in (("exp", "exp", "log2"), ("linear", "linear", "log2")):
            out.append(
                (
                    dict(fn=M.ndcg_score, k=k, convention=convention),
                    lambda r, k=k, g=gain_kind, d=disc: ref.ndcg_ranked(r, k, g, d),
                )
            )
            out.append(
                (
                    dict(fn=M.dcg_score, k=k, convention=convention),
                    lambda r, k=k, g=gain_kind, d=disc: ref.dcg_ranked(r, k, g, d),
                )
            )
        out.append(
            (
                dict(fn=M.ndcg_score, k=k, gain="linear", discount="original", empty="skip"),
                lambda r, k=k: ref.ndcg_ranked(r, k, "linear", "original", empty=math.nan),
            )
        )
        for threshold in (None, 2):
            out += [
                (
                    dict(fn=M.precision_score, k=k, threshold=threshold),
                    lambda r, k=k, t=threshold: ref.precision_ranked(binary(r, t), k),
                ),
                (
                    dict(fn=M.recall_score, k=k, threshold=threshold, empty=-1.0),
                    lambda r, k=k, t=threshold: ref.recall_ranked(binary(r, t), k, empty=-1.0),
                ),
                (
                    dict(fn=M.f1_score, k=k, threshold=threshold),
                    lambda r, k=k, t=threshold: ref.fbeta_ranked(binary(r, t), k),
                ),
                (
                    dict(fn=M.fbeta_score, k=k, beta=2.0, threshold=threshold, empty="skip"),
                    lambda r, k=k, t=threshold: ref.fbeta_ranked(
                        binary(r, t), k, 2.0, empty=math.nan
                    ),
                ),
                (
                    dict(fn=M.map_score, k=k, threshold=threshold),
                    lambda r, k=k, t=threshold: ref.average_precision_ranked(binary(r, t), k),
                ),
                (
                    dict(fn=M.mrr_score, k=k, threshold=threshold, empty=0.5),
                    lambda r, k=k, t=threshold: ref.reciprocal_rank_ranked(
                        binary(r, t), k, empty=0.5
                    ),
                ),
            ]
            if k is not None:
                out.append(
                    (
                        dict(fn=M.map_score, k=k, threshold=threshold, normalize="k"),
                        lambda r, k=k, t=threshold: ref.average_precision_ranked(
                            binary(r, t), k, "k"
                        ),
                    )
                )
        out.append(
            (
                dict(fn=M.err_score, k=k),
                lambda r, k=k: ref.err_ranked(r, k, g_max),
            )
        )
        out.append(
            (
                dict(fn=M.err_score, k=k, g_max=9.0),
                lambda r, k=k: ref.err_ranked(r, k, 9.0),
            )
        )
        for alpha, d in ((5.0, 0.0), (2.0, 1.0), (1.5, 0.5)):
            out.append(
                (
                    dict(fn=M.neru_score, k=k, alpha=alpha, d=d),
                    lambda r, k=k, a=alpha, d=d: ref.neru_ranked(r, k, a, d),
                )
            )
    return out


@pytest.mark.parametrize("ties", ["stable", "average"])
@pytest.mark.parametrize("seed", range(25))
def test_measures_match_plain_references(seed, ties):
    rng = np.random.default_rng(seed)
    y, s, qid = random_case(rng)
    for call, measure in cases_for(y):
        call = dict(call)
        fn = call.pop("fn")
        got = fn(y, s, qid, ties=ties, per_query=True, **call)
        want = per_query_reference(y, s, qid, measure, ties)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=f"{fn} {call}")
        mean = fn(y, s, qid, ties=ties, **call)
        counted = want[~np.isnan(want)]
        if counted.size:
            assert mean == pytest.approx(counted.mean(), rel=1e-12, abs=1e-12)
        else:
            assert math.isnan(mean)


@pytest.mark.parametrize("ties", ["stable", "average"])
def test_measures_on_several_blocks_match_plain_references(force_threads, ties):
    """Every metric kernel (sort_by_score, linear_measure, ideal_linear_measure,
    precision_sum, reciprocal_rank, expected_reciprocal_rank, concordance) on three blocks
    of queries run by the thread pool; the metrics spread queries over threads only from
    100,000 rows, so the block count is forced."""
    rng = np.random.default_rng(77)
    y, s, qid = random_case(rng, n_queries=40)
    runs = force_threads(3)
    for call, measure in cases_for(y):
        call = dict(call)
        fn = call.pop("fn")
        got = fn(y, s, qid, ties=ties, per_query=True, **call)
        want = per_query_reference(y, s, qid, measure, ties)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=f"{fn} {call}")
    for weights in (None, "uniform", "label", "gain"):
        got = M.kendall_tau_score(
            y, s, qid, weights=weights, ties=ties, empty=-7.0, per_query=True
        )
        for q, (ys, ss) in enumerate(ref.split_queries(y, s, qid)):
            if weights is None:
                x = ss if ties == "average" else [-p for p in ref.positions_of(ss, "stable")]
                want = ref.kendall_tau_b(x, ys)
            else:
                want = ref.weighted_tau(ref.positions_of(ss, ties), ys, weights)
            assert got[q] == pytest.approx(-7.0 if want is None else want, abs=1e-12), weights
    groups = group_queries(qid, len(y))
    y_grouped, ptr = groups.to_internal(y), groups.query_ptr
    for k in (None, 1, 3):
        got = M.ideal_dcg(y_grouped, ptr, k=k)
        want = [ref.ideal_dcg_bruteforce(list(y_grouped[a:b]), k) for a, b in pairwise(ptr)]
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert runs and set(runs) == {3}


labels = st.lists(st.integers(0, 4), min_size=1, max_size=7)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), ties=st.sampled_from(["stable", "average"]))
def test_one_query_against_references(data, ties):
    y = data.draw(labels)
    s = data.draw(st.lists(st.integers(0, 3), min_size=len(y), max_size=len(y)))
    k = data.draw(st.sampled_from([None, 1, 2, 4, 9]))
    yv, sv = np.array(y, float), np.array(s, float)
    checks = [
        (M.ndcg_score(yv, sv, k=k, ties=ties), lambda r: ref.ndcg_ranked(r, k)),
        (M.map_score(yv, sv, k=k, ties=ties), lambda r: ref.average_precision_ranked(r, k)),
        (M.mrr_score(yv, sv, k=k, ties=ties), lambda r: ref.reciprocal_rank_ranked(r, k)),
        (M.err_score(yv, sv, k=k, g_max=4, ties=ties), lambda r: ref.err_ranked(r, k, 4.0)),
        (M.precision_score(yv, sv, k=k, ties=ties), lambda r: ref.precision_ranked(r, k)),
    ]
    for got, measure in checks:
        assert got == pytest.approx(ref.over_rankings(measure, y, s, ties), abs=1e-12)


@pytest.mark.parametrize("seed", range(10))
def test_kendall_tau_against_pair_loops_and_scipy(seed):
    rng = np.random.default_rng(100 + seed)
    y, s, qid = random_case(rng)
    for ties in ("stable", "average"):
        got = M.kendall_tau_score(y, s, qid, ties=ties, empty="skip", per_query=True)
        for q, (ys, ss) in enumerate(ref.split_queries(y, s, qid)):
            x = ss if ties == "average" else [-p for p in ref.positions_of(ss, "stable")]
            want = ref.kendall_tau_b(x, ys)
            if want is None:
                assert math.isnan(got[q])
                continue
            assert got[q] == pytest.approx(want, abs=1e-12)
            assert got[q] == pytest.approx(scipy.stats.kendalltau(x, ys).statistic, abs=1e-12)
        for weights in ("uniform", "label", "gain"):
            got = M.kendall_tau_score(
                y, s, qid, weights=weights, ties=ties, empty=-7.0, per_query=True
            )
            for q, (ys, ss) in enumerate(ref.split_queries(y, s, qid)):
                want = ref.weighted_tau(ref.positions_of(ss, ties), ys, weights)
                assert got[q] == pytest.approx(-7.0 if want is None else want, abs=1e-12)


def test_kendall_tau_many_documents_matches_scipy():
    rng = np.random.default_rng(7)
    qid = np.repeat(np.arange(20), rng.integers(2, 300, 20))
    y = rng.integers(0, 5, qid.size).astype(float)
    s = np.round(rng.standard_normal(qid.size), 1)
    got = M.kendall_tau_score(y, s, qid, per_query=True)
    want = [scipy.stats.kendalltau(s[qid == q], y[qid == q]).statistic for q in range(20)]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert M.kendall_tau_score(y, s) == pytest.approx(scipy.stats.kendalltau(s, y).statistic)


# ----------------------------------------------------------------------------- building blocks


def test_gain_and_discount_values():
    y = np.array([0.0, 1.0, 2.0, 3.0, 0.5])
    np.testing.assert_array_equal(M.gain_values(y), [0.0, 1.0, 3.0, 7.0, 2**0.5 - 1])
    np.testing.assert_array_equal(M.gain_values(y, "linear"), y)
    np.testing.assert_array_equal(M.gain_values(y, np.exp2), 2.0**y)
    i = np.arange(1, 8)
    np.testing.assert_allclose(M.discount_values(7), 1 / np.log2(i + 1), rtol=1e-15)
    want = [1.0, 1.0] + [1 / math.log2(p) for p in range(3, 8)]
    np.testing.assert_allclose(M.discount_values(7, "original"), want, rtol=1e-15)
    assert M.discount_values(0).shape == (0,)


@pytest.mark.parametrize("seed", range(10))
def test_ideal_dcg_is_the_best_permutation(seed):
    rng = np.random.default_rng(200 + seed)
    sizes = rng.integers(1, 7, 4)
    y = rng.integers(0, 4, sizes.sum()).astype(float)
    ptr = np.concatenate(([0], np.cumsum(sizes)))
    for k in (None, 1, 3):
        for gain, disc in (("exp", "log2"), ("linear", "original")):
            got = M.ideal_dcg(y, ptr, k=k, gain=gain, discount=disc)
            want = [
                ref.ideal_dcg_bruteforce(list(y[a:b]), k, gain, disc)
                for a, b in zip(ptr[:-1], ptr[1:], strict=True)
            ]
            np.testing.assert_allclose(got, want, rtol=1e-12)


# ----------------------------------------------------------------------------- external tools


@pytest.mark.parametrize("k", [None, 1, 3, 5])
def test_matches_sklearn_ndcg_and_dcg(k):
    rng = np.random.default_rng(300 if k is None else 300 + k)
    for _ in range(20):
        n_queries, m = int(rng.integers(1, 6)), int(rng.integers(2, 9))
        y = rng.integers(0, 4, (n_queries, m)).astype(float)
        qid = np.repeat(np.arange(n_queries), m)
        tied = rng.integers(0, 3, (n_queries, m)).astype(float)
        distinct = np.array([rng.permutation(m) for _ in range(n_queries)], dtype=float)
        for scores, ties, ignore in ((tied, "average", False), (distinct, "stable", True)):
            args = (y.ravel(), scores.ravel(), qid)
            opts = dict(k=k, convention="linear", ties=ties)
            assert M.ndcg_score(*args, **opts) == pytest.approx(
                sklearn.metrics.ndcg_score(y, scores, k=k, ignore_ties=ignore), abs=1e-12
            )
            assert M.dcg_score(*args, **opts) == pytest.approx(
                sklearn.metrics.dcg_score(y, scores, k=k, ignore_ties=ignore), abs=1e-12
            )


def ir_measures_run(rng, n_queries, require_relevant):
    """Random labels 0..4 and distinct scores (trec_eval and gdeval break ties by docno)."""
    sizes = rng.integers(1, 25, n_queries)
    qid = np.repeat(np.arange(1, n_queries + 1), sizes)
    y = rng.integers(0, 5, qid.size) * (rng.random(qid.size) < 0.5)
    if require_relevant:
        first = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        y[first] = np.maximum(y[first], 1)
    s = rng.permutation(qid.size).astype(float) / qid.size
    return y.astype(float), s, qid


def ir_measures_values(provider, measures, y, s, qid):
    import ir_measures

    qrels = [
        ir_measures.Qrel(str(q), f"d{i}", int(r))
        for i, (q, r) in enumerate(zip(qid, y, strict=True))
    ]
    run = [
        ir_measures.ScoredDoc(str(q), f"d{i}", float(v))
        for i, (q, v) in enumerate(zip(qid, s, strict=True))
    ]
    values = {
        (str(r.measure), r.query_id): r.value for r in provider.iter_calc(measures, qrels, run)
    }
    queries = [str(q) for q in dict.fromkeys(qid)]
    return {str(m): np.array([values.get((str(m), q), 0.0) for q in queries]) for m in measures}


@pytest.mark.parametrize("seed", range(3))
def test_matches_trec_eval_through_ir_measures(seed):
    ir_measures = pytest.importorskip("ir_measures")
    from ir_measures import AP, RR, P, R, nDCG

    rng = np.random.default_rng(400 + seed)
    y, s, qid = ir_measures_run(rng, 60, require_relevant=False)
    measures = [nDCG, nDCG @ 5, nDCG @ 10, P @ 5, P @ 10, AP, AP @ 5, RR, R @ 10]
    want = ir_measures_values(ir_measures.pytrec_eval, measures, y, s, qid)
    ours = {
        "nDCG": M.ndcg_score(y, s, qid, convention="linear", per_query=True),
        "nDCG@5": M.ndcg_score(y, s, qid, k=5, convention="linear", per_query=True),
        "nDCG@10": M.ndcg_score(y, s, qid, k=10, convention="linear", per_query=True),
        "P@5": M.precision_score(y, s, qid, k=5, per_query=True),
        "P@10": M.precision_score(y, s, qid, k=10, per_query=True),
        "AP": M.map_score(y, s, qid, per_query=True),
        "AP@5": M.map_score(y, s, qid, k=5, per_query=True),
        "RR": M.mrr_score(y, s, qid, per_query=True),
        "R@10": M.recall_score(y, s, qid, k=10, per_query=True),
    }
    for name, values in ours.items():
        np.testing.assert_allclose(values, want[name], rtol=1e-9, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("seed", range(2))
def test_matches_gdeval_err_and_exp_ndcg(seed):
    ir_measures = pytest.importorskip("ir_measures")
    if not ir_measures.gdeval.is_available():
        pytest.skip("gdeval needs perl")
    from ir_measures import ERR, nDCG

    rng = np.random.default_rng(500 + seed)
    y, s, qid = ir_measures_run(rng, 40, require_relevant=True)
    for k in (3, 10, 20):
        want = ir_measures_values(ir_measures.gdeval, [ERR @ k, nDCG @ k], y, s, qid)
        # gdeval fixes the top grade at 4 and prints five decimals
        got_err = M.err_score(y, s, qid, k=k, g_max=4, per_query=True)
        got_ndcg = M.ndcg_score(y, s, qid, k=k, per_query=True)
        np.testing.assert_allclose(got_err, want[f"ERR@{k}"], atol=5.1e-6)
        np.testing.assert_allclose(got_ndcg, want[f"nDCG@{k}"], atol=5.1e-6)


# ----------------------------------------------------------------------------- worked examples


def test_seed_000_table_9_3_ndcg():
    """r = 3, 2, 3, 0, 1, 2 with DCG@k = r_1 + Σ_{i>=2} r_i / log2 i (linear gain)."""
    y = np.array([3.0, 2.0, 3.0, 0.0, 1.0, 2.0])
    s = -np.arange(6.0)
    dcg = 3 + 2 / math.log2(2) + 3 / math.log2(3) + 0 + 1 / math.log2(5) + 2 / math.log2(6)
    ideal = 3 + 3 / math.log2(2) + 2 / math.log2(3) + 2 / math.log2(4) + 1 / math.log2(5)
    got = M.ndcg_score(y, s, k=6, gain="linear", discount="original")
    assert M.dcg_score(y, s, gain="linear", discount="original") == pytest.approx(dcg)
    assert got == pytest.approx(dcg / ideal, rel=1e-14)
    # the seed's ideal DCG 8.693; its DCG 8.09 (so 0.9306) comes from its table's
    # two-decimal logs 1.59, 2.32, 2.59, the exact one is 8.0972, so 8.0972 / 8.6925 = 0.93151
    ideal_dcg = M.ideal_dcg(y, [0, 6], gain="linear", discount="original")
    assert round(ideal_dcg[0], 3) == 8.693
    assert round(M.dcg_score(y, s, gain="linear", discount="original"), 4) == 8.0972
    assert round(got, 4) == 0.9315


def test_seed_000_average_precision():
    got = M.map_score([1, 0, 1, 0, 1], [5, 4, 3, 2, 1])
    assert got == pytest.approx((1 / 1 + 2 / 3 + 3 / 5) / 3)
    assert round(got, 2) == 0.76


def test_seed_001_slide_examples():
    # 5 recommendations (3 relevant, 2 of them in the top 3) and 3 purchases not
    # recommended: 6 relevant items in all
    exact = np.array([1, 0, 1, 1, 0, 1, 1, 1.0])
    s = -np.arange(8.0)
    assert M.precision_score(exact, s, k=5) == pytest.approx(0.6)
    assert M.precision_score(exact, s, k=3) == pytest.approx(2 / 3)
    assert M.recall_score(exact, s, k=5) == pytest.approx(3 / 6)
    f1 = 2 * 0.6 * 0.5 / (0.6 + 0.5)
    assert M.f1_score(exact, s, k=5) == pytest.approx(f1)
    # "category" relevance: the whole top 3 is relevant
    category = np.array([1, 1, 1, 1, 0, 1, 1, 0.0])
    assert M.precision_score(category, s, k=3) == pytest.approx(1.0)
    assert M.recall_score(category, s, k=3) == pytest.approx(0.5)
    # AP@K = Σ_{i relevant} P@i / K
    s4 = -np.arange(4.0)
    assert M.map_score([1, 1, 0, 0], s4, k=2, normalize="k") == pytest.approx(1.0)
    assert M.map_score([1, 1, 1, 0], s4, k=4, normalize="k") == pytest.approx(0.75)
    shifted = M.map_score([0, 1, 1, 1], s4, k=4, normalize="k")
    assert shifted == pytest.approx((1 / 2 + 2 / 3 + 3 / 4) / 4)
    assert round(shifted, 2) == 0.48  # the slide's "1.92 / 4 ... 0.5"
    assert M.precision_score([1, 1, 1, 0], s4, k=4) == M.precision_score([0, 1, 1, 1], s4, k=4)
    # the same lists normalised by the number of relevant items (3)
    assert M.map_score([1, 1, 1, 0], s4, k=4) == pytest.approx(1.0)
    assert M.map_score([0, 1, 1, 1], s4, k=4) == pytest.approx((1 / 2 + 2 / 3 + 3 / 4) / 3)


def test_seed_001_ndcg_at_3():
    """Relevances 1, 0.8, 0.9, 0, 0.7; the slide's gain is 2^r over log(i + 1)."""
    y = np.array([1.0, 0.8, 0.9, 0.0, 0.7])
    s = -np.arange(5.0)
    dcg = 2**1 / math.log2(2) + 2**0.8 / math.log2(3) + 2**0.9 / math.log2(4)
    best = 2**1 / math.log2(2) + 2**0.9 / math.log2(3) + 2**0.8 / math.log2(4)
    got = M.ndcg_score(y, s, k=3, gain=np.exp2)
    assert got == pytest.approx(dcg / best)
    assert math.floor(got * 1000) / 1000 == 0.995  # 0.99593, the slide's "0.995 ≈ 1"
    # with the package's default gain 2^r − 1
    dcg1 = 1 / math.log2(2) + (2**0.8 - 1) / math.log2(3) + (2**0.9 - 1) / math.log2(4)
    best1 = 1 / math.log2(2) + (2**0.9 - 1) / math.log2(3) + (2**0.8 - 1) / math.log2(4)
    assert M.ndcg_score(y, s, k=3) == pytest.approx(dcg1 / best1)


@pytest.mark.parametrize("seed", range(20))
def test_seed_002_ndcg_loss(seed):
    """1 − G(y', y)/G(y, y) with G = Σ_i D(π(y')_i) y_i and D(i) = 1/log2(r − i + 2) for
    i > r − k: π(y')_i is item i's rank counted from the bottom (r = top)."""
    rng = np.random.default_rng(600 + seed)
    r = int(rng.integers(2, 9))
    k = int(rng.integers(1, r))
    y = rng.integers(0, 4, r).astype(float)
    y_pred = rng.permutation(r).astype(float)

    def from_bottom(v):
        return np.argsort(np.argsort(v, kind="stable"), kind="stable") + 1

    def big_d(i):
        return 1 / math.log2(r - i + 2) if i >= r - k + 1 else 0.0

    def big_g(v):
        return sum(big_d(p) * yi for p, yi in zip(from_bottom(v), y, strict=True))

    if big_g(y) == 0:
        return
    loss = 1 - big_g(y_pred) / big_g(y)
    assert 0.0 <= loss <= 1.0
    assert 1 - M.ndcg_score(y, y_pred, k=k, convention="linear") == pytest.approx(loss)
    assert M.ndcg_score(y, y, k=k, convention="linear") == pytest.approx(1.0)


# ----------------------------------------------------------------------------- LETOR rules


def test_letor_convention_rules():
    s = np.array([0.5, 0.5, 0.2, 0.9, 0.1])
    y = np.array([2.0, 0.0, 1.0, 0.0, 2.0])
    # a query with no relevant document gives 0 and counts in the mean
    assert M.ndcg_score([0, 0, 0.0], [1, 2, 3.0], k=2, convention="letor") == 0.0
    both = M.ndcg_score(
        np.r_[y, 0, 0], np.r_[s, 1, 2], np.r_[[1] * 5, 2, 2], k=3, convention="letor"
    )
    assert both == pytest.approx(M.ndcg_score(y, s, k=3, convention="letor") / 2)
    # a query shorter than k gives 0 at that k
    assert M.ndcg_score(y, s, k=6, convention="letor") == 0.0
    assert M.ndcg_score(y, s, k=6) == pytest.approx(M.ndcg_score(y, s, k=5))
    # gain 2^r − 1, positions 1 and 2 undiscounted, ties in row order
    ranked = [0.0, 2.0, 0.0, 1.0, 2.0]  # 0.9, then the tie 0.5 / 0.5 in row order, ...
    for k in range(1, 6):
        want = ref.letor_ndcg_ranked(ranked, k)
        assert M.ndcg_score(y, s, k=k, convention="letor") == pytest.approx(want)
    dcg3 = 0 + 3 + 0 / math.log2(3)
    assert M.dcg_score(y, s, k=3, convention="letor") == pytest.approx(dcg3)
    # MAP counts label >= 1 as relevant
    assert M.map_score(y, s, threshold=1, ties="stable") == pytest.approx(
        ref.average_precision_ranked([r >= 1 for r in ranked])
    )
    with pytest.raises(ValueError, match="ties"):
        M.ndcg_score(y, s, convention="letor", ties="average")
    with pytest.raises(ValueError, match="empty"):
        M.ndcg_score(y, s, convention="letor", empty=1.0)
    with pytest.raises(ValueError, match="gain"):
        M.ndcg_score(y, s, convention="letor", gain="linear")


def load_mq2008(path):
    from sklearn.datasets import load_svmlight_file

    parts = [
        load_svmlight_file(str(path / "mq2008" / f"S{i}.txt"), query_id=True) for i in range(1, 6)
    ]
    X = np.vstack([p[0].toarray() for p in parts])
    y = np.concatenate([p[1] for p in parts])
    qid = np.concatenate([p[2] for p in parts])
    return X, y, qid


def test_mq2008_letor_ndcg_drops_past_eight_documents(shared_data):
    X, y, qid = load_mq2008(shared_data)
    groups = group_queries(qid, len(y))
    lengths = np.diff(groups.query_ptr)
    assert groups.n_queries == 784
    no_relevant = np.add.reduceat(groups.to_internal(y), groups.query_ptr[:-1]) == 0
    assert no_relevant.sum() == 220
    assert np.mean(lengths < 9) > 0.5  # mostly 8 documents (339 of 784 queries)
    score = X[:, 0]  # a single feature (term frequency in the body) as a trivial scorer
    letor = [M.ndcg_score(y, score, qid, k=k, convention="letor") for k in range(1, 11)]
    assert letor[8] < 0.6 * letor[7] and letor[9] < 0.6 * letor[7]
    plain = [M.ndcg_score(y, score, qid, k=k, ties="stable") for k in range(1, 11)]
    assert plain[8] > 0.9 * plain[7]  # without the LETOR rule there is no drop
    # per query, the LETOR tool's rules written out (gain table, log(2)/log(i), file order)
    per_query = M.ndcg_score(y, score, qid, k=10, convention="letor", per_query=True)
    for q, (ys, ss) in enumerate(ref.split_queries(y, score, qid)):
        want = ref.letor_ndcg_ranked([ys[i] for i in ref.stable_order(ss)], 10)
        assert per_query[q] == pytest.approx(want, abs=1e-12)
    assert np.all(per_query[lengths < 10] == 0)
    map_ = M.map_score(y, score, qid, threshold=1, ties="stable", per_query=True)
    assert np.all(map_[no_relevant] == 0)


# ----------------------------------------------------------------------------- behaviour


def test_per_query_order_is_first_appearance():
    qid = np.array([7, 3, 7, 1, 3, 1, 1])
    y = np.array([1, 0, 0, 2, 1, 0, 1.0])
    s = np.array([0.1, 0.9, 0.5, 0.3, 0.2, 0.4, 0.6])
    got = M.ndcg_score(y, s, qid, per_query=True)
    want = [M.ndcg_score(y[qid == q], s[qid == q]) for q in (7, 3, 1)]
    np.testing.assert_allclose(got, want)


def test_average_ties_do_not_depend_on_row_order_and_stable_ties_do():
    rng = np.random.default_rng(11)
    y = rng.integers(0, 4, 40).astype(float)
    s = rng.integers(0, 3, 40).astype(float)
    perm = rng.permutation(40)
    for fn in (M.ndcg_score, M.map_score, M.mrr_score, M.err_score, M.kendall_tau_score):
        assert fn(y, s) == pytest.approx(fn(y[perm], s[perm]), abs=1e-12)
    stable = M.ndcg_score(y, np.zeros(40), ties="stable")
    assert stable == pytest.approx(ref.ndcg_ranked(list(y)))


def test_empty_option():
    y = np.array([0, 0, 1, 0, 2.0])
    s = np.array([1, 2, 3, 4, 5.0])
    qid = np.array([1, 1, 2, 2, 2])
    full = M.ndcg_score(y, s, qid, per_query=True)
    assert full[0] == 0.0
    skipped = M.ndcg_score(y, s, qid, empty="skip", per_query=True)
    assert math.isnan(skipped[0]) and skipped[1] == full[1]
    assert M.ndcg_score(y, s, qid, empty="skip") == full[1]
    assert M.ndcg_score(y, s, qid, empty=1.0) == pytest.approx((1 + full[1]) / 2)
    assert math.isnan(M.map_score([0, 0.0], [1, 2.0], empty="skip"))


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: M.ndcg_score([1, 0], [1.0]), "y_score"),
        (lambda: M.ndcg_score([1, np.nan], [1, 2.0]), "y_true"),
        (lambda: M.map_score([1, 0], [np.inf, 2.0]), "y_score"),
        (lambda: M.ndcg_score([], []), "y_true"),
        (lambda: M.ndcg_score([[1, 0]], [[1, 2]]), "y_true"),
        (lambda: M.ndcg_score([1, 0], [1, 2], k=0), "k"),
        (lambda: M.precision_score([1, 0], [1, 2], k=-1), "k"),
        (lambda: M.ndcg_score([1, 0], [1, 2], k=1.5), "k"),
        (lambda: M.ndcg_score([1, 0], [1, 2], k=True), "k"),
        (lambda: M.ndcg_score([1, 0], [1, 2], convention="trec"), "convention"),
        (lambda: M.ndcg_score([1, 0], [1, 2], ties="random"), "ties"),
        (lambda: M.map_score([1, 0], [1, 2], ties=None), "ties"),
        (lambda: M.ndcg_score([1, 0], [1, 2], gain="square"), "gain"),
        (lambda: M.ndcg_score([1, 0], [1, 2], discount="ln"), "discount"),
        (lambda: M.ndcg_score([1, -1], [1, 2]), "y_true"),
        (lambda: M.ndcg_score([1, 0], [1, 2], empty="nan"), "empty"),
        (lambda: M.map_score([1, 0], [1, 2], normalize="min"), "normalize"),
        (lambda: M.map_score([1, 0], [1, 2], normalize="k"), "k"),
        (lambda: M.map_score([1, 0], [1, 2], threshold=np.nan), "threshold"),
        (lambda: M.ndcg_score([1, 0], [1, 2], qid=[1]), "qid"),
        (lambda: M.err_score([3, 0], [1, 2], g_max=2), "g_max"),
        (lambda: M.neru_score([3, 0], [1, 2], alpha=1.0), "alpha"),
        (lambda: M.fbeta_score([3, 0], [1, 2], beta=0.0), "beta"),
        (lambda: M.kendall_tau_score([3, 0], [1, 2], weights="pos"), "weights"),
        (lambda: M.discount_values(-1), "n"),
        (lambda: M.ideal_dcg([1, 0], [0, 1]), "query_ptr"),
    ],
)
def test_validation_names_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()

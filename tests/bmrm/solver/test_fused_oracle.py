"""The one-pass oracle (:func:`bmrm.solver.products.fused_cut`) against two references.

References: (1) R and g from ``losses.risk`` on f = X w computed by numpy in float64, and the
subgradient a = Xᵀg by numpy (independent of the oracle's products); (2) the two-pass oracle
(``RiskOracle`` with the one-pass plan switched off), which must agree to rounding. Cases:
random query sizes with one-document queries, all-equal-label queries, tied scores
(duplicated rows), blocks smaller than a query, float32 and float64 X, an intercept, every
loss with a block kernel (the ordinal loss with its costs and normalisations, the
average-precision loss), 1 and several threads.
"""

import numpy as np
import pytest
import scipy.sparse as sp

import losses
from bmrm.solver import oracle as oracle_module
from bmrm.solver import products
from bmrm.solver.oracle import RiskOracle

LOSSES = [
    ("ordinal", {}),
    ("ordinal", {"cost": "linear", "normalize": "none"}),
    ("ordinal", {"cost": [[0, 1, 3, 4], [0, 0, 2, 5], [0, 0, 0, 1], [0, 0, 0, 0]]}),
    ("map", {}),
    ("map", {"threshold": 2}),
]


def ranking_data(seed, dtype, n_queries=60, d=7):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 25, n_queries)
    sizes[:3] = 1  # one-document queries
    qid = np.repeat(np.arange(n_queries), sizes)
    n = len(qid)
    X = rng.standard_normal((n, d))
    dup = rng.random(n) < 0.2  # duplicated rows: tied scores within a query
    X[1:][dup[1:]] = X[:-1][dup[1:]]
    y = np.clip(np.round(X[:, 0] + rng.standard_normal(n)), 0, 3).astype(int)
    y[qid == 5] = 2  # an all-equal-label query
    y[qid == 7] = 0
    return X.astype(dtype), y, qid


def fused_oracle(X, prepared, **options):
    oracle = RiskOracle(X, prepared, **options)
    oracle.fused = oracle._fused_plan(0)
    assert oracle.fused is not None
    return oracle


def numpy_reference(X, y, qid, loss, w, fit_intercept=False, scaling=1.0):
    Xd = X.astype(np.float64)
    if fit_intercept:
        Xd = np.hstack([Xd, np.full((len(Xd), 1), scaling)])
    R, g = losses.risk(loss, Xd @ w, y, qid)
    return R, Xd.T @ g


@pytest.fixture(params=[256, 4096, 1 << 16], ids=["tiny-blocks", "blocks", "one-block"])
def block_bytes(request, monkeypatch):
    monkeypatch.setattr(products, "FUSED_BLOCK_BYTES", request.param)
    return request.param


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name,params", LOSSES)
@pytest.mark.parametrize("seed", range(4))
def test_fused_oracle_matches_numpy_and_the_two_pass_oracle(
    seed, name, params, dtype, block_bytes
):
    X, y, qid = ranking_data(seed, dtype)
    loss = losses.get(name, **params)
    prepared = losses.prepare(loss, y, qid)
    rng = np.random.default_rng(100 + seed)
    w = rng.standard_normal(X.shape[1])
    fit_intercept = seed % 2 == 1
    options = {"fit_intercept": fit_intercept, "intercept_scaling": 2.5}
    if fit_intercept:
        w = np.append(w, rng.standard_normal())
    fused = fused_oracle(X, prepared, **options)
    two_pass = RiskOracle(X, prepared, **options)
    two_pass.fused = None
    R, a = fused(w)
    g = fused.last_gradient.copy()
    R2, a2 = two_pass(w)
    R_ref, a_ref = numpy_reference(X, y, qid, loss, w, fit_intercept, 2.5)
    assert R == pytest.approx(R2, rel=1e-12, abs=1e-15)
    np.testing.assert_allclose(a, a2, rtol=1e-12, atol=1e-12 * np.abs(a2).max())
    np.testing.assert_array_equal(g, two_pass.last_gradient)
    assert R == pytest.approx(R_ref, rel=1e-12, abs=1e-15)
    np.testing.assert_allclose(a, a_ref, rtol=1e-11, atol=1e-11 * np.abs(a_ref).max())
    # the buffers are reused: a second call at another point is as good as the first
    w2 = w + rng.standard_normal(len(w))
    np.testing.assert_allclose(fused(w2)[1], two_pass(w2)[1], rtol=1e-12, atol=1e-12)


def test_fused_oracle_does_not_depend_on_the_thread_count(monkeypatch):
    monkeypatch.setattr(products, "FUSED_BLOCK_BYTES", 1024)
    X, y, qid = ranking_data(3, np.float32, n_queries=200)
    prepared = losses.prepare(losses.get("ordinal"), y, qid)
    w = np.random.default_rng(1).standard_normal(X.shape[1])
    results = []
    for threads in (1, 2, 3):
        monkeypatch.setattr(products, "n_threads_for", lambda n, t=threads: t)
        R, a = fused_oracle(X, prepared)(w)
        results.append((R, a.copy()))
    for R, a in results[1:]:
        assert R == results[0][0]
        np.testing.assert_array_equal(a, results[0][1])


def test_query_blocks_hold_whole_queries(monkeypatch):
    monkeypatch.setattr(products, "FUSED_BLOCK_BYTES", 80)  # 10 rows of 1 float64 feature
    query_ptr = np.array([0, 3, 4, 30, 31, 35, 41, 50], dtype=np.int64)
    blocks = products.query_blocks(query_ptr, 1, 8)
    assert blocks[0] == 0 and blocks[-1] == len(query_ptr) - 1
    assert np.all(np.diff(blocks) > 0)
    # a block starts at the first query starting at or after each multiple of 10 rows
    # (rows 10, 20 and 30 fall inside or at the start of query 2, which spans 4..30)
    np.testing.assert_array_equal(blocks, [0, 3, 6, 7])


def test_one_pass_is_chosen_only_where_it_applies():
    X, y, qid = ranking_data(0, np.float64)
    ordinal = losses.prepare(losses.get("ordinal"), y, qid)
    assert RiskOracle(X, ordinal)._fused_plan(0) is not None
    # small X keeps two passes (it stays in cache between them)
    assert RiskOracle(X, ordinal).fused is None
    assert X.nbytes < oracle_module.FUSED_MIN_BYTES
    # rows not in query order, other layouts, CSR, pointwise losses, a loss without a kernel
    order = np.random.default_rng(0).permutation(len(y))
    shuffled = losses.prepare(losses.get("ordinal"), y[order], qid[order])
    assert shuffled.groups.order is not None
    assert RiskOracle(X[order], shuffled)._fused_plan(0) is None
    assert RiskOracle(np.asfortranarray(X), ordinal)._fused_plan(0) is None
    assert RiskOracle(sp.csr_matrix(X), ordinal)._fused_plan(0) is None
    squared = losses.prepare(losses.get("squared"), y.astype(float), qid)
    assert RiskOracle(X, squared)._fused_plan(0) is None
    ndcg = losses.prepare(losses.get("ndcg", ties="increasing"), y, qid)
    assert RiskOracle(X, ndcg)._fused_plan(0) is None
    pairs, costs = losses.pairs_from_labels(y, qid)
    preference = losses.prepare(losses.get("preference"), y, qid, pairs=pairs, pair_costs=costs)
    assert RiskOracle(X, preference)._fused_plan(0) is None


@pytest.mark.parametrize("scale", [1e308, np.inf])
def test_fused_oracle_reports_overflowing_scores(scale):
    X, y, qid = ranking_data(2, np.float64)
    prepared = losses.prepare(losses.get("ordinal"), y, qid)
    w = np.full(X.shape[1], scale)
    with pytest.raises(FloatingPointError, match="scores X @ w overflowed"):
        fused_oracle(X, prepared)(w)

"""The per-query cut cache (bmrm.solver.cut_cache) and the per-query product behind it."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import bmrm
import losses
from bmrm.solver import products
from bmrm.solver.bundle import Bundle
from bmrm.solver.cut_cache import CutCache, make_cut_cache, supports_cut_cache
from bmrm.solver.methods import OCAS, BundleState, PlainBMRM
from bmrm.solver.methods.level import LevelBundle
from bmrm.solver.oracle import RiskOracle
from bmrm.solver.problem import Problem
from bmrm.solver.regularizers import L2
from tests.bmrm.solver.test_methods import QueryHinge, ordinal_direct

# every convex per-query loss of the package (latent and non-convex ones are refused)
RANKING_LOSSES = [
    ("ordinal", {}),
    ("ordinal", {"normalize": "none"}),
    ("preference", {}),
    ("ndcg", {"ties": "increasing"}),
    ("ndcg", {"ties": "pairs"}),
    ("ndcg", {"ties": "increasing", "truncate_c": True}),
    ("neru", {"ties": "increasing"}),
    ("neru", {"ties": "pairs"}),
    ("listnet", {}),
    ("listwise_squared", {}),
    ("ranknet", {}),
    ("softmax", {}),
]


def ranking_data(seed, n_queries=9, d=4):
    """Queries of 1 to 7 documents, with ties, a one-document query and an all-equal-label
    query; rows shuffled so that queries are not contiguous in the caller's order."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 8, size=n_queries)
    sizes[0] = 1
    qid = np.repeat(np.arange(n_queries), sizes)
    n = len(qid)
    y = rng.integers(0, 3, size=n)
    y[qid == 1] = 2  # all-equal labels
    X = rng.normal(size=(n, d)) * rng.uniform(0.3, 2.0, size=d)
    X[rng.random(n) < 0.1] = X[0]  # repeated rows: tied scores at every w
    perm = rng.permutation(n)
    return X[perm], y[perm], qid[perm]


def make_oracle(name, params, X, y, qid, fit_intercept=False):
    loss = losses.get(name, **params)
    data = {}
    if name == "preference":
        data["pairs"], data["pair_costs"] = losses.pairs_from_labels(y, qid)
    prepared = losses.prepare(loss, y, qid, n_samples=X.shape[0], **data)
    return RiskOracle(X, prepared, fit_intercept=fit_intercept, intercept_scaling=0.7)


def bare_state(oracle):
    p = oracle.n_features
    return BundleState(
        problem=Problem.of(oracle, L2(), 1.0, p), w0=np.zeros(p), bundle=Bundle(p, 50)
    )


def query_rmatvec_reference(X, g, qid_internal_rows, n_queries, scaling, width):
    """Σ over a query's rows of g_i X[i], row by row in plain Python."""
    X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    out = np.zeros((n_queries, width))
    d = X.shape[1]
    for q, rows in enumerate(qid_internal_rows):
        for r in rows:
            out[q, :d] += g[r] * X[r]
            if width > d:
                out[q, d] += scaling * g[r]
    return out


@pytest.mark.parametrize("layout", ["C64", "C32", "F64", "csr64", "csr32"])
@pytest.mark.parametrize("ordered", [True, False])
@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_query_rmatvec_matches_a_plain_sum(layout, ordered, intercept, seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 6, size=12)  # empty queries too
    n, d = int(sizes.sum()), 7
    query_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    X = rng.normal(size=(n, d))
    X[rng.random((n, d)) < 0.4] = 0.0
    g = rng.normal(size=n)
    g[rng.random(n) < 0.2] = 0.0
    order = None if ordered else rng.permutation(n).astype(np.int64)
    rows = [
        (np.arange(query_ptr[q], query_ptr[q + 1]) if order is None else
         order[query_ptr[q]:query_ptr[q + 1]])
        for q in range(len(sizes))
    ]  # fmt: skip
    dtype = np.float32 if layout.endswith("32") else np.float64
    Xd = X.astype(dtype)
    if layout.startswith("csr"):
        Xd = sp.csr_matrix(Xd)
    elif layout.startswith("F"):
        Xd = np.asfortranarray(Xd)
    width = d + int(intercept)
    out = np.full((len(sizes), width), np.nan)
    products.query_rmatvec(Xd, g, query_ptr, order, out, scaling=1.3)
    expected = query_rmatvec_reference(Xd, g, rows, len(sizes), 1.3, width)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


def test_query_rmatvec_on_many_threads_equals_one_thread(monkeypatch):
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 60, size=1500)
    n = int(sizes.sum())
    query_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    X, g = rng.normal(size=(n, 9)), rng.normal(size=n)
    many = np.empty((len(sizes), 9))
    products.query_rmatvec(X, g, query_ptr, None, many)
    monkeypatch.setattr(products, "n_threads_for", lambda n: 1)
    one = np.empty((len(sizes), 9))
    products.query_rmatvec(X, g, query_ptr, None, one)
    np.testing.assert_array_equal(many, one)


@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("name, params", RANKING_LOSSES)
def test_query_cut_adds_up_to_the_oracle_cut(name, params, fit_intercept):
    X, y, qid = ranking_data(3)
    oracle = make_oracle(name, params, X, y, qid, fit_intercept)
    rng = np.random.default_rng(1)
    for _ in range(5):
        w = rng.normal(size=oracle.n_features)
        R, a = oracle(w)
        out = np.empty((oracle.prepared.groups.n_queries, oracle.n_features))
        Rq, aq, r = oracle.query_cut(w, out)
        assert Rq == pytest.approx(R, rel=1e-12, abs=1e-14)
        assert r.sum() == pytest.approx(R, rel=1e-12, abs=1e-14)
        np.testing.assert_allclose(aq, a, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(out.sum(axis=0), a, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name, params", RANKING_LOSSES)
@pytest.mark.parametrize("seed", range(3))
def test_cache_cut_is_a_minorant_and_exact_at_cached_points(name, params, seed):
    X, y, qid = ranking_data(seed)
    oracle = make_oracle(name, params, X, y, qid, fit_intercept=seed == 2)
    state = bare_state(oracle)
    cache = CutCache(max_points=4, max_fraction=1e6)
    cache.bind(oracle, required=True)
    assert cache.active and cache.K == 4
    rng = np.random.default_rng(10 + seed)
    points = [rng.normal(size=oracle.n_features) * s for s in (0.1, 1.0, 3.0)]
    for w_k in points:
        R_k, a_k = cache.oracle_cut(state, w_k)
        value, a, b = cache.cut(w_k)
        # just stored: the cache cut at w_k is the exact cut there (value and plane)
        assert value == pytest.approx(R_k, rel=1e-10, abs=1e-12)
        assert a @ w_k + b == pytest.approx(R_k, rel=1e-10, abs=1e-12)
        assert oracle(w_k)[0] == pytest.approx(R_k, rel=1e-12, abs=1e-14)
    for _ in range(60):
        w = rng.normal(size=oracle.n_features) * rng.choice([0.01, 0.3, 1.0, 10.0])
        R = oracle(w)[0]
        value, a, b = cache.cut(w)
        assert a @ w + b == pytest.approx(value, rel=1e-10, abs=1e-12)
        assert value <= R + 1e-10 * (1 + abs(R))
        # at least as high as each cached point's joint cut (the bundle's planes)
        for w_k in points:
            R_k, a_k = oracle(w_k)
            assert value >= R_k + a_k @ (w - w_k) - 1e-9 * (1 + abs(R))


def test_cache_holds_per_query_maxima_not_joint_cuts():
    """At a point between two cached points, some queries take one plane and some the other:
    the cache cut is then strictly above both joint cuts."""
    X, y, qid = ranking_data(0, n_queries=30)
    oracle = make_oracle("ordinal", {}, X, y, qid)
    state = bare_state(oracle)
    cache = CutCache(max_points=3, max_fraction=1e6)
    cache.bind(oracle, required=True)
    rng = np.random.default_rng(5)
    w1, w2 = rng.normal(size=4), rng.normal(size=4)
    cuts = [(w, *cache.oracle_cut(state, w)) for w in (w1, w2)]
    above = 0
    for _ in range(50):
        w = rng.normal(size=4)
        value = cache.cut(w)[0]
        joint = max(R + a @ (w - wk) for wk, R, a in cuts)
        above += value > joint + 1e-9
    assert above > 25


def test_eviction_replaces_the_least_recently_most_violated_plane():
    """A handmade cache of one query with three full slots stamped 5, 2 and 9: a new plane
    goes to the slot stamped 2."""
    from bmrm.solver.cut_cache import _store

    A = np.zeros((1, 3, 2))
    c = np.array([[-5.0, -6.0, -7.0]])
    filled = np.array([3], dtype=np.int64)
    used = np.array([[5, 2, 9]], dtype=np.int64)
    P = np.array([[1.0, 2.0]])
    w = np.array([0.5, 0.25])
    stored = np.zeros(1, dtype=np.int64)
    bounds = np.array([0, 1], dtype=np.int64)
    _store(0, 1, bounds, A, c, filled, used, 10, w, P, np.array([3.0]), 1e-12, stored)
    assert stored[0] == 1
    np.testing.assert_array_equal(A[0, 1], [1.0, 2.0])
    assert c[0, 1] == pytest.approx(3.0 - 1.0)
    np.testing.assert_array_equal(used[0], [5, 10, 9])
    # a plane no higher at its point than a cached one is not stored; that one is stamped
    _store(0, 1, bounds, A, c, filled, used, 11, w, P, np.array([3.0]), 1e-12, stored)
    assert stored[0] == 0
    np.testing.assert_array_equal(used[0], [5, 11, 9])


@pytest.mark.parametrize("max_points, max_fraction", [(8, 0.25), (3, 10.0), (50, 0.5)])
def test_cache_respects_its_memory_cap(max_points, max_fraction):
    X, y, qid = ranking_data(1, n_queries=40, d=6)
    oracle = make_oracle("ordinal", {}, X, y, qid)
    cache = CutCache(max_points=max_points, max_fraction=max_fraction)
    cache.bind(oracle, required=True)
    n_q, p = 40, 6
    slots = int(max_fraction * X.nbytes // (n_q * p * 8)) - 1
    if slots < 2:
        assert not cache.active
        return
    assert cache.active
    assert cache.K == min(max_points, slots)
    assert cache.A.shape == (n_q, cache.K, p)
    assert cache.A.nbytes + cache.P.nbytes <= max_fraction * X.nbytes
    state = bare_state(oracle)
    rng = np.random.default_rng(0)
    for _ in range(3 * cache.K):
        cache.oracle_cut(state, rng.normal(size=p) * 3)
    assert cache.filled.max() <= cache.K


def test_cache_is_off_when_two_slots_do_not_fit():
    X, y, qid = ranking_data(1, n_queries=40, d=6)
    oracle = make_oracle("ordinal", {}, X, y, qid)
    cache = CutCache(max_fraction=0.01)
    cache.bind(oracle, required=True)
    assert not cache.active
    res = bmrm.fit(X, y, "ordinal", qid, lam=0.1, method=PlainBMRM(cut_cache=cache)).result_
    assert res.success and res.n_cache_cuts == 0


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"max_points": 1}, ValueError, "max_points must be at least 2; got 1"),
        ({"max_points": 2.5}, TypeError, "max_points must be an integer"),
        ({"max_points": True}, TypeError, "max_points must be an integer"),
        ({"max_fraction": 0.0}, ValueError, "max_fraction must be a positive"),
        ({"max_fraction": np.inf}, ValueError, "max_fraction must be a positive"),
        ({"max_fraction": "1"}, ValueError, "max_fraction must be a positive"),
        ({"violation": -0.1}, ValueError, "violation must be a finite number >= 0"),
        ({"violation": np.nan}, ValueError, "violation must be a finite number >= 0"),
        ({"max_streak": 0}, ValueError, "max_streak must be at least 1"),
        ({"max_streak": 1.0}, TypeError, "max_streak must be an integer"),
        ({"floor": 1}, TypeError, "floor must be True or False"),
        ({"reference": "slack"}, ValueError, "reference must be 'gap' or 'oracle'"),
    ],
)
def test_bad_cache_options_are_rejected(kwargs, error, match):
    with pytest.raises(error, match=match):
        CutCache(**kwargs)


@pytest.mark.parametrize("method", [PlainBMRM, LevelBundle, OCAS])
@pytest.mark.parametrize("bad", ["yes", 1, 0.5, "on"])
def test_bad_cut_cache_values_are_rejected(method, bad):
    with pytest.raises(ValueError, match="cut_cache must be True, False, 'auto' or a CutCache"):
        method(cut_cache=bad)


def test_make_cut_cache_values():
    assert make_cut_cache(False) == (None, False)
    assert make_cut_cache(None) == (None, False)
    cache, required = make_cut_cache(True)
    assert isinstance(cache, CutCache) and required
    cache, required = make_cut_cache("auto")
    assert isinstance(cache, CutCache) and not required
    given = CutCache(max_points=3)
    assert make_cut_cache(given) == (given, True)


def test_user_loss_needs_a_declaration_for_an_explicit_cache():
    X, y, qid = ranking_data(2)
    with pytest.raises(
        ValueError, match="cut_cache=True needs per-query cuts.*query_decomposable"
    ):
        bmrm.fit(X, y, QueryHinge(), qid, lam=0.1, method=PlainBMRM(cut_cache=True))
    # "auto": simply off, the fit is plain BMRM's
    auto = bmrm.fit(X, y, QueryHinge(), qid, lam=0.1, method=PlainBMRM(cut_cache="auto"))
    plain = bmrm.fit(X, y, QueryHinge(), qid, lam=0.1, method="bmrm")
    assert auto.result_.n_cache_cuts == 0
    np.testing.assert_array_equal(auto.result_.x, plain.result_.x)
    # declared: the cache runs and the fit reaches the direct optimum
    lam = 0.1
    res = bmrm.fit(
        X, y, QueryHinge(decomposable=True), qid, lam=lam, tol=1e-6,
        method=PlainBMRM(cut_cache=CutCache(max_fraction=10.0)),
    ).result_  # fmt: skip
    J_star, _, n_q = ordinal_direct(X, y, qid, lam)
    assert res.success and res.n_cache_cuts > 0
    assert res.fun - J_star <= res.gap + 1e-8


@pytest.mark.parametrize("loss", ["squared", "hinge"])
def test_pointwise_losses_refuse_an_explicit_cache(loss):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    y = np.sign(rng.normal(size=30)) if loss == "hinge" else rng.normal(size=30)
    with pytest.raises(ValueError, match="cut_cache=True needs per-query cuts.*pointwise"):
        bmrm.fit(X, y, loss, lam=0.1, method=PlainBMRM(cut_cache=True))
    res = bmrm.fit(X, y, loss, lam=0.1, method=PlainBMRM(cut_cache="auto")).result_
    assert res.success and res.n_cache_cuts == 0


def test_callable_oracle_refuses_an_explicit_cache():
    def oracle(w):
        return float(w @ w), 2 * w

    with pytest.raises(ValueError, match="cut_cache=True needs per-query cuts.*oracle"):
        bmrm.minimize_bmrm(oracle, 3, 1.0, method=PlainBMRM(cut_cache=True))
    res = bmrm.minimize_bmrm(oracle, 3, 1.0, method=PlainBMRM(cut_cache="auto"))
    assert res.success and res.n_cache_cuts == 0


def test_wrong_subgradient_of_a_declared_loss_still_raises():
    X, y, qid = ranking_data(4)
    for method in (PlainBMRM(cut_cache=True), LevelBundle(cut_cache=True)):
        with pytest.raises(ValueError, match="not a subgradient"):
            bmrm.fit(X, y, QueryHinge(sign=-1.0, decomposable=True), qid, lam=0.1, method=method)


def test_cache_cuts_are_counted_apart_from_oracle_calls():
    X, y, qid = ranking_data(6, n_queries=40, d=6)
    loss = losses.get("ordinal", normalize="none")
    res = bmrm.fit(
        X, y, loss, qid, lam=1e-3, tol=1e-6, max_iter=5000,
        method=PlainBMRM(cut_cache=CutCache(max_fraction=10.0)),
    ).result_  # fmt: skip
    assert res.success and res.n_cache_cuts > 0
    # every iteration is an oracle call or a cache cut; passes only for oracle calls
    assert res.nit == res.nfev + res.n_cache_cuts
    assert res.n_passes == 2 * res.nfev
    hist = res.history
    assert hist["nfev"][-1] == res.nfev
    evaluated = np.isfinite(hist["objective"])
    assert evaluated.sum() == res.nfev
    np.testing.assert_array_equal(np.diff(hist["nfev"], prepend=0) == 1, evaluated)
    assert np.all(np.diff(hist["lower_bound"]) >= 0)


def test_max_iter_counts_oracle_iterations_not_cache_cuts():
    """A cached fit that needs more iterations than max_iter, most of them cache cuts,
    converges; max_iter bounds the iterations that call the oracle."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 20))
    y = rng.integers(0, 4, size=2000)
    qid = np.repeat(np.arange(100), 20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = bmrm.fit(X, y, "ordinal", qid, lam=1e-4, tol=1e-4, method="bmrm").result_
    assert res.status == 0 and res.gap <= 1e-4 * res.fun
    assert res.nit > 1000 and res.n_cache_cuts > 0
    assert res.nit == res.nfev + res.n_cache_cuts
    # with a cap of 5 the fit stops after its fifth oracle call, cache cuts besides
    with pytest.warns(bmrm.ConvergenceWarning, match=r"max_iter=5 and \d+ cache cuts"):
        short = bmrm.fit(X, y, "ordinal", qid, lam=1e-4, tol=1e-4, method="bmrm", max_iter=5)
    res5 = short.result_
    assert res5.status == 2 and res5.nfev == 5 and res5.n_cache_cuts > 0
    assert res5.nit == 5 + res5.n_cache_cuts


def test_cache_is_emptied_for_a_new_oracle():
    X, y, qid = ranking_data(7)
    cache = CutCache(max_points=3, max_fraction=1e6)
    first = make_oracle("ordinal", {}, X, y, qid)
    cache.bind(first, required=True)
    cache.oracle_cut(bare_state(first), np.ones(4))
    assert cache.filled.sum() > 0
    second = make_oracle("ordinal", {}, X, y[::-1].copy(), qid)
    cache.bind(second, required=True)
    assert cache.filled.sum() == 0


def test_supports_cut_cache_reasons():
    X, y, qid = ranking_data(8)
    assert supports_cut_cache(make_oracle("ordinal", {}, X, y, qid)) is None
    latent = make_oracle("ndcg", {}, X, y, qid)
    assert "not convex" in supports_cut_cache(latent)
    assert "not convex" in supports_cut_cache(make_oracle("warp", {}, X, y, qid))
    assert "oracle" in supports_cut_cache(lambda w: (0.0, w))


def test_cached_methods_inside_the_concave_convex_procedure():
    """Latent NDCG: each convex step has its own oracle, so the cache starts afresh."""
    X, y, qid = ranking_data(9, n_queries=25)
    lam = 1e-2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bmrm.ConvergenceWarning)
        plain = bmrm.fit(X, y, "ndcg", qid, lam=lam, tol=1e-6, method="level").result_
        cached = bmrm.fit(
            X, y, "ndcg", qid, lam=lam, tol=1e-6, method=LevelBundle(cut_cache=True)
        ).result_
    assert cached.success
    # both are stationary points of the same procedure; latent NDCG may end at different
    # ones, so compare the objectives loosely against each other's gaps only when equal
    assert cached.fun <= plain.fun * 1.05 + 1e-9


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("floor", [True, False])
def test_cache_cut_matches_a_numpy_reference_on_blocks(monkeypatch, threads, floor):
    import bmrm.solver.cut_cache as cc

    monkeypatch.setattr(cc, "n_threads_for", lambda n: threads)
    X, y, qid = ranking_data(11, n_queries=50, d=5)
    oracle = make_oracle("ordinal", {}, X, y, qid)
    state = bare_state(oracle)
    cache = CutCache(max_points=3, max_fraction=1e6, floor=floor)
    cache.bind(oracle, required=True)
    assert len(cache._bounds) - 1 == min(threads, 50)
    rng = np.random.default_rng(2)
    for _ in range(5):
        cache.oracle_cut(state, rng.normal(size=5) * 2)
    below = 0
    for _ in range(10):
        w = rng.normal(size=5) * 3
        V = np.einsum("qkp,p->qk", cache.A, w) + cache.c
        V[np.arange(cache.K)[None, :] >= cache.filled[:, None]] = -np.inf
        k = V.argmax(axis=1)
        rows = np.arange(50)
        # with the floor, a query whose planes all lie below zero takes the plane R_q >= 0
        take = V[rows, k] > 0 if floor else np.ones(50, dtype=bool)
        below += int((V[rows, k] < 0).sum())
        value, a, b = cache.cut(w)
        assert value == pytest.approx(V[rows, k][take].sum(), rel=1e-12)
        A_ref = cache.A[rows, k][take].sum(axis=0)
        np.testing.assert_allclose(a, A_ref, rtol=1e-12, atol=1e-14)
        assert b == pytest.approx(cache.c[rows, k][take].sum(), rel=1e-12, abs=1e-14)
        assert value <= oracle(w)[0] + 1e-10
    assert below > 0  # the floor made a difference somewhere


@pytest.mark.parametrize("seed", range(4))
def test_floor_lifts_the_cut_and_keeps_it_a_minorant(seed):
    """The cut with the plane R_q >= 0 is the cut without it plus Σ_q max(0, −max_k ...),
    and still lies below the risk."""
    X, y, qid = ranking_data(20 + seed, n_queries=40, d=4)
    oracle = make_oracle("ordinal", {"normalize": "none"}, X, y, qid)
    caches = {}
    for floor in (True, False):
        cache = CutCache(max_points=3, max_fraction=1e6, floor=floor)
        cache.bind(oracle, required=True)
        state = bare_state(oracle)
        rng = np.random.default_rng(seed)
        for _ in range(4):
            cache.oracle_cut(state, rng.normal(size=4) * 3)
        caches[floor] = cache
    rng = np.random.default_rng(100 + seed)
    lifted = 0
    for _ in range(40):
        w = rng.normal(size=4) * rng.choice([0.1, 1.0, 5.0])
        R = oracle(w)[0]
        with_floor, a, b = caches[True].cut(w)
        without = caches[False].cut(w)[0]
        V = np.einsum("qkp,p->qk", caches[False].A, w) + caches[False].c
        V[np.arange(3)[None, :] >= caches[False].filled[:, None]] = -np.inf
        best = V.max(axis=1)
        assert with_floor == pytest.approx(np.maximum(best, 0).sum(), rel=1e-12, abs=1e-12)
        assert without == pytest.approx(best.sum(), rel=1e-12, abs=1e-12)
        assert a @ w + b == pytest.approx(with_floor, rel=1e-10, abs=1e-12)
        assert without <= with_floor <= R + 1e-10 * (1 + R)
        lifted += with_floor > without + 1e-12
    assert lifted > 0


@pytest.mark.parametrize(
    "options",
    [
        {"reference": "oracle"},
        {"reference": "oracle", "violation": 0.1, "max_streak": 10_000},
        {"reference": "gap", "max_streak": 10_000, "floor": False},
        {"reference": "oracle", "violation": 0.0, "max_streak": 3, "floor": False},
    ],
)
@pytest.mark.parametrize("seed", range(3))
def test_cache_options_reach_the_direct_optimum(options, seed):
    """Plain BMRM with each rule for taking a cache cut: the cvxpy optimum, a gap that
    bounds J − J*, a lower bound below J*, and cache cuts used."""
    from tests.bmrm.solver.test_methods import ranking_problem

    X, y, qid = ranking_problem(seed, n_queries=20, docs=6)
    lam = [1e-3, 1e-2, 1e-1][seed]
    loss = losses.get("ordinal", normalize="none")
    method = PlainBMRM(cut_cache=CutCache(max_fraction=100.0, **options))
    res = bmrm.fit(X, y, loss, qid, lam=lam, tol=1e-6, max_iter=20_000, method=method).result_
    assert res.success, res.message
    J_star, D, n_q = ordinal_direct(X, y, qid, lam)
    J = lam / 2 * res.x @ res.x + np.maximum(0, 1 - D @ res.x).sum() / n_q
    assert J == pytest.approx(res.fun, rel=1e-10)
    assert J - J_star <= res.gap + 1e-8
    assert res.gap <= 1e-6 * abs(res.fun)
    assert res.lower_bound <= J_star + 1e-7
    assert np.all(np.diff(res.history["lower_bound"]) >= 0)
    assert res.n_cache_cuts > 0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fit_intercept", [False, True])
def test_one_pass_query_cut_matches_the_two_pass_one(dtype, fit_intercept):
    """Rows in query order and a loss with a block kernel: the per-query cut in one pass
    over X (forced on small X) equals the one from f = X w and the per-query product."""
    X, y, qid = ranking_data(12, n_queries=60, d=5)
    order = np.argsort(qid, kind="stable")
    X, y, qid = np.ascontiguousarray(X[order], dtype=dtype), y[order], qid[order]
    two = make_oracle("ordinal", {}, X, y, qid, fit_intercept)
    one = make_oracle("ordinal", {}, X, y, qid, fit_intercept)
    one.fused = one._fused_plan(0)
    assert one.fused is not None and two.fused is None
    p = two.n_features
    rng = np.random.default_rng(0)
    for _ in range(5):
        w = rng.normal(size=p)
        out1, out2 = np.full((60, p), np.nan), np.full((60, p), np.nan)
        R1, a1, r1 = one.query_cut(w, out1)
        R2, a2, r2 = two.query_cut(w, out2)
        assert R1 == pytest.approx(R2, rel=1e-12)
        np.testing.assert_allclose(r1, r2, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(out1, out2, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(a1, a2, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(a1, two(w)[1], rtol=1e-10, atol=1e-12)


def test_a_cached_fit_saves_and_loads_with_its_counters(tmp_path):
    X, y, qid = ranking_data(13, n_queries=30)
    model = bmrm.fit(
        X, y, "ordinal", qid, lam=1e-3, tol=1e-5,
        method=PlainBMRM(cut_cache=CutCache(max_fraction=100.0)),
    )  # fmt: skip
    res = model.result_
    assert res.n_cache_cuts > 0
    model.save(tmp_path / "m.npz")
    loaded = bmrm.load(tmp_path / "m.npz").result_
    assert loaded.n_cache_cuts == res.n_cache_cuts and loaded.nfev == res.nfev
    np.testing.assert_array_equal(loaded.history["objective"], res.history["objective"])
    assert np.isinf(res.history["objective"]).sum() == res.n_cache_cuts


@pytest.mark.parametrize("reference", ["gap", "oracle"])
def test_try_cut_threshold_follows_its_reference(reference):
    """A cache cut is taken exactly when it lifts the model at w by more than ``violation``
    times the reference: the gap, or R(w_k) − m(w_k) at the last oracle point w_k."""
    X, y, qid = ranking_data(3, n_queries=30)
    oracle = make_oracle("ordinal", {"normalize": "none"}, X, y, qid)
    rng = np.random.default_rng(4)
    state = bare_state(oracle)
    cache = CutCache(max_points=3, max_fraction=1e6, reference=reference)
    cache.bind(oracle, required=True)
    points = [rng.normal(size=4) for _ in range(3)]
    for w_k in points:
        bundle = state.bundle
        model = max(bundle.A[: bundle.size] @ w_k + bundle.b[: bundle.size])
        R, a = cache.oracle_cut(state, w_k)
        state.bundle.add(a, R - a @ w_k)
        assert cache._eps_est == pytest.approx(max(R - model, 0.0), rel=1e-12, abs=1e-15)
    state.best_J, state.lower_bound = 5.0, 4.0  # gap 1
    w = rng.normal(size=4)
    value = cache.cut(w)[0]
    bundle = state.bundle
    lift = value - max(bundle.A[: bundle.size] @ w + bundle.b[: bundle.size])
    assert lift > 0
    scale = 1.0 if reference == "gap" else cache._eps_est
    for factor, taken in ((1.01, False), (0.99, True)):
        cache.violation = factor * lift / scale
        size = state.bundle.size
        assert cache.try_cut(state, w) is taken
        assert state.bundle.size == size + taken
        assert state.n_cache_cuts == int(taken)


@pytest.mark.parametrize("seed", range(3))
def test_plain_bmrm_uses_the_cache_by_default_where_it_applies(seed):
    """method="bmrm" takes cache cuts by default for a per-query loss whose cache fits the
    memory cap (20 documents per query: 4 planes per query), reaches the cvxpy optimum with a
    gap that bounds J − J*; cut_cache=False is the cache-free fit, to the same optimum."""
    from tests.bmrm.solver.test_methods import ranking_problem

    X, y, qid = ranking_problem(seed, n_queries=12, docs=20)
    lam = [1e-3, 1e-2, 1e-1][seed]
    loss = losses.get("ordinal", normalize="none")
    J_star, D, n_q = ordinal_direct(X, y, qid, lam)
    fits = {
        "default": bmrm.fit(X, y, loss, qid, lam=lam, tol=1e-6, max_iter=20_000, method="bmrm"),
        "object": bmrm.fit(X, y, loss, qid, lam=lam, tol=1e-6, max_iter=20_000,
                           method=PlainBMRM()),
        "off": bmrm.fit(X, y, loss, qid, lam=lam, tol=1e-6, max_iter=20_000,
                        method=PlainBMRM(cut_cache=False)),
    }  # fmt: skip
    for name, model in fits.items():
        res = model.result_
        assert res.success, (name, res.message)
        J = lam / 2 * res.x @ res.x + np.maximum(0, 1 - D @ res.x).sum() / n_q
        assert J == pytest.approx(res.fun, rel=1e-10)
        assert J - J_star <= res.gap + 1e-8
        assert res.gap <= 1e-6 * abs(res.fun)
        assert res.lower_bound <= J_star + 1e-7
        assert (res.n_cache_cuts > 0) == (name != "off"), name
    np.testing.assert_array_equal(fits["default"].result_.x, fits["object"].result_.x)


def test_default_cache_stays_off_where_it_does_not_apply():
    """The default ("auto") is off under the memory cap (6 documents per query leave fewer
    than two planes per query in a quarter of X's bytes) and with the cvxpy master (the L1
    regularizer, or master="cvxpy"): the fits equal the cache-free ones."""
    from tests.bmrm.solver.test_methods import ranking_problem

    loss = losses.get("ordinal", normalize="none")
    X, y, qid = ranking_problem(3, n_queries=12, docs=6)
    cases = [({}, X, y, qid)]
    X, y, qid = ranking_problem(4, n_queries=12, docs=20)
    cases += [({"regularizer": "l1"}, X, y, qid), ({"master": "cvxpy"}, X, y, qid)]
    for options, X, y, qid in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            auto = bmrm.fit(X, y, loss, qid, lam=1e-2, method="bmrm", **options).result_
            off = bmrm.fit(
                X, y, loss, qid, lam=1e-2, method=PlainBMRM(cut_cache=False), **options
            ).result_
        assert auto.n_cache_cuts == 0, options
        assert auto.nit == off.nit, options
        np.testing.assert_array_equal(auto.x, off.x)


@pytest.mark.parametrize("bad", [-1e-3, np.inf, np.nan, "0", True])
def test_plain_bmrm_rejects_a_bad_master_rtol(bad):
    with pytest.raises(ValueError, match="master_rtol must be a finite number >= 0"):
        PlainBMRM(master_rtol=bad)


def test_plain_bmrm_takes_numpy_master_rtol():
    assert PlainBMRM(master_rtol=np.float32(0.25)).master_rtol == 0.25


def test_plain_bmrm_master_accuracy():
    """master_rtol None: the loop's 1e-3, with the cache on or off; a number given is kept,
    and the fit still reaches the direct optimum with a gap that bounds J − J*."""
    from tests.bmrm.solver.test_methods import ranking_problem

    X, y, qid = ranking_problem(5, n_queries=12, docs=20)
    seen = {}

    class Spy(PlainBMRM):
        def step(self, state):
            super().step(state)
            seen.setdefault(self.key, set()).add(state.master_rtol)

    loss = losses.get("ordinal", normalize="none")
    J_star, D, n_q = ordinal_direct(X, y, qid, 1e-2)
    options = {"on": {}, "off": {"cut_cache": False}, "exact": {"master_rtol": 0.0}}
    for key, kwargs in options.items():
        spy = Spy(**kwargs)
        spy.key = key
        res = bmrm.fit(X, y, loss, qid, lam=1e-2, tol=1e-6, method=spy).result_
        assert res.success and (res.n_cache_cuts > 0) == (key != "off")
        J = 0.5e-2 * res.x @ res.x + np.maximum(0, 1 - D @ res.x).sum() / n_q
        assert J - J_star <= res.gap + 1e-8
    assert seen == {"on": {1e-3}, "off": {1e-3}, "exact": {0.0}}

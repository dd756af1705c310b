"""Tests of the Dask backend: ``bmrm.fit(..., backend="dask", client=...)``.

Reference: the local fit on the same data (same solver, one process), which the distributed
fit must reproduce to 1e-8 relative objective, for every built-in loss and a user's loss
object, for NumPy, CSR, dask array and dask DataFrame input, for the latent NDCG and NERU
losses through the concave-convex procedure; and the same fit with a worker process killed
mid-way.
"""

import os
import signal

import numpy as np
import pytest
import scipy.sparse as sp

import bmrm
import losses

distributed = pytest.importorskip("distributed", reason="needs the 'distributed' extra")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

RTOL = 1e-8
# Fits stop within TOL·J of the optimum, so two fits agree to 2·TOL whatever their paths
# (partial sums in another order move the iterates by rounding errors).
TOL = 1e-10


class QueryMeanSquared:
    """A user's loss: per query, Σ_i (f_i − mean(f) − (y_i − mean(y)))², a plain object."""

    pointwise = False
    smooth = True

    def validate(self, y, query_ptr):
        return np.asarray(y, dtype=np.float64), np.asarray(query_ptr)

    def loss_grad(self, f, targets):
        y, ptr = targets
        values = np.zeros(len(ptr) - 1)
        grad = np.zeros_like(f)
        for q in range(len(ptr) - 1):
            rows = slice(ptr[q], ptr[q + 1])
            r = (f[rows] - f[rows].mean()) - (y[rows] - y[rows].mean())
            values[q] = r @ r
            grad[rows] = 2 * r  # r sums to zero, so the centring's term vanishes
        return values, grad


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def ranking_data(seed, n_queries=40, d=6, shuffled=True):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 12, n_queries)  # one-document queries included
    qid = np.repeat(rng.permutation(n_queries) * 3 + 7, sizes)
    n = len(qid)
    X = rng.standard_normal((n, d))
    y = np.clip(np.round(X[:, 0] + rng.standard_normal(n)), 0, 3).astype(int)
    y[qid == qid[0]] = 1  # an all-equal-label query
    if shuffled:
        order = rng.permutation(n)  # queries not contiguous: the backend must group them
        X, y, qid = X[order], y[order], qid[order]
    return X, y, qid


def targets_for(name, y):
    return np.where(y > 1, 1, -1) if name in ("hinge", "logistic") else y


def assert_same_fit(local, remote, w_atol=1e-12):
    """Objectives equal to RTOL; weights as close as λ-strong convexity allows.

    Both fits stop within their gaps of the optimum J*, and J(w) − J* ≥ (λ/2)‖w − w*‖², so
    ‖w_local − w_remote‖ ≤ Σ √(2·gap/λ), plus ``w_atol`` for float32 data, whose products
    (w rounded to float32) certify the gap only to float32 precision.
    """
    assert remote.result_.fun == pytest.approx(local.result_.fun, rel=RTOL, abs=0)
    w_local = np.r_[local.coef_, local.intercept_]
    w_remote = np.r_[remote.coef_, remote.intercept_]
    radius = sum(np.sqrt(2 * max(_certified_gap(r.result_), 0.0) / r.lam) for r in (local, remote))
    assert np.linalg.norm(w_local - w_remote) <= radius + w_atol


def _certified_gap(result) -> float:
    """The gap of a certified fit; for the concave-convex procedure (no certificate of its
    own), the certified gap of its last convex subproblem, whose optimum both fits near."""
    if np.isfinite(result.lower_bound):
        return result.gap
    return float(result.history["inner_gap"][-1])


def convex_losses():
    """Every built-in convex loss (preference has its own test); the latent NDCG and NERU
    losses are not convex, so their convex tie rule stands in for them."""
    out = []
    for name in losses.available():
        loss = losses.get(name)
        if name == "preference":
            continue
        if getattr(loss, "latent", False):
            out.append((name, {"ties": "increasing"}))
        elif loss.convex:
            out.append((name, {}))
    return out


@pytest.mark.parametrize("name, params", convex_losses())
@pytest.mark.parametrize("fit_intercept", [False, True])
def test_numpy_input_matches_local_fit(client, name, params, fit_intercept):
    X, y, qid = ranking_data(1)
    y = targets_for(name, y)
    kw = dict(lam=1e-2, tol=TOL, fit_intercept=fit_intercept, loss_params=params)
    local = bmrm.fit(X, y, name, qid, **kw)
    remote = bmrm.fit(X, y, name, qid, backend="dask", client=client, **kw)
    assert_same_fit(local, remote)


def test_preference_pairs_and_costs_travel_with_their_partition(client):
    X, y, qid = ranking_data(2)
    pairs, _ = losses.pairs_from_labels(y, qid)
    costs = np.random.default_rng(0).uniform(0.5, 2.0, len(pairs))
    kw = dict(lam=1e-2, tol=TOL, pairs=pairs, pair_costs=costs)
    local = bmrm.fit(X, y, "preference", qid, **kw)
    remote = bmrm.fit(X, y, "preference", qid, backend="dask", client=client, **kw)
    assert_same_fit(local, remote)


def test_user_loss_object(client):
    X, y, qid = ranking_data(3)
    loss = QueryMeanSquared()
    local = bmrm.fit(X, y, loss, qid, lam=1e-2, tol=TOL)
    remote = bmrm.fit(X, y, loss, qid, lam=1e-2, tol=TOL, backend="dask", client=client)
    assert_same_fit(local, remote)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_csr_and_float32_input(client, dtype):
    X, y, qid = ranking_data(4)
    X[np.abs(X) < 0.7] = 0.0
    X = sp.csr_matrix(X.astype(dtype))
    local = bmrm.fit(X, y, "ordinal", qid, lam=1e-2, tol=TOL)
    remote = bmrm.fit(X, y, "ordinal", qid, lam=1e-2, tol=TOL, backend="dask", client=client)
    assert_same_fit(local, remote, w_atol=1e-5 if dtype == np.float32 else 1e-12)


def test_pointwise_without_qid(client):
    X, y, _ = ranking_data(5)
    y = X @ np.arange(X.shape[1]) + 0.1
    local = bmrm.fit(X, y, "squared", lam=1e-2, tol=TOL)
    remote = bmrm.fit(X, y, "squared", lam=1e-2, tol=TOL, backend="dask", client=client)
    assert_same_fit(local, remote)


def query_chunks(qid, n_chunks):
    """Row chunk sizes of sorted rows that end at query boundaries."""
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
    cuts = starts[np.linspace(0, len(starts), n_chunks + 1).astype(int)[1:-1]]
    return tuple(np.diff(np.r_[0, cuts, len(qid)]).tolist())


def test_dask_array_input(client):
    X, y, qid = ranking_data(6, shuffled=False)
    chunks = query_chunks(qid, 3)
    Xd = da.from_array(X, chunks=(chunks, 2))  # column chunks are joined
    yd = da.from_array(y, chunks=(chunks,))
    kw = dict(lam=1e-2, tol=TOL, loss_params={"ties": "increasing"})
    local = bmrm.fit(X, y, "ndcg", qid, **kw)
    remote = bmrm.fit(Xd, yd, "ndcg", qid, backend="dask", client=client, **kw)
    assert_same_fit(local, remote)


@pytest.fixture(scope="module")
def three_workers():
    with (
        distributed.LocalCluster(
            n_workers=3, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def distinct_labels(qid, seed):
    """Labels 0..m−1 in random order within each query: no two documents share a gain."""
    rng = np.random.default_rng(seed)
    y = np.empty(len(qid), dtype=int)
    for q in np.unique(qid):
        rows = np.flatnonzero(qid == q)
        y[rows] = rng.permutation(len(rows))
    return y


@pytest.mark.parametrize(
    ("name", "params"),
    [("ndcg", {"k": 5}), ("neru", None), ("ndcg", {"k": 5, "pairwise": 0.5})],
    ids=["ndcg", "neru", "ndcg-pairwise"],
)
def test_latent_losses_by_the_concave_convex_procedure_match_local_fit(
    three_workers, name, params
):
    """The latent NDCG and NERU losses through ``bmrm.fit``: every partition fixes the
    latent part of its own queries, and the procedure ends where the local one does.

    Where two documents of equal gain end at equal scores, the latent choice (which goes
    first) jumps with the rounding of the scores, so two exact runs may continue differently
    (both correctly); such ties are common at the kinks of these piecewise-linear
    objectives. With distinct labels in every query the choice is unique, so the runs must
    agree (the next test compares the oracles themselves on data with equal labels).

    The early steps' subproblems are solved loosely (the procedure's adaptive inner
    tolerance), so the steps in between may differ by rounding-sized decisions; the end
    point is compared. The pairwise hinge added to the NDCG loss (``pairwise``) travels
    with each partition's targets and surrogates."""
    X, _, qid = ranking_data(13)
    y = distinct_labels(qid, 13)
    kw = dict(lam=1e-2, tol=TOL, loss_params=params)
    local = bmrm.fit(X, y, name, qid, **kw)
    remote = bmrm.fit(X, y, name, qid, backend="dask", client=three_workers, **kw)
    assert local.result_.n_outer >= 1 and remote.result_.n_outer >= 1
    assert local.result_.outer_converged and remote.result_.outer_converged
    assert remote.result_.fun == pytest.approx(local.result_.fun, rel=RTOL, abs=0)
    assert_same_fit(local, remote)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "query weights"])
@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_concave_convex_steps_on_dask_match_local_steps(three_workers, name, weighted):
    """The procedure's oracles, partition by partition, on data with equal labels: the
    latent loss, its starting loss and the surrogates fixed at the same w give the local R
    and subgradient, with query weights too (each partition sums its weighted terms and
    their weights)."""
    from bmrm.distributed import DaskRiskOracle
    from bmrm.solver.oracle import RiskOracle

    X, y, qid = ranking_data(12)
    s = query_weights(qid, 12) if weighted else None
    loss = losses.get(name)
    local = RiskOracle(X, losses.prepare(loss, y, qid, sample_weight=s))
    remote = DaskRiskOracle(three_workers, X, y, loss, qid, sample_weight=s)
    if weighted:
        assert remote.n_terms == s[np.unique(qid, return_index=True)[1]].sum()
    rng = np.random.default_rng(0)
    for _ in range(3):
        w, v = rng.standard_normal((2, X.shape[1]))
        for a, b in ((local, remote), (local.initial(), remote.initial()),
                     (local.convexified(w), remote.convexified(w))):  # fmt: skip
            (R_a, g_a), (R_b, g_b) = a(v), b(v)
            assert R_b == pytest.approx(R_a, rel=1e-13)
            np.testing.assert_allclose(g_b, g_a, rtol=0, atol=1e-13 * np.abs(g_a).max())


@pytest.mark.parametrize("loss", ["cosine", "warp"])
def test_non_convex_losses_are_refused_before_any_work(client, loss):
    X, y, qid = ranking_data(1)
    tasks = sum(len(v) for v in client.run(lambda dask_worker: dask_worker.state.log).values())
    with pytest.raises(ValueError, match="backend='dask' fits convex losses and latent ones"):
        bmrm.fit(X, y, loss, qid, backend="dask", client=client)
    # nothing was sent to the workers
    after = sum(len(v) for v in client.run(lambda dask_worker: dask_worker.state.log).values())
    assert after == tasks


def test_dask_array_splitting_a_query_is_an_error(client):
    X, y, qid = ranking_data(7, shuffled=False)
    split = int(np.flatnonzero(qid[1:] == qid[:-1])[0])  # a chunk ends inside this query
    Xd = da.from_array(X, chunks=((split + 1, len(y) - split - 1), -1))
    with pytest.raises(ValueError, match=rf"query {qid[split]} has rows in partitions 0 and 1"):
        bmrm.fit(Xd, y, "ordinal", qid, backend="dask", client=client)


def test_dask_dataframe_is_repartitioned_by_qid(client):
    X, y, qid = ranking_data(8)  # rows shuffled: every partition cuts queries
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    frame["label"], frame["query"] = y, qid
    ddf = dd.from_pandas(frame, npartitions=4)
    local = bmrm.fit(X, y, "ordinal", qid, lam=1e-2, tol=TOL)
    remote = bmrm.fit(
        ddf, "label", "ordinal", "query", lam=1e-2, tol=TOL, backend="dask", client=client
    )
    assert_same_fit(local, remote)
    # y and qid as Series of the same frame
    features = ddf[[f"x{j}" for j in range(X.shape[1])]]
    remote = bmrm.fit(
        features, ddf["label"], "ordinal", ddf["query"], lam=1e-2, tol=TOL,
        backend="dask", client=client,
    )  # fmt: skip
    assert_same_fit(local, remote)


def test_parquet_files_cutting_a_query_are_repartitioned_by_qid(client, tmp_path):
    """Two parquet files cut through a query. Read alone, their qid column is one partition
    (read_parquet joins files when few columns are read), in which no query is cut; the
    query ids must be those of the partitions fitted, which are the two files."""
    from bmrm.distributed import DaskRiskOracle

    X, y, qid = ranking_data(12, shuffled=False)
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    frame["label"], frame["query"] = y, qid
    cut = len(qid) // 2
    while qid[cut - 1] != qid[cut]:
        cut += 1
    frame.iloc[:cut].to_parquet(tmp_path / "part0.parquet")
    frame.iloc[cut:].to_parquet(tmp_path / "part1.parquet")
    ddf = dd.read_parquet(str(tmp_path / "*.parquet"))
    local = bmrm.fit(X, y, "ordinal", qid, lam=1e-2, tol=TOL)
    remote = bmrm.fit(
        ddf, "label", "ordinal", "query", lam=1e-2, tol=TOL, backend="dask", client=client
    )
    assert_same_fit(local, remote)
    # files of whole queries are the partitions, as they are (no shuffle)
    start = cut
    while qid[start - 1] == qid[start]:
        start -= 1  # the first row of the query that the cut splits
    frame.iloc[:start].to_parquet(tmp_path / "part0.parquet")
    frame.iloc[start:].to_parquet(tmp_path / "part1.parquet")
    ddf = dd.read_parquet(str(tmp_path / "*.parquet"))
    oracle = DaskRiskOracle(client, ddf, "label", losses.get("ordinal"), "query")
    assert oracle.rows == [start, len(qid) - start]
    oracle.close()
    remote = bmrm.fit(
        ddf, "label", "ordinal", "query", lam=1e-2, tol=TOL, backend="dask", client=client
    )
    assert_same_fit(local, remote)


def test_default_client_is_used(client):
    """client=None: Dask's default client, here a second client of the module's cluster,
    the default inside its with-block (other clients of the module may be alive)."""
    X, y, qid = ranking_data(13)
    with distributed.Client(client.scheduler.address) as default:
        assert distributed.default_client() is default
        given = bmrm.fit(X, y, "ordinal", qid, lam=1e-2, tol=TOL, backend="dask", client=default)
        model = bmrm.fit(X, y, "ordinal", qid, lam=1e-2, tol=TOL, backend="dask")
    np.testing.assert_array_equal(model.coef_, given.coef_)
    assert model.result_.fun == given.result_.fun
    assert_same_fit(bmrm.fit(X, y, "ordinal", qid, lam=1e-2, tol=TOL), model)


def test_result_does_not_depend_on_scheduling(client):
    X, y, qid = ranking_data(9)
    fits = [
        bmrm.fit(X, y, "ordinal", qid, lam=1e-2, tol=TOL, backend="dask", client=client)
        for _ in range(2)
    ]
    np.testing.assert_array_equal(fits[0].coef_, fits[1].coef_)
    assert fits[0].result_.fun == fits[1].result_.fun


def test_bad_arguments(client):
    X, y, qid = ranking_data(10)
    with pytest.raises(ValueError, match="backend must be 'local' or 'dask'"):
        bmrm.fit(X, y, "ordinal", qid, backend="spark")
    y_bad = y.astype(float)
    y_bad[3] = np.nan
    with pytest.raises(ValueError, match="y must not contain NaN"):
        bmrm.fit(X, y_bad, "ordinal", qid, backend="dask", client=client)
    with pytest.raises(ValueError, match="pairs holds row indices outside"):
        bmrm.fit(
            X, y, "preference", qid, backend="dask", client=client, pairs=np.array([[0, 10**6]])
        )
    Xd = da.from_array(X, chunks=(50, -1))
    with pytest.raises(ValueError, match="loss data keywords .* need in-memory X"):
        bmrm.fit(Xd, y, "preference", qid, backend="dask", client=client, pairs=[[0, 1]])
    with pytest.raises(ValueError, match="qid=None makes all rows one query"):
        bmrm.fit(Xd, y, "ordinal", backend="dask", client=client)


def test_worker_killed_mid_fit_is_replaced(tmp_path):
    """A worker process killed during the fit: Dask restarts it, rebuilds its partitions and
    the fit ends where the local fit does."""
    X, y, qid = ranking_data(11, n_queries=120)
    kw = dict(lam=1e-3, tol=TOL)
    local = bmrm.fit(X, y, "ordinal", qid, **kw)
    killed = []

    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as c,
    ):

        def kill_one(result):
            if result.nit == 3 and not killed:
                pid = next(iter(c.run(os.getpid).values()))
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

        # first without failure (after it, the replacement worker may not have joined yet, and
        # in-memory input is cut into one partition per worker thread present)
        undisturbed = bmrm.fit(X, y, "ordinal", qid, backend="dask", client=c, **kw)
        remote = bmrm.fit(X, y, "ordinal", qid, backend="dask", client=c, callback=kill_one, **kw)
        pids = set(c.run(os.getpid).values())
    assert killed and killed[0] not in pids  # the worker was replaced
    assert_same_fit(local, remote)
    # the rebuilt partitions, wherever they went and however the tasks were regrouped, give
    # the same sums in the same order as a fit without failure
    np.testing.assert_array_equal(remote.coef_, undisturbed.coef_)
    assert remote.result_.fun == undisturbed.result_.fun
    assert remote.result_.nit == undisturbed.result_.nit


def risk_task_workers(stream) -> list[str]:
    """The workers that ran the risk tasks recorded by ``distributed.get_task_stream``."""
    return [t["worker"] for t in stream.data if str(t["key"]).startswith("_group_risk")]


@pytest.mark.parametrize("seed", range(4))
def test_one_risk_task_per_worker_thread_same_sums_as_per_partition_and_local(three_workers, seed):
    """Grouping by worker: each call runs one risk task per worker (one thread each), on the
    worker holding its partitions (none moves), and gives bit for bit the sums of one task
    per partition, and the local oracle's to rounding, on random problems with
    one-document queries, ties and an all-equal-label query."""
    from bmrm.distributed import DaskRiskOracle
    from bmrm.solver.oracle import RiskOracle

    c = three_workers
    X, y, qid = ranking_data(20 + seed, n_queries=60, shuffled=False)
    name = ["ordinal", "ndcg", "ranknet", "listnet"][seed]
    loss = losses.get(name, ties="increasing") if name == "ndcg" else losses.get(name)
    chunks = query_chunks(qid, 8)
    Xd = da.from_array(X, chunks=(chunks, -1))
    yd = da.from_array(y, chunks=(chunks,))
    qd = da.from_array(qid, chunks=(chunks,))
    grouped = DaskRiskOracle(c, Xd, yd, loss, qd, fit_intercept=seed % 2 == 1)
    single = DaskRiskOracle(c, Xd, yd, loss, qd, fit_intercept=seed % 2 == 1)
    single.group_tasks = False
    local = RiskOracle(X, losses.prepare(loss, y, qid), fit_intercept=seed % 2 == 1)
    assert len(grouped.partitions) == 8
    held = c.who_has(grouped.partitions)
    rng = np.random.default_rng(seed)
    for _ in range(3):
        w = rng.standard_normal(grouped.n_features)
        with distributed.get_task_stream(client=c) as stream:
            R_g, a_g = grouped(w)
        ran_on = risk_task_workers(stream)
        R_s, a_s = single(w)
        R_l, a_l = local(w)
        assert R_g == R_s
        np.testing.assert_array_equal(a_g, a_s)
        assert R_g == pytest.approx(R_l, rel=1e-13)
        np.testing.assert_allclose(a_g, a_l, rtol=0, atol=1e-13 * np.abs(a_l).max())
        holders = {addrs[0] for addrs in held.values()}
        assert sorted(ran_on) == sorted(holders)  # one task per worker holding partitions
    assert grouped.calls == 3 and grouped.tasks == 3 * len(holders)
    assert single.tasks == 3 * 8
    # every group's partitions are held by its worker, and no partition was copied
    assert c.who_has(grouped.partitions) == held
    for address, indices in grouped.groups:
        assert {held[grouped.partitions[i].key][0] for i in indices} == {address}


def test_two_threads_per_worker_give_two_balanced_tasks():
    from bmrm.distributed import DaskRiskOracle

    X, y, qid = ranking_data(30, n_queries=80, shuffled=False)
    chunks = query_chunks(qid, 6)
    loss = losses.get("ordinal")
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        Xd = da.from_array(X, chunks=(chunks, -1))
        oracle = DaskRiskOracle(c, Xd, y, loss, qid)
        R, a = oracle(np.ones(X.shape[1]))
        assert oracle.tasks == 2
        indices = sorted(i for _, group in oracle.groups for i in group)
        assert indices == list(range(6))
        loads = [sum(oracle.rows[i] for i in group) for _, group in oracle.groups]
        assert max(loads) - min(loads) <= max(oracle.rows)
    from bmrm.solver.oracle import RiskOracle

    R_l, a_l = RiskOracle(X, losses.prepare(loss, y, qid))(np.ones(X.shape[1]))
    assert R == pytest.approx(R_l, rel=1e-13)
    np.testing.assert_allclose(a, a_l, rtol=0, atol=1e-13 * np.abs(a_l).max())


def test_stale_groups_give_the_same_sums_and_are_remade(three_workers):
    """Groups that no longer match where the partitions are (a group straddling workers, a
    group on a worker that has gone) still give the same sums, and a task that ran
    elsewhere than its group's worker makes the oracle ask where the partitions are."""
    from bmrm.distributed import DaskRiskOracle

    c = three_workers
    X, y, qid = ranking_data(31, n_queries=60, shuffled=False)
    chunks = query_chunks(qid, 6)
    Xd = da.from_array(X, chunks=(chunks, -1))
    oracle = DaskRiskOracle(c, Xd, y, losses.get("ordinal"), qid)
    w = np.random.default_rng(0).standard_normal(X.shape[1])
    R, a = oracle(w)
    workers = sorted(c.nthreads())
    # partitions 0..2 pinned to a worker that holds at most some of them; 3..5 to one that
    # does not exist (the restriction is loose, so they run where Dask decides)
    oracle.groups = [(workers[0], [0, 1, 2]), ("tcp://127.0.0.1:9", [3, 4, 5])]
    R_stale, a_stale = oracle(w)
    assert R_stale == R
    np.testing.assert_array_equal(a_stale, a)
    assert oracle.groups is None  # to be remade at the next call
    R_new, a_new = oracle(w)
    assert R_new == R
    np.testing.assert_array_equal(a_new, a)
    assert sorted(i for _, group in oracle.groups for i in group) == list(range(6))
    assert {address for address, _ in oracle.groups} <= set(workers)


def test_numpy_input_puts_one_partition_on_each_worker_thread(three_workers):
    from bmrm.distributed import DaskRiskOracle

    X, y, qid = ranking_data(32, n_queries=90)
    oracle = DaskRiskOracle(three_workers, X, y, losses.get("ordinal"), qid)
    oracle(np.zeros(X.shape[1]))
    assert len(oracle.partitions) == 3 and oracle.tasks == 3
    held = three_workers.who_has(oracle.partitions)
    assert sorted(addrs[0] for addrs in held.values()) == sorted(three_workers.nthreads())
    assert sorted(len(group) for _, group in oracle.groups) == [1, 1, 1]


def test_oracle_regroups_after_a_worker_is_killed():
    """A worker process killed between two calls: the next call still gives bit for bit the
    same sums (Dask rebuilds the lost partitions elsewhere), finds that its group ran
    elsewhere, and the call after asks where the partitions now are: only live workers."""
    from bmrm.distributed import DaskRiskOracle

    X, y, qid = ranking_data(33, n_queries=120, shuffled=False)
    chunks = query_chunks(qid, 6)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        Xd = da.from_array(X, chunks=(chunks, -1))
        oracle = DaskRiskOracle(c, Xd, y, losses.get("ordinal"), qid)
        w = np.random.default_rng(1).standard_normal(X.shape[1])
        R, a = oracle(w)
        victim = oracle.groups[0][0]
        os.kill(c.run(os.getpid)[victim], signal.SIGKILL)
        R_after, a_after = oracle(w)
        assert oracle.groups is None
        R_again, a_again = oracle(w)
        alive = set(c.nthreads())
        assert {address for address, _ in oracle.groups} <= alive - {victim}
        assert sorted(i for _, group in oracle.groups for i in group) == list(range(6))
    assert R_after == R and R_again == R
    np.testing.assert_array_equal(a_after, a)
    np.testing.assert_array_equal(a_again, a)


@pytest.mark.parametrize("loss", ["ndcg", "neru", "ordinal", "squared"])
def test_a_partition_reports_every_array_it_keeps(loss):
    """A partition's size (what Dask's scheduler and workers account) is X plus each distinct
    array of its prepared loss: the targets, with the NDCG / NERU store of assignment duals,
    and the query structure. y and qid themselves are not kept."""
    from bmrm.distributed import _build_partition

    rng = np.random.default_rng(0)
    sizes = [1, 3, 7, 10, 15, 40]  # NDCG@10: queries of 2 to 10 documents keep duals
    qid = np.repeat(np.arange(len(sizes)), sizes)[rng.permutation(sum(sizes))]
    X = rng.normal(size=(qid.size, 5))
    y = rng.integers(0, 3, size=qid.size).astype(float)
    part = _build_partition(X, y, qid, losses.get(loss), False, 1.0)
    prepared = part.oracle.prepared
    targets, groups = prepared.targets, prepared.groups
    fields = list(targets) if isinstance(targets, tuple) else [targets]
    arrays = [a for a in [*fields, groups.query_ptr, groups.order, groups.qids] if a is not None]
    distinct = {id(a): a for a in arrays if isinstance(a, np.ndarray)}
    assert part.nbytes == X.nbytes + sum(a.nbytes for a in distinct.values())
    assert part.__sizeof__() == part.nbytes
    if loss in ("ndcg", "neru"):
        assert targets.duals is not None and targets.duals.size == X.shape[0]
        assert part.nbytes >= X.nbytes + targets.duals.nbytes + targets.level.nbytes


def query_weights(qid, seed):
    """Integer weights 0..3 per query (equal within it), one query of weight 0 at least."""
    rng = np.random.default_rng(seed)
    ids = np.unique(qid)
    weight = dict(zip(ids.tolist(), rng.integers(0, 4, len(ids)).tolist(), strict=True))
    weight[ids[0].item()], weight[ids[1].item()] = 0, 2
    return np.array([weight[q] for q in qid.tolist()], dtype=np.float64)


@pytest.mark.parametrize(
    "name, params", [("ordinal", {}), ("squared", {}), ("ndcg", {"ties": "pairs", "k": 5})]
)
def test_sample_weight_matches_local_weighted_fit(client, name, params):
    """In-memory, dask array and dask DataFrame input (weights as an array, a Series and a
    column name): each partition sums its weighted terms and their weights, and the fit
    equals the local weighted one. The queries of weight 0 include whole partitions'
    worth of rows in the array case (a partition may weigh nothing)."""
    X, y, qid = ranking_data(21, shuffled=False)
    s = query_weights(qid, 21)
    chunks = query_chunks(qid, 4)
    s[: chunks[0]] = 0.0  # the first chunk weighs nothing
    kw = dict(lam=1e-2, tol=TOL, loss_params=params)
    local = bmrm.fit(X, y, name, qid, sample_weight=s, **kw)
    unweighted = bmrm.fit(X, y, name, qid, **kw)
    assert abs(local.result_.fun - unweighted.result_.fun) > 1e-3  # the weights matter
    remote = bmrm.fit(X, y, name, qid, backend="dask", client=client, sample_weight=s, **kw)
    assert_same_fit(local, remote)
    Xd = da.from_array(X, chunks=(chunks, -1))
    yd, sd = (da.from_array(v, chunks=(chunks,)) for v in (y, s))
    remote = bmrm.fit(Xd, yd, name, qid, backend="dask", client=client, sample_weight=sd, **kw)
    assert_same_fit(local, remote)
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    frame["label"], frame["query"], frame["weight"] = y, qid, s
    ddf = dd.from_pandas(frame.sample(frac=1.0, random_state=0), npartitions=3)
    remote = bmrm.fit(
        ddf, "label", name, "query", backend="dask", client=client, sample_weight="weight", **kw
    )
    assert_same_fit(local, remote)
    features = ddf[[f"x{j}" for j in range(X.shape[1])]]
    remote = bmrm.fit(
        features, ddf["label"], name, ddf["query"], backend="dask", client=client,
        sample_weight=ddf["weight"], **kw,
    )  # fmt: skip
    assert_same_fit(local, remote)


def test_sample_weight_errors_on_dask(client):
    X, y, qid = ranking_data(23, shuffled=False)
    s = query_weights(qid, 23)
    uneven = s.copy()
    ids, sizes = np.unique(qid, return_counts=True)
    big = ids[np.argmax(sizes)]  # a query of several rows
    rows = np.flatnonzero(qid == big)
    uneven[rows] = np.arange(len(rows)) + 1.0
    with pytest.raises(ValueError, match=rf"equal within each query .* query {big}"):
        bmrm.fit(X, y, "ordinal", qid, backend="dask", client=client, sample_weight=uneven)
    chunks = query_chunks(qid, 3)
    Xd = da.from_array(X, chunks=(chunks, -1))
    zeros = da.zeros(len(y), chunks=(chunks,))
    with pytest.raises(ValueError, match="sample_weight is all zero"):
        bmrm.fit(Xd, y, "ordinal", qid, backend="dask", client=client, sample_weight=zeros)
    negative = da.from_array(-s, chunks=(chunks,))
    message = r"sample_weight must be non-negative; got -\d+\.0 in a partition's rows$"
    with pytest.raises(ValueError, match=message):
        bmrm.fit(Xd, y, "ordinal", qid, backend="dask", client=client, sample_weight=negative)


def test_estimators_take_sample_weight_on_dask(client):
    from bmrm.estimators import BMRMClassifier, BMRMRanker

    X, y, qid = ranking_data(24, shuffled=False)
    s = query_weights(qid, 24)
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    frame["label"], frame["query"], frame["weight"] = y, qid, s
    ddf = dd.from_pandas(frame, npartitions=2)
    kw = dict(loss="ordinal", lam=1e-2, tol=TOL)
    local = BMRMRanker(**kw).fit(X, y, qid, sample_weight=s)
    remote = BMRMRanker(**kw, backend="dask", client=client).fit(
        ddf, "label", "query", sample_weight="weight"
    )
    assert list(remote.feature_names_in_) == [f"x{j}" for j in range(X.shape[1])]
    assert remote.result_.fun == pytest.approx(local.result_.fun, rel=RTOL)
    # score takes the weights as fit does, by column name
    assert remote.score(ddf, "label", "query", sample_weight="weight") == pytest.approx(
        remote.score(X, y, qid, sample_weight=s), rel=1e-12
    )
    labels = np.where(y > 1, "hi", "lo")
    frame["label"] = labels
    ddf = dd.from_pandas(frame.drop(columns=["query"]), npartitions=2)
    local = BMRMClassifier(lam=1e-2, tol=TOL).fit(X, labels, sample_weight=s)
    remote = BMRMClassifier(lam=1e-2, tol=TOL, backend="dask", client=client).fit(
        ddf, "label", sample_weight="weight"
    )
    assert remote.result_.fun == pytest.approx(local.result_.fun, rel=RTOL)
    frame["weight"] = np.where(labels == "hi", 0.0, 1.0)
    ddf = dd.from_pandas(frame.drop(columns=["query"]), npartitions=2)
    with pytest.raises(ValueError, match=r"^sample_weight gives class 'hi' no positive"):
        BMRMClassifier(backend="dask", client=client).fit(ddf, "label", sample_weight="weight")


def test_ordinal_row_weights_travel_with_their_rows(client):
    """The ordinal loss's per-row weights (``row_weight``, pairs weighing s_i s_j) follow
    the rows when in-memory input is sorted by qid and cut into partitions."""
    X, y, qid = ranking_data(25)  # shuffled: the rows are reordered before the cut
    s = np.random.default_rng(25).exponential(size=len(y)) ** 3
    kw = dict(lam=1e-2, tol=TOL)
    local = bmrm.fit(X, y, "ordinal", qid, row_weight=s, **kw)
    unweighted = bmrm.fit(X, y, "ordinal", qid, **kw)
    assert abs(local.result_.fun - unweighted.result_.fun) > 1e-3
    remote = bmrm.fit(X, y, "ordinal", qid, backend="dask", client=client, row_weight=s, **kw)
    assert_same_fit(local, remote)


def test_class_weight_on_dask_matches_local(client):
    """class_weight on a dask DataFrame: "balanced" from counts computed on the workers, a
    dict mapped over the label column, both multiplied into the weight column."""
    from bmrm.estimators import BMRMClassifier

    X, y, qid = ranking_data(26, shuffled=False)
    labels = np.where(y > 1, "hi", "lo")
    s = np.random.default_rng(26).integers(1, 4, len(y)).astype(np.float64)
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    frame["label"], frame["weight"] = labels, s
    ddf = dd.from_pandas(frame, npartitions=3)
    for spec in ("balanced", {"hi": 2.5}):
        kw = dict(lam=1e-2, tol=TOL, class_weight=spec)
        local = BMRMClassifier(**kw).fit(X, labels, sample_weight=s)
        remote = BMRMClassifier(**kw, backend="dask", client=client).fit(
            ddf, "label", sample_weight="weight"
        )
        assert remote.result_.fun == pytest.approx(local.result_.fun, rel=RTOL)
        unweighted = BMRMClassifier(lam=1e-2, tol=TOL).fit(X, labels, sample_weight=s)
        assert abs(unweighted.result_.fun - local.result_.fun) > 1e-4


def frame_of(X, y, qid, qid_values=None):
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    frame["label"] = y
    frame["query"] = qid if qid_values is None else qid_values
    return frame


@pytest.mark.parametrize(
    "kind", ["string qid", "categorical qid", "nullable Int64 qid", "nullable Float64 features"]
)
def test_pandas_extension_dtypes_fit_as_locally(client, kind):
    X, y, qid = ranking_data(14)
    frame = frame_of(X, y, qid)
    if kind == "string qid":
        frame["query"] = pd.array([f"q{q:04d}" for q in qid], dtype="string")
    elif kind == "categorical qid":
        frame["query"] = pd.Categorical(qid)
    elif kind == "nullable Int64 qid":
        frame["query"] = pd.array(qid, dtype="Int64")
    else:
        for j in range(X.shape[1]):
            frame[f"x{j}"] = pd.array(X[:, j], dtype="Float64")
    local = bmrm.fit(X, y, "ordinal", qid, lam=1e-2, tol=TOL)
    for npartitions in (1, 3):  # 3: partitions cut queries, so the frame is shuffled
        ddf = dd.from_pandas(frame, npartitions=npartitions)
        remote = bmrm.fit(
            ddf, "label", "ordinal", "query", lam=1e-2, tol=TOL, backend="dask", client=client
        )
        assert_same_fit(local, remote)
        np.testing.assert_array_equal(remote.feature_names_in_, [f"x{j}" for j in range(6)])


def test_a_string_feature_column_is_refused_by_name(client):
    X, y, qid = ranking_data(14)
    frame = frame_of(X, y, qid)
    frame["doc"] = [str(q) for q in qid]  # digits, which a float conversion would accept
    ddf = dd.from_pandas(frame, npartitions=2)
    with pytest.raises(ValueError, match="X must be numeric; column 'doc' has dtype"):
        bmrm.fit(ddf, "label", "ordinal", "query", backend="dask", client=client)
    with pytest.raises(ValueError, match="X must be numeric; column 'doc' has dtype"):
        bmrm.fit(frame.drop(columns=["label", "query"]), y, "ordinal", qid)


def test_empty_partitions_are_left_out(client):
    X, y, qid = ranking_data(15, shuffled=False)
    local = bmrm.fit(X, y, "ordinal", qid, lam=1e-2, tol=TOL)
    cut = int(np.flatnonzero(qid[1:] != qid[:-1])[len(np.unique(qid)) // 2]) + 1
    Xd = da.from_array(X, chunks=((cut, 0, len(y) - cut), -1))  # an empty chunk
    remote = bmrm.fit(Xd, y, "ordinal", qid, lam=1e-2, tol=TOL, backend="dask", client=client)
    assert_same_fit(local, remote)
    # a filter that empties a partition
    frame = frame_of(X, y, qid)
    frame["keep"] = 1
    frame.loc[cut : 2 * cut, "keep"] = 0
    ddf = dd.from_pandas(frame, npartitions=3)
    kept = frame["keep"].to_numpy() == 1
    filtered = ddf[ddf["keep"] == 1].drop(columns=["keep"])
    assert 0 in filtered.map_partitions(len).compute().tolist()
    remote = bmrm.fit(
        filtered, "label", "ordinal", "query", lam=1e-2, tol=TOL, backend="dask", client=client
    )
    assert_same_fit(bmrm.fit(X[kept], y[kept], "ordinal", qid[kept], lam=1e-2, tol=TOL), remote)
    # three queries over four partitions, rows shuffled: the shuffle by qid leaves some empty
    three = np.isin(qid, np.unique(qid)[:3])
    order = np.random.default_rng(0).permutation(int(three.sum()))
    X3, y3, q3 = X[three][order], y[three][order], qid[three][order]
    ddf = dd.from_pandas(frame_of(X3, y3, q3), npartitions=4)
    remote = bmrm.fit(
        ddf, "label", "ordinal", "query", lam=1e-2, tol=TOL, backend="dask", client=client
    )
    assert_same_fit(bmrm.fit(X3, y3, "ordinal", q3, lam=1e-2, tol=TOL), remote)


def test_string_qids_cut_by_chunks_are_refused_by_name(client):
    X, y, qid = ranking_data(7, shuffled=False)
    split = int(np.flatnonzero(qid[1:] == qid[:-1])[0])
    names = np.array([f"q{q}" for q in qid], dtype=object)
    Xd = da.from_array(X, chunks=((split + 1, len(y) - split - 1), -1))
    with pytest.raises(ValueError, match=rf"query 'q{qid[split]}' has rows in partitions 0 and 1"):
        bmrm.fit(Xd, y, "ordinal", names, backend="dask", client=client)


def test_dask_array_arguments_of_the_wrong_length_are_named(client):
    X, y, qid = ranking_data(16)
    Xd = da.from_array(X, chunks=(50, -1))
    n = len(y)
    for name, args in (
        ("y", (y[:-1], qid, None)),
        ("qid", (y, qid[:-1], None)),
        ("sample_weight", (y, qid, np.ones(n - 1))),
    ):
        yy, qq, ww = args
        with pytest.raises(
            ValueError, match=rf"^{name} must be 1-d with one entry per row of X \({n}\); got "
        ):
            bmrm.fit(Xd, yy, "ordinal", qq, sample_weight=ww, backend="dask", client=client)
    unknown = Xd[da.from_array(np.ones(n, dtype=bool), chunks=50)]
    with pytest.raises(ValueError, match=r"row chunk sizes are unknown \(nan\): call"):
        bmrm.fit(unknown, y, "ordinal", qid, backend="dask", client=client)
    ddf = dd.from_pandas(frame_of(X, y, qid), npartitions=2)
    with pytest.raises(ValueError, match="y must be a column name of X or a dask Series"):
        bmrm.fit(ddf.drop(columns=["label"]), y, "ordinal", "query", backend="dask", client=client)


def test_clients_that_cannot_fit_are_named():
    X, y, qid = ranking_data(17)
    with pytest.raises(ValueError, match="client must be a distributed.Client .*; got 'tcp://x'"):
        bmrm.fit(X, y, "ordinal", qid, backend="dask", client="tcp://x")
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster:
        closed = distributed.Client(cluster)
        closed.close()
        with pytest.raises(ValueError, match="is closed: pass a running distributed.Client"):
            bmrm.fit(X, y, "ordinal", qid, backend="dask", client=closed)


def test_the_local_backend_refuses_dask_input_and_a_client(client):
    X, y, qid = ranking_data(18)
    with pytest.raises(ValueError, match="^client is used with backend='dask' only"):
        bmrm.fit(X, y, "ordinal", qid, client=client)
    Xd = da.from_array(X, chunks=(50, -1))
    with pytest.raises(ValueError, match="^X is a dask Array: pass backend='dask'"):
        bmrm.fit(Xd, y, "ordinal", qid)
    with pytest.raises(ValueError, match="^qid is a dask Array: pass backend='dask'"):
        bmrm.fit(X, y, "ordinal", da.from_array(qid))
    ddf = dd.from_pandas(frame_of(X, y, qid), npartitions=2)
    with pytest.raises(ValueError, match="^X is a dask DataFrame: pass backend='dask'"):
        bmrm.path(ddf, "label", "ordinal", "query", lams=[1e-2])


def _held(client) -> int:
    return sum(client.run(lambda dask_worker: len(dask_worker.data)).values())


def test_failed_fits_release_what_they_built_on_the_workers(client):
    """A fit refused by a worker (NaN in one chunk) or failing mid-fit (scores overflow)
    cancels its partitions; a traceback kept alive (as a REPL keeps the last one) holds
    nothing on the workers."""
    import gc
    import time

    assert _held(client) == 0
    kept = []
    X, y, qid = ranking_data(19, shuffled=False)
    cut = int(np.flatnonzero(qid[1:] != qid[:-1])[10]) + 1
    bad = X.copy()
    bad[-1, 0] = np.nan
    with pytest.raises(ValueError, match="X must not contain NaN") as info:
        bmrm.fit(
            da.from_array(bad, chunks=((cut, len(y) - cut), -1)), y, "ordinal", qid,
            backend="dask", client=client,
        )  # fmt: skip
    kept.append(info)
    huge = X.copy()
    huge[0] *= 1e306
    with pytest.raises(FloatingPointError) as info:
        bmrm.fit(huge, y, "ordinal", qid, lam=1e-12, backend="dask", client=client)
    kept.append(info)
    gc.collect()
    deadline = time.monotonic() + 10
    while _held(client) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _held(client) == 0
    assert all(info.tb is not None for info in kept)


def test_ordinal_regressor_takes_client_and_refuses_dask(client):
    X, y, _ = ranking_data(20)
    with pytest.raises(ValueError, match="^OrdinalRegressor cannot fit with backend='dask'"):
        bmrm.OrdinalRegressor(backend="dask", client=client).fit(X, y)
    assert bmrm.OrdinalRegressor(client=client).get_params()["client"] is client


def test_the_counting_oracle_keeps_the_books_of_a_dask_fit(client):
    """nfev, passes and oracle seconds of a fit on the workers are counted once, by the
    problem's counting oracle: they match the Dask oracle's own count of calls, and the
    history reports the same columns as a local fit."""
    from bmrm.distributed import DaskRiskOracle
    from bmrm.solver.oracle import RiskOracle

    X, y, qid = ranking_data(3)
    remote = DaskRiskOracle(client, X, y, losses.get("ordinal"), qid)
    local = RiskOracle(X, losses.prepare("ordinal", y, qid))
    res = bmrm.minimize_bmrm(remote, remote.n_features, 1e-2, method="bmrm", tol=1e-4)
    ref = bmrm.minimize_bmrm(local, local.n_features, 1e-2, method="bmrm", tol=1e-4)
    assert res.nfev == remote.calls > 0
    assert res.n_passes == 2 * remote.calls
    assert res.history["nfev"][-1] == res.nfev
    assert 0 < res.oracle_seconds <= res.total_seconds
    assert res.history["oracle_seconds"][-1] == res.oracle_seconds
    assert sorted(res.history) == sorted(ref.history)
    assert not hasattr(remote, "seconds")

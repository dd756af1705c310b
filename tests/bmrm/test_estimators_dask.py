"""The estimators with ``backend="dask"``, and the Dask dashboard during a bmrm fit.

Reference: the same estimator fitted locally (one process, NumPy input), whose objective the
Dask fit must reproduce to 1e-8 relative; its scores on the same rows; and the dashboard's
HTTP status code read with urllib.
"""

import os
import pickle
import urllib.request
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils._param_validation import InvalidParameterError

import bmrm
from bmrm.estimators import BMRMClassifier, BMRMRanker, BMRMRegressor, OrdinalRegressor

distributed = pytest.importorskip("distributed", reason="needs the 'distributed' extra")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

RTOL = 1e-8
# Fits stop within TOL·J of the optimum, so two fits agree to 2·TOL whatever their paths.
TOL = 1e-10


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as c:
        yield c


@pytest.fixture(scope="module")
def client(cluster):
    # not the default client, so that a missing client= is noticed
    with distributed.Client(cluster, set_as_default=False) as c:
        yield c


def ranking_data(seed=0, n_queries=24, d=5):
    """Sorted by qid, queries of 1 to 11 rows, one with all-equal labels."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 12, n_queries)
    qid = np.repeat(np.arange(n_queries) * 5 + 3, sizes)
    X = rng.standard_normal((qid.size, d))
    y = np.clip(np.round(X[:, 0] + 1 + rng.standard_normal(qid.size) * 0.5), 0, 3).astype(int)
    y[qid == qid[0]] = 2
    return X, y, qid


def query_chunks(qid, n_chunks=3):
    """Row chunks of a dask array that end at query boundaries."""
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
    cuts = starts[np.linspace(0, len(starts), n_chunks + 1).astype(int)[1:-1]]
    return tuple(np.diff(np.r_[0, cuts, len(qid)]))


def assert_same_objective(local, remote):
    assert remote.result_.fun == pytest.approx(local.result_.fun, rel=RTOL)
    assert remote.result_.gap <= TOL * remote.result_.fun


@pytest.mark.parametrize(
    "params", [{"loss": "ordinal"}, {"loss": "ndcg", "loss_params": {"ties": "pairs"}}]
)
def test_ranker_on_numpy_input_equals_the_local_fit(client, params):
    X, y, qid = ranking_data(1)
    local = BMRMRanker(**params, tol=TOL).fit(X, y, qid)
    remote = BMRMRanker(**params, tol=TOL, backend="dask", client=client).fit(X, y, qid)
    assert_same_objective(local, remote)
    assert remote.n_features_in_ == X.shape[1]
    scores = remote.predict(X)
    assert isinstance(scores, np.ndarray)
    np.testing.assert_allclose(scores, X @ remote.coef_, rtol=1e-12, atol=1e-12)


def test_ranker_on_a_dask_array_predicts_a_dask_array(client):
    X, y, qid = ranking_data(2)
    chunks = query_chunks(qid)
    Xd = da.from_array(X, chunks=(chunks, -1))
    yd, qd = da.from_array(y, chunks=(chunks,)), da.from_array(qid, chunks=(chunks,))
    local = BMRMRanker(loss="ordinal", tol=TOL).fit(X, y, qid)
    remote = BMRMRanker(loss="ordinal", tol=TOL, backend="dask", client=client).fit(Xd, yd, qd)
    assert_same_objective(local, remote)
    assert not hasattr(remote, "feature_names_in_")
    scores = remote.predict(Xd)
    assert isinstance(scores, da.Array)
    assert scores.chunks == (chunks,)
    np.testing.assert_allclose(
        client.compute(scores).result(), X @ remote.coef_, rtol=1e-12, atol=1e-12
    )


def test_ranker_on_a_dask_dataframe_with_column_names(client):
    X, y, qid = ranking_data(3)
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    frame.insert(2, "label", y)
    frame["query"] = qid
    order = np.random.default_rng(0).permutation(len(frame))  # queries span partitions
    ddf = dd.from_pandas(frame.iloc[order], npartitions=3, sort=False)
    local = BMRMRanker(loss="ordinal", tol=TOL).fit(X, y, qid)
    remote = BMRMRanker(loss="ordinal", tol=TOL, backend="dask", client=client)
    remote.fit(ddf, "label", "query")
    assert_same_objective(local, remote)
    assert list(remote.feature_names_in_) == [f"f{j}" for j in range(X.shape[1])]
    expected = X[order] @ remote.coef_
    # the columns are taken by name (reordered, they give the same scores), and no
    # feature-name warning is raised on the way
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scores = remote.predict(ddf)  # the label and query columns are not features
        assert isinstance(scores, da.Array)
        got = client.compute(scores).result()
        shuffled = remote.predict(ddf[["query", "f4", "label", "f0", "f3", "f2", "f1"]])
        got_shuffled = client.compute(shuffled).result()
        # score gathers the scores, labels and ids: the same as on the in-memory rows
        in_memory = frame.iloc[order].drop(columns=["label", "query"])
        expected_ndcg = remote.score(in_memory, y[order], qid[order])
        assert remote.score(ddf, "label", "query") == expected_ndcg
        assert remote.score(ddf, ddf["label"], ddf["query"]) == expected_ndcg
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(got_shuffled, got)
    with pytest.raises(ValueError, match=r"lacks the feature columns \['f1'\]"):
        remote.predict(ddf.drop(columns=["f1"]))


def cuts_inside_queries(qid, n_parts):
    """Row indices that split the rows into ``n_parts`` of about equal size, each one inside
    a query (between two rows of the same query)."""
    cuts = []
    for c in np.linspace(0, len(qid), n_parts + 1).astype(int)[1:-1]:
        while qid[c - 1] != qid[c]:
            c += 1
        cuts.append(int(c))
    return cuts


def test_ranker_on_parquet_files_predicts_the_scores_of_in_memory_rows(client, tmp_path):
    """dd.read_parquet over several files: read with few of its columns (a row count, the
    query ids), the frame has fewer partitions than files, so the fitted columns are not
    converted by to_dask_array(lengths=True); the scores are those of the same rows in
    memory, for a Dask fit and for a local fit."""
    X, y, qid = ranking_data(8, n_queries=40)
    names = [f"f{j}" for j in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=names)
    frame.insert(1, "label", y)
    frame["query"] = qid
    bounds = [0, *cuts_inside_queries(qid, 3), len(qid)]
    for i, (start, stop) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        frame.iloc[start:stop].to_parquet(tmp_path / f"part{i}.parquet")
    ddf = dd.read_parquet(str(tmp_path / "*.parquet"))
    local = BMRMRanker(loss="ordinal", tol=TOL).fit(frame[names], y, qid)
    remote = BMRMRanker(loss="ordinal", tol=TOL, backend="dask", client=client)
    remote.fit(ddf, "label", "query")
    assert_same_objective(local, remote)
    assert list(remote.feature_names_in_) == names
    for ranker in (local, remote):
        scores = ranker.predict(dd.read_parquet(str(tmp_path / "*.parquet")))
        assert isinstance(scores, da.Array)
        assert scores.shape == (len(y),)
        np.testing.assert_allclose(
            client.compute(scores).result(), ranker.predict(frame[names]), rtol=1e-12, atol=1e-12
        )
    # fitted without column names: all the frame's columns are features, checked before work
    unnamed = BMRMRanker(loss="ordinal", tol=TOL).fit(X, y, qid)
    with pytest.raises(ValueError, match="X has 7 columns, but the model has 5 features"):
        unnamed.predict(ddf)


def test_regressor_and_classifier_on_dask_arrays(client):
    X, y, _ = ranking_data(4)
    Xd = da.from_array(X, chunks=(40, -1))
    noise = np.random.default_rng(4).standard_normal(X.shape[0])
    target = X @ np.array([1.0, -2.0, 0.5, 0.0, 0.3]) + 0.25 + noise
    local = BMRMRegressor(tol=TOL).fit(X, target)
    remote = BMRMRegressor(tol=TOL, backend="dask", client=client)
    remote.fit(Xd, da.from_array(target, chunks=40))
    assert_same_objective(local, remote)
    np.testing.assert_allclose(
        client.compute(remote.predict(Xd)).result(),
        X @ remote.coef_ + remote.intercept_,
        rtol=1e-12,
        atol=1e-12,
    )
    labels = np.where(y > 1, "yes", "no")
    local = BMRMClassifier(loss="logistic", tol=TOL).fit(X, labels)
    remote = BMRMClassifier(loss="logistic", tol=TOL, backend="dask", client=client)
    remote.fit(Xd, da.from_array(labels, chunks=40))
    assert_same_objective(local, remote)
    assert list(remote.classes_) == ["no", "yes"]
    f = X @ remote.coef_ + remote.intercept_
    predicted = client.compute(remote.predict(Xd)).result()
    np.testing.assert_array_equal(predicted, np.where(f > 0, "yes", "no"))


def test_params_clone_and_pickle(client):
    ranker = BMRMRanker(loss="ordinal", backend="dask", client=client)
    assert ranker.get_params()["backend"] == "dask"
    assert ranker.get_params()["client"] is client
    copy = clone(ranker)
    assert copy.client is client  # shared, never deep-copied
    assert ranker.client is client
    assert copy.set_params(backend="local").backend == "local"
    X, y, qid = ranking_data(5)
    ranker.set_params(tol=TOL).fit(X, y, qid)
    restored = pickle.loads(pickle.dumps(ranker))
    assert restored.client is None and ranker.client is client
    np.testing.assert_array_equal(restored.predict(X), ranker.predict(X))


def test_default_client_is_used(cluster):
    X, y, qid = ranking_data(6)
    local = BMRMRanker(loss="ordinal", tol=TOL).fit(X, y, qid)
    with distributed.Client(cluster):  # becomes Dask's default client
        remote = BMRMRanker(loss="ordinal", tol=TOL, backend="dask").fit(X, y, qid)
        model = bmrm.fit(X, y, "ordinal", qid, lam=remote.lam, tol=TOL, backend="dask")
    assert_same_objective(local, remote)
    assert_same_objective(local, model)


def test_fit_without_a_default_client_names_client(client):
    with pytest.raises(ValueError, match="No clients found"):
        distributed.default_client()  # the module's client is not the default
    X, y, qid = ranking_data(6)
    message = (
        r"backend='dask' needs a client: pass client=distributed\.Client\(\.\.\.\), or create "
        r"one first \(it becomes Dask's default client\)"
    )
    with pytest.raises(ValueError, match=message):
        bmrm.fit(X, y, "ordinal", qid, backend="dask")
    with pytest.raises(ValueError, match=message):
        BMRMRanker(backend="dask").fit(X, y, qid)


def test_errors_name_the_option(client):
    X, y, qid = ranking_data(7)
    Xd = da.from_array(X, chunks=(X.shape[0], -1))
    with pytest.raises(ValueError, match="X is a dask Array: set backend='dask'"):
        BMRMRanker().fit(Xd, y, qid)
    with pytest.raises(ValueError, match="backend='dask' needs a client"):
        BMRMRanker(backend="dask").fit(X, y, qid)
    with pytest.raises(InvalidParameterError, match="'backend' parameter"):
        BMRMRanker(backend="ray").fit(X, y, qid)
    with pytest.raises(InvalidParameterError, match="'client' parameter"):
        BMRMRanker(backend="dask", client="tcp://127.0.0.1:8786").fit(X, y, qid)
    with pytest.raises(ValueError, match="use loss='ordinal'"):
        BMRMRanker(loss="preference", backend="dask", client=client).fit(Xd, y, qid)
    with pytest.raises(ValueError, match="backend='dask' fits convex losses"):
        BMRMRanker(loss="cosine", backend="dask", client=client).fit(X, y, qid)
    for data in ((X, y, qid), (Xd, y, qid)):
        with pytest.raises(ValueError, match="backend='dask' fits the linear scorer only"):
            BMRMRanker(loss="listnet", scorer="expected_gain", backend="dask", client=client).fit(
                *data
            )
    with pytest.raises(ValueError, match="has rows in partitions"):
        BMRMRanker(loss="ordinal", backend="dask", client=client).fit(
            da.from_array(X, chunks=(7, -1)), da.from_array(y, chunks=7), qid
        )


def test_estimators_on_worker_processes_equal_the_local_fit():
    """Worker processes (not threads): partitions, estimators and losses are pickled to
    them and the tasks run in other interpreters; the objective is still the local one."""
    X, y, qid = ranking_data(9)
    chunks = query_chunks(qid)
    Xd = da.from_array(X, chunks=(chunks, -1))
    yd, qd = da.from_array(y, chunks=(chunks,)), da.from_array(qid, chunks=(chunks,))
    noise = np.random.default_rng(9).standard_normal(X.shape[0])
    target = X @ np.array([1.0, -2.0, 0.5, 0.0, 0.3]) + noise
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as process_cluster,
        distributed.Client(process_cluster, set_as_default=False) as process_client,
    ):
        assert all(
            pid != os.getpid() for pid in process_client.run(os.getpid).values()
        )  # the tasks run in other processes
        for make, args, dask_args in (
            (lambda **kw: BMRMRanker(loss="ordinal", **kw), (X, y, qid), (Xd, yd, qd)),
            (
                lambda **kw: BMRMRanker(loss="ndcg", loss_params={"ties": "pairs"}, **kw),
                (X, y, qid),
                (X, y, qid),
            ),
            (lambda **kw: BMRMRegressor(**kw), (X, target), (Xd, da.from_array(target, 40))),
        ):
            local = make(tol=TOL).fit(*args)
            remote = make(tol=TOL, backend="dask", client=process_client).fit(*dask_args)
            assert_same_objective(local, remote)
            scores = remote.predict(dask_args[0])
            if isinstance(scores, da.Array):
                scores = process_client.compute(scores).result()
            np.testing.assert_allclose(
                scores, X @ remote.coef_ + getattr(remote, "intercept_", 0.0), rtol=1e-12,
                atol=1e-12,
            )  # fmt: skip


def test_ordinal_regressor_refuses_dask_before_any_work(client):
    """Its loss is one query of all rows: no partition of whole queries splits it."""
    X, y, _ = ranking_data(10)
    with pytest.raises(ValueError, match=r"cannot fit with backend='dask': .*one query of all"):
        OrdinalRegressor(backend="dask").fit(X, y)
    Xd = da.from_array(X, chunks=(40, -1))
    with pytest.raises(ValueError, match=r"X is a dask collection: .*one machine.*compute"):
        OrdinalRegressor().fit(Xd, y)
    with pytest.raises(ValueError, match=r"X and y are dask collections"):
        OrdinalRegressor().fit(Xd, da.from_array(y, chunks=40))
    with pytest.raises(InvalidParameterError, match="'backend' parameter"):
        OrdinalRegressor(backend="ray").fit(X, y)
    # nothing was fitted, and the local fit is unchanged by the option
    est = OrdinalRegressor(backend="dask")
    with pytest.raises(ValueError):
        est.fit(X, y)
    assert not hasattr(est, "coef_")
    np.testing.assert_array_equal(
        OrdinalRegressor(backend="local", tol=TOL).fit(X, y).coef_,
        OrdinalRegressor(tol=TOL).fit(X, y).coef_,
    )


def test_dashboard_serves_its_status_page_during_a_fit():
    """With bokeh installed, the scheduler's dashboard answers on loopback mid-fit."""
    pytest.importorskip("bokeh", reason="Dask's dashboard needs bokeh (the 'distributed' extra)")
    X, y, qid = ranking_data(8)
    statuses = []

    def during_fit(intermediate):
        if not statuses:
            with urllib.request.urlopen(link, timeout=60) as response:
                statuses.append((response.status, response.read()))

    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0"
        ) as local_cluster,
        distributed.Client(local_cluster, set_as_default=False) as client,
    ):
        # the dashboard listens on loopback only; its link may name another address
        port = client.scheduler_info()["services"]["dashboard"]
        assert client.dashboard_link.endswith(f":{port}/status")
        link = f"http://127.0.0.1:{port}/status"
        model = bmrm.fit(
            X, y, "ordinal", qid, backend="dask", client=client, tol=TOL, callback=during_fit
        )
    assert model.result_.nit >= 1
    status, page = statuses[0]
    assert status == 200
    assert b"Dask" in page and b"bokeh" in page.lower()

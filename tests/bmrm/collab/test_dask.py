"""CofiRank's U step on Dask equals the local fit (u_step="users")."""

import warnings

import numpy as np
import pytest

from bmrm.collab import CofiRank

from .test_model import random_ratings

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


@pytest.mark.parametrize(
    "loss, params, offsets",
    [("ndcg", None, False), ("ordinal", None, True), ("squared", None, True)],
)
def test_dask_u_step_equals_local(client, loss, params, offsets):
    ratings = random_ratings(11, n_users=25, n_items=14, density=0.6)
    kw = dict(
        loss=loss, loss_params=params, n_factors=3, lam=0.5, offsets=offsets,
        u_step="users", max_iter=4, random_state=3,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = CofiRank(**kw).fit(ratings)
        remote = CofiRank(**kw, client=client).fit(ratings)
    np.testing.assert_allclose(remote.user_factors_, local.user_factors_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(remote.item_factors_, local.item_factors_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(remote.user_offsets_, local.user_offsets_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(
        remote.result_.objective, local.result_.objective, rtol=1e-12, atol=0
    )
    assert [s["nit"] for s in remote.result_.steps] == [s["nit"] for s in local.result_.steps]


def test_client_needs_the_per_user_step(client):
    with pytest.raises(ValueError, match="u_step='users'"):
        CofiRank(client=client, u_step="block").fit(random_ratings(0))


def test_worker_killed_mid_fit_is_replaced():
    """A worker process killed after the first outer iteration: Dask rebuilds its
    partitions elsewhere and the fit ends where the local fit does."""
    import os
    import signal

    ratings = random_ratings(12, n_users=30, n_items=14, density=0.6)
    kw = dict(loss="ordinal", n_factors=3, lam=0.5, u_step="users", max_iter=4, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = CofiRank(**kw).fit(ratings)
    killed = []
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as c,
    ):

        def kill_one(model):
            if not killed:
                pid = next(iter(c.run(os.getpid).values()))
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            remote = CofiRank(**kw, client=c, callback=kill_one).fit(ratings)
        pids = set(c.run(os.getpid).values())
    assert killed and killed[0] not in pids
    np.testing.assert_allclose(remote.user_factors_, local.user_factors_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(remote.item_factors_, local.item_factors_, rtol=0, atol=1e-10)
    assert remote.n_iter_ == local.n_iter_ >= 2

"""CofiRank's U step over users partitioned on Dask workers (``CofiRank(client=...)``).

The users are cut into contiguous partitions of about equal numbers of ratings, one per
worker thread; each partition (its users' ratings and their prepared single-query losses)
is built by a Dask task whose definition carries the ratings, so when a worker dies Dask
rebuilds its partitions elsewhere and the fit goes on. At every U step the item factors V
and offsets c go out once as one task that the partitions' tasks depend on (Dask copies it
to the workers that need it); each task solves its users' problems with V fixed
(:func:`bmrm.collab._steps.solve_users`, the local ``u_step="users"`` code) and sends back
only its users' factors and its sums of objective, gap, iterations and oracle calls. A
user's solve depends on that user's data alone, so the factors equal the local fit's.
"""

from __future__ import annotations

import losses
from bmrm.collab._ratings import Ratings
from bmrm.collab._steps import StepSettings, solve_users
from bmrm.distributed import resolve_client
from losses.parallel import block_bounds, thread_limit

__all__ = ["DaskUserStep"]


class _Partition:
    """Users ``first .. first + n − 1``: their ratings (``indptr`` from 0) and losses."""

    def __init__(self, first: int, indptr, indices, parts: list):
        self.first = first
        self.indptr = indptr
        self.indices = indices
        self.parts = parts
        self.nbytes = indptr.nbytes + indices.nbytes

    def __sizeof__(self) -> int:
        return self.nbytes


def _build(loss, first: int, indptr, indices, data) -> _Partition:
    parts = [
        losses.prepare(loss, data[indptr[i] : indptr[i + 1]])
        if indptr[i + 1] > indptr[i]
        else None
        for i in range(len(indptr) - 1)
    ]
    return _Partition(first, indptr, indices, parts)


def _hold(V, c):
    return V, c


def _solve(part: _Partition, items, U_rows, b_rows, offsets: bool, settings: StepSettings):
    V, c = items
    with thread_limit(1):  # the worker's threads are the parallelism
        sums = solve_users(
            part.indptr, part.indices, part.parts, range(len(U_rows)), U_rows, b_rows, V, c,
            offsets, settings,
        )  # fmt: skip
    return U_rows, b_rows, sums


class DaskUserStep:
    """The users' partitions held on a Dask cluster, and the U step over them.

    Parameters
    ----------
    client : distributed.Client or None
        None takes Dask's default client.
    ratings : Ratings
        The checked ratings (user-major), partitioned into blocks of users balanced by
        their numbers of ratings, one per worker thread.
    loss : loss object
        The loss, prepared per user on the workers.
    offsets : bool
        Whether the users have offsets b.
    """

    def __init__(self, client, ratings: Ratings, loss, offsets: bool):
        self.client = resolve_client(client)
        self.offsets = offsets
        n_parts = max(1, sum(self.client.nthreads().values()))
        bounds = block_bounds(ratings.indptr, n_parts)
        self.bounds = bounds
        self.parts = []
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            s, e = ratings.indptr[lo], ratings.indptr[hi]
            self.parts.append(
                self.client.submit(
                    _build,
                    loss,
                    int(lo),
                    ratings.indptr[lo : hi + 1] - s,
                    ratings.indices[s:e].copy(),
                    ratings.data[s:e].copy(),
                    pure=False,
                )  # fmt: skip
            )

    def step(self, U, b, V, c, settings: StepSettings):
        """Solve every user's problem on the workers, writing U and b in place.

        Parameters
        ----------
        U, b : ndarray
            User factors and offsets: the starting point, overwritten by the solution.
        V, c : ndarray
            Item factors and offsets (fixed), sent to the workers once.
        settings : StepSettings
            What each user's bundle-method solve is asked.

        Returns
        -------
        tuple
            Sums over users (objective, certified gap, iterations, oracle calls) and
            whether no solve stopped at its iteration cap, added in partition order.
        """
        items = self.client.submit(_hold, V, c, pure=False)
        futures = [
            self.client.submit(
                _solve,
                part,
                items,
                U[lo:hi].copy(),
                b[lo:hi].copy(),
                self.offsets,
                settings,
                pure=False,
            )  # fmt: skip
            for part, lo, hi in zip(self.parts, self.bounds[:-1], self.bounds[1:], strict=True)
        ]
        J = gap = 0.0
        nit = nfev = 0
        converged = True
        for (U_rows, b_rows, sums), lo, hi in zip(
            self.client.gather(futures), self.bounds[:-1], self.bounds[1:], strict=True
        ):
            U[lo:hi], b[lo:hi] = U_rows, b_rows
            J += sums[0]
            gap += sums[1]
            nit += sums[2]
            nfev += sums[3]
            converged &= sums[4]
        return J, gap, nit, nfev, converged

"""The evaluation protocols of CofiRank (Weimer, Karatzoglou, Le & Smola, NIPS 2007, §5).

*Weak generalisation* (:func:`weak_split`): the same users are trained and tested; each
user with at least ``n_train + min_test`` ratings gives ``n_train`` ratings drawn at random
to training and the rest to testing; other users are left out of both.

*Strong generalisation* (:func:`strong_split`): the tested users are new. A share of the
qualifying users is held out; the model is trained on every other user's ratings, then
each held-out user's factors are fitted on ``n_train`` of their ratings drawn at random
with the item factors fixed (:meth:`bmrm.collab.CofiRank.fold_in`) and tested on the rest.
With ``min_ratings`` the held-out users are drawn from the users with at least that many
ratings instead, and a held-out user with fewer than ``n_train + min_test`` ratings is in
neither the fold nor the test part: the same seed and ``min_ratings`` then hold out the
same users, and give the same training part, for every ``n_train``, so one training fit
serves a whole sweep over N, each N tested on the held-out users who have ``N +
min_test`` ratings (a uniformly random share of those users, as without it).

Both return the parts in the form of their input: scipy.sparse matrices of the input's
shape and format (explicit zeros kept), or ``(users, items, ratings)`` tuples holding the
input's rows in their order.
"""

from __future__ import annotations

import numbers

import numpy as np

from bmrm.collab._ratings import Ratings, check_ratings

__all__ = ["strong_split", "weak_split"]


def _count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1; got {value!r}")
    return int(value)


def _check_sizes(n_train, min_test) -> tuple[int, int]:
    return _count(n_train, "n_train"), _count(min_test, "min_test")


def _ranks(R: Ratings, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random rank of each rating among its user's ratings (0-based)."""
    users = R.users
    order = np.lexsort((rng.random(len(users)), users))
    rank = np.empty(len(users), dtype=np.int64)
    rank[order] = np.arange(len(users)) - R.indptr[users[order]]
    return rank


def weak_split(ratings, n_train: int, min_test: int = 10, *, seed=None):
    """Split ratings by CofiRank's weak-generalisation protocol (module docstring).

    Parameters
    ----------
    ratings : scipy.sparse matrix or tuple (users, items, ratings)
        The ratings; users and items are the row and column indices.
    n_train : int
        Training ratings per kept user.
    min_test : int
        Test ratings per kept user, at least.
    seed : int, Generator or None
        Seed of the random draws.

    Returns
    -------
    train, test
        In the form of ``ratings``; a user with fewer than ``n_train + min_test`` ratings
        has none in either.

    Raises
    ------
    ValueError
        When no user has ``n_train + min_test`` ratings (both parts would be empty).
    """
    n_train, min_test = _check_sizes(n_train, min_test)
    R = check_ratings(ratings)
    rng = np.random.default_rng(seed)
    counts = np.diff(R.indptr)
    qualifies = counts >= n_train + min_test
    if not qualifies.any():
        raise ValueError(
            f"no user has n_train + min_test = {n_train + min_test} ratings or more to split "
            f"(the most any user has is {int(counts.max())})"
        )
    kept = np.repeat(qualifies, counts)
    rank = _ranks(R, rng)
    return R.subset(kept & (rank < n_train)), R.subset(kept & (rank >= n_train))


def strong_split(
    ratings, n_train: int, min_test: int = 10, *, heldout=0.1, min_ratings=None, seed=None
):
    """Split ratings by CofiRank's strong-generalisation protocol (module docstring).

    Parameters
    ----------
    ratings : scipy.sparse matrix or tuple (users, items, ratings)
        The ratings; users and items are the row and column indices.
    n_train, min_test : int
        Ratings per held-out user given to :meth:`~bmrm.collab.CofiRank.fold_in`, and
        left for testing at least; only users with ``n_train + min_test`` ratings or
        more may be held out.
    heldout : float in (0, 1)
        Share of those users held out (rounded, at least one).
    min_ratings : int or None
        Draw the held-out users from the users with at least this many ratings (None:
        ``n_train + min_test``); a held-out user with fewer than ``n_train + min_test``
        ratings is then in neither ``fold`` nor ``test`` (module docstring).
    seed : int, Generator or None
        Seed of the random draws.

    Returns
    -------
    train, fold, test
        In the form of ``ratings``: every rating of the users not held out; ``n_train``
        random ratings of each held-out user; the rest of theirs.
    """
    n_train, min_test = _check_sizes(n_train, min_test)
    if isinstance(heldout, bool) or not isinstance(heldout, numbers.Real) or not 0 < heldout < 1:
        raise ValueError(f"heldout must be a share in (0, 1); got {heldout!r}")
    needed = n_train + min_test
    what = "min_ratings"
    if min_ratings is None:
        min_ratings, what = needed, "n_train + min_test"
    else:
        min_ratings = _count(min_ratings, "min_ratings")
    R = check_ratings(ratings)
    rng = np.random.default_rng(seed)
    counts = np.diff(R.indptr)
    candidates = np.flatnonzero(counts >= min_ratings)
    if candidates.size == 0:
        raise ValueError(f"no user has {what} = {min_ratings} ratings or more to hold out")
    n_out = max(1, int(round(heldout * candidates.size)))
    out_users = np.zeros(R.n_users, dtype=bool)
    out_users[rng.choice(candidates, size=n_out, replace=False)] = True
    out = np.repeat(out_users, counts)
    tested = out & np.repeat(counts >= needed, counts)
    rank = _ranks(R, rng)
    return (
        R.subset(~out),
        R.subset(tested & (rank < n_train)),
        R.subset(tested & (rank >= n_train)),
    )

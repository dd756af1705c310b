"""Reading rating files: MovieLens (``u.data``, tab-separated; ``ratings.dat``,
``::``-separated; ``ratings.csv`` with a header) and MovieTweetings (``ratings.dat``,
``::``-separated) layouts, ``user  item  rating  [timestamp]`` per line."""

from __future__ import annotations

import io
import os
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from bmrm.collab._ratings import check_ratings

__all__ = ["RatingsFile", "read_ratings"]


class RatingsFile(NamedTuple):
    """A rating file read into a users × items matrix.

    Parameters
    ----------
    matrix : scipy.sparse.csr_matrix
        ``matrix[i, j]`` is the rating of user ``user_ids[i]`` for item ``item_ids[j]``;
        every stored entry is a rating, explicit zeros included.
    user_ids : ndarray of int64
        The file's user ids, sorted increasingly (row i is user ``user_ids[i]``).
    item_ids : ndarray of int64
        The file's item ids, sorted increasingly (column j is item ``item_ids[j]``).
    """

    matrix: sp.csr_matrix
    user_ids: np.ndarray
    item_ids: np.ndarray


def read_ratings(path) -> RatingsFile:
    """Read a MovieLens or MovieTweetings rating file, keeping the original ids.

    The separator is ``::`` when the first line holds one, else a tab, else a comma (a
    first line that does not start with a number is a header and skipped). Columns after
    the third (timestamps) are ignored.

    Parameters
    ----------
    path : str or path-like
        The rating file (``u.data``, ``ratings.dat``, ``ratings.csv``).

    Returns
    -------
    RatingsFile
        The users × items matrix and the original user and item ids.

    Raises
    ------
    ValueError
        When a line has fewer than three fields or a field is not a number, or a
        (user, item) pair is rated twice (naming the pair by its original ids).
    """
    path = os.fspath(path)
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    first = text.split("\n", 1)[0]
    sep = "::" if "::" in first else ("\t" if "\t" in first else ",")
    if sep == "::":
        text, sep = text.replace("::", "\t"), "\t"
    skip = 0 if first.strip()[:1].isdigit() else 1
    try:
        table = np.loadtxt(
            io.StringIO(text), delimiter=sep, usecols=(0, 1, 2), skiprows=skip, ndmin=2
        )
    except ValueError as exc:
        raise ValueError(f"{path}: expected lines 'user{sep}item{sep}rating...' ({exc})") from None
    user_ids, users = np.unique(table[:, 0].astype(np.int64), return_inverse=True)
    item_ids, items = np.unique(table[:, 1].astype(np.int64), return_inverse=True)
    values = table[:, 2]
    try:
        R = check_ratings((users, items, values), name=path)
    except ValueError as exc:
        if "more than once" not in str(exc):
            raise
        key = users.astype(np.int64) * len(item_ids) + items
        uniq, counts = np.unique(key, return_counts=True)
        bad = uniq[counts > 1][0]
        raise ValueError(
            f"{path} rates the (user, item) pair ({user_ids[bad // len(item_ids)]}, "
            f"{item_ids[bad % len(item_ids)]}) more than once ({int((counts > 1).sum())} "
            "repeated pairs); each pair must be rated once"
        ) from None
    matrix = sp.csr_matrix((R.data, R.indices, R.indptr), shape=R.shape)
    return RatingsFile(matrix, user_ids, item_ids)

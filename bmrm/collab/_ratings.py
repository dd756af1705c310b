"""Rating matrices: checking the caller's input and giving results back in its form.

Ratings come as a scipy.sparse matrix whose *stored* entries are the observed ratings
(explicit zeros included: a 0 on a 0–10 scale is a rating) or as a ``(users, items,
ratings)`` tuple of equal-length arrays. Inside, they are held user-major (CSR): user i's
items are ``indices[indptr[i]:indptr[i + 1]]`` in increasing order, so ``indptr`` is exactly
the ``query_ptr`` of the ranking losses, one query per user.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

__all__ = ["Ratings", "check_ratings"]


class Ratings(NamedTuple):
    """Ratings held user-major, with what is needed to give results back in the input form."""

    indptr: np.ndarray  # int64 (n_users + 1,)
    # (n_ratings,): item of each rating, increasing within a user; int32 (the type scipy's
    # CSR matrices hold, so a canonical one is used without a copy) below 2^31 items
    indices: np.ndarray
    data: np.ndarray  # float64 (n_ratings,)
    shape: tuple[int, int]
    form: str  # "sparse" or "arrays"
    sparse_format: str | None  # the input's scipy.sparse format ("csr", "coo", ...)
    order: np.ndarray | None  # int64: position in the input of each entry (None: identity)
    source: object  # the input (arrays form: the tuple of arrays)

    @property
    def n_users(self) -> int:
        return self.shape[0]

    @property
    def n_items(self) -> int:
        return self.shape[1]

    @property
    def users(self) -> np.ndarray:
        """The user (row) of each rating, in 32 bits while the users' number fits."""
        ids = np.arange(self.shape[0], dtype=_index_type(self.shape[0]))
        return np.repeat(ids, np.diff(self.indptr))

    def subset(self, keep: np.ndarray):
        """The ratings whose internal entries ``keep`` (boolean mask) selects, in the form
        of the input (arrays: the input's rows in their order; sparse: the input's format
        and shape, explicit zeros kept)."""
        if self.form == "arrays":
            rows = np.sort(self.order[keep])
            return tuple(np.asarray(a)[rows] for a in self.source)
        counts = np.bincount(self.users[keep], minlength=self.shape[0])
        indptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        matrix = sp.csr_matrix(
            (self.data[keep], self.indices[keep], indptr), shape=self.shape, copy=True
        )
        return matrix if self.sparse_format == "csr" else matrix.asformat(self.sparse_format)


def _integer_ids(a, name: str) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-d array of indices; got shape {a.shape}")
    if a.dtype.kind == "f" and a.size and np.all(np.isfinite(a)) and np.all(a == np.round(a)):
        a = a.astype(np.int64)
    if a.size == 0:
        return a.astype(np.int64)
    if a.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integer indices; got dtype {a.dtype}")
    if a.min() < 0:
        raise ValueError(f"{name} must hold non-negative indices; got {a.min()}")
    return a.astype(np.int64)


def _index_type(n: int):
    """The type of indices below n (items, users): one per size class, so the kernels
    compile once for it."""
    return np.int32 if n < 2**31 else np.int64


def _canonical_csr(ratings, name: str) -> Ratings:
    """A CSR matrix with sorted indices and no duplicates is user-major already: its arrays
    are used as they are (no sort and no copy of float64 ratings)."""
    values = np.asarray(ratings.data)
    if values.dtype.kind not in "biuf":
        raise ValueError(f"{name} must hold real-valued ratings; got dtype {values.dtype}")
    values = values.astype(np.float64, copy=False)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} must not hold NaN or inf ratings")
    indptr = np.asarray(ratings.indptr, dtype=np.int64)
    n_shape = tuple(int(s) for s in ratings.shape)
    items = np.asarray(ratings.indices, dtype=_index_type(n_shape[1]))
    return Ratings(indptr, items, values, n_shape, "sparse", "csr", None, None)


def check_ratings(ratings, name: str = "ratings", shape=None) -> Ratings:
    """Check ``ratings`` and hold them user-major (module docstring).

    Parameters
    ----------
    ratings : scipy.sparse matrix or tuple (users, items, ratings)
        Stored entries are ratings; in the arrays form, rating ``ratings[t]`` is user
        ``users[t]``'s rating of item ``items[t]``.
    name : str
        The argument's name in error messages.
    shape : tuple or None
        (n_users, n_items) for the arrays form; by default one more than the largest
        user and item index.

    Raises
    ------
    ValueError
        For anything but these forms, non-finite ratings, negative or non-integer
        indices, and a (user, item) pair given more than once (each pair is one rating;
        sum or drop duplicates before).
    """
    if sp.issparse(ratings):
        if ratings.ndim != 2:
            raise ValueError(f"{name} must be a 2-d users × items matrix; got {ratings.ndim}-d")
        if ratings.format == "csr" and ratings.has_canonical_format:
            return _canonical_csr(ratings, name)
        form, fmt = "sparse", ratings.format
        coo = ratings.tocoo(copy=False)  # keeps duplicates and explicit zeros
        users = np.asarray(coo.row, dtype=np.int64)
        items = np.asarray(coo.col, dtype=np.int64)
        values = np.asarray(coo.data)
        n_shape = tuple(int(s) for s in ratings.shape)
        source = None
    elif isinstance(ratings, (tuple, list)) and len(ratings) == 3:
        form, fmt = "arrays", None
        users = _integer_ids(ratings[0], f"{name}[0] (users)")
        items = _integer_ids(ratings[1], f"{name}[1] (items)")
        values = np.asarray(ratings[2])
        if values.ndim != 1 or not (len(users) == len(items) == len(values)):
            raise ValueError(
                f"{name} must be three 1-d arrays of equal length (users, items, ratings); "
                f"got lengths {len(users)}, {len(items)}, "
                + (f"{len(values)}" if values.ndim == 1 else f"an array of shape {values.shape}")
            )
        if shape is None:
            n_shape = (
                int(users.max()) + 1 if users.size else 0,
                int(items.max()) + 1 if items.size else 0,
            )
        else:
            n_shape = (int(shape[0]), int(shape[1]))
            if users.size and (users.max() >= n_shape[0] or items.max() >= n_shape[1]):
                raise ValueError(
                    f"{name} holds indices outside the shape {n_shape} (largest user "
                    f"{users.max()}, item {items.max()})"
                )
        source = tuple(ratings)
    else:
        raise ValueError(
            f"{name} must be a scipy.sparse users × items matrix or a tuple (users, items, "
            f"ratings) of 1-d arrays; got {type(ratings).__name__}"
        )
    if values.dtype.kind not in "biuf":
        raise ValueError(f"{name} must hold real-valued ratings; got dtype {values.dtype}")
    values = values.astype(np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} must not hold NaN or inf ratings")
    order = np.lexsort((items, users)).astype(np.int64)
    users, items, values = users[order], items[order], values[order]
    same = (users[1:] == users[:-1]) & (items[1:] == items[:-1])
    if np.any(same):
        first = int(np.flatnonzero(same)[0])
        raise ValueError(
            f"{name} holds the (user, item) pair ({users[first]}, {items[first]}) more than "
            f"once ({int(same.sum())} repeated entries); each pair must be rated once: "
            "sum, average or drop the duplicates first"
        )
    counts = np.bincount(users, minlength=n_shape[0])
    indptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    items = items.astype(_index_type(n_shape[1]))
    return Ratings(indptr, items, values, n_shape, form, fmt, order, source)

"""Query groups: from one ``qid`` per row to the contiguous ``query_ptr`` form.

Public input names a query per row (the LETOR / svmlight ``qid:`` convention). Internally
rows of one query are contiguous and query ``q`` is ``rows[query_ptr[q]:query_ptr[q + 1]]``.
When the caller's rows are not already grouped, they are reordered once with a stable sort
and every result is mapped back to the caller's order.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

__all__ = ["QueryGroups", "group_queries"]


@dataclass(frozen=True)
class QueryGroups:
    """Contiguous query structure of ``n_samples`` rows.

    Built by :func:`group_queries`; the parameters are kept as attributes of the same names.

    Parameters
    ----------
    query_ptr : ndarray of int64, shape (n_queries + 1,)
        Query ``q`` holds internal rows ``query_ptr[q]:query_ptr[q + 1]``.
    order : ndarray of int64 or None
        Internal row ``r`` is caller row ``order[r]``; ``None`` when the caller's rows are
        already grouped (no reordering).
    qids : ndarray
        The query id of each internal query, in internal order.
    """

    query_ptr: np.ndarray
    order: np.ndarray | None
    qids: np.ndarray

    @property
    def n_queries(self) -> int:
        """The number of queries."""
        return len(self.query_ptr) - 1

    @property
    def n_samples(self) -> int:
        """The number of rows."""
        return int(self.query_ptr[-1])

    def to_internal(self, a: np.ndarray) -> np.ndarray:
        """Return the rows of ``a`` (caller order) in internal order.

        Parameters
        ----------
        a : ndarray of shape (n_samples, ...)
            An array with one entry per row, in the caller's order.

        Returns
        -------
        ndarray of shape (n_samples, ...)
            ``a`` itself when no reordering is needed, else its rows reordered.
        """
        return a if self.order is None else a[self.order]

    def to_caller(self, a: np.ndarray) -> np.ndarray:
        """Return the rows of ``a`` (internal order) in the caller's order.

        Parameters
        ----------
        a : ndarray of shape (n_samples, ...)
            An array with one entry per row, in internal order.

        Returns
        -------
        ndarray of shape (n_samples, ...)
            ``a`` itself when no reordering is needed, else a new array in caller order.
        """
        if self.order is None:
            return a
        out = np.empty_like(a)
        out[self.order] = a
        return out

    def inverse(self) -> np.ndarray:
        """Return the internal row of each caller row.

        Returns
        -------
        ndarray of shape (n_samples,), int64
            ``inverse[caller_row]`` is the internal row of that caller row.
        """
        n = self.n_samples
        if self.order is None:
            return np.arange(n, dtype=np.int64)
        inv = np.empty(n, dtype=np.int64)
        inv[self.order] = np.arange(n, dtype=np.int64)
        return inv


def _check_object_ids(qid: np.ndarray, name: str) -> None:
    """Ids of an object array must be of one comparable kind: all numbers or all strings.

    Mixed kinds (``[1, "a", 2.0]``) or other objects have no order to group by, so they are
    rejected instead of failing inside the sort with a bare ``TypeError``.
    """
    values = qid.tolist()
    if all(isinstance(v, numbers.Real) for v in values):
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"{name} must not contain NaN or inf")
        return
    if all(isinstance(v, str) for v in values) or all(isinstance(v, bytes) for v in values):
        return
    kinds = sorted({type(v).__name__ for v in values})
    raise ValueError(
        f"{name} must hold ids of one kind (all numbers or all strings); "
        f"got a mix of {', '.join(kinds)}"
    )


def group_queries(qid, n_samples: int, *, name: str = "qid") -> QueryGroups:
    """Build the contiguous query structure from one query id per row.

    Parameters
    ----------
    qid : array-like of shape (n_samples,) or None
        Query id of each row; ``None`` makes all rows one query.
    n_samples : int
        Number of rows.
    name : str, default="qid"
        Argument name used in error messages.

    Returns
    -------
    QueryGroups
        Rows already grouped (each id in one contiguous run) keep their order; otherwise
        they are stably sorted by id. Cost O(n) when grouped, O(n log n) otherwise.

    Examples
    --------
    >>> from losses import group_queries
    >>> groups = group_queries(["b", "a", "b"], 3)
    >>> groups.query_ptr.tolist(), groups.order.tolist(), groups.qids.tolist()
    ([0, 1, 3], [1, 0, 2], ['a', 'b'])
    """
    if qid is None:
        return QueryGroups(
            query_ptr=np.array([0, n_samples], dtype=np.int64),
            order=None,
            qids=np.zeros(1, dtype=np.int64),
        )
    qid = np.asarray(qid)
    if qid.ndim != 1 or qid.shape[0] != n_samples:
        raise ValueError(
            f"{name} must be a 1-d array with one query id per row ({n_samples} rows); "
            f"got shape {qid.shape}"
        )
    if qid.dtype.kind not in "iub":
        if qid.dtype.kind == "f" and not np.all(np.isfinite(qid)):
            raise ValueError(f"{name} must not contain NaN or inf")
        if qid.dtype.kind not in "fUSO":
            raise ValueError(f"{name} must hold integer or string ids; got dtype {qid.dtype}")
        if qid.dtype.kind == "O":
            _check_object_ids(qid, name)
    if n_samples == 0:
        return QueryGroups(np.zeros(1, dtype=np.int64), None, qid[:0])
    starts = np.flatnonzero(qid[1:] != qid[:-1]) + 1
    run_ids = qid[np.concatenate(([0], starts))]
    if len(np.unique(run_ids)) == len(run_ids):
        ptr = np.concatenate(([0], starts, [n_samples])).astype(np.int64)
        return QueryGroups(query_ptr=ptr, order=None, qids=run_ids)
    order = np.argsort(qid, kind="stable").astype(np.int64)
    sorted_qid = qid[order]
    starts = np.flatnonzero(sorted_qid[1:] != sorted_qid[:-1]) + 1
    ptr = np.concatenate(([0], starts, [n_samples])).astype(np.int64)
    return QueryGroups(query_ptr=ptr, order=order, qids=sorted_qid[ptr[:-1]])

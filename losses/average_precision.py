"""Structured max-margin loss bounding 1 − average precision (SVM-MAP).

The loss
--------
For one query with ``p`` relevant documents (set R), ``n`` non-relevant ones (set N) and
scores ``f``, a ranking y is scored by the joint feature map over the relevant ×
non-relevant pairs (Yue, Finley, Radlinski & Joachims, "A support vector method for
optimizing average precision", SIGIR 2007),

    ⟨ψ(y), f⟩ = (1 / (p n)) Σ_{i ∈ R, j ∈ N} ±(f_i − f_j)    (+ when y puts i above j),

and with y* any ranking of every relevant document above every non-relevant one,

    l(f) = max_y [Δ(y) + ⟨ψ(y) − ψ(y*), f⟩]
         = max_y [Δ(y) − (2 / (p n)) Σ_{j ∈ N above i ∈ R in y} (f_i − f_j)],

Δ(y) = 1 − AP(y), AP(y) = (1/p) Σ_{i ∈ R} (relevant documents at or above i) / (position of
i). Only the interleaving of the two classes enters Δ and ψ, so the order within a class is
never charged (the pair map of Chakrabarti et al., KDD 2008, and of ``ties="pairs"`` in
:mod:`losses.listwise`, with the classes as the two gain levels).

Properties
----------
* *Convex*: a maximum of affine functions of f.
* *Non-negative*: y = y* gives Δ = 0 and a zero score term.
* *An upper bound on 1 − AP of the ranking by f*, for every tie-breaking τ of the scores
  (the pessimistic one, non-relevant documents first among equal scores, included): every
  pair that τ puts in the wrong order has f_j >= f_i, so its term is >= 0 and
  l(f) >= Δ(τ).
* *Independent of listing order*: only the classes and the scores enter; documents of one
  class with equal scores share the mean of their subgradient entries (a mean over
  maximisers that order them differently, so still a subgradient).

Exact loss-augmented inference
------------------------------
Sort each class by score, descending (relevant r = 1..p, non-relevant j = 1..n). Swapping
two documents of one class that are out of score order leaves Δ unchanged and does not
decrease the score term, so some maximiser keeps both lists in order; it is then given by
k_j, the number of relevant documents above the j-th non-relevant one, non-decreasing in j.
The relevant document r has s_r = #{j : k_j < r} non-relevant ones above it, so with the
telescoping 1 − r/(r + s) = Σ_{t=1}^{s} r / ((r + t)(r + t − 1)),

    1 − AP = (1/p) Σ_r Σ_{t <= s_r} r / ((r + t)(r + t − 1)),

and the pair (r, t) is counted exactly when k_t < r. The objective is therefore separable,
Σ_j δ_j(k_j) with δ_j(k) = Σ_{r > k} t_j(r) and

    t_j(r) = r / (p (r + j)(r + j − 1)) + (2 / (p n)) (f_j − f_r)

(Yue et al., §4, prove the same decomposition). Both parts of t_j(r) are non-increasing in j
(the first as its denominator grows, the second as f_j does not increase), so for k < k',
δ_j(k') − δ_j(k) = −Σ_{k < r <= k'} t_j(r) is non-decreasing in j: the largest maximiser of
δ_j is at least that of δ_{j−1}, and maximising each j on its own within the range of k
its neighbours' choices leave gives a consistent (monotone) ranking and the maximum. A
divide and conquer over j does this in O((p + n) log n): the middle j is maximised over
the whole range, and each half recurses on its side of that choice (every level scans
O(p + n) values of k). The subgradient is (2/(pn))(p − k_j) on the j-th non-relevant
document and −(2/(pn)) s_r on the r-th relevant one, and the value is that of the ranking
found, (1/p) Σ_r s_r / (r + s_r) + ⟨g, f⟩ (0, with g = 0, if rounding puts it at or below
the ideal ranking's). Cost: O(m log m) per query, the sort by score included. The tests compare
it with brute force over all permutations and with a dynamic programme over all
interleavings.

Degenerate queries
------------------
A query without a relevant document (AP undefined) or without a non-relevant one (AP = 1 for
every ranking) contributes zero loss and zero gradient, and its :meth:`metric` is 0.

References
----------
Y. Yue, T. Finley, F. Radlinski and T. Joachims, "A support vector method for optimizing
average precision", SIGIR 2007.
S. Chakrabarti, R. Khanna, U. Sawant and C. Bhattacharyya, "Structured learning for
non-smooth ranking losses", KDD 2008 (combining criteria in one max-margin objective).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from losses._base import Loss, rebased_ptr
from losses._kernels import average_precision as _k
from losses._threads import run_queries
from losses.validation import check_finite_targets, check_real

__all__ = ["AveragePrecisionLoss"]


class _APTargets(NamedTuple):
    query_ptr: np.ndarray
    relevant: np.ndarray  # bool per row


class AveragePrecisionLoss(Loss):
    """Structured max-margin loss bounding 1 − AP of the ranking by f (SVM-MAP).

    See the module docstring for the definition, its properties and the exact oracle.

    Parameters
    ----------
    threshold : float or None, default=None
        Labels ``>= threshold`` are relevant; ``None``: labels ``> 0`` (as
        :func:`losses.metrics.map_score`; LETOR's rule for graded labels 0, 1, 2).

    Notes
    -----
    Queries with no relevant or no non-relevant document give zero loss. The risk is the
    mean over queries, an upper bound on 1 − MAP over the queries that have both.
    """

    name = "map"
    pointwise = False
    smooth = False

    def __init__(self, *, threshold: float | None = None):
        self.threshold = None if threshold is None else check_real(threshold, "threshold")

    def _params(self) -> dict[str, Any]:
        return {"threshold": self.threshold}

    def validate(self, y, query_ptr, **data) -> _APTargets:
        """Mark the relevant rows.

        Parameters
        ----------
        y : array-like of shape (n_samples,)
            Targets in internal (query-contiguous) row order.
        query_ptr : ndarray of shape (n_queries + 1,), int64
            Query ``q`` is rows ``query_ptr[q]:query_ptr[q + 1]``.
        **data
            Loss data keywords; this loss takes none, and any raise ``ValueError``.

        Returns
        -------
        object
            The prepared targets (a named tuple of arrays), for :meth:`loss_grad`.

        Raises
        ------
        ValueError
            When ``y`` holds NaN or inf, or data keywords are given.
        """
        if data:
            raise ValueError(
                f"the {self.name} loss takes no data keywords; got {sorted(data)} "
                f"(loss parameters go to losses.get({self.name!r}, ...))"
            )
        y = check_finite_targets(y)
        relevant = y > 0 if self.threshold is None else y >= self.threshold
        return _APTargets(np.asarray(query_ptr, dtype=np.int64), relevant)

    def query_block(self, targets: _APTargets, start: int, stop: int) -> _APTargets:
        """Return the targets of the queries ``start:stop`` alone (see :mod:`losses._base`).

        Parameters
        ----------
        targets : object
            What :meth:`validate` returned.
        start, stop : int
            The block's first query and one past its last.

        Returns
        -------
        object
            Their targets, rows numbered from 0 (a view of ``targets``' rows).
        """
        rows = slice(int(targets.query_ptr[start]), int(targets.query_ptr[stop]))
        return _APTargets(rebased_ptr(targets.query_ptr, start, stop), targets.relevant[rows])

    def block_kernel(self, targets: _APTargets):
        """Return the block kernel of the loss (see :mod:`losses._base`).

        Parameters
        ----------
        targets : object
            What :meth:`validate` returned.

        Returns
        -------
        kernel : numba function
            ``kernel(q_start, q_stop, f, *args, values, grad)`` writes the loss and gradient
            of the queries ``q_start:q_stop``.
        args : tuple
            The kernel's arguments after ``f``.
        """
        return _k.ap_loss, (targets.query_ptr, targets.relevant)

    def loss_grad(self, f, targets: _APTargets) -> tuple[np.ndarray, np.ndarray]:
        """Return the per-query losses and the subgradient of their sum.

        See the module docstring for the formula and its conventions.

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in internal row order.
        targets : object
            What :meth:`validate` returned.

        Returns
        -------
        values : ndarray of shape (n_queries,)
            The loss of each query.
        grad : ndarray of shape (n_samples,)
            A subgradient of ``values.sum()`` with respect to ``f``.
        """
        f = np.ascontiguousarray(f, dtype=np.float64)
        values = np.empty(targets.query_ptr.size - 1)
        grad = np.empty_like(f)
        kernel, args = self.block_kernel(targets)
        run_queries(kernel, targets.query_ptr, f, *args, values, grad)
        return values, grad

    def metric(self, f, targets: _APTargets) -> np.ndarray:
        """Return the per-query 1 − AP of the ranking that sorts ``f`` descending.

        Non-relevant documents come first among equal scores (the worst case, which the loss
        bounds).

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in internal row order.
        targets : object
            What :meth:`validate` returned.

        Returns
        -------
        ndarray of shape (n_queries,)
            1 − AP of each query; 0 for a query without a relevant or without a
            non-relevant document.
        """
        return _ap_shortfall(f, targets.query_ptr, targets.relevant)


def _ap_shortfall(f, query_ptr: np.ndarray, relevant: np.ndarray) -> np.ndarray:
    """1 − AP per query of the ranking by ``f``, ties resolved against the relevant
    documents; 0 for queries with no relevant or no non-relevant document, NaN for queries
    with a NaN or infinite score."""
    f = np.asarray(f, dtype=np.float64)
    sizes = np.diff(query_ptr)
    n_queries = sizes.size
    query = np.repeat(np.arange(n_queries), sizes)
    order = np.lexsort((relevant, -f, query))
    rel_sorted = relevant[order].astype(np.float64)
    position = np.arange(f.size) - np.repeat(query_ptr[:-1], sizes) + 1.0
    cum = np.concatenate(([0.0], np.cumsum(rel_sorted)))
    hits = cum[1:] - np.repeat(cum[query_ptr[:-1]], sizes)  # relevant so far in the query
    precision = np.where(rel_sorted > 0, hits / position, 0.0)
    n_rel = np.bincount(query, weights=rel_sorted, minlength=n_queries)
    total = np.bincount(query, weights=precision, minlength=n_queries)
    out = np.zeros(n_queries)
    live = (n_rel > 0) & (n_rel < sizes)
    out[live] = 1.0 - total[live] / n_rel[live]
    out[np.bincount(query, weights=~np.isfinite(f), minlength=n_queries) > 0] = np.nan
    return out

"""Ordinal regression as a ranking loss: the hinge over all comparable pairs of a query.

References
----------
Teo, Vishwanathan, Smola & Le, "Bundle Methods for Regularized Risk Minimization",
JMLR 11 (2010), ranking appendix §1.2 and its Algorithm 1 (the O(m log m) ordinal loss).
Joachims, "Training Linear SVMs in Linear Time", KDD 2006 (SVM^rank).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from losses._base import Loss, rebased_ptr
from losses._kernels import ordinal as _k
from losses._kernels.sorting import RADIX_MIN
from losses._threads import run_queries
from losses._weights import check_row_values
from losses.validation import check_graded_labels

__all__ = ["OrdinalLoss"]

_COSTS = {"zero_one": (1.0, 0.0), "linear": (0.0, 1.0)}
_NORMALIZE = ("query", "none")
_HINGES = ("linear", "squared")


class _OrdinalTargets(NamedTuple):
    query_ptr: np.ndarray  # int64 (n_queries + 1,)
    rank: np.ndarray  # int32 (n,): dense level rank of each row within its query
    level_ptr: np.ndarray  # int64 (n_queries + 1,): levels of query q at level_ptr[q]:[q+1]
    levels: np.ndarray  # int64: the distinct labels of each query, ascending
    level_count: np.ndarray  # float64: rows per level (their summed weights with row_weight)
    weight: np.ndarray  # float64 (n_queries,): normalisation, 0 without comparable pairs
    row_weight: np.ndarray | None  # float64 (n,), or None when every row weighs 1
    # True when a query is long enough for the kernel's radix sort, else None (then the
    # radix sort is not compiled)
    radix: bool | None


def _check_cost(cost) -> np.ndarray | None:
    """``None`` for a named cost, else the validated cost matrix."""
    if isinstance(cost, str):
        if cost not in _COSTS:
            raise ValueError(
                f"cost must be one of {sorted(_COSTS)} or a square matrix; got {cost!r}"
            )
        return None
    try:
        matrix = np.array(cost, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"cost must be one of {sorted(_COSTS)} or a square matrix of numbers; "
            f"got {type(cost).__name__}"
        ) from None
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"cost matrix must be square (L, L); got shape {matrix.shape}")
    if not np.all(np.isfinite(matrix)):
        raise ValueError("cost matrix must not contain NaN or inf")
    if np.any(matrix < 0):
        raise ValueError(f"cost matrix must be non-negative; got minimum {matrix.min()!r}")
    return matrix


def _check_row_weight(row_weight, n: int) -> np.ndarray | None:
    """``row_weight`` as float64 of n entries (None for None), or a ValueError naming it."""
    if row_weight is None:
        return None
    s = check_row_values(row_weight, n, "row_weight")
    # the pair weights' sum Σ s_i s_j <= (n · max s)², and the loss's terms carry it
    if n and float(s.max()) * n > 1e150:
        raise ValueError("row_weight is too large: its pair weights overflow float64")
    return s


class OrdinalLoss(Loss):
    r"""Cost-weighted pairwise hinge over all comparable pairs of each query.

    For one query with scores f and integer relevance levels y,

    .. math::

        l(f, y) = \frac{1}{M} \sum_{y_i < y_j} C(y_i, y_j) \max(0, 1 + f_i - f_j)^p,
        \qquad M = \tfrac12 \Big(m^2 - \sum_l m_l^2\Big),

    where M is the number of comparable pairs (m_l rows at level l) and p = 1 (the hinge)
    or p = 2 (the squared hinge, ``hinge="squared"``). It is convex in f and upper-bounds
    :meth:`metric`, the same weighted count of misordered pairs.

    Parameters
    ----------
    cost : {"zero_one", "linear"} or array-like of shape (L, L), default "zero_one"
        C(a, b) for a pair with y_i = a < y_j = b: 1 (``"zero_one"``), b − a
        (``"linear"``), or ``cost[a, b]`` from a finite non-negative matrix whose size L
        exceeds the largest label (only entries above the diagonal are used).
    normalize : {"query", "none"}, default "query"
        ``"query"`` divides by M as above; ``"none"`` sums the pair terms. With
        ``normalize="none"`` and ``cost="zero_one"`` the empirical risk (the mean over
        queries) is SVM^rank's: SVM^rank minimises
        ½‖w‖² + C (1/n_q) Σ_q Σ_{y_i > y_j} max(0, 1 − (f_i − f_j)), so ``lam = 1 / C``
        with the solver's objective λ·½‖w‖² + R(w) reproduces it.
    hinge : {"linear", "squared"}, default "linear"
        p above. The squared hinge is the L2-loss RankSVM of Lee & Lin (2014): with
        ``normalize="none"``, ``cost="zero_one"`` and one query or many, LIBLINEAR's RankSVM
        minimises f_LL(w) = ½‖w‖² + C Σ_q Σ_{y_i < y_j} max(0, 1 − (f_j − f_i))² (all pairs
        of all queries summed), which is n_q·C times the solver's objective
        (λ/2)‖w‖² + R(w) at λ = 1 / (n_q C), n_q the number of queries (R is the mean over
        queries). The squared hinge is continuously differentiable and has the generalised
        Hessian H = 2 w_q Σ_{active} C (e_i − e_j)(e_i − e_j)ᵀ (Mangasarian, "A finite
        Newton method for classification", Optim. Methods Softw. 17, 2002), whose products
        :attr:`hessp` computes by the same sweep.

    Notes
    -----
    Row weights: ``row_weight=`` (a data keyword of :func:`losses.prepare` and
    :func:`bmrm.fit`, one non-negative weight s_i per row) counts row i as s_i rows: each
    pair term is multiplied by s_i s_j and M becomes Σ_{y_i < y_j} s_i s_j, so integer
    weights give the loss of the data with rows repeated (:class:`bmrm.OrdinalRegressor`'s
    ``sample_weight``, whose one query holds every row). The sweep below keeps sums of
    weights where it kept counts, at the same cost.

    Conventions: labels are non-negative integers (any gaps between levels are allowed);
    a query without comparable pairs (one row, or all labels equal) has loss 0 and
    gradient 0. At the hinge (1 + f_i − f_j = 0 exactly) a pair contributes neither loss nor
    subgradient; rows with equal scores are handled the same whatever their order, so the
    loss is invariant and the subgradient equivariant under reordering rows of a query.

    Algorithm: the appendix's Algorithm 1 (Lee & Lin's §3 for the squared hinge, with
    per-level sums of the scores beside the counts) — sort f, then sweep the endpoints f_j and
    f_i + 1 in ascending order while keeping per-level counts — costs
    O(m log m + m log L) per query for the named costs (Fenwick trees over levels) and
    O(m log m + m L) for a cost matrix, with L the number of distinct labels in the query
    (queries of ``losses._kernels.sorting.RADIX_MIN`` rows or more are radix-sorted,
    O(m)). Queries run in parallel; one query of millions of rows (``qid=None``) is fine.
    :meth:`validate` costs O(n log n) once.
    """

    name = "ordinal"
    pointwise = False
    smooth = False
    row_array_keys = ("row_weight",)

    def __init__(self, *, cost="zero_one", normalize: str = "query", hinge: str = "linear"):
        self.cost = cost
        self.normalize = normalize
        self.hinge = hinge
        self._matrix = _check_cost(cost)
        if normalize not in _NORMALIZE:
            raise ValueError(f"normalize must be one of {list(_NORMALIZE)}; got {normalize!r}")
        if hinge not in _HINGES:
            raise ValueError(f"hinge must be one of {list(_HINGES)}; got {hinge!r}")
        # the squared hinge is continuously differentiable, the hinge is not
        self.smooth = hinge == "squared"

    def _params(self) -> dict[str, Any]:
        cost = self.cost if self._matrix is None else self._matrix.tolist()
        return {"cost": cost, "normalize": self.normalize, "hinge": self.hinge}

    def _kernel_cost(self) -> tuple[float, float, np.ndarray]:
        if self._matrix is None:
            alpha, beta = _COSTS[self.cost]
            return alpha, beta, np.zeros((0, 0))
        return 0.0, 0.0, self._matrix

    def validate(self, y, query_ptr, *, row_weight=None, **data) -> _OrdinalTargets:
        """Map labels to dense per-query level ranks and compute each query's weight.

        Costs O(n log n) once.

        Parameters
        ----------
        y : array-like of shape (n_samples,)
            Relevance levels (non-negative integers) in internal row order.
        query_ptr : ndarray of shape (n_queries + 1,), int64
            Query ``q`` is rows ``query_ptr[q]:query_ptr[q + 1]``.
        row_weight : array-like of shape (n_samples,) or None, default=None
            One non-negative weight per row, internal order (see the class docstring): each
            pair is weighed by the product of its rows' weights.
        **data
            Other loss data keywords; this loss takes none, and any raise ``ValueError``.

        Returns
        -------
        object
            The prepared targets (a named tuple of arrays), for :meth:`loss_grad`.

        Raises
        ------
        ValueError
            For labels that are not non-negative integers, a cost matrix too small for the
            largest label, a bad ``row_weight`` or any other data keyword.
        """
        if data:
            raise ValueError(
                f"the ordinal loss takes no data keywords but row_weight; got {sorted(data)} "
                "(its parameters go to losses.get('ordinal', cost=..., normalize=...))"
            )
        y = check_graded_labels(y)
        query_ptr = np.asarray(query_ptr, dtype=np.int64)
        n = y.shape[0]
        row_weight = _check_row_weight(row_weight, n)
        if self._matrix is not None and n and y.max() >= self._matrix.shape[0]:
            raise ValueError(
                f"cost matrix must be at least ({y.max() + 1}, {y.max() + 1}) to cover "
                f"label {y.max()}; got shape {self._matrix.shape}"
            )
        n_queries = query_ptr.shape[0] - 1
        sizes = np.diff(query_ptr)
        # rows by (query, label), stable: each query's levels in increasing order
        query_of_row = np.repeat(np.arange(n_queries), sizes)
        order = np.lexsort((y, query_of_row))
        y_sorted = y[order]
        first = np.ones(n, dtype=bool)
        first[1:] = y_sorted[1:] != y_sorted[:-1]
        first[query_ptr[:-1][sizes > 0]] = True
        levels = y_sorted[first]
        # n-sized temporaries are freed and updated in place as soon as possible: each takes
        # up to 8 bytes per row, and the peak memory of a fit counts them
        del y, y_sorted
        level_of_sorted = np.cumsum(first)
        level_of_sorted -= 1
        level_ptr = np.zeros(n_queries + 1, dtype=np.int64)
        np.cumsum(np.bincount(query_of_row[first], minlength=n_queries), out=level_ptr[1:])
        starts = np.flatnonzero(first)
        del first
        if row_weight is not None:
            # the summed weight of each level (the sorted rows of a level are contiguous)
            level_count = np.add.reduceat(row_weight[order], starts) if n else np.zeros(0)
            sizes_w = np.bincount(query_of_row, weights=row_weight, minlength=n_queries)
        else:
            level_count = np.diff(np.append(starts, n)).astype(np.float64)
            sizes_w = sizes.astype(np.float64)
        # the rows are sorted by query first, so sorted row i is in query query_of_row[i]
        level_of_sorted -= level_ptr[query_of_row]
        rank = np.empty(n, dtype=np.int32)  # a level rank is below a query's length
        rank[order] = level_of_sorted
        del order, level_of_sorted
        sq = np.bincount(query_of_row[starts], weights=level_count**2, minlength=n_queries)
        n_pairs = 0.5 * (sizes_w**2 - sq)
        if row_weight is not None:
            # Σ_{y_i<y_j} s_i s_j exactly 0 when no pair of positive weights is comparable
            # (rounding can leave a tiny residue in the difference above)
            positive = np.bincount(
                query_of_row[starts], weights=(level_count > 0), minlength=n_queries
            )
            n_pairs[positive < 2] = 0.0
        weight = np.zeros(n_queries)
        has_pairs = n_pairs > 0
        weight[has_pairs] = 1.0 / n_pairs[has_pairs] if self.normalize == "query" else 1.0
        radix = True if n_queries and sizes.max() >= RADIX_MIN else None
        return _OrdinalTargets(
            query_ptr, rank, level_ptr, levels, level_count, weight, row_weight, radix
        )

    def block_kernel(self, targets: _OrdinalTargets):
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
        if self.hinge == "squared":
            return _k.ordinal_squared, (*targets, *self._kernel_cost(), None, None)
        return _k.ordinal_pairs, (*targets, *self._kernel_cost(), True)

    def query_block(self, targets: _OrdinalTargets, start: int, stop: int) -> _OrdinalTargets:
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
            Their targets, rows and levels numbered from 0 (views of ``targets``' arrays).
        """
        rows = slice(int(targets.query_ptr[start]), int(targets.query_ptr[stop]))
        levels = slice(int(targets.level_ptr[start]), int(targets.level_ptr[stop]))
        return _OrdinalTargets(
            rebased_ptr(targets.query_ptr, start, stop),
            targets.rank[rows],
            rebased_ptr(targets.level_ptr, start, stop),
            targets.levels[levels],
            targets.level_count[levels],
            targets.weight[start:stop],
            None if targets.row_weight is None else targets.row_weight[rows],
            targets.radix,  # the paths compiled for all the queries serve any block of them
        )

    @property
    def hessp(self):
        """The Hessian product ``hessp(f, d, targets)`` of the squared hinge, or None.

        For the squared hinge, H_f d with H the generalised Hessian of the summed per-query
        losses in f: per query 2 w_q Σ C (d_i − d_j)(e_i − e_j) over the pairs with
        1 + f_i − f_j > 0, in O(m log m + m log L) per query (O(m L) with a cost matrix).
        None for the hinge, which has no Hessian (:mod:`losses._base`).
        """
        return self._squared_hessp if self.hinge == "squared" else None

    def hessp_kernel(self, f, targets: _OrdinalTargets):
        """Return the block kernel of :attr:`hessp` at the scores ``f``, or None for the hinge.

        The queries are sorted once here for all the products at ``f``.

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in internal row order.
        targets : object
            What :meth:`validate` returned.

        Returns
        -------
        tuple or None
            ``(kernel, args)``, ``kernel(q_start, q_stop, d, *args, values, out)`` writing
            H_f d of the queries ``q_start:q_stop`` into ``out`` (``values`` untouched); None
            for the hinge.
        """
        if self.hinge != "squared":
            return None
        f = np.ascontiguousarray(f, dtype=np.float64)
        return _k.ordinal_squared_hessp, (
            f,
            *targets,
            *self._kernel_cost(),
            self._sorted(f, targets),
        )

    @staticmethod
    def _sorted(f, targets: _OrdinalTargets) -> np.ndarray:
        """Each query's rows in ascending order of f: sorted once for many products at f,
        held in four bytes per row (row indices within a query)."""
        order = np.empty(f.shape[0], dtype=np.int32)
        run_queries(_k.sort_queries, targets.query_ptr, f, targets.query_ptr, targets.radix, order)
        return order

    def _squared_hessp(self, f, d, targets: _OrdinalTargets) -> np.ndarray:
        """H_f d, H the generalised Hessian of the summed per-query losses in f: per query
        2 w_q Σ C (d_i − d_j)(e_i − e_j) over the pairs with 1 + f_i − f_j > 0. O(m log m +
        m log L) per query (O(m L) with a cost matrix)."""
        f = np.ascontiguousarray(f, dtype=np.float64)
        d = np.ascontiguousarray(d, dtype=np.float64)
        out = np.empty_like(f)
        run_queries(
            _k.ordinal_squared_hessp, targets.query_ptr, d, f, *targets, *self._kernel_cost(),
            None, np.empty(0), out,
        )  # fmt: skip
        return out

    def loss_grad(self, f, targets: _OrdinalTargets) -> tuple[np.ndarray, np.ndarray]:
        """Return the per-query losses and the subgradient of their sum.

        See the class docstring for the formula and its conventions.

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
        values = np.empty(targets.weight.shape[0])
        grad = np.empty_like(f)
        kernel, args = self.block_kernel(targets)
        run_queries(kernel, targets.query_ptr, f, *args, values, grad)
        return values, grad

    def metric(self, f, targets: _OrdinalTargets) -> np.ndarray:
        """Per-query weighted count of misordered comparable pairs, normalised as the loss.

        A pair with y_i < y_j is misordered when f_i >= f_j (ties count as errors, the worst
        tie-breaking), so the hinge loss upper-bounds it.

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in internal row order.
        targets : object
            What :meth:`validate` returned.

        Returns
        -------
        ndarray of shape (n_queries,)
            The weighted count of misordered pairs of each query.
        """
        f = np.ascontiguousarray(f, dtype=np.float64)
        values = np.empty(targets.weight.shape[0])
        run_queries(
            _k.ordinal_pairs,
            targets.query_ptr,
            f,
            *targets,
            *self._kernel_cost(),
            False,
            values,
            np.empty(0),
        )
        return values

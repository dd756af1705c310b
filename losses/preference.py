"""Ranking from explicit preference relations: a cost-weighted hinge per preferred pair.

References
----------
Teo, Vishwanathan, Smola & Le, "Bundle Methods for Regularized Risk Minimization",
JMLR 11 (2010), ranking appendix §1.3 and its Algorithm 2.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from losses._base import Loss
from losses._kernels import preference as _k
from losses._query import group_queries
from losses._threads import run_queries
from losses.validation import check_finite_targets

__all__ = ["PAIR_COSTS", "PreferenceLoss", "pairs_from_labels"]

_NORMALIZE = ("query", "none")
_HINGES = ("linear", "squared")
# the pair costs pairs_from_labels builds from labels
PAIR_COSTS = ("zero_one", "linear", "gain_difference")


class _PreferenceTargets(NamedTuple):
    pref_ptr: np.ndarray  # int64 (n_queries + 1,): pairs of query q at pref_ptr[q]:[q+1]
    pair_i: np.ndarray  # uint32 (int64 from 2^32 rows): the row that should rank lower
    pair_j: np.ndarray  # uint32 (int64 from 2^32 rows): the row that should rank higher
    pair_cost: np.ndarray  # float64, or empty when every cost is equal (folded into weight)
    weight: np.ndarray  # float64 (n_queries,): normalisation per query


class PreferenceLoss(Loss):
    r"""Cost-weighted hinge over given preference pairs, grouped by query.

    A pair (i, j) with cost c says row j should rank above row i. For one query with pair
    set P_q,

    .. math::

        l(f) = \frac{1}{|P_q|} \sum_{(i, j) \in P_q} c_{ij} \max(0, 1 + f_i - f_j)^p,

    p = 1 (the hinge) or p = 2 (``hinge="squared"``).

    Parameters
    ----------
    normalize : {"query", "none"}, default "query"
        ``"query"`` divides by the number of pairs of the query, ``"none"`` sums the pair
        terms.
    hinge : {"linear", "squared"}, default "linear"
        p above. The squared hinge (the L2-loss RankSVM of Lee & Lin, "Large-scale linear
        RankSVM", Neural Computation 26, 2014, on given pairs) is continuously
        differentiable, with the generalised Hessian 2 w_q Σ_{active} c (e_i − e_j)(e_i −
        e_j)ᵀ whose products :attr:`hessp` computes (see
        :class:`losses.ordinal.OrdinalLoss` for the mapping to LIBLINEAR's objective).

    Notes
    -----
    Data keywords of :meth:`validate` (through :func:`losses.risk` or :func:`bmrm.fit`):
    ``pairs``, an integer array of shape (n_pairs, 2) of row indices (i, j) in the caller's
    row order (remapped by :func:`losses.prepare` when rows are regrouped by query), and
    ``pair_costs``, shape (n_pairs,), finite and non-negative (default 1). Both rows of a
    pair must lie in the same query. ``y`` is not used beyond its length; build pairs from
    graded labels with :func:`pairs_from_labels`.

    Conventions: a query without pairs has loss 0 and gradient 0; a pair exactly at the
    hinge (1 + f_i − f_j = 0) contributes subgradient 0 (and no curvature); repeated pairs
    count repeatedly.
    Cost O(|P|) per evaluation, queries in parallel. :meth:`metric` is the weighted count
    of violated preferences (f_i >= f_j, ties count as violations), which the loss bounds.
    """

    name = "preference"
    pointwise = False
    smooth = False
    row_index_keys = ("pairs",)

    def __init__(self, *, normalize: str = "query", hinge: str = "linear"):
        self.normalize = normalize
        self.hinge = hinge
        if normalize not in _NORMALIZE:
            raise ValueError(f"normalize must be one of {list(_NORMALIZE)}; got {normalize!r}")
        if hinge not in _HINGES:
            raise ValueError(f"hinge must be one of {list(_HINGES)}; got {hinge!r}")
        # the squared hinge is continuously differentiable, the hinge is not
        self.smooth = hinge == "squared"

    def _params(self) -> dict[str, Any]:
        return {"normalize": self.normalize, "hinge": self.hinge}

    def validate(self, y, query_ptr, pairs=None, pair_costs=None, **data) -> _PreferenceTargets:
        """Check the pairs (internal row indices) and group them per query.

        Parameters
        ----------
        y : array-like of shape (n_samples,)
            Targets in internal row order; only their number is used.
        query_ptr : ndarray of shape (n_queries + 1,), int64
            Query ``q`` is rows ``query_ptr[q]:query_ptr[q + 1]``.
        pairs : array-like of shape (n_pairs, 2), int
            Internal row indices (i, j), row j to rank above row i, both in one query.
            Required; the None default only lets the error name it.
        pair_costs : array-like of shape (n_pairs,) or None, default=None
            Finite non-negative costs of the pairs; None costs 1 each.
        **data
            Other loss data keywords; this loss takes none, and any raise ``ValueError``.

        Returns
        -------
        object
            The prepared targets (a named tuple of arrays), for :meth:`loss_grad`.

        Raises
        ------
        ValueError
            When ``pairs`` is missing or malformed, joins a row to itself or rows of two
            queries, or ``pair_costs`` is malformed.
        """
        if data:
            raise ValueError(
                f"the preference loss takes data keywords pairs and pair_costs; got "
                f"{sorted(data)} (its parameter normalize goes to losses.get('preference', ...))"
            )
        query_ptr = np.asarray(query_ptr, dtype=np.int64)
        n = int(query_ptr[-1])
        n_queries = query_ptr.shape[0] - 1
        if pairs is None:
            raise ValueError(
                "the preference loss needs pairs=, an integer array (n_pairs, 2) of row "
                "indices (i, j) meaning row j should rank above row i; build them from "
                "graded labels with losses.pairs_from_labels(y, qid)"
            )
        pairs = np.asarray(pairs)
        if pairs.ndim != 2 or pairs.shape[1] != 2:
            raise ValueError(f"pairs must have shape (n_pairs, 2); got shape {pairs.shape}")
        if pairs.dtype.kind not in "iu":
            raise ValueError(f"pairs must hold integer row indices; got dtype {pairs.dtype}")
        if pairs.size and (pairs.min() < 0 or pairs.max() >= n):
            raise ValueError(f"pairs holds row indices outside [0, {n})")
        pair_i = pairs[:, 0].astype(np.int64)
        pair_j = pairs[:, 1].astype(np.int64)
        same = np.flatnonzero(pair_i == pair_j)
        if same.size:
            k = same[0]
            raise ValueError(
                f"pairs must join two different rows; pair {k} is ({pair_i[k]}, {pair_j[k]})"
            )
        query_i = np.searchsorted(query_ptr, pair_i, side="right") - 1
        query_j = np.searchsorted(query_ptr, pair_j, side="right") - 1
        cross = np.flatnonzero(query_i != query_j)
        if cross.size:
            raise ValueError(
                f"pairs must join rows of the same query; pair {cross[0]} joins rows of two "
                "different queries"
            )
        n_pairs = pairs.shape[0]
        if pair_costs is None:
            costs = np.ones(n_pairs)
        else:
            costs = np.asarray(pair_costs)
            if costs.dtype.kind not in "iuf":
                raise ValueError(f"pair_costs must be numeric; got dtype {costs.dtype}")
            if costs.shape != (n_pairs,):
                raise ValueError(
                    f"pair_costs must have shape ({n_pairs},), one cost per pair; "
                    f"got shape {costs.shape}"
                )
            costs = costs.astype(np.float64)
            if not np.all(np.isfinite(costs)):
                raise ValueError("pair_costs must not contain NaN or inf")
            if np.any(costs < 0):
                raise ValueError(f"pair_costs must be non-negative; got {costs.min()!r}")
        order = np.argsort(query_i, kind="stable")
        per_query = np.bincount(query_i, minlength=n_queries)
        pref_ptr = np.zeros(n_queries + 1, dtype=np.int64)
        np.cumsum(per_query, out=pref_ptr[1:])
        weight = np.zeros(n_queries)
        has_pairs = per_query > 0
        weight[has_pairs] = 1.0 / per_query[has_pairs] if self.normalize == "query" else 1.0
        costs = costs[order]
        if costs.size and np.all(costs == costs[0]):
            # a uniform cost moves into the query weights, so the kernel streams no costs
            weight = weight * costs[0]
            costs = np.empty(0)
        # 32-bit row indices halve the memory the kernel streams per pair; unsigned ones
        # spare the kernel numba's test for negative indices (losses._kernels.preference)
        index = np.uint32 if len(y) < 2**32 else np.int64
        return _PreferenceTargets(
            pref_ptr,
            pair_i[order].astype(index),
            pair_j[order].astype(index),
            costs,
            weight,
        )

    def loss_grad(self, f, targets: _PreferenceTargets) -> tuple[np.ndarray, np.ndarray]:
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
        grad = np.zeros_like(f)
        # blocks of queries balanced by their number of pairs, the kernel's work
        if self.hinge == "squared":
            run_queries(_k.preference_squared, targets.pref_ptr, f, *targets, None, values, grad)
        else:
            run_queries(_k.preference_hinge, targets.pref_ptr, f, *targets, values, grad)
        return values, grad

    @property
    def hessp(self):
        """The Hessian product ``hessp(f, d, targets)`` of the squared hinge, or None.

        For the squared hinge, H_f d with H the generalised Hessian of the summed per-query
        losses in f: per query 2 w_q Σ c (d_i − d_j)(e_i − e_j) over the pairs with
        1 + f_i − f_j > 0, in O(|P|). None for the hinge, which has no Hessian
        (:mod:`losses._base`).
        """
        return self._squared_hessp if self.hinge == "squared" else None

    def _squared_hessp(self, f, d, targets: _PreferenceTargets) -> np.ndarray:
        """H_f d, H the generalised Hessian of the summed per-query losses in f: per query
        2 w_q Σ c (d_i − d_j)(e_i − e_j) over the pairs with 1 + f_i − f_j > 0; O(|P|)."""
        f = np.ascontiguousarray(f, dtype=np.float64)
        d = np.ascontiguousarray(d, dtype=np.float64)
        out = np.zeros_like(f)
        run_queries(_k.preference_squared, targets.pref_ptr, f, *targets, d, np.empty(0), out)
        return out

    def metric(self, f, targets: _PreferenceTargets) -> np.ndarray:
        """Return the per-query weighted count of violated preferences (f_i >= f_j).

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in internal row order.
        targets : object
            What :meth:`validate` returned.

        Returns
        -------
        ndarray of shape (n_queries,)
            The count of each query, weighted and normalised as the loss.
        """
        f = np.ascontiguousarray(f, dtype=np.float64)
        values = np.empty(targets.weight.shape[0])
        run_queries(_k.preference_violations, targets.pref_ptr, f, *targets, values)
        return values


def pairs_from_labels(y, qid=None, *, cost: str = "zero_one") -> tuple[np.ndarray, np.ndarray]:
    """Return all pairs (i, j) with y_i < y_j within each query, and their costs.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Finite relevance labels.
    qid : array-like of shape (n_samples,) or None, default=None
        Query id per row; ``None`` is one query.
    cost : {"zero_one", "linear", "gain_difference"}, default="zero_one"
        The cost of pair (i, j): 1, y_j − y_i, or 2^{y_j} − 2^{y_i} (the difference of the
        exponential NDCG gains 2^y − 1).

    Returns
    -------
    pairs : ndarray of int64, shape (n_pairs, 2)
        Caller row indices (i, j), row j more relevant, grouped by query and then ordered
        by (i, j) in the grouped row order; ready for ``pairs=`` of the preference loss.
    costs : ndarray of float64, shape (n_pairs,)
        Ready for ``pair_costs=``.

    Notes
    -----
    There are up to m²/4 pairs per query of m rows: time and memory O(Σ_q m_q²). With
    ``cost="zero_one"`` the preference loss on these pairs equals the ordinal loss.

    Examples
    --------
    >>> from losses import pairs_from_labels
    >>> pairs, costs = pairs_from_labels([0, 2, 1], cost="linear")
    >>> pairs.tolist(), costs.tolist()
    ([[0, 1], [0, 2], [2, 1]], [2.0, 1.0, 1.0])
    """
    if cost not in PAIR_COSTS:
        raise ValueError(f"cost must be one of {list(PAIR_COSTS)}; got {cost!r}")
    y = check_finite_targets(y)
    groups = group_queries(qid, y.shape[0])
    y_int = np.ascontiguousarray(groups.to_internal(y))
    counts = np.empty(groups.n_queries, dtype=np.int64)
    run_queries(_k.count_label_pairs, groups.query_ptr, y_int, groups.query_ptr, counts)
    pref_ptr = np.zeros(groups.n_queries + 1, dtype=np.int64)
    np.cumsum(counts, out=pref_ptr[1:])
    pair_i = np.empty(pref_ptr[-1], dtype=np.int64)
    pair_j = np.empty(pref_ptr[-1], dtype=np.int64)
    run_queries(
        _k.fill_label_pairs, groups.query_ptr, y_int, groups.query_ptr, pref_ptr, pair_i, pair_j
    )
    if cost == "zero_one":
        costs = np.ones(pair_i.shape[0])
    elif cost == "linear":
        costs = y_int[pair_j] - y_int[pair_i]
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            costs = np.exp2(y_int[pair_j]) - np.exp2(y_int[pair_i])
        if not np.all(np.isfinite(costs)):
            raise ValueError("y is too large for cost='gain_difference': 2^y overflows")
    pairs = np.column_stack((pair_i, pair_j))
    if groups.order is not None:
        pairs = groups.order[pairs]
    return pairs, costs

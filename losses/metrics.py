"""Ranking measures over query groups: NDCG, DCG, MAP, P@k, recall, F, MRR, ERR, NERU, tau.

Every measure is ``<name>_score(y_true, y_score, qid=None, *, k=None, ..., per_query=False)``:
``y_true`` holds graded relevance labels, ``y_score`` the scores of a ranker (higher ranks
first), ``qid`` one query id per row (``None``: all rows are one query). The result is the
mean over queries, or with ``per_query=True`` one value per query **in order of first
appearance of each id in** ``qid``. Cost: one O(n log n) sort per query, then O(n) (the
tie-aware expectations cost O(m·k) per tie group of m documents, O(L·m·k) for ERR on L
label levels).

Conventions
-----------
Cutoff
    ``k=None`` uses the whole list. A query with fewer than ``k`` documents is scored on the
    documents it has, except that P@k, F@k and AP@k with ``normalize="k"`` divide by ``k``
    (missing positions count as irrelevant, as trec_eval and the LETOR 4.0 tool do), and
    that ``convention="letor"`` scores NDCG@k (and DCG@k) of such a query as 0.
Relevance for the binary measures
    A document is relevant when its label is ``> 0``, or ``>= threshold`` when given.
Queries with nothing to find
    Measures normalised by something a query may lack (NDCG and NERU: no document with a
    positive gain; AP, recall, F, RR: no relevant document; Kendall's tau: no pair to
    compare) give ``empty`` for it: a number (default 0, as trec_eval, scikit-learn and the
    LETOR tool count them) or ``"skip"`` to leave the query out of the mean (its
    ``per_query`` value is NaN; the mean of no query is NaN).
Ties among scores (``ties=``)
    ``"average"`` (the default, because it does not depend on the order the rows are given
    in): the expected value of the measure when each run of equal scores is put in uniformly
    random order. For the measures linear in the positions (DCG, NDCG, P@k, recall@k, F@k,
    ERU) this is the mean gain of the tied group times the sum of its positions' discounts,
    the form of McSherry & Najork (2008) and scikit-learn's ``ndcg_score``; AP, RR and ERR
    use the exact expectations (see :mod:`losses._kernels.metrics`). ``"stable"``: equal
    scores keep their row order (the LETOR 4.0 tool ranks ties in file order).

Reproducing published figures
    LETOR 4.0 tables: ``ndcg_score(..., convention="letor")``, ``precision_score(...,
    threshold=1, ties="stable")``, ``map_score(..., threshold=1, ties="stable")``.
    trec_eval (``ndcg_cut``, ``P``, ``map``, ``recip_rank``): ``convention="linear"`` and
    distinct scores (trec_eval breaks ties by document name). scikit-learn's ``ndcg_score``
    and ``dcg_score``: ``convention="linear"``, with ``ties="average"`` for its default and
    ``ties="stable"`` for ``ignore_ties=True`` on distinct scores.

References
----------
Järvelin & Kekäläinen, "Cumulated gain-based evaluation of IR techniques", ACM TOIS 20
(2002) (DCG, NDCG). Burges et al., "Learning to rank using gradient descent", ICML 2005
(gain 2^r − 1). Chapelle, Metzler, Zhang & Grinspan, "Expected reciprocal rank for graded
relevance", CIKM 2009 (ERR). Breese, Heckerman & Kadie, "Empirical analysis of predictive
algorithms for collaborative filtering", UAI 1998 (half-life utility, ERU). Weimer,
Karatzoglou, Le & Smola, "CofiRank", NIPS 2007 (NERU). McSherry & Najork, "Computing
information retrieval performance measures efficiently in the presence of tied scores",
ECIR 2008. Kendall, "The treatment of ties in ranking problems", Biometrika 33 (1945)
(tau-b). Murphy, "Machine Learning: A Probabilistic Perspective" (2012), §9.7.4 (MRR, P@k,
AP, both DCG conventions, weighted Kendall's tau, eq. 9.130). Qin & Liu, "Introducing
LETOR 4.0 datasets", arXiv:1306.2597 (2013).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from types import MappingProxyType

import numpy as np

from losses._kernels import metrics as _k
from losses._query import QueryGroups, group_queries
from losses._threads import run_queries
from losses.validation import check_bool, check_int, check_k, check_real

__all__ = [
    "CONVENTIONS",
    "METRICS",
    "dcg_score",
    "discount_values",
    "err_score",
    "f1_score",
    "fbeta_score",
    "gain_values",
    "ideal_dcg",
    "kendall_tau_score",
    "map_score",
    "mrr_score",
    "ndcg_score",
    "neru_score",
    "precision_score",
    "recall_score",
]

# convention -> (gain, discount); "letor" also fixes ties, empty and short queries
_CONVENTIONS = {
    "exp": ("exp", "log2"),
    "linear": ("linear", "log2"),
    "letor": ("exp", "original"),
}
CONVENTIONS = tuple(_CONVENTIONS)
_LETOR_FIXED = {"gain": "exp", "discount": "original", "ties": "stable", "empty": 0.0}
_TIES = ("average", "stable")
_GAINS = ("exp", "linear")
_DISCOUNTS = ("log2", "original")
_NORMALIZE = ("relevant", "k")
_KENDALL_WEIGHTS = (None, "uniform", "label", "gain")

Gain = str | Callable[[np.ndarray], np.ndarray]

# Below this many rows the metric kernels run on the calling thread (see losses._threads).
_PARALLEL_MIN_ROWS = 100_000


# ----------------------------------------------------------------------------- validation


def _choice(name: str, value, choices) -> None:
    if not isinstance(value, str | type(None)) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}; got {value!r}")


def _check_empty(empty) -> float | str:
    if isinstance(empty, str):
        if empty != "skip":
            raise ValueError(f"empty must be a number or 'skip'; got {empty!r}")
        return empty
    if isinstance(empty, bool) or not isinstance(empty, numbers.Real) or np.isnan(empty):
        raise ValueError(f"empty must be a number or 'skip'; got {empty!r}")
    return float(empty)


def _as_scores(a, name: str) -> np.ndarray:
    try:
        raw = np.asarray(a)
    except (TypeError, ValueError) as exc:  # ragged nested sequences
        raise ValueError(f"{name} must be a 1-d array of real numbers ({exc})") from None
    real = raw.dtype.kind in "biuf" or (
        raw.dtype.kind == "O" and all(isinstance(v, numbers.Real) for v in raw.ravel().tolist())
    )
    if not real:
        raise ValueError(
            f"{name} must hold real numbers (a bool, integer or float dtype); got dtype "
            f"{raw.dtype}"
        )
    a = raw.astype(np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-d; got shape {a.shape}")
    if a.shape[0] == 0:
        raise ValueError(f"{name} must not be empty")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must not contain NaN or inf")
    return a


def _relevance(y: np.ndarray, threshold) -> np.ndarray:
    if threshold is None:
        return (y > 0).astype(np.float64)
    return (y >= check_real(threshold, "threshold")).astype(np.float64)


# ----------------------------------------------------------------------------- building blocks


def _gains(y: np.ndarray, gain: Gain, name: str) -> np.ndarray:
    if callable(gain):
        g = np.asarray(gain(y), dtype=np.float64)
        if g.shape != y.shape:
            raise ValueError(f"gain must map {name} to an array of its shape; got {g.shape}")
        if not np.all(np.isfinite(g)) or np.any(g < 0):
            raise ValueError(f"gain must give finite non-negative values for {name}")
        return g
    _choice("gain", gain, _GAINS)
    if np.any(y < 0):
        raise ValueError(f"{name} must be non-negative for a gain-based measure")
    if gain == "linear":
        return y.astype(np.float64, copy=True)
    with np.errstate(over="ignore"):
        g = np.exp2(y) - 1.0
    if not np.all(np.isfinite(g)):
        raise ValueError(f"{name} is too large for the gain 2^r - 1 (overflow)")
    return g


def gain_values(y, gain: Gain = "exp") -> np.ndarray:
    """Return the gain of each relevance label.

    Parameters
    ----------
    y : array-like of shape (n,)
        Non-negative relevance labels.
    gain : {"exp", "linear"} or callable, default="exp"
        ``"exp"``: 2^y − 1 (Burges et al. 2005; exact for integer labels); ``"linear"``: y
        (Järvelin & Kekäläinen 2002, trec_eval, scikit-learn). A callable maps the label
        array to a non-negative gain array of the same shape (e.g. ``np.exp2``).

    Returns
    -------
    ndarray of float64, shape (n,)
        The gains.

    Examples
    --------
    >>> from losses.metrics import gain_values
    >>> gain_values([0, 1, 2]).tolist()
    [0.0, 1.0, 3.0]
    """
    return _gains(_as_scores(y, "y"), gain, "y")


def discount_values(n: int, discount: str = "log2") -> np.ndarray:
    """Return the discount of positions 1..n.

    Parameters
    ----------
    n : int
        Number of positions (>= 0).
    discount : {"log2", "original"}, default="log2"
        ``"log2"``: 1 / log2(i + 1). ``"original"``: 1 at position 1 and 1 / log2(i) after
        (Järvelin & Kekäläinen 2002; positions 1 and 2 are both undiscounted, as in the
        LETOR 4.0 tool).

    Returns
    -------
    ndarray of float64, shape (n,)
        Non-increasing and positive.
    """
    _choice("discount", discount, _DISCOUNTS)
    check_int(n, "n", 0)
    i = np.arange(1, n + 1, dtype=np.float64)
    if discount == "log2":
        return 1.0 / np.log2(i + 1.0)
    return 1.0 / np.log2(np.maximum(i, 2.0))


def ideal_dcg(
    y, query_ptr, *, k: int | None = None, gain: Gain = "exp", discount: str = "log2"
) -> np.ndarray:
    """Return the ideal DCG@k of each query: the DCG of its labels sorted decreasingly.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Non-negative labels, rows of each query contiguous.
    query_ptr : array-like of int, shape (n_queries + 1,)
        Query ``q`` holds rows ``query_ptr[q]:query_ptr[q + 1]``.
    k : int or None, default=None
        Cutoff (None: the whole query).
    gain : {"exp", "linear"} or callable, default="exp"
        As in :func:`gain_values`.
    discount : {"log2", "original"}, default="log2"
        As in :func:`discount_values`.

    Returns
    -------
    ndarray of float64, shape (n_queries,)
        Σ_{i<=min(k, n_q)} gain(y_(i)) discount(i) with y_(1) >= y_(2) >= ..., the largest
        DCG@k over all orderings (the discount is non-increasing); 0 for a query without a
        document of positive gain. Cost O(n log n).
    """
    check_k(k)
    g = _gains(_as_scores(y, "y"), gain, "y")
    ptr = np.asarray(query_ptr)
    if ptr.dtype.kind not in "iuf" or ptr.ndim != 1 or ptr.size == 0:
        raise ValueError(f"query_ptr must be a non-empty 1-d array of integers; got {query_ptr!r}")
    if ptr.dtype.kind == "f":
        bad = ptr[~np.isfinite(ptr) | (ptr != np.round(ptr))]
        if bad.size:
            raise ValueError(f"query_ptr must hold integers; got {float(bad[0])!r}")
    query_ptr = np.ascontiguousarray(ptr, dtype=np.int64)
    if query_ptr[0] != 0 or query_ptr[-1] != g.shape[0]:
        raise ValueError(f"query_ptr must run from 0 to {g.shape[0]}")
    if np.any(np.diff(query_ptr) < 0):
        raise ValueError("query_ptr must be non-decreasing")
    n_max = int(np.diff(query_ptr).max(initial=0))
    cutoff = n_max if k is None else int(min(k, n_max))
    out = np.empty(query_ptr.shape[0] - 1)
    run_queries(
        _k.ideal_linear_measure,
        query_ptr,
        g,
        query_ptr,
        discount_values(n_max, discount),
        cutoff,
        out,
        min_rows=_PARALLEL_MIN_ROWS,
    )
    return out


# ----------------------------------------------------------------------------- shared driver


class _Ranked:
    """Validated labels and scores in query-contiguous order, each query sorted by score."""

    def __init__(self, y_true, y_score, qid, k, ties: str, per_query: bool):
        check_bool(per_query, "per_query")
        check_k(k)
        _choice("ties", ties, _TIES)
        y = _as_scores(y_true, "y_true")
        f = _as_scores(y_score, "y_score")
        if f.shape[0] != y.shape[0]:
            raise ValueError(
                f"y_score must have the same length as y_true ({y.shape[0]}); got {f.shape[0]}"
            )
        self.groups: QueryGroups = group_queries(qid, y.shape[0])
        self.y = np.ascontiguousarray(self.groups.to_internal(y))
        self.f = np.ascontiguousarray(self.groups.to_internal(f))
        self.ptr = self.groups.query_ptr
        self.lengths = np.diff(self.ptr)
        self.n_max = int(self.lengths.max())
        self.k = k
        self.cutoff = self.n_max if k is None else int(min(k, self.n_max))
        self.average = ties == "average"
        self.order = np.empty(self.y.shape[0], dtype=np.int64)
        self.call(_k.sort_by_score, self.f, self.ptr, self.order)

    def call(self, kernel, *args) -> None:
        """``kernel(q_start, q_stop, *args)`` over blocks of queries (see losses._threads)."""
        run_queries(kernel, self.ptr, *args, min_rows=_PARALLEL_MIN_ROWS)

    def per_query_sum(self, a: np.ndarray) -> np.ndarray:
        return np.add.reduceat(a, self.ptr[:-1])

    def linear(self, gain: np.ndarray, weight: np.ndarray) -> np.ndarray:
        out = np.empty(self.groups.n_queries)
        self.call(
            _k.linear_measure,
            self.f,
            gain,
            self.ptr,
            self.order,
            weight,
            self.cutoff,
            self.average,
            out,
        )
        return out

    def ideal(self, gain: np.ndarray, weight: np.ndarray) -> np.ndarray:
        out = np.empty(self.groups.n_queries)
        self.call(_k.ideal_linear_measure, gain, self.ptr, weight, self.cutoff, out)
        return out

    def run(self, kernel, values: np.ndarray) -> np.ndarray:
        out = np.empty(self.groups.n_queries)
        self.call(kernel, self.f, values, self.ptr, self.order, self.cutoff, self.average, out)
        return out

    def finish(self, values: np.ndarray, empty_mask, empty, per_query: bool):
        """Apply the ``empty`` rule, then the mean or the per-query values."""
        if empty_mask is not None:
            values[empty_mask] = np.nan if empty == "skip" else empty
        if per_query:
            if self.groups.order is None:
                return values
            first_row = self.groups.order[self.ptr[:-1]]
            return values[np.argsort(first_row)]
        counted = values[~np.isnan(values)]
        return float(counted.mean()) if counted.size else float("nan")


def _k_of(data: _Ranked) -> np.ndarray:
    """The divisor of P@k: k, or the query length without a cutoff."""
    return data.lengths.astype(np.float64) if data.k is None else np.float64(data.k)


# ----------------------------------------------------------------------------- DCG / NDCG


def _dcg_settings(convention, gain, discount, ties, empty):
    _choice("convention", convention, _CONVENTIONS)
    given = {"gain": gain, "discount": discount, "ties": ties, "empty": empty}
    if convention == "letor":
        for name, value in given.items():
            if value is not None and value != _LETOR_FIXED[name]:
                raise ValueError(
                    f"convention='letor' fixes {name}={_LETOR_FIXED[name]!r}; got {value!r}"
                )
        return "exp", "original", "stable", 0.0
    default_gain, default_discount = _CONVENTIONS[convention]
    return (
        default_gain if gain is None else gain,
        default_discount if discount is None else discount,
        "average" if ties is None else ties,
        0.0 if empty is None else empty,
    )


def _dcg_parts(y_true, y_score, qid, k, convention, gain, discount, ties, empty, per_query):
    gain, discount, ties, empty = _dcg_settings(convention, gain, discount, ties, empty)
    empty = _check_empty(empty)
    data = _Ranked(y_true, y_score, qid, k, ties, per_query)
    g = _gains(data.y, gain, "y_true")
    weight = discount_values(data.n_max, discount)
    short = data.lengths < k if (convention == "letor" and k is not None) else None
    return data, g, weight, empty, short


def dcg_score(
    y_true,
    y_score,
    qid=None,
    *,
    k: int | None = None,
    convention: str = "exp",
    gain: Gain | None = None,
    discount: str | None = None,
    ties: str | None = None,
    per_query: bool = False,
):
    """Discounted cumulative gain DCG@k = Σ_{i=1}^{min(k, n)} gain(r_i) · discount(i).

    r_i is the label of the document at position i of the ranking by decreasing score.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Non-negative relevance labels.
    y_score : array-like of shape (n_samples,)
        Scores; higher ranks first.
    qid : array-like of shape (n_samples,) or None, default=None
        Query id of each row; None makes all rows one query.
    k : int or None, default=None
        Cutoff (an integer >= 1); None uses the whole list.
    convention : {"exp", "linear", "letor"}, default="exp"
        Presets: ``"exp"`` gain 2^r − 1 and discount 1/log2(i + 1); ``"linear"`` gain r
        and discount 1/log2(i + 1) (trec_eval, scikit-learn); ``"letor"`` the LETOR 4.0
        tool: gain 2^r − 1, discount 1 at positions 1 and 2 and 1/log2(i) after,
        ``ties="stable"``, and a score of 0 for a query with fewer than k documents.
    gain : {"exp", "linear"}, callable or None, default=None
        Overrides the preset's gain (see :func:`gain_values`); it may not differ from it
        for ``"letor"``.
    discount : {"log2", "original"} or None, default=None
        Overrides the preset's discount (see :func:`discount_values`); it may not differ
        from it for ``"letor"``.
    ties : {"average", "stable"} or None, default=None
        Overrides the preset's rule for equal scores (module docstring); None is
        ``"average"``, or ``"stable"`` for ``"letor"``.
    per_query : bool, default=False
        Return one value per query, in order of first appearance in ``qid``.

    Returns
    -------
    float or ndarray of shape (n_queries,)
        The mean over queries, or with ``per_query=True`` the value of each query.
    """
    data, g, weight, _, short = _dcg_parts(
        y_true, y_score, qid, k, convention, gain, discount, ties, None, per_query
    )
    values = data.linear(g, weight)
    if short is not None:
        values[short] = 0.0
    return data.finish(values, None, None, per_query)


def ndcg_score(
    y_true,
    y_score,
    qid=None,
    *,
    k: int | None = None,
    convention: str = "exp",
    gain: Gain | None = None,
    discount: str | None = None,
    ties: str | None = None,
    empty: float | str | None = None,
    per_query: bool = False,
):
    """Normalised DCG: NDCG@k = DCG@k / IDCG@k, in [0, 1].

    IDCG@k is the DCG@k of the labels sorted decreasingly (:func:`ideal_dcg`); both are
    computed on the documents the query has, so a query shorter than k is scored on its
    whole list, except under ``convention="letor"`` where it gets 0.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Non-negative relevance labels.
    y_score : array-like of shape (n_samples,)
        Scores; higher ranks first.
    qid : array-like of shape (n_samples,) or None, default=None
        Query id of each row; None makes all rows one query.
    k : int or None, default=None
        Cutoff (an integer >= 1); None uses the whole list.
    convention : {"exp", "linear", "letor"}, default="exp"
        Presets: ``"exp"`` gain 2^r − 1 and discount 1/log2(i + 1); ``"linear"`` gain r
        and discount 1/log2(i + 1) (trec_eval, scikit-learn); ``"letor"`` the LETOR 4.0
        tool: gain 2^r − 1, discount 1 at positions 1 and 2 and 1/log2(i) after,
        ``ties="stable"``, and a score of 0 for a query with fewer than k documents.
    gain : {"exp", "linear"}, callable or None, default=None
        Overrides the preset's gain (see :func:`gain_values`); it may not differ from it
        for ``"letor"``.
    discount : {"log2", "original"} or None, default=None
        Overrides the preset's discount (see :func:`discount_values`); it may not differ
        from it for ``"letor"``.
    ties : {"average", "stable"} or None, default=None
        Overrides the preset's rule for equal scores (module docstring); None is
        ``"average"``, or ``"stable"`` for ``"letor"``.
    empty : float, "skip" or None, default=None
        Value of a query with no document of positive gain (IDCG = 0); ``"skip"`` leaves
        the query out of the mean (its ``per_query`` value is NaN). None: 0 (as
        scikit-learn, trec_eval and the LETOR tool; ``"letor"`` allows only 0).
    per_query : bool, default=False
        Return one value per query, in order of first appearance in ``qid``.

    Returns
    -------
    float or ndarray of shape (n_queries,)
        The mean over queries, or with ``per_query=True`` the value of each query.

    Notes
    -----
    Cost O(n log n) for the sorts plus O(n) (O(m·k) per tie group with ``ties="average"``).
    With ``convention="linear"`` the value is trec_eval's ``ndcg_cut`` (on distinct scores)
    and scikit-learn's ``ndcg_score``.

    Examples
    --------
    Two queries; the first is ranked ideally, the second has its two documents swapped:

    >>> from losses.metrics import ndcg_score
    >>> y_true = [2, 1, 0, 1, 0]
    >>> y_score = [0.9, 0.5, 0.1, 0.2, 0.8]
    >>> qid = [1, 1, 1, 2, 2]
    >>> ndcg_score(y_true, y_score, qid, per_query=True).round(4).tolist()
    [1.0, 0.6309]
    """
    data, g, weight, empty, short = _dcg_parts(
        y_true, y_score, qid, k, convention, gain, discount, ties, empty, per_query
    )
    dcg = data.linear(g, weight)
    ideal = data.ideal(g, weight)
    values = np.divide(dcg, ideal, out=np.zeros_like(dcg), where=ideal > 0)
    if short is not None:
        values[short] = 0.0
    return data.finish(values, ideal <= 0, empty, per_query)


# ----------------------------------------------------------------------------- binary measures


def precision_score(
    y_true,
    y_score,
    qid=None,
    *,
    k: int | None = None,
    threshold: float | None = None,
    ties: str = "average",
    per_query: bool = False,
):
    """Precision at k: P@k = (number of relevant documents in the top k) / k.

    Without a cutoff the divisor is the query length (the precision of the whole list). A
    query with fewer than k documents still divides by k, as trec_eval and the LETOR 4.0
    tool do. Relevant: label > 0, or label >= ``threshold``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Non-negative relevance labels.
    y_score : array-like of shape (n_samples,)
        Scores; higher ranks first.
    qid : array-like of shape (n_samples,) or None, default=None
        Query id of each row; None makes all rows one query.
    k : int or None, default=None
        Cutoff (an integer >= 1); None uses the whole list.
    threshold : float or None, default=None
        Labels >= threshold are relevant; None: labels > 0.
    ties : {"average", "stable"}, default="average"
        The rule for equal scores (module docstring): ``"average"`` is the expectation over
        random orders of tied documents, ``"stable"`` keeps the row order.
    per_query : bool, default=False
        Return one value per query, in order of first appearance in ``qid``.

    Returns
    -------
    float or ndarray of shape (n_queries,)
        The mean over queries, or with ``per_query=True`` the value of each query.
    """
    data = _Ranked(y_true, y_score, qid, k, ties, per_query)
    hits = data.linear(_relevance(data.y, threshold), np.ones(data.n_max))
    return data.finish(hits / _k_of(data), None, None, per_query)


def recall_score(
    y_true,
    y_score,
    qid=None,
    *,
    k: int | None = None,
    threshold: float | None = None,
    ties: str = "average",
    empty: float | str = 0.0,
    per_query: bool = False,
):
    """Recall at k: (number of relevant documents in the top k) / (number of relevant).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Non-negative relevance labels.
    y_score : array-like of shape (n_samples,)
        Scores; higher ranks first.
    qid : array-like of shape (n_samples,) or None, default=None
        Query id of each row; None makes all rows one query.
    k : int or None, default=None
        Cutoff (an integer >= 1); None uses the whole list.
    threshold : float or None, default=None
        Labels >= threshold are relevant; None: labels > 0.
    ties : {"average", "stable"}, default="average"
        The rule for equal scores (module docstring): ``"average"`` is the expectation over
        random orders of tied documents, ``"stable"`` keeps the row order.
    empty : float or "skip", default=0
        Value of a query with no relevant document; ``"skip"`` leaves the query out of the
        mean (its ``per_query`` value is NaN).
    per_query : bool, default=False
        Return one value per query, in order of first appearance in ``qid``.

    Returns
    -------
    float or ndarray of shape (n_queries,)
        The mean over queries, or with ``per_query=True`` the value of each query.
    """
    empty = _check_empty(empty)
    data = _Ranked(y_true, y_score, qid, k, ties, per_query)
    rel = _relevance(data.y, threshold)
    hits = data.linear(rel, np.ones(data.n_max))
    n_rel = data.per_query_sum(rel)
    values = np.divide(hits, n_rel, out=np.zeros_like(hits), where=n_rel > 0)
    return data.finish(values, n_rel == 0, empty, per_query)


def fbeta_score(
    y_true,
    y_score,
    qid=None,
    *,
    beta: float = 1.0,
    k: int | None = None,
    threshold: float | None = None,
    ties: str = "average",
    empty: float | str = 0.0,
    per_query: bool = False,
):
    """F-score at k: F_β = (1 + β²) P R / (β² P + R) = (1 + β²) h / (β² |rel| + k).

    P = P@k (:func:`precision_score`, divisor k or the query length), R = recall at k, h the
    number of relevant documents in the top k. Being linear in h, its tie average is the F
    of the tie-averaged h.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Non-negative relevance labels.
    y_score : array-like of shape (n_samples,)
        Scores; higher ranks first.
    qid : array-like of shape (n_samples,) or None, default=None
        Query id of each row; None makes all rows one query.
    beta : float, default=1
        Weight of recall relative to precision (> 0).
    k : int or None, default=None
        Cutoff (an integer >= 1); None uses the whole list.
    threshold : float or None, default=None
        Labels >= threshold are relevant; None: labels > 0.
    ties : {"average", "stable"}, default="average"
        The rule for equal scores (module docstring): ``"average"`` is the expectation over
        random orders of tied documents, ``"stable"`` keeps the row order.
    empty : float or "skip", default=0
        Value of a query with no relevant document; ``"skip"`` leaves the query out of the
        mean (its ``per_query`` value is NaN).
    per_query : bool, default=False
        Return one value per query, in order of first appearance in ``qid``.

    Returns
    -------
    float or ndarray of shape (n_queries,)
        The mean over queries, or with ``per_query=True`` the value of each query.
    """
    beta = check_real(beta, "beta", low=0.0, strict=True)
    empty = _check_empty(empty)
    data = _Ranked(y_true, y_score, qid, k, ties, per_query)
    rel = _relevance(data.y, threshold)
    hits = data.linear(rel, np.ones(data.n_max))
    n_rel = data.per_query_sum(rel)
    values = (1.0 + beta**2) * hits / (beta**2 * n_rel + _k_of(data))
    return data.finish(values, n_rel == 0, empty, per_query)


def f1_score(
    y_true,
    y_score,
    qid=None,
    *,
    k: int | None = None,
    threshold: float | None = None,
    ties: str = "average",
    empty: float | str = 0.0,
    per_query: bool = False,
):
    """Return F1 at k = 2 P R / (P + R); :func:`fbeta_score` with β = 1.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Non-negative relevance labels.
    y_score : array-like of shape (n_samples,)
        Scores; higher ranks first.
    qid : array-like of shape (n_samples,) or None, default=None
        Query id of each row; None makes all rows one query.
    k : int or None, default=None
        Cutoff (an integer >= 1); None uses the whole list.
    threshold : float or None, default=None
        Labels >= threshold are relevant; None: labels > 0.
    ties : {"average", "stable"}, default="average"
        The rule for equal scores (module docstring): ``"average"`` is the expectation over
        random orders of tied documents, ``"stable"`` keeps the row order.
    empty : float or "skip", default=0
        Value of a query with no relevant document; ``"skip"`` leaves the query out of the
        mean (its ``per_query`` value is NaN).
    per_query : bool, default=False
        Return one value per query, in order of first appearance in ``qid``.

    Returns
    -------
    float or ndarray of shape (n_queries,)
        The mean over queries, or with ``per_query=True`` the value of each query.
    """
    return fbeta_score(
        y_true,
        y_score,
        qid,
        beta=1.0,
        k=k,
        threshold=threshold,
        ties=ties,
        empty=empty,
        per_query=per_query,
    )


def map_score(
    y_true,
    y_score,
    qid=None,
    *,
    k: int | None = None,
    threshold: float | None = None,
    normalize: str = "relevant",
    ties: str = "average",
    empty: float | str = 0.0,
    per_query: bool = False,
):
    """Mean average precision; with ``per_query=True`` the average precision of each query.

    AP@k = Σ_{i<=k, document at i relevant} P@i / Z, with

    - ``normalize="relevant"``: Z = the number of relevant documents of the query (all of
      them, not only those in the top k: trec_eval's ``map`` and ``map_cut``);
    - ``normalize="k"``: Z = k (needs ``k``), the "AP@K = Σ_{i relevant} P@i / K" form.

    Without a cutoff and relevant labels (1, 0, 1, 0, 1) in ranked order,
    AP = (1/1 + 2/3 + 3/5) / 3 ≈ 0.76.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Non-negative relevance labels.
    y_score : array-like of shape (n_samples,)
        Scores; higher ranks first.
    qid : array-like of shape (n_samples,) or None, default=None
        Query id of each row; None makes all rows one query.
    k : int or None, default=None
        Cutoff (an integer >= 1); None uses the whole list.
    threshold : float or None, default=None
        Labels >= threshold are relevant; None: labels > 0. The LETOR 4.0 tool's MAP is
        ``threshold=1, ties="stable"`` (and ``empty=0``).
    normalize : {"relevant", "k"}, default="relevant"
        The divisor Z above.
    ties : {"average", "stable"}, default="average"
        ``"average"`` is the exact expectation over random orders of tied documents;
        ``"stable"`` keeps the row order.
    empty : float or "skip", default=0
        Value of a query with no relevant document; ``"skip"`` leaves the query out of the
        mean (its ``per_query`` value is NaN).
    per_query : bool, default=False
        Return one value per query, in order of first appearance in ``qid``.

    Returns
    -------
    float or ndarray of shape (n_queries,)
        The mean over queries, or with ``per_query=True`` the value of each query.
    """
    _choice("normalize", normalize, _NORMALIZE)
    if normalize == "k" and k is None:
        raise ValueError("k must be given (an integer >= 1) when normalize='k'")
    empty = _check_empty(empty)
    data = _Ranked(y_true, y_score, qid, k, ties, per_query)
    rel = _relevance(data.y, threshold)
    total = data.run(_k.precision_sum, rel)
    n_rel = data.per_query_sum(rel)
    if normalize == "k":
        values = total / k
    else:
        values = np.divide(total, n_rel, out=np.zeros_like(total), where=n_rel > 0)
    return data.finish(values, n_rel == 0, empty, per_query)


def mrr_score(
    y_true,
    y_score,
    qid=None,
    *,
    k: int | None = None,
    threshold: float | None = None,
    ties: str = "average",
    empty: float | str = 0.0,
    per_query: bool = False,
):
    """Mean reciprocal rank: 1 / (position of the first relevant document), 0 past k.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Non-negative relevance labels.
    y_score : array-like of shape (n_samples,)
        Scores; higher ranks first.
    qid : array-like of shape (n_samples,) or None, default=None
        Query id of each row; None makes all rows one query.
    k : int or None, default=None
        Cutoff (an integer >= 1); None uses the whole list.
    threshold : float or None, default=None
        Labels >= threshold are relevant; None: labels > 0.
    ties : {"average", "stable"}, default="average"
        ``"average"`` is the exact expectation over random orders of tied documents;
        ``"stable"`` keeps the row order.
    empty : float or "skip", default=0
        Value of a query with no relevant document; ``"skip"`` leaves the query out of the
        mean (its ``per_query`` value is NaN).
    per_query : bool, default=False
        Return one value per query, in order of first appearance in ``qid``.

    Returns
    -------
    float or ndarray of shape (n_queries,)
        The mean over queries, or with ``per_query=True`` the value of each query.
    """
    empty = _check_empty(empty)
    data = _Ranked(y_true, y_score, qid, k, ties, per_query)
    rel = _relevance(data.y, threshold)
    values = data.run(_k.reciprocal_rank, rel)
    return data.finish(values, data.per_query_sum(rel) == 0, empty, per_query)


# ----------------------------------------------------------------------------- graded cascades


def err_score(
    y_true,
    y_score,
    qid=None,
    *,
    k: int | None = None,
    g_max: float | None = None,
    ties: str = "average",
    per_query: bool = False,
):
    """Expected reciprocal rank (Chapelle, Metzler, Zhang & Grinspan 2009).

    ERR@k = Σ_{i=1}^{k} (1/i) R_i Π_{j<i} (1 − R_j), R_i = (2^{g_i} − 1) / 2^{g_max}: the
    expected reciprocal position at which a user scanning down the list stops, stopping at
    a document with probability R. 0 for a query without relevant documents.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Relevance grades (non-negative).
    y_score : array-like of shape (n_samples,)
        Scores; higher ranks first.
    qid : array-like of shape (n_samples,) or None, default=None
        Query id of each row; None makes all rows one query.
    k : int or None, default=None
        Cutoff (an integer >= 1); None uses the whole list.
    g_max : float or None, default=None
        The highest grade of the scale (must be >= every label); None: the largest label
        in ``y_true`` (over all queries). Fix it (e.g. 4 on a 0–4 scale) to compare runs.
    ties : {"average", "stable"}, default="average"
        ``"average"`` is the exact expectation over random orders of tied documents, at a
        cost of O(L·m·min(m, k)) for a tie group of m documents on L label levels:
        quadratic in the size of a tie group without a cutoff, so pass ``k`` or
        ``ties="stable"`` for very long tied lists.
    per_query : bool, default=False
        Return one value per query, in order of first appearance in ``qid``.

    Returns
    -------
    float or ndarray of shape (n_queries,)
        The mean over queries, or with ``per_query=True`` the value of each query.
    """
    data = _Ranked(y_true, y_score, qid, k, ties, per_query)
    g = _gains(data.y, "exp", "y_true")
    top = float(data.y.max())
    if g_max is None:
        g_max = top
    elif check_real(g_max, "g_max") < top:
        raise ValueError(f"g_max must be >= the largest label ({top}); got {g_max!r}")
    values = data.run(_k.expected_reciprocal_rank, g / np.exp2(g_max))
    return data.finish(values, None, None, per_query)


def neru_score(
    y_true,
    y_score,
    qid=None,
    *,
    k: int | None = None,
    alpha: float = 5.0,
    d: float = 0.0,
    ties: str = "average",
    empty: float | str = 0.0,
    per_query: bool = False,
):
    """Normalised expected rank utility (Breese et al. 1998; Weimer et al. 2007).

    ERU@k(π, y) = Σ_{i=1}^{k} 2^{−(i−1)/(α−1)} max(y_{π(i)} − d, 0), with π(i) the document
    at position i, α the half-life (the position whose weight is one half is α) and d the
    neutral vote; NERU = ERU(π, y) / ERU(argsort(−y), y), in [0, 1].

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Ratings: any finite reals.
    y_score : array-like of shape (n_samples,)
        Scores; higher ranks first.
    qid : array-like of shape (n_samples,) or None, default=None
        Query id of each row; None makes all rows one query.
    k : int or None, default=None
        Cutoff (an integer >= 1); None uses the whole list.
    alpha : float, default=5
        Half-life of the position weights (> 1).
    d : float, default=0
        Neutral vote: only the part of a label above d counts.
    ties : {"average", "stable"}, default="average"
        ERU is linear in the position weights, so ``"average"`` is the expectation over
        random orders of tied documents; ``"stable"`` keeps the row order.
    empty : float or "skip", default=0
        Value of a query with no label above d (ideal ERU = 0); ``"skip"`` leaves the query
        out of the mean (its ``per_query`` value is NaN).
    per_query : bool, default=False
        Return one value per query, in order of first appearance in ``qid``.

    Returns
    -------
    float or ndarray of shape (n_queries,)
        The mean over queries, or with ``per_query=True`` the value of each query.
    """
    alpha = check_real(alpha, "alpha", low=1.0, strict=True)
    d = check_real(d, "d")
    empty = _check_empty(empty)
    data = _Ranked(y_true, y_score, qid, k, ties, per_query)
    b = np.maximum(data.y - d, 0.0)
    a = np.exp2(-np.arange(data.n_max) / (alpha - 1.0))
    eru = data.linear(b, a)
    ideal = data.ideal(b, a)
    values = np.divide(eru, ideal, out=np.zeros_like(eru), where=ideal > 0)
    return data.finish(values, ideal <= 0, empty, per_query)


# ----------------------------------------------------------------------------- rank correlation


def kendall_tau_score(
    y_true,
    y_score,
    qid=None,
    *,
    weights: str | None = None,
    ties: str = "average",
    empty: float | str = 0.0,
    per_query: bool = False,
):
    """Return Kendall's rank correlation between the scores and the labels of each query.

    ``weights=None``: tau-b = (C − D) / sqrt((n0 − n_f)(n0 − n_y)), with C / D the pairs
    ordered alike / oppositely by score and label, n0 = n(n − 1)/2 and n_f / n_y the pairs
    tied in score / in label (``scipy.stats.kendalltau``), in [−1, 1].

    Otherwise the weighted form (Murphy 2012, eq. 9.130), in [0, 1]:
    τ = Σ_{u<v} w_uv [1 + sgn(f_u − f_v) sgn(y_u − y_v)] / (2 Σ_{u<v} w_uv), with
    ``"uniform"`` w_uv = 1 (then τ = (1 + tau-a)/2 without ties, and each tied pair counts
    ½), ``"label"`` w_uv = |y_u − y_v| and ``"gain"`` w_uv = |2^{y_u} − 2^{y_v}| (pairs with
    equal labels do not count).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Labels: any finite reals (for ``weights="gain"``, small enough for 2^y).
    y_score : array-like of shape (n_samples,)
        Scores; higher ranks first.
    qid : array-like of shape (n_samples,) or None, default=None
        Query id of each row; None makes all rows one query.
    weights : {None, "uniform", "label", "gain"}, default=None
        None for tau-b, else the weights w_uv of the weighted form above.
    ties : {"average", "stable"}, default="average"
        ``"average"``: equal scores are tied pairs (for the weighted form this is the
        expectation over random orders); ``"stable"``: equal scores are ranked in row
        order, so the ranking has no ties.
    empty : float or "skip", default=0
        Value of a query where the measure is undefined: tau-b with a zero denominator
        (fewer than two documents, all labels equal, or all scores tied), or a weighted
        form with Σ w_uv = 0; ``"skip"`` leaves the query out of the mean (its
        ``per_query`` value is NaN).
    per_query : bool, default=False
        Return one value per query, in order of first appearance in ``qid``.

    Returns
    -------
    float or ndarray of shape (n_queries,)
        The mean over queries, or with ``per_query=True`` the value of each query.

    Notes
    -----
    Cost O(n log n) per query (a Fenwick tree over label levels).
    """
    _choice("weights", weights, _KENDALL_WEIGHTS)
    empty = _check_empty(empty)
    data = _Ranked(y_true, y_score, qid, None, ties, per_query)
    if weights == "gain":
        g = np.exp2(data.y)
        if not np.all(np.isfinite(g)):
            raise ValueError("y_true is too large for weights='gain' (overflow)")
    else:
        g = data.y
    n_q = data.groups.n_queries
    conc, disc, total, ties_f, ties_y = (np.empty(n_q) for _ in range(5))
    weighted = weights in ("label", "gain")
    data.call(
        _k.concordance,
        data.f,
        data.y,
        g,
        data.ptr,
        data.order,
        data.average,
        weighted,
        conc,
        disc,
        total,
        ties_f,
        ties_y,
    )
    if weights is None:
        denom = np.sqrt((total - ties_f) * (total - ties_y))
        values = np.divide(conc - disc, denom, out=np.zeros_like(denom), where=denom > 0)
        undefined = denom <= 0
    else:
        values = np.divide(
            total + conc - disc, 2.0 * total, out=np.zeros_like(total), where=total > 0
        )
        undefined = total <= 0
    return data.finish(values, undefined, empty, per_query)


METRICS: Mapping[str, Callable] = MappingProxyType(
    {
        "ndcg": ndcg_score,
        "dcg": dcg_score,
        "map": map_score,
        "p": precision_score,
        "precision": precision_score,
        "recall": recall_score,
        "f1": f1_score,
        "mrr": mrr_score,
        "err": err_score,
        "neru": neru_score,
        "kendall_tau": kendall_tau_score,
    }
)
"""The ranking metrics by name ("p" is short for "precision"); each takes
``(y_true, y_score, qid, ...)``, and those with a cut-off take ``k``."""

"""Sample weights: the weighted empirical risk R = Σ_t s_t l_t / Σ_t s_t.

The risk of :func:`bmrm.fit` is the mean of the loss's terms: one per row for a pointwise
loss, one per query otherwise (Teo, Vishwanathan, Smola & Le, JMLR 2010, eq. 1). With
weights s_t >= 0 it is their weighted mean, so that an integer weight counts a row (a query)
that many times and a zero weight leaves it out, exactly as repeating or removing it would
(the convention of scikit-learn's estimators). Weights are given per row; a query loss
weighs whole queries, so the rows of one query must carry equal weights, the query's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["TermWeights", "check_row_values", "check_sample_weight"]


@dataclass(frozen=True)
class TermWeights:
    """Weights of a prepared loss's terms, in internal row order.

    Built by :func:`check_sample_weight`; the parameters are kept as attributes of the same
    names.

    Parameters
    ----------
    terms : ndarray of shape (n_terms,)
        The weight of each term (row of a pointwise loss, query of a query loss).
    rows : ndarray of shape (n_samples,)
        The weight of each row's term, which scales the row's entry of ∂l/∂f.
    total : float
        Σ terms, the divisor of the weighted mean (> 0).
    """

    terms: np.ndarray
    rows: np.ndarray
    total: float


def check_row_values(values, n: int, name: str, *, row_numbers: bool = True) -> np.ndarray:
    """``values`` as a contiguous float64 array of n finite non-negative numbers (one per
    row), or a ValueError naming ``name`` and what was expected. ``row_numbers=False``
    leaves the row of a negative entry unnamed (rows that are one part of the caller's)."""
    try:
        s = np.asarray(values)
    except (TypeError, ValueError) as exc:  # ragged nested sequences
        raise ValueError(f"{name} must be a 1-d array of numbers ({exc})") from None
    if s.ndim != 1 or s.shape[0] != n:
        raise ValueError(
            f"{name} must be 1-d with one weight per row ({n} rows); got shape {s.shape}"
        )
    if s.dtype.kind not in "biuf":
        raise ValueError(
            f"{name} must hold real numbers (a bool, integer or float dtype); got dtype {s.dtype}"
        )
    s = np.ascontiguousarray(s, dtype=np.float64)
    if not np.all(np.isfinite(s)):
        raise ValueError(f"{name} must not contain NaN or inf")
    if s.size and s.min() < 0:
        # a part's row numbers are its own, not the caller's: they are not named
        where = f" at row {int(np.argmin(s))}" if row_numbers else " in a partition's rows"
        raise ValueError(f"{name} must be non-negative; got {float(s.min())!r}{where}")
    return s


def check_sample_weight(
    sample_weight, groups, pointwise: bool, *, part: bool = False
) -> TermWeights | None:
    """Validate per-row ``sample_weight`` and return the terms' weights (None: unweighted).

    Parameters
    ----------
    sample_weight : array-like of shape (n_samples,) or None
        Non-negative finite weights, one per row in the caller's order, not all zero.
    groups : losses.QueryGroups
        The query structure of the rows.
    pointwise : bool
        Whether the loss has one term per row (else one per query).
    part : bool
        The rows are one part of the data (a partition of a distributed fit, whose risks
        are summed with the other parts' and divided by the sum of all weights): its
        weights may all be zero, and equal weights are kept as they are.

    Returns
    -------
    TermWeights or None
        None when ``sample_weight`` is None or (unless ``part``) all its terms' weights
        are equal, which is the unweighted mean exactly.

    Raises
    ------
    ValueError
        Naming ``sample_weight`` and what was expected: a wrong shape, non-numbers, NaN,
        inf or negative entries, all zeros, a sum beyond float64, or (for a query loss)
        unequal weights within a query, whose id is named.
    """
    if sample_weight is None:
        return None
    n = groups.n_samples
    s = check_row_values(sample_weight, n, "sample_weight", row_numbers=not part)
    if n and not part and not s.any():
        raise ValueError("sample_weight is all zero: at least one row needs a positive weight")
    s = groups.to_internal(s)
    if pointwise:
        terms = s
    else:
        starts = groups.query_ptr[:-1]
        terms = s[starts] if n else s[:0]
        if n:
            low = np.minimum.reduceat(s, starts)
            high = np.maximum.reduceat(s, starts)
            unequal = np.flatnonzero(low != high)
            if unequal.size:
                q = int(unequal[0])
                qid = groups.qids[q]
                qid = qid.item() if isinstance(qid, np.generic) else qid
                raise ValueError(
                    "sample_weight must be equal within each query (a query loss weighs "
                    f"whole queries); query {qid!r} has weights {float(low[q])!r} and "
                    f"{float(high[q])!r}"
                )
    if not part and (terms.size == 0 or np.all(terms == terms[0])):
        return None
    with np.errstate(over="ignore"):
        total = float(np.sum(terms))
    if not np.isfinite(total):
        raise ValueError("sample_weight is too large: its sum overflows float64; scale it down")
    rows = s if pointwise else np.repeat(terms, np.diff(groups.query_ptr))
    return TermWeights(np.ascontiguousarray(terms), np.ascontiguousarray(rows), total)

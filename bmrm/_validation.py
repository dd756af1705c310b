"""Input checks shared by :func:`bmrm.fit`, the estimators and the command line."""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

__all__ = ["check_X", "check_positive", "check_int"]


_FINITE_CHUNK = 1 << 20


def all_finite(a: np.ndarray) -> bool:
    """Whether every entry is finite, without allocating a mask of the whole array.

    A sum is finite when every entry is (a NaN or an infinity propagates), so one reduction
    answers for almost every input; only when the sum is not finite (a non-finite entry, or
    an overflow of large finite ones) are the entries checked, by chunks.
    """
    flat = a.ravel(order="K")
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(np.add.reduce(flat, dtype=np.float64)):
            return True
    return all(
        bool(np.isfinite(flat[i : i + _FINITE_CHUNK]).all())
        for i in range(0, flat.size, _FINITE_CHUNK)
    )


def check_X(X, *, name: str = "X", n_features: int | None = None):
    """Return X as a C-ordered float32/float64 array or a CSR matrix, never densified.

    Raises ``ValueError`` naming ``name`` for a non-2-d, empty, non-numeric or non-finite X,
    or one with the wrong number of columns.
    """
    if sp.issparse(X):
        if X.ndim != 2:
            raise ValueError(f"{name} must be 2-d; got {X.ndim} dimensions")
        X = X.tocsr()
        if X.dtype not in (np.float32, np.float64):
            if X.dtype.kind not in "biuf":
                raise ValueError(f"{name} must be numeric; got dtype {X.dtype}")
            X = X.astype(np.float64)
        if not X.has_canonical_format:
            X = X.copy()
            X.sum_duplicates()
        data = X.data
    else:
        X = np.asarray(X)
        if X.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be numeric; got dtype {X.dtype}")
        if X.ndim != 2:
            raise ValueError(f"{name} must be 2-d (n_samples, n_features); got shape {X.shape}")
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        data = X
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} must be non-empty; got shape {X.shape}")
    if not all_finite(data):
        raise ValueError(f"{name} must not contain NaN or inf")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(
            f"{name} has {X.shape[1]} features, but the model was fitted with {n_features}"
        )
    return X


def check_positive(value, name: str, *, strict: bool = True) -> float:
    """A finite real number > 0 (or >= 0 when ``strict`` is False)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite real number; got {value!r}")
    if value < 0 or (strict and value == 0):
        raise ValueError(f"{name} must be {'>' if strict else '>='} 0; got {value!r}")
    return float(value)


def check_int(value, name: str, minimum: int) -> int:
    """An integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)

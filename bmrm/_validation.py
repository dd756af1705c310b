"""The data-matrix check shared by :func:`bmrm.fit`, the model and the command line.

Scalar checks (``check_positive``, ``check_int``, ...) live in :mod:`losses.validation`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit, prange

__all__ = ["all_finite", "check_X"]


@njit(parallel=True, cache=True)
def _count_nonfinite(a):
    count = 0
    for i in prange(a.shape[0]):
        if not np.isfinite(a[i]):
            count += 1
    return count


def all_finite(a: np.ndarray) -> bool:
    """Whether every entry is finite, without allocating a mask (one parallel pass)."""
    flat = a.ravel(order="K")
    if not flat.flags.c_contiguous:
        return bool(np.all(np.isfinite(a)))
    return _count_nonfinite(flat) == 0


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

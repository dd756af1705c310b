"""The data-matrix check shared by :func:`bmrm.fit`, the model and the command line.

Scalar checks (``check_positive``, ``check_int``, ...) live in :mod:`losses.validation`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from losses.validation import check_positive

__all__ = ["all_finite", "check_X", "check_intercept_scaling", "check_w0"]

# Largest intercept_scaling: the constant column's square enters the inner products of the
# planes in the master problems, so it stays far below float64's overflow at 1.8e308.
MAX_INTERCEPT_SCALING = 1e150


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


def check_intercept_scaling(value) -> float:
    """A finite real number in (0, 1e150], the value of the intercept's constant feature."""
    value = check_positive(value, "intercept_scaling")
    if value > MAX_INTERCEPT_SCALING:
        raise ValueError(
            f"intercept_scaling must be at most {MAX_INTERCEPT_SCALING:g} (its square enters "
            f"the solver's inner products); got {value!r}"
        )
    return value


def check_w0(w0, n_weights: int, fit_intercept: bool = False) -> np.ndarray:
    """The warm start as a float64 array of shape ``(n_weights,)`` with finite entries."""
    what = "one weight per feature" + (" plus the intercept's last" if fit_intercept else "")
    try:
        w0 = np.asarray(w0, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"w0 must be an array of real numbers of shape ({n_weights},) ({what}); "
            f"got {type(w0).__name__}"
        ) from None
    if w0.shape != (n_weights,):
        raise ValueError(f"w0 must have shape ({n_weights},) ({what}); got shape {w0.shape}")
    bad = np.flatnonzero(~np.isfinite(w0))
    if bad.size:
        raise ValueError(
            f"w0 must be finite; it contains NaN or inf ({bad.size} entries, the first "
            f"w0[{bad[0]}] = {float(w0[bad[0]])!r})"
        )
    return w0

"""The risk oracle: R(w) and a subgradient from the data X, weights w and a prepared loss.

The loss only sees scores ``f = X w``; the oracle computes ``f`` and maps ∂l/∂f back with
``Xᵀ g``, so dense, CSR and float32 data share every loss. X is never copied or converted; f and g
are float64. Dense C-ordered X goes through the numba products of :mod:`bmrm.solver.products`
(one thread pool with the loss kernels, :mod:`losses._threads`); other layouts and CSR use
numpy and scipy.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from bmrm.solver import products as _products

__all__ = ["RiskOracle"]


class RiskOracle:
    """R(w) = (1/n_terms) Σ_q l(X_q w, y_q) and its subgradient Xᵀ ∂l/∂f / n_terms.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
    prepared : losses.Prepared
        The loss bound to its validated targets.
    fit_intercept : bool
        Append a constant feature of value ``intercept_scaling`` (its weight is regularized
        like the others).
    """

    def __init__(self, X, prepared, fit_intercept: bool = False, intercept_scaling: float = 1.0):
        self.X = X
        self.prepared = prepared
        self.fit_intercept = fit_intercept
        self.intercept_scaling = float(intercept_scaling)
        self.n_features = X.shape[1] + int(fit_intercept)
        self.dtype = X.dtype
        self.calls = 0
        self.seconds = 0.0
        self._own_products = (
            not sp.issparse(X)
            and X.ndim == 2
            and X.dtype in (np.float32, np.float64)
            and X.flags.c_contiguous
        )

    def scores(self, w: np.ndarray) -> np.ndarray:
        """f = X w (plus the intercept), float64, in the caller's row order."""
        d = self.X.shape[1]
        if self._own_products:
            f = np.empty(self.X.shape[0])
            _products.matvec(self.X, np.ascontiguousarray(w[:d], dtype=np.float64), f)
        else:
            f = self.X @ w[:d].astype(self.dtype, copy=False)
            f = np.asarray(f, dtype=np.float64).ravel()
        if self.fit_intercept:
            f += w[d] * self.intercept_scaling
        return f

    def __call__(self, w: np.ndarray):
        """Return ``(R(w), a)`` with ``a`` a subgradient of R at ``w``."""
        start = time.perf_counter()
        # every kernel (products and loss) decides from its input size whether to use the
        # thread pool: small inputs stay on the calling thread (losses._threads)
        R, a = self._risk(w)
        self.calls += 1
        self.seconds += time.perf_counter() - start
        return R, a

    def _risk(self, w: np.ndarray):
        """The body of :meth:`__call__`."""
        prepared = self.prepared
        groups = prepared.groups
        f = self.scores(w)
        f_int = np.ascontiguousarray(groups.to_internal(f))
        values, g = prepared.loss_grad(f_int)
        total = float(values.sum())
        if not np.isfinite(total) or not np.all(np.isfinite(g)):
            raise FloatingPointError("the loss returned a non-finite value or gradient")
        if values.size and values.min() < 0:
            raise ValueError(
                f"the loss returned a negative value ({values.min():g}); bundle methods need "
                "non-negative losses"
            )
        n = prepared.n_terms
        g = groups.to_caller(g) / n
        d = self.X.shape[1]
        a = np.empty(self.n_features)
        if self._own_products:
            _products.rmatvec(self.X, np.ascontiguousarray(g), a[:d])
        elif sp.issparse(self.X):
            a[:d] = self.X.T @ g.astype(self.dtype, copy=False)
        else:
            a[:d] = g.astype(self.dtype, copy=False) @ self.X
        if self.fit_intercept:
            a[d] = self.intercept_scaling * g.sum()
        return total / n, a

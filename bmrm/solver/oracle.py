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


def _squared_norm(a: np.ndarray) -> float:
    """|a|², inf when it overflows float64 (computed as top² Σ (a / top)², no warning)."""
    top = float(np.abs(a).max(initial=0.0))
    if top == 0.0 or not np.isfinite(top):
        return top
    return top * top * float(np.sum(np.square(a / top)))


def _max_abs(X) -> float:
    data = X.data if sp.issparse(X) else X
    return float(np.abs(data).max(initial=0.0))


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
        self._buffers: dict[str, np.ndarray] = {}

    def scores(self, w: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """f = X w (plus the intercept), float64, in the caller's row order.

        Written into ``out`` (float64, n_samples) when given, else into a new array.
        """
        return self._scores(w, out)

    def _scores(self, w: np.ndarray, out: np.ndarray | None) -> np.ndarray:
        d = self.X.shape[1]
        if self._own_products:
            f = np.empty(self.X.shape[0]) if out is None else out
            _products.matvec(self.X, np.ascontiguousarray(w[:d], dtype=np.float64), f)
        else:
            f = self.X @ w[:d].astype(self.dtype, copy=False)
            f = np.asarray(f, dtype=np.float64).ravel()
            if out is not None:
                out[:] = f
                f = out
        if self.fit_intercept:
            f += w[d] * self.intercept_scaling
        return f

    def __call__(self, w: np.ndarray):
        """Return ``(R(w), a)`` with ``a`` a subgradient of R at ``w``."""
        start = time.perf_counter()
        # every kernel (products and loss) decides from its input size whether to use the
        # thread pool: small inputs stay on the calling thread (losses._threads)
        R, a = self._cut_at(self._scores(w, self._buffer("f")))
        self.calls += 1
        self.seconds += time.perf_counter() - start
        return R, a

    def _buffer(self, name: str) -> np.ndarray:
        """An n-sized float64 work array, allocated on first use and kept: allocating it
        per call costs page faults comparable to a pass over X."""
        buf = self._buffers.get(name)
        if buf is None:
            buf = self._buffers[name] = np.empty(self.X.shape[0])
        return buf

    def risk_at(self, f: np.ndarray):
        """``(R, g)`` at scores ``f`` (caller order) without a pass over X: the risk and
        g = ∂R/∂f (caller order, already divided by ``n_terms``), so that along a segment
        f(t) = f_a + t·Δf the slope of R is <g, Δf>. ``g`` is a work array overwritten by
        the next call."""
        return self._risk_at(f)

    def _risk_at(self, f: np.ndarray):
        if not np.all(np.isfinite(f)):
            raise FloatingPointError(
                "the scores X @ w overflowed float64: X"
                + (" or intercept_scaling" if self.fit_intercept else "")
                + " or the targets y are out of range; scale them down"
            )
        return self.prepared.risk(f, work=self._buffer("f_internal"), out=self._buffer("g"))

    def cut_at(self, f: np.ndarray):
        """``(R, a)`` at scores ``f``: the risk and its subgradient a = Xᵀ g (one pass).

        ``last_gradient`` then holds g = ∂R/∂f (a work array, overwritten by the next call).
        """
        return self._cut_at(f)

    def _cut_at(self, f: np.ndarray):
        R, g = self._risk_at(f)
        self.last_gradient = g
        d = self.X.shape[1]
        a = np.empty(self.n_features)
        if self._own_products:
            _products.rmatvec(self.X, g, a[:d])
        elif sp.issparse(self.X):
            a[:d] = self.X.T @ g.astype(self.dtype, copy=False)
        else:
            a[:d] = g.astype(self.dtype, copy=False) @ self.X
        if self.fit_intercept:
            a[d] = self.intercept_scaling * g.sum()
        # the master problems work with inner products of planes: |a|² must be finite too
        if not np.isfinite(_squared_norm(a)):
            scaling = f"intercept_scaling = {self.intercept_scaling:g}, "
            raise FloatingPointError(
                "the risk's subgradient Xᵀ ∂l/∂f overflowed float64 (its squared norm is not "
                f"finite; max |X| = {_max_abs(self.X):.3g}, "
                + (scaling if self.fit_intercept else "")
                + f"max |∂l/∂f| = {np.abs(g).max(initial=0.0):.3g}): X"
                + (" or intercept_scaling" if self.fit_intercept else "")
                + " or the targets y are out of range; scale them down"
            )
        return R, a

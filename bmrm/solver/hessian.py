"""Hessian-vector products of the risk in w: v ↦ Xᵀ H_R X v at fixed scores f = X w.

H_R is the Hessian of R in the scores (the loss's ``hessp``, weighted and divided as the
risk is, :meth:`losses.Prepared.hessp`); the data enter only through X v and Xᵀ(·)
(Lin, Weng & Keerthi, "Trust region Newton method for large-scale logistic regression",
JMLR 9, 2008, §3), so second-order solvers share every loss, layout and dtype with the risk
oracle (:mod:`bmrm.solver.oracle`), which builds :class:`HessianProducts`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit

from bmrm.solver import products as _products
from losses.kernels import JIT_OPTIONS
from losses.parallel import block_bounds, n_threads_for, run_blocks

__all__ = ["HessianProducts"]


@njit(**JIT_OPTIONS, fastmath={"reassoc", "contract"})
def _diagonal_products(start, stop, X, v, bias, h, xv, partial):
    """For the row blocks start:stop (``BLOCK_ROWS`` rows each): xv_i = X[i] v + bias and
    partial[c] = Σ_{i in block c} h_i xv_i X[i], in one pass over those rows."""
    n, d = X.shape
    block = _products.BLOCK_ROWS
    for c in range(start, stop):
        acc = partial[c]
        acc[:] = 0.0
        for i in range(c * block, min((c + 1) * block, n)):
            t = bias
            for j in range(d):
                t += X[i, j] * v[j]
            xv[i] = t
            u = h[i] * t
            if u != 0.0:
                for j in range(d):
                    acc[j] += u * X[i, j]


class HessianProducts:
    """The products of the risk's Hessian in w with vectors, at fixed scores f.

    v ↦ (Xᵀ H_R X v, X v) at fixed scores f: the risk's Hessian in w times v.

    With ``fit_intercept`` X has the constant column ``intercept_scaling``. Three ways, by
    what the data and loss allow:

    * dense C-ordered X (``dense``) with rows in query order and a loss with
      ``hessp_kernel`` (the squared-hinge ordinal loss): one pass over X, block by block of
      whole queries (:func:`bmrm.solver.products.fused_cut` with the Hessian kernel in place
      of the loss's);
    * dense C-ordered X and a pointwise loss (diagonal H_R, computed once at f): one pass;
    * otherwise X v, H_R (X v) and Xᵀ(·) in turn: two passes.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
        The data, as the risk oracle holds them.
    prepared : losses.Prepared
        The loss with its targets, weights and query groups (its ``hessp`` gives H_R).
    f : ndarray of shape (n_samples,)
        The scores (caller order) at which H_R is taken.
    fit_intercept : bool
        Whether the last weight is the intercept's.
    intercept_scaling : float
        The value of the intercept's constant column.
    dense : bool
        X is dense, 2-d, C-ordered float32 or float64 (the oracle's own products apply).

    Attributes
    ----------
    passes : int
        Passes over X per product (1 or 2).
    """

    def __init__(self, X, prepared, f, fit_intercept, intercept_scaling, dense):
        self.X = X
        self.prepared = prepared
        self.f = f
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.dense = dense
        self._fused = None
        self._curvature = None
        loss = prepared.loss
        pointwise = bool(getattr(loss, "pointwise", False))
        kernel = getattr(loss, "hessp_kernel", None)
        if (
            dense
            and kernel is not None
            and not pointwise
            and prepared.groups.order is None
            and prepared.n_terms > 0
            and prepared.divisor > 0
        ):
            plan = kernel(np.ascontiguousarray(f, dtype=np.float64), prepared.targets)
            if plan is not None:
                blocks = _products.query_blocks(
                    prepared.groups.query_ptr, X.shape[1], X.dtype.itemsize
                )
                self._fused = (plan[0], plan[1], blocks)
        if self._fused is None and dense and pointwise:
            self._curvature = prepared.hessp(f, np.ones(X.shape[0]))
        self.passes = 1 if self._fused is not None or self._curvature is not None else 2

    def __call__(self, v: np.ndarray, xv: np.ndarray | None = None) -> np.ndarray:
        """Return Xᵀ H_R X v, writing X v into ``xv`` when given.

        Parameters
        ----------
        v : ndarray of shape (n_weights,)
            The direction (one entry per weight, the intercept's last).
        xv : ndarray of shape (n_samples,) or None, default=None
            Float64 output for X v (with the intercept), or None.

        Returns
        -------
        ndarray of shape (n_weights,)
            Xᵀ H_R X v, one entry per weight, the intercept's last.
        """
        X = self.X
        n, d = X.shape
        xv = np.empty(n) if xv is None else xv
        bias = v[d] * self.intercept_scaling if self.fit_intercept else 0.0
        w = np.ascontiguousarray(v[:d], dtype=np.float64)
        out = np.empty(d + int(self.fit_intercept))
        if self._fused is not None:
            kernel, args, blocks = self._fused
            prepared = self.prepared
            u = np.empty(n)
            _products.fused_cut(
                X, w, bias, prepared.groups.query_ptr, blocks, kernel, args, prepared.divisor,
                xv, np.zeros(prepared.n_terms), u, out[:d], prepared.weights,
            )  # fmt: skip
        elif self._curvature is not None:
            block = _products.BLOCK_ROWS
            n_blocks = (n + block - 1) // block
            partial = np.empty((n_blocks, d))
            ptr = np.minimum(np.arange(n_blocks + 1, dtype=np.int64) * block, n)
            run_blocks(
                _diagonal_products, block_bounds(ptr, n_threads_for(n)), X, w, float(bias),
                self._curvature, xv, partial,
            )  # fmt: skip
            partial.sum(axis=0, out=out[:d])
            u = self._curvature * xv
        else:
            if self.dense:
                _products.matvec(X, w, xv, bias)
            else:
                xv[:] = np.asarray(X @ w.astype(X.dtype, copy=False), dtype=np.float64).ravel()
                xv += bias
            u = self.prepared.hessp(self.f, xv)
            if self.dense:
                _products.rmatvec(X, u, out[:d])
            elif sp.issparse(X):
                out[:d] = X.T @ u.astype(X.dtype, copy=False)
            else:
                out[:d] = u.astype(X.dtype, copy=False) @ X
        if self.fit_intercept:
            out[d] = self.intercept_scaling * u.sum()
        return out

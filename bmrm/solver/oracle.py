"""The risk oracle: R(w) and a subgradient from the data X, weights w and a prepared loss.

The loss only sees scores ``f = X w``; the oracle computes ``f`` and maps ∂l/∂f back with
``Xᵀ g``, so dense, CSR and float32 data share every loss. X is never copied or converted; f and g
are float64. Dense C-ordered X goes through the numba products of :mod:`bmrm.solver.products`
(one thread pool with the loss kernels, :mod:`losses._threads`); other layouts and CSR use
numpy and scipy.

A call makes two passes over X (f = X w, the loss, Xᵀ g), except for large dense X whose rows
are already in query order and whose loss offers a block kernel (``block_kernel``, see
:mod:`losses._base`; the ordinal loss, where it saves time, ``experiments/bench_oracles.py``;
the NDCG kernel costs several passes' time and its one-pass call measured no faster, so it
keeps two): then
:func:`bmrm.solver.products.fused_cut` goes once over X in blocks of whole queries small
enough to stay in cache between the two products. Both give the same R and subgradient up to
the order of the floating-point sums.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from bmrm.solver import products as _products
from bmrm.solver.hessian import HessianProducts
from losses import Prepared

__all__ = ["FUSED_MIN_BYTES", "RiskOracle"]

# X of at least this many bytes takes the one-pass oracle when it can: smaller X stays in the
# shared cache between the two passes anyway.
FUSED_MIN_BYTES = 16 << 20


def _squared_norm(a: np.ndarray) -> float:
    """|a|², inf when it overflows float64 (computed as top² Σ (a / top)², no warning)."""
    top = float(np.abs(a).max(initial=0.0))
    if top == 0.0 or not np.isfinite(top):
        return top
    return top * top * float(np.sum(np.square(a / top)))


def _max_abs(X) -> float:
    data = X.data if sp.issparse(X) else X
    return float(np.abs(data).max(initial=0.0))


def own_products_dtype(X) -> str:
    """The dtype's name ("float32" or "float64") when the oracle computes X's products with
    its own kernels (:mod:`bmrm.solver.products`: X dense, 2-d, C-ordered), else ""."""
    if (
        not sp.issparse(X)
        and getattr(X, "ndim", 0) == 2
        and X.dtype in (np.float32, np.float64)
        and X.flags.c_contiguous
    ):
        return X.dtype.name
    return ""


class RiskOracle:
    """R(w) = (1/n_terms) Σ_q l(X_q w, y_q) and its subgradient Xᵀ ∂l/∂f / n_terms.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
        The features, one row per document.
    prepared : losses.Prepared
        The loss bound to its validated targets.
    fit_intercept : bool
        Append a constant feature of value ``intercept_scaling`` (its weight is regularized
        like the others).
    intercept_scaling : float
        The value of that feature.
    fused_min_bytes : int
        X of at least this many bytes takes the one-pass call where it applies
        (:data:`FUSED_MIN_BYTES` by default; :func:`bmrm.warmup` compiles it on small X).
    """

    # for a latent loss, a call at w computes what the first call of ``convexified(w)`` at
    # w computes (the same scores, latent choice and kernels): the concave-convex procedure
    # hands it on instead of repeating it
    latent_call_is_surrogate_call = True

    def __init__(
        self,
        X,
        prepared,
        fit_intercept: bool = False,
        intercept_scaling: float = 1.0,
        fused_min_bytes: int = FUSED_MIN_BYTES,
    ):
        self.X = X
        self.prepared = prepared
        self.fit_intercept = fit_intercept
        self.intercept_scaling = float(intercept_scaling)
        self.n_features = X.shape[1] + int(fit_intercept)
        self.dtype = X.dtype
        # its own count of calls, against which the loop's bookkeeping is tested; timing
        # and the counts of a fit are the problem's counting oracle's
        self.calls = 0
        self._own_products = bool(own_products_dtype(X))
        self._buffers: dict[str, np.ndarray] = {}
        self.fused = self._fused_plan(fused_min_bytes)

    def _fused_plan(self, min_bytes: int):
        """``(kernel, args, blocks)`` for the one-pass call, or None when it does not apply:
        X not dense C-ordered float, smaller than ``min_bytes``, rows not in query order, a
        loss without a block kernel, or terms that all weigh 0 (one part of a distributed
        fit)."""
        prepared = self.prepared
        block_kernel = getattr(prepared.loss, "block_kernel", None)
        if (
            not self._own_products
            or self.X.nbytes < min_bytes
            or block_kernel is None
            or getattr(prepared.loss, "pointwise", False)
            or prepared.groups.order is not None
            or prepared.n_terms == 0
            or prepared.divisor == 0
        ):
            return None
        plan = block_kernel(prepared.targets)
        if plan is None:
            return None
        query_ptr = prepared.groups.query_ptr
        blocks = _products.query_blocks(query_ptr, self.X.shape[1], self.X.dtype.itemsize)
        return plan[0], plan[1], blocks

    @property
    def loss(self):
        """The loss object."""
        return self.prepared.loss

    def _with_targets(self, loss, targets) -> RiskOracle:
        prepared = Prepared(
            loss,
            self.prepared.groups,
            targets,
            self.prepared.n_terms,
            self.prepared.weights,
            self.prepared.data_names,
        )
        return RiskOracle(self.X, prepared, self.fit_intercept, self.intercept_scaling)

    def convexified(self, w: np.ndarray) -> RiskOracle:
        """The oracle of a latent loss's convex surrogate, its latent part fixed at X w.

        ``loss.convexify`` at the scores X w (:mod:`bmrm.solver.cccp`); X is shared.

        Parameters
        ----------
        w : ndarray
            The weights whose scores fix the latent part.

        Returns
        -------
        RiskOracle
            The surrogate's oracle, sharing X.
        """
        prepared = self.prepared
        f_int = np.ascontiguousarray(prepared.groups.to_internal(self.scores(w)))
        oracle = self._with_targets(
            prepared.loss, prepared.loss.convexify(f_int, prepared.targets)
        )
        # convex although its loss is not (the cut cache asks, bmrm.solver.cut_cache)
        oracle.convex_surrogate = True
        return oracle

    def initial(self) -> RiskOracle | None:
        """The oracle of the convex loss that starts the concave-convex procedure.

        ``loss.initial_loss``; X is shared.

        Returns
        -------
        RiskOracle or None
            None when the loss offers no starting loss.
        """
        if not hasattr(self.prepared.loss, "initial_loss"):
            return None
        return self._with_targets(*self.prepared.loss.initial_loss(self.prepared.targets))

    def hessian(self, f: np.ndarray) -> HessianProducts:
        """The Hessian-vector products v ↦ Xᵀ H_R X v of the risk at the scores ``f``.

        From the loss's ``hessp`` (:mod:`bmrm.solver.hessian`); no pass over X.

        Parameters
        ----------
        f : ndarray
            The scores, in the caller's row order.

        Returns
        -------
        HessianProducts
            The products at ``f``.
        """
        return HessianProducts(
            self.X, self.prepared, f, self.fit_intercept, self.intercept_scaling,
            self._own_products,
        )  # fmt: skip

    def hessp(self, w: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The product ∇²R(w) v: the scores X w, then one product of :meth:`hessian`.

        Parameters
        ----------
        w : ndarray
            The point.
        v : ndarray
            The vector.

        Returns
        -------
        ndarray
            The product ∇²R(w) v.
        """
        return self.hessian(self.scores(w))(v)

    def scores(self, w: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The scores f = X w (plus the intercept), float64, in the caller's row order.

        Parameters
        ----------
        w : ndarray
            The weights (the intercept's last when fitted).
        out : ndarray or None
            Where to write f.

        Returns
        -------
        ndarray
            The scores f, one per row of X.
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
        # every kernel (products and loss) decides from its input size whether to use the
        # thread pool: small inputs stay on the calling thread (losses._threads)
        if self.fused is not None:
            R, a = self._fused_cut(w)
        else:
            R, a = self._cut_at(self._scores(w, self._buffer("f")))
        self.calls += 1
        return R, a

    def _fused_cut(self, w: np.ndarray):
        """``(R, a)`` in one pass over X (:func:`bmrm.solver.products.fused_cut`)."""
        kernel, args, blocks = self.fused
        d = self.X.shape[1]
        bias = w[d] * self.intercept_scaling if self.fit_intercept else 0.0
        f, g = self._buffer("f"), self._buffer("g")
        values = self._buffer("values", self.prepared.n_terms)
        a = np.empty(self.n_features)
        n_terms = self.prepared.divisor
        _products.fused_cut(
            self.X, np.ascontiguousarray(w[:d], dtype=np.float64), bias,
            self.prepared.groups.query_ptr, blocks, kernel, args, n_terms, f, values, g, a[:d],
            self.prepared.weights,
        )  # fmt: skip
        self._check_scores(f)
        R = self.prepared.check(values, g, f) / n_terms
        self.last_gradient = g
        if self.fit_intercept:
            a[d] = self.intercept_scaling * g.sum()
        self._check_plane(a, g)
        return R, a

    def _buffer(self, name: str, size: int | None = None) -> np.ndarray:
        """A float64 work array (n-sized unless ``size``), allocated on first use and kept:
        allocating it per call costs page faults comparable to a pass over X."""
        buf = self._buffers.get(name)
        if buf is None:
            buf = self._buffers[name] = np.empty(self.X.shape[0] if size is None else size)
        return buf

    def release(self) -> None:
        """Drop the work arrays (and ``last_gradient``); the next call allocates them again.

        For an oracle that is called rarely or no more while the fit goes on: the
        concave-convex procedure (:mod:`bmrm.solver.cccp`) keeps its latent oracle and a
        finished surrogate, whose n-sized work arrays would otherwise stay allocated beside
        the current surrogate's. A call that is running keeps the arrays it already holds.
        """
        self._buffers = {}
        self.__dict__.pop("last_gradient", None)

    def risk_at(self, f: np.ndarray):
        """The risk and g = ∂R/∂f at the scores ``f``, without a pass over X.

        g is in the caller's row order, already divided by the risk's divisor, so that along a
        segment f(t) = f_a + t·Δf the slope of R is ⟨g, Δf⟩; it is a work array overwritten by the
        next call.

        Parameters
        ----------
        f : ndarray
            The scores, in the caller's row order.

        Returns
        -------
        tuple
            ``(R, g)``.
        """
        return self._risk_at(f)

    def _check_scores(self, f: np.ndarray) -> None:
        if not np.all(np.isfinite(f)):
            raise FloatingPointError(
                "the scores X @ w overflowed float64: X"
                + (" or intercept_scaling" if self.fit_intercept else "")
                + " or the targets y are out of range; scale them down"
            )

    def _risk_at(self, f: np.ndarray):
        self._check_scores(f)
        # f in internal order needs its own array only when the rows are reordered
        work = None if self.prepared.groups.order is None else self._buffer("f_internal")
        return self.prepared.risk(f, work=work, out=self._buffer("g"))

    def cut_at(self, f: np.ndarray):
        """The risk and its subgradient a = Xᵀ g at the scores ``f`` (one pass).

        ``last_gradient`` then holds g = ∂R/∂f (a work array, overwritten by the next call).

        Parameters
        ----------
        f : ndarray
            The scores, in the caller's row order.

        Returns
        -------
        tuple
            ``(R, a)``.
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
        self._check_plane(a, g)
        return R, a

    def query_cut(self, w: np.ndarray, out: np.ndarray):
        """The per-query cut of :meth:`query_cut_at` at the scores X w.

        Two passes over X, or one where the oracle's call takes one
        (:func:`bmrm.solver.products.fused_query_cut`).

        Parameters
        ----------
        w : ndarray
            The weights.
        out : ndarray
            Receives each query's subgradient, as for :meth:`query_cut_at`.

        Returns
        -------
        tuple
            ``(R, a, r)``.
        """
        if self.fused is None:
            return self.query_cut_at(self._scores(w, self._buffer("f")), out)
        kernel, args, blocks = self.fused
        d = self.X.shape[1]
        bias = w[d] * self.intercept_scaling if self.fit_intercept else 0.0
        f, g = self._buffer("f"), self._buffer("g")
        values = self._buffer("values", self.prepared.n_terms)
        n_terms = self.prepared.divisor
        _products.fused_query_cut(
            self.X, np.ascontiguousarray(w[:d], dtype=np.float64), bias,
            self.prepared.groups.query_ptr, blocks, kernel, args, n_terms, f, values, g, out,
            self.intercept_scaling, self.prepared.weights,
        )  # fmt: skip
        self._check_scores(f)
        R = self.prepared.check(values, g, f) / n_terms
        a = out.sum(axis=0)
        self.last_gradient = g
        self._check_plane(a, g)
        return R, a, values / n_terms

    def query_cut_at(self, f: np.ndarray, out: np.ndarray):
        """The risk, its subgradient and its per-query parts at the scores ``f``.

        One pass over X. For a per-query loss, R = Σ_q r[q] with r[q] = s_q l_q(f_q) / Σ s
        (unweighted: s_q = 1, Σ s = n_terms), and out[q] = X_qᵀ g_q (the intercept's column gets
        ``intercept_scaling`` Σ g_q) is a subgradient of r[q] as a function of w; a = Σ_q out[q].
        Used by the cut cache (:mod:`bmrm.solver.cut_cache`). ``last_gradient`` then holds
        g = ∂R/∂f (caller order, a work array).

        Parameters
        ----------
        f : ndarray
            The scores, in the caller's row order.
        out : ndarray of shape (n_queries, n_features)
            Receives the per-query subgradients (float64, C-contiguous).

        Returns
        -------
        tuple
            ``(R, a, r)``.
        """
        self._check_scores(f)
        prepared = self.prepared
        order = prepared.groups.order
        if order is None:
            f_int = np.ascontiguousarray(f)
        else:
            f_int = np.take(f, order, out=self._buffer("f_internal"))
        values, grad = prepared.loss_grad(f_int)
        total = prepared.check(values, grad, f_int)
        n = prepared.divisor
        g = self._buffer("g")
        if order is None:
            np.divide(grad, n, out=g)
        else:
            g[order] = grad
            g /= n
        _products.query_rmatvec(
            self.X, g, prepared.groups.query_ptr, order, out, self.intercept_scaling
        )
        a = out.sum(axis=0)
        self.last_gradient = g
        self._check_plane(a, g)
        return total / n, a, values / n

    def _check_plane(self, a: np.ndarray, g: np.ndarray) -> None:
        # the master problems work with inner products of planes: |a|² must be finite too
        if not np.isfinite(_squared_norm(a)):
            scaling = f"intercept_scaling = {self.intercept_scaling:g}, "
            raise FloatingPointError(
                "the risk's subgradient Xᵀ ∂l/∂f overflowed float64 (its squared norm is not "
                f"finite; max |X| = {_max_abs(self.X):.3g}, "
                + (scaling if self.fit_intercept else "")
                + f"max |∂l/∂f| = {np.abs(g).max(initial=0.0):.3g}): X"
                + (", intercept_scaling" if self.fit_intercept else "")
                + ", the targets y or the loss's parameters (costs, weights: "
                + f"{self.prepared.loss!r}) are out of range; scale them down"
            )

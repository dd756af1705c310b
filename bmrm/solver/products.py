"""Dense matrix-vector products for the risk oracle, on the loss kernels' thread pool.

The oracle alternates f = Xw, a loss kernel and Xᵀg. With numpy's BLAS for the products,
two thread pools (BLAS's and the kernels') take turns on the same cores, and each spins for
a while after its work, waiting for more: on a small machine the loss kernels then wait for
cores held by idle BLAS threads and vice versa, which made an oracle call several times
slower than its parts. Computing the products in serial numba kernels
over blocks of rows, run by :func:`losses.parallel.run_blocks`, keeps one pool.

Both kernels accumulate in float64 whatever X's dtype (float32 or float64). ``Xᵀg`` sums
over fixed blocks of ``BLOCK_ROWS`` rows, then over blocks in order, so its result does not
depend on the number of threads.

:func:`fused_cut` makes the whole oracle call one pass over X for a per-query loss with a
block kernel (:mod:`losses._base`): for each block of whole queries of about
``FUSED_BLOCK_BYTES`` of X, f = X_b w, the loss kernel on the block's queries, and
X_bᵀ g_b while X_b is still in the core's cache. Reading X from memory once instead of twice
is what it saves; the arithmetic is the same.
"""

import numpy as np
import scipy.sparse as sp
from numba import njit

from losses.kernels import JIT_OPTIONS
from losses.parallel import block_bounds, n_threads_for, run_blocks

BLOCK_ROWS = 2048


# Bytes of X per block of :func:`fused_cut` (whole queries, so a block may be larger).
FUSED_BLOCK_BYTES = 1 << 20


@njit(**JIT_OPTIONS, fastmath={"reassoc", "contract"})
def _matvec_rows(start, stop, X, w, bias, out):
    """out[i] = X[i] w + bias for the rows start:stop of a C-contiguous (n, d) X."""
    d = X.shape[1]
    for i in range(start, stop):
        s = 0.0
        for j in range(d):
            s += X[i, j] * w[j]
        out[i] = s + bias


@njit(**JIT_OPTIONS)
def _scaled_rmatvec_rows(start, stop, X, g, n_terms, acc):
    """g[i] /= n_terms for the rows start:stop, and acc = Σ_i g[i] X[i] over them."""
    d = X.shape[1]
    acc[:] = 0.0
    for i in range(start, stop):
        gi = g[i] / n_terms
        g[i] = gi
        if gi != 0.0:
            for j in range(d):
                acc[j] += gi * X[i, j]


@njit(**JIT_OPTIONS)
def _rmatvec_blocks(start, stop, X, g, partial):
    """partial[c] = Σ_{i in block c} g_i X[i] for the row blocks start:stop."""
    n, d = X.shape
    for c in range(start, stop):
        acc = partial[c]
        acc[:] = 0.0
        for i in range(c * BLOCK_ROWS, min((c + 1) * BLOCK_ROWS, n)):
            gi = g[i]
            if gi != 0.0:
                for j in range(d):
                    acc[j] += gi * X[i, j]


def matvec(X, w, out, bias: float = 0.0):
    """Compute out = X w + bias, by blocks of ``BLOCK_ROWS`` rows on the kernels' threads.

    Parameters
    ----------
    X : ndarray of shape (n, d), float32 or float64, C-contiguous
        The data.
    w : ndarray of shape (d,), float64
        The weights.
    out : ndarray of shape (n,), float64
        Output: X w + bias.
    bias : float, default=0.0
        Added to every entry.
    """
    n = X.shape[0]
    n_blocks = (n + BLOCK_ROWS - 1) // BLOCK_ROWS
    ptr = np.minimum(np.arange(n_blocks + 1, dtype=np.int64) * BLOCK_ROWS, n)
    bounds = ptr[block_bounds(ptr, n_threads_for(n))]
    run_blocks(_matvec_rows, bounds, X, w, float(bias), out)


def rmatvec(X, g, out):
    """Compute out = Xᵀ g, by blocks of ``BLOCK_ROWS`` rows summed in order.

    The result does not depend on the number of threads.

    Parameters
    ----------
    X : ndarray of shape (n, d), float32 or float64, C-contiguous
        The data.
    g : ndarray of shape (n,), float64
        One coefficient per row.
    out : ndarray of shape (d,), float64
        Output: Xᵀ g.
    """
    n, d = X.shape
    n_blocks = (n + BLOCK_ROWS - 1) // BLOCK_ROWS
    partial = np.empty((n_blocks, d))
    ptr = np.minimum(np.arange(n_blocks + 1, dtype=np.int64) * BLOCK_ROWS, n)
    run_blocks(_rmatvec_blocks, block_bounds(ptr, n_threads_for(n)), X, g, partial)
    out[:] = 0.0
    for c in range(n_blocks):
        out += partial[c]


def query_blocks(query_ptr: np.ndarray, n_features: int, itemsize: int) -> np.ndarray:
    """Return the query boundaries of blocks of whole queries of about ``FUSED_BLOCK_BYTES``.

    A query larger than that is a block of its own.

    Parameters
    ----------
    query_ptr : ndarray of shape (n_queries + 1,), int64
        Query q is the rows ``query_ptr[q]:query_ptr[q + 1]``.
    n_features : int
        The number of columns of X.
    itemsize : int
        The bytes of one entry of X (4 or 8).

    Returns
    -------
    ndarray, int64
        Strictly increasing query indices, from 0 to n_queries.
    """
    n_queries = len(query_ptr) - 1
    rows = max(1, FUSED_BLOCK_BYTES // (n_features * itemsize))
    cuts = np.searchsorted(query_ptr, np.arange(0, query_ptr[-1], rows), side="left")
    return np.unique(np.concatenate([[0], cuts, [n_queries]])).astype(np.int64)


def _weigh(q0, q1, r0, r1, weights, values, g):
    """Sample weights (:class:`losses._weights.TermWeights`) on a block's loss values and
    gradient: s_q l_q and s_q ∂l_q/∂f, as :meth:`losses.Prepared.loss_grad` applies them."""
    if weights is not None:
        values[q0:q1] *= weights.terms[q0:q1]
        g[r0:r1] *= weights.rows[r0:r1]


def _fused_blocks(
    start, stop, blocks, query_ptr, X, w, bias, kernel, args, n_terms, weights, *out
):
    f, values, g, partial = out
    for b in range(start, stop):
        q0, q1 = int(blocks[b]), int(blocks[b + 1])
        r0, r1 = int(query_ptr[q0]), int(query_ptr[q1])
        _matvec_rows(r0, r1, X, w, bias, f)
        kernel(q0, q1, f, *args, values, g)
        _weigh(q0, q1, r0, r1, weights, values, g)
        _scaled_rmatvec_rows(r0, r1, X, g, n_terms, partial[b])


def fused_cut(
    X, w, bias, query_ptr, blocks, kernel, args, n_terms, f, values, g, out, weights=None
):
    """Compute in one pass over X: f = X w + bias, the loss kernel, g, and out = Xᵀ g.

    Blocks are spread over the threads of :mod:`losses.parallel` in contiguous runs; each
    block's X_bᵀ g_b is kept apart and the blocks are summed in order, so the result does
    not depend on the number of threads.

    Parameters
    ----------
    X : ndarray of shape (n, d), float32 or float64, C-contiguous
        The data, rows in query order.
    w : ndarray of shape (d,), float64
        The weights.
    bias : float
        Added to every score (the intercept's weight times its feature).
    query_ptr : ndarray of shape (n_queries + 1,), int64
        Query q is the rows ``query_ptr[q]:query_ptr[q + 1]``.
    blocks : ndarray, int64
        Query boundaries of the blocks (:func:`query_blocks`).
    kernel : callable
        The loss's block kernel, ``kernel(q_start, q_stop, f, *args, values, grad)``.
    args : tuple
        The kernel's prepared targets.
    n_terms : int or float
        The divisor of the risk (the number of queries, or their summed weights).
    f : ndarray of shape (n,), float64
        Output: the scores X w + bias.
    values : ndarray of shape (n_queries,), float64
        Output: the per-query losses.
    g : ndarray of shape (n,), float64
        Output: ∂R/∂f, the loss's gradient divided by ``n_terms``.
    out : ndarray of shape (d,), float64
        Output: Xᵀ g.
    weights : losses._weights.TermWeights or None, default=None
        Sample weights: each query's value and gradient are multiplied by its weight
        before g is divided by ``n_terms`` (``values`` then holds s_q l_q).
    """
    partial = np.empty((len(blocks) - 1, X.shape[1]))
    n = int(query_ptr[-1])
    bounds = block_bounds(query_ptr[blocks], n_threads_for(n))
    run_blocks(
        _fused_blocks, bounds, blocks, query_ptr, X, w, float(bias), kernel, args,
        float(n_terms), weights, f, values, g, partial,
    )  # fmt: skip
    partial.sum(axis=0, out=out)


@njit(**JIT_OPTIONS)
def _query_rmatvec_dense(start, stop, X, g, query_ptr, order, scaling, out):
    """out[q, :d] = Σ_{rows i of query q} g_i X[i] (and out[q, d] = scaling Σ_i g_i when out
    has a column more than X) for the queries start:stop; ``order`` maps internal rows to
    X's rows (empty: the identity)."""
    d = X.shape[1]
    permuted = order.shape[0] > 0
    for q in range(start, stop):
        acc = out[q]
        acc[:] = 0.0
        total = 0.0
        for i in range(query_ptr[q], query_ptr[q + 1]):
            r = order[i] if permuted else i
            gi = g[r]
            total += gi
            if gi != 0.0:
                for j in range(d):
                    acc[j] += gi * X[r, j]
        if out.shape[1] > d:
            acc[d] = scaling * total


@njit(**JIT_OPTIONS)
def _query_rmatvec_csr(start, stop, data, indices, indptr, d, g, query_ptr, order, scaling, out):
    """:func:`_query_rmatvec_dense` for a CSR X given by ``data, indices, indptr``."""
    permuted = order.shape[0] > 0
    for q in range(start, stop):
        acc = out[q]
        acc[:] = 0.0
        total = 0.0
        for i in range(query_ptr[q], query_ptr[q + 1]):
            r = order[i] if permuted else i
            gi = g[r]
            total += gi
            if gi != 0.0:
                for p in range(indptr[r], indptr[r + 1]):
                    acc[indices[p]] += gi * data[p]
        if out.shape[1] > d:
            acc[d] = scaling * total


def query_rmatvec(X, g, query_ptr, order, out, scaling: float = 1.0):
    """Compute the per-query products out[q] = X_qᵀ g_q in one pass over X.

    Each query is summed by one thread in row order, so the result does not depend on the
    number of threads; Σ_q out[q] is Xᵀ g up to the order of the sums.

    Parameters
    ----------
    X : ndarray of shape (n, d), float32 or float64 (any layout), or CSR matrix
        The data.
    g : ndarray of shape (n,), float64
        One coefficient per row, in X's row order.
    query_ptr : ndarray of shape (n_queries + 1,), int64
        Query q is the internal rows ``query_ptr[q]:query_ptr[q + 1]``.
    order : ndarray of int64 or None
        X's row of each internal row (None: rows already in query order).
    out : ndarray of shape (n_queries, d) or (n_queries, d + 1), float64, C-contiguous
        Output. With d + 1 columns, the last one receives ``scaling`` times the per-query
        sum of g (the intercept's column).
    scaling : float, default=1.0
        The intercept's constant feature.
    """
    order = np.empty(0, dtype=np.int64) if order is None else np.asarray(order, dtype=np.int64)
    n = int(query_ptr[-1])
    bounds = block_bounds(query_ptr, n_threads_for(n))
    if sp.issparse(X):
        X = X.tocsr()
        run_blocks(
            _query_rmatvec_csr, bounds, X.data, X.indices, X.indptr, X.shape[1], g, query_ptr,
            order, float(scaling), out,
        )  # fmt: skip
    else:
        run_blocks(_query_rmatvec_dense, bounds, X, g, query_ptr, order, float(scaling), out)


@njit(**JIT_OPTIONS)
def _scale_rows(start, stop, g, n_terms):
    for i in range(start, stop):
        g[i] /= n_terms


def _fused_query_blocks(
    start, stop, blocks, query_ptr, X, w, bias, kernel, args, n_terms, scaling, weights, *out
):
    f, values, g, per_query, no_order = out
    for b in range(start, stop):
        q0, q1 = int(blocks[b]), int(blocks[b + 1])
        r0, r1 = int(query_ptr[q0]), int(query_ptr[q1])
        _matvec_rows(r0, r1, X, w, bias, f)
        kernel(q0, q1, f, *args, values, g)
        _weigh(q0, q1, r0, r1, weights, values, g)
        _scale_rows(r0, r1, g, n_terms)
        _query_rmatvec_dense(q0, q1, X, g, query_ptr, no_order, scaling, per_query)


def fused_query_cut(
    X, w, bias, query_ptr, blocks, kernel, args, n_terms, f, values, g, out, scaling=1.0,
    weights=None,
):  # fmt: skip
    """Compute :func:`fused_cut` with per-query products out[q] = X_qᵀ g_q, in one pass.

    As :func:`query_rmatvec`, the intercept's column included when ``out`` has d + 1.

    Parameters
    ----------
    X : ndarray of shape (n, d), float32 or float64, C-contiguous
        The data, rows in query order.
    w : ndarray of shape (d,), float64
        The weights.
    bias : float
        Added to every score (the intercept's weight times its feature).
    query_ptr : ndarray of shape (n_queries + 1,), int64
        Query q is the rows ``query_ptr[q]:query_ptr[q + 1]``.
    blocks : ndarray, int64
        Query boundaries of the blocks (:func:`query_blocks`).
    kernel : callable
        The loss's block kernel, ``kernel(q_start, q_stop, f, *args, values, grad)``.
    args : tuple
        The kernel's prepared targets.
    n_terms : int or float
        The divisor of the risk (the number of queries, or their summed weights).
    f : ndarray of shape (n,), float64
        Output: the scores X w + bias.
    values : ndarray of shape (n_queries,), float64
        Output: the per-query losses.
    g : ndarray of shape (n,), float64
        Output: ∂R/∂f, the loss's gradient divided by ``n_terms``.
    out : ndarray of shape (n_queries, d) or (n_queries, d + 1), float64, C-contiguous
        Output: X_qᵀ g_q per query, then ``scaling`` times the query's sum of g with d + 1
        columns.
    scaling : float, default=1.0
        The intercept's constant feature.
    weights : losses._weights.TermWeights or None, default=None
        Sample weights, applied as in :func:`fused_cut`.
    """
    n = int(query_ptr[-1])
    bounds = block_bounds(query_ptr[blocks], n_threads_for(n))
    run_blocks(
        _fused_query_blocks, bounds, blocks, query_ptr, X, w, float(bias), kernel, args,
        float(n_terms), float(scaling), weights, f, values, g, out,
        np.empty(0, dtype=np.int64),
    )  # fmt: skip

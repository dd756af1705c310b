"""Dense matrix-vector products for the risk oracle, on the loss kernels' thread pool.

The oracle alternates f = Xw, a loss kernel and Xᵀg. With numpy's BLAS for the products,
two thread pools (BLAS's and the kernels') take turns on the same cores, and each spins for
a while after its work, waiting for more: on a small machine the loss kernels then wait for
cores held by idle BLAS threads and vice versa, which made an oracle call on 20,000 × 136
rows several times slower than its parts. Computing the products in serial numba kernels
over blocks of rows, run by :func:`losses._threads.run_blocks`, keeps one pool.

Both kernels accumulate in float64 whatever X's dtype (float32 or float64). ``Xᵀg`` sums
over fixed blocks of ``BLOCK_ROWS`` rows, then over blocks in order, so its result does not
depend on the number of threads.
"""

import numpy as np
from numba import njit

from losses._threads import block_bounds, n_threads_for, run_blocks

BLOCK_ROWS = 2048


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _matvec_rows(start, stop, X, w, out):
    """out[i] = X[i] w for the rows start:stop of a C-contiguous (n, d) X."""
    d = X.shape[1]
    for i in range(start, stop):
        s = 0.0
        for j in range(d):
            s += X[i, j] * w[j]
        out[i] = s


@njit(cache=True, nogil=True)
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


def matvec(X, w, out):
    """out = X w for a C-contiguous (n, d) X (float32 or float64), float64 w and out."""
    n = X.shape[0]
    n_blocks = (n + BLOCK_ROWS - 1) // BLOCK_ROWS
    ptr = np.minimum(np.arange(n_blocks + 1, dtype=np.int64) * BLOCK_ROWS, n)
    bounds = ptr[block_bounds(ptr, n_threads_for(n))]
    run_blocks(_matvec_rows, bounds, X, w, out)


def rmatvec(X, g, out):
    """out = Xᵀ g for a C-contiguous (n, d) X, by blocks of ``BLOCK_ROWS`` rows."""
    n, d = X.shape
    n_blocks = (n + BLOCK_ROWS - 1) // BLOCK_ROWS
    partial = np.empty((n_blocks, d))
    ptr = np.minimum(np.arange(n_blocks + 1, dtype=np.int64) * BLOCK_ROWS, n)
    run_blocks(_rmatvec_blocks, block_bounds(ptr, n_threads_for(n)), X, g, partial)
    out[:] = 0.0
    for c in range(n_blocks):
        out += partial[c]

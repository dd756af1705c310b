"""Dense matrix-vector products for the risk oracle, on numba's thread pool.

The oracle alternates f = Xw, a loss kernel and Xᵀg. With numpy's BLAS for the products,
two thread pools (BLAS's and numba's) take turns on the same cores, and each spins for a
while after its work, waiting for more: on a small machine the loss kernels then wait for
cores held by idle BLAS threads and vice versa, which made an oracle call on 20,000 × 136
rows several times slower than its parts. Computing the products in numba keeps one pool.

Both kernels accumulate in float64 whatever X's dtype (float32 or float64). ``Xᵀg`` sums
over fixed blocks of rows, then over blocks in order, so its result does not depend on the
number of threads.
"""

import numpy as np
from numba import njit, prange

BLOCK_ROWS = 2048


@njit(parallel=True, cache=True, fastmath={"reassoc", "contract"})
def matvec(X, w, out):
    """out = X w for a C-contiguous (n, d) X."""
    n, d = X.shape
    for i in prange(n):
        s = 0.0
        for j in range(d):
            s += X[i, j] * w[j]
        out[i] = s


@njit(parallel=True, cache=True)
def rmatvec(X, g, out):
    """out = Xᵀ g for a C-contiguous (n, d) X, by blocks of ``BLOCK_ROWS`` rows."""
    n, d = X.shape
    n_blocks = (n + BLOCK_ROWS - 1) // BLOCK_ROWS
    partial = np.zeros((n_blocks, d))
    for c in prange(n_blocks):
        start = c * BLOCK_ROWS
        stop = min(start + BLOCK_ROWS, n)
        acc = partial[c]
        for i in range(start, stop):
            gi = g[i]
            if gi != 0.0:
                for j in range(d):
                    acc[j] += gi * X[i, j]
    for j in range(d):
        out[j] = 0.0
    for c in range(n_blocks):
        for j in range(d):
            out[j] += partial[c, j]

"""Serial numba products of the expected-gain scorer for dense C-ordered X.

The scorer's products are skinny (K, the number of relevance levels, is 2 to 5): X Wᵀ is
n × K and ∂l/∂W = Bᵀ X is K × d. Through numpy's BLAS they wake its thread pool on every
call, and on a busy machine single calls then wait far longer than they compute; these
serial kernels do not. Both kernels accumulate in float64 whatever X's dtype.
"""

import numpy as np
from numba import njit

from losses.kernels import JIT_OPTIONS


@njit(**JIT_OPTIONS)
def softmax_gain(X, W, gains, P, h):
    """P[i] = softmax(W X[i]) and h[i] = Σ_k gains[k] P[i, k] for a C-contiguous X."""
    n, d = X.shape
    K = W.shape[0]
    z = np.empty(K)
    for i in range(n):
        zmax = -np.inf
        for k in range(K):
            s = 0.0
            for j in range(d):
                s += X[i, j] * W[k, j]
            z[k] = s
            zmax = max(zmax, s)
        total = 0.0
        for k in range(K):
            z[k] = np.exp(z[k] - zmax)
            total += z[k]
        hi = 0.0
        for k in range(K):
            P[i, k] = z[k] / total
            hi += gains[k] * P[i, k]
        h[i] = hi


@njit(**JIT_OPTIONS)
def softmax_gain_vjp(X, P, gains, h, g, out):
    """out[k] = Σ_i g[i] P[i, k] (gains[k] − h[i]) X[i] (the K × d gradient)."""
    n, d = X.shape
    K = P.shape[1]
    out[:, :] = 0.0
    for i in range(n):
        if g[i] == 0.0:
            continue
        for k in range(K):
            b = g[i] * P[i, k] * (gains[k] - h[i])
            if b != 0.0:
                for j in range(d):
                    out[k, j] += b * X[i, j]

"""Pointwise loss kernels: one value and one derivative per sample."""

import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True)
def squared(f, y, values, grad):
    """½(f_i − y_i)² and its derivative f_i − y_i."""
    for i in prange(f.shape[0]):
        r = f[i] - y[i]
        values[i] = 0.5 * r * r
        grad[i] = r


@njit(parallel=True, cache=True)
def hinge(f, y, values, grad):
    """max(0, 1 − y_i f_i) and the subgradient −y_i where the margin is violated."""
    for i in prange(f.shape[0]):
        m = 1.0 - y[i] * f[i]
        if m > 0.0:
            values[i] = m
            grad[i] = -y[i]
        else:
            values[i] = 0.0
            grad[i] = 0.0


@njit(parallel=True, cache=True)
def logistic(f, y, values, grad):
    """log(1 + exp(−y_i f_i)) and its derivative −y_i σ(−y_i f_i), overflow-safe."""
    for i in prange(f.shape[0]):
        z = -y[i] * f[i]
        if z > 0.0:
            e = np.exp(-z)
            values[i] = z + np.log1p(e)
            grad[i] = -y[i] / (1.0 + e)
        else:
            e = np.exp(z)
            values[i] = np.log1p(e)
            grad[i] = -y[i] * e / (1.0 + e)

"""Pointwise loss kernels: one value and one derivative per sample.

Written with numpy's element-wise operations rather than numba: they are memory-bound either
way, and numpy needs no compilation, so the first fit with a pointwise loss starts at once.
"""

import numpy as np


def squared(f, y, values, grad):
    """½(f_i − y_i)² and its derivative f_i − y_i."""
    np.subtract(f, y, out=grad)
    np.multiply(grad, grad, out=values)
    values *= 0.5


def hinge(f, y, values, grad):
    """max(0, 1 − y_i f_i) and the subgradient −y_i where the margin is violated."""
    np.multiply(y, f, out=values)
    np.subtract(1.0, values, out=values)
    active = values > 0.0
    np.maximum(values, 0.0, out=values)
    np.negative(y, out=grad)
    grad[~active] = 0.0


def logistic(f, y, values, grad):
    """log(1 + exp(−y_i f_i)) and its derivative −y_i σ(−y_i f_i), overflow-safe.

    With z = −y f: log(1 + e^z) = max(z, 0) + log1p(e^{−|z|}) and
    σ(z) = e^{min(z, 0)} / (1 + e^{−|z|}).
    """
    z = -y * f
    e = np.exp(-np.abs(z))
    np.log1p(e, out=values)
    values += np.maximum(z, 0.0)
    np.exp(np.minimum(z, 0.0), out=grad)
    grad /= 1.0 + e
    grad *= -y


def logistic_curvature(f, y, out):
    """σ(z)σ(−z) = e^{−|z|} / (1 + e^{−|z|})² with z = y_i f_i: the second derivative of
    log(1 + exp(−y f)) in f (y² = 1), overflow-safe."""
    np.multiply(y, f, out=out)
    np.abs(out, out=out)
    np.negative(out, out=out)
    np.exp(out, out=out)
    out /= np.square(1.0 + out)

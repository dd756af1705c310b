"""Brute-force references of the squared pairwise hinge and of the losses' Hessians.

Every pair of a query is enumerated (no sorting, no sweep), and every Hessian is written
out as an explicit matrix: the product H d of the package is compared with ``H @ d``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from tests.losses.reference_pairs import cost_function


def squared_hinge_pairs(f, i, j, cost, weight):
    """(loss, grad, H) of weight · Σ_p cost_p max(0, 1 + f_i − f_j)² over given pairs of one
    query (indices into f), with H the generalised Hessian over the active pairs (r > 0):
    H = 2 weight Σ_p cost_p (e_i − e_j)(e_i − e_j)ᵀ, accumulated entry by entry."""
    f = np.asarray(f, dtype=np.float64)
    i, j = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64)
    m = len(f)
    r = (1.0 + f[i]) - f[j]
    c = np.where(r > 0, np.asarray(cost, dtype=np.float64), 0.0)
    r = np.maximum(r, 0.0)
    grad = np.zeros(m)
    np.add.at(grad, i, 2.0 * c * r)
    np.add.at(grad, j, -2.0 * c * r)
    H = np.zeros((m, m))
    np.add.at(H, (i, i), 2.0 * c)
    np.add.at(H, (j, j), 2.0 * c)
    np.add.at(H, (i, j), -2.0 * c)
    np.add.at(H, (j, i), -2.0 * c)
    return weight * float(np.sum(c * r * r)), weight * grad, weight * H


def ordinal_squared_query(f, y, cost="zero_one", normalize="query", weights=None):
    """(loss, grad, H) of the squared-hinge ordinal loss of one query over all pairs y_i <
    y_j, each weighed by s_i s_j and normalised by Σ_{y_i<y_j} s_i s_j (``"query"``)."""
    y = np.asarray(y, dtype=np.int64)
    m = len(y)
    s = np.ones(m) if weights is None else np.asarray(weights, dtype=np.float64)
    i, j = np.nonzero(y[:, None] < y[None, :])
    pair_w = s[i] * s[j]
    if pair_w.sum() == 0:
        return 0.0, np.zeros(m), np.zeros((m, m))
    weight = 1.0 / pair_w.sum() if normalize == "query" else 1.0
    c = pair_w * cost_function(cost)(y[i], y[j])
    return squared_hinge_pairs(f, i, j, c, weight)


def ranknet_hessian(f, y, weight):
    """weight · Σ_{y_i<y_j} σ(z)σ(−z) (e_i − e_j)(e_i − e_j)ᵀ, z = f_i − f_j."""
    m = len(f)
    H = np.zeros((m, m))
    for a in range(m):
        for b in range(m):
            if y[a] < y[b]:
                z = f[a] - f[b]
                e = np.zeros(m)
                e[a], e[b] = 1.0, -1.0
                H += weight * expit(z) * expit(-z) * np.outer(e, e)
    return H


def listnet_hessian(f):
    """diag(p) − p pᵀ with p = softmax(f); 0 for one document."""
    if len(f) <= 1:
        return np.zeros((len(f), len(f)))
    p = np.exp(f - f.max())
    p /= p.sum()
    return np.diag(p) - np.outer(p, p)

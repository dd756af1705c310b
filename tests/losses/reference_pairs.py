"""Brute-force pairwise references: every pair of a query enumerated explicitly.

Independent of the package's kernels: no sorting, no sweeps, no level ranks. Hinge terms are
evaluated as ``(1 + f_i) - f_j`` and a pair is active when that is > 0, so a pair exactly at
the hinge contributes neither loss nor subgradient.
"""

from __future__ import annotations

import numpy as np


def cost_function(cost):
    """C(a, b) as a function of two label arrays, for a named cost or a matrix."""
    if isinstance(cost, str):
        if cost == "zero_one":
            return lambda a, b: np.ones(np.broadcast(a, b).shape)
        if cost == "linear":
            return lambda a, b: (b - a).astype(np.float64)
        raise ValueError(cost)
    matrix = np.asarray(cost, dtype=np.float64)
    return lambda a, b: matrix[a, b]


def ordinal_query(f, y, cost="zero_one", normalize="query", weights=None):
    """(loss, grad, misordered) of one query, from the full m × m pair matrices.

    ``weights`` (one per row, default all 1) weighs each pair (i, j) by s_i s_j, and the
    normaliser is Σ_{y_i<y_j} s_i s_j (no pair of positive weight: loss 0).
    """
    f = np.asarray(f, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    s = np.ones(len(f)) if weights is None else np.asarray(weights, dtype=np.float64)
    comparable = y[:, None] < y[None, :]
    pair_w = np.where(comparable, s[:, None] * s[None, :], 0.0)
    n_pairs = pair_w.sum()
    if n_pairs == 0:
        return 0.0, np.zeros_like(f), 0.0
    weight = 1.0 / n_pairs if normalize == "query" else 1.0
    c = pair_w * np.where(comparable, cost_function(cost)(y[:, None], y[None, :]), 0.0)
    hinge = (1.0 + f[:, None]) - f[None, :]
    active = comparable & (hinge > 0)
    loss = weight * np.sum(np.where(active, c * hinge, 0.0))
    c_active = np.where(active, c, 0.0)
    grad = weight * (c_active.sum(axis=1) - c_active.sum(axis=0))
    misordered = weight * np.sum(np.where(comparable & (f[:, None] >= f[None, :]), c, 0.0))
    return loss, grad, misordered


def ordinal_query_loops(f, y, cost="zero_one", normalize="query"):
    """The same as :func:`ordinal_query` with plain Python loops (for small queries)."""
    c_of = cost_function(cost)
    m = len(f)
    loss = 0.0
    grad = np.zeros(m)
    misordered = 0.0
    n_pairs = 0
    for i in range(m):
        for j in range(m):
            if y[i] < y[j]:
                n_pairs += 1
                c = float(c_of(np.int64(y[i]), np.int64(y[j])))
                t = (1.0 + f[i]) - f[j]
                if t > 0:
                    loss += c * t
                    grad[i] += c
                    grad[j] -= c
                if f[i] >= f[j]:
                    misordered += c
    if n_pairs == 0:
        return 0.0, grad, 0.0
    weight = 1.0 / n_pairs if normalize == "query" else 1.0
    return weight * loss, weight * grad, weight * misordered


def split_queries(qid, n):
    """Caller row indices of each query, in order of first appearance."""
    if qid is None:
        return [np.arange(n)]
    qid = np.asarray(qid)
    seen = {}
    for r, q in enumerate(qid.tolist()):
        seen.setdefault(q, []).append(r)
    return [np.array(rows) for rows in seen.values()]


def ordinal_risk(f, y, qid=None, cost="zero_one", normalize="query"):
    """Mean over queries of the ordinal loss, and its gradient, in caller row order."""
    f = np.asarray(f, dtype=np.float64)
    y = np.asarray(y)
    queries = split_queries(qid, len(f))
    total = 0.0
    grad = np.zeros_like(f)
    for rows in queries:
        loss, g, _ = ordinal_query(f[rows], y[rows], cost, normalize)
        total += loss
        grad[rows] += g
    return total / len(queries), grad / len(queries)


def svmrank_risk(f, y, qid):
    """SVM^rank's empirical term (1/n_q) Σ_q Σ_{y_i > y_j} max(0, 1 − (f_i − f_j))."""
    queries = split_queries(qid, len(f))
    total = 0.0
    for rows in queries:
        for i in rows:
            for j in rows:
                if y[i] > y[j]:
                    total += max(0.0, 1.0 - (f[i] - f[j]))
    return total / len(queries)


def preference_risk(f, pairs, costs, qid=None, normalize="query"):
    """Mean over queries of the preference loss, its gradient and the violation count.

    ``pairs`` hold caller row indices; a pair belongs to the query of its rows.
    """
    f = np.asarray(f, dtype=np.float64)
    queries = split_queries(qid, len(f))
    query_of = np.empty(len(f), dtype=np.int64)
    for q, rows in enumerate(queries):
        query_of[rows] = q
    losses = np.zeros(len(queries))
    violations = np.zeros(len(queries))
    n_pairs = np.zeros(len(queries))
    grads = [np.zeros_like(f) for _ in queries]
    for (i, j), c in zip(np.asarray(pairs).tolist(), np.asarray(costs).tolist(), strict=True):
        q = query_of[i]
        n_pairs[q] += 1
        t = (1.0 + f[i]) - f[j]
        if t > 0:
            losses[q] += c * t
            grads[q][i] += c
            grads[q][j] -= c
        if f[i] >= f[j]:
            violations[q] += c
    grad = np.zeros_like(f)
    for q in range(len(queries)):
        if n_pairs[q] == 0:
            continue
        w = 1.0 / n_pairs[q] if normalize == "query" else 1.0
        losses[q] *= w
        violations[q] *= w
        grad += w * grads[q]
    return losses.mean(), grad / len(queries), violations


def label_pairs(y, qid=None):
    """The set of caller-index pairs (i, j) with y_i < y_j in the same query."""
    out = set()
    for rows in split_queries(qid, len(y)):
        for i in rows:
            for j in rows:
                if y[i] < y[j]:
                    out.add((int(i), int(j)))
    return out

"""Kernel of the structured average-precision hinge (SVM-MAP, Yue et al., SIGIR 2007).

For one query with ``p`` relevant and ``n`` non-relevant documents, scores ``f`` and the
joint feature map over the relevant × non-relevant pairs,

    l(f) = max_y [1 − AP(y) − (2 / (p n)) Σ_{j non-relevant above i relevant in y} (f_i − f_j)],

y ranging over the rankings. See :mod:`losses.average_precision` for the derivation; here,
with the relevant documents sorted by score descending (r = 1..p) and the non-relevant ones
likewise (j = 1..n), some maximiser keeps both lists in that order, and a ranking of that
kind is given by k_j, the number of relevant documents above the j-th non-relevant one
(non-decreasing in j). Its value is Σ_j δ_j(k_j) with

    δ_j(k) = Σ_{r > k} t_j(r),   t_j(r) = r / (p (r + j)(r + j − 1)) + (2 / (p n)) (f_j − f_r),

and t_j(r) does not increase with j, so the largest maximiser of δ_j is non-decreasing in j:
each j is maximised on its own, scanning k from p down to the previous j's choice.
O(m log m + p·n) per query.
"""

import numpy as np
from numba import njit

from losses._kernels.sorting import argsort_stable


@njit(cache=True, nogil=True)
def ap_loss(q_start, q_stop, f, query_ptr, relevant, values, grad):
    """Per-query hinge and its subgradient for the queries ``q_start:q_stop``.

    ``relevant`` (bool per row) marks the relevant documents. A query without a relevant or
    without a non-relevant document gets 0; a query with a NaN or infinite score gets NaN
    (value and subgradient). Documents of one class with equal scores share
    the mean of their subgradient entries (a mean over maximisers that differ only in how
    they order them), so the result does not depend on the listing order.
    """
    max_m = 0
    for q in range(q_start, q_stop):
        max_m = max(max_m, query_ptr[q + 1] - query_ptr[q])
    rel = np.empty(max_m, dtype=np.int64)
    non = np.empty(max_m, dtype=np.int64)
    key = np.empty(max_m)
    k_of = np.empty(max_m, dtype=np.int64)
    below = np.empty(max_m + 1, dtype=np.int64)
    for q in range(q_start, q_stop):
        start = query_ptr[q]
        stop = query_ptr[q + 1]
        p = 0
        n = 0
        finite = True
        for d in range(start, stop):
            grad[d] = 0.0
            finite = finite and np.isfinite(f[d])
            if relevant[d]:
                rel[p] = d
                p += 1
            else:
                non[n] = d
                n += 1
        values[q] = 0.0
        if not finite:  # no ranking to speak of: NaN, which the solvers refuse by name
            values[q] = np.nan
            for d in range(start, stop):
                grad[d] = np.nan
            continue
        if p == 0 or n == 0:
            continue
        _sort_descending(f, rel, p, key)
        _sort_descending(f, non, n, key)
        scale = 2.0 / (float(p) * float(n))
        inv_p = 1.0 / p
        total = 0.0
        k_prev = 0
        for j in range(1, n + 1):
            fj = f[non[j - 1]]
            best = 0.0
            k_best = p
            acc = 0.0
            for k in range(p - 1, k_prev - 1, -1):
                r = k + 1
                acc += inv_p * r / ((r + j) * (r + j - 1.0)) + scale * (fj - f[rel[r - 1]])
                if acc > best:
                    best = acc
                    k_best = k
            k_of[j - 1] = k_best
            k_prev = k_best
            total += best
        values[q] = total
        # ∂/∂f_j = scale (p − k_j); ∂/∂f_r = −scale · #{j : k_j < r}
        for k in range(p + 1):
            below[k] = 0
        for j in range(n):
            grad[non[j]] = scale * (p - k_of[j])
            below[k_of[j]] += 1
        above = 0
        for r in range(1, p + 1):
            above += below[r - 1]
            grad[rel[r - 1]] = -scale * above
        _average_tied(f, rel, p, grad)
        _average_tied(f, non, n, grad)


@njit(cache=True, nogil=True)
def _sort_descending(f, idx, count, key):
    """Reorder ``idx[:count]`` by ``f`` descending (equal scores keep their order)."""
    for t in range(count):
        key[t] = -f[idx[t]]
    order = argsort_stable(key[:count])
    tmp = idx[:count].copy()
    for t in range(count):
        idx[t] = tmp[order[t]]


@njit(cache=True, nogil=True)
def _average_tied(f, idx, count, grad):
    """Give each run of equal scores in ``idx[:count]`` (sorted) the mean of its entries."""
    t = 0
    while t < count:
        u = t + 1
        while u < count and f[idx[u]] == f[idx[t]]:
            u += 1
        if u - t > 1:
            s = 0.0
            for v in range(t, u):
                s += grad[idx[v]]
            s /= u - t
            for v in range(t, u):
                grad[idx[v]] = s
        t = u

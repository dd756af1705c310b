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
each j is maximised on its own, over the range of k that this monotonicity leaves, by a
divide and conquer over j (:func:`_place_non_relevant`). The value is then evaluated for
the ranking found, Δ(y) + ⟨g, f⟩ with g its slope. O(m log m) per query: one sort by score and
O((p + n) log n) for the search.
"""

import numpy as np
from numba import njit

from losses._kernels import OUTER
from losses._kernels.sorting import argsort_float

# ranges waiting in the divide and conquer of _place_non_relevant: the larger half is pushed
# first, so at most about log2(n) + 2 wait at once
_STACK = 128


@njit(**OUTER)
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
    stack = np.empty((_STACK, 4), dtype=np.int64)
    for q in range(q_start, q_stop):
        start = query_ptr[q]
        stop = query_ptr[q + 1]
        m = stop - start
        finite = True
        p = 0
        for t in range(m):
            grad[start + t] = 0.0
            finite = finite and np.isfinite(f[start + t])
            key[t] = -f[start + t]
            p += relevant[start + t]
        values[q] = 0.0
        if not finite:  # no ranking to speak of: NaN, which the solvers refuse by name
            values[q] = np.nan
            for d in range(start, stop):
                grad[d] = np.nan
            continue
        if p == 0 or p == m:
            continue
        # one stable sort by score, descending, split by class: each class in score order,
        # equal scores in listing order
        order = argsort_float(key[:m])
        p = 0
        n = 0
        for t in range(m):
            d = start + order[t]
            if relevant[d]:
                rel[p] = d
                p += 1
            else:
                non[n] = d
                n += 1
        scale = 2.0 / (float(p) * float(n))
        _place_non_relevant(f, rel, non, p, n, scale, stack, k_of)
        # ∂/∂f_j = scale (p − k_j); ∂/∂f_r = −scale s_r, s_r = #{j : k_j < r}
        for k in range(p + 1):
            below[k] = 0
        for j in range(n):
            grad[non[j]] = scale * (p - k_of[j])
            below[k_of[j]] += 1
        # the value Δ(y) + ⟨g, f⟩ of the ranking found, 1 − AP = (1/p) Σ_r s_r / (r + s_r)
        delta = 0.0
        slope = 0.0
        above = 0
        for r in range(1, p + 1):
            above += below[r - 1]
            grad[rel[r - 1]] = -scale * above
            delta += above / (r + above)
            slope += grad[rel[r - 1]] * f[rel[r - 1]]
        for j in range(n):
            slope += grad[non[j]] * f[non[j]]
        value = delta / p + slope
        if value <= 0.0:
            # the ideal ranking (value 0, slope 0) is at least as good: a rounding tie
            for d in range(start, stop):
                grad[d] = 0.0
            continue
        values[q] = value
        _average_tied(f, rel, p, grad)
        _average_tied(f, non, n, grad)


@njit(**OUTER)
def _place_non_relevant(f, rel, non, p, n, scale, stack, k_of):
    """k_of[j − 1] = the largest maximiser over k of δ_j(k) = Σ_{r > k} t_j(r), for the
    non-relevant documents j = 1..n, ``rel`` and ``non`` sorted by score descending.

    The largest maximisers are non-decreasing in j (module docstring), so a divide and
    conquer finds them: the middle j of a range of j's is maximised over the range of k that
    its neighbours' choices leave, by one scan from the range's top, and the two halves
    recurse on the two sides of its choice. Every level of the recursion scans O(p + n)
    values of k: O((p + n) log n) in all, against O(p·n) for one scan per j.
    """
    inv_p = 1.0 / p
    top = 0
    stack[0, 0] = 1
    stack[0, 1] = n
    stack[0, 2] = 0
    stack[0, 3] = p
    while top >= 0:
        j_lo = stack[top, 0]
        j_hi = stack[top, 1]
        k_lo = stack[top, 2]
        k_hi = stack[top, 3]
        top -= 1
        if j_lo > j_hi:
            continue
        j = (j_lo + j_hi) // 2
        fj = f[non[j - 1]]
        # δ_j(k) − δ_j(k_hi) for k from k_hi down to k_lo; ties go to the larger k
        best = 0.0
        k_best = k_hi
        acc = 0.0
        for k in range(k_hi - 1, k_lo - 1, -1):
            r = k + 1
            acc += inv_p * r / ((r + j) * (r + j - 1.0)) + scale * (fj - f[rel[r - 1]])
            if acc > best:
                best = acc
                k_best = k
        k_of[j - 1] = k_best
        # the larger half first on the stack, so that the stack holds O(log n) ranges
        if j - j_lo > j_hi - j:
            first, second = 0, 1
        else:
            first, second = 1, 0
        for side in (first, second):
            top += 1
            if side == 0:
                stack[top, 0] = j_lo
                stack[top, 1] = j - 1
                stack[top, 2] = k_lo
                stack[top, 3] = k_best
            else:
                stack[top, 0] = j + 1
                stack[top, 1] = j_hi
                stack[top, 2] = k_best
                stack[top, 3] = k_hi


@njit(**OUTER)
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

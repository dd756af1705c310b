"""Ranking-measure kernels: one value per query from scores, labels and ``query_ptr``.

Every kernel takes ``order``, the rows of each query sorted by descending score (stable, so
equal scores keep their row order), as produced by :func:`sort_by_score`. With
``average=True`` a run of equal scores is a tie group and the kernel returns the expected
value of the measure when the group's documents are put in uniformly random order; with
``average=False`` the order is taken as it is. ``k`` is the cutoff (the longest query length
for no cutoff). Queries are independent: every kernel takes a range ``q_start:q_stop`` of
queries, so :mod:`losses._threads` can run blocks of queries on several threads.
"""

import numpy as np
from numba import njit

from losses._kernels import INNER, OUTER
from losses._kernels.fenwick import fenwick_add, fenwick_prefix
from losses._kernels.sorting import argsort_float_descending, argsort_stable, sorted_copy


@njit(**OUTER)
def sort_by_score(q_start, q_stop, f, query_ptr, order):
    """order[a:b] = the rows a..b-1 of each query by descending f; equal f keep row order."""
    for q in range(q_start, q_stop):
        a = query_ptr[q]
        b = query_ptr[q + 1]
        local = argsort_float_descending(f[a:b])
        for i in range(b - a):
            order[a + i] = a + local[i]


@njit(**INNER)
def _group_end(f, order, i, b):
    """First position after the run of scores equal to the score at position i."""
    j = i + 1
    while j < b and f[order[j]] == f[order[i]]:
        j += 1
    return j


@njit(**OUTER)
def linear_measure(q_start, q_stop, f, gain, query_ptr, order, weight, k, average, out):
    """out[q] = Σ_{i<k} weight[i] gain[order[a + i]]: DCG, hits at k, ERU.

    With ``average`` a tie group's mean gain multiplies the sum of its positions' weights
    (the expectation over random orders of the group, since the measure is linear).
    """
    for q in range(q_start, q_stop):
        a = query_ptr[q]
        b = query_ptr[q + 1]
        stop = a + min(k, b - a)
        s = 0.0
        i = a
        while i < stop:
            if average:
                j = _group_end(f, order, i, b)
                g = 0.0
                for t in range(i, j):
                    g += gain[order[t]]
                w = 0.0
                for t in range(i, min(j, stop)):
                    w += weight[t - a]
                s += g / (j - i) * w
                i = j
            else:
                s += weight[i - a] * gain[order[i]]
                i += 1
        out[q] = s


@njit(**OUTER)
def ideal_linear_measure(q_start, q_stop, gain, query_ptr, weight, k, out):
    """out[q] = Σ_{i<k} weight[i] g_(i) with the query's gains sorted descending.

    The largest value over all orderings when ``weight`` is non-increasing.
    """
    for q in range(q_start, q_stop):
        a = query_ptr[q]
        b = query_ptr[q + 1]
        g = sorted_copy(gain[a:b])
        n = b - a
        s = 0.0
        for i in range(min(k, n)):
            s += weight[i] * g[n - 1 - i]
        out[q] = s


@njit(**OUTER)
def precision_sum(q_start, q_stop, f, rel, query_ptr, order, k, average, out):
    """out[q] = Σ_{i<=k, doc at i relevant} P@i, the numerator of average precision.

    A tie group at positions t+1..t+m with r relevant documents, c relevant before it:
    each relevant document lands at t+j with probability 1/m, and the expected number of
    the group's other relevant documents before it is (j−1)(r−1)/(m−1), so the group adds
    (r/m) Σ_j (c + 1 + (j−1)(r−1)/(m−1)) / (t + j) over the positions j within the cutoff.
    """
    for q in range(q_start, q_stop):
        a = query_ptr[q]
        b = query_ptr[q + 1]
        stop = a + min(k, b - a)
        s = 0.0
        c = 0.0
        i = a
        while i < stop:
            j = _group_end(f, order, i, b) if average else i + 1
            m = j - i
            r = 0.0
            for t in range(i, j):
                r += rel[order[t]]
            if r > 0.0:
                if m == 1:
                    s += (c + 1.0) / (i - a + 1)
                else:
                    acc = 0.0
                    for t in range(min(j, stop) - i):
                        acc += (c + 1.0 + t * (r - 1.0) / (m - 1)) / (i - a + t + 1)
                    s += r / m * acc
            c += r
            i = j
        out[q] = s


@njit(**OUTER)
def reciprocal_rank(q_start, q_stop, f, rel, query_ptr, order, k, average, out):
    """out[q] = 1 / (position of the first relevant document), 0 if none within k.

    In the first tie group holding relevant documents (m documents, r relevant, starting
    after position t) the first relevant one is at t+j with probability
    C(m−j, r−1) / C(m, r); P(1) = r/m and P(j+1) = P(j) (m−j−r+1) / (m−j).
    """
    for q in range(q_start, q_stop):
        a = query_ptr[q]
        b = query_ptr[q + 1]
        stop = a + min(k, b - a)
        s = 0.0
        i = a
        while i < stop:
            j = _group_end(f, order, i, b) if average else i + 1
            m = j - i
            r = 0
            for t in range(i, j):
                if rel[order[t]] > 0.0:
                    r += 1
            if r > 0:
                p = r / m
                for t in range(min(j, stop) - i):
                    s += p / (i - a + t + 1)
                    p *= (m - t - r) / (m - t - 1) if m - t - 1 > 0 else 0.0
                break
            i = j
        out[q] = s


@njit(**INNER)
def _subset_mean_products(x, skip, degree, h):
    """h[j] = mean over the j-subsets S of x without x[skip] of Π_{e in S} x_e, j <= degree.

    Adding an element v to a set of size s: h'[j] = ((s+1−j) h[j] + j v h[j−1]) / (s+1),
    a convex combination, so the recursion is stable.
    """
    h[:] = 0.0
    h[0] = 1.0
    s = 0
    for e in range(x.shape[0]):
        if e == skip:
            continue
        v = x[e]
        for j in range(min(s + 1, degree), 0, -1):
            h[j] = ((s + 1 - j) * h[j] + j * v * h[j - 1]) / (s + 1)
        s += 1


@njit(**OUTER)
def expected_reciprocal_rank(q_start, q_stop, f, stop_prob, query_ptr, order, k, average, out):
    """out[q] = Σ_{i<=k} (1/i) R_i Π_{j<i} (1 − R_j) with R = ``stop_prob`` (ERR).

    A tie group of m documents after position t, reached with probability P: its document
    at t+j stops the user with expected probability (1/m) Σ_d R_d h_{j−1}(1 − R_{−d}),
    where h_{j−1} is the mean product of 1 − R over the (j−1)-subsets of the group's other
    documents. Documents with equal R share one h, so a group costs O(L m k) for L levels.
    """
    for q in range(q_start, q_stop):
        a = query_ptr[q]
        b = query_ptr[q + 1]
        stop = a + min(k, b - a)
        s = 0.0
        p = 1.0
        i = a
        while i < stop:
            j = _group_end(f, order, i, b) if average else i + 1
            m = j - i
            if m == 1:
                r = stop_prob[order[i]]
                s += p * r / (i - a + 1)
                p *= 1.0 - r
            else:
                rs = np.empty(m)
                for t in range(m):
                    rs[t] = stop_prob[order[i + t]]
                rs = sorted_copy(rs)
                x = 1.0 - rs
                n_pos = min(j, stop) - i
                h = np.empty(n_pos)
                acc = 0.0
                # an int64 from the start: a literal 0 here would have numba compile the
                # callee below once more, for that literal
                t = np.int64(0)
                while t < m:
                    u = t + 1
                    while u < m and rs[u] == rs[t]:
                        u += 1
                    if rs[t] > 0.0:
                        _subset_mean_products(x, t, n_pos - 1, h)
                        e = 0.0
                        for jj in range(n_pos):
                            e += h[jj] / (i - a + jj + 1)
                        acc += (u - t) * rs[t] * e
                    t = u
                s += p * acc / m
                for t in range(m):
                    p *= x[t]
            i = j
        out[q] = s


@njit(**OUTER)
def concordance(
    q_start,
    q_stop,
    f,
    y,
    g,
    query_ptr,
    order,
    average,
    weighted,
    conc,
    disc,
    total,
    ties_f,
    ties_y,
):
    """Pair statistics of each query for Kendall's tau, in O(n log n).

    conc / disc: over pairs ranked apart (by position, or by score when ``average``) whose
    labels differ, the number (or with ``weighted`` the sum of |g_u − g_v|) of pairs in the
    label order / against it. total: the number of pairs (or Σ_{u<v} |g_u − g_v|).
    ties_f / ties_y: the number of pairs tied in the ranking / in the labels. ``g`` must be
    increasing in ``y``. Documents are visited from the top; a Fenwick tree over label levels
    holds the count and the sum of g of the documents ranked above the current group.
    """
    for q in range(q_start, q_stop):
        a = query_ptr[q]
        b = query_ptr[q + 1]
        n = b - a
        by_label = argsort_stable(y[a:b])
        level = np.empty(n, dtype=np.int64)
        n_levels = 0
        tied_y = 0.0
        spread = 0.0
        run = 0
        for t in range(n):
            row = a + by_label[t]
            if t > 0 and y[row] != y[a + by_label[t - 1]]:
                n_levels += 1
                run = 0
            level[by_label[t]] = n_levels
            tied_y += run
            run += 1
            spread += g[row] * (2 * t - n + 1)
        n_levels += 1
        count_tree = np.zeros(n_levels + 1)
        sum_tree = np.zeros(n_levels + 1)
        n_above = 0.0
        g_above = 0.0
        c = 0.0
        d = 0.0
        tied_f = 0.0
        i = a
        while i < b:
            j = _group_end(f, order, i, b) if average else i + 1
            for t in range(i, j):
                lv = level[order[t] - a]
                below_n = fenwick_prefix(count_tree, lv)
                above_n = n_above - fenwick_prefix(count_tree, lv + 1)
                if weighted:
                    gv = g[order[t]]
                    below_g = fenwick_prefix(sum_tree, lv)
                    above_g = g_above - fenwick_prefix(sum_tree, lv + 1)
                    c += above_g - above_n * gv
                    d += below_n * gv - below_g
                else:
                    c += above_n
                    d += below_n
            for t in range(i, j):
                lv = level[order[t] - a]
                fenwick_add(count_tree, lv, 1.0)
                fenwick_add(sum_tree, lv, g[order[t]])
                n_above += 1.0
                g_above += g[order[t]]
            tied_f += (j - i) * (j - i - 1) / 2
            i = j
        conc[q] = c
        disc[q] = d
        total[q] = spread if weighted else n * (n - 1) / 2
        ties_f[q] = tied_f
        ties_y[q] = tied_y

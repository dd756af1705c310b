"""Ordinal-regression kernels: the pairwise hinge over all comparable pairs of each query.

Rows of query ``q`` are ``query_ptr[q]:query_ptr[q + 1]``; ``rank`` holds each row's dense
level rank within its query (0 .. L_q − 1) and ``levels[level_ptr[q] + r]`` /
``level_count[level_ptr[q] + r]`` the label value and the number of rows of rank ``r``.
A pair (i, j) with y_i < y_j is *active* when f_i + margin > f_j (the hinge, margin 1) or
f_i + margin >= f_j (the misordering count, margin 0). Its cost is C(y_i, y_j), either
``alpha + beta (y_j − y_i)`` (``cost`` of shape (0, 0)) or ``cost[y_i, y_j]``.

The sweep is the appendix's Algorithm 1 (Teo et al., JMLR 2010): sort f once, then merge
the lower endpoints f_j with the upper endpoints f_i + margin in ascending order. At an
upper endpoint of row i the active pairs with i as the less relevant member are exactly
those whose lower endpoint was already passed; at a lower endpoint of row j, those with
j as the more relevant member are exactly the rows whose upper endpoint is still ahead.
Ties between an upper and a lower endpoint are broken so the pair is inactive for the hinge
(1 + f_i − f_j = 0 contributes 0 and subgradient 0) and active for the count.
Per-level counts live in Fenwick trees over the level ranks for the structured costs
(O(m log L) per query after sorting) and in plain arrays for a cost matrix (O(m L)).
Sorting is a comparison sort, O(m log m), below ``_RADIX_MIN`` rows and an O(m) radix sort
above. Each query sorts its scores into contiguous buffers first, so the sweep reads
memory in order even for a query of millions of rows.
"""

import numpy as np
from numba import njit, prange

from losses._kernels.sorting import argsort_stable

# queries at least this long are sorted by radix sort, shorter ones by comparison sort
_RADIX_MIN = 1024
_RADIX_BITS = 11


@njit(cache=True)
def _argsort(x):
    """Indices sorting ``x`` ascending (any order among equal values).

    Comparison sort for short arrays; for long ones an LSD radix sort with 11-bit digits on
    the order-preserving unsigned-integer image of the float64 bits, O(m) and cache-friendly
    (passes over a digit shared by all keys are skipped).
    """
    m = x.shape[0]
    if m < _RADIX_MIN:
        return argsort_stable(x)
    bits = x.view(np.uint64)
    sign = np.uint64(1) << np.uint64(63)
    keys = np.empty(m, dtype=np.uint64)
    order = np.arange(m)
    for k in range(m):
        b = bits[k]
        keys[k] = ~b if b & sign else b | sign
    tmp_keys = np.empty_like(keys)
    tmp_order = np.empty_like(order)
    n_digits = 1 << _RADIX_BITS
    mask = np.uint64(n_digits - 1)
    count = np.empty(n_digits, dtype=np.int64)
    for p in range((64 + _RADIX_BITS - 1) // _RADIX_BITS):
        shift = np.uint64(p * _RADIX_BITS)
        count[:] = 0
        for k in range(m):
            count[(keys[k] >> shift) & mask] += 1
        if count[(keys[0] >> shift) & mask] == m:
            continue
        start = 0
        for d in range(n_digits):
            c = count[d]
            count[d] = start
            start += c
        for k in range(m):
            d = (keys[k] >> shift) & mask
            tmp_keys[count[d]] = keys[k]
            tmp_order[count[d]] = order[k]
            count[d] += 1
        keys, tmp_keys = tmp_keys, keys
        order, tmp_order = tmp_order, order
    return order


@njit(cache=True)
def _tree_add(tree, r, delta):
    while r < tree.shape[0]:
        tree[r] += delta
        r |= r + 1


@njit(cache=True)
def _tree_prefix(tree, r):
    """Sum over ranks 0 .. r − 1."""
    total = 0.0
    k = r - 1
    while k >= 0:
        total += tree[k]
        k = (k & (k + 1)) - 1
    return total


@njit(cache=True)
def _sweep(fs, rs, lev, count, alpha, beta, cost, margin, ties_active, work, as_lower, as_upper):
    """Summed cost of the active pairs of each row of one query, rows sorted by score.

    ``fs`` / ``rs`` are the scores / level ranks in ascending score order. ``as_lower[k]``
    sums C over the active pairs where the k-th row is the less relevant member,
    ``as_upper[k]`` where it is the more relevant one. ``work`` is a zeroed (4, L_q) block:
    remaining upper endpoints and passed lower endpoints per level (counts, and
    level-weighted sums for the structured costs).
    """
    m = fs.shape[0]
    n_lev = lev.shape[0]
    use_matrix = cost.shape[0] > 0
    up_n = work[0]
    up_v = work[1]
    lo_n = work[2]
    lo_v = work[3]
    for r in range(n_lev):
        up_n[r] += count[r]
        if not use_matrix:
            up_v[r] += count[r] * lev[r]
            parent = r | (r + 1)
            if parent < n_lev:
                up_n[parent] += up_n[r]
                up_v[parent] += up_v[r]
    lo_total_n = 0.0
    lo_total_v = 0.0
    pa = 0
    pb = 0
    while pb < m:
        upper_first = True
        if pa < m:
            b = fs[pb] + margin
            upper_first = b < fs[pa] if ties_active else b <= fs[pa]
        if upper_first:
            z = rs[pb]
            total = 0.0
            if use_matrix:
                for k in range(z + 1, n_lev):
                    total += cost[lev[z], lev[k]] * lo_n[k]
                up_n[z] -= 1.0
            else:
                vz = float(lev[z])
                n_above = lo_total_n - _tree_prefix(lo_n, z + 1)
                v_above = lo_total_v - _tree_prefix(lo_v, z + 1)
                total = alpha * n_above + beta * (v_above - vz * n_above)
                _tree_add(up_n, z, -1.0)
                _tree_add(up_v, z, -vz)
            as_lower[pb] = total
            pb += 1
        else:
            z = rs[pa]
            total = 0.0
            if use_matrix:
                for k in range(z):
                    total += cost[lev[k], lev[z]] * up_n[k]
                lo_n[z] += 1.0
            else:
                vz = float(lev[z])
                n_below = _tree_prefix(up_n, z)
                v_below = _tree_prefix(up_v, z)
                total = alpha * n_below + beta * (vz * n_below - v_below)
                _tree_add(lo_n, z, 1.0)
                _tree_add(lo_v, z, vz)
                lo_total_n += 1.0
                lo_total_v += vz
            as_upper[pa] = total
            pa += 1
    # every upper endpoint is passed: the remaining rows have no active pair above them
    as_upper[pa:] = 0.0


@njit(cache=True)
def _gather_sorted(f, rank, s, e, fs, rs):
    """Sort rows s:e by score; write their scores and level ranks in that order."""
    order = _argsort(f[s:e])
    for k in range(e - s):
        fs[s + k] = f[s + order[k]]
        rs[s + k] = rank[s + order[k]]
    return order


@njit(parallel=True, cache=True)
def ordinal_hinge(
    f, query_ptr, rank, level_ptr, levels, level_count, weight, alpha, beta, cost, values, grad
):
    """Per query w_q Σ_{y_i<y_j} C(y_i, y_j) max(0, 1 + f_i − f_j) and its subgradient.

    ``weight[q]`` is the normalisation w_q (0 for a query without comparable pairs, which
    gets loss 0 and gradient 0). The subgradient is w_q Σ C (e_i − e_j) over the pairs with
    1 + f_i − f_j > 0. The value is accumulated from the row sums with f centred at its
    median, so the cancellation error scales with the spread of f, not its offset.
    """
    n = f.shape[0]
    fs = np.empty(n)
    rs = np.empty(n, dtype=np.int64)
    as_lower = np.empty(n)
    as_upper = np.empty(n)
    work = np.zeros((4, level_ptr[-1]))
    for q in prange(query_ptr.shape[0] - 1):
        s = query_ptr[q]
        e = query_ptr[q + 1]
        w = weight[q]
        if w == 0.0:
            values[q] = 0.0
            grad[s:e] = 0.0
            continue
        order = _gather_sorted(f, rank, s, e, fs, rs)
        lp = level_ptr[q]
        lq = level_ptr[q + 1]
        _sweep(
            fs[s:e],
            rs[s:e],
            levels[lp:lq],
            level_count[lp:lq],
            alpha,
            beta,
            cost,
            1.0,
            False,
            work[:, lp:lq],
            as_lower[s:e],
            as_upper[s:e],
        )
        center = fs[s + (e - s) // 2]
        total = 0.0
        for k in range(e - s):
            d = fs[s + k] - center
            total += as_lower[s + k] * (d + 1.0) - as_upper[s + k] * d
            grad[s + order[k]] = w * (as_lower[s + k] - as_upper[s + k])
        # a sum of non-negative pair terms; clip the rounding of the centred form
        values[q] = w * max(total, 0.0)


@njit(parallel=True, cache=True)
def ordinal_misordered(
    f, query_ptr, rank, level_ptr, levels, level_count, weight, alpha, beta, cost, values
):
    """Per query w_q Σ_{y_i<y_j} C(y_i, y_j) [f_i >= f_j] (ties count as misordered)."""
    n = f.shape[0]
    fs = np.empty(n)
    rs = np.empty(n, dtype=np.int64)
    as_lower = np.empty(n)
    as_upper = np.empty(n)
    work = np.zeros((4, level_ptr[-1]))
    for q in prange(query_ptr.shape[0] - 1):
        s = query_ptr[q]
        e = query_ptr[q + 1]
        w = weight[q]
        if w == 0.0:
            values[q] = 0.0
            continue
        _gather_sorted(f, rank, s, e, fs, rs)
        lp = level_ptr[q]
        lq = level_ptr[q + 1]
        _sweep(
            fs[s:e],
            rs[s:e],
            levels[lp:lq],
            level_count[lp:lq],
            alpha,
            beta,
            cost,
            0.0,
            True,
            work[:, lp:lq],
            as_lower[s:e],
            as_upper[s:e],
        )
        total = 0.0
        for k in range(s, e):
            total += as_lower[k]
        values[q] = w * total


@njit(parallel=True, cache=True)
def query_levels(y, query_ptr, n_levels, order):
    """Per query: its rows by increasing label (stable) into ``order``, and its number of
    distinct labels into ``n_levels``."""
    for q in prange(query_ptr.shape[0] - 1):
        a = query_ptr[q]
        b = query_ptr[q + 1]
        local = argsort_stable(y[a:b])
        count = 0
        for i in range(b - a):
            order[a + i] = a + local[i]
            if i == 0 or y[a + local[i]] != y[a + local[i - 1]]:
                count += 1
        n_levels[q] = count


@njit(parallel=True, cache=True)
def fill_levels(y, query_ptr, order, level_ptr, levels, level_count, rank, sum_sq):
    """From :func:`query_levels`' ``order``: each query's distinct labels (increasing) and
    their counts, each row's level rank within its query, and Σ count² per query."""
    for q in prange(query_ptr.shape[0] - 1):
        a = query_ptr[q]
        b = query_ptr[q + 1]
        t = level_ptr[q] - 1
        s = 0.0
        for i in range(a, b):
            row = order[i]
            if i == a or y[row] != y[order[i - 1]]:
                t += 1
                levels[t] = y[row]
                level_count[t] = 0.0
            level_count[t] += 1.0
            rank[row] = t - level_ptr[q]
        for u in range(level_ptr[q], level_ptr[q + 1]):
            s += level_count[u] * level_count[u]
        sum_sq[q] = s

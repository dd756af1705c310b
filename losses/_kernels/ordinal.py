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
Sorting is a comparison sort, O(m log m), below ``RADIX_MIN`` rows and an O(m) radix sort
above (:func:`losses._kernels.sorting.argsort_float`). Each query sorts its scores into
contiguous buffers first, so the sweep reads memory in order even for a query of millions
of rows.
"""

import numpy as np
from numba import njit

from losses._kernels import OUTER
from losses._kernels.fenwick import fenwick_add, fenwick_init, fenwick_prefix
from losses._kernels.sorting import argsort_float, argsort_stable

# the squared hinge's sweep sums over per-level arrays up to this many levels in a query
# (graded relevance, 2 to 5 levels), and keeps Fenwick trees above
_FEW_LEVELS = 8


@njit(**OUTER)
def ordinal_pairs(
    q_start,
    q_stop,
    f,
    query_ptr,
    rank,
    level_ptr,
    levels,
    level_count,
    weight,
    row_weight,
    radix,
    alpha,
    beta,
    cost,
    hinge,
    values,
    grad,
):
    """Queries ``q_start:q_stop``: the hinge loss and its subgradient, or the misordering count.

    With ``hinge``: per query w_q Σ_{y_i<y_j} C(y_i, y_j) max(0, 1 + f_i − f_j) into
    ``values`` and its subgradient w_q Σ C (e_i − e_j), over the pairs with
    1 + f_i − f_j > 0, into ``grad``. ``weight[q]`` is the normalisation w_q (0 for a query
    without comparable pairs, which gets loss 0 and gradient 0). The value is accumulated from
    the row sums with f centred at its median, so the cancellation error scales with the spread
    of f, not its offset.

    Without ``hinge``: per query w_q Σ_{y_i<y_j} C(y_i, y_j) [f_i >= f_j] (ties count as
    misordered) into ``values``; ``grad`` is not touched (it may be empty).

    ``row_weight`` (one weight s_i per row, or None for all 1) weighs each pair by s_i s_j:
    the per-level counts of the sweep become sums of weights, and a row's share is
    multiplied by its own weight (``level_count`` then holds each level's summed weight).
    With None every ``row_weight is not None`` branch is pruned at compilation, so the
    unweighted kernel is the one without weights.

    One kernel serves both, so one compilation does (see :mod:`losses._threads`). ``radix``
    is True when some query has ``RADIX_MIN`` rows or more (they are sorted by radix sort),
    else None, which leaves the radix sort out of the compiled kernel.
    """
    # per-query scratch, reused by every query of the block: the longest query's length
    n = 0
    for q in range(q_start, q_stop):
        n = max(n, query_ptr[q + 1] - query_ptr[q])
    fs = np.empty(n)
    rs = np.empty(n, dtype=np.int64)
    as_lower = np.empty(n)
    as_upper = np.empty(n)
    work = np.empty((4, level_ptr[q_stop] - level_ptr[q_start]))
    if row_weight is not None:
        ws = np.empty(n)
    else:
        ws = np.empty(0)
    margin = 1.0 if hinge else 0.0
    use_matrix = cost.shape[0] > 0
    for q in range(q_start, q_stop):
        s = query_ptr[q]
        e = query_ptr[q + 1]
        w = weight[q]
        if w == 0.0:
            values[q] = 0.0
            if hinge:
                grad[s:e] = 0.0
            continue
        # with radix None (no query of RADIX_MIN rows) the radix sort is not compiled in
        if radix is None:
            order = argsort_stable(f[s:e])
        else:
            order = argsort_float(f[s:e])
        for k in range(e - s):
            fs[k] = f[s + order[k]]
            rs[k] = rank[s + order[k]]
            if row_weight is not None:
                ws[k] = row_weight[s + order[k]]
        lp = level_ptr[q]
        lq = level_ptr[q + 1]
        # The sweep (module docstring): as_lower[k] sums C over the active pairs where the
        # k-th row in ascending score order is the less relevant member, as_upper[k] where
        # it is the more relevant one. work holds the remaining upper endpoints and the
        # passed lower endpoints per level (counts, and level-weighted sums for the
        # structured costs). Written out here rather than called, so that LLVM optimises
        # it once, in this kernel: with the choice of sort above also written out, the
        # first loss call from an empty cache compiles faster than with both as functions
        # of their own (experiments/bench_compile.py).
        fs_q = fs[: e - s]
        rs_q = rs[: e - s]
        lev = levels[lp:lq]
        count = level_count[lp:lq]
        work_q = work[:, lp - level_ptr[q_start] : lq - level_ptr[q_start]]
        lower_q = as_lower[: e - s]
        upper_q = as_upper[: e - s]
        m = e - s
        n_lev = lq - lp
        up_n = work_q[0]
        up_v = work_q[1]
        lo_n = work_q[2]
        lo_v = work_q[3]
        for r in range(n_lev):
            up_n[r] = count[r]
            up_v[r] = count[r] * lev[r]
            lo_n[r] = 0.0
            lo_v[r] = 0.0
        if not use_matrix:
            fenwick_init(up_n, n_lev)
            fenwick_init(up_v, n_lev)
        lo_total_n = 0.0
        lo_total_v = 0.0
        pa = 0
        pb = 0
        while pb < m:
            upper_first = True
            if pa < m:
                upper_end = fs_q[pb] + margin
                upper_first = upper_end < fs_q[pa] if not hinge else upper_end <= fs_q[pa]
            if upper_first:
                z = rs_q[pb]
                sz = 1.0
                if row_weight is not None:
                    sz = ws[pb]
                total = 0.0
                if use_matrix:
                    for k in range(z + 1, n_lev):
                        total += cost[lev[z], lev[k]] * lo_n[k]
                    up_n[z] -= sz
                else:
                    vz = float(lev[z])
                    n_above = lo_total_n - fenwick_prefix(lo_n, z + 1)
                    v_above = lo_total_v - fenwick_prefix(lo_v, z + 1)
                    total = alpha * n_above + beta * (v_above - vz * n_above)
                    fenwick_add(up_n, z, -sz)
                    fenwick_add(up_v, z, -vz * sz)
                if row_weight is not None:
                    total *= sz
                lower_q[pb] = total
                pb += 1
            else:
                z = rs_q[pa]
                sz = 1.0
                if row_weight is not None:
                    sz = ws[pa]
                total = 0.0
                if use_matrix:
                    for k in range(z):
                        total += cost[lev[k], lev[z]] * up_n[k]
                    lo_n[z] += sz
                else:
                    vz = float(lev[z])
                    n_below = fenwick_prefix(up_n, z)
                    v_below = fenwick_prefix(up_v, z)
                    total = alpha * n_below + beta * (vz * n_below - v_below)
                    fenwick_add(lo_n, z, sz)
                    fenwick_add(lo_v, z, vz * sz)
                    lo_total_n += sz
                    lo_total_v += vz * sz
                if row_weight is not None:
                    total *= sz
                upper_q[pa] = total
                pa += 1
        # every upper endpoint is passed: the remaining rows have no active pair above them
        upper_q[pa:] = 0.0
        total = 0.0
        if hinge:
            center = fs[(e - s) // 2]
            for k in range(e - s):
                d = fs[k] - center
                total += as_lower[k] * (d + 1.0) - as_upper[k] * d
                grad[s + order[k]] = w * (as_lower[k] - as_upper[k])
            # a sum of non-negative pair terms; clip the rounding of the centred form
            total = max(total, 0.0)
        else:
            for k in range(e - s):
                total += as_lower[k]
        values[q] = w * total


@njit(**OUTER)
def ordinal_squared(
    q_start,
    q_stop,
    f,
    query_ptr,
    rank,
    level_ptr,
    levels,
    level_count,
    weight,
    row_weight,
    radix,
    alpha,
    beta,
    cost,
    direction,
    presorted,
    values,
    grad,
):
    """Queries ``q_start:q_stop``: the squared pairwise hinge, its gradient, or H_f d.

    With ``direction`` None: per query w_q Σ_{y_i<y_j} C(y_i, y_j) max(0, 1 + f_i − f_j)²
    into ``values`` and its gradient 2 w_q Σ C (1 + f_i − f_j)(e_i − e_j), over the active
    pairs (1 + f_i − f_j > 0), into ``grad``. With a ``direction`` d (shape of f): the
    product of the generalised Hessian, H_f d = 2 w_q Σ_active C (d_i − d_j)(e_i − e_j),
    into ``grad``; ``values`` is not touched (it may be empty).

    Both are one sweep (module docstring) with per-level sums of two row quantities: a pair
    term is r_ij = a_i − b_j with a = 1 + f − c, b = f − c (f centred at its median c, so
    that cancellation scales with the spread of f, not its offset) for the gradient, and
    a = b = d for the Hessian product. At the upper endpoint of row i the sweep holds, per
    level, the passed lower rows j (their weights s_j and sums of s_j b_j); at the lower
    endpoint of row j, the remaining upper rows i (s_i and s_i a_i). For the structured
    costs C = α + β(v_j − v_i) with more than ``_FEW_LEVELS`` levels the level-weighted sums
    (s v and s v a / s v b) join them in Fenwick trees, so that

        A_i = Σ_{j active} C r_ij = (α − β v_i)(N a_i − S_b) + β (V a_i − T_b),
        B_j = Σ_{i active} C r_ij = (α + β v_j)(S_a − N b_j) − β (T_a − V b_j),

    from counts N, value sums V = Σ s v, S = Σ s a (or b) and T = Σ s v a (or b) over the
    levels above (below) the row's; row i's entry is 2 w_q s_i (A_i − B_i) and the value
    w_q Σ_i s_i (a_i A_i − b_i B_i) (= w_q Σ C r², clipped at 0 against rounding). A cost
    matrix, and a query of at most ``_FEW_LEVELS`` levels, keep plain per-level arrays and
    sum over the levels above (below), O(L) per row. O(m log m + m log L) per query for
    the named costs, O(m log m + m L) for a matrix; ``radix`` and ``row_weight`` as in
    :func:`ordinal_pairs`. ``presorted`` (None, or each query's rows in ascending order of f,
    as :func:`sort_queries` writes, in any integer type: four bytes per row suffice) spares
    the sort when many products share one f.
    """
    # per-query scratch, reused by every query of the block: the longest query's length
    n = 0
    for q in range(q_start, q_stop):
        n = max(n, query_ptr[q + 1] - query_ptr[q])
    fs = np.empty(n)
    ra = np.empty(n)
    rb = np.empty(n)
    rs = np.empty(n, dtype=np.int64)
    as_lower = np.empty(n)
    as_upper = np.empty(n)
    work = np.empty((8, level_ptr[q_stop] - level_ptr[q_start]))
    if row_weight is not None:
        ws = np.empty(n)
    else:
        ws = np.empty(0)
    use_matrix = cost.shape[0] > 0
    # the given order widened to int64 per query (one type for order on every path)
    given = np.empty(n if presorted is not None else 0, dtype=np.int64)
    for q in range(q_start, q_stop):
        s = query_ptr[q]
        e = query_ptr[q + 1]
        w = weight[q]
        if w == 0.0:
            if direction is None:
                values[q] = 0.0
            grad[s:e] = 0.0
            continue
        m = e - s
        if presorted is not None:
            for k in range(m):
                given[k] = presorted[s + k]
            order = given[:m]
        elif radix is None:
            order = argsort_stable(f[s:e])
        else:
            order = argsort_float(f[s:e])
        for k in range(m):
            fs[k] = f[s + order[k]]
            rs[k] = rank[s + order[k]]
            if row_weight is not None:
                ws[k] = row_weight[s + order[k]]
        center = fs[m // 2]
        for k in range(m):
            if direction is None:
                rb[k] = fs[k] - center
                ra[k] = rb[k] + 1.0
            else:
                ra[k] = direction[s + order[k]]
                rb[k] = ra[k]
        lp = level_ptr[q]
        lq = level_ptr[q + 1]
        fs_q = fs[:m]
        rs_q = rs[:m]
        lev = levels[lp:lq]
        count = level_count[lp:lq]
        work_q = work[:, lp - level_ptr[q_start] : lq - level_ptr[q_start]]
        n_lev = lq - lp
        up_n = work_q[0]
        up_v = work_q[1]
        up_a = work_q[2]
        up_va = work_q[3]
        lo_n = work_q[4]
        lo_v = work_q[5]
        lo_b = work_q[6]
        lo_vb = work_q[7]
        for r in range(n_lev):
            up_n[r] = count[r]
            up_v[r] = count[r] * lev[r]
            up_a[r] = 0.0
            up_va[r] = 0.0
            lo_n[r] = 0.0
            lo_v[r] = 0.0
            lo_b[r] = 0.0
            lo_vb[r] = 0.0
        # the remaining upper rows' sums of s a start as those of the whole query
        for k in range(m):
            sk = 1.0
            if row_weight is not None:
                sk = ws[k]
            z = rs_q[k]
            up_a[z] += sk * ra[k]
            up_va[z] += sk * ra[k] * lev[z]
        # per-level arrays, O(L) per row, for a cost matrix and for a few levels (cheaper
        # than four Fenwick trees a side there); Fenwick trees otherwise
        arrays = use_matrix or n_lev <= _FEW_LEVELS
        if not arrays:
            fenwick_init(up_n, n_lev)
            fenwick_init(up_v, n_lev)
            fenwick_init(up_a, n_lev)
            fenwick_init(up_va, n_lev)
        lo_total_n = 0.0
        lo_total_v = 0.0
        lo_total_b = 0.0
        lo_total_vb = 0.0
        pa = 0
        pb = 0
        while pb < m:
            # the upper endpoint f_i + 1 goes first on a tie: the pair at the hinge is inactive
            upper_first = pa >= m or fs_q[pb] + 1.0 <= fs_q[pa]
            if upper_first:
                z = rs_q[pb]
                sz = 1.0
                if row_weight is not None:
                    sz = ws[pb]
                ai = ra[pb]
                total = 0.0
                if arrays:
                    for k in range(z + 1, n_lev):
                        if use_matrix:
                            c = cost[lev[z], lev[k]]
                        else:
                            c = alpha + beta * (lev[k] - lev[z])
                        total += c * (lo_n[k] * ai - lo_b[k])
                    up_n[z] -= sz
                    up_a[z] -= sz * ai
                else:
                    vz = float(lev[z])
                    n_above = lo_total_n - fenwick_prefix(lo_n, z + 1)
                    v_above = lo_total_v - fenwick_prefix(lo_v, z + 1)
                    b_above = lo_total_b - fenwick_prefix(lo_b, z + 1)
                    vb_above = lo_total_vb - fenwick_prefix(lo_vb, z + 1)
                    total = (alpha - beta * vz) * (n_above * ai - b_above) + beta * (
                        v_above * ai - vb_above
                    )
                    fenwick_add(up_n, z, -sz)
                    fenwick_add(up_v, z, -vz * sz)
                    fenwick_add(up_a, z, -sz * ai)
                    fenwick_add(up_va, z, -vz * sz * ai)
                as_lower[pb] = total * sz
                pb += 1
            else:
                z = rs_q[pa]
                sz = 1.0
                if row_weight is not None:
                    sz = ws[pa]
                bj = rb[pa]
                total = 0.0
                if arrays:
                    for k in range(z):
                        if use_matrix:
                            c = cost[lev[k], lev[z]]
                        else:
                            c = alpha + beta * (lev[z] - lev[k])
                        total += c * (up_a[k] - up_n[k] * bj)
                    lo_n[z] += sz
                    lo_b[z] += sz * bj
                else:
                    vz = float(lev[z])
                    n_below = fenwick_prefix(up_n, z)
                    v_below = fenwick_prefix(up_v, z)
                    a_below = fenwick_prefix(up_a, z)
                    va_below = fenwick_prefix(up_va, z)
                    total = (alpha + beta * vz) * (a_below - n_below * bj) - beta * (
                        va_below - v_below * bj
                    )
                    fenwick_add(lo_n, z, sz)
                    fenwick_add(lo_v, z, vz * sz)
                    fenwick_add(lo_b, z, sz * bj)
                    fenwick_add(lo_vb, z, vz * sz * bj)
                    lo_total_n += sz
                    lo_total_v += vz * sz
                    lo_total_b += sz * bj
                    lo_total_vb += vz * sz * bj
                as_upper[pa] = total * sz
                pa += 1
        # every upper endpoint is passed: the remaining rows have no active pair above them
        as_upper[pa:m] = 0.0
        total = 0.0
        for k in range(m):
            grad[s + order[k]] = 2.0 * w * (as_lower[k] - as_upper[k])
            if direction is None:
                total += ra[k] * as_lower[k] - rb[k] * as_upper[k]
        if direction is None:
            values[q] = w * max(total, 0.0)


@njit(**OUTER)
def ordinal_squared_hessp(
    q_start,
    q_stop,
    d,
    f,
    query_ptr,
    rank,
    level_ptr,
    levels,
    level_count,
    weight,
    row_weight,
    radix,
    alpha,
    beta,
    cost,
    presorted,
    values,
    out,
):
    """H_f d of :func:`ordinal_squared` with the direction first, the block-kernel order of
    :mod:`losses._base` (``kernel(q_start, q_stop, d, *args, values, out)``), so that the
    product X_bᵀ H X_b v can run block by block over X; ``values`` is not touched."""
    ordinal_squared(
        q_start, q_stop, f, query_ptr, rank, level_ptr, levels, level_count, weight,
        row_weight, radix, alpha, beta, cost, d, presorted, values, out,
    )  # fmt: skip


@njit(**OUTER)
def sort_queries(q_start, q_stop, f, query_ptr, radix, out):
    """``out[s:e]`` = the rows of each query ``q_start:q_stop`` (0-based within the query) in
    ascending order of f, stable; the sort of :func:`ordinal_squared`."""
    for q in range(q_start, q_stop):
        s = query_ptr[q]
        e = query_ptr[q + 1]
        if radix is None:
            out[s:e] = argsort_stable(f[s:e])
        else:
            out[s:e] = argsort_float(f[s:e])

"""Preference-relation kernels: explicit pairs grouped per query (CSR over ``pref_ptr``).

The pairs of query ``q`` are ``pref_ptr[q]:pref_ptr[q + 1]``; pair p says row
``pair_j[p]`` should rank above row ``pair_i[p]``, with cost ``pair_cost[p]``. Both rows lie
in query q, so queries touch disjoint rows and run in parallel.
"""

import numpy as np
from numba import njit

from losses._kernels import OUTER


@njit(**OUTER)
def preference_hinge(
    q_start, q_stop, f, pref_ptr, pair_i, pair_j, pair_cost, weight, values, grad
):
    """Per query w_q Σ_p c_p max(0, 1 + f_i − f_j) and its subgradient (``grad`` zeroed).

    A pair exactly at the hinge (1 + f_i − f_j = 0) contributes subgradient 0. An empty
    ``pair_cost`` means every cost is 1 (a uniform cost is folded into ``weight``).

    The loop is shaped by what it costs per pair (against a plain loop over the pairs;
    experiments/bench_oracles.py measures it): consecutive pairs with the same row i (the order
    :func:`fill_label_pairs` writes) add i's subgradient in a register and write it once,
    instead of a read-modify-write of one memory cell per pair; whether a pair is active
    enters as a 0 / 1 factor rather than a branch (unpredictable); and unsigned indices (the
    loss passes uint32 below 2^32 rows) need no test for negative indexing. Any order of the
    pairs gives the same result up to rounding.
    """
    has_costs = pair_cost.shape[0] > 0
    for q in range(q_start, q_stop):
        w = weight[q]
        total = 0.0
        stop = pref_ptr[q + 1]
        p = pref_ptr[q]
        while p < stop:
            i = pair_i[p]
            fi = 1.0 + f[i]
            run = 0.0
            if has_costs:
                while p < stop and pair_i[p] == i:
                    j = pair_j[p]
                    margin = fi - f[j]
                    c = pair_cost[p] * np.float64(margin > 0.0)
                    total += pair_cost[p] * max(margin, 0.0)
                    run += c
                    grad[j] -= w * c
                    p += 1
            else:
                while p < stop and pair_i[p] == i:
                    j = pair_j[p]
                    margin = fi - f[j]
                    c = np.float64(margin > 0.0)
                    total += max(margin, 0.0)
                    run += c
                    grad[j] -= w * c
                    p += 1
            grad[i] += w * run
        values[q] = w * total


@njit(**OUTER)
def preference_violations(q_start, q_stop, f, pref_ptr, pair_i, pair_j, pair_cost, weight, values):
    """Per query w_q Σ_p c_p [f_i >= f_j] (a tie counts as a violated preference).

    An empty ``pair_cost`` means every cost is 1.
    """
    has_costs = pair_cost.shape[0] > 0
    for q in range(q_start, q_stop):
        total = 0.0
        for p in range(pref_ptr[q], pref_ptr[q + 1]):
            if f[pair_i[p]] >= f[pair_j[p]]:
                total += pair_cost[p] if has_costs else 1.0
        values[q] = weight[q] * total


@njit(**OUTER)
def count_label_pairs(q_start, q_stop, y, query_ptr, counts):
    """Number of pairs y_i < y_j within each query."""
    for q in range(q_start, q_stop):
        total = 0
        for i in range(query_ptr[q], query_ptr[q + 1]):
            for j in range(query_ptr[q], query_ptr[q + 1]):
                if y[i] < y[j]:
                    total += 1
        counts[q] = total


@njit(**OUTER)
def fill_label_pairs(q_start, q_stop, y, query_ptr, pref_ptr, pair_i, pair_j):
    """Write the pairs y_i < y_j of each query at ``pref_ptr[q]:``, ordered by (i, j)."""
    for q in range(q_start, q_stop):
        p = pref_ptr[q]
        for i in range(query_ptr[q], query_ptr[q + 1]):
            for j in range(query_ptr[q], query_ptr[q + 1]):
                if y[i] < y[j]:
                    pair_i[p] = i
                    pair_j[p] = j
                    p += 1


@njit(**OUTER)
def preference_squared(
    q_start, q_stop, f, pref_ptr, pair_i, pair_j, pair_cost, weight, direction, values, grad
):
    """The squared hinge over the pairs of each query, its gradient, or H_f d (``grad``
    zeroed).

    With ``direction`` None: per query w_q Σ_p c_p max(0, 1 + f_i − f_j)² into ``values``
    and its gradient 2 w_q Σ_p c_p max(0, 1 + f_i − f_j)(e_i − e_j) into ``grad``. With a
    direction d: the generalised Hessian's product 2 w_q Σ_{p active} c_p (d_i − d_j)
    (e_i − e_j), active meaning 1 + f_i − f_j > 0, into ``grad`` (``values`` untouched). An
    empty ``pair_cost`` means every cost is 1. O(|P_q|) per query.
    """
    has_costs = pair_cost.shape[0] > 0
    for q in range(q_start, q_stop):
        w2 = 2.0 * weight[q]
        total = 0.0
        for p in range(pref_ptr[q], pref_ptr[q + 1]):
            i = pair_i[p]
            j = pair_j[p]
            r = (1.0 + f[i]) - f[j]
            if r > 0.0:
                c = pair_cost[p] if has_costs else 1.0
                if direction is None:
                    total += c * r * r
                    t = w2 * c * r
                else:
                    t = w2 * c * (direction[i] - direction[j])
                grad[i] += t
                grad[j] -= t
        if direction is None:
            values[q] = weight[q] * total

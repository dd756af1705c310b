"""Structured listwise kernels: the NDCG / NERU max-margin loss and its ranking metric.

For one query with scores ``f``, gains ``b`` (gain levels ``level``: dense ranks of ``b``),
position discounts ``a`` (zero beyond the top ``k``), normaliser ``1 / Z`` and position
weights ``c`` (non-increasing, non-negative), the loss is

    l(f) = max_π [1 − (1/Z) Σ_i a_i b_{π(i)} + Σ_i c_i f_{π(i)}] − Σ_i c_i f_{σ(i)},

π(i) the document at position i and σ the ideal ordering (gains descending) that puts
documents of equal gain in increasing score. See :mod:`losses.listwise` for the derivation,
the convexity proof and the reductions used here; this module holds the array code.

Per query (``K = min(k, m)`` positions carry a non-zero discount; the *rank order* sorts
documents by score, descending, ties by index):

1. candidates: documents with fewer than ``K`` *dominators* (documents earlier in the rank
   order whose gain is not larger); only they can occupy the top ``K`` positions;
2. ``c`` zero beyond k (``truncated``) and ``K < m``: a ``K × n_candidates`` assignment.
   On batches with long queries (``select``) no full sort: one pass keeps the ``K`` best
   documents of every gain level (the candidates are among them) and the lowest-scored
   documents of the level that σ cuts at position ``K``, ``O(m)`` typically plus a small
   sort. Otherwise, and with the rank order given (``given_order``, latent ties), the
   candidates are found in the rank order;
3. ``K = m``: an ``m × m`` assignment (documents as rows), started from the duals the
   query's previous assignment ended with when the loss keeps them and the result is
   certified (``duals`` of :func:`structured_loss`), else from the score part's duals;
4. otherwise (``c`` positive beyond k): a min-cost flow whose tail part is a chain over the
   rank order fills the top ``K`` positions; the other documents follow in rank order. It
   is solved by ``K × n_candidates`` assignments with the chain's costs linearised, whose
   result is certified optimal (:func:`_secant_top`), and by the flow itself
   (:func:`_chain_flow`) when a few of them do not certify. When every such query has few
   gain levels (``lattice``), a dynamic programme over per-level counts replaces both
   (:func:`_lattice_top`): the same loss, and the same subgradient where the maximiser is
   unique;
5. the loss and subgradient are evaluated from that permutation and σ (or, with latent
   ties, σ's part given per document).

A query whose scores are all equal skips steps 1–4 (:func:`_tied_query_loss`): every
ordering then has the same score part, and the K smallest gains in increasing order on top
maximise the loss.

The kernels take a range of queries, so that :mod:`losses._threads` can run blocks of
queries on several threads; each block owns one workspace sized for its largest query.

Latent ties (σ with equal gains in *decreasing* score, chosen for the scores):
:func:`latent_ideal_weights` gives each document the weight ``c`` of its position in that σ
(averaged over documents tied in gain and score), and :func:`structured_loss` evaluates the
loss with σ's part given as such per-document weights.
"""

import numpy as np
from numba import njit

from losses._kernels import INNER, OUTER
from losses._kernels.assignment import solve_assignment, solve_assignment_from
from losses._kernels.fenwick import fenwick_add, fenwick_prefix
from losses._kernels.sorting import argsort_float_descending, argsort_stable, sorted_copy

# Rows of the per-thread integer workspace (each of length max_m + 1).
_ORDER, _SIGMA, _PI, _CAND, _CAND_RANK, _COUNTS, _TREE, _FLAG = 0, 1, 2, 3, 4, 5, 6, 7
_COL_OF_ROW, _PATH, _ROW_OF_COL, _REMAINING = 8, 9, 10, 11
_LEVEL_CAP, _MATCH_DOC, _FLOW, _BOTTOM = 12, 13, 14, 15
_N_INT = 16
# Rows of the float workspace (each of length max_m).
_U, _V, _SHORTEST, _W, _THR, _BOTTOM_VAL = 0, 1, 2, 3, 4, 5
_N_FLOAT = 6


@njit(**INNER)
def _c_at(c, p, m):
    """Position weight ``c[p]`` of a query with ``m`` documents, zero past its end."""
    if p < m:
        return c[p]
    return 0.0


@njit(**INNER)
def _heap_push(keys, nodes, size, key, node):
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if keys[parent] <= key:
            break
        keys[i] = keys[parent]
        nodes[i] = nodes[parent]
        i = parent
    keys[i] = key
    nodes[i] = node
    return size + 1


@njit(**INNER)
def _heap_pop(keys, nodes, size):
    """Remove the smallest key; returns ``(key, node, new_size)``."""
    key = keys[0]
    node = nodes[0]
    size -= 1
    last_key = keys[size]
    last_node = nodes[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and keys[child + 1] < keys[child]:
            child += 1
        if keys[child] >= last_key:
            break
        keys[i] = keys[child]
        nodes[i] = nodes[child]
        i = child
    keys[i] = last_key
    nodes[i] = last_node
    return key, node, size


@njit(**INNER)
def _ideal_order(lq, order, m, n_levels, counts, sigma):
    """σ: gain levels descending, equal levels in increasing score (``order`` reversed)."""
    for level in range(n_levels):
        counts[level] = 0
    for d in range(m):
        counts[lq[d]] += 1
    position = 0
    for level in range(n_levels - 1, -1, -1):
        size = counts[level]
        counts[level] = position
        position += size
    for r in range(m - 1, -1, -1):
        d = order[r]
        sigma[counts[lq[d]]] = d
        counts[lq[d]] += 1


@njit(**INNER)
def _candidates(lq, order, m, n_top, n_levels, tree, cand, cand_rank):
    """Documents with fewer than ``n_top`` dominators, in rank order; returns their count.

    A dominator of document d is a document earlier in the rank order whose gain level is
    not above d's. A Fenwick tree over levels counts them in ``O(m log L)``. Documents of
    the lowest level dominate every later document, so the scan stops after ``n_top`` of
    them.
    """
    levels = tree[:n_levels]
    levels[:] = 0
    # an int64, not the literal 1: numba compiles a callee once more per literal argument
    one = np.int64(1)
    n_cand = 0
    n_lowest = 0
    for r in range(m):
        d = order[r]
        if fenwick_prefix(levels, lq[d] + 1) < n_top:
            cand[n_cand] = d
            cand_rank[n_cand] = r
            n_cand += 1
        fenwick_add(levels, lq[d], one)
        if lq[d] == 0:
            n_lowest += 1
            if n_lowest == n_top:
                break
    return n_cand


# inlined into its only caller (numba's inline="always": one compilation instead of two)
@njit(inline="always", **INNER)
def _chain_workspace(n_nodes, n_heap):
    """Arrays of the chain flow: potentials, distances, predecessors, settled flags and
    list, a binary heap (keys, nodes) and a stack of nodes at the current distance."""
    return (
        np.empty(n_nodes),
        np.empty(n_nodes),
        np.empty(n_nodes, dtype=np.int64),
        np.empty(n_nodes, dtype=np.bool_),
        np.empty(n_nodes, dtype=np.int64),
        np.empty(n_heap),
        np.empty(n_heap, dtype=np.int64),
        np.empty(n_heap, dtype=np.int64),
    )


@njit(**INNER)
def _segment_cost(fq, order, cand_rank, t, k, c, n_top, m):
    """Marginal cost of the (k + 1)-th unit on the chain from candidate t's rank to the next
    candidate's: Σ_r (F_r − F_{r+1}) c[K + r − k] over the ranks r in between."""
    total = 0.0
    for r in range(cand_rank[t], cand_rank[t + 1]):
        total += (fq[order[r]] - fq[order[r + 1]]) * _c_at(c, n_top + r - k, m)
    return total


@njit(**INNER)
def _chain_flow(cost, n_top, n_cand, fq, order, cand_rank, c, m, match_pos, iw, fw, cw):
    """Fill the top ``n_top`` positions when the tail weights ``c`` are positive.

    Min-cost flow of ``n_top`` units: position ``P_i`` → candidate ``D_t`` (cost
    ``cost[i, t]``) → chain node ``R_t`` at the candidate's rank → ... → the last
    candidate's chain node. Over the ranks r from one candidate's to the next, the chain
    carries ``k_r`` (the number of chosen candidates ranked at or before r) with the convex
    cost ``Σ_r w_r Σ_{q<k_r} c[K + r − q]``, ``w_r = F_r − F_{r+1}`` (sorted scores), which
    is the tail's value up to a constant; ``k_r`` only changes at a candidate's rank, so one
    arc per pair of consecutive candidates carries it (the ranks of other documents are
    not nodes), its marginal costs kept for the flow it carries (``forward``, and
    ``backward`` for one unit less). Successive shortest paths (Dijkstra on reduced costs,
    potentials initialised by the acyclic zero-flow graph) keep the flow optimal after
    every unit. A node reached at the distance being settled (an arc of zero reduced cost,
    as the previous searches leave along their shortest-path trees) goes on a stack and is
    settled before the heap is popped again: any order among nodes at the smallest
    distance is a valid Dijkstra order, and this one follows zero-cost paths to the sink
    depth first, which takes less time per query than heap order alone. Output:
    ``match_pos``, the candidate given to each top position.
    """
    pot, dist, pred, done, done_list, heap_keys, heap_nodes, stack = cw
    match_doc = iw[_MATCH_DOC]
    flow = iw[_FLOW]
    forward = fw[_U]
    backward = fw[_V]
    first_doc = n_top
    first_rank = n_top + n_cand
    sink = first_rank + n_cand - 1
    n_nodes = sink + 1

    for i in range(n_top):
        match_pos[i] = -1
        pot[i] = 0.0
    for t in range(n_cand):
        match_doc[t] = -1
        best = np.inf
        for i in range(n_top):
            if cost[i, t] < best:
                best = cost[i, t]
        pot[first_doc + t] = best
    for t in range(n_cand):
        flow[t] = 0
        p = pot[first_doc + t]
        if t > 0:
            p = min(p, pot[first_rank + t - 1] + forward[t - 1])
        pot[first_rank + t] = p
        if t < n_cand - 1:
            # flow[t] (0) rather than a literal 0: numba compiles a callee once more per
            # literal argument
            forward[t] = _segment_cost(fq, order, cand_rank, t, flow[t], c, n_top, m)
    pot_source = 0.0

    for _ in range(n_top):
        for x in range(n_nodes):
            dist[x] = np.inf
            done[x] = False
        size = np.int64(0)
        for i in range(n_top):
            if match_pos[i] == -1:
                dist[i] = pot_source - pot[i]
                pred[i] = -1
                size = _heap_push(heap_keys, heap_nodes, size, dist[i], i)
        n_done = 0
        n_stack = 0
        while True:
            if n_stack > 0:
                n_stack -= 1
                x = stack[n_stack]
                key = dist[x]
            elif size > 0:
                key, x, size = _heap_pop(heap_keys, heap_nodes, size)
            else:
                break
            if done[x]:
                continue
            done[x] = True
            done_list[n_done] = x
            n_done += 1
            if x == sink:
                break
            base = key + pot[x]
            # the arcs out of x, one relaxation for all: a position's to every candidate
            # but its own; a candidate's back to its position or on to its chain node; a
            # chain node's forward, backward (where it carries flow) and back to its
            # candidate when chosen
            if x < first_doc:
                n_arcs = n_cand
            elif x < first_rank:
                n_arcs = 1
            else:
                n_arcs = 3
            for j in range(n_arcs):
                y = -1
                nd = 0.0
                if x < first_doc:
                    if match_pos[x] != j:
                        y = first_doc + j
                        nd = base + cost[x, j] - pot[y]
                elif x < first_rank:
                    t = x - first_doc
                    i = match_doc[t]
                    if i >= 0:
                        y = i
                        nd = base - cost[i, t] - pot[y]
                    else:
                        y = first_rank + t
                        nd = base - pot[y]
                else:
                    t = x - first_rank
                    if j == 0:
                        if t < n_cand - 1:
                            y = x + 1
                            nd = base + forward[t] - pot[y]
                    elif j == 1:
                        if t > 0 and flow[t - 1] > 0:
                            y = x - 1
                            nd = base - backward[t - 1] - pot[y]
                    elif match_doc[t] >= 0:
                        y = first_doc + t
                        nd = base - pot[y]
                if y >= 0 and not done[y] and nd < dist[y]:
                    dist[y] = nd
                    pred[y] = x
                    if nd <= key:
                        stack[n_stack] = y
                        n_stack += 1
                    else:
                        size = _heap_push(heap_keys, heap_nodes, size, nd, y)

        d_sink = dist[sink]
        for s in range(n_done):
            x = done_list[s]
            pot[x] += dist[x] - d_sink
        pot_source -= d_sink

        y = sink
        x = pred[y]
        while x != -1:
            if x < first_doc:
                t = y - first_doc
                match_pos[x] = t
                match_doc[t] = x
            elif x < first_rank:
                if y < first_doc:
                    t = x - first_doc
                    if match_pos[y] == t:
                        match_pos[y] = -1
                    if match_doc[t] == y:
                        match_doc[t] = -1
            elif y < first_rank:
                pass  # a chain node back to its chosen candidate: no flow to record
            elif y == x + 1:
                # one unit more on the chain arc after candidate t
                t = x - first_rank
                flow[t] += 1
                backward[t] = forward[t]
                forward[t] = _segment_cost(fq, order, cand_rank, t, flow[t], c, n_top, m)
            else:
                # one unit less on the chain arc before candidate t + 1
                t = y - first_rank
                flow[t] -= 1
                forward[t] = backward[t]
                if flow[t] > 0:
                    backward[t] = _segment_cost(fq, order, cand_rank, t, flow[t] - 1, c, n_top, m)
            y = x
            x = pred[y]


# Linearised assignments the chain path tries (:func:`_secant_top`) before the chain flow:
# a cap above what random queries of NDCG@10 need (experiments/bench_oracles.py), so that it
# bounds the work of a rare query without cutting short the usual ones.
SECANT_SOLVES = 4


@njit(**INNER)
def _greedy_fill(cost, mu, n_top, n_cand, chosen):
    """Each row i in turn takes its cheapest free column of ``cost[i, u] + mu[u]``:
    ``chosen[u]`` is the row given column u, or −1. O(n_top · n_cand)."""
    for u in range(n_cand):
        chosen[u] = -1
    for i in range(n_top):
        best = np.inf
        pick = 0
        for u in range(n_cand):
            if chosen[u] < 0 and cost[i, u] + mu[u] < best:
                best = cost[i, u] + mu[u]
                pick = u
        chosen[pick] = i


@njit(**INNER)
def _top_assignment(cost, mu, n_top, n_cand, match_pos, lin_buf, iw, fw, bw):
    """Minimum-cost assignment of the ``n_top`` rows (positions) to distinct columns
    (candidates) of ``cost[i, u] + mu[u]``, ``n_top <= n_cand``: ``match_pos[i]`` is row i's
    column and ``iw[_ROW_OF_COL][u]`` column u's row (−1: none). On entry that row holds
    any ``n_top`` distinct columns (>= 0), a guess of the answer.

    Only some columns enter the solver (:func:`losses._kernels.assignment.solve_assignment`).
    Some optimal assignment gives every row one of its ``n_top`` cheapest columns: if row
    i's column is not among them, one of them is free (there are only ``n_top − 1`` other
    rows), and moving i there costs no more. With G the guessed columns, row i's
    threshold ``τ_i = max_{u∈G} (cost[i, u] + mu[u])`` is at least its ``n_top``-th
    cheapest value, so the columns within some row's threshold contain every row's
    ``n_top`` cheapest, and the assignment restricted to them is optimal. Positions' costs
    are rank two (gain and score), so their cheapest columns mostly coincide, and a good
    guess leaves a fraction of the candidates: the solver's work, O(n_top² · columns) when
    every row wants the same columns, shrinks with it.
    """
    chosen = iw[_ROW_OF_COL]
    cols = iw[_BOTTOM]
    guess = iw[_MATCH_DOC]
    tau = fw[_THR]
    n_guess = 0
    for u in range(n_cand):
        if chosen[u] >= 0:
            guess[n_guess] = u
            n_guess += 1
    for i in range(n_top):
        high = -np.inf
        for s in range(n_guess):
            high = max(high, cost[i, guess[s]] + mu[guess[s]])
        tau[i] = high
    n_cols = 0
    for u in range(n_cand):
        for i in range(n_top):
            if cost[i, u] + mu[u] <= tau[i]:
                cols[n_cols] = u
                n_cols += 1
                break
    lin = lin_buf[: n_top * n_cols].reshape((n_top, n_cols))
    for i in range(n_top):
        for s in range(n_cols):
            lin[i, s] = cost[i, cols[s]] + mu[cols[s]]
    solve_assignment(
        lin, match_pos, fw[_U], fw[_V], fw[_SHORTEST], iw[_PATH], chosen, iw[_REMAINING], bw[0],
        bw[1],
    )  # fmt: skip
    for u in range(n_cand):
        chosen[u] = -1
    for i in range(n_top):
        match_pos[i] = cols[match_pos[i]]
        chosen[match_pos[i]] = i


@njit(**INNER)
def _secant_weights(fq, order, cand_rank, c, n_top, m, n_cand, khat, mu):
    """``mu[u] = Σ_{t>=u} s_t(khat[t])``: what choosing candidate u adds to the chain's cost
    linearised at the windows ``khat`` (:func:`_secant_top`)."""
    total = 0.0
    mu[n_cand - 1] = 0.0
    for t in range(n_cand - 2, -1, -1):
        total += _segment_cost(fq, order, cand_rank, t, khat[t], c, n_top, m)
        mu[t] = total


@njit(**INNER)
def _secant_top(cost, lin_buf, n_top, n_cand, fq, order, cand_rank, c, m, match_pos, max_solves,
                iw, fw, bw):  # fmt: skip
    """Fill the top ``n_top`` positions of the chain flow's problem by rectangular
    assignments with the chain's costs linearised; returns whether the result is certified
    optimal (else the caller runs :func:`_chain_flow`).

    The problem (:func:`_chain_flow`) is to choose the candidate of every top position,
    minimising ``Σ_i cost[i, t_i] + Σ_t φ_t(k_t)``, where ``k_t`` is the number of chosen
    candidates among the first t + 1 in rank order and φ_t, the cost of the chain arc from
    candidate t to t + 1, is convex in k_t with marginal costs
    ``s_t(q) = φ_t(q + 1) − φ_t(q)`` (:func:`_segment_cost`, non-decreasing in q). For a
    *window* ``k̂_t`` per arc, the secant through k̂_t and k̂_t + 1,

        λ_t(k) = φ_t(k̂_t) + s_t(k̂_t) (k − k̂_t),

    is at most φ_t(k) at every integer k (convexity) and equal to it for k ∈ {k̂_t, k̂_t + 1}.
    Replacing every φ_t by λ_t makes the objective a lower bound L on the true one that is
    linear in the chosen set: candidate u adds ``μ_u = Σ_{t>=u} s_t(k̂_t)`` (it raises k_t for
    every t >= u), so L is minimised by the ``n_top × n_cand`` rectangular assignment of
    ``cost[i, u] + μ_u`` (:func:`losses._kernels.assignment.solve_assignment`). If its
    solution has every k_t inside its window, its true cost equals L there, and L is at most
    the true cost of every other solution: it is optimal. Otherwise each window that missed
    moves just far enough to contain the solution's k_t, and the assignment is solved again,
    at most ``max_solves`` times.

    The first windows come from a greedy fill of the problem linearised at
    ``k̂_t = min(t + 1, K) − 1`` (each position in turn takes its cheapest free candidate,
    O(K·n_cand)): ``k̂_t = min(k_t, min(t + 1, K) − 1)`` for the greedy's k_t. Starting there
    takes fewer solves per query than starting from ``min(t + 1, K) − 1`` itself
    (experiments/bench_oracles.py measures both). Each solve costs O(m + K·n_cand) plus the
    assignment, against K Dijkstra searches for the flow.
    """
    khat = iw[_FLOW]
    chosen = iw[_ROW_OF_COL]
    mu = fw[_W]
    for t in range(n_cand - 1):
        khat[t] = min(t + 1, n_top) - 1
    _secant_weights(fq, order, cand_rank, c, n_top, m, n_cand, khat, mu)
    _greedy_fill(cost, mu, n_top, n_cand, chosen)
    k_t = 0
    for t in range(n_cand - 1):
        if chosen[t] >= 0:
            k_t += 1
        khat[t] = min(k_t, khat[t])
    for _ in range(max_solves):
        _secant_weights(fq, order, cand_rank, c, n_top, m, n_cand, khat, mu)
        # guessed columns: the greedy's, then the last solution's
        _top_assignment(cost, mu, n_top, n_cand, match_pos, lin_buf, iw, fw, bw)
        inside = True
        k_t = 0
        for t in range(n_cand - 1):
            if chosen[t] >= 0:
                k_t += 1
            if k_t > khat[t] + 1:
                khat[t] = k_t - 1
                inside = False
            elif k_t < khat[t]:
                khat[t] = k_t
                inside = False
        if inside:
            return True
    return False


# The dynamic programme over per-level counts (:func:`_lattice_top`) takes the queries
# longer than k of a batch when each has at most LATTICE_STATES states (count vectors n,
# n_l <= min(count_l, K), Σ n <= K) and a dense table (Π (min(count_l, K) + 1) cells,
# 8 bytes each, three tables) of at most LATTICE_CELLS, and their mean number of states is
# at most LATTICE_MEAN_STATES; otherwise they take the chain flow. Queries of up to four
# gain levels at k = 10 have at most 1,001 states. The programme's time grows with the
# states, the flow's hardly: the limits below are where the programme stopped being the
# faster of the two per query of NDCG@10 (one thread, scores unrelated to the labels or
# following them; experiments/bench_oracles.py measures the oracle).
LATTICE_STATES = 4096
LATTICE_CELLS = 65536
LATTICE_MEAN_STATES = 1500


@njit(**INNER)
def _lattice_top(cost, n_top, n_cand, fq, order, cand, cand_rank, lq, n_lev, c, m, match_pos,
                 iw, tail, best, removed, step):  # fmt: skip
    """Fill the top ``n_top`` positions by a dynamic programme over per-level counts.

    Exchange arguments (:mod:`losses.listwise`) give an optimal solution whose chosen set
    holds, for every gain level, that level's first candidates in rank order (the tail
    weights do not exceed the top ones), and whose every top prefix holds with a document
    all the documents that dominate it (both position weights being non-increasing). A
    solution is then the sequence of levels that fill positions 0, 1, ...: the state after
    p positions is the vector n of documents taken per level (Σ n = p), and the top
    positions' cost is the cheapest path to it,

        best[n] = min over levels l with n_l > 0 of best[n − e_l] + cost[p − 1, t_l(n_l)],

    t_l(i) being level l's i-th candidate. The tail's value depends on the chosen set
    alone: with ρ the largest rank in n (level l* its candidate's), removing ρ after
    every other chosen document shifts the documents ranked below it up by one position,

        removed[n] = removed[n − e_l*] + D[p − 1, ρ],
        D[p, ρ] = −c[K + ρ − p] F_ρ + Σ_{r>ρ} (c[K + r − p − 1] − c[K + r − p]) F_r,

    F the sorted scores (so ``removed[n]`` is the tail's value up to a constant; c is read
    as zero past the query's end, which the telescoping cancels). The answer is the
    n with Σ n = K minimising ``best[n] − removed[n]``. The states live in a dense table
    indexed in mixed radix (one digit per level, radix min(candidates, K) + 1, at most
    :data:`LATTICE_CELLS` cells), visited in increasing index (an odometer that skips the
    states with Σ n > K), so that every state follows its predecessors. O(K·m + S·L) for
    S states and L levels, against K shortest-path searches for the chain flow.
    Output: ``match_pos``, the candidate given to each top position (``step``: the level
    each state's cheapest path took last).
    """
    count = iw[_COUNTS]
    digit_of = iw[_TREE]
    cap = iw[_LEVEL_CAP]
    start = iw[_MATCH_DOC]
    members = iw[_PATH]
    stride = iw[_FLOW]
    n = iw[_BOTTOM]
    fill = iw[_ROW_OF_COL]
    for level in range(n_lev):
        count[level] = 0
    for t in range(n_cand):
        count[lq[cand[t]]] += 1
    n_digits = 0
    start[0] = 0
    for level in range(n_lev):
        if count[level] > 0:
            digit_of[level] = n_digits
            cap[n_digits] = min(count[level], n_top)
            fill[n_digits] = start[n_digits]
            start[n_digits + 1] = start[n_digits] + count[level]
            n_digits += 1
    for t in range(n_cand):
        j = digit_of[lq[cand[t]]]
        members[fill[j]] = t
        fill[j] += 1
    stride[0] = 1
    for j in range(n_digits):
        stride[j + 1] = stride[j] * (cap[j] + 1)
        n[j] = 0

    n_chain = cand_rank[n_cand - 1] + 1
    shift = tail[: n_top * n_chain].reshape((n_top, n_chain))
    for p in range(n_top):
        acc = 0.0
        for r in range(m - 1, -1, -1):
            score = fq[order[r]]
            here = _c_at(c, n_top + r - p, m)
            if r < n_chain:
                shift[p, r] = acc - here * score
            acc += (_c_at(c, n_top + r - p - 1, m) - here) * score

    best[0] = 0.0
    removed[0] = 0.0
    s = 0
    p = 0
    best_value = np.inf
    best_state = 0
    while True:
        # next state in index order with Σ n <= K (an odometer, digit 0 fastest)
        j = 0
        while j < n_digits:
            if n[j] < cap[j] and p < n_top:
                n[j] += 1
                s += stride[j]
                p += 1
                break
            s -= n[j] * stride[j]
            p -= n[j]
            n[j] = 0
            j += 1
        if j == n_digits:
            break
        v = np.inf
        v_digit = 0
        last_rank = -1
        last_digit = 0
        for jj in range(n_digits):
            if n[jj] > 0:
                t = members[start[jj] + n[jj] - 1]
                x = best[s - stride[jj]] + cost[p - 1, t]
                if x < v:
                    v = x
                    v_digit = jj
                if cand_rank[t] > last_rank:
                    last_rank = cand_rank[t]
                    last_digit = jj
        best[s] = v
        step[s] = v_digit
        removed[s] = removed[s - stride[last_digit]] + shift[p - 1, last_rank]
        if p == n_top:
            total = v - removed[s]
            if total < best_value:
                best_value = total
                best_state = s

    s = best_state
    for j in range(n_digits):
        n[j] = (s // stride[j]) % (cap[j] + 1)
    for p in range(n_top - 1, -1, -1):
        j = step[s]
        match_pos[p] = members[start[j] + n[j] - 1]
        n[j] -= 1
        s -= stride[j]


# The truncated path selects each level's best documents (:func:`_truncated_order`) in
# batches with a query longer than this, and sorts every query otherwise. Per query of
# NDCG@10 with truncated c (one thread; three or five gain levels; scores unrelated to the
# labels or following them; either tie rule, the latent one's weights given as the
# concave-convex procedure's steps give them), sorting was as fast as the selection up to
# about this length and slower beyond it. Leaving the selection out of the kernel also
# saves compiling it on the first NDCG@10 fit of short queries
# (experiments/bench_first_run.py measures first fits).
TRUNCATED_SORT_MAX = 100


@njit(**INNER)
def _truncated_order(
    fq, lq, m, n_top, n_levels, cut_level, n_above, top_idx, top_val, iw, fw, order, sigma
):
    """Rank order of the union of the per-level ``n_top`` best documents, and the first
    ``n_top`` positions of σ; returns the size of the union. One pass over the query,
    ``O(m)`` typically and ``O(m · n_top)`` at worst, plus a sort of the union.

    Every candidate (fewer than ``n_top`` dominators) is among the ``n_top`` best of its
    level, and so are all its dominators, so counting dominators within the union keeps
    every candidate (and possibly a few more documents, which is harmless). σ's first
    ``n_top`` positions hold the ``n_above`` documents of levels above ``cut_level`` and the
    lowest-scored documents of ``cut_level`` (which level is cut depends on labels only).
    """
    top_cnt = iw[_TREE]
    thr = fw[_THR]
    bottom_idx = iw[_BOTTOM]
    bottom_val = fw[_BOTTOM_VAL]
    for level in range(n_levels):
        top_cnt[level] = 0
        thr[level] = -np.inf
    take = n_top - n_above
    n_bottom = 0
    bottom_thr = np.inf
    n_up = 0
    for d in range(m):
        level = lq[d]
        x = fq[d]
        if x > thr[level]:
            # Ties keep index order: equal scores are neither inserted ahead nor past a full
            # buffer's last entry.
            base = level * n_top
            n = top_cnt[level]
            s = min(n, n_top - 1)
            while s > 0 and top_val[base + s - 1] < x:
                top_val[base + s] = top_val[base + s - 1]
                top_idx[base + s] = top_idx[base + s - 1]
                s -= 1
            top_val[base + s] = x
            top_idx[base + s] = d
            if n + 1 >= n_top:
                top_cnt[level] = n_top
                thr[level] = top_val[base + n_top - 1]
            else:
                top_cnt[level] = n + 1
        if level > cut_level:
            sigma[n_up] = d
            n_up += 1
        elif level == cut_level and x < bottom_thr:
            s = min(n_bottom, take - 1)
            while s > 0 and bottom_val[s - 1] > x:
                bottom_val[s] = bottom_val[s - 1]
                bottom_idx[s] = bottom_idx[s - 1]
                s -= 1
            bottom_val[s] = x
            bottom_idx[s] = d
            if n_bottom + 1 >= take:
                n_bottom = take
                bottom_thr = bottom_val[take - 1]
            else:
                n_bottom += 1

    # σ: levels above the cut by level descending, then score ascending (fewer than n_top).
    for r in range(1, n_above):
        d = sigma[r]
        s = r
        while s > 0 and (
            lq[sigma[s - 1]] < lq[d] or (lq[sigma[s - 1]] == lq[d] and fq[sigma[s - 1]] > fq[d])
        ):
            sigma[s] = sigma[s - 1]
            s -= 1
        sigma[s] = d
    for s in range(take):
        sigma[n_above + s] = bottom_idx[s]

    in_union = iw[_FLAG]
    for d in range(m):
        in_union[d] = 0
    for level in range(n_levels):
        for s in range(top_cnt[level]):
            in_union[top_idx[level * n_top + s]] = 1
    n_union = 0
    for d in range(m):
        if in_union[d] == 1:
            order[n_union] = d
            n_union += 1
    keys = np.empty(n_union)
    for r in range(n_union):
        keys[r] = -fq[order[r]]
    # Stable, and the union was collected by index: ties in score stay in index order.
    ranked = argsort_stable(keys)
    for r in range(n_union):
        ranked[r] = order[ranked[r]]
    for r in range(n_union):
        order[r] = ranked[r]
    return n_union


@njit(**INNER)
def _query_gains(level_gain, first_level, lq, out):
    """The gains of a query's documents, ``level_gain[first_level + lq[d]]``, in ``out``'s
    first ``len(lq)`` entries (returned as that view)."""
    m = lq.shape[0]
    for d in range(m):
        out[d] = level_gain[first_level + lq[d]]
    return out[:m]


@njit(**INNER)
def _tied_query_loss(fq, bq, lq, n_levels, inv_norm, a, c, n_top, gq, iw):
    """The loss of :func:`structured_loss` for one query whose scores are all equal (the
    concave-convex procedure evaluates its surrogates at w = 0; a convex fit starts there).

    Σ_p c_p f_{π(p)} is then the same for every π, and a π maximises the loss when its top K
    positions hold K smallest gains in increasing order (the rearrangement inequality; a is
    zero beyond K); no assignment is solved. Of these π the one taken is close to σ, to keep
    the subgradient small: σ's last K documents on top (equal gains in σ's order), the other
    positions following σ. σ, the rank order (the documents' order) and π are left in the
    workspace rows as the general per-query code leaves them.
    """
    m = fq.shape[0]
    order = iw[_ORDER]
    sigma = iw[_SIGMA]
    pi = iw[_PI]
    counts = iw[_COUNTS]
    for r in range(m):
        order[r] = r
    _ideal_order(lq, order, m, n_levels, counts, sigma)
    for level in range(n_levels):
        counts[level] = 0
    for p in range(m - n_top, m):
        counts[lq[sigma[p]]] += 1
    position = 0
    for level in range(n_levels):
        size = counts[level]
        counts[level] = position
        position += size
    for p in range(m - n_top, m):
        d = sigma[p]
        pi[counts[lq[d]]] = d
        counts[lq[d]] += 1
    for p in range(m - n_top):
        pi[n_top + p] = sigma[p]
    # every score is fq[0]: the score part Σ_p c_p (f_π(p) − f_σ(p)) is zero
    value = 1.0
    for p in range(n_top):
        value -= a[p] * bq[pi[p]] * inv_norm
    if value <= 0.0:
        return 0.0
    for p in range(m):
        gq[pi[p]] += c[p]
        gq[sigma[p]] -= c[p]
    return value


@njit(**INNER)
def _tight_cycle(cost, tol, iw, fw, owner):
    """Whether another assignment may be optimal within ``tol`` of the square assignment
    :func:`structured_loss` just solved (each row's column in ``iw[_FLOW]``, each column's
    row in ``owner``, the duals in ``fw[_U]`` and ``fw[_V]``).

    Any other assignment differs from it by alternating cycles, and costs more by the sum
    of the reduced costs ``cost[t, p] − u_t − v_p`` (all >= 0, 0 on assigned pairs) of the
    unassigned pairs on them. So when every cycle of the rows' graph with an arc t → owner
    of p for each unassigned pair of reduced cost below ``tol`` is absent, every other
    assignment costs at least ``tol`` more: the optimum is unique by that margin. Depth-
    first search for a cycle, ``O(m²)``; True when there is one.
    """
    m = cost.shape[0]
    col = iw[_FLOW]
    u = fw[_U]
    v = fw[_V]
    state = iw[_FLAG]  # 0 unvisited, 1 on the search path, 2 done
    stack = iw[_PATH]
    next_col = iw[_REMAINING]
    for t in range(m):
        state[t] = 0
    for root in range(m):
        if state[root] != 0:
            continue
        depth = 0
        stack[0] = root
        next_col[0] = 0
        state[root] = 1
        while depth >= 0:
            t = stack[depth]
            p = next_col[depth]
            while p < m and (p == col[t] or cost[t, p] - u[t] - v[p] >= tol):
                p += 1
            if p == m:
                state[t] = 2
                depth -= 1
                continue
            next_col[depth] = p + 1
            s = owner[p]
            if state[s] == 1:
                return True
            if state[s] == 0:
                state[s] = 1
                depth += 1
                stack[depth] = s
                next_col[depth] = 0
    return False


# The per-query code is written out in the query loop below rather than called: LLVM then
# optimises it and the callees linked into it (the chain flow, the assignment, the sort)
# once, in this kernel, instead of once in a function of its own and again here, and numba
# does not copy a callee's IR to inline it (inline="always" did that, and compiled slower
# from an empty cache; experiments/bench_compile.py measures each kernel's compilation).
# Inlining the chain flow or the small helpers (heap, Fenwick tree) made the compilation
# slower: their bodies are then typed and optimised again at every call site.
@njit(**OUTER)
def structured_loss(
    q_start,
    q_stop,
    f,
    query_ptr,
    level_gain,
    level_ptr,
    level,
    n_levels,
    cut_level,
    n_above,
    inv_norm,
    a,
    c,
    k,
    truncated,
    select,
    chain,
    lattice,
    square,
    ideal_c,
    duals,
    given_order,
    values,
    grad,
):
    """Per-query structured loss and its subgradient for the queries ``q_start:q_stop``.

    Parameters
    ----------
    q_start, q_stop : int
        The range of queries to process (a block of :mod:`losses._threads`); one workspace,
        sized for the block's largest query, serves all of them.
    f : float64 array of shape (n,)
        Scores, query-contiguous.
    query_ptr : int64 array of shape (n_queries + 1,)
    level_gain : float64 array
        The gain ``b`` of each query's levels, ascending (NDCG: 2^y − 1 or y; NERU:
        max(y − d, 0)): query q's level l at ``level_ptr[q] + l``, so that a document's
        gain is ``level_gain[level_ptr[q] + level[d]]`` (one float per level instead of one
        per document).
    level_ptr : int64 array of shape (n_queries + 1,)
        Query q's levels in ``level_gain[level_ptr[q]:level_ptr[q + 1]]``.
    level : int32 array of shape (n,)
        Dense rank of the gain within its query (0 = smallest gain).
    n_levels : int64 array of shape (n_queries,)
        Number of distinct gains per query.
    cut_level, n_above : int64 arrays of shape (n_queries,)
        The level at σ's position ``min(k, m)`` and the number of documents above it (used
        by the truncated path only).
    inv_norm : float64 array of shape (n_queries,)
        ``1 / Z`` (ideal DCG@k or ideal ERU); 0 marks a degenerate query (loss 0).
    a : float64 array, length >= the largest query
        Position discounts, zero at positions >= k.
    c : float64 array, length >= the largest query
        Position weights, non-increasing and non-negative.
    k : int
        Number of positions with a non-zero discount.
    truncated : True or None
        True when ``c`` is zero beyond position k and some query is longer than k: those
        queries assign the top k positions only (the truncated path).
    select : True or None
        With ``truncated``: True has those queries select each level's best k documents
        (:func:`_truncated_order`, ``O(m)``) instead of sorting the whole query, unless the
        rank order is given; None leaves the selection out of the compiled kernel (for
        batches of short queries, where the sort costs about as much:
        :data:`TRUNCATED_SORT_MAX`).
    chain : int or None
        Given when ``c`` is positive beyond position k and some query is longer than k: those
        queries take the chain path, up to this many linearised assignments
        (:func:`_secant_top`, :data:`SECANT_SOLVES` by default) and the chain flow when they
        do not certify their result (0: the flow at once). Every query longer than k
        needs one of the paths; a path passed None is left out of the compiled kernel (the
        common cases compile one of them, or neither when no query is longer than k).
    lattice : int or None
        Given (with ``chain`` None) when ``c`` is positive beyond position k and the
        queries longer than k are within the limits of the dynamic programme over
        per-level counts (:data:`LATTICE_STATES`, :data:`LATTICE_CELLS`,
        :data:`LATTICE_MEAN_STATES`): those queries take it (:func:`_lattice_top`) instead
        of the chain flow, with tables of this many cells (the largest query's).
    square : True or None
        True when some query of at least two documents has at most k of them: those
        queries take the full m × m assignment. None leaves that path (and the assignment
        solver, unless the truncated path needs it) out of the compiled kernel; no query
        of two to k documents may then be passed.
    ideal_c : float64 array of shape (n,) or (0,)
        Empty: σ puts equal gains in increasing score (the convex rule). Otherwise σ's part
        is given per document, the weight an ideal ordering (or a mean of ideal orderings)
        places on it (:func:`latent_ideal_weights`): the loss is then
        ``max_π [Δ(π) + Σ_i c_i f_{π(i)}] − Σ_d ideal_c[d] f_d``, clipped at 0. The
        maximisation leaves its own σ in the workspace row ``_SIGMA``; that σ's part is added
        back and ``ideal_c``'s subtracted.
    duals : float64 array of shape (n,) or (0,)
        Empty, or a store read and written by the full assignment (queries of two to k
        documents): a query's rows hold the column duals its last assignment ended with,
        and its next assignment starts from them when its scores are all different (NaN:
        none yet). Consecutive oracle calls of a fit have nearby scores, and a start near
        the optimal duals leaves few rows to augment. Such a result is kept only when its
        duals certify that the optimum is unique by a margin far above rounding
        (:func:`_tight_cycle`); otherwise, and without stored duals, the assignment starts
        from the score part's duals. The loss and subgradient are therefore the ones
        without a store, bit for bit, whatever it holds.
    given_order : int64 array of shape (n,) or (0,)
        Empty, or per query the rank order (indices within the query) that this kernel
        would sort itself, ``argsort_stable(-f_q)`` (:func:`latent_ideal_weights` leaves it
        beside the weights it sorts for), read instead of sorting again; the truncated path
        then finds its candidates in it instead of selecting each level's best documents.
        Given only with ``ideal_c`` (that path's σ, which the selection also yields, is then
        not needed).
    values : float64 array of shape (n_queries,)
        Output: per-query losses.
    grad : float64 array of shape (n,)
        Output: subgradient of ``values.sum()`` with respect to ``f``.
    """
    grad[query_ptr[q_start] : query_ptr[q_stop]] = 0.0
    max_m = 0
    for q in range(q_start, q_stop):
        max_m = max(max_m, query_ptr[q + 1] - query_ptr[q])
    top = min(k, max_m)
    n_level_buf = 0
    if select is not None:
        n_level_buf = max_m * top
    n_chain = 0
    n_heap = 0
    n_lin = 0
    if chain is not None:
        if max_m > k:
            n_lin = top * max_m
            n_chain = top + 2 * max_m
            n_heap = top * max_m + 4 * max_m + top + 1
    n_cells = 0
    n_shift = 0
    if lattice is not None:
        if max_m > k:
            n_cells = lattice
            n_shift = top * max_m
    # One workspace for the block's queries: integer / float / boolean rows (iw / fw / bw,
    # rows named by the module's constants), the truncated path's per-level buffers
    # (top_idx / top_val), the n_top × n_candidates cost matrix (cost_buf) and the chain
    # flow's arrays (cw). The 2-D ones are reshaped from 1-D allocations: numba compiles
    # np.empty once per argument type, and the kernel needs the 1-D ones anyway.
    iw = np.empty(_N_INT * (max_m + 1), dtype=np.int64).reshape((_N_INT, max_m + 1))
    fw = np.empty(_N_FLOAT * max_m).reshape((_N_FLOAT, max_m))
    bw = np.empty(2 * max_m, dtype=np.bool_).reshape((2, max_m))
    top_idx = np.empty(n_level_buf, dtype=np.int64)
    top_val = np.empty(n_level_buf)
    cost_buf = np.empty(top * max_m)
    lin_buf = np.empty(n_lin)
    cw = _chain_workspace(n_chain, n_heap)
    lattice_shift = np.empty(n_shift)
    lattice_best = np.empty(n_cells)
    lattice_removed = np.empty(n_cells)
    lattice_step = np.empty(n_cells, dtype=np.int64)
    gain_buf = np.empty(max_m)
    order = iw[_ORDER]
    sigma = iw[_SIGMA]
    pi = iw[_PI]
    cand = iw[_CAND]
    cand_rank = iw[_CAND_RANK]
    col_of_row = iw[_COL_OF_ROW]
    for q in range(q_start, q_stop):
        start = query_ptr[q]
        stop = query_ptr[q + 1]
        if inv_norm[q] == 0.0 or stop - start < 2:
            values[q] = 0.0
            continue
        fq = f[start:stop]
        gq = grad[start:stop]
        bq = _query_gains(level_gain, level_ptr[q], level[start:stop], gain_buf)
        tied = True
        for d in range(1, stop - start):
            if fq[d] != fq[0]:
                tied = False
                break
        if tied:
            value = _tied_query_loss(
                fq, bq, level[start:stop], n_levels[q], inv_norm[q], a, c,
                min(k, stop - start), gq, iw,
            )  # fmt: skip
        else:
            lq = level[start:stop]
            n_lev = n_levels[q]
            inv_q = inv_norm[q]
            m = stop - start
            n_top = min(k, m)
            short = False
            n_ranked = m
            n_pos = m
            whole = True  # the rank order of the whole query (else the selection's)
            # `is not None` on an argument is decided at compile time: a path passed None is not
            # compiled at all (numba prunes the branch), which saves most of a first compilation
            if truncated is not None:
                if n_top < m:
                    short = True
                    n_pos = n_top
                    if select is not None:
                        # without the rank order given (with σ's part), each level's best
                        # documents are selected instead of sorting the whole query
                        if given_order.size == 0:
                            n_ranked = _truncated_order(
                                fq, lq, m, n_top, n_lev, cut_level[q], n_above[q], top_idx,
                                top_val, iw, fw, order, sigma,
                            )  # fmt: skip
                            whole = False
            if whole:
                if given_order.size > 0:
                    for r in range(m):
                        order[r] = given_order[start + r]
                else:
                    ranked = argsort_float_descending(fq)
                    for r in range(m):
                        order[r] = ranked[r]
                if ideal_c.size == 0:
                    _ideal_order(lq, order, m, n_lev, iw[_COUNTS], sigma)
                    if short:
                        # σ's first n_top positions as the selection gives them: documents
                        # equal in gain and score in index order (_ideal_order puts them in
                        # reverse index order)
                        p = 0
                        while p < n_top:
                            e = p + 1
                            while (
                                e < m
                                and lq[sigma[e]] == lq[sigma[p]]
                                and fq[sigma[e]] == fq[sigma[p]]
                            ):
                                e += 1
                            lo = p
                            hi = e - 1
                            while lo < hi:
                                d = sigma[lo]
                                sigma[lo] = sigma[hi]
                                sigma[hi] = d
                                lo += 1
                                hi -= 1
                            p = e
            if truncated is None and chain is None and lattice is None:
                # every query here has at most k documents (n_top = m), so every document is a
                # candidate; leaving out the dominator count (and its Fenwick tree) also leaves it
                # out of the compiled kernel
                n_cand = m
                for t in range(m):
                    cand[t] = order[t]
                    cand_rank[t] = t
            else:
                n_cand = _candidates(lq, order, n_ranked, n_top, n_lev, iw[_TREE], cand, cand_rank)

            if square is not None:
                if n_top == m:
                    # Square problem: documents as rows is about twice as fast on these rank-two
                    # costs; the solver's column owners are then the document of each position.
                    cost = cost_buf[: m * m].reshape((m, m))
                    for t in range(m):
                        d = cand[t]
                        for p in range(m):
                            cost[t, p] = a[p] * bq[d] * inv_q - c[p] * fq[d]
                    # Start from the column duals this query's last assignment ended
                    # with, when there are some (duals_q: the loss's per-query store, empty
                    # when it keeps none) and no two scores are equal: for nearby scores
                    # they are nearly optimal, and few rows are left to augment. That result
                    # is kept only when its duals certify that the optimum is unique by a
                    # margin far above rounding (_tight_cycle, with 1e-9 of the costs'
                    # scale, which bounds |a_p b_d / Z| + |c_p f_d|): the start below then
                    # reaches the same assignment, so that no result depends on the store.
                    # Otherwise, and without stored duals, start from the optimal column
                    # duals of the score part −c_p f_d alone (all documents are candidates
                    # here, in rank order t): v_p = Σ_{1<=s<=p} f_(s) (c_{s−1} − c_s) makes
                    # sorting by score optimal for that part (module docstring), so that
                    # only the rows the gains move need augmenting.
                    duals_q = duals[start : start + m]  # empty when no store is kept
                    v_start = fw[_W]
                    warm = duals_q.size > 0
                    for p in range(duals_q.size):
                        # cand is the rank order: equal scores are neighbours in it
                        if np.isnan(duals_q[p]) or (p > 0 and fq[cand[p]] == fq[cand[p - 1]]):
                            warm = False
                            break
                        v_start[p] = duals_q[p]
                    while True:
                        if not warm:
                            v_start[0] = 0.0
                            for p in range(1, m):
                                v_start[p] = v_start[p - 1] + fq[cand[p]] * (c[p - 1] - c[p])
                        solve_assignment_from(
                            cost,
                            v_start,
                            iw[_FLOW],
                            fw[_U],
                            fw[_V],
                            fw[_SHORTEST],
                            iw[_PATH],
                            col_of_row,
                            iw[_REMAINING],
                            bw[0],
                            bw[1],
                        )
                        if not warm:
                            break
                        f_top = abs(fq[cand[0]])
                        f_bottom = abs(fq[cand[m - 1]])
                        tol = 1e-9 * (1.0 + c[0] * (f_top if f_top > f_bottom else f_bottom))
                        if not _tight_cycle(cost, tol, iw, fw, col_of_row):
                            break
                        warm = False
                    for p in range(duals_q.size):
                        duals_q[p] = fw[_V][p]
            if n_top < m:
                cost = cost_buf[: n_top * n_cand].reshape((n_top, n_cand))
                for p in range(n_top):
                    for t in range(n_cand):
                        d = cand[t]
                        cost[p, t] = a[p] * bq[d] * inv_q - c[p] * fq[d]
                # truncated (every query longer than k is short then) and chain are tested on the
                # arguments so that a path passed None compiles nothing, not even its solver
                if truncated is not None:
                    # the whole matrix, without _top_assignment's column filter: the filter
                    # saves little per query here, and compiling it would lengthen this
                    # path's first fit
                    solve_assignment(
                        cost,
                        col_of_row,
                        fw[_U],
                        fw[_V],
                        fw[_SHORTEST],
                        iw[_PATH],
                        iw[_ROW_OF_COL],
                        iw[_REMAINING],
                        bw[0],
                        bw[1],
                    )
                elif lattice is not None:
                    _lattice_top(
                        cost, n_top, n_cand, fq, order, cand, cand_rank, lq, n_lev, c, m,
                        col_of_row, iw, lattice_shift, lattice_best, lattice_removed,
                        lattice_step,
                    )  # fmt: skip
                elif chain is not None:
                    if not _secant_top(
                        cost, lin_buf, n_top, n_cand, fq, order, cand_rank, c, m, col_of_row,
                        chain, iw, fw, bw,
                    ):  # fmt: skip
                        _chain_flow(
                            cost, n_top, n_cand, fq, order, cand_rank, c, m, col_of_row, iw, fw,
                            cw,
                        )  # fmt: skip

            for p in range(n_top):
                pi[p] = cand[col_of_row[p]]
            if not short:
                used = iw[_FLAG]
                for d in range(m):
                    used[d] = 0
                for p in range(n_top):
                    used[pi[p]] = 1
                p = n_top
                for r in range(m):
                    if used[order[r]] == 0:
                        pi[p] = order[r]
                        p += 1

            value = 1.0
            for p in range(n_top):
                value -= a[p] * bq[pi[p]] * inv_q
            if ideal_c.size > 0:
                # σ's part given per document (subtracted below): π's part alone here, no σ
                # of the kernel's
                for p in range(n_pos):
                    value += c[p] * fq[pi[p]]
                    gq[pi[p]] += c[p]
            else:
                for p in range(n_pos):
                    value += c[p] * (fq[pi[p]] - fq[sigma[p]])
                if value <= 0.0:
                    # σ itself attains the maximum 0 (rounding aside): zero loss, zero
                    # subgradient.
                    value = 0.0
                else:
                    for p in range(n_pos):
                        gq[pi[p]] += c[p]
                        gq[sigma[p]] -= c[p]
        if ideal_c.size == 0:
            values[q] = value
            continue
        m = stop - start
        if tied:
            # A query whose scores are all equal: its maximising π left the kernel's σ
            # (equal gains in increasing score) in the workspace, whose part the loss above
            # subtracted; it is added back, and ideal_c's subtracted below.
            n_pos = m
            if truncated is not None:
                n_pos = min(k, m)
            for p in range(n_pos):
                value += c[p] * fq[sigma[p]]
                gq[sigma[p]] += c[p]
        for d in range(m):
            value -= ideal_c[start + d] * fq[d]
            gq[d] -= ideal_c[start + d]
        values[q] = max(value, 0.0)


@njit(**OUTER)
def pessimistic_metric(
    q_start, q_stop, f, query_ptr, level_gain, level_ptr, level, inv_norm, a, values
):
    """Per-query ``1 − (1/Z) Σ_i a_i b_{π(i)}`` for π sorting ``f`` descending (the gains
    as in :func:`structured_loss`).

    Documents with equal scores are placed in increasing gain (the worst order, since
    ``a`` is non-increasing). Degenerate queries (``inv_norm == 0``) get 0.
    """
    max_m = 0
    for q in range(q_start, q_stop):
        max_m = max(max_m, query_ptr[q + 1] - query_ptr[q])
    gain_buf = np.empty(max_m)
    for q in range(q_start, q_stop):
        start = query_ptr[q]
        stop = query_ptr[q + 1]
        if inv_norm[q] == 0.0:
            values[q] = 0.0
            continue
        fq = f[start:stop]
        bq = _query_gains(level_gain, level_ptr[q], level[start:stop], gain_buf)
        m = stop - start
        order = argsort_float_descending(fq)
        dcg = 0.0
        p = 0
        while p < m:
            e = p + 1
            while e < m and fq[order[e]] == fq[order[p]]:
                e += 1
            tied = sorted_copy(bq[order[p:e]])
            for s in range(e - p):
                dcg += a[p + s] * tied[s]
            p = e
        values[q] = 1.0 - dcg * inv_norm[q]


# ------------------------------------------------------------------------------------------
# The latent tie-breaking: σ chosen best for the scores, and a loss with σ's weights given.


@njit(**OUTER)
def latent_ideal_weights(
    q_start, q_stop, tie_scores, query_ptr, level, n_levels, inv_norm, c, out, order_out
):
    """Per-document weight ``c`` of its position in the ideal ordering best for the scores,
    for the queries ``q_start:q_stop`` (a block of :mod:`losses._threads`).

    For every query σ sorts documents by gain level descending and, within a level, by
    ``tie_scores`` descending; ``out[d]`` is ``c`` at d's position in σ, averaged over the
    documents tied in both level and score. Degenerate queries (``inv_norm == 0``) get 0.
    ``O(m log m)`` per query.

    ``order_out``: empty, or an int64 array of shape (n,) that receives, for every query of
    at least two documents that is not degenerate, its rank order (indices within the
    query, ``argsort_stable(-tie_scores_q)``), which :func:`structured_loss` then reads
    (``given_order``) instead of sorting the same scores again.
    """
    max_m = 0
    for q in range(q_start, q_stop):
        max_m = max(max_m, query_ptr[q + 1] - query_ptr[q])
    counts = np.empty(max_m + 1, dtype=np.int64)
    sigma = np.empty(max_m, dtype=np.int64)
    reverse = np.empty(max_m, dtype=np.int64)
    for q in range(q_start, q_stop):
        start = query_ptr[q]
        stop = query_ptr[q + 1]
        if inv_norm[q] == 0.0 or stop - start < 2:
            for d in range(start, stop):
                out[d] = 0.0
            continue
        # out[d]: the mean of c over the positions that d's tie group holds in σ. σ puts
        # gain levels descending and equal levels in decreasing tq (the scores that choose
        # the tie-breaking); a tie group is a maximal run of σ with equal level and equal
        # tq. Averaging over the group is listing-order independent and, at tq = f, is a
        # subgradient of max_σ Σ_i c_i f_{σ(i)} (a mean of the maximisers' weights).
        lq = level[start:stop]
        tq = tie_scores[start:stop]
        out_q = out[start:stop]
        n_lev = n_levels[q]
        m = stop - start
        # tq descending (the loss kernel's rank order), reversed for _ideal_order, which
        # reads it backwards: equal levels in decreasing tq (the order within a tie group
        # does not matter, its weights are averaged)
        ranked = argsort_float_descending(tq)
        for r in range(m):
            reverse[r] = ranked[m - 1 - r]
        if order_out.size > 0:
            for r in range(m):
                order_out[start + r] = ranked[r]
        _ideal_order(lq, reverse, m, n_lev, counts, sigma)
        p = 0
        while p < m:
            e = p + 1
            while e < m and lq[sigma[e]] == lq[sigma[p]] and tq[sigma[e]] == tq[sigma[p]]:
                e += 1
            total = 0.0
            for s in range(p, e):
                total += c[s]
            mean = total / (e - p)
            for s in range(p, e):
                out_q[sigma[s]] = mean
            p = e


@njit(**OUTER)
def ranking_weights(q_start, q_stop, f, query_ptr, inv_norm, c, out, order_out):
    """Per-document weight ``c`` of its position in the ranking by ``f`` (the ramp bound's
    reference), for the queries ``q_start:q_stop`` (a block of :mod:`losses._threads`).

    τ sorts the documents of each query by ``f`` descending; ``out[d]`` is ``c`` at d's
    position in τ, averaged over the documents of equal score (a mean of the maximisers of
    ``max_τ Σ_i c_i f_{τ(i)}``, so a subgradient of it, independent of the listing order).
    Degenerate queries (``inv_norm == 0``) get 0. ``O(m log m)`` per query. ``order_out``
    as in :func:`latent_ideal_weights`.
    """
    for q in range(q_start, q_stop):
        start = query_ptr[q]
        stop = query_ptr[q + 1]
        if inv_norm[q] == 0.0 or stop - start < 2:
            for d in range(start, stop):
                out[d] = 0.0
            continue
        fq = f[start:stop]
        out_q = out[start:stop]
        m = stop - start
        ranked = argsort_float_descending(fq)
        if order_out.size > 0:
            for r in range(m):
                order_out[start + r] = ranked[r]
        p = 0
        while p < m:
            e = p + 1
            while e < m and fq[ranked[e]] == fq[ranked[p]]:
                e += 1
            total = 0.0
            for s in range(p, e):
                total += c[s]
            mean = total / (e - p)
            for s in range(p, e):
                out_q[ranked[s]] = mean
            p = e


# ------------------------------------------------------------------------------------------
# The pair joint feature map (ties="pairs"): only pairs of different gain enter the margin.


@njit(**INNER)
def _pairs_query(fq, bq, lq, n_levels, inv_norm, a, k, scale, gq):
    """Loss ``max_π [Δ(π) − scale Σ_{inverted pairs} (f_i − f_j)]`` of one query; adds its
    subgradient into ``gq`` (zeros on entry).

    A pair (i, j) with b_i > b_j is *inverted* by π when π puts j above i. Documents of one
    level follow their scores in some optimal π (moving a document down its level's slots
    can only lower the coefficient of its score), so π interleaves the per-level lists
    sorted by score: a dynamic programme over the numbers ``n_l`` taken from each level for
    the top ``K = min(k, m)`` positions (mixed-radix states, levels capped at K), each step
    adding ``−a_p b_l / Z`` and the pairs it inverts with the higher-level documents still
    below. Below position K only the pair term counts and the remaining documents go in
    decreasing score (inverting exactly the pairs whose lower-gain document scores higher).
    """
    m = fq.shape[0]
    n_top = min(k, m)
    order = argsort_float_descending(fq)
    # Arrays come from np.empty alone, filled by loops: every other allocator (np.zeros,
    # np.full, np.ones, .copy()) is one more numba overload compiled on first use.
    # per level: documents in decreasing score, suffix sums of their scores
    size = np.empty(n_levels, dtype=np.int64)
    for level in range(n_levels):
        size[level] = 0
    for d in range(m):
        size[lq[d]] += 1
    start = np.empty(n_levels + 1, dtype=np.int64)
    start[0] = 0
    for level in range(n_levels):
        start[level + 1] = start[level] + size[level]
    fill = np.empty(n_levels, dtype=np.int64)
    for level in range(n_levels):
        fill[level] = start[level]
    by_level = np.empty(m, dtype=np.int64)
    for r in range(m):
        d = order[r]
        by_level[fill[lq[d]]] = d
        fill[lq[d]] += 1
    suffix = np.empty(m + n_levels)
    for level in range(n_levels):
        base = start[level] + level
        suffix[base + size[level]] = 0.0
        for t in range(size[level] - 1, -1, -1):
            suffix[base + t] = suffix[base + t + 1] + fq[by_level[start[level] + t]]
    level_gain = np.empty(n_levels)
    for d in range(m):
        level_gain[lq[d]] = bq[d]

    # The tail's pair term for every terminal state, from tables per pair of levels
    # (higher h, lower l): tail[h, l][x, y] = Σ (f_j − f_d) over the documents d of level h
    # of rank >= x and j of level l of rank >= y with j above d in the score order (the
    # inverted pairs among the documents left below position K when the top took x and y
    # of them); a terminal state's tail is scale times the sum of its L(L − 1)/2 entries.
    # Built as suffix sums over y, then over x (no subtraction), O(m²) per query.
    position = np.empty(m, dtype=np.int64)
    for r in range(m):
        position[order[r]] = r
    table_at = np.empty(n_levels * n_levels, dtype=np.int64)  # read for h > low only
    n_entries = 0
    for h in range(n_levels):
        for low in range(h):
            table_at[h * n_levels + low] = n_entries
            n_entries += (size[h] + 1) * (size[low] + 1)
    tail = np.empty(n_entries)
    for t in range(n_entries):
        tail[t] = 0.0
    for h in range(n_levels):
        for low in range(h):
            base = table_at[h * n_levels + low]
            width = size[low] + 1
            for x in range(size[h] - 1, -1, -1):
                d = by_level[start[h] + x]
                row = base + x * width
                acc = 0.0
                for y in range(size[low] - 1, -1, -1):
                    j = by_level[start[low] + y]
                    if position[j] < position[d]:
                        acc += fq[j] - fq[d]
                    tail[row + y] = acc + tail[row + width + y]
            # column y = size[low] and row x = size[h] (nothing left) stay zero

    radix = np.empty(n_levels, dtype=np.int64)
    n_states = 1
    for level in range(n_levels):
        radix[level] = min(size[level], n_top) + 1
        n_states *= radix[level]
    value = np.empty(n_states)
    came = np.empty(n_states, dtype=np.int64)
    for state in range(n_states):
        value[state] = -np.inf
        came[state] = -1
    counts = np.empty(n_levels, dtype=np.int64)
    value[0] = 0.0
    best_total = -np.inf
    best_state = 0
    strides = np.empty(n_levels, dtype=np.int64)
    strides[0] = 1
    for level in range(1, n_levels):
        strides[level] = strides[level - 1] * radix[level - 1]
    # The states with p = Σ counts <= K, in increasing order (every move goes to a larger
    # state), like an odometer that skips the others (they are unreachable): counts (the
    # state's digits) and p follow the state, instead of decoding each state by division,
    # which took most of the programme's time.
    for level in range(n_levels):
        counts[level] = 0
    p = 0
    state = 0
    while True:
        if value[state] > -np.inf:
            if p == n_top:
                # the tail: remaining documents in decreasing score (tables above)
                pairs = 0.0
                for h in range(n_levels):
                    for low in range(h):
                        pairs += tail[
                            table_at[h * n_levels + low]
                            + counts[h] * (size[low] + 1)
                            + counts[low]
                        ]
                total = value[state] + scale * pairs
                if total > best_total:
                    best_total = total
                    best_state = state
            else:
                for level in range(n_levels):
                    if counts[level] + 1 < radix[level]:
                        d = by_level[start[level] + counts[level]]
                        step = -a[p] * level_gain[level] * inv_norm
                        for higher in range(level + 1, n_levels):
                            left = size[higher] - counts[higher]
                            step -= scale * (
                                suffix[start[higher] + higher + counts[higher]] - left * fq[d]
                            )
                        nxt = state + strides[level]
                        if value[state] + step > value[nxt]:
                            value[nxt] = value[state] + step
                            came[nxt] = level
        # the next state with p <= K: raise the lowest digit that may rise, zeroing those below
        level = 0
        while level < n_levels and (p == n_top or counts[level] + 1 == radix[level]):
            p -= counts[level]
            state -= counts[level] * strides[level]
            counts[level] = 0
            level += 1
        if level == n_levels:
            break
        counts[level] += 1
        p += 1
        state += strides[level]

    # π: backtrack the top positions, then the rest in decreasing score
    pi = np.empty(m, dtype=np.int64)
    state = best_state
    rest = state
    for level in range(n_levels):
        counts[level] = rest % radix[level]
        rest //= radix[level]
    for p in range(n_top - 1, -1, -1):
        level = came[state]
        counts[level] -= 1
        pi[p] = by_level[start[level] + counts[level]]
        state -= strides[level]
    taken = np.empty(m, dtype=np.bool_)
    for d in range(m):
        taken[d] = False
    for p in range(n_top):
        taken[pi[p]] = True
    p = n_top
    for r in range(m):
        if not taken[order[r]]:
            pi[p] = order[r]
            p += 1

    # value and subgradient from π: Δ(π) + Σ_d g_d f_d
    above = np.empty(n_levels, dtype=np.int64)
    for level in range(n_levels):
        above[level] = 0
    for p in range(m):
        d = pi[p]
        for lower in range(lq[d]):
            # lower-gain documents above d: pairs (d, j) inverted, term −scale (f_d − f_j)
            gq[d] -= scale * above[lower]
        for higher in range(lq[d] + 1, n_levels):
            # higher-gain documents below d: pairs (i, d) inverted, term −scale (f_i − f_d)
            gq[d] += scale * (size[higher] - above[higher])
        above[lq[d]] += 1
    total = 1.0
    for p in range(n_top):
        total -= a[p] * bq[pi[p]] * inv_norm
    for d in range(m):
        total += gq[d] * fq[d]
    if total <= 0.0:
        for d in range(m):
            gq[d] = 0.0
        return 0.0
    return total


@njit(**OUTER)
def pairs_loss(
    q_start, q_stop, f, query_ptr, level_gain, level_ptr, level, n_levels, inv_norm, pair_scale,
    a, k, values, grad,
):  # fmt: skip
    """Per-query loss with the pair joint feature map, and its subgradient, for the queries
    ``q_start:q_stop`` (a block of :mod:`losses._threads`).

    ``l(f) = max_π [Δ(π) − pair_scale Σ_{b_i > b_j, π puts j above i} (f_i − f_j)]``, with
    ``pair_scale = 2 / (number of pairs of different gain)`` per query. Degenerate queries
    (``inv_norm == 0``) get 0. Cost per query: the programme's states that take at most K
    documents (of the ``Π_l (min(m_l, K) + 1)`` it allocates and initialises) times
    ``O(L²)``, the same per final state, and ``O(m²)`` for the tables of the tail. The
    gains are given as in :func:`structured_loss`.
    """
    grad[query_ptr[q_start] : query_ptr[q_stop]] = 0.0
    max_m = 0
    for q in range(q_start, q_stop):
        max_m = max(max_m, query_ptr[q + 1] - query_ptr[q])
    gain_buf = np.empty(max_m)
    for q in range(q_start, q_stop):
        start = query_ptr[q]
        stop = query_ptr[q + 1]
        if inv_norm[q] == 0.0 or stop - start < 2:
            values[q] = 0.0
            continue
        values[q] = _pairs_query(
            f[start:stop],
            _query_gains(level_gain, level_ptr[q], level[start:stop], gain_buf),
            level[start:stop],
            n_levels[q],
            inv_norm[q],
            a,
            k,
            pair_scale[q],
            grad[start:stop],
        )

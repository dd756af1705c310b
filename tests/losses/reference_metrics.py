"""Slow, obviously correct ranking measures written from their definitions with plain loops.

Every function scores one query. ``ranked`` functions take the labels in ranked order; the
``stable_order`` / ``tie_orders`` helpers produce rankings from scores: the stable ranking
(equal scores keep their row order) and every ranking consistent with the scores (all
orders of each run of equal scores), over which the tie-averaged measures are the mean.
"""

from __future__ import annotations

import functools
import itertools
import math


def stable_order(scores):
    """Row indices by decreasing score, equal scores in row order."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def tie_orders(scores):
    """Every ranking that sorts the scores decreasingly (all orders of each tie group)."""
    base = stable_order(scores)
    groups = [list(g) for _, g in itertools.groupby(base, key=lambda i: scores[i])]
    for parts in itertools.product(*(itertools.permutations(g) for g in groups)):
        yield [i for part in parts for i in part]


def over_rankings(measure, labels, scores, ties):
    """measure(labels in ranked order), stable or averaged over all tie-consistent orders."""
    if ties == "stable":
        return measure([labels[i] for i in stable_order(scores)])
    values = [measure([labels[i] for i in order]) for order in tie_orders(scores)]
    return sum(values) / len(values)


def gain(r, kind):
    if kind == "exp":
        return 2.0**r - 1.0
    if kind == "linear":
        return float(r)
    return kind(r)


def discount(i, kind):
    """Discount of 1-based position i."""
    if kind == "log2":
        return 1.0 / math.log2(i + 1)
    return 1.0 if i == 1 else 1.0 / math.log2(i)


def dcg_ranked(ranked, k=None, gain_kind="exp", discount_kind="log2"):
    k = len(ranked) if k is None else k
    total = 0.0
    for i, r in enumerate(ranked, start=1):
        if i > k:
            break
        total += gain(r, gain_kind) * discount(i, discount_kind)
    return total


def ideal_dcg_bruteforce(labels, k=None, gain_kind="exp", discount_kind="log2"):
    """Largest DCG@k over all permutations of the labels."""
    return max(
        dcg_ranked(list(p), k, gain_kind, discount_kind) for p in itertools.permutations(labels)
    )


def ndcg_ranked(ranked, k=None, gain_kind="exp", discount_kind="log2", empty=0.0):
    ideal = dcg_ranked(sorted(ranked, reverse=True), k, gain_kind, discount_kind)
    if ideal == 0:
        return empty
    return dcg_ranked(ranked, k, gain_kind, discount_kind) / ideal


def letor_ndcg_ranked(ranked, k):
    """The LETOR 4.0 tool: gain 2^r − 1, positions 1, 2 undiscounted, i >= 3 over log2 i,
    0 without a relevant document or with fewer than k documents."""
    if len(ranked) < k:
        return 0.0
    table = {0: 0.0, 1: 1.0, 2: 3.0, 3: 7.0, 4: 15.0}

    def dcg(rs):
        total = 0.0
        for pos in range(k):
            g = table[int(rs[pos])]
            total += g if pos < 2 else g * math.log(2.0) / math.log(pos + 1.0)
        return total

    best = dcg(sorted(ranked, reverse=True))
    return 0.0 if best == 0 else dcg(ranked) / best


def precision_ranked(rel, k=None):
    """Relevant in the top k over k (the list length without k); missing positions count
    as irrelevant."""
    k = len(rel) if k is None else k
    return sum(1 for r in rel[:k] if r) / k


def recall_ranked(rel, k=None, empty=0.0):
    n_rel = sum(1 for r in rel if r)
    if n_rel == 0:
        return empty
    k = len(rel) if k is None else k
    return sum(1 for r in rel[:k] if r) / n_rel


def fbeta_ranked(rel, k=None, beta=1.0, empty=0.0):
    if not any(rel):
        return empty
    p = precision_ranked(rel, k)
    r = recall_ranked(rel, k)
    if p == 0 and r == 0:
        return 0.0
    return (1 + beta**2) * p * r / (beta**2 * p + r)


def average_precision_ranked(rel, k=None, normalize="relevant", empty=0.0):
    n_rel = sum(1 for r in rel if r)
    if n_rel == 0:
        return empty
    k = len(rel) if k is None else k
    total = 0.0
    for i in range(1, min(k, len(rel)) + 1):
        if rel[i - 1]:
            total += precision_ranked(rel, i)
    return total / (n_rel if normalize == "relevant" else k)


def reciprocal_rank_ranked(rel, k=None, empty=0.0):
    if not any(rel):
        return empty
    k = len(rel) if k is None else k
    for i, r in enumerate(rel, start=1):
        if r:
            return 1.0 / i if i <= k else 0.0
    return 0.0


def err_ranked(ranked, k=None, g_max=4.0):
    """Σ_i (1/i) R_i Π_{j<i} (1 − R_j) with R = (2^g − 1) / 2^g_max, as a cascade: the user
    stops at position i with probability R_i."""
    k = len(ranked) if k is None else k
    total = 0.0
    reach = 1.0
    for i, g in enumerate(ranked[:k], start=1):
        stop = (2.0**g - 1.0) / 2.0**g_max
        total += reach * stop / i
        reach *= 1.0 - stop
    return total


def eru_ranked(ranked, k=None, alpha=5.0, d=0.0):
    k = len(ranked) if k is None else k
    return sum(
        2.0 ** (-(i - 1) / (alpha - 1)) * max(r - d, 0.0)
        for i, r in enumerate(ranked[:k], start=1)
    )


@functools.cache
def _ideal_eru(labels, k, alpha, d):
    """Largest ERU@k over all permutations of the (sorted tuple of) labels."""
    return max(eru_ranked(list(p), k, alpha, d) for p in itertools.permutations(labels))


def neru_ranked(ranked, k=None, alpha=5.0, d=0.0, empty=0.0):
    ideal = _ideal_eru(tuple(sorted(ranked)), k, alpha, d)
    if ideal == 0:
        return empty
    return eru_ranked(ranked, k, alpha, d) / ideal


def sign(x):
    return int(x > 0) - int(x < 0)


def kendall_tau_b(x, y):
    """tau-b from all pairs: (C − D) / sqrt((n0 − n_x)(n0 − n_y)); None when undefined."""
    n = len(x)
    c = d = tx = ty = 0
    for u in range(n):
        for v in range(u + 1, n):
            s = sign(x[u] - x[v]) * sign(y[u] - y[v])
            c += s > 0
            d += s < 0
            tx += x[u] == x[v]
            ty += y[u] == y[v]
    n0 = n * (n - 1) // 2
    denom = math.sqrt((n0 - tx) * (n0 - ty))
    return None if denom == 0 else (c - d) / denom


def weighted_tau(positions, labels, weights="uniform"):
    """Eq. 9.130 with π the ranking positions (1 = top; tied positions are equal) and π* the
    order of the labels: Σ w [1 + sgn(π_u − π_v) sgn(π*_u − π*_v)] / (2 Σ w), where a
    document with a larger label has a smaller (better) π*."""
    n = len(labels)
    num = den = 0.0
    for u in range(n):
        for v in range(u + 1, n):
            if weights == "uniform":
                w = 1.0
            elif weights == "label":
                w = abs(labels[u] - labels[v])
            else:
                w = abs(2.0 ** labels[u] - 2.0 ** labels[v])
            s_pi = sign(positions[u] - positions[v])
            s_star = sign(labels[v] - labels[u])
            num += w * (1 + s_pi * s_star)
            den += 2 * w
    return None if den == 0 else num / den


def positions_of(scores, ties):
    """1-based position of each row; tied scores share the best position with "average"."""
    order = stable_order(scores)
    pos = [0] * len(scores)
    for p, i in enumerate(order, start=1):
        pos[i] = p
    if ties == "average":
        for i in range(len(scores)):
            pos[i] = 1 + sum(1 for j in range(len(scores)) if scores[j] > scores[i])
    return pos


def split_queries(y, s, qid):
    """Per-query (labels, scores) lists in order of first appearance of each qid."""
    if qid is None:
        return [(list(y), list(s))]
    seen = {}
    for yi, si, q in zip(y, s, qid, strict=True):
        seen.setdefault(q, ([], []))
        seen[q][0].append(yi)
        seen[q][1].append(si)
    return list(seen.values())

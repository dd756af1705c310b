"""Slow references for the structured NDCG / NERU losses.

Written from the definitions only, independently of the package's kernels:

* :func:`brute_force` enumerates every permutation of a query (m <= 7) for the maximising π
  and every ideal ordering (gains non-increasing along the positions) for the minimising σ;
* :func:`assignment_reference` solves the full m × m assignment with
  ``scipy.optimize.linear_sum_assignment`` and builds σ with ``np.lexsort``;
* :func:`pessimistic_loss` is 1 − measure of the ranking by f with tied scores ordered by
  increasing label (the worst tie-breaking), found by trying every order of every tie group
  for small queries.
"""

from __future__ import annotations

import itertools
import math
from functools import cache

import numpy as np
from scipy.optimize import linear_sum_assignment


class Measure:
    """The ranking measure Σ_i a_i b_{π(i)} / Z of one query, from its definition."""

    def __init__(self, kind, *, k=10, gain="exp", alpha=5.0, d=0.0, discount="log2"):
        self.kind = kind
        self.discount = discount
        self.k = k
        self.gain = gain
        self.alpha = alpha
        self.d = d

    def gains(self, y):
        y = np.asarray(y, dtype=np.float64)
        if self.kind == "ndcg":
            return 2.0**y - 1.0 if self.gain == "exp" else y.copy()
        return np.maximum(y - self.d, 0.0)

    def discounts(self, m):
        positions = np.arange(1, m + 1, dtype=np.float64)
        if self.kind == "ndcg" and self.discount == "original":
            # Järvelin & Kekäläinen: no discount before position 2, 1 / log2(i) from it
            a = np.array([1.0 if i < 2 else 1.0 / math.log2(i) for i in range(1, m + 1)])
        elif self.kind == "ndcg":
            a = 1.0 / np.log2(positions + 1.0)
        else:
            a = 2.0 ** (-(positions - 1.0) / (self.alpha - 1.0))
        if self.k is not None:
            a[positions > self.k] = 0.0
        return a

    def ideal(self, y):
        """Z: the measure's unnormalised value for labels sorted descending."""
        b = np.sort(self.gains(y))[::-1]
        return float(np.dot(self.discounts(len(b)), b))

    def degenerate(self, y):
        b = self.gains(y)
        return len(b) < 2 or np.all(b == b[0])

    def loss(self, perm, y):
        """Δ(π, y) = 1 − measure(π) for π given as documents by position."""
        if self.degenerate(y):
            return 0.0
        b = self.gains(y)
        return 1.0 - float(np.dot(self.discounts(len(b)), b[np.asarray(perm)])) / self.ideal(y)


def position_weights(c, m, k=None, truncate=False):
    """c_1..c_m for the named choices, an array or a callable, cut beyond k if asked."""
    i = np.arange(1, m + 1, dtype=np.float64)
    if isinstance(c, str):
        w = (i + 1.0) ** -0.25 if c == "power" else 1.0 / np.log2(i + 1.0)
    elif callable(c):
        w = np.asarray(c(np.arange(1, m + 1)), dtype=np.float64)
    else:
        w = np.asarray(c, dtype=np.float64)[:m].copy()
    if truncate:
        w[i > k] = 0.0
    return w


@cache
def _all_perms(m):
    return np.array(list(itertools.permutations(range(m))), dtype=np.int64).reshape(-1, m)


def brute_force(f, y, measure, c):
    """Loss, subgradient and whether both argmax π and argmin σ are unique (m <= 7).

    Returns ``(loss, grad, unique)``. ``grad`` uses the first maximiser / minimiser found.
    """
    f = np.asarray(f, dtype=np.float64)
    m = len(f)
    if measure.degenerate(y):
        return 0.0, np.zeros(m), True
    perms = _all_perms(m)
    b = measure.gains(y)
    a = measure.discounts(m)
    z = measure.ideal(y)
    scores = f[perms] @ c
    objective = 1.0 - (b[perms] @ a) / z + scores
    best = objective.max()
    is_ideal = np.all(np.diff(b[perms], axis=1) <= 0, axis=1)
    ideal_scores = np.where(is_ideal, scores, np.inf)
    low = ideal_scores.min()
    loss = best - low
    pi = perms[np.argmax(objective)]
    sigma = perms[np.argmin(ideal_scores)]
    grad = np.zeros(m)
    grad[pi] += c
    grad[sigma] -= c
    gap = 1e-9 * max(1.0, np.abs(objective).max())
    pi_set = perms[objective >= best - gap]
    sigma_set = perms[ideal_scores <= low + gap]
    unique = _same_weights(pi_set, c) and _same_weights(sigma_set, c)
    return loss, grad, unique


def _same_weights(perm_set, c):
    """Whether all permutations place the same weight c on every document."""
    m = perm_set.shape[1]
    placed = np.zeros((len(perm_set), m))
    np.put_along_axis(placed, perm_set, np.broadcast_to(c, perm_set.shape), axis=1)
    return bool(np.all(placed == placed[0]))


def assignment_reference(f, y, measure, c):
    """Loss and subgradient from scipy's full m × m assignment and a lexsort σ."""
    f = np.asarray(f, dtype=np.float64)
    m = len(f)
    if measure.degenerate(y):
        return 0.0, np.zeros(m)
    b = measure.gains(y)
    a = measure.discounts(m)
    z = measure.ideal(y)
    profit = np.outer(c, f) - np.outer(a, b) / z
    rows, cols = linear_sum_assignment(profit, maximize=True)
    pi = cols[np.argsort(rows)]
    sigma = np.lexsort((f, -b))
    loss = 1.0 + profit[np.arange(m), pi].sum() - np.dot(c, f[sigma])
    grad = np.zeros(m)
    grad[pi] += c
    grad[sigma] -= c
    return loss, grad


def pessimistic_loss(f, y, measure):
    """1 − measure of the worst ranking consistent with sorting f descending (small m)."""
    f = np.asarray(f, dtype=np.float64)
    if measure.degenerate(y):
        return 0.0
    values = np.unique(f)[::-1]
    groups = [np.flatnonzero(f == v) for v in values]
    worst = -np.inf
    for orders in itertools.product(*(itertools.permutations(g) for g in groups)):
        worst = max(worst, measure.loss(np.concatenate(orders), y))
    return worst


def latent_brute_force(f, y, measure, c, anchor=None):
    """The latent-tie loss by enumeration (m <= 7): ``(loss, grad, pi_unique)``.

    ``max_π [Δ(π) + Σ c_i f_{π(i)}] − Σ_d w_d f_d`` where ``w`` is the mean, over the
    distinct placements ``c_σ`` of the ideal orderings σ maximising ``Σ c_i anchor_{σ(i)}``
    (``anchor = f`` by default: the latent loss, whose σ part is then
    ``max_σ Σ c_i f_{σ(i)}``; another anchor gives the surrogate with the ties fixed
    there). ``grad`` places ``c`` on the first maximising π; ``pi_unique`` says whether
    every maximising π places the same weights.
    """
    return _reference_brute_force(f, y, measure, c, anchor, ideal_only=True)


def pairs_brute_force(f, y, measure):
    """The pair-map loss by enumeration (m <= 7): ``(loss, grad, unique)``.

    ``max_π [Δ(π) − (2/P) Σ_{b_i > b_j, π puts j above i} (f_i − f_j)]``, P the number of
    pairs of different gain; ``grad`` from the first maximiser, ``unique`` whether all
    maximisers give the same gradient.
    """
    f = np.asarray(f, dtype=np.float64)
    m = len(f)
    if measure.degenerate(y):
        return 0.0, np.zeros(m), True
    b = measure.gains(y)
    higher = b[:, None] > b[None, :]  # (i, j): i has the larger gain
    scale = 2.0 / higher.sum()
    perms = _all_perms(m)
    position = np.argsort(perms, axis=1)  # position of each document under π
    grads = np.zeros((len(perms), m))
    for i, j in zip(*np.nonzero(higher), strict=True):
        inverted = position[:, j] < position[:, i]
        grads[inverted, i] -= scale
        grads[inverted, j] += scale
    delta = 1.0 - (b[perms] @ measure.discounts(m)) / measure.ideal(y)
    objective = delta + grads @ f
    best = objective.max()
    top = objective >= best - 1e-9 * max(1.0, np.abs(objective).max())
    unique = bool(np.all(grads[top] == grads[top][0]))
    return max(best, 0.0), grads[np.argmax(objective)], unique


def ramp_brute_force(f, y, measure, c, anchor=None):
    """The ramp bound by enumeration (m <= 7): ``(loss, grad, pi_unique)``.

    ``max_π [Δ(π) + Σ c_i f_{π(i)}] − Σ_d w_d f_d`` where ``w`` is the mean, over the
    distinct placements ``c_τ`` of *all* permutations τ maximising ``Σ c_i anchor_{τ(i)}``
    (``anchor = f`` by default: the ramp loss, whose reference part is then
    ``max_τ Σ c_i f_{τ(i)}``; another anchor gives its surrogate fixed there). ``grad``
    places ``c`` on the first maximising π; ``pi_unique`` says whether every maximising π
    places the same weights.
    """
    return _reference_brute_force(f, y, measure, c, anchor, ideal_only=False)


def _reference_brute_force(f, y, measure, c, anchor, ideal_only):
    """``max_π [Δ(π) + Σ c_i f_{π(i)}] − Σ_d w_d f_d`` by enumeration (m <= 7), ``w`` the mean
    of the distinct placements of c by the references σ maximising ``Σ c_i anchor_{σ(i)}``
    (σ over the ideal orderings, or over all permutations): ``(loss, grad, pi_unique)``."""
    f = np.asarray(f, dtype=np.float64)
    anchor = f if anchor is None else np.asarray(anchor, dtype=np.float64)
    m = len(f)
    if measure.degenerate(y):
        return 0.0, np.zeros(m), True
    perms = _all_perms(m)
    b = measure.gains(y)
    objective = 1.0 - (b[perms] @ measure.discounts(m)) / measure.ideal(y) + f[perms] @ c
    best = objective.max()
    pi = perms[np.argmax(objective)]
    gap = 1e-9 * max(1.0, np.abs(objective).max())
    pi_unique = _same_weights(perms[objective >= best - gap], c)
    reference = perms[np.all(np.diff(b[perms], axis=1) <= 0, axis=1)] if ideal_only else perms
    at_anchor = anchor[reference] @ c
    top = reference[at_anchor >= at_anchor.max() - 1e-12 * max(1.0, np.abs(at_anchor).max())]
    placed = np.zeros((len(top), m))
    np.put_along_axis(placed, top, np.broadcast_to(c, top.shape), axis=1)
    w = np.unique(placed, axis=0).mean(axis=0)
    grad = np.zeros(m)
    grad[pi] += c
    grad -= w
    return best - w @ f, grad, pi_unique

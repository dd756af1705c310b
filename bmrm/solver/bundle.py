"""The bundle: cutting planes of the risk, their Gram matrix and their dual weights."""

from __future__ import annotations

import itertools
import math

import numpy as np
from numba import njit

from losses.kernels import JIT_OPTIONS

__all__ = ["Bundle"]

_plane_numbers = itertools.count(1)
# columns per block when planes are combined (a block of the selected rows at a time)
_COLUMNS = 1 << 14


@njit(**JIT_OPTIONS)
def _append_plane(A, G, a, k):
    """A[k] = a and row/column k of the Gram matrix G (one pass, no BLAS thread pool)."""
    d = a.shape[0]
    for j in range(d):
        A[k, j] = a[j]
    for i in range(k):
        s = 0.0
        for j in range(d):
            s += A[i, j] * a[j]
        G[k, i] = s
        G[i, k] = s
    s = 0.0
    for j in range(d):
        s += a[j] * a[j]
    G[k, k] = s


def _record_weights(alpha_buf, idle, alpha, k, max_idle):
    """Store the weights; a plane's idle count restarts when its weight is above 1e-12 times
    the largest. Returns how many planes other than the zero plane are idle ``max_idle``
    iterations or more."""
    weights = alpha[:k]
    top = max(1e-300, float(weights.max(initial=0.0)))
    alpha_buf[:k] = weights
    active = weights > 1e-12 * top
    idle[:k] = np.where(active, 0, idle[:k] + 1)
    return int(np.count_nonzero(idle[1:k] >= max_idle))


class Bundle:
    """Cutting planes ``R(w) >= <a_i, w> + b_i`` with an incrementally kept Gram matrix.

    Slot 0 always holds the plane ``a = 0, b = 0`` (valid because losses are non-negative),
    which keeps every master problem bounded below, including the L1 linear program. It is
    never pruned or aggregated.

    Parameters
    ----------
    n_features : int
        Dimension of ``w``.
    capacity : int, default=200
        Maximal number of planes, the zero plane included (at least 3). When a plane arrives
        and the bundle is full, planes with zero dual weight are dropped; if every plane is
        active, the lighter half is replaced by its dual-weighted combination, itself a valid
        cut (a convex combination of cuts). Both keep the current master optimum, so the lower
        bound never decreases and the O(1/ε) rate of Teo et al. (JMLR 2010, Thm. 5), which
        only needs the aggregate of the previous cuts, still holds. A full bundle is never an
        error.
    max_idle : int, default=50
        Iterations a plane may keep zero dual weight before it is pruned, full or not.
        Pruning copies the bundle, so it waits until a quarter of the planes (at least
        eight) are due, or until the bundle is full.
    """

    def __init__(self, n_features: int, capacity: int = 200, max_idle: int = 50):
        if capacity < 3:
            raise ValueError(f"bundle_size must be at least 3; got {capacity}")
        self.n_features = n_features
        self.capacity = capacity
        self.max_idle = max_idle
        self._alloc = min(capacity, 16)
        self.A = np.zeros((self._alloc, n_features))
        self.b = np.zeros(self._alloc)
        self.G = np.zeros((self._alloc, self._alloc))
        self.alpha = np.zeros(self._alloc)
        self.alpha[0] = 1.0
        self.idle = np.zeros(self._alloc, dtype=np.int64)
        # a number per plane, increasing along the bundle and unique in the process: lets
        # a master problem recognise the planes it has seen after some were dropped
        self.ids = np.zeros(self._alloc, dtype=np.int64)
        self.ids[0] = next(_plane_numbers)
        self.size = 1
        self.n_aggregations = 0
        self._due = 0  # planes idle for max_idle iterations, as of the last set_weights

    def _grow(self):
        new = min(self.capacity, 2 * self._alloc)
        k = self.size
        A = np.zeros((new, self.n_features))
        A[:k] = self.A[:k]
        G = np.zeros((new, new))
        G[:k, :k] = self.G[:k, :k]
        self.A, self.G = A, G
        self.b = np.concatenate([self.b[:k], np.zeros(new - k)])
        self.alpha = np.concatenate([self.alpha[:k], np.zeros(new - k)])
        self.idle = np.concatenate([self.idle[:k], np.zeros(new - k, dtype=np.int64)])
        self.ids = np.concatenate([self.ids[:k], np.zeros(new - k, dtype=np.int64)])
        self._alloc = new

    def _keep(self, keep: np.ndarray):
        """Keep the planes at indices ``keep`` (sorted, starting with 0)."""
        m = len(keep)
        # row by row, in place: keep is increasing, so a row moves up onto one already kept
        # or dropped (no copy of the kept rows, each of w's size)
        for i, row in enumerate(keep):
            if row != i:
                self.A[i] = self.A[row]
        self.b[:m] = self.b[keep]
        self.G[:m, :m] = self.G[np.ix_(keep, keep)]
        self.alpha[:m] = self.alpha[keep]
        self.idle[:m] = self.idle[keep]
        self.ids[:m] = self.ids[keep]
        self.size = m
        s = self.alpha[:m].sum()
        if s > 0:
            self.alpha[:m] /= s
        else:
            self.alpha[:m] = 0.0
            self.alpha[0] = 1.0

    def _make_room(self):
        k = self.size
        # planes without dual weight do not support the current master optimum
        idle = np.flatnonzero(self.idle[1:k] >= 1) + 1
        if len(idle):
            self._keep(np.setdiff1d(np.arange(k), idle))
            return
        # every plane is active: merge the lighter half into their weighted combination,
        # which keeps Aᵀα and bᵀα, hence the master optimum, unchanged
        order = np.argsort(self.alpha[1:k], kind="stable") + 1
        merge = np.sort(order[: max(2, (k - 1) // 2)])
        keep = np.setdiff1d(np.arange(k), merge)
        weights = self.alpha[merge]
        mass = weights.sum()
        weights = weights / mass if mass > 0 else np.full(len(merge), 1.0 / len(merge))
        a = self._combination(weights, merge)
        b = float(weights @ self.b[merge])
        g_keep = self.G[np.ix_(keep, merge)] @ weights
        g_self = float(weights @ self.G[np.ix_(merge, merge)] @ weights)
        alpha_keep = self.alpha[keep].copy()
        self._keep(keep)
        m = self.size
        self.alpha[:m] = alpha_keep
        self.A[m] = a
        self.b[m] = b
        self.G[m, :m] = g_keep
        self.G[:m, m] = g_keep
        self.G[m, m] = g_self
        self.alpha[m] = mass
        self.idle[m] = 0
        self.ids[m] = self._take_id()
        self.size = m + 1
        self.n_aggregations += 1

    def _combination(self, weights: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``weights @ A[rows]`` a block of columns at a time: the selected rows are
        copied one block at a time instead of whole (each row is of w's size). Each entry
        is the same dot product of ``weights`` with one column, as in one product."""
        n = self.n_features
        out = np.empty(n)
        for first in range(0, n, _COLUMNS):
            last = min(first + _COLUMNS, n)
            out[first:last] = weights @ self.A[rows, first:last]
        return out

    def _take_id(self) -> int:
        return next(_plane_numbers)

    def add(self, a: np.ndarray, b: float) -> None:
        """Append the plane ``(a, b)``, making room first if the bundle is full.

        Parameters
        ----------
        a : ndarray
            The plane's slope (a subgradient).
        b : float
            Its offset: the plane is R(w) >= ⟨a, w⟩ + b.
        """
        with np.errstate(over="ignore", invalid="ignore"):  # reported just below
            sq = float(np.dot(a, a))
        if not (math.isfinite(sq) and math.isfinite(b)):
            raise FloatingPointError(
                f"a cutting plane is not finite in float64 (‖a‖² = {sq:.3g}, b = {b:.3g}): "
                "the features or the loss are too large; rescale X"
            )
        if self.size == self.capacity:
            self._make_room()
        if self.size == self._alloc:
            self._grow()
        k = self.size
        _append_plane(self.A, self.G, np.ascontiguousarray(a, dtype=np.float64), k)
        self.b[k] = b
        self.alpha[k] = 0.0
        self.idle[k] = 0
        self.ids[k] = self._take_id()
        self.size = k + 1

    def model_value(self, w: np.ndarray, k: int | None = None) -> float:
        """The cutting-plane model max_{i<k} ⟨a_i, w⟩ + b_i.

        By einsum's own loop (a BLAS product would wake BLAS's thread pool).

        Parameters
        ----------
        w : ndarray
            The point.
        k : int or None
            The first k planes only (all when None).

        Returns
        -------
        float
            The model's value at ``w``.
        """
        k = self.size if k is None else k
        return float(np.max(np.einsum("ij,j->i", self.A[:k], w) + self.b[:k]))

    def set_weights(self, alpha: np.ndarray) -> None:
        """Record the master problem's dual weights and update idle counters.

        Parameters
        ----------
        alpha : ndarray
            The dual weights of the planes.
        """
        self._due = _record_weights(
            self.alpha, self.idle, np.asarray(alpha, dtype=np.float64), self.size, self.max_idle
        )

    def prune_idle(self) -> None:
        """Drop planes that have had zero dual weight for ``max_idle`` iterations.

        In batches: a quarter of the bundle, at least eight planes.
        """
        k = self.size
        if self._due >= max(8, k // 4):
            idle = np.flatnonzero(self.idle[1:k] >= self.max_idle) + 1
            self._keep(np.setdiff1d(np.arange(k), idle))
            self._due = 0

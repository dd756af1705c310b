"""Numba kernels of the CofiRank oracle: scores of all ratings, and the two scatters of
∂l/∂f back to the factors, each one pass over the ratings (O(|Ω| r) for rank r).

Every kernel takes a half-open range ``[start, stop)`` of users (or items) first, is
compiled with ``nogil=True`` and writes only the rows of that range, so that
:func:`losses.parallel.run_queries` spreads it over threads with the same result for any
number of threads.
"""

from __future__ import annotations

from numba import njit

# reassociation lets the rank-r dot product of the scores run in SIMD lanes (a sum of r
# products in another order: the same value to rounding); no flag that assumes finite values
_DOT = {"reassoc", "contract"}


@njit(cache=True, nogil=True, fastmath=_DOT)
def scores(start, stop, indptr, indices, U, V, user_offset, item_offset, f):
    """f_k = <U[i], V[j]> + user_offset[i] + item_offset[j] for rating k = (i, j)."""
    r = U.shape[1]
    for i in range(start, stop):
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            s = 0.0
            for t in range(r):
                s += U[i, t] * V[j, t]
            f[k] = s + user_offset[i] + item_offset[j]


@njit(cache=True, nogil=True)
def gather_users(start, stop, indptr, indices, g, V, grad, grad_offset):
    """grad[i] = Σ_k g[k] V[indices[k]] and grad_offset[i] = Σ_k g[k] over user i's ratings
    k in indptr[i]:indptr[i + 1], for i in [start, stop): ∂/∂U in the ratings' own order."""
    r = V.shape[1]
    for i in range(start, stop):
        total = 0.0
        for t in range(r):
            grad[i, t] = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            c = g[k]
            total += c
            for t in range(r):
                grad[i, t] += c * V[j, t]
        grad_offset[i] = total


@njit(cache=True, nogil=True)
def gather_rows(start, stop, ptr, other, entry, g, W, grad, grad_offset):
    """grad[a] = Σ_p g[entry[p]] W[other[p]] and grad_offset[a] = Σ_p g[entry[p]] over
    p in ptr[a]:ptr[a + 1], for a in [start, stop).

    With the item-major arrays (``other`` the users, ``entry`` the positions of the
    ratings in user-major order) it is ∂/∂V.
    """
    r = W.shape[1]
    for a in range(start, stop):
        total = 0.0
        for t in range(r):
            grad[a, t] = 0.0
        for p in range(ptr[a], ptr[a + 1]):
            b = other[p]
            c = g[entry[p]]
            total += c
            for t in range(r):
                grad[a, t] += c * W[b, t]
        grad_offset[a] = total

"""Fenwick trees (binary indexed trees) over ranks 0 .. n − 1, shared by the kernels.

The ordinal sweep, the candidate search of the listwise losses and Kendall's tau in the
metrics each count (or sum) items by level while they pass through a sorted order, and ask
how many lie below a level: a prefix sum that must stay O(log n) under updates.

This is the 0-based form (Fenwick, "A new data structure for cumulative frequency tables",
Software: Practice and Experience 24, 1994): ``tree[r]`` holds the sum over the ranks
``(r & (r + 1)) .. r``; an update walks ``r ← r | (r + 1)`` upwards, a prefix query
``k ← (k & (k + 1)) − 1`` downwards. A tree is an array of length n (float64 or int64) and
needs no extra slot.
"""

from numba import njit

from losses._kernels import INNER


@njit(**INNER)
def fenwick_init(tree, n):
    """Turn ``tree[:n]``, holding one value per rank, into a Fenwick tree in place; O(n)."""
    for r in range(n):
        parent = r | (r + 1)
        if parent < n:
            tree[parent] += tree[r]


@njit(**INNER)
def fenwick_add(tree, r, delta):
    """Add ``delta`` at rank ``r``; O(log n)."""
    n = tree.shape[0]
    while r < n:
        tree[r] += delta
        r |= r + 1


@njit(**INNER)
def fenwick_prefix(tree, r):
    """Sum over the ranks 0 .. r − 1; O(log n)."""
    total = 0  # unifies with the tree's dtype
    k = r - 1
    while k >= 0:
        total += tree[k]
        k = (k & (k + 1)) - 1
    return total

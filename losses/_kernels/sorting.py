"""Sorting for the kernels, written out instead of numba's ``np.sort`` / ``np.argsort``.

numba builds its sorts from closures whose compiled names carry a per-process counter, so
two on-disk cached kernels compiled in different processes can each hold a different sort
under one name; loaded into one process, one of them then runs the other's code (wrong
orders, non-finite losses, crashes). Plain functions, compiled per argument type, do not
have this problem; ``tests/test_numba_cache.py`` loads kernels compiled apart together.
"""

import numpy as np
from numba import njit

from losses._kernels import OUTER

_INSERTION_MAX = 16


@njit(**OUTER)
def argsort_stable(x):
    """Return the indices that sort the 1-D array ``x`` ascending, equal values in order.

    Insertion sort on runs of 16, then bottom-up merging: O(m log m) comparisons.

    Parameters
    ----------
    x : ndarray of shape (m,)
        The values to sort.

    Returns
    -------
    ndarray of shape (m,), int64
        ``x[idx]`` is sorted ascending; equal values keep their order in ``x`` (a stable
        sort, as ``np.argsort(x, kind="stable")``).
    """
    m = x.shape[0]
    idx = np.empty(m, dtype=np.int64)
    for i in range(m):
        idx[i] = i
    # sorted runs of _INSERTION_MAX
    for start in range(0, m, _INSERTION_MAX):
        stop = min(start + _INSERTION_MAX, m)
        for i in range(start + 1, stop):
            v = idx[i]
            key = x[v]
            j = i - 1
            while j >= start and x[idx[j]] > key:
                idx[j + 1] = idx[j]
                j -= 1
            idx[j + 1] = v
    if m <= _INSERTION_MAX:
        return idx
    buf = np.empty(m, dtype=np.int64)
    width = _INSERTION_MAX
    src = idx
    dst = buf
    while width < m:
        for left in range(0, m, 2 * width):
            mid = min(left + width, m)
            right = min(left + 2 * width, m)
            i = left
            j = mid
            t = left
            while i < mid and j < right:
                # take from the left run on ties: stable
                if x[src[j]] < x[src[i]]:
                    dst[t] = src[j]
                    j += 1
                else:
                    dst[t] = src[i]
                    i += 1
                t += 1
            while i < mid:
                dst[t] = src[i]
                i += 1
                t += 1
            while j < right:
                dst[t] = src[j]
                j += 1
                t += 1
        src, dst = dst, src
        width *= 2
    return src


@njit(**OUTER)
def sorted_copy(x):
    """Return ``x`` sorted ascending, as a new array.

    Parameters
    ----------
    x : ndarray of shape (m,)
        The values to sort.

    Returns
    -------
    ndarray of shape (m,)
        The sorted values, of the dtype of ``x``.
    """
    idx = argsort_stable(x)
    out = np.empty(x.shape[0], dtype=x.dtype)
    for i in range(x.shape[0]):
        out[i] = x[idx[i]]
    return out

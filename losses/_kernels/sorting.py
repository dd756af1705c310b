"""Sorting for the kernels, written out instead of numba's ``np.sort`` / ``np.argsort``.

:func:`argsort_stable` is a comparison sort of any numeric array. :func:`argsort_float` and
:func:`argsort_float_descending` sort float64 scores, and from ``RADIX_MIN`` values on use an
LSD radix sort on the order-preserving integer image of the floats (Knuth, TAOCP vol. 3,
§5.2.5), O(m) instead of O(m log m); both give the order of numpy's stable sort.

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
# from this many values on, argsort_float takes the radix sort (below, the comparison sort's
# fewer passes cost less than the radix sort's digit counts)
RADIX_MIN = 48
_RADIX_BITS = 8


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


@njit(**OUTER)
def argsort_float(x):
    """Return the indices that sort the float64 array ``x`` ascending, stably.

    The order of ``np.argsort(x, kind="stable")``: equal values in index order. From
    ``RADIX_MIN`` values on, and when no value is NaN, an LSD radix sort with 8-bit digits on
    the order-preserving image of the float64 bits (:func:`_float_image`); passes over a
    digit that all keys share are skipped. Otherwise :func:`argsort_stable`.

    Parameters
    ----------
    x : ndarray of shape (m,), float64
        The values to sort.

    Returns
    -------
    ndarray of shape (m,), int64
        The sorting indices.
    """
    m = x.shape[0]
    if m < RADIX_MIN:
        return argsort_stable(x)
    keys = _float_image(x)
    if keys.shape[0] != m:  # a NaN: the comparison sort's order
        return argsort_stable(x)
    return _radix_order(keys)


@njit(**OUTER)
def argsort_float_descending(x):
    """Return the indices that sort the float64 array ``x`` descending, stably.

    The order of ``np.argsort(-x, kind="stable")``: equal values in index order, as the
    ranking kernels read scores; :func:`argsort_float` of ``-x``.

    Parameters
    ----------
    x : ndarray of shape (m,), float64
        The values to sort.

    Returns
    -------
    ndarray of shape (m,), int64
        The sorting indices.
    """
    return argsort_float(-x)


@njit(**OUTER)
def _float_image(x):
    """The order-preserving unsigned-integer image of the float64 ``x``: a non-negative
    float has its sign bit set, a negative one all bits flipped, so that the integers order
    as the floats do; −0.0 is first made +0.0, which compares equal to it. Empty when a
    value is NaN (which has no place in that order)."""
    m = x.shape[0]
    image = np.empty(m)
    for i in range(m):
        v = x[i]
        if v != v:
            return np.empty(0, dtype=np.uint64)
        image[i] = v + 0.0  # -0.0 becomes +0.0
    keys = image.view(np.uint64)
    sign = np.uint64(1) << np.uint64(63)
    for i in range(m):
        b = keys[i]
        keys[i] = ~b if b & sign else b | sign
    return keys


@njit(**OUTER)
def _radix_order(keys):
    """The stable ascending order of the uint64 ``keys`` (overwritten) by LSD radix sort."""
    m = keys.shape[0]
    n_passes = (64 + _RADIX_BITS - 1) // _RADIX_BITS
    n_digits = 1 << _RADIX_BITS
    mask = np.uint64(n_digits - 1)
    # every pass's digit counts in one read of the keys
    count = np.empty((n_passes, n_digits), dtype=np.int64)
    for p in range(n_passes):
        for d in range(n_digits):
            count[p, d] = 0
    for i in range(m):
        k = keys[i]
        for p in range(n_passes):
            count[p, (k >> np.uint64(p * _RADIX_BITS)) & mask] += 1
    order = np.empty(m, dtype=np.int64)
    for i in range(m):
        order[i] = i
    tmp_keys = np.empty(m, dtype=np.uint64)
    tmp_order = np.empty(m, dtype=np.int64)
    for p in range(n_passes):
        shift = np.uint64(p * _RADIX_BITS)
        if count[p, (keys[0] >> shift) & mask] == m:
            continue
        start = 0
        for d in range(n_digits):
            c = count[p, d]
            count[p, d] = start
            start += c
        for i in range(m):
            k = keys[i]
            d = (k >> shift) & mask
            t = count[p, d]
            count[p, d] = t + 1
            tmp_keys[t] = k
            tmp_order[t] = order[i]
        keys, tmp_keys = tmp_keys, keys
        order, tmp_order = tmp_order, order
    return order

"""Numba kernels of :mod:`losses` that other packages may call from their own kernels.

``argsort_stable(x)`` and ``sorted_copy(x)`` sort a 1-d array stably in O(m log m);
``argsort_float(x)`` and ``argsort_float_descending(x)`` sort float64 scores stably, ascending
or descending (ties in index order), by radix sort in O(m) from ``RADIX_MIN`` values on
(:mod:`losses._kernels.sorting` explains why the kernels carry their own sort rather than
numba's ``np.argsort``, which on-disk caching can confuse across processes).

``JIT_OPTIONS`` are the options of every kernel (``njit(**JIT_OPTIONS)``) and
``INNER_JIT_OPTIONS`` those of kernels that only other kernels call (no Python entry
point). numba compiles its own functions (``np.empty``, ``max``, ...) once per set of
options of their callers, so other packages' kernels compiled with the same options share
those compilations with the losses'.
"""

from losses._kernels import INNER as INNER_JIT_OPTIONS
from losses._kernels import OUTER as JIT_OPTIONS
from losses._kernels.sorting import (
    RADIX_MIN,
    argsort_float,
    argsort_float_descending,
    argsort_stable,
    sorted_copy,
)

__all__ = [
    "INNER_JIT_OPTIONS",
    "JIT_OPTIONS",
    "RADIX_MIN",
    "argsort_float",
    "argsort_float_descending",
    "argsort_stable",
    "sorted_copy",
]

"""Numba kernels of :mod:`losses` that other packages may call from their own kernels.

``argsort_stable(x)`` and ``sorted_copy(x)`` sort a 1-d array stably in O(m log m)
(:mod:`losses._kernels.sorting` explains why the kernels carry their own sort rather than
numba's ``np.argsort``, which on-disk caching can confuse across processes).
"""

from losses._kernels.sorting import argsort_stable, sorted_copy

__all__ = ["argsort_stable", "sorted_copy"]

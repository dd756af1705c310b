"""The thread pool the loss kernels run on, for code above the losses to share it.

The risk oracle of :mod:`bmrm` computes its products X w and Xᵀ g on the same threads as the
loss kernels (one pool instead of BLAS's beside this one): :func:`run_blocks` runs a serial
kernel over contiguous blocks, :func:`block_bounds` cuts a CSR-like pointer into balanced
blocks, :func:`n_threads_for` is the number of threads worth using for n rows, and
:func:`thread_limit` bounds the threads of a block of code (the Dask workers' processes).
"""

from losses._threads import block_bounds, n_threads_for, run_blocks, thread_limit

__all__ = ["block_bounds", "n_threads_for", "run_blocks", "thread_limit"]

"""Serial numba kernels run over blocks of queries (or rows) on a pool of Python threads.

The kernels are compiled without ``parallel=True``: numba's parallel loops (parfors) take
several times longer to compile than the same loop written serially, and that compilation is
what a new user waits for on the first fit. Instead every kernel that is worth spreading takes
a half-open range ``[start, stop)`` of queries as its first two arguments, is compiled with
``nogil=True``, and :func:`run_blocks` calls it on contiguous blocks from a thread pool. Each
query's outputs depend on that query alone, so results are bit-for-bit the same for any number
of threads.

The number of threads is numba's (``NUMBA_NUM_THREADS``, :func:`numba.set_num_threads`),
at most the calling thread's :func:`thread_limit` when one is set (Dask tasks, which get
their parallelism from the worker's threads). Inputs below :data:`PARALLEL_MIN_ROWS` rows run
on the calling thread: handing work to a pool costs tens of microseconds per call (far more
on a loaded machine), more than a kernel on a small input takes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numba
import numpy as np

__all__ = [
    "PARALLEL_MIN_ROWS",
    "block_bounds",
    "n_threads_for",
    "run_blocks",
    "run_queries",
    "thread_limit",
]

# Below this many rows the kernels run on the calling thread.
PARALLEL_MIN_ROWS = 20_000

_pool: ThreadPoolExecutor | None = None
_pool_pid = -1
_pool_lock = threading.Lock()
_local = threading.local()


@contextmanager
def thread_limit(n_threads: int) -> Iterator[None]:
    """Limit kernels called from this thread, within the block, to ``n_threads`` threads.

    For callers that are themselves one of several threads or processes sharing the cores,
    such as Dask tasks: numba's count is all the cores of the machine, so every task
    spreading its kernels over all of them would put several busy threads on each core.
    Results do not depend on the number of threads (module docstring).

    Parameters
    ----------
    n_threads : int
        The most threads, at least 1.

    Yields
    ------
    None
        Control, with the limit in force until the block ends.

    Raises
    ------
    ValueError
        When ``n_threads`` is not an integer of at least 1.
    """
    if (
        isinstance(n_threads, bool)
        or not isinstance(n_threads, (int, np.integer))
        or n_threads < 1
    ):
        raise ValueError(f"n_threads must be an integer of at least 1; got {n_threads!r}")
    previous = getattr(_local, "limit", None)
    _local.limit = int(n_threads)
    try:
        yield
    finally:
        _local.limit = previous


def n_threads_for(n_rows: int, min_rows: int = PARALLEL_MIN_ROWS) -> int:
    """Return the number of threads for a kernel over ``n_rows`` rows.

    Parameters
    ----------
    n_rows : int
        The kernel's number of rows.
    min_rows : int, default=PARALLEL_MIN_ROWS
        Below this many rows the kernel runs on one thread.

    Returns
    -------
    int
        1 below ``min_rows``, else numba's thread count, at most the calling thread's
        :func:`thread_limit`.
    """
    if n_rows < min_rows:
        return 1
    limit = getattr(_local, "limit", None)
    n = max(1, _numba_threads())
    return n if limit is None else min(n, limit)


def _numba_threads() -> int:
    """numba's thread count, without launching numba's own thread pool.

    These kernels never run on that pool, and launching it pins ``NUMBA_NUM_THREADS`` for the
    life of the process: numba then raises on the next compilation if the variable has
    changed since (as in Dask worker processes started with ``env={"NUMBA_NUM_THREADS": ...}``,
    where the first fit failed with "Cannot set NUMBA_NUM_THREADS to a different value once
    the threads have been launched"). Once the pool is up (after
    :func:`numba.set_num_threads`), its current setting is used.
    """
    from numba.np.ufunc import parallel

    if parallel._is_initialized:
        return numba.get_num_threads()
    return numba.config.NUMBA_NUM_THREADS


def block_bounds(ptr: np.ndarray, n_blocks: int) -> np.ndarray:
    """Split the items of a CSR pointer into contiguous blocks of about equal row counts.

    Parameters
    ----------
    ptr : ndarray of shape (n_items + 1,), int64
        Item ``i`` holds rows ``ptr[i]:ptr[i + 1]`` (for example a ``query_ptr``).
    n_blocks : int
        The most blocks.

    Returns
    -------
    ndarray of int64
        The item boundaries of the blocks: starting at 0, ending at ``n_items``, strictly
        increasing (one block when there is at most one item).
    """
    n_items = len(ptr) - 1
    if n_blocks <= 1 or n_items <= 1:
        return np.array([0, max(n_items, 0)], dtype=np.int64)
    targets = np.linspace(0, ptr[-1], n_blocks + 1)[1:-1]
    cuts = np.searchsorted(ptr, targets, side="left")
    return np.unique(np.concatenate([[0], np.clip(cuts, 1, n_items - 1), [n_items]]))


def _executor() -> ThreadPoolExecutor:
    """The process's pool; a new one after a fork (the child has none of the parent's
    threads, so work handed to the inherited pool would never run)."""
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(
                max_workers=max(1, numba.config.NUMBA_NUM_THREADS - 1),
                thread_name_prefix="losses",
            )
            _pool_pid = os.getpid()
        return _pool


def run_blocks(kernel, bounds: np.ndarray, *args) -> list:
    """Call ``kernel(bounds[i], bounds[i + 1], *args)`` for every block.

    The first block runs on the calling thread, the others on the pool (so one block never
    touches the pool). ``kernel`` must release the GIL (``nogil=True``) for the blocks to run
    at the same time, and blocks must write disjoint outputs.

    Parameters
    ----------
    kernel : callable
        Called as ``kernel(start, stop, *args)`` on each block.
    bounds : ndarray of int64
        The block boundaries, as :func:`block_bounds` returns them.
    *args
        Passed to every call after the block's bounds.

    Returns
    -------
    list
        The kernel's results, in block order.
    """
    n = len(bounds) - 1
    if n <= 1:
        return [kernel(int(bounds[0]), int(bounds[-1]), *args)]
    pool = _executor()
    futures = [pool.submit(kernel, int(bounds[i]), int(bounds[i + 1]), *args) for i in range(1, n)]
    first = kernel(int(bounds[0]), int(bounds[1]), *args)
    return [first] + [f.result() for f in futures]


def run_queries(kernel, query_ptr: np.ndarray, *args, min_rows: int = PARALLEL_MIN_ROWS) -> list:
    """Run :func:`run_blocks` over the queries of ``query_ptr``, blocks balanced by rows.

    Parameters
    ----------
    kernel : callable
        Called as ``kernel(q_start, q_stop, *args)`` on each block of queries.
    query_ptr : ndarray of shape (n_queries + 1,), int64
        The query groups.
    *args
        Passed to every call after the block's bounds.
    min_rows : int, default=PARALLEL_MIN_ROWS
        Below this many rows all queries run as one block on the calling thread.

    Returns
    -------
    list
        The kernel's results, in block order.
    """
    bounds = block_bounds(query_ptr, n_threads_for(int(query_ptr[-1]), min_rows))
    return run_blocks(kernel, bounds, *args)

"""Blocks of queries for the thread pool: boundaries, order of results, forked children."""

import os

import numpy as np
import pytest

from losses import _threads
from losses._threads import block_bounds, n_threads_for, run_blocks, thread_limit


@pytest.mark.parametrize("seed", range(20))
def test_block_bounds_cover_every_item_once_in_order(seed):
    rng = np.random.default_rng(seed)
    n_items = int(rng.integers(0, 50))
    sizes = rng.integers(0, 30, size=n_items) * (rng.random(n_items) < 0.8)
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    n_blocks = int(rng.integers(1, 9))
    bounds = block_bounds(ptr, n_blocks)
    assert bounds[0] == 0 and bounds[-1] == n_items
    assert len(bounds) - 1 <= max(n_blocks, 1)
    if n_items:
        assert np.all(np.diff(bounds) > 0)
    if n_blocks > 1 and n_items > 1 and ptr[-1] > 0:
        # balanced by rows: no block holds more than its share plus the largest item
        rows = ptr[bounds[1:]] - ptr[bounds[:-1]]
        assert rows.max() <= ptr[-1] / n_blocks + sizes.max()


def test_run_blocks_returns_every_block_in_order():
    bounds = np.array([0, 3, 4, 9, 10])
    assert run_blocks(lambda a, b, c: (a, b, c), bounds, "x") == [
        (0, 3, "x"),
        (3, 4, "x"),
        (4, 9, "x"),
        (9, 10, "x"),
    ]


def test_inputs_from_min_rows_on_use_every_thread(monkeypatch):
    """Fewer than ``min_rows`` rows stay on one thread; ``min_rows`` rows and more use all
    of numba's threads (four here, whatever the machine)."""
    monkeypatch.setattr(_threads, "_numba_threads", lambda: 4)
    assert _threads.n_threads_for(10, 20) == 1
    assert _threads.n_threads_for(19, 20) == 1
    assert _threads.n_threads_for(20, 20) == 4
    assert _threads.n_threads_for(21, 20) == 4
    assert _threads.n_threads_for(_threads.PARALLEL_MIN_ROWS - 1) == 1
    assert _threads.n_threads_for(_threads.PARALLEL_MIN_ROWS) == 4


def test_thread_limit_caps_the_calling_thread_only():
    import threading

    import numba

    full = n_threads_for(10**6)
    assert full == max(1, numba.config.NUMBA_NUM_THREADS)
    seen = {}
    with thread_limit(1):
        assert n_threads_for(10**6) == 1
        with thread_limit(3):
            assert n_threads_for(10**6) == min(full, 3)
        assert n_threads_for(10**6) == 1  # the outer limit is back
        other = threading.Thread(target=lambda: seen.update(other=n_threads_for(10**6)))
        other.start()
        other.join()
    assert seen["other"] == full  # another thread is not limited
    assert n_threads_for(10**6) == full
    for bad in (0, -1, None, 1.5, "2", True):
        with pytest.raises(ValueError, match=r"^n_threads must be an integer of at least 1; got"):
            with thread_limit(bad):
                pass


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_a_pool_of_its_own():
    bounds = np.array([0, 1, 2, 3])
    run_blocks(lambda a, b: a, bounds)  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            ok = run_blocks(lambda a, b: a, bounds) == [0, 1, 2]
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0


def test_the_thread_decision_does_not_launch_numbas_pool():
    """The kernels never run on numba's own thread pool, and launching it pins
    NUMBA_NUM_THREADS for the process (numba then refuses to compile if the variable has
    changed since, as it can in Dask worker processes). Checked in a fresh interpreter."""
    import subprocess
    import sys

    code = (
        "import numba\n"
        "from numba.np.ufunc import parallel\n"
        "from losses._threads import n_threads_for\n"
        "k = n_threads_for(10**6)\n"
        "assert k == numba.config.NUMBA_NUM_THREADS, k\n"
        "assert not parallel._is_initialized\n"
        "numba.set_num_threads(1)\n"  # once the pool is up, its setting rules
        "assert n_threads_for(10**6) == 1\n"
    )
    env = {**os.environ, "NUMBA_NUM_THREADS": "2"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr

"""The oracle's dense products against numpy, in float64 and float32, on one block of rows
and on several (the thread pool)."""

import numpy as np
import pytest

from bmrm.solver.products import BLOCK_ROWS, matvec, rmatvec


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    "n,d", [(0, 3), (1, 1), (5, 7), (BLOCK_ROWS - 1, 4), (BLOCK_ROWS, 4), (3 * BLOCK_ROWS + 5, 9)]
)
def test_products_match_numpy(force_threads, n, d, dtype, threads):
    rng = np.random.default_rng(n * 31 + d)
    X = rng.standard_normal((n, d)).astype(dtype)
    w = rng.standard_normal(d)
    g = rng.standard_normal(n)
    g[rng.random(n) < 0.3] = 0.0  # rows without gradient are skipped
    Xd = X.astype(np.float64)
    runs = force_threads(threads)
    f = np.full(n, np.nan)
    matvec(X, w, f)
    np.testing.assert_allclose(f, Xd @ w, rtol=1e-12, atol=1e-12 * np.sqrt(d))
    a = np.full(d, np.nan)
    rmatvec(X, g, a)
    np.testing.assert_allclose(a, g @ Xd, rtol=1e-12, atol=1e-12 * np.sqrt(max(n, 1)))
    # blocks of BLOCK_ROWS rows, shared out among the threads
    assert runs == [max(1, min(threads, -(-n // BLOCK_ROWS)))] * 2


@pytest.mark.parametrize("threads", [2, 3, 6])
def test_products_do_not_depend_on_the_thread_count(force_threads, threads):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5 * BLOCK_ROWS + 17, 13))
    w = rng.standard_normal(13)
    g = rng.standard_normal(X.shape[0])
    force_threads(1)
    serial_f, serial_a = np.empty(X.shape[0]), np.empty(13)
    matvec(X, w, serial_f)
    rmatvec(X, g, serial_a)
    runs = force_threads(threads)
    parallel_f, parallel_a = np.full(X.shape[0], np.nan), np.full(13, np.nan)
    matvec(X, w, parallel_f)
    rmatvec(X, g, parallel_a)
    assert runs == [threads] * 2  # 6 blocks of BLOCK_ROWS rows, shared out
    np.testing.assert_array_equal(parallel_f, serial_f)
    np.testing.assert_array_equal(parallel_a, serial_a)
    np.testing.assert_allclose(parallel_f, X @ w, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(parallel_a, g @ X, rtol=1e-12, atol=1e-11)

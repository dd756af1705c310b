"""The oracle's dense products against numpy, in float64 and float32, serial and parallel."""

import numba
import numpy as np
import pytest

from bmrm.solver.products import BLOCK_ROWS, matvec, rmatvec


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    "n,d", [(0, 3), (1, 1), (5, 7), (BLOCK_ROWS - 1, 4), (BLOCK_ROWS, 4), (3 * BLOCK_ROWS + 5, 9)]
)
def test_products_match_numpy(n, d, dtype):
    rng = np.random.default_rng(n * 31 + d)
    X = rng.standard_normal((n, d)).astype(dtype)
    w = rng.standard_normal(d)
    g = rng.standard_normal(n)
    g[rng.random(n) < 0.3] = 0.0  # rows without gradient are skipped
    Xd = X.astype(np.float64)
    f = np.empty(n)
    matvec(X, w, f)
    np.testing.assert_allclose(f, Xd @ w, rtol=1e-12, atol=1e-12 * np.sqrt(d))
    a = np.full(d, np.nan)
    rmatvec(X, g, a)
    np.testing.assert_allclose(a, g @ Xd, rtol=1e-12, atol=1e-12 * np.sqrt(max(n, 1)))


def test_rmatvec_does_not_depend_on_the_thread_count():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5 * BLOCK_ROWS + 17, 13))
    g = rng.standard_normal(X.shape[0])
    parallel = np.empty(13)
    rmatvec(X, g, parallel)
    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        serial = np.empty(13)
        rmatvec(X, g, serial)
    finally:
        numba.set_num_threads(previous)
    np.testing.assert_array_equal(parallel, serial)

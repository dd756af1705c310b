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


@pytest.mark.parametrize("layout", ["C", "F", "strided", "csr", "float32"])
def test_oracle_gives_the_same_risk_and_subgradient_for_every_layout(layout):
    """Layouts the numba products take (C-ordered float32/float64) and those left to numpy
    and scipy (Fortran order, strided views, CSR) agree with the risk of f = Xw computed
    by numpy in float64 and mapped back with Xᵀg."""
    import scipy.sparse as sp

    import losses
    from bmrm.solver.oracle import RiskOracle

    rng = np.random.default_rng(4)
    base = rng.standard_normal((3 * BLOCK_ROWS + 11, 14))
    y = rng.integers(0, 3, size=base.shape[0]).astype(float)
    qid = np.repeat(np.arange(base.shape[0] // 11 + 1), 11)[: base.shape[0]]
    X = {
        "C": base,
        "F": np.asfortranarray(base),
        "strided": np.repeat(base, 2, axis=1)[:, ::2],
        "csr": sp.csr_matrix(np.where(np.abs(base) > 1, base, 0.0)),
        "float32": base.astype(np.float32),
    }[layout]
    dense = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    w = rng.standard_normal(14)
    prepared = losses.prepare(losses.get("ordinal"), y, qid, n_samples=dense.shape[0])
    R, a = RiskOracle(X, prepared)(w)
    R_ref, g_ref = losses.risk("ordinal", dense @ w, y, qid)
    a_ref = dense.T @ g_ref
    rtol = 1e-5 if layout == "float32" else 1e-12
    assert R == pytest.approx(R_ref, rel=rtol)
    np.testing.assert_allclose(a, a_ref, rtol=rtol, atol=rtol * np.abs(a_ref).max())

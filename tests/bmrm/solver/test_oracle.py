"""The risk oracle on its own: R(w) and Xᵀg against numpy, for every X layout, intercept.

References: the squared and hinge risks and their subgradients written out in numpy from
their definitions (mean over rows of ½(f − y)² and max(0, 1 − y f)), and the ordinal risk
of ``losses.risk`` on f = Xw computed by numpy in float64.
"""

import numpy as np
import pytest
import scipy.sparse as sp

import losses
from bmrm.solver.oracle import RiskOracle
from bmrm.solver.products import BLOCK_ROWS


def oracle_for(X, y, loss, qid=None, **options):
    prepared = losses.prepare(losses.get(loss), y, qid, n_samples=X.shape[0])
    return RiskOracle(X, prepared, **options)


@pytest.mark.parametrize("layout", ["C", "F", "strided", "csr", "float32"])
def test_oracle_gives_the_same_risk_and_subgradient_for_every_layout(layout):
    """Layouts the numba products take (C-ordered float32/float64) and those left to numpy
    and scipy (Fortran order, strided views, CSR) agree with the risk of f = Xw computed
    by numpy in float64 and mapped back with Xᵀg."""
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
    R, a = oracle_for(X, y, "ordinal", qid)(w)
    R_ref, g_ref = losses.risk("ordinal", dense @ w, y, qid)
    a_ref = dense.T @ g_ref
    rtol = 1e-5 if layout == "float32" else 1e-12
    assert R == pytest.approx(R_ref, rel=rtol)
    np.testing.assert_allclose(a, a_ref, rtol=rtol, atol=rtol * np.abs(a_ref).max())


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_squared_and_hinge_risk_from_their_definitions(sparse, seed):
    rng = np.random.default_rng(seed)
    n, d = 57, 6
    dense = rng.normal(size=(n, d))
    X = sp.csr_matrix(dense) if sparse else dense
    w = rng.normal(size=d)
    f = dense @ w
    y = rng.normal(size=n)
    R, a = oracle_for(X, y, "squared")(w)
    assert R == pytest.approx(np.mean(0.5 * (f - y) ** 2), rel=1e-12)
    np.testing.assert_allclose(a, dense.T @ (f - y) / n, rtol=1e-10, atol=1e-12)
    labels = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    R, a = oracle_for(X, labels, "hinge")(w)
    margin = 1 - labels * f
    assert R == pytest.approx(np.mean(np.maximum(0, margin)), rel=1e-12)
    np.testing.assert_allclose(
        a, dense.T @ np.where(margin > 0, -labels, 0.0) / n, rtol=1e-10, atol=1e-12
    )


@pytest.mark.parametrize("scaling", [1.0, 0.5, 10.0])
def test_intercept_is_a_constant_feature(scaling):
    rng = np.random.default_rng(1)
    n, d = 40, 5
    X = rng.normal(size=(n, d))
    y = rng.normal(size=n)
    w = rng.normal(size=d + 1)
    oracle = oracle_for(X, y, "squared", fit_intercept=True, intercept_scaling=scaling)
    assert oracle.n_features == d + 1
    R, a = oracle(w)
    Z = np.hstack([X, np.full((n, 1), scaling)])
    f = Z @ w
    assert R == pytest.approx(np.mean(0.5 * (f - y) ** 2), rel=1e-12)
    np.testing.assert_allclose(a, Z.T @ (f - y) / n, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(oracle.scores(w), f, rtol=1e-12)


def test_rows_in_any_query_order():
    """Queries interleaved in the caller's order give the risk of the sorted rows."""
    rng = np.random.default_rng(2)
    n, d = 60, 4
    X = rng.normal(size=(n, d))
    y = rng.integers(0, 3, size=n)
    qid = rng.integers(0, 6, size=n)
    w = rng.normal(size=d)
    order = np.argsort(qid, kind="stable")
    R, a = oracle_for(X, y, "ordinal", qid)(w)
    R_sorted, a_sorted = oracle_for(X[order], y[order], "ordinal", qid[order])(w)
    assert R == pytest.approx(R_sorted, rel=1e-12)
    np.testing.assert_allclose(a, a_sorted, rtol=1e-10, atol=1e-12)
    assert 0 < R


class BadLoss:
    def __init__(self, value):
        self.value = value

    def validate(self, y, query_ptr):
        return query_ptr

    def loss_grad(self, f, query_ptr):
        return np.full(len(query_ptr) - 1, self.value), np.zeros_like(f)


@pytest.mark.parametrize(
    "value, error, match",
    [
        (np.inf, FloatingPointError, "non-finite value or gradient"),
        (np.nan, FloatingPointError, "non-finite value or gradient"),
        (-1.0, ValueError, "negative value"),
    ],
)
def test_bad_loss_values_are_reported(value, error, match):
    X = np.ones((4, 2))
    prepared = losses.prepare(BadLoss(value), np.zeros(4), None, n_samples=4)
    oracle = RiskOracle(X, prepared)
    with pytest.raises(error, match=match):
        oracle(np.zeros(2))
    with pytest.raises(error, match=match):
        losses.risk(BadLoss(value), np.zeros(4), np.zeros(4))


def test_calls_are_counted():
    X = np.ones((5, 2))
    oracle = oracle_for(X, np.arange(5.0), "squared")
    for _ in range(3):
        oracle(np.zeros(2))
    assert oracle.calls == 3

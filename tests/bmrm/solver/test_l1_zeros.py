"""L1 fits return exact zeros where the minimiser has them.

The L1 master problem is solved to an interior-point tolerance, and the in-out and
line-search methods step between iterates, so the bundle's best iterate holds residues of
1e-9 to 1e-5 in coordinates whose optimal value is 0. When the minimiser is w = 0 those
residues alone would set the ranking. The solver zeroes them where that does not raise the
objective (:meth:`bmrm.solver.regularizers.ElasticNet.clean`); these tests check the result
against the optimality condition of w = 0 and against cvxpy on the whole problem.
"""

import cvxpy as cp
import numpy as np
import pytest

import bmrm
import losses
from bmrm.solver.oracle import RiskOracle

METHODS = ["bmrm", "inout", "ls-bmrm", "ocas"]


def ranking_data(seed, n_queries=12, docs=6, d=8):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_queries * docs, d)) * rng.uniform(0.2, 3.0, size=d)
    w_true = np.where(rng.random(d) < 0.5, rng.normal(size=d), 0.0)
    y = np.clip(np.round(X @ w_true + rng.normal(size=len(X))), 0, 3)
    qid = np.repeat(np.arange(n_queries), docs)
    return X, y, qid


def squared_data(seed, n=60, d=10):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    w_true = np.zeros(d)
    w_true[:3] = [2.0, -1.5, 1.0]
    return X, X @ w_true + 0.3 * rng.normal(size=n)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("seed", range(3))
def test_w_zero_is_returned_exactly_when_it_is_the_minimiser(method, seed):
    """The ordinal risk is differentiable at w = 0 (every pair's hinge is active at tied
    scores), so w = 0 minimises lam·‖w‖₁ + R exactly when lam >= ‖∇R(0)‖∞."""
    X, y, qid = ranking_data(seed)
    oracle = RiskOracle(X, losses.prepare(losses.get("ordinal"), y, qid, n_samples=len(y)))
    r0, grad0 = oracle(np.zeros(X.shape[1]))
    lam = 1.2 * float(np.abs(grad0).max())
    model = bmrm.fit(X, y, "ordinal", qid, lam=lam, regularizer="l1", method=method, tol=1e-6)
    assert np.array_equal(model.coef_, np.zeros(X.shape[1]))
    assert model.result_.fun == pytest.approx(r0, rel=1e-12)
    assert model.result_.fun - model.result_.lower_bound <= 1e-6 * model.result_.fun


@pytest.mark.parametrize("method", METHODS)
def test_latent_ndcg_at_a_lam_that_zeroes_it_ranks_nothing(method):
    X, y, qid = ranking_data(7)
    model = bmrm.fit(X, y, "ndcg", qid, lam=50.0, regularizer="l1", method=method, tol=1e-6)
    assert np.array_equal(model.coef_, np.zeros(X.shape[1]))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("seed", range(4))
def test_support_matches_cvxpy_on_the_whole_problem(method, seed):
    """Coordinates that cvxpy's solution of min lam·‖w‖₁ + ½ mean (Xw − y)² puts below 1e-6
    are exactly 0 in the fit, the others are not, and the objective is certified."""
    X, y = squared_data(seed)
    n, d = X.shape
    lam = 0.2
    w = cp.Variable(d)
    problem = cp.Problem(cp.Minimize(lam * cp.norm1(w) + 0.5 * cp.sum_squares(X @ w - y) / n))
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    reference = w.value
    zero = np.abs(reference) < 1e-6
    assert 0 < zero.sum() < d  # a sparse minimiser, not a trivial one
    model = bmrm.fit(X, y, "squared", lam=lam, regularizer="l1", method=method, tol=1e-8)
    coef = model.coef_
    assert np.all(coef[zero] == 0.0)
    assert np.all(coef[~zero] != 0.0)
    np.testing.assert_allclose(coef, reference, atol=1e-3)
    assert model.result_.fun - problem.value <= model.result_.gap + 1e-9


def test_elastic_net_and_a_box_around_zero_keep_exact_zeros():
    X, y = squared_data(11)
    n = X.shape[0]
    for params in (
        {"regularizer": "elastic_net", "l1_ratio": 0.9},
        {"regularizer": "l1", "nonneg": True},
    ):
        model = bmrm.fit(X, y, "squared", lam=0.2, tol=1e-8, **params)
        w = cp.Variable(X.shape[1], nonneg=bool(params.get("nonneg")))
        r = params.get("l1_ratio", 1.0)
        omega = r * cp.norm1(w) + (1 - r) * 0.5 * cp.sum_squares(w)
        cp.Problem(cp.Minimize(0.2 * omega + 0.5 * cp.sum_squares(X @ w - y) / n)).solve(
            solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11
        )
        zero = np.abs(w.value) < 1e-6
        assert zero.any()
        assert np.all(model.coef_[zero] == 0.0), params
        assert np.all(model.coef_[~zero] != 0.0), params


def test_l2_fits_are_left_as_they_are():
    """No zeroing for L2: its minimiser has no exact zeros to recover, and the dedicated QP
    path must not pay extra oracle calls."""
    X, y = squared_data(3)
    model = bmrm.fit(X, y, "squared", lam=0.2, tol=1e-8, method="level")
    assert np.all(model.coef_ != 0.0)
    assert model.result_.nfev == model.result_.nit - model.result_.n_cache_cuts

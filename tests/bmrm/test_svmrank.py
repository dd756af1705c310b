"""lam = 1/C with the unnormalised pairwise loss reproduces SVM^rank's optimisation problem."""

import cvxpy as cp
import numpy as np
import pytest

import bmrm
import losses


def svmrank_optimum(X, y, qid, C):
    """min ½‖w‖² + C·(1/n_q)·Σ_q Σ_{y_i > y_j in q} max(0, 1 − (f_i − f_j)), by cvxpy."""
    w = cp.Variable(X.shape[1])
    f = X @ w
    hi, lo = np.nonzero((qid[:, None] == qid[None, :]) & (y[:, None] > y[None, :]))
    n_q = len(np.unique(qid))
    objective = 0.5 * cp.sum_squares(w) + C / n_q * cp.sum(cp.pos(1 - (f[hi] - f[lo])))
    problem = cp.Problem(cp.Minimize(objective))
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return problem.value, w.value


@pytest.mark.parametrize("C", [0.1, 1.0, 20.0])
@pytest.mark.parametrize("seed", range(3))
def test_lam_is_one_over_c(C, seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 9, size=6)
    qid = np.repeat(np.arange(6), sizes)
    X = rng.normal(size=(len(qid), 4))
    y = rng.integers(0, 3, size=len(qid))
    loss = losses.get("ordinal", normalize="none")
    model = bmrm.fit(X, y, loss, qid, lam=1 / C, tol=1e-7, max_iter=5000)
    res = model.result_
    J_svm, w_svm = svmrank_optimum(X, y, qid, C)
    # J_bmrm = J_svmrank / C, so the minimisers coincide
    assert res.fun * C == pytest.approx(J_svm, rel=1e-5, abs=1e-8)
    assert res.lower_bound * C <= J_svm + 1e-7
    radius = np.sqrt(2 * max(res.gap, 0.0) * C)  # J_bmrm is (1/C)-strongly convex
    assert np.linalg.norm(model.coef_ - w_svm) <= radius + 1e-5

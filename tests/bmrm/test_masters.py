"""The master problems on their own: QPMaster and CvxpyMaster against a direct cvxpy solve.

Reference: min_w lam·Ω(w) + max_i (<a_i, w> + b_i) over the domain of Ω, solved by cvxpy
as one problem with the planes as a max (no dual variables) and Ω written out in
tests/bmrm/test_regularizers.py. A master must return a lower bound at most that optimum
(valid whatever its accuracy) and close to it, a point of the domain whose master objective
is close to it, and weights on the simplex. Weak duality makes D(α) a lower bound at every
α of the simplex, which is checked at random α far from optimal.
"""

import cvxpy as cp
import numpy as np
import pytest

from bmrm.solver.bundle import Bundle
from bmrm.solver.masters import CvxpyMaster, QPMaster
from bmrm.solver.regularizers import L2
from tests.bmrm.test_regularizers import CASES, D, domain_constraints


def random_bundle(rng, k, scale):
    bundle = Bundle(D, capacity=k + 1)
    for _ in range(k):
        bundle.add(rng.normal(size=D) * scale, float(rng.normal()))
    return bundle


def direct_master(bundle, lam, omega, lower, upper):
    """The master optimum by one cvxpy solve."""
    k = bundle.size
    w = cp.Variable(D)
    model = cp.max(bundle.A[:k] @ w + bundle.b[:k])
    problem = cp.Problem(cp.Minimize(lam * omega(w) + model), domain_constraints(w, lower, upper))
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert problem.status == cp.OPTIMAL
    return problem.value


def master_objective(bundle, lam, omega, w):
    k = bundle.size
    return lam * omega(cp.Constant(w)).value + np.max(bundle.A[:k] @ w + bundle.b[:k])


def check_master(master, bundle, lam, case):
    reg, omega, _, lower, upper = CASES[case]
    optimum = direct_master(bundle, lam, omega, lower, upper)
    scale = max(1.0, abs(optimum))
    w, bound, alpha = master.solve(bundle)
    assert bound <= optimum + 1e-6 * scale
    assert bound >= optimum - 1e-5 * scale
    assert np.all(w >= np.broadcast_to(-np.inf if lower is None else lower, (D,)))
    assert np.all(w <= np.broadcast_to(np.inf if upper is None else upper, (D,)))
    assert master_objective(bundle, lam, omega, w) == pytest.approx(optimum, rel=1e-5, abs=1e-5)
    assert alpha.shape == (bundle.size,) and np.all(alpha >= 0)
    assert alpha.sum() == pytest.approx(1.0)
    return optimum


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("lam", [1e-2, 1.0])
def test_cvxpy_master_matches_the_direct_solve(case, seed, lam):
    reg = CASES[case][0]
    rng = np.random.default_rng(seed)
    # large planes make the L1 dual infinite at most α (scaling by the zero plane needed)
    bundle = random_bundle(rng, k=8, scale=3.0 if seed % 2 else 0.3)
    master = CvxpyMaster(D, bundle.capacity, lam, reg)
    optimum = check_master(master, bundle, lam, case)
    if reg.dual_term(np.zeros(D), lam) is None:
        return
    for _ in range(20):
        alpha = rng.dirichlet(np.full(bundle.size, 0.3))
        assert master.dual_value(alpha, bundle) <= optimum + 1e-9 * max(1.0, abs(optimum))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("lam", [1e-4, 1e-2, 1.0, 100.0])
def test_qp_master_matches_the_direct_solve(seed, lam):
    rng = np.random.default_rng(seed)
    bundle = random_bundle(rng, k=12, scale=3.0 if seed % 2 else 0.3)
    master = QPMaster(lam)
    check_master(master, bundle, lam, "l2")
    assert master.fallbacks == 0


def test_qp_master_warm_starts_along_a_growing_bundle():
    """Re-solving after each new plane (the solver loop's use) stays exact."""
    rng = np.random.default_rng(11)
    lam = 0.05
    bundle = Bundle(D, capacity=30)
    master = QPMaster(lam)
    for _ in range(25):
        bundle.add(rng.normal(size=D), float(rng.normal()))
        w, bound, alpha = master.solve(bundle)
        bundle.set_weights(alpha)
        optimum = direct_master(bundle, lam, CASES["l2"][1], None, None)
        assert bound == pytest.approx(optimum, rel=1e-7, abs=1e-9)
        assert bound <= optimum + 1e-9 * max(1.0, abs(optimum))
    assert master.fallbacks == 0


def test_masters_take_regularizer_names():
    assert CvxpyMaster(D, 4, 0.1, "l2").regularizer == L2()
    with pytest.raises(ValueError, match="regularizer must be one of"):
        CvxpyMaster(D, 4, 0.1, "l3")

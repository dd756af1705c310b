"""The master problems on their own: QPMaster, ClarabelMaster and CvxpyMaster against a direct
cvxpy solve.

Reference: min_w lam·Ω(w) + max_i (<a_i, w> + b_i) over the domain of Ω, solved by cvxpy
as one problem with the planes as a max (no dual variables) and Ω written out in
tests/bmrm/solver/test_regularizers.py. A master must return a lower bound at most that optimum
(valid whatever its accuracy) and close to it, a point of the domain whose master objective
is close to it, and weights on the simplex. Weak duality makes D(α) a lower bound at every
α of the simplex, which is checked at random α far from optimal.
"""

import cvxpy as cp
import numpy as np
import pytest

from bmrm.solver.bundle import Bundle
from bmrm.solver.masters import ClarabelMaster, CvxpyMaster, QPMaster, _l2_dual_bound
from bmrm.solver.regularizers import L2
from tests.bmrm.solver.test_regularizers import CASES, D, domain_constraints


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
@pytest.mark.parametrize("kind", ["qp", "clarabel"])
def test_l2_masters_match_the_direct_solve(seed, lam, kind):
    rng = np.random.default_rng(seed)
    bundle = random_bundle(rng, k=12, scale=3.0 if seed % 2 else 0.3)
    master = QPMaster(lam) if kind == "qp" else ClarabelMaster(lam)
    check_master(master, bundle, lam, "l2")
    if kind == "qp":
        assert master.fallbacks == 0
    else:
        assert not master.scaled and not master.rounding_limited


@pytest.mark.parametrize("seed", range(4))
def test_clarabel_master_bound_is_valid_on_planes_of_large_magnitude(seed):
    """Planes with entries up to 1e8–1e20 (features of large magnitude) and lam = 1e-2: the
    bound never exceeds the optimum, whether the problem is solved as it is or scaled, and
    where float64 can still resolve it, it is close."""
    rng = np.random.default_rng(seed)
    lam = 1e-2
    for exponent in (4, 8, 12, 16, 20):
        bundle = random_bundle(rng, k=12, scale=10.0**exponent)
        k = bundle.size
        w, bound, alpha = ClarabelMaster(lam).solve(bundle)
        assert np.all(alpha >= 0) and alpha.sum() == pytest.approx(1.0)
        assert np.all(np.isfinite(w))
        # weak duality in exact arithmetic: a bound of the master optimum
        assert bound <= exact_dual(alpha, bundle.A[:k], bundle.b[:k], lam), exponent
        # and no better than the master objective at any point
        primal = 0.5 * lam * w @ w + np.max(bundle.A[:k] @ w + bundle.b[:k])
        assert bound <= primal + 1e-9 * max(1.0, abs(primal))
        if exponent == 4:
            optimum = direct_master(bundle, lam, lambda w: 0.5 * cp.sum_squares(w), None, None)
            assert bound == pytest.approx(optimum, rel=1e-5, abs=1e-5)


def exact_dual(alpha, A, b, lam):
    """D(α / Σα) = bᵀα' − ‖Aᵀα'‖²/(2 lam) in exact rational arithmetic: by weak duality a
    lower bound on the master optimum for any α >= 0."""
    from fractions import Fraction

    a = [Fraction(x) for x in alpha]
    total = sum(a)
    a = [x / total for x in a]
    ab = sum(x * Fraction(y) for x, y in zip(a, b, strict=True))
    v = [sum(a[i] * Fraction(A[i, j]) for i in range(len(a))) for j in range(A.shape[1])]
    return ab - sum(x * x for x in v) / (2 * Fraction(lam))


@pytest.mark.parametrize("seed", range(40))
def test_l2_dual_bound_margin_covers_its_rounding(seed):
    """D − margin <= D(α / Σα) exactly <= D + margin, on planes whose weighted sum cancels
    (the hard case: Aᵀα near 0 from entries up to 1e16) and on random ones, from 2 to 30
    planes, with weights whose float64 sum is 1 only up to rounding."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 31))
    d = int(rng.integers(1, 8))
    scale = 10.0 ** rng.uniform(-3, 16)
    lam = 10.0 ** rng.uniform(-6, 2)
    A = rng.normal(size=(k, d)) * scale
    alpha = rng.dirichlet(np.full(k, 0.5))
    if seed % 2:
        # make Aᵀα cancel: shift the rows so that the weighted mean is (nearly) zero
        A -= alpha @ A
        A += rng.normal(size=(k, d)) * rng.choice([0.0, 1e-3, 1.0])
    b = rng.normal(size=k) * 10.0 ** rng.uniform(-2, 10)
    D_hat, margin = _l2_dual_bound(alpha, A, b, lam)
    exact = exact_dual(alpha, A, b, lam)
    assert margin >= 0.0
    assert D_hat - margin <= exact <= D_hat + margin


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

"""Regularizer objects against numpy values and cvxpy solves written out here.

Reference for the dual term: min_w lam·Ω(w) + <v, w> over the domain, solved by cvxpy with
Ω written in this file (tests/bmrm/solver/test_masters.py checks the master problems built on it).
"""

import re

import cvxpy as cp
import numpy as np
import pytest

import bmrm
from bmrm.solver.regularizers import (
    L1,
    L2,
    Box,
    Convex,
    ElasticNet,
    from_spec,
    make_regularizer,
)

D = 6
LOWER = np.array([-0.5, -np.inf, 0.0, -1.0, -0.2, -np.inf])
UPPER = np.array([0.4, 0.3, np.inf, 1.0, np.inf, np.inf])


def l1(w):
    return cp.norm1(w)


def l2(w):
    return 0.5 * cp.sum_squares(w)


def en(r):
    return lambda w: r * cp.norm1(w) + (1 - r) * 0.5 * cp.sum_squares(w)


def huber(w):
    return cp.sum(cp.huber(w, 0.5))


# (regularizer, Ω as a cvxpy expression written here, Ω in numpy, lower, upper)
CASES = {
    "l2": (L2(), l2, lambda w: 0.5 * w @ w, None, None),
    "l1": (L1(), l1, lambda w: np.abs(w).sum(), None, None),
    "elastic_net": (
        ElasticNet(0.3),
        en(0.3),
        lambda w: 0.3 * np.abs(w).sum() + 0.35 * w @ w,
        None,
        None,
    ),
    "box_l2": (Box(L2(), -0.3, 0.5), l2, lambda w: 0.5 * w @ w, -0.3, 0.5),
    "nonneg_l1": (Box(L1(), 0.0, None), l1, lambda w: np.abs(w).sum(), 0.0, None),
    "box_l1_mixed_sides": (Box(L1(), LOWER, UPPER), l1, lambda w: np.abs(w).sum(), LOWER, UPPER),
    "box_elastic_net": (
        Box(ElasticNet(0.8), LOWER, UPPER),
        en(0.8),
        lambda w: 0.8 * np.abs(w).sum() + 0.1 * w @ w,
        LOWER,
        UPPER,
    ),
    "convex": (Convex(huber), huber, None, None, None),
    "box_convex": (Box(Convex(huber), -0.3, None), huber, None, -0.3, None),
}


def domain_constraints(w, lower, upper):
    """lower <= w <= upper on the coordinates where the bound is finite."""
    constraints = []
    if lower is not None:
        lo = np.broadcast_to(lower, (D,))
        constraints.append(w[np.isfinite(lo)] >= lo[np.isfinite(lo)])
    if upper is not None:
        hi = np.broadcast_to(upper, (D,))
        constraints.append(w[np.isfinite(hi)] <= hi[np.isfinite(hi)])
    return constraints


@pytest.mark.parametrize("case", [c for c in CASES if CASES[c][2] is not None])
@pytest.mark.parametrize("lam", [0.1, 2.0])
def test_dual_term_is_the_minimum_over_the_domain(case, lam):
    reg, omega, _, lower, upper = CASES[case]
    rng = np.random.default_rng(7)
    for _ in range(5):
        v = rng.normal(size=D) * 3
        t = reg.dual_scale(v, lam)
        assert 0 < t <= 1
        w = cp.Variable(D)
        constraints = domain_constraints(w, lower, upper)
        problem = cp.Problem(cp.Minimize(lam * omega(w) + (t * v) @ w), constraints)
        problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
        assert problem.status == cp.OPTIMAL
        assert reg.dual_term(t * v, lam) == pytest.approx(problem.value, rel=1e-8, abs=1e-8)
        if t < 1:
            # any larger scale makes the minimum unbounded
            problem = cp.Problem(cp.Minimize(lam * omega(w) + (1.01 * t * v) @ w), constraints)
            problem.solve(solver=cp.CLARABEL)
            assert problem.status == cp.UNBOUNDED
            assert reg.dual_term(1.01 * t * v, lam) == -np.inf


@pytest.mark.parametrize("case", CASES)
def test_value_and_expression(case):
    reg, omega, value, lower, _ = CASES[case]
    w = np.random.default_rng(1).normal(size=D)
    w = reg.project(w)
    expected = omega(cp.Constant(w)).value
    assert reg.value(w) == pytest.approx(expected, rel=1e-12)
    if value is not None:
        assert reg.value(w) == pytest.approx(value(w), rel=1e-12)
    assert reg.expression(cp.Constant(w)).value == pytest.approx(expected, rel=1e-12)


def test_project_and_qp():
    w = np.array([-2.0, -0.1, 0.0, 0.2, 3.0, 1.0])
    np.testing.assert_array_equal(Box(L2(), -0.3, 0.5).project(w), np.clip(w, -0.3, 0.5))
    np.testing.assert_array_equal(Box(L1(), LOWER, UPPER).project(w), np.clip(w, LOWER, UPPER))
    np.testing.assert_array_equal(L1().project(w), w)
    assert L2().qp
    assert not any(r.qp for r in (L1(), ElasticNet(0.0), Box(L2(), 0.0), Convex(huber)))


@pytest.mark.parametrize("case", [c for c in CASES if "convex" not in c])
def test_spec_round_trip(case):
    reg = CASES[case][0]
    assert from_spec(reg.spec()) == reg


def test_spec_of_named_regularizers_and_errors():
    assert L2().spec() == "l2" and L1().spec() == "l1"
    assert ElasticNet(0.25).spec() == {"name": "elastic_net", "l1_ratio": 0.25}
    assert from_spec("elastic_net") == ElasticNet(None)
    with pytest.raises(ValueError, match="l1_ratio was not recorded"):
        ElasticNet(None).value(np.ones(2))
    with pytest.raises(ValueError, match="callable"):
        Convex(huber).spec()
    for spec in ["l3", None, 3, {"name": "l2", "extra": 1}, {"name": "box", "base": "l2"}]:
        with pytest.raises(ValueError, match="expected regularizer"):
            from_spec(spec)
    with pytest.raises(ValueError, match="malformed box"):
        from_spec({"name": "box", "base": "l2", "lower": ["x"], "upper": None})


def test_make_regularizer_from_the_public_arguments():
    assert make_regularizer("l2") == L2()
    assert make_regularizer("elastic_net", l1_ratio=0.4) == ElasticNet(0.4)
    assert make_regularizer("l1", nonneg=True) == Box(L1(), 0.0, None)
    assert make_regularizer("l2", bounds=(None, [1, 2]), n_features=2) == Box(L2(), None, [1, 2])
    assert isinstance(make_regularizer(huber), Convex)
    reg = ElasticNet(0.1)
    assert make_regularizer(reg) is reg
    cases = [
        (dict(regularizer="l3"), "regularizer must be one of"),
        (dict(regularizer=3), "regularizer must be one of"),
        (dict(regularizer="elastic_net", l1_ratio=2.0), "l1_ratio must lie in"),
        (dict(regularizer="elastic_net", l1_ratio="a"), "l1_ratio must be a number"),
        (dict(bounds=(1.0, -1.0)), "bounds lower must not exceed upper"),
        (dict(bounds=(np.zeros(3), None), n_features=2), "bounds lower must be a scalar"),
        (dict(bounds=(np.nan, None)), "bounds lower must not contain NaN"),
        (dict(bounds=("a", None)), "bounds lower must be a number"),
        (dict(bounds=1.0), "bounds must be a pair"),
        (dict(bounds=(0, 1), nonneg=True), "either nonneg=True or bounds"),
        (dict(regularizer=Box(L2(), 0.0), nonneg=True), "either in the Box"),
    ]
    for kwargs, match in cases:
        with pytest.raises(ValueError, match=match):
            make_regularizer(**kwargs)


@pytest.mark.parametrize(
    "bounds, message",
    [
        (
            (np.inf, None),
            "bounds lower must not contain +inf: no weight is >= +inf, so the box would be "
            "empty (None or -inf leaves a side open)",
        ),
        (
            (None, -np.inf),
            "bounds upper must not contain -inf: no weight is <= -inf, so the box would be "
            "empty (None or +inf leaves a side open)",
        ),
        ((np.inf, np.inf), "bounds lower must not contain +inf"),
        ((-np.inf, -np.inf), "bounds upper must not contain -inf"),
        ((np.where(LOWER == 0.0, np.inf, LOWER), None), "bounds lower must not contain +inf"),
        ((None, np.where(UPPER == 0.3, -np.inf, UPPER)), "bounds upper must not contain -inf"),
    ],
)
def test_a_side_at_the_far_infinity_is_an_empty_box(bounds, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make_regularizer("l2", bounds=bounds, n_features=D)


def test_sides_at_the_near_infinity_are_open():
    reg = make_regularizer("l2", bounds=(LOWER, UPPER), n_features=D)
    assert reg == Box(L2(), LOWER, UPPER)
    w = np.array([-9.0, -9.0, 9.0, 9.0, 9.0, 9.0])
    np.testing.assert_array_equal(reg.project(w), [-0.5, -9.0, 9.0, 1.0, 9.0, 9.0])
    assert make_regularizer("l1", bounds=(-np.inf, np.inf)) == Box(L1(), -np.inf, np.inf)


@pytest.mark.parametrize(
    ("lower", "upper", "message"),
    [
        (np.inf, None, "its lower must not contain +inf: no weight is >= +inf"),
        (None, np.where(UPPER == 0.3, -np.inf, UPPER), "its upper must not contain -inf"),
        (1.0, 0.0, "its lower must not exceed upper"),
        (np.zeros(D - 1), None, f"its lower must be a scalar or have one entry per weight ({D})"),
        (None, np.full(D, np.nan), "its upper must not contain NaN"),
    ],
)
def test_a_box_given_as_an_object_gets_the_bounds_checks(lower, upper, message):
    box = Box(L2(), lower, upper)
    with pytest.raises(ValueError) as info:
        make_regularizer(box, n_features=D)
    assert str(info.value).startswith(f"regularizer {box!r}: {message}"), str(info.value)


def test_a_box_given_as_an_object_needs_a_regularizer_base():
    message = "a box regularizer's base must be a Regularizer; got 'l2'"
    with pytest.raises(ValueError, match=re.escape(message)):
        make_regularizer(Box("l2", 0.0), n_features=D)
    assert make_regularizer(Box(L1(), LOWER, UPPER), n_features=D) == Box(L1(), LOWER, UPPER)


def _sum(w):
    return cp.sum(w)


@pytest.mark.parametrize(
    ("function", "message"),
    [
        (
            lambda w: cp.abs(w),
            "must return a scalar cvxpy expression; got shape (6,) (sum or norm it, for "
            "example cp.norm1(w) rather than cp.abs(w))",
        ),
        (
            lambda w: None,
            "must return a convex scalar cvxpy expression of its argument; got NoneType None",
        ),
        (
            lambda w: 2.0,
            "must return a convex scalar cvxpy expression of its argument; got float 2.0",
        ),
        (lambda w: -cp.sum_squares(w), "convex by cvxpy's DCP rules; got -"),
        (
            lambda w: w.no_such_attribute,
            "raised AttributeError ('Variable' object has no attribute 'no_such_attribute') "
            "when called on a cvxpy Variable of shape (6,)",
        ),
    ],
)
def test_a_callable_regularizer_is_probed_before_any_work(function, message):
    with pytest.raises(ValueError) as info:
        make_regularizer(function, n_features=D)
    text = str(info.value)
    assert text.startswith("regularizer <lambda> (a callable) "), text
    assert message in text, text
    # the same through bmrm.fit, before the loss sees the data
    X = np.random.default_rng(0).normal(size=(12, D - 1))
    with pytest.raises(ValueError) as info:
        bmrm.fit(X, X[:, 0], "squared", regularizer=function)
    assert message.replace("(6,)", f"({D - 1},)") in str(info.value)


def test_a_callable_regularizer_unbounded_below_is_named():
    X = np.random.default_rng(1).normal(size=(12, 3))
    with pytest.raises(RuntimeError, match=r"the cvxpy master problem is unbounded: .*Convex\("):
        bmrm.fit(X, X[:, 0], "squared", regularizer=_sum, fit_intercept=False)
    # bounded below by its box, the same linear regularizer fits
    model = bmrm.fit(
        X, X[:, 0], "squared", regularizer=_sum, bounds=(-1.0, 1.0), fit_intercept=False
    )
    assert model.result_.status == 0
    np.testing.assert_array_less(np.abs(model.coef_), 1.0 + 1e-6)

"""The non-convex regularized bundle method (NRBM): a known non-convex problem, convex
problems against cvxpy, non-convex losses and scorers through bmrm.fit, and bad input."""

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize

import bmrm
import losses
from bmrm.scorers import LinearScorer
from bmrm.solver.loop import minimize_bmrm
from bmrm.solver.methods import get_method
from bmrm.solver.methods.nrbm import NRBM, STATIONARY
from bmrm.solver.oracle import RiskOracle
from bmrm.solver.scorer_oracle import ScorerOracle
from tests.bmrm.solver.test_solver import direct_optimum, make_problem, objective
from tests.bmrm.test_scorers import ranking_data

LAM = 0.5


def two_wells(w):
    """R(w) = Σ_j min((w_j − 1)², (w_j + 1)² + ½): non-negative, not convex, not smooth
    where the two parabolas cross (w_j = −1/8). With lam/2 w_j² added, each coordinate has
    exactly two local minima, 2/(2 + lam) (global) and −2/(2 + lam) (½ higher)."""
    q1, q2 = (w - 1.0) ** 2, (w + 1.0) ** 2 + 0.5
    return float(np.minimum(q1, q2).sum()), np.where(q1 <= q2, 2 * (w - 1.0), 2 * (w + 1.0))


def two_wells_J(w):
    return LAM / 2 * float(w @ w) + two_wells(w)[0]


MINIMA = (2 / (2 + LAM), -2 / (2 + LAM))


@pytest.mark.parametrize("smooth", [True, False])
@pytest.mark.parametrize("seed", range(12))
def test_two_wells_ends_at_a_local_minimum_with_serious_steps_decreasing(seed, smooth):
    """Both minima lie where R is differentiable, so ``smooth=True`` (the gradient term
    always in the stopping rule) is honest here; ``smooth=False`` may also stop on the
    model gap rebuilt after a restart."""
    rng = np.random.default_rng(seed)
    w0 = rng.uniform(-3, 3, size=3)
    tol = 1e-9
    method = NRBM(smooth=smooth)
    res = minimize_bmrm(two_wells, 3, LAM, w0=w0, method=method, tol=tol, max_iter=500)
    assert res.status == STATIONARY and res.success
    assert "not a certified global optimum" in res.message
    x = res.x
    # every coordinate at one of the two known local minima
    dist = np.minimum(np.abs(x - MINIMA[0]), np.abs(x - MINIMA[1]))
    assert dist.max() <= 1e-4
    assert res.fun == pytest.approx(two_wells_J(x), rel=1e-12)
    # J strictly decreases along the serious steps and never rises above the start
    serious = res.serious_objective
    assert serious[0] == pytest.approx(two_wells_J(w0), rel=1e-12)
    assert np.all(np.diff(serious) < 0)
    assert serious[-1] == res.fun
    np.testing.assert_array_equal(
        res.history["best_objective"], np.minimum.accumulate(res.history["objective"])
    )
    # the stationarity certificate: ‖lam x + ∇R(x)‖² / (2 lam) <= tol·J(x)
    grad = LAM * x + two_wells(x)[1]
    assert res.stationarity == pytest.approx(np.linalg.norm(grad), rel=1e-9, abs=1e-12)
    if smooth:
        assert np.linalg.norm(grad) ** 2 / (2 * LAM) <= tol * res.fun * (1 + 1e-9)
    # no global certificate: no lower bound, the stationarity gap as gap, the model gap
    # under its own name
    assert np.isnan(res.lower_bound) and res.gap == res.stationarity_gap
    assert res.gap <= tol * res.fun
    assert 0 <= res.model_gap <= tol * res.fun
    # a local minimum: nothing lower on a fine grid around x, and scipy does not go lower
    for j in range(3):
        for step in np.linspace(-0.05, 0.05, 101):
            e = np.zeros(3)
            e[j] = step
            assert two_wells_J(x + e) >= res.fun - 1e-12
    ref = minimize(two_wells_J, x, method="Nelder-Mead", options={"xatol": 1e-10})
    assert ref.fun >= res.fun - 1e-9


def test_planes_conflicting_with_the_serious_point_are_lowered():
    """Planes taken in one well over-estimate R at a serious point in the other and must be
    lowered; after every master solve the model lies at or below R at the serious point.
    This start ends at the upper local minimum of both coordinates: stationary, not global."""
    w0 = np.array([-1.0, -0.5])
    seen = []

    class Watch(NRBM):
        def _solve(self, state):
            super()._solve(state)
            k = state.bundle.size
            model = np.max(state.bundle.A[:k] @ state.w_b + state.bundle.b[:k])
            seen.append(model - state.R_b)

    res = minimize_bmrm(two_wells, 2, LAM, w0=w0, method=Watch(), tol=1e-9, max_iter=500)
    assert res.status == STATIONARY
    assert res.n_lowered >= 2 and res.n_backtracks >= 1
    assert max(seen) <= 1e-9 * (1 + res.fun)
    assert np.abs(res.x - MINIMA[1]).max() <= 1e-4
    assert res.fun > two_wells_J(np.full(2, MINIMA[0])) + 0.9


@pytest.mark.parametrize("loss", ["squared", "hinge", "logistic"])
@pytest.mark.parametrize("seed", range(3))
def test_convex_losses_reach_the_direct_optimum(loss, seed):
    X, y = make_problem(seed, loss)
    lam = [1e-3, 1e-2, 1e-1][seed]
    J_star, _ = direct_optimum(X, y, loss, lam, "l2")
    # through fit: declared convex, so certified like the other methods
    res = bmrm.fit(X, y, loss, lam=lam, tol=1e-6, max_iter=3000, method="nrbm").result_
    assert res.success and res.status in (0, 1) and res.certified
    J = objective(X, y, loss, lam, "l2", res.x)
    assert J == pytest.approx(res.fun, rel=1e-10, abs=1e-12)
    assert J - J_star <= res.gap + 1e-8
    assert res.lower_bound <= J_star + 1e-7
    assert res.n_lowered == 0
    # as a non-convex method (nothing declared): the same optimum, a stationary point
    from bmrm.solver.oracle import RiskOracle

    oracle = RiskOracle(X, losses.prepare(loss, y, None))
    free = minimize_bmrm(oracle, X.shape[1], lam, method="nrbm", tol=1e-8, max_iter=3000)
    assert free.status == STATIONARY
    assert free.fun == pytest.approx(J_star, rel=1e-5, abs=1e-9)


def test_expected_gain_scorer_by_nrbm_is_a_stationary_point():
    X, y, qid = ranking_data()
    lam, tol = 1e-2, 1e-4
    model = bmrm.fit(X, y, "listnet", qid, lam=lam, ranking_function="expected_gain",
                     method="nrbm", tol=tol, max_iter=3000)  # fmt: skip
    res = model.result_
    assert res.method == "nrbm" and res.status == STATIONARY
    oracle = ScorerOracle(X, losses.prepare("listnet", y, qid), model.scorer_)
    R, a = oracle(res.x)
    assert res.fun == pytest.approx(lam / 2 * res.x @ res.x + R, rel=1e-12)
    grad = lam * res.x + a
    assert res.stationarity == pytest.approx(np.linalg.norm(grad), rel=1e-9)
    assert np.linalg.norm(grad) ** 2 / (2 * lam) <= tol * res.fun * (1 + 1e-9)
    theta0 = model.scorer_.from_linear(res.linear_start)
    assert res.fun0 == pytest.approx(lam / 2 * theta0 @ theta0 + oracle(theta0)[0], rel=1e-12)
    assert res.fun < res.fun0
    assert np.all(np.diff(res.serious_objective) < 0)
    # L-BFGS (the automatic choice for this smooth objective) reaches a close value
    lbfgs = bmrm.fit(X, y, "listnet", qid, lam=lam, ranking_function="expected_gain", tol=1e-8)
    assert lbfgs.result_.method == "lbfgs"
    assert res.fun == pytest.approx(lbfgs.result_.fun, rel=1e-3)


def test_warp_trains_and_lowers_the_objective_from_the_warm_start():
    X, y, qid = ranking_data(seed=5)
    lam = 1e-2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bmrm.ConvergenceWarning)
        model = bmrm.fit(X, y, "warp", qid, lam=lam, tol=1e-4, max_iter=200)
    res = model.result_
    assert res.method == "nrbm"  # the automatic choice for a non-smooth non-convex loss
    assert res.status in (2, STATIONARY) and not res.certified

    def J(w):
        return lam / 2 * w @ w + losses.risk("warp", X @ w, y, qid)[0]

    assert res.fun == pytest.approx(J(model.coef_), rel=1e-12)
    assert res.fun0 == pytest.approx(J(res.linear_start), rel=1e-12)
    assert res.fun < 0.9 * res.fun0
    assert np.all(np.diff(res.serious_objective) < 0)
    assert res.serious_objective[0] == pytest.approx(res.fun0, rel=1e-12)


def test_latent_ndcg_by_nrbm_instead_of_cccp():
    X, y, qid = ranking_data(seed=6)
    lam = 1e-2
    cccp = bmrm.fit(X, y, "ndcg", qid, lam=lam, tol=1e-4).result_
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bmrm.ConvergenceWarning)
        res = bmrm.fit(X, y, "ndcg", qid, lam=lam, tol=1e-4, method="nrbm", max_iter=400).result_
    assert res.method == "nrbm" and not res.certified
    J = lam / 2 * res.x @ res.x + losses.risk("ndcg", X @ res.x, y, qid)[0]
    assert res.fun == pytest.approx(J, rel=1e-12)
    # it starts where CCCP starts and never goes up; it ends near CCCP's value
    assert res.serious_objective[0] == pytest.approx(cccp.outer_objective[0], rel=1e-9)
    assert np.all(np.diff(res.serious_objective) < 0)
    assert res.fun <= cccp.fun * (1 + 1e-2)
    # the oracle calls of the starting problem count, as CCCP counts them: the count
    # after NRBM's first iteration exceeds the starting problem's own
    prepared = losses.prepare(losses.get("ndcg"), y, qid)
    start = minimize_bmrm(RiskOracle(X, prepared).initial(), X.shape[1], lam, tol=1e-4)
    assert res.history["nfev"][0] > start.nfev
    assert res.nfev == res.history["nfev"][-1]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"loss": "warp", "method": "bmrm"}, ValueError, "certifies convex objectives only"),
        ({"loss": "warp", "method": "ocas"}, ValueError, "certifies convex objectives only"),
        ({"loss": "warp", "method": "lbfgs"}, ValueError, "is not smooth"),
        ({"loss": "listnet", "ranking_function": "expected_gain", "method": "ls-bmrm"}, ValueError,
         "certifies convex objectives only"),
        ({"loss": "warp", "regularizer": "l1"}, ValueError, "regularizer='l1' is not supported"),
        ({"loss": "squared", "method": "nrbm", "regularizer": "l1"}, ValueError,
         "method='nrbm' supports regularizer='l2' without bounds only"),
        ({"loss": "squared", "method": "nrbm", "nonneg": True}, ValueError,
         "method='nrbm' supports regularizer='l2' without bounds only"),
        ({"loss": "cosine", "method": "nrbm"}, ValueError, "scale invariant"),
    ],
)  # fmt: skip
def test_bad_input_is_refused_before_any_work(kwargs, error, match):
    X, y, qid = ranking_data()
    with pytest.raises(error, match=match):
        bmrm.fit(X, y, qid=qid, **kwargs)


def test_bad_method_parameters_and_regularizers():
    with pytest.raises(ValueError, match="convex must be a bool"):
        NRBM(convex="yes")
    with pytest.raises(ValueError, match="smooth must be a bool"):
        NRBM(smooth=1)
    with pytest.raises(ValueError, match="max_backtracks must be an integer >= 0"):
        NRBM(max_backtracks=-1)
    assert isinstance(get_method("nrbm"), NRBM)
    with pytest.raises(ValueError, match="'nrbm'"):
        get_method("nrbm2")
    with pytest.raises(ValueError, match="regularizer='l2' without bounds only"):
        minimize_bmrm(two_wells, 2, LAM, method="nrbm", regularizer="l1")
    with pytest.raises(ValueError, match="regularizer='l2' without bounds only"):
        minimize_bmrm(two_wells, 2, LAM, method="nrbm", lower=0.0)


def test_linear_scorer_object_with_nrbm_matches_the_linear_oracle():
    """A non-convex loss with the linear scorer goes through the linear risk oracle."""
    X, y, qid = ranking_data(seed=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bmrm.ConvergenceWarning)
        a = bmrm.fit(X, y, "warp", qid, lam=1e-2, method="nrbm", max_iter=30)
        b = bmrm.fit(
            X,
            y,
            "warp",
            qid,
            lam=1e-2,
            method="nrbm",
            max_iter=30,
            ranking_function=LinearScorer(),
        )
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.scorer_ is None

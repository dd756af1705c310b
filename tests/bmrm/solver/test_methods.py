"""Solver methods (bmrm, inout, level, ls-bmrm, ocas) against the whole problem solved directly
by cvxpy."""

import re
import warnings

import cvxpy as cp
import numpy as np
import pytest

import bmrm
import losses
from bmrm.solver.bundle import Bundle
from bmrm.solver.cut_cache import CutCache
from bmrm.solver.methods import (
    METHODS,
    OCAS,
    BundleState,
    InOut,
    LineSearchBMRM,
    PlainBMRM,
    get_method,
)
from bmrm.solver.methods.level import LevelBundle, LevelState
from bmrm.solver.methods.line_search import line_search, segment
from bmrm.solver.oracle import RiskOracle
from bmrm.solver.problem import Problem
from bmrm.solver.regularizers import L2
from tests.bmrm.solver.test_solver import direct_optimum, make_problem, objective

METHOD_NAMES = sorted(METHODS)
# the bundle methods, which take any convex risk; Newton-CG needs a smooth one with Hessian
# products (its refusal of the others is asserted below, its fits in test_newton.py)
BUNDLE_NAMES = [m for m in METHOD_NAMES if m != "newton"]
NEWTON_REFUSES = "method='newton' needs a risk that is smooth"
# the methods that take a per-query cut cache, with it (a cap loose enough for tiny data)
CACHED_METHODS = {
    "bmrm+cache": PlainBMRM,
    "level+cache": LevelBundle,
    "ocas+cache": OCAS,
    "ls-bmrm+cache": LineSearchBMRM,
}


def cached_method(name):
    return CACHED_METHODS[name](cut_cache=CutCache(max_fraction=100.0))


def ranking_problem(seed, n_queries=6, docs=5, d=4):
    rng = np.random.default_rng(seed)
    n = n_queries * docs
    X = rng.normal(size=(n, d)) * rng.uniform(0.3, 2.0, size=d)
    y = rng.integers(0, 3, size=n)
    y[:docs] = 1  # an all-equal-label query
    qid = np.repeat(np.arange(n_queries), docs)
    perm = rng.permutation(n)  # queries not contiguous in the caller's order
    return X[perm], y[perm], qid[perm]


def ordinal_direct(X, y, qid, lam):
    """min lam/2 ‖w‖² + (1/n_q) Σ_q Σ_{y_i > y_j} max(0, 1 − (f_i − f_j)) by cvxpy."""
    d = X.shape[1]
    rows_i, rows_j = [], []
    for q in np.unique(qid):
        rows = np.flatnonzero(qid == q)
        for i in rows:
            for j in rows:
                if y[i] > y[j]:
                    rows_i.append(i)
                    rows_j.append(j)
    D = X[rows_i] - X[rows_j]
    w = cp.Variable(d)
    risk = cp.sum(cp.pos(1 - D @ w)) / len(np.unique(qid))
    prob = cp.Problem(cp.Minimize(lam / 2 * cp.sum_squares(w) + risk))
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return prob.value, D, len(np.unique(qid))


@pytest.mark.parametrize("method", METHOD_NAMES)
@pytest.mark.parametrize("loss", ["squared", "hinge", "logistic"])
@pytest.mark.parametrize("seed", range(4))
def test_pointwise_losses_reach_the_direct_optimum(method, loss, seed):
    X, y = make_problem(seed, loss)
    lam = [1e-3, 1e-2, 1e-1, 1.0][seed]
    tol = 1e-5
    if method == "newton" and loss == "hinge":
        with pytest.raises(ValueError, match=re.escape(NEWTON_REFUSES)):
            bmrm.fit(X, y, loss, lam=lam, method=method)
        return
    res = bmrm.fit(X, y, loss, lam=lam, tol=tol, max_iter=3000, method=method).result_
    assert res.success, res.message
    J_star, _ = direct_optimum(X, y, loss, lam, "l2")
    J = objective(X, y, loss, lam, "l2", res.x)
    assert J == pytest.approx(res.fun, rel=1e-10, abs=1e-12)
    # the reported gap bounds the true suboptimality (to the reference's accuracy)
    assert J - J_star <= res.gap + 1e-8
    assert res.gap <= tol * abs(res.fun)
    assert res.lower_bound <= J_star + 1e-7
    hist = res.history
    assert len(hist["gap"]) == res.nit
    assert np.all(np.diff(hist["lower_bound"]) >= 0)
    assert np.all(np.diff(hist["best_objective"]) <= 0)
    np.testing.assert_array_equal(hist["best_objective"], np.minimum.accumulate(hist["objective"]))
    assert hist["nfev"][-1] == res.nfev


@pytest.mark.parametrize("method", METHOD_NAMES)
@pytest.mark.parametrize("seed", range(3))
def test_ordinal_loss_reaches_the_direct_optimum(method, seed):
    X, y, qid = ranking_problem(seed)
    lam = [1e-3, 1e-1, 1.0][seed]
    loss = losses.get("ordinal", normalize="none")
    if method == "newton":
        with pytest.raises(ValueError, match=re.escape(NEWTON_REFUSES)):
            bmrm.fit(X, y, loss, qid, lam=lam, method=method)
        return
    res = bmrm.fit(X, y, loss, qid, lam=lam, tol=1e-6, max_iter=3000, method=method).result_
    assert res.success, res.message
    J_star, D, n_q = ordinal_direct(X, y, qid, lam)
    J = lam / 2 * res.x @ res.x + np.maximum(0, 1 - D @ res.x).sum() / n_q
    assert J == pytest.approx(res.fun, rel=1e-10)
    assert J - J_star <= res.gap + 1e-8
    assert res.lower_bound <= J_star + 1e-7


@pytest.mark.parametrize("method", ["ocas", "ls-bmrm"])
def test_line_search_methods_count_every_evaluation(method):
    X, y = make_problem(2, "hinge", n=200, d=10)
    res = bmrm.fit(X, y, "hinge", lam=1e-4, tol=1e-6, max_iter=3000, method=method).result_
    assert res.success
    # one oracle call plus at least one loss evaluation per iteration after the first
    assert res.nfev > res.nit
    # a product X w_c and Xᵀg per iteration, two passes for the first
    assert res.n_passes == 2 * res.nit


def test_line_search_needs_fewer_iterations_than_plain_bmrm_at_small_lam():
    X, y = make_problem(4, "hinge", n=400, d=20)
    its = {}
    for method in ("bmrm", "ocas"):
        res = bmrm.fit(X, y, "hinge", lam=1e-5, tol=1e-4, max_iter=5000, method=method).result_
        assert res.success
        its[method] = res.nit
    assert its["ocas"] < its["bmrm"]


@pytest.mark.parametrize("method", ["ocas", "ls-bmrm", "inout", "level"])
def test_callable_oracle_without_scores(method):
    """A plain callable oracle: the line search calls it (and keeps its planes)."""
    X, y = make_problem(6, "squared")
    lam = 1e-2
    n = len(y)

    def oracle(w):
        r = X @ w - y
        return 0.5 * float(r @ r) / n, X.T @ r / n

    res = bmrm.minimize_bmrm(oracle, X.shape[1], lam, tol=1e-7, method=method)
    assert res.success
    J_star, _ = direct_optimum(X, y, "squared", lam, "l2")
    assert res.fun - J_star <= res.gap + 1e-9
    assert res.n_passes == 2 * res.nfev


@pytest.mark.parametrize("method", ["ocas", "ls-bmrm", "inout"])
def test_bounds_and_l1_with_line_search(method):
    X, y = make_problem(3, "squared", n=50, d=5)
    lam = 1e-2
    res = bmrm.fit(X, y, "squared", lam=lam, bounds=(-0.3, 0.5), tol=1e-6, method=method)
    r = res.result_
    assert r.success
    assert np.all(r.x >= -0.3 - 1e-9) and np.all(r.x <= 0.5 + 1e-9)
    J_star, _ = direct_optimum(X, y, "squared", lam, "l2", lower=-0.3, upper=0.5)
    assert r.fun - J_star <= r.gap + 1e-7
    res = bmrm.fit(X, y, "squared", lam=lam, regularizer="l1", tol=1e-6, method=method)
    J_star, _ = direct_optimum(X, y, "squared", lam, "l1")
    assert res.result_.fun - J_star <= res.result_.gap + 1e-7


def test_a_method_object_following_the_protocol():
    class Recorder(PlainBMRM):
        def __init__(self):
            self.seen = []

        def step(self, state: BundleState) -> None:
            super().step(state)
            self.seen.append((state.nit, state.nfev, state.lower_bound))

    X, y = make_problem(1, "hinge")
    rec = Recorder()
    res = bmrm.fit(X, y, "hinge", lam=1e-2, tol=1e-6, method=rec).result_
    assert [s[0] for s in rec.seen] == list(range(1, res.nit + 1))
    assert [s[1] for s in rec.seen] == list(range(1, res.nit + 1))
    np.testing.assert_array_equal([s[2] for s in rec.seen], res.history["lower_bound"])


def test_unknown_method_is_rejected():
    X, y = make_problem(1, "hinge")
    with pytest.raises(ValueError, match="method must be one of"):
        bmrm.fit(X, y, "hinge", method="newton-raphson")
    with pytest.raises(TypeError, match="step"):
        bmrm.fit(X, y, "hinge", method=object())


@pytest.mark.parametrize("cls", [PlainBMRM, OCAS, LineSearchBMRM, InOut, LevelBundle])
def test_a_method_class_asks_for_an_instance(cls):
    """The class's step is a function of (self, state): the loop called it with the state
    alone ("missing 1 required positional argument")."""
    X, y = make_problem(1, "hinge")
    message = re.escape(
        "method must be a method name or an object with a step(state) method; got the "
        f"class {cls.__name__} itself: pass an instance, e.g. {cls.__name__}()"
    )
    with pytest.raises(TypeError, match=message):
        bmrm.fit(X, y, "hinge", method=cls)
    with pytest.raises(TypeError, match=message):
        get_method(cls)
    with pytest.raises(TypeError, match=message):
        bmrm.path(X, y, "hinge", lams=[0.1], method=cls)


@pytest.mark.parametrize("method", [None, "auto", *BUNDLE_NAMES, "nrbm"])
@pytest.mark.parametrize("loss", ["ordinal", "ndcg"])
def test_result_names_its_method_and_the_model_file_keeps_it(method, loss, tmp_path):
    X, y, qid = ranking_problem(4, n_queries=8, docs=5, d=3)
    model = bmrm.fit(X, y, loss, qid, lam=0.1, method=method)
    expected = "level" if method in (None, "auto") else method
    assert model.result_.method == expected
    model.save(tmp_path / "m.json")
    assert bmrm.load(tmp_path / "m.json").result_.method == expected
    if method is None:
        paths = bmrm.path(X, y, loss, qid, lams=[1.0, 0.1])
        assert [m.result_.method for m in paths] == ["level", "level"]


@pytest.mark.parametrize(
    ("fit_params", "expected"),
    [
        ({}, "level"),
        ({"regularizer": "l1"}, "inout"),
        ({"regularizer": "l1", "nonneg": True}, "bmrm"),
        ({"regularizer": "elastic_net"}, "bmrm"),
        ({"regularizer": "l2", "bounds": (-1.0, 1.0)}, "bmrm"),
    ],
)
@pytest.mark.parametrize("loss", ["ordinal", "ndcg"])
def test_auto_method_follows_the_regularizer(fit_params, expected, loss):
    """The method "auto" is the level bundle method for L2, in-out cutting planes for L1 without
    bounds, plain BMRM for the other regularizers: in a fit, in the concave-convex
    procedure's subproblems (ndcg) and along a path; every one reaches the same certified
    objective as plain BMRM within the tolerance."""
    X, y, qid = ranking_problem(5, n_queries=8, docs=5, d=3)
    model = bmrm.fit(X, y, loss, qid, lam=0.05, tol=1e-6, **fit_params)
    assert model.result_.method == expected
    plain = bmrm.fit(X, y, loss, qid, lam=0.05, tol=1e-6, method="bmrm", **fit_params)
    if loss == "ordinal":  # convex: both certified to tol·J of the one minimum
        assert model.result_.fun == pytest.approx(plain.result_.fun, rel=2e-6)
        assert model.result_.fun >= plain.result_.lower_bound - 1e-12
    paths = bmrm.path(X, y, loss, qid, lams=[0.5, 0.05], tol=1e-6, **fit_params)
    assert [m.result_.method for m in paths] == [expected, expected]
    assert auto_of(fit_params) == expected


def auto_of(fit_params) -> str:
    from bmrm.solver.methods import auto_method
    from bmrm.solver.regularizers import make_regularizer

    regularizer = make_regularizer(
        fit_params.get("regularizer", "l2"),
        bounds=fit_params.get("bounds"),
        nonneg=fit_params.get("nonneg", False),
    )
    return auto_method(regularizer)


@pytest.mark.parametrize("loss", ["hinge", "ndcg"])
def test_lbfgs_on_a_bundle_fit_says_what_it_is_for(loss):
    """L-BFGS is a method name for non-convex smooth fits; elsewhere the error says so and
    lists the methods that apply, "auto" included."""
    X, y, qid = ranking_problem(2, n_queries=6, docs=5, d=3)
    with pytest.raises(ValueError, match=r"method='lbfgs' fits smooth non-convex") as info:
        bmrm.fit(X, (y > 0).astype(float) if loss == "hinge" else y, loss, qid, method="lbfgs")
    assert "'auto'" in str(info.value) and "'level'" in str(info.value)


def test_line_search_finds_the_minimum_of_a_convex_piecewise_function():
    class Segment:
        """J(t) = |t − 2.7| + 0.1 (t − 1)² on t ≥ 0."""

        def value(self, t):
            J = abs(t - 2.7) + 0.1 * (t - 1) ** 2
            s = (1.0 if t >= 2.7 else -1.0) + 0.2 * (t - 1)
            return J, s, None

    J0, s0 = Segment().value(0.0)[:2]
    t, J, _ = line_search(Segment(), J0, s0, np.inf, atol=1e-9, max_evals=60)
    assert t == pytest.approx(2.7, abs=1e-6)
    # bounded by t_max
    t, J, _ = line_search(Segment(), J0, s0, 1.0, atol=1e-9, max_evals=60)
    assert t == 1.0
    # a slope that is not negative at 0: stays put
    assert line_search(Segment(), 1.0, 0.0, np.inf, atol=0.0, max_evals=5)[0] == 0.0


def test_segment_scores_are_affine_and_match_the_oracle():
    X, y, qid = ranking_problem(4)
    prepared = losses.prepare(losses.get("ordinal"), y, qid, n_samples=len(y))
    oracle = RiskOracle(X, prepared)
    rng = np.random.default_rng(0)
    w_a, w_b = rng.normal(size=4), rng.normal(size=4)
    from bmrm.solver.bundle import Bundle

    state = BundleState(problem=Problem.of(oracle, L2(), 0.1, 4), w0=w_a, bundle=Bundle(4))
    seg = segment(state, w_a, w_b, oracle.scores(w_a))
    for t in (0.0, 0.3, 1.0, 2.5):
        J, slope, _ = seg.value(t)
        w = w_a + t * (w_b - w_a)
        R, a = oracle(w)
        assert J == pytest.approx(0.05 * w @ w + R, rel=1e-12)
        # the slope is a directional subgradient: (a + lam w)·(w_b − w_a) where R is smooth
        assert slope == pytest.approx((a + 0.1 * w) @ (w_b - w_a), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("method", BUNDLE_NAMES)
def test_intermediate_results_are_cheap_views(method):
    X, y = make_problem(0, "hinge")
    lengths = []

    def callback(r):
        lengths.append(len(r.history["gap"]))
        assert not r.history["gap"].flags.writeable

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bmrm.ConvergenceWarning)
        res = bmrm.fit(
            X, y, "hinge", lam=1e-3, tol=1e-12, max_iter=150, callback=callback, method=method
        ).result_
    # called after every iteration, the last included
    assert lengths == list(range(1, res.nit + 1))


@pytest.mark.parametrize("method", BUNDLE_NAMES)
def test_features_scaled_by_1e6_still_converge(method):
    """Q = G/lam ~ 1e15: the QP's tolerance (scaled by max Q) accepts w = 0; the default
    master sees the stall and hands over to the Clarabel master."""
    X, y = make_problem(0, "squared")
    lam = 1e-3
    res = bmrm.fit(X * 1e6, y, "squared", lam=lam, max_iter=3000, method=method).result_
    assert res.success, res.message
    J_star, _ = direct_optimum(X * 1e6, y, "squared", lam, "l2")
    assert res.fun - J_star <= res.gap + 1e-9
    assert res.lower_bound <= J_star + 1e-9
    X, y = make_problem(0, "hinge")
    res = bmrm.fit(X * 1e6, y, "hinge", lam=lam, atol=1e-12, max_iter=3000, method=method)
    res = res.result_
    assert res.success, res.message
    # w = 0 (J = 1) was the answer before; the data are separable, so J* is tiny
    assert res.fun < 1e-12
    assert 0 <= res.lower_bound <= res.fun


def test_overflowing_features_give_a_clear_error():
    X, y = make_problem(0, "squared")
    for loss in ("squared", "hinge"):
        yl = y if loss == "squared" else np.sign(y)
        with pytest.raises(FloatingPointError, match="overflowed float64.*X.*scale them down"):
            bmrm.fit(X * 1e300, yl, loss, lam=1e-3)


class WrongSignSquared:
    """½(f − y)² with the gradient's sign flipped."""

    pointwise = True

    def validate(self, y, query_ptr):
        return np.asarray(y, dtype=np.float64)

    def loss_grad(self, f, targets):
        return 0.5 * (f - targets) ** 2, -(f - targets)


@pytest.mark.parametrize("method", BUNDLE_NAMES)
def test_wrong_subgradient_raises_instead_of_converging(method):
    X, y = make_problem(0, "squared")
    with pytest.raises(ValueError, match="not a subgradient"):
        bmrm.fit(X, y, WrongSignSquared(), lam=1e-2, method=method)


@pytest.mark.parametrize("method", [None, "ocas"])
def test_path_matches_independent_fits_and_the_direct_optimum(method):
    X, y, qid = ranking_problem(7, n_queries=20, docs=6, d=5)
    lams = [1.0, 1e-1, 1e-2, 1e-3]
    loss = losses.get("ordinal", normalize="none")
    models = bmrm.path(X, y, loss, qid, lams=lams, method=method, tol=1e-6, max_iter=5000)
    total_path = 0
    total_indep = 0
    for lam, model in zip(lams, models, strict=True):
        res = model.result_
        assert res.success and model.lam == lam
        ind = bmrm.fit(X, y, loss, qid, lam=lam, method=method, tol=1e-6, max_iter=5000).result_
        assert abs(res.fun - ind.fun) <= res.gap + ind.gap
        J_star, D, n_q = ordinal_direct(X, y, qid, lam)
        J = lam / 2 * res.x @ res.x + np.maximum(0, 1 - D @ res.x).sum() / n_q
        assert J == pytest.approx(res.fun, rel=1e-10)
        assert J - J_star <= res.gap + 1e-8
        assert res.lower_bound <= J_star + 1e-7
        total_path += res.nfev
        total_indep += ind.nfev
    # the carried planes and warm starts save oracle calls on this path
    assert total_path < total_indep


@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_path_of_a_latent_loss_warm_starts_each_fit(name):
    """The concave-convex procedure's surrogates change from step to step, so no plane is
    carried between lams: each fit is bmrm.fit from the previous lam's model, and its
    reported objective is the latent loss's at the model."""
    X, y, qid = ranking_problem(3, n_queries=12, docs=6, d=5)
    lams = [1.0, 1e-1, 1e-2]
    models = bmrm.path(X, y, name, qid, lams=lams, tol=1e-6)
    w0 = None
    for lam, model in zip(lams, models, strict=True):
        res = model.result_
        assert res.success and model.lam == lam
        alone = bmrm.fit(X, y, name, qid, lam=lam, w0=w0, tol=1e-6)
        np.testing.assert_array_equal(res.x, alone.result_.x)
        R = losses.risk(name, X @ res.x, y, qid)[0]
        assert res.fun == pytest.approx(lam / 2 * res.x @ res.x + R, rel=1e-12)
        w0 = res.x


def test_path_takes_nrbm_with_the_warm_start_alone():
    """bmrm.fit builds NRBM for the loss, so its planes are not carried: each lam's fit is
    bmrm.fit from the previous lam's model; on a convex loss each is certified."""
    X, y, qid = ranking_problem(4, n_queries=8, docs=5, d=3)
    lams = [1.0, 1e-1, 1e-2]
    models = bmrm.path(X, y, "ordinal", qid, lams=lams, method="nrbm", tol=1e-6)
    w0 = None
    for lam, model in zip(lams, models, strict=True):
        res = model.result_
        assert res.success and res.method == "nrbm" and model.lam == lam
        alone = bmrm.fit(X, y, "ordinal", qid, lam=lam, w0=w0, method="nrbm", tol=1e-6)
        np.testing.assert_array_equal(res.x, alone.result_.x)
        assert res.nfev == alone.result_.nfev
        w0 = res.x


def test_path_takes_nrbm_and_lbfgs_on_a_non_convex_loss():
    X, y, qid = ranking_problem(4, n_queries=8, docs=5, d=3)
    for loss, method, name in [("warp", "nrbm", "nrbm"), ("cosine", "lbfgs", "lbfgs")]:
        models = bmrm.path(X, y, loss, qid, lams=[1.0, 0.1], method=method)
        assert [m.result_.method for m in models] == [name, name]
        alone = bmrm.fit(X, y, loss, qid, lam=0.1, w0=models[0].result_.x, method=method)
        np.testing.assert_array_equal(models[1].result_.x, alone.result_.x)


def test_path_with_a_method_object_matches_its_name():
    """An object is used by each lam's fit in turn, with the planes carried as for a name."""
    X, y, qid = ranking_problem(4, n_queries=8, docs=5, d=3)
    lams = [1.0, 1e-1, 1e-2]
    by_object = bmrm.path(X, y, "ordinal", qid, lams=lams, method=OCAS(), tol=1e-6)
    by_name = bmrm.path(X, y, "ordinal", qid, lams=lams, method="ocas", tol=1e-6)
    for a, b in zip(by_object, by_name, strict=True):
        assert a.result_.success and a.result_.method == "ocas"
        np.testing.assert_array_equal(a.result_.x, b.result_.x)
        assert a.result_.nfev == b.result_.nfev


def test_path_refuses_lbfgs_on_a_convex_loss_before_any_fit():
    X, y, qid = ranking_problem(4, n_queries=8, docs=5, d=3)
    with pytest.raises(ValueError, match="method='lbfgs' fits smooth non-convex objectives"):
        bmrm.path(X, y, "ordinal", qid, lams=[1.0], method="lbfgs", callback=_never_called)
    with pytest.raises(ValueError, match=r"method must be one of \['auto', .*got 'levle'"):
        bmrm.path(X, y, "ordinal", qid, lams=[1.0], method="levle")


def _never_called(*args):
    raise AssertionError("the solver ran an iteration")


def test_path_rejects_bad_lams():
    X, y = make_problem(0, "squared")
    for lams in ([], [1.0, -1.0], [[1.0]], [np.nan], 0.1):
        with pytest.raises(ValueError, match="lams"):
            bmrm.path(X, y, "squared", lams=lams)
    with pytest.raises(ValueError, match="lams=, not lam="):
        bmrm.path(X, y, "squared", lams=[1.0], lam=1.0)


@pytest.mark.parametrize("kw", [{"regularizer": "l1"}, {"bounds": (-1.0, 1.0)}])
def test_level_method_refuses_other_regularizers(kw):
    X, y = make_problem(0, "squared")
    with pytest.raises(ValueError, match="method='level' needs regularizer='l2' without bounds"):
        bmrm.fit(X, y, "squared", lam=1e-2, method="level", **kw)


@pytest.mark.parametrize("bad", [{"theta": 0.0}, {"theta": 1.0}, {"max_projection_steps": 0}])
def test_level_method_rejects_bad_parameters(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        LevelBundle(**bad)


@pytest.mark.parametrize("mu", [0.0, 1.5, -0.1])
def test_inout_rejects_bad_mu(mu):
    with pytest.raises(ValueError, match="mu must lie in"):
        InOut(mu=mu)


@pytest.mark.parametrize("cls", [OCAS, InOut])
@pytest.mark.parametrize(
    "mu, shown",
    [(0.0, "0.0"), (0, "0"), (1.5, "1.5"), (np.nan, "nan"), ("0.1", "'0.1'"), (True, "True")],
)
def test_mu_outside_zero_one_is_refused_naming_it(cls, mu, shown):
    """OCAS's cut at mu = 0 is the line-search point, where the bundle may already hold the
    plane: the fit stalled to max_iter. A string or a bool is no fraction either."""
    with pytest.raises(ValueError, match=re.escape(f"mu must lie in (0, 1]; got {shown}")):
        cls(mu=mu)


@pytest.mark.parametrize("cls", [OCAS, LineSearchBMRM])
@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_evals": 0}, "max_evals must be an integer >= 1; got 0"),
        ({"max_evals": -3}, "max_evals must be an integer >= 1; got -3"),
        ({"max_evals": 2.5}, "max_evals must be an integer >= 1; got 2.5"),
        ({"max_evals": "5"}, "max_evals must be an integer >= 1; got '5'"),
        ({"max_evals": True}, "max_evals must be an integer >= 1; got True"),
        ({"line_search_tol": -1.0}, "line_search_tol must be >= 0; got -1.0"),
        ({"line_search_tol": np.nan}, "line_search_tol must be a finite number; got nan"),
        ({"line_search_tol": np.inf}, "line_search_tol must be a finite number; got inf"),
        ({"line_search_tol": "0.01"}, "line_search_tol must be a finite number; got '0.01'"),
    ],
)
def test_line_search_options_are_checked_at_construction(cls, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        cls(**kwargs)


@pytest.mark.parametrize(
    "method",
    [
        OCAS(mu=1.0, line_search_tol=0.0, max_evals=1),
        OCAS(mu=np.float32(0.5), max_evals=np.int64(2)),
        OCAS(mu=1e-3),
        LineSearchBMRM(line_search_tol=0.0, max_evals=1),
    ],
)
def test_methods_at_the_edges_of_their_options_reach_the_direct_optimum(method):
    X, y = make_problem(2, "hinge")
    lam = 1e-2
    res = bmrm.fit(X, y, "hinge", lam=lam, tol=1e-6, method=method, max_iter=5000).result_
    J_star, _ = direct_optimum(X, y, "hinge", lam, "l2")
    assert res.success
    assert res.fun - J_star <= res.gap + 1e-7
    assert res.lower_bound <= J_star + 1e-7


def test_line_search_bmrm_keeps_its_cut_at_the_line_search_point():
    """LineSearchBMRM is OCAS with the cut at the line-search point (mu = 0), which OCAS
    itself now refuses; it still converges."""
    method = LineSearchBMRM()
    assert method.mu == 0.0 and method.max_evals == 10 and method.line_search_tol == 0.01
    X, y = make_problem(1, "squared")
    res = bmrm.fit(X, y, "squared", lam=1e-2, tol=1e-6, method=method).result_
    assert res.success and res.method == "ls-bmrm"


def _l2_state(bundle, lam, d):
    """A level-method state of the L2 master over ``bundle``, its master solved."""
    from bmrm.solver.masters import QPMaster

    state = LevelState(
        problem=Problem.of(None, L2(), lam, d),
        w0=np.zeros(d),
        bundle=bundle,
        master=QPMaster(lam),
    )
    state.solve_master()
    return state


def _random_level_state(seed):
    """A level-method state over 8 random planes in 5 dimensions, its master solved; returns
    the generator (for the test's further draws), the state, the planes (A, b), lam and d."""
    rng = np.random.default_rng(seed)
    d, k, lam = 5, 8, [1e-3, 1e-2, 1e-1][seed % 3]
    bundle = Bundle(d, capacity=20)
    A = rng.normal(size=(k, d))
    b = rng.uniform(0.0, 1.0, size=k)
    for a_i, b_i in zip(A, b, strict=True):
        bundle.add(a_i, b_i)
    return rng, _l2_state(bundle, lam, d), A, b, lam, d


@pytest.mark.parametrize("seed", range(6))
def test_level_projection_matches_cvxpy(seed):
    """The projection onto {w : lam/2 ‖w‖² + max_i (a_i·w + b_i) <= level} by the multiplier
    bisection, against cvxpy's solution of that QCQP."""
    rng, state, A, b, lam, d = _random_level_state(seed)
    lower = state.lower_bound
    x = rng.normal(size=d) * 3.0
    model = 0.5 * lam * x @ x + max(0.0, float(np.max(A @ x + b)))
    assert model > lower
    level = lower + 0.3 * (model - lower)
    method = LevelBundle(max_projection_steps=200)
    w = method._project(state, x, level)
    # the reference, with the zero plane of the bundle
    v = cp.Variable(d)
    planes = cp.hstack([A @ v + b, cp.Constant(np.zeros(1))])
    cons = [lam / 2 * cp.sum_squares(v) + cp.max(planes) <= level]
    prob = cp.Problem(cp.Minimize(cp.sum_squares(v - x)), cons)
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    value = 0.5 * lam * w @ w + max(0.0, float(np.max(A @ w + b)))
    # feasible, and within the accepted slack of the level's boundary
    assert value <= level + 1e-9
    assert value >= level - 0.25 * (level - lower) - 1e-9
    # no closer than the true projection, and not much farther (the slack on the level)
    dist, ref = np.linalg.norm(w - x), np.linalg.norm(v.value - x)
    assert dist >= ref - 1e-6
    assert dist <= ref + 0.25 * np.linalg.norm(x - state.w_master) + 1e-6


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("steps", [1, 2, 3, 4, 6])
def test_level_projection_cut_short_is_its_last_feasible_trial(seed, steps):
    """With few bisection steps the projection is the last trial inside the level set (made
    again when the loop ends on one outside it), or the master's minimiser when no trial
    was inside: it always satisfies the level constraint, and it is w(s) = argmin 1/(2s)
    ‖w − x‖² + J_k(w) (cvxpy) at the multiplier the state keeps."""
    rng, state, A, b, lam, d = _random_level_state(seed)
    lower = state.lower_bound
    state.s = 10.0 ** rng.uniform(-4, 4)  # the bisection's start, far from the root or not
    start = state.s
    x = rng.normal(size=d) * 3.0

    def model(w):
        return 0.5 * lam * w @ w + max(0.0, float(np.max(A @ w + b)))

    level = lower + 0.3 * (model(x) - lower)
    w = LevelBundle(max_projection_steps=steps)._project(state, x, level)
    assert model(w) <= level + 1e-9
    if w is state.w_master:
        assert state.s == start  # no trial was inside the level set
        return
    v = cp.Variable(d)
    planes = cp.hstack([A @ v + b, cp.Constant(np.zeros(1))])
    objective = cp.sum_squares(v - x) / (2 * state.s) + lam / 2 * cp.sum_squares(v)
    cp.Problem(cp.Minimize(objective + cp.max(planes))).solve(
        solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12
    )
    np.testing.assert_allclose(w, v.value, rtol=1e-6, atol=1e-6)


def test_level_projection_of_a_point_inside_is_the_point():
    d, lam = 3, 0.1
    bundle = Bundle(d, capacity=10)
    bundle.add(np.array([1.0, 0.0, 0.0]), 0.5)
    state = _l2_state(bundle, lam, d)
    x = np.array([-0.4, 0.0, 0.0])  # model value 0.008 + max(0, 0.1) = 0.108
    assert LevelBundle()._project(state, x, 0.2) is x


@pytest.mark.parametrize("method", ["inout", "level"])
@pytest.mark.parametrize("ties", ["increasing", "pairs"])
def test_new_methods_agree_with_plain_bmrm_on_convex_ndcg(method, ties):
    """The convex NDCG rules: the certified intervals [lower bound, J] of two methods overlap,
    and each J lies within its gap of the other's lower bound."""
    X, y, qid = ranking_problem(11, n_queries=8, docs=6, d=5)
    loss = losses.get("ndcg", k=3, truncate_c=True, ties=ties)
    tol = 1e-6
    ref = bmrm.fit(X, y, loss, qid, lam=1e-2, tol=tol, method="bmrm", max_iter=5000).result_
    res = bmrm.fit(X, y, loss, qid, lam=1e-2, tol=tol, method=method, max_iter=5000).result_
    assert ref.success and res.success
    assert res.lower_bound <= ref.fun + 1e-12
    assert ref.lower_bound <= res.fun + 1e-12
    assert res.fun - ref.lower_bound <= res.gap + ref.gap + 1e-12
    # the returned J is the package's risk at x
    R = losses.risk(loss, X @ res.x, y, qid)[0]
    assert res.fun == pytest.approx(0.5e-2 * res.x @ res.x + R, rel=1e-12)


def test_inout_with_mu_one_is_plain_bmrm():
    """mu = 1 evaluates at the master minimiser, as plain BMRM does."""
    X, y = make_problem(2, "hinge", n=100, d=6)
    a = bmrm.fit(X, y, "hinge", lam=1e-2, tol=1e-6, method="bmrm").result_
    b = bmrm.fit(X, y, "hinge", lam=1e-2, tol=1e-6, method=InOut(mu=1.0)).result_
    assert a.nit == b.nit
    np.testing.assert_allclose(a.history["objective"], b.history["objective"], rtol=1e-9)


class QueryHinge:
    """Σ over a query's pairs y_i > y_j of max(0, 1 − f_i + f_j), as a user loss; with
    ``sign=-1`` its gradient has the wrong sign."""

    def __init__(self, sign=1.0, decomposable=None):
        self.sign = sign
        if decomposable is not None:
            self.query_decomposable = decomposable

    def validate(self, y, query_ptr):
        return np.asarray(y, dtype=np.float64), np.asarray(query_ptr)

    def loss_grad(self, f, targets):
        y, ptr = targets
        values = np.zeros(len(ptr) - 1)
        grad = np.zeros_like(f)
        for q in range(len(ptr) - 1):
            for i in range(ptr[q], ptr[q + 1]):
                for j in range(ptr[q], ptr[q + 1]):
                    if y[i] > y[j] and 1 - f[i] + f[j] > 0:
                        values[q] += 1 - f[i] + f[j]
                        grad[i] -= self.sign
                        grad[j] += self.sign
        return values, grad


@pytest.mark.parametrize("method", sorted(CACHED_METHODS))
@pytest.mark.parametrize("normalize", ["none", None])
@pytest.mark.parametrize("seed", range(3))
def test_cached_methods_reach_the_direct_optimum(method, normalize, seed):
    X, y, qid = ranking_problem(seed, n_queries=12)
    lam = [1e-3, 1e-1, 1.0][seed]
    params = {} if normalize is None else {"normalize": normalize}
    loss = losses.get("ordinal", **params)
    model = bmrm.fit(
        X, y, loss, qid, lam=lam, tol=1e-6, max_iter=5000, method=cached_method(method)
    )
    res = model.result_
    assert res.success, res.message
    # the risk the fit minimised, evaluated independently of the solver
    risk = losses.risk(loss, X @ res.x, y, qid)[0]
    assert lam / 2 * res.x @ res.x + risk == pytest.approx(res.fun, rel=1e-10)
    if normalize == "none":
        J_star, D, n_q = ordinal_direct(X, y, qid, lam)
        assert res.fun - J_star <= res.gap + 1e-8
        assert res.lower_bound <= J_star + 1e-7
    plain = bmrm.fit(
        X, y, loss, qid, lam=lam, tol=1e-8, max_iter=5000, method=method.split("+")[0]
    ).result_
    # both certified: each optimum lies within the other's gap, up to the round-off of J
    # and of the bound themselves (a gap can come out a few ulps below 0)
    ulps = 8 * np.finfo(float).eps * abs(plain.fun)
    assert abs(res.fun - plain.fun) <= max(res.gap, 0.0) + max(plain.gap, 0.0) + ulps
    assert res.lower_bound <= plain.fun + 1e-9
    evaluating = np.diff(res.history["nfev"], prepend=0) > 0
    assert res.nit == res.n_cache_cuts + evaluating.sum()


@pytest.mark.parametrize("method", sorted(CACHED_METHODS))
def test_cached_methods_raise_on_a_wrong_subgradient(method):
    X, y, qid = ranking_problem(5, n_queries=12)
    with pytest.raises(ValueError, match="not a subgradient"):
        bmrm.fit(
            X, y, QueryHinge(sign=-1.0, decomposable=True), qid, lam=0.1,
            method=cached_method(method),
        )  # fmt: skip


@pytest.mark.parametrize("method", sorted(CACHED_METHODS))
def test_cached_methods_use_the_cache(method):
    X, y, qid = ranking_problem(2, n_queries=30, docs=8)
    loss = losses.get("ordinal", normalize="none")
    res = bmrm.fit(
        X, y, loss, qid, lam=1e-3, tol=1e-5, max_iter=5000, method=cached_method(method)
    ).result_
    plain = bmrm.fit(
        X, y, loss, qid, lam=1e-3, tol=1e-5, max_iter=5000, method=method.split("+")[0]
    )
    assert res.success and plain.result_.success
    assert res.n_cache_cuts > 0
    assert res.n_passes < plain.result_.n_passes


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"theta": "0.7"}, "theta must lie in (0, 1); got '0.7'"),
        ({"theta": True}, "theta must lie in (0, 1); got True"),
        ({"theta": float("nan")}, "theta must lie in (0, 1); got nan"),
        ({"theta": 1.0}, "theta must lie in (0, 1); got 1.0"),
        ({"max_projection_steps": 0}, "max_projection_steps must be an integer >= 1; got 0"),
        ({"max_projection_steps": 2.5}, "max_projection_steps must be an integer >= 1; got 2.5"),
        ({"max_projection_steps": "5"}, "max_projection_steps must be an integer >= 1; got '5'"),
    ],
)
def test_level_bundle_options_are_checked_at_construction(options, message):
    """A string theta was a bare TypeError naming nothing."""
    from bmrm.solver.methods.level import LevelBundle

    with pytest.raises(ValueError, match=re.escape(message)):
        LevelBundle(**options)


@pytest.mark.parametrize("seed", range(6))
def test_level_proposal_frees_the_master_minimiser_once_projected(seed):
    """After a projection the state drops the master's minimiser (the next master solve
    replaces it; nothing reads it before): the proposal is the projection all the same,
    and a proposal that is the minimiser itself keeps it."""
    rng, state, A, b, lam, d = _random_level_state(seed)
    w_master = state.w_master
    state.x = rng.normal(size=d) * 3.0
    state.best_J = 0.5 * lam * state.x @ state.x + max(0.0, float(np.max(A @ state.x + b)))
    method = LevelBundle(max_projection_steps=200)
    level = state.lower_bound + method.theta * (state.best_J - state.lower_bound)
    expected = method._project(state, state.x, level)
    w = method.proposal(state)
    np.testing.assert_array_equal(w, expected)
    assert w is not w_master and state.w_master is None
    state.solve_master()  # the same bundle: its minimiser again, to the QP's accuracy
    np.testing.assert_allclose(state.w_master, w_master, rtol=1e-8, atol=1e-10)
    # a level at the lower bound: the proposal is the master's minimiser, kept
    state.best_J = state.lower_bound
    w = method.proposal(state)
    assert w is state.w_master

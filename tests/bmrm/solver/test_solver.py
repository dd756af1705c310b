"""The bundle method against the whole problem solved directly by cvxpy."""

import logging
import warnings

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp

import bmrm
from bmrm.solver import qp
from bmrm.solver.regularizers import make_regularizer


def direct_optimum(X, y, loss, lam, regularizer, lower=None, upper=None):
    """min_w lam·Ω(w) + mean loss, solved as one convex program."""
    n, d = X.shape
    w = cp.Variable(d)
    f = X @ w
    if loss == "squared":
        risk = 0.5 * cp.sum_squares(f - y) / n
    elif loss == "hinge":
        risk = cp.sum(cp.pos(1 - cp.multiply(y, f))) / n
    elif loss == "logistic":
        risk = cp.sum(cp.logistic(-cp.multiply(y, f))) / n
    omega = 0.5 * cp.sum_squares(w) if regularizer == "l2" else cp.norm1(w)
    cons = []
    if lower is not None:
        cons.append(w >= lower)
    if upper is not None:
        cons.append(w <= upper)
    prob = cp.Problem(cp.Minimize(lam * omega + risk), cons)
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return prob.value, w.value


def objective(X, y, loss, lam, regularizer, w):
    f = X @ w
    if loss == "squared":
        risk = 0.5 * np.mean((f - y) ** 2)
    elif loss == "hinge":
        risk = np.mean(np.maximum(0, 1 - y * f))
    else:
        risk = np.mean(np.logaddexp(0, -y * f))
    return lam * make_regularizer(regularizer).value(w) + risk


def make_problem(seed, loss, n=40, d=6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.2, 3, size=d)
    w_true = rng.normal(size=d)
    if loss == "squared":
        y = X @ w_true + rng.normal(size=n)
    else:
        y = np.where(X @ w_true + rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


@pytest.mark.parametrize("loss", ["squared", "hinge", "logistic"])
@pytest.mark.parametrize("regularizer", ["l2", "l1"])
@pytest.mark.parametrize("seed", range(6))
def test_reaches_direct_optimum_with_valid_certificate(loss, regularizer, seed):
    X, y = make_problem(seed, loss)
    lam = [1e-3, 1e-2, 1e-1][seed % 3]
    tol = 1e-5
    model = bmrm.fit(X, y, loss, lam=lam, regularizer=regularizer, tol=tol, max_iter=3000)
    res = model.result_
    assert res.success, res.message
    J_star, _ = direct_optimum(X, y, loss, lam, regularizer)
    J = objective(X, y, loss, lam, regularizer, model.coef_)
    assert J == pytest.approx(res.fun, rel=1e-10, abs=1e-12)
    # the certificate bounds the true suboptimality (up to the reference's accuracy)
    assert J - J_star <= res.gap + 1e-8
    assert J - J_star <= tol * J + 1e-8
    assert res.lower_bound <= J_star + 1e-7
    hist = res.history
    assert np.all(np.diff(hist["lower_bound"]) >= 0)
    assert np.all(hist["gap"] >= -1e-9)
    assert np.all(np.diff(hist["best_objective"]) <= 0)
    assert len(hist["objective"]) == res.nit


def non_separable(seed=5, n=200, d=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X @ rng.normal(size=d) + 2 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


@pytest.mark.parametrize(
    ("loss", "regularizer", "converges"),
    [("logistic", "l2", True), ("logistic", "l1", True), ("hinge", "l2", False)],
)
def test_features_of_large_magnitude(loss, regularizer, converges):
    """Features of magnitude ~1e12 (X·2**40): the masters the fit hands over to (Clarabel's
    for L2, cvxpy's for L1), on which the solvers report failures for such planes as they
    are, solve them in scaled variables; the logistic fits converge, and every fit's
    certificate is valid.
    Reference: the same problem on X with lam / 2**80 (L2) or lam / 2**40 (L1), w = u /
    2**40, solved directly by cvxpy. (The hinge fit is at the edge of what float64
    certifies here: it converged or stopped at max_iter depending on rounding in the
    solvers, so only its certificate is asserted.)"""
    X, y = non_separable()
    scale, lam = 2.0**40, 1e-2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bmrm.ConvergenceWarning)
        res = bmrm.fit(X * scale, y, loss, lam=lam, regularizer=regularizer, tol=1e-5).result_
    if converges:
        assert res.success, res.message
    equivalent = lam / scale**2 if regularizer == "l2" else lam / scale
    J_star, _ = direct_optimum(X, y, loss, equivalent, regularizer)
    J = objective(X * scale, y, loss, lam, regularizer, res.x)
    assert J == pytest.approx(res.fun, rel=1e-9)
    assert J_star - 1e-7 <= J <= J_star + res.gap + 1e-8
    assert res.lower_bound <= J_star + 1e-7


@pytest.mark.parametrize("power", [25, 30, 35])
def test_squared_loss_on_features_of_large_magnitude_converges(power):
    """Squared loss on features of 2**25 to 2**35 (planes with entries up to ~1e21): the
    Clarabel master fails on some bundles even in scaled variables, and those go back to the
    dual QP, whose bound is valid whatever its accuracy (a RuntimeError before); the fit
    converges and its certificate holds against the direct solve of the equivalent problem
    (X with lam / 4**power)."""
    X, y = non_separable()
    scale, lam = 2.0**power, 1e-2
    res = bmrm.fit(X * scale, y, "squared", lam=lam, tol=1e-5).result_
    assert res.success, res.message
    J_star, _ = direct_optimum(X, y, "squared", lam / scale**2, "l2")
    J = objective(X * scale, y, "squared", lam, "l2", res.x)
    assert J == pytest.approx(res.fun, rel=1e-9)
    assert J_star - 1e-7 <= J <= J_star + res.gap + 1e-8
    assert res.lower_bound <= J_star + 1e-7


def test_a_full_bundle_under_a_polyhedral_regularizer_is_named_in_the_warning():
    """With regularizer="l1" a small bundle merges planes and the bound rises slowly; the
    max_iter warning says so and what to try. The same fit with the default bundle
    converges, and an L2 fit that merges planes gets no such note."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 20))
    y = np.where(X @ rng.normal(size=20) + rng.normal(size=300) > 0, 1.0, -1.0)
    with pytest.warns(bmrm.ConvergenceWarning) as caught:
        res = bmrm.fit(X, y, "hinge", regularizer="l1", lam=1e-2, bundle_size=10, max_iter=100)
    (warning,) = caught
    text = str(warning.message)
    n = res.result_.n_aggregations
    assert n > 0
    assert text.endswith(
        f"; the bundle was full (bundle_size=10) and its planes were merged {n} times, which "
        "slows the lower bound of the master problem with regularizer L1(): a larger "
        "bundle_size may close the gap in fewer iterations"
    ), text
    full = bmrm.fit(X, y, "hinge", regularizer="l1", lam=1e-2, max_iter=1000).result_
    assert full.success, full.message
    assert full.gap < res.result_.gap
    with pytest.warns(bmrm.ConvergenceWarning) as caught:
        l2 = bmrm.fit(X, y, "hinge", lam=1e-4, bundle_size=3, max_iter=20, method="bmrm")
    assert l2.result_.n_aggregations > 0
    (warning,) = caught
    assert "bundle was full" not in str(warning.message)


def test_features_beyond_what_float64_certifies_warn_with_what_to_do():
    """At ~1e15 the bound cannot close (the dual's curvature ‖a‖²/lam exceeds 1e30): the fit
    stops at max_iter with an honest gap and a warning that says why and what to do."""
    X, y = non_separable()
    scale, lam = 2.0**50, 1e-2
    with pytest.warns(bmrm.ConvergenceWarning) as caught:
        res = bmrm.fit(X * scale, y, "hinge", lam=lam, max_iter=60).result_
    (warning,) = caught
    assert str(warning.message).startswith("BMRM reached max_iter=60 with gap ")
    assert "(features of large magnitude), beyond what float64 certifies at this lam: " in str(
        warning.message
    )
    assert "scale the features of X" in str(warning.message)
    assert res.status == 2 and not res.success
    J_star, _ = direct_optimum(X, y, "hinge", lam / scale**2, "l2")
    assert res.lower_bound <= J_star + 1e-7
    assert objective(X * scale, y, "hinge", lam, "l2", res.x) == pytest.approx(res.fun, rel=1e-9)


@pytest.mark.parametrize("loss", ["squared", "hinge"])
def test_sparse_and_float32_give_the_same_solution(loss):
    X, y = make_problem(11, loss, n=80, d=8)
    X[np.abs(X) < 0.7] = 0.0
    lam = 1e-2
    ref = bmrm.fit(X, y, loss, lam=lam, tol=1e-8).result_
    for Xv in (sp.csr_matrix(X), X.astype(np.float32), sp.csr_matrix(X.astype(np.float32))):
        res = bmrm.fit(Xv, y, loss, lam=lam, tol=1e-8).result_
        # lam-strong convexity: ||w - w*||^2 <= 2 gap / lam for each solution
        radius = np.sqrt(2 * ref.gap / lam) + np.sqrt(2 * max(res.gap, 0) / lam)
        slack = 1e-4 if Xv.dtype == np.float32 else 1e-9
        assert np.linalg.norm(res.x - ref.x) <= radius + slack
        J = objective(X, y, loss, lam, "l2", res.x)
        assert J == pytest.approx(ref.fun, rel=1e-5 if Xv.dtype == np.float32 else 1e-7)


def test_sparse_input_is_not_densified():
    X = sp.random(200, 50_000, density=1e-3, format="csr", random_state=0)
    y = np.where(np.arange(200) % 2 == 0, 1.0, -1.0)
    model = bmrm.fit(X, y, "hinge", lam=1e-2, tol=1e-3)
    assert model.coef_.shape == (50_000,)
    assert model.result_.success


@pytest.mark.parametrize("bundle_size", [3, 4, 7])
@pytest.mark.parametrize("loss", ["squared", "hinge"])
def test_tiny_bundle_reaches_the_same_optimum(bundle_size, loss):
    X, y = make_problem(5, loss, n=60, d=8)
    lam = 1e-2
    model = bmrm.fit(X, y, loss, lam=lam, tol=1e-4, bundle_size=bundle_size, max_iter=100_000)
    res = model.result_
    assert res.success, res.message
    J_star, _ = direct_optimum(X, y, loss, lam, "l2")
    assert res.fun - J_star <= 1e-4 * res.fun + 1e-8
    assert res.bundle_size <= bundle_size
    assert np.all(np.diff(res.history["lower_bound"]) >= 0)
    assert res.lower_bound <= J_star + 1e-7


def test_box_constraints_and_custom_regularizer_match_cvxpy():
    X, y = make_problem(3, "squared", n=50, d=5)
    lam = 1e-2
    model = bmrm.fit(X, y, "squared", lam=lam, bounds=(-0.3, 0.5), tol=1e-6)
    J_star, w_star = direct_optimum(X, y, "squared", lam, "l2", lower=-0.3, upper=0.5)
    assert model.result_.fun - J_star <= 1e-6 * J_star + 1e-8
    assert np.all(model.coef_ >= -0.3 - 1e-7) and np.all(model.coef_ <= 0.5 + 1e-7)
    nonneg = bmrm.fit(X, y, "squared", lam=lam, nonneg=True, tol=1e-6)
    assert np.all(nonneg.coef_ >= -1e-7)

    def huber_reg(w):
        return cp.sum(cp.huber(w, 0.5))

    model = bmrm.fit(X, y, "squared", lam=lam, regularizer=huber_reg, tol=1e-6)
    w = cp.Variable(5)
    prob = cp.Problem(
        cp.Minimize(lam * cp.sum(cp.huber(w, 0.5)) + 0.5 * cp.sum_squares(X @ w - y) / 50)
    )
    prob.solve()
    assert model.result_.fun - prob.value <= 1e-6 * prob.value + 1e-7


def test_elastic_net_matches_cvxpy():
    X, y = make_problem(8, "squared", n=50, d=6)
    lam = 5e-2
    model = bmrm.fit(X, y, "squared", lam=lam, regularizer="elastic_net", l1_ratio=0.3, tol=1e-6)
    w = cp.Variable(6)
    omega = 0.3 * cp.norm1(w) + 0.7 * 0.5 * cp.sum_squares(w)
    prob = cp.Problem(cp.Minimize(lam * omega + 0.5 * cp.sum_squares(X @ w - y) / 50))
    prob.solve()
    assert model.result_.fun - prob.value <= 1e-6 * prob.value + 1e-7
    assert model.result_.lower_bound <= prob.value + 1e-6


def test_qp_and_cvxpy_masters_agree():
    X, y = make_problem(4, "hinge", n=60, d=7)
    a = bmrm.fit(X, y, "hinge", lam=1e-2, tol=1e-6, master="qp").result_
    b = bmrm.fit(X, y, "hinge", lam=1e-2, tol=1e-6, master="cvxpy").result_
    assert a.fun == pytest.approx(b.fun, rel=1e-5)


def test_intercept_is_fitted():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 7.0 + 0.1 * rng.normal(size=200)
    lam = 1e-3
    model = bmrm.fit(X, y, "squared", lam=lam, fit_intercept=True, tol=1e-8, max_iter=5000)
    res = model.result_
    assert res.success
    # closed form of min lam/2 (|w|^2 + b^2) + 1/(2n) |Xw + b - y|^2 (the intercept is
    # regularized like the other weights)
    Z = np.hstack([X, np.ones((200, 1))])
    w_star = np.linalg.solve(Z.T @ Z / 200 + lam * np.eye(4), Z.T @ y / 200)
    radius = np.sqrt(2 * res.gap / lam)
    assert np.linalg.norm(np.r_[model.coef_, model.intercept_] - w_star) <= radius + 1e-9
    assert model.intercept_ == pytest.approx(w_star[3], abs=radius + 1e-9)
    np.testing.assert_allclose(model.predict(X), Z @ w_star, atol=radius * 10 + 1e-9)


def test_max_iter_warns_and_reports_status():
    X, y = make_problem(0, "hinge")
    with pytest.warns(bmrm.ConvergenceWarning, match="max_iter=2"):
        res = bmrm.fit(X, y, "hinge", lam=1e-4, tol=1e-12, max_iter=2).result_
    assert res.status == 2 and not res.success and res.nit == 2


def test_callback_can_stop_and_sees_progress():
    X, y = make_problem(1, "squared")
    seen = []

    def callback(intermediate):
        seen.append(intermediate.gap)
        if len(seen) == 3:
            raise StopIteration

    res = bmrm.fit(X, y, "squared", lam=1e-3, tol=1e-12, callback=callback).result_
    assert res.status == 4 and res.nit == 3 and len(seen) == 3


def test_callback_sees_every_iteration_the_last_included():
    """The converged iteration too (the callback was skipped there), with its status."""
    X, y = make_problem(1, "squared")
    seen = []
    res = bmrm.fit(X, y, "squared", lam=1e-3, tol=1e-6, callback=seen.append).result_
    assert res.status == 0
    assert [r.nit for r in seen] == list(range(1, res.nit + 1))
    assert [r.status for r in seen] == [2] * (res.nit - 1) + [0]
    assert seen[-1].gap == res.gap and seen[-1].fun == res.fun

    # a StopIteration at the converged iteration leaves it converged
    def stop_when_done(intermediate):
        if intermediate.status != 2:
            raise StopIteration

    done = bmrm.fit(X, y, "squared", lam=1e-3, tol=1e-6, callback=stop_when_done).result_
    assert done.status == 0 and done.nit == res.nit


def test_time_budget_stops():
    X, y = make_problem(2, "hinge", n=300, d=30)
    res = bmrm.fit(X, y, "hinge", lam=1e-6, tol=0.0, max_time=1e-9, max_iter=10_000).result_
    assert res.status == 3 and res.nit == 1


def test_warm_start_from_the_optimum_converges_immediately():
    X, y = make_problem(6, "squared")
    first = bmrm.fit(X, y, "squared", lam=1e-2, tol=1e-8)
    again = bmrm.fit(X, y, "squared", lam=1e-2, tol=1e-6, w0=first.coef_)
    assert again.result_.nit < first.result_.nit
    assert again.result_.fun <= first.result_.fun * (1 + 1e-6)


@pytest.mark.parametrize("method", ["level", "bmrm", "ocas", "inout", "nrbm"])
def test_a_read_only_start_is_used_without_a_copy_and_a_writeable_one_is_copied(method):
    """minimize_bmrm starts from a read-only float64 w0 itself (nothing can change it), and
    copies any other: the user's array is never written, and both give the same fit."""
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(60, 8)), rng.normal(size=60)

    def oracle(w):
        r = X @ w - y
        return 0.5 * float(r @ r) / len(y), X.T @ r / len(y)

    start = rng.normal(size=8)
    writeable = start.copy()
    frozen = start.copy()
    frozen.flags.writeable = False
    fits = {}
    for name, w0 in (("writeable", writeable), ("frozen", frozen)):
        res, state = bmrm.minimize_bmrm(
            oracle, 8, 1e-2, w0=w0, tol=1e-8, method=method, full_output=True
        )
        assert (state.w0 is w0) == (name == "frozen")
        np.testing.assert_array_equal(w0, start)  # never written
        assert res.x.flags.writeable and not np.shares_memory(res.x, w0)
        fits[name] = res
    np.testing.assert_array_equal(fits["writeable"].x, fits["frozen"].x)
    assert fits["writeable"].fun == fits["frozen"].fun


def test_verbose_prints_one_line_per_iteration(capsys):
    X, y = make_problem(7, "squared")
    res = bmrm.fit(X, y, "squared", lam=1e-2, tol=1e-4, verbose=True).result_
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == res.nit + 1
    assert err[0].split()[:2] == ["iter", "J(best)"]


def test_progress_bar_reaches_full_when_converged(capsys):
    X, y = make_problem(9, "squared")
    res = bmrm.fit(X, y, "squared", lam=1e-2, tol=1e-5, progress=True).result_
    err = capsys.readouterr().err
    last = err.rstrip("\n").split("\r")[-1]
    assert res.success
    assert "100.0%" in last and f"iteration {res.nit} " in last


def test_convergence_warning_is_sklearns():
    """Filters on scikit-learn's category apply to the solver's warning."""
    from sklearn.exceptions import ConvergenceWarning

    assert issubclass(bmrm.ConvergenceWarning, ConvergenceWarning)
    assert bmrm.ConvergenceWarning is bmrm.solver.ConvergenceWarning
    X, y = make_problem(0, "hinge")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=ConvergenceWarning)
        bmrm.fit(X, y, "hinge", lam=1e-4, tol=1e-12, max_iter=2)
    assert caught == []


@pytest.mark.parametrize("level", [logging.NOTSET, logging.WARNING, logging.DEBUG])
def test_verbose_restores_the_logger(level, capsys):
    logger = logging.getLogger("bmrm")
    handlers = list(logger.handlers)
    logger.setLevel(level)
    try:
        X, y = make_problem(0, "squared")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", bmrm.ConvergenceWarning)
            res = bmrm.fit(X, y, "squared", lam=1e-2, max_iter=3, verbose=True).result_
        assert logger.level == level
        assert logger.handlers == handlers
    finally:
        logger.setLevel(logging.NOTSET)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].split()[:2] == ["iter", "J(best)"] and len(lines) == 1 + res.nit


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize(
    ("loss", "feature_scale", "tol"),
    [("hinge", 100.0, 1e-3), ("squared", 10.0, 1e-3), ("squared", 1.0, 1e-8)],
)
def test_stalled_qp_hands_over_to_the_clarabel_master_without_cvxpy(
    monkeypatch, caplog, loss, feature_scale, tol, compiled
):
    """Separable data with features of ~100, and a target the model fits exactly: J* is tiny
    next to the QP's tolerance, the QP master stalls, and the fit hands over to the primal
    master solved by Clarabel (a core dependency), not to cvxpy (an extra): with cvxpy made
    unimportable the fit converges, and its certificate holds against cvxpy's optimum
    (computed before). The last column is a constant (an intercept, regularized). With the
    masters' defaults (``compiled`` False: the first solves by the NumPy method) the fit
    converges to the same certificate, handed over or not."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    s = X @ rng.normal(size=5)
    y = np.where(s > 0, 1.0, -1.0) if loss == "hinge" else s
    X = np.hstack([X * feature_scale, np.ones((200, 1))])
    lam = 1e-3
    J_star, _ = direct_optimum(X, y, loss, lam, "l2")
    import sys

    monkeypatch.setitem(sys.modules, "cvxpy", None)  # import cvxpy raises ImportError
    if compiled:
        # the compiled active-set method, as in a long fit (a short one starts with the
        # NumPy transcription, whose different round-off need not stall on this problem)
        monkeypatch.setattr(qp, "SMALL_SOLVES", 0)
    with caplog.at_level(logging.INFO, logger="bmrm"):
        # the level method's QP master (auto would take Newton-CG for the squared loss)
        res = bmrm.fit(X, y, loss, lam=lam, tol=tol, method="level").result_
    if compiled:
        assert "switching to the clarabel master" in caplog.text
    assert res.success, res.message
    J = objective(X, y, loss, lam, "l2", res.x)
    assert J == pytest.approx(res.fun, rel=1e-9, abs=1e-15)
    assert res.lower_bound <= J_star + 1e-9
    assert J - J_star <= res.gap + 1e-9
    assert res.gap <= tol * res.fun or res.gap <= 1e-12


@pytest.mark.parametrize(
    "options",
    [{"regularizer": "l1"}, {"nonneg": True}, {"bounds": (0.0, 1.0)}, {"master": "cvxpy"}],
)
def test_general_master_without_cvxpy_fails_before_any_work(monkeypatch, options):
    """The cvxpy master's problems on an install without cvxpy: an ImportError saying how to
    install it, before the loss's targets are prepared (it came at the first master solve)."""
    import sys

    monkeypatch.setitem(sys.modules, "cvxpy", None)  # import cvxpy raises ImportError
    oracle = bmrm.model.RiskOracle
    monkeypatch.setattr(bmrm.model, "RiskOracle", lambda *a, **k: pytest.fail("work started"))
    X, y = non_separable()
    with pytest.raises(ImportError, match=r'needs cvxpy.*pip install "bmrm\[cvxpy\]"'):
        bmrm.fit(X, y, "hinge", **options)
    monkeypatch.setattr(bmrm.model, "RiskOracle", oracle)
    res = bmrm.fit(X, y, "hinge", bounds=(None, None)).result_  # no box: the QP master
    assert res.success, res.message


@pytest.mark.parametrize("method", ["level", "bmrm"])
def test_a_huge_bundle_size_costs_memory_only_for_the_planes_held(method):
    """The dual QP's factor grows with the bundle, not with bundle_size: a bundle that never
    fills gives the fit of the default size, bit for bit; the cvxpy master, compiled for
    bundle_size planes, refuses a size beyond the machine's memory by name."""
    X, y = non_separable()
    default = bmrm.fit(X, y, "hinge", lam=1e-2, method=method).result_
    assert default.bundle_size < 200
    huge = bmrm.fit(X, y, "hinge", lam=1e-2, method=method, bundle_size=10**12).result_
    np.testing.assert_array_equal(huge.x, default.x)
    assert huge.nit == default.nit
    with pytest.raises(ValueError, match=r"^bundle_size=1000000000000 is too large for the cvxpy"):
        bmrm.fit(X, y, "hinge", lam=1e-2, regularizer="l1", bundle_size=10**12)

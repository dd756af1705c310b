"""The Newton-CG solver: its Hessian products against explicit matrices, its certificate
against the optimum of a direct solve (cvxpy, scipy), and LIBLINEAR-RankSVM's objective."""

import re
import warnings
from pathlib import Path

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize
from sklearn.datasets import load_svmlight_file

import bmrm
import losses
from bmrm.solver.loop import minimize_bmrm
from bmrm.solver.oracle import RiskOracle
from losses.preference import pairs_from_labels
from tests.losses.test_hessp import explicit_hessian

DATA = Path(__file__).parent / "data"

LOSSES = [
    ("squared", {}),
    ("logistic", {}),
    ("ordinal", {"hinge": "squared", "normalize": "none", "cost": "linear"}),
    ("ordinal", {"hinge": "squared"}),
    ("preference", {"hinge": "squared"}),
    ("ranknet", {}),
    ("listnet", {}),
]
IDS = [f"{name}-{'-'.join(map(str, p.values()))}" for name, p in LOSSES]


def problem(name, params, seed, n_queries=12, d=5, shuffle=False):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 9, n_queries)
    qid = np.repeat(np.arange(n_queries), sizes)
    n = qid.size
    X = rng.normal(size=(n, d))
    if name == "squared":
        y = X @ rng.normal(size=d) + 0.3 * rng.normal(size=n)
    elif name == "logistic":
        y = (X @ rng.normal(size=d) + rng.normal(size=n) > 0).astype(np.float64)
    else:
        y = np.clip(np.round(X @ rng.normal(size=d) + rng.normal(size=n)), 0, 3)
    if shuffle:
        order = rng.permutation(n)
        X, y, qid = X[order], y[order], qid[order]
    data = {}
    if name == "preference":
        pairs, _ = pairs_from_labels(y, qid)
        data = {"pairs": pairs, "pair_costs": rng.uniform(0.2, 2.0, len(pairs))}
    return X, y, qid, data


def minimize_newton(oracle, lam, **options):
    """The Newton solver through the solver loop; a run stopped by max_iter is not warned
    about (the tests stop it on purpose)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bmrm.ConvergenceWarning)
        return minimize_bmrm(oracle, oracle.n_features, lam, method="newton", **options)


def explicit_risk_hessian(prepared, y, f):
    """H_R in caller order from the brute-force Hessians of tests/losses/test_hessp.py (the
    preference loss's from its pairs), divided as the risk is."""
    groups = prepared.groups
    order = np.arange(len(f)) if groups.order is None else groups.order
    loss = prepared.loss
    n = len(f)
    if loss.name == "preference":  # the pairs' explicit generalised Hessian
        t = prepared.targets
        H = np.zeros((n, n))
        for q in range(len(t.pref_ptr) - 1):
            for p in range(t.pref_ptr[q], t.pref_ptr[q + 1]):
                i, j = int(t.pair_i[p]), int(t.pair_j[p])
                c = t.pair_cost[p] if t.pair_cost.size else 1.0
                if 1.0 + f[order][i] - f[order][j] > 0:
                    e = np.zeros(n)
                    e[i], e[j] = 1.0, -1.0
                    H += 2.0 * t.weight[q] * c * np.outer(e, e)
    else:
        H = explicit_hessian(loss.name, loss.get_params(), f[order], y[order], groups.query_ptr)
    H_caller = np.empty_like(H)
    H_caller[np.ix_(order, order)] = H
    return H_caller / prepared.divisor


@pytest.mark.parametrize("layout", ["dense", "float32", "fortran", "csr", "shuffled"])
@pytest.mark.parametrize(("name", "params"), LOSSES, ids=IDS)
def test_hessian_products_match_the_explicit_matrix(name, params, layout):
    X, y, qid, data = problem(name, params, 3, shuffle=layout == "shuffled")
    if layout == "float32":
        X = X.astype(np.float32)
    elif layout == "fortran":
        X = np.asfortranarray(X)
    elif layout == "csr":
        X = sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0.0))
    prepared = losses.prepare(losses.get(name, **params), y, qid, **data)
    rng = np.random.default_rng(5)
    for intercept in (False, True):
        oracle = RiskOracle(X, prepared, intercept, 2.0)
        Xd = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
        if intercept:
            Xd = np.column_stack([Xd, np.full(len(y), 2.0)])
        w = rng.normal(size=Xd.shape[1])
        f = Xd @ w
        products = oracle.hessian(f)
        # one pass for dense C-ordered X: a pointwise loss in any row order, a loss with a
        # Hessian block kernel with rows in query order
        c_dense = layout in ("dense", "float32", "shuffled")
        kernel = getattr(prepared.loss, "hessp_kernel", None) is not None
        one_pass = c_dense and (prepared.loss.pointwise or (kernel and layout != "shuffled"))
        assert products.passes == (1 if one_pass else 2)
        H = explicit_risk_hessian(prepared, y, f)
        for _ in range(2):
            v = rng.normal(size=Xd.shape[1])
            xv = np.empty(len(y))
            hv = products(v, xv)
            rtol = 1e-5 if layout == "float32" else 1e-10
            np.testing.assert_allclose(xv, Xd @ v, rtol=rtol, atol=rtol)
            np.testing.assert_allclose(hv, Xd.T @ H @ Xd @ v, rtol=rtol, atol=rtol)


def direct_optimum(X, y, qid, data, name, params, lam):
    """min J by scipy's L-BFGS at high precision on the package's own risk (checked against
    cvxpy below for the squared hinge)."""
    prepared = losses.prepare(losses.get(name, **params), y, qid, **data)
    oracle = RiskOracle(X, prepared)

    def fun(w):
        R, a = oracle(w)
        return 0.5 * lam * w @ w + R, a + lam * w

    res = minimize(
        fun, np.zeros(X.shape[1]), jac=True, method="L-BFGS-B",
        options={"ftol": 1e-16, "gtol": 1e-13, "maxiter": 20000, "maxcor": 30},
    )  # fmt: skip
    return res.fun, oracle


@pytest.mark.parametrize("lam", [1e-3, 1e-1])
@pytest.mark.parametrize(("name", "params"), LOSSES, ids=IDS)
def test_certificate_bounds_the_distance_to_the_optimum(name, params, lam):
    X, y, qid, data = problem(name, params, 11, n_queries=20)
    J_star, oracle = direct_optimum(X, y, qid, data, name, params, lam)
    rounding = 1e-12 * (1.0 + abs(J_star))
    # stopped after 1, 2, ... iterations: every reported gap bounds J − J*
    for max_iter in (1, 2, 3):
        res = minimize_newton(oracle, lam, tol=0.0, max_iter=max_iter)
        assert res.nit == max_iter
        assert res.fun - J_star <= res.gap + rounding
        assert res.lower_bound <= J_star + rounding
        R, _ = oracle(res.x)
        assert res.fun == pytest.approx(0.5 * lam * res.x @ res.x + R, rel=1e-12)
    res = minimize_newton(oracle, lam, tol=1e-8)
    assert res.success and res.status == 0
    assert res.fun - J_star <= 1e-8 * res.fun + rounding
    assert res.gap <= 1e-8 * res.fun
    assert np.all(np.diff(res.history["objective"]) <= 0)
    assert np.all(np.diff(res.history["lower_bound"]) >= 0)


def test_squared_hinge_optimum_matches_cvxpy():
    X, y, qid, _ = problem("ordinal", {}, 17, n_queries=10, d=4)
    lam = 0.05
    w = cp.Variable(X.shape[1])
    terms = []
    for q in np.unique(qid):
        rows = np.flatnonzero(qid == q)
        i, j = np.nonzero(y[rows][:, None] < y[rows][None, :])
        if len(i):
            f = X[rows] @ w
            terms.append(cp.sum_squares(cp.pos(1 + f[i] - f[j])) / len(i))
    objective = 0.5 * lam * cp.sum_squares(w) + cp.sum(cp.hstack(terms)) / len(np.unique(qid))
    J_star = cp.Problem(cp.Minimize(objective)).solve(
        solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12
    )
    prepared = losses.prepare(losses.get("ordinal", hinge="squared"), y, qid)
    res = minimize_newton(RiskOracle(X, prepared), lam, tol=1e-10)
    assert res.fun == pytest.approx(J_star, rel=1e-8)
    np.testing.assert_allclose(res.x, w.value, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("C", [1.0, 100.0])
def test_liblinear_ranksvm_objective(C):
    """LIBLINEAR's RankSVM (-s 8 -c C) minimises ½‖w‖² + C Σ_(all pairs of all queries)
    max(0, 1 − (f_j − f_i))²: the package's J at lam = 1/(n_q C) with the squared-hinge
    ordinal loss and normalize="none" is f_LL / (n_q C), n_q counting every query of the file
    (one-document and equal-label ones too, whose terms are 0)."""
    X, y, qid = load_svmlight_file(str(DATA / "ranksvm_tiny.svmlight"), query_id=True)
    X = X.toarray()
    n_q = len(np.unique(qid))
    w = cp.Variable(X.shape[1])
    i, j = np.nonzero((y[:, None] < y[None, :]) & (qid[:, None] == qid[None, :]))
    f_ll = 0.5 * cp.sum_squares(w) + C * cp.sum_squares(cp.pos(1 - (X[j] - X[i]) @ w))
    f_star = cp.Problem(cp.Minimize(f_ll)).solve(
        solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12
    )
    loss = losses.get("ordinal", hinge="squared", normalize="none")
    oracle = RiskOracle(X, losses.prepare(loss, y, qid))
    res = minimize_newton(oracle, 1.0 / (n_q * C), tol=1e-12)
    assert n_q * C * res.fun == pytest.approx(f_star, rel=1e-9)
    np.testing.assert_allclose(res.x, w.value, rtol=1e-6, atol=1e-8)


def ranking_data(seed, n_queries=15, d=4):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 8, n_queries)
    qid = np.repeat(np.arange(n_queries), sizes)
    X = rng.normal(size=(qid.size, d))
    y = np.clip(np.round(X @ rng.normal(size=d) + rng.normal(size=qid.size)), 0, 3)
    return X, y.astype(np.int64), qid


SQUARED_HINGE = {"hinge": "squared", "normalize": "none"}


def test_fit_with_newton_names_it_and_the_model_file_keeps_it(tmp_path):
    X, y, qid = ranking_data(1)
    model = bmrm.fit(X, y, "ordinal", qid, lam=0.1, method="newton", loss_params=SQUARED_HINGE)
    res = model.result_
    assert res.success and res.method == "newton"
    assert res.n_hessp == res.history["n_hessp"][-1] > 0
    assert res.bundle_size == 0 and res.lower_bound <= res.fun
    model.save(tmp_path / "m.json")
    assert bmrm.load(tmp_path / "m.json").result_.method == "newton"


@pytest.mark.parametrize(
    ("loss", "params", "expected"),
    [
        ("squared", {}, "newton"),
        ("logistic", {}, "newton"),
        ("ordinal", SQUARED_HINGE, "newton"),
        ("listnet", {}, "newton"),
        ("ordinal", {}, "level"),  # the hinge: not smooth
        ("hinge", {}, "level"),
        ("ndcg", {"ties": "increasing"}, "level"),
    ],
)
def test_auto_picks_newton_for_smooth_losses_with_hessian_products(loss, params, expected):
    X, y, qid = ranking_data(2)
    if loss in ("squared", "logistic", "hinge"):
        y, qid = (y > 1).astype(np.float64), None
    model = bmrm.fit(X, y, loss, qid, lam=0.05, tol=1e-6, loss_params=params)
    assert model.result_.method == expected
    if expected == "newton":  # the same optimum as the bundle method's
        level = bmrm.fit(X, y, loss, qid, lam=0.05, tol=1e-6, loss_params=params, method="level")
        assert abs(model.result_.fun - level.result_.fun) <= (
            model.result_.gap + level.result_.gap
        )
    # with L1 or bounds, auto keeps the bundle methods
    assert (
        bmrm.fit(X, y, loss, qid, lam=0.05, regularizer="l1", loss_params=params).result_.method
        == "inout"
    )


@pytest.mark.parametrize(
    ("fit_params", "message"),
    [
        ({"regularizer": "l1"}, "method='newton' needs regularizer='l2' without bounds"),
        ({"bounds": (-1.0, 1.0)}, "method='newton' needs regularizer='l2' without bounds"),
        ({"loss_params": {}}, "method='newton' needs a risk that is smooth"),
    ],
)
def test_newton_refuses_what_it_cannot_certify(fit_params, message):
    X, y, qid = ranking_data(3)
    kw = {"loss_params": SQUARED_HINGE, **fit_params}
    with pytest.raises(ValueError, match=re.escape(message)):
        bmrm.fit(X, y, "ordinal", qid, lam=0.1, method="newton", **kw)


def test_weighted_fit_equals_the_fit_on_repeated_rows():
    X, y, qid = ranking_data(4)
    weight_of_query = np.random.default_rng(4).integers(1, 4, qid.max() + 1)
    s = weight_of_query[qid].astype(np.float64)
    kw = {"lam": 0.02, "tol": 1e-10, "method": "newton", "loss_params": SQUARED_HINGE}
    weighted = bmrm.fit(X, y, "ordinal", qid, sample_weight=s, **kw).result_
    # each query repeated as many times as its weight, under new query ids
    parts = [np.flatnonzero(qid == q) for q in np.unique(qid)]
    rows = np.concatenate([np.tile(p, weight_of_query[q]) for q, p in enumerate(parts)])
    new_qid = np.concatenate(
        [np.repeat(np.arange(weight_of_query[q]) + 10 * q, len(p)) for q, p in enumerate(parts)]
    )
    repeated = bmrm.fit(X[rows], y[rows], "ordinal", new_qid, **kw).result_
    assert weighted.fun == pytest.approx(repeated.fun, rel=1e-9)
    np.testing.assert_allclose(weighted.x, repeated.x, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("layout", ["float32", "csr", "shuffled", "intercept"])
def test_layouts_reach_the_same_optimum(layout):
    X, y, qid = ranking_data(5, n_queries=25)
    kw = {"lam": 0.05, "tol": 1e-10, "method": "newton", "loss_params": SQUARED_HINGE}
    if layout == "intercept":
        kw["fit_intercept"] = True
    reference = bmrm.fit(X, y, "ordinal", qid, **{**kw, "method": "level", "tol": 1e-9})
    if layout == "float32":
        X = X.astype(np.float32)
        reference = bmrm.fit(X, y, "ordinal", qid, **{**kw, "method": "level", "tol": 1e-9})
    elif layout == "csr":
        X = sp.csr_matrix(X)
    elif layout == "shuffled":
        order = np.random.default_rng(5).permutation(len(y))
        X, y, qid = X[order], y[order], qid[order]
    res = bmrm.fit(X, y, "ordinal", qid, **kw).result_
    ref = reference.result_
    assert res.success
    assert abs(res.fun - ref.fun) <= res.gap + ref.gap + 1e-12
    assert res.fun - ref.lower_bound <= res.gap + ref.gap + 1e-12


def test_warm_start_and_passes_over_x():
    X, y, qid = ranking_data(6, n_queries=30)
    kw = {"lam": 0.01, "tol": 1e-9, "method": "newton", "loss_params": SQUARED_HINGE}
    cold = bmrm.fit(X, y, "ordinal", qid, **kw).result_
    # dense data: one pass per Hessian product, one per gradient, none for w0 = 0
    assert cold.n_passes == cold.n_hessp + cold.nfev - cold.n_halvings
    warm = bmrm.fit(X, y, "ordinal", qid, w0=cold.x, **kw).result_
    assert warm.nit <= 1 and warm.fun <= cold.fun + 1e-12


class CountedRiskOracle(RiskOracle):
    """The package's oracle counting the calls made to it and the passes its Hessian
    products take, from its own side."""

    def __init__(self, *args):
        super().__init__(*args)
        self.counts = {"scores": 0, "risk_at": 0, "cut_at": 0, "products": 0, "passes": 0}

    def scores(self, w, out=None):
        self.counts["scores"] += 1
        return super().scores(w, out)

    def risk_at(self, f):
        self.counts["risk_at"] += 1
        return super().risk_at(f)

    def cut_at(self, f):
        self.counts["cut_at"] += 1
        return super().cut_at(f)

    def hessian(self, f):
        products = super().hessian(f)
        counts = self.counts

        def counted(v, xv=None):
            counts["products"] += 1
            counts["passes"] += products.passes
            return products(v, xv)

        counted.passes = products.passes
        return counted


@pytest.mark.parametrize(("name", "params"), LOSSES, ids=IDS)
def test_bookkeeping_equals_the_oracles_own_count(name, params):
    X, y, qid, data = problem(name, params, 21, n_queries=30)
    oracle = CountedRiskOracle(X, losses.prepare(losses.get(name, **params), y, qid, **data))
    res = minimize_newton(oracle, 1e-3, tol=1e-9, w0=np.full(X.shape[1], 0.1))
    c = oracle.counts
    assert res.success
    assert res.nfev == c["risk_at"] + c["cut_at"] == res.history["nfev"][-1]
    assert res.n_hessp == c["products"] > 0
    assert res.n_passes == c["scores"] + c["cut_at"] + c["passes"]
    assert c["scores"] == 1  # X w0, once; the steps' X s come from the products

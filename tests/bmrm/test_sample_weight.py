"""Fits with ``sample_weight`` against references that do not use the weights code.

* cvxpy on the whole weighted problem (pointwise losses, L2 and L1);
* the same fit on the data with each row (query) repeated as often as its integer weight
  and left out at weight 0: both minimise one objective, so their optima agree within the
  certified gaps and the L2 distance bound (every solver method, the ranking losses, the
  concave-convex procedure's fixed surrogate, the non-linear scorer's risk);
* the unweighted fit, bit for bit, when all weights are equal.

The Dask backend's weighted fits are compared with these local ones in
``test_distributed.py``.
"""

import warnings

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp

import bmrm
import losses
from bmrm.estimators import BMRMClassifier, BMRMRanker, BMRMRegressor
from bmrm.scorers import get_scorer
from bmrm.solver.methods import METHODS
from bmrm.solver.oracle import RiskOracle
from bmrm.solver.scorer_oracle import ScorerOracle
from tests.bmrm.solver.test_solver import make_problem
from tests.bmrm.test_estimators import sq_distance_bound


def pointwise_problem(seed, loss, n=50, d=5):
    """The solver tests' problem (:func:`tests.bmrm.solver.test_solver.make_problem`) and integer
    weights 0..3 (the first two rows 1 and 3)."""
    X, y = make_problem(seed, loss, n=n, d=d)
    s = np.random.default_rng([seed, 1]).integers(0, 4, size=n).astype(np.float64)
    s[:2] = (1.0, 3.0)
    return X, y, s


def weighted_optimum(X, y, loss, lam, regularizer, s):
    """min_w lam·Ω(w) + Σ s_i l_i(w) / Σ s_i, as one cvxpy program."""
    w = cp.Variable(X.shape[1])
    f = X @ w
    if loss == "squared":
        terms = 0.5 * cp.square(f - y)
    elif loss == "hinge":
        terms = cp.pos(1 - cp.multiply(y, f))
    else:
        terms = cp.logistic(-cp.multiply(y, f))
    omega = 0.5 * cp.sum_squares(w) if regularizer == "l2" else cp.norm1(w)
    problem = cp.Problem(cp.Minimize(lam * omega + (s / s.sum()) @ terms))
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return problem.value


@pytest.mark.parametrize("loss", ["squared", "hinge", "logistic"])
@pytest.mark.parametrize("regularizer", ["l2", "l1"])
@pytest.mark.parametrize("seed", range(3))
def test_pointwise_fit_reaches_the_weighted_optimum(loss, regularizer, seed):
    X, y, s = pointwise_problem(seed, loss)
    lam = (1e-3, 1e-2, 1e-1)[seed]
    model = bmrm.fit(
        X, y, loss, lam=lam, regularizer=regularizer, tol=1e-6, max_iter=3000, sample_weight=s
    )
    res = model.result_
    assert res.success, res.message
    J_star = weighted_optimum(X, y, loss, lam, regularizer, s)
    assert res.fun - J_star <= res.gap + 1e-8
    assert res.lower_bound <= J_star + 1e-7
    # the reported objective is the weighted one at the returned weights
    f = X @ model.coef_
    per_row = {
        "squared": 0.5 * (f - y) ** 2,
        "hinge": np.maximum(0.0, 1.0 - y * f),
        "logistic": np.logaddexp(0.0, -y * f),
    }[loss]
    omega = 0.5 * model.coef_ @ model.coef_ if regularizer == "l2" else np.abs(model.coef_).sum()
    assert res.fun == pytest.approx(lam * omega + s @ per_row / s.sum(), rel=1e-10)


def repeated(X, y, qid, s):
    """The rows of X repeated s times; each copy of a query gets its own query id."""
    if qid is None:
        rows = np.repeat(np.arange(len(y)), s.astype(np.int64))
        return X[rows], y[rows], None
    parts, ids = [], []
    for q in np.unique(qid):
        members = np.flatnonzero(qid == q)
        for copy in range(int(s[members[0]])):
            parts.append(members)
            ids.append(np.full(len(members), f"{q}/{copy}"))
    rows = np.concatenate(parts)
    return X[rows], y[rows], np.concatenate(ids)


def ranking_problem(seed, n_queries=25, d=5):
    """Queries of 1 to 9 rows (one with all labels equal), rows shuffled, an integer
    weight 0..3 per query spread to its rows."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 10, size=n_queries)
    qid = np.repeat(np.arange(n_queries) * 3 + 1, sizes)
    X = rng.normal(size=(qid.size, d))
    y = np.clip(np.round(X @ rng.normal(size=d) * 0.7 + 1 + rng.normal(size=qid.size)), 0, 3)
    y = y.astype(np.int64)
    y[qid == qid[0]] = 2
    q_weight = rng.integers(0, 4, size=n_queries).astype(np.float64)
    q_weight[:2] = (2.0, 1.0)
    s = q_weight[(qid - 1) // 3]
    order = rng.permutation(qid.size)
    return X[order], y[order], qid[order], s[order]


def assert_same_optimum(a, b, lam):
    ra, rb = a.result_, b.result_
    assert ra.success and rb.success, (ra.message, rb.message)
    assert abs(ra.fun - rb.fun) <= max(ra.gap, rb.gap) + 1e-12
    assert np.sum((a.coef_ - b.coef_) ** 2) <= sq_distance_bound(ra, rb, lam) + 1e-12


RANKING = [
    ("ordinal", None),
    ("ordinal", {"normalize": "none", "cost": "linear"}),
    ("ndcg", {"ties": "pairs", "k": 5}),
    ("ndcg", {"ties": "increasing"}),
    ("neru", {"ties": "pairs"}),
    ("listnet", None),
    ("squared", None),
]


@pytest.mark.parametrize("loss, params", RANKING)
@pytest.mark.parametrize("seed", range(2))
def test_query_weights_are_repeated_queries(loss, params, seed):
    X, y, qid, s = ranking_problem(seed)
    lam = 0.02
    if loss == "squared":  # a pointwise loss weighs rows: vary them within queries too
        s = s + (np.arange(len(s)) % 2)
    kw = {"lam": lam, "tol": 1e-7, "max_iter": 3000, "loss_params": params}
    weighted = bmrm.fit(X, y, loss, qid, sample_weight=s, **kw)
    Xr, yr, qr = repeated(X, y, qid if loss != "squared" else None, s)
    if loss == "squared":
        rows = np.repeat(np.arange(len(y)), s.astype(np.int64))
        qr = qid[rows]
    reference = bmrm.fit(Xr, yr, loss, qr, **kw)
    assert_same_optimum(weighted, reference, lam)


def test_preference_pairs_with_query_weights():
    X, y, qid, s = ranking_problem(7)
    pairs, costs = losses.pairs_from_labels(y, qid)
    costs = costs * np.random.default_rng(1).uniform(0.5, 2.0, size=costs.size)
    kw = {"lam": 0.02, "tol": 1e-7, "max_iter": 3000}
    weighted = bmrm.fit(
        X, y, "preference", qid, sample_weight=s, pairs=pairs, pair_costs=costs, **kw
    )
    # the reference: the repeated queries, each copy with its query's pairs and costs
    Xr, yr, qr = repeated(X, y, qid, s)
    rows = np.concatenate(
        [np.flatnonzero(qid == q) for q in np.unique(qid) for _ in range(int(s[qid == q][0]))]
    )
    position = {}
    for new, old in enumerate(rows):
        position.setdefault(old, []).append(new)
    pr, cr = [], []
    for (i, j), c in zip(pairs, costs, strict=True):
        for copy in range(len(position.get(i, ()))):  # none for a query of weight 0
            pr.append((position[i][copy], position[j][copy]))
            cr.append(c)
    reference = bmrm.fit(
        Xr, yr, "preference", qr, pairs=np.array(pr).reshape(-1, 2), pair_costs=np.array(cr), **kw
    )
    assert_same_optimum(weighted, reference, 0.02)


# the bundle methods (the ordinal hinge is not smooth: Newton-CG's weighted fits are in
# test_newton.py)
@pytest.mark.parametrize("method", sorted(set(METHODS) - {"newton"}) + ["nrbm"])
def test_every_method_minimises_the_weighted_objective(method):
    X, y, qid, s = ranking_problem(3)
    lam = 0.01
    kw = {"lam": lam, "tol": 1e-7, "max_iter": 5000, "method": method}
    weighted = bmrm.fit(X, y, "ordinal", qid, sample_weight=s, **kw)
    Xr, yr, qr = repeated(X, y, qid, s)
    assert_same_optimum(weighted, bmrm.fit(Xr, yr, "ordinal", qr, **kw), lam)


def test_sparse_float32_and_intercept_with_weights():
    X, y, s = pointwise_problem(4, "hinge")
    kw = {"lam": 0.01, "tol": 1e-7, "fit_intercept": True, "max_iter": 3000}
    dense = bmrm.fit(X, y, "hinge", sample_weight=s, **kw)
    rows = np.repeat(np.arange(len(y)), s.astype(np.int64))
    reference = bmrm.fit(X[rows], y[rows], "hinge", **kw)
    assert_same_optimum(dense, reference, 0.01)
    assert abs(dense.intercept_ - reference.intercept_) ** 2 <= sq_distance_bound(
        dense.result_, reference.result_, 0.01
    )
    for Xv in (sp.csr_matrix(X), X.astype(np.float32)):
        other = bmrm.fit(Xv, y, "hinge", sample_weight=s, **kw)
        ref = bmrm.fit(Xv[rows], y[rows], "hinge", **kw)
        assert_same_optimum(other, ref, 0.01)


def test_equal_weights_fit_bit_for_bit_as_unweighted():
    X, y, qid, _ = ranking_problem(2)
    for loss in ("ordinal", "ndcg", "squared"):
        plain = bmrm.fit(X, y, loss, qid, lam=0.02, tol=1e-5)
        for c in (1.0, 0.3):
            weighted = bmrm.fit(
                X, y, loss, qid, lam=0.02, tol=1e-5, sample_weight=np.full(len(y), c)
            )
            np.testing.assert_array_equal(weighted.coef_, plain.coef_)
            assert weighted.result_.fun == plain.result_.fun


def test_latent_ndcg_surrogate_and_objective_are_weighted():
    """The concave-convex procedure's surrogate of the weighted latent loss is the surrogate
    of the repeated data (same risk and subgradient at any w), and the fit's objective is
    the weighted objective at its weights, evaluated on the repeated data."""
    X, y, qid, s = ranking_problem(5)
    lam = 0.02
    model = bmrm.fit(X, y, "ndcg", qid, lam=lam, tol=1e-6, sample_weight=s)
    Xr, yr, qr = repeated(X, y, qid, s)
    R_rep, _ = losses.risk("ndcg", Xr @ model.coef_, yr, qr)
    assert model.result_.fun == pytest.approx(
        lam / 2 * model.coef_ @ model.coef_ + R_rep, rel=1e-9
    )
    loss = losses.get("ndcg")
    rng = np.random.default_rng(0)
    w_fix, w = rng.normal(size=(2, X.shape[1]))
    weighted = RiskOracle(X, losses.prepare(loss, y, qid, sample_weight=s)).convexified(w_fix)
    reference = RiskOracle(Xr, losses.prepare(loss, yr, qr)).convexified(w_fix)
    for oracle in (weighted, reference):
        assert oracle.prepared.loss is loss
    Ra, aa = weighted(w)
    Rb, ab = reference(w)
    assert Ra == pytest.approx(Rb, rel=1e-12)
    np.testing.assert_allclose(aa, ab, rtol=1e-10, atol=1e-14)
    # the starting loss (the ordinal loss of the procedure) keeps the weights too
    start = RiskOracle(X, losses.prepare(loss, y, qid, sample_weight=s)).initial()
    start_ref = RiskOracle(Xr, losses.prepare(loss, yr, qr)).initial()
    Ra, aa = start(w)
    Rb, ab = start_ref(w)
    assert Ra == pytest.approx(Rb, rel=1e-12)
    np.testing.assert_allclose(aa, ab, rtol=1e-10, atol=1e-14)


def test_query_cuts_of_the_cut_cache_are_weighted():
    X, y, qid, s = ranking_problem(6)
    oracle = RiskOracle(X, losses.prepare("ordinal", y, qid, sample_weight=s))
    w = np.random.default_rng(2).normal(size=X.shape[1])
    out = np.zeros((oracle.prepared.n_terms, X.shape[1]))
    R, a, r = oracle.query_cut_at(oracle.scores(w), out)
    R_call, a_call = oracle(w)
    assert R == pytest.approx(R_call, rel=1e-13)
    np.testing.assert_allclose(a, a_call, rtol=1e-12, atol=1e-15)
    assert r.sum() == pytest.approx(R, rel=1e-13)
    weights = oracle.prepared.weights.terms
    assert np.all(r[weights == 0] == 0) and np.all(out[weights == 0] == 0)


def one_and_two_pass(X, prepared):
    """Two oracles of ``prepared`` on the small ``X``: one forced to the one-pass call, and
    one with the two passes it takes by default."""
    two = RiskOracle(X, prepared)
    assert two.fused is None  # X is small: two passes by default
    one = RiskOracle(X, prepared)
    one.fused = one._fused_plan(0)
    assert one.fused is not None
    return one, two


def test_one_pass_oracle_with_weights_equals_two_passes():
    """The one-pass call (X w, the loss, Xᵀ g block by block) weighs each block's queries
    as the two-pass call does; so do its per-query cuts. Terms that all weigh 0 (one part
    of a distributed fit) take the two-pass call, which returns 0."""
    X, y, qid, s = ranking_problem(6)
    order = np.argsort(qid, kind="stable")  # the one-pass call needs rows in query order
    X, y, qid, s = np.ascontiguousarray(X[order]), y[order], qid[order], s[order]
    prepared = losses.prepare("ordinal", y, qid, sample_weight=s)
    one, two = one_and_two_pass(X, prepared)
    w = np.random.default_rng(4).normal(size=X.shape[1])
    (R1, a1), (R2, a2) = one(w), two(w)
    assert R1 == pytest.approx(R2, rel=1e-13)
    np.testing.assert_allclose(a1, a2, rtol=1e-12, atol=1e-15)
    out1, out2 = (np.zeros((prepared.n_terms, X.shape[1])) for _ in range(2))
    R1, a1, r1 = one.query_cut(w, out1)
    R2, a2, r2 = two.query_cut_at(two.scores(w), out2)
    assert R1 == pytest.approx(R2, rel=1e-13)
    np.testing.assert_allclose(r1, r2, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(out1, out2, rtol=1e-12, atol=1e-15)
    zero = RiskOracle(X, losses.prepare("ordinal", y, qid, sample_weight=0 * s, weight_part=True))
    assert zero._fused_plan(0) is None
    R0, a0 = zero(w)
    assert R0 == 0.0 and not a0.any()


def test_nonlinear_scorer_risk_is_weighted():
    X, y, qid, s = ranking_problem(8)
    scorer = get_scorer("expected_gain").with_params(n_levels=int(y.max()) + 1)
    theta = np.random.default_rng(3).normal(size=scorer.n_params(X.shape[1])) * 0.3
    weighted = ScorerOracle(X, losses.prepare("listnet", y, qid, sample_weight=s), scorer)
    Xr, yr, qr = repeated(X, y, qid, s)
    reference = ScorerOracle(Xr, losses.prepare("listnet", yr, qr), scorer)
    Ra, aa = weighted(theta)
    Rb, ab = reference(theta)
    assert Ra == pytest.approx(Rb, rel=1e-12)
    np.testing.assert_allclose(aa, ab, rtol=1e-10, atol=1e-14)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = bmrm.fit(
            X,
            y,
            "listnet",
            qid,
            lam=0.01,
            ranking_function="expected_gain",
            sample_weight=s,
            tol=1e-6,
        )
    assert np.all(np.isfinite(model.coef_))


def test_errors_before_any_work():
    X, y, qid, s = ranking_problem(1)
    with pytest.raises(ValueError, match=r"sample_weight must be 1-d with one weight per row"):
        bmrm.fit(X, y, "ordinal", qid, sample_weight=s[:-1])
    with pytest.raises(ValueError, match="sample_weight must be non-negative"):
        bmrm.fit(X, y, "ordinal", qid, sample_weight=-s)
    uneven = s.copy()
    uneven[qid == qid[0]] = np.arange(np.sum(qid == qid[0])) + 1.0
    if np.sum(qid == qid[0]) > 1:
        with pytest.raises(ValueError, match=rf"equal within each query .* query {qid[0]}"):
            bmrm.fit(X, y, "ndcg", qid, sample_weight=uneven)


def test_estimators_pass_weights_to_fit():
    X, y, qid, s = ranking_problem(9)
    ranker = BMRMRanker(loss="ordinal", lam=0.02, tol=1e-6).fit(X, y, qid, sample_weight=s)
    model = bmrm.fit(X, y, "ordinal", qid, lam=0.02, tol=1e-6, sample_weight=s)
    np.testing.assert_array_equal(ranker.coef_, model.coef_)
    Xp, yp, sp_ = pointwise_problem(2, "squared")
    reg = BMRMRegressor(lam=0.01, tol=1e-6).fit(Xp, yp, sample_weight=sp_)
    ref = bmrm.fit(Xp, yp, "squared", lam=0.01, tol=1e-6, fit_intercept=True, sample_weight=sp_)
    np.testing.assert_array_equal(reg.coef_, ref.coef_)
    assert reg.intercept_ == ref.intercept_
    Xc, yc, sc = pointwise_problem(2, "logistic")
    labels = np.where(yc > 0, "spam", "ham")
    clf = BMRMClassifier(loss="logistic", lam=0.01, tol=1e-6).fit(Xc, labels, sample_weight=sc)
    ref = bmrm.fit(Xc, yc, "logistic", lam=0.01, tol=1e-6, fit_intercept=True, sample_weight=sc)
    np.testing.assert_array_equal(clf.coef_, ref.coef_)
    only_ham = np.where(labels == "ham", 1.0, 0.0)
    with pytest.raises(ValueError, match=r"^sample_weight gives class 'spam' no positive"):
        BMRMClassifier().fit(Xc, labels, sample_weight=only_ham)


def test_path_carries_planes_of_the_weighted_risk():
    X, y, qid, s = ranking_problem(10)
    lams = [0.1, 0.02, 0.005]
    models = bmrm.path(X, y, "ordinal", qid, lams=lams, tol=1e-7, sample_weight=s)
    for lam, model in zip(lams, models, strict=True):
        alone = bmrm.fit(X, y, "ordinal", qid, lam=lam, tol=1e-7, sample_weight=s)
        assert_same_optimum(model, alone, lam)


@pytest.mark.parametrize("loss", ["hinge", "logistic"])
def test_class_weight_is_repeated_rows_of_a_class(loss):
    """class_weight={label: 3} fits as the data with that class's rows three times (within
    the certified bounds), and multiplies into sample_weight; "balanced" reaches the cvxpy
    optimum of the problem weighted by n / (2 n_c)."""
    X, y, _ = pointwise_problem(5, loss, n=60)
    labels = np.where(y > 0, "pos", "neg")
    kw = {"loss": loss, "lam": 0.01, "tol": 1e-8, "max_iter": 3000, "fit_intercept": False}
    weighted = BMRMClassifier(class_weight={"pos": 3}, **kw).fit(X, labels)
    rows = np.concatenate([np.arange(len(y)), np.repeat(np.flatnonzero(y > 0), 2)])
    repeated = BMRMClassifier(**kw).fit(X[rows], labels[rows])
    assert_same_optimum(weighted.model_, repeated.model_, 0.01)
    s = np.random.default_rng(0).integers(1, 3, len(y)).astype(np.float64)
    both = BMRMClassifier(class_weight={"pos": 3, "neg": 0.5}, **kw).fit(X, labels, s)
    direct = bmrm.fit(
        X, y, loss, lam=0.01, tol=1e-8, max_iter=3000, sample_weight=s * np.where(y > 0, 3, 0.5)
    )
    np.testing.assert_array_equal(both.coef_, direct.coef_)
    balanced = BMRMClassifier(class_weight="balanced", **kw).fit(X, labels)
    n_pos = np.sum(y > 0)
    w_rows = np.where(y > 0, len(y) / (2.0 * n_pos), len(y) / (2.0 * (len(y) - n_pos)))
    J_star = weighted_optimum(X, y, loss, 0.01, "l2", w_rows)
    res = balanced.result_
    assert res.fun - J_star <= res.gap + 1e-8
    assert res.lower_bound <= J_star + 1e-7


def test_bad_class_weights():
    X, y, _ = pointwise_problem(6, "hinge", n=30)
    labels = np.where(y > 0, 1, 0)
    for spec, message in (
        ({2: 1.0}, r"class_weight names 2, which is not one of the classes \[0, 1\]"),
        ({1: -1.0}, r"class_weight\[1\] must be finite and >= 0; got -1.0"),
        ({1: "x"}, r"class_weight\[1\] must be a number; got 'x'"),
        ({1: 0.0}, r"^class_weight gives class 1 no positive weight"),
    ):
        with pytest.raises(ValueError, match=message):
            BMRMClassifier(class_weight=spec).fit(X, labels)

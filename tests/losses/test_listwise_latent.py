"""The NDCG@k / NERU losses with latent tie-breaking (``ties="latent"``) and their training.

References (tests/losses/reference_listwise.py): every permutation π and every ideal
ordering σ of queries of up to 7 documents (:func:`latent_brute_force`), scipy's full
assignment with a lexsort σ for large queries, and every tie-breaking of the scores for the
pessimistic metric. The concave-convex procedure is checked against an objective computed
by enumeration.
"""

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

import bmrm
import losses
from bmrm.solver.cccp import minimize_cccp
from bmrm.solver.loop import minimize_bmrm
from bmrm.solver.oracle import RiskOracle
from losses.listwise import NDCGLoss
from tests.losses.reference_listwise import (
    Measure,
    latent_brute_force,
    pessimistic_loss,
    position_weights,
)
from tests.losses.test_listwise import blocks, random_batch

CONFIGS = [
    ("ndcg", {}),
    ("ndcg", {"truncate_c": True}),
    ("ndcg", {"k": 1}),
    ("ndcg", {"k": 1, "truncate_c": True}),
    ("ndcg", {"k": 3, "gain": "linear"}),
    ("ndcg", {"k": 3, "gain": "linear", "truncate_c": True}),
    ("ndcg", {"k": 2, "c": "dcg"}),
    ("ndcg", {"k": 4, "c": "dcg", "truncate_c": True}),
    ("ndcg", {"k": 3, "discount": "original"}),
    ("ndcg", {"k": 10, "discount": "original", "truncate_c": True}),
    ("neru", {}),
    ("neru", {"alpha": 2.0, "d": 1.0}),
    ("neru", {"k": 2}),
    ("neru", {"k": 3, "truncate_c": True, "d": 0.5}),
    ("neru", {"k": 2, "c": "dcg", "truncate_c": True}),
]
IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in p.items()) or 'default'}" for name, p in CONFIGS]


def build(name, params):
    loss = losses.get(name, **{"bound": "hinge", **params})
    assert loss.ties == "latent" and loss.latent and loss.bound == "hinge"
    if name == "ndcg":
        return loss, Measure("ndcg", k=loss.k, gain=loss.gain, discount=loss.discount)
    return loss, Measure("neru", k=loss.k, alpha=loss.alpha, d=loss.d)


def weights(loss, m):
    return position_weights(loss.c, m, loss.k, loss.truncate_c)


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
def test_brute_force(name, params):
    """Value: max over all π minus max over all ideal σ; subgradient: c on π minus the mean
    of the maximising σ's placements (where π's placement is unique); bound and sign."""
    loss, measure = build(name, params)
    rng = np.random.default_rng(300 + CONFIGS.index((name, params)))
    f, y, ptr = random_batch(rng, name, 300, sizes=[1, 2, 3, 4, 5, 6, 7])
    targets = loss.validate(y, ptr)
    values, grad = loss.loss_grad(f, targets)
    metric = loss.metric(f, targets)
    n_unique = n_tied = 0
    for q, s in enumerate(blocks(ptr)):
        expected, expected_grad, unique = latent_brute_force(
            f[s], y[s], measure, weights(loss, s.stop - s.start)
        )
        assert values[q] == pytest.approx(expected, abs=1e-10), (f[s], y[s])
        assert values[q] >= 0.0
        if unique:
            n_unique += 1
            n_tied += len(np.unique(f[s])) < s.stop - s.start
            np.testing.assert_allclose(grad[s], expected_grad, atol=1e-10)
        assert metric[q] == pytest.approx(pessimistic_loss(f[s], y[s], measure), abs=1e-12)
        assert values[q] >= metric[q] - 1e-12
    assert n_unique > 100 and n_tied > 10


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
def test_convexified_against_brute_force(name, params):
    """With the ties fixed at anchor scores f0: max_π [...] − Σ ĉ(f0)_d f_d, by enumeration."""
    loss, measure = build(name, params)
    rng = np.random.default_rng(400 + CONFIGS.index((name, params)))
    f0, y, ptr = random_batch(rng, name, 200, sizes=[1, 2, 3, 4, 5, 6])
    f = f0 + rng.normal(size=f0.size) * rng.choice([0.0, 0.1, 2.0])
    targets = loss.convexify(f0, loss.validate(y, ptr))
    values, grad = loss.loss_grad(f, targets)
    for q, s in enumerate(blocks(ptr)):
        c = weights(loss, s.stop - s.start)
        expected, expected_grad, unique = latent_brute_force(f[s], y[s], measure, c, f0[s])
        assert values[q] == pytest.approx(expected, abs=1e-10)
        if unique:
            np.testing.assert_allclose(grad[s], expected_grad, atol=1e-10)


def test_thousands_of_small_queries():
    """Two thousand queries of 1..6 documents, labels and scores with many ties."""
    rng = np.random.default_rng(77)
    for name, params in (("ndcg", {"k": 3}), ("neru", {"d": 0.5, "k": 4, "truncate_c": True})):
        loss, measure = build(name, params)
        f, y, ptr = random_batch(rng, name, 1000, sizes=[1, 2, 3, 4, 5, 6])
        values, grad = loss.loss_grad(f, loss.validate(y, ptr))
        for q, s in enumerate(blocks(ptr)):
            expected, expected_grad, unique = latent_brute_force(
                f[s], y[s], measure, weights(loss, s.stop - s.start)
            )
            assert values[q] == pytest.approx(expected, abs=1e-10)
            if unique:
                np.testing.assert_allclose(grad[s], expected_grad, atol=1e-10)


def ideal_weights_reference(fq, b, c):
    """Per document the mean of c over its tie group's positions in σ (gains descending,
    equal gains in decreasing score; a group: equal gain and equal score), by a lexsort
    and a plain sum in position order."""
    m = fq.size
    sigma = np.lexsort((-fq, -b))
    out = np.zeros(m)
    p = 0
    while p < m:
        e = p + 1
        while e < m and b[sigma[e]] == b[sigma[p]] and fq[sigma[e]] == fq[sigma[p]]:
            e += 1
        total = 0.0
        for s in range(p, e):
            total += c[s]
        out[sigma[p:e]] = total / (e - p)
        p = e
    return out


@pytest.mark.parametrize("k", [1, 3, 10])
@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_ideal_weights_with_truncated_c(name, k):
    """With c zero from k on, σ's weights against a lexsort σ over 3,000 queries of 1–40
    documents: scores continuous, rounded to a few values (tie groups that cross position
    k, whose documents share the mean of c over their positions, zeros past k included)
    or all equal, labels in 1–5 levels (all equal included)."""
    loss, measure = build(name, {"k": k, "truncate_c": True})
    rng = np.random.default_rng(50 + k)
    sizes = rng.choice([1, 2, 3, k, k + 1, k + 2, 2 * k + 3, 40], 3000)
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    levels = rng.integers(1, 6, sizes.size)
    y = np.concatenate([rng.integers(0, n, m) for n, m in zip(levels, sizes, strict=True)])
    if name == "neru":
        y = y.astype(np.float64)
    f = rng.normal(size=y.size)
    kind = np.repeat(rng.integers(0, 3, sizes.size), sizes)
    f = np.where(kind == 1, np.round(f), np.where(kind == 2, 0.25, f))
    targets = loss.validate(y, ptr)
    assert targets.truncated
    out = loss.ideal_weights(f, targets)
    n_long = n_crossing = 0
    for s in blocks(ptr):
        m = s.stop - s.start
        if measure.degenerate(y[s]) or m < 2:
            np.testing.assert_array_equal(out[s], 0.0)
            continue
        b = measure.gains(y[s])
        expected = ideal_weights_reference(f[s], b, weights(loss, m))
        np.testing.assert_allclose(out[s], expected, rtol=1e-15, atol=0)
        if m > k:
            n_long += 1
            sigma = np.lexsort((-f[s], -b))
            at_k = sigma[k - 1]
            group = (b == b[at_k]) & (f[s] == f[s][at_k])
            n_crossing += bool(np.count_nonzero(group[sigma[k:]]))
    assert n_long > 1000 and n_crossing > 100


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
def test_the_loss_reads_the_weights_kernels_rank_order(name, params):
    """The latent loss's kernel reads the rank order that the ideal-weights kernel sorted
    (one sort per query instead of two): bit for bit the same losses and subgradients as
    with those weights passed in (a convexified loss at the same scores, whose kernel sorts
    itself), on queries of 1–25 documents with continuous, rounded and all-equal scores."""
    loss, _ = build(name, params)
    rng = np.random.default_rng(60 + CONFIGS.index((name, params)))
    f, y, ptr = random_batch(rng, name, 3000, sizes=[1, 2, 3, 5, 8, 12, 25])
    kind = np.repeat(rng.integers(0, 3, ptr.size - 1), np.diff(ptr))
    f = np.where(kind == 1, np.round(f), np.where(kind == 2, -0.5, f))
    targets = loss.validate(y, ptr)
    assert targets.ideal_c is None
    given = targets._replace(ideal_c=loss.ideal_weights(f, targets))
    values, grad = loss.loss_grad(f, targets)
    expected_values, expected_grad = loss.loss_grad(f, given)
    np.testing.assert_array_equal(values, expected_values)
    np.testing.assert_array_equal(grad, expected_grad)
    assert np.count_nonzero(values) > 500


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("ndcg", {}),
        ("ndcg", {"truncate_c": True}),
        ("ndcg", {"k": 5, "c": "dcg", "gain": "linear"}),
        ("neru", {"k": 5}),
        ("neru", {"k": 10, "truncate_c": True, "d": 1.0}),
        ("neru", {"d": 1.0}),
    ],
)
def test_large_queries_against_scipy(name, params):
    """Queries of 50–300 documents: scipy's full assignment for π, a lexsort σ (gains
    descending, equal gains in decreasing score)."""
    loss, measure = build(name, params)
    rng = np.random.default_rng(6)
    sizes = [50, 80, 120] if loss.k is None else [50, 120, 300]
    _, y, ptr = random_batch(rng, name, 10, sizes=sizes)
    f = rng.normal(size=y.size)
    values, grad = loss.loss_grad(f, loss.validate(y, ptr))
    for q, s in enumerate(blocks(ptr)):
        fq, m = f[s], s.stop - s.start
        if measure.degenerate(y[s]):
            assert values[q] == 0.0
            continue
        c = weights(loss, m)
        b = measure.gains(y[s])
        profit = np.outer(c, fq) - np.outer(measure.discounts(m), b) / measure.ideal(y[s])
        rows, cols = linear_sum_assignment(profit, maximize=True)
        pi = cols[np.argsort(rows)]
        sigma = np.lexsort((-fq, -b))
        assert values[q] == pytest.approx(
            1.0 + profit[np.arange(m), pi].sum() - c @ fq[sigma], rel=1e-10, abs=1e-10
        )
        expected = np.zeros(m)
        expected[pi] += c
        expected[sigma] -= c
        np.testing.assert_allclose(grad[s], expected, atol=1e-10)


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
def test_listing_order_does_not_matter(name, params):
    """Value always; subgradient when scores are distinct (π unique) and, for the σ part,
    also at tied scores (tied documents of a level share one averaged weight)."""
    loss, _ = build(name, params)
    rng = np.random.default_rng(31)
    f, y, ptr = random_batch(rng, name, 80, sizes=[1, 2, 4, 7, 12, 40])
    perm = np.concatenate([rng.permutation(np.arange(s.start, s.stop)) for s in blocks(ptr)])
    targets = loss.validate(y, ptr)
    targets_p = loss.validate(y[perm], ptr)
    values, _ = loss.loss_grad(f, targets)
    values_p, _ = loss.loss_grad(f[perm], targets_p)
    np.testing.assert_allclose(values_p, values, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(
        loss.ideal_weights(f[perm], targets_p), loss.ideal_weights(f, targets)[perm]
    )
    distinct = f + 1e-3 * rng.normal(size=f.size)
    values, grad = loss.loss_grad(distinct, targets)
    values_p, grad_p = loss.loss_grad(distinct[perm], targets_p)
    np.testing.assert_allclose(values_p, values, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad_p, grad[perm], atol=1e-12)


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
def test_difference_of_convex(name, params):
    """At any f: the surrogate l_f with the ties fixed at f equals l at f, majorises l
    everywhere, is convex, and the latent subgradient g at f is one of l_f's:
    l(f') <= l_f(f') and l_f(f') >= l(f) + <g, f' − f>."""
    loss, _ = build(name, params)
    rng = np.random.default_rng(12)
    f, y, ptr = random_batch(rng, name, 60, sizes=[1, 2, 5, 9, 16, 30])
    targets = loss.validate(y, ptr)
    values, grad = loss.loss_grad(f, targets)
    fixed = loss.convexify(f, targets)
    at_f, grad_fixed = loss.loss_grad(f, fixed)
    np.testing.assert_allclose(at_f, values, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad_fixed, grad, atol=1e-12)
    for _ in range(6):
        other = f + rng.normal(size=f.size) * rng.choice([0.01, 1.0, 10.0])
        if rng.random() < 0.3:
            other = np.round(other)
        latent_other, _ = loss.loss_grad(other, targets)
        surrogate_other, _ = loss.loss_grad(other, fixed)
        for q, s in enumerate(blocks(ptr)):
            assert latent_other[q] <= surrogate_other[q] + 1e-9
            assert surrogate_other[q] >= values[q] + grad[s] @ (other[s] - f[s]) - 1e-9
        for theta in (0.25, 0.5, 0.9):
            mid, _ = loss.loss_grad(theta * f + (1 - theta) * other, fixed)
            np.testing.assert_array_less(mid, theta * at_f + (1 - theta) * surrogate_other + 1e-9)


def test_latent_loss_is_not_convex_and_ignores_order_within_a_level():
    """Scores that order the levels with margin give zero loss however they spread within a
    level; the increasing-tie loss charges that spread; and the latent loss is not convex."""
    y = np.array([2, 0, 1, 2, 0, 1, 0, 0])
    ptr = np.array([0, 8])
    f = 10.0 * y + np.array([0.0, 3.0, -2.0, 4.0, -3.0, 1.0, 0.5, 2.0])
    latent = losses.get("ndcg", k=3, bound="hinge")
    values, grad = latent.loss_grad(f, latent.validate(y, ptr))
    assert values[0] == 0.0
    np.testing.assert_array_equal(grad, 0.0)
    increasing = losses.get("ndcg", k=3, ties="increasing")
    assert increasing.loss_grad(f, increasing.validate(y, ptr))[0][0] > 0.5
    # two documents of equal label, swapped scores: l(midpoint) > mean of the ends
    y2, ptr2 = np.array([1, 1, 0]), np.array([0, 3])
    ends = [np.array([2.0, 0.0, 0.0]), np.array([0.0, 2.0, 0.0])]
    t2 = latent.validate(y2, ptr2)
    v_ends = [latent.loss_grad(e, t2)[0][0] for e in ends]
    v_mid = latent.loss_grad(0.5 * (ends[0] + ends[1]), t2)[0][0]
    assert v_mid > 0.5 * sum(v_ends) + 1e-3


@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_degenerate_queries(name):
    loss = losses.get(name)
    y = np.array([3, 0, 0, 0, 2, 2, 2, 1])
    ptr = np.array([0, 1, 4, 7, 7, 8])
    f = np.array([5.0, 1.0, -2.0, 0.5, 3.0, -1.0, 7.0, 0.0])
    targets = loss.validate(y, ptr)
    values, grad = loss.loss_grad(f, targets)
    np.testing.assert_array_equal(values, 0.0)
    np.testing.assert_array_equal(grad, 0.0)
    np.testing.assert_array_equal(loss.ideal_weights(f, targets), 0.0)
    values, grad = loss.loss_grad(f, loss.convexify(f[::-1].copy(), targets))
    np.testing.assert_array_equal(values, 0.0)
    np.testing.assert_array_equal(grad, 0.0)


def test_ties_parameter():
    assert losses.get("ndcg").ties == "latent" and losses.get("neru").ties == "latent"
    assert not losses.get("ndcg", ties="increasing").latent
    assert losses.get("neru", ties="increasing").get_params()["ties"] == "increasing"
    with pytest.raises(ValueError, match="ties must be one of"):
        losses.get("ndcg", ties="decreasing")
    loss = losses.get("ndcg", ties="increasing")
    targets = loss.validate(np.array([0, 1, 2]), np.array([0, 3]))
    with pytest.raises(ValueError, match="convexify applies to ties='latent'"):
        loss.convexify(np.zeros(3), targets)


# --- training by the concave-convex procedure --------------------------------------------


def enumerated_objective(X, y, qid, w, lam, name, params):
    """lam·½‖w‖² + mean over queries of the latent loss, by enumeration."""
    loss, measure = build(name, params)
    f = X @ w
    total = 0.0
    queries = np.unique(qid)
    for q in queries:
        rows = np.flatnonzero(qid == q)
        total += latent_brute_force(f[rows], y[rows], measure, weights(loss, len(rows)))[0]
    return lam * 0.5 * w @ w + total / len(queries)


def small_problem(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 7, 12)
    qid = np.repeat(rng.permutation(len(sizes)), sizes)
    y = rng.integers(0, 3, qid.size)
    X = rng.normal(size=(qid.size, 5))
    X[:, 0] += 0.8 * y  # a feature that orders the levels, with noise
    return X, y, qid


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("name", "params"), [("ndcg", {"k": 3}), ("neru", {"d": 0.5})])
def test_cccp_steps_decrease_the_objective(seed, name, params):
    """Step by step, from several starting points: J(w_{t+1}) <= J_t(w_{t+1}) <= J_t(w_t) =
    J(w_t), with J by enumeration and J_t the surrogate objective."""
    X, y, qid = small_problem(seed)
    lam = 0.05
    loss, _ = build(name, params)
    prepared = losses.prepare(loss, y, qid)
    rng = np.random.default_rng(seed)
    for w in (np.zeros(5), rng.normal(size=5), 5.0 * rng.normal(size=5)):
        J = enumerated_objective(X, y, qid, w, lam, name, params)
        for _ in range(4):
            f = prepared.groups.to_internal(X @ w)
            fixed = losses.Prepared(
                loss, prepared.groups, loss.convexify(f, prepared.targets), prepared.n_terms
            )
            surrogate = RiskOracle(X, fixed)
            # declared convex, as RiskOracle.convexified declares its surrogates
            surrogate.convex_surrogate = True
            assert lam * 0.5 * w @ w + surrogate(w)[0] == pytest.approx(J, abs=1e-10)
            res = minimize_bmrm(surrogate, 5, lam, w0=w, tol=1e-6, max_iter=2000)
            J_t = lam * 0.5 * res.x @ res.x + surrogate(res.x)[0]
            J_new = enumerated_objective(X, y, qid, res.x, lam, name, params)
            assert J_new <= J_t + 1e-10
            assert J_t <= J + 1e-10
            w, J = res.x, J_new


@pytest.mark.parametrize("seed", range(3))
def test_fit_runs_the_concave_convex_procedure(seed):
    """bmrm.fit with the latent loss: the objective sequence never increases, fun is the
    enumerated objective at coef_, and the result beats the pairwise starting point."""
    X, y, qid = small_problem(seed)
    lam = 0.05
    model = bmrm.fit(X, y, "ndcg", qid, lam=lam, tol=1e-6, loss_params={"k": 3, "bound": "hinge"})
    res = model.result_
    assert res.n_outer >= 1
    assert np.all(np.diff(res.outer_objective) <= 1e-12)
    J = enumerated_objective(X, y, qid, model.coef_, lam, "ndcg", {"k": 3})
    assert res.fun == pytest.approx(J, abs=1e-10)
    assert res.fun == pytest.approx(res.outer_objective.min(), abs=1e-12)
    start = bmrm.fit(X, y, "ordinal", qid, lam=lam, tol=1e-6).coef_
    assert res.outer_objective[0] == pytest.approx(
        enumerated_objective(X, y, qid, start, lam, "ndcg", {"k": 3}), abs=1e-9
    )
    outer = res.history["outer"]
    assert outer[0] == 0 and np.all(np.diff(outer) >= 0) and outer[-1] == res.n_outer
    # a given w0 starts there instead of at the pairwise minimiser
    warm = bmrm.fit(
        X,
        y,
        "ndcg",
        qid,
        lam=lam,
        tol=1e-6,
        w0=model.coef_,
        loss_params={"k": 3, "bound": "hinge"},
    )
    assert warm.result_.outer_objective[0] == pytest.approx(res.fun, abs=1e-10)
    assert warm.result_.fun <= res.fun + 1e-12


def test_minimize_cccp_needs_a_latent_loss():
    X, y, qid = small_problem(0)
    oracle = RiskOracle(X, losses.prepare(losses.get("ordinal"), y, qid))
    with pytest.raises(ValueError, match="latent"):
        minimize_cccp(oracle, 5, 0.1)


def test_increasing_ties_still_fit_by_the_bundle_method():
    X, y, qid = small_problem(1)
    model = bmrm.fit(X, y, "ndcg", qid, lam=0.05, loss_params={"ties": "increasing"})
    assert "n_outer" not in model.result_
    assert model.result_.success


def test_callback_stop_ends_the_procedure():
    """StopIteration from the callback stops the starting fit and the procedure with it."""
    X, y, qid = small_problem(2)

    def stop(result):
        raise StopIteration

    model = bmrm.fit(
        X, y, "ndcg", qid, lam=0.05, callback=stop, loss_params={"k": 3, "bound": "hinge"}
    )
    res = model.result_
    assert res.status == 4 and res.n_outer == 0 and res.nit == 1
    J = enumerated_objective(X, y, qid, model.coef_, 0.05, "ndcg", {"k": 3})
    assert res.fun == pytest.approx(J, abs=1e-10)


def test_check_oracle_uses_the_surrogate_and_catches_a_wrong_one():
    """losses.check_oracle passes the latent losses (convexity checked on the surrogate at
    fixed ties) and fails a loss whose surrogate does not majorise it."""
    for name in ("ndcg", "neru"):
        assert losses.check_oracle(name).ok

    class WrongSurrogate(NDCGLoss):
        def convexify(self, f, targets):
            fixed = super().convexify(f, targets)
            return fixed._replace(ideal_c=2.0 * fixed.ideal_c)

    report = losses.check_oracle(WrongSurrogate())
    assert "subgradient" in report.failed

"""The ramp bound of the NDCG@k / NERU losses (``bound="ramp"``) and its training.

References (tests/losses/reference_listwise.py): every permutation π and every reference
ranking τ of queries of up to 7 documents (:func:`ramp_brute_force`), scipy's full assignment
and a sort of the scores for long queries, and every tie-breaking of the scores for the
pessimistic metric. Training is checked on generated long, noisy lists, where the hinge
bound's minimiser is w = 0.
"""

import warnings

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

import bmrm
import losses
from losses.metrics import ndcg_score
from tests.losses.reference_listwise import (
    Measure,
    pessimistic_loss,
    position_weights,
    ramp_brute_force,
)
from tests.losses.test_listwise import blocks, random_batch

CONFIGS = [
    ("ndcg", {}),
    ("ndcg", {"truncate_c": True}),
    ("ndcg", {"k": 1}),
    ("ndcg", {"k": 3, "gain": "linear"}),
    ("ndcg", {"k": 4, "c": "dcg", "truncate_c": True}),
    ("ndcg", {"k": 3, "discount": "original"}),
    ("neru", {}),
    ("neru", {"alpha": 2.0, "d": 1.0}),
    ("neru", {"k": 3, "truncate_c": True, "d": 0.5}),
]
IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in p.items()) or 'default'}" for name, p in CONFIGS]


def build(name, params):
    loss = losses.get(name, **{"bound": "ramp", **params})
    assert loss.latent and not loss.convex
    if name == "ndcg":
        return loss, Measure("ndcg", k=loss.k, gain=loss.gain, discount=loss.discount)
    return loss, Measure("neru", k=loss.k, alpha=loss.alpha, d=loss.d)


def weights(loss, m):
    return position_weights(loss.c, m, loss.k, loss.truncate_c)


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
def test_brute_force(name, params):
    """Value: max over all π minus max over all τ; subgradient: c on π minus the mean of
    the maximising τ's placements (where π's placement is unique); 0 <= l <= 1, l >= the
    pessimistic 1 − measure of the ranking by f."""
    loss, measure = build(name, params)
    rng = np.random.default_rng(500 + CONFIGS.index((name, params)))
    f, y, ptr = random_batch(rng, name, 300, sizes=[1, 2, 3, 4, 5, 6, 7])
    targets = loss.validate(y, ptr)
    values, grad = loss.loss_grad(f, targets)
    metric = loss.metric(f, targets)
    n_unique = n_tied = 0
    for q, s in enumerate(blocks(ptr)):
        expected, expected_grad, unique = ramp_brute_force(
            f[s], y[s], measure, weights(loss, s.stop - s.start)
        )
        assert values[q] == pytest.approx(expected, abs=1e-10), (f[s], y[s])
        assert -1e-12 <= values[q] <= 1.0 + 1e-12
        if unique:
            n_unique += 1
            n_tied += len(np.unique(f[s])) < s.stop - s.start
            np.testing.assert_allclose(grad[s], expected_grad, atol=1e-10)
        assert metric[q] == pytest.approx(pessimistic_loss(f[s], y[s], measure), abs=1e-12)
        assert values[q] >= metric[q] - 1e-12
    assert n_unique > 100 and n_tied > 10


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
def test_convexified_against_brute_force(name, params):
    """With the reference ranking fixed at anchor scores f0: max_π [...] − Σ ĉ(f0)_d f_d."""
    loss, measure = build(name, params)
    rng = np.random.default_rng(600 + CONFIGS.index((name, params)))
    f0, y, ptr = random_batch(rng, name, 200, sizes=[1, 2, 3, 4, 5, 6])
    f = f0 + rng.normal(size=f0.size) * rng.choice([0.0, 0.1, 2.0])
    targets = loss.convexify(f0, loss.validate(y, ptr))
    values, grad = loss.loss_grad(f, targets)
    for q, s in enumerate(blocks(ptr)):
        c = weights(loss, s.stop - s.start)
        expected, expected_grad, unique = ramp_brute_force(f[s], y[s], measure, c, f0[s])
        assert values[q] == pytest.approx(expected, abs=1e-10)
        if unique:
            np.testing.assert_allclose(grad[s], expected_grad, atol=1e-10)


@pytest.mark.parametrize(
    ("name", "params"),
    [("ndcg", {}), ("ndcg", {"truncate_c": True}), ("neru", {"k": 5}), ("neru", {})],
)
def test_long_queries_against_scipy(name, params):
    """Queries of 50–500 documents: scipy's full assignment for π, a sort of f for τ."""
    loss, measure = build(name, params)
    rng = np.random.default_rng(8)
    sizes = [50, 120] if loss.k is None else [50, 150, 500]
    _, y, ptr = random_batch(rng, name, 8, sizes=sizes)
    f = rng.normal(size=y.size)
    values, grad = loss.loss_grad(f, loss.validate(y, ptr))
    for q, s in enumerate(blocks(ptr)):
        fq, m = f[s], s.stop - s.start
        if measure.degenerate(y[s]):
            assert values[q] == 0.0
            np.testing.assert_array_equal(grad[s], 0.0)
            continue
        c = weights(loss, m)
        b = measure.gains(y[s])
        profit = np.outer(c, fq) - np.outer(measure.discounts(m), b) / measure.ideal(y[s])
        rows, cols = linear_sum_assignment(profit, maximize=True)
        pi = cols[np.argsort(rows)]
        tau = np.argsort(-fq)
        assert values[q] == pytest.approx(
            1.0 + profit[np.arange(m), pi].sum() - c @ fq[tau], rel=1e-10, abs=1e-10
        )
        expected = np.zeros(m)
        expected[pi] += c
        expected[tau] -= c
        np.testing.assert_allclose(grad[s], expected, atol=1e-10)


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
def test_listing_order_does_not_matter(name, params):
    """Value always; subgradient when scores are distinct; the reference weights always
    (tied scores share one averaged weight)."""
    loss, _ = build(name, params)
    rng = np.random.default_rng(41)
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
    """The surrogate fixed at f equals l at f, majorises l everywhere and is convex."""
    loss, _ = build(name, params)
    rng = np.random.default_rng(13)
    f, y, ptr = random_batch(rng, name, 60, sizes=[1, 2, 5, 9, 16, 30])
    targets = loss.validate(y, ptr)
    values, grad = loss.loss_grad(f, targets)
    fixed = loss.convexify(f, targets)
    at_f, grad_fixed = loss.loss_grad(f, fixed)
    np.testing.assert_allclose(at_f, values, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad_fixed, grad, atol=1e-12)
    for _ in range(6):
        other = f + rng.normal(size=f.size) * rng.choice([0.01, 1.0, 10.0])
        ramp_other, _ = loss.loss_grad(other, targets)
        surrogate_other, _ = loss.loss_grad(other, fixed)
        for q, s in enumerate(blocks(ptr)):
            assert ramp_other[q] <= surrogate_other[q] + 1e-9
            assert surrogate_other[q] >= values[q] + grad[s] @ (other[s] - f[s]) - 1e-9
        for theta in (0.25, 0.5, 0.9):
            mid, _ = loss.loss_grad(theta * f + (1 - theta) * other, fixed)
            np.testing.assert_array_less(mid, theta * at_f + (1 - theta) * surrogate_other + 1e-9)


def test_bounded_by_one_and_tends_to_the_measure():
    """The ramp never exceeds 1 however large the scores, and at scale s → ∞ it tends to
    1 − NDCG@k of the ranking by f; the hinge bound grows without limit instead."""
    rng = np.random.default_rng(3)
    y = rng.integers(0, 3, 150)
    ptr = np.array([0, 150])
    f = rng.normal(size=150)
    ramp = losses.get("ndcg", bound="ramp")
    hinge = losses.get("ndcg", bound="hinge")
    t_ramp, t_hinge = ramp.validate(y, ptr), hinge.validate(y, ptr)
    measure = Measure("ndcg", k=10)
    truth = measure.loss(np.argsort(-f), y)
    for scale in (0.1, 1.0, 10.0, 1e3, 1e6):
        value = ramp.loss_grad(scale * f, t_ramp)[0][0]
        rounding = 1e-12 * scale * np.abs(f).sum()  # M(f) − max⟨c, f_τ⟩ cancels
        assert truth - rounding <= value <= 1.0 + rounding
    assert ramp.loss_grad(1e4 * f, t_ramp)[0][0] == pytest.approx(truth, abs=1e-6)
    assert hinge.loss_grad(1e3 * f, t_hinge)[0][0] > 10.0


@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_degenerate_queries(name):
    loss = losses.get(name, bound="ramp")
    y = np.array([3, 0, 0, 0, 2, 2, 2, 1])
    ptr = np.array([0, 1, 4, 7, 7, 8])
    f = np.array([5.0, 1.0, -2.0, 0.5, 3.0, -1.0, 7.0, 0.0])
    targets = loss.validate(y, ptr)
    values, grad = loss.loss_grad(f, targets)
    np.testing.assert_array_equal(values, 0.0)
    np.testing.assert_array_equal(grad, 0.0)
    np.testing.assert_array_equal(loss.ideal_weights(f, targets), 0.0)


def test_bound_parameter():
    assert losses.get("ndcg").bound is None and losses.get("neru").bound is None
    assert losses.get("ndcg", bound="hinge").get_params()["bound"] == "hinge"
    with pytest.raises(ValueError, match=r"bound must be one of \[.ramp., .hinge.\] or None"):
        losses.get("ndcg", bound="x")
    for ties in ("increasing", "pairs"):
        with pytest.raises(ValueError, match=rf"bound='ramp'.*ties={ties!r}"):
            losses.get("neru", ties=ties, bound="ramp")


@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_default_bound_follows_the_median_query_length(name):
    """bound=None: the ramp when the median non-degenerate query has more than 20
    documents, the hinge otherwise (degenerate queries do not count); the values are
    those of the explicit bound."""
    rng = np.random.default_rng(5)
    default = losses.get(name)
    for sizes, degenerate, ramp in (
        ([21, 21, 2], [], True),
        ([20, 21, 19], [], False),
        ([8, 8, 200, 300, 9], [], False),
        ([50, 60, 8, 8, 8], [2, 3, 4], True),
        ([21], [], True),
    ):
        ptr = np.concatenate([[0], np.cumsum(sizes)])
        y = rng.integers(0, 3, ptr[-1]).astype(np.float64)
        for q in degenerate:
            y[ptr[q] : ptr[q + 1]] = 1.0
        f = rng.normal(size=y.size)
        targets = default.validate(y, ptr)
        assert targets.ramp is ramp
        explicit = losses.get(name, bound="ramp" if ramp else "hinge")
        expected = explicit.loss_grad(f, explicit.validate(y, ptr))
        got = default.loss_grad(f, targets)
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_array_equal(got[1], expected[1])
    for ties in ("increasing", "pairs"):
        convex = losses.get(name, ties=ties, k=5)
        assert not convex.validate(np.arange(60) % 3, np.array([0, 60])).ramp


def long_noisy_lists(seed, n_queries, m, noise, n_features=20):
    """Queries of m documents, labels 0..2 from thresholds on a noisy linear score: the
    weak-signal, long-list regime of OHSUMED-like data."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=n_features)
    X = rng.normal(size=(n_queries * m, n_features))
    latent = X @ u / np.linalg.norm(u) + noise * rng.normal(size=n_queries * m)
    y = np.digitize(latent, np.quantile(latent, [0.6, 0.9]))
    qid = np.repeat(np.arange(n_queries), m)
    return X, y, qid


@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_ramp_learns_on_long_noisy_lists(name):
    """Queries of 150 documents, label noise 3 times the signal: the hinge bound's fit is
    w ≈ 0 (its risk is smallest at w = 0), the ramp's ranks the held-out queries as well as
    the ordinal loss does (within 0.02 of its test NDCG@10) and far better than w = 0."""
    X, y, qid = long_noisy_lists(11, 120, 150, noise=3.0)
    train = qid < 80
    test = ~train
    lam = 1e-2
    ordinal = bmrm.fit(X[train], y[train], "ordinal", qid[train], lam=lam)
    ramp = bmrm.fit(X[train], y[train], name, qid[train], lam=lam)  # the default: the ramp
    hinge = bmrm.fit(X[train], y[train], losses.get(name, bound="hinge"), qid[train], lam=lam)

    def held_out_ndcg(model):
        return ndcg_score(y[test], X[test] @ model.coef_, qid[test], k=10)

    assert np.linalg.norm(hinge.coef_) < 1e-3 * np.linalg.norm(ordinal.coef_)
    assert np.linalg.norm(ramp.coef_) > 0.5 * np.linalg.norm(ordinal.coef_)
    file_order = ndcg_score(y[test], np.zeros(test.sum()), qid[test], k=10)
    assert held_out_ndcg(ramp) >= held_out_ndcg(ordinal) - 0.02
    assert held_out_ndcg(ramp) > file_order + 0.05


def enumerated_objective(X, y, qid, w, lam, loss, measure):
    """lam·½‖w‖² + mean over queries of the ramp loss, by enumeration."""
    f = X @ w
    total = 0.0
    queries = np.unique(qid)
    for q in queries:
        rows = np.flatnonzero(qid == q)
        total += ramp_brute_force(f[rows], y[rows], measure, weights(loss, len(rows)))[0]
    return lam * 0.5 * w @ w + total / len(queries)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("name", "params"), [("ndcg", {"k": 3}), ("neru", {"d": 0.5})])
def test_fit_runs_the_concave_convex_procedure(seed, name, params):
    """bmrm.fit with the ramp loss: the objective sequence never increases, fun is the
    enumerated objective at coef_, the first one is the pairwise start's."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 7, 12)
    qid = np.repeat(rng.permutation(len(sizes)), sizes)
    y = rng.integers(0, 3, qid.size)
    X = rng.normal(size=(qid.size, 5))
    X[:, 0] += 0.8 * y
    lam = 0.05
    loss, measure = build(name, params)
    model = bmrm.fit(X, y, loss, qid, lam=lam, tol=1e-6)
    res = model.result_
    assert res.n_outer >= 1
    assert np.all(np.diff(res.outer_objective) <= 1e-12)
    J = enumerated_objective(X, y, qid, model.coef_, lam, loss, measure)
    assert res.fun == pytest.approx(J, abs=1e-10)
    start = bmrm.fit(X, y, "ordinal", qid, lam=lam, tol=1e-6).coef_
    assert res.outer_objective[0] == pytest.approx(
        enumerated_objective(X, y, qid, start, lam, loss, measure), abs=1e-9
    )


def test_a_path_that_learns_nothing_warns():
    """The hinge bound on long noisy lists: every lam's fit is within tol of J(0), and
    bmrm.path says so once; the ramp's path learns and stays silent."""
    X, y, qid = long_noisy_lists(11, 60, 150, noise=3.0)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        hinge = bmrm.path(X, y, "ndcg", qid, lams=[0.1, 0.01], loss_params={"bound": "hinge"})
    messages = [str(w.message) for w in record if "learned nothing" in str(w.message)]
    assert len(messages) == 1 and "bound='ramp'" in messages[0]
    assert all(np.linalg.norm(m.coef_) < 1e-3 for m in hinge)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        ramp = bmrm.path(X, y, "ndcg", qid, lams=[0.1, 0.01])
    assert not [w for w in record if "learned nothing" in str(w.message)]
    assert all(np.linalg.norm(m.coef_) > 0.1 for m in ramp)

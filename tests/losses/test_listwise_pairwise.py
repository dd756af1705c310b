"""The structured NDCG@k / NERU losses with the pairwise hinge added (``pairwise`` = μ > 0).

References: the structured part by enumeration over all permutations (and all ideal
orderings for latent ties; tests/losses/reference_listwise.py), the pairwise hinge over the
pairs of different gain written out pair by pair below, both on thousands of random small
queries with tied labels and scores, one-document queries and queries whose labels are all
equal.
"""

import numpy as np
import pytest

import bmrm
import losses
from bmrm.solver.oracle import RiskOracle
from tests.losses.reference_listwise import (
    Measure,
    brute_force,
    latent_brute_force,
    pairs_brute_force,
    pessimistic_loss,
    position_weights,
)
from tests.losses.test_listwise import blocks, random_batch
from tests.losses.test_listwise_latent import small_problem

CONFIGS = [
    ("ndcg", {"pairwise": 0.5}),
    ("ndcg", {"k": 3, "gain": "linear", "truncate_c": True, "pairwise": 2.0}),
    ("ndcg", {"k": 2, "discount": "original", "pairwise": 0.1}),
    ("ndcg", {"k": 3, "ties": "increasing", "pairwise": 1.0}),
    ("ndcg", {"k": 4, "ties": "pairs", "pairwise": 0.3}),
    ("neru", {"pairwise": 1.0}),
    ("neru", {"k": 3, "d": 0.5, "truncate_c": True, "pairwise": 3.0}),
    ("neru", {"alpha": 2.0, "d": 1.0, "ties": "increasing", "pairwise": 0.5}),
    ("neru", {"k": 2, "ties": "pairs", "pairwise": 0.7}),
]
IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in p.items())}" for name, p in CONFIGS]


def build(name, params):
    loss = losses.get(name, **params)
    if name == "ndcg":
        return loss, Measure("ndcg", k=loss.k, gain=loss.gain, discount=loss.discount)
    return loss, Measure("neru", k=loss.k, alpha=loss.alpha, d=loss.d)


def graded_batch(rng, n_queries, sizes):
    """Queries of the given sizes with labels 0..4 (few levels, as the pairs rule needs)
    and scores with ties."""
    sizes = rng.choice(sizes, n_queries)
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    y = rng.integers(0, 5, ptr[-1])
    f = np.round(rng.normal(size=ptr[-1]), int(rng.integers(0, 3)))
    return f, y, ptr


def pairwise_hinge(f, b):
    """(1/P) Σ_{b_i > b_j} max(0, 1 − (f_i − f_j)) pair by pair: (value, grad, unique)."""
    m = len(f)
    value, grad, unique, n_pairs = 0.0, np.zeros(m), True, 0
    for i in range(m):
        for j in range(m):
            if b[i] > b[j]:
                n_pairs += 1
                margin = 1.0 - (f[i] - f[j])
                unique &= abs(margin) > 1e-9
                if margin > 0:
                    value += margin
                    grad[i] -= 1.0
                    grad[j] += 1.0
    if n_pairs == 0:
        return 0.0, grad, True
    return value / n_pairs, grad / n_pairs, unique


def structured(loss, measure, f, y, anchor=None):
    """The loss without the hinge, by enumeration: (value, grad, unique)."""
    if loss.ties == "pairs":
        return pairs_brute_force(f, y, measure)
    c = position_weights(loss.c, len(f), loss.k, loss.truncate_c)
    if loss.ties == "latent":
        return latent_brute_force(f, y, measure, c, anchor)
    return brute_force(f, y, measure, c)


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
def test_brute_force(name, params):
    """Value: the structured loss plus μ times the hinge, both by enumeration; subgradient
    where both parts are unique; the bound on the pessimistic 1 − measure; sign."""
    loss, measure = build(name, params)
    mu = params["pairwise"]
    rng = np.random.default_rng(900 + CONFIGS.index((name, params)))
    f, y, ptr = random_batch(rng, name, 400, sizes=[1, 2, 3, 4, 5, 6])
    targets = loss.validate(y, ptr)
    values, grad = loss.loss_grad(f, targets)
    metric = loss.metric(f, targets)
    n_unique = n_hinge = n_degenerate = 0
    for q, s in enumerate(blocks(ptr)):
        value, g, unique = structured(loss, measure, f[s], y[s])
        h, h_grad, h_unique = pairwise_hinge(f[s], measure.gains(y[s]))
        n_hinge += h > 0
        n_degenerate += measure.degenerate(y[s])
        assert values[q] == pytest.approx(value + mu * h, abs=1e-10), (f[s], y[s])
        assert values[q] >= 0.0 and values[q] - mu * h >= -1e-12
        if unique and h_unique:
            n_unique += 1
            np.testing.assert_allclose(grad[s], g + mu * h_grad, atol=1e-10)
        assert metric[q] == pytest.approx(pessimistic_loss(f[s], y[s], measure), abs=1e-12)
        assert values[q] >= metric[q] - 1e-12
    assert n_unique > 100 and n_hinge > 100 and n_degenerate > 20


@pytest.mark.parametrize(
    ("name", "params"), [c for c in CONFIGS if "ties" not in c[1]], ids=lambda v: str(v)
)
def test_convexified_keeps_the_hinge(name, params):
    """With the ties fixed at anchor scores f0 the surrogate is the enumerated surrogate
    plus μ times the hinge, and it equals the latent loss at f0."""
    loss, measure = build(name, params)
    mu = params["pairwise"]
    rng = np.random.default_rng(950 + CONFIGS.index((name, params)))
    f0, y, ptr = random_batch(rng, name, 200, sizes=[1, 2, 3, 4, 5, 6])
    f = f0 + rng.normal(size=f0.size) * rng.choice([0.0, 0.1, 2.0])
    targets = loss.validate(y, ptr)
    surrogate = loss.convexify(f0, targets)
    values, grad = loss.loss_grad(f, surrogate)
    for q, s in enumerate(blocks(ptr)):
        value, g, unique = structured(loss, measure, f[s], y[s], anchor=f0[s])
        h, h_grad, h_unique = pairwise_hinge(f[s], measure.gains(y[s]))
        assert values[q] == pytest.approx(value + mu * h, abs=1e-10)
        if unique and h_unique:
            np.testing.assert_allclose(grad[s], g + mu * h_grad, atol=1e-10)
    np.testing.assert_allclose(
        loss.loss_grad(f0, surrogate)[0], loss.loss_grad(f0, targets)[0], atol=1e-12
    )


@pytest.mark.parametrize("ties", ["latent", "increasing", "pairs"])
@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_zero_weight_is_the_loss_without_the_hinge(name, ties):
    """μ = 0 gives the same values and subgradients bit for bit, and keeps no hinge."""
    rng = np.random.default_rng(5)
    f, y, ptr = graded_batch(rng, 300, sizes=[1, 2, 5, 12, 40])
    plain = losses.get(name, ties=ties)
    zero = losses.get(name, ties=ties, pairwise=0.0)
    targets = zero.validate(y, ptr)
    assert targets.pairwise is None and targets.pairwise_weight == 0.0
    expected = plain.loss_grad(f, plain.validate(y, ptr))
    for a, b in zip(expected, zero.loss_grad(f, targets), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=IDS)
def test_larger_queries_add_the_ordinal_loss(name, params):
    """Queries of 8 to 200 documents: the loss minus the same loss without the hinge is μ
    times the ordinal loss on the gain levels (its own O(m log m) kernel, checked against
    pairs in tests/losses/test_ordinal.py), and matches the pair-by-pair hinge."""
    loss, measure = build(name, params)
    mu = params["pairwise"]
    plain = losses.get(name, **{**params, "pairwise": 0.0})
    rng = np.random.default_rng(7)
    f, y, ptr = graded_batch(rng, 60, sizes=[8, 30, 200])
    values, grad = loss.loss_grad(f, loss.validate(y, ptr))
    base_values, base_grad = plain.loss_grad(f, plain.validate(y, ptr))
    for q, s in enumerate(blocks(ptr)):
        h, h_grad, unique = pairwise_hinge(f[s], measure.gains(y[s]))
        assert values[q] - base_values[q] == pytest.approx(mu * h, rel=1e-12, abs=1e-12)
        if unique:
            np.testing.assert_allclose(grad[s] - base_grad[s], mu * h_grad, atol=1e-12)


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), "1", True, None])
@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_bad_weight_is_refused(name, bad):
    with pytest.raises(ValueError, match="pairwise"):
        losses.get(name, pairwise=bad)


def test_parameters_round_trip():
    loss = losses.get("ndcg", k=5, pairwise=0.25)
    assert loss.get_params()["pairwise"] == 0.25
    again = losses.get("ndcg", **loss.get_params())
    assert again.pairwise == 0.25 and again.k == 5


def enumerated_objective(X, y, qid, w, lam, name, params):
    """lam·½‖w‖² + mean over queries of the structured loss plus μ times the hinge."""
    loss, measure = build(name, params)
    f = X @ w
    groups = [np.flatnonzero(qid == q) for q in np.unique(qid)]
    losses_q = [
        structured(loss, measure, f[g], y[g])[0]
        + params["pairwise"] * pairwise_hinge(f[g], measure.gains(y[g]))[0]
        for g in groups
    ]
    return lam * 0.5 * w @ w + np.mean(losses_q)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("ndcg", {"k": 3, "pairwise": 0.5}),
        ("neru", {"d": 0.5, "pairwise": 2.0}),
        ("ndcg", {"k": 3, "ties": "pairs", "pairwise": 1.0}),
    ],
)
def test_fit(seed, name, params):
    """bmrm.fit: fun is the enumerated objective at coef_; for latent ties the procedure's
    objective never increases; for the convex pairs rule the certified gap holds against
    the enumerated objective at many random points."""
    X, y, qid = small_problem(seed)
    lam = 0.05
    model = bmrm.fit(X, y, name, qid, lam=lam, tol=1e-6, loss_params=params)
    res = model.result_
    J = enumerated_objective(X, y, qid, model.coef_, lam, name, params)
    assert res.fun == pytest.approx(J, abs=1e-10)
    if params.get("ties", "latent") == "latent":
        assert np.all(np.diff(res.outer_objective) <= 1e-12)
        plain = {**params, "pairwise": 0.0}
        # the hinge's weight changes the model
        other = bmrm.fit(X, y, name, qid, lam=lam, tol=1e-6, loss_params=plain).coef_
        assert np.linalg.norm(other - model.coef_) > 1e-3
    else:
        rng = np.random.default_rng(seed)
        for w in rng.normal(size=(50, X.shape[1])) * rng.choice([0.1, 1.0, 3.0], (50, 1)):
            J_w = enumerated_objective(X, y, qid, w, lam, name, params)
            assert J_w >= res.fun - res.gap - 1e-10


def test_large_weight_approaches_the_ordinal_fit():
    """lam/2‖w‖² + mean(l + μh), divided by μ with lam = μ·λ, is the ordinal objective at λ
    plus mean(l)/μ. The ordinal objective is λ-strongly convex and l's subgradients in w are
    at most G = max_q Σ_i c_i (‖x‖ of the query's two largest rows), so the minimisers are
    within G / (μλ) (convex rule, both solved to a tight gap)."""
    X, y, qid = small_problem(11)
    lam0, mu = 0.1, 1e4
    ordinal = bmrm.fit(X, y, "ordinal", qid, lam=lam0, tol=1e-10, max_iter=5000).coef_
    params = {"k": 3, "ties": "increasing", "pairwise": mu}
    mixed = bmrm.fit(
        X, y, "ndcg", qid, lam=mu * lam0, tol=1e-10, max_iter=5000, loss_params=params
    )
    c = position_weights("power", 6, 3, False)
    G = 2.0 * c.sum() * np.linalg.norm(X, axis=1).max()
    distance = np.linalg.norm(mixed.coef_ - ordinal)
    assert distance <= G / (mu * lam0) + 1e-4
    # and the hinge changes a fit at a moderate weight
    loose = bmrm.fit(
        X, y, "ndcg", qid, lam=lam0, tol=1e-8, loss_params={**params, "pairwise": 0.0}
    )
    assert np.linalg.norm(loose.coef_ - mixed.coef_) > 10 * distance


def test_surrogate_planes_are_lower_bounds():
    """A plane of the convexified mixed risk at w0 stays below the risk elsewhere."""
    X, y, qid = small_problem(3)
    loss = losses.get("ndcg", k=3, pairwise=0.8)
    prepared = losses.prepare(loss, y, qid)
    w0 = np.ones(X.shape[1])
    f = prepared.groups.to_internal(X @ w0)
    fixed = losses.Prepared(
        loss, prepared.groups, loss.convexify(f, prepared.targets), prepared.n_terms
    )
    oracle = RiskOracle(X, fixed)
    R, a = oracle(w0)
    rng = np.random.default_rng(0)
    for w in rng.normal(size=(100, X.shape[1])) * 3.0:
        assert oracle(w)[0] >= R + a @ (w - w0) - 1e-10

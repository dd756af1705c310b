"""Surrogate losses against independent numpy/scipy references from their definitions.

Each reference below is written from the formula (scipy's KL divergence and log-softmax,
all pairs by itertools, violators listed one by one), on random queries with tied labels
and tied scores, one-document queries, all-equal-label queries and all-zero-label queries.
"""

import itertools

import numpy as np
import pytest
from scipy.special import log_softmax, softmax
from scipy.stats import entropy

import losses
from losses.surrogate import label_mapping

NAMES = ("cosine", "listnet", "listwise_squared", "ranknet", "softmax", "warp")


def query_sets(rng, n_sets=40):
    """Lists of (y, f) queries: random, ties, one document, equal labels, all zero."""
    for _ in range(n_sets):
        queries = []
        for kind in range(6):
            m = int(rng.integers(2, 9))
            y = rng.integers(0, 4, m).astype(float)
            f = rng.normal(size=m)
            if kind == 1:
                f = np.round(f)  # tied scores
            elif kind == 2:
                y, f = y[:1], f[:1]
            elif kind == 3:
                y = np.full(m, float(rng.integers(1, 4)))
            elif kind == 4:
                y = np.zeros(m)
            queries.append((y, f))
        yield queries


def run(loss, queries):
    y = np.concatenate([q[0] for q in queries])
    f = np.concatenate([q[1] for q in queries])
    ptr = np.concatenate(([0], np.cumsum([len(q[0]) for q in queries])))
    targets = loss.validate(y, ptr)
    values, grad = loss.loss_grad(f, targets)
    return values, [grad[ptr[i] : ptr[i + 1]] for i in range(len(queries))]


def ref_cosine(y, f, mapping):
    psi = label_mapping(y, mapping)
    if not psi.any():
        return 0.0
    if not f.any():
        return 0.5
    return 0.5 * (1.0 - psi @ f / (np.linalg.norm(psi) * np.linalg.norm(f)))


def ref_listnet(y, f, alpha, mapping):
    target = softmax(alpha * label_mapping(y, mapping))
    return float(entropy(target, softmax(f)))


def ref_squared(y, f, mapping):
    return float(np.sum((label_mapping(y, mapping) - f) ** 2))


def ref_ranknet(y, f, normalize):
    pairs = [(i, j) for i, j in itertools.permutations(range(len(y)), 2) if y[i] < y[j]]
    if not pairs:
        return 0.0
    total = sum(np.logaddexp(0.0, f[i] - f[j]) for i, j in pairs)
    return total / len(pairs) if normalize == "query" else total


def ref_softmax(y, f, threshold):
    rel = np.flatnonzero(y >= threshold)
    non = np.flatnonzero(y < threshold)
    if len(rel) == 0 or len(non) == 0:
        return 0.0
    return float(np.mean([-log_softmax(f[np.r_[c, non]])[0] for c in rel]))


def ref_warp(y, f, threshold):
    rel = [p for p in range(len(y)) if y[p] >= threshold]
    non = [n for n in range(len(y)) if y[n] < threshold]
    if not rel or not non:
        return 0.0
    total = 0.0
    for p in rel:
        hinges = [1.0 + f[n] - f[p] for n in non if 1.0 + f[n] - f[p] > 0]
        if hinges:
            k = len(hinges)
            phi = sum(1.0 / j for j in range(1, k + 1))
            total += phi / k * sum(hinges)
    return total / len(rel)


CASES = [
    ("cosine", {"mapping": "linear"}, lambda y, f: ref_cosine(y, f, "linear")),
    ("cosine", {"mapping": "exp"}, lambda y, f: ref_cosine(y, f, "exp")),
    ("listnet", {"alpha": 1.0}, lambda y, f: ref_listnet(y, f, 1.0, "linear")),
    ("listnet", {"alpha": 0.3, "mapping": "exp"}, lambda y, f: ref_listnet(y, f, 0.3, "exp")),
    ("listnet", {"alpha": 10.0}, lambda y, f: ref_listnet(y, f, 10.0, "linear")),
    ("listwise_squared", {}, lambda y, f: ref_squared(y, f, "linear")),
    ("listwise_squared", {"mapping": "exp"}, lambda y, f: ref_squared(y, f, "exp")),
    ("ranknet", {}, lambda y, f: ref_ranknet(y, f, "query")),
    ("ranknet", {"normalize": "none"}, lambda y, f: ref_ranknet(y, f, "none")),
    ("softmax", {}, lambda y, f: ref_softmax(y, f, 1.0)),
    ("softmax", {"threshold": 2}, lambda y, f: ref_softmax(y, f, 2.0)),
    ("warp", {}, lambda y, f: ref_warp(y, f, 1.0)),
    ("warp", {"threshold": 3}, lambda y, f: ref_warp(y, f, 3.0)),
]
CASE_IDS = [f"{n}-{p}" for n, p, _ in CASES]


@pytest.mark.parametrize(("name", "params", "reference"), CASES, ids=CASE_IDS)
def test_values_match_the_definition(name, params, reference):
    loss = losses.get(name, **params)
    rng = np.random.default_rng(0)
    for queries in query_sets(rng):
        values, _ = run(loss, queries)
        expected = [reference(y, f) for y, f in queries]
        np.testing.assert_allclose(values, expected, rtol=1e-12, atol=1e-14)
        assert np.all(values >= 0)


def central_difference(loss, queries, q, h=1e-6):
    y, f = queries[q]
    out = np.empty(len(f))
    for i in range(len(f)):
        plus, minus = f.copy(), f.copy()
        plus[i] += h
        minus[i] -= h
        vp = run(loss, [(y, plus)])[0][0]
        vm = run(loss, [(y, minus)])[0][0]
        out[i] = (vp - vm) / (2 * h)
    return out


@pytest.mark.parametrize(("name", "params", "reference"), CASES, ids=CASE_IDS)
def test_gradient_matches_central_differences(name, params, reference):
    """Smooth losses everywhere; WARP (piecewise linear) at scores away from its kinks."""
    loss = losses.get(name, **params)
    rng = np.random.default_rng(1)
    checked = 0
    for queries in query_sets(rng, n_sets=10):
        queries = [(y, rng.normal(size=len(y))) for y, _ in queries]  # no tied scores
        _, grads = run(loss, queries)
        for q, (_, f) in enumerate(queries):
            if name == "warp":
                margins = 1.0 + f[:, None] - f[None, :]
                if np.min(np.abs(margins)) < 1e-4:
                    continue
            np.testing.assert_allclose(
                grads[q], central_difference(loss, queries, q), rtol=1e-6, atol=1e-7
            )
            checked += 1
    assert checked >= 40


def test_softmax_with_one_relevant_document_is_the_multinomial_logistic():
    """Murphy eq. (9.125): −log(exp(s_c) / Σ_c' exp(s_c')) over all documents."""
    loss = losses.get("softmax")
    rng = np.random.default_rng(2)
    for _ in range(50):
        m = int(rng.integers(2, 10))
        y = np.zeros(m)
        c = int(rng.integers(m))
        y[c] = 1
        f = 3 * rng.normal(size=m)
        value = run(loss, [(y, f)])[0][0]
        assert value == pytest.approx(-log_softmax(f)[c], rel=1e-12)


def test_listnet_is_zero_exactly_at_the_scaled_labels():
    loss = losses.get("listnet", alpha=0.7)
    y = np.array([0.0, 2.0, 1.0, 2.0])
    value, grad = run(loss, [(y, 0.7 * y + 5.0)])
    assert value[0] == pytest.approx(0.0, abs=1e-15)
    np.testing.assert_allclose(grad[0], 0.0, atol=1e-15)
    assert run(loss, [(y, 0.7 * y + [0, 0, 0.1, 0])])[0][0] > 1e-4


def test_extreme_scores_stay_finite():
    y = np.array([0.0, 1.0, 2.0, 0.0])
    f = np.array([800.0, -800.0, 0.0, 750.0])
    for name in NAMES:
        values, grads = run(losses.get(name), [(y, f)])
        assert np.all(np.isfinite(values)) and np.all(np.isfinite(grads[0])), name
    # softmax: the relevant documents are far below a non-relevant one
    value = run(losses.get("softmax"), [(y, f)])[0][0]
    assert value == pytest.approx(np.mean([800.0 - -800.0, 800.0 - 0.0]), rel=1e-12)


def ref_kl_from_logs(s, f):
    """KL(softmax(s) ‖ softmax(f)) from scipy's log-softmax (exact for shifted inputs)."""
    log_t, log_p = log_softmax(s), log_softmax(f)
    t = np.exp(log_t)
    return float(np.sum(np.where(t > 0, t * (log_t - log_p), 0.0)))


def shifted_queries(rng, shift, n=30):
    """Queries (y, g) and the same scores moved by ``shift``: g on the grid of the floats
    near ``shift``, so that shift + g is exact and (shift + g) − shift == g."""
    step = max(0.25, float(np.spacing(abs(shift))))
    queries = []
    for _ in range(n):
        m = int(rng.integers(2, 9))
        y = rng.integers(0, 3, m).astype(float)
        g = np.round(rng.normal(size=m) * 4) * step
        queries.append((y, g))
    moved = [(y, g + shift) for y, g in queries]
    assert all(np.array_equal(f - shift, g) for (_, f), (_, g) in zip(moved, queries, strict=True))
    return queries, moved


@pytest.mark.parametrize("alpha", [1.0, 1e3, 1e14, 1e15, 1e16, 1e300])
def test_listnet_with_large_targets_keeps_the_log_normaliser(alpha):
    """The target α ψ(y) and the scores far from 0: the value and gradient are those of the
    scores moved back to 0 (the divergence does not change when a constant is added to a
    query's scores), against scipy's log-softmax."""
    rng = np.random.default_rng(7)
    loss = losses.get("listnet", alpha=alpha)
    for shift in (0.0, 1e15, -1e16):
        queries, moved = shifted_queries(rng, shift)
        values, grads = run(loss, moved)
        for (y, g), value, grad in zip(queries, values, grads, strict=True):
            assert value == pytest.approx(ref_kl_from_logs(alpha * y, g), rel=1e-9, abs=1e-12)
            reference = softmax(g) - softmax(alpha * y)
            np.testing.assert_allclose(grad, reference, rtol=1e-9, atol=1e-12)


def test_softmax_loss_with_large_scores_keeps_the_log_normaliser():
    """Scores around 1e15 and −1e16 score as the same queries moved back to 0."""
    rng = np.random.default_rng(8)
    loss = losses.get("softmax")
    for shift in (1e15, -1e16):
        queries, moved = shifted_queries(rng, shift)
        values, grads = run(loss, moved)
        for (y, g), value in zip(queries, values, strict=True):
            assert value == pytest.approx(ref_softmax(y, g, 1.0), rel=1e-9, abs=1e-12)
        _, ref_grads = run(loss, queries)
        for grad, ref in zip(grads, ref_grads, strict=True):
            np.testing.assert_allclose(grad, ref, rtol=1e-9, atol=1e-12)


def midpoint_violation(loss, y, f1, f2):
    """l((f1 + f2)/2) − (l(f1) + l(f2))/2: > 0 disproves convexity."""
    mid = run(loss, [(y, 0.5 * (f1 + f2))])[0][0]
    return mid - 0.5 * (run(loss, [(y, f1)])[0][0] + run(loss, [(y, f2)])[0][0])


def test_declared_non_convex_losses_are_not_convex():
    y = np.array([0.0, 1.0])
    # cosine: 0 at (0, 1), ½ at (10, 0), about 0.45 at their midpoint (5, 0.5)
    violation = midpoint_violation(losses.get("cosine"), y, np.array([0.0, 1.0]),
                                   np.array([10.0, 0.0]))  # fmt: skip
    assert violation == pytest.approx(0.5 * (1 - 0.5 / np.hypot(5, 0.5)) - 0.25, rel=1e-12)
    # WARP: a second violator entering lowers the weight of the first (Φ(2)/2 < Φ(1))
    y = np.array([1.0, 0.0, 0.0])
    assert midpoint_violation(losses.get("warp"), y, np.array([0.0, 0.5, -0.9]),
                              np.array([0.0, 0.5, -1.1])) > 1e-3  # fmt: skip


@pytest.mark.parametrize("name", [n for n in NAMES if losses.get(n).convex])
def test_declared_convex_losses_pass_midpoint_convexity(name):
    loss = losses.get(name)
    rng = np.random.default_rng(3)
    for _ in range(200):
        m = int(rng.integers(2, 7))
        y = rng.integers(0, 3, m).astype(float)
        f1, f2 = 2 * rng.normal(size=m), 2 * rng.normal(size=m)
        assert midpoint_violation(loss, y, f1, f2) <= 1e-12


def test_declared_attributes():
    flags = {n: (losses.get(n).convex, losses.get(n).smooth) for n in NAMES}
    assert flags == {
        "cosine": (False, True),
        "listnet": (True, True),
        "listwise_squared": (True, True),
        "ranknet": (True, True),
        "softmax": (True, True),
        "warp": (False, False),
    }


@pytest.mark.parametrize(
    ("name", "params", "match"),
    [
        ("cosine", {"mapping": "log"}, "mapping must be one of"),
        ("listnet", {"alpha": 0.0}, "alpha must be > 0"),
        ("listnet", {"alpha": float("nan")}, "alpha must be a finite"),
        ("ranknet", {"normalize": "pairs"}, "normalize must be one of"),
        ("warp", {"threshold": "1"}, "threshold must be a finite"),
    ],
)
def test_bad_parameters_are_named(name, params, match):
    with pytest.raises(ValueError, match=match):
        losses.get(name, **params)


def test_bad_targets_are_named():
    with pytest.raises(ValueError, match="y must not contain NaN"):
        losses.risk("listnet", np.zeros(3), np.array([0.0, np.nan, 1.0]))
    with pytest.raises(ValueError, match="2\\^y overflows"):
        losses.risk(losses.get("cosine", mapping="exp"), np.zeros(2), np.array([0.0, 2000.0]))


def test_risk_through_the_registry():
    """losses.risk averages over queries and maps the gradient to the caller's rows."""
    rng = np.random.default_rng(4)
    y = rng.integers(0, 3, 12).astype(float)
    qid = rng.integers(0, 3, 12)
    f = rng.normal(size=12)
    for name in NAMES:
        value, grad = losses.risk(name, f, y, qid)
        per_query = []
        for q in np.unique(qid):
            rows = qid == q
            per_query.append(run(losses.get(name), [(y[rows], f[rows])])[0][0])
        assert value == pytest.approx(np.mean(per_query), rel=1e-12)
        assert grad.shape == f.shape


def test_cosine_is_scale_invariant_and_declares_it():
    loss = losses.get("cosine")
    rng = np.random.default_rng(5)
    for queries in query_sets(rng, n_sets=5):
        values, grads = run(loss, queries)
        values_s, grads_s = run(loss, [(y, 3.7 * f) for y, f in queries])
        np.testing.assert_allclose(values_s, values, rtol=1e-12, atol=1e-15)
        for g, g_s in zip(grads, grads_s, strict=True):
            np.testing.assert_allclose(3.7 * g_s, g, rtol=1e-12, atol=1e-15)
    assert [n for n in NAMES if getattr(losses.get(n), "scale_invariant", False)] == ["cosine"]


@pytest.mark.parametrize("mapping", ["linear", "exp"])
def test_cosine_is_scale_invariant_at_every_magnitude(mapping):
    """Scores scaled by powers of two from 2^-600 to 2^600 (where ‖f‖² would underflow or
    overflow) give the same value, and gradients scaled by the inverse power; labels whose
    mapped ψ = 2^y reaches 1e301 give the value of the reference on ψ divided by its max."""
    rng = np.random.default_rng(4)
    loss = losses.get("cosine", mapping=mapping)
    queries = [(rng.integers(0, 4, m).astype(float), rng.normal(size=m)) for m in (2, 3, 5, 8)]
    values, grads = run(loss, queries)
    for power in (-600, -540, 520, 600):
        scaled = [(y, np.ldexp(f, power)) for y, f in queries]
        scaled_values, scaled_grads = run(loss, scaled)
        np.testing.assert_array_equal(scaled_values, values)
        for g, sg in zip(grads, scaled_grads, strict=True):
            np.testing.assert_array_equal(np.ldexp(sg, power), g)
    if mapping == "exp":
        y = np.array([0.0, 980.0, 990.0, 1000.0])
        f = np.array([0.3, -1.0, 2.0, 0.5])
        (value,), _ = run(loss, [(y, f)])
        psi = np.exp2(y - 1000.0)  # the reference on ψ / 2^1000 (the cosine ignores scale)
        expected = 0.5 * (1.0 - psi @ f / (np.linalg.norm(psi) * np.linalg.norm(f)))
        assert value == pytest.approx(expected, rel=1e-14)
        assert 0.0 < value < 0.5

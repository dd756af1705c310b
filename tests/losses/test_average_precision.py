"""The structured average-precision hinge (``losses.get("map")``) and its use as an added
term of the NDCG / NERU losses (``average_precision`` = ν > 0).

References: the loss by enumeration over all permutations of small queries (AP and the pair
feature map written from their definitions), and for larger queries by an independent
dynamic programme over the interleavings of the two score-sorted classes (an exact search
over all of them, not the oracle's monotone scan); thousands of random queries with tied
labels and scores, one-document queries, queries of one class only.
"""

import itertools

import numpy as np
import pytest

import bmrm
import losses
from losses.metrics import map_score


def average_precision(ranked_relevant) -> float:
    positions = np.flatnonzero(ranked_relevant) + 1
    return float(np.mean(np.arange(1, positions.size + 1) / positions))


def all_rankings(relevant):
    """(Δ, slope) of every ranking y of one query, rows over the m! permutations: Δ = 1 −
    AP(y), and the slope −2/(pn) on the relevant and +2/(pn) on the non-relevant document of
    every pair that y inverts, so that y's objective at scores f is Δ + slope @ f."""
    m = len(relevant)
    p = int(relevant.sum())
    perms = np.array(list(itertools.permutations(range(m))))
    delta = np.array([1.0 - average_precision(relevant[perm]) for perm in perms])
    position = np.argsort(perms, axis=1)
    slope = np.zeros((len(perms), m))
    scale = 2.0 / (p * (m - p))
    for i in np.flatnonzero(relevant):
        for j in np.flatnonzero(~relevant):
            inverted = position[:, j] < position[:, i]
            slope[inverted, i] -= scale
            slope[inverted, j] += scale
    return delta, slope


def brute_force(f, relevant):
    """(value, slopes of every maximiser) over all m! rankings."""
    m = len(f)
    p = int(relevant.sum())
    if p in (0, m):
        return 0.0, [np.zeros(m)]
    delta, slope = all_rankings(relevant)
    objective = delta + slope @ f
    best = objective.max()
    return best, list(slope[objective > best - 1e-12])


def interleaving_dp(f, relevant) -> float:
    """max over the interleavings of the two classes, each in decreasing score, by a dynamic
    programme over (relevant placed r, non-relevant placed s): exact over all interleavings.

    best[r, s] = max(best[r − 1, s] + gain(r, s), best[r, s − 1]), gain(r, s) the change of
    the objective when relevant r lands at position r + s below s non-relevant documents;
    a row is a running maximum over s of the previous row plus its gains.
    """
    fr = np.sort(f[relevant])[::-1]
    fn = np.sort(f[~relevant])[::-1]
    p, n = fr.size, fn.size
    if p == 0 or n == 0:
        return 0.0
    scale = 2.0 / (p * n)
    s = np.arange(n + 1)
    top_n = np.concatenate(([0.0], np.cumsum(fn)))
    best = np.zeros(n + 1)  # r = 0: nothing above the non-relevant documents costs anything
    for r in range(1, p + 1):
        gain = -(r / (r + s)) / p - scale * (s * fr[r - 1] - top_n)
        best = np.maximum.accumulate(best + gain)
    return 1.0 + best[n]


def random_batch(rng, sizes, levels=3):
    sizes = rng.choice(sizes, rng.integers(1, 6))
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    y = rng.integers(0, levels, ptr[-1])
    if rng.random() < 0.2:  # a query of one label
        y[ptr[0] : ptr[1]] = y[ptr[0]]
    f = np.round(rng.normal(size=ptr[-1]), int(rng.integers(0, 3)))
    return f, y, ptr


def evaluate(loss, f, y, ptr):
    return loss.loss_grad(f, loss.validate(y, ptr))


@pytest.mark.parametrize("threshold", [None, 2])
def test_brute_force_on_small_queries(threshold):
    rng = np.random.default_rng(1 if threshold is None else 2)
    loss = losses.get("map", threshold=threshold)
    n_unique = 0
    for _ in range(600):
        f, y, ptr = random_batch(rng, [1, 2, 3, 4, 5, 6])
        values, grad = evaluate(loss, f, y, ptr)
        relevant = y > 0 if threshold is None else y >= threshold
        for q in range(ptr.size - 1):
            rows = slice(ptr[q], ptr[q + 1])
            value, slopes = brute_force(f[rows], relevant[rows])
            where = f"f={f[rows].tolist()}, y={y[rows].tolist()}"
            assert values[q] == pytest.approx(value, rel=1e-12, abs=1e-13), where
            # the subgradient is a mean of maximisers' slopes: it sums to zero and lies in
            # their hull; with one maximiser it is its slope
            assert abs(grad[rows].sum()) < 1e-12, where
            if len(slopes) == 1:
                n_unique += 0 < relevant[rows].sum() < relevant[rows].size
                np.testing.assert_allclose(grad[rows], slopes[0], atol=1e-13, err_msg=where)
    assert n_unique > 150  # queries of both classes with one maximiser (215 and 217 here)


def test_subgradient_inequality_against_brute_force():
    rng = np.random.default_rng(3)
    loss = losses.get("map")
    for _ in range(300):
        f, y, ptr = random_batch(rng, [2, 3, 4, 5, 6])
        _, grad = evaluate(loss, f, y, ptr)
        f2 = f + rng.normal(size=f.size) * rng.choice([0.01, 0.3, 3.0])
        for q in range(ptr.size - 1):
            rows = slice(ptr[q], ptr[q + 1])
            value, _ = brute_force(f[rows], y[rows] > 0)
            value2, _ = brute_force(f2[rows], y[rows] > 0)
            assert value2 >= value + grad[rows] @ (f2[rows] - f[rows]) - 1e-12


@pytest.mark.parametrize("sizes", [[7, 12, 30, 80], [300, 1000, 4000]])
def test_interleaving_programme_on_larger_queries(sizes):
    """The divide and conquer against an exhaustive search over interleavings, queries of up
    to 4,000 documents with many tied scores (relevant shares from a few to most)."""
    rng = np.random.default_rng(4 + len(sizes) * sizes[0])
    loss = losses.get("map")
    for _ in range(300 if sizes[0] < 100 else 15):
        f, y, ptr = random_batch(rng, sizes, levels=int(rng.integers(2, 5)))
        f *= rng.choice([0.01, 1.0, 30.0])
        values, _ = evaluate(loss, f, y, ptr)
        for q in range(ptr.size - 1):
            rows = slice(ptr[q], ptr[q + 1])
            expected = interleaving_dp(f[rows], y[rows] > 0)
            assert values[q] == pytest.approx(expected, rel=1e-11, abs=1e-12)


def test_special_values():
    loss = losses.get("map")
    ptr = np.array([0, 1, 4, 7, 10])
    y = np.array([2, 0, 0, 0, 1, 2, 1, 0, 1, 0])
    # one document; all non-relevant; all relevant; and a query ranked perfectly with margin
    f = np.array([0.3, 1.0, 2.0, 2.0, 0.0, 5.0, -1.0, 0.0, 0.0, 0.0])
    f[7:] = [0.0, 1e6, 0.0]
    values, grad = evaluate(loss, f, y, ptr)
    assert values.tolist() == [0.0, 0.0, 0.0, 0.0]
    assert not grad.any()
    # all scores tied: the worst ranking, non-relevant first, with no score term
    f = np.zeros(3)
    values, _ = evaluate(loss, f, np.array([1, 0, 0]), np.array([0, 3]))
    assert values[0] == pytest.approx(1.0 - 1.0 / 3.0, rel=1e-15)


def test_independent_of_listing_order_even_at_tied_scores():
    rng = np.random.default_rng(5)
    loss = losses.get("map")
    for _ in range(200):
        f, y, ptr = random_batch(rng, [3, 6, 20])
        perm = np.concatenate(
            [ptr[q] + rng.permutation(ptr[q + 1] - ptr[q]) for q in range(ptr.size - 1)]
        )
        values, grad = evaluate(loss, f, y, ptr)
        values_p, grad_p = evaluate(loss, f[perm], y[perm], ptr)
        np.testing.assert_array_equal(values_p, values)
        np.testing.assert_allclose(grad_p, grad[perm], rtol=1e-14, atol=1e-15)


def test_metric_is_one_minus_average_precision():
    rng = np.random.default_rng(6)
    loss = losses.get("map")
    for _ in range(100):
        f, y, ptr = random_batch(rng, [1, 4, 9, 25])
        targets = loss.validate(y, ptr)
        qid = np.repeat(np.arange(ptr.size - 1), np.diff(ptr))
        # distinct scores: losses.metrics.map_score per query
        g = rng.permutation(f.size).astype(np.float64)
        ap = map_score(y, g, qid, per_query=True)
        rel = np.add.reduceat(y > 0, ptr[:-1]) if f.size else np.zeros(0)
        live = (rel > 0) & (rel < np.diff(ptr))
        np.testing.assert_allclose(loss.metric(g, targets), np.where(live, 1.0 - ap, 0.0))
        # tied scores: the worst tie-breaking, from the definition
        metric = loss.metric(f, targets)
        for q in range(ptr.size - 1):
            rows = slice(ptr[q], ptr[q + 1])
            r = y[rows] > 0
            worst = np.lexsort((r, -f[rows]))
            expected = 1.0 - average_precision(r[worst]) if live[q] else 0.0
            assert metric[q] == pytest.approx(expected, rel=1e-13, abs=1e-15)
            assert evaluate(loss, f[rows], y[rows], np.array([0, r.size]))[0][0] >= (
                expected - 1e-12
            )


@pytest.mark.parametrize(
    "name, params",
    [
        ("ndcg", {"average_precision": 0.7}),
        ("ndcg", {"k": 3, "ties": "increasing", "average_precision": 2.0, "pairwise": 0.5}),
        ("ndcg", {"k": 4, "ties": "pairs", "average_precision": 1.0}),
        ("neru", {"d": 1.0, "average_precision": 0.3}),
    ],
)
def test_added_term_is_the_map_loss_on_positive_gains(name, params):
    """l_ν = l + ν · l_AP with the documents of positive gain relevant (NERU: labels above d),
    values and subgradient, the latent loss's convex surrogate included."""
    rng = np.random.default_rng(7)
    mixed = losses.get(name, **params)
    plain = losses.get(name, **{**params, "average_precision": 0.0})
    nu = params["average_precision"]
    threshold = 1 if name == "ndcg" else None
    for _ in range(60):
        f, y, ptr = random_batch(rng, [1, 2, 5, 9, 14], levels=4)
        if name == "neru":  # relevant: y > d = 1
            relevant_y = (y > 1).astype(np.int64)
        else:
            relevant_y = y
        ap_values, ap_grad = evaluate(losses.get("map", threshold=threshold), f, relevant_y, ptr)
        t_mixed, t_plain = mixed.validate(y, ptr), plain.validate(y, ptr)
        if mixed.latent:
            f0 = f + rng.normal(size=f.size)
            t_mixed, t_plain = mixed.convexify(f0, t_mixed), plain.convexify(f0, t_plain)
        values, grad = mixed.loss_grad(f, t_mixed)
        values0, grad0 = plain.loss_grad(f, t_plain)
        np.testing.assert_allclose(values, values0 + nu * ap_values, rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(grad, grad0 + nu * ap_grad, rtol=1e-13, atol=1e-14)


def test_fit_with_the_added_term_descends_the_latent_objective():
    """Trained by the concave-convex procedure like the latent loss alone; the result's
    objective is the mixed loss's at its w, and the AP term lowers 1 − MAP on the data."""
    rng = np.random.default_rng(8)
    sizes = rng.integers(5, 15, 60)
    qid = np.repeat(np.arange(sizes.size), sizes)
    X = rng.normal(size=(qid.size, 6))
    y = np.clip(np.round(X @ rng.normal(size=6) * 0.5 + rng.normal(size=qid.size)), 0, 3)
    y = y.astype(np.int64)
    model = bmrm.fit(X, y, "ndcg", qid, lam=1e-2, tol=1e-6, loss_params={"average_precision": 1.0})
    assert model.result_.success, model.result_.message
    loss = losses.get("ndcg", average_precision=1.0)
    risk, _ = losses.risk(loss, X @ model.coef_, y, qid)
    J = 0.5e-2 * model.coef_ @ model.coef_ + risk
    assert model.result_.fun == pytest.approx(J, rel=1e-9)


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="threshold must be a finite number"):
        losses.get("map", threshold=float("nan"))
    with pytest.raises(ValueError, match="threshold must be a finite number"):
        losses.get("map", threshold="1")
    with pytest.raises(ValueError, match="average_precision must be >= 0"):
        losses.get("ndcg", average_precision=-1.0)
    with pytest.raises(ValueError, match="average_precision must be a finite number"):
        losses.get("neru", average_precision=float("inf"))
    with pytest.raises(ValueError, match="takes no data keywords"):
        losses.get("map").validate(np.zeros(2), np.array([0, 2]), pairs=None)
    with pytest.raises(ValueError, match="y must not contain NaN"):
        losses.get("map").validate(np.array([0.0, np.nan]), np.array([0, 2]))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_scores_give_nan_for_their_query(bad):
    loss = losses.get("map")
    ptr = np.array([0, 4, 8])
    y = np.array([1, 0, 1, 0, 1, 0, 0, 2])
    f = np.array([0.3, 1.0, -2.0, 0.5, 0.2, 0.1, -0.4, 1.5])
    targets = loss.validate(y, ptr)
    clean_values, clean_grad = loss.loss_grad(f, targets)
    f[1] = bad
    values, grad = loss.loss_grad(f, targets)
    assert np.isnan(values[0]) and np.all(np.isnan(grad[:4]))
    assert values[1] == clean_values[1]
    np.testing.assert_array_equal(grad[4:], clean_grad[4:])
    metric = loss.metric(f, targets)
    assert np.isnan(metric[0]) and metric[1] == loss.metric(np.nan_to_num(f), targets)[1]


class _NaNScorer:
    """f = Xw with the first row's score NaN: a broken user scorer."""

    name = "nan"

    def n_params(self, d):
        return d

    def scores(self, X, theta):
        f = X @ theta
        f[0] = np.nan
        return f

    def from_linear(self, w):
        return np.asarray(w, dtype=float).ravel()

    def linearize(self, X, theta):
        return self.scores(X, theta), (lambda g: X.T @ g)


@pytest.mark.parametrize(
    "loss, params", [("map", {}), ("ndcg", {"average_precision": 1.0}), ("ndcg", {})]
)
def test_a_fit_from_nan_scores_is_refused(loss, params):
    """The solver refuses a NaN risk by name; the loss never hands it a finite one."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    qid = np.repeat(np.arange(6), 10)
    y = (X @ [1.0, -1.0, 0.5] > 0).astype(int)
    with pytest.raises(FloatingPointError):
        bmrm.fit(
            X,
            y,
            loss,
            qid,
            lam=1e-2,
            ranking_function=_NaNScorer(),
            method="nrbm",
            loss_params=params,
        )

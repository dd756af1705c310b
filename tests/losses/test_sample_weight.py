"""The weighted risk R = Σ_t s_t l_t / Σ_t s_t of every built-in loss, against references.

References, computed without the weights code: each term (a query, or a row of a pointwise
loss) evaluated alone by ``losses.risk`` and combined here; the unweighted risk of the data
with each term repeated as often as its integer weight says (and left out at weight 0).
Every loss of the shared property suite, on query sets with one-document queries, ties and
a query whose labels are all equal, rows shuffled across queries.
"""

import numpy as np
import pytest

import losses
from losses.preference import pairs_from_labels
from tests.losses.test_properties import (  # noqa: F401 (one_thread: autouse, one numba thread)
    CASE_PARAMS,
    make_problem,
    one_thread,
    random_scores,
)


def shuffled(case, seed, layout="small"):
    """A problem of ``case`` with its rows in random order, weights per term (integers
    0..3, at least one positive) spread to the rows, and scores with ties."""
    rng = np.random.default_rng([seed, 17])
    prob = make_problem(case, rng, layout)
    n = len(prob.y)
    loss = case.loss()
    if loss.pointwise:
        term_of_row = np.arange(n)
    else:
        term_of_row = np.repeat(np.arange(len(prob.query_ptr) - 1), np.diff(prob.query_ptr))
    term_w = rng.integers(0, 4, term_of_row.max() + 1).astype(np.float64)
    term_w[rng.integers(term_w.size)] = 2.0
    order = rng.permutation(n)
    inverse = np.argsort(order)
    data = dict(prob.data)
    if "pairs" in data:
        data["pairs"] = inverse[data["pairs"]]
    f = random_scores(rng, n, ties=True)
    return (
        loss,
        f[order],
        prob.y[order],
        prob.qid[order],
        term_w[term_of_row][order],
        data,
        term_of_row[order],
    )


def one_term(loss, f, y, qid, data, rows):
    """``losses.risk`` of the rows ``rows`` alone (one term), with their pairs."""
    sub = {}
    if "pairs" in data:
        index = np.full(len(y), -1)
        index[rows] = np.arange(len(rows))
        keep = np.all(np.isin(data["pairs"], rows), axis=1)
        sub = {"pairs": index[data["pairs"][keep]], "pair_costs": data["pair_costs"][keep]}
    return losses.risk(loss, f[rows], y[rows], qid[rows], **sub)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("case", CASE_PARAMS)
def test_weighted_risk_is_the_weighted_mean_of_terms(case, seed):
    loss, f, y, qid, s, data, term = shuffled(case, seed)
    R, g = losses.risk(loss, f, y, qid, sample_weight=s, **data)
    total = 0.0
    g_ref = np.zeros(len(f))
    s_sum = 0.0
    for t in np.unique(term):
        rows = np.flatnonzero(term == t)
        value, grad = one_term(loss, f, y, qid, data, rows)
        weight = s[rows[0]]
        total += weight * value
        s_sum += weight
        g_ref[rows] = weight * grad
    np.testing.assert_allclose(R, total / s_sum, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(g, g_ref / s_sum, rtol=1e-12, atol=1e-15)


def repeat_terms(loss, y, qid, s, data, term):
    """Row indices of the data with term t repeated s_t times (new query ids for the
    copies of a query), the copies' query ids and the pairs mapped to them."""
    rows, new_qid, pairs, costs = [], [], [], []
    for t in np.unique(term):
        members = np.flatnonzero(term == t)
        for copy in range(int(s[members[0]])):
            start = sum(len(r) for r in rows)
            rows.append(members)
            new_qid.append(np.full(len(members), 1000 * (copy + 1) + t))
            if "pairs" in data:
                index = np.full(len(y), -1)
                index[members] = start + np.arange(len(members))
                keep = np.all(np.isin(data["pairs"], members), axis=1)
                pairs.append(index[data["pairs"][keep]])
                costs.append(data["pair_costs"][keep])
    rows = np.concatenate(rows)
    new_data = {}
    if "pairs" in data:
        new_data = {"pairs": np.concatenate(pairs), "pair_costs": np.concatenate(costs)}
    return rows, np.concatenate(new_qid), new_data


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("case", CASE_PARAMS)
def test_integer_weights_repeat_terms(case, seed):
    loss, f, y, qid, s, data, term = shuffled(case, seed)
    R, g = losses.risk(loss, f, y, qid, sample_weight=s, **data)
    rows, qid_rep, data_rep = repeat_terms(loss, y, qid, s, data, term)
    R_rep, g_rep = losses.risk(loss, f[rows], y[rows], qid_rep, **data_rep)
    np.testing.assert_allclose(R, R_rep, rtol=1e-12, atol=1e-15)
    # a row's gradient in the weighted risk is the sum over its copies
    g_sum = np.zeros(len(f))
    np.add.at(g_sum, rows, g_rep)
    np.testing.assert_allclose(g, g_sum, rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_equal_weights_are_the_unweighted_risk_bit_for_bit(case):
    loss, f, y, qid, _, data, _ = shuffled(case, 0)
    R, g = losses.risk(loss, f, y, qid, **data)
    for c in (1.0, 0.1, 7):
        Rw, gw = losses.risk(loss, f, y, qid, sample_weight=np.full(len(f), c), **data)
        assert Rw == R
        np.testing.assert_array_equal(gw, g)


@pytest.mark.parametrize("name", ["ordinal", "ndcg", "squared"])
def test_prepared_divisor_and_term_weights(name):
    rng = np.random.default_rng(5)
    qid = np.array([4, 4, 9, 9, 9, 2])
    y = rng.integers(0, 3, 6) if name != "squared" else rng.normal(size=6)
    s = np.array([2.0, 2.0, 0.0, 0.0, 0.0, 0.5])
    prepared = losses.prepare(name, y, qid, sample_weight=s)
    if name == "squared":
        np.testing.assert_array_equal(prepared.weights.terms, s)  # rows already grouped
        assert prepared.divisor == s.sum()
    else:
        np.testing.assert_array_equal(prepared.weights.terms, [2.0, 0.0, 0.5])
        np.testing.assert_array_equal(prepared.weights.rows, s)
        assert prepared.divisor == 2.5
    assert losses.prepare(name, y, qid, sample_weight=np.ones(6)).weights is None
    assert losses.prepare(name, y, qid).divisor == prepared.n_terms


BAD = [
    (np.ones(5), r"must be 1-d with one weight per row \(6 rows\); got shape \(5,\)"),
    (np.ones((6, 1)), r"got shape \(6, 1\)"),
    (np.array(["a"] * 6), "sample_weight must hold real numbers .* got dtype <U1"),
    (np.array([1, 1, np.nan, 1, 1, 1]), "sample_weight must not contain NaN or inf"),
    (np.array([1, 1, np.inf, 1, 1, 1]), "sample_weight must not contain NaN or inf"),
    (np.array([1, 1, 1, -0.5, 1, 1]), r"sample_weight must be non-negative; got -0.5 at row 3"),
    (np.zeros(6), "sample_weight is all zero: at least one row needs a positive weight"),
    (np.array([1e308] * 5 + [1.0]), "sample_weight is too large: its sum overflows float64"),
    ([[1, 2], [3]], "sample_weight must be a 1-d array of numbers"),
]


@pytest.mark.parametrize("bad, message", BAD)
def test_bad_weights_are_named(bad, message):
    y = np.array([0, 1, 2, 0, 1, 1])
    qid = np.array([1, 1, 1, 2, 2, 3])
    with pytest.raises(ValueError, match=message):
        losses.risk("ordinal", np.zeros(6), y, qid, sample_weight=bad)


def test_query_loss_needs_equal_weights_within_a_query():
    y = np.array([0, 1, 2, 0, 1, 1])
    qid = np.array(["b", "b", "b", "a", "a", "c"])  # "a" sorts first
    s = np.array([1.0, 1.0, 1.0, 2.0, 3.0, 1.0])
    message = r"equal within each query .* query 'a' has weights 2.0 and 3.0"
    with pytest.raises(ValueError, match=message):
        losses.risk("ndcg", np.zeros(6), y, qid, sample_weight=s)
    # a pointwise loss weighs rows: the same weights are valid
    R, _ = losses.risk("squared", np.zeros(6), y, qid, sample_weight=s)
    assert R == pytest.approx(0.5 * np.sum(s * y**2) / s.sum(), rel=1e-15)


def test_weights_left_as_they_were():
    y = np.array([0, 1, 2, 0, 1, 1])
    qid = np.array([1, 1, 1, 2, 2, 3])
    s = np.array([3, 3, 3, 1, 1, 0], dtype=np.int64)
    before = s.copy()
    pairs, costs = pairs_from_labels(y, qid)
    losses.risk("preference", np.arange(6.0), y, qid, sample_weight=s, pairs=pairs)
    np.testing.assert_array_equal(s, before)
    assert costs.size  # the pairs exist, so the weighted terms were evaluated

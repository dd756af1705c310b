"""The ordinal loss with row weights (``row_weight=``): each pair weighs s_i s_j.

References: the full pair matrices of every query (``reference_pairs``, no sorting and no
sweep), and the unweighted loss of the data with rows repeated as often as their integer
weights say; random queries with tied scores and labels, one-row queries, queries whose
labels are all equal, rows shuffled across queries, named costs and a cost matrix, and
queries long enough for the radix sort.
"""

import numpy as np
import pytest

import losses
from losses._kernels.sorting import RADIX_MIN
from tests.losses.reference_pairs import ordinal_query, split_queries
from tests.losses.test_properties import one_thread  # noqa: F401 (autouse: one numba thread)

COSTS = ["zero_one", "linear", [[0, 1, 4, 9], [0, 0, 2, 3], [0, 0, 0, 0.5], [0, 0, 0, 0]]]


def reference(f, y, qid, s, cost, normalize):
    queries = split_queries(qid, len(f))
    total, grad, count = 0.0, np.zeros(len(f)), 0.0
    for rows in queries:
        loss, g, mis = ordinal_query(f[rows], y[rows], cost, normalize, weights=s[rows])
        total += loss
        grad[rows] += g
        count += mis
    n = len(queries)
    return total / n, grad / n, count / n


def random_case(rng, max_size=9):
    n_queries = int(rng.integers(1, 6))
    sizes = rng.integers(1, max_size, n_queries)
    qid = np.repeat(rng.permutation(n_queries) * 5, sizes)
    n = qid.size
    y = rng.integers(0, 4, n)
    if n_queries > 1:
        y[qid == qid[0]] = 2  # a query whose labels are all equal
    f = np.round(rng.normal(size=n), 1)  # ties in scores, and pairs at the hinge
    s = rng.integers(0, 4, n) * rng.choice([1.0, 0.5, 1.25], n)
    order = rng.permutation(n)
    return f[order], y[order], qid[order], s[order]


@pytest.mark.parametrize("normalize", ["query", "none"])
@pytest.mark.parametrize("cost", COSTS, ids=["zero_one", "linear", "matrix"])
def test_weighted_loss_gradient_and_count_against_all_pairs(cost, normalize):
    rng = np.random.default_rng([len(str(cost)), len(normalize)])
    loss = losses.get("ordinal", cost=cost, normalize=normalize)
    for _ in range(400):
        f, y, qid, s = random_case(rng)
        R, g = losses.risk(loss, f, y, qid, row_weight=s)
        R_ref, g_ref, count_ref = reference(f, y, qid, s, cost, normalize)
        assert R == pytest.approx(R_ref, rel=1e-12, abs=1e-14)
        np.testing.assert_allclose(g, g_ref, rtol=1e-12, atol=1e-14)
        prepared = losses.prepare(loss, y, qid, row_weight=s)
        f_int = prepared.groups.to_internal(f)
        count = loss.metric(f_int, prepared.targets).mean()
        assert count == pytest.approx(count_ref, rel=1e-12, abs=1e-14)


def test_radix_sorted_query_with_weights():
    rng = np.random.default_rng(9)
    n = RADIX_MIN + 300
    f = np.round(rng.normal(size=n), 2)
    y = rng.integers(0, 5, n)
    s = rng.uniform(0, 2, n) * (rng.random(n) > 0.2)
    for cost in ("zero_one", "linear"):
        R, g = losses.risk(losses.get("ordinal", cost=cost), f, y, row_weight=s)
        R_ref, g_ref, _ = reference(f, y, None, s, cost, "query")
        assert R == pytest.approx(R_ref, rel=1e-11)
        np.testing.assert_allclose(g, g_ref, rtol=1e-10, atol=1e-13)


def test_integer_row_weights_are_repeated_rows():
    rng = np.random.default_rng(4)
    for _ in range(100):
        f, y, qid, s = random_case(rng)
        s = np.floor(s)
        rows = np.repeat(np.arange(len(f)), s.astype(np.int64))
        for cost in ("zero_one", "linear"):
            loss = losses.get("ordinal", cost=cost)
            R, g = losses.risk(loss, f, y, qid, row_weight=s)
            R_rep, g_rep = losses.risk(loss, f[rows], y[rows], qid[rows])
            # queries whose rows all weigh 0 vanish from the repeated data but count (as
            # zeros) in the weighted mean over queries
            n_q, n_q_rep = len(np.unique(qid)), len(np.unique(qid[rows]))
            if n_q_rep == 0:
                assert R == 0.0
                continue
            assert R * n_q == pytest.approx(R_rep * n_q_rep, rel=1e-12, abs=1e-14)
            g_sum = np.zeros(len(f))
            np.add.at(g_sum, rows, g_rep * n_q_rep)
            np.testing.assert_allclose(g * n_q, g_sum, rtol=1e-12, atol=1e-13)


def test_unit_weights_are_the_unweighted_loss_bit_for_bit():
    rng = np.random.default_rng(5)
    for _ in range(50):
        f, y, qid, _ = random_case(rng)
        for cost in COSTS:
            loss = losses.get("ordinal", cost=cost)
            R, g = losses.risk(loss, f, y, qid)
            Rw, gw = losses.risk(loss, f, y, qid, row_weight=np.ones(len(f)))
            assert Rw == R
            np.testing.assert_array_equal(gw, g)


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.ones(3), r"row_weight must be 1-d with one weight per row \(6 rows\)"),
        (np.array([1, 1, -1, 1, 1, 1]), "row_weight must be non-negative"),
        (np.array([1, 1, np.nan, 1, 1, 1]), "row_weight must not contain NaN or inf"),
        (np.array(["a"] * 6), "row_weight must hold real numbers"),
        (np.full(6, 1e160), "row_weight is too large"),
    ],
)
def test_bad_row_weights_are_named(bad, message):
    with pytest.raises(ValueError, match=message):
        losses.risk("ordinal", np.zeros(6), [0, 1, 2, 0, 1, 1], [1, 1, 1, 2, 2, 2], row_weight=bad)


def test_other_data_keywords_are_still_refused():
    with pytest.raises(ValueError, match="the ordinal loss takes no data keywords but row_weight"):
        losses.risk("ordinal", np.zeros(3), [0, 1, 2], pairs=np.zeros((0, 2), dtype=int))


def test_one_pass_oracle_with_row_weights_equals_two_passes():
    from tests.bmrm.test_sample_weight import one_and_two_pass

    rng = np.random.default_rng(8)
    qid = np.repeat(np.arange(40), rng.integers(1, 30, 40))
    n = qid.size
    X = rng.normal(size=(n, 7))
    y = rng.integers(0, 4, n)
    s = rng.integers(0, 3, n) * 0.75
    prepared = losses.prepare("ordinal", y, qid, row_weight=s)
    one_pass, two_pass = one_and_two_pass(X, prepared)
    w = rng.normal(size=7)
    (R1, a1), (R2, a2) = one_pass(w), two_pass(w)
    assert R1 == pytest.approx(R2, rel=1e-13)
    np.testing.assert_allclose(a1, a2, rtol=1e-12, atol=1e-14)
    R_ref, g_ref, _ = reference(X @ w, y, qid, s, "zero_one", "query")
    assert R1 == pytest.approx(R_ref, rel=1e-12)
    np.testing.assert_allclose(a1, X.T @ g_ref, rtol=1e-10, atol=1e-13)


def test_check_oracle_passes_with_row_weights():
    """The protocol checks (order invariance included: the weights follow their rows)."""
    rng = np.random.default_rng(11)
    qid = np.repeat(np.arange(6), [1, 3, 5, 2, 8, 4])
    y = rng.integers(0, 3, qid.size)
    s = rng.uniform(0.0, 2.0, qid.size)
    report = losses.check_oracle("ordinal", y, qid, row_weight=s)
    assert report.ok, report

"""The shortest-augmenting-path assignment solver against scipy.optimize.linear_sum_assignment."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit
from scipy.optimize import linear_sum_assignment

from losses._kernels.assignment import solve_assignment, solve_assignment_from
from losses._kernels.listwise import (
    _FLOW,
    _N_FLOAT,
    _N_INT,
    _PATH,
    _REMAINING,
    _SHORTEST,
    _U,
    _V,
    _tight_cycle,
)


def linear_assignment(cost):
    """Allocate the kernel's workspace and solve; returns ``(col_of_row, total)``."""
    n_rows, n_cols = cost.shape
    col_of_row = np.empty(n_rows, dtype=np.int64)
    total = solve_assignment(
        np.ascontiguousarray(cost),
        col_of_row,
        np.empty(n_rows),
        np.empty(n_cols),
        np.empty(n_cols),
        np.empty(n_cols, dtype=np.int64),
        np.empty(n_cols, dtype=np.int64),
        np.empty(n_cols, dtype=np.int64),
        np.empty(n_rows, dtype=np.bool_),
        np.empty(n_cols, dtype=np.bool_),
    )
    return col_of_row, total


def random_cost(rng, n_rows, n_cols, kind):
    shape = (n_rows, n_cols)
    if kind == "normal":
        return rng.normal(size=shape)
    if kind == "integer":
        return rng.integers(-2, 3, size=shape).astype(np.float64)
    if kind == "binary":
        return rng.integers(0, 2, size=shape).astype(np.float64)
    if kind == "rank_one":
        return np.outer(rng.normal(size=n_rows), rng.normal(size=n_cols))
    if kind == "rank_two_sorted":
        # The structure of the ranking losses: sorted position weights times scores/gains.
        c = np.sort(rng.exponential(size=n_rows))[::-1]
        a = np.sort(rng.exponential(size=n_rows))[::-1]
        return np.outer(a, rng.integers(0, 4, n_cols)) - np.outer(c, rng.normal(size=n_cols))
    if kind == "constant":
        return np.full(shape, rng.normal())
    if kind == "zeros":
        return np.zeros(shape)
    if kind == "huge_range":
        return rng.normal(size=shape) * 10.0 ** rng.integers(-6, 7, size=shape)
    raise ValueError(kind)


KINDS = [
    "normal",
    "integer",
    "binary",
    "rank_one",
    "rank_two_sorted",
    "constant",
    "zeros",
    "huge_range",
]


def check_against_scipy(cost):
    col_of_row, total = linear_assignment(cost)
    n_rows, n_cols = cost.shape
    assert col_of_row.shape == (n_rows,)
    assert np.all((col_of_row >= 0) & (col_of_row < n_cols))
    assert len(np.unique(col_of_row)) == n_rows
    rows, cols = linear_sum_assignment(cost)
    best = cost[rows, cols].sum()
    ours = cost[np.arange(n_rows), col_of_row].sum()
    scale = max(1.0, np.abs(cost).max()) * n_rows
    assert ours == pytest.approx(best, rel=1e-12, abs=1e-12 * scale)
    assert total == pytest.approx(ours, rel=1e-12, abs=1e-12 * scale)


@pytest.mark.parametrize("kind", KINDS)
def test_random_matrices_match_scipy(kind):
    rng = np.random.default_rng(KINDS.index(kind))
    for _ in range(300):
        n_rows = int(rng.integers(1, 13))
        n_cols = n_rows + int(rng.integers(0, 9))
        check_against_scipy(random_cost(rng, n_rows, n_cols, kind))


@pytest.mark.parametrize(
    "shape", [(1, 1), (1, 7), (5, 5), (3, 40), (60, 60), (40, 250), (200, 300)]
)
def test_shapes_match_scipy(shape):
    rng = np.random.default_rng(shape[0] * 1000 + shape[1])
    for kind in KINDS:
        check_against_scipy(random_cost(rng, *shape, kind))


def test_one_by_one():
    col_of_row, total = linear_assignment(np.array([[-3.5]]))
    assert col_of_row.tolist() == [0]
    assert total == -3.5


def test_identity_and_permutation_matrices():
    cost = 1.0 - np.eye(6)
    col_of_row, total = linear_assignment(cost)
    assert col_of_row.tolist() == list(range(6))
    assert total == 0.0
    perm = np.array([3, 0, 5, 1, 4, 2])
    col_of_row, total = linear_assignment(1.0 - np.eye(6)[perm])
    assert col_of_row.tolist() == perm.tolist()
    assert total == 0.0


def test_reused_oversized_workspace():
    """The kernel entry point accepts workspaces longer than needed and reused across calls."""
    rng = np.random.default_rng(7)
    size = 30
    col_of_row = np.full(size, -7, dtype=np.int64)
    u, v, shortest = np.full(size, 9.0), np.full(size, 9.0), np.full(size, 9.0)
    path, row_of_col, remaining = (np.full(size, 5, dtype=np.int64) for _ in range(3))
    row_done, col_done = np.ones(size, dtype=bool), np.ones(size, dtype=bool)
    for _ in range(200):
        n_rows = int(rng.integers(1, 10))
        n_cols = n_rows + int(rng.integers(0, 10))
        cost = random_cost(rng, n_rows, n_cols, KINDS[int(rng.integers(len(KINDS)))])
        total = solve_assignment(
            cost, col_of_row, u, v, shortest, path, row_of_col, remaining, row_done, col_done
        )
        rows, cols = linear_sum_assignment(cost)
        assert total == pytest.approx(cost[rows, cols].sum(), abs=1e-9)
        assert len(np.unique(col_of_row[:n_rows])) == n_rows


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda r: st.integers(r, r + 4).flatmap(
            lambda c: st.lists(
                st.lists(st.integers(-3, 3), min_size=c, max_size=c), min_size=r, max_size=r
            )
        )
    )
)
def test_integer_matrices_hypothesis(rows):
    check_against_scipy(np.array(rows, dtype=np.float64))


# ------------------------------------------------------------------------------------------
# solve_assignment_from: square problems from given column duals


def assignment_from(cost, v_start):
    """:func:`solve_assignment_from` with fresh workspaces; returns ``(col_of_row,
    row_of_col, total)`` and checks that ``v_start`` is left unchanged."""
    n = cost.shape[0]
    before = v_start.copy()
    col_of_row = np.empty(n, dtype=np.int64)
    row_of_col = np.empty(n, dtype=np.int64)
    total = solve_assignment_from(
        np.ascontiguousarray(cost),
        v_start,
        col_of_row,
        np.empty(n),
        np.empty(n),
        np.empty(n),
        np.empty(n, dtype=np.int64),
        row_of_col,
        np.empty(n, dtype=np.int64),
        np.empty(n, dtype=bool),
        np.empty(n, dtype=bool),
    )
    np.testing.assert_array_equal(v_start, before)
    return col_of_row, row_of_col, total


def score_part_duals(c, f_sorted):
    """The optimal column duals of −c_p f_t with f sorted descending (rows) and c
    non-increasing (columns), as the structured losses start from."""
    v = np.zeros(len(c))
    v[1:] = np.cumsum(f_sorted[1:] * (c[:-1] - c[1:]))
    return v


def random_duals(rng, n, cost):
    kind = int(rng.integers(5))
    if kind == 0:
        return np.zeros(n)
    if kind == 1:
        return rng.normal(size=n) * max(1.0, np.abs(cost).max())
    if kind == 2:
        return rng.integers(-2, 3, size=n).astype(np.float64)  # ties in the reduced costs
    if kind == 3:
        return np.full(n, 1e6)
    return np.cumsum(rng.exponential(size=n))  # increasing


def check_from_against_scipy(cost, v_start):
    n = cost.shape[0]
    col_of_row, row_of_col, total = assignment_from(cost, v_start)
    assert sorted(col_of_row.tolist()) == list(range(n))
    np.testing.assert_array_equal(row_of_col[col_of_row], np.arange(n))
    rows, cols = linear_sum_assignment(cost)
    best = cost[rows, cols].sum()
    ours = cost[np.arange(n), col_of_row].sum()
    scale = max(1.0, np.abs(cost).max(), np.abs(v_start).max()) * n
    assert ours == pytest.approx(best, rel=1e-12, abs=1e-12 * scale)
    assert total == pytest.approx(ours, rel=1e-12, abs=1e-12 * scale)


@pytest.mark.parametrize("kind", KINDS)
def test_from_duals_random_matrices_match_scipy(kind):
    """Any starting duals give an optimal assignment: zeros, random, tied, huge."""
    rng = np.random.default_rng(100 + KINDS.index(kind))
    for _ in range(300):
        n = int(rng.integers(1, 13))
        cost = random_cost(rng, n, n, kind)
        check_from_against_scipy(cost, random_duals(rng, n, cost))


@pytest.mark.parametrize("n", [1, 2, 5, 40, 120])
def test_from_duals_on_the_losses_costs_match_scipy(n):
    """The structured losses' costs a_p b_t / Z − c_p f_t (rows in score order, few gain
    levels, tied scores) from the score part's optimal duals, as the losses call it."""
    rng = np.random.default_rng(n)
    for trial in range(60 if n <= 40 else 10):
        c = np.sort(rng.exponential(size=n))[::-1]
        a = np.sort(rng.exponential(size=n))[::-1]
        f = rng.normal(size=n) * 10.0 ** rng.integers(-3, 2)
        if trial % 3 == 0:
            f = np.round(f)  # tied scores
        f = np.sort(f)[::-1]
        b = rng.integers(0, 5, size=n) / rng.uniform(1.0, 20.0)
        cost = np.outer(b, a) - np.outer(f, c)
        check_from_against_scipy(cost, score_part_duals(c, f))


def test_score_part_duals_are_optimal_for_the_score_part():
    """The duals the losses start from make sorting by score optimal for −c_p f_t: with
    u_t = min_p (cost[t, p] − v_p) every row's minimum is on the diagonal, so no row needs
    augmenting (the derivation in losses/_kernels/listwise.py's square path)."""
    rng = np.random.default_rng(9)
    for _ in range(200):
        n = int(rng.integers(1, 30))
        c = np.sort(rng.exponential(size=n))[::-1]
        f = np.sort(rng.normal(size=n))[::-1]
        cost = -np.outer(f, c)
        v = score_part_duals(c, f)
        reduced = cost - v[None, :]
        diagonal = np.diag(reduced)
        scale = max(1.0, np.abs(cost).max()) * n
        assert np.all(reduced >= diagonal[:, None] - 1e-12 * scale)
        col_of_row, _, total = assignment_from(cost, v)
        assert total == pytest.approx(np.trace(cost), abs=1e-12 * scale)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda n: st.tuples(
            st.lists(st.lists(st.integers(-3, 3), min_size=n, max_size=n), min_size=n, max_size=n),
            st.lists(st.integers(-3, 3), min_size=n, max_size=n),
        )
    )
)
def test_from_duals_integer_matrices_hypothesis(case):
    rows, duals = case
    check_from_against_scipy(np.array(rows, dtype=np.float64), np.array(duals, dtype=np.float64))


# ------------------------------------------------------------------------------------------
# the certificate that a square assignment is the unique optimum by a margin


@njit
def _solve_and_certify(cost, v_start, tol):
    m = cost.shape[0]
    iw = np.empty((_N_INT, m + 1), dtype=np.int64)
    fw = np.empty((_N_FLOAT, m))
    bw = np.empty((2, m), dtype=np.bool_)
    owner = np.empty(m + 1, dtype=np.int64)
    # as structured_loss calls it: each row's column in iw[_FLOW], the duals in fw[_U], fw[_V]
    solve_assignment_from(
        cost, v_start, iw[_FLOW], fw[_U], fw[_V], fw[_SHORTEST], iw[_PATH], owner,
        iw[_REMAINING], bw[0], bw[1],
    )  # fmt: skip
    return _tight_cycle(cost, tol, iw, fw, owner), iw[_FLOW][:m].copy()


@pytest.mark.parametrize("integer", [True, False])
def test_tight_cycle_against_every_permutation(integer):
    """No cycle of reduced costs below tol: every other assignment costs at least tol more
    than the one found (brute force over all permutations). A cycle: some other assignment
    costs at most m·tol more. Integer costs (exact ties, tol 0.5 and 1e-9) and continuous
    ones with planted near-ties, from random starting duals."""
    rng = np.random.default_rng(41 if integer else 42)
    seen = {True: 0, False: 0}
    for _ in range(600):
        m = int(rng.integers(2, 7))
        if integer:
            cost = rng.integers(-3, 4, size=(m, m)).astype(np.float64)
            tol = float(rng.choice([0.5, 1e-9]))
        else:
            cost = rng.normal(size=(m, m))
            if rng.random() < 0.5:
                # a second optimum within 1e-12: swapping the columns of two rows of an
                # optimal assignment costs the same, up to that
                _, opt = linear_sum_assignment(cost)
                i, j = rng.choice(m, size=2, replace=False)
                cost[i, opt[j]] = (
                    cost[i, opt[i]] + cost[j, opt[j]] - cost[j, opt[i]] + rng.normal() * 1e-12
                )
            tol = float(rng.choice([1e-9, 1e-3]))
        v_start = random_duals(rng, m, cost)
        cycle, col = _solve_and_certify(cost, v_start, tol)
        every = [(list(perm), cost[np.arange(m), list(perm)].sum()) for perm in
                 itertools.permutations(range(m))]  # fmt: skip
        ours = cost[np.arange(m), col].sum()
        assert ours == pytest.approx(min(x for _, x in every), abs=1e-9)
        others = min(x for perm, x in every if perm != col.tolist())
        if cycle:
            assert others <= ours + m * tol + 1e-12
        else:
            assert others >= ours + tol - 1e-12
        seen[bool(cycle)] += 1
    assert min(seen.values()) > 50

"""The shortest-augmenting-path assignment solver against scipy.optimize.linear_sum_assignment."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment

from losses._kernels.assignment import solve_assignment


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

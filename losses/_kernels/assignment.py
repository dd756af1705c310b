"""Rectangular linear assignment by shortest augmenting paths (Jonker–Volgenant family).

Given a cost matrix ``C`` of shape ``(n_rows, n_cols)`` with ``n_rows <= n_cols``, find an
injective map ``col_of_row`` from rows to columns minimising ``Σ_i C[i, col_of_row[i]]``.

Method
------
Successive shortest augmenting paths with dual variables, as in Jonker & Volgenant (1987)
and its rectangular form (Crouse, 2016). The duals ``u`` (rows) and ``v`` (columns) keep
every reduced cost ``C[i, j] - u[i] - v[j]`` non-negative and zero on assigned pairs. Rows
are added one at a time: a Dijkstra search over columns, with reduced costs as arc lengths,
finds the cheapest alternating path from the new row to a free column; the path is flipped
and the duals of the scanned rows and columns are shifted so the invariant survives. Free
columns are never scanned except as the sink, so their duals stay at zero, which is what
makes the rectangular case optimal (a free column with a positive dual would be a cheaper
target that the search could not see). After the last row, complementary slackness holds
and the assignment is optimal.

Among columns at the same tentative distance a free one is taken first, so a path ends as
soon as it can; this only matters for speed on problems with ties.

:func:`solve_assignment_from` solves a square problem from given column duals instead of
zeros: every row's dual is its smallest reduced cost (so the duals are feasible), a row
whose cheapest column is still free takes it, and only the remaining rows are augmented
as above. The result is optimal whatever the given duals; good ones (near optimal for the
costs) leave few rows to augment.

Complexity: ``O(n_rows² · n_cols)`` in the worst case, ``O(n_rows · n_cols)`` memory for the
matrix plus ``O(n_rows + n_cols)`` workspace.

References
----------
R. Jonker and A. Volgenant, "A shortest augmenting path algorithm for dense and sparse
linear assignment problems", Computing 38 (1987) 325–340.
D. F. Crouse, "On implementing 2D rectangular assignment algorithms", IEEE Transactions on
Aerospace and Electronic Systems 52 (2016) 1679–1696.
"""

import numpy as np
from numba import njit

from losses._kernels import INNER, OUTER


@njit(inline="always", **INNER)
def _augment(
    cur, cost, col_of_row, u, v, shortest, path, row_of_col, remaining, row_done, col_done
):
    """Assign the free row ``cur`` by the cheapest alternating path to a free column
    (Dijkstra on reduced costs) and shift the duals of the rows and columns it scanned.

    On entry the duals are feasible for every row but ``cur`` (reduced costs
    ``cost[i, j] - u[i] - v[j] >= 0``) and zero on every assigned pair; both hold for all
    rows on return.
    """
    n_rows, n_cols = cost.shape
    for i in range(n_rows):
        row_done[i] = False
    for j in range(n_cols):
        shortest[j] = np.inf
        col_done[j] = False
        remaining[j] = n_cols - 1 - j
    n_remaining = n_cols
    min_val = 0.0
    i = cur
    sink = -1
    while sink == -1:
        row_done[i] = True
        best = -1
        lowest = np.inf
        base = min_val - u[i]
        for it in range(n_remaining):
            j = remaining[it]
            r = base + cost[i, j] - v[j]
            s = shortest[j]
            if r < s:
                path[j] = i
                shortest[j] = r
                s = r
            if s < lowest or (s == lowest and row_of_col[j] == -1):
                lowest = s
                best = it
        min_val = lowest
        j = remaining[best]
        col_done[j] = True
        n_remaining -= 1
        remaining[best] = remaining[n_remaining]
        if row_of_col[j] == -1:
            sink = j
        else:
            i = row_of_col[j]

    u[cur] += min_val
    for i in range(n_rows):
        if row_done[i] and i != cur:
            u[i] += min_val - shortest[col_of_row[i]]
    for j in range(n_cols):
        if col_done[j]:
            v[j] -= min_val - shortest[j]

    j = sink
    while True:
        i = path[j]
        row_of_col[j] = i
        previous = col_of_row[i]
        col_of_row[i] = j
        j = previous
        if i == cur:
            break


@njit(**OUTER)
def solve_assignment(
    cost, col_of_row, u, v, shortest, path, row_of_col, remaining, row_done, col_done
):
    """Minimum-cost assignment of every row of ``cost`` to a distinct column.

    Parameters
    ----------
    cost : float64 array of shape (n_rows, n_cols), n_rows <= n_cols
        Finite costs.
    col_of_row : int64 array, length >= n_rows
        Output: ``col_of_row[i]`` is the column given to row ``i``.
    u : float64 array, length >= n_rows
        Workspace (row duals).
    v, shortest : float64 arrays, length >= n_cols
        Workspace (column duals, tentative path lengths).
    path, remaining : int64 arrays, length >= n_cols
        Workspace (predecessor rows, unscanned columns).
    row_of_col : int64 array, length >= n_cols
        Output: the row given to each column, -1 for unassigned columns.
    row_done : bool array, length >= n_rows
        Workspace (rows reached by the current search).
    col_done : bool array, length >= n_cols
        Workspace (columns scanned by the current search).

    Returns
    -------
    total : float
        The minimum total cost ``Σ_i cost[i, col_of_row[i]]``.
    """
    n_rows, n_cols = cost.shape
    for i in range(n_rows):
        u[i] = 0.0
        col_of_row[i] = -1
    for j in range(n_cols):
        v[j] = 0.0
        row_of_col[j] = -1
    for cur in range(n_rows):
        _augment(
            cur, cost, col_of_row, u, v, shortest, path, row_of_col, remaining, row_done, col_done
        )
    total = 0.0
    for i in range(n_rows):
        total += cost[i, col_of_row[i]]
    return total


@njit(**OUTER)
def solve_assignment_from(
    cost, v_start, col_of_row, u, v, shortest, path, row_of_col, remaining, row_done, col_done
):
    """:func:`solve_assignment` for a square ``cost``, starting from the column duals
    ``v_start`` (module docstring); the other parameters and the result are the same.

    ``v_start`` : float64 array, length >= n (any finite values; not modified).
    """
    n = cost.shape[0]
    for j in range(n):
        v[j] = v_start[j]
        row_of_col[j] = -1
    for i in range(n):
        best = np.inf
        col = 0
        for j in range(n):
            r = cost[i, j] - v[j]
            if r < best:
                best = r
                col = j
        u[i] = best
        col_of_row[i] = -1
        if row_of_col[col] == -1:
            row_of_col[col] = i
            col_of_row[i] = col
    for cur in range(n):
        if col_of_row[cur] == -1:
            _augment(
                cur, cost, col_of_row, u, v, shortest, path, row_of_col, remaining, row_done,
                col_done,
            )  # fmt: skip
    total = 0.0
    for i in range(n):
        total += cost[i, col_of_row[i]]
    return total

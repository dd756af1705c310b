"""The dual of the L2 master problem: a convex QP over the probability simplex.

For planes ``(a_i, b_i)`` the L2 master problem

    min_w  lam/2 ‖w‖² + max_i (⟨a_i, w⟩ + b_i)

has the dual (Teo et al., JMLR 2010, eq. 13)

    max_{α ∈ Δ}  bᵀα − 1/(2 lam) αᵀGα,     G_ij = ⟨a_i, a_j⟩,

with ``w = −Aᵀα / lam``. :func:`solve_simplex_qp` minimises ½αᵀQα − bᵀα over the simplex
(Q = G/lam) by sequential minimal optimisation: each step moves weight between the pair of
coordinates chosen by second-order working-set selection (Fan, Chen & Lin, JMLR 2005), the
update being exact along that pair. Singular Q (duplicate or collinear planes) needs no
special case: a flat pair direction moves all the weight it can. The stopping rule is the
simplex KKT condition max_{α_i>0} ∇_i − min_j ∇_j ≤ tol.
"""

import numpy as np
from numba import njit


@njit(cache=True)
def solve_simplex_qp(Q, b, alpha, grad, tol, max_steps):
    """Minimise ½αᵀQα − bᵀα over {α ≥ 0, Σα = 1} in place.

    Parameters
    ----------
    Q : (k, k) float64, symmetric positive semidefinite.
    b : (k,) float64.
    alpha : (k,) float64
        A feasible starting point (warm start); overwritten by the solution.
    grad : (k,) float64
        Workspace; on return holds Qα − b.
    tol : float
        Stop when the KKT violation max_{α_i>0} grad_i − min_j grad_j is at most ``tol``.
    max_steps : int
        Upper bound on pair updates.

    Returns
    -------
    steps : int
        Pair updates taken.
    violation : float
        The final KKT violation.

    Notes
    -----
    One step costs O(k): the gradient is updated with two columns of Q. Cost O(k²) to
    initialise the gradient from the warm start.
    """
    k = b.shape[0]
    for i in range(k):
        s = -b[i]
        for j in range(k):
            s += Q[i, j] * alpha[j]
        grad[i] = s
    steps = 0
    violation = np.inf
    tiny = 1e-300
    while steps < max_steps:
        # i: the support coordinate with the largest gradient (weight leaves it)
        i = -1
        gmax = -np.inf
        gmin = np.inf
        for t in range(k):
            if alpha[t] > 0.0 and grad[t] > gmax:
                gmax = grad[t]
                i = t
            if grad[t] < gmin:
                gmin = grad[t]
        violation = gmax - gmin
        if violation <= tol:
            break
        # j: second-order choice among coordinates with a smaller gradient
        j = -1
        best = 0.0
        for t in range(k):
            d = gmax - grad[t]
            if d > 0.0:
                eta = Q[i, i] + Q[t, t] - 2.0 * Q[i, t]
                if eta <= tiny:
                    gain = np.inf
                else:
                    gain = d * d / eta
                if j < 0 or gain > best:
                    best = gain
                    j = t
        d = gmax - grad[j]
        eta = Q[i, i] + Q[j, j] - 2.0 * Q[i, j]
        if eta <= tiny:
            step = alpha[i]
        else:
            step = min(alpha[i], d / eta)
        if step <= 0.0:
            break
        alpha[i] -= step
        alpha[j] += step
        if alpha[i] < 0.0:
            alpha[i] = 0.0
        for t in range(k):
            grad[t] += step * (Q[t, j] - Q[t, i])
        steps += 1
    return steps, violation

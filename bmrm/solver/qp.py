"""The dual of the L2 master problem: a convex QP over the probability simplex.

For planes ``(a_i, b_i)`` the L2 master problem

    min_w  lam/2 ‖w‖² + max_i (⟨a_i, w⟩ + b_i)

has the dual (Teo et al., JMLR 2010, eq. 13)

    max_{α ∈ Δ}  bᵀα − 1/(2 lam) αᵀGα,     G_ij = ⟨a_i, a_j⟩,

with ``w = −Aᵀα / lam``. Two solvers minimise ½αᵀQα − bᵀα over the simplex (Q = G/lam):

* :func:`solve_simplex_qp_active_set` (and :func:`active_set`, :func:`master_step`, which
  the solver loop calls): an exact active-set method with Cholesky updates, warm-started
  from the previous weights and, inside a fit, from the previous factor. This is the one
  the package uses: compiled, and transcribed to NumPy (:func:`_active_set_numpy`) for a
  master's first :data:`SMALL_SOLVES` solves of bundles of at most :data:`SMALL_BUNDLE`
  planes, so that a short fit compiles none of the QP.
* :func:`solve_simplex_qp`: sequential minimal optimisation, each step moving weight between
  the pair of coordinates chosen by second-order working-set selection (Fan, Chen & Lin,
  JMLR 2005), exact along that pair. It converges linearly, slowly on ill-conditioned
  bundles; it remains as a fallback and as an independent check in the tests.

Both stop on the simplex KKT condition max_{α_i>0} ∇_i − min_j ∇_j ≤ tol, which bounds the
distance of the objective to its minimum.
"""

import numpy as np
from numba import njit
from scipy.linalg.lapack import dtrtrs

from losses.kernels import INNER_JIT_OPTIONS, JIT_OPTIONS


@njit(**JIT_OPTIONS)
def solve_simplex_qp(Q, b, alpha, grad, tol, max_steps):
    """Minimise ½αᵀQα − bᵀα over {α ≥ 0, Σα = 1} in place.

    Parameters
    ----------
    Q : ndarray of shape (k, k), float64
        Symmetric positive semidefinite.
    b : ndarray of shape (k,), float64
        The linear term.
    alpha : ndarray of shape (k,), float64
        A feasible starting point (warm start); overwritten by the solution.
    grad : ndarray of shape (k,), float64
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


# ---------------------------------------------------------------------------------------
# Exact active-set solver
# ---------------------------------------------------------------------------------------
# The helpers are compiled (and cached) as functions of their own: inlining them into the
# solver made its first compilation several times slower. Only compiled code calls them, so
# they get no Python entry point (INNER_JIT_OPTIONS), which saves part of their compilation. A
# non-finite answer (NumPy's error model: a division by zero gives inf or nan) goes to the
# vertex step of master_step, and any α of the simplex gives a valid bound.


@njit(**INNER_JIT_OPTIONS)
def _backward(L, s, rhs, out):
    """Solve L[:s, :s]ᵀ out = rhs (back substitution, by columns of L)."""
    for i in range(s):
        out[i] = rhs[i]
    for i in range(s - 1, -1, -1):
        out[i] /= L[i, i]
        x = out[i]
        for j in range(i):
            out[j] -= L[i, j] * x


@njit(**INNER_JIT_OPTIONS)
def _delete(L, s, r, zb, z1):
    """Remove row and column ``r`` from the Cholesky factor L[:s, :s] of P_SS, in place.

    Deleting row r of L leaves an (s−1) × s factor of the reduced matrix whose rows from r
    on carry one entry above the diagonal; Givens rotations G on column pairs (c, c+1) remove
    them (Golub & Van Loan, Matrix Computations, 4th ed., §6.5.4). The forward solutions
    zb = L⁻¹b_S and z1 = L⁻¹1 become Gᵀ zb and Gᵀ z1 without their last entry. O(s²).
    """
    for i in range(r, s - 1):
        for j in range(i + 2):
            L[i, j] = L[i + 1, j]
    for c in range(r, s - 1):
        x = L[c, c]
        y = L[c, c + 1]
        h = np.hypot(x, y)
        if h == 0.0:
            continue
        cs = x / h
        sn = y / h
        for i in range(c, s - 1):
            p = L[i, c]
            q = L[i, c + 1]
            L[i, c] = cs * p + sn * q
            L[i, c + 1] = cs * q - sn * p
        L[c, c + 1] = 0.0
        p = zb[c]
        q = zb[c + 1]
        zb[c] = cs * p + sn * q
        zb[c + 1] = cs * q - sn * p
        p = z1[c]
        q = z1[c + 1]
        z1[c] = cs * p + sn * q
        z1[c + 1] = cs * q - sn * p
    for j in range(s):
        L[s - 1, j] = 0.0


@njit(**INNER_JIT_OPTIONS)
def _pivot(Q, tau, S, s, L, j, lrow):
    """Row of the factor for coordinate j entering S: L lrow = P_Sj; returns the pivot δ²."""
    for r in range(s):
        v = Q[j, S[r]] + tau
        for t in range(r):
            v -= L[r, t] * lrow[t]
        lrow[r] = v / L[r, r]
    d2 = Q[j, j] + tau
    for r in range(s):
        d2 -= lrow[r] * lrow[r]
    return d2


@njit(**INNER_JIT_OPTIONS)
def _append(L, s, lrow, d, S, j, zb, z1, bj):
    for r in range(s):
        L[s, r] = lrow[r]
    L[s, s] = d
    S[s] = j
    vb = bj
    v1 = 1.0
    for r in range(s):
        vb -= lrow[r] * zb[r]
        v1 -= lrow[r] * z1[r]
    zb[s] = vb / d
    z1[s] = v1 / d


@njit(**INNER_JIT_OPTIONS)
def _drop_zeros(L, s, zb, z1, S, aS, inS, keep):
    """Remove from the working set every coordinate whose weight is at zero, keeping at
    least ``keep`` of them; returns the new size."""
    for r in range(s - 1, -1, -1):
        if aS[r] <= 0.0 and s > keep:
            _delete(L, s, r, zb, z1)
            inS[S[r]] = False
            for t in range(r, s - 1):
                S[t] = S[t + 1]
                aS[t] = aS[t + 1]
            s -= 1
    return s


@njit(**INNER_JIT_OPTIONS)
def _gradient(Q, b, S, aS, s, grad):
    """grad = Qα − b for α with weights aS[:s] on S[:s] (rows of the symmetric Q are
    contiguous)."""
    for i in range(b.shape[0]):
        grad[i] = -b[i]
    for r in range(s):
        a = aS[r]
        j = S[r]
        for i in range(b.shape[0]):
            grad[i] += Q[j, i] * a


def _active_set_numpy(Q, b, alpha, grad, tol, max_iter, L, S, s_given, tau):
    """:func:`active_set` in NumPy, for small bundles: the same method, arguments and results.

    Every step of the compiled method is carried over, each loop over the working set done
    by a NumPy operation: triangular solves for the factor's rows and the affine minimiser,
    Givens rotations column pair by column pair for a deletion (Golub & Van Loan, Matrix
    Computations, 4th ed., §6.5.4). Only the order of floating-point sums differs, so the
    two agree to round-off and stop on the same KKT test. ``L``, ``S`` and ``grad`` are
    updated in place as there.
    """
    k = b.shape[0]
    Qk = Q[:k, :k]
    inS = np.zeros(k, dtype=np.bool_)
    aS = np.zeros(k)
    zb = np.zeros(k)
    z1 = np.zeros(k)
    dep = 1e-12  # relative size of a pivot that marks affine dependence
    ones = np.ones(k)

    def lower(s, rhs):
        # L[:s, :s] x = rhs (LAPACK's triangular solve, without scipy.linalg's checks)
        return dtrtrs(L[:s, :s], rhs, lower=1)[0]

    def backward(s, rhs):
        # L[:s, :s]ᵀ x = rhs
        return dtrtrs(L[:s, :s], rhs, lower=1, trans=1)[0]

    def pivot(s, j):
        lrow = lower(s, Qk[j, S[:s]] + tau) if s else np.zeros(0)
        return Qk[j, j] + tau - float(lrow @ lrow), lrow

    def append(s, lrow, d, j):
        L[s, :s] = lrow
        L[s, s] = d
        S[s] = j
        zb[s] = (b[j] - float(lrow @ zb[:s])) / d
        z1[s] = (1.0 - float(lrow @ z1[:s])) / d
        inS[j] = True

    def delete(s, r):
        L[r : s - 1, :s] = L[r + 1 : s, :s]
        for c in range(r, s - 1):
            x, y = L[c, c], L[c, c + 1]
            h = np.hypot(x, y)
            if h == 0.0:
                continue
            cs, sn = x / h, y / h
            p, q = L[c : s - 1, c].copy(), L[c : s - 1, c + 1].copy()
            L[c : s - 1, c] = cs * p + sn * q
            L[c : s - 1, c + 1] = cs * q - sn * p
            L[c, c + 1] = 0.0
            for z in (zb, z1):
                p, q = z[c], z[c + 1]
                z[c], z[c + 1] = cs * p + sn * q, cs * q - sn * p
        L[s - 1, :s] = 0.0

    def drop_zeros(s, keep):
        for r in range(s - 1, -1, -1):
            if aS[r] <= 0.0 and s > keep:
                delete(s, r)
                inS[S[r]] = False
                S[r : s - 1] = S[r + 1 : s].copy()
                aS[r : s - 1] = aS[r + 1 : s].copy()
                s -= 1
        return s

    def gradient(s):
        grad[:k] = aS[:s] @ Qk[S[:s]] - b

    s = 0
    if s_given > 0:
        s = int(s_given)
        inS[S[:s]] = True
        aS[:s] = np.maximum(alpha[S[:s]], 0.0)
        zb[:s] = lower(s, b[S[:s]])
        z1[:s] = lower(s, ones[:s])
    else:
        # the support, heaviest first (equal weights by index), as far as it stays
        # affinely independent
        support = np.flatnonzero(alpha[:k] > 0.0)
        for j in support[np.argsort(-alpha[support], kind="stable")]:
            d2, lrow = pivot(s, j)
            if d2 <= dep * (Qk[j, j] + tau):
                continue
            append(s, lrow, np.sqrt(d2), j)
            aS[s] = alpha[j]
            s += 1
    if s == 0:
        # no usable warm start: the best vertex
        best = int(np.argmin(0.5 * np.diagonal(Qk) - b))
        append(0, np.zeros(0), np.sqrt(Qk[best, best] + tau), best)
        aS[0] = 1.0
        s = 1
    total = float(aS[:s].sum())
    if total <= 0.0:
        aS[:s] = 1.0 / s
        total = 1.0
    aS[:s] /= total

    iterations = 0
    while iterations < max_iter:
        # minor cycles: towards the affine minimiser over S, dropping blocked coordinates
        while iterations < max_iter:
            iterations += 1
            mu = (1.0 - float(z1[:s] @ zb[:s])) / float(z1[:s] @ z1[:s])
            y = backward(s, zb[:s] + mu * z1[:s])
            down = np.flatnonzero(y <= 0.0)
            if len(down) == 0:
                aS[:s] = y
                break
            steps = aS[down] / (aS[down] - y[down])
            block = int(down[np.argmin(steps)])
            theta = float(steps.min())
            aS[:s] += theta * (y - aS[:s])
            aS[block] = 0.0
            s = drop_zeros(s, 1)
        # major cycle: gradient, KKT test, entry
        gradient(s)
        positive = aS[:s] > 0.0
        gmax = float(grad[S[:s]][positive].max()) if positive.any() else -np.inf
        j = int(np.argmin(grad[:k]))
        if gmax - grad[j] <= tol or inS[j]:
            break
        # enter j; while it is affinely dependent on S, trade weight along the flat direction
        aj = 0.0
        while True:
            d2, lrow = pivot(s, j)
            pjj = Qk[j, j] + tau
            if d2 > dep * pjj or s == 0:
                append(s, lrow, np.sqrt(max(d2, dep * pjj)), j)
                aS[s] = aj
                s += 1
                break
            # c = L⁻ᵀ(lrow + ν z1) with ν making Σc = 1; its curvature is δ² + ν²‖z1‖²
            mm = float(z1[:s] @ z1[:s])
            nu = (1.0 - float(z1[:s] @ lrow)) / mm
            y = backward(s, lrow + nu * z1[:s])
            curv = max(d2, 0.0) + nu * nu * mm
            slope = grad[j] - float(y @ grad[S[:s]])
            up = np.flatnonzero(y > 0.0)
            theta, block = np.inf, -1
            if len(up):
                steps = aS[up] / y[up]
                block = int(up[np.argmin(steps)])
                theta = float(steps.min())
            inside = curv > 0.0 and -slope / curv < theta
            if inside:
                theta = max(-slope / curv, 0.0)
            elif block < 0:
                theta = 0.0
            aS[:s] = np.maximum(aS[:s] - theta * y, 0.0)
            aj += theta
            if inside or block < 0:
                # j enters with its pivot held at the dependence threshold
                append(s, lrow, np.sqrt(dep * pjj), j)
                aS[s] = aj
                s += 1
                break
            aS[block] = 0.0
            s = drop_zeros(s, 0)
            iterations += 1
            if iterations >= max_iter:
                break

    aS[:s] = np.maximum(aS[:s], 0.0)
    total = float(aS[:s].sum())
    alpha[:k] = 0.0
    aS[:s] /= total
    alpha[S[:s]] = aS[:s]
    gradient(s)
    positive = alpha[:k] > 0.0
    gmax = float(grad[:k][positive].max()) if positive.any() else -np.inf
    return iterations, gmax - float(grad[:k].min()), s


def solve_simplex_qp_active_set(Q, b, alpha, grad, tol, max_iter):
    """Minimise ½αᵀQα − bᵀα over {α ≥ 0, Σα = 1} exactly, in place, by an active-set method.

    The method is Wolfe's minimum-norm-point algorithm (Wolfe, Math. Programming 11, 1976)
    carried over to a general convex quadratic. The working set S is kept affinely
    independent, so the minimiser y of the objective over {Σα = 1, α_i = 0 off S} is unique.
    A *minor cycle* moves from the current point towards y and drops the coordinates that
    reach zero on the way; a *major cycle* adds the coordinate of smallest gradient while the
    KKT condition max_{α_i>0} ∇_i − min_j ∇_j ≤ tol fails.

    On the simplex ½αᵀQα differs from ½αᵀPα, P = Q + τ11ᵀ (τ > 0), by a constant, and P_SS
    is positive definite exactly when the planes in S are affinely independent. With the
    Cholesky factor P_SS = LLᵀ and the forward solutions zb = L⁻¹b_S, z1 = L⁻¹1 kept up to
    date (a new row on insertion, Givens rotations on deletion), the Lagrange conditions
    P_SS y = b_S + μ1, Σy = 1 give μ = (1 − z1·zb)/(z1·z1) and y = L⁻ᵀ(zb + μ z1): one
    triangular solve, O(|S|²), per cycle.

    A coordinate j that would make P_SS singular (a duplicate plane, or one in the affine
    hull of S) enters along the flat direction e_j − c, c = argmin_{Σc=1} (e_j − c)ᵀQ(e_j − c)
    over S, which keeps Σα fixed: an exact line search along it, which reaches the boundary
    when the direction is flat, and the blocking coordinate leaves S before j enters.

    Parameters
    ----------
    Q : ndarray of shape (k, k), float64
        Symmetric positive semidefinite.
    b : ndarray of shape (k,), float64
        The linear term.
    alpha : ndarray of shape (k,), float64
        A feasible starting point (warm start); overwritten by the solution.
    grad : ndarray of shape (k,), float64
        Workspace; on return holds Qα − b.
    tol : float
        KKT tolerance on max_{α_i>0} ∇_i − min_j ∇_j, which bounds the distance of the
        objective to its minimum.
    max_iter : int
        Upper bound on major plus minor cycles.

    Returns
    -------
    iterations : int
        Major plus minor cycles taken.
    violation : float
        The final KKT violation, from a freshly evaluated gradient.

    Notes
    -----
    A warm start with support s costs O(s³/6) to factor; a major cycle costs O(k·s) for the
    gradient and O(s²) for the rest.
    """
    k = b.shape[0]
    tau = float(np.max(np.diagonal(Q)[:k], initial=0.0))
    if tau <= 0.0:
        tau = 1.0
    L = np.zeros((k, k))
    S = np.empty(k, dtype=np.int64)
    iterations, violation, _ = active_set(Q, b, alpha, grad, tol, max_iter, L, S, 0, tau)
    return int(iterations), float(violation)


@njit(**JIT_OPTIONS)
def active_set(Q, b, alpha, grad, tol, max_iter, L, S, s_given, tau):
    """The method of :func:`solve_simplex_qp_active_set`, with its factor kept by the caller.

    Parameters
    ----------
    Q, b, alpha, grad, tol, max_iter
        As in :func:`solve_simplex_qp_active_set`, except that Q may be larger than k × k
        (k = len(b)): its leading k × k block is used, so a caller can pass a whole buffer
        and the function is compiled for one array layout only.
    L : (m, m) float64, m >= k
        Lower Cholesky factor of P_SS = Q_SS + τ11ᵀ in L[:s, :s]; updated in place.
    S : (m,) int64
        The working set in factor order in S[:s]; updated in place.
    s_given : int
        Rows of a factor already valid for this Q and τ (the previous call's, when its
        planes are still in the bundle, at their positions now in S[:s_given]); 0 builds
        one from the support of ``alpha``, heaviest first.
    tau : float
        τ > 0; must be the one L was built with.

    Returns
    -------
    iterations, violation
        As in :func:`solve_simplex_qp_active_set`.
    s : int
        The size of the final working set (S[:s], L[:s, :s]).
    """
    k = b.shape[0]
    inS = np.zeros(k, dtype=np.bool_)
    aS = np.empty(k)
    zb = np.empty(k)
    z1 = np.empty(k)
    y = np.empty(k)
    tmp = np.empty(k)
    lrow = np.empty(k)
    dep = 1e-12  # relative size of a pivot that marks affine dependence
    # int64 rather than integer literals: numba compiles a callee once more for every literal
    # type an argument takes during type inference, even a passing one
    zero = np.int64(0)
    one = np.int64(1)

    s = zero
    if s_given > 0:
        s = s_given
        for r in range(s):
            j = S[r]
            inS[j] = True
            aS[r] = max(alpha[j], 0.0)
            v = b[j]
            w = 1.0
            for t in range(r):
                v -= L[r, t] * zb[t]
                w -= L[r, t] * z1[t]
            zb[r] = v / L[r, r]
            z1[r] = w / L[r, r]
    else:
        # the support, heaviest first (equal weights by index), as far as it stays affinely
        # independent. An insertion sort of the support: O(s²) beside the O(s³) factor, and
        # it saves compiling a general sort into the solver
        order = np.empty(k, dtype=np.int64)
        n_support = 0
        for j in range(k):
            if alpha[j] > 0.0:
                t = n_support
                while t > 0 and alpha[order[t - 1]] < alpha[j]:
                    order[t] = order[t - 1]
                    t -= 1
                order[t] = j
                n_support += 1
        for t in range(n_support):
            j = order[t]
            d2 = _pivot(Q, tau, S, s, L, j, lrow)
            if d2 <= dep * (Q[j, j] + tau):
                continue
            _append(L, s, lrow, np.sqrt(d2), S, j, zb, z1, b[j])
            inS[j] = True
            aS[s] = alpha[j]
            s += 1
    if s == 0:
        # no usable warm start: the best vertex
        best = zero
        for j in range(1, k):
            if 0.5 * Q[j, j] - b[j] < 0.5 * Q[best, best] - b[best]:
                best = j
        _append(L, s, lrow, np.sqrt(Q[best, best] + tau), S, best, zb, z1, b[best])
        inS[best] = True
        aS[0] = 1.0
        s = 1
    total = 0.0
    for r in range(s):
        total += aS[r]
    if total <= 0.0:
        for r in range(s):
            aS[r] = 1.0 / s
        total = 1.0
    for r in range(s):
        aS[r] /= total

    iterations = 0
    while iterations < max_iter:
        # minor cycles: towards the affine minimiser over S, dropping blocked coordinates
        while iterations < max_iter:
            iterations += 1
            zz = 0.0
            zo = 0.0
            for r in range(s):
                zz += z1[r] * z1[r]
                zo += z1[r] * zb[r]
            mu = (1.0 - zo) / zz
            for r in range(s):
                tmp[r] = zb[r] + mu * z1[r]
            _backward(L, s, tmp, y)
            theta = 1.0
            block = -1
            for r in range(s):
                if y[r] <= 0.0:
                    step = aS[r] / (aS[r] - y[r])
                    if block < 0 or step < theta:
                        theta = step
                        block = r
            if block < 0:
                for r in range(s):
                    aS[r] = y[r]
                break
            for r in range(s):
                aS[r] += theta * (y[r] - aS[r])
            aS[block] = 0.0
            s = _drop_zeros(L, s, zb, z1, S, aS, inS, one)
        # major cycle: gradient (rows of the symmetric Q are contiguous), KKT test, entry
        _gradient(Q, b, S, aS, s, grad)
        gmax = -np.inf
        for r in range(s):
            if aS[r] > 0.0 and grad[S[r]] > gmax:
                gmax = grad[S[r]]
        j = zero
        for i in range(1, k):
            if grad[i] < grad[j]:
                j = i
        if gmax - grad[j] <= tol or inS[j]:
            break
        # enter j; while it is affinely dependent on S, trade weight along the flat direction
        aj = 0.0
        while True:
            d2 = _pivot(Q, tau, S, s, L, j, lrow)
            pjj = Q[j, j] + tau
            if d2 > dep * pjj or s == 0:
                _append(L, s, lrow, np.sqrt(max(d2, dep * pjj)), S, j, zb, z1, b[j])
                inS[j] = True
                aS[s] = aj
                s += 1
                break
            # c = L⁻ᵀ(lrow + ν z1) with ν making Σc = 1; its curvature is δ² + ν²‖z1‖²
            ml = 0.0
            mm = 0.0
            for r in range(s):
                ml += z1[r] * lrow[r]
                mm += z1[r] * z1[r]
            nu = (1.0 - ml) / mm
            for r in range(s):
                tmp[r] = lrow[r] + nu * z1[r]
            _backward(L, s, tmp, y)
            curv = max(d2, 0.0) + nu * nu * mm
            slope = grad[j]
            for r in range(s):
                slope -= y[r] * grad[S[r]]
            theta = np.inf
            block = -1
            for r in range(s):
                if y[r] > 0.0:
                    step = aS[r] / y[r]
                    if step < theta:
                        theta = step
                        block = r
            inside = curv > 0.0 and -slope / curv < theta
            if inside:
                theta = max(-slope / curv, 0.0)
            elif block < 0:
                theta = 0.0
            for r in range(s):
                aS[r] = max(aS[r] - theta * y[r], 0.0)
            aj += theta
            if inside or block < 0:
                # j enters with its pivot held at the dependence threshold
                _append(L, s, lrow, np.sqrt(dep * pjj), S, j, zb, z1, b[j])
                inS[j] = True
                aS[s] = aj
                s += 1
                break
            aS[block] = 0.0
            s = _drop_zeros(L, s, zb, z1, S, aS, inS, zero)
            iterations += 1
            if iterations >= max_iter:
                break

    total = 0.0
    for r in range(s):
        aS[r] = max(aS[r], 0.0)
        total += aS[r]
    for i in range(k):
        alpha[i] = 0.0
    for r in range(s):
        aS[r] /= total
        alpha[S[r]] = aS[r]
    _gradient(Q, b, S, aS, s, grad)
    gmax = -np.inf
    gmin = np.inf
    for i in range(k):
        if alpha[i] > 0.0 and grad[i] > gmax:
            gmax = grad[i]
        if grad[i] < gmin:
            gmin = grad[i]
    return iterations, gmax - gmin, s


# The NumPy transcription of the active-set method (:func:`_active_set_numpy`) solves the
# masters of bundles of at most SMALL_BUNDLE planes (master_step's ``small``), and
# :class:`~bmrm.solver.masters.QPMaster` asks for it in its first SMALL_SOLVES solves: the same
# method with the same tolerance, whose per-call overhead is small beside a short fit's
# oracle calls, so that such a fit compiles none of the QP; a long fit, where the master's
# speed counts, goes on with the compiled method.
SMALL_BUNDLE = 128
SMALL_SOLVES = 200


def master_step(
    G,
    b_all,
    A,
    ids,
    k,
    lam,
    alpha_prev,
    rel_tol,
    accuracy,
    L,
    S,
    S_ids,
    meta,
    alpha,
    *,
    small=None,
):
    """Solve the L2 master once from the bundle's buffers: the work of ``QPMaster.solve``.

    Normalises the previous weights ``alpha_prev[:k]`` into ``alpha`` as the warm start,
    solves the dual in the scale of G (objective, gradient and tolerance times lam, which
    saves forming Q = G/lam) by the active-set method (:func:`_active_set_numpy` when
    ``small``, else the compiled :func:`active_set`), and returns what the solver loop
    needs.

    The factor of the previous solve (L, with its working set's plane numbers in
    ``S_ids[:meta[1]]`` and its τ in ``meta[0]``) is reused when all those planes are still
    in the bundle (``ids[:k]``, increasing) and τ is within a factor 10⁴ of the largest
    ‖a_i‖²; otherwise a new one is built with τ = max ‖a_i‖². Both are updated on return.

    When the active-set method returns a non-finite answer (lam·|b_i| and the Gram matrix
    apart by about float64's precision), the vertex of the simplex with the largest bound
    is returned instead, with an infinite violation.

    Parameters
    ----------
    G : ndarray of shape (m, m), float64, m >= k
        The bundle's Gram matrix G_ij = ⟨a_i, a_j⟩ in its leading k × k block.
    b_all : ndarray of shape (m,), float64
        The planes' offsets b_i in its first k entries.
    A : ndarray of shape (m, d), float64
        The planes' slopes a_i in its first k rows.
    ids : ndarray of shape (m,), int64
        The planes' numbers, increasing along the bundle, in its first k entries.
    k : int
        The number of planes.
    lam : float
        The regularization constant (> 0).
    alpha_prev : ndarray of shape (m,), float64
        The previous weights (the warm start, normalised; all on plane 0 if they sum to 0).
    rel_tol : float
        The KKT tolerance relative to the problem's scale, 1 + max |b_i| + 10⁻³·max G_ii/lam.
    accuracy : float
        An absolute tolerance on the objective; the tolerance used is the larger of the two.
    L : ndarray of shape (m, m), float64
        The Cholesky factor of the previous solve; updated in place.
    S : ndarray of shape (m,), int64
        Workspace for the working set's positions in the bundle.
    S_ids : ndarray of shape (m,), int64
        The plane numbers of the factor's working set; updated in place.
    meta : ndarray of shape (2,), float64
        The factor's τ and the size of its working set (0: no factor); updated in place.
    alpha : ndarray of shape (>= k,), float64
        Output: the final weights in its first k entries.
    small : bool or None, default=None
        Whether to solve by the NumPy method; None: when k <= :data:`SMALL_BUNDLE`.

    Returns
    -------
    w : ndarray of shape (d,), float64
        −Aᵀα / lam, the master minimiser.
    lower : float
        The dual value bᵀα − αᵀGα/(2 lam) at the final α, a lower bound whatever the
        accuracy.
    steps : int
        Active-set cycles.
    violation, tol : float
        The KKT violation reached and the one asked for, both in the scale of Q.
    """
    if small is None:
        small = k <= SMALL_BUNDLE
    solve = _active_set_numpy if small else active_set
    try:
        with np.errstate(all="ignore"):
            b, tau, s_given, tol, max_diag = _master_open(
                G, b_all, ids, k, lam, alpha_prev, rel_tol, accuracy, S, S_ids, meta, alpha
            )
            grad = np.empty(k)
            steps = 0
            while True:
                more, violation, s = solve(
                    G, b, alpha, grad, lam * tol, 50 * k + 1000, L, S, s_given, tau
                )
                steps += int(more)
                if violation <= lam * tol or s_given == 0:
                    break
                # an inherited factor of an ill-conditioned working set (tiny lam) can leave
                # the answer short of the tolerance: once more from a factor built afresh
                tau = max_diag if max_diag > 0.0 else 1.0
                s_given = 0
            w, lower = _master_close(b_all, A, ids, k, lam, S, S_ids, meta, alpha, grad, s, tau)
        out = w, lower, steps, float(violation) / lam, tol
    except (ZeroDivisionError, np.linalg.LinAlgError):
        out = None
    if (
        out is not None
        and np.isfinite(out[1])
        and np.isfinite(out[3])
        and np.isfinite(out[0]).all()
    ):
        return out
    return _vertex_step(G, b_all, A, k, lam, rel_tol, accuracy, meta, alpha)


def _vertex_step(G, b_all, A, k, lam, rel_tol, accuracy, meta, alpha):
    """The best vertex of the simplex, for a dual the active-set method cannot solve.

    When lam·|b_i| dwarfs the Gram matrix's entries (or the reverse) by about float64's
    precision, the affine minimisers of the active-set method lose every digit. Any α of
    the simplex still gives a valid lower bound bᵀα − αᵀGα/(2 lam) and the point
    w = −Aᵀα/lam: this one takes the vertex of the largest bound and reports an infinite
    KKT violation, so that :class:`~bmrm.solver.masters.QPMaster` goes on by pair steps
    from there. The factor kept in ``meta`` is dropped.
    """
    meta[1] = 0
    with np.errstate(over="ignore", invalid="ignore"):
        bounds = b_all[:k] - 0.5 * np.diag(G)[:k] / lam
    bounds[~np.isfinite(bounds)] = -np.inf
    j = int(np.argmax(bounds))
    alpha[:k] = 0.0
    alpha[j] = 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        w = A[j] / -lam
        max_b = float(np.abs(b_all[:k]).max())
        tol = max(rel_tol * (1.0 + max_b + 1e-3 * float(np.diag(G)[:k].max()) / lam), accuracy)
    return w, float(bounds[j]), 0, np.inf, tol


def _master_open(G, b_all, ids, k, lam, alpha_prev, rel_tol, accuracy, S, S_ids, meta, alpha):
    """The opening of :func:`master_step`: the normalised warm start in ``alpha``, the
    positions of the inherited working set in ``S``; returns ``(b, tau, s_given, tol,
    max_diag)``, b the offsets times lam, s_given the inherited factor's rows (0: none)."""
    a = np.maximum(alpha_prev[:k], 0.0)
    total = float(a.sum())
    if total > 0.0:
        alpha[:k] = a / total
    else:
        alpha[:k] = 0.0
        alpha[0] = 1.0
    b = lam * b_all[:k]
    max_b = float(np.abs(b_all[:k]).max())
    max_diag = float(np.diagonal(G)[:k].max())
    # the previous working set, if all its planes are still here (the bundle numbers its
    # planes in increasing order)
    n_prev = int(meta[1])
    tau = float(meta[0])
    s_given = 0
    if n_prev > 0 and 1e-4 * max_diag <= tau <= 1e4 * max_diag:
        wanted = S_ids[:n_prev]
        at = np.searchsorted(ids[:k], wanted)
        found = at < k
        found[found] = ids[:k][at[found]] == wanted[found]
        if found.all():
            S[:n_prev] = at
            s_given = n_prev
    if s_given == 0:
        tau = max_diag if max_diag > 0.0 else 1.0
    # P(w) − D(α) is at most the KKT violation; round-off in the gradient grows with Q
    tol = max(rel_tol * (1.0 + max_b + 1e-3 * max_diag / lam), accuracy)
    return b, tau, s_given, tol, max_diag


def _master_close(b_all, A, ids, k, lam, S, S_ids, meta, alpha, grad, s, tau):
    """The close of :func:`master_step`: records the final working set (plane numbers in
    ``S_ids``, τ and its size in ``meta``); returns ``(w, lower)``, the master minimiser
    −Aᵀα / lam and the dual value at α (``grad`` = Gα − lam·b)."""
    S_ids[:s] = ids[S[:s]]
    meta[0] = tau
    meta[1] = s
    # grad = Gα − lam·b, so αᵀGα = αᵀgrad + lam·bᵀα
    ba = float(b_all[:k] @ alpha[:k])
    ag = float(grad[:k] @ alpha[:k])
    lower = ba - 0.5 * (ag + lam * ba) / lam
    w = alpha[:k] @ A[:k]
    w /= -lam  # in place: one vector of w's size at a time
    return w, lower

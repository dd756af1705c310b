"""Numba kernels of the CofiRank oracle: scores of all ratings, and the two scatters of
∂l/∂f back to the factors, each one pass over the ratings (O(|Ω| r) for rank r).

Every kernel takes a half-open range ``[start, stop)`` of users (or items) first, is
compiled with ``nogil=True`` and writes only the rows of that range, so that
:func:`losses.parallel.run_queries` spreads it over threads with the same result for any
number of threads.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# reassociation lets the rank-r dot product of the scores run in SIMD lanes (a sum of r
# products in another order: the same value to rounding); no flag that assumes finite values
_DOT = {"reassoc", "contract"}


@njit(cache=True, nogil=True, fastmath=_DOT)
def scores(start, stop, indptr, indices, U, V, user_offset, item_offset, f):
    """f_k = <U[i], V[j]> + user_offset[i] + item_offset[j] for rating k = (i, j)."""
    r = U.shape[1]
    for i in range(start, stop):
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            s = 0.0
            for t in range(r):
                s += U[i, t] * V[j, t]
            f[k] = s + user_offset[i] + item_offset[j]


@njit(cache=True, nogil=True)
def gather_users(start, stop, indptr, indices, g, V, grad, grad_offset):
    """grad[i] = Σ_k g[k] V[indices[k]] and grad_offset[i] = Σ_k g[k] over user i's ratings
    k in indptr[i]:indptr[i + 1], for i in [start, stop): ∂/∂U in the ratings' own order.
    Ratings with g[k] = 0 are skipped (a ranking loss's gradient is zero on the documents
    whose place its maximiser leaves unchanged): the sums are the same to the bit."""
    r = V.shape[1]
    for i in range(start, stop):
        total = 0.0
        for t in range(r):
            grad[i, t] = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            c = g[k]
            if c == 0.0:  # adds nothing (the factors are finite)
                continue
            j = indices[k]
            total += c
            for t in range(r):
                grad[i, t] += c * V[j, t]
        grad_offset[i] = total


@njit(cache=True, nogil=True)
def gather_items(start, stop, indptr, indices, g, U, grad, grad_offset):
    """grad[j] = Σ_k g[k] U[i_k] and grad_offset[j] = Σ_k g[k] over the ratings k = (i_k, j)
    of item j, for j in [start, stop): ∂/∂V.

    One pass over the ratings in their user-major order, skipping those of items outside
    the range, so no item-major index of the ratings is kept; each item's sum runs over its
    users in increasing order, whatever the range, so the result does not depend on how
    the items are split among threads. Ratings with g[k] = 0 are skipped, as in
    :func:`gather_users`.
    """
    r = U.shape[1]
    for j in range(start, stop):
        grad_offset[j] = 0.0
        for t in range(r):
            grad[j, t] = 0.0
    add_items(start, stop, indptr, indices, g, U, grad, grad_offset)


@njit(cache=True, nogil=True)
def add_items(start, stop, indptr, indices, g, U, grad, grad_offset):
    """grad[j] += Σ_k g[k] U[i_k] and grad_offset[j] += Σ_k g[k] over the ratings k of item
    j, for j in [start, stop), in :func:`gather_items`' order (users increasing, each
    product added to the running sum): adding the users' blocks in turn gives the sums of
    one pass over all of them, to the bit."""
    r = U.shape[1]
    n_users = indptr.shape[0] - 1
    for i in range(n_users):
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            c = g[k]
            if j < start or j >= stop or c == 0.0:
                continue
            grad_offset[j] += c
            for t in range(r):
                grad[j, t] += c * U[i, t]


@njit(cache=True, nogil=True)
def _simplex_qp(Q, lin, scale, k, alpha, grad, max_steps):
    """Maximise D(α) = lin·α − (scale/2) αᵀQα over the simplex of the first k entries by
    pairwise (SMO) steps from the feasible ``alpha``, in place; returns D(α).

    Each step moves weight from the entry of smallest ∂D/∂α holding weight to the entry of
    largest ∂D/∂α by the exact line maximum; any feasible α gives a valid lower bound, so
    the number of steps only decides how tight it is.
    """
    for m in range(k):
        s = 0.0
        for n in range(k):
            s += Q[m, n] * alpha[n]
        grad[m] = lin[m] - scale * s
    for _ in range(max_steps):
        up = 0
        for m in range(1, k):
            if grad[m] > grad[up]:
                up = m
        down = -1
        for m in range(k):
            if alpha[m] > 0.0 and (down < 0 or grad[m] < grad[down]):
                down = m
        if down < 0 or up == down:
            break
        diff = grad[up] - grad[down]
        if diff <= 1e-13 * (abs(grad[up]) + abs(grad[down]) + 1e-300):
            break
        curv = scale * (Q[up, up] + Q[down, down] - 2.0 * Q[up, down])
        delta = alpha[down]
        if curv > 0.0 and diff / curv < delta:
            delta = diff / curv
        alpha[up] += delta
        alpha[down] -= delta
        if alpha[down] < 0.0:
            alpha[down] = 0.0
        for m in range(k):
            grad[m] -= scale * delta * (Q[m, up] - Q[m, down])
    value = 0.0
    for m in range(k):
        s = 0.0
        for n in range(k):
            s += Q[m, n] * alpha[n]
        value += alpha[m] * (lin[m] - 0.5 * scale * s)
    return value


@njit(cache=True, nogil=True)
def _master(Q, B, k, lam, alpha, grad, qa, max_steps):
    """The plain master of one bundle: lower bound max_α B·α − αᵀQα/(2λ) (the minimum of
    λ/2‖w‖² + max_m (A_m·w + B_m)), α in place; qa receives Qα."""
    lower = _simplex_qp(Q, B, 1.0 / lam, k, alpha, grad, max_steps)
    for m in range(k):
        s = 0.0
        for n in range(k):
            s += Q[m, n] * alpha[n]
        qa[m] = s
    return lower


@njit(cache=True, nogil=True)
def user_bundle_step(
    start, stop, rows, risk, grad, grad_offset, with_offset, lam, theta, max_steps, X,
    A, B, Q, n_planes, alpha, best_J, best_X, lower, mult,
):  # fmt: skip
    """One iteration of the level bundle method on each of the independent problems
    min_x λ/2‖x‖² + R_q(x) for q in [start, stop), in place.

    Problem q's point X[q] (length d = r, or r + 1 with ``with_offset``, the last entry its
    offset) has been evaluated: R_q = ``risk[q]`` and a subgradient (``grad[rows[q]]``,
    then ``grad_offset[rows[q]]`` with ``with_offset``). The kernel records the best point,
    adds the cut to problem q's bundle (A[q, m], B[q, m], m < n_planes[q]; Gram matrix
    Q[q]), solves the master for the lower bound ``lower[q]`` (plain BMRM, Teo et al.,
    JMLR 2010), and writes the next point to X[q]: the last one projected onto the level
    set {λ/2‖x‖² + max_m (A_m·x + B_m) ≤ lower + θ (best − lower)} (Lemaréchal,
    Nemirovskii & Nesterov, Math. Programming 69, 1995), as :mod:`bmrm.solver.methods.level`
    does for one problem. A full bundle drops its oldest plane of zero weight, or else is
    replaced by its aggregate plane Σ α_m (A_m, B_m) (Kiwiel, 1985), which keeps the lower
    bound. ``mult[q]`` carries the projection's multiplier.
    """
    d = X.shape[1]
    r = grad.shape[1]
    cap = A.shape[1]
    work = np.empty((5, cap))
    g = work[0]
    qa = work[1]
    lin = work[2]
    beta = work[3]
    p = work[4]
    for q in range(start, stop):
        i = rows[q]
        x = X[q]
        # the evaluated point: objective and cut
        xx = 0.0
        ax = 0.0
        for t in range(r):
            xx += x[t] * x[t]
            ax += grad[i, t] * x[t]
        if with_offset:
            xx += x[r] * x[r]
            ax += grad_offset[i] * x[r]
        J = 0.5 * lam * xx + risk[q]
        if J < best_J[q]:
            best_J[q] = J
            for t in range(d):
                best_X[q, t] = x[t]
        k = n_planes[q]
        if k == cap:
            # drop the oldest plane without weight, else aggregate the bundle
            drop = -1
            for m in range(k):
                if alpha[q, m] == 0.0:
                    drop = m
                    break
            if drop >= 0:
                for m in range(drop, k - 1):
                    for t in range(d):
                        A[q, m, t] = A[q, m + 1, t]
                    B[q, m] = B[q, m + 1]
                    alpha[q, m] = alpha[q, m + 1]
                for m in range(drop, k - 1):
                    for n in range(k):
                        Q[q, m, n] = Q[q, m + 1, n]
                for n in range(drop, k - 1):
                    for m in range(k - 1):
                        Q[q, m, n] = Q[q, m, n + 1]
                k -= 1
            else:
                for t in range(d):
                    s = 0.0
                    for m in range(k):
                        s += alpha[q, m] * A[q, m, t]
                    A[q, 0, t] = s
                s = 0.0
                for m in range(k):
                    s += alpha[q, m] * B[q, m]
                B[q, 0] = s
                s = 0.0
                for t in range(d):
                    s += A[q, 0, t] * A[q, 0, t]
                Q[q, 0, 0] = s
                alpha[q, 0] = 1.0
                k = 1
        for t in range(r):
            A[q, k, t] = grad[i, t]
        if with_offset:
            A[q, k, r] = grad_offset[i]
        B[q, k] = risk[q] - ax
        for m in range(k + 1):
            s = 0.0
            for t in range(d):
                s += A[q, m, t] * A[q, k, t]
            Q[q, m, k] = s
            Q[q, k, m] = s
        alpha[q, k] = 1.0 if k == 0 else 0.0
        k += 1
        n_planes[q] = k
        Qq = Q[q]
        lb = _master(Qq, B[q], k, lam, alpha[q], g, qa, max_steps)
        lower[q] = lb
        # the next point: x projected onto the level set of the model (x itself if inside)
        level = lb + theta * (best_J[q] - lb)
        model = -np.inf
        for m in range(k):
            s = 0.0
            for t in range(d):
                s += A[q, m, t] * x[t]
            p[m] = s  # A_m·x
            if s + B[q, m] > model:
                model = s + B[q, m]
        if not (level > lb) or 0.5 * lam * xx + model <= level:
            if not (level > lb):  # no room: the master minimiser
                for t in range(d):
                    s = 0.0
                    for m in range(k):
                        s += alpha[q, m] * A[q, m, t]
                    x[t] = -s / lam
            continue
        slack = 0.25 * (level - lb)
        s_mult = mult[q]
        lo = -1.0
        hi = -1.0
        found = False
        for m in range(k):
            beta[m] = alpha[q, m]  # the master's weights start the projection's QP
        for _ in range(40):
            mu = lam + 1.0 / s_mult
            tz = 1.0 / (1.0 + s_mult * lam)
            for m in range(k):
                lin[m] = B[q, m] + tz * p[m]
            _simplex_qp(Qq, lin, 1.0 / mu, k, beta, g, max_steps)
            # J_k(w) for w = tz·x − Aᵀβ/μ, from Gram products alone
            bqb = 0.0
            bp = 0.0
            for m in range(k):
                s = 0.0
                for n in range(k):
                    s += Qq[m, n] * beta[n]
                qa[m] = s
                bqb += beta[m] * s
                bp += beta[m] * p[m]
            ww = tz * tz * xx - 2.0 * tz * bp / mu + bqb / (mu * mu)
            model = -np.inf
            for m in range(k):
                s = B[q, m] + tz * p[m] - qa[m] / mu
                if s > model:
                    model = s
            h = 0.5 * lam * ww + model - level
            if h > 0.0:
                lo = s_mult
            else:
                hi = s_mult
                found = True
                if h >= -slack:
                    break
            if lo < 0.0:
                s_mult /= 8.0
            elif hi < 0.0:
                s_mult *= 8.0
            else:
                s_mult = np.sqrt(lo * hi)
        if found:
            mult[q] = hi
            # beta holds the solution at the last multiplier tried, which is hi when the
            # loop ended on an accepted point; otherwise solve at hi once more
            if s_mult != hi:
                mu = lam + 1.0 / hi
                tz = 1.0 / (1.0 + hi * lam)
                for m in range(k):
                    lin[m] = B[q, m] + tz * p[m]
                _simplex_qp(Qq, lin, 1.0 / mu, k, beta, g, max_steps)
            mu = lam + 1.0 / hi
            tz = 1.0 / (1.0 + hi * lam)
            for t in range(d):
                s = 0.0
                for m in range(k):
                    s += beta[m] * A[q, m, t]
                x[t] = tz * x[t] - s / mu
        else:  # the master minimiser lies in the level set
            for t in range(d):
                s = 0.0
                for m in range(k):
                    s += alpha[q, m] * A[q, m, t]
                x[t] = -s / lam

"""Surrogate ranking loss kernels: cosine, ListNet, listwise squared, RankNet, softmax, WARP.

Each kernel loops over the queries of ``query_ptr`` serially and writes one value per query
into ``values`` and ∂(value)/∂f into ``grad``. Definitions, conventions and references are
in :mod:`losses.surrogate`.
"""

import math

import numpy as np
from numba import njit

from losses._kernels import INNER, OUTER


@njit(**INNER)
def _softplus(z):
    """log(1 + exp(z)) without overflow."""
    if z > 0.0:
        return z + np.log1p(np.exp(-z))
    return np.log1p(np.exp(z))


@njit(**INNER)
def _sigmoid(z):
    """1 / (1 + exp(−z)) without overflow."""
    if z >= 0.0:
        return 1.0 / (1.0 + np.exp(-z))
    e = np.exp(z)
    return e / (1.0 + e)


@njit(**OUTER)
def cosine(f, psi, query_ptr, values, grad):
    """½(1 − ⟨ψ, f⟩ / (‖ψ‖‖f‖)); 0 when ψ = 0, ½ with zero gradient when f = 0.

    f and ψ are first scaled by powers of two that bring their largest entries into
    [0.5, 1): the sums of squares can then neither overflow nor underflow (at |f| beyond
    about 1e154 or below 1e-162 they would, making the loss ½ with a zero gradient), and,
    powers of two scaling exactly, the value and gradient are those of the unscaled
    formula wherever it does not overflow.
    """
    for q in range(query_ptr.size - 1):
        lo, hi = query_ptr[q], query_ptr[q + 1]
        mf = 0.0
        mp = 0.0
        for i in range(lo, hi):
            grad[i] = 0.0
            mf = max(mf, abs(f[i]))
            mp = max(mp, abs(psi[i]))
        if mp == 0.0:
            values[q] = 0.0
            continue
        if mf == 0.0:
            values[q] = 0.5
            continue
        ef = math.frexp(mf)[1]
        ep = math.frexp(mp)[1]
        pp = 0.0
        ff = 0.0
        pf = 0.0
        for i in range(lo, hi):
            u = math.ldexp(f[i], -ef)
            v = math.ldexp(psi[i], -ep)
            pp += v * v
            ff += u * u
            pf += v * u
        np_ = np.sqrt(pp)
        nf = np.sqrt(ff)
        cos = pf / (np_ * nf)
        values[q] = max(0.0, 0.5 * (1.0 - cos))
        # ∂cos/∂f = ψ / (‖ψ‖‖f‖) − cos · f / ‖f‖², in the scaled u, v: 2^-ef times
        # v / (‖v‖‖u‖) − cos · u / ‖u‖²
        for i in range(lo, hi):
            u = math.ldexp(f[i], -ef)
            v = math.ldexp(psi[i], -ep)
            grad[i] = -0.5 * math.ldexp(v / (np_ * nf) - cos * u / ff, -ef)


@njit(**OUTER)
def listnet(f, s, query_ptr, values, grad):
    """KL(softmax(s) ‖ softmax(f)) per query; gradient softmax(f) − softmax(s)."""
    for q in range(query_ptr.size - 1):
        lo, hi = query_ptr[q], query_ptr[q + 1]
        if hi - lo <= 1:
            values[q] = 0.0
            for i in range(lo, hi):
                grad[i] = 0.0
            continue
        fmax = f[lo]
        smax = s[lo]
        for i in range(lo, hi):
            fmax = max(fmax, f[i])
            smax = max(smax, s[i])
        zf = 0.0
        zs = 0.0
        for i in range(lo, hi):
            zf += np.exp(f[i] - fmax)
            zs += np.exp(s[i] - smax)
        # log-probabilities from the shifted values: adding the maximum back (max + log z)
        # would round log z away once the maximum is large (|s| ~ 1e15 and more).
        log_zf = np.log(zf)
        log_zs = np.log(zs)
        kl = 0.0
        for i in range(lo, hi):
            log_t = (s[i] - smax) - log_zs
            log_p = (f[i] - fmax) - log_zf
            t = np.exp(log_t)
            if t > 0.0:
                kl += t * (log_t - log_p)
            grad[i] = np.exp(log_p) - t
        values[q] = max(0.0, kl)


@njit(**OUTER)
def listwise_squared(f, psi, query_ptr, values, grad):
    """Σ_j (ψ_j − f_j)² per query; gradient 2(f − ψ)."""
    for q in range(query_ptr.size - 1):
        lo, hi = query_ptr[q], query_ptr[q + 1]
        v = 0.0
        for i in range(lo, hi):
            r = f[i] - psi[i]
            v += r * r
            grad[i] = 2.0 * r
        values[q] = v


@njit(**OUTER)
def ranknet(f, y, query_ptr, weight, values, grad):
    """weight_q · Σ_{y_i < y_j} log(1 + exp(f_i − f_j)) per query (all ordered pairs)."""
    for q in range(query_ptr.size - 1):
        lo, hi = query_ptr[q], query_ptr[q + 1]
        for i in range(lo, hi):
            grad[i] = 0.0
        v = 0.0
        w = weight[q]
        if w != 0.0:
            for i in range(lo, hi):
                for j in range(lo, hi):
                    if y[i] < y[j]:
                        z = f[i] - f[j]
                        v += _softplus(z)
                        s = w * _sigmoid(z)
                        grad[i] += s
                        grad[j] -= s
        values[q] = w * v


@njit(**OUTER)
def softmax(f, relevant, query_ptr, values, grad):
    """Mean over relevant c of −log(e^{f_c} / (e^{f_c} + Σ_{n non-relevant} e^{f_n})).

    With L = log Σ_n e^{f_n} the term is softplus(L − f_c); its derivative is
    −σ(L − f_c) for f_c and σ(L − f_c) e^{f_n − L} for each non-relevant n.
    """
    for q in range(query_ptr.size - 1):
        lo, hi = query_ptr[q], query_ptr[q + 1]
        n_rel = 0
        nmax = -np.inf
        for i in range(lo, hi):
            grad[i] = 0.0
            if relevant[i]:
                n_rel += 1
            else:
                nmax = max(nmax, f[i])
        if n_rel == 0 or n_rel == hi - lo:
            values[q] = 0.0
            continue
        z = 0.0
        for i in range(lo, hi):
            if not relevant[i]:
                z += np.exp(f[i] - nmax)
        # L − f_c and f_n − L from the shifted values (nmax + log z would round log z
        # away for large scores)
        log_z = np.log(z)
        v = 0.0
        total = 0.0  # Σ_c σ(L − f_c)
        for i in range(lo, hi):
            if relevant[i]:
                d = (nmax - f[i]) + log_z
                v += _softplus(d)
                s = _sigmoid(d)
                grad[i] = -s / n_rel
                total += s
        for i in range(lo, hi):
            if not relevant[i]:
                grad[i] = total * np.exp((f[i] - nmax) - log_z) / n_rel
        values[q] = v / n_rel


@njit(**OUTER)
def warp(f, relevant, query_ptr, phi, values, grad):
    """Mean over relevant p of Φ(N_p)/N_p · Σ_{n: 1 + f_n > f_p} (1 + f_n − f_p).

    N_p counts the non-relevant n with 1 + f_n > f_p and ``phi[k]`` = Φ(k) = Σ_{j<=k} α_j.
    The gradient holds the weights Φ(N_p)/N_p fixed (they are piecewise constant in f).
    O(m²) per query.
    """
    for q in range(query_ptr.size - 1):
        lo, hi = query_ptr[q], query_ptr[q + 1]
        n_rel = 0
        for i in range(lo, hi):
            grad[i] = 0.0
            if relevant[i]:
                n_rel += 1
        if n_rel == 0 or n_rel == hi - lo:
            values[q] = 0.0
            continue
        v = 0.0
        for p in range(lo, hi):
            if not relevant[p]:
                continue
            count = 0
            hinge = 0.0
            for n in range(lo, hi):
                if not relevant[n]:
                    r = 1.0 + f[n] - f[p]
                    if r > 0.0:
                        count += 1
                        hinge += r
            if count == 0:
                continue
            w = phi[count] / count / n_rel
            v += w * hinge
            grad[p] -= w * count
            for n in range(lo, hi):
                if not relevant[n] and 1.0 + f[n] - f[p] > 0.0:
                    grad[n] += w
        values[q] = v


@njit(**OUTER)
def listnet_hessp(f, query_ptr, d, out):
    """H_f d per query for ListNet: (diag(p) − p pᵀ) d with p = softmax(f), the Hessian of
    log Σ_k exp(f_k); 0 for a one-document query (whose loss is the constant 0)."""
    for q in range(query_ptr.size - 1):
        lo, hi = query_ptr[q], query_ptr[q + 1]
        if hi - lo <= 1:
            for i in range(lo, hi):
                out[i] = 0.0
            continue
        fmax = f[lo]
        for i in range(lo, hi):
            fmax = max(fmax, f[i])
        z = 0.0
        pd = 0.0
        for i in range(lo, hi):
            e = np.exp(f[i] - fmax)
            z += e
            pd += e * d[i]
        pd /= z
        for i in range(lo, hi):
            out[i] = np.exp(f[i] - fmax) / z * (d[i] - pd)


@njit(**OUTER)
def ranknet_hessp(f, y, query_ptr, weight, d, out):
    """H_f d per query for RankNet: weight_q Σ_{y_i < y_j} σ(z)σ(−z) (d_i − d_j)(e_i − e_j),
    z = f_i − f_j; O(m²)."""
    for q in range(query_ptr.size - 1):
        lo, hi = query_ptr[q], query_ptr[q + 1]
        for i in range(lo, hi):
            out[i] = 0.0
        w = weight[q]
        if w == 0.0:
            continue
        for i in range(lo, hi):
            for j in range(lo, hi):
                if y[i] < y[j]:
                    z = f[i] - f[j]
                    t = w * _sigmoid(z) * _sigmoid(-z) * (d[i] - d[j])
                    out[i] += t
                    out[j] -= t

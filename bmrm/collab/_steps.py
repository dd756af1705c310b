"""The steps' bundle-method solves shared by the local fit and its Dask U step: one
user's risk oracle, the inexact step solve and the per-user U step
(:mod:`bmrm.collab.model` has the method and its references)."""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

import losses
from bmrm import minimize_bmrm


def _convexified(prepared, f):
    """The prepared loss of the convex surrogate at scores f when the loss is latent."""
    loss = prepared.loss
    if not getattr(loss, "latent", False):
        return prepared
    targets = loss.convexify(f, prepared.targets)
    return losses.Prepared(
        loss, prepared.groups, targets, prepared.n_terms, prepared.weights, prepared.data_names
    )


def _summed_risk(prepared, f) -> tuple[float, np.ndarray]:
    """Σ of the per-user losses at f and its gradient (the objective sums over users)."""
    values, grad = prepared.loss_grad(f)
    return prepared.check(values, grad, f), grad


def user_oracle(Vi, ci, prepared, offsets: bool):
    """The risk oracle of one user's problem: w = (u, b_i), f = Vi u + b_i + ci,
    R = l(f, y_i), ∂R/∂u = Viᵀ ∂l/∂f, ∂R/∂b_i = Σ ∂l/∂f."""
    r = Vi.shape[1]

    def oracle(w):
        f = Vi @ w[:r] + ci
        if offsets:
            f += w[r]
        risk, g = _summed_risk(prepared, f)
        a = Vi.T @ g
        return risk, (np.append(a, g.sum()) if offsets else a)

    oracle.loss = prepared.loss  # the solver probes the slopes of a user's loss only
    # a latent loss's prepared targets here are its convex surrogate's (_convexified)
    oracle.convex_surrogate = bool(getattr(prepared.loss, "latent", False))
    return oracle


class StepSettings(NamedTuple):
    """What a step's bundle-method solve is asked (:func:`minimize_step`)."""

    lam: float
    tol: float
    step_tol: float | None  # None: solve to the relative gap tol
    max_iter: int
    bundle_size: int


# a step that has not lowered its objective after step_max_iter iterations goes on, up to
# this many times as many: stopping it there would end the outer iteration without progress
# (so the fit would take a capped step for convergence)
NO_PROGRESS_FACTOR = 3


def minimize_step(oracle, w0, settings: StepSettings):
    """Minimise lam/2 ‖w‖² + R(w) from w0 by :func:`bmrm.minimize_bmrm` to a relative gap
    ``tol``, or until the gap is at most ``step_tol`` times the decrease made, or after
    ``max_iter`` iterations once the best point is below the start (module docstring of
    :mod:`bmrm.collab.model`); the result's ``converged`` says whether it stopped before
    that cap."""
    start = []
    capped = []

    def callback(res):
        if res.status != 2:  # the loop stops anyway (converged, or its own cap)
            return
        if not start:  # the first iteration evaluates w0
            start.append(res.history["objective"][0])
        decrease = start[0] - res.fun
        if settings.step_tol is not None and res.gap <= settings.step_tol * decrease:
            raise StopIteration
        if res.nit >= settings.max_iter and decrease > 0:
            capped.append(True)
            raise StopIteration

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=Warning)  # max_iter: reported per step
        res = minimize_bmrm(
            oracle,
            len(w0),
            settings.lam,
            w0=w0,
            tol=settings.tol,
            max_iter=settings.max_iter * NO_PROGRESS_FACTOR,
            bundle_size=max(3, min(settings.bundle_size, settings.max_iter + 1)),
            callback=callback,
        )
    res.converged = not capped and res.status != 2
    return res


def solve_users(indptr, indices, parts, users, U, b, V, c, offsets, settings):
    """Minimise l(f_i, y_i) + (λ/2)(‖u_i‖² + b_i²) over (u_i, b_i) for each user i of
    ``users`` with V and c fixed, writing U[i] and b[i] in place (0 for a user without
    ratings). ``parts[i]`` is user i's prepared single-query loss. Returns the summed
    objective, certified gap, iterations and oracle calls, and whether no solve stopped at
    its iteration cap. Each user's solve depends on that user's data alone, so any
    partition of the users gives the same factors."""
    r = U.shape[1]
    J = gap = 0.0
    nit = nfev = 0
    converged = True
    for i in users:
        s, e = indptr[i], indptr[i + 1]
        if e == s:
            U[i] = 0.0
            b[i] = 0.0
            continue
        items = indices[s:e]
        Vi, ci = V[items], c[items]
        prepared = _convexified(parts[i], Vi @ U[i] + b[i] + ci)
        oracle = user_oracle(Vi, ci, prepared, offsets)
        res = minimize_step(oracle, np.append(U[i], b[i]) if offsets else U[i].copy(), settings)
        U[i] = res.x[:r]
        if offsets:
            b[i] = res.x[r]
        J += res.fun
        gap += res.gap
        nit += res.nit
        nfev += res.nfev
        converged &= res.converged
    return J, gap, nit, nfev, converged

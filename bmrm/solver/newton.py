r"""Truncated Newton method with a certificate for L2-regularised twice-differentiable risks.

The objective is J(w) = (λ/2)‖w‖² + R(w), R(w) = (1/n) Σ_t s_t l_t(X w) with a convex loss
that offers Hessian-vector products in the scores (``loss.hessp``, :mod:`losses._base`):
squared, logistic, listwise squared, RankNet, ListNet, and the squared pairwise hinge of the
ordinal and preference losses (``hinge="squared"``, whose Hessian is the generalised one of
Mangasarian, 2002, so that the method is the finite Newton method of Lee & Lin, 2014).

Each iteration (Nocedal & Wright, *Numerical Optimization*, 2nd ed. 2006, Algorithm 7.1,
line-search Newton-CG; Lin, Weng & Keerthi, JMLR 9, 2008, for the products):

1. conjugate gradients on ∇²J s = −∇J with ∇²J v = λv + Xᵀ H_f X v, H_f the loss's Hessian
   at the scores f = X w, stopped when ‖∇²J s + ∇J‖ <= η ‖∇J‖ with the forcing term
   η = min(0.5, (‖∇J‖ / ‖∇J(w₀)‖)^½) (superlinear convergence, their Theorem 7.2);
   each product is one pass over X where the layout allows (see :class:`HessianProducts`),
   and X s is summed from the products' X p on the way;
2. a backtracking (Armijo) line search on t ↦ J(w + t s), evaluated from the scores
   f + t X s without touching X;
3. one pass over X for the gradient Xᵀ ∂R/∂f at the new point.

Certificate. Ω = ½‖w‖² makes J λ-strongly convex when R is convex, so for every w

    J(w) − J* <= ‖∇J(w)‖² / (2λ)

(minimise the strong-convexity lower bound J(v) >= J(w) + ⟨∇J(w), v − w⟩ + (λ/2)‖v − w‖²
over v; Boyd & Vandenberghe, *Convex Optimization*, 2004, eq. 9.9). Each iterate gives the
lower bound J(w_k) − ‖∇J(w_k)‖²/(2λ) on J*; the method keeps their maximum, and the gap
J(best) − lower bound is a certified bound on J(best) − J*, stopped on the same relative and
absolute rules (``tol``, ``atol``) as the bundle methods. It needs R convex and
continuously differentiable (the squared hinge is, the hinge is not), and λ > 0.

LIBLINEAR's RankSVM (Lee & Lin, "Large-scale linear RankSVM", Neural Computation 26, 2014)
minimises f_LL(w) = ½‖w‖² + C Σ_q Σ_{y_i < y_j} max(0, 1 − (w·x_j − w·x_i))² over all pairs
of all queries. With ``losses.get("ordinal", hinge="squared", normalize="none")`` the risk is
the mean over the n_q queries of their summed pair terms, so f_LL = n_q C · J at
λ = 1 / (n_q C): the same minimiser, and J = f_LL / (n_q C).
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp
from numba import njit

from bmrm.solver import products as _products
from bmrm.solver.oracle import own_products_dtype
from losses._threads import block_bounds, n_threads_for, run_blocks

__all__ = ["HessianProducts", "newton_direction", "strong_convexity_bound"]

# Armijo's sufficient-decrease constant and the largest number of step halvings.
_ARMIJO = 1e-4
_MAX_HALVINGS = 40


def strong_convexity_bound(J: float, grad_norm: float, lam: float) -> float:
    """The lower bound J(w) − ‖∇J(w)‖² / (2λ) on min J of a λ-strongly convex J."""
    return J - grad_norm * grad_norm / (2.0 * lam)


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _diagonal_products(start, stop, X, v, bias, h, xv, partial):
    """For the row blocks start:stop (``BLOCK_ROWS`` rows each): xv_i = X[i] v + bias and
    partial[c] = Σ_{i in block c} h_i xv_i X[i], in one pass over those rows."""
    n, d = X.shape
    block = _products.BLOCK_ROWS
    for c in range(start, stop):
        acc = partial[c]
        acc[:] = 0.0
        for i in range(c * block, min((c + 1) * block, n)):
            t = bias
            for j in range(d):
                t += X[i, j] * v[j]
            xv[i] = t
            u = h[i] * t
            if u != 0.0:
                for j in range(d):
                    acc[j] += u * X[i, j]


def rmatvec(oracle, u: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = Xᵀ u (with the intercept's entry ``intercept_scaling`` Σ u): one pass over X."""
    X = oracle.X
    d = X.shape[1]
    if own_products_dtype(X):
        _products.rmatvec(X, u, out[:d])
    elif sp.issparse(X):
        out[:d] = X.T @ u.astype(X.dtype, copy=False)
    else:
        out[:d] = u.astype(X.dtype, copy=False) @ X
    if oracle.fit_intercept:
        out[d] = oracle.intercept_scaling * u.sum()
    return out


class HessianProducts:
    """v ↦ (Xᵀ H_R X v, X v) at fixed scores f: the risk's Hessian in w times v.

    H_R is the Hessian of R in f (the loss's ``hessp``, weighted and divided as the risk is,
    :meth:`losses.Prepared.hessp`); with ``fit_intercept`` X has the constant column. Three
    ways, by what the data and loss allow:

    * dense C-ordered X with rows in query order and a loss with ``hessp_kernel`` (the
      squared-hinge ordinal loss): one pass over X, block by block of whole queries
      (:func:`bmrm.solver.products.fused_cut` with the Hessian kernel in place of the loss);
    * dense C-ordered X and a pointwise loss (diagonal H_R, computed once per f): one pass;
    * otherwise X v, H_R (X v) and Xᵀ(·) in turn: two passes.

    Attributes
    ----------
    passes : int
        Passes over X per product (1 or 2).
    """

    def __init__(self, oracle, f: np.ndarray):
        self.oracle = oracle
        self.f = f
        prepared = oracle.prepared
        X = oracle.X
        self._n = X.shape[0]
        self._d = X.shape[1]
        dense = bool(own_products_dtype(X))
        kernel = getattr(prepared.loss, "hessp_kernel", None)
        self._fused = None
        self._curvature = None
        if (
            dense
            and kernel is not None
            and not getattr(prepared.loss, "pointwise", False)
            and prepared.groups.order is None
            and prepared.n_terms > 0
            and prepared.divisor > 0
        ):
            plan = kernel(np.ascontiguousarray(f), prepared.targets)
            if plan is not None:
                blocks = _products.query_blocks(
                    prepared.groups.query_ptr, self._d, X.dtype.itemsize
                )
                self._fused = (plan[0], plan[1], blocks)
        if self._fused is None and dense and getattr(prepared.loss, "pointwise", False):
            self._curvature = prepared.hessp(f, np.ones(self._n))
        self.passes = 1 if self._fused is not None or self._curvature is not None else 2

    def __call__(self, v: np.ndarray, xv: np.ndarray) -> np.ndarray:
        """Xᵀ H_R X v (n_features entries); X v (with the intercept) is written into xv."""
        oracle = self.oracle
        d = self._d
        bias = v[d] * oracle.intercept_scaling if oracle.fit_intercept else 0.0
        w = np.ascontiguousarray(v[:d], dtype=np.float64)
        out = np.empty(oracle.n_features)
        if self._fused is not None:
            kernel, args, blocks = self._fused
            prepared = oracle.prepared
            u = np.empty(self._n)
            _products.fused_cut(
                oracle.X, w, bias, prepared.groups.query_ptr, blocks, kernel, args,
                prepared.divisor, xv, np.zeros(prepared.n_terms), u, out[:d], prepared.weights,
            )  # fmt: skip
        elif self._curvature is not None:
            n_blocks = (self._n + _products.BLOCK_ROWS - 1) // _products.BLOCK_ROWS
            partial = np.empty((n_blocks, d))
            ptr = np.minimum(
                np.arange(n_blocks + 1, dtype=np.int64) * _products.BLOCK_ROWS, self._n
            )
            run_blocks(
                _diagonal_products, block_bounds(ptr, n_threads_for(self._n)), oracle.X, w,
                float(bias), self._curvature, xv, partial,
            )  # fmt: skip
            partial.sum(axis=0, out=out[:d])
            u = self._curvature * xv
        else:
            oracle.scores(v, out=xv)
            u = oracle.prepared.hessp(self.f, xv)
            rmatvec(oracle, u, out)
            return out
        if oracle.fit_intercept:
            out[d] = oracle.intercept_scaling * u.sum()
        return out


def newton_direction(
    products: HessianProducts, grad: np.ndarray, lam: float, eta: float, max_cg: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """Conjugate gradients on (λI + Xᵀ H_R X) s = −grad from s = 0, stopped when the residual
    is at most ``eta`` ‖grad‖ or after ``max_cg`` products.

    Returns ``(s, X s, n_products)``; X s is summed from the products' X p. The matrix is
    positive definite (λ > 0, H_R positive semi-definite for a convex loss), so every
    curvature pᵀ ∇²J p is positive and no trust region is needed.
    """
    n = products.oracle.X.shape[0]
    s = np.zeros_like(grad)
    xs = np.zeros(n)
    xp = np.empty(n)
    r = -grad
    p = r.copy()
    rr = float(r @ r)
    stop = (eta * math.sqrt(rr)) ** 2
    k = 0
    while k < max_cg:
        hp = products(p, xp)
        hp += lam * p
        k += 1
        curvature = float(p @ hp)
        if not curvature > 0.0:
            break
        alpha = rr / curvature
        s += alpha * p
        xs += alpha * xp
        r -= alpha * hp
        rr_new = float(r @ r)
        if rr_new <= stop:
            break
        p *= rr_new / rr
        p += r
        rr = rr_new
    return s, xs, k


def line_search(oracle, lam: float, w, f, s, xs, J: float, slope: float):
    """Backtracking on t ↦ J(w + t s) from t = 1, halving until Armijo's condition
    J(w + t s) <= J + 10⁻⁴ t ⟨∇J, s⟩ holds; the risk at w + t s is evaluated from the scores
    f + t X s (no pass over X). Returns ``(t, J_t, f_t, g_t, n_evaluations)`` with g_t = ∂R/∂f
    at f_t (the oracle's work array, overwritten by its next evaluation), or t = 0 when no
    step decreases J (the direction is then useless at float64's resolution)."""
    t = 1.0
    f_t = np.empty_like(f)
    ww, ws, ss = float(w @ w), float(w @ s), float(s @ s)
    for k in range(_MAX_HALVINGS):
        np.multiply(xs, t, out=f_t)
        f_t += f
        R_t, g_t = oracle.risk_at(f_t)
        J_t = 0.5 * lam * (ww + 2.0 * t * ws + t * t * ss) + R_t
        if J_t <= J + _ARMIJO * t * slope:
            return t, J_t, f_t, g_t, k + 1
        t *= 0.5
    return 0.0, J, f, None, _MAX_HALVINGS


class NewtonState:
    """All the state of the Newton method between iterations.

    Attributes
    ----------
    w, f : ndarray
        The iterate and its scores X w (caller order; updated as f + t X s).
    J, grad, grad_norm : float, ndarray, float
        J(w), ∇J(w) = λ w + Xᵀ ∂R/∂f and its norm.
    grad0_norm : float
        ‖∇J(w₀)‖, the scale of the forcing term.
    lower_bound : float
        The largest strong-convexity bound J(w_k) − ‖∇J(w_k)‖²/(2λ) seen (on J*).
    nit, nfev, n_hessp, n_passes, n_line : int
        Iterations, gradient evaluations, Hessian-vector products, passes over X and
        risk evaluations of the line searches (no pass over X).
    oracle_seconds : float
        Seconds in gradient evaluations, Hessian products and line searches.
    stalled : bool
        The last line search found no decrease (float64's resolution reached).
    """

    def __init__(self, w, f, J, grad, passes):
        self.w = w
        self.f = f
        self.J = J
        self.grad = grad
        self.grad_norm = float(np.linalg.norm(grad))
        self.grad0_norm = self.grad_norm
        self.lower_bound = -math.inf
        self.nit = 0
        self.nfev = 1
        self.n_hessp = 0
        self.n_passes = passes
        self.n_line = 0
        self.oracle_seconds = 0.0
        self.stalled = False


def _gradient(oracle, lam, w, g):
    """∇J = λ w + Xᵀ g at w, from g = ∂R/∂f there: one pass over X."""
    grad = rmatvec(oracle, g, np.empty(oracle.n_features))
    grad += lam * w
    return grad


class NewtonCG:
    """The line-search Newton-CG method with the strong-convexity certificate (module
    docstring), as ``init(oracle, lam, w0)`` and ``step(oracle, lam, state)``.

    Parameters
    ----------
    max_cg : int, default 250
        Conjugate-gradient products per iteration at most.
    """

    name = "newton"

    def __init__(self, max_cg: int = 250):
        self.max_cg = max_cg

    def init(self, oracle, lam: float, w0: np.ndarray) -> NewtonState:
        """The state at w0: its scores (one pass over X unless w0 = 0), J and ∇J (one)."""
        start = time.perf_counter()
        w = np.array(w0, dtype=np.float64)
        passes = 1
        if np.any(w):
            f = oracle.scores(w)
            passes += 1
        else:
            f = np.zeros(oracle.X.shape[0])
        R, g = oracle.risk_at(f)
        J = 0.5 * lam * float(w @ w) + R
        state = NewtonState(w, f, J, _gradient(oracle, lam, w, g), passes)
        state.lower_bound = strong_convexity_bound(J, state.grad_norm, lam)
        state.oracle_seconds = time.perf_counter() - start
        return state

    def step(self, oracle, lam: float, state: NewtonState) -> NewtonState:
        """One Newton-CG iteration: direction, line search, gradient, certificate."""
        start = time.perf_counter()
        state.nit += 1
        if state.grad_norm == 0.0:
            return state
        products = HessianProducts(oracle, state.f)
        eta = min(0.5, math.sqrt(state.grad_norm / state.grad0_norm))
        s, xs, n_products = newton_direction(products, state.grad, lam, eta, self.max_cg)
        state.n_hessp += n_products
        state.n_passes += n_products * products.passes
        slope = float(state.grad @ s)
        t, J_t, f_t, g_t, n_line = line_search(
            oracle, lam, state.w, state.f, s, xs, state.J, slope
        )
        state.n_line += n_line
        if t == 0.0:
            state.stalled = True
        else:
            state.w = state.w + t * s
            state.f = f_t
            state.J = J_t
            state.grad = _gradient(oracle, lam, state.w, g_t)
            state.grad_norm = float(np.linalg.norm(state.grad))
            state.nfev += 1
            state.n_passes += 1
            state.lower_bound = max(
                state.lower_bound, strong_convexity_bound(state.J, state.grad_norm, lam)
            )
        state.oracle_seconds += time.perf_counter() - start
        return state


def minimize_newton(
    oracle,
    lam: float,
    *,
    tol: float = 1e-3,
    atol: float = 0.0,
    max_iter: int = 1000,
    max_time: float | None = None,
    w0: np.ndarray | None = None,
    callback=None,
    max_cg: int = 250,
):
    """Minimise J(w) = (λ/2)‖w‖² + R(w) by :class:`NewtonCG` until the certified gap is at
    most ``tol``·J or ``atol``; a :class:`bmrm.solver.loop.BMRMResult`.

    ``oracle`` is a :class:`bmrm.solver.oracle.RiskOracle` whose loss offers ``hessp``
    and is convex. The result adds ``n_hessp`` (Hessian-vector products) and
    ``n_line`` (line-search risk evaluations); ``nfev`` counts gradient evaluations and
    ``n_passes`` every pass over X (gradients, Hessian products, scores of w0).
    """
    from bmrm.solver.compile_clock import CompileClock
    from bmrm.solver.loop import STATUS_MESSAGES, BMRMResult

    solver = NewtonCG(max_cg)
    start = time.perf_counter()
    clock = CompileClock().__enter__()
    try:
        w = np.zeros(oracle.n_features) if w0 is None else w0
        state = solver.init(oracle, lam, w)
        rows = []
        status = 2
        while True:
            gap = state.J - state.lower_bound
            if gap <= tol * state.J:
                status = 0
            elif gap <= atol:
                status = 1
            elif state.nit >= max_iter:
                status = 2
            elif (
                max_time is not None and time.perf_counter() - start - clock.current() >= max_time
            ):
                status = 3
            elif state.stalled:
                status = 5
            else:
                state = solver.step(oracle, lam, state)
                rows.append(
                    (state.J, state.J, state.lower_bound, state.J - state.lower_bound,
                     time.perf_counter() - start, state.oracle_seconds, 0.0, 0, state.nfev,
                     state.n_passes, state.n_hessp)
                )  # fmt: skip
                continue
            break
    finally:
        clock.__exit__(None, None, None)
    names = (
        "objective", "best_objective", "lower_bound", "gap", "elapsed", "oracle_seconds",
        "master_seconds", "bundle_size", "nfev", "n_passes", "n_hessp",
    )  # fmt: skip
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(names)
    history = {name: np.asarray(col) for name, col in zip(names, columns, strict=True)}
    message = STATUS_MESSAGES.get(status, "stopped: no step decreases J (float64 resolution)")
    return BMRMResult(
        x=state.w, fun=state.J, lower_bound=state.lower_bound,
        gap=state.J - state.lower_bound, nit=state.nit, nfev=state.nfev,
        n_passes=state.n_passes, n_hessp=state.n_hessp, n_line=state.n_line,
        status=status, success=status in (0, 1), message=message, method="newton",
        bundle_size=0, history=history, oracle_seconds=state.oracle_seconds,
        master_seconds=0.0, total_seconds=time.perf_counter() - start,
        compile_seconds=clock.seconds,
    )  # fmt: skip

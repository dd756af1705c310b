r"""Truncated Newton method with a certificate for L2-regularised twice-differentiable risks.

The objective is J(w) = (λ/2)‖w‖² + R(w), R(w) = (1/n) Σ_t s_t l_t(X w) with a convex loss
that offers Hessian-vector products in the scores (``loss.hessp``, :mod:`losses._base`):
squared, logistic, listwise squared, RankNet, ListNet, and the squared pairwise hinge of the
ordinal and preference losses (``hinge="squared"``, whose Hessian is the generalised one of
Mangasarian, "A finite Newton method for classification", Optim. Methods Softw. 17, 2002).

Each iteration (Nocedal & Wright, *Numerical Optimization*, 2nd ed., 2006, Algorithm 7.1,
line-search Newton-CG; Lin, Weng & Keerthi, JMLR 9, 2008, for the products):

1. conjugate gradients on ∇²J s = −∇J with ∇²J v = λv + Xᵀ H_f X v, H_f the loss's Hessian
   at the scores f = X w, from s = 0 until ‖∇²J s + ∇J‖ <= η ‖∇J‖ with the forcing term
   η = min(0.5, (‖∇J‖ / ‖∇J(w₀)‖)^½) (their Theorem 7.2: superlinear convergence); each
   product is one pass over X where the layout allows (:mod:`bmrm.solver.hessian`), and
   X s is summed from the products' X p on the way;
2. the full step first: the risk and its gradient at the scores f + X s (one pass,
   Xᵀ ∂R/∂f); if Armijo's condition J(w + t s) <= J(w) + 10⁻⁴ t ⟨∇J, s⟩ fails, halving t
   with the risk alone at f + t X s (no pass) until it holds, then the gradient there (one
   pass).

∇²J is positive definite (λ > 0 and H_f positive semi-definite for a convex loss), so the
conjugate gradients need no trust region and every direction descends.

Certificate. Ω = ½‖w‖² makes J λ-strongly convex when R is convex, so for every w

    J(w) − J* <= ‖∇J(w)‖² / (2λ)

(minimise the strong-convexity minorant J(w) + ⟨∇J(w), v − w⟩ + (λ/2)‖v − w‖² over v;
Boyd & Vandenberghe, *Convex Optimization*, 2004, eq. (9.9)). Each iterate gives the lower
bound J(w_k) − ‖∇J(w_k)‖²/(2λ) on J*; the state keeps their maximum, so the gap
J(best) − lower bound certifies J(best) − J* and the loop stops on the same relative and
absolute rules (``tol``, ``atol``) as the bundle methods. R must be convex and continuously
differentiable (the squared hinge is, the hinge is not; :meth:`NewtonCG.check`).

LIBLINEAR's RankSVM (Lee & Lin, "Large-scale linear RankSVM", Neural Computation 26, 2014)
minimises f_LL(w) = ½‖w‖² + C Σ_q Σ_{y_i < y_j} max(0, 1 − (w·x_j − w·x_i))² over all
pairs of all queries. With ``losses.get("ordinal", hinge="squared", normalize="none")`` the
risk R is the mean over the n_q queries (every query of the data, those without a pair
included) of their summed pair terms, so f_LL = n_q C · J at λ = 1 / (n_q C): the same
minimiser, and J = f_LL / (n_q C).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from bmrm.solver.methods.base import SolverOptions, State
from bmrm.solver.problem import Problem

__all__ = [
    "NewtonCG",
    "NewtonState",
    "newton_direction",
    "strong_convexity_bound",
    "unmet_requirements",
]

# Armijo's sufficient-decrease constant and the most step halvings of one line search.
_ARMIJO = 1e-4
_MAX_HALVINGS = 40


def unmet_requirements(capabilities) -> list[str]:
    """What the risk lacks for the Newton method (empty when it qualifies).

    Convex, smooth, Hessian-vector products of its loss, evaluation on scores.

    Parameters
    ----------
    capabilities : Capabilities
        The risk's.

    Returns
    -------
    list of str
        The requirements the risk does not meet, in words.
    """
    return [
        what
        for what, ok in (
            ("convex", capabilities.convex and not capabilities.latent),
            ("smooth (continuously differentiable)", capabilities.smooth),
            ("offering Hessian-vector products (loss.hessp)", capabilities.has_hessp),
            ("evaluated on scores", capabilities.on_scores),
        )
        if not ok
    ]


def strong_convexity_bound(J: float, grad_norm: float, lam: float) -> float:
    """The lower bound J(w) − ‖∇J(w)‖² / (2λ) on min J of a λ-strongly convex J.

    Parameters
    ----------
    J : float
        J(w).
    grad_norm : float
        ‖∇J(w)‖.
    lam : float
        The regularization constant λ.

    Returns
    -------
    float
        The lower bound on min J.
    """
    return J - grad_norm * grad_norm / (2.0 * lam)


def newton_direction(
    products, grad: np.ndarray, lam: float, eta: float, max_cg: int, n_samples: int
):
    """Conjugate gradients on (λI + Xᵀ H X) s = −grad from s = 0.

    Stopped when the residual is at most ``eta``·‖grad‖ or after ``max_cg`` products.

    Parameters
    ----------
    products : callable
        ``products(v, xv)`` returns Xᵀ H X v and writes X v (``n_samples`` entries) into xv.
    grad : ndarray
        ∇J.
    lam : float
        The regularization constant λ.
    eta : float
        The forcing term.
    max_cg : int
        Products at most.
    n_samples : int
        The rows of X.

    Returns
    -------
    tuple
        ``(s, X s, n_products)``, X s summed from the products' X p.
    """
    n = n_samples
    s = np.zeros_like(grad)
    xs = np.zeros(n)
    xp = np.empty(n)
    r = -grad
    p = r.copy()
    rr = float(r @ r)
    stop = eta * eta * rr
    k = 0
    while k < max_cg:
        hp = products(p, xp)
        hp += lam * p
        k += 1
        curvature = float(p @ hp)
        if not curvature > 0.0:  # p = 0 to float64's resolution
            break
        alpha = rr / curvature
        s += alpha * p
        xp *= alpha  # in place (the next product overwrites xp): no temporary of n floats
        xs += xp
        hp *= alpha
        r -= hp
        rr_new = float(r @ r)
        if rr_new <= stop:
            break
        p *= rr_new / rr
        p += r
        rr = rr_new
    return s, xs, k


def _linear(oracle) -> bool:
    """Whether the oracle's scores are linear in w (a linear model's oracle, which holds X);
    otherwise they may be affine, f = X w + f₀ (a collaborative step's with offsets)."""
    return hasattr(oracle, "X")


def _direction_scores(state, s: np.ndarray) -> np.ndarray:
    """X s, the scores of the direction s (one pass): at s for a :func:`_linear` oracle,
    else f(w + s) − f(w), f(w) being ``state.f``."""
    oracle = state.oracle
    if _linear(oracle):
        return oracle.scores(s)
    xs = oracle.scores(state.best_w + s)
    xs -= state.f
    return xs


@dataclass(eq=False)
class NewtonState(State):
    """The Newton method's state: :class:`~bmrm.solver.methods.base.State` and its own.

    Parameters
    ----------
    problem, w0, best_w, best_J, lower_bound, last_J, nit, n_cache_cuts : see State
        As for :class:`~bmrm.solver.methods.base.State`.
    master_seconds, cache_seconds : float
        As for :class:`~bmrm.solver.methods.base.State`.
    f : ndarray or None
        The scores X w of the iterate ``best_w`` (J decreases at every accepted step, so the
        iterate is the best point); None until the first iteration evaluates w0.
    grad : ndarray or None, default=None
        ∇J at the iterate.
    grad0_norm : float, default=nan
        ‖∇J(w₀)‖, the scale of the forcing term.
    max_cg : int, default=250
        Conjugate-gradient products per iteration at most.
    n_products : list of int
        Hessian-vector products of each iteration.
    n_halvings : int, default=0
        Step halvings of the line searches (risk evaluations without a pass over X).
    stalled : bool, default=False
        No step along the Newton direction nor along −∇J decreases J: float64's resolution
        is reached and further steps do nothing.
    """

    f: np.ndarray | None = None
    grad: np.ndarray | None = None
    grad0_norm: float = math.nan
    max_cg: int = 250
    n_products: list = field(default_factory=list)
    n_halvings: int = 0
    stalled: bool = False

    @property
    def grad_norm(self) -> float:
        """The norm ‖∇J‖ at the iterate."""
        return float(np.linalg.norm(self.grad))


class NewtonCG:
    """Line-search Newton-CG with the strong-convexity certificate (module docstring).

    ``method="newton"`` of :func:`bmrm.fit`.

    Parameters
    ----------
    max_cg : int, default=250
        Conjugate-gradient products per iteration at most (the exact solve takes at most
        n_features of them in exact arithmetic).

    Raises
    ------
    ValueError
        When ``max_cg`` is not an integer of at least 1.
    """

    name = "newton"
    certifies = True

    def __init__(self, max_cg: int = 250):
        if isinstance(max_cg, bool) or not isinstance(max_cg, (int, np.integer)) or max_cg < 1:
            raise ValueError(f"max_cg must be an integer of at least 1; got {max_cg!r}")
        self.max_cg = int(max_cg)

    def check(self, problem: Problem) -> None:
        """Raise ``ValueError`` unless the Newton method applies to ``problem``.

        Ω = ½‖w‖² without bounds, and R convex, smooth and offering Hessian-vector products on
        scores.

        Parameters
        ----------
        problem : Problem
            The problem to solve.
        """
        if not problem.regularizer.qp:
            raise ValueError(
                f"method='newton' needs regularizer='l2' without bounds (its certificate is "
                f"the L2 term's strong convexity); got regularizer={problem.regularizer!r}"
            )
        missing = unmet_requirements(problem.capabilities)
        if missing:
            loss = getattr(problem.oracle, "loss", None)
            raise ValueError(
                f"method='newton' needs a risk that is {', '.join(missing)}; the loss "
                f"{loss!r} is not (the squared, logistic, listwise squared, ranknet and "
                "listnet losses and the ordinal and preference losses with hinge='squared' "
                "are)"
            )

    def init(self, problem: Problem, w0: np.ndarray, options: SolverOptions) -> NewtonState:
        """The state at w0, not yet evaluated (the first step evaluates it).

        Parameters
        ----------
        problem : Problem
            The problem to solve.
        w0 : ndarray
            The starting point.
        options : SolverOptions
            The loop's options.

        Returns
        -------
        NewtonState
            The state at ``w0``, not yet evaluated.
        """
        return NewtonState(problem=problem, w0=w0, best_w=w0, max_cg=self.max_cg)

    def _start(self, state: NewtonState) -> None:
        """The first iteration: w0's scores (one pass over X unless w0 = 0), J, ∇J (one) and
        the certificate there, so that a warm start at the optimum stops at once."""
        oracle, w0 = state.oracle, state.w0
        # X 0 = 0 for a linear oracle; an affine one's scores at 0 are f₀
        linear = _linear(oracle)
        f = oracle.scores(w0) if np.any(w0) or not linear else np.zeros(oracle.X.shape[0])
        R, a = oracle.cut_at(f)
        state.f = f
        state.record(w0, state.J_of(w0, R))
        state.grad = a + state.lam * w0
        state.grad0_norm = state.grad_norm
        state.lower_bound = strong_convexity_bound(state.best_J, state.grad0_norm, state.lam)
        state.n_products.append(0)

    def step(self, state: NewtonState) -> None:
        """One iteration: the Newton direction, the line search, the new certificate.

        The first iteration evaluates the start.

        Parameters
        ----------
        state : NewtonState
            Updated in place.
        """
        if state.f is None:
            self._start(state)
            return
        if state.stalled or state.grad_norm == 0.0:
            state.n_products.append(0)
            return
        oracle, lam = state.oracle, state.lam
        products = oracle.hessian(state.f)
        eta = min(0.5, math.sqrt(state.grad_norm / state.grad0_norm))
        s, xs, k = newton_direction(products, state.grad, lam, eta, state.max_cg, len(state.f))
        state.n_products.append(k)
        if not self._descend(state, s, xs):
            # no decrease along the Newton direction at float64's resolution: try −∇J
            s = -state.grad
            state.stalled = not self._descend(state, s, _direction_scores(state, s))

    def _descend(self, state: NewtonState, s: np.ndarray, xs: np.ndarray) -> bool:
        """Armijo's backtracking along s (X s = ``xs``) from the full step (module
        docstring); moves the iterate and its certificate and returns True, or False when no
        halving decreases J."""
        oracle, lam = state.oracle, state.lam
        w, f, J = state.best_w, state.f, state.best_J
        slope = float(state.grad @ s)
        if not slope < 0.0:
            return False
        ww, ws, ss = float(w @ w), float(w @ s), float(s @ s)
        t = 1.0
        for _ in range(_MAX_HALVINGS):
            f_t = np.multiply(xs, t)  # f + t·xs without a temporary of the scores' size
            f_t += f
            w_t = w + t * s
            if t == 1.0:
                R, a = oracle.cut_at(f_t)
            else:
                R, _ = oracle.risk_at(f_t)
                a = None
            J_t = 0.5 * lam * (ww + 2.0 * t * ws + t * t * ss) + R
            if J_t <= J + _ARMIJO * t * slope:
                if a is None:
                    R, a = oracle.cut_at(f_t)
                J_t = state.J_of(w_t, R)
                state.record(w_t, J_t)
                # the iterate, even where rounding leaves J_t a hair above the best J
                state.best_w, state.best_J = w_t, J_t
                state.f = f_t
                state.grad = a + lam * w_t
                state.lower_bound = max(
                    state.lower_bound, strong_convexity_bound(state.best_J, state.grad_norm, lam)
                )
                return True
            f_t = w_t = a = None  # freed before the next trial, not held beside it
            t *= 0.5
            state.n_halvings += 1
        return False

    def finish(self, state: NewtonState, result):
        """Add ``n_hessp``, ``n_halvings`` and the history column ``n_hessp``.

        ``n_hessp`` counts Hessian-vector products (the column: cumulative products at each
        iteration), ``n_halvings`` the step halvings.

        Parameters
        ----------
        state : NewtonState
            The final state.
        result : BMRMResult
            The loop's result.

        Returns
        -------
        BMRMResult
            ``result``, with the Newton method's figures added.
        """
        result.n_hessp = int(state.oracle.nhev)
        result.n_halvings = state.n_halvings
        result.history["n_hessp"] = np.cumsum(np.asarray(state.n_products, dtype=np.int64))
        return result

"""Master problems: minimise lam·Ω(w) + max_i (<a_i, w> + b_i) over the bundle's planes.

Each master returns the minimiser ``w``, a lower bound on min_w J(w) (the master optimum,
since every plane under-estimates the risk), and the planes' dual weights.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from bmrm.solver.bundle import Bundle
from bmrm.solver.qp import master_step, solve_simplex_qp

__all__ = ["QPMaster", "CvxpyMaster", "regularizer_value"]


def _cvxpy():
    """The cvxpy module, or an ImportError that says which extra installs it."""
    try:
        import cvxpy
    except ImportError as exc:
        raise ImportError(
            "the cvxpy master (regularizer 'l1', 'elastic_net' or a callable, bounds, nonneg, "
            "master='cvxpy') needs cvxpy, which the core install leaves out: "
            'python -m pip install "bmrm[cvxpy]"'
        ) from exc
    return cvxpy


def regularizer_value(regularizer, w: np.ndarray, l1_ratio: float = 0.5) -> float:
    """Ω(w) for a named regularizer (``"l2"``: ½‖w‖², ``"l1"``: ‖w‖₁, ``"elastic_net"``:
    l1_ratio·‖w‖₁ + (1 − l1_ratio)·½‖w‖²) or a callable returning a cvxpy expression."""
    if regularizer == "l2":
        return 0.5 * float(w @ w)
    if regularizer == "l1":
        return float(np.abs(w).sum())
    if regularizer == "elastic_net":
        return l1_ratio * float(np.abs(w).sum()) + (1 - l1_ratio) * 0.5 * float(w @ w)
    cp = _cvxpy()
    return float(regularizer(cp.Constant(w)).value)


class QPMaster:
    """The L2 master through its dual QP over the simplex (see :mod:`bmrm.solver.qp`).

    The dual objective D(α) = bᵀα − αᵀGα/(2 lam) at any feasible α is a valid lower bound on
    the master optimum, so the certificate holds even if the QP were stopped early. The dual
    is solved exactly by an active-set method (:func:`~bmrm.solver.qp.master_step`, one compiled
    call) warm-started from the previous weights and, while the planes of the previous
    working set (size s) are all still in the bundle, from its Cholesky factor: a new plane
    then usually costs a few O(k·s) cycles; otherwise the factor is rebuilt in O(s³/6).
    Should it ever stop short of the KKT tolerance, pair steps continue from its point, and
    an exact request (``accuracy = 0``) that still fails goes to an interior-point solver
    (Clarabel) before a final polish; ``fallbacks`` counts those hand-overs (none in the
    tests, lam from 1e-8 to 1e6).
    """

    name = "qp"

    def __init__(self, lam: float, tol: float = 1e-11, max_steps: int = 5_000):
        self.lam = lam
        self.tol = tol
        self.max_steps = max_steps
        self.steps = 0
        self.fallbacks = 0
        # the active-set factor of the last solve, reused while its planes stay
        self._L = np.zeros((0, 0))
        self._S = np.zeros(0, dtype=np.int64)
        self._S_ids = np.zeros(0, dtype=np.int64)
        self._meta = np.zeros(2)  # τ of the factor, size of its working set

    def solve(self, bundle: Bundle, accuracy: float = 0.0):
        """Solve the dual; ``accuracy`` (>= 0) is an absolute tolerance on its objective.

        With ``accuracy = 0`` the KKT violation is driven to ``tol`` times the problem's
        scale. The solver loop passes a small fraction of its current gap, since a more
        precise master cannot change the certificate by more than that.

        The QP is solved in the scale of the Gram matrix G = lam·Q (objective, gradient and
        tolerance multiplied by lam), which saves forming Q.
        """
        k = bundle.size
        lam = self.lam
        if len(self._L) < bundle.capacity:
            self._L = np.zeros((bundle.capacity, bundle.capacity))
            self._S = np.zeros(bundle.capacity, dtype=np.int64)
            self._S_ids = np.zeros(bundle.capacity, dtype=np.int64)
            self._meta[:] = 0.0
        alpha = np.empty(k)
        w, lower, steps, violation, tol = master_step(
            bundle.G,
            bundle.b,
            bundle.A,
            bundle.ids,
            k,
            lam,
            bundle.alpha,
            self.tol,
            accuracy,
            self._L,
            self._S,
            self._S_ids,
            self._meta,
            alpha,
        )
        self.steps += steps
        if violation <= tol:
            return w, lower, alpha
        # not reached (the active-set method is exact): pair steps from its point, then
        # for an exact request an interior-point solve
        self.fallbacks += 1
        self._meta[1] = 0  # the factor may not match the final α: rebuild it next time
        Q = bundle.G[:k, :k] / lam
        b = bundle.b[:k]
        grad = np.empty(k)
        steps, violation = solve_simplex_qp(Q, b, alpha, grad, tol, self.max_steps)
        self.steps += steps
        # inside the bundle loop (accuracy > 0) the bound of an unfinished α is still valid
        # and an interior-point solve costs more than it saves
        if violation > tol and accuracy == 0.0:
            alpha = _interior_point_dual(Q, b, alpha)
            steps, _ = solve_simplex_qp(Q, b, alpha, grad, tol, 50 * self.max_steps)
            self.steps += steps
        alpha /= alpha.sum()
        lower = float(b @ alpha - 0.5 * alpha @ (Q @ alpha))
        w = -(alpha @ bundle.A[:k]) / lam
        return w, lower, alpha


def _interior_point_dual(Q, b, alpha):
    """min ½αᵀQα − bᵀα over the simplex by Clarabel's interior-point method, called directly.

    Returns ``alpha`` unchanged if the solver fails.
    """
    import clarabel
    import scipy.sparse as sp

    k = len(b)
    P = sp.triu(sp.csc_matrix(Q), format="csc")
    constraints = sp.vstack([sp.csc_matrix(np.ones((1, k))), -sp.eye(k)], format="csc")
    rhs = np.concatenate([[1.0], np.zeros(k)])
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = 1e-12
    cones = [clarabel.ZeroConeT(1), clarabel.NonnegativeConeT(k)]
    solution = clarabel.DefaultSolver(P, -b, constraints, rhs, cones, settings).solve()
    x = np.maximum(np.asarray(solution.x, dtype=float), 0.0)
    if not np.all(np.isfinite(x)) or x.sum() <= 0:
        return alpha
    return x / x.sum()


class CvxpyMaster:
    """The master problem as a parametrised cvxpy model, built once and re-solved.

    min_{w, ξ} lam·Ω(w) + ξ  subject to  A w + b <= ξ 1  and optional bounds on w.

    Unused bundle slots hold the zero plane, valid because the risk is non-negative, so the
    problem keeps one shape and is compiled once (it is DPP). Ω is ``"l2"``, ``"l1"``
    (then a linear program), ``"elastic_net"`` or any callable mapping the cvxpy variable
    ``w`` to a convex expression.

    The lower bound does not trust the solver's reported value: for the named regularizers
    it is the Lagrangian dual D(α) = bᵀα + min_{w in box} [lam·Ω(w) + <Aᵀα, w>] at the
    solver's plane weights α, computed in closed form coordinate by coordinate, so it is a
    valid bound whatever the solver's accuracy. (For ‖·‖₁ without bounds, D is finite only
    if ‖Aᵀα‖∞ <= lam; otherwise α is first mixed with the zero plane until it is.) For a
    callable regularizer the bound is the solver's optimal value, to the solver's tolerance.
    """

    name = "cvxpy"

    def __init__(
        self,
        n_features: int,
        capacity: int,
        lam: float,
        regularizer: str | Callable = "l2",
        *,
        l1_ratio: float = 0.5,
        lower=None,
        upper=None,
        solver: str | None = None,
    ):
        cp = _cvxpy()

        self.capacity = capacity
        self.solver = solver
        self.w = cp.Variable(n_features)
        self.xi = cp.Variable()
        self.A = cp.Parameter((capacity, n_features))
        self.b = cp.Parameter(capacity)
        w = self.w
        if regularizer == "l2":
            omega = 0.5 * cp.sum_squares(w)
        elif regularizer == "l1":
            omega = cp.norm1(w)
        elif regularizer == "elastic_net":
            omega = l1_ratio * cp.norm1(w) + (1 - l1_ratio) * 0.5 * cp.sum_squares(w)
        else:
            omega = regularizer(w)
        self.lam = lam
        self.regularizer = regularizer
        self.l1_ratio = 1.0 if regularizer == "l1" else l1_ratio
        self.lower = -np.inf if lower is None else np.broadcast_to(lower, (n_features,))
        self.upper = np.inf if upper is None else np.broadcast_to(upper, (n_features,))
        self.cut = self.A @ w + self.b <= self.xi
        constraints = [self.cut]
        if lower is not None:
            constraints.append(w >= lower)
        if upper is not None:
            constraints.append(w <= upper)
        self.problem = cp.Problem(cp.Minimize(lam * omega + self.xi), constraints)
        if not self.problem.is_dcp():
            raise ValueError("regularizer must be a convex cvxpy expression of w")

    def solve(self, bundle: Bundle, accuracy: float = 0.0):
        k = bundle.size
        A = np.zeros(self.A.shape)
        b = np.zeros(self.capacity)
        A[:k] = bundle.A[:k]
        b[:k] = bundle.b[:k]
        self.A.value = A
        self.b.value = b
        accurate = self._solve()
        dual = np.maximum(np.asarray(self.cut.dual_value, dtype=float)[:k], 0.0)
        # weight on padding slots belongs to the zero plane in slot 0
        dual[0] += max(0.0, 1.0 - dual.sum())
        dual /= dual.sum()
        # an inaccurate solve may step slightly outside the box
        w = np.clip(np.asarray(self.w.value, dtype=float), self.lower, self.upper)
        if callable(self.regularizer):
            # an inaccurate solve gives no bound; the solver keeps the previous one
            return w, float(self.problem.value) if accurate else -np.inf, dual
        return w, self.dual_value(dual, bundle), dual

    def _solve(self) -> bool:
        """Solve, retrying with another solver when the first one stalls.

        Returns whether the solve was accurate. A solver that stalls on a near-degenerate
        bundle (many almost identical planes) still returns a usable point; the lower bound
        of the named regularizers is recomputed from its weights and stays valid.
        """
        cp = _cvxpy()

        usable = (cp.OPTIMAL, cp.OPTIMAL_INACCURATE, cp.USER_LIMIT)
        for solver in (self.solver or "CLARABEL", "SCS"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                try:
                    self.problem.solve(solver=solver)
                except cp.SolverError:
                    continue
            if self.problem.status == cp.OPTIMAL:
                return True
            if self.problem.status in usable and self.w.value is not None:
                return False
        raise RuntimeError(
            f"the cvxpy master problem could not be solved (status {self.problem.status})"
        )

    def dual_value(self, alpha: np.ndarray, bundle: Bundle) -> float:
        """D(α) = bᵀα + min_{lower <= w <= upper} lam·Ω(w) + <Aᵀα, w>, a lower bound."""
        k = bundle.size
        v = alpha @ bundle.A[:k]
        c = float(alpha @ bundle.b[:k])
        lam, r = self.lam, (0.0 if self.regularizer == "l2" else self.l1_ratio)
        if r == 1.0 and np.all(np.isinf(self.lower)) and np.all(np.isinf(self.upper)):
            vmax = np.abs(v).max()
            if vmax > lam:
                # mix with the zero plane so that the L1 dual is finite
                v, c = v * (lam / vmax), c * (lam / vmax)
        shrunk = np.maximum(np.abs(v) - lam * r, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            if r < 1.0:
                u = -np.sign(v) * shrunk / (lam * (1.0 - r))
            else:
                u = np.where(shrunk > 0, -np.sign(v) * np.inf, 0.0)
        x = np.clip(u, self.lower, self.upper)
        x = np.where(np.isfinite(x), x, 0.0)
        omega = r * np.abs(x).sum() + (1.0 - r) * 0.5 * float(x @ x)
        return c + lam * omega + float(v @ x)

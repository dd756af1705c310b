"""Master problems: minimise lam·Ω(w) + max_i (<a_i, w> + b_i) over the bundle's planes.

A master follows the :class:`Master` protocol: ``solve(bundle, accuracy)`` returns the
minimiser ``w``, a lower bound on min_w J(w) (the master optimum, since every plane
under-estimates the risk), and the planes' dual weights. :func:`make_master` builds the
one a fit asks for (``master=`` of :func:`bmrm.fit`).
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable
from typing import Protocol

import numpy as np

from bmrm.solver import qp
from bmrm.solver.bundle import Bundle
from bmrm.solver.qp import master_step, solve_simplex_qp
from bmrm.solver.regularizers import Regularizer, make_regularizer

__all__ = ["AutoMaster", "ClarabelMaster", "CvxpyMaster", "Master", "QPMaster", "make_master"]

logger = logging.getLogger("bmrm")


class Master(Protocol):
    """The master-problem protocol.

    Parameters
    ----------
    *args, **kwargs
        A master's own options.
    """

    name: str
    # a new plane costs one warm-started solve (the dual QP): cheap enough for the many
    # master solves of a per-query cut cache (bmrm.solver.cut_cache)
    incremental: bool

    def exact(self) -> Master:
        """The master without heuristics that presume every new plane cuts the last minimiser.

        The master itself, or the one it wraps (:class:`AutoMaster`).

        Returns
        -------
        Master
            This master, or the one it wraps.
        """

    def solve(self, bundle: Bundle, accuracy: float = 0.0):
        """Minimise lam·Ω(w) + max_i ⟨a_i, w⟩ + b_i over the bundle's planes.

        Parameters
        ----------
        bundle : Bundle
            The planes.
        accuracy : float
            An absolute tolerance on the objective (0: the solver's own precision).

        Returns
        -------
        tuple
            ``(w, lower, alpha)``: the minimiser, a valid lower bound on that minimum (whatever
            the accuracy), and the planes' dual weights.
        """


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


def _physical_memory() -> int | None:
    """Bytes of physical memory, or None where the system does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def grown_factor(size: int, L: np.ndarray, *vectors: np.ndarray) -> tuple[np.ndarray, ...]:
    """The active-set factor ``L`` (square) and its index ``vectors``, enlarged to ``size``
    with their entries kept."""
    n = len(L)
    bigger = np.zeros((size, size))
    bigger[:n, :n] = L
    out = [bigger]
    for v in vectors:
        w = np.zeros(size, dtype=v.dtype)
        w[:n] = v
        out.append(w)
    return tuple(out)


class QPMaster:
    """The L2 master through its dual QP over the simplex (see :mod:`bmrm.solver.qp`).

    The dual objective D(α) = bᵀα − αᵀGα/(2 lam) at any feasible α is a valid lower bound on
    the master optimum, so the certificate holds even if the QP were stopped early. The dual
    is solved exactly by an active-set method (:func:`~bmrm.solver.qp.master_step`: in NumPy
    in the first :data:`~bmrm.solver.qp.SMALL_SOLVES` solves of bundles of at most
    :data:`~bmrm.solver.qp.SMALL_BUNDLE` planes, compiled otherwise) warm-started from the
    previous weights and, while the planes of the previous working set (size s) are all
    still in the bundle, from its Cholesky factor: a new plane then usually costs a few
    O(k·s) cycles; otherwise the factor is rebuilt in O(s³/6).
    Should it ever stop short of the KKT tolerance, pair steps continue from its point, and
    an exact request (``accuracy = 0``) that still fails goes to an interior-point solver
    (Clarabel) before a final polish; ``fallbacks`` counts those hand-overs (none in the
    tests, lam from 1e-8 to 1e6) and ``misses`` those where the pair steps stopped short too.

    Parameters
    ----------
    lam : float
        The regularization constant.
    tol : float
        The KKT tolerance, relative to the problem's scale.
    max_steps : int
        Pair steps of the fallback, at most.
    """

    name = "qp"

    incremental = True

    def exact(self) -> Master:
        """The master without heuristics that presume every new plane cuts the last minimiser.

        The QP master itself.

        Returns
        -------
        Master
            This master.
        """
        return self

    def __init__(self, lam: float, tol: float = 1e-11, max_steps: int = 5_000):
        self.lam = lam
        self.tol = tol
        self.max_steps = max_steps
        self.steps = 0
        self.solves = 0  # master_step calls, which choose its NumPy or compiled method
        self.fallbacks = 0
        self.misses = 0  # fallbacks whose pair steps also stopped short of the tolerance
        # the active-set factor of the last solve, reused while its planes stay
        self._L = np.zeros((0, 0))
        self._S = np.zeros(0, dtype=np.int64)
        self._S_ids = np.zeros(0, dtype=np.int64)
        self._meta = np.zeros(2)  # τ of the factor, size of its working set

    def solve_offsets(self, bundle: Bundle, b: np.ndarray) -> np.ndarray:
        """The minimiser of ``lam``/2 ‖v‖² + max_i ⟨a_i, v⟩ + b_i with other offsets ``b``.

        For the bundle's a_i (the proximal steps of :mod:`bmrm.solver.methods.level`),
        warm-started from the bundle's weights and this master's last factor; solved to the
        active-set method's own tolerance.

        Parameters
        ----------
        bundle : Bundle
            The planes' slopes a_i.
        b : ndarray
            The offsets.

        Returns
        -------
        ndarray
            The minimiser v.
        """
        k = bundle.size
        if len(self._L) < len(bundle.G):
            self._L, self._S, self._S_ids = grown_factor(
                len(bundle.G), self._L, self._S, self._S_ids
            )
        alpha = np.empty(k)
        v, _, _, _, _ = master_step(
            bundle.G, b, bundle.A, bundle.ids, k, self.lam, bundle.alpha, self.tol, 0.0,
            self._L, self._S, self._S_ids, self._meta, alpha, small=self._count_solve(k),
        )  # fmt: skip
        return v

    def _count_solve(self, k: int) -> bool:
        """Count a solve of ``k`` planes; whether it takes the NumPy method
        (:data:`~bmrm.solver.qp.SMALL_SOLVES`, :data:`~bmrm.solver.qp.SMALL_BUNDLE`)."""
        self.solves += 1
        return self.solves <= qp.SMALL_SOLVES and k <= qp.SMALL_BUNDLE

    def solve(self, bundle: Bundle, accuracy: float = 0.0):
        """Solve the dual; ``accuracy`` (>= 0) is an absolute tolerance on its objective.

        With ``accuracy = 0`` the KKT violation is driven to ``tol`` times the problem's
        scale. The solver loop passes a small fraction of its current gap, since a more
        precise master cannot change the certificate by more than that.

        The QP is solved in the scale of the Gram matrix G = lam·Q (objective, gradient and
        tolerance multiplied by lam), which saves forming Q.

        Parameters
        ----------
        bundle : Bundle
            The planes.
        accuracy : float
            An absolute tolerance on the dual objective (>= 0).

        Returns
        -------
        tuple
            ``(w, lower, alpha)``: the minimiser, the dual objective at α (a valid lower
            bound) and the planes' weights α.
        """
        k = bundle.size
        lam = self.lam
        if len(self._L) < len(bundle.G):
            # as large as the bundle's arrays, which grow to its capacity as planes come (a
            # huge bundle_size costs memory only for the planes it holds); the factor of the
            # last solve is kept, its planes recognised by their ids
            self._L, self._S, self._S_ids = grown_factor(
                len(bundle.G), self._L, self._S, self._S_ids
            )
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
            small=self._count_solve(k),
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
        if violation > tol:
            self.misses += 1
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


# what to do about planes of large magnitude (the fit's warning says it too)
SCALE_ADVICE = (
    "scale the features of X (for example to unit variance, or per query to [0, 1]) or raise lam"
)


def _scale_advice(message: str, sigma: float) -> str:
    """``message`` with what to do when the planes' magnitude is the likely cause."""
    if sigma < 1e6:
        return message
    return (
        f"{message}; the planes' entries reach {sigma:.3g} (subgradients of features of "
        f"large magnitude), which leaves float64 too few digits for this problem: {SCALE_ADVICE}"
    )


def _l2_dual_bound(alpha: np.ndarray, A: np.ndarray, b: np.ndarray, lam: float):
    """(D, margin): the L2 master's dual D(α) = bᵀα − ‖Aᵀα‖²/(2 lam) as computed in float64,
    and a bound on its error, so that D − margin <= D(α / Σα) exactly, a lower bound on the
    master optimum by weak duality (α >= 0 whose sum is 1 up to rounding).

    Standard error bounds for sums of n products (Higham, *Accuracy and Stability of
    Numerical Algorithms*, 2002, §3.1: |fl(xᵀy) − xᵀy| <= γ_n |x|ᵀ|y|, γ_n = n·u/(1 − n·u)),
    applied to bᵀα and to each entry of v = Aᵀα, whose error e_v (in norm) bounds that of
    ‖v‖² by 2‖v̂‖e_v + e_v² plus the rounding of v̂ᵀv̂ itself. With s = Σα,
    |D(α) − D(α/s)| <= |s − 1|·(|bᵀα| + (1 + 1/s)·‖Aᵀα‖²/(2 lam)) covers the weights' sum.
    The total is doubled for the final operations and the inputs' own last bits.
    """
    k, d = A.shape
    u = np.finfo(np.float64).eps / 2

    def gamma(n):
        return n * u / (1.0 - n * u)

    with np.errstate(over="ignore", invalid="ignore"):
        v = alpha @ A
        vv = float(v @ v)
        ab = float(alpha @ b)
        e_v = gamma(k + 1) * float(np.linalg.norm(alpha @ np.abs(A)))
        norm_v = float(np.sqrt(vv))
        quad = vv / (2.0 * lam)
        rounding = (
            gamma(k + 1) * float(alpha @ np.abs(b))
            + (2.0 * norm_v * e_v + e_v * e_v + gamma(d + 1) * vv) / (2.0 * lam)
            + u * (abs(ab) + quad)
        )
        s = float(alpha.sum())
        off = abs(s - 1.0) + gamma(k + 1) * s  # |Σα − 1|, its own rounding included
        upper = abs(ab) + rounding
        quad_upper = (norm_v + e_v) ** 2 / (2.0 * lam)
        margin = 2.0 * (rounding + off * (upper + (1.0 + 1.0 / (s - off)) * quad_upper))
    lower = ab - quad
    if not (np.isfinite(lower) and np.isfinite(margin)):
        return -np.inf, 0.0
    return lower, margin


class ClarabelMaster:
    """The L2 master in its primal form, solved by Clarabel's interior-point method directly.

    min_{w, ξ} (lam/2)‖w‖² + ξ  subject to  A w + b <= ξ 1,

    a convex QP in d + 1 variables with one linear inequality per plane (Teo et al., JMLR
    2010, eq. 11), passed to Clarabel (a core dependency) without a modelling layer. It is
    what the automatic master hands over to when the dual QP (:class:`QPMaster`) keeps
    missing its tolerance on badly scaled planes; :class:`CvxpyMaster` solves the same
    problem through cvxpy, an optional extra.

    The lower bound does not trust the solver's reported value: it is the dual
    D(α) = bᵀα − ‖Aᵀα‖²/(2 lam) at the plane weights α, Clarabel's multipliers of the cuts
    projected onto the simplex (at the optimum they are non-negative and sum to 1, the
    stationarity condition in ξ), so it is a valid bound whatever the solver's accuracy.

    The bound is lowered by a bound on its own rounding error (:func:`_l2_dual_bound`): with
    planes of large magnitude whose weighted sum Aᵀα cancels, float64 cannot resolve D(α),
    and the margin says so instead of a bound above the optimum (``rounding_limited`` records
    that the margin exceeded the accuracy asked for).

    Planes of very large magnitude (subgradients of features of huge scale) can make the
    interior-point method fail. From the first such failure on, the master solves the same
    problem in u = σ·w, σ the planes' largest |entry|: min (lam/(2σ²))‖u‖² + ξ subject to
    (A/σ) u + b <= ξ 1 (``scaled``; ``sigma`` is the largest σ used). A bundle that fails
    in scaled variables too goes to ``backup`` (the dual QP the fit started with; counted
    in ``backup_solves``), or, without one, is a ``RuntimeError`` that says what to do.

    Parameters
    ----------
    lam : float
        The regularization constant.
    backup : QPMaster or None
        The master for bundles that fail in scaled variables too.
    """

    name = "clarabel"

    incremental = False

    def exact(self) -> Master:
        """The master without heuristics that presume every new plane cuts the last minimiser.

        The Clarabel master itself.

        Returns
        -------
        Master
            This master.
        """
        return self

    def __init__(self, lam: float, backup: QPMaster | None = None):
        self.lam = lam
        self.backup = backup
        self.backup_solves = 0
        self.scaled = False
        self.sigma = 1.0  # the largest sigma used
        self.rounding_limited = False

    def solve(self, bundle: Bundle, accuracy: float = 0.0):
        """Minimise lam·Ω(w) + max_i ⟨a_i, w⟩ + b_i over the bundle's planes.

        Parameters
        ----------
        bundle : Bundle
            The planes.
        accuracy : float
            An absolute tolerance on the objective (0: the solver's own precision).

        Returns
        -------
        tuple
            ``(w, lower, alpha)``: the minimiser, a valid lower bound on that minimum (whatever
            the accuracy), and the planes' dual weights.
        """
        k = bundle.size
        A = bundle.A[:k]
        b = bundle.b[:k]
        sigma = float(np.max(np.abs(A))) if k else 0.0
        sigma = sigma if 1.0 < sigma < np.inf else 1.0
        try:
            try:
                w, z = self._solve(A, b, sigma if self.scaled else 1.0)
            except RuntimeError:
                if self.scaled or sigma == 1.0:
                    raise
                # the scaled problem from now on (only then: where the solver copes with
                # the planes as they are, the scaled problem's tiny quadratic term costs
                # iterations)
                self.scaled = True
                w, z = self._solve(A, b, sigma)
        except RuntimeError as exc:
            if self.backup is None:
                raise RuntimeError(_scale_advice(str(exc), sigma)) from None
            # this bundle by the dual QP: its bound is valid whatever its accuracy
            self.backup_solves += 1
            return self.backup.solve(bundle, accuracy)
        alpha = np.maximum(z, 0.0)
        total = alpha.sum()
        if not (np.isfinite(total) and total > 0.0):
            # no usable multipliers: all weight on the plane of the largest bound
            alpha = np.zeros(k)
            with np.errstate(over="ignore", invalid="ignore"):
                alpha[int(np.argmax(b - 0.5 * np.einsum("ij,ij->i", A, A) / self.lam))] = 1.0
        else:
            alpha /= total
        lower, margin = _l2_dual_bound(alpha, A, b, self.lam)
        # rounding, not the solver, limits the bound at the accuracy the loop asks for
        self.rounding_limited = self.rounding_limited or margin > max(accuracy, 0.0) > 0.0
        return w, lower - margin, alpha

    def _solve(self, A: np.ndarray, b: np.ndarray, sigma: float):
        """(w, the cuts' multipliers), solved in u = sigma·w; RuntimeError if Clarabel
        returns no usable point."""
        import clarabel
        import scipy.sparse as sp

        self.sigma = max(self.sigma, sigma)
        k, d = A.shape
        # variables x = (u, ξ); P = diag(lam/σ², …, lam/σ², 0) (upper triangle)
        P = sp.diags(np.r_[np.full(d, self.lam / sigma**2), 0.0], format="csc")
        q = np.r_[np.zeros(d), 1.0]
        # (A/σ) u − ξ + s = −b, s >= 0
        G = sp.csc_matrix(np.hstack([A / sigma, -np.ones((k, 1))]))
        settings = clarabel.DefaultSettings()
        settings.verbose = False
        # the bound is computed from the multipliers, so their accuracy limits the smallest
        # gap it certifies: solve well below the tolerances a fit may ask for
        settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = 1e-12
        solution = clarabel.DefaultSolver(
            P, q, G, -b, [clarabel.NonnegativeConeT(k)], settings
        ).solve()
        status = str(solution.status)
        x = np.asarray(solution.x, dtype=float)
        z = np.asarray(solution.z, dtype=float)
        # a solved problem, or an interior point stopped short whose multipliers still sum
        # to 1 (the stationarity condition in ξ): one stopped far from the minimiser (the
        # next iterate) has its multipliers far from the simplex too
        finite = bool(np.all(np.isfinite(x)) and np.all(np.isfinite(z)))
        stopped = status in ("InsufficientProgress", "MaxIterations", "MaxTime")
        if not finite or not (
            status in ("Solved", "AlmostSolved") or (stopped and abs(z.sum() - 1.0) <= 1e-6)
        ):
            raise RuntimeError(
                f"the Clarabel master problem could not be solved (status {status})"
            )
        return x[:d] / sigma, z


class CvxpyMaster:
    """The master problem as a parametrised cvxpy model, built once and re-solved.

    min_{w, ξ} lam·Ω(w) + ξ  subject to  A w + b <= ξ 1  and the constraints of Ω (a box).

    Unused bundle slots hold the zero plane, valid because the risk is non-negative, so the
    problem keeps one shape and is compiled once (it is DPP). Ω is any
    :class:`~bmrm.solver.regularizers.Regularizer` (or what
    :func:`~bmrm.solver.regularizers.make_regularizer` accepts): L2, L1 (then a linear
    program), elastic net, a user's convex expression, any of them within a box.

    The lower bound does not trust the solver's reported value when the regularizer has a
    closed-form dual term: it is the Lagrangian dual D(α) = bᵀα + min_w [lam·Ω(w) + <Aᵀα, w>]
    at the solver's plane weights α (first mixed with the zero plane when D would be −inf,
    see ``Regularizer.dual_scale``), so it is a valid bound whatever the solver's accuracy.
    Otherwise (a user's expression) the bound is the solver's optimal value, to the solver's
    tolerance.

    Planes of very large magnitude (subgradients of features of huge scale) can make Clarabel
    and SCS end "infeasible_inaccurate". From the first such failure on, the master solves the
    same problem in u = σ·w, σ the planes' largest |entry|: min lam·Ω(u/σ) + ξ subject to
    (A/σ) u + b <= ξ 1 (``scaled``; ``sigma`` is the largest σ used). Until then the model
    in w is solved as it is.

    Parameters
    ----------
    n_features : int
        The length of w.
    capacity : int
        The bundle's capacity.
    lam : float
        The regularization constant.
    regularizer : Regularizer or str
        Ω (or what :func:`~bmrm.solver.regularizers.make_regularizer` accepts).
    solver : str or None
        The cvxpy solver (cvxpy's choice when None).
    """

    name = "cvxpy"

    incremental = False

    def exact(self) -> Master:
        """The master without heuristics that presume every new plane cuts the last minimiser.

        The cvxpy master itself.

        Returns
        -------
        Master
            This master.
        """
        return self

    def __init__(
        self,
        n_features: int,
        capacity: int,
        lam: float,
        regularizer: Regularizer | str = "l2",
        *,
        solver: str | None = None,
    ):
        cp = _cvxpy()

        # the problem is compiled once, for capacity planes of n_features weights, whose
        # arrays it fills at every solve
        numbers = capacity * (n_features + 1)
        memory = _physical_memory()
        if memory is not None and 8 * numbers > memory:
            raise ValueError(
                f"bundle_size={capacity} is too large for the cvxpy master problem, which "
                f"holds bundle_size × (n_features + 1) = {numbers:.3g} numbers "
                f"({8 * numbers / 2**30:.3g} GiB; this machine has {memory / 2**30:.3g} GiB); "
                "lower it (the default is 200)"
            )
        regularizer = make_regularizer(regularizer, n_features=n_features)
        self.capacity = capacity
        self.solver = solver
        self.A = cp.Parameter((capacity, n_features))
        self.b = cp.Parameter(capacity)
        self.lam = lam
        self.regularizer = regularizer
        self.w, self.cut, self.problem = self._model(None)
        if not self.problem.is_dcp():
            raise ValueError("regularizer must be a convex cvxpy expression of w")
        # planes of very large magnitude, on which Clarabel and SCS can end
        # "infeasible_inaccurate", are solved from the first such failure on in
        # u = sigma·w, sigma the planes' largest |entry| (inv_scale = 1 / sigma), so that
        # the cuts read (A / sigma) u + b <= xi
        self.scaled = False
        self.sigma = 1.0  # the largest sigma used
        self.inv_scale = None

    def _model(self, inv_scale):
        """(w, the cuts, the problem): in w itself, or in u with w = inv_scale·u."""
        cp = _cvxpy()

        u = cp.Variable(self.A.shape[1])
        w = u if inv_scale is None else inv_scale * u
        xi = cp.Variable()
        cut = self.A @ u + self.b <= xi
        constraints = [cut, *self.regularizer.constraints(w)]
        objective = cp.Minimize(self.lam * self.regularizer.expression(w) + xi)
        return w, cut, cp.Problem(objective, constraints)

    def solve(self, bundle: Bundle, accuracy: float = 0.0):
        """Minimise lam·Ω(w) + max_i ⟨a_i, w⟩ + b_i over the bundle's planes.

        Parameters
        ----------
        bundle : Bundle
            The planes.
        accuracy : float
            An absolute tolerance on the objective (0: the solver's own precision).

        Returns
        -------
        tuple
            ``(w, lower, alpha)``: the minimiser, a valid lower bound on that minimum (whatever
            the accuracy), and the planes' dual weights.
        """
        k = bundle.size
        A = np.zeros(self.A.shape)
        b = np.zeros(self.capacity)
        A[:k] = bundle.A[:k]
        b[:k] = bundle.b[:k]
        self.b.value = b
        sigma = float(np.max(np.abs(A[:k]))) if k else 0.0
        sigma = sigma if 1.0 < sigma < np.inf else 1.0
        try:
            accurate = self._solve_scaled(A, sigma) if self.scaled else self._solve_as_is(A)
        except RuntimeError as exc:
            if self.scaled or sigma == 1.0:
                raise RuntimeError(_scale_advice(str(exc), sigma)) from None
            # the scaled model from now on; only then: where the solvers cope with the
            # planes as they are, the scaled problem, whose quadratic term is lam/sigma²
            # small, takes more iterations to certify
            cp = _cvxpy()

            self.scaled = True
            self.inv_scale = cp.Parameter(nonneg=True, value=1.0)
            self.w, self.cut, self.problem = self._model(self.inv_scale)
            try:
                accurate = self._solve_scaled(A, sigma)
            except RuntimeError as again:
                raise RuntimeError(_scale_advice(str(again), sigma)) from None
        dual = np.maximum(np.asarray(self.cut.dual_value, dtype=float)[:k], 0.0)
        # weight on padding slots belongs to the zero plane in slot 0
        dual[0] += max(0.0, 1.0 - dual.sum())
        dual /= dual.sum()
        # an inaccurate solve may step slightly outside the box
        w = self.regularizer.project(np.asarray(self.w.value, dtype=float))
        lower = self.dual_value(dual, bundle)
        if lower is None:
            # an inaccurate solve gives no bound; the solver keeps the previous one
            lower = float(self.problem.value) if accurate else -np.inf
        return w, lower, dual

    def _solve_as_is(self, A: np.ndarray) -> bool:
        self.A.value = A
        return self._solve()

    def _solve_scaled(self, A: np.ndarray, sigma: float) -> bool:
        """Solve in u = sigma·w (see :meth:`_solve`)."""
        self.sigma = max(self.sigma, sigma)
        self.inv_scale.value = 1.0 / sigma
        self.A.value = A / sigma
        return self._solve()

    def _solve(self) -> bool:
        """Solve, retrying with another solver when the first one stalls.

        Returns whether the solve was accurate. A solver that stalls on a near-degenerate
        bundle (many almost identical planes) still returns a usable point; the lower bound
        of a regularizer with a closed-form dual term is recomputed from its weights and
        stays valid.
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
        if self.problem.status == cp.UNBOUNDED:
            raise RuntimeError(
                "the cvxpy master problem is unbounded: lam·Ω(w) plus the cutting planes has "
                f"no minimum, so regularizer {self.regularizer!r} is not bounded below on the "
                "feasible weights (a user's regularizer must be; a linear one such as "
                "cp.sum(w) is not)"
            )
        raise RuntimeError(
            f"the cvxpy master problem could not be solved (status {self.problem.status})"
        )

    def dual_value(self, alpha: np.ndarray, bundle: Bundle) -> float | None:
        """The dual D(α) = bᵀα + min_w lam·Ω(w) + ⟨Aᵀα, w⟩, a lower bound on the optimum.

        α is first mixed with the zero plane (weight 1 − t) when D would be −inf.

        Parameters
        ----------
        alpha : ndarray
            The planes' weights.
        bundle : Bundle
            The planes.

        Returns
        -------
        float or None
            None when the regularizer has no closed-form dual term.
        """
        k = bundle.size
        v = alpha @ bundle.A[:k]
        c = float(alpha @ bundle.b[:k])
        t = self.regularizer.dual_scale(v, self.lam)
        term = self.regularizer.dual_term(t * v, self.lam)
        return None if term is None else t * c + term


def make_master(
    master: str,
    regularizer: Regularizer,
    lam: float,
    n_features: int,
    capacity: int,
    cvxpy_solver: str | None,
) -> Master:
    """The master problem ``master`` for ``regularizer``.

    ``"auto"`` is the dual QP handing over to Clarabel (:class:`AutoMaster`) for the L2
    problem without bounds, the cvxpy model otherwise.

    Parameters
    ----------
    master : {"auto", "qp", "cvxpy"}
        The master's name.
    regularizer : Regularizer
        Ω.
    lam : float
        The regularization constant.
    n_features : int
        The length of w.
    capacity : int
        The bundle's capacity.
    cvxpy_solver : str or None
        The cvxpy master's solver.

    Returns
    -------
    Master
        The master problem, holding no plane yet.
    """
    if master == "auto" and regularizer.qp:
        qp = QPMaster(lam)
        return AutoMaster(qp, lambda: ClarabelMaster(lam, backup=qp))
    if master == "auto":
        master = "cvxpy"
    if master == "qp":
        if not regularizer.qp:
            raise ValueError(
                "master='qp' solves the unconstrained L2 problem only; use master='cvxpy' "
                f"for regularizer={regularizer!r}"
            )
        return QPMaster(lam)
    if master == "cvxpy":
        return CvxpyMaster(n_features, capacity, lam, regularizer, solver=cvxpy_solver)
    raise ValueError(f"master must be 'auto', 'qp' or 'cvxpy'; got {master!r}")


class AutoMaster:
    """The dedicated QP master, handing over to an interior-point method when it stalls.

    It hands over to the primal problem solved by an interior-point method
    (:class:`ClarabelMaster`) for the rest of the fit when, on
    ``patience`` consecutive solves, the QP misses its tolerance even after its pair-step
    fallback, or returns the same minimiser and bound though the model's value there went up
    (badly scaled problems, e.g. features ~1e6 with lam = 1e-3: the QP's tolerance grows
    with max ‖a_i‖²/lam and then accepts all weight on the zero plane; separable data or a
    target the model fits exactly, where J is tiny next to that tolerance). Its bounds stay
    valid either way; the primal solver keeps them progressing.

    ``exact()`` is the QP itself, for a solver whose planes may legitimately leave the
    minimiser in place (NRBM's lowered planes), where the stall test does not apply.

    Parameters
    ----------
    qp : QPMaster
        The QP master.
    make_fallback : callable
        Makes the master handed over to (:class:`ClarabelMaster`).
    patience : int
        Consecutive missed or stalled solves before the hand-over.
    """

    name = "auto"
    incremental = True

    def __init__(self, qp: QPMaster, make_fallback: Callable, patience: int = 3):
        self.qp = qp
        self.make_fallback = make_fallback
        self.patience = patience
        self.fallback = None
        self.streak = 0
        self._last = None

    def exact(self) -> Master:
        """The master that solves without the stall test: the QP until a hand-over.

        Returns
        -------
        Master
            The QP master, or the fallback master after a hand-over.
        """
        return self.qp if self.fallback is None else self.fallback

    def solve(self, bundle: Bundle, accuracy: float = 0.0):
        """Minimise lam·Ω(w) + max_i ⟨a_i, w⟩ + b_i over the bundle's planes.

        By the QP, or by the fallback after a hand-over (class docstring).

        Parameters
        ----------
        bundle : Bundle
            The planes.
        accuracy : float
            An absolute tolerance on the objective (0: the solver's own precision).

        Returns
        -------
        tuple
            ``(w, lower, alpha)``: the minimiser, a valid lower bound on that minimum (whatever
            the accuracy), and the planes' dual weights.
        """
        if self.fallback is not None:
            return self.fallback.solve(bundle, accuracy)
        before = self.qp.misses
        out = self.qp.solve(bundle, accuracy)
        w, lower, _ = out
        # the same minimiser and bound after new planes: the QP's tolerance, scaled by the
        # largest ‖a_i‖²/lam, accepts a point the new planes should have moved (a new plane
        # may also leave the optimum in place, when it is not violated there beyond the
        # accuracy asked for: methods that cut away from the master minimiser do that)
        ww = float(w @ w)
        # the minimiser is recognised by its fingerprint, not kept: a solver may free it
        # (the level method does once its projection has used it), and it is of w's size
        mark = (lower, ww, float(w.sum()), tuple(w[:4]), tuple(w[-4:]))
        stalled = (
            self._last is not None
            and mark == self._last
            and lower + accuracy < bundle.model_value(w) + 0.5 * self.qp.lam * ww
        )
        self._last = mark
        self.streak = self.streak + 1 if self.qp.misses > before or stalled else 0
        if self.streak >= self.patience:
            self.fallback = self.make_fallback()
            logger.info(
                "the QP master keeps missing its tolerance: switching to the %s master",
                self.fallback.name,
            )
        return out

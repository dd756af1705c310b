"""The risk oracle of a general scorer, and quasi-Newton training for smooth objectives.

:class:`ScorerOracle` is :class:`bmrm.solver.oracle.RiskOracle` with the linear map f = Xw
replaced by a scorer (:mod:`bmrm.scorers`): R(θ) = (1/n_terms) Σ_q l(h_θ(X_q), y_q) (with
sample weights, their weighted mean) and its gradient, the scorer's vector-Jacobian product
of ∂l/∂f. With a scorer that is not linear, or with a loss that is not convex, R is not
convex and the bundle method's cutting planes are not lower bounds. :func:`fit_nonconvex`
then minimises lam/2‖θ‖² + R(θ) either with L-BFGS (:func:`minimize_lbfgs`, a
differentiable R) or with the non-convex regularized bundle method
(:mod:`bmrm.solver.methods.nrbm`, smooth or not). Both find a stationary point (a local minimum in
practice), certifying nothing about the global one.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bmrm import exceptions
from bmrm.solver.loop import BMRMResult, minimize, minimize_bmrm
from bmrm.solver.methods import auto_method
from bmrm.solver.methods.base import SolverOptions
from bmrm.solver.methods.lbfgs import LBFGS
from bmrm.solver.methods.nrbm import NRBM
from bmrm.solver.oracle import RiskOracle
from bmrm.solver.problem import Capabilities, Problem
from bmrm.solver.regularizers import make_regularizer
from bmrm.solver.scorers import LinearScorer
from losses.validation import check_graded_labels

__all__ = [
    "NonconvexOptions",
    "ScorerOracle",
    "check_nonconvex",
    "fit_nonconvex",
    "minimize_lbfgs",
]


class ScorerOracle:
    """R(θ) = (1/n_terms) Σ_q l(h_θ(X_q), y_q) and its gradient ``vjp(∂l/∂f) / n_terms``.

    Same call signature as :class:`bmrm.solver.oracle.RiskOracle`: ``oracle(theta)`` returns
    ``(R, a)`` and ``oracle.n_features`` is the length of θ.

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
        The features, one row per document.
    prepared : losses.Prepared
        The loss bound to its validated targets.
    scorer : scorer object
        See :mod:`bmrm.scorers`.
    """

    def __init__(self, X, prepared, scorer):
        self.X = X
        self.prepared = prepared
        self.scorer = scorer
        self.n_features = scorer.n_params(X.shape[1])
        self.calls = 0

    def __call__(self, theta: np.ndarray):
        """Return ``(R(θ), ∂R/∂θ)``."""
        R, a = self._risk(np.asarray(theta, dtype=np.float64))
        self.calls += 1
        return R, a

    def _risk(self, theta):
        prepared = self.prepared
        groups = prepared.groups
        f, vjp = self.scorer.linearize(self.X, theta)
        if not np.all(np.isfinite(f)):  # before the loss, as the linear oracle checks X @ w
            raise FloatingPointError(
                f"the scorer {type(self.scorer).__name__} returned non-finite scores"
            )
        values, g = prepared.loss_grad(np.ascontiguousarray(groups.to_internal(f)))
        total = float(values.sum())
        if not np.isfinite(total) or not np.all(np.isfinite(g)):
            raise FloatingPointError("the loss returned a non-finite value or gradient")
        n = prepared.divisor
        if prepared.n_terms == 0:
            return 0.0, np.zeros(self.n_features)
        return total / n, np.asarray(vjp(groups.to_caller(g) / n), dtype=np.float64)


def minimize_lbfgs(
    oracle,
    lam: float,
    theta0: np.ndarray,
    *,
    tol: float = 1e-6,
    max_iter: int = 1000,
    max_time: float | None = None,
    callback=None,
) -> BMRMResult:
    """Minimise J(θ) = lam/2 ‖θ‖² + R(θ) by L-BFGS from ``theta0``.

    :mod:`bmrm.solver.methods.lbfgs` in the loop of every solver
    (:func:`~bmrm.solver.loop.minimize`).

    Parameters
    ----------
    oracle : callable
        ``oracle(theta) -> (R, ∂R/∂θ)``, R differentiable.
    lam : float
        The L2 constant, >= 0.
    theta0 : ndarray
        Starting point (the warm start).
    tol : float
        The largest gradient entry at which it stops (and tol² the relative decrease of J,
        as scipy's L-BFGS-B with ``gtol = tol`` and ``ftol = tol²``).
    max_iter : int
        Iteration cap.
    max_time : float or None
        Seconds, numba's compilation excluded.
    callback : callable or None
        ``callback(intermediate_result)`` after each iteration, as for the bundle methods;
        raise ``StopIteration`` to stop.

    Returns
    -------
    BMRMResult
        ``method = "lbfgs"``, ``gap`` the largest gradient entry at ``x`` (no lower bound:
        the objective is not convex), ``risk`` (R at x), ``jac`` (∇J at x), ``fun0`` (J at
        the start).
    """
    theta0 = np.asarray(theta0, dtype=np.float64).copy()
    n = theta0.size
    problem = Problem.of(oracle, make_regularizer("l2", n_features=n), float(lam), n)
    options = SolverOptions(tol=tol, max_iter=max_iter, max_time=max_time, callback=callback)
    return minimize(problem, LBFGS(), options, w0=theta0)


def ridge_start(X, y, lam: float) -> np.ndarray:
    """w minimising ‖X w − y‖² / n + max(lam, 1e-6) ‖w‖²: a start for non-convex losses."""
    n, d = X.shape
    gram = X.T @ X
    gram = gram.toarray() if hasattr(gram, "toarray") else np.asarray(gram, dtype=np.float64)
    rhs = np.asarray(X.T @ np.asarray(y, dtype=X.dtype), dtype=np.float64).ravel()
    return np.linalg.solve(gram / n + max(lam, 1e-6) * np.eye(d), rhs / n)


def _smooth(loss, scorer) -> bool:
    """Whether lam/2‖θ‖² + R(θ) is differentiable: a smooth loss, and a scorer that does not
    clip during training (a clipped expected gain jumps where a probability crosses ε)."""
    clipped = getattr(scorer, "clip_training", False) and getattr(scorer, "eps", None) not in (
        None,
        1.0,
    )
    return bool(getattr(loss, "smooth", False)) and not clipped


@dataclass(frozen=True)
class NonconvexOptions:
    """The tolerances and limits of :func:`fit_nonconvex`.

    Parameters
    ----------
    tol : float
        L-BFGS's largest gradient entry, or NRBM's relative stationarity gap.
    max_iter : int
        Iteration cap of each solve.
    max_time : float or None
        Seconds of the final solve, numba's compilation excluded.
    callback : callable or None
        Called after each iteration of the final solve.
    linear_tol : float
        Relative gap of the linear model fitted first for the warm start.
    bundle_size : int
        NRBM's bundle capacity.
    verbose : bool
        Log the final solve's iterations.
    """

    tol: float = 1e-6
    max_iter: int = 1000
    max_time: float | None = None
    callback: Callable | None = None
    linear_tol: float = 1e-3
    bundle_size: int = 200
    verbose: bool = False


def fit_nonconvex(
    X,
    y,
    prepared,
    scorer,
    lam: float,
    *,
    solver: str = "lbfgs",
    w0=None,
    options: NonconvexOptions | None = None,
):
    """Train ``scorer`` on a non-convex objective from a warm start; return ``(theta, res)``.

    ``options`` (:class:`NonconvexOptions`) holds the tolerances and limits. ``solver`` is
    ``"lbfgs"`` (:func:`minimize_lbfgs`; smooth objectives only) or ``"nrbm"`` (the
    non-convex regularized bundle method, :mod:`bmrm.solver.methods.nrbm`, for smooth and
    non-smooth risks; ``tol`` is then its relative model gap and ``res`` has status 5 at a
    stationary point); ``res`` is a :class:`~bmrm.solver.loop.BMRMResult` either way.

    The start is, in order: ``w0`` when it has one entry per parameter; the warm start of a
    linear ``w0`` (``scorer.from_linear``); else the linear model fitted first with the same
    loss and lam (the bundle method for a convex loss; for a non-convex one the same
    ``solver`` from :func:`ridge_start`), mapped by ``scorer.from_linear`` for a non-linear
    scorer, as Yang et al. warm-start from the linear ranking function (§6.2).
    ``res.linear_start`` is that linear model's weights (None when ``w0`` gave the start)
    and ``res.fun0`` the objective at the start.

    A loss declaring ``scale_invariant = True`` (the cosine loss) with the linear scorer
    has R(t w) = R(w) for t > 0, so lam/2‖w‖² + R(w) has no minimiser: its infimum is
    approached as w → 0 along the best direction, whatever lam. The fit then minimises R
    alone by L-BFGS (lam is ignored) and returns that direction with ‖w‖ = 1; ``res.fun``
    is R there. ``solver="nrbm"`` is refused for it (its master needs lam > 0).

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
        The data.
    y : ndarray
        The targets (for the ridge start of a non-convex loss).
    prepared : losses.Prepared
        The loss bound to its validated targets.
    scorer : scorer object
        The ranking function (:mod:`bmrm.scorers`).
    lam : float
        The L2 constant.
    solver : {"lbfgs", "nrbm"}
        The solver.
    w0 : ndarray or None
        The start: the scorer's parameters, or linear weights to warm-start from.
    options : NonconvexOptions or None
        Tolerances and limits (the defaults when None).

    Returns
    -------
    theta : ndarray
        The trained parameters.
    res : BMRMResult
        The final solve's result.

    Raises
    ------
    ValueError
        For ``solver="lbfgs"`` with an objective that is not smooth, or ``"nrbm"`` with a
        scale-invariant loss.
    """
    loss = prepared.loss
    options = NonconvexOptions() if options is None else options
    tol, max_iter, max_time = options.tol, options.max_iter, options.max_time
    if solver not in ("lbfgs", "nrbm"):
        raise ValueError(f"solver must be 'lbfgs' or 'nrbm'; got {solver!r}")
    if solver == "lbfgs" and not _smooth(loss, scorer):
        raise ValueError(
            f"loss {getattr(loss, 'name', loss)!r} with scorer {scorer!r} is not smooth: "
            "L-BFGS needs a differentiable objective; use method='nrbm'"
        )
    invariant = scorer.name == "linear" and getattr(loss, "scale_invariant", False)
    if invariant and solver == "nrbm":
        raise ValueError(
            f"loss {getattr(loss, 'name', loss)!r} is scale invariant: with the linear scorer "
            "lam/2‖w‖² + R(w) has no minimiser and the fit minimises R alone by L-BFGS; "
            "method='nrbm' needs lam > 0 in its master problem"
        )
    d = X.shape[1]
    n_params = scorer.n_params(d)
    linear_start = None
    if w0 is not None:
        w0 = np.asarray(w0, dtype=np.float64).ravel()
        if w0.shape == (n_params,):
            theta0 = w0
        elif w0.shape == (d,) and hasattr(scorer, "from_linear"):
            theta0 = scorer.from_linear(w0)
        else:
            raise ValueError(
                f"w0 must have {n_params} entries (the scorer's parameters) or {d} (linear "
                f"weights to warm-start from); got shape {w0.shape}"
            )
    else:
        if getattr(loss, "convex", True):
            linear_start = minimize_bmrm(
                RiskOracle(X, prepared), d, lam, tol=options.linear_tol, max_iter=max_iter
            ).x
        else:
            linear_start = ridge_start(X, y, lam)
            if scorer.name != "linear":
                linear_options = dataclasses.replace(
                    options, max_time=None, callback=None, verbose=False
                )
                linear_start = fit_nonconvex(
                    X, y, prepared, LinearScorer(), lam, solver=solver, w0=linear_start,
                    options=linear_options,
                )[0]  # fmt: skip
        theta0 = linear_start if scorer.name == "linear" else scorer.from_linear(linear_start)
    if solver == "nrbm":
        # the linear oracle's own products for f = Xw (also float32-aware)
        oracle = RiskOracle(X, prepared) if scorer.name == "linear" else None
        oracle = oracle or ScorerOracle(X, prepared, scorer)
        fun0 = lam * 0.5 * float(theta0 @ theta0) + float(oracle(theta0)[0])
        with warnings.catch_warnings():
            # the loop's max_iter warning speaks of a certified gap; ours is re-issued below
            warnings.simplefilter("ignore", exceptions.ConvergenceWarning)
            res = minimize_bmrm(
                oracle, n_params, lam, w0=theta0, method=NRBM(smooth=_smooth(loss, scorer)),
                tol=tol, max_iter=max_iter, max_time=max_time, callback=options.callback,
                bundle_size=options.bundle_size, verbose=options.verbose,
            )  # fmt: skip
        if res.status == 2:
            warnings.warn(
                f"NRBM reached max_iter={max_iter} with model gap {res.model_gap:.3e} "
                f"(tol={tol}): not yet a stationary point",
                exceptions.ConvergenceWarning,
                stacklevel=3,
            )
        res.fun0 = fun0
        res.linear_start = linear_start
        return res.x, res
    oracle = ScorerOracle(X, prepared, scorer)
    res = minimize_lbfgs(
        oracle,
        0.0 if invariant else lam,
        theta0,
        tol=tol,
        max_iter=max_iter,
        max_time=max_time,
        callback=options.callback,
    )
    if invariant and np.any(res.x):
        res.x = res.x / np.linalg.norm(res.x)
        res.fun = res.risk = oracle(res.x)[0]
    res.linear_start = linear_start
    return res.x, res


def check_nonconvex(scorer, loss, y, regularizer, bounds, nonneg, fit_intercept, method):
    """The ranking function and the solver of a non-convex fit, or a ValueError naming the option.

    ``method`` None or "auto" is :func:`~bmrm.solver.methods.auto_method` of the non-convex
    objective (L-BFGS where smooth, NRBM otherwise); "lbfgs" and "nrbm" (or an
    :class:`~bmrm.solver.methods.nrbm.NRBM` object) are taken as given; the convex methods
    ("bmrm", "ls-bmrm", "ocas", other method objects) are refused: their certificate
    assumes a convex risk.

    Parameters
    ----------
    scorer : scorer object or None
        The ranking function (None: linear); an expected-gain scorer without ``n_levels``
        gets them from ``y``.
    loss : loss object
        The loss.
    y : ndarray
        The targets.
    regularizer : str, callable or Regularizer
        :func:`bmrm.fit`'s ``regularizer``, which must keep its default ``"l2"``.
    bounds : tuple or None
        :func:`bmrm.fit`'s ``bounds``, which must keep its default None.
    nonneg : bool
        :func:`bmrm.fit`'s ``nonneg``, which must keep its default False.
    fit_intercept : bool
        :func:`bmrm.fit`'s ``fit_intercept``, which must keep its default False.
    method : str, object or None
        :func:`bmrm.fit`'s ``method``.

    Returns
    -------
    tuple
        ``(scorer, solver)``, solver "lbfgs" or "nrbm".
    """
    if scorer is None:
        scorer = LinearScorer()
    elif getattr(scorer, "n_levels", 0) is None:
        levels = check_graded_labels(y)
        scorer = scorer.with_params(n_levels=max(2, int(levels.max()) + 1))
    if isinstance(method, NRBM):
        method = "nrbm"
    if method is None or method == "auto":
        objective = Capabilities(convex=False, smooth=_smooth(loss, scorer))
        solver = auto_method(regularizer, objective)
    elif method in ("lbfgs", "nrbm"):
        solver = method
    else:
        raise ValueError(
            f"method={method!r} certifies convex objectives only; with a non-linear scorer "
            "or a non-convex loss use method='nrbm', 'lbfgs' (smooth objectives) or 'auto'"
        )
    if solver == "lbfgs" and not _smooth(loss, scorer):
        raise ValueError(
            f"loss {getattr(loss, 'name', loss)!r} with scorer {scorer!r} is not smooth: "
            "method='lbfgs' needs a differentiable objective; use method='nrbm' or 'auto'"
        )
    for name, value, default in (
        ("regularizer", regularizer, "l2"),
        ("bounds", bounds, None),
        ("nonneg", nonneg, False),
        ("fit_intercept", fit_intercept, False),
    ):
        if not (value is default or value == default):
            raise ValueError(
                f"{name}={value!r} is not supported with a non-linear scorer or a non-convex "
                f"loss (trained by {solver} on lam/2·‖θ‖² + R(θ)); leave it at {default!r}"
            )
    return scorer, solver

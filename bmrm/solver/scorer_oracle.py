"""The risk oracle of a ranking function, and its warm start.

:class:`ScorerOracle` is :class:`bmrm.solver.oracle.RiskOracle` with the linear map f = Xw
replaced by a ranking function (:mod:`bmrm.scorers`): R(θ) = (1/n_terms) Σ_q l(h_θ(X_q), y_q)
(with sample weights, their weighted mean) and its gradient, the ranking function's
vector-Jacobian product of ∂l/∂f. With a ranking function that is not linear, or with a loss
that is not convex, R is not convex and the bundle method's cutting planes are not lower
bounds: the oracle declares its :class:`~bmrm.solver.problem.Capabilities` (not convex,
smooth or not), so that :func:`bmrm.solver.choice.choose_solver` picks L-BFGS
(:mod:`bmrm.solver.methods.lbfgs`, a differentiable R) or the non-convex regularized bundle
method (:mod:`bmrm.solver.methods.nrbm`), started at :meth:`ScorerOracle.warm_start`. Both
find a stationary point (a local minimum in practice), certifying nothing about the global
one.
"""

from __future__ import annotations

import numpy as np

from bmrm.solver.choice import choose_solver, make_problem
from bmrm.solver.loop import BMRMResult, minimize
from bmrm.solver.methods import auto_method, get_method
from bmrm.solver.methods.base import SolverOptions
from bmrm.solver.methods.lbfgs import LBFGS
from bmrm.solver.methods.nrbm import NRBM
from bmrm.solver.oracle import RiskOracle
from bmrm.solver.problem import Capabilities, Problem
from bmrm.solver.regularizers import L2, make_regularizer
from bmrm.solver.scorers import LinearScorer
from losses.validation import check_graded_labels

__all__ = ["ScorerOracle", "check_nonconvex", "minimize_lbfgs", "ridge_start"]

# the relative gap of the linear model fitted first for the warm start of a convex loss
LINEAR_TOL = 1e-3


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
    y : ndarray or None
        The targets, for the ridge start of a loss that is not convex
        (:meth:`warm_start`).
    """

    def __init__(self, X, prepared, scorer, y=None):
        self.X = X
        self.prepared = prepared
        self.scorer = scorer
        self.y = y
        self.n_features = scorer.n_params(X.shape[1])
        self.calls = 0
        loss = prepared.loss
        self.capabilities = Capabilities(
            convex=False,
            smooth=_smooth(loss, scorer),
            exact=type(loss).__module__.split(".")[0] == "losses",
            scale_invariant=scorer.name == "linear" and getattr(loss, "scale_invariant", False),
        )

    def warm_start(self, problem: Problem, options: SolverOptions, solver: str = "lbfgs"):
        """The start of a fit from the linear model of the same loss.

        For a convex loss, the linear model fitted first with the same lam (the bundle
        method's automatic choice, to the relative gap ``LINEAR_TOL``); for a loss that is
        not convex, :func:`ridge_start`, then for a non-linear ranking function the linear
        model fitted by the same ``solver`` from there. It is mapped by the ranking
        function's ``from_linear``, as Yang et al. warm-start from the linear ranking
        function (§6.2). Its oracle calls are not the fit's.

        Parameters
        ----------
        problem : Problem
            The fit's problem (its lam).
        options : SolverOptions
            The fit's options (``tol``, ``max_iter``, ``bundle_size`` of the linear fit).
        solver : {"lbfgs", "nrbm"}
            The fit's solver.

        Returns
        -------
        tuple
            ``(theta0, {"linear_start": w})``: the start and the linear model's weights.
        """
        X, prepared, scorer, lam = self.X, self.prepared, self.scorer, problem.lam
        d = X.shape[1]
        if getattr(prepared.loss, "convex", True):
            linear = Problem.of(RiskOracle(X, prepared), L2(), lam, d)
            method = get_method(auto_method(linear.regularizer, linear.capabilities))
            limits = SolverOptions(tol=LINEAR_TOL, max_iter=options.max_iter)
            w = minimize(linear, method, limits).x
        else:
            w = ridge_start(X, self.y, lam)
            if scorer.name != "linear":
                linear = make_problem(ScorerOracle(X, prepared, LinearScorer()), L2(), lam, d)
                limits = SolverOptions(
                    tol=options.tol, max_iter=options.max_iter, bundle_size=options.bundle_size
                )
                w = minimize(linear, choose_solver(solver, linear, False), limits, w0=w).x
        theta0 = w if scorer.name == "linear" else scorer.from_linear(w)
        return theta0, {"linear_start": w}

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
    """Ridge regression of the labels on the features, a start for non-convex losses.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
        The features.
    y : array-like of shape (n_samples,)
        The labels, regressed on as numbers.
    lam : float
        The fit's regularization; the ridge penalty is max(lam, 1e-6).

    Returns
    -------
    ndarray of shape (n_features,)
        The w minimising ‖X w − y‖² / n + max(lam, 1e-6) ‖w‖².
    """
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
    if solver == "nrbm" and scorer.name == "linear" and getattr(loss, "scale_invariant", False):
        raise ValueError(
            f"loss {getattr(loss, 'name', loss)!r} is scale invariant: with the linear scorer "
            "lam/2‖w‖² + R(w) has no minimiser and the fit minimises R alone by L-BFGS; "
            "method='nrbm' needs lam > 0 in its master problem"
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

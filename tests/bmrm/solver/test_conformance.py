"""Every solver of :mod:`bmrm.solver.methods` through the same conformance tests.

For each registered solver (and NRBM declared convex, and as for a non-convex risk) on the
same problems: a certifying solver reaches the optimum of the whole problem solved directly
by cvxpy, and its gap bounds J − J*; a wrong subgradient raises; the result's bookkeeping
(``nfev``, ``n_passes``) equals the oracle's own count of its calls. A solver whose
``check`` refuses a problem (the level method, NRBM and Newton-CG under L1; Newton-CG on
every risk here, which offers no Hessian products) raises before any work.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import bmrm
import losses
from bmrm.solver.loop import minimize, minimize_bmrm
from bmrm.solver.methods import METHODS, NRBM, get_method
from bmrm.solver.methods.base import SolverOptions
from bmrm.solver.oracle import RiskOracle
from bmrm.solver.problem import Problem
from bmrm.solver.regularizers import make_regularizer
from tests.bmrm.solver.test_solver import direct_optimum, make_problem, objective

# name -> a fresh solver; NRBM declared convex certifies like the bundle methods
SOLVERS = {name: cls for name, cls in METHODS.items()}
SOLVERS["nrbm-convex"] = lambda: NRBM(convex=True)
CERTIFYING = sorted(SOLVERS)
# Newton-CG needs the package's oracle with a loss offering Hessian products, and a smooth
# risk: it refuses the user oracles and hinge losses here before any work (its own
# optimum, certificate and bookkeeping tests are in tests/bmrm/test_newton.py)
NEWTON_REFUSES = "method='newton' needs a risk that is smooth"


def assert_newton_refuses(run, oracle=None):
    with pytest.raises(ValueError, match=re.escape(NEWTON_REFUSES)):
        run()
    if oracle is not None:
        assert oracle.calls == 0


class CountingUserOracle:
    """A user's risk oracle ``oracle(w) -> (R, a)`` that counts its own calls; ``scale``
    multiplies the subgradient (1: exact)."""

    def __init__(self, X, y, loss, scale=1.0):
        self.X, self.y, self.loss, self.scale = X, y, loss, scale
        self.calls = 0

    def __call__(self, w):
        self.calls += 1
        f = self.X @ w
        n = len(self.y)
        if self.loss == "squared":
            r = f - self.y
            return 0.5 * float(r @ r) / n, self.scale * (self.X.T @ r) / n
        margin = 1.0 - self.y * f
        active = margin > 0
        return float(margin[active].sum()) / n, self.scale * (
            -(self.X[active].T @ self.y[active]) / n
        )


def _problem(name, loss, regularizer, seed):
    X, y = make_problem(seed, loss)
    lam = [1e-2, 1e-1][seed % 2]
    return X, y, lam


@pytest.mark.parametrize("solver", CERTIFYING)
@pytest.mark.parametrize("loss", ["squared", "hinge"])
@pytest.mark.parametrize("regularizer", ["l2", "l1"])
@pytest.mark.parametrize("seed", range(2))
def test_a_certifying_solver_reaches_the_direct_optimum(solver, loss, regularizer, seed):
    X, y, lam = _problem(solver, loss, regularizer, seed)
    oracle = CountingUserOracle(X, y, loss)
    method = SOLVERS[solver]()
    reg = make_regularizer(regularizer)
    if regularizer == "l1" and not reg.qp and solver in ("level", "nrbm-convex", "newton"):
        with pytest.raises(ValueError, match="regularizer='l2' without bounds"):
            minimize_bmrm(oracle, X.shape[1], lam, regularizer=regularizer, method=method)
        assert oracle.calls == 0  # refused before any work
        return
    if solver == "newton":
        assert_newton_refuses(
            lambda: minimize_bmrm(oracle, X.shape[1], lam, regularizer=regularizer, method=method),
            oracle,
        )
        return
    res = minimize_bmrm(
        oracle, X.shape[1], lam, regularizer=regularizer, method=method, tol=1e-6, max_iter=3000
    )
    J_star, _ = direct_optimum(X, y, loss, lam, regularizer)
    J = objective(X, y, loss, lam, regularizer, res.x)
    assert res.success, res.message
    assert J == pytest.approx(res.fun, rel=1e-10, abs=1e-12)
    # the certificate: J(x) − J* <= gap, and the lower bound is below the optimum
    assert J - J_star <= res.gap + 1e-7
    assert res.lower_bound <= J_star + 1e-7
    assert res.gap <= 1e-6 * res.fun + 1e-12
    # the counts are the oracle's own: every call is two passes over X
    assert res.nfev == oracle.calls
    assert res.n_passes == 2 * oracle.calls


@pytest.mark.parametrize("solver", CERTIFYING)
@pytest.mark.parametrize("scale", [0.5, 1.5])
def test_a_wrong_subgradient_raises(solver, scale):
    X, y = make_problem(3, "squared")
    oracle = CountingUserOracle(X, y, "squared", scale=scale)
    if solver == "newton":
        assert_newton_refuses(
            lambda: minimize_bmrm(oracle, X.shape[1], 1e-2, method=SOLVERS[solver]()), oracle
        )
        return
    with pytest.raises(ValueError, match="not a subgradient"):
        minimize_bmrm(oracle, X.shape[1], 1e-2, method=SOLVERS[solver](), tol=1e-8)


def _counted(oracle: RiskOracle) -> dict:
    """Wrap the oracle's entry points to count the calls made from outside it (on the
    instance; a call one entry point makes to another is part of the outer call)."""
    counts = dict.fromkeys(("call", "scores", "risk_at", "cut_at", "query_cut", "query_cut_at"), 0)
    depth = [0]
    for name in counts:
        function = getattr(oracle, name) if name != "call" else oracle.risk_and_cut

        def counted(*args, _f=function, _name=name, **kwargs):
            counts[_name] += depth[0] == 0
            depth[0] += 1
            try:
                return _f(*args, **kwargs)
            finally:
                depth[0] -= 1

        if name == "call":
            oracle.__dict__["_counted_call"] = counted
        else:
            setattr(oracle, name, counted)
    return counts


class _CallCounting(RiskOracle):
    """The package's oracle with its full calls counted (``__call__`` is looked up on the
    class, so it is counted here)."""

    def risk_and_cut(self, w):
        return RiskOracle.__call__(self, w)

    def __call__(self, w):
        return self.__dict__["_counted_call"](w)


@pytest.mark.parametrize("solver", [*CERTIFYING, "nrbm"])
@pytest.mark.parametrize("loss", ["ordinal", "ndcg-increasing"])
def test_bookkeeping_equals_the_oracles_own_count(solver, loss):
    """nfev counts risk evaluations (full calls, risks at scores, cuts at scores, per-query
    cuts) and n_passes the products with X, as the oracle itself saw them, whatever the
    solver's line searches and cut cache do."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(240, 5))
    y = rng.integers(0, 3, size=240).astype(float)
    qid = np.repeat(np.arange(24), 10)
    loss_obj = (
        losses.get("ndcg", ties="increasing", k=5, truncate_c=True)
        if loss.startswith("ndcg")
        else losses.get("ordinal")
    )
    prepared = losses.prepare(loss_obj, y, qid, n_samples=len(y))
    oracle = _CallCounting(X, prepared)
    counts = _counted(oracle)
    method = NRBM() if solver == "nrbm" else SOLVERS[solver]()
    if solver in ("bmrm", "ocas", "ls-bmrm", "level"):
        # every solver that takes one, with its per-query cut cache (within a loose cap)
        method = type(method)(cut_cache=bmrm.solver.cut_cache.CutCache(max_fraction=10.0))
    if solver == "newton":
        assert_newton_refuses(lambda: minimize_bmrm(oracle, X.shape[1], 1e-2, method=method))
        assert sum(counts.values()) == 0
        return
    res = minimize_bmrm(oracle, X.shape[1], 1e-2, method=method, tol=1e-4, max_iter=500)
    assert res.status in (0, 1, 5)
    evaluations = (
        counts["call"] + counts["risk_at"] + counts["cut_at"] + counts["query_cut"]
        + counts["query_cut_at"]
    )  # fmt: skip
    passes = (
        2 * counts["call"] + counts["scores"] + counts["cut_at"] + 2 * counts["query_cut"]
        + counts["query_cut_at"]
    )  # fmt: skip
    assert res.nfev == evaluations > 0
    assert res.n_passes == passes
    assert res.history["nfev"][-1] == res.nfev
    if solver in ("bmrm", "ocas", "ls-bmrm", "level"):
        assert counts["query_cut"] + counts["query_cut_at"] > 0  # the cache was fed


def test_a_solver_that_does_not_certify_reports_no_lower_bound_of_its_own():
    """NRBM on a risk it is not told is convex stops on its stationarity gap; the result
    has no lower bound (NaN, not the model's minimum nor a made-up one), its gap is the
    stationarity gap, and the status says it is a stationary point."""
    X, y = make_problem(1, "hinge")
    oracle = CountingUserOracle(X, y, "hinge")
    res = minimize_bmrm(oracle, X.shape[1], 1e-2, method="nrbm", tol=1e-6)
    assert res.certified is False
    assert np.isnan(res.lower_bound) and res.gap == res.stationarity_gap
    assert np.all(np.isnan(res.history["lower_bound"]))
    assert res.history["gap"][-1] == res.gap <= 1e-6 * res.fun
    assert res.status == 5 and res.success
    assert res.nfev == oracle.calls


@pytest.mark.parametrize("solver", CERTIFYING)
def test_minimize_runs_every_solver_on_a_problem(solver):
    """The one loop, called directly on a Problem: the same result as minimize_bmrm."""
    X, y = make_problem(2, "hinge")
    if solver == "newton":
        oracle = CountingUserOracle(X, y, "hinge")
        assert_newton_refuses(
            lambda: minimize_bmrm(oracle, X.shape[1], 1e-2, method=SOLVERS[solver]()), oracle
        )
        return
    a = minimize_bmrm(
        CountingUserOracle(X, y, "hinge"), X.shape[1], 1e-2, method=SOLVERS[solver]()
    )
    problem = Problem.of(CountingUserOracle(X, y, "hinge"), make_regularizer("l2"), 1e-2, 6)
    b = minimize(problem, get_method(SOLVERS[solver]()), options=SolverOptions())
    np.testing.assert_array_equal(a.x, b.x)
    assert (a.fun, a.lower_bound, a.nit, a.nfev) == (b.fun, b.lower_bound, b.nit, b.nfev)
    assert b.nfev == problem.oracle.nfev == problem.oracle.inner.calls

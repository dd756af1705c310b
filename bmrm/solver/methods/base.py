"""The solver protocol and the state every bundle method shares.

A solver (``method=`` of :func:`bmrm.fit`) is an object with

``name`` : str
    Its name in results (``result.method``).
``certifies`` : bool
    Whether its ``lower_bound`` is a certified lower bound on min J (the bundle methods on
    a convex risk). A solver that does not certify (NRBM on a non-convex risk) reports no
    lower bound: :func:`~bmrm.solver.loop.minimize` then stops on the solver's own
    stopping measure (``state.stop_gap``) and the result's ``lower_bound`` and ``gap`` are
    NaN.
``check(problem)``
    Raise ``ValueError`` when the solver cannot run on ``problem`` (a regularizer or a risk
    it does not support); called once, before any work.
``init(problem, w0, options) -> state``
    Its typed state (a dataclass holding *all* of its state, such as :class:`BundleState`
    or a subclass), at the starting point ``w0`` (already projected onto the domain), with
    the loop's :class:`SolverOptions`.
``step(state)``
    One iteration: evaluate the risk where it wants (through ``state.problem.oracle``, which
    counts), update the state, and leave ``state.best_J``, ``state.best_w``,
    ``state.lower_bound`` (certifying solvers) and ``state.stop_gap`` current.
``finish(state, result) -> result``
    Add the solver's own figures to the result (or return it as it is).

:func:`~bmrm.solver.loop.minimize` runs every solver by the same loop. An object with only
``step(state)`` (the earlier protocol) runs as a certifying bundle method on a
:class:`BundleState`.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from bmrm._validation import check_cvxpy_solver, check_tol, check_verbose
from bmrm.solver.bundle import Bundle
from bmrm.solver.masters import Master, make_master
from bmrm.solver.problem import Problem
from losses.validation import check_bool, check_int, check_positive

__all__ = ["BundleState", "Solver", "SolverOptions", "State", "Wrapper"]


@dataclass(frozen=True)
class SolverOptions:
    """The options of one solve: the loop's limits and what every solver's ``init`` receives.

    :func:`~bmrm.solver.loop.minimize` takes them as one object, so that no orchestration
    function repeats the list; :meth:`checked` checks them, once, before any work.

    Parameters
    ----------
    tol, atol : float
        The stopping tolerances (relative, in [0, 1), and absolute, >= 0; a solver with its
        own stopping measure uses them).
    master : {"auto", "qp", "cvxpy"}
        The bundle methods' master problem (:func:`~bmrm.solver.masters.make_master`).
    bundle_size, max_idle : int
        The bundle's capacity (>= 3) and pruning age (>= 1)
        (:class:`~bmrm.solver.bundle.Bundle`).
    cvxpy_solver : str or None
        The cvxpy master's solver.
    max_iter : int
        Iterations at most (>= 1), cut-cache iterations not counted.
    max_time : float or None
        Seconds (> 0), numba's compilation excluded.
    callback : callable or None
        ``callback(intermediate_result)`` after every iteration
        (:func:`~bmrm.solver.loop.minimize_bmrm`).
    verbose, progress : bool
        One log line per iteration; a progress bar (:func:`~bmrm.solver.loop.minimize_bmrm`).
    """

    tol: float = 1e-3
    atol: float = 0.0
    master: str = "auto"
    bundle_size: int = 200
    max_idle: int = 50
    cvxpy_solver: str | None = None
    max_iter: int = 1000
    max_time: float | None = None
    callback: Callable | None = None
    verbose: bool = False
    progress: bool = False

    def checked(self) -> SolverOptions:
        """The options checked, in their canonical types.

        Returns
        -------
        SolverOptions
            The same options, ``tol``, ``atol``, ``max_time`` as floats and ``verbose`` as
            a bool.

        Raises
        ------
        ValueError
            Naming the first option out of its range.
        """
        tol = check_tol(self.tol)
        atol = check_positive(self.atol, "atol", strict=False)
        max_iter = check_int(self.max_iter, "max_iter", 1)
        bundle_size = check_int(self.bundle_size, "bundle_size", 3)
        max_idle = check_int(self.max_idle, "max_idle", 1)
        max_time = None if self.max_time is None else check_positive(self.max_time, "max_time")
        if self.master not in ("auto", "qp", "cvxpy"):
            raise ValueError(f"master must be 'auto', 'qp' or 'cvxpy'; got {self.master!r}")
        verbose = check_verbose(self.verbose)
        progress = check_bool(self.progress, "progress")
        if self.callback is not None and not callable(self.callback):
            raise ValueError(f"callback must be callable or None; got {self.callback!r}")
        cvxpy_solver = check_cvxpy_solver(self.cvxpy_solver)
        return replace(
            self, tol=tol, atol=atol, max_iter=max_iter, bundle_size=bundle_size,
            max_idle=max_idle, max_time=max_time, verbose=verbose, progress=progress,
            cvxpy_solver=cvxpy_solver,
        )  # fmt: skip


class Solver(Protocol):
    """The solver protocol (module docstring).

    Parameters
    ----------
    *args, **kwargs
        A solver's own options.
    """

    name: str
    certifies: bool

    def check(self, problem: Problem) -> None:
        """Raise ``ValueError`` when the solver cannot run on ``problem``.

        Parameters
        ----------
        problem : Problem
            The problem to solve.
        """

    def init(self, problem: Problem, w0: np.ndarray, options: SolverOptions) -> Any:
        """The solver's typed state at ``w0``.

        Parameters
        ----------
        problem : Problem
            The problem to solve.
        w0 : ndarray
            The starting point, in the regularizer's domain.
        options : SolverOptions
            The loop's options.

        Returns
        -------
        State
            The solver's state at ``w0``.
        """

    def step(self, state) -> None:
        """One iteration, updating ``state`` in place.

        Parameters
        ----------
        state : State
            The solver's state.
        """

    def finish(self, state, result):
        """The result with the solver's own figures added.

        Parameters
        ----------
        state : State
            The final state.
        result : BMRMResult
            The loop's result.

        Returns
        -------
        BMRMResult
            ``result``, with the solver's own figures added.
        """


class Wrapper:
    """A solver run inside another: every protocol call goes to ``inner``.

    The base of the wrappers (the per-query cut cache, carried planes, a warm start), which
    override only the calls they change.

    Parameters
    ----------
    inner : Solver
        The wrapped solver; its ``name`` and ``certifies`` are the wrapper's.
    """

    def __init__(self, inner: Solver):
        self.inner = inner
        self.name = inner.name
        self.certifies = inner.certifies

    def check(self, problem: Problem) -> None:
        """The wrapped solver's check.

        Parameters
        ----------
        problem : Problem
            The problem to solve.
        """
        self.inner.check(problem)

    def init(self, problem: Problem, w0: np.ndarray, options: SolverOptions) -> Any:
        """The wrapped solver's state at ``w0``.

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
        State
            The wrapped solver's state at ``w0``.
        """
        return self.inner.init(problem, w0, options)

    def step(self, state) -> None:
        """One iteration of the wrapped solver.

        Parameters
        ----------
        state : State
            Updated in place.
        """
        self.inner.step(state)

    def finish(self, state, result):
        """The wrapped solver's figures.

        Parameters
        ----------
        state : State
            The final state.
        result : BMRMResult
            The loop's result.

        Returns
        -------
        BMRMResult
            ``result``, with the wrapped solver's figures added.
        """
        return self.inner.finish(state, result)


@dataclass(eq=False)
class State:
    """What every solver's state holds, and what :func:`~bmrm.solver.loop.minimize` reads.

    Parameters
    ----------
    problem : Problem
        The oracle (counting its calls), the regularizer, lam and the risk's capabilities;
        ``oracle``, ``lam``, ``regularizer``, ``nfev``, ``n_passes`` and ``oracle_seconds``
        read through to it.
    w0 : ndarray
        The starting point.
    best_w : ndarray or None
        The best evaluated point.
    best_J : float
        Its objective.
    lower_bound : float
        A certified lower bound on min J (certifying solvers), else -inf.
    last_J : float
        The lowest objective among the points evaluated in the current iteration (the
        loop resets it to inf before each step).
    nit : int
        Iterations so far.
    n_cache_cuts : int
        Iterations that took a plane from a cut cache instead of calling the oracle
        (:mod:`bmrm.solver.cut_cache`); not counted in ``nfev`` nor toward ``max_iter``.
    master_seconds, cache_seconds : float
        Seconds in master problems and in a cut cache.
    """

    problem: Problem
    w0: np.ndarray
    best_w: np.ndarray | None = None
    best_J: float = math.inf
    lower_bound: float = -math.inf
    last_J: float = math.inf
    nit: int = 0
    n_cache_cuts: int = 0
    master_seconds: float = 0.0
    cache_seconds: float = 0.0

    @property
    def oracle(self):
        """The problem's counting oracle."""
        return self.problem.oracle

    @property
    def lam(self) -> float:
        """The problem's regularization constant."""
        return self.problem.lam

    @property
    def regularizer(self):
        """The problem's regularizer."""
        return self.problem.regularizer

    @property
    def nfev(self) -> int:
        """Risk evaluations so far (the counting oracle's)."""
        return self.problem.oracle.nfev

    @property
    def n_passes(self) -> int:
        """Products with X so far (the counting oracle's)."""
        return self.problem.oracle.n_passes

    @property
    def oracle_seconds(self) -> float:
        """Seconds inside the oracle so far (the counting oracle's)."""
        return self.problem.oracle.seconds

    @property
    def stop_gap(self) -> float:
        """What the loop compares with its tolerances.

        best_J − lower_bound for a certifying solver; a solver without a certificate
        defines its own measure.
        """
        return self.best_J - self.lower_bound

    @property
    def bundle_size(self) -> int:
        """Planes held (0 for a solver without a bundle)."""
        return 0

    @property
    def n_aggregations(self) -> int:
        """Plane aggregations of a full bundle (0 for a solver without a bundle)."""
        return 0

    def J_of(self, w: np.ndarray, R: float) -> float:
        """The objective J(w) = lam·Ω(w) + R.

        Parameters
        ----------
        w : ndarray
            The point.
        R : float
            The risk at w.

        Returns
        -------
        float
            The objective J(w).
        """
        return self.problem.objective(w, R)

    def record(self, w: np.ndarray, J: float) -> None:
        """Count an evaluated point for the best iterate.

        Parameters
        ----------
        w : ndarray
            The point.
        J : float
            Its objective.
        """
        self.last_J = min(self.last_J, J)
        if J < self.best_J:
            self.best_J, self.best_w = J, w

    def check_step(self, certifies: bool) -> None:
        """Raise after a step that went wrong.

        ``FloatingPointError`` when the best objective is not finite; for a certifying
        solver, ``ValueError`` when the lower bound exceeds an evaluated objective by more
        than rounding (the bound comes from planes, so one of them over-estimates the risk
        somewhere and the oracle's gradient is not a subgradient).

        Parameters
        ----------
        certifies : bool
            Whether the solver certifies its lower bound.
        """
        best_J, gap = self.best_J, self.stop_gap
        if not math.isfinite(best_J):
            raise FloatingPointError(
                f"the objective is not finite (J = {best_J}) at iteration {self.nit}: the "
                "features or targets are too large for float64; rescale them"
            )
        if certifies and gap < -self.problem.rounding * (1.0 + abs(best_J)):
            raise ValueError(
                f"the certified lower bound {self.lower_bound:.6g} exceeds the objective "
                f"{best_J:.6g} of an evaluated point (gap {gap:.3e}): the oracle's "
                "gradient is not a subgradient of its risk (check its sign and scale)"
            )

    def stop_status(self, tol: float, atol: float) -> int:
        """The loop's status after a step.

        0 when ``stop_gap`` <= tol·|J(best)|, 1 when it is <= atol, else 2 (go on). A
        solver with another stopping rule overrides it.

        Parameters
        ----------
        tol, atol : float
            The relative and absolute tolerances.

        Returns
        -------
        int
            0 (stop, within ``tol``), 1 (stop, within ``atol``) or 2 (go on).
        """
        gap = self.stop_gap
        if gap <= tol * abs(self.best_J):
            return 0
        return 1 if gap <= atol else 2

    def settle(self) -> None:
        """Bring ``best_w`` and ``best_J`` up to date when the loop stops.

        A solver whose iterates are settled by a last evaluation overrides it; by default it
        does nothing.
        """


@dataclass(eq=False)
class BundleState(State):
    """The state of a bundle method: :class:`State` and what a bundle method keeps.

    Parameters
    ----------
    problem, w0, best_w, best_J, lower_bound, last_J, nit, n_cache_cuts : see State
        As for :class:`State`.
    master_seconds, cache_seconds : float
        As for :class:`State`.
    bundle : Bundle
        The cutting planes.
    master : Master
        The master problem (``solve(bundle, accuracy) -> (w, lower, alpha)``).
    w_master : ndarray or None
        The last master minimiser.
    cache : CutCache or None
        The per-query cut cache bound to this fit's oracle (:mod:`bmrm.solver.cut_cache`),
        set by :class:`~bmrm.solver.methods.cached.CutCached`.
    proposed : ndarray or None
        The point the next step evaluates, when its ``proposal`` computed it already (the
        level method's projection); a cache cut taken instead clears it.
    master_rtol : float
        The master problem is solved to within this fraction of the current gap (its
        objective's absolute tolerance; 0: to the solver's own precision). Its optimum's
        bound stays valid at any accuracy (the dual objective of a feasible α).
    zero_checked : bool
        Whether a zero subgradient has been checked against the risk nearby
        (:meth:`check_zero_subgradient`, at most once per fit).
    slope_checked : bool
        Whether a user's subgradient has been checked against the risk along a line
        (:meth:`check_slope`, at most once per fit).
    buffers : dict
        Work arrays by name (:meth:`buffer`).
    """

    bundle: Bundle | None = None
    master: Master | None = None
    w_master: np.ndarray | None = None
    cache: Any = None
    proposed: np.ndarray | None = None
    master_rtol: float = 1e-3
    zero_checked: bool = False
    slope_checked: bool = False
    buffers: dict = field(default_factory=dict)

    @classmethod
    def start(cls, problem: Problem, w0: np.ndarray, options: SolverOptions, **fields):
        """A fresh state at ``w0``: an empty bundle and the master ``options`` ask for.

        Parameters
        ----------
        problem : Problem
            The problem to solve.
        w0 : ndarray
            The starting point.
        options : SolverOptions
            The loop's options.
        **fields
            Further fields of the state.

        Returns
        -------
        BundleState
        """
        master = make_master(
            options.master, problem.regularizer, problem.lam, problem.n_features,
            options.bundle_size, options.cvxpy_solver,
        )  # fmt: skip
        bundle = Bundle(problem.n_features, options.bundle_size, options.max_idle)
        return cls(problem=problem, bundle=bundle, master=master, w0=w0, best_w=w0, **fields)

    def buffer(self, name: str, like: np.ndarray) -> np.ndarray:
        """A work array shaped like ``like``, allocated once per fit.

        Allocating n-sized arrays on every call costs page faults comparable to a pass over
        X.

        Parameters
        ----------
        name : str
            The array's name.
        like : ndarray
            Its shape and dtype.

        Returns
        -------
        ndarray
            The work array (its contents are left from its last use).
        """
        buf = self.buffers.get(name)
        if buf is None or buf.shape != like.shape:
            buf = self.buffers[name] = np.empty_like(like)
        return buf

    @property
    def gap(self) -> float:
        """The certified gap J(best) − lower bound."""
        return self.best_J - self.lower_bound

    @property
    def bundle_size(self) -> int:
        """Planes held."""
        return self.bundle.size

    @property
    def n_aggregations(self) -> int:
        """Plane aggregations of the full bundle."""
        return self.bundle.n_aggregations

    def model_value(self, w: np.ndarray, k: int | None = None) -> float:
        """The bundle's model of R at w, max_{i<k} ⟨a_i, w⟩ + b_i.

        By einsum's own loop (a BLAS product would wake BLAS's thread pool).

        Parameters
        ----------
        w : ndarray
            The point.
        k : int or None
            The first k planes only (all by default).

        Returns
        -------
        float
            The model's value at w.
        """
        return self.bundle.model_value(w, k)

    def check_risk(self, w: np.ndarray, R: float) -> None:
        """Raise ``ValueError`` if the planes over-estimate the risk R at ``w``.

        Every plane must lie below R (the subgradient inequality), so this means a wrong
        subgradient. O(k·d).

        Parameters
        ----------
        w : ndarray
            An evaluated point.
        R : float
            The risk there.
        """
        bundle = self.bundle
        k = bundle.size
        # einsum's own loop: a BLAS product would wake BLAS's thread pool (see products)
        values = np.einsum("ij,j->i", bundle.A[:k], w) + bundle.b[:k]
        i = int(np.argmax(values))
        scale = 1.0 + abs(R) + float(np.abs(values).max()) + float(np.abs(bundle.b[:k]).max())
        if R < values[i] - 1e-8 * scale:
            raise ValueError(
                f"the risk {R:.6g} at an evaluated point lies below the cutting plane of an "
                f"earlier point ({values[i]:.6g}): the oracle's gradient is not a subgradient "
                "of its risk (check its sign and scale)"
            )

    def evaluate(self, w: np.ndarray, cut: bool = True):
        """One oracle call at ``w`` (two passes over X), checked and recorded.

        Its plane joins the bundle when ``cut``, and its per-query planes the state's cut
        cache when one is active (:class:`~bmrm.solver.methods.cached.CutCached`).

        Parameters
        ----------
        w : ndarray
            The point.
        cut : bool
            Add the plane to the bundle.

        Returns
        -------
        tuple
            ``(J, R, a)``: the objective, the risk and its subgradient at ``w``.
        """
        cache = self.cache
        if cache is not None and cache.active:
            R, a = cache.oracle_cut(self, w)
        else:
            R, a = self.oracle(w)
        self.check_risk(w, R)
        self.check_subgradient(w, R, a)
        J = self.J_of(w, R)
        self.record(w, J)
        if cut:
            self.bundle.add(a, R - float(a @ w))
        return J, R, a

    def cut_at(self, w: np.ndarray, f: np.ndarray):
        """The oracle's risk and subgradient at ``w`` from its scores ``f`` (one pass).

        Its per-query planes go to the state's cut cache when one is active; the caller
        checks and records the evaluation.

        Parameters
        ----------
        w : ndarray
            The point.
        f : ndarray
            Its scores X w.

        Returns
        -------
        tuple
            ``(R, a)``.
        """
        cache = self.cache
        if cache is not None and cache.active:
            return cache.oracle_cut(self, w, f)
        return self.oracle.cut_at(f)

    def check_subgradient(self, w: np.ndarray, R: float, a: np.ndarray) -> None:
        """Probe a user's subgradient at an evaluated point against its risk nearby.

        Once per fit: :meth:`check_zero_subgradient` when it is zero, else
        :meth:`check_slope`.

        Parameters
        ----------
        w : ndarray
            The point.
        R : float
            The risk there.
        a : ndarray
            The oracle's subgradient there.
        """
        if a.any():
            self.check_slope(w, R, a)
        else:
            self.check_zero_subgradient(w, R, a)

    def check_zero_subgradient(self, w: np.ndarray, R: float, a: np.ndarray) -> None:
        """Raise if a zero subgradient ``a`` at ``w`` is disproved by the risk nearby.

        A zero subgradient of the convex risk says that ``w`` minimises it (R(w + t d) >=
        R(w) for every d and t), and its plane alone certifies the regularizer's minimiser:
        an oracle that returns a placeholder zero gradient would end the fit "converged" at
        the start. The risk of a user's oracle or loss is evaluated along two random
        directions, both ways, at four step lengths (16 calls, at most once per fit;
        not for the package's own losses, which are exact); a value lower by more than
        rounding raises ``ValueError``.

        Parameters
        ----------
        w : ndarray
            An evaluated point.
        R : float
            The risk there.
        a : ndarray
            The oracle's subgradient there.

        Raises
        ------
        ValueError
            When the risk nearby disproves the subgradient.
        """
        if R <= 0.0 or self.zero_checked or a.any():
            return
        self.zero_checked = True
        if self.problem.capabilities.exact:
            return
        rng = np.random.default_rng(0)
        with self._probing():
            for _ in range(2):
                d = rng.standard_normal(w.shape)
                for _, lower in self._risks_along(w, d, (1.0, 1e-2, 1e-4, 1e-6)):
                    if np.isfinite(lower) and lower < R - 1e-9 * R:
                        raise ValueError(
                            f"the oracle returned a zero subgradient where the risk "
                            f"({R:.6g}) is not least: at a nearby point it is {lower:.6g}, "
                            "so zero is not a subgradient of the convex risk there (a loss's "
                            "loss_grad must return the gradient of the values it returns)"
                        )

    @contextlib.contextmanager
    def _probing(self):
        """The probes overwrite the oracle's work arrays: its last gradient is put back."""
        inner = self.oracle.inner
        last = getattr(inner, "last_gradient", None)
        saved = None if last is None else last.copy()
        try:
            yield
        finally:
            if saved is not None:
                inner.last_gradient = last
                np.copyto(last, saved)

    def _risks_along(self, w: np.ndarray, d: np.ndarray, lengths):
        """Yield ``(step, R(w + step·d))`` for each length, both ways, the steps scaled by
        w's root mean square (at least 1); each is an oracle call."""
        scale = max(1.0, float(np.sqrt(np.mean(np.square(w))))) if w.size else 1.0
        for t in lengths:
            for step in (t * scale, -t * scale):
                value = float(self.oracle(w + step * d)[0])
                yield step, value

    def check_slope(self, w: np.ndarray, R: float, a: np.ndarray) -> None:
        """Raise if a user's subgradient ``a`` at ``w`` is disproved by the risk along a line.

        For a convex R and a subgradient a, R(w + s d) >= R(w) + s·⟨a, d⟩ for every d and s
        (the subgradient inequality). A gradient off by a few per cent (scaled, shifted, a
        term left out) passes the checks made at the points the solver evaluates, yet its
        planes over-estimate R along descent directions and make the certified gap too
        small. Once per fit, the risk of a user's oracle or loss is evaluated along a random
        direction, both ways, at three step lengths (6 calls; not for the package's own
        losses); a value below the plane by more than rounding raises ``ValueError``.
        Small steps see a wrong slope where R is close to linear, large ones where it bends.

        Parameters
        ----------
        w : ndarray
            An evaluated point.
        R : float
            The risk there.
        a : ndarray
            The oracle's subgradient there.

        Raises
        ------
        ValueError
            When the risk along the line disproves the subgradient.
        """
        if self.slope_checked:
            return
        self.slope_checked = True
        if self.problem.capabilities.exact:
            return
        # the risk's rounding: relative 1e-9 in float64, more for float32 products or an
        # oracle that answers in float32
        kinds = [self.problem.capabilities.dtype]
        kinds += [np.asarray(R).dtype, np.asarray(a).dtype]
        eps = max(float(np.finfo(k).eps) for k in kinds if k.kind == "f")
        rounding = max(1e-9, 100.0 * eps)
        d = np.random.default_rng(1).standard_normal(w.shape)
        d /= max(float(np.linalg.norm(d)), 1e-300)
        slope = float(a @ d)
        with self._probing():
            for step, value in self._risks_along(w, d, (1e-1, 1e-3, 1e-5)):
                plane = R + step * slope
                tolerance = rounding * (abs(R) + abs(value) + abs(step * slope))
                if np.isfinite(value) and value < plane - tolerance:
                    raise ValueError(
                        f"the oracle's subgradient at an evaluated point is contradicted by "
                        f"its risk along a line: {value:.10g} at step {step:.3g}, below "
                        f"the subgradient's plane {plane:.10g}, so it is not a subgradient "
                        "of a convex risk there (a loss's loss_grad must return the gradient "
                        "of the values it returns; losses.check_oracle tests it)"
                    )

    def solve_master(self) -> np.ndarray:
        """Minimise the regularized cutting-plane model and raise the lower bound to its optimum.

        Returns
        -------
        ndarray
            Its minimiser (also kept in ``w_master``).
        """
        t1 = time.perf_counter()
        # the master's own error need not be below a small fraction of the gap
        accuracy = self.master_rtol * self.gap if math.isfinite(self.lower_bound) else 0.0
        w_master, lb, alpha = self.master.solve(self.bundle, accuracy)
        self.bundle.set_weights(alpha)
        self.bundle.prune_idle()
        self.master_seconds += time.perf_counter() - t1
        self.lower_bound = max(self.lower_bound, lb)
        self.w_master = w_master
        return w_master

"""The solvers (``method=`` of :func:`bmrm.fit`), one module each, and their registry.

Every solver follows the protocol of :mod:`bmrm.solver.methods.base` (a check made once,
a typed state, one step, whether it certifies a gap) and runs in the one loop
:func:`bmrm.solver.loop.minimize`. A bundle method's step evaluates the risk where it
wants (:meth:`BundleState.evaluate` for an oracle call with its cut,
:func:`~bmrm.solver.methods.line_search.segment` for a line search), solves the master
problem (:meth:`BundleState.solve_master`) and leaves the certificate in
``state.lower_bound``, a lower bound on min J. Every evaluated point counts for the best
iterate, and every oracle call for ``nfev`` (the problem's counting oracle), whatever the
solver does with it.

A new solver: a module here with a class following the protocol, an entry in
:data:`METHODS` (certified on convex risks) or :data:`NONCONVEX_METHODS`, and, if
``method="auto"`` should pick it, a rule in :func:`auto_method`.

Methods
-------
``"bmrm"`` (:class:`PlainBMRM`)
    Evaluate at the master problem's minimiser (Teo, Vishwanathan, Smola & Le, JMLR 11,
    2010, Algorithm 1).
``"ls-bmrm"`` (:class:`LineSearchBMRM`)
    Line search from the best point towards the master's minimiser, cut at the line-search
    point (Teo et al. 2010, Section 5, "ls-bmrm").
``"ocas"`` (:class:`OCAS`)
    The optimized cutting plane algorithm (Franc & Sonnenburg, JMLR 10, 2009): the same
    line search, then the cut at a point a fraction ``mu`` beyond it towards the master's
    minimiser, which keeps the convergence guarantee of the cutting-plane method.
``"inout"`` (:class:`InOut`)
    The in-out cutting-plane method (Ben-Ameur & Neto, Networks 49, 2007): OCAS's cut
    point without its line search, the cut a fraction ``mu`` of the way from the best
    point to the master's minimiser; one oracle call per iteration.
``"level"`` (:class:`~bmrm.solver.methods.level.LevelBundle`)
    The level bundle method (Lemaréchal, Nemirovskii & Nesterov, Math. Programming 69,
    1995).
``"newton"`` (:class:`~bmrm.solver.methods.newton.NewtonCG`)
    Line-search Newton-CG on the risk's Hessian-vector products, for L2 without bounds and
    a convex, smooth risk whose loss offers ``hessp``; its gap is the L2 term's strong
    convexity bound ‖∇J‖²/(2 lam).
``"nrbm"`` (:class:`~bmrm.solver.methods.nrbm.NRBM`)
    The non-convex regularized bundle method (Do & Artières, JMLR 13, 2012) for risks
    that are not convex: serious and null steps, planes lowered where they conflict with
    the serious point, and a stationary point (not a certified optimum) at the end. Kept
    out of :data:`METHODS`, the methods with a certified gap on convex risks.
``"lbfgs"`` (:class:`~bmrm.solver.methods.lbfgs.LBFGS`)
    Limited-memory BFGS with a strong Wolfe line search (Nocedal & Wright, 2006) for
    smooth objectives that are not convex (a non-linear ranking function, a smooth loss
    declaring ``convex = False``): a stationary point, no certificate. :func:`bmrm.fit`
    takes it for such objectives only (:func:`~bmrm.solver.choice.choose_solver`).

Wrappers
--------
:class:`CarriedPlanes` starts a solver from the planes of an earlier solve (``bmrm.path``,
the concave-convex procedure); :class:`bmrm.solver.cccp.CCCP` runs an inner solver on the
convex surrogates of a latent loss, one subproblem after another, in the same loop.

Per-query cut cache
-------------------
:class:`PlainBMRM`, :class:`OCAS`, :class:`LineSearchBMRM` and
:class:`~bmrm.solver.methods.level.LevelBundle` take ``cut_cache=True`` (or ``"auto"``, or a
:class:`~bmrm.solver.cut_cache.CutCache` with its options), which :func:`get_method` turns
into the wrapper :class:`CutCached` around them (``"auto"``: with an incremental master
only): for per-query losses it keeps each query's planes from earlier oracle calls and,
where the per-query maximum of those planes is violated enough at the point the method
proposes, adds it instead of the method's step and oracle call (the
constraint cache of SVM^rank's 1-slack solver; :mod:`bmrm.solver.cut_cache`). For example
``bmrm.fit(X, y, "ordinal", qid, lam=1e-2, method=PlainBMRM(cut_cache=True))``. Its
planes are counted in ``n_cache_cuts``, apart from ``nfev``. :class:`PlainBMRM` (``"bmrm"``)
uses it by default (``cut_cache="auto"``) with the QP master of the L2 problem, where it
saves oracle calls and time (``experiments/bench_iterations.py`` measures it);
``PlainBMRM(cut_cache=False)`` is the method of Teo et al. as published.
"""

from __future__ import annotations

from bmrm.solver.methods.base import BundleState, Solver, SolverOptions
from bmrm.solver.methods.bmrm import PlainBMRM
from bmrm.solver.methods.cached import CutCached
from bmrm.solver.methods.carried import CarriedPlanes
from bmrm.solver.methods.inout import InOut
from bmrm.solver.methods.lbfgs import LBFGS
from bmrm.solver.methods.level import LevelBundle
from bmrm.solver.methods.ls_bmrm import LineSearchBMRM
from bmrm.solver.methods.newton import NewtonCG, unmet_requirements
from bmrm.solver.methods.nrbm import NRBM
from bmrm.solver.methods.ocas import OCAS
from bmrm.solver.problem import Capabilities

__all__ = [
    "METHODS",
    "NONCONVEX_METHODS",
    "BundleState",
    "CarriedPlanes",
    "CutCached",
    "InOut",
    "LBFGS",
    "LevelBundle",
    "LineSearchBMRM",
    "NRBM",
    "NewtonCG",
    "OCAS",
    "PlainBMRM",
    "Solver",
    "SolverOptions",
    "auto_method",
    "check_method",
    "get_method",
    "with_cut_cache",
]

METHODS = {
    "bmrm": PlainBMRM,
    "inout": InOut,
    "level": LevelBundle,
    "ls-bmrm": LineSearchBMRM,
    "newton": NewtonCG,
    "ocas": OCAS,
}
# methods without a certified lower bound on a non-convex risk
NONCONVEX_METHODS = {"nrbm": NRBM}


def check_method(method, *, lbfgs: bool = True) -> None:
    """Refuse a ``method`` that names no solver, before any work.

    ``method`` must be None, a method name (``"auto"``, one of :data:`METHODS` or
    :data:`NONCONVEX_METHODS`, and ``"lbfgs"`` when ``lbfgs``) or an object with a
    ``step(state)`` method; :func:`bmrm.fit` calls it with its other argument checks. A method
    class (``PlainBMRM`` for ``PlainBMRM()``) is refused with a ``TypeError`` that asks for an
    instance: its ``step`` is a function of two arguments, which the loop would call with one.

    Parameters
    ----------
    method : str, object or None
        The ``method`` argument.
    lbfgs : bool
        Whether ``"lbfgs"`` is a valid name here.

    Raises
    ------
    ValueError
        For an unknown name.
    TypeError
        For an object without ``step``, or a class.
    """
    names = ["auto"] + sorted(METHODS) + sorted(NONCONVEX_METHODS) + (["lbfgs"] if lbfgs else [])
    if method is None:
        return
    if isinstance(method, str):
        if method not in names:
            raise ValueError(
                f"method must be one of {names} or an object with a step(state) method; "
                f"got {method!r}"
            )
        return
    if isinstance(method, type) and callable(getattr(method, "step", None)):
        raise TypeError(
            f"method must be a method name or an object with a step(state) method; got the "
            f"class {method.__name__} itself: pass an instance, e.g. {method.__name__}()"
        )
    if not callable(getattr(method, "step", None)):
        raise TypeError(
            f"method must be one of {names} or an object with a step(state) method; "
            f"got {type(method).__name__}"
        )


def auto_method(regularizer, capabilities: Capabilities | None = None) -> str:
    """The method ``"auto"`` stands for: one function of the problem.

    It reads the problem's regularizer and the risk's declared capabilities (``None``: a
    convex risk with nothing more).

    Parameters
    ----------
    regularizer : Regularizer
        The problem's regularizer (:mod:`bmrm.solver.regularizers`).
    capabilities : Capabilities or None
        The risk's (:func:`bmrm.solver.problem.capabilities`).

    Returns
    -------
    str
        In this order:

        * ``"cccp"`` for a latent risk (a difference of convex functions,
          ``capabilities.latent``): the concave-convex procedure
          (:class:`bmrm.solver.cccp.CCCP`), whose subproblems are convex and take this
          function's choice in turn;
        * for a risk that is not convex (a non-linear ranking function, a loss declaring
          ``convex = False``): ``"lbfgs"`` where it is smooth (fewer oracle calls and seconds
          than NRBM in ``experiments/bench_nonconvex.py``), ``"nrbm"`` otherwise; both find
          a stationary point without a certificate;
        * ``"newton"`` for L2 without bounds when the risk is convex, smooth and offers
          Hessian-vector products (the squared, logistic, listwise squared, RankNet and
          ListNet losses, the squared pairwise hinges): on ``experiments/bench_newton.py``'s
          synthetic sets it reached the relative gap 1e-3 in 2.1–5.4 times less CPU time
          than the level bundle method (``experiments/RESULTS.md``, "Newton-CG against
          LIBLINEAR-RankSVM and scikit-learn");
        * ``"level"`` for L2 without bounds otherwise (the QP master);
        * ``"inout"`` for L1 without bounds (3.3–3.6 times less time than plain BMRM over
          ``experiments/bench_l1.py``'s MQ2008 grid at tol 1e-6, its linear-programme
          master dominating);
        * ``"bmrm"`` otherwise (elastic net, bounds, callable regularizers: not measured).
    """
    caps = Capabilities() if capabilities is None else capabilities
    if caps.latent:
        return "cccp"
    if not caps.convex:
        return "lbfgs" if caps.smooth else "nrbm"
    if regularizer.qp and capabilities is not None and not unmet_requirements(capabilities):
        return "newton"
    if regularizer.qp:
        return "level"
    if regularizer.name == "l1":
        return "inout"
    return "bmrm"


def get_method(method) -> Solver:
    """The solver for a ``method`` argument.

    A name in :data:`METHODS` or :data:`NONCONVEX_METHODS`, an object following the protocol,
    an object with only ``step`` (run as a certifying bundle method), or None (plain BMRM;
    :func:`~bmrm.solver.loop.minimize_bmrm` resolves its default ``"auto"`` before calling
    this). A built-in bundle method with its ``cut_cache`` option on comes wrapped in
    :class:`CutCached` (:func:`with_cut_cache`).

    Parameters
    ----------
    method : str, object or None
        The ``method`` argument.

    Returns
    -------
    Solver
        The solver that runs ``method``.
    """
    if method is None:
        return PlainBMRM()
    names = ["auto"] + sorted(METHODS) + sorted(NONCONVEX_METHODS)
    if isinstance(method, str):
        if method in NONCONVEX_METHODS:
            return NONCONVEX_METHODS[method]()
        if method == "cccp":
            raise ValueError(
                "the concave-convex procedure trains a latent loss: use bmrm.fit or "
                "bmrm.solver.cccp.minimize_cccp (or pass bmrm.solver.cccp.CCCP(...) as the "
                "method)"
            )
        if method == "lbfgs":
            raise ValueError(
                "method='lbfgs' fits smooth non-convex objectives only (a non-linear scorer "
                "or a smooth loss declaring convex = False), without a certificate; for "
                f"this fit use one of {names}"
            )
        if method not in METHODS:
            raise ValueError(
                f"method must be one of {names} or an object with a step(state) method; "
                f"got {method!r}"
            )
        return with_cut_cache(METHODS[method]())
    check_method(method, lbfgs=False)
    if not callable(getattr(method, "init", None)):
        return StepOnly(method)
    return with_cut_cache(method)


def with_cut_cache(solver: Solver) -> Solver:
    """The solver wrapped in :class:`CutCached` where its ``cut_cache`` option asks.

    One of the package's bundle methods with its ``cut_cache`` option on is wrapped; any
    other solver is returned as it is.

    Parameters
    ----------
    solver : Solver
        A solver.

    Returns
    -------
    Solver
        ``solver``, wrapped in :class:`CutCached` or as it is.
    """
    if isinstance(solver, PlainBMRM | OCAS | LevelBundle) and solver.cut_cache not in (
        None,
        False,
    ):
        return CutCached(solver, solver.cut_cache)
    return solver


class StepOnly:
    """A user's object with only ``step(state)`` (and optionally ``finish(result)``), the
    earlier protocol: a certifying bundle method on a :class:`BundleState`."""

    certifies = True

    def __init__(self, method):
        self.method = method
        self.name = getattr(method, "name", type(method).__name__)

    def check(self, problem) -> None:
        pass

    def init(self, problem, w0, options: SolverOptions) -> BundleState:
        return BundleState.start(problem, w0, options)

    def step(self, state: BundleState) -> None:
        self.method.step(state)

    def finish(self, state: BundleState, result):
        finish = getattr(self.method, "finish", None)
        return result if finish is None else finish(result)

"""The solver: the problem, the risk oracle, the bundle, the master problems, the solvers and
the loop.

:mod:`~bmrm.solver.problem` holds the problem every solver works on (a counting oracle,
the regularizer of :mod:`~bmrm.solver.regularizers`, lam and the risk's declared
capabilities); :mod:`~bmrm.solver.oracle` evaluates R(w) and a subgradient from X, w and a
prepared loss (with the dense products of :mod:`~bmrm.solver.products`);
:mod:`~bmrm.solver.bundle` keeps the cutting planes; :mod:`~bmrm.solver.masters` minimises
the regularized cutting-plane model (the dual QP of :mod:`~bmrm.solver.qp`, Clarabel, or a
cvxpy model); :mod:`~bmrm.solver.methods` holds one module per solver on one protocol;
:mod:`~bmrm.solver.loop` runs any of them and certifies the gap;
:mod:`~bmrm.solver.cccp` trains latent losses by the concave-convex procedure, a solver
that wraps an inner one in the same loop; :mod:`~bmrm.solver.choice` gives a fit its problem
and solver from the risk's declared capabilities; :mod:`~bmrm.solver.scorers` holds the
ranking functions (public as :mod:`bmrm.scorers`) and :mod:`~bmrm.solver.scorer_oracle` their
risk and warm start.

The names below are imported on first use, so that a module of this package (the
regularizers a model file names, say) can be imported without the loop and scipy.optimize.
"""

import importlib

__all__ = ["BMRMResult", "ConvergenceWarning", "minimize_bmrm"]


def __getattr__(name: str):
    if name in ("BMRMResult", "minimize_bmrm"):
        value = getattr(importlib.import_module("bmrm.solver.loop"), name)
        globals()[name] = value
        return value
    # created on first use, see bmrm.exceptions
    if name == "ConvergenceWarning":
        from bmrm import exceptions

        return exceptions.ConvergenceWarning
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

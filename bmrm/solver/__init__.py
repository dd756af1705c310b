"""The bundle-method solver: the risk oracle, the bundle, the master problems and the loop.

:mod:`~bmrm.solver.oracle` evaluates R(w) and a subgradient from X, w and a prepared loss
(with the dense products of :mod:`~bmrm.solver.products`); :mod:`~bmrm.solver.bundle` keeps
the cutting planes; :mod:`~bmrm.solver.masters` minimises the regularized cutting-plane model
(the dual QP of :mod:`~bmrm.solver.qp`, or a cvxpy model); :mod:`~bmrm.solver.loop` runs the
iterations and certifies the gap.
"""

from bmrm.solver.loop import BMRMResult, minimize_bmrm

__all__ = ["BMRMResult", "ConvergenceWarning", "minimize_bmrm"]


def __getattr__(name: str):
    # created on first use, see bmrm.exceptions
    if name == "ConvergenceWarning":
        from bmrm import exceptions

        return exceptions.ConvergenceWarning
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

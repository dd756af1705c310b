"""Bundle-method regularized risk minimization (Teo, Vishwanathan, Smola & Le, JMLR 2010).

``bmrm.fit(X, y, loss=..., qid=..., lam=...)`` minimises lam·Ω(w) + R(w) for a linear
scorer, R the mean of a loss oracle from :mod:`losses` (or any object following its protocol).
"""

from bmrm._path import path
from bmrm._version import __version__
from bmrm.estimators import BMRMClassifier, BMRMRanker, BMRMRegressor, OrdinalRegressor
from bmrm.model import LinearModel, fit, load
from bmrm.solver.loop import BMRMResult, minimize_bmrm

__all__ = [
    "__version__",
    "BMRMClassifier",
    "BMRMRanker",
    "BMRMRegressor",
    "BMRMResult",
    "ConvergenceWarning",
    "LinearModel",
    "OrdinalRegressor",
    "fit",
    "load",
    "minimize_bmrm",
    "path",
]


def __getattr__(name: str):
    # created on first use, see bmrm.exceptions
    if name == "ConvergenceWarning":
        from bmrm import exceptions

        return exceptions.ConvergenceWarning
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

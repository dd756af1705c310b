"""Bundle-method regularized risk minimization (Teo, Vishwanathan, Smola & Le, JMLR 2010).

``bmrm.fit(X, y, loss=..., qid=..., lam=...)`` minimises lam·Ω(w) + R(w) for a linear
scorer, R the mean of a loss oracle from :mod:`losses` (or any object following its protocol).

The scikit-learn estimators are imported on first use (``bmrm.BMRMRanker`` and the others),
so that ``import bmrm`` does not pay for importing scikit-learn.
"""

import importlib

from bmrm._path import path
from bmrm._version import __version__
from bmrm.model import LinearModel, fit, load
from bmrm.solver.loop import BMRMResult, minimize_bmrm
from bmrm.warmup import warmup

_ESTIMATORS = ("BMRMClassifier", "BMRMRanker", "BMRMRegressor", "OrdinalRegressor")

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
    "warmup",
]


def __getattr__(name: str):
    if name in _ESTIMATORS:
        value = getattr(importlib.import_module("bmrm.estimators"), name)
        globals()[name] = value
        return value
    # created on first use, see bmrm.exceptions
    if name == "ConvergenceWarning":
        from bmrm import exceptions

        return exceptions.ConvergenceWarning
    raise AttributeError(f"module 'bmrm' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

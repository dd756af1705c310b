"""Bundle-method regularized risk minimization (Teo, Vishwanathan, Smola & Le, JMLR 2010).

``bmrm.fit(X, y, loss=..., qid=..., lam=...)`` minimises lam·Ω(w) + R(w) for a linear
scorer, R the mean of a loss oracle from :mod:`losses` (or any object following its protocol).

The scikit-learn estimators are imported on first use (``bmrm.BMRMRanker`` and the others),
so that ``import bmrm`` does not pay for importing scikit-learn.
"""

import importlib

from bmrm._version import __version__
from bmrm.io.model_files import load_model as load
from bmrm.model import LinearModel, fit
from bmrm.solver.loop import BMRMResult, ConvergenceWarning, minimize_bmrm

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
]


def __getattr__(name: str):
    if name in _ESTIMATORS:
        value = getattr(importlib.import_module("bmrm.estimators"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bmrm' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

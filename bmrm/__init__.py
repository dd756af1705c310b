"""Bundle-method regularized risk minimization (Teo, Vishwanathan, Smola & Le, JMLR 2010).

``bmrm.fit(X, y, loss=..., qid=..., lam=...)`` minimises lam·Ω(w) + R(w) for a linear
scorer, R the mean of a loss oracle from :mod:`losses` (or any object following its protocol).

Every public name is imported on first use (``bmrm.fit``, ``bmrm.BMRMRanker``, ...), so
that ``import bmrm`` pays for no module it does not use: the ``bmrm`` command's help and its
``predict`` need neither the solver nor scikit-learn.
"""

import importlib

from bmrm._version import __version__

# public name -> the module that defines it
_LAZY = {
    "path": "bmrm._path",
    "LinearModel": "bmrm.linear_model",
    "fit": "bmrm.model",
    "load": "bmrm.linear_model",
    "BMRMResult": "bmrm.solver.loop",
    "minimize_bmrm": "bmrm.solver.loop",
    "BMRMClassifier": "bmrm.estimators",
    "BMRMRanker": "bmrm.estimators",
    "BMRMRegressor": "bmrm.estimators",
    "OrdinalRegressor": "bmrm.estimators",
    "warmup": "bmrm.warmup",
}

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
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    # created on first use, see bmrm.exceptions
    if name == "ConvergenceWarning":
        from bmrm import exceptions

        return exceptions.ConvergenceWarning
    raise AttributeError(f"module 'bmrm' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

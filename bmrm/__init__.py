"""Bundle-method regularized risk minimization (Teo, Vishwanathan, Smola & Le, JMLR 2010).

``bmrm.fit(X, y, loss=..., qid=..., lam=...)`` minimises lam·Ω(w) + R(w) for a linear
scorer, R the mean of a loss oracle from :mod:`losses` (or any object following its protocol).
"""

from bmrm._model import LinearModel, fit
from bmrm._solver import BMRMResult, ConvergenceWarning, minimize_bmrm
from bmrm.estimators import BMRMClassifier, BMRMRanker, BMRMRegressor, OrdinalRegressor
from bmrm.model_io import load_model as load

__version__ = "0.1.0"

__all__ = [
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

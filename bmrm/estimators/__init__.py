"""scikit-learn estimators around :func:`bmrm.fit`."""

from bmrm.estimators.linear import BMRMClassifier, BMRMRanker, BMRMRegressor
from bmrm.estimators.ordinal import OrdinalRegressor, optimal_thresholds

__all__ = [
    "BMRMClassifier",
    "BMRMRanker",
    "BMRMRegressor",
    "OrdinalRegressor",
    "optimal_thresholds",
]

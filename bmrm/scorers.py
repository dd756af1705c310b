"""Ranking functions f = h_θ(X) for :func:`bmrm.fit`'s ``ranking_function=``.

The public names of :mod:`bmrm.solver.scorers`, where they are defined beside the products
they compute with and the oracle that trains them (:mod:`bmrm.solver.scorer_oracle`):
:class:`LinearScorer` (f = Xw), :class:`ExpectedGainScorer` (the expected gain under a
multiclass logistic model of the relevance level; Yang, Ravikumar & Lease) and
:func:`get_scorer`.
"""

from bmrm.solver.scorers import ExpectedGainScorer, LinearScorer, get_scorer

__all__ = ["ExpectedGainScorer", "LinearScorer", "get_scorer"]

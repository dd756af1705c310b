"""Collaborative ranking: CofiRank (Weimer, Karatzoglou, Le & Smola, NIPS 2007).

A users × items rating matrix is factorised as F = U Vᵀ and each user's row of F is trained
with a ranking loss of :mod:`losses` on the items that user rated (:class:`CofiRank`);
:func:`weak_split` and :func:`strong_split` are the paper's evaluation protocols and
:func:`read_ratings` reads MovieLens and MovieTweetings files.
"""

from bmrm.collab.io import RatingsFile, read_ratings
from bmrm.collab.model import CofiRank, CofiRankResult, load
from bmrm.collab.split import strong_split, weak_split

__all__ = [
    "CofiRank",
    "CofiRankResult",
    "RatingsFile",
    "load",
    "read_ratings",
    "strong_split",
    "weak_split",
]

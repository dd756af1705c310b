"""Line-search BMRM (Teo, Vishwanathan, Smola & Le, JMLR 11, 2010, Section 5)."""

from __future__ import annotations

from bmrm.solver.methods.ocas import OCAS

__all__ = ["LineSearchBMRM"]


class LineSearchBMRM(OCAS):
    """Line-search BMRM (Teo et al., JMLR 2010, Section 5).

    The line search of :class:`OCAS`, with the cut taken at the line-search point itself.
    When the line search makes no progress (t = 0) the cut is taken at the master minimiser
    instead, as plain BMRM would, so the method cannot stall on a repeated plane.

    Parameters
    ----------
    line_search_tol : float
        The line search stops within this fraction of the gap of its optimum.
    max_evals : int
        Points per line search, at most.
    cut_cache : bool, "auto" or CutCache
        As for :class:`~bmrm.solver.methods.PlainBMRM`.
    """

    name = "ls-bmrm"
    certifies = True

    def __init__(self, line_search_tol: float = 0.01, max_evals: int = 10, cut_cache=False):
        # the cut is taken at the line-search point itself (see _cut_fraction), which OCAS's
        # mu in (0, 1] cannot express
        self.mu = 0.0
        self._init_line_search(line_search_tol, max_evals, cut_cache)

    def _cut_fraction(self, t: float) -> float:
        return 1.0 if t == 0.0 else 0.0

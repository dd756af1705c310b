"""A per-query cut cache: cheap cutting planes from earlier oracle calls, query by query.

For a risk that is a sum over queries, R(w) = Σ_q R_q(w) with R_q(w) = l_q(X_q w) / n_terms
(every built-in ranking loss), an oracle call at w_k gives each query's value R_q(w_k) and
subgradient a_qk = X_qᵀ g_q(w_k) (one pass over X, :func:`bmrm.solver.products.query_rmatvec`),
so the cache keeps, for each query q and cached point k, the affine minorant

    R_q(w) >= c_qk + ⟨a_qk, w⟩,    c_qk = R_q(w_k) − ⟨a_qk, w_k⟩,

and offers at any w the *cache cut*

    R(w) >= C(w) = Σ_q max_k (c_qk + ⟨a_qk, w⟩)   and its plane   Σ_q (c_qk*_q + ⟨a_qk*_q, ·⟩),

k*_q the maximiser for query q at w. This is the constraint cache of the 1-slack cutting-plane
training of structural SVMs (Joachims, Finley & Yu, Machine Learning 77, 2009, Sec. 4), which
SVM^rank runs: most iterations take the per-query most violated cached labelings instead of
calling the separation oracle.

Validity. R_q is convex (a convex loss of the affine scores X_q w) and, because l is a sum
of functions of disjoint blocks of scores, the block g_q of a subgradient of Σ_q l_q at f is
a subgradient of l_q at f_q; by the chain rule a_qk ∈ ∂R_q(w_k). So c_qk + ⟨a_qk, w⟩ <= R_q(w)
for every k and w, hence max_k (...) <= R_q(w), and summing over q, C(w) <= R(w): the plane of
the cache cut is a minorant of R, valid in the bundle like any oracle cut. It is also at least
as high at w as every joint cut Σ_q (c_qk + ⟨a_qk, ·⟩) of an earlier oracle call k whose
per-query parts are all still cached, which a bundle of joint (aggregated) cuts cannot
express: the cache works on the disaggregated model Σ_q max_k.

Use by a method (:mod:`bmrm.solver.methods`): before calling the oracle at the point w it
chose, the method asks :meth:`CutCache.try_cut`; when C(w) exceeds the bundle's model at w by
more than ``violation`` times the current gap (or the last oracle call's violation, with
``reference="oracle"``), the cache's plane joins the bundle instead of an oracle call (no pass
over X; ``n_cache_cuts`` counts them, ``nfev`` does not), and the method solves the master
again; at most ``max_streak`` times in a row. The certificate stays valid (every plane is a
minorant) and the best objective is only taken at points where the oracle was called.

Memory and eviction. The cache holds at most K planes per query, n_queries · K · n_features
float64 numbers plus one slot of the same size for the oracle's output, with K the smaller of
``max_points`` and what fits in ``max_fraction`` of X's bytes (e.g. MSLR-WEB30K's
31,531 queries × 136 features take 34 MB per K against X's 2 GB as float32). When a query's K
slots are full, the slot that was least recently the most violated one for that query (the
maximiser at a cache evaluation or an oracle point) is replaced. A query's new plane is kept
only when it is higher at its own point than every cached plane of that query (else a cached
plane is already exact there).

Cost of a cache cut: n_queries · K · n_features multiply-adds over the cache, no pass over X.
"""

from __future__ import annotations

import copy
import logging
import math
import time

import numpy as np
from numba import njit

from losses.kernels import JIT_OPTIONS
from losses.parallel import block_bounds, n_threads_for, run_blocks

__all__ = ["CutCache", "bound_cache", "make_cut_cache", "supports_cut_cache"]

logger = logging.getLogger("bmrm")


@njit(**JIT_OPTIONS)
def _block_of(bounds, q0):
    """The index of the block that starts at query q0."""
    b = 0
    while bounds[b] != q0:
        b += 1
    return b


# Reassociation lets LLVM vectorise the dot products ⟨a_qk, w⟩ (several partial sums instead
# of one serial chain of additions), which shortens a cache cut severalfold. It changes
# their rounding only; the planes themselves (sums of cached a_qk and c_qk) are not computed
# differently, so they stay minorants.
_FAST = {"reassoc", "contract"}


@njit(**JIT_OPTIONS, fastmath=_FAST)
def _dot(A, q, k, w):
    """⟨A[q, k], w⟩."""
    s = 0.0
    for j in range(w.shape[0]):
        s += A[q, k, j] * w[j]
    return s


@njit(**JIT_OPTIONS, fastmath=_FAST)
def _cache_cut(q0, q1, bounds, A, c, filled, used, stamp, w, floor, partial, sums):
    """For the queries q0:q1, block b of ``bounds``: Σ_q max_k (c_qk + ⟨a_qk, w⟩) into
    sums[b, 0], the maximisers' offsets into sums[b, 1] and gradients into partial[b];
    stamps the maximisers. With ``floor``, every query also has the plane R_q >= 0, which
    adds nothing to the cut where it is the maximiser.

    A: (n_q, K, p) planes, c: (n_q, K) offsets, filled: (n_q,) slots in use per query."""
    p = A.shape[2]
    b = _block_of(bounds, q0)
    a_out = partial[b]
    a_out[:] = 0.0
    value = 0.0
    offset = 0.0
    for q in range(q0, q1):
        n = filled[q]
        if n == 0:
            continue
        kb = 0
        best = c[q, 0] + _dot(A, q, 0, w)
        for k in range(1, n):
            s = c[q, k] + _dot(A, q, k, w)
            if s > best:
                best = s
                kb = k
        if floor and best <= 0.0:
            continue
        used[q, kb] = stamp
        value += best
        offset += c[q, kb]
        for j in range(p):
            a_out[j] += A[q, kb, j]
    sums[b, 0] = value
    sums[b, 1] = offset


@njit(**JIT_OPTIONS)
def _store(q0, q1, bounds, A, c, filled, used, stamp, w, P, r, rtol, stored):
    """For the queries q0:q1, store query q's plane (P[q], r[q] − ⟨P[q], w⟩), exact at w,
    unless a cached plane of q is within ``rtol``·r[q] of r[q] at w (that one is stamped
    instead); a full query replaces its least recently most violated slot. stored[b]
    receives the number of planes stored."""
    K, p = A.shape[1], A.shape[2]
    count = 0
    for q in range(q0, q1):
        best = -np.inf
        kb = -1
        for k in range(filled[q]):
            s = c[q, k] + _dot(A, q, k, w)
            if s > best:
                best = s
                kb = k
        if kb >= 0 and r[q] - best <= rtol * abs(r[q]):
            used[q, kb] = stamp
            continue
        if filled[q] < K:
            slot = filled[q]
            filled[q] += 1
        else:
            slot = 0
            for k in range(1, K):
                if used[q, k] < used[q, slot]:
                    slot = k
        dot = 0.0
        for j in range(p):
            A[q, slot, j] = P[q, j]
            dot += P[q, j] * w[j]
        c[q, slot] = r[q] - dot
        used[q, slot] = stamp
        count += 1
    stored[_block_of(bounds, q0)] = count


def _blocks(n_queries: int, work: int) -> np.ndarray:
    """Query boundaries of the blocks the cache's kernels run on: one per thread once the
    cache holds 256 · ``PARALLEL_MIN_ROWS`` numbers, else one. The kernels are bound by
    memory bandwidth, so a cache of a few million numbers stays on one thread (a second
    one does not shorten its cut)."""
    ptr = np.arange(n_queries + 1, dtype=np.int64)
    return block_bounds(ptr, n_threads_for(work // 256))


def supports_cut_cache(oracle) -> str | None:
    """Return None when ``oracle`` can feed a cut cache, else the reason it cannot.

    It can when it offers per-query cuts (the package's
    :class:`~bmrm.solver.oracle.RiskOracle`) for a loss with one term per query that depends
    on that query's scores alone: every built-in per-query loss of :mod:`losses`, or a user
    loss that declares ``query_decomposable = True``. Pointwise losses (one term per row) are
    left out: one plane per row and cached point would cost K copies of X, and coarser
    groups of rows lose the per-query flexibility the cache is for.

    Parameters
    ----------
    oracle : callable
        The risk oracle.

    Returns
    -------
    str or None
        None, or why ``oracle`` cannot feed a cut cache.
    """
    prepared = getattr(oracle, "prepared", None)
    if prepared is None or not hasattr(oracle, "query_cut_at"):
        return "the oracle offers no per-query cuts (only the package's risk oracle does)"
    loss = prepared.loss
    if getattr(loss, "pointwise", False):
        return f"the {type(loss).__name__} loss is pointwise (one term per row, not per query)"
    if getattr(loss, "convex", True) is False and not getattr(oracle, "convex_surrogate", False):
        return f"the {type(loss).__name__} loss is not convex (its planes are not minorants)"
    builtin = type(loss).__module__.split(".")[0] == "losses"
    if not (builtin or getattr(loss, "query_decomposable", False) is True):
        return (
            f"the {type(loss).__name__} loss does not declare query_decomposable = True (its "
            "value and gradient for each query must depend on that query's scores alone)"
        )
    if prepared.n_terms != prepared.groups.n_queries or prepared.n_terms == 0:
        return "the risk has no per-query terms"
    return None


class CutCache:
    """Options and store of the per-query cut cache (module docstring).

    Parameters
    ----------
    max_points : int >= 2, default=4
        Planes kept per query, at most (K). Every cache cut reads the whole cache, so a
        larger K costs time at each cut without saving oracle calls in
        ``experiments/bench_iterations.py``: hence the small default.
    max_fraction : float > 0, default=0.25
        The cache (K slots and the oracle's output slot) may take at most this fraction of
        X's bytes; K is lowered to fit, and the cache stays off when fewer than two slots fit.
    violation : float >= 0, default=0.1
        A cache cut is used when it lifts the bundle's model at the point by more than this
        times ``reference``; else the oracle is called.
    max_streak : int >= 1, default=1000
        Consecutive cache cuts, at most, before the oracle is called again. A long streak
        is the default: with a short one, plain BMRM at small lam in
        ``experiments/bench_iterations.py`` spent its time budget without reaching
        SVM^rank's objective, where a streak of 1,000 did with fewer oracle calls.
    floor : bool, default=False
        Give every query the plane R_q >= 0 as well (valid: the loss protocol of
        :mod:`losses` makes each query's loss non-negative, and the oracle checks it at
        every call), as the constraint cache of Joachims, Finley & Yu (2009) starts each
        example's list with its zero-loss labelling. A query whose cached planes all lie below
        zero at w then adds nothing to the cut instead of a negative term. Off by default:
        the cuts are higher where they are taken but flatter elsewhere, and plain BMRM needed
        more oracle calls and cache cuts with the floor than without it in
        ``experiments/bench_iterations.py``.
    reference : {"gap", "oracle"}, default="gap"
        "gap": the current gap (best objective − lower bound). "oracle": how far the last
        oracle call's risk lay above the bundle's model at its point, R(w_k) − m(w_k) (at
        least the gap then, since the model's minimiser w_k gives the lower bound), the
        precision estimate of the 1-slack cache of Joachims, Finley & Yu (2009), which uses a
        cached constraint when it is violated by more than a tenth of it.

    Raises
    ------
    TypeError, ValueError
        Naming the option, for a value of the wrong type or out of range.
    """

    def __init__(
        self,
        max_points: int = 4,
        max_fraction: float = 0.25,
        violation: float = 0.1,
        max_streak: int = 1000,
        floor: bool = False,
        reference: str = "gap",
    ):
        if isinstance(max_points, bool) or not isinstance(max_points, (int, np.integer)):
            raise TypeError(f"max_points must be an integer >= 2; got {max_points!r}")
        if max_points < 2:
            raise ValueError(f"max_points must be at least 2; got {max_points}")
        if not (isinstance(max_fraction, (int, float)) and 0.0 < max_fraction < math.inf):
            raise ValueError(
                f"max_fraction must be a positive finite number; got {max_fraction!r}"
            )
        if not (isinstance(violation, (int, float)) and 0.0 <= violation < math.inf):
            raise ValueError(f"violation must be a finite number >= 0; got {violation!r}")
        if isinstance(max_streak, bool) or not isinstance(max_streak, (int, np.integer)):
            raise TypeError(f"max_streak must be an integer >= 1; got {max_streak!r}")
        if max_streak < 1:
            raise ValueError(f"max_streak must be at least 1; got {max_streak}")
        if reference not in ("gap", "oracle"):
            raise ValueError(f"reference must be 'gap' or 'oracle'; got {reference!r}")
        if not isinstance(floor, (bool, np.bool_)):
            raise TypeError(f"floor must be True or False; got {floor!r}")
        self.max_points = int(max_points)
        self.floor = bool(floor)
        self.reference = reference
        self._eps_est = math.inf
        self.max_fraction = float(max_fraction)
        self.violation = float(violation)
        self.max_streak = int(max_streak)
        self._oracle = None
        self.active = False
        self.K = 0
        self.nbytes = 0
        self._streak = 0
        self._stamp = 0

    def __repr__(self) -> str:
        return (
            f"CutCache(max_points={self.max_points}, max_fraction={self.max_fraction}, "
            f"violation={self.violation}, max_streak={self.max_streak}, floor={self.floor}, "
            f"reference={self.reference!r})"
        )

    def bind(self, oracle, required: bool) -> None:
        """Attach to ``oracle`` (a new oracle empties the cache).

        Raises ``ValueError`` when ``required`` and the oracle cannot feed a cache; else the cache
        stays off.

        Parameters
        ----------
        oracle : RiskOracle or CountingOracle
            The fit's oracle.
        required : bool
            Whether a cache that cannot be fed is an error.
        """
        if oracle is self._oracle:
            return
        self._oracle = oracle
        self._eps_est = math.inf
        self.active = False
        self.A = self.c = self.filled = self.used = self.P = None
        reason = supports_cut_cache(oracle)
        if reason is not None:
            if required:
                raise ValueError(f"cut_cache=True needs per-query cuts: {reason}")
            return
        n_q = oracle.prepared.groups.n_queries
        p = oracle.n_features
        slot = n_q * p * 8
        X = oracle.X
        x_bytes = X.data.nbytes if hasattr(X, "indptr") else X.nbytes
        K = min(self.max_points, int(self.max_fraction * x_bytes // slot) - 1)
        if K < 2:
            logger.info(
                "cut cache off: %d queries x %d features leave fewer than two slots in "
                "max_fraction=%g of X's %d bytes",
                n_q, p, self.max_fraction, x_bytes,
            )  # fmt: skip
            return
        self.K = K
        self.A = np.zeros((n_q, K, p))
        self.c = np.zeros((n_q, K))
        self.filled = np.zeros(n_q, dtype=np.int64)
        self.used = np.zeros((n_q, K), dtype=np.int64)
        self.P = np.zeros((n_q, p))
        self._bounds = _blocks(n_q, n_q * K * p)
        n_b = len(self._bounds) - 1
        self._partial = np.zeros((n_b, p))
        self._sums = np.zeros((n_b, 2))
        self.n_stored = 0
        self.nbytes = self.A.nbytes + self.c.nbytes + self.used.nbytes + self.P.nbytes
        self.active = True

    def cut(self, w: np.ndarray) -> tuple[float, np.ndarray, float]:
        """The cache cut at w: its value C(w) and its plane R >= ⟨a, ·⟩ + b.

        Parameters
        ----------
        w : ndarray
            The point.

        Returns
        -------
        tuple
            ``(C(w), a, b)``.
        """
        self._stamp += 1
        bounds = self._bounds
        n_b = len(bounds) - 1
        partial = self._partial[:n_b]
        sums = self._sums[:n_b]
        run_blocks(
            _cache_cut, bounds, bounds, self.A, self.c, self.filled, self.used, self._stamp,
            np.ascontiguousarray(w, dtype=np.float64), self.floor, partial, sums,
        )  # fmt: skip
        total = sums.sum(axis=0)
        return float(total[0]), partial.sum(axis=0), float(total[1])

    def try_cut(self, state, w: np.ndarray) -> bool:
        """Add the cache cut at ``w`` to the bundle when it lifts the model there enough.

        Enough: by more than ``violation`` times the reference; counted in
        ``state.n_cache_cuts``.

        Parameters
        ----------
        state : BundleState
            The bundle method's state.
        w : ndarray
            The point the method proposes.

        Returns
        -------
        bool
            Whether the cut was added; False (nothing done) when the oracle should be called
            instead.
        """
        if not self.active or self._stamp == 0 or self._streak >= self.max_streak:
            return False
        if not (math.isfinite(state.best_J) and math.isfinite(state.lower_bound)):
            return False
        t0 = time.perf_counter()
        value, a, b = self.cut(w)
        bundle = state.bundle
        model = bundle.model_value(w)
        state.cache_seconds += time.perf_counter() - t0
        scale = state.gap if self.reference == "gap" else self._eps_est
        if not value - model > self.violation * scale:
            return False
        bundle.add(a, b)
        state.n_cache_cuts += 1
        self._streak += 1
        return True

    def oracle_cut(self, state, w: np.ndarray, f: np.ndarray | None = None):
        """The oracle's risk and subgradient at ``w``, every query's plane offered to the cache.

        One pass over X with the scores ``f``, else two. The cache's own seconds go to
        ``state.cache_seconds`` (the counting oracle times the call itself).

        Parameters
        ----------
        state : BundleState
            The bundle method's state (its oracle and bundle).
        w : ndarray
            The point.
        f : ndarray or None
            Its scores X w.

        Returns
        -------
        tuple
            ``(R, a)``.
        """
        oracle = state.oracle
        t0 = time.perf_counter()
        model = state.bundle.model_value(w)
        own = time.perf_counter() - t0
        if f is None:
            R, a, r = oracle.query_cut(w, self.P)
        else:
            R, a, r = oracle.query_cut_at(f, self.P)
        t0 = time.perf_counter()
        self._stamp += 1
        stored = np.zeros(len(self._bounds) - 1, dtype=np.int64)
        run_blocks(
            _store, self._bounds, self._bounds, self.A, self.c, self.filled, self.used,
            self._stamp, np.ascontiguousarray(w, dtype=np.float64), self.P, r, 1e-12, stored,
        )  # fmt: skip
        self.n_stored += int(stored.sum())
        # the precision estimate of reference="oracle" (the model lies below R: a valid cut)
        self._eps_est = max(R - model, 0.0)
        own += time.perf_counter() - t0
        state.cache_seconds += own
        self._streak = 0
        return R, a


def bound_cache(options: CutCache, oracle, required: bool) -> CutCache:
    """A fresh cache with the options of ``options``, bound to ``oracle``.

    For a solver's ``init``: the cache's planes are the state of one fit.

    Parameters
    ----------
    options : CutCache
        The options.
    oracle : RiskOracle or CountingOracle
        The fit's oracle.
    required : bool
        Whether a cache that cannot be fed is an error.

    Returns
    -------
    CutCache
        An empty cache with the options of ``options``, bound to ``oracle``.
    """
    cache = copy.copy(options)
    cache._oracle = None
    cache.bind(oracle, required)
    return cache


def make_cut_cache(cut_cache) -> tuple[CutCache | None, bool]:
    """The cache and whether it is required, from a method's ``cut_cache`` option.

    False or None (off), True (on; an oracle that cannot feed it is an error), ``"auto"`` (on
    where the oracle can feed it) or a :class:`CutCache` (on, with its options; required).

    Parameters
    ----------
    cut_cache : bool, "auto", CutCache or None
        The option.

    Returns
    -------
    tuple
        ``(cache, required)``, cache None when off.
    """
    if cut_cache is None or cut_cache is False:
        return None, False
    if cut_cache is True:
        return CutCache(), True
    if isinstance(cut_cache, str) and cut_cache == "auto":
        return CutCache(), False
    if isinstance(cut_cache, CutCache):
        return cut_cache, True
    raise ValueError(f"cut_cache must be True, False, 'auto' or a CutCache; got {cut_cache!r}")

"""CofiRank: maximum-margin matrix factorisation trained with a ranking loss per user.

The objective
-------------
For a users × items rating matrix with observed entries Ω (Ω_i the items user i rated,
y_i their ratings) and factors U (n_users × r), V (n_items × r), CofiRank (Weimer,
Karatzoglou, Le & Smola, NIPS 2007, eq. 4) minimises

    J(U, V) = Σ_i l(f_i, y_i) + (λ/2)(‖U‖² + ‖V‖²),    f_i = V_{Ω_i} u_i,

with l a ranking loss of one query: each user is one query, so the users' ratings held
user-major (CSR) are the loss's query groups and the matrix's ``indptr`` is exactly its
``query_ptr``. Any query loss of :mod:`losses` serves (``"ndcg"``, ``"ordinal"``,
``"preference"``, ``"neru"``, ``"squared"`` as CofiRank's regression, the listwise
surrogates) and so does a loss object following the protocol of :mod:`losses._base`.

Per-user normalisation: the sum runs over users, and each user's term is the loss's value
for that user's query, exactly as ``losses.risk(loss, f_i, y_i)`` returns it for one
query: the structured NDCG loss is 1 − NDCG@k plus the margin terms Σ c_p (f_π(p) −
f_σ(p)), not divided by the number of ratings; the ordinal loss is divided by the user's
number of comparable pairs (its ``normalize="query"``); a pointwise loss (``"squared"``)
sums over the user's ratings, l(f_i, y_i) = Σ_{j∈Ω_i} ½(f_ij − y_ij)², which is |Ω_i| times
``losses.risk`` of that user's ratings (a pointwise risk is a mean over rows). This is the
paper's objective with λ on its scale; :func:`bmrm.fit` instead averages the loss over
queries, so its lam corresponds to λ / n_users here. A user whose ratings are all equal
(or who rated nothing) contributes no loss, and its factors go to 0.

With ``offsets=True`` the scores are f_ij = <u_i, v_j> + b_i + c_j (per-user and per-item
offsets, Weimer, Karatzoglou & Smola, Machine Learning 72 (2008), §3.3), and
(λ/2)(‖b‖² + ‖c‖²) joins the penalty. A user's offset changes no ranking of that user's
items, so for ranking losses only the item offsets move (b stays 0); for the squared loss
both act.

Choosing λ
----------
At U = V = 0 the gradient of J vanishes for every λ, and for λ ≥ ‖∇L(0)‖₂ (the spectral
norm of the users × items matrix of ∂l/∂f at F = 0) the zero factors are a local minimum:
by the variational form of the trace norm, ‖F‖_* = min over U Vᵀ = F of
(‖U‖² + ‖V‖²)/2, J is then at least the convex L(F) + λ‖F‖_*, whose minimum is F = 0
(Srebro, Rennie & Jaakkola, NIPS 2004). That threshold depends on the data and the loss
(for the NDCG loss on MovieLens-shaped sets it lies below the paper's λ = 10, which then
learns nothing), so ``lam="auto"`` sets λ = 0.3·‖P ∇L(0)‖₂, where P centres each user's
row on that user's ratings: a ranking loss's row sums to 0 already (it does not change
when a user's scores move together), while the squared loss's row is −y_i, whose level
(the mean rating) would otherwise set λ and leave only the mean learnt. For a latent
loss, ∇L(0) is the subgradient at all-tied scores.

Starting point
--------------
The factors start random, N(0, ``init_scale``²) per entry. From there a latent loss learns
little: its surrogate at nearly tied scores charges every spread within a rating level,
so small factors are close to a fixed point of the concave-convex steps. With
``init="auto"`` a latent loss first runs alternating steps on its convex
``initial_loss`` (the pairwise hinge over pairs of different rating, normalised per user),
with λ scaled by the ratio of the two losses' ‖P ∇L(0)‖₂, until an outer iteration lowers
that objective by at most ``tol`` relative or after ``max_iter`` outer iterations (so a
smaller ``max_iter`` also shortens this phase); the fit proper starts from there (its time is
in ``result_.init_seconds``; the monotone decrease below concerns the fit proper).

The structured NDCG@k loss bounds 1 − NDCG@k of each user's training list, so with many
ratings per user it only asks which k of them come first. There the fit proper raises the
training NDCG@k above the pairwise start's and lowers the NDCG@k of held-out items, at the
automatic λ and below it; above it the factors shrink and both fall (the user guide's
collaborative-ranking page measures this, with the ramp and the hinge bound alike). The
paper's MovieLens table shows the same trend as the training ratings per user grow; the
ordinal loss, or the NDCG loss with its ``pairwise`` hinge added, ranks held-out items
better there.

The fit
-------
Alternating minimisation: the U step minimises J over U (and b) with V fixed, the V step
over V (and c) with U fixed; each is a regularized risk minimisation solved by
:func:`bmrm.minimize_bmrm`, warm-started at the current factors, with the method it
chooses for the step's risk (:func:`bmrm.solver.methods.auto_method`): the truncated
Newton method for a convex, smooth loss with Hessian-vector products (the squared loss, the
ordinal and preference losses with ``hinge="squared"`` — the pairwise loss of Primal-CR,
Wu, Hsieh & Sharpnack, KDD 2017 —, ListNet and the other smooth listwise losses), whose
products ∇²R v = Aᵀ H_f A v take one pass over the ratings for A v and one scatter
(:func:`block_oracle`), and the level bundle method otherwise. The U step is
separable over users: ``"block"`` solves one problem over all of U (one aggregated cut of
all users per iteration), ``"users"`` one r-dimensional problem per user, one after the
other, and ``"batch"`` runs every user's own level bundle method side by side, each user
with its own bundle of cuts, all cuts from one oracle pass over all ratings
(:func:`batch_user_step`). The V step couples the users and is one problem over all of
V. A step is solved inexactly: it stops once its certified gap is at most
``step_tol`` times the decrease of J it has made (it has then reached at least
1/(1 + step_tol) of the decrease possible with the other factors fixed), or once the gap
is below ``tol`` relative to J, or after ``step_max_iter`` bundle iterations once it has
lowered J (a step that has not goes on, up to three times as many iterations: stopping it
would end the outer iteration without progress and the fit would take that for
convergence). Its tolerance thus tightens as the outer loop converges and the steps'
decreases shrink; the fit stops when an outer iteration lowers J by at most ``tol``
relative to J and each of its steps either stopped by its own rule (its gap is then at
most ``step_tol·tol·J``, or ``tol`` relative) or, stopped at ``step_max_iter``, certifies a
gap of at most ``tol·J``: no step with the other factor fixed could then lower J by more
than ``tol`` relative. Each step's certified gap is reported in :attr:`CofiRank.result_`.
An outer iteration that leaves the factors unchanged without converging (a step that could
neither lower J nor certify ``tol·J``) ends the fit with status 6 and a
``ConvergenceWarning``: the steps are deterministic functions of the factors, so every
further outer iteration would repeat it.

Few iterations per step: every step minimises J over one factor with the other fixed,
and for a latent loss a surrogate that is re-linearised at the next step anyway, so what
a step's last iterations add is soon undone by the other factor's move. The bundle
method's first iterations make most of a step's decrease (its lower bound is loose at
first, so its gap closes slowly), and on large rating sets more, shorter steps lower J
further at equal time than fewer, longer ones: ``step_max_iter=5`` is the setting for
speed there (``experiments/bench_cofirank.py`` measures seconds per outer iteration and J
against time). Such short steps rarely certify a gap of ``tol·J``, so the fit then mostly
runs to ``max_iter``; the default of 30 lets the steps finish by their own rule and the
fit stop by its own. Since the bundle keeps at most ``step_max_iter + 1`` planes, the cap
also bounds the steps' memory.

J is not jointly convex (and U = V = 0 is always a stationary point), so only a local
solution is sought. What is guaranteed is that J never increases: the bundle method
returns its best evaluated point, which is no worse than its starting point, and a step
whose point is worse than the current one (by rounding) is not taken.

Latent losses (the structured NDCG and NERU losses with ``ties="latent"``, the default) are
differences of convex functions. Each step then minimises the convex surrogate that
majorises the loss and equals it at the current scores (the loss's ``convexify``; one
step of the concave-convex procedure of Yuille & Rangarajan, 2003, per alternating step),
so the true objective still never increases. The convex tie rules (``ties="increasing"``;
``"pairs"`` is exact but its cost grows with the number of rating levels) are solved
directly.

Cost: an oracle call of a block step computes all scores in one pass over the ratings,
calls the loss once on all users (each user one query, ``query_ptr`` the matrix's
``indptr``), and scatters ∂l/∂f back once by user (∂U) or by item (∂V, each thread
reading the ratings in user-major order and adding those of its range of items, so that
no item-major copy of the ratings' indices is held): O(|Ω| r) (the organisation of
Primal-CR, Wu, Hsieh & Sharpnack, KDD 2017). Each step starts from the evaluation that
gave J after the previous one: its scores, a latent loss's tie-breaking at them and the
loss's value and gradient there are the step's first oracle call.
"""

from __future__ import annotations

import copy
import json
import logging
import time
import warnings
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from scipy.optimize import OptimizeResult
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

import losses
from bmrm.collab import _kernels
from bmrm.collab._ratings import Ratings, check_ratings
from bmrm.collab._steps import (
    NO_PROGRESS_FACTOR,
    StepSettings,
    _convexified,
    _summed_risk,
    minimize_step,
    solve_users,
)
from bmrm.collab.dask import DaskUserStep
from losses.metrics import ndcg_score
from losses.parallel import run_queries

__all__ = ["CofiRank", "CofiRankResult", "load"]

logger = logging.getLogger("bmrm")

_MESSAGES = {
    0: "converged: relative decrease below tol",
    2: "stopped: max_iter reached",
    4: "stopped: callback raised StopIteration",
    6: (
        "stopped: an outer iteration left the factors unchanged, so the next would repeat "
        "it; a step could neither lower J nor certify a gap of tol·J"
    ),
}
FORMAT = "bmrm-cofirank"
# lam="auto": λ as this share of ‖∇L(0)‖₂, the λ from which on F = 0 is stationary
AUTO_LAM_SHARE = 0.3
FORMAT_VERSION = 1


class CofiRankResult(OptimizeResult):
    """The record of a CofiRank fit (a :class:`scipy.optimize.OptimizeResult`).

    Attributes
    ----------
    fun : float
        J at the fitted factors.
    objective : ndarray of shape (nit + 1,)
        J at the start and after every outer iteration (non-increasing).
    steps : list of dict
        One entry per step: ``outer`` (1-based outer iteration), ``step`` ("U" or "V"),
        ``objective`` (J after the step), ``gap`` (the bundle method's certified gap of
        the step's problem: a sum over users for ``u_step="users"``; of the convex
        surrogate for latent losses), ``rel_gap`` (gap over the step's objective),
        ``nit`` and ``nfev`` (the solver's iterations and oracle calls, summed over users),
        ``converged`` (no solve stopped at ``step_max_iter``),
        ``seconds`` and ``cpu_seconds`` (process CPU time).
    nit : int
        Outer iterations.
    status, success, message :
        0 converged (relative decrease of J below ``tol`` in an outer iteration whose
        steps each stopped by their own rule or certify a gap of at most ``tol·J``), 2
        ``max_iter`` reached, 4 the callback raised ``StopIteration``, 6 an outer
        iteration left the factors unchanged without converging (a step could neither
        lower J nor certify a gap of ``tol·J``; the steps being deterministic, every
        further outer iteration would repeat it).
    seconds, cpu_seconds : float
        Wall-clock and process CPU seconds of the fit.
    init_nit, init_seconds, init_cpu_seconds :
        Outer iterations, wall-clock and CPU seconds of the initial-loss phase
        (``init="auto"`` with a latent loss; 0 otherwise).
    """


def _user_parts(ratings: Ratings, loss) -> list:
    """One prepared single-query loss per user (None for a user without ratings)."""
    parts = []
    for i in range(ratings.n_users):
        s, e = ratings.indptr[i], ratings.indptr[i + 1]
        parts.append(losses.prepare(loss, ratings.data[s:e]) if e > s else None)
    return parts


def _user_risks(prepared, f, problem) -> tuple[float, np.ndarray, np.ndarray]:
    """Σ of the per-user losses at f, each active user's loss (``problem.active`` order)
    and the gradient: a query loss gives one value per user already (the users with
    ratings are its queries, in order), a pointwise loss one per rating, summed by user."""
    values, grad = prepared.loss_grad(f)
    total = prepared.check(values, grad, f)
    if len(values) != len(problem.active):
        values = np.add.reduceat(values, problem.ratings.indptr[problem.active])
    return total, values, grad


class _Problem:
    """The ratings held user-major, with the loss prepared once on them."""

    def __init__(self, ratings: Ratings, loss):
        self.ratings = ratings
        # the items' ratings counted, to split the items among threads by their ratings; no
        # item-major index is kept (the V scatter reads the ratings in user-major order)
        counts = np.bincount(ratings.indices, minlength=ratings.n_items)
        self.item_ptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        del counts
        self.prepared = losses.prepare(loss, ratings.data, ratings.users)
        self.active = np.flatnonzero(np.diff(ratings.indptr) > 0)

    def scores(self, U, V, user_offset, item_offset, out=None) -> np.ndarray:
        """The scores of all ratings, into ``out`` (a new array when None: no buffer of
        one float per rating is held between evaluations)."""
        r = self.ratings
        out = np.empty(len(r.data)) if out is None else out
        run_queries(
            _kernels.scores, r.indptr, r.indptr, r.indices, U, V, user_offset, item_offset,
            out,
        )  # fmt: skip
        return out

    def gather(self, which: str, g, W, grad, grad_offset) -> None:
        r = self.ratings
        if which == "U":
            run_queries(
                _kernels.gather_users, r.indptr, r.indptr, r.indices, g, W, grad, grad_offset
            )
            return
        run_queries(
            _kernels.gather_items, self.item_ptr, r.indptr, r.indices, g, W, grad, grad_offset
        )


# ratings per block of users in a block step's oracle calls (the scores and ∂l/∂f of one
# block at a time instead of arrays of one float per rating)
BLOCK_RATINGS = 1 << 17


class _UserBlock(NamedTuple):
    users: slice  # a range of users (those without ratings included)
    rows: slice  # their ratings
    indptr: np.ndarray  # their ratings' pointer, numbered from 0
    terms: slice  # their loss terms: queries (the users with ratings), or ratings (pointwise)
    prepared: losses.Prepared  # the loss on those users alone


def _user_blocks(problem: _Problem, prepared, block_ratings: int | None = None):
    """The users cut into consecutive ranges of about ``block_ratings`` ratings, each with
    the loss prepared on its users' queries (:meth:`losses.Prepared.query_block`); None
    when the loss cannot be cut so (weighted terms, or a loss without ``query_block`` or,
    pointwise, ``row_block``) or the ratings make one block."""
    block_ratings = BLOCK_RATINGS if block_ratings is None else block_ratings
    R = problem.ratings
    active = problem.active  # the users with ratings: the loss's queries
    n_rated = len(R.data)
    if n_rated <= block_ratings or len(active) < 2:
        return None
    query_ptr = prepared.groups.query_ptr
    cuts = np.searchsorted(query_ptr, np.arange(block_ratings, n_rated, block_ratings))
    cuts = np.unique(cuts[(cuts > 0) & (cuts < len(active))])
    q_bounds = np.concatenate(([0], cuts, [len(active)]))
    u_bounds = np.concatenate(([0], active[cuts], [R.n_users]))
    blocks = []
    for t in range(len(q_bounds) - 1):
        qa, qb = int(q_bounds[t]), int(q_bounds[t + 1])
        part = prepared.query_block(qa, qb)
        if part is None:
            return None
        ua, ub = int(u_bounds[t]), int(u_bounds[t + 1])
        ra, rb = int(R.indptr[ua]), int(R.indptr[ub])
        ptr = np.asarray(R.indptr[ua : ub + 1], dtype=np.int64) - np.int64(ra)
        terms = slice(ra, rb) if getattr(prepared.loss, "pointwise", False) else slice(qa, qb)
        blocks.append(_UserBlock(slice(ua, ub), slice(ra, rb), ptr, terms, part))
    return blocks


def block_oracle(problem: _Problem, which: str, U, V, b, c, offsets: bool, prepared, first=None):
    """The risk oracle of a block step, its starting point and the map back to factors.

    For ``which="U"`` the variable is w = (vec U_A, b_A) over the users A who rated
    something (b only with ``offsets``; the other users' rows have no loss, so their
    optimum is 0 and they are left out) and R(w) = Σ_i l(f_i, y_i) at the scores f of U,
    V, b, c; ∂R/∂U = G V and ∂R/∂b = G 1 with G the users × items matrix of ∂l/∂f on the
    ratings (scattered by user). For ``"V"``, w = (vec V_A, c_A) over the items rated by
    someone, ∂R/∂V = Gᵀ U and ∂R/∂c = Gᵀ 1 (scattered by item). One call costs one pass
    over the ratings for the scores, one loss call and one pass for the scatter.
    ``first``, when given, is ``(risk, ∂l/∂f, f)`` at the starting point, already
    computed by the caller: the first call at the starting point uses it instead of the
    loss (f, the scores there, may be None: only a Newton step reads them). A call's
    scores are freed before its scatter.
    ``unpack(w)`` returns the full factor and offset arrays: views of w when every row
    has ratings (w's layout is then the factor's own, and ``w0`` is a view of the current
    factor when there are no offsets), else buffers reused by the next call, zero outside
    A. ``w0`` is read-only, so :func:`bmrm.minimize_bmrm` starts from it without a copy.
    Each call's gradient is a new vector, scattered into directly when every row has
    ratings, so the step holds no second gradient array of w's size.
    When the loss can be cut by queries (:meth:`losses.Prepared.query_block`), a call
    evaluates the users a block of about :data:`BLOCK_RATINGS` ratings at a time (their
    scores, the loss and the scatter of their ∂l/∂f), so that it holds no array of one
    float per rating; the risk and gradient are those of one pass, to the bit (the
    per-user losses are summed once, and each item's gradient adds its users in the same
    order).
    """
    rows = U if which == "U" else V
    ptr = problem.ratings.indptr if which == "U" else problem.item_ptr
    active = np.flatnonzero(np.diff(ptr) > 0)
    n, r = rows.shape
    size = len(active) * r
    full = len(active) == n  # every row has ratings: w's layout is the factor's own
    known = [] if first is None else [first]
    if full:
        M = o = None  # unpack returns views of w
    else:
        M = np.zeros((n, r))
        o = np.zeros(n)

    def unpack(w):
        if full:
            if w is w_start:  # its values are the factors': no read-only view to the kernels
                return rows, offs
            return w[:size].reshape(n, r), (w[size:] if offsets else no_offset)
        M[active] = w[:size].reshape(-1, r)
        if offsets:
            o[active] = w[size:]
        return M, o

    def gradient_arrays():
        """The gradient's factor and offset arrays: views of a new vector of w's layout
        when every row is active (then also returned), else new arrays."""
        if full:
            out = np.empty(size + n if offsets else size)
            return out, out[:size].reshape(n, r), (out[size:] if offsets else np.empty(n))
        return None, np.empty((n, r)), np.empty(n)

    def packed(out, grad, grad_offset):
        if full:
            return out
        a = grad[active].ravel()
        return np.concatenate((a, grad_offset[active])) if offsets else a

    def scatter(g):
        """The gradient of w from ∂l/∂f (``g``): a new vector in w's layout, scattered
        into directly when every row is active (no second array of w's size)."""
        out, grad, grad_offset = gradient_arrays()
        problem.gather(which, g, V if which == "U" else U, grad, grad_offset)
        return packed(out, grad, grad_offset)

    def block_scores(block, M, o, fixed_offset, out=None):
        """The scores of a block's ratings at the factors (M, o) (``fixed_offset``: the
        other factor's offsets), into ``out`` when given."""
        items = problem.ratings.indices[block.rows]
        f = np.empty(block.rows.stop - block.rows.start) if out is None else out
        users = block.users
        if which == "U":
            run_queries(_kernels.scores, block.indptr, block.indptr, items, M[users], V,
                        o[users], fixed_offset, f)  # fmt: skip
        else:
            run_queries(_kernels.scores, block.indptr, block.indptr, items, U[users], M,
                        fixed_offset[users], o, f)  # fmt: skip
        return f

    def scattered(parts):
        """A new vector of w's layout: the scatter of the per-rating coefficients of each
        block, ``parts`` yielding (block, coefficients) in order (U rows are each block's
        own; each V row adds its users block after block, in one pass's order)."""
        out, grad, grad_offset = gradient_arrays()
        if which == "V":
            grad.fill(0.0)
            grad_offset.fill(0.0)
        for block, g in parts:
            items = problem.ratings.indices[block.rows]
            if which == "U":
                run_queries(_kernels.gather_users, block.indptr, block.indptr, items, g, V,
                            grad[block.users], grad_offset[block.users])  # fmt: skip
            else:
                run_queries(_kernels.add_items, problem.item_ptr, block.indptr, items, g,
                            U[block.users], grad, grad_offset)  # fmt: skip
        return packed(out, grad, grad_offset)

    def by_blocks(scores_of, gradient=True):
        """Σ of the per-user losses at the scores ``scores_of(block)`` gives, and with
        ``gradient`` its gradient in w's layout, a block of users at a time. The terms'
        losses are summed once, as :meth:`losses.Prepared.check` sums them."""
        values = np.empty(prepared.n_terms)

        def parts():
            for block in blocks:
                f = scores_of(block)
                part_values, g = block.prepared.loss_grad(f)
                block.prepared.check(part_values, g, f)
                values[block.terms] = part_values
                del f  # not needed by the scatter
                yield block, g

        if not gradient:
            for _ in parts():
                pass
            return float(values.sum())
        grad = scattered(parts())
        return float(values.sum()), grad

    def oracle(w):
        if known and np.array_equal(w, w_start):
            risk, g, _ = known.pop()
        else:
            known.clear()
            M, o = unpack(w)
            if blocks is not None:
                return by_blocks(lambda block: block_scores(block, M, o, c if which == "U" else b))
            f = problem.scores(M, V, o, c) if which == "U" else problem.scores(U, M, b, o)
            risk, g = _summed_risk(prepared, f)
            del f  # not needed by the scatter
        return risk, scatter(g)

    blocks = _user_blocks(problem, prepared)
    offs = b if which == "U" else c
    no_offset = offs if not offsets else None  # zero without offsets; never written
    if full and not offsets:
        w_start = rows.ravel()  # a view: the steps never write into the factors
    else:
        parts = (rows[active].ravel(), offs[active]) if offsets else (rows[active].ravel(),)
        w_start = np.concatenate(parts)
    w_start.flags.writeable = False  # the solver then starts from it without a copy
    oracle.loss = prepared.loss  # the solver probes the slopes of a user's loss only
    # a latent loss's prepared targets here are its convex surrogate's (_convexified)
    oracle.convex_surrogate = bool(getattr(prepared.loss, "latent", False))
    if newton_steps(prepared.loss):
        by_blocks_of = None if blocks is None else (blocks, block_scores, scattered, by_blocks)
        _add_second_order(oracle, problem, which, U, V, b, c, prepared, known, w_start,
                          (unpack, scatter), by_blocks_of)  # fmt: skip
    return oracle, w_start, unpack


def newton_steps(loss) -> bool:
    """Whether a block step's risk is convex, smooth and offers Hessian-vector products
    (the squared loss, the ordinal and preference losses with ``hinge="squared"``, the
    smooth listwise losses): :func:`bmrm.solver.methods.auto_method` then solves the step by
    the truncated Newton method (:mod:`bmrm.solver.methods.newton`), to which
    :func:`block_oracle` gives the products it needs."""
    return (
        bool(getattr(loss, "smooth", False))
        and bool(getattr(loss, "convex", True))
        and not getattr(loss, "latent", False)
        and callable(getattr(loss, "hessp", None))
    )


def _add_second_order(
    oracle, problem, which, U, V, b, c, prepared, known, w_start, layout, by_blocks_of=None
):
    """Give a block step's ``oracle`` the evaluation on scores and the Hessian-vector
    products of :mod:`bmrm.solver.methods.newton`.

    The step's variable w enters the scores linearly: f = A w + f₀, with (A w)_k =
    <w_i, V_j> + w_{b,i} over the ratings k = (i, j) for the U step (the item offsets c are
    f₀) and <U_i, w_j> + w_{c,j} for the V step. So ∇R = Aᵀ ∂l/∂f (the scatter of
    :func:`block_oracle`) and ∇²R v = Aᵀ H_f A v, H_f the loss's Hessian of Σ_i l(f_i, y_i)
    in the scores (``loss.hessp``; generalised for the squared hinge): one scores pass for
    A v, the loss's product, one scatter. ``known`` is the caller's (risk, ∂l/∂f, f) at
    ``w_start``: ``scores(w_start)`` returns its f, and the first ``cut_at`` at that f
    its risk and gradient. ``layout`` is :func:`block_oracle`'s maps between w and the
    factors: ``unpack(w)`` to the factor and offset arrays, ``scatter(g)`` from ∂l/∂f (or
    a Hessian product on the scores) to a new vector of w's layout.
    ``by_blocks_of``, when the loss can be cut by users (:func:`block_oracle`), evaluates
    ``cut_at``, ``risk_at`` and (for a loss without a Hessian plan) the products a block of
    users at a time, with the same values to the bit; ``risk_at`` then returns (R, None),
    the gradient not being formed (the Newton method reads R alone).
    """
    R = problem.ratings
    place, scatter = layout
    no_offset = np.zeros(V.shape[0] if which == "U" else U.shape[0])
    loss, targets = prepared.loss, prepared.targets

    def scores(w, out=None):
        """f at w (a new array unless ``out``; at ``w_start``, while the caller's
        evaluation there is unused, the scores it was made at)."""
        if known and out is None and known[0][2] is not None and np.array_equal(w, w_start):
            return known[0][2]
        f = np.empty(len(R.data)) if out is None else out
        M, o = place(w)
        if which == "U":
            problem.scores(M, V, o, c, f)
        else:
            problem.scores(U, M, b, o, f)
        return f

    if by_blocks_of is not None:
        blocks, block_scores, scattered, by_blocks = by_blocks_of

        def rows_of(f):
            return lambda block: f[block.rows]

    def risk_at(f):
        if by_blocks_of is not None:
            return by_blocks(rows_of(f), gradient=False), None
        return _summed_risk(prepared, f)

    def cut_at(f):
        if known and f is known[0][2]:  # the start's own scores: its evaluation
            risk, g, _ = known.pop()
        else:
            known.clear()
            if by_blocks_of is not None:
                return by_blocks(rows_of(f))
            risk, g = _summed_risk(prepared, f)
        return risk, scatter(g)

    def hessian(f):
        f = np.ascontiguousarray(f, dtype=np.float64)
        plan = values = None
        make_plan = getattr(loss, "hessp_kernel", None)
        if make_plan is not None:
            plan = make_plan(f, targets)
            values = np.empty(prepared.n_terms)  # the plan kernel's per-query work array

        def block_products(v, xv):
            """The product a block of users at a time (a loss without a plan, whose
            ``hessp`` on a block's rows gives their rows of H d), A v into ``xv``."""
            M, o = place(v)

            def parts():
                for block in blocks:
                    d = block_scores(
                        block, M, o, no_offset, None if xv is None else xv[block.rows]
                    )
                    yield block, loss.hessp(f[block.rows], d, block.prepared.targets)

            return scattered(parts())

        def products(v, xv=None):
            if by_blocks_of is not None and plan is None:
                return block_products(v, xv)
            d = np.empty(len(f)) if xv is None else xv
            M, o = place(v)
            if which == "U":
                problem.scores(M, V, o, no_offset, d)
            else:
                problem.scores(U, M, no_offset, o, d)
            if plan is None:
                hd = loss.hessp(f, d, targets)
            else:
                hd = np.empty(len(f))
                run_queries(plan[0], prepared.groups.query_ptr, d, *plan[1], values, hd)
            return scatter(hd)

        products.passes = 2
        return products

    def hessp(w, v):
        return hessian(scores(w))(v)

    oracle.scores = scores
    oracle.risk_at = risk_at
    oracle.cut_at = cut_at
    oracle.hessian = hessian
    oracle.hessp = hessp


# the level of the users' level bundle methods (as bmrm.solver.methods.LevelBundle's)
LEVEL_THETA = 0.7
# pairwise steps of a user's master problem at most (a bundle of at most bundle_size planes)
QP_STEPS = 500


def batch_user_step(problem: _Problem, U, b, V, c, offsets: bool, prepared, first, settings):
    """Minimise J over U (and b) with V and c fixed, every user's problem
    min λ/2 (‖u_i‖² + b_i²) + l(f_i, y_i) by its own level bundle method in r (or r + 1)
    dimensions, all users side by side: one iteration computes every user's scores in one
    pass, calls the loss once on all users and scatters ∂l/∂f by user (each user's cut),
    then :func:`bmrm.collab._kernels.user_bundle_step` updates each user's bundle, lower
    bound and next point. ``first`` is ``(Σ risk, per-user risks, ∂l/∂f)`` at the
    starting point (:func:`_user_risks`).

    The step stops when the summed certified gap Σ_i (best_i − lower_i) is at most
    ``step_tol`` times the decrease made, or ``tol`` relative to the step's objective, or
    after ``max_iter`` iterations. Each user's iterates depend on that user's data alone,
    and the users are never compared, so the result is the same for any number of threads.
    Returns the new U and b, the step's objective (Σ best_i), its gap, iterations, oracle
    calls and whether it stopped before ``max_iter``.
    """
    R = problem.ratings
    act = problem.active
    n_act, r = len(act), U.shape[1]
    d = r + 1 if offsets else r
    X = np.empty((n_act, d))
    X[:, :r] = U[act]
    if offsets:
        X[:, r] = b[act]
    cap = max(2, min(settings.bundle_size, settings.max_iter + 1))
    A = np.empty((n_act, cap, d))
    B = np.empty((n_act, cap))
    Q = np.empty((n_act, cap, cap))
    n_planes = np.zeros(n_act, dtype=np.int64)
    alpha = np.zeros((n_act, cap))
    best_J = np.full(n_act, np.inf)
    best_X = np.empty_like(X)
    lower = np.empty(n_act)
    mult = np.ones(n_act)
    grad = np.empty((R.n_users, r))
    grad_offset = np.empty(R.n_users)
    U_eval, b_eval = np.zeros_like(U), np.zeros_like(b)
    # the kernel's blocks balanced by users (its cost does not depend on the ratings)
    ptr = np.arange(n_act + 1, dtype=np.int64) * (cap * d)
    _, risks, g = first
    del first
    J_start = J_best = gap = np.nan
    status = 2
    nit = 0
    while nit < settings.max_iter * NO_PROGRESS_FACTOR:
        nit += 1
        if nit > 1:
            U_eval[act] = X[:, :r]
            if offsets:
                b_eval[act] = X[:, r]
            f = problem.scores(U_eval, V, b_eval, c)
            _, risks, g = _user_risks(prepared, f, problem)
        problem.gather("U", g, V, grad, grad_offset)
        g = None
        run_queries(
            _kernels.user_bundle_step, ptr, act, risks, grad, grad_offset, offsets,
            settings.lam, LEVEL_THETA, QP_STEPS, X, A, B, Q, n_planes, alpha, best_J, best_X,
            lower, mult,
        )  # fmt: skip
        J_best = float(best_J.sum())
        if nit == 1:
            J_start = J_best
        gap = J_best - float(lower.sum())
        if gap <= settings.tol * abs(J_best) or (
            settings.step_tol is not None and gap <= settings.step_tol * (J_start - J_best)
        ):
            status = 0
            break
        if nit >= settings.max_iter and J_best < J_start:
            break
    U_new, b_new = np.zeros_like(U), np.zeros_like(b)
    U_new[act] = best_X[:, :r]
    if offsets:
        b_new[act] = best_X[:, r]
    return U_new, b_new, J_best, gap, nit, nit, status == 0


def gradient_norm(prepared, ratings: Ratings, f=None) -> float:
    """‖P ∇L(0)‖₂: the spectral norm of the users × items matrix of ∂l/∂f at F = 0 (a
    subgradient there for a latent loss, whose scores all tie), each user's row centred
    on that user's ratings (P). A ranking loss's row sums to 0 already (it does not change
    when a user's scores shift together); the squared loss's row is −y_i, whose centring
    leaves the spread of the user's ratings instead of their level. ``f``, when given, is
    a buffer of one float64 per rating for the zero scores (its values are overwritten).
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.linalg import svds

    R = ratings
    if f is None:
        f = np.zeros(len(R.data))
    else:
        f[:] = 0.0
    _, g = _summed_risk(prepared, f)
    counts = np.diff(R.indptr)
    sums = np.add.reduceat(g, R.indptr[:-1][counts > 0]) if len(g) else np.zeros(0)
    mean = np.zeros(R.n_users)
    mean[counts > 0] = sums / counts[counts > 0]
    # centred in place, a block of users at a time (no second array of the ratings' size)
    block = 1024
    for first in range(0, R.n_users, block):
        last = min(first + block, R.n_users)
        start, stop = R.indptr[first], R.indptr[last]
        g[start:stop] -= np.repeat(mean[first:last], counts[first:last])
    G = csr_matrix((g, R.indices, R.indptr), shape=R.shape)
    if not np.any(g):
        return 0.0
    if min(G.shape) < 3:
        return float(np.linalg.norm(G.toarray(), 2))
    v0 = np.full(min(G.shape), 1.0 / np.sqrt(min(G.shape)))
    return float(svds(G, k=1, return_singular_vectors=False, v0=v0)[0])


def _blas_on_one_thread():
    """BLAS on one thread for the duration of a fit (restored after).

    The kernels spread over numba's threads (:mod:`losses.parallel`), and the bundle
    method's vector products go to BLAS between them; a multi-threaded BLAS keeps its
    threads spinning after each call, on the cores the kernels' next blocks need
    (``experiments/bench_cofirank.py`` measures fits with one and two threads).
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def _half_square(*arrays) -> float:
    return 0.5 * sum(float(np.vdot(a, a)) for a in arrays)


class CofiRank(BaseEstimator):
    """Collaborative ranking by matrix factorisation with a per-user ranking loss.

    Minimises Σ_users l(V_{Ω_i} u_i, y_i) + (λ/2)(‖U‖² + ‖V‖²) by alternating steps, each
    solved by the level bundle method or, for a smooth loss with Hessian-vector products, the
    truncated Newton method (module docstring: normalisation, offsets, solvers, guarantees,
    latent losses).

    Parameters
    ----------
    loss : str or loss object, default="ndcg"
        A name of :func:`losses.available` or an object with ``validate`` and
        ``loss_grad``; each user is one query.
    loss_params : dict or None
        Parameters of a named loss (``losses.get(loss, **loss_params)``), for example
        ``{"gain": "linear"}`` for 0–10 ratings or ``{"ties": "increasing"}``.
    n_factors : int, default=100
        Rank r of the factorisation.
    lam : float or "auto", default="auto"
        The λ of the penalty (λ/2)(‖U‖² + ‖V‖²), on the paper's scale (a sum over users).
        ``"auto"`` takes 0.3·‖P ∇L(0)‖₂ (the module docstring's *Choosing λ*), the value
        fitted being ``lam_``.
    offsets : bool, default=False
        Add per-user and per-item offsets to the scores.
    u_step : {"block", "users", "batch"}, default="block"
        Solve the U step as one problem over all of U, one problem per user in turn, or
        every user's problem side by side with its own bundle and one oracle pass over
        all ratings per iteration (module docstring).
    tol : float, default=1e-3
        Stop when an outer iteration lowers J by at most ``tol`` relative to J; no step
        is solved beyond a relative gap of ``tol``.
    max_iter : int, default=50
        Outer iterations at most.
    step_tol : float, default=0.5
        A step stops once its certified gap is at most ``step_tol`` times the decrease
        of J it has made (module docstring).
    step_max_iter : int, default=30
        Solver iterations per step (per user for ``u_step="users"``) once the step has
        lowered J (up to three times as many before; module docstring).
    bundle_size : int, default=10
        Planes kept by a block step's bundle (its memory: bundle_size × n_rows × r floats;
        a full bundle is aggregated by the solver), and by each user's bundle with
        ``u_step="batch"`` (the same memory over all users); at most
        ``step_max_iter + 1`` (and at least 3) are kept.
    init : {"auto", "random"}, default="auto"
        Random initial factors (``init_scale``); with ``"auto"``, a latent loss (the NDCG
        and NERU losses with ``ties="latent"``) then first runs alternating steps on its
        convex ``initial_loss`` (the module docstring's *Starting point*).
    init_scale : float, default=0.1
        Standard deviation of the random initial factors; positive, since at U = V = 0 the
        gradient of J vanishes and factors that start there stay there.
    random_state : int, Generator or None
        Seed of the initial factors.
    callback : callable or None
        ``callback(model)`` after every outer iteration, with the fitted attributes of
        that point (``result_`` holding the record so far); raise ``StopIteration`` to stop.
    client : distributed.Client or None
        Run the U step (``u_step="users"``) over users partitioned on this Dask cluster
        (:mod:`bmrm.collab.dask`); the factors equal the local fit's. The V step stays
        local.
    verbose : bool
        Log one line per step to the "bmrm" logger.

    Attributes
    ----------
    user_factors_ : ndarray of shape (n_users, n_factors)
        U, one row per user (zero for a user without ratings).
    item_factors_ : ndarray of shape (n_items, n_factors)
        V, one row per item (zero for an item nobody rated).
    user_offsets_, item_offsets_ : ndarray of shape (n_users,), (n_items,)
        Offsets b and c; zero without ``offsets``.
    n_users_, n_items_ : int
        Shape of the training ratings.
    lam_ : float
        The λ fitted with (``lam``, or its ``"auto"`` value).
    loss_ : loss object
        The loss the fit used.
    result_ : CofiRankResult
        Objective per outer iteration, each step's record and the fit's times.
    n_iter_ : int
        Outer iterations run.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from bmrm.collab import CofiRank, weak_split
    >>> rng = np.random.default_rng(0)
    >>> dense = rng.integers(1, 6, size=(30, 40)) * (rng.random((30, 40)) < 0.7)
    >>> ratings = sp.csr_matrix(dense)
    >>> train, test = weak_split(ratings, n_train=10, min_test=5, seed=0)
    >>> model = CofiRank(n_factors=5, lam=1.0, max_iter=3, random_state=0).fit(train)
    >>> 0 <= model.score(test, k=10) <= 1
    True
    """

    _parameter_constraints: dict = {
        "loss": [StrOptions(set(losses.available())), HasMethods(["validate", "loss_grad"])],
        "loss_params": [dict, None],
        "n_factors": [Interval(Integral, 1, None, closed="left")],
        "lam": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "offsets": ["boolean"],
        "u_step": [StrOptions({"block", "users", "batch"})],
        "tol": [Interval(Real, 0, 1, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "step_tol": [Interval(Real, 0, None, closed="neither")],
        "step_max_iter": [Interval(Integral, 1, None, closed="left")],
        "bundle_size": [Interval(Integral, 3, None, closed="left")],
        "init": [StrOptions({"auto", "random"})],
        "init_scale": [Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state", np.random.Generator],
        "callback": [callable, None],
        "client": [HasMethods(["submit", "gather"]), None],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        *,
        loss="ndcg",
        loss_params: dict | None = None,
        n_factors: int = 100,
        lam: float | str = "auto",
        offsets: bool = False,
        u_step: str = "block",
        tol: float = 1e-3,
        max_iter: int = 50,
        step_tol: float = 0.5,
        step_max_iter: int = 30,
        bundle_size: int = 10,
        init: str = "auto",
        init_scale: float = 0.1,
        random_state=None,
        callback=None,
        client=None,
        verbose: bool = False,
    ):
        self.loss = loss
        self.loss_params = loss_params
        self.n_factors = n_factors
        self.lam = lam
        self.offsets = offsets
        self.u_step = u_step
        self.tol = tol
        self.max_iter = max_iter
        self.step_tol = step_tol
        self.step_max_iter = step_max_iter
        self.bundle_size = bundle_size
        self.init = init
        self.init_scale = init_scale
        self.random_state = random_state
        self.callback = callback
        self.client = client
        self.verbose = verbose

    # ------------------------------------------------------------------ fitting

    def _rng(self) -> np.random.Generator:
        if isinstance(self.random_state, np.random.Generator):
            return self.random_state
        if isinstance(self.random_state, np.random.RandomState):
            return np.random.default_rng(self.random_state.randint(2**31))
        return np.random.default_rng(self.random_state)

    def objective(self, ratings) -> float:
        """Return J at the fitted factors on ``ratings`` (module docstring).

        Parameters
        ----------
        ratings : scipy.sparse matrix or tuple
            Ratings in the fitted shape (n_users_, n_items_).

        Returns
        -------
        float
            Σ_i l(f_i, y_i) + (λ/2)(‖U‖² + ‖V‖²) with λ = ``lam_`` and the true loss.
        """
        check_is_fitted(self, "user_factors_")
        R = self._check_fitted_ratings(ratings)
        problem = _Problem(R, self.loss_)
        return self._objective(problem)

    def _objective(self, problem: _Problem) -> float:
        return self._evaluate(problem)[0]

    def _evaluate(self, problem: _Problem):
        """J at the current factors, with what the next step starts from: the loss prepared
        for it (a latent loss's convex surrogate at the current scores, which equals the
        loss there), the scores (kept for a Newton step only, which starts from them; None
        otherwise) and (risk, per-user risks, ∂l/∂f) at the current point (its first oracle
        call). One pass for the scores, one for a latent loss's tie-breaking, one loss call.
        """
        f = problem.scores(
            self.user_factors_, self.item_factors_, self.user_offsets_, self.item_offsets_
        )
        prepared = _convexified(problem.prepared, f)
        first = _user_risks(prepared, f, problem)
        kept = f if newton_steps(prepared.loss) else None
        del f
        return [first[0] + self.lam_ * self._penalty(), prepared, kept, first]

    def _penalty(self) -> float:
        parts = [self.user_factors_, self.item_factors_]
        if self.offsets:
            parts += [self.user_offsets_, self.item_offsets_]
        return _half_square(*parts)

    def fit(self, ratings, y=None) -> CofiRank:
        """Fit the factors to ``ratings``.

        Parameters
        ----------
        ratings : scipy.sparse matrix of shape (n_users, n_items) or tuple
            Stored entries are the ratings (explicit zeros too), or ``(users, items,
            ratings)`` arrays; users and items are the row and column indices. Each
            (user, item) pair at most once.
        y : None
            Ignored (scikit-learn's signature).

        Returns
        -------
        CofiRank
            The fitted model (``self``).
        """
        self._validate_params()
        loss = losses.get(self.loss, **(self.loss_params or {}))
        R = check_ratings(ratings)
        if len(R.data) == 0:
            raise ValueError("ratings holds no rating; expected at least one stored entry")
        with _blas_on_one_thread():
            self._fit(R, loss)
        return self

    def _fit(self, R: Ratings, loss) -> None:
        """The fit of :meth:`fit` on checked ratings."""
        start, cpu_start = time.perf_counter(), time.process_time()
        problem = _Problem(R, loss)
        rng = self._rng()
        r = self.n_factors
        self.n_users_, self.n_items_ = R.shape
        self.loss_ = loss
        self.user_factors_ = rng.normal(scale=self.init_scale, size=(R.n_users, r))
        self.item_factors_ = rng.normal(scale=self.init_scale, size=(R.n_items, r))
        self.user_offsets_ = np.zeros(R.n_users)
        self.item_offsets_ = np.zeros(R.n_items)
        norm = gradient_norm(problem.prepared, R)
        if self.lam == "auto":
            self.lam_ = AUTO_LAM_SHARE * norm if norm > 0 else 1.0  # 0: nothing to fit
        else:
            self.lam_ = float(self.lam)
        init = (0, 0.0, 0.0)
        if self.init == "auto" and getattr(loss, "latent", False):
            init = self._initial_fit(problem, norm)
        if self.client is not None:
            if self.u_step != "users":
                raise ValueError(
                    f"client runs the U step of u_step='users' on Dask; got u_step={self.u_step!r}"
                )
            user_parts = DaskUserStep(self.client, R, loss, self.offsets)
        elif self.u_step == "users":
            user_parts = _user_parts(R, loss)
        else:
            user_parts = None
        point = self._evaluate(problem)
        J = point[0]
        objective, steps = [J], []
        status = 2
        for outer in range(1, self.max_iter + 1):
            J_start, factors = J, self._state()
            for which in ("U", "V"):
                point, record = self._step(problem, which, point, user_parts)
                J = point[0]
                record.update(outer=outer, step=which)
                steps.append(record)
                if self.verbose:
                    logger.info(
                        "outer %d %s step: J %.8g, gap %.3e, %d iterations, %.2f s",
                        outer, which, J, record["gap"], record["nit"], record["seconds"],
                    )  # fmt: skip
            objective.append(J)
            decrease = (J_start - J) / max(abs(J), 1e-300)
            # a step stopped at step_max_iter with a gap above tol·J could still lower J by
            # more than tol: the small decrease of an outer iteration with such a step is
            # not convergence
            unfinished = any(
                not s["converged"] and s["gap"] > self.tol * abs(J) for s in steps[-2:]
            )
            if decrease <= self.tol and not unfinished:
                status = 0
            elif all(np.array_equal(a, b) for a, b in zip(factors, self._state(), strict=True)):
                # the steps are deterministic functions of the factors: every further outer
                # iteration would make the same steps and end here again
                status = 6
            self.n_iter_ = outer
            self.result_ = self._result(J, objective, steps, outer, status, start, cpu_start)
            if self.callback is not None:
                try:
                    self.callback(self)
                except StopIteration:
                    status = 4 if status == 2 else status
            if status != 2:
                break
        if status in (2, 6):
            from bmrm import ConvergenceWarning

            if status == 2:
                message = (
                    f"CofiRank reached max_iter={self.max_iter} outer iterations with a last "
                    f"relative decrease of {decrease:.3e} (tol={self.tol})"
                )
            else:
                gap = max(s["rel_gap"] for s in steps[-2:])
                message = (
                    f"CofiRank stopped after outer iteration {outer}, which left the factors "
                    f"unchanged: a step could neither lower J nor certify a gap of tol·J (its "
                    f"relative gap is {gap:.3e}, tol={self.tol}); more outer iterations would "
                    "repeat it"
                )
            warnings.warn(message, ConvergenceWarning, stacklevel=3)
        self.result_ = self._result(J, objective, steps, outer, status, start, cpu_start)
        self.result_.update(init_nit=init[0], init_seconds=init[1], init_cpu_seconds=init[2])

    def _initial_fit(self, problem: _Problem, norm: float) -> tuple[int, float, float]:
        """Alternating block steps on the latent loss's convex ``initial_loss`` (the
        pairwise hinge over pairs of different rating) from the current factors, with λ
        scaled by the ratio of the two losses' :func:`gradient_norm`, until an outer
        iteration lowers that objective by at most ``tol`` relative to it or after
        ``max_iter`` outer iterations. Returns the outer iterations, wall and CPU
        seconds."""
        t0, c0 = time.perf_counter(), time.process_time()
        p = problem.prepared
        init_loss, targets = p.loss.initial_loss(p.targets)
        init_problem = copy.copy(problem)
        init_problem.prepared = losses.Prepared(
            init_loss, p.groups, targets, p.n_terms, p.weights, p.data_names
        )
        lam = self.lam_
        init_norm = gradient_norm(init_problem.prepared, problem.ratings)
        self.lam_ = lam * init_norm / norm if norm > 0 and init_norm > 0 else lam
        try:
            point = self._evaluate(init_problem)
            outer = 0
            while outer < self.max_iter:
                outer += 1
                J_start = point[0]
                for which in ("U", "V"):
                    if which == "U" and self.u_step == "batch":
                        self._batch_step(init_problem, point)
                    else:
                        self._block_step(init_problem, which, point)
                    point.clear()  # the step's surrogate goes before the next is made
                    point = self._evaluate(init_problem)
                if J_start - point[0] <= self.tol * abs(point[0]):
                    break
        finally:
            self.lam_ = lam
        return outer, time.perf_counter() - t0, time.process_time() - c0

    @staticmethod
    def _result(J, objective, steps, outer, status, start, cpu_start) -> CofiRankResult:
        return CofiRankResult(
            fun=J,
            objective=np.array(objective),
            steps=list(steps),
            nit=outer,
            status=status,
            success=status == 0,
            message=_MESSAGES[status],
            seconds=time.perf_counter() - start,
            cpu_seconds=time.process_time() - cpu_start,
        )

    def _step(self, problem, which, point, user_parts):
        """One alternating step from ``point`` (:meth:`_evaluate` at the current factors);
        returns the point after it and the step's record."""
        t0, c0 = time.perf_counter(), time.process_time()
        J = point[0]
        saved = self._state()
        if which == "U" and self.u_step == "users":
            J_step, gap, nit, nfev, converged = self._user_step(problem, user_parts)
        elif which == "U" and self.u_step == "batch":
            J_step, gap, nit, nfev, converged = self._batch_step(problem, point)
        else:
            J_step, gap, nit, nfev, converged = self._block_step(problem, which, point)
        # emptied in place, the caller's reference too: the step's prepared loss (a
        # latent loss's surrogate, one float per rating) goes before the next is made
        point.clear()
        # J itself (a step of a latent loss minimised a majorising surrogate); this
        # evaluation is also the next step's start
        point = self._evaluate(problem)
        if point[0] > J:  # a worse point (rounding): keep the current one
            self._restore(saved)
            point = None
            point = self._evaluate(problem)
        J_new = point[0]
        record = {
            "objective": J_new,
            "gap": gap,
            "rel_gap": gap / max(abs(J_step), 1e-300),
            "nit": nit,
            "nfev": nfev,
            "converged": converged,
            "seconds": time.perf_counter() - t0,
            "cpu_seconds": time.process_time() - c0,
        }
        return point, record

    def _state(self):
        # the steps put new arrays in place of the factors they change, never write into them
        return (self.user_factors_, self.item_factors_, self.user_offsets_, self.item_offsets_)

    def _restore(self, saved) -> None:
        self.user_factors_, self.item_factors_, self.user_offsets_, self.item_offsets_ = saved

    def _settings(self, inexact: bool = True) -> StepSettings:
        return StepSettings(
            self.lam_, self.tol, self.step_tol if inexact else None, self.step_max_iter,
            self.bundle_size,
        )  # fmt: skip

    def _block_step(self, problem: _Problem, which: str, point):
        """Minimise J over U (and b) or V (and c) as one bundle-method problem, from
        ``point`` (:meth:`_evaluate` at the current factors)."""
        U, V = self.user_factors_, self.item_factors_
        b, c = self.user_offsets_, self.item_offsets_
        prepared, first = point[1], point.pop()  # the oracle's first call takes it over
        start = (first[0], first[2], point.pop())  # with the scores, for a Newton step
        del first
        oracle, w0, unpack = block_oracle(
            problem, which, U, V, b, c, self.offsets, prepared, first=start
        )
        del start
        res = minimize_step(oracle, w0, self._settings())
        M, o = unpack(res.x)  # views of res.x, or the oracle's buffers (not used after)
        J_step = res.fun  # the rows left out are 0, without loss or penalty
        if which == "U":
            self.user_factors_ = M
            if self.offsets:
                self.user_offsets_ = o
        else:
            self.item_factors_ = M
            if self.offsets:
                self.item_offsets_ = o
        return J_step, res.gap, res.nit, res.nfev, res.converged

    def _batch_step(self, problem: _Problem, point):
        """Minimise J over U (and b) by :func:`batch_user_step` from ``point``."""
        # the step takes the evaluation over (and frees its gradient once it has used it)
        U, b, J_step, gap, nit, nfev, converged = batch_user_step(
            problem, self.user_factors_, self.user_offsets_, self.item_factors_,
            self.item_offsets_, self.offsets, point[1], point.pop(), self._settings(),
        )  # fmt: skip
        self.user_factors_ = U
        if self.offsets:
            self.user_offsets_ = b
        return J_step, gap, nit, nfev, converged

    def _user_step(self, problem: _Problem, user_parts, users=None, inexact: bool = True):
        """Minimise J over U (and b) one user at a time (the step is separable), locally
        or, with ``client``, over partitions of the users on Dask workers."""
        R = problem.ratings
        V, c = self.item_factors_, self.item_offsets_
        U, b = self.user_factors_.copy(), self.user_offsets_.copy()
        settings = self._settings(inexact)
        todo = np.arange(R.n_users) if users is None else np.asarray(users)
        if self.client is not None and users is None:
            J, gap, nit, nfev, converged = user_parts.step(U, b, V, c, settings)
        else:
            J, gap, nit, nfev, converged = solve_users(
                R.indptr, R.indices, user_parts, todo, U, b, V, c, self.offsets, settings
            )
        if users is not None:  # fold-in: the other users' terms are constants
            others = np.setdiff1d(np.arange(R.n_users), todo)
            J += self.lam_ * _half_square(U[others], b[others] if self.offsets else ())
        self.user_factors_, self.user_offsets_ = U, b
        return J, gap, nit, nfev, converged

    # ------------------------------------------------------------------ fold-in

    def fold_in(self, ratings, *, max_iter: int = 20) -> CofiRank:
        """Fit the factors of the users rated in ``ratings`` with the item factors fixed.

        CofiRank's strong generalisation (new users): V and the item offsets stay as
        fitted.

        Parameters
        ----------
        ratings : scipy.sparse matrix or tuple
            Ratings of the users to fold in, in the fitted shape (n_users_, n_items_);
            every other user's factors are left as they are.
        max_iter : int
            Per-user steps at most for a latent loss (each one minimises the surrogate at
            the current scores, until J stops decreasing by ``tol``); a convex loss takes
            one step, solved to ``tol``.

        Returns
        -------
        CofiRank
            The model (``self``) with those users' factors fitted.
        """
        check_is_fitted(self, "user_factors_")
        R = self._check_fitted_ratings(ratings)
        users = np.flatnonzero(np.diff(R.indptr) > 0)
        if users.size == 0:
            raise ValueError("ratings holds no rating to fold in")
        problem = _Problem(R, self.loss_)
        parts = _user_parts(R, self.loss_)
        rng = self._rng()
        self.user_factors_ = self.user_factors_.copy()
        self.user_factors_[users] = rng.normal(
            scale=self.init_scale, size=(len(users), self.n_factors)
        )
        steps = max_iter if getattr(self.loss_, "latent", False) else 1
        J = self._objective(problem)
        for _ in range(steps):
            saved = self._state()
            J_step, *_ = self._user_step(problem, parts, users, inexact=False)
            J_new = self._objective(problem)
            if J_new > J:
                self._restore(saved)
                break
            done = J - J_new <= self.tol * abs(J_new)
            J = J_new
            if done:
                break
        return self

    # ------------------------------------------------------------------ predicting

    def _check_fitted_ratings(self, ratings, name: str = "ratings") -> Ratings:
        R = check_ratings(ratings, name, shape=(self.n_users_, self.n_items_))
        if R.shape[0] > self.n_users_ or R.shape[1] > self.n_items_:
            raise ValueError(
                f"{name} has shape {R.shape}; the model was fitted on "
                f"({self.n_users_}, {self.n_items_}) users × items"
            )
        if R.shape != (self.n_users_, self.n_items_):
            R = R._replace(
                indptr=np.concatenate(
                    (R.indptr, np.full(self.n_users_ - R.shape[0], R.indptr[-1]))
                ),
                shape=(self.n_users_, self.n_items_),
            )
        return R

    def _indices(self, a, name: str, n: int) -> np.ndarray:
        a = np.asarray(a)
        if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
            raise ValueError(f"{name} must be a 1-d array of integer indices; got {a!r:.80}")
        a = a.astype(np.int64)
        if a.size and (a.min() < 0 or a.max() >= n):
            raise ValueError(
                f"{name} must lie in [0, {n}); got values from {a.min()} to {a.max()}"
            )
        return a

    def predict(self, users, items) -> np.ndarray:
        """Return the scores of the (user, item) pairs.

        Parameters
        ----------
        users : array-like of int
            User (row) index of each pair.
        items : array-like of int
            Item (column) index of each pair, as many as ``users``.

        Returns
        -------
        ndarray of shape (len(users),)
            ``<U[users[t]], V[items[t]]> + b[users[t]] + c[items[t]]``.
        """
        check_is_fitted(self, "user_factors_")
        users = self._indices(users, "users", self.n_users_)
        items = self._indices(items, "items", self.n_items_)
        if len(users) != len(items):
            raise ValueError(
                f"users and items must have equal lengths; got {len(users)} and {len(items)}"
            )
        f = np.einsum("ij,ij->i", self.user_factors_[users], self.item_factors_[items])
        return f + self.user_offsets_[users] + self.item_offsets_[items]

    def recommend(self, users, k: int = 10, *, exclude=None) -> np.ndarray:
        """Return the top-k items of each user by decreasing score.

        Ties in score go by increasing item index.

        Parameters
        ----------
        users : array-like of int
            User (row) indices.
        k : int
            Items per user, at most ``n_items_``.
        exclude : scipy.sparse matrix, tuple or None
            Ratings (in the fitted shape) whose items are not recommended to their user,
            typically the training ratings.

        Returns
        -------
        ndarray of shape (len(users), k), int64
            Item indices; ``-1`` fills a row when fewer than k items remain after
            ``exclude``.
        """
        check_is_fitted(self, "user_factors_")
        users = self._indices(users, "users", self.n_users_)
        if isinstance(k, bool) or not isinstance(k, Integral) or not 1 <= k <= self.n_items_:
            raise ValueError(f"k must be an integer in [1, {self.n_items_}]; got {k!r}")
        E = None if exclude is None else self._check_fitted_ratings(exclude, "exclude")
        out = np.full((len(users), k), -1, dtype=np.int64)
        order_items = np.arange(self.n_items_)
        for start in range(0, len(users), 1024):
            block = users[start : start + 1024]
            F = self.user_factors_[block] @ self.item_factors_.T
            F += self.user_offsets_[block, None] + self.item_offsets_[None, :]
            for row, i in enumerate(block):
                scores = F[row]
                if E is not None:
                    scores[E.indices[E.indptr[i] : E.indptr[i + 1]]] = -np.inf
                top = np.lexsort((order_items, -scores))[:k]
                top = top[np.isfinite(scores[top])]
                out[start + row, : len(top)] = top
        return out

    def score(self, test, k: int = 10, *, gain="exp") -> float:
        """Return the mean over users of NDCG@k of the ranking of each user's test items.

        CofiRank's convention (Weimer et al., NIPS 2007, §5): gain 2^r − 1 (``gain="exp"``;
        ``"linear"`` for r, or a callable mapping ratings to gains), discount
        1/log2(i + 2) at 0-based position i, k capped at the user's number of test
        items, ties among scores by their expected value
        (:func:`losses.metrics.ndcg_score`, ``ties="average"``). Users without test
        ratings are not counted; a user whose test ratings all have gain 0 counts as 0.

        Parameters
        ----------
        test : scipy.sparse matrix or tuple
            Test ratings in the fitted shape.
        k : int
            Cut-off (capped at each user's number of test items).
        gain : {"exp", "linear"} or callable
            Gain of a rating: 2^r − 1, r, or a function of the ratings array.

        Returns
        -------
        float
            The mean NDCG@k over the users with test ratings.
        """
        check_is_fitted(self, "user_factors_")
        T = self._check_fitted_ratings(test, "test")
        if len(T.data) == 0:
            raise ValueError("test holds no rating; expected at least one stored entry")
        users = T.users
        f = self.predict(users, T.indices)
        return float(ndcg_score(T.data, f, users, k=k, gain=gain))

    # ------------------------------------------------------------------ files

    def save(self, path) -> None:
        """Write the fitted model to ``path`` (NumPy's ``.npz``).

        :func:`bmrm.collab.load` reads it back. Only built-in losses are written.

        Parameters
        ----------
        path : str or path-like
            File to write (NumPy adds ``.npz`` when the name lacks it).
        """
        check_is_fitted(self, "user_factors_")
        params = self.get_params()
        loss = self.loss_
        name, loss_params = getattr(loss, "name", None), None
        if not name or name not in losses.available() or not hasattr(loss, "get_params"):
            raise ValueError(
                f"the model's loss {loss!r} cannot be saved: only built-in losses are written"
            )
        loss_params = loss.get_params()
        params.update(loss=name, loss_params=loss_params)
        if not isinstance(params["random_state"], (int, type(None))):
            params["random_state"] = None
        params.update(callback=None, client=None)  # not part of the model
        meta = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "params": params,
            "n_iter": int(self.n_iter_),
            "lam": self.lam_,
        }
        np.savez(
            path,
            meta=np.array(json.dumps(meta)),
            user_factors=self.user_factors_,
            item_factors=self.item_factors_,
            user_offsets=self.user_offsets_,
            item_offsets=self.item_offsets_,
            objective=self.result_.objective,
        )


def load(path) -> CofiRank:
    """Read a model written by :meth:`CofiRank.save`.

    Parameters
    ----------
    path : str or path-like
        The ``.npz`` file.

    Returns
    -------
    CofiRank
        The fitted model, with ``result_`` holding the objective per outer iteration.
    """
    with np.load(path, allow_pickle=False) as data:
        try:
            meta = json.loads(str(data["meta"]))
        except (KeyError, ValueError):
            raise ValueError(f"{path} is not a CofiRank model file (no readable meta)") from None
        if meta.get("format") != FORMAT:
            raise ValueError(
                f"{path} is not a CofiRank model file (format {meta.get('format')!r})"
            )
        if meta.get("version") != FORMAT_VERSION:
            raise ValueError(
                f"{path} has CofiRank format version {meta.get('version')}; this package reads "
                f"version {FORMAT_VERSION}"
            )
        model = CofiRank(**meta["params"])
        model.user_factors_ = data["user_factors"]
        model.item_factors_ = data["item_factors"]
        model.user_offsets_ = data["user_offsets"]
        model.item_offsets_ = data["item_offsets"]
        objective = data["objective"]
    model.n_users_, model.n_items_ = len(model.user_factors_), len(model.item_factors_)
    model.loss_ = losses.get(model.loss, **(model.loss_params or {}))
    model.n_iter_ = int(meta["n_iter"])
    model.lam_ = float(meta.get("lam", meta["params"]["lam"]))  # files before "auto"
    model.result_ = CofiRankResult(
        fun=float(objective[-1]), objective=objective, nit=model.n_iter_, steps=[]
    )
    return model

r"""Smooth and listwise surrogate ranking losses on the scores of one query.

For one query with scores ``f`` (m documents) and labels ``y``:

* ``cosine``: ½(1 − ⟨ψ(y), f⟩ / (‖ψ(y)‖ ‖f‖)); not convex, smooth for f ≠ 0 (at f = 0
  it is not even continuous);
* ``listnet``: KL(softmax(α ψ(y)) ‖ softmax(f)); convex, smooth;
* ``listwise_squared``: Σ_j (ψ(y)_j − f_j)²; convex, smooth;
* ``ranknet``: (1/M) Σ_{y_i < y_j} log(1 + exp(f_i − f_j)); convex, smooth;
* ``softmax``: (1/|P|) Σ_{c ∈ P} −log(e^{f_c} / (e^{f_c} + Σ_{n ∉ P} e^{f_n})); convex,
  smooth;
* ``warp``: (1/|P|) Σ_{p ∈ P} Φ(N_p)/N_p Σ_{n ∉ P} max(0, 1 + f_n − f_p); neither convex
  nor continuous.

The label mapping ψ is ``"linear"`` (ψ(y) = y) or ``"exp"`` (ψ(y) = 2^y − 1, the DCG gain).
P is the set of *relevant* documents, ``y >= threshold``. Every loss is non-negative: the
cosine of two vectors is at most 1; a Kullback–Leibler divergence, a sum of squares,
softplus and the hinge are non-negative. The attributes ``smooth`` and ``convex`` tell the
solver which methods are valid (see :mod:`losses._base`): the bundle method's cutting
planes are lower bounds only for convex losses.

Degenerate queries
------------------
Each loss is applied to every query as defined, with these conventions where the formula
is undefined or has no term: cosine is 0 when ψ(y) = 0 (for example all labels 0) and ½
with zero gradient when f = 0; ListNet is 0 for a one-document query (both distributions
are the point mass); RankNet, softmax and WARP are 0 for a query without a comparable pair
(one document, all labels equal, or no relevant / no non-relevant document). A query
whose labels are all equal but not zero is *not* degenerate for cosine, ListNet and the
squared loss: they still pull f towards ψ(y) (up to scale for cosine, up to a constant for
ListNet).

Multinomial logistic with several relevant documents
----------------------------------------------------
Murphy's eq. (9.125) scores the one relevant document c of a query by the softmax of the
scores, −log(e^{f_c} / Σ_j e^{f_j}). With several relevant documents each relevant c is
set against the non-relevant documents only and the terms are averaged: relevant documents
do not compete with each other, the loss stays convex (each term is a log-sum-exp minus a
linear function), and with exactly one relevant document it is eq. (9.125).

WARP, exactly
-------------
Weston et al. weigh the hinge of a positive p against a violating negative n
(1 + f_n > f_p) by L(rank)= Φ(N_p) with Φ(k) = Σ_{j<=k} α_j, α_j = 1/j, and estimate the
rank N_p (the number of violators) by sampling negatives until one violates. Given the
exact N_p, a violator drawn uniformly has expected loss Φ(N_p)/N_p · Σ_violators hinge,
which this loss computes exactly (no sampling, deterministic). Φ(N_p)/N_p is a piecewise
constant function of f that changes when a negative enters or leaves the margin, so the
loss is discontinuous there (a new violator enters with hinge 0 but lowers the weight of
the others), neither convex nor smooth; the gradient is that of the current piece.

Convexity and smoothness
------------------------
ListNet (a log-sum-exp minus a linear function of f), the squared loss, RankNet and softmax
(sums of log-sum-exp of affine functions) are convex and infinitely differentiable. The
cosine loss is invariant to positive scaling of f, so it is not convex (a function
constant along rays through 0 and not constant is never convex); it is smooth for f ≠ 0.
With a linear scorer f = Xw and an L2 penalty, that invariance means the penalty only
shrinks ‖w‖ and the regularized infimum is approached as w → 0; :func:`bmrm.fit` then
returns the best direction found, with ‖w‖ = 1 (the loss declares ``scale_invariant``).

Complexity per query of m documents: O(m) for cosine, ListNet, squared and softmax;
O(m²) for RankNet and WARP.

References
----------
T. Qin, X.-D. Zhang, M.-F. Tsai, D.-S. Wang, T.-Y. Liu and H. Li, "Query-level loss
functions for information retrieval", Information Processing and Management 44 (2008)
(the cosine loss).
Z. Cao, T. Qin, T.-Y. Liu, M.-F. Tsai and H. Li, "Learning to rank: from pairwise approach
to listwise approach", ICML 2007 (ListNet, top-one probabilities).
E. Yang, P. Ravikumar and M. Lease, "A new class of ranking functions for DCG-like
evaluation metrics using conditional probability models" (2010), eqs. (10), (11), (14) and
the linear mapping α r of §6.1.
C. Burges, T. Shaked, E. Renshaw, A. Lazier, M. Deeds, N. Hamilton and G. Hullender,
"Learning to rank using gradient descent", ICML 2005 (RankNet).
K. P. Murphy, "Machine Learning: a Probabilistic Perspective", MIT Press 2012, §9.7.3
eq. (9.125) (multinomial logistic) and §9.7.4 eqs. (9.131)–(9.133) (WARP).
J. Weston, S. Bengio and N. Usunier, "WSABIE: scaling up to large vocabulary image
annotation", IJCAI 2011 (WARP, α_j = 1/j).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from losses._base import Loss
from losses._kernels import surrogate as _k
from losses.validation import check_finite_targets, check_real

__all__ = [
    "CosineLoss",
    "ListNetLoss",
    "ListwiseSquaredLoss",
    "RankNetLoss",
    "SoftmaxLoss",
    "WARPLoss",
]

_MAPPINGS = ("linear", "exp")
_NORMALIZE = ("query", "none")


def _no_data(name, data):
    if data:
        raise ValueError(f"the {name} loss takes no data keywords; got {sorted(data)}")


def _check_choice(value, name, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}; got {value!r}")
    return value


def label_mapping(y: np.ndarray, mapping: str) -> np.ndarray:
    """ψ(y): ``"linear"`` is y itself, ``"exp"`` is 2^y − 1 (float64)."""
    y = np.asarray(y, dtype=np.float64)
    if mapping == "linear":
        return y.copy()
    with np.errstate(over="ignore"):  # callers reject the resulting inf with a clear message
        return np.exp2(y) - 1.0


class _Targets(NamedTuple):
    query_ptr: np.ndarray
    target: np.ndarray  # ψ(y), α ψ(y), labels or relevance flags, per loss
    extra: np.ndarray  # per-query weights (RankNet) or Φ (WARP); empty otherwise


class _Surrogate(Loss):
    convex = True
    smooth = True

    def loss_grad(self, f, targets):
        """Return the per-query losses and the gradient of their sum.

        See the class docstring for the formula and its conventions.

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in internal row order.
        targets : object
            What :meth:`validate` returned.

        Returns
        -------
        values : ndarray of shape (n_queries,)
            The loss of each query.
        grad : ndarray of shape (n_samples,)
            A subgradient of ``values.sum()`` with respect to ``f``.
        """
        f = np.ascontiguousarray(f, dtype=np.float64)
        values = np.empty(len(targets.query_ptr) - 1)
        grad = np.empty_like(f)
        self._run(f, targets, values, grad)
        return values, grad


class _Mapped(_Surrogate):
    """Losses comparing f with a mapping ψ of the labels."""

    def __init__(self, *, mapping: str = "linear"):
        self.mapping = _check_choice(mapping, "mapping", _MAPPINGS)

    def _params(self) -> dict[str, Any]:
        return {"mapping": self.mapping}

    def validate(self, y, query_ptr, **data):
        """Map the labels to the target scores ψ of the loss.

        Parameters
        ----------
        y : array-like of shape (n_samples,)
            Targets in internal (query-contiguous) row order.
        query_ptr : ndarray of shape (n_queries + 1,), int64
            Query ``q`` is rows ``query_ptr[q]:query_ptr[q + 1]``.
        **data
            Loss data keywords; this loss takes none, and any raise ``ValueError``.

        Returns
        -------
        object
            The prepared targets (a named tuple of arrays), for :meth:`loss_grad`.

        Raises
        ------
        ValueError
            When ``y`` holds NaN or inf or labels the mapping overflows on, or data
            keywords are given.
        """
        _no_data(self.name, data)
        psi = label_mapping(check_finite_targets(y), self.mapping)
        if not np.all(np.isfinite(psi)):
            raise ValueError(f"y is too large for mapping={self.mapping!r} (2^y overflows)")
        return _Targets(np.asarray(query_ptr, dtype=np.int64), psi, np.empty(0))


class CosineLoss(_Mapped):
    r"""Cosine loss of Qin et al.: ½(1 − ⟨ψ(y), f⟩ / (‖ψ(y)‖ ‖f‖)) per query.

    Values lie in [0, 1]. Not convex (invariant to positive scaling of f, which the
    attribute ``scale_invariant = True`` tells the solver); smooth for f ≠ 0.
    Conventions: 0 when ψ(y) = 0, ½ with zero gradient when f = 0. Yang et al. eq. (10);
    see :mod:`losses.surrogate`.

    Parameters
    ----------
    mapping : {"linear", "exp"}
        ψ(y) = y or 2^y − 1.
    """

    name = "cosine"
    convex = False
    scale_invariant = True

    def _run(self, f, t, values, grad):
        _k.cosine(f, t.target, t.query_ptr, values, grad)


class ListwiseSquaredLoss(_Mapped):
    r"""Listwise squared loss Σ_j (ψ(y)_j − f_j)² per query (Yang et al. eq. (14)).

    Convex, smooth, non-negative; the risk weights queries equally (unlike the pointwise
    ``"squared"`` loss, which weights documents equally and halves the square).

    Parameters
    ----------
    mapping : {"linear", "exp"}
        ψ(y) = y (the seed's choice) or 2^y − 1.
    """

    name = "listwise_squared"

    def _run(self, f, t, values, grad):
        _k.listwise_squared(f, t.target, t.query_ptr, values, grad)

    def hessp(self, f, d, targets) -> np.ndarray:
        """Return H_f d = 2 d: the Hessian of Σ_j (ψ_j − f_j)² is twice the identity.

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in internal row order.
        d : ndarray of shape (n_samples,), float64
            The direction, in internal row order.
        targets : object
            What :meth:`validate` returned.

        Returns
        -------
        ndarray of shape (n_samples,)
            H_f d, unweighted (as :meth:`loss_grad`).
        """
        return 2.0 * np.asarray(d, dtype=np.float64)


class ListNetLoss(_Surrogate):
    r"""ListNet top-one cross-entropy as a Kullback–Leibler divergence.

    Per query, with top-one probabilities P_s(j) = exp(s_j) / Σ_k exp(s_k) (Cao et al.,
    ICML 2007, Theorem 6 with φ = exp),

        l(f, y) = KL(P_{α ψ(y)} ‖ P_f) = Σ_j P_{αψ}(j) log(P_{αψ}(j) / P_f(j)),

    the cross-entropy −Σ_j P_{αψ}(j) log P_f(j) minus the entropy of the target, which does
    not depend on f: the same gradient P_f − P_{αψ}, and a value that is 0 exactly when
    f = α ψ(y) + constant. The target is the seed's linear mapping,
    P(π⁻¹(1) = j | r) = exp(α r_j) / Σ_k exp(α r_k) (Yang et al. §6.1, eq. (11)).
    Convex (log-sum-exp minus a linear function), smooth, non-negative.

    Parameters
    ----------
    alpha : float > 0, default 1
        The linear mapping's slope.
    mapping : {"linear", "exp"}
        ψ(y) = y (the seed's choice) or 2^y − 1.
    """

    name = "listnet"

    def __init__(self, *, alpha: float = 1.0, mapping: str = "linear"):
        self.alpha = check_real(alpha, "alpha", low=0.0, strict=True)
        self.mapping = _check_choice(mapping, "mapping", _MAPPINGS)

    def _params(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "mapping": self.mapping}

    def validate(self, y, query_ptr, **data):
        """Map the labels to the target scores α ψ(y) of the top-one probabilities.

        Parameters
        ----------
        y : array-like of shape (n_samples,)
            Targets in internal (query-contiguous) row order.
        query_ptr : ndarray of shape (n_queries + 1,), int64
            Query ``q`` is rows ``query_ptr[q]:query_ptr[q + 1]``.
        **data
            Loss data keywords; this loss takes none, and any raise ``ValueError``.

        Returns
        -------
        object
            The prepared targets (a named tuple of arrays), for :meth:`loss_grad`.

        Raises
        ------
        ValueError
            When ``y`` holds NaN or inf or labels the mapping overflows on, or data
            keywords are given.
        """
        _no_data(self.name, data)
        s = self.alpha * label_mapping(check_finite_targets(y), self.mapping)
        if not np.all(np.isfinite(s)):
            raise ValueError(f"y is too large for mapping={self.mapping!r} and alpha")
        return _Targets(np.asarray(query_ptr, dtype=np.int64), s, np.empty(0))

    def _run(self, f, t, values, grad):
        _k.listnet(f, t.target, t.query_ptr, values, grad)

    def hessp(self, f, d, targets) -> np.ndarray:
        """Return H_f d = (diag(p) − p pᵀ) d per query, p = softmax(f).

        This is the Hessian of the cross-entropy's log Σ exp f (the target's part is linear
        in f).

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in internal row order.
        d : ndarray of shape (n_samples,), float64
            The direction, in internal row order.
        targets : object
            What :meth:`validate` returned.

        Returns
        -------
        ndarray of shape (n_samples,)
            H_f d, unweighted (as :meth:`loss_grad`).
        """
        f = np.ascontiguousarray(f, dtype=np.float64)
        out = np.empty_like(f)
        _k.listnet_hessp(f, targets.query_ptr, np.ascontiguousarray(d, dtype=np.float64), out)
        return out


class RankNetLoss(_Surrogate):
    r"""RankNet's pairwise logistic loss (Burges et al., ICML 2005).

    Per query, over every comparable pair (i, j) with y_i < y_j (j should rank above i),

        l(f, y) = (1/M) Σ_{y_i < y_j} log(1 + exp(f_i − f_j)),

    the cross-entropy of the pair probability σ(f_j − f_i) against target 1. M is the
    number of comparable pairs (``normalize="query"``) or 1 (``"none"``); a query without
    comparable pairs contributes 0. Convex, smooth, non-negative. O(m²) per query.

    Parameters
    ----------
    normalize : {"query", "none"}
    """

    name = "ranknet"

    def __init__(self, *, normalize: str = "query"):
        self.normalize = _check_choice(normalize, "normalize", _NORMALIZE)

    def _params(self) -> dict[str, Any]:
        return {"normalize": self.normalize}

    def validate(self, y, query_ptr, **data):
        """Count each query's pairs of different label, the loss's normaliser M.

        Parameters
        ----------
        y : array-like of shape (n_samples,)
            Targets in internal (query-contiguous) row order.
        query_ptr : ndarray of shape (n_queries + 1,), int64
            Query ``q`` is rows ``query_ptr[q]:query_ptr[q + 1]``.
        **data
            Loss data keywords; this loss takes none, and any raise ``ValueError``.

        Returns
        -------
        object
            The prepared targets (a named tuple of arrays), for :meth:`loss_grad`.

        Raises
        ------
        ValueError
            When ``y`` holds NaN or inf, or data keywords are given.
        """
        _no_data(self.name, data)
        y = check_finite_targets(y)
        query_ptr = np.asarray(query_ptr, dtype=np.int64)
        sizes = np.diff(query_ptr)
        n_queries = sizes.size
        # pairs of different label per query: (m² − Σ_levels count²) / 2, the counts of
        # equal labels from one sort of (query, label) for all queries at once
        query = np.repeat(np.arange(n_queries), sizes)
        order = np.lexsort((y, query))
        ys, qs = y[order], query[order]
        new_run = np.ones(y.size, dtype=bool)
        new_run[1:] = (ys[1:] != ys[:-1]) | (qs[1:] != qs[:-1])
        starts = np.flatnonzero(new_run)
        counts = np.diff(np.append(starts, y.size))
        squares = np.bincount(
            qs[starts], weights=counts.astype(np.float64) ** 2, minlength=n_queries
        )
        n_pairs = (sizes.astype(np.float64) ** 2 - squares) / 2.0
        weight = np.zeros(n_queries)
        has = n_pairs > 0
        weight[has] = 1.0 / n_pairs[has] if self.normalize == "query" else 1.0
        return _Targets(query_ptr, y, weight)

    def _run(self, f, t, values, grad):
        _k.ranknet(f, t.target, t.query_ptr, t.extra, values, grad)

    def hessp(self, f, d, targets) -> np.ndarray:
        """Return H_f d for the Hessian H of the summed softplus terms, in O(m²) per query.

        Per query H_f d = (1/M) Σ_{y_i < y_j} σ(f_i − f_j) σ(f_j − f_i) (d_i − d_j)(e_i − e_j).

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in internal row order.
        d : ndarray of shape (n_samples,), float64
            The direction, in internal row order.
        targets : object
            What :meth:`validate` returned.

        Returns
        -------
        ndarray of shape (n_samples,)
            H_f d, unweighted (as :meth:`loss_grad`).
        """
        f = np.ascontiguousarray(f, dtype=np.float64)
        out = np.empty_like(f)
        d = np.ascontiguousarray(d, dtype=np.float64)
        _k.ranknet_hessp(f, targets.target, targets.query_ptr, targets.extra, d, out)
        return out


class _Relevance(_Surrogate):
    """Losses of relevant (``y >= threshold``) against non-relevant documents."""

    def __init__(self, *, threshold: float = 1.0):
        self.threshold = check_real(threshold, "threshold")

    def _params(self) -> dict[str, Any]:
        return {"threshold": self.threshold}

    def validate(self, y, query_ptr, **data):
        """Mark the relevant rows (labels at least the threshold).

        Parameters
        ----------
        y : array-like of shape (n_samples,)
            Targets in internal (query-contiguous) row order.
        query_ptr : ndarray of shape (n_queries + 1,), int64
            Query ``q`` is rows ``query_ptr[q]:query_ptr[q + 1]``.
        **data
            Loss data keywords; this loss takes none, and any raise ``ValueError``.

        Returns
        -------
        object
            The prepared targets (a named tuple of arrays), for :meth:`loss_grad`.

        Raises
        ------
        ValueError
            When ``y`` holds NaN or inf, or data keywords are given.
        """
        _no_data(self.name, data)
        relevant = check_finite_targets(y) >= self.threshold
        return _Targets(np.asarray(query_ptr, dtype=np.int64), relevant, self._extra(relevant))

    def _extra(self, relevant):
        return np.empty(0)


class SoftmaxLoss(_Relevance):
    r"""Multinomial logistic loss of the relevant documents (Murphy eq. (9.125)).

    Per query, with P the relevant documents (``y >= threshold``) and N the others,

        l(f, y) = (1/|P|) Σ_{c ∈ P} −log(e^{f_c} / (e^{f_c} + Σ_{n ∈ N} e^{f_n})),

    which is eq. (9.125) when exactly one document is relevant; with several, each is set
    against the non-relevant documents only (see :mod:`losses.surrogate`). 0 when P or N is
    empty. Convex, smooth, non-negative. Computed with log-sum-exp, without overflow.

    Parameters
    ----------
    threshold : float, default 1
        Labels at or above it are relevant.
    """

    name = "softmax"

    def _run(self, f, t, values, grad):
        _k.softmax(f, t.target, t.query_ptr, values, grad)


class WARPLoss(_Relevance):
    r"""Weighted approximate-rank pairwise loss, its exact expectation (Weston et al.).

    Per query, with P the relevant documents, N the others, N_p = #{n ∈ N : 1 + f_n > f_p}
    the number of margin violators of p and Φ(k) = Σ_{j<=k} 1/j,

        l(f, y) = (1/|P|) Σ_{p ∈ P, N_p > 0} Φ(N_p)/N_p Σ_{n ∈ N} max(0, 1 + f_n − f_p),

    the expected loss of drawing one violator uniformly (Murphy eqs. (9.131)–(9.133) with
    the exact rank instead of its sampled estimate). Non-negative; neither convex nor
    continuous (see :mod:`losses.surrogate`): use it with a method for non-convex,
    non-smooth objectives. 0 when P or N is empty. O(m²) per query.

    Parameters
    ----------
    threshold : float, default 1
        Labels at or above it are relevant.
    """

    name = "warp"
    convex = False
    smooth = False

    def _extra(self, relevant):
        return np.concatenate(([0.0], np.cumsum(1.0 / np.arange(1, relevant.size + 1))))

    def _run(self, f, t, values, grad):
        _k.warp(f, t.target, t.query_ptr, t.extra, values, grad)

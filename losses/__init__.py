"""Loss oracles for bundle-method risk minimization, and ranking metrics.

Every loss returns, for the scores ``f`` of contiguous query groups, the per-query (or
per-sample) loss and its subgradient with respect to ``f``; see :mod:`losses._base` for the
protocol a user's own loss follows.
"""

from __future__ import annotations

import importlib

import numpy as np

from losses._base import Loss, check_protocol
from losses._query import QueryGroups, group_queries

__all__ = [
    "Loss",
    "QueryGroups",
    "available",
    "check_oracle",
    "get",
    "group_queries",
    "pairs_from_labels",
    "prepare",
    "risk",
]


_REGISTRY = {
    "squared": "losses.pointwise:SquaredLoss",
    "hinge": "losses.pointwise:HingeLoss",
    "logistic": "losses.pointwise:LogisticLoss",
    "ordinal": "losses.ordinal:OrdinalLoss",
    "preference": "losses.preference:PreferenceLoss",
    "ndcg": "losses.listwise:NDCGLoss",
    "neru": "losses.listwise:NERULoss",
}


def available() -> list[str]:
    """Names accepted by :func:`get`."""
    return sorted(_REGISTRY)


def get(name, **params):
    """Return the built-in loss ``name`` built with ``params``.

    A loss object (anything with ``validate`` and ``loss_grad``) is returned unchanged, so
    callers may pass either form; ``params`` are then not allowed.
    """
    if not isinstance(name, str):
        check_protocol(name)
        if params:
            raise ValueError("loss parameters apply to a loss name, not to a loss object")
        return name
    if name not in _REGISTRY:
        raise ValueError(f"loss must be one of {available()} or a loss object; got {name!r}")
    module, cls = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)(**params)


class Prepared:
    """A loss bound to validated targets in internal (query-contiguous) row order."""

    def __init__(self, loss, groups: QueryGroups, targets, n_terms: int):
        self.loss = loss
        self.groups = groups
        self.targets = targets
        self.n_terms = n_terms

    def loss_grad(self, f_internal):
        """Per-term losses and ∂(sum)/∂f, both in internal order.

        The kernels spread queries over threads only for inputs of
        :data:`losses._threads.PARALLEL_MIN_ROWS` rows or more (see :mod:`losses._threads`).
        """
        return self.loss.loss_grad(f_internal, self.targets)


def prepare(loss, y, qid=None, *, n_samples: int | None = None, **data) -> Prepared:
    """Validate targets once and return a :class:`Prepared` loss.

    ``y`` and ``qid`` are in the caller's row order; keyword ``data`` (for example the
    ``pairs`` of the preference loss) is passed to ``loss.validate`` after caller row
    indices named in ``loss.row_index_keys`` are mapped to internal rows.
    """
    loss = get(loss)
    y = np.asarray(y)
    n = len(y) if n_samples is None else n_samples
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must be 1-d with {n} entries (one per row); got shape {y.shape}")
    groups = group_queries(qid, n)
    y_int = groups.to_internal(y)
    keys = getattr(loss, "row_index_keys", ())
    if keys and groups.order is not None:
        inverse = groups.inverse()
        for key in keys:
            if data.get(key) is not None:
                idx = np.asarray(data[key])
                if idx.dtype.kind not in "iu":
                    raise ValueError(f"{key} must hold integer row indices; got {idx.dtype}")
                if idx.size and (idx.min() < 0 or idx.max() >= n):
                    raise ValueError(f"{key} holds row indices outside [0, {n})")
                data[key] = inverse[idx]
    targets = loss.validate(y_int, groups.query_ptr, **data)
    n_terms = n if getattr(loss, "pointwise", False) else groups.n_queries
    return Prepared(loss, groups, targets, n_terms)


def risk(loss, f, y, qid=None, **data):
    """Empirical risk of scores ``f`` and its gradient, exactly as :func:`bmrm.fit` uses it.

    Parameters
    ----------
    loss : str or loss object
    f : array-like of shape (n_samples,)
        Scores, in the caller's row order.
    y : array-like of shape (n_samples,)
        Targets.
    qid : array-like of shape (n_samples,) or None
        Query id per row; ``None`` is one query.
    **data
        Loss-specific keywords, for example ``pairs=`` for the preference loss.

    Returns
    -------
    value : float
        The mean loss over queries (degenerate queries count as zeros), or over samples for
        pointwise losses.
    grad : ndarray of shape (n_samples,)
        Its gradient with respect to ``f``, in the caller's row order.
    """
    f = np.asarray(f, dtype=np.float64)
    if f.ndim != 1:
        raise ValueError(f"f must be 1-d; got shape {f.shape}")
    if not np.all(np.isfinite(f)):
        raise ValueError("f must not contain NaN or inf")
    prepared = prepare(loss, y, qid, n_samples=len(f), **data)
    f_int = np.ascontiguousarray(prepared.groups.to_internal(f))
    values, grad = prepared.loss_grad(f_int)
    n = prepared.n_terms
    if n == 0:
        return 0.0, np.zeros_like(f)
    return float(values.sum() / n), prepared.groups.to_caller(grad / n)


def pairs_from_labels(*args, **kwargs):
    """Preference pairs from graded labels; see :func:`losses.preference.pairs_from_labels`."""
    from losses.preference import pairs_from_labels as _pairs_from_labels

    return _pairs_from_labels(*args, **kwargs)


def check_oracle(*args, **kwargs):
    """Check a loss object against the protocol; see :func:`losses._check.check_oracle`."""
    from losses._check import check_oracle as _check_oracle

    return _check_oracle(*args, **kwargs)

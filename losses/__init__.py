"""Loss oracles for bundle-method risk minimization, and ranking metrics.

Every loss returns, for the scores ``f`` of contiguous query groups, the per-query (or
per-sample) loss and its subgradient with respect to ``f``; see :mod:`losses._base` for the
protocol a user's own loss follows.
"""

from __future__ import annotations

import importlib
import inspect

import numpy as np

from losses import _numba_cache
from losses._base import Loss, check_loss_output, check_protocol, rebased_ptr
from losses._query import QueryGroups, group_queries
from losses._threads import PARALLEL_MIN_ROWS
from losses._weights import TermWeights, check_sample_weight

# an unreadable numba cache file of a kernel here or in bmrm is recompiled, not an error
_numba_cache.install()


def _start_numba_error_highlighting() -> None:
    """Run numba's one-time set-up of error-message colours now, on import.

    Where colorama is installed, numba colours its error messages, and the first message it
    builds (which its first compilation does, on import of its typing registries) calls
    ``colorama.init()``, which registers an :mod:`atexit` hook. Building one message here
    makes that happen when this package is imported, so that no fit installs an exit hook.
    Without colorama numba's messages are plain and this does nothing.
    """
    from numba.core import errors

    errors.termcolor().errmsg("")


_start_numba_error_highlighting()

__all__ = [
    "PARALLEL_MIN_ROWS",
    "Loss",
    "Prepared",
    "QueryGroups",
    "TermWeights",
    "available",
    "check_oracle",
    "check_sample_weight",
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
    "map": "losses.average_precision:AveragePrecisionLoss",
    "cosine": "losses.surrogate:CosineLoss",
    "listnet": "losses.surrogate:ListNetLoss",
    "listwise_squared": "losses.surrogate:ListwiseSquaredLoss",
    "ranknet": "losses.surrogate:RankNetLoss",
    "softmax": "losses.surrogate:SoftmaxLoss",
    "warp": "losses.surrogate:WARPLoss",
}


def available() -> list[str]:
    """Return the names of the built-in losses, as accepted by :func:`get`.

    Returns
    -------
    list of str
        The names, sorted.

    Examples
    --------
    >>> import losses
    >>> "ndcg" in losses.available()
    True
    """
    return sorted(_REGISTRY)


def get(name, **params):
    """Return the built-in loss ``name`` built with ``params``.

    A loss object (anything with ``validate`` and ``loss_grad``) is returned unchanged, so
    callers may pass either form; ``params`` are then not allowed.

    Parameters
    ----------
    name : str or loss object
        One of :func:`available`, or a loss object.
    **params
        The loss's constructor parameters (for example ``k=10`` for ``"ndcg"``).

    Returns
    -------
    loss object
        The built loss, or ``name`` itself when it is a loss object.

    Raises
    ------
    ValueError
        When ``name`` is unknown, a parameter is not one of the loss's, or ``params`` are
        given with a loss object.
    TypeError
        When ``name`` is neither a string nor an object with the protocol's methods.

    Examples
    --------
    >>> import losses
    >>> loss = losses.get("ndcg", k=5)
    >>> type(loss).__name__, loss.get_params()["k"]
    ('NDCGLoss', 5)
    """
    if not isinstance(name, str):
        check_protocol(name)
        if params:
            raise ValueError("loss parameters apply to a loss name, not to a loss object")
        return name
    if name not in _REGISTRY:
        raise ValueError(f"loss must be one of {available()} or a loss object; got {name!r}")
    module, cls = _REGISTRY[name].split(":")
    loss_class = getattr(importlib.import_module(module), cls)
    # a misspelt parameter is named with the valid ones before anything is built (unless
    # the constructor takes any keyword)
    parameters = inspect.signature(loss_class).parameters.values()
    accepted = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    any_keyword = any(p.kind == p.VAR_KEYWORD for p in parameters)
    unknown = "" if any_keyword else ", ".join(repr(key) for key in params if key not in accepted)
    if unknown:
        expected = f"its parameters are {accepted}" if accepted else "it takes none"
        raise ValueError(f"the {name} loss has no parameter {unknown}; {expected}")
    return loss_class(**params)


class Prepared:
    """A loss bound to validated targets in internal (query-contiguous) row order.

    Built by :func:`prepare`. ``weights`` weighs the terms: the risk is Σ_t s_t l_t / Σ_t s_t,
    and :attr:`divisor` is that denominator (``n_terms`` unweighted).

    Parameters
    ----------
    loss : loss object
        The loss (see :mod:`losses._base` for the protocol).
    groups : QueryGroups
        The query groups and the row order that makes them contiguous.
    targets : object
        What ``loss.validate`` returned.
    n_terms : int
        The number of loss terms: queries, or rows for a pointwise loss.
    weights : TermWeights or None, default=None
        The terms' weights, or None for an unweighted mean.
    data_names : sequence of str, default=()
        The loss data keywords given to :func:`prepare`, named in error messages.
    """

    def __init__(
        self, loss, groups: QueryGroups, targets, n_terms: int, weights=None, data_names=()
    ):
        self.loss = loss
        self.groups = groups
        self.targets = targets
        self.n_terms = n_terms
        self.weights: TermWeights | None = weights
        self.data_names = tuple(data_names)  # the loss data keywords given, for messages

    @property
    def divisor(self) -> float:
        """The risk's denominator: the number of terms, or the sum of their weights."""
        return self.n_terms if self.weights is None else self.weights.total

    def loss_grad(self, f_internal):
        """Return the per-term losses and ∂(sum)/∂f, both in internal order.

        With weights, these are the terms' weighted losses s_t l_t and ∂(Σ_t s_t l_t)/∂f.
        The built-in kernels spread queries over threads only for inputs of
        :data:`PARALLEL_MIN_ROWS` rows or more (see :mod:`losses._threads`).

        Parameters
        ----------
        f_internal : ndarray of shape (n_samples,), float64
            Scores in internal row order.

        Returns
        -------
        values : ndarray of shape (n_terms,)
            The (weighted) loss of each term.
        grad : ndarray of shape (n_samples,)
            The subgradient of ``values.sum()`` with respect to ``f_internal``.

        Raises
        ------
        TypeError
            When a user's loss returns anything but two float arrays of those shapes; the
            message names its class (:func:`losses._base.check_loss_output`).
        """
        with np.errstate(over="ignore", invalid="ignore"):  # refused by check, naming why
            out = self.loss.loss_grad(f_internal, self.targets)
        values, grad = check_loss_output(self.loss, out, self.n_terms, len(f_internal))
        if self.weights is not None:
            values = values * self.weights.terms
            grad = grad * self.weights.rows
        return values, grad

    def query_block(self, start: int, stop: int) -> Prepared | None:
        """The loss prepared on the queries ``start:stop`` alone, or None when it cannot be.

        Its :meth:`loss_grad` at the scores of those queries' rows (internal order) returns
        exactly their entries of this one's values (one per query, or per row for a
        pointwise loss) and gradient. None for weighted terms, or a loss without
        ``query_block`` (``row_block`` for a pointwise loss; :mod:`losses._base`).

        Parameters
        ----------
        start, stop : int
            The block's first query and one past its last (``0 <= start < stop <=
            n_queries``).

        Returns
        -------
        Prepared or None
            The block's prepared loss: its groups number the rows from 0 (no reordering).
        """
        pointwise = bool(getattr(self.loss, "pointwise", False))
        take = getattr(self.loss, "row_block" if pointwise else "query_block", None)
        if take is None or self.weights is not None:
            return None
        if not 0 <= start < stop <= self.groups.n_queries:
            raise ValueError(
                f"the query block must satisfy 0 <= start < stop <= {self.groups.n_queries}; "
                f"got {start}:{stop}"
            )
        ptr = self.groups.query_ptr
        groups = QueryGroups(rebased_ptr(ptr, start, stop), None, self.groups.qids[start:stop])
        if pointwise:
            first, last = int(ptr[start]), int(ptr[stop])
            targets, n_terms = take(self.targets, first, last), last - first
        else:
            targets, n_terms = take(self.targets, start, stop), stop - start
        return Prepared(self.loss, groups, targets, n_terms, None, self.data_names)

    @property
    def has_hessp(self) -> bool:
        """Whether the loss offers Hessian-vector products (``loss.hessp``)."""
        return callable(getattr(self.loss, "hessp", None))

    def hessp(self, f, d) -> np.ndarray:
        """Return H d for the Hessian H of the risk R(f) of :meth:`risk`.

        H is the loss's Hessian in f, weighted and divided as the risk is; ``d`` and the
        product are in the caller's row order.

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in the caller's row order.
        d : ndarray of shape (n_samples,), float64
            The direction, in the caller's row order.

        Returns
        -------
        ndarray of shape (n_samples,)
            H d, in the caller's row order.

        Raises
        ------
        TypeError
            When the loss has no ``hessp`` or returns anything but a float array of the
            shape of f.
        """
        if not self.has_hessp:
            raise TypeError(f"the loss {self.loss!r} offers no Hessian-vector product (hessp)")
        order = self.groups.order
        if order is None:
            f_int, d_int = np.ascontiguousarray(f), np.ascontiguousarray(d)
        else:
            f_int, d_int = f[order], d[order]
        hd = self.loss.hessp(f_int, d_int, self.targets)
        if not isinstance(hd, np.ndarray) or hd.shape != f_int.shape or hd.dtype.kind != "f":
            got = getattr(hd, "shape", type(hd).__name__)
            raise TypeError(
                f"{type(self.loss).__name__}.hessp must return a float ndarray of shape "
                f"{f_int.shape} (the shape of f); got {got}"
            )
        if self.weights is not None:
            hd = hd * self.weights.rows
        n = self.divisor
        out = np.zeros(len(f))
        if self.n_terms == 0 or n == 0:
            return out
        if order is None:
            np.divide(hd, n, out=out)
        else:
            out[order] = hd
            out /= n
        return out

    def check(self, values, grad, f_internal) -> float:
        """Return Σ values, after checking that the loss's output is finite and non-negative.

        Parameters
        ----------
        values : ndarray of shape (n_terms,)
            The terms' losses, from :meth:`loss_grad`.
        grad : ndarray of shape (n_samples,)
            Their gradient, from :meth:`loss_grad`.
        f_internal : ndarray of shape (n_samples,)
            The scores they were evaluated at (internal order), for the message.

        Returns
        -------
        float
            The sum of ``values``.

        Raises
        ------
        FloatingPointError
            When ``values`` or ``grad`` hold a non-finite number (at finite scores).
        ValueError
            When a value is negative (bundle methods need R >= 0).
        """
        total = float(values.sum())
        if not np.isfinite(total) or not np.all(np.isfinite(grad)):
            inputs = [
                "the targets y",
                f"the loss's parameters ({self.loss!r})",
                *(f"its data ({name})" for name in self.data_names),
                *(["sample_weight"] if self.weights is not None else []),
                "the scores",
            ]
            raise FloatingPointError(
                f"the {type(self.loss).__name__} loss returned a non-finite value or gradient "
                f"at finite scores (max |f| = {np.abs(f_internal).max(initial=0.0):.3g}): "
                f"{', '.join(inputs[:-1])} or {inputs[-1]} are out of range for it; scale "
                "them down"
            )
        if values.size and values.min() < 0:
            raise ValueError(
                f"the loss {self.loss!r} returned a negative value ({values.min():g}); bundle "
                "methods need non-negative losses"
            )
        return total

    def risk(self, f, *, work=None, out=None) -> tuple[float, np.ndarray]:
        """R(f) = Σ values / divisor and ∂R/∂f, from and to the caller's row order.

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in the caller's row order.
        work, out : ndarray of shape (n_samples,), float64, or None
            Work arrays kept by a caller that evaluates many times (the solver's oracle):
            ``work`` receives f in internal order when rows are reordered, and ``out`` the
            returned gradient, which is then overwritten by the next call. Allocating them
            per call costs page faults comparable to a pass over X.

        Returns
        -------
        value : float
            The mean loss over queries (degenerate queries count as zeros), or over samples
            for pointwise losses, weighted by the terms' weights when there are any; 0 when
            there is no term.
        grad : ndarray of shape (n_samples,)
            ∂R/∂f in the caller's row order.

        Raises
        ------
        FloatingPointError
            When the loss returns a non-finite value or gradient.
        ValueError
            When the loss returns a negative value (bundle methods need R >= 0).
        """
        order = self.groups.order
        if order is None:
            f_internal = np.ascontiguousarray(f)
        elif work is not None:
            f_internal = np.take(f, order, out=work)
        else:
            f_internal = f[order]
        values, grad = self.loss_grad(f_internal)
        total = self.check(values, grad, f_internal)
        n = self.divisor
        g = np.empty(len(f)) if out is None else out
        # no terms, or (one part of a distributed fit) terms that all weigh 0
        if self.n_terms == 0 or n == 0:
            g[:] = 0.0
            return 0.0, g
        if order is None:
            np.divide(grad, n, out=g)
        else:
            g[order] = grad
            g /= n
        return total / n, g


def prepare(
    loss,
    y,
    qid=None,
    *,
    n_samples: int | None = None,
    sample_weight=None,
    weight_part: bool = False,
    **data,
) -> Prepared:
    """Validate targets once and return a :class:`Prepared` loss.

    Keyword ``data`` (for example the ``pairs`` of the preference loss) is passed to
    ``loss.validate`` after caller row indices named in ``loss.row_index_keys`` are mapped to
    internal rows and per-row arrays named in ``loss.row_array_keys`` are put in internal
    order.

    Parameters
    ----------
    loss : str or loss object
        A name of :func:`available` or a loss object.
    y : array-like of shape (n_samples,)
        Targets, in the caller's row order.
    qid : array-like of shape (n_samples,) or None, default=None
        Query id per row; None is one query.
    n_samples : int or None, default=None
        The number of rows; None takes ``len(y)``.
    sample_weight : array-like of shape (n_samples,) or None, default=None
        One non-negative weight per row, equal within a query for a query loss
        (:func:`losses._weights.check_sample_weight`); makes the risk the weighted mean of
        the terms.
    weight_part : bool, default=False
        Whether the rows are one part of the data (see
        :func:`~losses._weights.check_sample_weight`).
    **data
        Loss-specific keywords, passed to ``loss.validate``.

    Returns
    -------
    Prepared
        The loss bound to its validated targets.

    Raises
    ------
    ValueError
        For bad ``y``, ``qid``, ``sample_weight`` or loss data.
    """
    loss = get(loss)
    y = np.asarray(y)
    n = len(y) if n_samples is None else n_samples
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must be 1-d with {n} entries (one per row); got shape {y.shape}")
    groups = group_queries(qid, n)
    pointwise = bool(getattr(loss, "pointwise", False))
    weights = check_sample_weight(sample_weight, groups, pointwise, part=weight_part)
    y_int = groups.to_internal(y)
    if groups.order is not None:
        # per-row data (e.g. the ordinal loss's row_weight) follows the rows; a wrong
        # length is left for validate to name
        for key in getattr(loss, "row_array_keys", ()):
            value = data.get(key)
            if value is not None and np.ndim(value) == 1 and np.shape(value)[0] == n:
                data[key] = np.asarray(value)[groups.order]
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
    n_terms = n if pointwise else groups.n_queries
    names = sorted(key for key, value in data.items() if value is not None)
    return Prepared(loss, groups, targets, n_terms, weights, names)


def risk(loss, f, y, qid=None, **data):
    """Empirical risk of scores ``f`` and its gradient, exactly as :func:`bmrm.fit` uses it.

    Parameters
    ----------
    loss : str or loss object
        A name of :func:`available` or a loss object.
    f : array-like of shape (n_samples,)
        Scores, in the caller's row order.
    y : array-like of shape (n_samples,)
        Targets.
    qid : array-like of shape (n_samples,) or None
        Query id per row; ``None`` is one query.
    **data
        Loss-specific keywords, for example ``pairs=`` for the preference loss, and
        ``sample_weight=`` (one weight per row, equal within a query for a query loss).

    Returns
    -------
    value : float
        The mean loss over queries (degenerate queries count as zeros), or over samples for
        pointwise losses; with ``sample_weight``, the weighted mean Σ_t s_t l_t / Σ_t s_t.
    grad : ndarray of shape (n_samples,)
        Its gradient with respect to ``f``, in the caller's row order.

    Raises
    ------
    TypeError
        When ``loss.loss_grad`` returns anything but two float arrays of the protocol's
        shapes; the message names the loss's class and the wrong output.
    ValueError
        For bad ``f``, ``y`` or ``qid``, and when the loss returns a negative value.
    FloatingPointError
        When the loss overflows (a non-finite value or gradient at finite ``f``).

    Examples
    --------
    The squared loss ½(f − y)² of two samples, averaged:

    >>> import losses
    >>> value, grad = losses.risk("squared", [1.0, 2.0], [0.0, 0.0])
    >>> value, grad.tolist()
    (1.25, [0.5, 1.0])
    """
    try:
        f = np.asarray(f)
    except (TypeError, ValueError) as exc:  # ragged nested sequences
        raise ValueError(f"f must be a 1-d array of real numbers ({exc})") from None
    if f.dtype.kind not in "biuf":
        raise ValueError(
            f"f must hold real numbers (a bool, integer or float dtype); got dtype {f.dtype}"
        )
    f = f.astype(np.float64)
    if f.ndim != 1:
        raise ValueError(f"f must be 1-d; got shape {f.shape}")
    if not np.all(np.isfinite(f)):
        raise ValueError("f must not contain NaN or inf")
    n_y = np.shape(y)[0] if np.ndim(y) >= 1 else None
    if n_y is not None and n_y != len(f):
        raise ValueError(
            f"f and y must have one entry per row each; got {len(f)} scores and {n_y} targets"
        )
    return prepare(loss, y, qid, n_samples=len(f), **data).risk(f)


def pairs_from_labels(*args, **kwargs):
    """Return preference pairs from graded labels.

    Parameters
    ----------
    *args, **kwargs
        The arguments of :func:`losses.preference.pairs_from_labels`.

    Returns
    -------
    pairs : ndarray of shape (n_pairs, 2), int64
        Caller row indices (i, j), row j more relevant.
    costs : ndarray of shape (n_pairs,), float64
        The pairs' costs.
    """
    from losses.preference import pairs_from_labels as _pairs_from_labels

    return _pairs_from_labels(*args, **kwargs)


def check_oracle(*args, **kwargs):
    """Check a loss object against the protocol.

    Parameters
    ----------
    *args, **kwargs
        The arguments of :func:`losses._check.check_oracle`.

    Returns
    -------
    OracleReport
        What :func:`losses._check.check_oracle` returns.
    """
    from losses._check import check_oracle as _check_oracle

    return _check_oracle(*args, **kwargs)

"""The loss-oracle protocol shared by every loss and by :func:`bmrm.fit`.

A loss works on the scores ``f = X @ w`` of contiguous query groups, never on ``X``; the
solver computes ``f`` and maps ``∂l/∂f`` back through ``X.T``. Any object with the methods
below plugs in (it need not subclass :class:`Loss`):

``validate(y, query_ptr, **data) -> targets``
    Check and prepare the targets once (rows already in internal, query-contiguous order).
    Raise ``ValueError`` naming the argument on bad input. ``targets`` is opaque to callers.
``loss_grad(f, targets) -> (values, grad)``
    ``values`` holds one non-negative loss per query (``pointwise = False``) or per sample
    (``pointwise = True``); ``grad`` has the shape of ``f`` and is a subgradient of
    ``values.sum()`` with respect to ``f``. The empirical risk is ``values.mean()``.

Optional attributes: ``name`` (str), ``pointwise`` (bool, default False), ``smooth`` (bool,
default False: finite differences are only checked for smooth losses), ``convex`` (bool,
default True: the loss is convex in ``f``, so ``grad`` is a subgradient and the bundle
method's cutting planes are lower bounds; a loss declaring ``convex = False`` needs a
method for non-convex objectives, and ``grad`` is then the gradient of the smooth piece it
is on), ``scale_invariant`` (bool, default False: values do not change when f is multiplied
by a positive number, so an L2 penalty on a linear scorer has no minimiser),
``row_index_keys`` (names of ``data`` keywords holding caller row indices, remapped to
internal rows before ``validate``), ``row_array_keys`` (names of ``data`` keywords holding
one value per caller row, put in internal order before ``validate``), ``get_params()``
(JSON-serialisable parameters, so that ``losses.get(name, **params)`` rebuilds the loss),
and ``metric(f, targets)`` (the true per-query loss of the ranking that sorting ``f``
induces, which ``values`` upper-bounds).

A twice differentiable loss may offer ``hessp(f, d, targets) -> hd``: the product H_f d of
the Hessian of ``values.sum()`` in f (a generalised Hessian where the gradient is only
piecewise linear, as for the squared pairwise hinge) with a direction d of the shape of f,
unweighted like ``loss_grad``; :meth:`losses.Prepared.hessp` adds the weights. Second-order
solvers (:mod:`bmrm.solver.newton`) then form the products Xᵀ H_f X v of the objective. A
loss whose ``hessp`` is None or absent has none (the linear hinges). A per-query loss with
``hessp`` may also offer ``hessp_kernel(f, targets)``, returning ``(kernel, args)`` or None:
``kernel(q_start, q_stop, d, *args, values, out)`` a ``nogil`` numba function writing H_f d
of those queries into ``out`` from their entries of d alone (``values`` is not used), so
that the product Xᵀ H_f X v takes one pass over X block by block, as ``block_kernel`` below
does for the gradient.

A per-query loss (``pointwise = False``) may also offer ``block_kernel(targets)``, returning
``(kernel, args)`` or None: ``kernel(q_start, q_stop, f, *args, values, grad)`` a numba
function compiled with ``nogil=True`` that writes ``values[q]`` and every row of ``grad`` of
the queries ``q_start:q_stop`` from those queries' scores alone (internal order), so that
``loss_grad`` is that kernel over all queries. The risk oracle then evaluates X w, the loss
and Xᵀg block by block while a block of X is still in cache (one pass over X instead of two).

A per-query loss may also offer ``query_block(targets, start, stop) -> targets``: the
targets of the queries ``start:stop`` alone, their rows renumbered from 0 (views of
``targets``' arrays where it can), such that ``loss_grad(f[p[start]:p[stop]], block)``,
``p`` the query pointer, returns exactly those queries' entries of ``values`` and rows of
``grad`` of ``loss_grad(f, targets)``. Callers that hold many queries then evaluate them a
block at a time, without arrays of the scores' size (:func:`losses.Prepared.query_block`).
A pointwise loss may offer ``row_block(targets, start, stop) -> targets`` alike for the rows
``start:stop``.

A loss that is a difference of convex functions (a *latent* loss, such as the structured
NDCG and NERU losses with ``ties="latent"``) sets ``latent = True`` and offers
``convexify(f, targets) -> targets``: the targets of a convex surrogate that majorises the
loss and equals it at ``f``; ``bmrm.fit`` then trains it by the concave-convex procedure
(:mod:`bmrm.solver.cccp`), started at the minimiser of ``initial_loss(targets) -> (loss,
targets)`` when the loss offers one.

Losses are non-negative, as the bundle method assumes (Teo et al., JMLR 2010, §2): the
solver relies on the plane ``R(w) >= 0``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Loss", "check_loss_output", "check_protocol"]


class Loss:
    """Base class for the built-in losses; see the module docstring for the protocol."""

    name: str = ""
    pointwise: bool = False
    smooth: bool = False
    convex: bool = True
    row_index_keys: tuple[str, ...] = ()
    row_array_keys: tuple[str, ...] = ()

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Return the parameters that rebuild this loss with ``losses.get(self.name, **params)``.

        Parameters
        ----------
        deep : bool, default=True
            Accepted for scikit-learn (``clone``, grid searches over ``loss__k`` and the
            like); a loss holds no nested objects, so it changes nothing.

        Returns
        -------
        dict
            The constructor's keyword arguments, JSON-serialisable.
        """
        return self._params()

    def _params(self) -> dict[str, Any]:
        return {}

    def set_params(self, **params) -> Loss:
        """Change parameters in place, checked as the constructor checks them.

        This is scikit-learn's protocol: the loss is rebuilt with the merged parameters and
        takes the new object's state.

        Parameters
        ----------
        **params
            Constructor keyword arguments to change.

        Returns
        -------
        Loss
            This loss, changed.

        Raises
        ------
        ValueError
            When a name is not a parameter of this loss; the message lists the valid ones.
        """
        known = self._params()
        unknown = sorted(set(params) - set(known))
        if unknown:
            expected = f"its parameters are {sorted(known)}" if known else "it takes none"
            raise ValueError(f"the {self.name} loss has no parameter {unknown[0]!r}; {expected}")
        rebuilt = type(self)(**{**known, **params})
        self.__dict__.update(rebuilt.__dict__)
        return self

    def validate(self, y, query_ptr, **data):
        """Check and prepare the targets once; subclasses implement it.

        Parameters
        ----------
        y : ndarray of shape (n_samples,)
            Targets in internal (query-contiguous) row order.
        query_ptr : ndarray of shape (n_queries + 1,), int64
            Query ``q`` is rows ``query_ptr[q]:query_ptr[q + 1]``.
        **data
            Loss-specific data (for example the preference loss's ``pairs``).

        Returns
        -------
        object
            The prepared targets, passed back to :meth:`loss_grad` unchanged.
        """
        raise NotImplementedError

    def loss_grad(self, f, targets):
        """Return the losses and their subgradient at the scores ``f``; subclasses implement it.

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in internal row order.
        targets : object
            What :meth:`validate` returned.

        Returns
        -------
        values : ndarray of shape (n_queries,) or (n_samples,)
            One non-negative loss per query, or per sample for a pointwise loss.
        grad : ndarray of shape (n_samples,)
            A subgradient of ``values.sum()`` with respect to ``f``.
        """
        raise NotImplementedError

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"


_REQUIRED = ("validate", "loss_grad")


def rebased_ptr(ptr: np.ndarray, start: int, stop: int) -> np.ndarray:
    """``ptr[start:stop + 1] - ptr[start]``: the pointer of the groups ``start:stop`` of a
    pointer array, numbered from 0 (for a loss's ``query_block``)."""
    return np.asarray(ptr[start : stop + 1], dtype=np.int64) - np.int64(ptr[start])


def check_protocol(loss, *, name: str = "loss") -> None:
    """Raise ``TypeError`` naming the first required method ``loss`` lacks."""
    for method in _REQUIRED:
        if not callable(getattr(loss, method, None)):
            raise TypeError(
                f"{name} must be a loss name or an object with methods "
                f"{', '.join(_REQUIRED)}; {type(loss).__name__} has no method {method!r}"
            )


def check_loss_output(loss, out, n_terms: int, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the ``(values, grad)`` that ``loss.loss_grad`` returned, as float64 arrays.

    Raises ``TypeError`` naming the loss's class and the wrong output unless ``out`` is a
    pair of 1-d float arrays, ``values`` with ``n_terms`` entries (one per query, or one per
    row for a ``pointwise`` loss) and ``grad`` with ``n_rows`` entries (the shape of f).
    Their finiteness is checked by the callers, which know what the scores came from.
    """
    where = f"{type(loss).__name__}.loss_grad"
    if not isinstance(out, tuple) or len(out) != 2:
        got = f"a {len(out)}-tuple" if isinstance(out, tuple) else type(out).__name__
        raise TypeError(f"{where} must return a pair (values, grad); got {got}")
    pointwise = bool(getattr(loss, "pointwise", False))
    per = "per row: the loss is pointwise" if pointwise else "per query"
    hint = "" if pointwise else "; a loss with one value per row must set pointwise = True"
    for label, a, shape, meaning in (
        ("values", out[0], (n_terms,), f"one entry {per}"),
        ("grad", out[1], (n_rows,), "one entry per row, the shape of f"),
    ):
        if not isinstance(a, np.ndarray):
            raise TypeError(
                f"{where} returned {label} as {type(a).__name__}; expected a float ndarray of "
                f"shape {shape} ({meaning})"
            )
        if a.shape != shape:
            extra = hint if label == "values" and a.shape == (n_rows,) != shape else ""
            raise TypeError(
                f"{where} returned {label} of shape {a.shape}; expected shape {shape} "
                f"({meaning}){extra}"
            )
        if a.dtype.kind != "f":
            raise TypeError(f"{where} returned {label} of dtype {a.dtype}; expected a float dtype")
    return out[0].astype(np.float64, copy=False), out[1].astype(np.float64, copy=False)

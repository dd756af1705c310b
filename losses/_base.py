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
method's cutting planes are lower bounds; a loss declaring ``convex = False`` needs a method
for non-convex objectives, and ``grad`` is then the gradient of the smooth piece it is on),
``scale_invariant`` (bool, default False: values do not change when f is multiplied by
a positive number, so an L2 penalty on a linear scorer has no minimiser), ``row_index_keys``
(names of ``data`` keywords holding caller row indices, remapped to
internal rows before ``validate``), ``get_params()`` (JSON-serialisable parameters, so that
``losses.get(name, **params)`` rebuilds the loss), and ``metric(f, targets)`` (the true
per-query loss of the ranking that sorting ``f`` induces, which ``values`` upper-bounds).

Losses are non-negative, as the bundle method assumes (Teo et al., JMLR 2010, §2): the
solver relies on the plane ``R(w) >= 0``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Loss", "check_finite_targets", "check_graded_labels", "check_protocol"]


class Loss:
    """Base class for the built-in losses; see the module docstring for the protocol."""

    name: str = ""
    pointwise: bool = False
    smooth: bool = False
    convex: bool = True
    row_index_keys: tuple[str, ...] = ()

    def get_params(self) -> dict[str, Any]:
        """Parameters that rebuild this loss with ``losses.get(self.name, **params)``."""
        return {}

    def validate(self, y, query_ptr, **data):
        raise NotImplementedError

    def loss_grad(self, f, targets):
        raise NotImplementedError

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"


_REQUIRED = ("validate", "loss_grad")


def check_protocol(loss, *, name: str = "loss") -> None:
    """Raise ``TypeError`` naming the first required method ``loss`` lacks."""
    for method in _REQUIRED:
        if not callable(getattr(loss, method, None)):
            raise TypeError(
                f"{name} must be a loss name or an object with methods "
                f"{', '.join(_REQUIRED)}; {type(loss).__name__} has no method {method!r}"
            )


def check_finite_targets(y, *, name: str = "y") -> np.ndarray:
    """Return ``y`` as a float64 1-d array, rejecting NaN and inf."""
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-d; got shape {y.shape}")
    if y.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numeric; got dtype {y.dtype}")
    y = y.astype(np.float64, copy=False)
    if not np.all(np.isfinite(y)):
        raise ValueError(f"{name} must not contain NaN or inf")
    return y


def check_graded_labels(y, *, name: str = "y") -> np.ndarray:
    """Return ``y`` as int64 relevance levels, rejecting negative or non-integer values."""
    y = check_finite_targets(y, name=name)
    if y.size and (np.any(y < 0) or np.any(y != np.round(y))):
        bad = y[(y < 0) | (y != np.round(y))][0]
        raise ValueError(f"{name} must hold non-negative integer relevance levels; got {bad!r}")
    return y.astype(np.int64)

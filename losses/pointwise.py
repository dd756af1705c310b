"""Pointwise losses: the empirical risk is the mean over samples.

References
----------
Teo, Vishwanathan, Smola & Le, "Bundle Methods for Regularized Risk Minimization",
JMLR 11 (2010), Table 5 (squared, hinge and logistic losses) and the ranking appendix §1.1
(least-squares regression; the derivative of ½(f − y)² is f − y).
"""

from __future__ import annotations

import numpy as np

from losses._base import Loss
from losses._kernels import pointwise as _k
from losses.validation import check_finite_targets

__all__ = ["SquaredLoss", "HingeLoss", "LogisticLoss"]


def _no_data(name, data):
    if data:
        raise ValueError(f"the {name} loss takes no data keywords; got {sorted(data)}")


class _Pointwise(Loss):
    pointwise = True
    _kernel = None

    def row_block(self, targets, start: int, stop: int):
        """Return the targets of the rows ``start:stop`` alone (see :mod:`losses._base`).

        Parameters
        ----------
        targets : ndarray
            What :meth:`validate` returned.
        start, stop : int
            The block's first row and one past its last.

        Returns
        -------
        ndarray
            Their targets (a view).
        """
        return targets[start:stop]

    def loss_grad(self, f, targets):
        """Return the loss of each sample and its gradient in ``f``.

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in internal row order.
        targets : ndarray of shape (n_samples,)
            What :meth:`validate` returned.

        Returns
        -------
        values : ndarray of shape (n_samples,)
            The loss of each sample.
        grad : ndarray of shape (n_samples,)
            A subgradient of ``values.sum()`` with respect to ``f``.
        """
        f = np.ascontiguousarray(f, dtype=np.float64)
        values = np.empty_like(f)
        grad = np.empty_like(f)
        type(self)._kernel(f, targets, values, grad)
        return values, grad


class SquaredLoss(_Pointwise):
    """Squared error l(f, y) = ½(f − y)², gradient f − y.

    Any finite real targets whose loss at f = 0, ½ Σ y², is finite (|y| up to about 1e154
    for a few rows); larger targets overflow float64 and are rejected, asking to scale y.
    Smooth, so finite differences apply; the Hessian in f is the identity.
    """

    name = "squared"
    smooth = True
    _kernel = staticmethod(_k.squared)

    def hessp(self, f, d, targets) -> np.ndarray:
        """Return H_f d = d: the Hessian of Σ_i ½(f_i − y_i)² is the identity.

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in internal row order.
        d : ndarray of shape (n_samples,), float64
            The direction, in internal row order.
        targets : ndarray of shape (n_samples,)
            What :meth:`validate` returned.

        Returns
        -------
        ndarray of shape (n_samples,)
            H_f d, unweighted (as :meth:`loss_grad`).
        """
        return np.array(d, dtype=np.float64)

    def validate(self, y, query_ptr, **data):
        """Check the targets: finite reals whose loss at f = 0 is finite.

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
        ndarray of shape (n_samples,), float64
            The targets.

        Raises
        ------
        ValueError
            When ``y`` holds NaN or inf, or is too large (the message asks to scale it).
        """
        _no_data(self.name, data)
        y = check_finite_targets(y)
        if y.size:
            top = float(np.abs(y).max())
            # ½ Σ y² computed as ½ top² Σ (y / top)², which itself never overflows
            if top > 0 and not np.isfinite(0.5 * top * top * float(np.sum(np.square(y / top)))):
                raise ValueError(
                    f"y is too large for the squared loss: |y| reaches {top:.3g}, so ½ Σ y² "
                    "(the loss at w = 0) overflows float64; scale y down"
                )
        return y


class _Binary(_Pointwise):
    def validate(self, y, query_ptr, **data):
        """Check binary labels and map {0, 1} to {−1, +1}.

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
        ndarray of shape (n_samples,), float64
            The labels in {−1, +1}.

        Raises
        ------
        ValueError
            When ``y`` holds values other than {−1, +1} or {0, 1}.
        """
        _no_data(self.name, data)
        y = check_finite_targets(y)
        values = np.unique(y)
        if np.all(np.isin(values, (-1.0, 1.0))):
            return y.copy()
        if np.all(np.isin(values, (0.0, 1.0))):
            return 2.0 * y - 1.0
        raise ValueError(
            f"y must hold binary labels in {{-1, +1}} or {{0, 1}} for the {self.name} loss; "
            f"got values {values[:5].tolist()}"
        )


class HingeLoss(_Binary):
    """Hinge loss max(0, 1 − y f) for y in {−1, +1} (labels {0, 1} map to {−1, +1}).

    Upper-bounds the zero-one loss of sign(f). The subgradient at the kink is 0.
    """

    name = "hinge"
    _kernel = staticmethod(_k.hinge)

    def metric(self, f, targets):
        """Return the zero-one loss of sign(f) (a score of exactly 0 counts as an error).

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in internal row order.
        targets : ndarray of shape (n_samples,)
            What :meth:`validate` returned, labels in {−1, +1}.

        Returns
        -------
        ndarray of shape (n_samples,), float64
            1 for each misclassified sample, 0 otherwise.
        """
        return (targets * f <= 0).astype(np.float64)


class LogisticLoss(_Binary):
    """Logistic loss log(1 + exp(−y f)) for y in {−1, +1} (labels {0, 1} map to {−1, +1}).

    Smooth; computed without overflow for large |f|. The Hessian in f is diagonal,
    σ(y_i f_i) σ(−y_i f_i).
    """

    name = "logistic"
    smooth = True
    _kernel = staticmethod(_k.logistic)

    def hessp(self, f, d, targets) -> np.ndarray:
        """Return H_f d, H = diag(σ(y f) σ(−y f)) the Hessian of Σ_i log(1 + exp(−y_i f_i)).

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in internal row order.
        d : ndarray of shape (n_samples,), float64
            The direction, in internal row order.
        targets : ndarray of shape (n_samples,)
            What :meth:`validate` returned.

        Returns
        -------
        ndarray of shape (n_samples,)
            H_f d, unweighted (as :meth:`loss_grad`).
        """
        f = np.ascontiguousarray(f, dtype=np.float64)
        out = np.empty_like(f)
        _k.logistic_curvature(f, targets, out)
        out *= d
        return out

"""``bmrm.path``: fits along a sequence of regularization constants, sharing the bundle."""

from __future__ import annotations

import warnings

import numpy as np

import losses
from bmrm._validation import check_lam, check_loss_params, is_dask
from bmrm.model import FIT_KEYWORDS, LinearModel, fit
from bmrm.scorers import LinearScorer
from bmrm.solver.methods import CarriedPlanes, auto_method, check_method, get_method
from bmrm.solver.methods.nrbm import NRBM
from bmrm.solver.regularizers import make_regularizer

__all__ = ["path"]


def path(X, y, loss="squared", qid=None, *, lams, method=None, **fit_params) -> list:
    """Fit one model per regularization constant, each from the last one's bundle and solution.

    Since the cutting planes of the risk do not depend on lam, the bundle of the fit at
    lams[i − 1] is a valid model of R at lams[i]; with the warm start w0 = the previous
    solution, a path costs far fewer oracle calls than independent fits (the sum of
    ``result_.nfev`` over the returned models; each fit's first call re-evaluates its
    warm start). Each model's certificate is that of an ordinary :func:`bmrm.fit`.

    The planes are carried only for a convex loss with the linear scorer, and a method other
    than NRBM. A latent loss (``"ndcg"``, ``"neru"`` with ``ties="latent"``), trained by the
    concave-convex procedure, a non-convex risk and NRBM (``method="nrbm"``, which
    :func:`bmrm.fit` sets up for the loss itself) get the warm start alone: each lam's fit
    starts at the previous lam's model, so a stationary point can differ from that of a fit
    from the default start.

    Parameters
    ----------
    X : array-like or scipy.sparse matrix of shape (n_samples, n_features)
        As in :func:`bmrm.fit`.
    y : array-like of shape (n_samples,)
        As in :func:`bmrm.fit`.
    loss : str or loss object, default="squared"
        As in :func:`bmrm.fit`.
    qid : array-like of shape (n_samples,) or None, default=None
        As in :func:`bmrm.fit`.
    lams : sequence of float
        Regularization constants (each as ``lam`` of :func:`bmrm.fit`), fitted in the
        order given. From the largest to the smallest is usually cheapest: solutions change
        little and the bundle grows.
    method : str, object or None, default=None
        As ``method`` of :func:`bmrm.fit` (``"lbfgs"`` and ``"nrbm"`` included): a name gets
        a fresh instance for each lam; an object with a ``step(state)`` method is used by
        each lam's fit in turn, as by repeated calls of :func:`bmrm.fit`.
    **fit_params
        Any other keyword of :func:`bmrm.fit` but ``lam``, ``w0`` and ``method``.

    Returns
    -------
    list of LinearModel
        One per lam, in the order of ``lams``.
    """
    for key in ("lam", "w0"):
        if key in fit_params:
            raise ValueError(f"path takes lams=, not {key}=")
    # as fit checks them, before any work
    check_method(method)
    check_loss_params(fit_params.get("loss_params"))
    if isinstance(lams, str) or np.ndim(lams) != 1 or len(lams) == 0:
        raise ValueError(f"lams must be a non-empty 1-d sequence of finite numbers; got {lams!r}")
    # each as fit checks lam (a string is not a number there either)
    lams_arr = np.array([check_lam(v, f"lams[{i}]") for i, v in enumerate(lams)])
    requested = method
    if method is None or method == "auto":
        regularizer = make_regularizer(
            fit_params.get("regularizer", "l2"),
            l1_ratio=fit_params.get("l1_ratio", 0.5),
            bounds=fit_params.get("bounds"),
            nonneg=fit_params.get("nonneg", False),
        )
        method = auto_method(regularizer)
    models: list[LinearModel] = []
    # fit builds NRBM for the loss (its planes are lowered where the risk is not convex)
    by_nrbm = (isinstance(method, str) and method == "nrbm") or isinstance(method, NRBM)
    carry = not by_nrbm and _carries_planes(loss, fit_params)
    # a method a bundle fit cannot use ("lbfgs" for a convex loss) is refused here
    carrier = CarriedPlanes(get_method(method), None) if carry else None
    w0 = None
    for lam in lams_arr:
        if carry:
            carrier = CarriedPlanes(get_method(method), carrier.bundle)
            model = fit(X, y, loss, qid, lam=float(lam), w0=w0, method=carrier, **fit_params)
        else:
            model = fit(X, y, loss, qid, lam=float(lam), w0=w0, method=requested, **fit_params)
        models.append(model)
        w0 = model.result_.x
    _warn_if_no_lam_learns(X, y, loss, qid, models, fit_params)
    return models


def _warn_if_no_lam_learns(X, y, loss, qid, models, fit_params) -> None:
    """Warn when at every lam the fit is no better than w = 0.

    J(0) = R(0) for the built-in regularizers (Ω(0) = 0). A fit whose objective is within
    its relative tolerance of J(0) at every lam ranks the rows as w = 0 does (in their
    file order), however small the lam: the loss itself has its minimum at w = 0 on these
    data, which is what the structured NDCG and NERU losses' hinge bound does on long,
    noisy queries (:mod:`losses.listwise`, "The ramp bound"). Checked for linear fits on
    in-memory data (one evaluation of the risk at w = 0)."""
    if is_dask(X) or is_dask(y):
        return
    if fit_params.get("ranking_function", fit_params.get("scorer")) is not None:
        return
    if fit_params.get("regularizer", "l2") not in ("l2", "l1", "elastic_net"):
        return
    data = {k: v for k, v in fit_params.items() if k not in FIT_KEYWORDS or k == "sample_weight"}
    loss_obj = losses.get(loss, **(fit_params.get("loss_params") or {}))
    j0, _ = losses.risk(loss_obj, np.zeros(np.shape(X)[0]), y, qid, **data)
    tol = max(fit_params.get("tol", 1e-3), 1e-9)
    if j0 > 0.0 and all(m.result_.fun >= j0 * (1.0 - tol) for m in models):
        name = getattr(loss_obj, "name", "") or type(loss_obj).__name__
        warnings.warn(
            f"the {name} loss learned nothing along this path: at every lam the fit's "
            f"objective is within tol of its value at w = 0 ({j0:.6g}), so the models "
            "rank rows as w = 0 does; the loss's minimum is at w = 0 on these data (for "
            "the structured NDCG and NERU losses on long, noisy queries: bound='ramp')",
            UserWarning,
            stacklevel=2,
        )


def _carries_planes(loss, fit_params) -> bool:
    """Whether the bundle of one lam is a valid model of the risk at the next: only for a
    convex loss with the linear scorer. A latent loss is trained by the concave-convex
    procedure, whose convex surrogate (and its starting pairwise loss) changes from step to
    step; the planes of a non-convex risk (a non-linear scorer, a loss declaring
    ``convex = False``) are not lower bounds."""
    loss_obj = losses.get(loss, **(fit_params.get("loss_params") or {}))
    if getattr(loss_obj, "latent", False) or getattr(loss_obj, "convex", True) is not True:
        return False
    scorer = fit_params.get("ranking_function", fit_params.get("scorer"))
    return (
        scorer is None
        or type(scorer) is LinearScorer
        or (isinstance(scorer, str) and scorer == "linear")
    )

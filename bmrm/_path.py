"""``bmrm.path``: fits along a sequence of regularization constants, sharing the bundle."""

from __future__ import annotations

import numpy as np

import losses
from bmrm._validation import check_lam, check_loss_params
from bmrm.model import LinearModel, fit
from bmrm.scorers import LinearScorer
from bmrm.solver.methods import CarriedPlanes, auto_method, check_method, get_method
from bmrm.solver.methods.nrbm import NRBM
from bmrm.solver.regularizers import make_regularizer

__all__ = ["path"]


def path(X, y, loss="squared", qid=None, *, lams, method=None, **fit_params) -> list:
    """Fit one model per regularization constant, each starting from the last one's bundle
    and solution.

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
    X, y, loss, qid :
        As in :func:`bmrm.fit`.
    lams : sequence of float
        Regularization constants (each as ``lam`` of :func:`bmrm.fit`), fitted in the
        order given. From the largest to the smallest is usually cheapest: solutions change
        little and the bundle grows.
    method : str, object or None
        As ``method`` of :func:`bmrm.fit` (``"lbfgs"`` and ``"nrbm"`` included): a name gets
        a fresh instance for each lam; an object with a ``step(state)`` method is used by
        each lam's fit in turn, as by repeated calls of :func:`bmrm.fit`.
    **fit_params :
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
    return models


def _carries_planes(loss, fit_params) -> bool:
    """Whether the bundle of one lam is a valid model of the risk at the next: only for a
    convex loss with the linear scorer. A latent loss is trained by the concave-convex
    procedure, whose convex surrogate (and its starting pairwise loss) changes from step to
    step; the planes of a non-convex risk (a non-linear scorer, a loss declaring
    ``convex = False``) are not lower bounds."""
    loss_obj = losses.get(loss, **(fit_params.get("loss_params") or {}))
    if getattr(loss_obj, "latent", False) or getattr(loss_obj, "convex", True) is not True:
        return False
    scorer = fit_params.get("scorer")
    return (
        scorer is None
        or type(scorer) is LinearScorer
        or (isinstance(scorer, str) and scorer == "linear")
    )

"""Hessian-vector products of the losses (``loss.hessp``) against explicit Hessians written
out by brute force, and :meth:`losses.Prepared.hessp` (weights, reordered rows) against
central differences of the risk's gradient."""

import numpy as np
import pytest
from scipy.special import expit

import losses
from tests.losses.reference_hessians import (
    listnet_hessian,
    ordinal_squared_query,
    ranknet_hessian,
)

SIZES = [1, 2, 5, 4, 9, 1, 13]


def problem(rng, binary=False):
    qid = np.repeat(np.arange(len(SIZES)), SIZES)
    y = rng.integers(0, 2 if binary else 4, qid.size).astype(np.float64)
    y[3:8] = y[3]  # a query of equal labels
    query_ptr = np.r_[0, np.cumsum(SIZES)].astype(np.int64)
    return y, qid, query_ptr


def explicit_hessian(name, params, f, y, query_ptr):
    """The Hessian of the summed per-query (per-row) losses in f, block by block."""
    n = f.size
    H = np.zeros((n, n))
    if name == "squared":
        return np.eye(n)
    if name == "listwise_squared":
        return 2.0 * np.eye(n)
    if name == "logistic":
        z = (2.0 * y - 1.0) * f
        return np.diag(expit(z) * expit(-z))
    for q in range(len(query_ptr) - 1):
        rows = slice(query_ptr[q], query_ptr[q + 1])
        fq, yq = f[rows], y[rows]
        if name == "listnet":
            H[rows, rows] = listnet_hessian(fq)
        elif name == "ranknet":
            n_pairs = np.sum(yq[:, None] < yq[None, :])
            weight = 1.0 if params["normalize"] == "none" else 1.0 / max(n_pairs, 1)
            H[rows, rows] = ranknet_hessian(fq, yq, weight)
        else:  # the squared-hinge ordinal loss
            H[rows, rows] = ordinal_squared_query(
                fq, yq.astype(np.int64), params["cost"], params["normalize"]
            )[2]
    return H


CASES = [
    ("squared", {}),
    ("logistic", {}),
    ("listwise_squared", {}),
    ("listnet", {"alpha": 0.5}),
    ("ranknet", {"normalize": "query"}),
    ("ranknet", {"normalize": "none"}),
    ("ordinal", {"hinge": "squared", "cost": "linear", "normalize": "query"}),
    ("ordinal", {"hinge": "squared", "cost": "zero_one", "normalize": "none"}),
]


@pytest.mark.parametrize(("name", "params"), CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_hessp_matches_the_explicit_hessian(name, params):
    rng = np.random.default_rng(len(name) + len(params))
    y, qid, query_ptr = problem(rng, binary=name == "logistic")
    loss = losses.get(name, **params)
    targets = loss.validate(y, query_ptr)
    for scale in (0.1, 1.0, 4.0):
        f = scale * rng.normal(size=y.size)
        f[rng.random(y.size) < 0.3] = 0.5  # tied scores
        H = explicit_hessian(name, params, f, y, query_ptr)
        for _ in range(3):
            d = rng.normal(size=y.size)
            np.testing.assert_allclose(
                loss.hessp(f, d, targets), H @ d, rtol=1e-10, atol=1e-12 * np.abs(H).max()
            )


@pytest.mark.parametrize(("name", "params"), CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_prepared_hessp_is_the_derivative_of_the_risk_gradient(name, params):
    """Rows shuffled (so the loss sees them reordered) and weighted by query."""
    rng = np.random.default_rng(100 + len(name))
    y, qid, _ = problem(rng, binary=name == "logistic")
    order = rng.permutation(y.size)
    y, qid = y[order], qid[order]
    weight = rng.uniform(0.5, 2.0, len(SIZES))[qid]
    prepared = losses.prepare(losses.get(name, **params), y, qid, sample_weight=weight)
    assert prepared.groups.order is not None and prepared.weights is not None
    f = rng.normal(size=y.size)
    d = rng.normal(size=y.size)
    hd = prepared.hessp(f, d)
    h = 1e-6
    fd = (prepared.risk(f + h * d)[1] - prepared.risk(f - h * d)[1]) / (2 * h)
    np.testing.assert_allclose(hd, fd, rtol=1e-6, atol=1e-8 * np.abs(hd).max())
    # and the weighted mean's Hessian from the unweighted loss's, in caller order
    ref = explicit_hessian(
        name, params, f[prepared.groups.order], y[prepared.groups.order],
        prepared.groups.query_ptr,
    )  # fmt: skip
    s = weight[prepared.groups.order]
    expected = np.empty_like(f)
    expected[prepared.groups.order] = (s * (ref @ d[prepared.groups.order])) / prepared.divisor
    np.testing.assert_allclose(hd, expected, rtol=1e-10, atol=1e-13)


def test_losses_without_hessp():
    for name, params in [("hinge", {}), ("ordinal", {}), ("preference", {}), ("ndcg", {})]:
        loss = losses.get(name, **params)
        assert getattr(loss, "hessp", None) is None
    y = np.array([0.0, 1.0, 2.0])
    prepared = losses.prepare("ordinal", y)
    assert not prepared.has_hessp
    with pytest.raises(TypeError, match="offers no Hessian-vector product"):
        prepared.hessp(np.zeros(3), np.ones(3))


def test_a_wrong_hessp_output_is_named():
    class BadShape:
        pointwise = True

        def validate(self, y, query_ptr):
            return y

        def loss_grad(self, f, y):
            return 0.5 * (f - y) ** 2, f - y

        def hessp(self, f, d, y):
            return d[:-1]

    prepared = losses.prepare(BadShape(), np.zeros(4))
    with pytest.raises(TypeError, match=r"BadShape.hessp must return a float ndarray of shape"):
        prepared.hessp(np.zeros(4), np.ones(4))

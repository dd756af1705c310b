"""A zero subgradient where the risk is not least: refused, never certified as optimal.

A convex risk's zero subgradient says that the point minimises it, and that single plane
certifies the regularizer's minimiser. A user's loss or oracle that returns a placeholder
zero gradient must therefore raise, not end the fit "converged" at w = 0; a true minimiser
with a positive risk must still converge.
"""

import numpy as np
import pytest

import bmrm
from bmrm.solver.loop import minimize_bmrm


class ZeroGradientSquared:
    """½(f − y)² per row with a zero gradient: wrong wherever f != y."""

    pointwise = True

    def validate(self, y, query_ptr):
        return np.asarray(y, dtype=np.float64)

    def loss_grad(self, f, y):
        return 0.5 * (f - y) ** 2, np.zeros_like(f)


class ShiftedSquared:
    """½(f − y)² + 1 per row with its true gradient: positive at its minimiser."""

    pointwise = True

    def validate(self, y, query_ptr):
        return np.asarray(y, dtype=np.float64)

    def loss_grad(self, f, y):
        return 0.5 * (f - y) ** 2 + 1.0, f - y


def data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 4))
    return X, X @ rng.normal(size=4) + 0.1 * rng.normal(size=60)


@pytest.mark.parametrize("method", ["level", "bmrm", "ocas", "ls-bmrm", "inout"])
def test_a_placeholder_zero_gradient_is_refused(method):
    X, y = data()
    with pytest.raises(ValueError, match="zero subgradient where the risk"):
        bmrm.fit(X, y, ZeroGradientSquared(), lam=1e-3, method=method)


def test_a_raw_oracle_with_a_zero_subgradient_is_refused():
    X, y = data(1)

    def oracle(w):
        r = X @ w - y
        return 0.5 * float(np.mean(r**2)), np.zeros(4)

    with pytest.raises(ValueError, match="zero subgradient where the risk"):
        minimize_bmrm(oracle, 4, 1e-3)


def test_a_true_minimiser_with_positive_risk_converges():
    """y = 0 and no intercept: w = 0 minimises R = mean(½ f² + 1) = 1, gradient 0 there."""
    X, _ = data(2)
    model = bmrm.fit(X, np.zeros(60), ShiftedSquared(), lam=1e-3)
    assert model.result_.status == 0
    np.testing.assert_array_equal(model.coef_, 0.0)
    assert model.result_.fun == pytest.approx(1.0, rel=1e-15)
    # the first call found the zero subgradient, the 16 probes confirmed it
    assert model.result_.nfev >= 17


def test_the_package_losses_are_not_probed():
    """The same situation with the built-in squared loss costs no extra call: X's single
    column is orthogonal to the residual at w = 0, so Xᵀ ∂l/∂f = 0 while R = 1."""
    X = np.array([[1.0], [-1.0]])
    y = np.array([1.0, 1.0])
    model = bmrm.fit(X, y, "squared", lam=1e-3)
    assert model.result_.status == 0
    assert model.coef_[0] == 0.0
    assert model.result_.nfev == 1
    # a user's copy of that loss with its true gradient is probed, and converges
    user = bmrm.fit(X, y, ShiftedSquared(), lam=1e-3)
    assert user.result_.status == 0 and user.coef_[0] == 0.0
    assert user.result_.nfev == 17

"""A user's subgradient that its own risk contradicts: refused, never certified.

A convex risk's zero subgradient says that the point minimises it, and that single plane
certifies the regularizer's minimiser. A user's loss or oracle that returns a placeholder
zero gradient must therefore raise, not end the fit "converged" at w = 0; a true minimiser
with a positive risk must still converge. A gradient off by a few per cent (scaled, shifted)
makes planes that over-estimate the risk along descent directions and a certified gap that
is too small: the probe along a line at the first point refuses it, and a lower bound above
an evaluated objective by more than rounding is an error, never "converged".
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


class WrongSquared:
    """½(f − y)² per row with its gradient times ``scale`` plus ``shift``, from the call
    ``after`` on (earlier calls get the true gradient)."""

    pointwise = True

    def __init__(self, scale=1.0, shift=0.0, after=0):
        self.scale, self.shift, self.after, self.calls = scale, shift, after, 0

    def validate(self, y, query_ptr):
        return np.asarray(y, dtype=np.float64)

    def loss_grad(self, f, y):
        self.calls += 1
        r = f - y
        if self.calls <= self.after:
            return 0.5 * r * r, r
        return 0.5 * r * r, self.scale * r + self.shift


class Hinge:
    """A user's hinge loss with labels ±1: exact subgradients, kinks included."""

    pointwise = True

    def validate(self, y, query_ptr):
        return np.asarray(y, dtype=np.float64)

    def loss_grad(self, f, y):
        margin = 1.0 - y * f
        return np.maximum(margin, 0.0), np.where(margin > 0, -y, 0.0)


@pytest.mark.parametrize("method", ["level", "bmrm", "ocas", "ls-bmrm", "inout"])
@pytest.mark.parametrize(("scale", "shift"), [(0.99, 0.0), (1.01, 0.0), (0.95, 0.0), (1.0, 0.01)])
def test_a_slightly_wrong_gradient_is_refused(method, scale, shift):
    """Each of these ended "converged" with a gap 4–97 times below the true error."""
    X, y = data(3)
    with pytest.raises(ValueError, match="contradicted by its risk along a line"):
        bmrm.fit(X, y, WrongSquared(scale, shift), lam=0.1, method=method, tol=1e-6)


def test_a_raw_oracle_with_a_wrong_slope_is_refused():
    X, y = data(4)

    def oracle(w):
        r = X @ w - y
        return 0.5 * float(np.mean(r**2)), 0.95 * X.T @ r / len(r)

    with pytest.raises(ValueError, match="contradicted by its risk along a line"):
        minimize_bmrm(oracle, 4, 1e-3)


@pytest.mark.parametrize("method", ["level", "bmrm", "ocas", "ls-bmrm", "inout"])
def test_true_subgradients_pass_the_probe(method):
    """A user's squared and hinge losses (with kinks) and a float32 X converge, with six
    more oracle calls than the built-in loss's fit at most (the probe, once per fit), to
    the built-in loss's objective."""
    X, y = data(5)
    for loss, builtin, target in ((ShiftedSquared(), None, y), (Hinge(), "hinge", np.sign(y))):
        for Xd in (X, X.astype(np.float32)):
            res = bmrm.fit(Xd, target, loss, lam=1e-2, method=method, tol=1e-6).result_
            assert res.success, res.message
            if builtin is not None:
                ref = bmrm.fit(Xd, target, builtin, lam=1e-2, method=method, tol=1e-6).result_
                assert res.fun == pytest.approx(ref.fun, rel=1e-5)


@pytest.mark.parametrize("method", ["level", "bmrm"])
def test_a_lower_bound_above_an_evaluated_objective_is_an_error(method):
    """The true gradient for the first calls (so the probe passes), 1.5 times it after: the
    lower bound ends above the best objective. Within tol·J of it, the fit reported
    "converged" with a negative gap; only rounding is allowed now."""
    X, y = data(6)
    with pytest.raises(ValueError, match="certified lower bound .* exceeds the objective"):
        bmrm.fit(X, y, WrongSquared(1.5, after=2), lam=0.1, method=method, tol=1e-3)


def test_an_oracle_answering_in_float32_passes_the_probe():
    """Risk and gradient computed and returned in float32 (rounding ~1e-7 relative): the
    probe's tolerance follows the answer's dtype, so a true gradient is not refused."""
    X, y = data(7)
    X32, y32 = X.astype(np.float32), y.astype(np.float32)

    def oracle(w):
        r = X32 @ w.astype(np.float32) - y32
        return np.float32(0.5) * np.mean(r * r), (X32.T @ r) / np.float32(len(r))

    res = minimize_bmrm(oracle, 4, 1e-2, tol=1e-4)
    assert res.status == 0, res.message

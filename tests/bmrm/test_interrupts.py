"""A Ctrl-C that surfaces as numba's ``SystemError ... returned a result with an exception
set`` reaches the caller of :func:`bmrm.fit` and of the estimators as ``KeyboardInterrupt``;
any other ``SystemError`` passes unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import bmrm
from bmrm.exceptions import interrupt_in


class InterruptedLoss:
    """A squared loss whose second call fails as ``make_error()`` says."""

    pointwise = True

    def __init__(self, make_error):
        self.make_error = make_error
        self.calls = 0

    def validate(self, y, query_ptr, **data):
        return np.asarray(y, dtype=np.float64)

    def loss_grad(self, f, y):
        self.calls += 1
        if self.calls == 2:
            raise self.make_error()
        r = f - y
        return 0.5 * r**2, r


def interrupt_as_cause():
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as interrupt:
        error = SystemError("<CPUDispatcher> returned a result with an exception set")
        error.__cause__ = interrupt
        return error


def interrupt_as_context():
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        try:
            raise SystemError("<CPUDispatcher> returned a result with an exception set")
        except SystemError as error:
            return error


def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    return X, X @ np.array([1.0, -2.0, 0.5])


@pytest.mark.parametrize("make_error", [interrupt_as_cause, interrupt_as_context])
def test_fit_raises_the_interrupt_behind_a_system_error(make_error):
    X, y = data()
    loss = InterruptedLoss(make_error)
    with pytest.raises(KeyboardInterrupt) as caught:
        bmrm.fit(X, y, loss, lam=1e-2)
    assert loss.calls == 2
    assert isinstance(caught.value.__cause__, SystemError)


def test_an_estimator_raises_the_interrupt_behind_a_system_error():
    X, y = data()
    loss = InterruptedLoss(interrupt_as_cause)
    with pytest.raises(KeyboardInterrupt):
        bmrm.BMRMRanker(loss=loss, lam=1e-2).fit(X, y, qid=np.repeat(np.arange(3), 10))
    assert loss.calls == 2


def test_other_system_errors_pass_unchanged():
    X, y = data()
    loss = InterruptedLoss(lambda: SystemError("another failure"))
    with pytest.raises(SystemError, match="another failure") as caught:
        bmrm.fit(X, y, loss, lam=1e-2)
    assert caught.value.__cause__ is None and caught.value.__context__ is None


def test_interrupt_in():
    assert isinstance(interrupt_in(interrupt_as_cause()), KeyboardInterrupt)
    assert isinstance(interrupt_in(interrupt_as_context()), KeyboardInterrupt)
    assert interrupt_in(SystemError("x")) is None
    assert interrupt_in(KeyboardInterrupt()) is None
    try:
        raise ValueError("v")
    except ValueError:
        try:
            raise SystemError("s")
        except SystemError as error:
            assert interrupt_in(error) is None

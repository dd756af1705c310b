"""The shared argument checks of losses.validation: accepted values and their errors."""

import inspect
import re

import numpy as np
import pytest

import losses
from losses.validation import (
    check_bool,
    check_finite_targets,
    check_graded_labels,
    check_int,
    check_k,
    check_positive,
    check_real,
)


def test_check_real_and_positive():
    assert check_real(np.float32(2.5), "x") == 2.5 and type(check_real(3, "x")) is float
    assert check_real(1.0, "x", low=1.0) == 1.0
    assert check_positive(0.0, "tol", strict=False) == 0.0
    cases = [
        (lambda: check_real(True, "x"), "x must be a finite number; got True"),
        (lambda: check_real("1", "x"), "x must be a finite number; got '1'"),
        (lambda: check_real(np.nan, "x"), "x must be a finite number"),
        (lambda: check_real(1.0, "alpha", low=1.0, strict=True), "alpha must be > 1; got 1.0"),
        (lambda: check_real(-0.5, "beta", low=0.0), "beta must be >= 0; got -0.5"),
        (lambda: check_positive(0, "lam"), "lam must be > 0; got 0"),
        (lambda: check_positive(-1e-300, "tol", strict=False), "tol must be >= 0"),
        (lambda: check_positive(np.inf, "lam"), "lam must be a finite number; got inf"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()


def test_check_int_and_k():
    assert check_int(np.int64(3), "n", 0) == 3 and type(check_int(np.int64(3), "n", 0)) is int
    assert check_int(None, "k", 1, allow_none=True) is None
    assert check_k(None) is None and check_k(5) == 5
    cases = [
        (lambda: check_int(2.0, "n", 0), "n must be an integer >= 0; got 2.0"),
        (lambda: check_int(False, "n", 0), "n must be an integer >= 0; got False"),
        (lambda: check_int(2, "bundle_size", 3), "bundle_size must be an integer >= 3; got 2"),
        (lambda: check_int(None, "n", 0), "n must be an integer >= 0; got None"),
        (lambda: check_k(0), r"k must be an integer >= 1 or None; got 0"),
        (lambda: check_k(None, allow_none=False), r"k must be an integer >= 1; got None"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()


def test_targets():
    np.testing.assert_array_equal(check_finite_targets([1, 2]), [1.0, 2.0])
    np.testing.assert_array_equal(check_graded_labels([0.0, 3.0]), [0, 3])
    assert check_graded_labels([2.0]).dtype == np.int64
    cases = [
        (lambda: check_finite_targets([[1.0]]), r"y must be 1-d; got shape \(1, 1\)"),
        (lambda: check_finite_targets(["a"]), "y must hold real numbers"),
        (lambda: check_finite_targets([1.0, np.inf], name="z"), "z must not contain NaN"),
        (lambda: check_graded_labels([1.5]), "non-negative integer relevance levels; got 1.5"),
        (lambda: check_graded_labels([-1]), "non-negative integer relevance levels; got -1.0"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()


@pytest.mark.parametrize("name", losses.available())
def test_get_names_a_misspelt_parameter_and_the_valid_ones(name):
    parameters = inspect.signature(type(losses.get(name)).__init__).parameters.values()
    accepted = [p.name for p in parameters if p.name not in ("self", "args", "kwargs")]
    with pytest.raises(ValueError) as err:
        losses.get(name, not_a_parameter=1)
    message = str(err.value)
    assert message.startswith(f"the {name} loss has no parameter 'not_a_parameter'; ")
    if accepted:
        assert message.endswith(f"its parameters are {accepted}")
    else:
        assert message.endswith("it takes none")
    # the valid ones are still accepted: the defaults, given back by name
    defaults = {p.name: p.default for p in parameters if p.name in accepted}
    assert losses.get(name, **defaults).get_params() == losses.get(name).get_params()


class _AnyKeywordLoss:
    """A loss class whose constructor takes any keyword (for the test below)."""

    def __init__(self, **params):
        self.params = params


def test_get_leaves_a_constructor_that_takes_any_keyword_to_check_its_own(monkeypatch):
    monkeypatch.setitem(
        losses._REGISTRY, "any_keyword", "tests.losses.test_validation:_AnyKeywordLoss"
    )
    assert losses.get("any_keyword", whatever=3).params == {"whatever": 3}


@pytest.mark.parametrize("name", ["ndcg", "neru"])
@pytest.mark.parametrize("k", [2**63, 10**30])
def test_k_beyond_int64_is_refused_when_the_loss_is_made(name, k):
    """Such a k passed the check and then overflowed in the kernels (OverflowError)."""
    with pytest.raises(ValueError, match=rf"k must be at most 2\*\*63 - 1 .*got {k}"):
        losses.get(name, k=k)
    with pytest.raises(ValueError, match=rf"k must be at most 2\*\*63 - 1 .*got {k}"):
        check_k(k)


@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_largest_k_is_the_whole_list(name):
    rng = np.random.default_rng(0)
    levels = rng.integers(0, 3, 40)
    qid = np.repeat(np.arange(8), 5)
    f = rng.standard_normal(40)
    R_max, a_max = losses.risk(losses.get(name, k=2**63 - 1), f, levels, qid)
    R_5, a_5 = losses.risk(losses.get(name, k=5), f, levels, qid)
    assert R_max == R_5
    np.testing.assert_array_equal(a_max, a_5)


@pytest.mark.parametrize("value", ["False", 0, 1, None])
def test_check_bool(value):
    assert check_bool(np.True_, "flag") is True and check_bool(False, "flag") is False
    with pytest.raises(ValueError, match=f"flag must be True or False; got {value!r}"):
        check_bool(value, "flag")


@pytest.mark.parametrize("random_state", ["x", -1, 1.5, True])
def test_check_oracle_names_a_bad_random_state(random_state):
    message = rf"random_state must be an integer >= 0 or None; got {re.escape(repr(random_state))}"
    with pytest.raises(ValueError, match=message):
        losses.check_oracle("squared", random_state=random_state)


@pytest.mark.parametrize("random_state", [None, 3, np.random.default_rng(1)])
def test_check_oracle_takes_seeds_and_generators(random_state):
    assert losses.check_oracle("squared", random_state=random_state, n_trials=3).ok


@pytest.mark.parametrize("n_f, n_y", [(4, 5), (6, 5)])
def test_risk_names_f_and_y_when_their_lengths_differ(n_f, n_y):
    with pytest.raises(ValueError, match=rf"got {n_f} scores and {n_y} targets"):
        losses.risk("squared", np.zeros(n_f), np.ones(n_y))


def test_the_overflow_message_names_only_the_inputs_the_fit_has():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no stray numpy RuntimeWarning before the error
        with pytest.raises(FloatingPointError) as info:
            losses.risk("squared", np.array([1e200]), np.array([0.0]))
    message = str(info.value)
    assert "the targets y, the loss's parameters (SquaredLoss()) or the scores are" in message
    assert "pair_costs" not in message
    y = np.array([2.0, 1.0, 0.0])
    pairs, costs = losses.pairs_from_labels(y, np.zeros(3))
    with pytest.raises(FloatingPointError) as info:
        losses.risk(
            "preference",
            np.array([0.0, 0.0, 1e300]),
            y,
            np.zeros(3),
            pairs=pairs,
            pair_costs=costs * 1e308,
        )
    assert "its data (pair_costs), its data (pairs) or the scores" in str(info.value)

"""Arguments of bmrm.fit, bmrm.path and bmrm.minimize_bmrm outside their ranges.

Each bad value must raise before any oracle call, with a message naming the argument; each
value at the edge of a range must fit correctly.
"""

import re
import warnings

import numpy as np
import pytest

import bmrm
import losses as bmrm_losses
from bmrm import BMRMRanker, BMRMRegressor
from bmrm.scorers import ExpectedGainScorer
from bmrm.solver.methods import PlainBMRM
from losses.metrics import ideal_dcg, ndcg_score

D = 4


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, D))
    y = rng.standard_normal(40)
    qid = np.repeat(np.arange(8), 5)
    levels = rng.integers(0, 3, 40)
    return X, y, qid, levels


class CountingOracle:
    """Least squares, R(w) = ‖Xw − y‖²/(2n), counting its calls."""

    def __init__(self, X, y, output=None):
        self.X, self.y, self.calls = X, y, 0
        self.output = output

    def __call__(self, w):
        self.calls += 1
        r = self.X @ w - self.y
        out = 0.5 * np.mean(r**2), self.X.T @ r / len(self.y)
        return out if self.output is None else self.output(*out)


def ridge_optimum(X, y, lam):
    """min_w lam/2 ‖w‖² + ‖Xw − y‖²/(2n) in closed form, and its value."""
    n = len(y)
    w = np.linalg.solve(X.T @ X / n + lam * np.eye(X.shape[1]), X.T @ y / n)
    return w, 0.5 * lam * w @ w + 0.5 * np.mean((X @ w - y) ** 2)


# ----------------------------------------------------------------------------- lam


@pytest.mark.parametrize("lam", [1e13, 1e17, 1e300, 1e-31, 1e-200])
def test_lam_outside_the_solvable_range_is_refused_by_fit_and_path(data, lam):
    X, y, qid, levels = data
    message = r"lam must be within \[1e-30, 1e\+12\].*got " + re.escape(repr(lam))
    with pytest.raises(ValueError, match=message):
        bmrm.fit(X, y, lam=lam, callback=never_called)
    with pytest.raises(ValueError, match=message):
        bmrm.fit(X, y, lam=lam, regularizer="l1", callback=never_called)
    with pytest.raises(ValueError, match=r"lams\[1\] must be within \[1e-30, 1e\+12\]"):
        bmrm.path(X, y, lams=[0.1, lam])
    with pytest.raises(ValueError, match=message):
        BMRMRegressor(lam=lam).fit(X, y)
    with pytest.raises(ValueError, match=message):
        BMRMRanker(lam=lam).fit(X, levels, qid=qid)
    oracle = CountingOracle(X, y)
    with pytest.raises(ValueError, match=message):
        bmrm.minimize_bmrm(oracle, D, lam)
    assert oracle.calls == 0


def never_called(*args):
    raise AssertionError("the solver ran an iteration on bad input")


@pytest.mark.parametrize("regularizer", ["l2", "l1"])
def test_largest_lam_fits_w_zero(data, regularizer):
    """At lam = 1e12 the optimum is within 1e-12 of w = 0 and J* = R(0) to rounding."""
    X, y, _, _ = data
    model = bmrm.fit(X, y, lam=1e12, regularizer=regularizer)
    res = model.result_
    assert res.status == 0, res.message
    assert np.abs(model.coef_).max() <= 1e-12
    assert res.fun == pytest.approx(0.5 * np.mean(y**2), rel=1e-12)
    assert res.lower_bound <= res.fun


@pytest.mark.parametrize("scale, lam", [(1e-8, 1.0), (1e-8, 1e-4), (1e-4, 1e10)])
def test_master_problem_of_tiny_subgradients_against_large_lam(data, scale, lam):
    """lam·R(0) exceeds ‖a‖² by about 1/eps or more: the active-set solver's affine
    minimisers lose every digit (this raised ZeroDivisionError); the fit still converges to
    the ridge optimum with a valid certificate."""
    X, y, _, _ = data
    X = X * scale
    res = bmrm.fit(X, y, lam=lam, tol=1e-9).result_
    assert res.success, res.message
    _, J_star = ridge_optimum(X, y, lam)
    assert res.lower_bound <= J_star * (1 + 1e-12)
    assert res.fun - J_star <= res.gap + 1e-12 * J_star


# ----------------------------------------------------------------------------- minimize_bmrm


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"lam": 0.0}, "lam must be > 0; got 0.0"),
        ({"lam": -1.0}, "lam must be > 0; got -1.0"),
        ({"lam": np.nan}, "lam must be a finite number; got nan"),
        ({"lam": "0.1"}, "lam must be a finite number; got '0.1'"),
        ({"max_iter": 0}, "max_iter must be an integer >= 1; got 0"),
        ({"max_iter": -1}, "max_iter must be an integer >= 1; got -1"),
        ({"max_iter": 2.5}, "max_iter must be an integer >= 1; got 2.5"),
        ({"tol": -1.0}, "tol must be >= 0; got -1.0"),
        ({"tol": np.nan}, "tol must be a finite number; got nan"),
        ({"tol": 1.0}, "tol must be < 1"),
        ({"atol": -1.0}, "atol must be >= 0; got -1.0"),
        ({"max_time": -1.0}, "max_time must be > 0; got -1.0"),
        ({"max_time": np.inf}, "max_time must be a finite number; got inf"),
        ({"bundle_size": 2}, "bundle_size must be an integer >= 3; got 2"),
        ({"max_idle": 0}, "max_idle must be an integer >= 1; got 0"),
        ({"w0": np.zeros(3)}, r"w0 must have shape \(4,\).*got shape \(3,\)"),
        ({"w0": [0.0, np.nan, 0.0, 0.0]}, r"w0 must be finite.*w0\[1\] = nan"),
        ({"w0": "abcd"}, r"w0 must be an array of real numbers of shape \(4,\)"),
        (
            {"w0": np.array([1 + 5j, 0, 0, 0])},
            r"w0 must be an array of real numbers of shape \(4,\) \(one weight per feature\); "
            r"got dtype complex128",
        ),
        ({"w0": ["1.5", "0", "0", "0"]}, r"w0 must be an array of real numbers .*got dtype <U3"),
        ({"callback": 3}, "callback must be callable or None; got 3"),
        ({"verbose": "no"}, "verbose must be True, False or an integer >= 0; got 'no'"),
        ({"progress": "yes"}, "progress must be True or False; got 'yes'"),
        ({"cvxpy_solver": "NOPE"}, "cvxpy_solver must be None or one of the installed"),
    ],
)
def test_minimize_bmrm_checks_its_arguments_before_calling_the_oracle(data, kwargs, message):
    X, y, _, _ = data
    oracle = CountingOracle(X, y)
    args = {"lam": 1e-3, **kwargs}
    with pytest.raises(ValueError, match=message):
        bmrm.minimize_bmrm(oracle, D, **args)
    assert oracle.calls == 0


@pytest.mark.parametrize("n_features", [0, 2.0, "4", None])
def test_minimize_bmrm_checks_n_features(data, n_features):
    X, y, _, _ = data
    with pytest.raises(ValueError, match="n_features must be an integer >= 1"):
        bmrm.minimize_bmrm(CountingOracle(X, y), n_features, 1e-3)


def test_minimize_bmrm_refuses_an_oracle_that_is_not_callable():
    with pytest.raises(ValueError, match="oracle must be callable"):
        bmrm.minimize_bmrm(np.zeros(3), D, 1e-3)


@pytest.mark.parametrize(
    "output, message",
    [
        (
            lambda R, a: (R, a[:3]),
            r"must return a subgradient of shape \(4,\) \(n_features\); got shape \(3,\)",
        ),
        (
            lambda R, a: (R, a[None]),
            r"must return a subgradient of shape \(4,\) \(n_features\); got shape \(1, 4\)",
        ),
        (lambda R, a: (np.array([R]), a), "must return the risk R as a real number; got array"),
        (lambda R, a: ("0.5", a), "must return the risk R as a real number; got '0.5'"),
        (lambda R, a: (True, a), "must return the risk R as a real number; got True"),
        (lambda R, a: (R, a, 0), r"must return a pair \(R, a\).*got tuple of length 3"),
        (lambda R, a: R, r"must return a pair \(R, a\).*got float"),
        (lambda R, a: (R, list(a)), "must return the subgradient a as a numeric ndarray"),
        # R at w = 0 is 0.5 mean(y^2) = 0.44796 here: 10 below it
        (
            lambda R, a: (R - 10.0, a),
            r"returned a negative risk \(-9\.55204\); bundle methods need a non-negative "
            r"risk R >= 0",
        ),
        (lambda R, a: (-1e-300, a), r"returned a negative risk \(-1e-300\)"),
        (lambda R, a: (np.nan, a), r"must return a finite risk R >= 0; got nan"),
        (lambda R, a: (np.inf, a), r"must return a finite risk R >= 0; got inf"),
        (lambda R, a: (-np.inf, a), r"must return a finite risk R >= 0; got -inf"),
        (
            lambda R, a: (R, np.r_[a[:3], np.nan]),
            "must return a finite subgradient a; it contains NaN or inf",
        ),
        (
            lambda R, a: (R, np.r_[np.inf, a[1:]]),
            "must return a finite subgradient a; it contains NaN or inf",
        ),
    ],
)
def test_minimize_bmrm_names_the_oracle_for_a_malformed_answer(data, output, message):
    X, y, _, _ = data
    oracle = CountingOracle(X, y, output)
    with pytest.raises(ValueError, match="the oracle CountingOracle " + message):
        bmrm.minimize_bmrm(oracle, D, 1e-3)
    assert oracle.calls == 1


def test_minimize_bmrm_takes_a_risk_of_zero(data):
    """R = 0 with a = 0 is the edge of R >= 0: w = 0 is optimal, certified at once."""
    X, y, _, _ = data
    oracle = CountingOracle(X, y, lambda R, a: (0.0, np.zeros_like(a)))
    res = bmrm.minimize_bmrm(oracle, D, 1e-3)
    assert res.success and res.fun == 0.0 and res.gap == 0.0
    np.testing.assert_array_equal(res.x, np.zeros(D))


def test_minimize_bmrm_with_a_correct_oracle_keeps_its_answer(data):
    """The checked oracle changes nothing: the ridge optimum, and w0 as a list."""
    X, y, _, _ = data
    oracle = CountingOracle(X, y)
    res = bmrm.minimize_bmrm(oracle, D, 0.1, tol=1e-9, w0=[0.0] * D)
    _, J_star = ridge_optimum(X, y, 0.1)
    assert res.success
    assert res.lower_bound <= J_star * (1 + 1e-12)
    assert res.fun - J_star <= res.gap + 1e-12
    assert oracle.calls == res.nfev


# ----------------------------------------------------------------------------- tol


@pytest.mark.parametrize("tol", [1.0, 2.0, 1e300])
def test_tol_of_one_or_more_is_refused(data, tol):
    """The gap never exceeds J (the bound is >= 0): tol >= 1 certified w = 0."""
    X, y, _, _ = data
    message = r"tol must be < 1 \(a gap relative to the objective.*got " + re.escape(repr(tol))
    with pytest.raises(ValueError, match=message):
        bmrm.fit(X, y, tol=tol, callback=never_called)
    with pytest.raises(ValueError, match=message):
        BMRMRegressor(tol=tol).fit(X, y)


def test_tol_just_below_one_is_a_relative_gap(data):
    X, y, _, _ = data
    res = bmrm.fit(X, y, tol=0.999).result_
    assert res.status == 0
    assert res.gap <= 0.999 * res.fun


# ----------------------------------------------------------------------------- booleans


@pytest.mark.parametrize("name", ["nonneg", "fit_intercept", "progress"])
@pytest.mark.parametrize("value", ["False", "0", "no", None, 0, 1, 1.0, np.array([True])])
def test_boolean_options_take_bools_only(data, name, value):
    X, y, _, _ = data
    with pytest.raises(ValueError, match=f"{name} must be True or False; got "):
        bmrm.fit(X, y, **{name: value}, callback=never_called)


@pytest.mark.parametrize("value", ["no", "False", None, -1, 1.0])
def test_verbose_takes_bools_and_scikit_learn_levels(data, value):
    X, y, _, _ = data
    with pytest.raises(ValueError, match="verbose must be True, False or an integer >= 0"):
        bmrm.fit(X, y, verbose=value, callback=never_called)


def test_numpy_bools_and_verbose_levels_are_accepted(data, capsys):
    X, y, _, _ = data
    reference = bmrm.fit(X, y, nonneg=False, fit_intercept=True)
    model = bmrm.fit(X, y, nonneg=np.False_, fit_intercept=np.True_, verbose=0)
    np.testing.assert_array_equal(model.coef_, reference.coef_)
    assert model.intercept_ == reference.intercept_
    assert capsys.readouterr().err == ""
    bmrm.fit(X, y, verbose=1)
    assert "J(best)" in capsys.readouterr().err


def test_nonneg_string_false_no_longer_constrains(data):
    X, y, _, _ = data
    with pytest.raises(ValueError, match="nonneg must be True or False; got 'False'"):
        bmrm.fit(X, y, nonneg="False")
    assert np.any(bmrm.fit(X, y, nonneg=False).coef_ < 0)


@pytest.mark.parametrize("value", ["no", 0, 1, None])
def test_metrics_per_query_takes_bools_only(data, value):
    _, y, qid, levels = data
    with pytest.raises(ValueError, match=f"per_query must be True or False; got {value!r}"):
        ndcg_score(levels, y, qid, per_query=value)


def test_metrics_per_query_numpy_bool(data):
    _, y, qid, levels = data
    np.testing.assert_array_equal(
        ndcg_score(levels, y, qid, per_query=np.True_), ndcg_score(levels, y, qid, per_query=True)
    )


# ----------------------------------------------------------------------------- cvxpy_solver


@pytest.mark.parametrize("solver", ["NOPE", 3, ""])
def test_unknown_cvxpy_solver_is_refused_by_name(data, solver):
    X, y, _, _ = data
    message = r"cvxpy_solver must be None or one of the installed cvxpy solvers \[.*'SCS'.*\]"
    with pytest.raises(ValueError, match=message + f"; got {solver!r}"):
        bmrm.fit(X, y, master="cvxpy", cvxpy_solver=solver, callback=never_called)


def test_installed_cvxpy_solver_in_any_case_is_used(data):
    X, y, _, _ = data
    upper = bmrm.fit(X, y, master="cvxpy", cvxpy_solver="CLARABEL")
    lower = bmrm.fit(X, y, master="cvxpy", cvxpy_solver="clarabel")
    assert upper.result_.success and lower.result_.success
    np.testing.assert_array_equal(upper.coef_, lower.coef_)


# ----------------------------------------------------------------------------- minor


def test_ragged_X_is_named(data):
    with pytest.raises(ValueError, match="X must be a 2-d array of numbers .* rows of one length"):
        bmrm.fit([[1.0, 2.0], [3.0]], [1.0, 2.0])


def test_loss_params_must_be_a_mapping(data):
    X, _, qid, levels = data
    with pytest.raises(
        ValueError, match=r"loss_params must be a dict .*got \[\('cost', 'linear'\)\]"
    ):
        bmrm.fit(X, levels, "ordinal", qid, loss_params=[("cost", "linear")])


def test_callback_must_be_callable_before_the_first_iteration(data):
    X, y, _, _ = data
    with pytest.raises(ValueError, match="callback must be callable or None; got 3"):
        bmrm.fit(X, y, callback=3)


def test_path_checks_loss_params_as_fit_does(data):
    X, _, qid, levels = data
    message = r"loss_params must be a dict of the loss's parameters or None; got \[\('cost', "
    with pytest.raises(ValueError, match=message):
        bmrm.path(X, levels, "ordinal", qid, lams=[0.1], loss_params=[("cost", "linear")])
    with pytest.raises(ValueError, match=message):
        bmrm.fit(X, levels, "ordinal", qid, loss_params=[("cost", "linear")])


class UnpreparedLoss:
    """A loss whose targets must never be prepared: the argument checks come first."""

    pointwise = True

    def validate(self, y, query_ptr):
        raise AssertionError("the targets were prepared before the arguments were checked")

    def loss_grad(self, f, y):
        raise AssertionError("the loss was evaluated")


@pytest.mark.parametrize(
    "method, error, message",
    [
        (
            "levle",
            ValueError,
            r"method must be one of \['auto', 'bmrm', 'inout', 'level', 'ls-bmrm', 'newton', "
            r"'ocas', 'nrbm', 'lbfgs'\] or an object with a step\(state\) method; got 'levle'",
        ),
        (
            PlainBMRM,
            TypeError,
            r"got the class PlainBMRM itself: pass an instance, e\.g\. PlainBMRM\(\)",
        ),
        (3, TypeError, r"or an object with a step\(state\) method; got int"),
    ],
)
def test_method_is_checked_before_the_targets_are_prepared(data, method, error, message):
    X, y, _, _ = data
    with pytest.raises(error, match=message):
        bmrm.fit(X, y, UnpreparedLoss(), method=method)
    with pytest.raises(error, match=message):
        bmrm.path(X, y, UnpreparedLoss(), lams=[0.1], method=method)


@pytest.mark.parametrize(
    "bounds, message",
    [
        (
            (np.inf, None),
            r"bounds lower must not contain \+inf: no weight is >= \+inf, so the box would be "
            r"empty \(None or -inf leaves a side open\)",
        ),
        (
            (None, -np.inf),
            r"bounds upper must not contain -inf: no weight is <= -inf, so the box would be "
            r"empty \(None or \+inf leaves a side open\)",
        ),
        ((np.full(D, np.inf), np.full(D, np.inf)), r"bounds lower must not contain \+inf"),
        (([0.0, 0.0, np.inf, 0.0], None), r"bounds lower must not contain \+inf"),
        ((-1.0, [1.0, -np.inf, 1.0, 1.0]), r"bounds upper must not contain -inf"),
    ],
)
def test_an_empty_box_is_refused_before_any_work(data, bounds, message):
    """The fit used to start and fail with an overflow that blamed X and y."""
    X, y, _, _ = data
    with pytest.raises(ValueError, match=message):
        bmrm.fit(X, np.sign(y), "hinge", bounds=bounds, callback=never_called)
    with pytest.raises(ValueError, match=message):
        bmrm.path(X, np.sign(y), "hinge", lams=[0.1], bounds=bounds, callback=never_called)


def test_infinite_bounds_on_their_open_sides_fit_as_no_bounds(data):
    X, y, _, _ = data
    free = bmrm.fit(X, y, lam=0.1, tol=1e-8).result_
    boxed = bmrm.fit(X, y, lam=0.1, tol=1e-8, bounds=(-np.inf, np.inf)).result_
    assert boxed.success
    assert abs(boxed.fun - free.fun) <= boxed.gap + free.gap


def test_complex_w0_is_refused_by_fit(data):
    X, y, _, _ = data
    message = r"w0 must be an array of real numbers of shape \(4,\) .*got dtype complex128"
    with pytest.raises(ValueError, match=message):
        bmrm.fit(X, y, w0=np.array([1 + 5j, 0, 0, 0]), callback=never_called)
    # a complex dtype with zero imaginary parts is refused too, as for X
    with pytest.raises(ValueError, match=message):
        bmrm.fit(X, y, w0=np.zeros(D, dtype=complex), callback=never_called)


@pytest.mark.parametrize("lams", [["0.1"], [0.1, "0.01"], [0.1, True]])
def test_path_lams_are_checked_as_fit_checks_lam(data, lams):
    X, y, _, _ = data
    bad = next(i for i, v in enumerate(lams) if not isinstance(v, float))
    with pytest.raises(ValueError, match=rf"lams\[{bad}\] must be a finite number"):
        bmrm.path(X, y, lams=lams)


@pytest.mark.parametrize(
    "ptr, message",
    [
        ([0, 2.5, 6], "query_ptr must hold integers; got 2.5"),
        ([0, np.nan, 6], "query_ptr must hold integers; got nan"),
        ([], "query_ptr must be a non-empty 1-d array of integers"),
        (["0", "6"], "query_ptr must be a non-empty 1-d array of integers"),
    ],
)
def test_ideal_dcg_refuses_a_pointer_that_is_not_integral(ptr, message):
    y = np.array([1.0, 2, 0, 1, 2, 0])
    with pytest.raises(ValueError, match=re.escape(message)):
        ideal_dcg(y, ptr)


def test_ideal_dcg_takes_integral_floats():
    y = np.array([1.0, 2, 0, 1, 2, 0])
    np.testing.assert_array_equal(ideal_dcg(y, [0.0, 3.0, 6.0]), ideal_dcg(y, [0, 3, 6]))


# ----------------------------------------------------------------------------- model


@pytest.mark.parametrize("lam", [-1.0, 0.0, np.nan, np.inf, "0.1", None])
def test_save_refuses_a_lam_that_load_refuses(data, tmp_path, lam):
    X, y, _, _ = data
    model = bmrm.fit(X, y)
    path = tmp_path / "m.json"
    path.write_text("PRECIOUS")
    model.lam = lam
    with pytest.raises(
        ValueError, match=f"cannot save a model whose lam is {re.escape(repr(lam))}"
    ):
        model.save(path)
    assert path.read_text() == "PRECIOUS"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_saved_lam_loads_back(data, tmp_path):
    X, y, _, _ = data
    model = bmrm.fit(X, y, lam=0.25)
    model.save(tmp_path / "m.json")
    assert bmrm.load(tmp_path / "m.json").lam == 0.25


@pytest.fixture
def frame(data):
    pd = pytest.importorskip("pandas")
    X, y, _, _ = data
    return pd.DataFrame(X, columns=list("abcd")), y


def test_model_fitted_on_a_frame_refuses_reordered_columns(frame):
    df, y = frame
    model = bmrm.fit(df, y)
    np.testing.assert_array_equal(model.feature_names_in_, ["a", "b", "c", "d"])
    message = (
        r"X has feature names \['d', 'c', 'b', 'a'\], but the model was fitted with "
        r"\['a', 'b', 'c', 'd'\]: the feature names should match those that were passed "
        r"during fit \(they must be in the same order as they were in fit\)"
    )
    with pytest.raises(ValueError, match=message):
        model.predict(df[list("dcba")])


def test_model_fitted_on_a_frame_refuses_renamed_columns(frame):
    df, y = frame
    model = bmrm.path(df, y, lams=[0.1])[0]
    message = (
        r"X has feature names \['A', 'B', 'C', 'D'\], but the model was fitted with "
        r"\['a', 'b', 'c', 'd'\].*unseen at fit time: \['A', 'B', 'C', 'D'\]; seen at fit "
        r"time, yet now missing: \['a', 'b', 'c', 'd'\]"
    )
    with pytest.raises(ValueError, match=message):
        model.decision_function(df.rename(columns=str.upper))


def test_model_fitted_on_a_frame_takes_the_same_frame_and_plain_arrays(frame):
    df, y = frame
    model = bmrm.fit(df, y)
    reference = bmrm.fit(df.to_numpy(), y)
    assert not hasattr(reference, "feature_names_in_")
    np.testing.assert_array_equal(model.predict(df), reference.predict(df.to_numpy()))
    np.testing.assert_array_equal(model.predict(df.to_numpy()), reference.predict(df.to_numpy()))
    # a model fitted without names scores any frame by position, as before
    np.testing.assert_array_equal(
        reference.predict(df[list("dcba")]), reference.predict(df.to_numpy()[:, ::-1])
    )


def test_frame_with_non_string_columns_is_taken_by_position(data):
    pd = pytest.importorskip("pandas")
    X, y, _, _ = data
    model = bmrm.fit(pd.DataFrame(X), y)
    assert not hasattr(model, "feature_names_in_")
    named = pd.DataFrame(X, columns=list("abcd"))
    np.testing.assert_array_equal(model.predict(named), model.predict(named.to_numpy()))


# ----------------------------------------------------------------------------- expected gain


def test_expected_gain_scorer_refuses_labels_beyond_its_levels(data):
    """Labels 0..2 with n_levels=2 trained a model that cannot score level 2."""
    X, _, qid, levels = data
    scorer = ExpectedGainScorer(n_levels=2)
    message = (
        r"y holds the relevance level 2, but the scorer's n_levels=2 covers the levels 0..1; "
        r"give n_levels=3 or None"
    )
    with pytest.raises(ValueError, match=message):
        bmrm.fit(X, levels, "listnet", qid, ranking_function=scorer, callback=never_called)


@pytest.mark.parametrize("top", [512, 2000, 10**15])
def test_expected_gain_scorer_refuses_too_many_levels_before_work(data, top):
    """10**15 sized a 7 PiB array (MemoryError); 2000 overflowed the gains later."""
    X, _, qid, levels = data
    y = np.r_[levels[:-1], top]
    message = (
        rf"y holds the relevance level {top}, but the expected-gain scorer has at most "
        r"n_levels=512 levels \(0..511"
    )
    with pytest.raises(ValueError, match=message):
        bmrm.fit(X, y, "listnet", qid, ranking_function="expected_gain", callback=never_called)
    with pytest.raises(ValueError, match="n_levels must be an integer >= 2 and <= 512 or None"):
        ExpectedGainScorer(n_levels=top + 1)


def test_expected_gain_scorer_takes_its_largest_level(data):
    X, _, qid, levels = data
    y = np.r_[levels[:-1], 511]
    model = bmrm.fit(X, y, "listnet", qid, ranking_function="expected_gain", max_iter=30)
    assert model.scorer_.n_levels == 512
    assert model.coef_.shape == (512, D)
    assert np.all(np.isfinite(model.predict(X)))


# ----------------------------------------------------------------------------- ordinal


@pytest.mark.parametrize("scale", [1e20, 2.0**53])
def test_ordinal_regressor_names_a_label_the_user_gave(data, scale):
    """Labels times 1e20 were cast to int64 first (a RuntimeWarning) and the error cited
    -9.2e18, a label the user never gave."""
    X, _, _, levels = data
    y = levels * scale
    first = float(y[np.abs(y) > 2.0**53][0])
    message = r"y must hold integer ordinal levels within ±2\*\*53 .*got " + re.escape(repr(first))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=message):
            bmrm.OrdinalRegressor().fit(X, y)


def test_ordinal_regressor_refuses_labels_spanning_more_than_2_53(data):
    X, _, _, levels = data
    y = np.where(levels == 0, -(2.0**52), 2.0**52 + 2)
    with pytest.raises(ValueError, match=r"spanning at most 2\*\*53 .*got -4503599627370496.0"):
        bmrm.OrdinalRegressor().fit(X, y)


def test_ordinal_regressor_takes_labels_up_to_2_53(data):
    X, _, _, levels = data
    y = np.where(levels == 0, -(2.0**52), 2.0**52)
    model = bmrm.OrdinalRegressor().fit(X, y)
    np.testing.assert_array_equal(model.classes_, [-(2.0**52), 2.0**52])
    reference = bmrm.OrdinalRegressor().fit(X, (levels > 0).astype(int))
    np.testing.assert_array_equal(model.coef_, reference.coef_)


@pytest.mark.parametrize("method", ["mae", "accuracy"])
def test_ordinal_regressor_scores_refuse_string_labels(data, method):
    """mae parsed the strings as numbers; the metrics refuse string labels."""
    X, _, _, levels = data
    model = bmrm.OrdinalRegressor().fit(X, levels)
    with pytest.raises(ValueError, match="y must hold numeric ordinal levels .*got dtype <U"):
        getattr(model, method)(X, levels.astype(str))
    assert getattr(model, method)(X, list(levels)) == getattr(model, method)(X, levels)


@pytest.mark.parametrize("n_features", ["4", 4.0, 0, True])
def test_load_names_a_bad_n_features(data, tmp_path, n_features):
    """n_features="4" said 'the model has 4 features but the data has 4'."""
    X, y, _, _ = data
    bmrm.fit(X, y).save(tmp_path / "m.json")
    message = rf"n_features must be an integer >= 1 or None; got {re.escape(repr(n_features))}"
    with pytest.raises(ValueError, match=message):
        bmrm.load(tmp_path / "m.json", n_features=n_features)
    assert bmrm.load(tmp_path / "m.json", n_features=np.int64(D)).n_features_in_ == D


@pytest.mark.parametrize(
    ("loss", "keyword", "message"),
    [
        # a misspelt keyword of fit: named as unknown, with the closest valid name
        ("ordinal", "lamda", r"unexpected keyword argument 'lamda' .* did you mean 'lam'\?"),
        ("ndcg", "max_iters", r"unexpected keyword argument 'max_iters' .* 'max_iter'\?"),
        ("preference", "pair_cost", r"'pair_cost' .* did you mean 'pair_costs'\?"),
        # a loss parameter given as a keyword goes to loss_params
        ("ordinal", "cost", r"'cost' is a parameter of the ordinal loss: give it in loss_params"),
        # data of another loss
        ("ordinal", "pairs", r"unexpected keyword argument 'pairs' \(the ordinal loss takes"),
    ],
)
def test_fit_names_an_unknown_keyword_and_the_closest_valid_one(data, loss, keyword, message):
    """``bmrm.fit(X, y, "ordinal", qid, lamda=1e-2)`` said the loss takes no data keywords:
    the keyword is reported as unknown, before any work."""
    X, y, qid, _ = data
    extra = {}
    if loss == "preference":
        pairs, costs = bmrm_losses.pairs_from_labels(y, qid)
        extra = {"pairs": pairs, "pair_costs": costs}
        del extra["pair_costs"]
    with pytest.raises(TypeError, match=message):
        bmrm.fit(X, y, loss, qid, **extra, **{keyword: 1e-2})


def test_a_users_loss_still_receives_its_own_data_keywords(data):
    """A user's loss whose validate takes any keyword gets those that are not a misspelt
    keyword of fit."""
    X, y, qid, _ = data
    seen = {}

    class Squared(type(bmrm_losses.get("squared"))):
        def validate(self, y, query_ptr, **data):
            seen.update(data)
            return super().validate(y, query_ptr)

    bmrm.fit(X, y, Squared(), qid, tag=np.ones(len(y)))
    assert list(seen) == ["tag"]
    with pytest.raises(TypeError, match=r"'lamda' .* did you mean 'lam'\?"):
        bmrm.fit(X, y, Squared(), qid, lamda=1e-2)

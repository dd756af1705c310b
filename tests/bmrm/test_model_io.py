"""Tests of portable model files (bmrm.io.model_files and the model layer's load and save).

References: the fitted model itself (round trips must be bit for bit), the file layout as the
module docstring specifies it (decoded here with json, base64 and hashlib only, and the
checksum recomputed from that specification), and files edited or forged in the tests.
"""

import base64
import hashlib
import json
import os
import pickle
import re
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import bmrm
import losses
from bmrm import LinearModel
from bmrm.io.model_files import FORMAT_VERSION, HISTORY_FIELDS
from bmrm.linear_model import load as load_model
from bmrm.linear_model import save as save_model
from bmrm.scorers import ExpectedGainScorer, LinearScorer
from bmrm.solver.regularizers import Box, ElasticNet
from losses.preference import pairs_from_labels

pytestmark = pytest.mark.filterwarnings("ignore::bmrm.ConvergenceWarning")
DATA = os.path.join(os.path.dirname(__file__), "data")

SUMMARY = (
    "status",
    "success",
    "message",
    "fun",
    "lower_bound",
    "gap",
    "nit",
    "nfev",
    "bundle_size",
    "n_aggregations",
    "oracle_seconds",
    "master_seconds",
    "total_seconds",
)


def ranking_data(seed=0, n_queries=6, per_query=7, d=5):
    rng = np.random.default_rng(seed)
    n = n_queries * per_query
    X = rng.normal(size=(n, d))
    qid = np.repeat(np.arange(n_queries), per_query)
    y = np.clip(np.round(X @ rng.normal(size=d) * 0.7 + 1 + rng.normal(size=n) * 0.5), 0, 3)
    return X, y, qid


def fit_model(loss, seed=0, **options):
    X, y, qid = ranking_data(seed)
    data = {}
    if loss in ("hinge", "logistic"):
        y = (y > 1).astype(float)
    if loss == "preference":
        pairs, costs = pairs_from_labels(y, qid)
        data = {"pairs": pairs, "pair_costs": costs}
    options.setdefault("max_iter", 8)
    return bmrm.fit(X, y, loss, qid, lam=0.05, **options, **data), X


def canonical_sha256(document):
    """The checksum exactly as the module docstring specifies it."""
    body = {key: value for key, value in document.items() if key != "sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_document(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_document(path, document, *, reseal=True):
    if reseal:
        document["sha256"] = canonical_sha256(document)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(document, f)


def decode(spec):
    raw = base64.b64decode(spec["data"])
    return np.frombuffer(raw, dtype=np.dtype(spec["dtype"])).reshape(spec["shape"])


def assert_same_model(loaded, model, X):
    assert isinstance(loaded, LinearModel)
    assert loaded.coef_.shape == model.coef_.shape
    np.testing.assert_array_equal(loaded.coef_.view(np.int64), model.coef_.view(np.int64))
    assert loaded.intercept_ == model.intercept_
    assert loaded.n_features_in_ == model.n_features_in_
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded.lam == model.lam
    assert loaded.regularizer == model.regularizer
    assert type(loaded.loss) is type(model.loss)
    assert loaded.loss.get_params() == model.loss.get_params()
    rebuilt = losses.get(model.loss.name, **model.loss.get_params())
    assert loaded.loss.get_params() == rebuilt.get_params()


# ----------------------------------------------------------------------------- round trips


def fitted_by(name):
    """How bmrm.fit trains a built-in loss: "bmrm" (convex or latent), "lbfgs" (smooth), None."""
    loss = losses.get(name)
    if loss.convex or getattr(loss, "latent", False):
        return "bmrm"
    return "lbfgs" if loss.smooth else None


FITTABLE = [name for name in losses.available() if fitted_by(name)]


def assert_same_result(result, original):
    """Every field of ``original`` read back with its value and type, bit for bit."""
    assert type(result) is type(original)
    for key, value in original.items():
        if key == "hess_inv" and not isinstance(value, np.ndarray):
            assert key not in result  # an operator, not stored
            continue
        got = result[key]
        if isinstance(value, dict):
            assert set(got) == set(value), key
            for column in value:
                np.testing.assert_array_equal(got[column], value[column])
                assert got[column].dtype.kind == value[column].dtype.kind, (key, column)
        elif isinstance(value, np.ndarray):
            np.testing.assert_array_equal(got, value)
            assert got.dtype.kind == value.dtype.kind, key
        else:
            assert got == value or (value != value and got != got), key
            assert type(got) is type(value) or isinstance(value, np.generic), key


@pytest.mark.parametrize("loss", FITTABLE)
def test_round_trip_every_builtin_loss(tmp_path, loss):
    """Every built-in loss bmrm.fit trains: bundle-method results and L-BFGS results."""
    model, X = fit_model(loss)
    path = tmp_path / "model.json"
    model.save(path)
    loaded = load_model(path)
    assert_same_model(loaded, model, X)
    assert loaded.scorer_ is None
    result, original = loaded.result_, model.result_
    assert isinstance(result, bmrm.BMRMResult)
    for key in SUMMARY:
        # NaN for the lower bound of a solver without a certificate (L-BFGS, CCCP)
        same = result[key] == original[key] or (
            isinstance(original[key], float) and np.isnan(original[key]) and np.isnan(result[key])
        )
        assert same, key
        assert type(result[key]) is type(original[key]), key
    assert set(HISTORY_FIELDS) <= set(result.history)
    if fitted_by(loss) == "lbfgs":
        assert result.method == original.method == "lbfgs"
    assert_same_result(result, original)


@pytest.mark.parametrize("loss", ["listnet", "cosine", "listwise_squared"])
@pytest.mark.parametrize(
    "scorer",
    [
        ExpectedGainScorer(),
        ExpectedGainScorer(eps=0.7),
        ExpectedGainScorer(gain="linear", eps=0.6),
    ],
)
def test_round_trip_expected_gain_scorer(tmp_path, loss, scorer):
    """Predictions identical after loading, with the clipping threshold and the gains."""
    model, X = fit_model(loss, ranking_function=scorer, max_iter=30)
    K = model.scorer_.n_levels
    assert model.coef_.shape == (K, X.shape[1])
    path = tmp_path / "model.json"
    model.save(path)
    loaded = load_model(path)
    assert_same_model(loaded, model, X)
    assert type(loaded.scorer_) is ExpectedGainScorer
    assert loaded.scorer_.get_params() == model.scorer_.get_params()
    assert loaded.scorer_.eps == scorer.eps
    assert_same_result(loaded.result_, model.result_)
    assert loaded.result_.method == model.result_.method  # whichever trained it
    # predictions against a reference computed here from the stored values
    W = loaded.coef_
    Z = X @ W.T
    P = np.exp(Z - Z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    gains = 2.0 ** np.arange(K) - 1 if scorer.gain == "exp" else np.arange(K, dtype=float)
    if scorer.eps is not None:
        top = P.max(axis=1) > scorer.eps
        P[top] = np.eye(K)[P[top].argmax(axis=1)]
    np.testing.assert_allclose(loaded.predict(X), P @ gains, rtol=1e-12, atol=1e-12)
    document = read_document(path)
    assert document["scorer"] == {
        "name": "expected_gain",
        "version": 1,
        "params": {"n_levels": K, "gain": scorer.gain, "eps": scorer.eps,
                   "clip_training": scorer.clip_training},
    }  # fmt: skip
    assert decode(document["arrays"]["coef"]).shape == (K, X.shape[1])
    np.testing.assert_array_equal(decode(document["arrays"]["scorer.gains"]), gains)
    assert document["result"]["omitted"] == (["hess_inv"] if "hess_inv" in model.result_ else [])


def test_round_trip_clipped_training_and_weights_of_any_size(tmp_path):
    """Every parameter of the scorer, clip_training included, without a fit."""
    scorer = ExpectedGainScorer(n_levels=5, gain="linear", eps=0.75, clip_training=True)
    W = np.random.default_rng(2).normal(size=(5, 3)) * 4
    model = LinearModel(W, 0.0, losses.get("listnet"), 0.1, "l2", None, scorer)
    model.save(tmp_path / "m.json")
    loaded = load_model(tmp_path / "m.json")
    assert loaded.scorer_.get_params() == scorer.get_params()
    X = np.random.default_rng(3).normal(size=(40, 3))
    assert_same_model(loaded, model, X)
    assert np.isin(loaded.predict(X), np.arange(5.0)).any()  # some scores clipped to G(j)


def test_a_linear_scorer_object_is_the_linear_model(tmp_path):
    model = LinearModel([1.0, -2.0], 0.5, losses.get("squared"), 0.1, "l2", None, LinearScorer())
    assert model.scorer_ is None
    model.save(tmp_path / "m.json")
    document = read_document(tmp_path / "m.json")
    assert document["scorer"] == {"name": "linear", "version": 1, "params": {}}
    assert load_model(tmp_path / "m.json").scorer_ is None


def test_any_method_result_round_trips(tmp_path):
    """A result of another method (as a non-convex bundle method returns) is stored by field:
    its method name, non-finite numbers, arrays, and a history; other objects are omitted."""
    from scipy.optimize import OptimizeResult

    result = OptimizeResult(
        x=np.array([0.25, -1.0]),
        fun=0.5,
        nit=7,
        success=False,
        status=2,
        message="iteration limit",
        method="nrbm",
        gap=float("inf"),
        lower_bound=float("-inf"),
        curvature=float("nan"),
        note=None,
        n_serious=np.int64(4),
        history={"objective": np.array([1.0, 0.5]), "serious": np.array([True, False])},
        callback=print,
    )
    model = LinearModel([0.25, -1.0], 0.0, losses.get("squared"), 0.1, "l2", result)
    path = tmp_path / "m.json"
    model.save(path)
    document = read_document(path)
    assert document["result"]["type"] == "OptimizeResult"
    assert document["result"]["omitted"] == ["callback"]
    assert document["result"]["fields"]["method"] == "nrbm"
    assert document["result"]["fields"]["gap"] == {"float": "inf"}
    assert document["result"]["fields"]["lower_bound"] == {"float": "-inf"}
    loaded = load_model(path).result_
    assert set(loaded) == set(result) - {"callback"}
    assert loaded.method == "nrbm"
    assert loaded.gap == np.inf and loaded.lower_bound == -np.inf and np.isnan(loaded.curvature)
    assert loaded.note is None and loaded.n_serious == 4 and type(loaded.n_serious) is int
    assert loaded.history["serious"].dtype == bool
    np.testing.assert_array_equal(loaded.history["serious"], [True, False])
    np.testing.assert_array_equal(loaded.history["objective"], [1.0, 0.5])
    np.testing.assert_array_equal(loaded.x, result.x)


@pytest.mark.parametrize(
    "loss, params",
    [
        (
            "ordinal",
            {"cost": [[0, 1, 3, 4], [0, 0, 2, 3], [0, 0, 0, 1], [0] * 4], "normalize": "none"},
        ),
        ("ordinal", {"cost": "linear"}),
        ("ndcg", {"k": 3, "gain": "linear", "c": "dcg", "truncate_c": True}),
        ("ndcg", {"k": 4, "c": [1.0, 0.8, 0.5, 0.5, 0.25, 0.1, 0.0]}),
        ("neru", {"alpha": 3.0, "d": 0.5, "k": 4}),
        ("preference", {"normalize": "none"}),
    ],
)
def test_round_trip_keeps_loss_parameters(tmp_path, loss, params):
    model, X = fit_model(loss, loss_params=params, max_iter=4)
    path = tmp_path / "m"
    save_model(model, path)
    loaded = load_model(path)
    assert_same_model(loaded, model, X)
    for key, value in params.items():
        assert loaded.loss.get_params()[key] == value


@pytest.mark.parametrize("regularizer", ["l1", "elastic_net"])
def test_round_trip_regularizer_and_intercept(tmp_path, regularizer):
    model, X = fit_model("squared", regularizer=regularizer, fit_intercept=True, max_iter=5)
    assert model.intercept_ != 0.0
    path = tmp_path / "m.json"
    model.save(path)
    assert_same_model(load_model(path), model, X)


def test_round_trip_box_and_elastic_net_mixing(tmp_path):
    lower = np.array([-0.5, -np.inf, 0.0, -1.0, -1.0])
    model, X = fit_model(
        "squared", regularizer="elastic_net", l1_ratio=0.3, bounds=(lower, 0.4), max_iter=5
    )
    assert model.regularizer == Box(ElasticNet(0.3), lower, 0.4)
    path = tmp_path / "m.json"
    model.save(path)
    assert read_document(path)["regularizer"] == {
        "name": "box",
        "base": {"name": "elastic_net", "l1_ratio": 0.3},
        "lower": [-0.5, None, 0.0, -1.0, -1.0],
        "upper": 0.4,
    }
    assert_same_model(load_model(path), model, X)


def test_elastic_net_without_mixing_loads(tmp_path):
    """Files that stored only the name "elastic_net" load, with the mixing unknown."""
    model = LinearModel([1.0, 2.0], 0.0, losses.get("squared"), 0.1, "l2", None)
    path = tmp_path / "m.json"
    model.save(path)
    document = read_document(path)
    document["regularizer"] = "elastic_net"
    write_document(path, document)
    assert load_model(path).regularizer == ElasticNet(None)


def test_model_without_result(tmp_path):
    model = LinearModel([1.5, -2.0, 0.0], 0.25, losses.get("squared"), 0.1, "l2", None)
    path = tmp_path / "m.json"
    model.save(path)
    loaded = load_model(path)
    assert loaded.result_ is None
    X = np.array([[1.0, 2.0, 3.0], [0.5, 0.0, -1.0]])
    assert_same_model(loaded, model, X)


@settings(max_examples=40, deadline=None)
@given(
    coef=hnp.arrays(
        np.float64, st.integers(1, 30), elements=st.floats(allow_nan=False, allow_infinity=False)
    ),
    intercept=st.floats(allow_nan=False, allow_infinity=False),
    lam=st.floats(min_value=1e-30, max_value=1e12),
)
def test_round_trip_is_bit_exact(coef, intercept, lam):
    model = LinearModel(coef, intercept, losses.get("hinge"), lam, "l1", None)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "m.json")
        model.save(path)
        loaded = load_model(path)
    np.testing.assert_array_equal(loaded.coef_.view(np.int64), coef.view(np.int64))
    assert np.float64(loaded.intercept_).view(np.int64) == np.float64(intercept).view(np.int64)
    assert loaded.lam == lam


def test_file_layout_matches_the_documented_format(tmp_path):
    model, _ = fit_model("ndcg")
    path = tmp_path / "m.json"
    model.save(path)
    document = read_document(path)
    assert document["format"] == "bmrm-linear-model"
    assert document["format_version"] == FORMAT_VERSION == 4
    assert document["feature_names"] is None  # fitted on an array
    assert document["bmrm_version"] == bmrm.__version__
    assert document["created"].endswith("+00:00")
    assert document["n_features"] == model.n_features_in_
    assert document["lam"] == model.lam
    assert document["regularizer"] == "l2"
    assert document["loss"] == {
        "name": "ndcg",
        "params": model.loss.get_params(),
        "array_params": [],
        "user": None,
    }
    assert document["scorer"] == {"name": "linear", "version": 1, "params": {}}
    assert document["result"]["type"] == "BMRMResult"
    assert document["result"]["omitted"] == []
    assert document["result"]["fields"]["nit"] == model.result_.nit
    assert document["result"]["fields"]["message"] == model.result_.message
    assert document["arrays"]["coef"]["dtype"] == "<f8"
    np.testing.assert_array_equal(decode(document["arrays"]["coef"]), model.coef_)
    np.testing.assert_array_equal(decode(document["arrays"]["result.x"]), model.result_.x)
    bundle_size = decode(document["arrays"]["result.history.bundle_size"])
    assert bundle_size.dtype == np.dtype("<i8")
    np.testing.assert_array_equal(bundle_size, model.result_.history["bundle_size"])
    np.testing.assert_array_equal(
        decode(document["arrays"]["result.outer_objective"]), model.result_.outer_objective
    )
    assert document["sha256"] == canonical_sha256(document)


@pytest.mark.parametrize(
    "cost",
    [
        [[0, 1, 3, 4], [1, 0, 1, 2], [2, 1, 0, 1], [5, 2, 1, 0]],
        [[0.0, 0.5, 1.0, 2], [0.5, 0.0, 0.5, 1], [1, 0.5, 0, 0.5], [2, 1, 0.5, 0.25]],
    ],
)
def test_numeric_loss_parameters_are_stored_as_arrays(tmp_path, cost):
    """A cost matrix goes to the arrays (base64) and reads back equal; the same model
    written as a version-3 file (the matrix as JSON numbers) loads to the same loss."""
    model, X = fit_model("ordinal", loss_params={"cost": cost})
    path = tmp_path / "m.json"
    model.save(path)
    document = read_document(path)
    assert document["loss"] == {
        "name": "ordinal",
        "params": {"normalize": "query", "hinge": "linear"},
        "array_params": ["cost"],
        "user": None,
    }
    stored = decode(document["arrays"]["loss.cost"])
    assert stored.dtype == np.dtype("<f8")  # the loss gives its matrix as floats
    np.testing.assert_array_equal(stored, np.array(cost, dtype=float))
    loaded = load_model(path)
    assert_same_model(loaded, model, X)
    assert loaded.loss.get_params()["cost"] == np.array(cost, dtype=float).tolist()
    # version 3: the parameter among the JSON values
    document["format_version"] = 3
    document["loss"] = {"name": "ordinal", "params": {"normalize": "query", "cost": cost}}
    del document["arrays"]["loss.cost"]
    write_document(tmp_path / "v3.json", document)
    assert_same_model(load_model(tmp_path / "v3.json"), model, X)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda doc: doc["loss"].update(array_params=["cost", "cost"]), "'loss.array_params'"),
        (lambda doc: doc["loss"].update(array_params=[]), "'loss.cost' is not named in"),
        (lambda doc: doc["loss"]["params"].update(cost=1), "'cost' is given twice"),
        (lambda doc: doc["arrays"].pop("loss.cost"), "field 'arrays.loss.cost' is missing"),
    ],
)
def test_malformed_array_parameters_are_named(tmp_path, edit, match):
    model, _ = fit_model("ordinal", loss_params={"cost": (1 - np.eye(4)).tolist()})
    model.save(tmp_path / "m.json")
    document = read_document(tmp_path / "m.json")
    edit(document)
    write_document(tmp_path / "m.json", document)
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'm.json'}: malformed") + ".*"):
        load_model(tmp_path / "m.json")
    with pytest.raises(ValueError, match=re.escape(match)):
        load_model(tmp_path / "m.json")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda doc: doc.update(lam=1e308),
            "malformed model file: field 'lam': lam must be within [1e-30, 1e+12] (the range "
            "the master problems solve in float64); got 1e+308",
        ),
        (
            lambda doc: doc.update(lam=1e-31),
            "malformed model file: field 'lam': lam must be within [1e-30, 1e+12] (the range "
            "the master problems solve in float64); got 1e-31",
        ),
        (
            lambda doc: doc["regularizer"].update(lower=[-1.0] * 3),
            "malformed model file: field 'regularizer' has 3 lower bounds for 5 weights "
            "(expected 5, or 6 with an intercept)",
        ),
        (
            lambda doc: doc["regularizer"].update(upper=[0.0] * 5),
            "violates the upper bound 0.0 of field 'regularizer'",
        ),
        (
            lambda doc: doc["regularizer"].update(lower=1.0),
            "violates the lower bound 1.0 of field 'regularizer'",
        ),
    ],
)
def test_values_fit_would_refuse_are_refused_naming_file_and_field(tmp_path, edit, message):
    model, X = fit_model("ordinal", bounds=(-1.0, None), fit_intercept=True)
    path = tmp_path / "m.json"
    model.save(path)
    assert_same_model(load_model(path), model, X)
    document = read_document(path)
    edit(document)
    write_document(path, document)
    with pytest.raises(ValueError) as info:
        load_model(path)
    assert str(info.value).startswith(f"{path}: malformed model file: ")
    assert message in str(info.value)
    if "violates" in message:
        side = "upper" if "upper" in message else "lower"
        bound = document["regularizer"][side]
        w = model.coef_
        j = int(np.flatnonzero(w > 0.0)[0] if side == "upper" else np.flatnonzero(w < 1.0)[0])
        assert str(info.value).startswith(
            f"{path}: malformed model file: coef[{j}] = {float(w[j])!r} violates the {side} bound "
            f"{float(bound if np.ndim(bound) == 0 else bound[j])!r}"
        )


def test_lam_outside_the_fit_range_is_not_saved(tmp_path):
    model = LinearModel(np.ones(2), 0.0, losses.get("hinge"), 1e308, "l2", None)
    with pytest.raises(ValueError, match=r"cannot save a model whose lam is 1e\+308: bmrm.fit"):
        model.save(tmp_path / "m.json")
    assert list(tmp_path.iterdir()) == []


def test_n_features_checked(tmp_path):
    model, X = fit_model("squared")
    path = tmp_path / "m.json"
    model.save(path)
    d = X.shape[1]
    assert load_model(path, n_features=d).n_features_in_ == d
    with pytest.raises(ValueError, match=rf"m\.json: the model has {d} features but the data"):
        load_model(path, n_features=d + 1)
    with pytest.raises(ValueError, match=rf"has {d + 2} features, but the model .* {d}"):
        load_model(path).predict(np.ones((3, d + 2)))


# ----------------------------------------------------------------------------- refusing to save


def test_callable_regularizer_cannot_be_saved(tmp_path):
    model = LinearModel([1.0, 2.0], 0.0, losses.get("squared"), 0.1, lambda w: 0, None)
    path = tmp_path / "m.json"
    with pytest.raises(ValueError, match="callable"):
        model.save(path)
    assert os.listdir(tmp_path) == []


class CustomLoss:
    name = "custom"

    def validate(self, y, query_ptr, **data):
        return y

    def loss_grad(self, f, targets):
        return f, f


class SquaredToLabels:
    """The user's own loss: per query, the sum of (f - y)^2 / 2 (a reference, not a
    built-in)."""

    def validate(self, y, query_ptr, **data):
        return np.asarray(y, dtype=np.float64), np.asarray(query_ptr)

    def loss_grad(self, f, targets):
        y, query_ptr = targets
        r = f - y
        return np.add.reduceat(0.5 * r * r, query_ptr[:-1]), r

    def __repr__(self):
        return "SquaredToLabels()"


def test_model_of_the_users_own_loss_saves_and_predicts(tmp_path):
    X, y, qid = ranking_data()
    model = bmrm.fit(X, y, SquaredToLabels(), qid, lam=0.05, max_iter=20)
    path = tmp_path / "m.json"
    model.save(path)
    document = read_document(path)
    described = f"{__name__}.SquaredToLabels: SquaredToLabels()"
    assert document["loss"] == {"name": None, "params": {}, "array_params": [], "user": described}
    loaded = load_model(path)
    np.testing.assert_array_equal(loaded.coef_.view(np.int64), model.coef_.view(np.int64))
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert repr(loaded.loss) == f"UserLoss({described!r})"
    message = (
        f"this model was fitted with the user's own loss {described}, which a model file does "
        "not hold: it predicts, but refitting needs that loss object (pass it as loss=...)"
    )
    with pytest.raises(ValueError) as info:
        bmrm.fit(X, y, loaded.loss, qid, lam=0.05)
    assert str(info.value) == message
    # saved again, the description stays
    loaded.save(tmp_path / "again.json")
    assert read_document(tmp_path / "again.json")["loss"]["user"] == described
    # a custom object under a built-in's name is the user's too
    CustomLoss.name = "ordinal"
    try:
        LinearModel([1.0, 2.0], 0.0, CustomLoss(), 0.1, "l2", None).save(tmp_path / "c.json")
    finally:
        CustomLoss.name = "custom"
    assert read_document(tmp_path / "c.json")["loss"]["user"].startswith(
        f"{__name__}.CustomLoss: "
    )


@pytest.mark.parametrize(
    "loss, match",
    [(losses.get("ndcg", c=lambda positions: 1.0 / positions), "JSON")],
)
def test_unsavable_loss(tmp_path, loss, match):
    path = tmp_path / "m.json"
    path.write_text("previous content")
    model = LinearModel([1.0, 2.0], 0.0, loss, 0.1, "l2", None)
    with pytest.raises(ValueError, match=match):
        model.save(path)
    assert os.listdir(tmp_path) == ["m.json"]
    assert path.read_text() == "previous content"


def test_failed_replace_leaves_old_file_and_no_temporary(tmp_path, monkeypatch):
    model, _ = fit_model("squared")
    path = tmp_path / "m.json"
    path.write_text("previous content")

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        model.save(path)
    assert os.listdir(tmp_path) == ["m.json"]
    assert path.read_text() == "previous content"


def test_unwritable_target(tmp_path):
    model, _ = fit_model("squared")
    with pytest.raises(FileNotFoundError):
        model.save(tmp_path / "missing-folder" / "m.json")
    with pytest.raises(IsADirectoryError):
        model.save(tmp_path)
    assert os.listdir(tmp_path) == []
    assert not [p for p in tmp_path.parent.iterdir() if p.name.endswith(".tmp")]


def test_saved_file_follows_umask(tmp_path):
    model, _ = fit_model("squared")
    umask = os.umask(0o027)
    try:
        model.save(tmp_path / "m.json")
    finally:
        os.umask(umask)
    assert os.stat(tmp_path / "m.json").st_mode & 0o777 == 0o640


# ----------------------------------------------------------------------------- refusing to load


@pytest.fixture
def saved(tmp_path):
    model, _ = fit_model("ordinal")
    path = tmp_path / "model.json"
    model.save(path)
    return path


def test_truncated_file(saved):
    raw = saved.read_bytes()
    for cut in (len(raw) // 3, len(raw) - 5):
        saved.write_bytes(raw[:cut])
        with pytest.raises(ValueError, match=r"model\.json: truncated or corrupted"):
            load_model(saved)


def test_edited_weight_fails_checksum(saved):
    document = read_document(saved)
    data = document["arrays"]["coef"]["data"]
    document["arrays"]["coef"]["data"] = ("B" if data[0] == "A" else "A") + data[1:]
    write_document(saved, document, reseal=False)
    with pytest.raises(ValueError, match=r"model\.json: checksum mismatch"):
        load_model(saved)


@pytest.mark.parametrize(
    "edit",
    [
        lambda doc: doc.update(lam=doc["lam"] * 2),
        lambda doc: doc.update(intercept=1.0),
        lambda doc: doc["loss"]["params"].update(normalize="none"),
        lambda doc: doc["result"]["fields"].update(gap=0.0),
        lambda doc: doc["scorer"]["params"].update(eps=0.9),
        lambda doc: doc.pop("created"),
    ],
)
def test_edited_metadata_fails_checksum(saved, edit):
    document = read_document(saved)
    edit(document)
    write_document(saved, document, reseal=False)
    with pytest.raises(ValueError, match=r"model\.json: checksum mismatch"):
        load_model(saved)


def test_newer_format_version(saved):
    document = read_document(saved)
    document["format_version"] = FORMAT_VERSION + 1
    write_document(saved, document)
    with pytest.raises(
        ValueError,
        match=r"model\.json: model format version 5 is newer than this bmrm reads "
        r"\(bmrm \S+ reads versions 1, 2, 3, 4\)",
    ):
        load_model(saved)
    document["format_version"] = "1"
    write_document(saved, document)
    with pytest.raises(ValueError, match=r"model\.json: model format version '1' is unknown"):
        load_model(saved)


@pytest.mark.parametrize("version", ["999.0", "0.1.1", "0.2.0rc1", "1"])
def test_newer_package_version(saved, version):
    document = read_document(saved)
    document["bmrm_version"] = version
    write_document(saved, document)
    with pytest.raises(ValueError, match=rf"model\.json: written by bmrm {version}, newer"):
        load_model(saved)


@pytest.mark.parametrize("version", ["0.0.9", "0.1", "0.1.0", "0.1.0.dev3"])
def test_older_or_same_package_version_loads(saved, version):
    document = read_document(saved)
    document["bmrm_version"] = version
    write_document(saved, document)
    assert load_model(saved).loss.name == "ordinal"


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda doc: doc.update(lam=-1.0), "lam > 0"),
        (lambda doc: doc.update(regularizer="l3"), "regularizer one of"),
        (lambda doc: doc.update(n_features=doc["n_features"] + 1), "shape"),
        (lambda doc: doc.pop("arrays"), "field 'arrays' is missing"),
        (lambda doc: doc.update(intercept=10**400), "'intercept' should be a finite number"),
        (lambda doc: doc["arrays"]["result.x"].update(shape=[2**70]), "holds 40 bytes for"),
        (
            lambda doc: doc["result"]["fields"].update(nit="many"),
            r"'result\.fields\.nit' should be an integer",
        ),
        (lambda doc: doc["result"]["fields"].pop("gap"), r"'result\.fields\.gap' should be"),
        (lambda doc: doc["result"]["fields"].update(fun=[1]), r"'result\.fields\.fun' is \[1\]"),
        (lambda doc: doc["result"]["fields"].update(x=1.0), "result field 'x' is given twice"),
        (lambda doc: doc["arrays"].pop("result.x"), "array 'result.x' is missing"),
        (lambda doc: doc["result"].update(type="Pickle"), "result type 'Pickle' is neither"),
        (lambda doc: doc["scorer"].update(version="1"), r"'scorer\.version' should be an int"),
        (lambda doc: doc.pop("scorer"), "field 'scorer' is missing"),
        (lambda doc: doc["arrays"].pop("result.history.gap"), "the history holds"),
        (lambda doc: doc["arrays"]["coef"].update(data="!!"), "not base64"),
        (lambda doc: doc["arrays"]["result.x"].update(dtype="|O"), r"dtype '\|O'"),
        (lambda doc: doc["loss"].update(name="unknown"), "cannot rebuild loss 'unknown'"),
        (lambda doc: doc["loss"]["params"].update(bogus=1), "cannot rebuild loss 'ordinal'"),
        (lambda doc: doc.update(bmrm_version="dev"), "bad bmrm_version"),
        (lambda doc: doc.update(bmrm_version="9" * 5000), "bad bmrm_version '99"),
        (lambda doc: doc.update(format_version=3.0), "model format version 3.0 is unknown"),
        (lambda doc: doc.update(n_features=0), "n_features must be at least 1; got 0"),
        (lambda doc: doc["arrays"]["coef"].update(dtype="|b1"), "'coef' must have dtype '<f8'"),
        (
            lambda doc: doc["arrays"]["result.x"].update(shape=[0, 2**70], data=""),
            r"array 'result\.x' has shape \[0, 1180591620717411303424\]",
        ),
        (
            lambda doc: doc["arrays"]["result.x"].update(shape=[1] * 99 + [5]),
            r"array 'result\.x' has shape \[1, 1, ",
        ),
    ],
)
def test_malformed_fields_behind_a_valid_checksum(saved, edit, match):
    document = read_document(saved)
    edit(document)
    write_document(saved, document)
    with pytest.raises(ValueError, match=r"model\.json: .*" + match):
        load_model(saved)


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        # a number beyond float64 (json reads it as inf) in any field, checksum or not
        (lambda text: text.replace('"lam": ', '"lam": 1e400, "x": ', 1), "the number 1e400"),
        (lambda text: text.replace('"created": ', '"comment": -1e999, "created": ', 1), "-1e999"),
        # an earlier copy of a key, which the last copy would hide from the checksum
        (
            lambda text: text.replace('"lam": ', '"lam": 0.5, "lam": ', 1),
            "the key 'lam' appears twice in one object",
        ),
    ],
)
def test_out_of_range_numbers_and_repeated_keys_are_malformed(saved, edit, reason):
    text = saved.read_text(encoding="utf-8")
    saved.write_text(edit(text), encoding="utf-8")
    with pytest.raises(ValueError) as info:
        load_model(saved)
    message = str(info.value)
    assert message.startswith(f"{saved}: malformed model file: "), message
    assert reason in message, message


def test_save_takes_bytes_paths_and_refuses_a_folder_name(tmp_path):
    model, X = fit_model("ordinal")
    path = tmp_path / "m.json"
    model.save(os.fsencode(path))
    np.testing.assert_array_equal(load_model(os.fsencode(path)).predict(X), model.predict(X))
    target = str(tmp_path / "models") + os.sep  # a folder that does not exist
    with pytest.raises(IsADirectoryError) as info:
        model.save(target)
    assert info.value.filename == target
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


class Marker:
    """Unpickling this object creates a file: proof that a loader unpickled."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_never_unpickles(tmp_path):
    marker = tmp_path / "unpickled"
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(Marker(str(marker))))
    with pytest.raises(ValueError, match=r"model\.pkl: not a bmrm model file"):
        load_model(path)
    assert not marker.exists()


def test_not_model_files(tmp_path):
    cases = {
        "empty": b"",
        "binary": bytes(range(256)),
        "svmlight": b"1 qid:1 1:0.5 2:1\n0 qid:1 1:0.2\n",
        "other.json": json.dumps({"coef": [1, 2]}).encode(),
        "list.json": b"[1, 2, 3]",
        "nan.json": b'{"format": NaN}',
    }
    np.savez(tmp_path / "weights.npz", coef=np.ones(3))
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
    for name in [*cases, "weights.npz"]:
        with pytest.raises(ValueError, match=rf"{name}: not a bmrm model file"):
            load_model(tmp_path / name)
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "absent.json")


# ----------------------------------------------------------------------------- scorers


@pytest.fixture
def saved_expected_gain(tmp_path):
    model, X = fit_model("listnet", ranking_function=ExpectedGainScorer(eps=0.8), max_iter=20)
    path = tmp_path / "model.json"
    model.save(path)
    return path, model, X


@pytest.mark.parametrize(
    "edit, match",
    [
        (
            lambda doc: doc["scorer"].update(name="neural_net"),
            "uses scorer 'neural_net', which this bmrm does not know",
        ),
        (
            lambda doc: doc["scorer"].update(version=2),
            "version 2 of scorer 'expected_gain', but this bmrm has version 1; upgrade",
        ),
        (lambda doc: doc["scorer"].update(version=0), "version 0 of scorer .* malformed"),
        (
            lambda doc: doc["scorer"]["params"].update(eps=2.0),
            "cannot rebuild scorer 'expected_gain' .* eps must be",
        ),
        (
            lambda doc: doc["scorer"]["params"].update(depth=3),
            "cannot rebuild scorer 'expected_gain'",
        ),
        (
            lambda doc: doc["scorer"]["params"].update(n_levels=5),
            r"coef has shape \[\d+, 5\], but scorer 'expected_gain'",
        ),
        (
            lambda doc: doc["scorer"]["params"].update(gain="linear"),
            "the file's scorer gains .* differ",
        ),
        (
            lambda doc: doc.update(scorer={"name": "linear", "version": 1, "params": {}}),
            r"coef has shape \[\d+, 5\], but scorer 'linear'",
        ),
    ],
)
def test_scorer_that_cannot_be_rebuilt_is_refused(saved_expected_gain, edit, match):
    path = saved_expected_gain[0]
    document = read_document(path)
    edit(document)
    write_document(path, document)
    with pytest.raises(ValueError, match=r"model\.json: .*" + match):
        load_model(path)


def test_linear_file_with_gains_is_refused(tmp_path):
    model, _ = fit_model("squared")
    path = tmp_path / "model.json"
    model.save(path)
    document = read_document(path)
    document["arrays"]["scorer.gains"] = document["arrays"]["coef"]
    write_document(path, document)
    with pytest.raises(ValueError, match=r"model\.json: malformed .* scorer 'linear' has no"):
        load_model(path)


class OwnScorer(LinearScorer):
    name = "own"


@pytest.mark.parametrize(
    "scorer, coef, match",
    [
        (OwnScorer(), np.ones(3), "only the built-in scorers"),
        (ExpectedGainScorer(), np.ones((3, 3)), "n_levels is not set"),
        (ExpectedGainScorer(n_levels=4), np.ones((3, 3)), r"takes shape \(4, 3\)"),
        (ExpectedGainScorer(n_levels=3), np.ones(9), r"has shape \(9,\)"),
    ],
)
def test_unsavable_scorer_writes_nothing(tmp_path, scorer, coef, match):
    path = tmp_path / "m.json"
    path.write_text("previous content")
    model = LinearModel(coef, 0.0, losses.get("listnet"), 0.1, "l2", None, scorer)
    with pytest.raises(ValueError, match=match):
        model.save(path)
    assert os.listdir(tmp_path) == ["m.json"]
    assert path.read_text() == "previous content"


def test_result_of_another_kind_writes_nothing(tmp_path):
    model = LinearModel([1.0], 0.0, losses.get("squared"), 0.1, "l2", {"x": np.ones(1)})
    with pytest.raises(ValueError, match="result_ is a dict"):
        model.save(tmp_path / "m.json")
    assert os.listdir(tmp_path) == []


def test_failed_write_of_a_scorer_model_leaves_the_old_file(saved_expected_gain, monkeypatch):
    path, model, _ = saved_expected_gain
    before = path.read_bytes()

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        model.save(path)
    assert os.listdir(path.parent) == [path.name]
    assert path.read_bytes() == before


# ----------------------------------------------------------------------------- version 1 files


def load_fixture(name, version, absent):
    """The fixture file's document, the model read from it and its weights as stored; the
    file is of format ``version`` and lacks the field ``absent`` of later versions."""
    path = os.path.join(DATA, name)
    document = read_document(path)
    assert document["format_version"] == version and absent not in document
    model = load_model(path)
    coef = decode(document["arrays"]["coef"])
    np.testing.assert_array_equal(model.coef_.view(np.int64), coef.view(np.int64))
    return document, model, coef


def test_version_1_file_with_result_loads(tmp_path):
    """A file written by the version-1 writer (bmrm before scorers were stored)."""
    document, model, coef = load_fixture("model_v1_ordinal.json", 1, "scorer")
    assert model.scorer_ is None
    assert model.loss.name == "ordinal" and model.loss.get_params()["cost"] == "linear"
    assert model.lam == document["lam"] == 0.05
    result = model.result_
    assert isinstance(result, bmrm.BMRMResult)
    for key in SUMMARY:
        assert result[key] == document["result"][key], key
        assert type(result[key]) is type(document["result"][key]), key
    np.testing.assert_array_equal(result.x, decode(document["arrays"]["x"]))
    assert set(result.history) == set(HISTORY_FIELDS)
    for field in HISTORY_FIELDS:
        np.testing.assert_array_equal(
            result.history[field], decode(document["arrays"][f"history.{field}"])
        )
    X = np.random.default_rng(1).normal(size=(8, coef.shape[0]))
    np.testing.assert_array_equal(model.predict(X), X @ coef)
    # saved again, it is a file of the current version holding the same model
    model.save(tmp_path / "again.json")
    again = load_model(tmp_path / "again.json")
    assert read_document(tmp_path / "again.json")["format_version"] == FORMAT_VERSION
    assert_same_model(again, model, X)
    assert_same_result(again.result_, result)


def test_version_1_file_without_result_loads():
    path = os.path.join(DATA, "model_v1_no_result.json")
    model = load_model(path)
    np.testing.assert_array_equal(model.coef_, [0.5, -1.25, 2.0])
    assert model.intercept_ == 0.75
    assert model.result_ is None and model.scorer_ is None
    assert model.regularizer == ElasticNet(0.5)
    np.testing.assert_array_equal(model.predict(np.eye(3)), [1.25, -0.5, 2.75])


def test_version_1_checks_still_apply(tmp_path):
    document = read_document(os.path.join(DATA, "model_v1_ordinal.json"))
    document["result"]["nit"] = "many"
    write_document(tmp_path / "model.json", document)
    with pytest.raises(ValueError, match=r"model\.json: .*'result\.nit' should be an integer"):
        load_model(tmp_path / "model.json")


# ----------------------------------------------------------------------------- version 2 files


def test_version_2_file_loads_without_feature_names(tmp_path):
    """A file written by the version-2 writer (bmrm before feature names were stored)."""
    document, model, coef = load_fixture("model_v2_ordinal.json", 2, "feature_names")
    assert not hasattr(model, "feature_names_in_")
    assert model.loss.name == "ordinal" and model.lam == document["lam"] == 0.1
    assert model.result_.nit == document["result"]["fields"]["nit"] == 9
    np.testing.assert_array_equal(model.result_.x, decode(document["arrays"]["result.x"]))
    X = np.random.default_rng(2).normal(size=(6, coef.shape[0]))
    np.testing.assert_array_equal(model.predict(X), X @ coef)
    model.save(tmp_path / "again.json")
    again = read_document(tmp_path / "again.json")
    assert again["format_version"] == FORMAT_VERSION and again["feature_names"] is None
    assert_same_model(load_model(tmp_path / "again.json"), model, X)


# ----------------------------------------------------------------------------- feature names


@pytest.fixture
def frame_model(tmp_path):
    pd = pytest.importorskip("pandas")
    X, y, qid = ranking_data(4)
    names = ["bm25", "pagerank", "title length", "ünïcode", "x"]
    df = pd.DataFrame(X, columns=names)
    model = bmrm.fit(df, y, "ordinal", qid, lam=0.05)
    path = tmp_path / "named.json"
    model.save(path)
    return path, model, df


def test_feature_names_round_trip(frame_model):
    path, model, df = frame_model
    document = read_document(path)
    assert document["feature_names"] == list(df.columns)
    loaded = load_model(path)
    assert loaded.feature_names_in_.dtype == object
    np.testing.assert_array_equal(loaded.feature_names_in_, model.feature_names_in_)
    assert_same_model(loaded, model, df.to_numpy())
    np.testing.assert_array_equal(loaded.predict(df), model.predict(df))
    np.testing.assert_array_equal(loaded.predict(df.to_numpy()), model.predict(df))


@pytest.mark.parametrize(
    "columns", [["x", "ünïcode", "title length", "pagerank", "bm25"], ["a", "b", "c", "d", "e"]]
)
def test_loaded_model_refuses_the_frames_the_fitted_model_refuses(frame_model, columns):
    path, model, df = frame_model
    loaded = load_model(path)
    other = df.set_axis(columns, axis=1) if columns[0] == "a" else df[columns]
    with pytest.raises(ValueError, match="X has feature names") as fitted_error:
        model.predict(other)
    with pytest.raises(ValueError, match="X has feature names") as loaded_error:
        loaded.predict(other)
    assert str(loaded_error.value) == str(fitted_error.value)


def test_estimator_saves_its_feature_names(tmp_path):
    pd = pytest.importorskip("pandas")
    X, y, qid = ranking_data(5)
    df = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    ranker = bmrm.BMRMRanker(loss="ordinal", lam=0.05).fit(df, y, qid=qid)
    ranker.save(tmp_path / "ranker.json")
    assert read_document(tmp_path / "ranker.json")["feature_names"] == list(df.columns)
    loaded = load_model(tmp_path / "ranker.json")
    np.testing.assert_array_equal(loaded.predict(df), ranker.predict(df))
    with pytest.raises(ValueError, match="X has feature names"):
        loaded.predict(df[df.columns[::-1]])
    # fitted on an array: no names
    ranker.fit(X, y, qid=qid).save(tmp_path / "plain.json")
    assert read_document(tmp_path / "plain.json")["feature_names"] is None
    assert not hasattr(load_model(tmp_path / "plain.json"), "feature_names_in_")


@pytest.mark.parametrize(
    "names, shown",
    [
        ("bm25", "'bm25'"),
        (["a", "b"], "['a', 'b']"),
        (["a", "b", "c", "d", 5], "['a', 'b', 'c', 'd', 5]"),
        ({"a": 1}, "{'a': 1}"),
        (["n" * 300] * 6, "['nnn"),  # six names, shown cut
    ],
)
def test_malformed_feature_names_behind_a_valid_checksum(frame_model, names, shown):
    path, _, _ = frame_model
    document = read_document(path)
    document["feature_names"] = names
    write_document(path, document)
    message = (
        r"named\.json: malformed model file: field 'feature_names' should be null or 5 "
        r"strings, one per feature; got " + re.escape(shown)
    )
    with pytest.raises(ValueError, match=message) as error:
        load_model(path)
    assert len(str(error.value)) < 400


def test_version_3_file_without_feature_names_is_refused(frame_model):
    path, _, _ = frame_model
    document = read_document(path)
    del document["feature_names"]
    write_document(path, document)
    with pytest.raises(ValueError, match=r"field 'feature_names' is missing"):
        load_model(path)


@pytest.mark.parametrize("names", [["a", "b"], ["a", "b", "c", "d", 5]])
def test_unsavable_feature_names_write_nothing(frame_model, names):
    path, model, _ = frame_model
    before = path.read_bytes()
    model.feature_names_in_ = np.asarray(names, dtype=object)
    with pytest.raises(ValueError, match=r"cannot save a model whose feature names are not 5"):
        model.save(path)
    assert path.read_bytes() == before
    assert os.listdir(path.parent) == [path.name]

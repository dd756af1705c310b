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
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import bmrm
import losses
from bmrm import LinearModel
from bmrm.io import load_model, save_model
from bmrm.io.model_files import FORMAT_VERSION
from bmrm.solver.loop import HISTORY_FIELDS
from bmrm.solver.regularizers import Box, ElasticNet
from losses.preference import pairs_from_labels

pytestmark = pytest.mark.filterwarnings("ignore::bmrm.ConvergenceWarning")

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


CONVEX = [name for name in losses.available() if losses.get(name).convex]


@pytest.mark.parametrize("loss", CONVEX)
def test_round_trip_every_builtin_loss(tmp_path, loss):
    """Every convex built-in loss; see below for the non-convex ones (fitted by L-BFGS)."""
    model, X = fit_model(loss)
    path = tmp_path / "model.json"
    model.save(path)
    loaded = load_model(path)
    assert_same_model(loaded, model, X)
    result, original = loaded.result_, model.result_
    assert isinstance(result, bmrm.BMRMResult)
    for key in SUMMARY:
        assert result[key] == original[key], key
        assert type(result[key]) is type(original[key]), key
    np.testing.assert_array_equal(result.x, original.x)
    assert set(result.history) == set(HISTORY_FIELDS)
    for field in HISTORY_FIELDS:
        np.testing.assert_array_equal(result.history[field], original.history[field])
        assert result.history[field].dtype.kind == original.history[field].dtype.kind


def test_a_model_fitted_by_lbfgs_is_refused_before_writing(tmp_path):
    model, _ = fit_model("cosine")
    path = tmp_path / "model.json"
    with pytest.raises(ValueError, match="fitted by L-BFGS"):
        model.save(path)
    assert not path.exists()


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
    lam=st.floats(min_value=1e-300, max_value=1e300),
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
    assert document["format_version"] == FORMAT_VERSION == 1
    assert document["bmrm_version"] == bmrm.__version__
    assert document["created"].endswith("+00:00")
    assert document["n_features"] == model.n_features_in_
    assert document["lam"] == model.lam
    assert document["regularizer"] == "l2"
    assert document["loss"] == {"name": "ndcg", "params": model.loss.get_params()}
    assert document["result"]["nit"] == model.result_.nit
    assert document["result"]["message"] == model.result_.message
    assert document["arrays"]["coef"]["dtype"] == "<f8"
    np.testing.assert_array_equal(decode(document["arrays"]["coef"]), model.coef_)
    np.testing.assert_array_equal(decode(document["arrays"]["x"]), model.result_.x)
    np.testing.assert_array_equal(
        decode(document["arrays"]["history.bundle_size"]), model.result_.history["bundle_size"]
    )
    assert document["sha256"] == canonical_sha256(document)


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


@pytest.mark.parametrize(
    "loss, match",
    [
        (CustomLoss(), "built-in losses"),
        (losses.get("ndcg", c=lambda positions: 1.0 / positions), "JSON"),
    ],
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
        lambda doc: doc["result"].update(gap=0.0),
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
    with pytest.raises(ValueError, match=r"model\.json: model format version 2 is newer"):
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
        (lambda doc: doc["arrays"]["x"].update(shape=[2**70]), "holds 40 bytes for shape"),
        (lambda doc: doc["result"].update(nit="many"), r"'result\.nit' should be an integer"),
        (lambda doc: doc["arrays"]["coef"].update(data="!!"), "not base64"),
        (lambda doc: doc["arrays"]["coef"].update(dtype="|O"), r"dtype '\|O'"),
        (lambda doc: doc["loss"].update(name="unknown"), "cannot rebuild loss 'unknown'"),
        (lambda doc: doc["loss"]["params"].update(bogus=1), "cannot rebuild loss 'ordinal'"),
        (lambda doc: doc.update(bmrm_version="dev"), "bad bmrm_version"),
    ],
)
def test_malformed_fields_behind_a_valid_checksum(saved, edit, match):
    document = read_document(saved)
    edit(document)
    write_document(saved, document)
    with pytest.raises(ValueError, match=r"model\.json: .*" + match):
        load_model(saved)


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

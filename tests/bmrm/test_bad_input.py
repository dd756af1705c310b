"""Bad input found by using the package as a new user would.

Each case must end in an exception of a stated type whose message names the argument (or
the loss class, the option, the file) and what was expected, raised before the solver runs,
with no file written or replaced; or it must work correctly, checked against a reference.
"""

import errno
import json
import os
import re
import stat
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest
import sklearn
from sklearn.model_selection import GridSearchCV, GroupKFold

import bmrm
import losses
from bmrm import BMRMClassifier, BMRMRanker, BMRMRegressor, cli
from bmrm._validation import check_intercept_scaling
from bmrm.io import dump_svmlight
from losses.metrics import ndcg_score

N_QUERIES, PER_QUERY, D = 4, 5, 4


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    n = N_QUERIES * PER_QUERY
    X = rng.standard_normal((n, D))
    y = rng.standard_normal(n)
    qid = np.repeat(np.arange(N_QUERIES), PER_QUERY)
    levels = rng.integers(0, 3, n)
    return X, y, qid, levels


def never_called(*args):
    raise AssertionError("the solver ran an iteration on bad input")


# ----------------------------------------------------------------------------- user losses


class UserLoss:
    """A per-query loss whose ``loss_grad`` returns what ``output`` makes of a correct pair."""

    def __init__(self, output, pointwise=False):
        self.output = output
        self.pointwise = pointwise

    def validate(self, y, query_ptr, **data):
        return np.asarray(y, dtype=np.float64), np.asarray(query_ptr)

    def loss_grad(self, f, targets):
        y, query_ptr = targets
        n_terms = len(f) if self.pointwise else len(query_ptr) - 1
        values = np.ones(n_terms)
        grad = f - y
        return self.output(values, grad)


BAD_OUTPUTS = {
    "values a float": (lambda v, g: (1.0, g), r"values as float; expected a float ndarray"),
    "values a list": (lambda v, g: (list(v), g), r"values as list; expected .* shape \(4,\)"),
    "grad a list": (lambda v, g: (v, list(g)), r"grad as list; expected .* shape \(20,\)"),
    "a 3-tuple": (lambda v, g: (v, g, None), r"must return a pair \(values, grad\); got a 3"),
    "a list pair": (lambda v, g: [v, g], r"must return a pair \(values, grad\); got list"),
    "per-row values": (
        lambda v, g: (np.ones(len(g)), g),
        r"values of shape \(20,\); expected shape \(4,\) \(one entry per query\); a loss "
        r"with one value per row must set pointwise = True",
    ),
    "integer values": (lambda v, g: (v.astype(np.int64), g), r"values of dtype int64"),
    "complex grad": (lambda v, g: (v, g.astype(complex)), r"grad of dtype complex128"),
    "2-d grad": (lambda v, g: (v, g[:, None]), r"grad of shape \(20, 1\); expected shape \(20,\)"),
    "short grad": (lambda v, g: (v, g[:-1]), r"grad of shape \(19,\); expected shape \(20,\)"),
}


@pytest.mark.parametrize("case", list(BAD_OUTPUTS))
def test_user_loss_with_bad_output_is_named_in_fit_and_risk(data, case):
    X, y, qid, _ = data
    output, message = BAD_OUTPUTS[case]
    loss = UserLoss(output)
    with pytest.raises(TypeError, match=r"UserLoss\.loss_grad (returned )?" + message):
        bmrm.fit(X, y, loss, qid, callback=never_called)
    with pytest.raises(TypeError, match=r"UserLoss\.loss_grad "):
        losses.risk(loss, X[:, 0], y, qid)


def test_pointwise_user_loss_must_return_one_value_per_row(data):
    X, y, qid, _ = data
    loss = UserLoss(lambda v, g: (v[:N_QUERIES], g), pointwise=True)
    with pytest.raises(TypeError, match=r"values of shape \(4,\); expected shape \(20,\)"):
        bmrm.fit(X, y, loss, qid, callback=never_called)


def test_user_loss_with_float32_output_is_accepted_as_float64(data):
    X, y, qid, _ = data
    loss = UserLoss(lambda v, g: (v.astype(np.float32), g.astype(np.float32)))
    value, grad = losses.risk(loss, X[:, 0], y, qid)
    assert value == 1.0
    np.testing.assert_allclose(grad, (X[:, 0] - y) / N_QUERIES, rtol=1e-6)
    assert grad.dtype == np.float64


def test_user_loss_returning_inf_names_the_loss_and_the_targets(data):
    X, y, qid, _ = data
    loss = UserLoss(lambda v, g: (np.full_like(v, np.inf), g))
    with pytest.raises(FloatingPointError, match=r"the UserLoss loss returned a non-finite .*y"):
        bmrm.fit(X, y, loss, qid, callback=never_called)
    # losses.risk goes through the same check as the oracle
    with pytest.raises(FloatingPointError, match=r"the UserLoss loss returned a non-finite .*y"):
        losses.risk(loss, X[:, 0], y, qid)


@pytest.mark.parametrize(
    "f, message",
    [
        (np.array([1 + 1j, 2, 3]), r"f must hold real numbers .*complex128"),
        (np.array(["1", "2", "3"]), r"f must hold real numbers .*<U1"),
        ([[1.0, 2.0], [3.0]], r"f must be a 1-d array of real numbers"),
    ],
)
def test_risk_scores_must_be_real(f, message):
    with pytest.raises(ValueError, match=message):
        losses.risk("squared", f, [1.0, 2.0, 3.0])


def test_complex_targets_are_not_real(data):
    X, y, _, _ = data
    with pytest.raises(ValueError, match=r"y must hold real numbers .*complex128"):
        bmrm.fit(X, y + 1j, "squared", callback=never_called)


# ----------------------------------------------------------------------------- fit arguments


@pytest.mark.parametrize("scaling", [0, 0.0, -1.0, np.nan, np.inf, 1e200, 1e300, True, "1"])
def test_bad_intercept_scaling(data, scaling):
    X, y, _, _ = data
    with pytest.raises(ValueError, match=r"intercept_scaling must be"):
        bmrm.fit(X, y, fit_intercept=True, intercept_scaling=scaling, callback=never_called)


def test_intercept_scaling_range_limits():
    assert check_intercept_scaling(1e150) == 1e150
    assert check_intercept_scaling(1e-300) == 1e-300
    with pytest.raises(ValueError, match=r"intercept_scaling must be at most 1e\+150"):
        check_intercept_scaling(1.0000001e150)


@pytest.mark.parametrize("estimator", [BMRMRegressor, BMRMClassifier])
@pytest.mark.parametrize("scaling", [0.0, np.nan, np.inf, 1e200])
def test_estimators_reject_bad_intercept_scaling(data, estimator, scaling):
    X, y, _, _ = data
    with pytest.raises(ValueError, match="intercept_scaling"):
        estimator(intercept_scaling=scaling).fit(X, (y > 0).astype(int))


def test_intercept_scaling_is_ignored_without_intercept(data):
    X, y, _, _ = data
    reference = bmrm.fit(X, y, tol=1e-8)
    model = bmrm.fit(X, y, intercept_scaling=0.0, tol=1e-8)
    np.testing.assert_array_equal(model.coef_, reference.coef_)
    assert model.intercept_ == 0.0


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_w0_not_finite_is_not_reported_as_a_shape(data, bad):
    X, y, _, _ = data
    w0 = np.zeros(D)
    w0[2] = bad
    with pytest.raises(ValueError, match=r"w0 must be finite; it contains NaN or inf") as info:
        bmrm.fit(X, y, w0=w0, callback=never_called)
    assert "w0[2]" in str(info.value)
    assert "shape" not in str(info.value)


def test_w0_shape(data):
    X, y, _, _ = data
    with pytest.raises(ValueError, match=r"w0 must have shape \(4,\) .*got shape \(3,\)"):
        bmrm.fit(X, y, w0=np.zeros(3), callback=never_called)
    with pytest.raises(ValueError, match=r"w0 must have shape \(5,\) \(.*intercept.*\(4,\)"):
        bmrm.fit(X, y, fit_intercept=True, w0=np.zeros(4), callback=never_called)
    with pytest.raises(ValueError, match=r"w0 must be an array of real numbers"):
        bmrm.fit(X, y, w0=["a", "b", "c", "d"], callback=never_called)


# ----------------------------------------------------------------------------- overflow


@pytest.mark.parametrize("scale", [1e160, 1e200, 1e300])
def test_squared_loss_targets_too_large(data, scale):
    X, y, _, _ = data
    with pytest.raises(ValueError, match=r"y is too large for the squared loss.*scale y"):
        bmrm.fit(X, y * scale, "squared", callback=never_called)
    with pytest.raises(ValueError, match=r"y is too large for the squared loss"):
        losses.risk("squared", X[:, 0], y * scale)


def test_squared_loss_large_but_representable_targets_still_fit(data):
    """|y| ~ 1e100 trains: the ridge solution scales with y.

    Reference: the normal equations (XᵀX/n + lam I) w = Xᵀy/n; J is lam-strongly convex, so
    ‖w − w*‖ <= sqrt(2 gap / lam) for the certified gap.
    """
    X, y, _, _ = data
    lam, n = 1e-3, X.shape[0]
    exact = np.linalg.solve(X.T @ X / n + lam * np.eye(D), X.T @ y / n)
    for scale in (1.0, 1e100):
        model = bmrm.fit(X, y * scale, "squared", lam=lam, tol=1e-9)
        bound = np.sqrt(2 * model.result_.gap / lam) * (1 + 1e-6) + 1e-12 * scale
        assert np.linalg.norm(model.coef_ - exact * scale) <= bound


def test_features_too_large_name_x(data):
    X, y, qid, levels = data
    for loss, target in (("squared", y), ("ordinal", levels)):
        with pytest.raises(FloatingPointError, match=r"subgradient .* X, .*scale them down"):
            bmrm.fit(X * 1e200, target, loss, qid, callback=never_called)


def test_scores_overflow_names_x(data):
    X, y, _, _ = data
    w0 = np.full(D, 1e200)
    with pytest.raises(FloatingPointError, match=r"scores X @ w overflowed .*X or the targets"):
        bmrm.fit(X * 1e200, y, w0=w0, callback=never_called)


@pytest.mark.parametrize("loss", ["ordinal", "ndcg"])
@pytest.mark.parametrize("scale", [1e20, 1e200])
def test_relevance_levels_beyond_int64_are_rejected(data, loss, scale):
    """They used to wrap around in the int64 cast and train on scrambled labels."""
    X, _, qid, levels = data
    with pytest.raises(ValueError, match=r"y must hold relevance levels <= 2\*\*53"):
        bmrm.fit(X, levels * scale, loss, qid, callback=never_called)


def test_relevance_levels_up_to_2_53_train_as_their_order(data):
    """The ordinal loss depends only on the order of the labels: x 2**40 changes nothing."""
    X, _, qid, levels = data
    reference = bmrm.fit(X, levels, "ordinal", qid, tol=1e-9)
    model = bmrm.fit(X, levels * 2.0**40, "ordinal", qid, tol=1e-9)
    np.testing.assert_allclose(model.coef_, reference.coef_, rtol=1e-9, atol=1e-12)


# ----------------------------------------------------------------------------- query ids


@pytest.mark.parametrize(
    "qid",
    [
        np.array([1, "a", 2.0] * 6 + [1, 1], dtype=object),
        np.array([None] * 10 + [1] * 10, dtype=object),
        np.array([b"a"] * 10 + ["a"] * 10, dtype=object),
    ],
)
def test_mixed_kind_qid(data, qid):
    X, y, _, _ = data
    with pytest.raises(ValueError, match=r"qid must hold ids of one kind .*got a mix of"):
        losses.group_queries(qid, len(qid))
    with pytest.raises(ValueError, match=r"qid must hold ids of one kind"):
        bmrm.fit(X, y, "ordinal", qid, callback=never_called)


def test_object_qid_of_one_kind_groups_like_its_plain_array():
    for ids in ([3, 1, 3, 2, 1], ["b", "a", "b", "c", "a"], [3.5, 1, 3.5, 2, 1]):
        plain = losses.group_queries(np.array(ids), 5)
        boxed = losses.group_queries(np.array(ids, dtype=object), 5)
        np.testing.assert_array_equal(boxed.query_ptr, plain.query_ptr)
        np.testing.assert_array_equal(boxed.order, plain.order)
    with pytest.raises(ValueError, match="qid must not contain NaN"):
        losses.group_queries(np.array([1, float("nan"), 2], dtype=object), 3)


# ----------------------------------------------------------------------------- model files


@pytest.fixture
def model(data):
    X, y, _, _ = data
    return bmrm.fit(X, y, max_iter=50)


def saved_bytes(model, tmp_path):
    reference = tmp_path / "reference.json"
    model.save(reference)
    return reference.read_bytes()


def only_created(tmp_path, before):
    return sorted(set(os.listdir(tmp_path)) - set(before))


def test_save_through_a_symlink_writes_its_target(model, tmp_path):
    target = tmp_path / "target.json"
    target.write_text("old\n")
    target.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to("target.json")
    model.save(link)
    assert link.is_symlink()
    assert os.readlink(link) == "target.json"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    loaded = bmrm.load(link)
    np.testing.assert_array_equal(loaded.coef_, model.coef_)
    assert sorted(os.listdir(tmp_path)) == ["link.json", "target.json"]


def test_save_through_a_dangling_symlink_creates_its_target(model, tmp_path):
    link = tmp_path / "link.json"
    link.symlink_to("new.json")
    model.save(link)
    assert link.is_symlink()
    np.testing.assert_array_equal(bmrm.load(tmp_path / "new.json").coef_, model.coef_)


def dev_full():
    if not (os.path.exists("/dev/full") and stat.S_ISCHR(os.stat("/dev/full").st_mode)):
        pytest.skip("/dev/full is not a character device here")
    return "/dev/full"


def test_save_to_a_full_device_is_an_error_and_keeps_the_device(model, tmp_path):
    # through a link in tmp_path, so that a regression replaces the link, not the device
    link = tmp_path / "full"
    link.symlink_to(dev_full())
    with pytest.raises(OSError, match=r"No space left on device: '.*full'") as info:
        model.save(link)
    assert info.value.errno == errno.ENOSPC
    assert info.value.filename == str(link)
    assert link.is_symlink() and stat.S_ISCHR(os.stat(link).st_mode)
    assert os.listdir(tmp_path) == ["full"]


def test_save_to_dev_null_writes_in_place(model, tmp_path):
    link = tmp_path / "null"
    link.symlink_to(os.devnull)
    model.save(link)
    assert link.is_symlink() and stat.S_ISCHR(os.stat(link).st_mode)
    assert os.listdir(tmp_path) == ["null"]


def test_save_to_a_fifo_writes_the_reader(model, tmp_path):
    expected = saved_bytes(model, tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    model.save(fifo)
    reader.join(timeout=60)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    # The document holds its creation time to the second and a checksum that covers it, so
    # two saves a second boundary apart differ in both: compare all but those two, and load
    # what the reader received (loading checks its checksum).
    documents = [json.loads(received[0]), json.loads(expected)]
    for document in documents:
        del document["created"], document["sha256"]
    assert documents[0] == documents[1]
    copy = tmp_path / "received.json"
    copy.write_bytes(received[0])
    np.testing.assert_array_equal(bmrm.load(copy).coef_, model.coef_)


def test_save_errors_name_the_path_given(model, tmp_path):
    before = os.listdir(tmp_path)
    path = tmp_path / "missing" / "model.json"
    with pytest.raises(FileNotFoundError) as info:
        model.save(path)
    assert info.value.filename == str(path)
    assert ".tmp" not in str(info.value)
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(IsADirectoryError) as info:
        model.save(folder)
    assert info.value.filename == str(folder)
    assert only_created(tmp_path, before) == ["folder"]
    assert os.listdir(folder) == []


def test_save_below_a_regular_file_names_the_path(model, tmp_path):
    # fails for every user, root included (a read-only folder would not stop root)
    parent = tmp_path / "not_a_folder"
    parent.write_text("data\n")
    with pytest.raises(NotADirectoryError) as info:
        model.save(parent / "m.json")
    assert info.value.filename == str(parent / "m.json")
    assert parent.read_text() == "data\n"
    assert sorted(os.listdir(tmp_path)) == ["not_a_folder"]


# ----------------------------------------------------------------------------- command line


@pytest.fixture
def files(tmp_path, data):
    X, _, qid, levels = data
    dump_svmlight(tmp_path / "train.svm", X.round(4), levels, qid)
    dump_svmlight(tmp_path / "noqid.svm", X.round(4), levels)
    (tmp_path / "noqid.query").write_text("10\n10\n")
    assert (
        cli.main(["train", str(tmp_path / "train.svm"), str(tmp_path / "m.json"), "--quiet"]) == 0
    )
    return tmp_path


def run_cli(capsys, *args):
    capsys.readouterr()
    code = cli.main([str(a) for a in args])
    return code, capsys.readouterr().err


def test_cli_nan_feature_names_file_and_row(files, capsys):
    lines = (files / "train.svm").read_text().splitlines()
    lines[2] = re.sub(r" 2:\S+", " 2:nan", lines[2])
    (files / "bad.svm").write_text("\n".join(lines) + "\n")
    before = os.listdir(files)
    for argv in (
        ["train", files / "bad.svm", files / "out.json", "--quiet"],
        ["predict", files / "bad.svm", files / "m.json", files / "out.txt"],
        ["evaluate", files / "bad.svm", files / "m.json"],
    ):
        code, err = run_cli(capsys, *argv)
        assert code == 2
        assert str(files / "bad.svm") in err
        assert re.search(r"\b(line|row) 3\b", err), err
        assert re.search(r"nan|NaN", err), err
    assert only_created(files, before) == []


def test_cli_query_file_conflict_in_option_wording(files, capsys):
    before = os.listdir(files)
    for command in (
        ["train", files / "train.svm", files / "out.json"],
        ["evaluate", files / "train.svm", files / "m.json"],
    ):
        code, err = run_cli(capsys, *command, "--query-file", files / "noqid.query")
        assert code == 2
        assert "--query-file" in err and "would conflict" in err
        assert "query_file=" not in err
    code, err = run_cli(
        capsys, "train", files / "noqid.svm", files / "out.json", "--query-file", files / "x.query"
    )
    assert code == 2 and "x.query" in err
    (files / "short.query").write_text("7\n")
    code, err = run_cli(
        capsys,
        "train",
        files / "noqid.svm",
        files / "out.json",
        "--query-file",
        files / "short.query",
    )
    assert code == 2 and re.search(r"--query-file \S*short.query: .* sum to 7 rows", err)
    assert only_created(files, before) == ["short.query"]


def test_cli_query_file_groups_a_file_without_qid(files, capsys):
    out = files / "q.json"
    code, _ = run_cli(
        capsys,
        "train",
        files / "noqid.svm",
        out,
        "--query-file",
        files / "noqid.query",
        "--quiet",
    )
    assert code == 0
    qid = np.repeat([0, 1], 10)
    X, levels, _ = bmrm.io.load_svmlight(files / "noqid.svm", zero_based=False)
    reference = bmrm.fit(X, levels, "ordinal", qid)
    np.testing.assert_array_equal(bmrm.load(out).coef_, reference.coef_)


def test_cli_predictions_through_a_symlink(files, capsys):
    target = files / "scores.txt"
    target.write_text("old\n")
    link = files / "link.txt"
    link.symlink_to("scores.txt")
    code, _ = run_cli(capsys, "predict", files / "train.svm", files / "m.json", link)
    assert code == 0 and link.is_symlink()
    X, _, _ = bmrm.io.load_svmlight(files / "train.svm", zero_based=False)
    expected = bmrm.load(files / "m.json").predict(X)
    np.testing.assert_array_equal(np.loadtxt(target), expected)


def test_cli_predictions_to_a_full_device_fail(files, capsys):
    link = files / "full"
    link.symlink_to(dev_full())
    code, err = run_cli(capsys, "predict", files / "train.svm", files / "m.json", link)
    assert code == 2
    assert f"No space left on device: {link}" in err
    assert link.is_symlink() and stat.S_ISCHR(os.stat(link).st_mode)


def test_cli_predictions_to_stdout_pipe(files):
    """``/dev/stdout`` on a pipe is written in place (it used to fail resolving the link)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bmrm",
            "predict",
            files / "train.svm",
            files / "m.json",
            "/dev/stdout",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    X, _, _ = bmrm.io.load_svmlight(files / "train.svm", zero_based=False)
    expected = bmrm.load(files / "m.json").predict(X)
    np.testing.assert_array_equal(np.array(proc.stdout.split(), dtype=float), expected)


# ----------------------------------------------------------------------------- ranker score


@pytest.fixture
def ranking():
    rng = np.random.default_rng(3)
    qid = np.repeat(np.arange(12), 8)
    X = rng.standard_normal((qid.size, 5))
    y = np.clip(np.round(X[:, 0] + 0.5 * rng.standard_normal(qid.size) + 1), 0, 3)
    return X, y.astype(int), qid


def test_ranker_score_without_qid_after_fit_with_qid_warns(ranking):
    X, y, qid = ranking
    ranker = BMRMRanker(loss="ordinal").fit(X, y, qid)
    with pytest.warns(UserWarning, match=r"all 96 rows are scored as one query.*set_score"):
        value = ranker.score(X, y)
    assert value == ndcg_score(y, ranker.predict(X), None, k=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ranker.score(X, y, qid) == ndcg_score(y, ranker.predict(X), qid, k=10)
        unqueried = BMRMRanker(loss="ordinal").fit(X, y)
        unqueried.score(X, y)


def test_grid_search_without_routing_warns_and_with_routing_scores_by_query(ranking):
    X, y, qid = ranking
    grid = {"lam": [1e-3, 1e-1]}
    cv = GroupKFold(3)
    with pytest.warns(UserWarning, match=r"enable_metadata_routing=True"):
        GridSearchCV(BMRMRanker(loss="ordinal"), grid, cv=cv).fit(X, y, qid=qid, groups=qid)
    with sklearn.config_context(enable_metadata_routing=True):
        ranker = BMRMRanker(loss="ordinal").set_fit_request(qid=True).set_score_request(qid=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            search = GridSearchCV(ranker, grid, cv=cv).fit(X, y, qid=qid, groups=qid)
    # reference: the same splits, fitted and scored query by query by hand
    for i, lam in enumerate(grid["lam"]):
        scores = []
        for train, test in cv.split(X, y, qid):
            fitted = BMRMRanker(loss="ordinal", lam=lam).fit(X[train], y[train], qid[train])
            scores.append(ndcg_score(y[test], fitted.predict(X[test]), qid[test], k=10))
        assert search.cv_results_["mean_test_score"][i] == pytest.approx(np.mean(scores))


def test_cli_refuses_to_overwrite_an_input(files, capsys):
    model_bytes = (files / "m.json").read_bytes()
    train_bytes = (files / "train.svm").read_bytes()
    (files / "link.svm").symlink_to("train.svm")
    for argv, message in (
        (["predict", files / "train.svm", files / "m.json", files / "m.json"], "MODEL"),
        (["predict", files / "train.svm", files / "m.json", files / "train.svm"], "TEST"),
        (["train", files / "train.svm", files / "link.svm", "--quiet"], "TRAIN"),
        (
            ["train", files / "noqid.svm", files / "noqid.query", "--query-file"]
            + [files / "noqid.query", "--quiet"],
            "--query-file",
        ),
    ):
        code, err = run_cli(capsys, *argv)
        assert code == 2
        assert re.search(rf"is the {message} file .*would destroy an input", err), err
    assert (files / "m.json").read_bytes() == model_bytes
    assert (files / "train.svm").read_bytes() == train_bytes
    assert (files / "noqid.query").read_text() == "10\n10\n"


@pytest.mark.parametrize(
    "options, message",
    [
        (["--max-iter", "0"], "--max-iter must be an integer >= 1; got 0"),
        (["--lam", "-1"], "--lam must be > 0"),
        (["--lam", "nan"], "--lam must be a finite number"),
        (["-c", "0"], "-c must be > 0"),
        (["-c", "1e-320"], "-c must lie in [1e-12, 1e+30] (lam = 1/C within [1e-30, 1e+12])"),
        (["--tol", "inf"], "--tol must be a finite number"),
        (["--loss", "ndcg", "--k", "0"], "--k must be an integer >= 1; got 0"),
    ],
)
def test_cli_option_errors_name_the_option(files, capsys, options, message):
    code, err = run_cli(capsys, "train", files / "train.svm", files / "out.json", *options)
    assert code == 2 and message in err
    assert not (files / "out.json").exists()


def test_cli_empty_output_name(files, capsys):
    code, err = run_cli(capsys, "train", files / "train.svm", "", "--quiet")
    assert code == 2 and "MODEL must be a file name; got ''" in err
    code, err = run_cli(capsys, "predict", files / "train.svm", files / "m.json", "")
    assert code == 2 and "PREDICTIONS must be a file name; got ''" in err


def test_cli_label_errors_name_the_file(files, capsys):
    lines = (files / "train.svm").read_text().splitlines()
    lines[0] = "-1" + lines[0][lines[0].index(" ") :]
    (files / "neg.svm").write_text("\n".join(lines) + "\n")
    code, err = run_cli(capsys, "train", files / "neg.svm", files / "out.json", "--quiet")
    assert code == 2
    assert (
        f"{files / 'neg.svm'}: y must hold non-negative integer relevance levels; got -1.0" in err
    )
    assert not (files / "out.json").exists()
    lines[0] = "2000" + lines[0][lines[0].index(" ") :]
    (files / "big.svm").write_text("\n".join(lines) + "\n")
    code, err = run_cli(capsys, "evaluate", files / "big.svm", files / "m.json")
    assert code == 2 and f"{files / 'big.svm'}: y_true is too large" in err

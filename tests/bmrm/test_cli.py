"""End-to-end tests of the installed ``bmrm`` command.

References: ``bmrm.fit`` run in the test with the options the command was given, the model's
own ``predict``, and the ``losses.metrics`` functions called in the test on the same labels,
query ids and scores. The main flows and the promised bad-input behaviour run the installed
command as a subprocess, as a user would; the other cases call ``bmrm.cli.main`` in this
process (the same code, without an interpreter start-up each).
"""

import gzip
import os
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest

import bmrm
from bmrm import cli
from bmrm.io import dump_query_file, dump_svmlight, groups_from_qid, load_svmlight
from bmrm.model import load as load_model
from bmrm.scorers import ExpectedGainScorer
from losses import metrics
from losses.preference import pairs_from_labels

BMRM = shutil.which("bmrm")
D = 5


def run(*args, cwd, command=None):
    """Run the installed command in a fresh process."""
    if command is None:
        assert BMRM is not None, "the bmrm command is not on PATH: run 'pip install -e .'"
        command = [BMRM]
    return subprocess.run(
        [*command, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=600
    )


@pytest.fixture
def run_here(monkeypatch, capsys):
    """Like :func:`run` but through ``bmrm.cli.main`` in this process (no interpreter start)."""

    def call(*args, cwd):
        monkeypatch.chdir(cwd)
        capsys.readouterr()
        try:
            code = cli.main([str(arg) for arg in args])
        except SystemExit as exc:  # --help
            code = exc.code
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    return call


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """train.svm (12 queries) and test.svm (6 queries, last feature never set)."""
    path = tmp_path_factory.mktemp("cli")
    rng = np.random.default_rng(7)
    w = rng.normal(size=D)
    for name, n_queries in (("train.svm", 12), ("test.svm", 6)):
        sizes = rng.integers(1, 10, size=n_queries)
        qid = np.repeat(rng.permutation(100)[:n_queries], sizes)
        X = rng.normal(size=(qid.size, D)).round(4)
        y = np.clip(np.round(X @ w * 0.6 + 1 + rng.normal(size=qid.size) * 0.5), 0, 3)
        if name == "test.svm":
            X[:, -1] = 0.0
        dump_svmlight(path / name, X, y.astype(np.int64), qid)
    return path


def read_data(path):
    return load_svmlight(path, zero_based=False)


def reference_fit(path, loss, **options):
    X, y, qid = read_data(path)
    if loss == "preference":
        pairs, costs = pairs_from_labels(y, qid, cost=options.pop("pair_cost", "zero_one"))
        options.update(pairs=pairs, pair_costs=costs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bmrm.ConvergenceWarning)
        return bmrm.fit(X, y, loss, qid, **options)


def assert_same_fit(model, reference):
    np.testing.assert_array_equal(model.coef_, reference.coef_)
    assert model.intercept_ == reference.intercept_
    assert model.lam == reference.lam
    assert model.regularizer == reference.regularizer
    assert model.loss.get_params() == reference.loss.get_params()
    for key in ("fun", "gap", "nit", "status", "message"):
        assert model.result_[key] == reference.result_[key], key


def one_line_error(proc, command):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"bmrm {command}: error: ")
    return lines[0]


# ----------------------------------------------------------------------------- train


TRAIN_CASES = [
    (
        "subprocess",
        ["--loss", "ndcg", "--k", "4", "--lam", "0.01", "--max-iter", "15"],
        dict(loss="ndcg", lam=0.01, max_iter=15, loss_params={"k": 4}),
    ),
    (
        "in-process",
        ["--loss", "neru", "--k", "3", "--loss-param", "alpha=3", "--loss-param", "c=dcg"]
        + ["--lam", "0.01", "--max-iter", "30"],
        dict(loss="neru", lam=0.01, max_iter=30, loss_params={"k": 3, "alpha": 3, "c": "dcg"}),
    ),
    (
        "subprocess",
        ["--loss", "preference", "--pair-cost", "linear", "--lam", "0.05", "--tol", "1e-4"],
        dict(loss="preference", lam=0.05, tol=1e-4, pair_cost="linear"),
    ),
    (
        "in-process",
        ["--loss", "ordinal", "--loss-param", "cost=linear", "--regularizer", "l1"]
        + ["--lam", "0.02", "--max-iter", "30"],
        dict(
            loss="ordinal", regularizer="l1", lam=0.02, max_iter=30, loss_params={"cost": "linear"}
        ),
    ),
]


@pytest.mark.parametrize("runner, args, options", TRAIN_CASES)
def test_train_equals_fit(folder, tmp_path, run_here, runner, args, options):
    call = run if runner == "subprocess" else run_here
    proc = call("train", folder / "train.svm", tmp_path / "model.json", *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    model = load_model(tmp_path / "model.json")
    reference = reference_fit(folder / "train.svm", **options)
    assert_same_fit(model, reference)
    # Verbose progress: a header and one line per iteration, then the summary line.
    assert "J(best)" in proc.stderr
    r = reference.result_
    summary = proc.stderr.strip().splitlines()[-1]
    assert summary.startswith(f"bmrm train: objective {r.fun:.10g}, gap {r.gap:.3e}, ")
    assert f", {r.nit} iterations of {r.method}, " in summary and " seconds " in summary
    # training seconds apart from compilation (#49 item 11)
    assert " seconds of training" in summary and f" ({r.message}); model written to " in summary
    assert proc.stdout == ""


def test_train_reports_compilation_apart_from_training(folder, tmp_path, run_here):
    """The summary gives the training seconds without numba's compilation and the
    compilation apart, as the result saved in the model file has them."""
    proc = run_here("train", folder / "train.svm", "m.json", "--max-iter", 20, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    r = load_model(tmp_path / "m.json").result_
    training = f"{r.total_seconds - r.compile_seconds:.2f} seconds of training"
    compiling = f" and {r.compile_seconds:.2f} seconds compiling numba kernels (cached for"
    summary = proc.stderr.strip().splitlines()[-1]
    assert f", {r.nit} iterations of {r.method}, {training}" in summary, summary
    assert (compiling in summary) == (r.compile_seconds >= 0.005), summary
    # with compilation forced into the fit, it is reported apart
    r["compile_seconds"], r["total_seconds"] = 44.25, 44.75
    assert cli._summary(r).endswith(
        f"0.50 seconds of training and 44.25 seconds compiling numba kernels (cached for later "
        f"runs) ({r.message})"
    )


def test_c_is_svmrank_c(folder, tmp_path):
    """-c C trains the ordinal loss with lam = 1/C and normalize='none'."""
    C = 4.0
    proc = run(
        "train", folder / "train.svm", "m.json", "-c", C, "--max-iter", 30, "--quiet", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    model = load_model(tmp_path / "m.json")
    reference = reference_fit(
        folder / "train.svm",
        "ordinal",
        lam=1 / C,
        max_iter=30,
        loss_params={"normalize": "none"},
    )
    assert_same_fit(model, reference)
    assert model.lam == 0.25
    assert model.loss.get_params() == {"cost": "zero_one", "normalize": "none", "hinge": "linear"}


def test_quiet_converged_training_prints_nothing(folder, tmp_path):
    proc = run(
        "train", folder / "train.svm", "m.json", "--loss", "squared", "--quiet", cwd=tmp_path
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    model = load_model(tmp_path / "m.json")
    assert_same_fit(model, reference_fit(folder / "train.svm", "squared"))
    assert model.result_.success


@pytest.mark.parametrize("eps", [None, 0.5])
def test_train_predict_evaluate_with_the_expected_gain_scorer(folder, tmp_path, run_here, eps):
    """--scorer expected_gain is bmrm.fit with the scorer; the model file keeps it, so
    predict and evaluate apply h_W (clipped at --clip-eps) as the fitted model does."""
    clip = [] if eps is None else ["--clip-eps", eps]
    args = ["--loss", "listnet", "--scorer", "expected_gain", *clip, "--lam", "0.01"]
    proc = run("train", folder / "train.svm", "model.json", *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    model = load_model(tmp_path / "model.json")
    reference = reference_fit(
        folder / "train.svm", "listnet", lam=0.01, ranking_function=ExpectedGainScorer(eps=eps)
    )
    np.testing.assert_array_equal(model.coef_, reference.coef_)
    assert model.coef_.shape == (4, D)  # labels 0..3
    assert model.scorer_.get_params() == reference.scorer_.get_params()
    assert model.scorer_.eps == eps
    for key in ("fun", "nit", "status", "message", "method"):
        assert model.result_[key] == reference.result_[key], key
    summary = proc.stderr.strip().splitlines()[-1]
    r = reference.result_
    assert summary.startswith(
        f"bmrm train: objective {r.fun:.10g}, gap {r.gap:.3e}, {r.nit} iterations of lbfgs"
    )
    assert summary.endswith("model written to model.json")

    proc = run_here("predict", folder / "test.svm", "model.json", "p.txt", cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (0, "")
    X, y, qid = load_svmlight(folder / "test.svm", n_features=D, zero_based=False)
    expected = reference.predict(X)
    lines = (tmp_path / "p.txt").read_text().splitlines()
    assert lines == [repr(value) for value in expected.tolist()]
    # h_W computed here from the stored W: softmax over the levels, clipped at eps
    Xd = X.toarray()
    P = np.exp(Xd @ model.coef_.T)
    P /= P.sum(axis=1, keepdims=True)
    clipped = P.max(axis=1) > (eps or 1.0)
    P[clipped] = np.eye(4)[P[clipped].argmax(axis=1)]
    np.testing.assert_allclose(expected, P @ [0.0, 1.0, 3.0, 7.0], rtol=1e-12)
    assert clipped.any() == (eps is not None)

    proc = run_here(
        "evaluate", folder / "test.svm", "model.json", "--metric", "ndcg@3", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert parse_metrics(proc.stdout) == [("ndcg@3", metrics.ndcg_score(y, expected, qid, k=3))]


def test_train_non_convex_loss_with_the_linear_scorer(folder, tmp_path, run_here):
    """A loss fitted by L-BFGS (cosine) trains, saves and summarises with its stopping
    measure (the largest gradient entry) as the gap."""
    proc = run_here("train", folder / "train.svm", "m.json", "--loss", "cosine", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    model = load_model(tmp_path / "m.json")
    reference = reference_fit(folder / "train.svm", "cosine")
    np.testing.assert_array_equal(model.coef_, reference.coef_)
    assert model.scorer_ is None and model.result_.method == "lbfgs"
    assert " iterations of lbfgs, " in proc.stderr.strip().splitlines()[-1]


# ----------------------------------------------------------------------------- predict, evaluate


@pytest.fixture(scope="module")
def trained(folder):
    """A model and its predictions on test.svm, both made by the command."""
    proc = run("train", "train.svm", "model.json", "--max-iter", 20, "--quiet", cwd=folder)
    assert proc.returncode == 0, proc.stderr
    proc = run("predict", "test.svm", "model.json", "predictions.txt", cwd=folder)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    return folder


def test_predictions_file_equals_model_predict(trained):
    model = load_model(trained / "model.json")
    assert read_data(trained / "test.svm")[0].shape[1] == D - 1  # last feature never set
    X, y, _ = load_svmlight(trained / "test.svm", n_features=D, zero_based=False)
    expected = model.predict(X)
    lines = (trained / "predictions.txt").read_text().splitlines()
    assert len(lines) == y.shape[0]
    assert lines == [repr(value) for value in expected.tolist()]
    np.testing.assert_array_equal([float(line) for line in lines], expected)


def read_scores(path):
    return np.array([float(line) for line in path.read_text().splitlines()])


def parse_metrics(stdout):
    rows = [line.split("\t") for line in stdout.splitlines()]
    assert all(len(row) == 2 for row in rows)
    return [(name, float(value)) for name, value in rows]


def test_evaluate_predictions_file(trained):
    names = ["ndcg@3", "ndcg", "dcg@2", "map", "p@2", "recall@3", "f1@2", "mrr", "err@4"]
    names += ["neru", "kendall_tau", "precision@5"]
    args = [arg for name in names for arg in ("--metric", name)]
    proc = run("evaluate", "test.svm", "predictions.txt", *args, cwd=trained)
    assert proc.returncode == 0, proc.stderr
    _, y, qid = read_data(trained / "test.svm")
    s = read_scores(trained / "predictions.txt")
    expected = [
        ("ndcg@3", metrics.ndcg_score(y, s, qid, k=3)),
        ("ndcg", metrics.ndcg_score(y, s, qid)),
        ("dcg@2", metrics.dcg_score(y, s, qid, k=2)),
        ("map", metrics.map_score(y, s, qid)),
        ("p@2", metrics.precision_score(y, s, qid, k=2)),
        ("recall@3", metrics.recall_score(y, s, qid, k=3)),
        ("f1@2", metrics.f1_score(y, s, qid, k=2)),
        ("mrr", metrics.mrr_score(y, s, qid)),
        ("err@4", metrics.err_score(y, s, qid, k=4)),
        ("neru", metrics.neru_score(y, s, qid)),
        ("kendall_tau", metrics.kendall_tau_score(y, s, qid)),
        ("precision@5", metrics.precision_score(y, s, qid, k=5)),
    ]
    assert parse_metrics(proc.stdout) == expected


def test_evaluate_model_file_with_letor_convention(trained):
    args = ["--metric", "ndcg@5", "--metric", "map", "--metric", "p@3", "--metric", "mrr"]
    proc = run("evaluate", "test.svm", "model.json", *args, "--convention", "letor", cwd=trained)
    assert proc.returncode == 0, proc.stderr
    _, y, qid = read_data(trained / "test.svm")
    s = read_scores(trained / "predictions.txt")
    expected = [
        ("ndcg@5", metrics.ndcg_score(y, s, qid, k=5, convention="letor")),
        ("map", metrics.map_score(y, s, qid, threshold=1, ties="stable")),
        ("p@3", metrics.precision_score(y, s, qid, k=3, threshold=1, ties="stable")),
        ("mrr", metrics.mrr_score(y, s, qid, ties="stable")),
    ]
    assert parse_metrics(proc.stdout) == expected


def test_evaluate_default_metrics_linear_convention(trained, run_here):
    proc = run_here(
        "evaluate", "test.svm", "predictions.txt", "--convention", "linear", cwd=trained
    )
    assert proc.returncode == 0, proc.stderr
    _, y, qid = read_data(trained / "test.svm")
    s = read_scores(trained / "predictions.txt")
    expected = [
        (f"ndcg@{k}", metrics.ndcg_score(y, s, qid, k=k, convention="linear"))
        for k in (1, 3, 5, 10)
    ]
    expected.append(("map", metrics.map_score(y, s, qid)))
    assert parse_metrics(proc.stdout) == expected


# ----------------------------------------------------------------------------- help, version


def test_version(tmp_path):
    proc = run("--version", cwd=tmp_path)
    assert (proc.returncode, proc.stdout.strip()) == (0, f"bmrm {bmrm.__version__}")
    proc = run("--help", cwd=tmp_path, command=[sys.executable, "-m", "bmrm"])
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: bmrm ")
    for command in ("train", "predict", "evaluate"):
        assert command in proc.stdout


@pytest.mark.parametrize(
    "command, expected",
    [
        ("train", ["--loss", "--lam", "-c C", "--tol", "--max-iter", "--k K", "--loss-param"]),
        ("train", ["--regularizer", "--query-file", "--quiet", "lam = 1/C", 'normalize="none"']),
        ("train", ["--scorer {linear,expected_gain}", "--clip-eps EPS", "P_W(r = j | x)"]),
        ("predict", ["TEST", "MODEL", "PREDICTIONS"]),
        ("evaluate", ["--metric", "--convention", "ndcg@1 ndcg@3 ndcg@5 ndcg@10 map", "letor"]),
    ],
)
def test_command_help(tmp_path, run_here, command, expected):
    proc = run_here(command, "--help", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.startswith(f"usage: bmrm {command} ")
    for word in expected:
        assert word in proc.stdout


# ----------------------------------------------------------------------------- bad input


def test_missing_training_file(tmp_path):
    proc = run("train", "absent.svm", "m.json", cwd=tmp_path)
    line = one_line_error(proc, "train")
    assert line == "bmrm train: error: TRAIN absent.svm: no such file"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["predict", "absent.svm", "{model}", "p.txt"], "TEST absent.svm: no such file"),
        (["predict", "{test}", "absent.json", "p.txt"], "MODEL absent.json: no such file"),
        (["evaluate", "{test}", "absent.txt"], "PREDICTIONS|MODEL absent.txt: no such file"),
        (
            ["evaluate", "{test}", "{model}", "--query-file", "absent.q"],
            "--query-file absent.q: no such file",
        ),
        (
            ["train", "{train}", "m.json", "--weight-file", "absent.w"],
            "--weight-file absent.w: no such file",
        ),
        (
            ["train", "{train}", "m.json", "--query-file", "absent.q"],
            "--query-file absent.q: no such file",
        ),
    ],
)
def test_missing_inputs_are_named_by_their_argument(trained, tmp_path, run_here, argv, message):
    names = {
        name: trained / file
        for name, file in (("train", "train.svm"), ("test", "test.svm"), ("model", "model.json"))
    }
    proc = run_here(*[arg.format(**names) for arg in argv], cwd=tmp_path)
    assert one_line_error(proc, argv[0]).endswith(f"error: {message}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("end", ["\r", "\r\n"])
def test_predictions_with_carriage_return_line_ends(trained, tmp_path, run_here, end):
    """A predictions file with CR or CRLF line ends reads as the same file with LF ends."""
    test = trained / "test.svm"
    expected = run_here("evaluate", test, trained / "predictions.txt", cwd=tmp_path)
    lines = (trained / "predictions.txt").read_text().splitlines()
    (tmp_path / "cr.txt").write_bytes((end.join(lines) + end).encode())
    proc = run_here("evaluate", test, "cr.txt", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, expected.stdout), proc.stderr


def test_dash_is_the_standard_output(trained, folder, tmp_path, run_here):
    """PREDICTIONS and MODEL '-' write to the standard output what the file would hold (no
    file named '-'); '-' as an input is refused, naming the argument."""
    test, model = trained / "test.svm", trained / "model.json"
    proc = run_here("predict", test, model, "-", cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    assert proc.stdout == (trained / "predictions.txt").read_text()
    proc = run_here("train", folder / "train.svm", "-", "--max-iter", 5, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().endswith("model written to the standard output")
    (tmp_path / "out.json").write_text(proc.stdout)
    run_here("train", folder / "train.svm", "m.json", "--max-iter", 5, cwd=tmp_path)
    np.testing.assert_array_equal(
        load_model(tmp_path / "out.json").coef_, load_model(tmp_path / "m.json").coef_
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "out.json"]
    for argv, name in [
        (("predict", "-", model, "p.txt"), "TEST"),
        (("predict", test, "-", "p.txt"), "MODEL"),
        (("train", "-", "m2.json"), "TRAIN"),
        (("evaluate", test, "-"), "PREDICTIONS|MODEL"),
    ]:
        proc = run_here(*argv, cwd=tmp_path)
        assert proc.returncode == 2
        assert proc.stderr == (
            f"bmrm {argv[0]}: error: {name} '-': '-' names the standard output, for "
            "PREDICTIONS and MODEL only; give an input file (or /dev/stdin to read a pipe)\n"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "out.json"]


def test_predictions_with_blank_lines_at_the_end(trained, tmp_path, run_here):
    """An editor's or echo's last newlines are no score; a blank line between scores is an
    error (it would shift every later score to another row)."""
    test, model = trained / "test.svm", trained / "model.json"
    assert run_here("predict", test, model, "p.txt", cwd=tmp_path).returncode == 0
    expected = run_here("evaluate", test, "p.txt", cwd=tmp_path)
    lines = (tmp_path / "p.txt").read_text().splitlines()
    (tmp_path / "end.txt").write_text("\n".join(lines) + "\n\n \n\n")
    proc = run_here("evaluate", test, "end.txt", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected.stdout
    (tmp_path / "mid.txt").write_text("\n".join([*lines[:2], "", *lines[2:]]) + "\n")
    proc = run_here("evaluate", test, "mid.txt", cwd=tmp_path)
    assert one_line_error(proc, "evaluate") == (
        "bmrm evaluate: error: mid.txt, line 3: expected a finite score; got ''"
    )


def test_malformed_svmlight_line(tmp_path):
    (tmp_path / "bad.svm").write_text("1 qid:1 1:0.5 2:1\n0 qid:1 1:0.2\n2 qid:1 1:0.3 x:1\n")
    proc = run("train", "bad.svm", "m.json", cwd=tmp_path)
    line = one_line_error(proc, "train")
    assert "bad.svm, line 3: " in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.svm"]


@pytest.mark.parametrize(
    "runner, args, message",
    [
        ("subprocess", ["--loss", "lambdarank"], "argument --loss: invalid choice: 'lambdarank'"),
        ("subprocess", ["--lam", "0"], "lam must be > 0; got 0.0"),
        ("in-process", ["-c", "-1"], "-c must be > 0; got -1.0"),
        ("in-process", ["--loss-param", "depth=3"], "bad --loss-param for the ordinal loss"),
        ("in-process", ["--lam", "1e300"], "--lam must be within [1e-30, 1e+12]"),
        ("in-process", ["--lam", "1e-300"], "--lam must be within [1e-30, 1e+12]"),
        ("in-process", ["-c", "1e-300"], "-c must lie in [1e-12, 1e+30]"),
        ("in-process", ["-c", "1e300"], "-c must lie in [1e-12, 1e+30]"),
        ("in-process", ["--tol", "1"], "--tol must be < 1"),
    ],
)
def test_bad_training_options(folder, tmp_path, run_here, runner, args, message):
    call = run if runner == "subprocess" else run_here
    proc = call("train", folder / "train.svm", "m.json", *args, cwd=tmp_path)
    assert message in one_line_error(proc, "train")
    assert list(tmp_path.iterdir()) == []


def test_feature_count_mismatch(trained, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, D + 2))
    dump_svmlight(tmp_path / "wide.svm", X, np.zeros(6), np.zeros(6, dtype=int))
    (tmp_path / "old.txt").write_text("previous\n")
    proc = run("predict", "wide.svm", trained / "model.json", "old.txt", cwd=tmp_path)
    line = one_line_error(proc, "predict")
    assert f"wide.svm has feature index {D + 2} but the model " in line
    assert line.endswith(f"model.json has {D} features")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.txt", "wide.svm"]
    assert (tmp_path / "old.txt").read_text() == "previous\n"


def test_predictions_with_wrong_line_count(trained, tmp_path):
    lines = (trained / "predictions.txt").read_text().splitlines()
    (tmp_path / "short.txt").write_text("\n".join(lines[:-1]) + "\n")
    proc = run("evaluate", trained / "test.svm", "short.txt", cwd=tmp_path)
    line = one_line_error(proc, "evaluate")
    assert f"short.txt holds {len(lines) - 1} predictions but " in line
    assert line.endswith(f"test.svm has {len(lines)} rows")
    assert proc.stdout == ""


def test_tampered_model(trained, tmp_path, run_here):
    text = (trained / "model.json").read_text()
    (tmp_path / "m.json").write_text(text.replace('"lam": 0.001', '"lam": 0.002'))
    proc = run_here("predict", trained / "test.svm", "m.json", "p.txt", cwd=tmp_path)
    line = one_line_error(proc, "predict")
    assert line.endswith(
        "m.json: checksum mismatch: the model file was modified or corrupted after it was written"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "{train}", "missing/m.json"], "missing/m.json: folder "),
        (["train", "{train}", "{here}"], "it is a folder"),
        (["train", "{train}", "m.json", "--loss", "squared", "--k", "3"], "--k applies to"),
        (["train", "{train}", "m.json", "--pair-cost", "linear"], "--pair-cost applies to"),
        (["train", "{train}", "m.json", "--loss-param", "k"], "expects KEY=VALUE; got 'k'"),
        (
            ["train", "{train}", "m.json", "--loss", "ndcg", "--k", "2", "--loss-param", "k=3"],
            "give the cut-off once",
        ),
        (["train", "{train}", "m.json", "--loss", "ndcg", "--k", "0"], "k must be an integer"),
        (["train", "{train}", "m.json", "--loss", "hinge", "--quiet"], "binary labels"),
        (["train", "{train}", "m.json", "--query-file", "{train}"], "would conflict"),
        (["train", "{train}", "m.json", "--clip-eps", "0.8"], "--clip-eps applies to --scorer"),
        (
            ["train", "{train}", "m.json", "--loss", "listnet", "--scorer", "expected_gain"]
            + ["--clip-eps", "0.4"],
            "--clip-eps must be a number in [0.5, 1]; got 0.4",
        ),
        (
            ["train", "{train}", "m.json", "--loss", "listnet", "--scorer", "expected_gain"]
            + ["--regularizer", "l1"],
            "--scorer expected_gain: regularizer='l1' is not supported",
        ),
        (["train", "{train}", "m.json", "--scorer", "mlp"], "argument --scorer: invalid choice"),
        (["predict", "{test}", "{model}", "missing/p.txt"], "missing/p.txt: folder "),
        (["evaluate", "{test}", "{model}", "--metric", "foo@3"], "unknown metric 'foo@3'"),
        (
            ["evaluate", "{test}", "{model}", "--metric", "ndcg@0"],
            "--metric: the cut-off of 'ndcg@0' must be an integer in 1..2**63 - 1",
        ),
        (["evaluate", "{test}", "{model}", "--metric", "kendall_tau@3"], "takes no cut-off"),
        (["evaluate", "{test}", "bad.txt"], "bad.txt, line 2: expected a finite score; got 'abc'"),
        (["evaluate", "{test}", "nan.txt"], "nan.txt, line 1: expected a finite score; got 'nan'"),
    ],
)
def test_more_bad_input_in_process(trained, tmp_path, run_here, argv, message):
    (tmp_path / "bad.txt").write_text("1.5\nabc\n")
    (tmp_path / "nan.txt").write_text("nan\n")
    names = {
        "train": trained / "train.svm",
        "test": trained / "test.svm",
        "model": trained / "model.json",
        "here": tmp_path,
    }
    proc = run_here(*[arg.format(**names) for arg in argv], cwd=tmp_path)
    assert message in one_line_error(proc, argv[0])
    assert proc.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt", "nan.txt"]


def test_truncated_gzip_input(folder, tmp_path):
    data = gzip.compress((folder / "train.svm").read_bytes())
    (tmp_path / "trunc.svm.gz").write_bytes(data[: len(data) // 2])
    proc = run("train", "trunc.svm.gz", "m.json", "--quiet", cwd=tmp_path)
    line = one_line_error(proc, "train")
    assert line == (
        "bmrm train: error: trunc.svm.gz: truncated or corrupted gzip file (Compressed file "
        "ended before the end-of-stream marker was reached)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trunc.svm.gz"]


def test_features_that_overflow_the_fit(folder, tmp_path, run_here):
    X, y, qid = read_data(folder / "train.svm")
    dump_svmlight(tmp_path / "big.svm", X * 1e200, y.astype(np.int64), qid)
    proc = run_here("train", "big.svm", "m.json", "--quiet", cwd=tmp_path)
    line = one_line_error(proc, "train")
    assert line.startswith("bmrm train: error: big.svm: the risk's subgradient")
    assert "X, the targets y or the loss's parameters" in line
    assert line.endswith("are out of range; scale them down")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.svm"]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--loss", "ndcg", "--k", str(10**30)],
            f"--k must be an integer in 1..2147483647 (a cut-off on the documents of a query; "
            f"leave it out for the whole list); got {10**30}",
        ),
        (["--loss", "neru", "--k", str(2**31)], f"--k must be an integer in 1..{2**31 - 1}"),
        (
            ["--loss", "ndcg", "--loss-param", f"k={2**63}"],
            f"--loss-param k must be an integer in 1..{2**31 - 1}",
        ),
    ],
)
def test_cut_off_beyond_the_bound(folder, tmp_path, run_here, args, message, monkeypatch):
    def no_fit(*args, **kwargs):
        raise AssertionError("fit called")

    monkeypatch.setattr("bmrm.model.fit", no_fit)  # refused before any work
    proc = run_here("train", folder / "train.svm", "m.json", *args, cwd=tmp_path)
    assert message in one_line_error(proc, "train")
    assert list(tmp_path.iterdir()) == []


def test_cut_off_at_the_bound(folder, tmp_path, run_here):
    args = ["--loss", "ndcg", "--k", 2**31 - 1, "--max-iter", 5, "--quiet"]
    proc = run_here("train", folder / "train.svm", "m.json", *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    reference = reference_fit(
        folder / "train.svm", "ndcg", max_iter=5, loss_params={"k": 2**31 - 1}
    )
    assert_same_fit(load_model(tmp_path / "m.json"), reference)


@pytest.mark.parametrize("score", ["1_0", "1_000.5", "_1"])
def test_predictions_with_underscores(trained, tmp_path, run_here, score):
    lines = (trained / "predictions.txt").read_text().splitlines()
    lines[1] = score
    (tmp_path / "p.txt").write_text("\n".join(lines) + "\n")
    proc = run_here("evaluate", trained / "test.svm", "p.txt", cwd=tmp_path)
    line = one_line_error(proc, "evaluate")
    assert line.endswith(f"p.txt, line 2: expected a finite score; got '{score}'")
    assert proc.stdout == ""


@pytest.mark.filterwarnings("ignore::bmrm.ConvergenceWarning")
@pytest.mark.parametrize("explicit", [True, False])
def test_query_file_for_data_without_qid(folder, tmp_path, run_here, explicit):
    """Groups from a LightGBM-style query file (given, or found as TRAIN.query)."""
    X, y, qid = read_data(folder / "train.svm")
    dump_svmlight(tmp_path / "train.svm", X, y)
    dump_query_file(
        tmp_path / ("groups.txt" if explicit else "train.svm.query"), groups_from_qid(qid)
    )
    groups = ["--query-file", "groups.txt"] if explicit else []
    args = ["train.svm", "m.json", "--loss", "ndcg", "--max-iter", 5, "--quiet", *groups]
    assert run_here("train", *args, cwd=tmp_path).returncode == 0
    reference = reference_fit(folder / "train.svm", "ndcg", max_iter=5)
    assert_same_fit(load_model(tmp_path / "m.json"), reference)
    assert run_here("predict", "train.svm", "m.json", "p.txt", cwd=tmp_path).returncode == 0
    proc = run_here("evaluate", "train.svm", "p.txt", "--metric", "ndcg@3", *groups, cwd=tmp_path)
    s = read_scores(tmp_path / "p.txt")
    assert parse_metrics(proc.stdout) == [("ndcg@3", metrics.ndcg_score(y, s, qid, k=3))]


@pytest.mark.parametrize("loss", ["ordinal", "squared"])
def test_weight_file_gives_the_weighted_fit(folder, tmp_path, run_here, loss):
    """--weight-file: one weight per row (per query for a query loss), as bmrm.fit's
    sample_weight."""
    X, y, qid = read_data(folder / "train.svm")
    rng = np.random.default_rng(2)
    ids = np.unique(qid)
    by_query = dict(zip(ids.tolist(), rng.integers(0, 4, ids.size).tolist(), strict=True))
    s = np.array([by_query[q] for q in qid.tolist()], dtype=float)
    s[qid == qid[0]] = 2.5
    if loss == "squared":
        s = s + rng.integers(0, 2, s.size)  # rows of a query may differ for a pointwise loss
    (tmp_path / "w.txt").write_text("".join(f"{v!r}\n" for v in s.tolist()))
    args = ["--loss", loss, "--lam", "0.02", "--tol", "1e-5", "--weight-file", "w.txt"]
    proc = run_here("train", folder / "train.svm", "m.json", *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "weights from w.txt" in proc.stderr
    reference = reference_fit(folder / "train.svm", loss, lam=0.02, tol=1e-5, sample_weight=s)
    assert_same_fit(load_model(tmp_path / "m.json"), reference)
    unweighted = reference_fit(folder / "train.svm", loss, lam=0.02, tol=1e-5)
    assert unweighted.result_.fun != reference.result_.fun


@pytest.mark.parametrize(
    "text, message",
    [
        ("1\n2\n", "--weight-file w.txt: 2 weights for the {n} rows of"),
        ("x\n", "w.txt, line 1: expected a weight (a finite number >= 0); got 'x'"),
        ("uneven", "--weight-file w.txt: sample_weight must be equal within each query"),
        ("zeros", "--weight-file w.txt: sample_weight is all zero"),
    ],
)
def test_bad_weight_files(folder, tmp_path, run_here, text, message):
    X, y, qid = read_data(folder / "train.svm")
    n = len(y)
    if text == "uneven":
        text = "".join(f"{i % 3}\n" for i in range(n))
    elif text == "zeros":
        text = "0\n" * n
    (tmp_path / "w.txt").write_text(text)
    proc = run_here(
        "train", folder / "train.svm", "m.json", "--weight-file", "w.txt", cwd=tmp_path
    )
    assert message.format(n=n) in one_line_error(proc, "train")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.txt"]
    missing = run_here(
        "train", folder / "train.svm", "m.json", "--weight-file", "no.txt", cwd=tmp_path
    )
    assert "no.txt" in one_line_error(missing, "train")


# ----------------------------------------------------------------------------- real data


def test_mq2008_smoke(shared_data, tmp_path, run_here):
    """Train on MQ2008 S1 for a few iterations, predict S2, evaluate as LETOR does."""
    s1, s2 = shared_data / "mq2008" / "S1.txt", shared_data / "mq2008" / "S2.txt"
    proc = run("train", s1, "m.json", "-c", 1, "--max-iter", 10, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "iterations" in proc.stderr.strip().splitlines()[-1]
    proc = run_here("predict", s2, "m.json", "p.txt", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    model = load_model(tmp_path / "m.json")
    X, y, qid = read_data(s2)
    scores = read_scores(tmp_path / "p.txt")
    np.testing.assert_array_equal(scores, model.predict(X))
    proc = run_here(
        "evaluate",
        s2,
        "p.txt",
        "--convention",
        "letor",
        "--metric",
        "ndcg@10",
        "--metric",
        "map",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    values = parse_metrics(proc.stdout)
    assert values == [
        ("ndcg@10", metrics.ndcg_score(y, scores, qid, k=10, convention="letor")),
        ("map", metrics.map_score(y, scores, qid, threshold=1, ties="stable")),
    ]
    # A trained ranker does better than the all-tied ranking on the held-out partition.
    assert values[1][1] > metrics.map_score(y, np.zeros_like(y), qid, threshold=1, ties="stable")


def test_model_may_not_replace_the_query_file_it_reads(folder, tmp_path, run_here):
    """TRAIN.query, read because TRAIN has no qid:, is an input like --query-file: MODEL may
    not be it (it was overwritten with the model before)."""
    X, y, qid = read_data(folder / "train.svm")
    dump_svmlight(tmp_path / "train.svm", X, y)
    dump_query_file(tmp_path / "train.svm.query", groups_from_qid(qid))
    before = (tmp_path / "train.svm.query").read_bytes()
    proc = run_here("train", "train.svm", "train.svm.query", "--quiet", cwd=tmp_path)
    line = one_line_error(proc, "train")
    assert line == (
        "bmrm train: error: MODEL train.svm.query is the query file train.svm.query: writing "
        "it would destroy an input; choose another output file"
    )
    assert (tmp_path / "train.svm.query").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.svm", "train.svm.query"]


def test_general_regularizer_without_cvxpy(folder, tmp_path, run_here, monkeypatch):
    """--regularizer l1 on an install without cvxpy: one line saying how to install it,
    before the data is read (a traceback after reading it before)."""
    monkeypatch.setitem(sys.modules, "cvxpy", None)  # import cvxpy raises ImportError
    monkeypatch.setattr("bmrm.io.svmlight.load_svmlight", lambda *a, **k: pytest.fail("data read"))
    proc = run_here("train", folder / "train.svm", "m.json", "--regularizer", "l1", cwd=tmp_path)
    assert one_line_error(proc, "train") == (
        "bmrm train: error: --regularizer l1 is solved by the cvxpy master, which the core "
        'install leaves out: python -m pip install "bmrm[cvxpy]"'
    )
    assert list(tmp_path.iterdir()) == []


def test_out_of_memory_is_one_line(folder, tmp_path, run_here, monkeypatch):
    def no_memory(*args, **kwargs):
        raise MemoryError("Unable to allocate 256. GiB for an array with shape (16, 2147483647)")

    monkeypatch.setattr("bmrm.model.fit", no_memory)
    proc = run_here("train", folder / "train.svm", "m.json", "--quiet", cwd=tmp_path)
    assert one_line_error(proc, "train") == (
        "bmrm train: error: not enough memory: Unable to allocate 256. GiB for an array with "
        "shape (16, 2147483647)"
    )
    assert list(tmp_path.iterdir()) == []


def test_predict_refuses_scores_that_overflow(trained, tmp_path, run_here):
    """A feature value of 1e308 makes a score inf: an error naming the row, nothing written
    (the file held inf or nan with exit 0 before)."""
    X, y, qid = read_data(trained / "test.svm")
    w = load_model(trained / "model.json").coef_
    X = X.copy()
    d = X.shape[1]  # the model may have more features than the file uses
    X[2, :] = np.sign(w[:d]) * 1.7e308  # every term of the score near the float64 maximum
    with np.errstate(over="ignore", invalid="ignore"):
        assert not np.isfinite(X[2] @ w[:d])
    dump_svmlight(tmp_path / "big.svm", X, y.astype(np.int64), qid)
    proc = run_here("predict", "big.svm", trained / "model.json", "p.txt", cwd=tmp_path)
    line = one_line_error(proc, "predict")
    assert line.startswith("bmrm predict: error: big.svm: the score of data row 3 (counting ")
    assert line.endswith("nothing written")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.svm"]


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("new/", "cannot write new/: a name ending in '/' names a folder"),
        ("here.txt/p.txt", "here.txt is not a folder"),
        ("/proc/p.txt", "cannot write /proc/p.txt: no new file can be made in folder /proc ("),
    ],
)
def test_outputs_that_cannot_be_written_fail_before_any_work(
    trained, tmp_path, run_here, monkeypatch, output, message
):
    if output.startswith("/proc") and not os.path.isdir("/proc"):
        pytest.skip("no /proc on this system")
    (tmp_path / "here.txt").write_text("")
    monkeypatch.setattr("bmrm.model.load", lambda *a, **k: pytest.fail("model read"))
    proc = run_here("predict", trained / "test.svm", trained / "model.json", output, cwd=tmp_path)
    assert message in one_line_error(proc, "predict")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["here.txt"]


def test_output_name_of_250_characters(trained, tmp_path, run_here):
    """A name within NAME_MAX whose temporary name (".NAME.pid.hex.tmp") would not be: the
    temporary name is shortened (the error named the temporary file before)."""
    name = "p" * 250
    proc = run_here("predict", trained / "test.svm", trained / "model.json", name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert read_scores(tmp_path / name).shape == (read_data(trained / "test.svm")[1].size,)
    assert [p.name for p in tmp_path.iterdir()] == [name]


@pytest.mark.parametrize("cut_off", ["²", "99999999999999999999", "-1", "1.5", ""])
def test_metric_cut_off_checked_before_reading(tmp_path, run_here, cut_off):
    proc = run_here(
        "evaluate", "missing.svm", "missing.txt", "--metric", f"ndcg@{cut_off}", cwd=tmp_path
    )
    assert one_line_error(proc, "evaluate") == (
        f"bmrm evaluate: error: --metric: the cut-off of 'ndcg@{cut_off}' must be an integer "
        "in 1..2**63 - 1"
    )


@pytest.mark.skipif(not os.path.isdir("/dev/fd"), reason="no /dev/fd on this system")
@pytest.mark.parametrize("what", ["predictions", "model"])
def test_evaluate_scores_from_a_pipe(trained, tmp_path, run_here, what):
    """SCORES as a pipe (`<(...)`, /dev/stdin): read once, as the regular file (the first
    4 KiB used to be consumed by the model-file test, giving '0 predictions')."""
    import threading

    path = trained / ("p.txt" if what == "predictions" else "model.json")
    if what == "predictions":
        args = ["predict", trained / "test.svm", trained / "model.json", path]
        assert run_here(*args, cwd=tmp_path).returncode == 0
    expected = run_here("evaluate", trained / "test.svm", path, cwd=tmp_path)
    assert expected.returncode == 0, expected.stderr
    read_end, write_end = os.pipe()
    data = path.read_bytes()

    def feed():
        with os.fdopen(write_end, "wb") as f:
            f.write(data)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        proc = run_here("evaluate", trained / "test.svm", f"/dev/fd/{read_end}", cwd=tmp_path)
    finally:
        writer.join()
        os.close(read_end)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected.stdout


def test_help_imports_neither_numpy_nor_the_solver(tmp_path):
    """The help of the command builds its parser only: numpy, numba, losses and the model
    layer stay unimported (they cost most of the start-up), and ``import bmrm`` alone
    imports none of them either."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(bmrm.__file__)))
    heavy = ["numpy", "numba", "scipy", "losses", "bmrm.model", "bmrm.solver", "sklearn"]
    code = (
        "import sys, contextlib, io\n"
        "import bmrm\n"
        f"heavy = {heavy!r}\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "from bmrm import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    try:\n"
        "        cli.main(['--help'])\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code == 0\n"
        "assert 'train' in out.getvalue()\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": root},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["[]", "[]"]


INTERRUPTED_FIT = """
import os, signal, sys, threading
import numpy as np
import bmrm
from bmrm.demo import make_ranking_data

# Python raises KeyboardInterrupt only where SIGINT is not ignored, and a job a shell starts
# in the background inherits it ignored
signal.signal(signal.SIGINT, signal.default_int_handler)
X, y, qid = make_ranking_data(600, 40, 20, seed=0)[:3]  # 24,000 rows: kernels on threads
delay = float(sys.argv[1])
started = []


def interrupt_soon(result):
    if not started:  # from the first iteration on: the signal lands inside the fit
        started.append(threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT)))
        started[0].start()


try:
    # fit again until the signal comes, so that a fit that converges before the delay has
    # passed cannot end the run
    for _ in range(1000):
        bmrm.fit(X, y, "ndcg", qid, lam=1e-4, tol=1e-12, max_iter=100000, callback=interrupt_soon)
except KeyboardInterrupt:
    sys.exit(130)
print("finished")
"""


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.2, 0.45, 0.9, 1.5])
def test_interrupting_a_latent_ndcg_fit_raises_keyboard_interrupt(tmp_path, delay):
    """SIGINT from a timer thread at several moments of a latent NDCG fit (the
    concave-convex procedure, kernels on the thread pool) ends it with KeyboardInterrupt,
    never another exception."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(bmrm.__file__)))
    proc = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_FIT, str(delay)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": root},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert (proc.returncode, proc.stdout) == (130, ""), proc.stderr[-3000:]
    assert "Error" not in proc.stderr, proc.stderr[-3000:]


def test_an_interrupt_surfacing_as_system_error_is_an_interrupt(
    folder, tmp_path, run_here, monkeypatch
):
    def interrupted(*args, **kwargs):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise SystemError("<CPUDispatcher> returned a result with an exception set") from exc

    monkeypatch.setattr("bmrm.model.fit", interrupted)
    proc = run_here("train", folder / "train.svm", "m.json", cwd=tmp_path)
    assert (proc.returncode, proc.stderr.splitlines()[-1]) == (130, "bmrm train: interrupted")
    assert not (tmp_path / "m.json").exists()

    def failing(*args, **kwargs):
        raise SystemError("another failure")

    monkeypatch.setattr("bmrm.model.fit", failing)
    with pytest.raises(SystemError, match="another failure"):
        cli.main(["train", str(folder / "train.svm"), str(tmp_path / "m.json")])

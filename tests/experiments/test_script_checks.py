"""The experiment scripts' checks, run in this process (no data needed, no fitting).

* a bad option is an argument error naming it (exit 2) before any data are read and before
  the output folder exists;
* absent data, and a data folder whose MQ2008 partitions are missing or malformed, end a
  run with one line naming the folder or the file (exit 1), and no output folder;
* results are written atomically: a run that fails leaves an earlier run's files as they
  were and removes an output folder it created and left empty.
"""

import importlib
import sys

import pytest

from tests.experiments._quick import REPO

sys.path.insert(0, str(REPO / "experiments"))
_common = importlib.import_module("_common")

DATA_SCRIPTS = (
    "letor",
    "adarank",
    "bench_cccp",
    "bench_l1",
    "bench_nonconvex",
    "cccp_starts",
    "convergence",
    "expected_gain",
    "ordinal",
    "peers",
)
MQ2008_SCRIPTS = tuple(s for s in DATA_SCRIPTS if s != "ordinal")
SCRIPTS = (
    *DATA_SCRIPTS,
    "bench_compile",
    "bench_first_run",
    "bench_iterations",
    "bench_oracles",
    "bench_qp",
    "bench_scale",
    "bench_solver",
    "seed_examples",
)
# options that keep a run short should a check be missed (only the check runs here)
CHEAP = {
    "bench_first_run": ["--losses", "squared", "--no-demo"],
    "bench_iterations": ["--sets", "demo", "--demo-losses", "ordinal", "--max-iter", "5"],
    "bench_oracles": ["--only", "weights", "--weight-rows", "50", "--repeats", "1"],
    "bench_qp": ["--quick", "--no-cvxpy"],
    "bench_scale": ["--scale", "0.0001", "--skip-dask", "--max-iter", "2"],
    "bench_solver": ["--sizes", "small", "--small-rows", "500", "--losses", "squared"],
}


def script(name):
    return importlib.import_module(name)


def run(name, args, out, capsys, data=None):
    """``main`` of experiments/<name>.py, which must exit: (exit code, stderr). The code of
    ``sys.exit(message)`` is the message (printed on stderr, exit 1, at the top level)."""
    argv = [*CHEAP.get(name, []), *args, "--out", str(out)]
    if name in DATA_SCRIPTS:
        argv += ["--quick", "--data", str(data if data is not None else out.parent / "no-data")]
    with pytest.raises(SystemExit) as exc:
        script(name).main(argv)
    return exc.value.code, capsys.readouterr().err


def one_line_error(code) -> str:
    """The message of a one-line ``sys.exit("error: ...")``."""
    assert isinstance(code, str) and code.startswith("error: "), code
    assert "\n" not in code, code
    return code


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("letor", ["--lams", "-1"], "--lams must be in [1e-30, 1e+12]; got -1"),
        ("letor", ["--lams", "nan"], "--lams must be a finite number; got nan"),
        ("letor", ["--tol", "-1"], "--tol must be in [0, 1); got -1"),
        ("letor", ["--max-iter", "0"], "--max-iter must be >= 1; got 0"),
        ("letor", ["--method", "bogus"], "argument --method: invalid choice: 'bogus'"),
        ("expected_gain", ["--epsilons", "2"], "--epsilons must be in [0.5, 1]; got 2"),
        ("expected_gain", ["--alphas", "0"], "--alphas must be > 0; got 0"),
        ("expected_gain", ["--folds", "9"], "--folds must be in 1..5; got 9"),
        ("expected_gain", ["--flips", "-1"], "--flips must be >= 1; got -1"),
        ("convergence", ["--rows", "-5"], "--rows must be >= 1; got -5"),
        ("convergence", ["--max-time", "-1"], "--max-time must be > 0; got -1"),
        ("ordinal", ["--splits", "-1"], "--splits must be >= 1; got -1"),
        ("peers", ["--threads", "0"], "--threads must be in 1.."),
        ("peers", ["--repeats", "-1"], "--repeats must be >= 1; got -1"),
        ("bench_cccp", ["--fold", "9"], "--fold must be in 1..5; got 9"),
        ("bench_cccp", ["--repeats", "-1"], "--repeats must be >= 1; got -1"),
        ("bench_l1", ["--folds", "9"], "--folds must be in 1..5; got 9"),
        ("bench_l1", ["--methods", "level"], "argument --methods: invalid choice: 'level'"),
        ("bench_l1", ["--lams", "1e-2", "1e-2"], "--lams must not repeat a value"),
        ("bench_nonconvex", ["--tol", "-1"], "--tol must be in [0, 1); got -1"),
        ("bench_solver", ["--losses", "bogus"], "argument --losses: invalid choice: 'bogus'"),
        ("bench_solver", ["--small-rows", "-5"], "--small-rows must be >= 1; got -5"),
        ("bench_solver", ["--repeats", "-1"], "--repeats must be >= 1; got -1"),
        ("bench_scale", ["--scale", "0"], "--scale must be > 0; got 0"),
        ("bench_scale", ["--task-modes", "bogus"], "--task-modes must be comma-separated"),
        ("bench_scale", ["--lam", "-1"], "--lam must be in [1e-30, 1e+12]; got -1"),
        ("bench_oracles", ["--weight-rows", "-1"], "--weight-rows must be >= 50; got -1"),
        ("bench_iterations", ["--C", "-1"], "--C must be in [1e-12, 1e+30]; got -1"),
        ("bench_iterations", ["--methods", "bogus"], "--methods must be NAME[:key=value,...]"),
        ("bench_compile", ["--repeats", "-1"], "--repeats must be >= 1; got -1"),
        ("bench_first_run", ["--repeats", "-1"], "--repeats must be >= 1; got -1"),
        ("bench_first_run", ["--demo-losses", "bogus"], "argument --demo-losses: invalid choice"),
        ("bench_qp", ["--planes", "0"], "--planes must be >= 4; got 0"),
    ],
)
def test_bad_option_is_an_argument_error_before_any_work(name, args, message, tmp_path, capsys):
    out = tmp_path / "out"
    code, err = run(name, args, out, capsys)
    assert code == 2
    assert err.strip().splitlines()[-1].startswith(f"python experiments/{name}.py: error: ")
    assert f"python experiments/{name}.py: error: {message}" in err
    assert not out.exists()


@pytest.mark.parametrize("name", SCRIPTS)
@pytest.mark.parametrize("through", [False, True])
def test_out_naming_a_file_is_an_argument_error(name, through, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("keep\n")
    out = afile / "sub" if through else afile
    code, err = run(name, [], out, capsys)
    assert code == 2
    where = f" ({afile} is a file)" if through else ""
    assert f"python experiments/{name}.py: error: --out must be a folder; got {out}{where}" in err
    assert afile.read_text() == "keep\n"


def test_explicit_zero_is_kept():
    """``value or default`` replaced an explicit 0 by the default: ``given`` keeps it."""
    assert _common.given(0, 1e-3) == 0 and _common.given(0.0, 30) == 0.0
    assert _common.given([], (1, 2)) == [] and _common.given(None, 5) == 5


# ------------------------------------------------------------------------------------ data


def test_absent_data_is_one_line_naming_the_folder(tmp_path, capsys):
    """Every data script alike (bench_nonconvex gave a traceback, expected_gain did not say
    that the folder does not exist nor how to set it)."""
    nowhere = tmp_path / "nowhere"
    messages = {}
    for name in DATA_SCRIPTS:
        out = tmp_path / name
        try:
            code, err = run(name, [], out, capsys, data=nowhere)
        except Exception as exc:  # noqa: BLE001 - a traceback is what is tested against
            messages[name] = repr(exc)
            continue
        assert "Traceback" not in err and not out.exists(), name
        messages[name] = code
    for name, message in messages.items():
        assert isinstance(message, str) and message.startswith("error: "), (name, message)
        assert "\n" not in message, (name, message)
        assert f"{nowhere / 'mq2008'} " in message or f"{nowhere / 'ordinal'} " in message, (
            name,
            message,
        )
        assert "not found at" in message or "does not exist" in message, (name, message)
        assert "(set --data or BMRM_DATA" in message, (name, message)


PARTITION = "0 qid:{q} 1:0.1 2:0.5\n1 qid:{q} 1:0.9 2:0.2\n2 qid:{q2} 1:0.3 2:0.7\n"


def letor4_folder(root, missing=None, malformed=None):
    folder = root / "mq2008"
    folder.mkdir(parents=True)
    for i in range(1, 6):
        if i == missing:
            continue
        text = PARTITION.format(q=10 * i, q2=10 * i + 1)
        if i == malformed:
            text = "2 qid:10 1:0.5 2:abc\n"
        (folder / f"S{i}.txt").write_text(text)
    return folder


@pytest.mark.parametrize("name", MQ2008_SCRIPTS)
@pytest.mark.parametrize("kind", ["missing", "malformed"])
def test_bad_partition_is_one_line_naming_the_file(name, kind, tmp_path, capsys):
    data = tmp_path / "data"
    folder = letor4_folder(data, **{kind: 3})
    out = tmp_path / "out"
    code, err = run(name, [], out, capsys, data=data)
    expected = {
        "missing": f"error: LETOR partition S3 not found: {folder / 'S3.txt'}",
        "malformed": f"error: {folder / 'S3.txt'}, line 1: ",
    }[kind]
    assert one_line_error(code).startswith(expected)
    assert "Traceback" not in err
    assert not out.exists()


def test_missing_medium_set_of_bench_oracles_fused(tmp_path, capsys):
    out = tmp_path / "out"
    medium = tmp_path / "medium.npz"
    argv = ["--only", "fused", "--medium", str(medium), "--out", str(out)]
    with pytest.raises(SystemExit) as exc:
        script("bench_oracles").main(argv)
    assert one_line_error(exc.value.code).startswith(f"error: {medium} not found (--medium)")
    assert not out.exists()


# -------------------------------------------------------------------------------- writing


class Unprintable:
    def __str__(self):
        raise RuntimeError("cannot format")


def test_write_csv_replaces_the_file_only_when_complete(tmp_path):
    path = tmp_path / "results.csv"
    _common.write_csv(path, [{"a": 1, "b": 2}])
    before = path.read_bytes()
    rows = [{"a": i, "b": i} for i in range(1000)] + [{"a": Unprintable(), "b": 0}]
    with pytest.raises(RuntimeError, match="cannot format"):
        _common.write_csv(path, rows)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["results.csv"]  # no temporary file left


@pytest.fixture
def seed_examples(monkeypatch):
    """experiments/seed_examples.py with no checks to compute (a run takes no time)."""
    module = script("seed_examples")
    for seed in ("seed_000", "seed_001", "seed_002", "seed_003", "seed_004"):
        monkeypatch.setattr(module, seed, lambda: [])
    monkeypatch.setattr(module, "other_conventions", lambda: [])
    return module


def test_failed_rerun_keeps_the_earlier_results(seed_examples, tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    earlier = {"results.csv": b"seed,quantity\r\n000,earlier\r\n", "results.md": b"# earlier\n"}
    for file, content in earlier.items():
        (out / file).write_bytes(content)

    def fail(*args):
        raise RuntimeError("the report fails")

    monkeypatch.setattr(seed_examples, "markdown_table", fail)
    with pytest.raises(RuntimeError, match="the report fails"):
        seed_examples.main(["--out", str(out)])
    assert {p.name: p.read_bytes() for p in out.iterdir()} == earlier


def test_failed_run_removes_the_folders_it_created_empty(seed_examples, tmp_path, monkeypatch):
    out = tmp_path / "new" / "out"

    def fail(path, rows):
        raise OSError(f"{path}: disk full")

    monkeypatch.setattr(seed_examples, "write_csv", fail)
    with pytest.raises(OSError, match="disk full"):
        seed_examples.main(["--out", str(out)])
    assert list(tmp_path.iterdir()) == []

"""``experiments/letor.py --merge``: runs over disjoint folds merged into one run's report."""

import csv
import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.experiments._quick import REPO, real_data, run_quick

# the columns of results.csv that time a fit; every other cell must agree
TIMING = {"fit_seconds"}
TIMED_MEASURES = {"refit_seconds"}


LOSSES_GRID = ("--losses", "ordinal", "squared", "ndcg-pairs", "--grid", "k=5,10")


def letor_module():
    """experiments/letor.py as a module (its folder on sys.path for ``_common``)."""
    folder = str(REPO / "experiments")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(
        "letor_experiment", REPO / "experiments/letor.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def merge(*args) -> int:
    return letor_module().main(["--merge", *map(str, args)])


def rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def untimed(path: Path) -> list[dict]:
    """results.csv without its timings."""
    return [
        {k: ("t" if k in TIMING or r["measure"] in TIMED_MEASURES else v) for k, v in r.items()}
        for r in rows(path)
    ]


def untimed_md(text: str) -> str:
    """results.md with its timings masked: the wall time sentence, the last column ("fit s")
    of the test results table and the seconds (not the iterations) of the training-time
    section."""
    text = re.sub(r"Wall time [^\n]*", "Wall time", text)
    head, rest = text.split("## Test results", 1)
    results, rest = rest.split("## Per fold", 1)
    results = re.sub(r"\| [0-9.]+ \|$", "| t |", results, flags=re.M)
    middle, timing = rest.split("## Training time", 1)
    timing, *after = timing.split("\n## ", 1)  # the pairwise tests follow
    timing = re.sub(r"\d+\.\d+", "t", timing)
    return "".join(
        [head, "## Test results", results, "## Per fold", middle, "## Training time", timing]
        + ["\n## " + a for a in after]
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One quick MQ2008 run over Fold1 and Fold2, runs over each alone, and their merge; a
    structured loss with a grid of two settings beside the pairwise and squared losses."""
    data = real_data()
    base = tmp_path_factory.mktemp("letor_merge")
    for name, folds in (("both", ("1", "2")), ("f1", ("1",)), ("f2", ("2",))):
        extra = ("--folds", *folds, *LOSSES_GRID)
        run_quick("letor", base / name, data, extra=extra)
    assert merge(base / "f1", base / "f2", "--out", base / "merged") == 0
    return base


def test_merged_report_equals_one_run(runs, shared_data):
    """Fold1 and Fold2 fitted in one process, or in two merged: the same per-query rows, the
    same results.csv rows (timings aside), the same randomization p-values and the same
    results.md figures."""
    one, merged = runs / "both", runs / "merged"
    for name in ("per_query.csv", "per_query_lams.csv", "every_lam.csv"):
        assert (merged / name).read_bytes() == (one / name).read_bytes()
    # the loss tuned over a grid has several models per lam: not compared lam by lam
    assert {r["method"] for r in rows(one / "per_query_lams.csv")} == {"ordinal", "squared"}
    assert "## Test at every lam (no selection)" in (merged / "results.md").read_text()
    assert untimed(merged / "results.csv") == untimed(one / "results.csv")
    p_one = {(r["method"], r["measure"]): r["value"] for r in rows(one / "results.csv")}
    p_merged = {(r["method"], r["measure"]): r["value"] for r in rows(merged / "results.csv")}
    pooled = [k for k in p_one if k[1].startswith("p_vs_")]
    # four methods against each of squared and best feature, and two pairs of losses not
    # among those (ordinal and squared against ndcg-pairs), five measures each
    assert len(pooled) == 10 * 5
    assert {k: p_merged[k] for k in pooled} == {k: p_one[k] for k in pooled}
    md_one, md_merged = ((d / "results.md").read_text() for d in (one, merged))
    assert untimed_md(md_merged) == untimed_md(md_one)
    assert "Folds Fold1, Fold2; 313 pooled test queries" in md_merged
    assert "summed over the runs merged by `--merge` (f1, f2)" in md_merged
    assert "tuned on validation (2 combinations): `--grid k=5,10`" in md_merged
    assert "## Pairwise randomization tests among the losses" in md_merged
    # the masked text still holds the figures: the headline row of the ordinal loss
    (line,) = [ln for ln in untimed_md(md_one).splitlines() if ln.startswith("| ordinal |")][:1]
    assert re.search(r"\| 0\.\d{4} \|", line)
    for name in ("ndcg_at_k.png", "validation_lam.png", "folds.png"):
        assert (merged / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    record = json.loads((merged / "run.json").read_text())
    assert record["folds"] == [1, 2] and record["flips"] == 1000
    assert record["settings"] == json.loads((one / "run.json").read_text())["settings"]
    wall = sum(
        json.loads((runs / d / "run.json").read_text())["wall_seconds"] for d in ("f1", "f2")
    )
    assert record["wall_seconds"] == pytest.approx(wall)


def test_merge_of_runs_without_run_json(runs, shared_data, tmp_path, capsys):
    """Runs written before run.json existed: refused, or with --infer-settings merged from the
    settings their results.csv and results.md give, to the same rows as the recorded ones."""
    for name in ("f1", "f2"):
        shutil.copytree(runs / name, tmp_path / name)
        (tmp_path / name / "run.json").unlink()
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        merge(tmp_path / "f1", tmp_path / "f2", "--out", out)
    assert exc.value.code == 2
    assert "has no run.json" in capsys.readouterr().err
    assert not out.exists()
    assert merge(tmp_path / "f1", tmp_path / "f2", "--out", out, "--infer-settings") == 0
    merged = runs / "merged"
    assert (out / "results.csv").read_bytes() == (merged / "results.csv").read_bytes()
    assert (out / "per_query.csv").read_bytes() == (merged / "per_query.csv").read_bytes()
    assert untimed_md((out / "results.md").read_text()) == untimed_md(
        (merged / "results.md").read_text()
    )
    inferred = json.loads((out / "run.json").read_text())
    assert inferred["settings"] == json.loads((merged / "run.json").read_text())["settings"]


def test_merge_with_a_run_older_than_the_every_lam_values(runs, shared_data, tmp_path):
    """A run without per_query_lams.csv merges to the same report without the selection-free
    comparison (neither its section nor its files)."""
    for name in ("f1", "f2"):
        shutil.copytree(runs / name, tmp_path / name)
    (tmp_path / "f2" / "per_query_lams.csv").unlink()
    out = tmp_path / "out"
    assert merge(tmp_path / "f1", tmp_path / "f2", "--out", out) == 0
    merged = runs / "merged"
    assert (out / "results.csv").read_bytes() == (merged / "results.csv").read_bytes()
    assert not (out / "per_query_lams.csv").exists() and not (out / "every_lam.csv").exists()
    md = (merged / "results.md").read_text()
    head, section = md.split("## Test at every lam (no selection)")
    without = head + "## " + section.split("\n## ", 1)[1]
    assert untimed_md((out / "results.md").read_text()) == untimed_md(without)


def edit_record(run: Path, **changes) -> None:
    record = json.loads((run / "run.json").read_text())
    for key, value in changes.items():
        if key in record["settings"]:
            record["settings"][key] = value
        else:
            record[key] = value
    (run / "run.json").write_text(json.dumps(record))


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("tol", 1e-4, "the runs differ in tol: "),
        ("lams", [0.01], "the runs differ in lams: "),
        ("losses", ["ordinal"], "the runs differ in losses: "),
        ("grid", [["k=5", "ties=pairs"]], "the runs differ in grid: "),
        ("method", "ocas", "the runs differ in method: "),
        ("max_iter", 2000, "the runs differ in max_iter: "),
        ("dataset", "trec-news-2018", "the runs differ in dataset: "),
        ("pair_cost", "linear", "the runs differ in pair_cost: "),
        ("time_repeats", 2, "the runs differ in time_repeats: "),
        ("flips", 200, "different numbers of sign flips ([200, 1000]): give --flips N"),
    ],
)
def test_runs_with_other_settings_are_refused(
    runs, shared_data, tmp_path, capsys, setting, value, message
):
    shutil.copytree(runs / "f2", tmp_path / "f2")
    edit_record(tmp_path / "f2", **{setting: value})
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        merge(runs / "f1", tmp_path / "f2", "--out", out)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_grid_compared_as_its_union(runs, shared_data, tmp_path):
    """Two spellings of one union of grids are the same setting."""
    for name, grid in (("f1", [["k=5,10"]]), ("f2", [["k=5"], ["k=10"]])):
        shutil.copytree(runs / name, tmp_path / name)
        edit_record(tmp_path / name, grid=grid)
    letor = letor_module()
    loaded = [letor.load_run(tmp_path / name, infer=False) for name in ("f1", "f2")]
    assert letor.merge_runs(loaded, None)["folds"] == [1, 2]


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing folder", "nope is not a folder"),
        ("no per_query.csv", "lacks per_query.csv (not a finished letor.py run)"),
        ("fold twice", "Fold1 is in two runs: "),
        ("folds disagree", "results.csv holds folds [2], its record says [3]"),
        ("lam values of another fold", "per_query_lams.csv holds folds [3], its record says [2]"),
        ("lam values of other queries", "per_query_lams.csv: squared at lam 0.1 has other Fold2"),
        ("out is a run", "is one of the runs given to --merge"),
        ("no out", "--merge needs --out OUT_DIR"),
        ("--tol", "--merge takes finished runs; --tol only apply to fitting"),
        ("--losses", "--losses only apply to fitting"),
        ("--quick", "--quick only apply to fitting"),
        ("--data", "--data only apply to fitting"),
        ("--time-repeats", "--time-repeats only apply to fitting"),
        ("--flips", "--flips must be >= 1; got 0"),
    ],
)
def test_bad_merges_are_argument_errors(runs, shared_data, tmp_path, capsys, case, message):
    """Each refusal is an argument error naming the problem, and nothing is written."""
    out = tmp_path / "out"
    shutil.copytree(runs / "f2", tmp_path / "f2")
    given = [runs / "f1", tmp_path / "f2"]
    extra = ["--out", out]
    if case == "missing folder":
        given[1] = tmp_path / "nope"
    elif case == "no per_query.csv":
        (tmp_path / "f2" / "per_query.csv").unlink()
    elif case == "fold twice":
        given = [runs / "f1", runs / "both"]
    elif case == "folds disagree":
        edit_record(tmp_path / "f2", folds=[3])
    elif case == "lam values of another fold":
        path = tmp_path / "f2" / "per_query_lams.csv"
        path.write_text(path.read_text().replace(",Fold2,", ",Fold3,"))
    elif case == "lam values of other queries":
        path = tmp_path / "f2" / "per_query_lams.csv"
        lines = path.read_text().splitlines(keepends=True)
        last = max(i for i, ln in enumerate(lines) if ln.startswith("squared,Fold2,0.1,"))
        lines[last] = lines[last].replace(lines[last].split(",")[3], "99999999", 1)
        path.write_text("".join(lines))
    elif case == "out is a run":
        extra = ["--out", tmp_path / "f2"]
    elif case == "no out":
        extra = []
    elif case == "--data":
        extra += [case, str(real_data())]
    elif case == "--losses":
        extra += [case, "ordinal"]
    elif case == "--quick":
        extra += [case]
    else:
        extra += [case, {"--tol": "1e-4", "--time-repeats": "0", "--flips": "0"}[case]]
    before = sorted(p.name for p in (tmp_path / "f2").iterdir())
    with pytest.raises(SystemExit) as exc:
        merge(*given, *extra)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()
    assert sorted(p.name for p in (tmp_path / "f2").iterdir()) == before


def test_flips_given_to_the_merge(runs, shared_data, tmp_path):
    """Runs that used other flip counts merge with --flips N, the tests redone with N flips:
    the smallest p of 200 flips is 1/201 (file order against the squared loss)."""
    shutil.copytree(runs / "f2", tmp_path / "f2")
    edit_record(tmp_path / "f2", flips=200)
    out = tmp_path / "out"
    assert merge(runs / "f1", tmp_path / "f2", "--out", out, "--flips", "200") == 0
    assert json.loads((out / "run.json").read_text())["flips"] == 200
    assert "(200 sign flips, two-sided)" in (out / "results.md").read_text()
    p = {(r["method"], r["measure"]): float(r["value"]) for r in rows(out / "results.csv")}
    assert p["constant", "p_vs_squared:MAP"] == pytest.approx(1 / 201)

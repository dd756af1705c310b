"""``experiments/expected_gain.py --quick`` on a generated LETOR 3.0 folder and on MQ2008."""

import csv
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from tests.experiments._quick import REPO, real_data

MEASURES = ("NDCG@1", "NDCG@5", "NDCG@10")
LOSSES = ("cosine", "listnet", "listwise_squared")


def write_letor3(root: Path, seed: int = 0, d: int = 5) -> None:
    """Fold1..Fold5 with train / vali / test files of graded, feature-driven labels."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    next_qid = 1
    for fold in range(1, 6):
        folder = root / f"Fold{fold}"
        folder.mkdir(parents=True)
        for split, n_queries in (("train", 10), ("vali", 5), ("test", 5)):
            lines = []
            for _ in range(n_queries):
                m = int(rng.integers(6, 11))
                X = rng.uniform(size=(m, d))
                y = np.digitize(X @ w + 0.3 * rng.normal(size=m), np.quantile(X @ w, [0.5, 0.8]))
                for label, x in zip(y, X, strict=True):
                    features = " ".join(f"{j + 1}:{v:.6f}" for j, v in enumerate(x))
                    lines.append(f"{label} qid:{next_qid} {features} #docid = d{len(lines)}")
                next_qid += 1
            (folder / f"{split}.txt").write_text("\n".join(lines) + "\n")


def run(args, out: Path):
    cmd = [sys.executable, "experiments/expected_gain.py", "--out", str(out), *map(str, args)]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def letor3_run(tmp_path_factory):
    data = tmp_path_factory.mktemp("letor3") / "SYN"
    write_letor3(data)
    out = tmp_path_factory.mktemp("out")
    proc = run([data, "--quick", "--folds", 1, 2, 3, 4, 5, "--flips", 200], out)
    assert proc.returncode == 0, proc.stderr
    return out


def test_files_and_table(letor3_run):
    out = letor3_run
    for name in ("results.csv", "per_query.csv", "results.md", "folds.png"):
        assert (out / name).stat().st_size > 0
    text = (out / "results.md").read_text()
    table = {
        line.split("|")[1].strip(): line.split("|")[2:-1]
        for line in text.splitlines()
        if line.startswith(("| Better", "| Same", "| Worse"))
    }
    counts = {k: int(v[0]) for k, v in table.items()}
    assert sum(counts.values()) == 9  # 3 losses × 3 measures on the one data set


def test_selection_and_test_figures_are_consistent(letor3_run):
    """The selected setting maximises validation NDCG@10; its test mean is the per-query mean
    of per_query.csv; the verdicts follow p < 0.05 and the sign of the difference."""
    rows = read_csv(letor3_run / "results.csv")
    per_query = read_csv(letor3_run / "per_query.csv")
    grid = [r for r in rows if r["fold"] != "mean"]
    settings = defaultdict(dict)
    for r in grid:
        key = (r["fold"], r["loss"], r["scorer"], r["lam"], r["alpha"], r["eps"])
        settings[key][r["split"], r["measure"]] = float(r["value"])
    fold_means = defaultdict(list)
    for fold in map(str, range(1, 6)):
        for loss in LOSSES:
            n_settings = {"cosine": 1, "listnet": 2, "listwise_squared": 1}[loss]
            for scorer in ("linear", "expected_gain"):
                cands = {k: v for k, v in settings.items() if k[:3] == (fold, loss, scorer)}
                assert len(cands) == n_settings * (1 if scorer == "linear" else 2)  # ε 0.8, 1
                best = max(v["vali", "NDCG@10"] for v in cands.values())
                chosen = [v for v in cands.values() if v["vali", "NDCG@10"] == best]
                mine = [
                    r
                    for r in per_query
                    if (r["fold"], r["loss"], r["scorer"]) == (fold, loss, scorer)
                ]
                assert len(mine) == 5
                for measure in MEASURES:
                    mean = np.mean([float(r[measure]) for r in mine])
                    assert any(
                        c["test", measure] == pytest.approx(mean, abs=1e-12) for c in chosen
                    )
                    fold_means[loss, scorer, measure].append(mean)
    for r in (r for r in rows if r["fold"] == "mean"):
        lin = np.mean(fold_means[r["loss"], "linear", r["measure"]])
        eg = np.mean(fold_means[r["loss"], "expected_gain", r["measure"]])
        assert float(r["value"]) == pytest.approx(eg - lin, abs=1e-12)
        p = float(r["p"])
        assert 0 < p <= 1
        expected = "same" if p >= 0.05 else ("better" if eg > lin else "worse")
        assert r["verdict"] == expected


def test_rejects_a_folder_of_neither_layout(tmp_path):
    proc = run([tmp_path, "--quick"], tmp_path / "out")
    assert proc.returncode != 0
    assert "neither a LETOR 4.0 folder" in proc.stderr


def test_quick_on_mq2008(tmp_path):
    data = real_data()
    proc = run(["--data", data, "--quick", "--folds", 1, "--flips", 100], tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = [r for r in read_csv(tmp_path / "results.csv") if r["fold"] == "1"]
    assert {(r["loss"], r["scorer"]) for r in rows} == {
        (loss, scorer) for loss in LOSSES for scorer in ("linear", "expected_gain")
    }
    values = np.array([float(r["value"]) for r in rows])
    assert np.all((values >= 0) & (values <= 1))
    # the ranking by expected gain is not the linear one: at least one figure differs
    assert len({round(v, 12) for v in values}) > 1


def test_clip_training_with_eps_one_trains_the_unclipped_model(tmp_path):
    """ε = 1 never clips, so --clip-training must reproduce the default run's figures."""
    data = tmp_path / "SYN"
    write_letor3(data, seed=1)
    common = [data, "--quick", "--losses", "listnet", "--alphas", 1, "--flips", 50]
    runs = {}
    for name, extra in (("plain", []), ("clip", ["--clip-training"])):
        proc = run([*common, "--epsilons", 1, 0.6, *extra], tmp_path / name)
        assert proc.returncode == 0, proc.stderr
        runs[name] = {
            (r["fold"], r["scorer"], r["eps"], r["split"], r["measure"]): float(r["value"])
            for r in read_csv(tmp_path / name / "results.csv")
            if r["fold"] != "mean"
        }
    assert runs["plain"].keys() == runs["clip"].keys()
    for key, value in runs["plain"].items():
        if key[2] != "0.6":
            assert runs["clip"][key] == pytest.approx(value, abs=1e-12), key

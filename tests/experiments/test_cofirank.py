"""``experiments/cofirank.py`` and ``experiments/bench_cofirank.py`` end to end
(``--quick``, synthetic data)."""

import csv
import subprocess
import sys

from tests.experiments._quick import REPO, run_quick


def test_cofirank_quick_run(tmp_path):
    rows = run_quick(
        "cofirank",
        tmp_path,
        extra=("--synthetic", "--protocols", "weak", "strong", "--n-train", "10", "40"),
    )
    methods = ("popularity", "ndcg", "ordinal", "squared")
    weak = [(r["protocol"], r["n_train"], r["loss"]) for r in rows if r["protocol"] == "weak"]
    assert weak == [("weak", n, loss) for n in ("10", "40") for loss in methods]
    strong = [(r["n_train"], r["loss"]) for r in rows if r["protocol"] == "strong"]
    assert strong == [(n, "popularity") for n in ("10", "40")] + [
        (n, loss) for loss in methods[1:] for n in ("10", "40")
    ]
    # the strong protocol trains once per method for every N: the same training time on
    # each N's row, and the users tested at N = 40 are those of N = 10 with 50 ratings
    for loss in methods[1:]:
        fits = [r for r in rows if r["protocol"] == "strong" and r["loss"] == loss]
        assert fits[0]["train_cpu_s"] == fits[1]["train_cpu_s"] != ""
    users = {r["n_train"]: int(r["test_users"]) for r in rows if r["protocol"] == "strong"}
    assert 0 < users["40"] < users["10"]
    for r in rows:
        assert 0.0 <= float(r["ndcg_at_10"]) <= 1.0
        assert int(r["test_users"]) > 0
        assert r["loss"] == "popularity" or float(r["lam"]) > 0
    md = (tmp_path / "results.md").read_text()
    assert "## weak generalisation" in md and "## strong generalisation" in md
    assert "0.6400 / 0.6307 / 0.6076" in md  # the paper's CofiRank-NDCG row beside


def test_cofirank_adds_a_method_to_the_results_file(tmp_path):
    # a second run with another loss replaces its own rows (popularity's) and keeps the
    # other methods' rows of the same data set in the tidy file
    run_quick("cofirank", tmp_path, extra=("--synthetic", "--losses", "ordinal"))
    rows = run_quick("cofirank", tmp_path, extra=("--synthetic", "--losses", "ordinal-squared"))
    assert [r["loss"] for r in rows] == ["popularity", "ordinal-squared"]
    with open(tmp_path / "cofirank.csv", newline="") as fh:
        tidy = list(csv.DictReader(fh))
    assert sorted(r["method"] for r in tidy) == [
        "CofiRank-ordinal", "CofiRank-ordinal-squared", "popularity"
    ]  # fmt: skip
    assert all(0.0 <= float(r["ndcg_at_10"]) <= 1.0 for r in tidy)


def test_bench_cofirank_quick_run(tmp_path):
    rows = run_quick("bench_cofirank", tmp_path, extra=("--memory",))
    assert [int(r["outer"]) for r in rows] == [1, 2]
    objective = [float(r["objective"]) for r in rows]
    assert objective[1] <= objective[0]
    for r in rows:
        assert float(r["cpu_seconds"]) > 0 and 0.0 <= float(r["ndcg10"]) <= 1.0
    assert "memory: traced peak" in (tmp_path / "results.md").read_text()
    with open(tmp_path / "bench_cofirank.csv", newline="") as fh:
        before = list(csv.DictReader(fh))
    # a memory-only run replaces the run's memory row and keeps its outer iterations
    (tmp_path / "results.csv").unlink()
    proc = subprocess.run(
        [sys.executable, "experiments/bench_cofirank.py", "--quick", "--out", str(tmp_path),
         "--memory-only"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "results.csv").exists()  # no fit was timed
    assert "memory: traced peak" in (tmp_path / "results.md").read_text()
    with open(tmp_path / "bench_cofirank.csv", newline="") as fh:
        after = list(csv.DictReader(fh))
    assert [r["phase"] for r in after if r["phase"] != "memory"] == [
        r["phase"] for r in before if r["phase"] != "memory"
    ]
    assert [r for r in after if r["phase"] == "outer"] == [
        r for r in before if r["phase"] == "outer"
    ]
    memory = [r for r in after if r["phase"] == "memory"]
    assert len(memory) == 1 and float(memory[0]["peak_ratio"]) > 0

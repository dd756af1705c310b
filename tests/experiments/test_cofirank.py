"""``experiments/cofirank.py`` and ``experiments/bench_cofirank.py`` end to end
(``--quick``, synthetic data)."""

from tests.experiments._quick import run_quick


def test_cofirank_quick_run(tmp_path):
    rows = run_quick("cofirank", tmp_path, extra=("--synthetic", "--protocols", "weak", "strong"))
    methods = ("popularity", "ndcg", "ordinal", "squared")
    assert [(r["protocol"], r["loss"]) for r in rows] == [
        (p, loss) for p in ("weak", "strong") for loss in methods
    ]
    for r in rows:
        assert 0.0 <= float(r["ndcg_at_10"]) <= 1.0
        assert int(r["test_users"]) > 0
        assert r["loss"] == "popularity" or float(r["lam"]) > 0
    md = (tmp_path / "results.md").read_text()
    assert "## weak generalisation" in md and "## strong generalisation" in md
    assert "0.6400 / 0.6307 / 0.6076" in md  # the paper's CofiRank-NDCG row beside


def test_bench_cofirank_quick_run(tmp_path):
    rows = run_quick("bench_cofirank", tmp_path, extra=("--memory",))
    assert [int(r["outer"]) for r in rows] == [1, 2]
    objective = [float(r["objective"]) for r in rows]
    assert objective[1] <= objective[0]
    for r in rows:
        assert float(r["cpu_seconds"]) > 0 and 0.0 <= float(r["ndcg10"]) <= 1.0
    assert "memory: traced peak" in (tmp_path / "results.md").read_text()

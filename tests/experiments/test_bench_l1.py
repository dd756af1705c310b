"""``experiments/bench_l1.py`` end to end on the shared MQ2008 data (``--quick``)."""

from tests.experiments._quick import real_data, run_quick


def test_quick_run(tmp_path, shared_data):
    data = real_data()
    rows = run_quick("bench_l1", tmp_path, data, extra=("--methods", "bmrm", "inout"))
    assert [(r["loss"], r["method"]) for r in rows] == [
        ("ordinal", "bmrm"),
        ("ordinal", "inout"),
        ("ndcg", "bmrm"),
        ("ndcg", "inout"),
    ]
    for r in rows:
        assert r["all_converged"] == "True"
        # both methods certify the ordinal fit to tol 1e-3 of the same convex objective
        if r["loss"] == "ordinal":
            assert 0.0 <= float(r["max_rel_objective"]) <= 2e-3
        assert float(r["master_seconds"]) + float(r["oracle_seconds"]) <= float(r["total_seconds"])
    first = [r for r in rows if r["method"] == "bmrm"]
    assert all(float(r["ratio_total"]) == 1.0 for r in first)
    md = (tmp_path / "results.md").read_text()
    assert "regularizer l1" in md and "| ordinal | 0.05 | inout |" in md

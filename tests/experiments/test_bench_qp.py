"""The master-problem benchmark runs end to end and its solvers agree."""

from tests.experiments._quick import run_quick


def test_bench_qp_quick(tmp_path):
    rows = run_quick("bench_qp", tmp_path)
    solvers = {r["solver"] for r in rows}
    assert solvers == {"active_set", "pair_steps", "clarabel", "cvxpy"}
    cases = {r["case"] for r in rows}
    assert any("ordinal fit" in c for c in cases) and any("ndcg fit" in c for c in cases)
    for r in rows:
        if r["solver"] == "active_set":
            # exact: certified within the KKT tolerance and never above the reference
            assert float(r["fw_gap"]) <= 1e-9 * float(r["scale"])
            assert float(r["rel_excess"]) <= 1e-9

"""``experiments/bench_l1.py`` end to end on the shared MQ2008 data (``--quick``)."""

import sys

import numpy as np
import pytest

from tests.experiments._quick import REPO, real_data, run_quick

sys.path.insert(0, str(REPO / "experiments"))
import bench_l1  # noqa: E402


def test_cumulative_seconds_add_up_the_concave_convex_subproblems():
    """A plain fit's history is cumulative; the procedure's joins its subproblems' (each
    cumulative within its own, numbered by ``outer``)."""
    assert bench_l1.cumulative(
        {"master_seconds": np.array([0.1, 0.3, 0.6])}, "master_seconds"
    ) == (pytest.approx(0.6))
    history = {
        "master_seconds": np.array([0.1, 0.2, 0.05, 0.15, 0.4, 0.5]),
        "outer": np.array([0, 0, 1, 1, 2, 2]),
    }
    assert bench_l1.cumulative(history, "master_seconds") == pytest.approx(0.2 + 0.15 + 0.5)


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

"""End-to-end run of ``experiments/convergence.py --quick`` on the shared data."""

from collections import defaultdict

import numpy as np
import pytest

from tests.experiments._quick import real_data, run_quick

COLUMNS = (
    "dataset",
    "loss",
    "lam",
    "iteration",
    "gap",
    "rel_gap",
    "objective",
    "best_objective",
    "lower_bound",
    "elapsed",
    "oracle_seconds",
    "master_seconds",
)


@pytest.fixture(scope="module")
def convergence_run(tmp_path_factory):
    data = real_data()
    out = tmp_path_factory.mktemp("convergence")
    rows = run_quick("convergence", out, data)
    return out, rows


def runs_of(rows):
    runs = defaultdict(list)
    for r in rows:
        runs[r["dataset"], r["loss"], r["lam"]].append(r)
    return runs


def test_files_and_columns(convergence_run, shared_data):
    out, rows = convergence_run
    assert (out / "results.md").stat().st_size > 0
    for name in ("gap_mq2008.png", "gap_synthetic.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert rows and set(COLUMNS) <= set(rows[0])
    runs = runs_of(rows)
    assert {(d.split()[0], loss) for d, loss, _ in runs} == {
        ("MQ2008", "ordinal"),
        ("MQ2008", "hinge"),
        ("synthetic", "ordinal"),
        ("synthetic", "hinge"),
    }
    md = (out / "results.md").read_text()
    assert "it to 1e-3" in md and "ordinal" in md and "hinge" in md


def test_gaps_are_certificates(convergence_run, shared_data):
    _, rows = convergence_run
    for key, run in runs_of(rows).items():
        it = np.array([int(r["iteration"]) for r in run])
        gap = np.array([float(r["gap"]) for r in run])
        rel = np.array([float(r["rel_gap"]) for r in run])
        obj = np.array([float(r["objective"]) for r in run])
        best = np.array([float(r["best_objective"]) for r in run])
        lower = np.array([float(r["lower_bound"]) for r in run])
        elapsed = np.array([float(r["elapsed"]) for r in run])
        oracle = np.array([float(r["oracle_seconds"]) for r in run])
        master = np.array([float(r["master_seconds"]) for r in run])
        np.testing.assert_array_equal(it, np.arange(1, it.size + 1))
        # the best objective is the running minimum of the evaluated objectives
        np.testing.assert_allclose(best, np.minimum.accumulate(obj), rtol=1e-12)
        np.testing.assert_allclose(gap, best - lower, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(rel, gap / best, rtol=1e-9)
        assert np.all(gap >= -1e-9 * best), key
        assert np.all(np.diff(gap) <= 1e-12), key  # best J falls, the lower bound rises
        assert np.all(np.diff(elapsed) >= 0) and np.all(oracle + master <= elapsed + 1e-6)
        assert rel[-1] <= 1e-3, key  # the quick run's tolerance
        assert rel[0] > 1e-3, key

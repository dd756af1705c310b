"""End-to-end run of ``experiments/ordinal.py --quick`` on the shared ordinal benchmarks."""

import csv
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from tests.experiments._quick import real_data, run_quick

METHODS = {
    "bmrm ordinal 0/1",
    "bmrm ordinal lin",
    "bmrm squared",
    "mord AT",
    "mord IT",
    "mord ridge",
    "mord LAD",
}


@pytest.fixture(scope="module")
def ordinal_run(tmp_path_factory):
    data = real_data()
    out = tmp_path_factory.mktemp("ordinal")
    rows = run_quick("ordinal", out, data)
    return out, data, rows


def labels(data: Path, name: str) -> np.ndarray:
    with open(data / "ordinal" / f"{name}.csv", newline="") as fh:
        reader = csv.reader(fh)
        next(reader)
        return np.array([float(row[0]) for row in reader])


def test_files_written(ordinal_run, shared_data):
    out, _, _ = ordinal_run
    for name in ("results.csv", "results.md", "ordinal.png"):
        assert (out / name).stat().st_size > 0
    assert (out / "ordinal.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "results.md").read_text()
    assert "## Test MAE" in md and "## Test accuracy" in md
    assert md.count("**") >= 8  # a bold best in each of the 2 x 2 data-set rows


def test_one_row_per_dataset_method_split(ordinal_run, shared_data):
    _, _, rows = ordinal_run
    keys = {(r["dataset"], r["method"], r["split"]) for r in rows}
    assert len(keys) == len(rows)
    datasets = {r["dataset"] for r in rows}
    assert len(datasets) >= 1
    assert {r["method"] for r in rows} == METHODS
    assert len(rows) == len(datasets) * len(METHODS) * 2


def test_chu_training_sizes(ordinal_run, shared_data):
    _, _, rows = ordinal_run
    chu = {"machine_ord": 150, "stock_ord": 600}
    for r in rows:
        if r["dataset"] in chu:
            assert int(r["n_train"]) == chu[r["dataset"]]
        assert int(r["n_train"]) + int(r["n_test"]) == int(r["n_rows"])


def test_values_sane(ordinal_run, shared_data):
    _, data, rows = ordinal_run
    mae = defaultdict(list)
    for r in rows:
        y = labels(data, r["dataset"])
        assert int(r["n_levels"]) == len(np.unique(y))
        assert 0.0 <= float(r["mae"]) <= y.max() - y.min()
        assert 0.0 <= float(r["accuracy"]) <= 1.0
        assert float(r["lam"]) > 0
        mae[(r["dataset"], r["method"])].append(float(r["mae"]))
    for (name, method), values in mae.items():
        y = labels(data, name)
        # predicting the median label for every row (in sample) is a floor any model beats
        trivial = np.mean(np.abs(y - np.median(y)))
        assert np.mean(values) < trivial, (name, method)

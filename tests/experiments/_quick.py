"""Running an experiment script's ``--quick`` path end to end, as the tests here do."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def real_data() -> Path:
    """The shared data folder, or skip the calling test with the reason."""
    from tests._data import data_dir, missing_data_reason

    data = data_dir()
    if data is None:
        pytest.skip(missing_data_reason())
    return data


def run_quick(
    script: str, out: Path, data: Path | None = None, timeout: int = 300, extra: tuple = ()
) -> list:
    """Run ``experiments/<script>.py --quick --out out [--data data] [extra...]``; rows of
    its CSV."""
    args = [sys.executable, f"experiments/{script}.py", "--quick", "--out", str(out), *extra]
    if data is not None:
        args += ["--data", str(data)]
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    with open(out / "results.csv", newline="") as fh:
        return list(csv.DictReader(fh))

"""Shared plumbing for the experiment scripts: data location, output folder, tidy results.

Scripts read real data from ``--data`` (default: ``$BMRM_DATA``, else ``../shared/data``
beside the checkout) and write a CSV of raw results, a Markdown table and PNG plots into
``--out`` (default ``results/<script name>``).
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from bmrm.io import data_dir

REPO = Path(__file__).resolve().parents[1]


def base_parser(name: str, description: str) -> argparse.ArgumentParser:
    """An argument parser with ``--data``, ``--out`` and ``--quick`` (the tiny test path)."""
    parser = argparse.ArgumentParser(prog=f"python experiments/{name}.py", description=description)
    parser.add_argument(
        "--data",
        type=Path,
        default=data_dir(existing=False),
        help="folder holding the shared data sets (default: $BMRM_DATA or ../shared/data)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=REPO / "results" / name,
        help="output folder for CSV, Markdown and PNG files",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a tiny configuration that runs end to end in seconds"
    )
    return parser


def require(path: Path, what: str) -> Path:
    """Exit with a one-line reason when a data file or folder is missing."""
    if not path.exists():
        sys.exit(f"error: {what} not found at {path} (set --data or BMRM_DATA)")
    return path


def progress(message: str) -> None:
    """One progress line on stderr, with the time of day."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def write_csv(path: Path, rows: Sequence[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fields: list[str] = []
    for row in rows:
        fields.extend(k for k in row if k not in fields)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def markdown_table(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.4f}"
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)

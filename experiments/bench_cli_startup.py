"""Start-up of the ``bmrm`` command: ``bmrm --help`` and ``bmrm predict`` of a small file.

    python experiments/bench_cli_startup.py [--data DIR] [--baseline SRC] [--repeats 7]
                                            [--out results/bench_cli_startup]

Each command runs as ``python -m bmrm ...`` in a fresh interpreter whose ``PYTHONPATH`` is
a bmrm source tree: this checkout, and with ``--baseline`` another one (an older commit,
``git worktree add``), timed in the same run, interleaved, for the ratio of the two.
``python -c pass`` is timed too (the interpreter's own start-up). The data are MQ2008's
``S1.txt`` (training, once per source, untimed: it also fills numba's cache, so every
timed run is warm) and ``S5.txt`` (2,874 rows, predicted). Reported per source and command:
the median over ``--repeats`` runs of the wall-clock and CPU seconds (user + system of the
child), and the machine's one-minute load average at the start (wall times mean little when
it exceeds the number of CPUs).

Writes ``results.csv`` (one row per run) and ``results.md`` (the medians).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, write_csv, write_text  # noqa: E402

HERE = Path(__file__).resolve().parent.parent
COMMANDS = ("python -c pass", "bmrm --help", "bmrm predict")


def _run(argv: list[str], source: Path, cwd: str) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one child process (which must succeed)."""
    env = {**os.environ, "PYTHONPATH": str(source)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=HERE.parent / "shared" / "data" / "mq2008")
    parser.add_argument("--baseline", type=Path, default=None, help="another bmrm source tree")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "bench_cli_startup")
    args = parser.parse_args()
    train, test = args.data / "S1.txt", args.data / "S5.txt"
    for path in (train, test):
        if not path.is_file():
            raise SystemExit(f"{path}: no such file (MQ2008's S1.txt and S5.txt are needed)")
    sources = {"this": HERE}
    if args.baseline is not None:
        sources["baseline"] = args.baseline.resolve()
    python = sys.executable
    rows = []
    with tempfile.TemporaryDirectory() as work:
        argv = {}
        for name, source in sources.items():
            model = os.path.join(work, f"{name}.json")
            # untimed: the model each source reads, and a warm numba cache
            _run([python, "-m", "bmrm", "train", str(train), model, "--quiet"], source, work)
            argv[name] = {
                "python -c pass": [python, "-c", "pass"],
                "bmrm --help": [python, "-m", "bmrm", "--help"],
                "bmrm predict": [
                    python, "-m", "bmrm", "predict", str(test), model, os.path.join(work, "p.txt")
                ],
            }  # fmt: skip
        load = os.getloadavg()[0]
        for repeat in range(args.repeats):
            for command in COMMANDS:
                for name, source in sources.items():
                    wall, cpu = _run(argv[name][command], source, work)
                    rows.append(
                        {"source": name, "command": command, "repeat": repeat, "wall": wall,
                         "cpu": cpu}
                    )  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "results.csv", rows)
    table = []
    for command in COMMANDS:
        medians = {}
        for name in sources:
            runs = [r for r in rows if r["source"] == name and r["command"] == command]
            medians[name] = (
                statistics.median(r["wall"] for r in runs),
                statistics.median(r["cpu"] for r in runs),
            )
            table.append([command, name, f"{medians[name][0]:.3f}", f"{medians[name][1]:.3f}"])
        if "baseline" in medians:
            ratio = [medians["this"][i] / medians["baseline"][i] for i in (0, 1)]
            table.append([command, "this / baseline", f"{ratio[0]:.2f}", f"{ratio[1]:.2f}"])
    text = (
        f"# bmrm start-up\n\nMedians of {args.repeats} runs; load average {load:.1f} on "
        f"{os.cpu_count()} CPUs at the start.\n\n"
        + markdown_table(["command", "source", "wall s", "CPU s"], table)
        + "\n"
    )
    write_text(args.out / "results.md", text)
    print(text)


if __name__ == "__main__":
    main()

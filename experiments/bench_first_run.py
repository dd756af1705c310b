"""First-run benchmark: compile time, cache loading and import time, as a new user meets them.

    python experiments/bench_first_run.py [--losses ordinal ndcg ...] [--repeats 1]
                                          [--no-demo] [--out results/bench_first_run]

Every measurement runs in a fresh interpreter (``sys.executable``), so nothing compiled or
imported by this script can help it:

1. ``import bmrm``: wall-clock time of the import alone (median of ``--repeats`` + 2 processes).
2. Per built-in loss (:data:`CONFIGS`), on the demo's data (:func:`bmrm.demo.make_ranking_data`,
   2,000 queries of 40 documents, 50 features, training on 80 %; hinge and logistic on the
   labels binarised at 2; preference on all graded pairs; NDCG@10 with each rule for ties,
   and with c truncated at k), lam = 0.01, tol = 1e-3, at most 300 iterations (plain BMRM
   reaches that cap on some NDCG and NERU fits):

   * ``cold``: the first fit in a process whose ``NUMBA_CACHE_DIR`` is a new empty folder;
   * ``second``: a second, identical fit in that same process;
   * ``warm``: the first fit in a new process with the cache the cold process left;
   * ``warmed up``: the first fit in a new process whose empty cache ``python -m bmrm
     warmup`` filled beforehand (its seconds reported as ``warmup``).

   Also recorded: the seconds numba spent compiling during the cold fit (wall-clock time
   inside numba's compiler, from its ``numba:compile`` events; a loaded cache entry is not
   compiled and not counted), per compiled function the CPU seconds of its own compilation
   in the fit's process (callees excluded; ``kernels.csv``, the largest in ``results.md``),
   the objective, the iterations and oracle calls of each fit, the CPU seconds of the whole
   process (``process_cpu_seconds``), and the machine's load average over the last minute
   when the process started (``load``: wall times mean little unless it is below the
   number of CPUs).
3. ``python -m bmrm.demo`` in a fresh process with an empty cache: wall-clock time and the
   printed table, again with the cache it left, and in a fresh process with an empty cache
   after ``python -m bmrm warmup``.

Writes ``results.csv`` (one row per measurement and repetition) and ``results.md``.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    base_parser,
    make_out,
    markdown_table,
    positive_int,
    progress,
    script,
    write_csv,
    write_results,
    write_text,
)

from bmrm.demo import LOSSES as DEMO_LOSSES  # noqa: E402

# name: (loss, loss parameters)
CONFIGS = {
    "squared": ("squared", {}),
    "hinge": ("hinge", {}),
    "logistic": ("logistic", {}),
    "ordinal": ("ordinal", {}),
    "preference": ("preference", {}),
    "ndcg": ("ndcg", {}),
    "ndcg-increasing": ("ndcg", {"ties": "increasing"}),
    "ndcg-pairs": ("ndcg", {"ties": "pairs"}),
    "ndcg-truncated": ("ndcg", {"truncate_c": True}),
    "neru": ("neru", {}),
    "listnet": ("listnet", {}),
    "listwise_squared": ("listwise_squared", {}),
    "ranknet": ("ranknet", {}),
    "softmax": ("softmax", {}),
    "cosine": ("cosine", {}),
}
LOSSES = list(CONFIGS)

# Runs in the child process: argv[1] is a loss name, argv[2] its parameters (JSON), argv[3]
# the number of fits.
FIT_SCRIPT = r"""
import json, sys, time, threading
t_import = time.perf_counter()
from numba.core import event

compile_seconds = [0.0]
# per compiled function: CPU seconds of this thread inside its own compilation, the
# compilations of the functions it calls excluded (numba compiles on the calling thread)
kernel_seconds, _stack = {}, []
class _Clock(event.Listener):
    depth = 0
    def on_start(self, ev):
        if self.depth == 0:
            self.t = time.perf_counter()
        self.depth += 1
        _stack.append([time.thread_time(), 0.0])
    def on_end(self, ev):
        self.depth -= 1
        if self.depth == 0:
            compile_seconds[0] += time.perf_counter() - self.t
        start, inner = _stack.pop()
        spent = time.thread_time() - start
        if _stack:
            _stack[-1][1] += spent
        f = ev.data["dispatcher"].py_func
        name = f"{f.__module__}.{f.__qualname__}"
        kernel_seconds[name] = kernel_seconds.get(name, 0.0) + spent - inner
event.register("numba:compile", _Clock())

import numpy as np
import bmrm
import losses
from bmrm.demo import make_ranking_data
t_import = time.perf_counter() - t_import

loss, params, n_fits = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
# plain BMRM needs thousands of iterations on NDCG and NERU: an iteration cap (not a time
# budget) keeps every fit the same, whatever the machine's load
MAX_ITER = 300
X, y, qid = make_ranking_data(2000, 40, 50)
split = X.shape[0] * 4 // 5
X, y, qid = X[:split], y[:split], qid[:split]
data = {}
if loss in ("hinge", "logistic"):
    y = np.where(y >= 2, 1.0, -1.0)
if loss == "preference":
    pairs, costs = losses.pairs_from_labels(y, qid)
    data = {"pairs": pairs, "pair_costs": costs}
rows = []
for i in range(n_fits):
    before = compile_seconds[0]
    kernel_seconds.clear()
    cpu = time.process_time()
    start = time.perf_counter()
    model = bmrm.fit(
        X, y, loss, qid, lam=1e-2, tol=1e-3, max_iter=MAX_ITER, loss_params=params, **data
    )
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    res = model.result_
    rows.append({
        "seconds": seconds,
        "cpu_seconds": cpu,
        "numba_compile_seconds": compile_seconds[0] - before,
        "reported_compile_seconds": float(res.get("compile_seconds", float("nan"))),
        "objective": res.fun,
        "iterations": int(res.nit),
        "oracle_calls": int(res.nfev),
        "status": res.message,
        "kernel_compile_cpu_seconds": dict(kernel_seconds),
    })
print(json.dumps({"import_seconds": t_import, "fits": rows}))
"""


def run(args, cache_dir, timeout=1800):
    """Run ``python *args`` with ``NUMBA_CACHE_DIR=cache_dir``.

    Returns (wall-clock seconds, CPU seconds of the child, its stdout, the load average of
    the last minute when it started).
    """
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if out.returncode != 0:
        raise RuntimeError(f"{args}: exit {out.returncode}\n{out.stderr[-3000:]}")
    return seconds, cpu, out.stdout, load


@script
def tidy(row: dict) -> dict:
    """A row of ``results.csv`` as a row of the tidy result file: the measurement is the
    method, the loss the setting, seconds renamed with their unit (``wall_s``, ``cpu_s``)."""
    units = {"seconds": "wall_s", "cpu_seconds": "cpu_s"}
    out = {
        "experiment": "first_run",
        "dataset": "demo",
        "method": row["what"],
        "setting": row.get("loss", ""),
        "repetition": row["rep"],
    }
    for key, value in row.items():
        if key not in ("what", "loss", "rep"):
            out[
                units.get(
                    key, key.removesuffix("_seconds") + "_s" if key.endswith("_seconds") else key
                )
            ] = value
    return out


def main(argv=None) -> int:
    parser = base_parser("bench_first_run", __doc__.splitlines()[0], data=False, quick=False)
    parser.add_argument("--losses", nargs="+", default=LOSSES, choices=LOSSES)
    parser.add_argument("--repeats", type=positive_int, default=1)
    parser.add_argument("--no-demo", action="store_true", help="skip the whole-demo runs")
    parser.add_argument(
        "--demo-losses",
        nargs="+",
        choices=sorted(DEMO_LOSSES),
        help="the demo's --losses (default: the demo's own)",
    )
    args = parser.parse_args(argv)
    rows, kernel_rows = [], []

    progress("import bmrm")
    with tempfile.TemporaryDirectory() as cache:
        for rep in range(args.repeats + 2):
            _, _, out, _ = run(
                [
                    "-c",
                    "import time; t = time.perf_counter(); c = time.process_time(); "
                    "import bmrm; print(time.perf_counter() - t, time.process_time() - c)",
                ],
                cache,
            )
            seconds, cpu = map(float, out.split())
            rows.append(
                {
                    "what": "import bmrm",
                    "loss": "",
                    "rep": rep,
                    "seconds": seconds,
                    "cpu_seconds": cpu,
                }
            )

    # one warm-up into an empty cache; each fit after it gets a copy of that cache
    progress("python -m bmrm warmup, empty cache")
    warmed_cache = Path(tempfile.mkdtemp())
    seconds, cpu, out, load = run(["-m", "bmrm", "warmup"], warmed_cache)
    rows.append(
        {
            "what": "warmup",
            "loss": "",
            "rep": 0,
            "seconds": seconds,
            "cpu_seconds": cpu,
            "load": load,
        }
    )
    warmup_text = out
    progress(f"warm-up: {seconds:.1f} s (CPU {cpu:.1f} s, load average {load:.2f})")

    for loss in args.losses:
        name, params = CONFIGS[loss]
        for rep in range(args.repeats):
            with tempfile.TemporaryDirectory() as cache:
                progress(f"{loss}: cold and second fit (rep {rep})")
                fit_args = ["-c", FIT_SCRIPT, name, json.dumps(params)]
                _, cold_cpu, out, cold_load = run([*fit_args, "2"], cache)
                cold, second = json.loads(out)["fits"]
                progress(f"{loss}: warm fit")
                _, warm_cpu, out, warm_load = run([*fit_args, "1"], cache)
                (warm,) = json.loads(out)["fits"]
            with tempfile.TemporaryDirectory() as folder:
                progress(f"{loss}: first fit after the warm-up")
                cache = shutil.copytree(warmed_cache, Path(folder) / "cache")
                _, warmed_cpu, out, warmed_load = run([*fit_args, "1"], cache)
                (warmed,) = json.loads(out)["fits"]
            cold["process_cpu_seconds"] = second["process_cpu_seconds"] = cold_cpu
            warm["process_cpu_seconds"] = warm_cpu
            warmed["process_cpu_seconds"] = warmed_cpu
            cold["load"] = second["load"] = cold_load
            warm["load"] = warm_load
            warmed["load"] = warmed_load
            for function, seconds in cold["kernel_compile_cpu_seconds"].items():
                kernel_rows.append(
                    {"loss": loss, "rep": rep, "function": function, "cpu_seconds": seconds}
                )
            for what, fit in (
                ("cold", cold),
                ("second", second),
                ("warm", warm),
                ("warmed up", warmed),
            ):
                fit.pop("kernel_compile_cpu_seconds")
                rows.append({"what": what, "loss": loss, "rep": rep, **fit})
            progress(
                f"{loss}: cold {cold['seconds']:.2f} s (CPU {cold['cpu_seconds']:.2f} s, numba "
                "compiling "
                f"{cold['numba_compile_seconds']:.2f} s), second {second['seconds']:.2f} s "
                f"(CPU {second['cpu_seconds']:.2f} s), warm {warm['seconds']:.2f} s (CPU "
                f"{warm['cpu_seconds']:.2f} s), after the warm-up {warmed['seconds']:.2f} s; "
                f"{cold['iterations']} iterations, "
                f"{cold['oracle_calls']} oracle calls, {cold['status']} (load average "
                f"{cold_load:.2f} / {warm['load']:.2f})"
            )

    demo_text = {}
    if not args.no_demo:
        demo = ["-m", "bmrm.demo"]
        if args.demo_losses:
            demo += ["--losses", *args.demo_losses]
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as fresh:
            fresh = shutil.copytree(warmed_cache, Path(fresh) / "cache")
            for what, folder in (
                ("demo, empty cache", cache),
                ("demo, warm cache", cache),
                ("demo after warm-up", fresh),
            ):
                progress(what)
                seconds, cpu, out, load = run(demo, folder)
                rows.append(
                    {
                        "what": what,
                        "loss": "",
                        "rep": 0,
                        "seconds": seconds,
                        "cpu_seconds": cpu,
                        "load": load,
                    }
                )
                demo_text[what] = out
                progress(f"{what}: {seconds:.1f} s (CPU {cpu:.1f} s, load average {load:.2f})")

    def med(what, loss, key="seconds"):
        values = [r[key] for r in rows if r["what"] == what and r["loss"] == loss]
        return statistics.median(values)

    lines = [
        "# First run",
        "",
        f"`import bmrm`: {med('import bmrm', ''):.2f} s, CPU "
        f"{med('import bmrm', '', 'cpu_seconds'):.2f} s (median of {args.repeats + 2} processes)",
        "",
        f"`python -m bmrm warmup` from an empty cache: {med('warmup', ''):.1f} s, CPU "
        f"{med('warmup', '', 'cpu_seconds'):.1f} s",
        "",
        "```",
        warmup_text.rstrip(),
        "```",
        "",
        "Per loss, on the demo data (medians over repetitions, seconds):",
        "",
        markdown_table(
            [
                "loss",
                "cold fit",
                "cold CPU",
                "cold process CPU",
                "numba compiling",
                "second fit",
                "warm-cache fit",
                "warm CPU",
                "after warm-up",
                "iterations",
                "oracle calls",
                "objective",
                "load (cold)",
            ],
            [
                (
                    loss,
                    med("cold", loss),
                    med("cold", loss, "cpu_seconds"),
                    med("cold", loss, "process_cpu_seconds"),
                    med("cold", loss, "numba_compile_seconds"),
                    med("second", loss),
                    med("warm", loss),
                    med("warm", loss, "cpu_seconds"),
                    med("warmed up", loss),
                    int(med("cold", loss, "iterations")),
                    int(med("cold", loss, "oracle_calls")),
                    f"{med('cold', loss, 'objective'):.6f}",
                    med("cold", loss, "load"),
                )
                for loss in args.losses
            ],
        ),
    ]

    def short(function):
        # numba's own overloads are named like module.ol_np_empty.<locals>.impl
        return function.split(".<locals>")[0].rsplit(".", 1)[-1]

    for loss in args.losses:
        # median over repetitions of each function's compile CPU seconds in the cold fit
        by_function = {}
        for r in kernel_rows:
            if r["loss"] == loss:
                by_function.setdefault(r["function"], []).append(r["cpu_seconds"])
        ranked = sorted(((statistics.median(v), f) for f, v in by_function.items()), reverse=True)
        lines += [
            "",
            f"{loss}, cold fit: numba compiled {len(ranked)} functions in this process, "
            f"{sum(t for t, _ in ranked):.2f} CPU s; the "
            "largest: " + ", ".join(f"{short(f)} {t:.2f}" for t, f in ranked[:12]),
        ]
    for what, text in demo_text.items():
        lines += [
            "",
            f"`python -m bmrm.demo`, {what}: {med(what, ''):.1f} s, CPU "
            f"{med(what, '', 'cpu_seconds'):.1f} s (load average {med(what, '', 'load'):.2f})",
            "",
            "```",
            text.rstrip(),
            "```",
        ]
    shutil.rmtree(warmed_cache)
    make_out(args.out)
    write_csv(args.out / "results.csv", rows)
    if kernel_rows:
        write_csv(args.out / "kernels.csv", kernel_rows)
    write_text(args.out / "results.md", "\n".join(lines) + "\n")
    write_results("bench_first_run", [tidy(r) for r in rows], args.results or args.out)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Compile time of every numba kernel of the package, each alone, from an empty cache.

    python experiments/bench_compile.py [--repeats 3] [--out results/bench_compile]

1. *Signatures.* One process with an empty ``NUMBA_CACHE_DIR`` fits every built-in loss
   that the convex solver trains (and the ties variants of NDCG and NERU) on a small slice
   of the demo data and calls the metrics; then it lists every kernel of ``bmrm`` and
   ``losses`` with the signatures it was compiled for. A kernel compiled for more than one
   signature (int64 against int32 or literal arguments, 'C' against 'A' layout, float32
   against float64) is listed as a respecialisation: each one compiles again.
2. *Per-kernel compile time.* For every kernel that Python code calls directly (a *root*:
   its compilation was not nested in another's) and every signature, a new process with an
   empty cache first compiles a trivial function (numba's and LLVM's one-off set-up, about
   0.5 s, is not charged to the kernel) and then calls the dispatcher's ``compile`` with
   that exact signature. Reported: CPU and wall seconds of that call (its callees
   included, so kernels sharing callees do not add up), and the callees with their own
   (exclusive) CPU seconds. Medians of ``--repeats`` processes.

CPU seconds are the figure to compare on a loaded machine: compilation runs on one thread,
so its CPU time hardly changes with load while its wall time does.

Writes ``signatures.txt``, ``results.csv`` and ``results.md`` into ``--out``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
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
    write_text,
)

# (label, loss, loss parameters): every fit of step 1.
FITS = [
    ("squared", "squared", {}),
    ("hinge", "hinge", {}),
    ("logistic", "logistic", {}),
    ("ordinal", "ordinal", {}),
    ("preference", "preference", {}),
    ("ndcg latent", "ndcg", {"truncate_c": True}),
    ("ndcg increasing", "ndcg", {"truncate_c": True, "ties": "increasing"}),
    ("ndcg pairs", "ndcg", {"truncate_c": True, "ties": "pairs"}),
    ("ndcg untruncated", "ndcg", {"ties": "increasing"}),
    ("neru latent", "neru", {}),
    ("neru increasing", "neru", {"ties": "increasing"}),
    ("listnet", "listnet", {}),
    ("listwise_squared", "listwise_squared", {}),
    ("ranknet", "ranknet", {}),
    ("softmax", "softmax", {}),
    ("cosine", "cosine", {}),
]

# Which kernel belongs to which part of the package, for the table.
PARTS = [
    ("bmrm.solver.qp", "QP"),
    ("bmrm.solver.products", "products"),
    ("bmrm.solver.bundle", "bundle"),
    ("bmrm.solver.scorer_products", "scorer products"),
    ("losses._kernels.sorting", "sorting"),
    ("losses._kernels.ordinal", "ordinal"),
    ("losses._kernels.preference", "preference"),
    ("losses._kernels.listwise", "listwise"),
    ("losses._kernels.metrics", "metrics"),
    ("losses._kernels.surrogate", "surrogates"),
]

# Step 1, in the child: fit everything, report every package kernel's signatures (pickled:
# numba types pickle) and which compilations were roots.
DISCOVER = r"""
import base64, gc, json, pickle, sys, warnings
import numpy as np
from numba.core import event

depth = [0]
roots = set()
class _Depth(event.Listener):
    def on_start(self, ev):
        if depth[0] == 0:
            d = ev.data["dispatcher"]
            roots.add((d.py_func.__module__, d.py_func.__qualname__))
        depth[0] += 1
    def on_end(self, ev):
        depth[0] -= 1
event.register("numba:compile", _Depth())

import bmrm, losses
from bmrm.demo import make_ranking_data
from losses import metrics

warnings.simplefilter("ignore")
X, y, qid = make_ranking_data(100, 40, 20)
for label, loss, params in json.loads(sys.argv[1]):
    target, data = y, {}
    if loss in ("hinge", "logistic"):
        target = np.where(y >= 2, 1.0, -1.0)
    if loss == "preference":
        pairs, costs = losses.pairs_from_labels(y, qid)
        data = {"pairs": pairs, "pair_costs": costs}
    bmrm.fit(X, target, loss, qid, lam=1e-2, tol=1e-3, max_iter=50, loss_params=params, **data)
f = np.round(X[:, 0], 1)
for score in (metrics.ndcg_score, metrics.map_score, metrics.err_score, metrics.mrr_score,
              metrics.kendall_tau_score, metrics.precision_score, metrics.neru_score):
    score(y, f, qid)

from numba.core.dispatcher import Dispatcher
out = []
for obj in gc.get_objects():
    if isinstance(obj, Dispatcher) and obj.py_func.__module__.split(".")[0] in ("bmrm", "losses"):
        key = (obj.py_func.__module__, obj.py_func.__qualname__)
        for sig in obj.signatures:
            out.append({
                "module": key[0], "name": key[1], "root": key in roots, "text": str(sig),
                "sig": base64.b64encode(pickle.dumps(sig)).decode(),
            })
print(json.dumps(out))
"""

# Step 2, in the child: compile one kernel for one signature.
COMPILE = r"""
import base64, importlib, json, pickle, sys, time
from numba import njit
from numba.core import event

stack, own = [], {}
class _Clock(event.Listener):
    def on_start(self, ev):
        stack.append([ev.data["dispatcher"], time.process_time(), 0.0])
    def on_end(self, ev):
        d, t0, child = stack.pop()
        spent = time.process_time() - t0
        if stack:
            stack[-1][2] += spent
        name = d.py_func.__module__ + "." + d.py_func.__qualname__
        if name.split(".")[0] not in ("bmrm", "losses"):
            name = "numba internals"
        own[name] = own.get(name, 0.0) + spent - child

@njit
def _warm_up(x):
    return x + 1
_warm_up(1)

module, name, sig = sys.argv[1], sys.argv[2], pickle.loads(base64.b64decode(sys.argv[3]))
dispatcher = getattr(importlib.import_module(module), name)
event.register("numba:compile", _Clock())
cpu, wall = time.process_time(), time.perf_counter()
dispatcher.compile(sig)
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
print(json.dumps({"cpu": cpu, "wall": wall, "own": own}))
"""


def _child(code, args, cache_dir, timeout=1800):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if out.returncode != 0:
        raise RuntimeError(f"exit {out.returncode}\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)


def _part(module: str) -> str:
    for prefix, label in PARTS:
        if module == prefix:
            return label
    return module


@script
def main(argv=None) -> int:
    parser = base_parser("bench_compile", __doc__.split("\n\n")[0], data=False, quick=False)
    parser.add_argument(
        "--repeats", type=positive_int, default=3, help="processes per kernel (median)"
    )
    args = parser.parse_args(argv)

    progress("fitting every loss once to collect the kernels' signatures")
    with tempfile.TemporaryDirectory() as cache:
        found = _child(DISCOVER, [json.dumps(FITS)], cache)
    found.sort(key=lambda r: (r["module"], r["name"], r["text"]))
    per_kernel: dict[tuple[str, str], list[str]] = {}
    for r in found:
        per_kernel.setdefault((r["module"], r["name"]), []).append(r["text"])
    lines = []
    for (module, name), sigs in per_kernel.items():
        lines.append(f"{module}.{name}: {len(sigs)} signature(s)")
        lines += [f"    {s}" for s in sigs]
    signatures = "\n".join(lines) + "\n"
    multi = {k: v for k, v in per_kernel.items() if len(v) > 1}

    rows = []
    roots = [r for r in found if r["root"]]
    for r in roots:
        label = f"{r['module']}.{r['name']}"
        for rep in range(args.repeats):
            with tempfile.TemporaryDirectory() as cache:
                res = _child(COMPILE, [r["module"], r["name"], r["sig"]], cache)
            callees = sorted(res["own"].items(), key=lambda kv: -kv[1])
            rows.append(
                {
                    "part": _part(r["module"]),
                    "kernel": r["name"],
                    "signature": r["text"],
                    "rep": rep,
                    "cpu_seconds": res["cpu"],
                    "wall_seconds": res["wall"],
                    "own_cpu": json.dumps(dict(callees)),
                }
            )
            progress(f"{label}: {res['cpu']:.2f} CPU s, {res['wall']:.2f} s")

    table = []
    for r in roots:
        mine = [x for x in rows if x["kernel"] == r["name"] and x["signature"] == r["text"]]
        cpu = statistics.median(x["cpu_seconds"] for x in mine)
        wall = statistics.median(x["wall_seconds"] for x in mine)
        own = json.loads(min(mine, key=lambda x: abs(x["cpu_seconds"] - cpu))["own_cpu"])
        ranked = sorted(own.items(), key=lambda kv: -kv[1])
        top = ", ".join(f"{k.rsplit('.', 1)[-1]} {v:.2f}" for k, v in ranked)
        table.append((_part(r["module"]), r["name"], cpu, wall, top))
    table.sort(key=lambda t: (t[0], -t[2]))
    md = [
        "# Compile time per kernel (empty cache, one kernel per process)",
        "",
        f"Medians of {args.repeats} processes; callees' own CPU seconds from the median run.",
        "",
        markdown_table(["part", "kernel", "CPU s", "wall s", "own CPU s per function"], table),
        "",
        "Kernels compiled for more than one signature in one process:",
        "",
    ]
    md += [f"- {m}.{n}: {len(s)}" for (m, n), s in multi.items()] or ["- none"]
    make_out(args.out)
    write_text(args.out / "signatures.txt", signatures)
    write_csv(args.out / "results.csv", rows)
    write_text(args.out / "results.md", "\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

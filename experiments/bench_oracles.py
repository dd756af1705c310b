"""Loss-oracle benchmark: microseconds per query, and a full oracle call against its floor.

    python experiments/bench_oracles.py [--rows 1000000] [--repeats 5] [--out DIR]
        [--medium /tmp/ltr/medium.npz] [--only fused|weights] [--weight-rows 200000]

1. For queries of m ∈ {8, 40, 120, 1000} documents (labels 0..4), the kernel time per query
   of every ranking loss (``loss_grad`` on scores, after an untimed warm-up call; median of
   ``--repeats`` runs over enough queries for about 10^5 documents).
2. On an MSLR-WEB10K-shaped set (about a million rows, 136 dense features, about 120 rows per
   query, labels 0–4): one full oracle call (``X @ w``, the loss kernel, ``X.T @ g``) divided
   by the floor measured in the same run (``X @ w``, one argsort per query, ``X.T @ g``, the
   products being the oracle's own, :mod:`bmrm.solver.products`). Then the same for
   NDCG@10 on a LETOR 4.0-shaped labelling of those rows (labels 0–2, about 76 / 16 / 8 %,
   the proportions of MQ2008), where every query takes the dynamic programme over per-level
   counts, beside the same loss with the chain path forced (``chain path``: its linearised
   assignments, the chain flow behind them), in the same run.
3. The first call in a new process with the numba cache warm (a fresh interpreter importing
   the package and computing one risk), wall-clock, median over ``--repeats`` processes.
4. On the medium set of ``../shared/tools/gen_ltr.py`` (``--medium``, 400,000 rows × 136
   float32 features; ``python ../shared/tools/gen_ltr.py --name medium --queries 10000 --docs
   50 --features 136 --seed 2 --out /tmp/ltr``), as float32 and float64, with 1 and 2
   threads: one oracle call made in two passes over X (f = X w, the loss, Xᵀ g) against the
   one-pass oracle (:func:`bmrm.solver.products.fused_cut`), calls interleaved, median of
   ``--repeats`` after an untimed warm-up call each, for the ordinal loss (the loss with a
   block kernel; the NDCG@10 surrogate's kernel, tried the same way, costs several passes'
   time and its one-pass call was no faster, so it keeps two passes).
5. One oracle call with and without weights (``--weight-rows``, 200,000 × 136 float64 in
   queries of 50; ``--only weights`` runs this section alone): query weights
   (``sample_weight``) and row weights (the squared loss's ``sample_weight``, the ordinal
   loss's ``row_weight``) against the same loss unweighted, calls interleaved.

Writes ``results.csv`` (one row per measurement and repetition) and ``results.md``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit, prange

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    base_parser,
    fail,
    int_at_least,
    make_out,
    positive_int,
    script,
    write_csv,
    write_text,
)

import losses
from bmrm.solver import products as _products
from bmrm.solver.oracle import RiskOracle
from losses.preference import pairs_from_labels

KERNEL_LOSSES = {
    "ordinal": ("ordinal", {}),
    "preference": ("preference", {}),
    "ndcg@10": ("ndcg", {"k": 10}),
    "ndcg@10 truncated c": ("ndcg", {"k": 10, "truncate_c": True}),
    "neru": ("neru", {}),
    "map": ("map", {}),
    "squared": ("squared", {}),
}
RATIO_LOSSES = ["ordinal", "preference", "ndcg@10 truncated c", "ndcg@10", "map", "squared"]
# label thresholds of the MSLR-shaped set (on X w + noise, standard deviation √2)
MSLR_CUTS = [0.0, 1.0, 1.8, 2.5]
# three levels in MQ2008's proportions (76 / 16 / 8 %)
LETOR4_CUTS = [1.0, 2.0]
LETOR4_LOSSES = ["ndcg@10", "ndcg@10 chain path"]


@njit(parallel=True, cache=True)
def _argsort_per_query(f, query_ptr, out):
    for q in prange(len(query_ptr) - 1):
        lo, hi = query_ptr[q], query_ptr[q + 1]
        out[lo:hi] = np.argsort(-f[lo:hi]) + lo


def make_queries(n_queries, m, rng, levels=5):
    y = rng.integers(0, levels, size=n_queries * m).astype(np.float64)
    qid = np.repeat(np.arange(n_queries), m)
    return y, qid


def median_time(fn, repeats):
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def prepared_for(name, y, qid):
    chain_only = name.endswith(" chain path")
    key, params = KERNEL_LOSSES[name.removesuffix(" chain path")]
    data = {}
    if key == "preference":
        pairs, costs = pairs_from_labels(y, qid)
        data = {"pairs": pairs, "pair_costs": costs}
    prepared = losses.prepare(losses.get(key, **params), y, qid, **data)
    if chain_only:
        # every query longer than k through the chain path, none through the programme
        prepared.targets = prepared.targets._replace(lattice=0)
    return prepared


def per_query_table(repeats, rows, rng):
    out = []
    for m in (8, 40, 120, 1000):
        n_queries = max(20, 100_000 // m)
        y, qid = make_queries(n_queries, m, rng)
        f = rng.standard_normal(len(y))
        for name in KERNEL_LOSSES:
            prep = prepared_for(name, y, qid)
            med, times = median_time(lambda prep=prep, f=f: prep.loss_grad(f), repeats)
            us = 1e6 * med / n_queries
            out.append((m, name, us))
            for rep, t in enumerate(times):
                rows.append(
                    {
                        "measure": "us_per_query",
                        "m": m,
                        "loss": name,
                        "repetition": rep,
                        "value": 1e6 * t / n_queries,
                    }
                )
            print(f"  m={m:5d} {name:<22} {us:10.2f} us/query", file=sys.stderr)
    return out


def ratio_table(n_rows, repeats, rows, rng):
    sizes = rng.integers(60, 181, size=n_rows // 60)
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    ptr = ptr[ptr <= n_rows]
    n = int(ptr[-1])
    qid = np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))
    X = rng.standard_normal((n, 136))
    w = rng.standard_normal(136) / np.sqrt(136)
    latent = X @ w + rng.standard_normal(n)
    y = np.digitize(latent, MSLR_CUTS).astype(np.float64)
    print(f"  MSLR-shaped set: {n} rows, {len(ptr) - 1} queries, 136 features", file=sys.stderr)
    query_ptr = ptr.astype(np.int64)
    order = np.empty(n, dtype=np.int64)

    def floor():
        # the oracle's own dense products (bmrm.solver.products), so the ratio is the loss's cost
        f = np.empty(n)
        _products.matvec(X, w, f)
        _argsort_per_query(f, query_ptr, order)
        a = np.empty(X.shape[1])
        _products.rmatvec(X, f, a)
        return a

    out = []
    floor_times = []
    letor4 = np.digitize(latent, LETOR4_CUTS).astype(np.float64)
    runs = [(name, name, y) for name in RATIO_LOSSES]
    runs += [(f"{name}, 3 levels", name, letor4) for name in LETOR4_LOSSES]
    for label, name, labels in runs:
        oracle = RiskOracle(X, prepared_for(name, labels, qid))
        t_floor, tf = median_time(floor, repeats)
        t_full, tt = median_time(lambda oracle=oracle: oracle(w), repeats)
        floor_times += tf
        out.append((label, t_full, t_floor, t_full / t_floor))
        for rep, (a, b) in enumerate(zip(tt, tf, strict=True)):
            rows.append(
                {
                    "measure": "oracle_over_floor",
                    "m": "",
                    "loss": label,
                    "repetition": rep,
                    "value": a / b,
                    "oracle_s": a,
                    "floor_s": b,
                }
            )
        print(
            f"  {label:<30} oracle {t_full * 1e3:8.1f} ms  floor {t_floor * 1e3:8.1f} ms  "
            f"ratio {t_full / t_floor:5.2f}",
            file=sys.stderr,
        )
    return out


def write_rows(path, rows):
    fields = ["measure", "m", "loss", "repetition", "value", "oracle_s", "floor_s"]
    fields += ["dtype", "threads"]
    write_csv(path, rows, fields)


FIRST_CALL = """
import time
start = time.perf_counter()
import numpy as np
import losses
rng = np.random.default_rng(0)
y = rng.integers(0, 5, size=1200).astype(float)
qid = np.repeat(np.arange(10), 120)
for name in ("ordinal", "ndcg", "neru", "squared"):
    losses.risk(name, rng.standard_normal(1200), y, qid)
print(time.perf_counter() - start)
"""


def first_call(repeats, rows):
    subprocess.run([sys.executable, "-c", FIRST_CALL], check=True, capture_output=True)
    times = []
    for rep in range(repeats):
        out = subprocess.run(
            [sys.executable, "-c", FIRST_CALL], check=True, capture_output=True, text=True
        )
        times.append(float(out.stdout.strip()))
        rows.append(
            {
                "measure": "first_call_s",
                "m": "",
                "loss": "ordinal+ndcg+neru+squared",
                "repetition": rep,
                "value": times[-1],
            }
        )
    return statistics.median(times)


def fused_table(path, repeats, rows):
    import numba

    data = np.load(path)
    X32, y, qid = data["X_train"], data["y_train"], data["qid_train"]
    w = np.random.default_rng(0).standard_normal(X32.shape[1]) / np.sqrt(X32.shape[1])
    out = []
    for name, params in (("ordinal", {}), ("ordinal, normalize none", {"normalize": "none"})):
        prepared = losses.prepare(losses.get("ordinal", **params), y, qid)
        for dtype in (np.float32, np.float64):
            X = np.ascontiguousarray(X32, dtype=dtype)
            two_pass = RiskOracle(X, prepared)
            two_pass.fused = None
            one_pass = RiskOracle(X, prepared)
            one_pass.fused = one_pass._fused_plan(0)
            assert one_pass.fused is not None
            for threads in (1, 2):
                numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
                two_pass(w)
                one_pass(w)
                times = {"two-pass": [], "one-pass": []}
                for _ in range(repeats):
                    for key, oracle in (("two-pass", two_pass), ("one-pass", one_pass)):
                        start = time.perf_counter()
                        oracle(w)
                        times[key].append(time.perf_counter() - start)
                t2, t1 = (statistics.median(times[k]) for k in ("two-pass", "one-pass"))
                out.append((name, np.dtype(dtype).name, threads, t2, t1))
                for rep in range(repeats):
                    rows.append({"measure": "fused_vs_two_pass", "m": "", "loss": name,
                                 "repetition": rep, "value": times["one-pass"][rep]
                                 / times["two-pass"][rep], "oracle_s": times["one-pass"][rep],
                                 "floor_s": times["two-pass"][rep], "dtype": np.dtype(dtype).name,
                                 "threads": threads})  # fmt: skip
                print(f"  {name:<24} {np.dtype(dtype).name} {threads} thread(s): two-pass "
                      f"{t2 * 1e3:7.1f} ms  one-pass {t1 * 1e3:7.1f} ms  ratio {t1 / t2:.2f}  "
                      f"load {os.getloadavg()[0]:.1f}", file=sys.stderr)  # fmt: skip
    return out


WEIGHT_CASES = [
    ("ordinal", "ordinal", {}),
    ("ordinal", "ordinal", {"sample_weight": "query"}),
    ("ordinal", "ordinal", {"row_weight": "row"}),
    ("ndcg@10", "ndcg", {}),
    ("ndcg@10", "ndcg", {"sample_weight": "query"}),
    ("squared", "squared", {}),
    ("squared", "squared", {"sample_weight": "row"}),
]


def weights_table(n_rows, repeats, rows, rng):
    """One oracle call with and without weights on n_rows × 136 dense float64 rows in
    queries of 50: query weights (``sample_weight``, 1..3 per query), row weights
    (``sample_weight`` of the pointwise loss, the ordinal loss's ``row_weight``; uniform in
    [0.5, 2]). Calls interleaved, median of ``repeats`` after a warm-up call each."""
    m, d = 50, 136
    n_queries = max(1, n_rows // m)
    y, qid = make_queries(n_queries, m, rng)
    X = rng.standard_normal((len(y), d))
    w = rng.standard_normal(d) / np.sqrt(d)
    per_query = rng.integers(1, 4, n_queries).astype(np.float64)[qid]
    per_row = rng.uniform(0.5, 2.0, len(y))
    oracles = []
    for label, name, spec in WEIGHT_CASES:
        data = {k: per_query if v == "query" else per_row for k, v in spec.items()}
        params = {"k": 10} if name == "ndcg" else {}
        prepared = losses.prepare(losses.get(name, **params), y, qid, **data)
        what = ", ".join(f"{k} per {v}" for k, v in spec.items()) or "unweighted"
        oracles.append((label, what, RiskOracle(X, prepared)))
    for _, _, oracle in oracles:
        oracle(w)  # warm-up: compilation and work arrays
    times = [[] for _ in oracles]
    for _ in range(repeats):
        for k, (_, _, oracle) in enumerate(oracles):
            start = time.perf_counter()
            oracle(w)
            times[k].append(time.perf_counter() - start)
    out = []
    base = {}
    for (label, what, oracle), t in zip(oracles, times, strict=True):
        med = statistics.median(t)
        base.setdefault(label, med)
        passes = "one" if oracle.fused is not None else "two"
        out.append((label, what, passes, med, med / base[label]))
        for rep, value in enumerate(t):
            rows.append({"measure": "weighted_call_s", "m": m, "loss": f"{label}, {what}",
                         "repetition": rep, "value": value})  # fmt: skip
    return out


def write_section(out: Path, name: str, rows: list[dict], lines: list[str]) -> None:
    """The results of one section (``--only name``): ``results_<name>.csv`` and ``.md``."""
    make_out(out)
    write_rows(out / f"results_{name}.csv", rows)
    write_text(out / f"results_{name}.md", "\n".join(lines) + "\n")
    print("\n".join(lines))


@script
def main(argv=None) -> int:
    parser = base_parser("bench_oracles", __doc__.splitlines()[0], data=False, quick=False)
    parser.add_argument(
        "--rows",
        type=int_at_least(180),
        default=1_000_000,
        help="rows of the MSLR-shaped set (queries of 60..180 rows)",
    )
    parser.add_argument("--repeats", type=positive_int, default=5)
    parser.add_argument("--medium", type=Path, default=Path("/tmp/ltr/medium.npz"))
    parser.add_argument("--only", choices=["fused", "weights"], help="run one section only")
    parser.add_argument(
        "--weight-rows",
        type=int_at_least(50),
        default=200_000,
        help="rows of the weights section (queries of 50)",
    )
    args = parser.parse_args(argv)
    if args.only == "fused" and not args.medium.is_file():
        fail(
            f"{args.medium} not found (--medium): make it with ../shared/tools/gen_ltr.py "
            "(module docstring)"
        )
    rng = np.random.default_rng(0)
    rows: list[dict] = []
    weighted = []
    if args.only != "fused":
        print("oracle calls with and without weights", file=sys.stderr)
        weighted = weights_table(args.weight_rows, args.repeats, rows, rng)
    weight_lines = [
        "",
        f"One oracle call with weights, {50 * (args.weight_rows // 50)} rows x 136 features, "
        "queries of 50 "
        "(median ms; ratio to the same loss unweighted):",
        "",
        "| loss | weights | passes over X | ms | ratio |",
        "|---|---|---|---|---|",
    ] + [
        f"| {label} | {what} | {passes} | {t * 1e3:.1f} | {r:.2f} |"
        for label, what, passes, t, r in weighted
    ]
    if args.only == "weights":
        write_section(args.out, "weights", rows, weight_lines)
        return 0
    fused = []
    if args.medium.exists():
        print("one-pass against two-pass oracle on the medium set", file=sys.stderr)
        fused = fused_table(args.medium, args.repeats, rows)
    else:
        print(f"  {args.medium} not found: one-pass section skipped", file=sys.stderr)
    fused_lines = [
        "",
        f"One oracle call on {args.medium.name}, two passes over X against one (median ms):",
        "",
        "| loss | X dtype | threads | two-pass ms | one-pass ms | one / two |",
        "|---|---|---|---|---|---|",
    ] + [
        f"| {n} | {dt} | {t} | {t2 * 1e3:.1f} | {t1 * 1e3:.1f} | {t1 / t2:.2f} |"
        for n, dt, t, t2, t1 in fused
    ]
    if args.only == "fused":
        write_section(args.out, "fused", rows, fused_lines)
        return 0
    print("kernel time per query", file=sys.stderr)
    per_query = per_query_table(args.repeats, rows, rng)
    print("full oracle against the floor", file=sys.stderr)
    ratios = ratio_table(args.rows, args.repeats, rows, rng)
    first = first_call(args.repeats, rows)

    names = list(KERNEL_LOSSES)
    lines = [
        "Kernel microseconds per query (median):",
        "",
        "| m | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for m in (8, 40, 120, 1000):
        vals = {name: us for mm, name, us in per_query if mm == m}
        lines.append(f"| {m} | " + " | ".join(f"{vals[n]:.2f}" for n in names) + " |")
    lines += [
        "",
        f"Full oracle call against the floor on {args.rows} rows x 136 features (median):",
        "",
        "| loss | oracle ms | floor ms | ratio |",
        "|---|---|---|---|",
    ]
    for name, full, fl, ratio in ratios:
        lines.append(f"| {name} | {full * 1e3:.1f} | {fl * 1e3:.1f} | {ratio:.2f} |")
    lines += [
        "",
        f"First call in a new process (numba cache warm, imports included): {first:.2f} s",
        *fused_lines,
        *weight_lines,
    ]
    table = "\n".join(lines)
    make_out(args.out)
    write_rows(args.out / "results.csv", rows)
    write_text(args.out / "results.md", table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

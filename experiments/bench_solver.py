"""Solver benchmark: iterations, time to a relative gap of 1e-3, and the oracle/master split.

    python experiments/bench_solver.py [--rows 1000000] [--repeats 3] [--out results/bench_solver]

Fits a large synthetic problem (an MSLR-WEB10K-shaped set: about a million rows, 136 dense
features, about 120 rows per query) and a small one, with each loss, after an untimed warm-up
fit that compiles the numba kernels. Every fit is repeated and the medians are reported.
Time is split into oracle (X @ w, the loss kernel, X.T @ g), master problem, and everything
else (the bundle, bookkeeping, Python). Writes ``results.csv`` (one row per loss x size x
repetition) and ``results.md`` into the output folder.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    base_parser,
    check_distinct,
    lam_value,
    make_out,
    positive_float,
    positive_int,
    script,
    tolerance,
    write_csv,
    write_text,
)

import bmrm  # noqa: E402
from bmrm.solver.oracle import RiskOracle  # noqa: E402

LOSSES = {
    "squared": {},
    "hinge": {},
    "ordinal": {},
    "ndcg": {"truncate_c": True},
}


def make_data(n_rows: int, n_features: int = 136, rows_per_query: int = 120, seed: int = 0):
    """Dense features, a hidden linear score, labels 0..4 by quantile, MSLR-like queries."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_rows, n_features))
    w = rng.standard_normal(n_features) / np.sqrt(n_features)
    score = X @ w + 0.5 * rng.standard_normal(n_rows)
    y = np.digitize(score, np.quantile(score, [0.5, 0.8, 0.95, 0.99])).astype(np.float64)
    sizes = rng.integers(rows_per_query // 2, 3 * rows_per_query // 2 + 1, size=n_rows)
    bounds = np.cumsum(sizes)
    bounds = bounds[bounds < n_rows]
    qid = np.zeros(n_rows, dtype=np.int64)
    qid[bounds] = 1
    qid = np.cumsum(qid)
    return X, y, qid


def targets_for(loss, y):
    if loss == "hinge":
        return np.where(y > 0, 1.0, -1.0)
    return y


@contextlib.contextmanager
def products(kind: str):
    """``"numba"``: the oracle's own dense products (the default); ``"numpy"``: numpy's BLAS."""
    if kind == "numba":
        yield
        return
    original = RiskOracle.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self._own_products = False

    RiskOracle.__init__ = init
    try:
        yield
    finally:
        RiskOracle.__init__ = original


def run(loss, X, y, qid, lam, tol, max_time=None, max_iter=5000):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bmrm.ConvergenceWarning)
        model = bmrm.fit(
            X,
            targets_for(loss, y),
            loss,
            qid,
            lam=lam,
            tol=tol,
            max_iter=max_iter,
            max_time=max_time,
            loss_params=LOSSES[loss],
        )
    total = time.perf_counter() - start
    res = model.result_
    return {
        "iterations": res.nit,
        "total_s": total,
        "oracle_s": res.oracle_seconds,
        "master_s": res.master_seconds,
        "other_s": total - res.oracle_seconds - res.master_seconds,
        "gap": res.gap,
        "relative_gap": res.gap / res.fun,
        "objective": res.fun,
        "status": res.status,
    }


@script
def main(argv=None) -> int:
    parser = base_parser("bench_solver", __doc__.splitlines()[0], data=False, quick=False)
    parser.add_argument("--rows", type=positive_int, default=1_000_000)
    parser.add_argument("--small-rows", type=positive_int, default=20_000)
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument(
        "--sizes", nargs="+", choices=["small", "large"], default=["small", "large"]
    )
    parser.add_argument("--max-iter", type=positive_int, default=5000)
    parser.add_argument("--lam", type=lam_value, default=1e-2)
    parser.add_argument(
        "--max-time", type=positive_float, default=120.0, help="time budget per fit in seconds"
    )
    parser.add_argument("--tol", type=tolerance, default=1e-3)
    parser.add_argument("--losses", nargs="+", default=list(LOSSES), choices=list(LOSSES))
    parser.add_argument(
        "--products",
        nargs="+",
        choices=["numba", "numpy"],
        default=["numba"],
        help="dense products of the oracle: numba kernels (the package's) and/or numpy's BLAS",
    )
    args = parser.parse_args(argv)
    for option in ("sizes", "losses", "products"):
        check_distinct(parser, f"--{option}", getattr(args, option))

    Xw, yw, qw = make_data(2_000, seed=1)
    for loss in args.losses:  # warm-up: compile every kernel, untimed
        run(loss, Xw, yw, qw, args.lam, 1e-2)

    rows = []
    sizes = {"small": args.small_rows, "large": args.rows}
    for size, n in ((s, sizes[s]) for s in args.sizes):
        X, y, qid = make_data(n)
        print(f"[{size}] {n} rows, {X.shape[1]} features, {qid[-1] + 1} queries", file=sys.stderr)
        for loss in args.losses:
            for rep in range(args.repeats):
                for kind in args.products:
                    with products(kind):
                        r = run(loss, X, y, qid, args.lam, args.tol, args.max_time, args.max_iter)
                    key = {"size": size, "rows": n, "loss": loss, "products": kind}
                    rows.append(key | {"repetition": rep} | r)
                    print(
                        f"  {loss:<8} {kind:<5} rep {rep}: {r['iterations']} it, "
                        f"{r['total_s']:.2f} s "
                        f"(oracle {r['oracle_s']:.2f}, master {r['master_s']:.3f}, "
                        f"other {r['other_s']:.3f})",
                        file=sys.stderr,
                    )
        del X, y, qid

    lines = [
        f"lam = {args.lam}, stop at relative gap {args.tol} (at most {args.max_iter} iterations, "
        f"{args.max_time} s); medians of {args.repeats} runs",
        "",
        "| size | loss | products | iterations | relative gap | total s | oracle s | oracle ms/it "
        "| master s | other s | master % | other % |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size in args.sizes:
        for loss in args.losses:
            for kind in args.products:
                sel = [
                    r
                    for r in rows
                    if r["size"] == size and r["loss"] == loss and r["products"] == kind
                ]
                med = {
                    k: statistics.median(r[k] for r in sel)
                    for k in (
                        "iterations",
                        "relative_gap",
                        "total_s",
                        "oracle_s",
                        "master_s",
                        "other_s",
                    )
                }
                per_it = statistics.median(1e3 * r["oracle_s"] / r["iterations"] for r in sel)
                lines.append(
                    f"| {size} | {loss} | {kind} | {med['iterations']:.0f} | "
                    f"{med['relative_gap']:.1e} | {med['total_s']:.2f} | "
                    f"{med['oracle_s']:.2f} | {per_it:.2f} | {med['master_s']:.3f} | "
                    f"{med['other_s']:.3f} | "
                    f"{100 * med['master_s'] / med['total_s']:.1f} | "
                    f"{100 * med['other_s'] / med['total_s']:.1f} |"
                )
    table = "\n".join(lines)
    make_out(args.out)
    write_csv(args.out / "results.csv", rows)
    write_text(args.out / "results.md", table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

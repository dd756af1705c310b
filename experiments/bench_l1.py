"""The solver methods on L1-regularized ranking fits (MQ2008): time, iterations, objective.

    python experiments/bench_l1.py [--data ../shared/data] [--out results/bench_l1]
        [--folds 1 2 3 4 5] [--losses ordinal ndcg] [--lams 2e-3 1e-2 5e-2]
        [--methods bmrm inout ls-bmrm] [--tol 1e-6] [--repeats 3] [--quick]

``bmrm.fit(X, y, loss, qid, lam=lam, regularizer="l1", method=m, tol=tol)`` on the training
set of each MQ2008 fold, for every method ``m``: the master problem of every method is then
the linear programme of min lam·‖w‖₁ + max_i (⟨a_i, w⟩ + b_i) (Teo et al., JMLR 2010, §5),
solved through cvxpy. ``bmrm`` is the plain cutting-plane method, ``inout`` and
``ls-bmrm`` stabilise the next point (:mod:`bmrm.solver.methods`). ``ndcg`` is the default
latent NDCG@10, trained by the concave-convex procedure with the method solving every
convex subproblem (its counters add up all of them).

Within each repetition every method runs once, in the order given, so that all see the same
spread of load; an untimed fit on the first fold compiles the kernels first. Reported per
(loss, lam, method): the median over folds of the median seconds over repetitions, the
total seconds over folds, median iterations, the seconds in the master and in the oracle,
and the objective J of each fold's fit against the lowest J any method reached on that fold
(max over folds of J / J_min − 1: all methods certify the same convex objective to ``tol``,
so for the ordinal loss this stays below tol; the latent NDCG objective is not convex and
methods may stop at different stationary points). Ratios are against the first method.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from _common import (
    base_parser,
    check_distinct,
    fold_number,
    given,
    lam_value,
    load_letor,
    make_out,
    markdown_table,
    mq2008_root,
    positive_int,
    progress,
    script,
    tolerance,
    write_csv,
    write_text,
)

import bmrm

METHODS = ("bmrm", "inout", "ls-bmrm", "ocas")
LOSSES = ("ordinal", "ndcg")


@script
def main(argv=None) -> int:
    parser = base_parser("bench_l1", __doc__.splitlines()[0])
    parser.add_argument("--folds", nargs="+", type=fold_number, default=None)
    parser.add_argument("--losses", nargs="+", default=None, choices=LOSSES)
    parser.add_argument("--lams", nargs="+", type=lam_value, default=None)
    parser.add_argument("--methods", nargs="+", default=None, choices=METHODS)
    parser.add_argument("--repeats", type=positive_int, default=None)
    parser.add_argument("--tol", type=tolerance, default=None, help="default 1e-6 (--quick: 1e-3)")
    parser.add_argument("--max-iter", type=positive_int, default=5000)
    args = parser.parse_args(argv)
    for option, values in (
        ("--folds", args.folds),
        ("--losses", args.losses),
        ("--lams", args.lams),
        ("--methods", args.methods),
    ):
        check_distinct(parser, option, values)
    folds = given(args.folds, (1,) if args.quick else (1, 2, 3, 4, 5))
    names = given(args.losses, LOSSES)
    lams = tuple(given(args.lams, (0.05,) if args.quick else (2e-3, 1e-2, 5e-2)))
    methods = tuple(given(args.methods, ("bmrm", "inout", "ls-bmrm")))
    repeats = given(args.repeats, 1 if args.quick else 3)
    tol = given(args.tol, 1e-3 if args.quick else 1e-6)
    root = mq2008_root(args.data)
    data = {}
    for fold in folds:
        X, y, qid = load_letor(root, fold)["train"]
        if args.quick:
            keep = np.isin(qid, np.unique(qid)[:60])
            X, y, qid = X[keep], y[keep], qid[keep]
        data[fold] = (X, y, qid)
    warnings.simplefilter("ignore", bmrm.ConvergenceWarning)

    def fit(fold, name, lam, method):
        X, y, qid = data[fold]
        start = time.perf_counter()
        model = bmrm.fit(
            X, y, name, qid, lam=lam, regularizer="l1", method=method, tol=tol,
            max_iter=args.max_iter,
        )  # fmt: skip
        return time.perf_counter() - start, model.result_

    started = time.perf_counter()
    for name in names:  # compiles the kernels and the master's first problem, untimed
        fit(folds[0], name, 0.1, methods[0])
    warm_up = time.perf_counter() - started
    progress(f"warm-up {warm_up:.1f} s")
    rows = []
    for name in names:
        for lam in lams:
            per_fold = {}
            for fold in folds:
                seconds = {m: [] for m in methods}
                result = {}
                for _ in range(repeats):
                    for method in methods:
                        s, result[method] = fit(fold, name, lam, method)
                        seconds[method].append(s)
                j_min = min(r.fun for r in result.values())
                for method, res in result.items():
                    per_fold[fold, method] = {
                        "seconds": float(np.median(seconds[method])),
                        "iterations": int(res.nit),
                        # summed over the concave-convex subproblems for the latent loss
                        "master_seconds": float(res.master_seconds),
                        "oracle_seconds": float(res.oracle_seconds),
                        "rel_objective": res.fun / j_min - 1.0,
                        "status": int(res.status),
                    }
                    progress(
                        f"{name} lam={lam:g} fold {fold} {method:<8} "
                        f"{per_fold[fold, method]['seconds']:7.2f} s {res.nit:5d} it "
                        f"J/J_min−1={per_fold[fold, method]['rel_objective']:.1e}"
                    )
            for method in methods:
                cells = [per_fold[f, method] for f in folds]
                rows.append(
                    {
                        "loss": name,
                        "lam": lam,
                        "method": method,
                        "median_seconds": float(np.median([c["seconds"] for c in cells])),
                        "total_seconds": float(sum(c["seconds"] for c in cells)),
                        "median_iterations": float(np.median([c["iterations"] for c in cells])),
                        "master_seconds": float(sum(c["master_seconds"] for c in cells)),
                        "oracle_seconds": float(sum(c["oracle_seconds"] for c in cells)),
                        "max_rel_objective": max(c["rel_objective"] for c in cells),
                        "all_converged": all(c["status"] in (0, 1) for c in cells),
                    }
                )
    total = time.perf_counter() - started
    first = {(r["loss"], r["lam"]): r for r in rows if r["method"] == methods[0]}
    for r in rows:
        r["ratio_total"] = r["total_seconds"] / first[r["loss"], r["lam"]]["total_seconds"]
    table = markdown_table(
        ["loss", "lam", "method", "s per fit (median over folds)", "s, all folds",
         f"/ {methods[0]}", "iterations (median)", "master s", "oracle s",
         "max J / J_min − 1", "converged"],
        [[r["loss"], f"{r['lam']:g}", r["method"], f"{r['median_seconds']:.2f}",
          f"{r['total_seconds']:.1f}", f"{r['ratio_total']:.2f}",
          f"{r['median_iterations']:.0f}", f"{r['master_seconds']:.1f}",
          f"{r['oracle_seconds']:.1f}", f"{r['max_rel_objective']:.1e}",
          "yes" if r["all_converged"] else "no"]
         for r in rows],
    )  # fmt: skip
    text = "\n".join(
        [
            "# Solver methods on L1-regularized fits",
            "",
            f"MQ2008 training sets of folds {', '.join(map(str, folds))}"
            f"{' (60 queries each)' if args.quick else ''}; regularizer l1, tol {tol:g}, "
            f"max_iter {args.max_iter}; median of {repeats} repetition(s) per fold, methods "
            f"interleaved; warm-up (compilation) {warm_up:.1f} s, excluded; total "
            f"{total:.0f} s on a shared 2-core machine.",
            "",
            table,
            "",
        ]
    )
    make_out(args.out)
    write_csv(args.out / "results.csv", rows)
    write_text(args.out / "results.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

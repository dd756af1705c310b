"""Convergence of the bundle method: duality gap against iterations and seconds, per loss.

    python experiments/convergence.py [--data ../shared/data] [--out results/convergence]
                                      [--quick]

Teo, Vishwanathan, Smola & Le (JMLR 2010, Theorems 4-5) bound the gap of plain BMRM by
ε_t = O(1/(lam·t)) for any convex loss with bounded subgradients and by O(log(1/ε))
iterations for losses with bounded curvature. This script records the gap
ε_t = min_{i<=t} J(w_i) − max_{i<=t} lower bound_i of every iteration for

* losses ``ndcg`` (NDCG@10, ``c_i = (i + 1)^(−1/4)``), ``neru`` (NERU@10), ``ordinal``,
  ``preference`` (all label-ordered pairs, cost 2^{y_j} − 2^{y_i}), ``squared`` (smooth) and
  ``hinge`` (labels binarised: relevant when y > 0); ``ndcg`` and ``neru`` use
  ``truncate_c=True``, the top-10 fast path (NERU over all positions needs an m × m
  assignment per query: seconds per oracle call on the synthetic set);
* lam in {1e-2, 1e-3, 1e-4} (lam weights ½‖w‖² against the mean loss over queries, or over
  rows for the pointwise squared and hinge losses);
* two data sets: MQ2008 fold 1 training set (9,630 rows, 471 queries, 46 features) and a
  synthetic MSLR-shaped set (``make_data`` of ``experiments/bench_solver.py``: 200,000 rows,
  136 Gaussian features, about 120 rows per query, labels 0..4 from a noisy linear score).

Each fit runs from w = 0 until the relative gap ε_t / J(best) falls below 1e-4, or
``--max-iter`` iterations, or ``--max-time`` seconds (wall clock, so the cap depends on the
machine's load). All kernels are compiled by an untimed warm-up fit first.

Writes ``results.csv`` (one row per data set × loss × lam × iteration: gap, relative gap,
objective, best objective, lower bound, elapsed, cumulative oracle and master seconds,
bundle size), ``results.md`` (iterations and seconds to relative gaps 1e-2 and 1e-3, and
the empirical rate: the slope of log ε_t against log t over the second half of the run)
and ``gap_<data set>.png`` (ε_t against t with a reference line ∝ 1/t through the first
point; relative gap against seconds), all axes logarithmic.
"""

from __future__ import annotations

import importlib.util
import time
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from _common import (
    REPO,
    base_parser,
    check_distinct,
    given,
    lam_value,
    load_letor,
    make_out,
    markdown_table,
    mq2008_root,
    positive_float,
    positive_int,
    progress,
    save_figure,
    script,
    tolerance,
    write_csv,
    write_text,
)
from matplotlib.ticker import NullFormatter

import bmrm
from losses.preference import pairs_from_labels

LOSSES = ("ndcg", "ordinal", "preference", "neru", "squared", "hinge")
LOSS_PARAMS = {
    "ndcg": {"k": 10, "truncate_c": True},
    "neru": {"k": 10, "truncate_c": True},
}
POINTWISE = ("squared", "hinge")
LAMS = (1e-2, 1e-3, 1e-4)
TARGETS = (1e-2, 1e-3)
PAIR_COST = "gain_difference"


def load_make_data():
    """``make_data`` from experiments/bench_solver.py (scripts are not a package)."""
    path = REPO / "experiments" / "bench_solver.py"
    spec = importlib.util.spec_from_file_location("bench_solver", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_data


def first_queries(X, y, qid, n_queries: int):
    keep = np.isin(qid, np.unique(qid)[:n_queries])
    return X[keep], y[keep], qid[keep]


def fit(loss, X, y, qid, pairs, lam, tol, max_iter, max_time):
    """One fit from w = 0; returns its BMRMResult."""
    kwargs = {}
    if loss == "preference":
        kwargs = {"pairs": pairs[0], "pair_costs": pairs[1]}
    target = np.where(y > 0, 1.0, -1.0) if loss == "hinge" else y
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bmrm.ConvergenceWarning)
        model = bmrm.fit(
            X,
            target,
            loss,
            None if loss in POINTWISE else qid,
            lam=lam,
            tol=tol,
            max_iter=max_iter,
            max_time=max_time,
            loss_params=LOSS_PARAMS.get(loss),
            **kwargs,
        )
    return model.result_


def first_reach(rel_gap: np.ndarray, target: float) -> int | None:
    """Index of the first iteration whose relative gap is <= target, or None."""
    hit = np.flatnonzero(rel_gap <= target)
    return int(hit[0]) if hit.size else None


def empirical_rate(gap: np.ndarray) -> float:
    """Slope of log gap against log t over the second half of the run (NaN if too short)."""
    t = np.arange(1, gap.size + 1)
    keep = (t > gap.size // 2) & (gap > 0)
    if np.count_nonzero(keep) < 5:
        return float("nan")
    return float(np.polyfit(np.log(t[keep]), np.log(gap[keep]), 1)[0])


def plot_dataset(path, name, runs, losses_run, lams):
    n = len(losses_run)
    fig, axes = plt.subplots(2, n, figsize=(3.2 * n, 6.4), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for col, loss in enumerate(losses_run):
        ax_it, ax_s = axes[0, col], axes[1, col]
        for i, lam in enumerate(lams):
            h = runs[loss, lam]["history"]
            gap = h["gap"]
            rel = gap / np.abs(h["best_objective"])
            t = np.arange(1, gap.size + 1)
            pos = gap > 0
            color = colors[i % len(colors)]
            ax_it.plot(t[pos], gap[pos], color=color, label=f"lam={lam:g}")
            ax_s.plot(h["elapsed"][pos], rel[pos], color=color, label=f"lam={lam:g}")
        longest = max(runs[loss, lam]["history"]["gap"].size for lam in lams)
        first = runs[loss, lams[0]]["history"]["gap"][0]
        t = np.arange(1, longest + 1)
        ax_it.plot(t, first / t, color="grey", ls=":", lw=1.0, label="ε_1 / t")
        for ax in (ax_it, ax_s):
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.grid(alpha=0.3, which="both")
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax_it.set_title(loss)
        ax_it.set_xlabel("iteration t")
        ax_s.set_xlabel("seconds")
        for target in TARGETS:
            ax_s.axhline(target, color="grey", lw=0.6, ls="--")
        if col == 0:
            ax_it.set_ylabel("gap ε_t")
            ax_s.set_ylabel("relative gap ε_t / J")
            ax_it.legend(fontsize=7)
    fig.suptitle(f"BMRM convergence on {name}")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


@script
def main(argv=None) -> int:
    parser = base_parser("convergence", __doc__.splitlines()[0])
    parser.add_argument("--losses", nargs="+", default=None, choices=LOSSES)
    parser.add_argument("--lams", nargs="+", type=lam_value, default=None)
    parser.add_argument(
        "--rows", type=positive_int, default=200_000, help="synthetic rows (not with --quick)"
    )
    parser.add_argument(
        "--tol", type=tolerance, default=None, help="relative gap (default 1e-4; 0: no target)"
    )
    parser.add_argument("--max-iter", type=positive_int, default=None)
    parser.add_argument(
        "--max-time",
        type=positive_float,
        default=None,
        help="seconds per fit on the synthetic set (half that on MQ2008)",
    )
    args = parser.parse_args(argv)
    check_distinct(parser, "--losses", args.losses)
    check_distinct(parser, "--lams", args.lams)
    quick = args.quick
    losses_run = tuple(given(args.losses, ("ordinal", "hinge") if quick else LOSSES))
    lams = tuple(given(args.lams, (1e-2,) if quick else LAMS))
    max_iter = given(args.max_iter, 300 if quick else 2000)
    max_time = given(args.max_time, 20.0 if quick else 30.0)
    tol = given(args.tol, 1e-3 if quick else 1e-4)
    root = mq2008_root(args.data)
    make_data = load_make_data()

    n_syn = 2_000 if quick else args.rows
    syn_shape = {"n_features": 20, "rows_per_query": 20} if quick else {}

    def mq2008():
        X, y, qid = load_letor(root, 1)["train"]
        return first_queries(X, y, qid, 100) if quick else (X, y, qid)

    # (name, file slug, loader, seconds per fit)
    datasets = (
        (
            "MQ2008 fold 1 train" + (", 100 queries" if quick else ""),
            "mq2008",
            mq2008,
            max_time / 2,
        ),
        (
            f"synthetic {n_syn:,} rows",
            "synthetic",
            lambda: make_data(n_syn, **syn_shape),
            max_time,
        ),
    )

    progress("warm-up (numba compile)")
    Xw, yw, qw = make_data(1_000, n_features=10, rows_per_query=20, seed=1)
    pw = pairs_from_labels(yw, qw, cost=PAIR_COST)
    for loss in losses_run:
        fit(loss, Xw, yw, qw, pw, 1e-2, 1e-2, 20, None)

    rows: list[dict] = []
    summary: list[dict] = []
    plots = []  # (file, data set, runs), drawn once every fit is done
    started = time.perf_counter()
    for name, slug, load, budget in datasets:
        X, y, qid = load()
        n_queries = np.unique(qid).size
        progress(f"{name}: {X.shape[0]} rows, {X.shape[1]} features, {n_queries} queries")
        pairs = pairs_from_labels(y, qid, cost=PAIR_COST) if "preference" in losses_run else None
        runs = {}
        for loss in losses_run:
            for lam in lams:
                res = fit(loss, X, y, qid, pairs, lam, tol, max_iter, budget)
                h = res.history
                runs[loss, lam] = {"history": h}
                rel = h["gap"] / np.abs(h["best_objective"])
                for t in range(h["gap"].size):
                    rows.append(
                        {
                            "dataset": name,
                            "rows": X.shape[0],
                            "features": X.shape[1],
                            "queries": n_queries,
                            "loss": loss,
                            "lam": lam,
                            "iteration": t + 1,
                            "gap": float(h["gap"][t]),
                            "rel_gap": float(rel[t]),
                            "objective": float(h["objective"][t]),
                            "best_objective": float(h["best_objective"][t]),
                            "lower_bound": float(h["lower_bound"][t]),
                            "elapsed": float(h["elapsed"][t]),
                            "oracle_seconds": float(h["oracle_seconds"][t]),
                            "master_seconds": float(h["master_seconds"][t]),
                            "bundle_size": int(h["bundle_size"][t]),
                            "status": res.status,
                        }
                    )
                entry = {
                    "dataset": name,
                    "loss": loss,
                    "lam": lam,
                    "iterations": res.nit,
                    "seconds": float(h["elapsed"][-1]),
                    "final_rel_gap": float(rel[-1]),
                    "status": res.status,
                    "rate": empirical_rate(h["gap"]),
                    "oracle_share": float(h["oracle_seconds"][-1] / h["elapsed"][-1]),
                    "master_share": float(h["master_seconds"][-1] / h["elapsed"][-1]),
                }
                for target in TARGETS:
                    i = first_reach(rel, target)
                    entry[f"it@{target:g}"] = None if i is None else i + 1
                    entry[f"s@{target:g}"] = None if i is None else float(h["elapsed"][i])
                summary.append(entry)
                progress(
                    f"  {loss:<10} lam={lam:<7g} {res.nit:5d} it {h['elapsed'][-1]:7.2f} s "
                    f"rel gap {rel[-1]:.2e} (status {res.status}), rate {entry['rate']:.2f}"
                )
        plots.append((f"gap_{slug}.png", name, runs))
        del X, y, qid, pairs

    total = time.perf_counter() - started

    def cell(value, spec):
        return "—" if value is None else format(value, spec)

    lines = [
        "# BMRM convergence",
        "",
        f"Plain BMRM from w = 0, stop at relative gap {tol:g}, {max_iter} iterations or "
        f"{max_time:g} s (MQ2008: {max_time / 2:g} s) per fit; losses "
        f"{', '.join(losses_run)}; ndcg and neru with k = 10, truncate_c; preference pairs "
        f"with cost {PAIR_COST}. Wall time {total:.0f} s on a shared 2-core machine. "
        "'—': target not reached. Rate: slope of log ε_t against log t over the second half "
        "of the run (−1 is the O(1/t) bound; steeper is faster). Oracle %: share of the "
        "fit's time in the loss oracle (X·w, loss, Xᵀg); status 0 converged, 2 max_iter, "
        "3 max_time.",
        "",
    ]
    header = [
        "loss",
        "lam",
        "it to 1e-2",
        "s to 1e-2",
        "it to 1e-3",
        "s to 1e-3",
        "iterations",
        "seconds",
        "final rel gap",
        "status",
        "rate",
        "oracle %",
    ]
    for name, *_ in datasets:
        table = []
        for e in summary:
            if e["dataset"] != name:
                continue
            table.append(
                [
                    e["loss"],
                    f"{e['lam']:g}",
                    cell(e["it@0.01"], "d"),
                    cell(e["s@0.01"], ".2f"),
                    cell(e["it@0.001"], "d"),
                    cell(e["s@0.001"], ".2f"),
                    e["iterations"],
                    f"{e['seconds']:.2f}",
                    f"{e['final_rel_gap']:.2e}",
                    e["status"],
                    f"{e['rate']:.2f}",
                    f"{100 * e['oracle_share']:.0f}",
                ]
            )
        lines += [f"## {name}", "", markdown_table(header, table), ""]
    make_out(args.out)
    write_csv(args.out / "results.csv", rows)
    write_text(args.out / "results.md", "\n".join(lines))
    for file, name, runs in plots:
        plot_dataset(args.out / file, name, runs, losses_run, lams)
    progress(f"done in {total:.0f} s; wrote {args.out}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

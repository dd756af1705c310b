"""The structured NDCG and NERU losses on long, noisy lists: the hinge bound against the ramp.

Two parts:

* ``--analyse``: why the hinge bound's minimiser is w = 0 on long noisy lists. Along the
  ordinal model's direction w(t) = t·w_ord, the hinge risk is decomposed at its maximising
  ranking π* into Δ(π*) = 1 − NDCG@10(π*) and the margin term Σ_i c_i (f_π*(i) − f_σ(i)),
  and the script reports how many of π*'s top ten documents have gain 0 and how high those
  documents score among the query's documents of gain 0 (the "hardest negatives"); the
  ramp bound's risk along the same direction is printed beside it.
* the grid (default): for list lengths 8, 40, 150 and 500 and label noise 0.5, 1.5 and 3
  (``gen_ltr.py``, 30 features, one seed per set), the ordinal, ListNet, NDCG (hinge and
  ramp) and NERU (hinge and ramp) losses are fitted at each lam on the training queries,
  lam is chosen on validation queries (the last quarter of the training part) by NDCG@10,
  and the chosen model is scored on the test part: test NDCG@10 and ‖w‖.

Data are made by ``../shared/tools/gen_ltr.py`` (``--tools``) into ``--cache``. Results:
``results.csv`` (one row per set × loss × lam), ``chosen.csv`` and ``results.md``.
"""

from __future__ import annotations

import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import bmrm
import losses
from bmrm.exceptions import ConvergenceWarning
from experiments._common import (
    REPO,
    base_parser,
    fail,
    make_out,
    markdown_table,
    number,
    progress,
    script,
    write_csv,
    write_results,
    write_text,
)
from losses.metrics import ndcg_score

LOSSES = {
    "ordinal": ("ordinal", {}),
    "listnet": ("listnet", {}),
    "ndcg-hinge": ("ndcg", {"bound": "hinge"}),
    "ndcg-ramp": ("ndcg", {"bound": "ramp"}),
    "neru-hinge": ("neru", {"bound": "hinge"}),
    "neru-ramp": ("neru", {"bound": "ramp"}),
}
ROWS_PER_SET = 36_000


def n_queries(docs: int) -> int:
    """Queries per generated set: about ROWS_PER_SET rows, at least 150 queries."""
    return max(150, ROWS_PER_SET // docs)


def generate(tools: Path, cache: Path, docs: int, noise: float, seed: int) -> dict:
    name = f"m{docs}_noise{noise:g}_seed{seed}"
    path = cache / f"{name}.npz"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable,
            str(tools / "gen_ltr.py"),
            "--name",
            name,
            "--queries",
            str(n_queries(docs)),
            "--docs",
            str(docs),
            "--features",
            "30",
            "--seed",
            str(seed),
            "--noise",
            f"{noise:g}",
            "--no-text",
            "--out",
            str(cache),
        ]
        subprocess.run(command, check=True, capture_output=True)
    data = np.load(path)
    X, y, qid = data["X_train"].astype(np.float64), data["y_train"], data["qid_train"]
    queries = np.unique(qid)
    train = qid < queries[int(0.75 * queries.size)]
    return {
        "train": (X[train], y[train], qid[train]),
        "valid": (X[~train], y[~train], qid[~train]),
        "test": (data["X_test"].astype(np.float64), data["y_test"], data["qid_test"]),
    }


def fit(loss_key: str, part, lam: float, tol: float):
    name, params = LOSSES[loss_key]
    start = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = bmrm.fit(part[0], part[1], losses.get(name, **params), part[2], lam=lam, tol=tol)
    return model, time.process_time() - start


def score(model, part) -> float:
    return float(ndcg_score(part[1], part[0] @ model.coef_, part[2], k=10))


def analyse(sets: dict, lam: float) -> str:
    """The hinge decomposition along t·w_ord (module docstring)."""
    rows = []
    for (docs, noise), data in sets.items():
        X, y, qid = data["train"]
        w = fit("ordinal", data["train"], lam, 1e-4)[0].coef_
        hinge = losses.get("ndcg", bound="hinge")
        ramp = losses.get("ndcg", bound="ramp")
        prepared = losses.prepare(hinge, y, qid)
        ramp_prepared = losses.prepare(ramp, y, qid)
        groups, targets = prepared.groups, prepared.targets
        query = np.repeat(np.arange(len(targets.inv_norm)), np.diff(targets.query_ptr))
        gain = targets.level_gain[targets.level_ptr[query] + targets.level]  # per document
        ptr = targets.query_ptr
        for t in (0.0, 0.1, 0.3, 1.0, 3.0, 10.0):
            f = groups.to_internal(X @ (t * w))
            values, grad = hinge.loss_grad(f, targets)
            ideal = hinge.ideal_weights(f, targets)
            placed = grad + ideal  # c at π*'s positions
            ramp_values, _ = ramp.loss_grad(f, ramp_prepared.targets)
            live = targets.inv_norm > 0
            margin = np.add.reduceat(grad * f, ptr[:-1])
            delta = values - margin
            zero_top, hardness = [], []
            for q in np.flatnonzero(live):
                s = slice(ptr[q], ptr[q + 1])
                # positions from c_i = (i + 1)^(-1/4), strictly decreasing
                position = np.rint(np.maximum(placed[s], 1e-300) ** -4.0 - 1.0)
                top = np.flatnonzero(position <= 10)
                zeros = gain[s] == 0
                zero_top.append(np.mean(zeros[top]) if top.size else np.nan)
                negatives = f[s][zeros]
                chosen = top[zeros[top]]
                if t > 0 and chosen.size and negatives.size > 1:
                    pct = [(negatives < f[s][d]).mean() for d in chosen]
                    hardness.append(np.mean(pct))
            rows.append(
                (
                    docs,
                    f"{noise:g}",
                    f"{t:g}",
                    f"{values[live].mean():.4f}",
                    f"{delta[live].mean():.4f}",
                    f"{margin[live].mean():.4f}",
                    f"{np.nanmean(zero_top):.3f}",
                    f"{np.mean(hardness):.3f}" if hardness else "—",
                    f"{ramp_values[live].mean():.4f}",
                )
            )
    header = (
        "docs",
        "noise",
        "t",
        "hinge risk",
        "Δ(π*)",
        "margin term",
        "gain-0 share of π*'s top 10",
        "their score percentile among gain 0",
        "ramp risk",
    )
    return markdown_table(header, rows)


def grid(sets: dict, loss_keys, lams, tol: float) -> tuple[list, list]:
    results, chosen = [], []
    for (docs, noise), data in sets.items():
        file_order = float(
            ndcg_score(data["test"][1], np.zeros(data["test"][1].size), data["test"][2], k=10)
        )
        for key in loss_keys:
            best = None
            for lam in lams:
                model, seconds = fit(key, data["train"], lam, tol)
                row = {
                    "docs": docs,
                    "noise": noise,
                    "loss": key,
                    "lam": lam,
                    "valid_ndcg10": score(model, data["valid"]),
                    "test_ndcg10": score(model, data["test"]),
                    "norm_w": float(np.linalg.norm(model.coef_)),
                    "cpu_seconds": seconds,
                    "iterations": int(model.result_.nit),
                    "file_order_test_ndcg10": file_order,
                }
                results.append(row)
                progress(
                    f"m={docs} noise={noise:g} {key:10s} lam={lam:g} "
                    f"‖w‖={row['norm_w']:.3g} valid={row['valid_ndcg10']:.4f} "
                    f"test={row['test_ndcg10']:.4f} {seconds:.1f} s"
                )
                if best is None or row["valid_ndcg10"] > best["valid_ndcg10"]:
                    best = row
            chosen.append(best)
    return results, chosen


def report(chosen: list, loss_keys) -> str:
    by = {(r["docs"], r["noise"], r["loss"]): r for r in chosen}
    settings = sorted({(r["docs"], r["noise"]) for r in chosen})
    rows = []
    for docs, noise in settings:
        cells = [
            docs,
            f"{noise:g}",
            f"{by[(docs, noise, loss_keys[0])]['file_order_test_ndcg10']:.4f}",
        ]
        for key in loss_keys:
            r = by[(docs, noise, key)]
            cells.append(f"{r['test_ndcg10']:.4f} ({r['norm_w']:.2g})")
        rows.append(cells)
    header = ["docs", "noise", "w = 0", *[f"{k} NDCG@10 (‖w‖)" for k in loss_keys]]
    return markdown_table(header, rows)


@script
def main(argv=None) -> int:
    parser = base_parser("long_queries", __doc__.split("\n")[0], data=False)
    parser.add_argument(
        "--tools",
        type=Path,
        default=REPO.parent / "shared" / "tools",
        help="folder of gen_ltr.py (default: ../shared/tools)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=REPO / "results" / "long_queries_data",
        help="where the generated sets are kept",
    )
    parser.add_argument("--docs", type=int, nargs="+", default=[8, 40, 150, 500])
    parser.add_argument("--noise", type=number(float, 0.0), nargs="+", default=[0.5, 1.5, 3.0])
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--losses", nargs="+", choices=list(LOSSES), default=list(LOSSES))
    parser.add_argument(
        "--lams", type=number(float, 1e-30, 1e12), nargs="+", default=[1e-4, 1e-3, 1e-2, 1e-1, 1.0]
    )
    parser.add_argument("--tol", type=number(float, 0.0, 1.0, high_open=True), default=1e-4)
    parser.add_argument("--analyse", action="store_true", help="the hinge decomposition only")
    args = parser.parse_args(argv)
    if args.quick:
        args.docs, args.noise, args.lams = [8, 40], [3.0], [1e-2]
        args.losses = ["ordinal", "ndcg-hinge", "ndcg-ramp"]
    if not (args.tools / "gen_ltr.py").exists():
        fail(f"gen_ltr.py not found in {args.tools} (set --tools)")
    sets = {
        (docs, noise): generate(args.tools, args.cache, docs, noise, args.seed)
        for docs in args.docs
        for noise in args.noise
    }
    out = make_out(args.out)
    if args.analyse:
        text = analyse(sets, lam=1e-3)
        write_text(out / "analysis.md", text + "\n")
        print(text)
        return 0
    results, chosen = grid(sets, args.losses, args.lams, args.tol)
    write_csv(out / "results.csv", results)
    write_csv(out / "chosen.csv", chosen)
    text = report(chosen, args.losses)
    write_text(out / "results.md", text + "\n")
    chosen_ids = {id(r) for r in chosen}
    tidy = [
        {
            "experiment": "long_queries",
            "dataset": f"gen_ltr docs={r['docs']} noise={r['noise']:g}",
            "method": r["loss"],
            "setting": f"lam={r['lam']:g}",
            "repetition": 0,
            "docs": r["docs"],
            "noise": r["noise"],
            "lam": r["lam"],
            "chosen": id(r) in chosen_ids,
            "valid_ndcg_at_10": r["valid_ndcg10"],
            "test_ndcg_at_10": r["test_ndcg10"],
            "file_order_test_ndcg_at_10": r["file_order_test_ndcg10"],
            "norm_w": r["norm_w"],
            "cpu_s": r["cpu_seconds"],
            "iterations": r["iterations"],
        }
        for r in results
    ]
    write_results("long_queries", tidy, args.results or out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

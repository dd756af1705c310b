"""Make the results page of the documentation from the tidy result files.

    python docs/make_results.py [--results experiments/results] [--out docs/generated/results]

Every experiment or benchmark script writes ``experiments/results/<script>.csv``: one row
per method × data set × setting × repetition, the columns ``experiment, dataset, method,
setting, repetition`` first, then measured columns whose names carry their unit
(``wall_s``, ``cpu_s``, ``ndcg_at_10``); beside it ``<script>.meta.json`` gives the exact
command, the date, the machine (cores, load average) and the git commit of the run.

This script reads the current files and writes ``index.md`` (MyST Markdown) and its plots
into ``--out``: one section per file, with the command that reproduces it. The headline
files get their own tables (``letor``, ``bench_iterations``, ``bench_first_run``,
``bench_scale``, ``long_queries``, ``bench_newton``); any other file, such as
``cofirank*.csv``, gets a generic table of medians over repetitions. The documentation build
runs it (``docs/conf.py``); nothing it writes is committed.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
KEYS = ["experiment", "dataset", "method", "setting", "repetition"]
# the order of the sections; files not named here follow in name order
ORDER = [
    "letor",
    "bench_iterations",
    "bench_newton",
    "bench_first_run",
    "bench_scale",
    "long_queries",
]
TITLES = {
    "letor": "LETOR 4.0 MQ2008 against the official baselines",
    "bench_iterations": "Against SVM^rank: oracle calls and seconds to its objective",
    "bench_newton": "Newton-CG against LIBLINEAR-RankSVM and scikit-learn",
    "bench_first_run": "First run: compilation from an empty numba cache",
    "bench_scale": "Dask: one worker against two",
    "long_queries": "Long, noisy queries: the hinge bound against the ramp",
}


def fmt(value) -> str:
    """A cell: floats to 4 significant digits, missing values as a dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float):
        if value == int(value) and abs(value) < 1e6:
            return f"{int(value)}"
        return f"{value:.4g}"
    return str(value)


def markdown(frame: pd.DataFrame) -> str:
    """``frame`` as a Markdown table (its index becomes columns)."""
    frame = frame.reset_index() if frame.index.name or frame.index.nlevels > 1 else frame
    lines = ["| " + " | ".join(str(c) for c in frame.columns) + " |"]
    lines.append("|" + "---|" * len(frame.columns))
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(fmt(v) for v in row) + " |")
    return "\n".join(lines)


def provenance(meta: dict, n_rows: int) -> str:
    """The command, date, machine and commit of a run, as the lines under its title."""
    machine = meta.get("machine", {})
    load = machine.get("load_average")
    parts = [
        f"Reproduce: `{meta.get('command', '(command not recorded)')}`",
        "",
        f"Run {meta.get('date', '(date not recorded)')} on {machine.get('cores', '?')} cores"
        + (f" (load average {load[0]:g} at the end)" if load else "")
        + f", commit `{str(meta.get('git_commit', 'unknown'))[:10]}`; {n_rows} rows.",
    ]
    if meta.get("note"):
        parts += ["", meta["note"]]
    return "\n".join(parts)


def medians(frame: pd.DataFrame, by: list[str], columns: list[str]) -> pd.DataFrame:
    """Medians of ``columns`` over the repetitions (the other keys kept in ``by``)."""
    present = [c for c in columns if c in frame]
    numeric = frame[by + present].copy()
    for c in present:
        numeric[c] = pd.to_numeric(numeric[c], errors="coerce")
    return numeric.groupby(by, sort=False)[present].median()


# ---------------------------------------------------------------------- one per experiment


def letor(frame: pd.DataFrame, out: Path, name: str) -> str:
    measures = ["ndcg_at_1", "ndcg_at_5", "ndcg_at_10", "map", "neru_at_10"]
    table = medians(frame, ["method", "setting", "source"], measures)
    means = table.groupby(["method", "source"], sort=False).mean()
    means = means.sort_values("ndcg_at_10", ascending=False)
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(means) + 1))
    labels = [f"{m} ({'official' if s != 'bmrm' else 'bmrm'})" for m, s in means.index]
    ax.barh(labels[::-1], means["ndcg_at_10"].to_numpy()[::-1], color="C0")
    ax.set_xlabel("test NDCG@10, mean over the folds (LETOR rules)")
    lo = float(means["ndcg_at_10"].min())
    ax.set_xlim(max(0.0, lo - 0.02), float(means["ndcg_at_10"].max()) + 0.01)
    fig.tight_layout()
    fig.savefig(out / f"{name}.png", dpi=90)
    plt.close(fig)
    return (
        "Test means over the folds, LETOR evaluation rules; lam chosen on each validation "
        "fold by NDCG@10 (the official baselines' figures from their published tables).\n\n"
        + markdown(means)
        + f"\n\n![NDCG@10 per method]({name}.png)\n"
    )


def bench_iterations(frame: pd.DataFrame, out: Path, name: str) -> str:
    by = ["dataset", "setting", "method"]
    table = medians(
        frame,
        by,
        ["oracle_calls", "iterations", "wall_s", "rel_gap", "svmrank_iterations", "svmrank_cpu_s"],
    )
    return (
        "Medians over the repetitions, compilation excluded; `svmrank_*` are SVM^rank's own "
        "iterations and solver CPU seconds on the same set and C (its reference runs), "
        "beside the rows whose target is its objective (SVM^rank's C is `lam = 1/C`).\n\n"
        + markdown(table)
        + "\n"
    )


def bench_newton(frame: pd.DataFrame, out: Path, name: str) -> str:
    table = medians(
        frame,
        ["dataset", "setting", "method"],
        ["iterations", "hessp", "passes", "cpu_s", "wall_s", "objective"],
    )
    return "Medians over the repetitions, compilation excluded.\n\n" + markdown(table) + "\n"


def bench_first_run(frame: pd.DataFrame, out: Path, name: str) -> str:
    table = medians(frame, ["method", "setting"], ["wall_s", "cpu_s"]).reset_index()
    fits = table[table["method"].isin(["cold", "warm", "second"])]
    others = table[~table["method"].isin(["cold", "warm", "second", "warmed up"])]
    text = (
        "Medians over the repetitions, wall and CPU seconds (CPU seconds are the steadier "
        "figure on a loaded machine). `cold`: the first fit of a loss in a new process with "
        "an empty numba cache; `warm`: a new process whose cache holds the kernels; "
        "`second`: the same fit again in the process of `cold`.\n\n"
    )
    if not fits.empty:
        pivot = fits.pivot(index="setting", columns="method", values=["wall_s", "cpu_s"])
        pivot = pivot.reindex(fits["setting"].drop_duplicates())
        pivot.columns = [f"{method} {unit}" for unit, method in pivot.columns]
        pivot.index.name = "loss"
        text += markdown(pivot) + "\n"
        fig, ax = plt.subplots(figsize=(7, 3.2))
        cpu = fits.pivot(index="setting", columns="method", values="cpu_s")
        cpu.reindex(fits["setting"].drop_duplicates()).plot.bar(ax=ax, rot=30)
        ax.set_ylabel("CPU seconds")
        ax.set_xlabel("loss")
        fig.tight_layout()
        fig.savefig(out / f"{name}.png", dpi=90)
        plt.close(fig)
        text += f"\n![first fit per loss]({name}.png)\n"
    if not others.empty:
        text += "\nWhole runs:\n\n" + markdown(others.set_index(["method", "setting"])) + "\n"
    return text


def bench_scale(frame: pd.DataFrame, out: Path, name: str) -> str:
    columns = ["s_per_iter", "rows_per_s", "rows_per_worker_cpu_s", "worker_cpu_s_per_iter"]
    columns += ["payload_bytes_per_iter", "load_1min", "fit_s", "fit_cpu_s", "iterations"]
    columns += ["peak_over_x"]
    table = medians(frame, ["dataset", "setting", "method"], columns)
    table = table.dropna(axis=1, how="all")
    text = (
        "Medians over the rounds. Rows per worker CPU-second stay put when other work loads "
        "the machine; seconds per iteration do not (`load_1min` is the load average during "
        "the run: with more runnable processes than cores a second worker cannot run "
        "alongside the first).\n\n" + markdown(table) + "\n"
    )
    if "s_per_iter" in table:
        dask = table.reset_index()
        dask = dask[dask["method"].str.startswith("dask")].dropna(subset=["s_per_iter"])
        lines = []
        for setting, group in dask.groupby("setting"):
            per = dict(zip(group["method"], group["s_per_iter"], strict=True))
            one, two = per.get("dask 1 worker(s)"), per.get("dask 2 worker(s)")
            if one and two:
                lines.append(f"- {setting}: {one / two:.2f}")
        if lines:
            text += (
                "\nSeconds per iteration with one worker over those with two:\n\n"
                + "\n".join(lines)
                + "\n"
            )
    return text


def long_queries(frame: pd.DataFrame, out: Path, name: str) -> str:
    chosen = frame[frame["chosen"].astype(str) == "True"]
    table = chosen.pivot_table(
        index=["docs", "noise"], columns="method", values="test_ndcg_at_10", aggfunc="median"
    )
    file_order = chosen.groupby(["docs", "noise"])["file_order_test_ndcg_at_10"].first()
    table.insert(0, "w = 0", file_order)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for method in table.columns:
        series = table[method].groupby(level="docs").mean()
        ax.plot(series.index, series.to_numpy(), marker="o", label=method)
    ax.set_xscale("log")
    ax.set_xlabel("documents per query")
    ax.set_ylabel("test NDCG@10 (mean over noise)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / f"{name}.png", dpi=90)
    plt.close(fig)
    return (
        "Test NDCG@10 of the model whose lam was chosen on validation, per list length and "
        "label noise.\n\n" + markdown(table) + f"\n\n![NDCG@10 against list length]({name}.png)\n"
    )


def generic(frame: pd.DataFrame, out: Path, name: str) -> str:
    measured = [c for c in frame.columns if c not in KEYS]
    numeric = [c for c in measured if pd.to_numeric(frame[c], errors="coerce").notna().any()]
    table = medians(frame, ["dataset", "method", "setting"], numeric[:8])
    return "Medians over the repetitions.\n\n" + markdown(table) + "\n"


MAKERS = {
    "letor": letor,
    "bench_iterations": bench_iterations,
    "bench_newton": bench_newton,
    "bench_first_run": bench_first_run,
    "bench_scale": bench_scale,
    "long_queries": long_queries,
}


def page(results: Path, out: Path) -> str:
    """The results page's Markdown; its plots are written into ``out``."""
    files = sorted(results.glob("*.csv"))
    rank = {name: i for i, name in enumerate(ORDER)}
    files.sort(key=lambda p: (rank.get(p.stem, len(ORDER)), p.stem))
    lines = [
        "# Results",
        "",
        "Made by `docs/make_results.py` from the tidy result files of "
        "`experiments/results/` when the documentation is built: each section names the "
        "command that reproduced it, with the date, machine and commit of the run. Times "
        "come from a shared 2-core machine and are indicative; ratios within one run "
        "compare better than seconds across runs. Earlier measurements are in the "
        "repository's history.",
        "",
    ]
    if not files:
        lines += ["No result files were found.", ""]
    for path in files:
        name = path.stem
        frame = pd.read_csv(path)
        for key in ("dataset", "method", "setting"):  # an empty key is a value, not missing
            if key in frame:
                frame[key] = frame[key].fillna("").astype(str)
        meta_path = path.with_suffix(".meta.json")
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        title = TITLES.get(name, f"{name}")
        lines += [f"## {title}", "", f"File: `experiments/results/{path.name}`", ""]
        lines += [provenance(meta, len(frame)), ""]
        maker = MAKERS.get(name, generic)
        lines += [maker(frame, out, name), ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "experiments" / "results")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "generated" / "results")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    text = page(args.results, args.out)
    target = args.out / "index.md"
    if not target.exists() or target.read_text() != text:
        target.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

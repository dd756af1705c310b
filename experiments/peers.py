"""Linear bundle-method rankers beside boosted trees: training time and test NDCG@10.

    python experiments/peers.py [--data ../shared/data] [--out results/peers] [--quick]

Data
----
``MQ2008``: the five LETOR 4.0 folds (train / validation / test), features as given (the
LETOR files are normalised per query to [0, 1]). ``lightgbm-example``: LightGBM's
lambdarank example (``rank.train`` / ``rank.test`` with their ``.query`` group files, 300
sparse features in [0, 1]); it has no validation file, so a seeded 20 % of the training
queries is held out for selection and the chosen setting is refitted on all training rows.

Methods
-------
This package (:func:`bmrm.fit`, L2, ``tol=1e-3``): the losses ``squared`` (pointwise
regression on the labels), ``ordinal`` (all within-query pairs, cost 1, normalised per
query), ``preference`` (the same pairs with cost 2^{y_j} − 2^{y_i}, the difference of the
NDCG gains, from :func:`losses.preference.pairs_from_labels`) and ``ndcg`` (the structured
max-margin bound on 1 − NDCG@10, default position weights). lam is chosen on the validation
queries over {1e-5, ..., 1e-1} by NDCG@10.

Peers: LightGBM's ``LGBMRanker`` (lambdarank) and XGBoost's ``XGBRanker`` with
``rank:ndcg`` and ``rank:pairwise``; learning rate 0.1, otherwise library defaults; the
number of trees (at most 500) is chosen by early stopping on the validation queries (the
library's own NDCG@10, patience 50), then the model is refitted with that many trees. Each
method thus tunes one parameter on the same validation queries.

Measures
--------
All test scores come from :mod:`losses.metrics`: NDCG@10 with gain 2^r − 1 and discount
1/log2(i + 1) (``convention="exp"``, tied scores averaged), and, as the LETOR 4.0 tool
computes them, NDCG@10 (``convention="letor"``: positions 1 and 2 undiscounted, a query with
fewer than 10 documents scores 0) and MAP (label >= 1 relevant, ties in file order). A
query without relevant documents counts as 0 in every mean. The official LETOR 4.0
baselines' test figures (mean of the five folds) are listed for reference.

Timing: the training time of the chosen setting (for this package including the pair list of
``preference``), median of 3 repetitions, after an untimed warm-up that compiles the numba
kernels and loads the libraries. Every method runs on ``--threads`` threads (default 1:
the machine is shared, and it keeps the comparison of the algorithms, not of their thread
pools).

Writes ``results.csv`` (one row per data set × fold × method), ``results.md`` and
``peers.png`` (test NDCG@10 against training time).
"""

from __future__ import annotations

import statistics
import time
import warnings
from pathlib import Path

import numba
import numpy as np
from _common import (
    base_parser,
    data_errors,
    fail,
    given,
    load_letor,
    make_out,
    markdown_table,
    mq2008_root,
    number,
    positive_int,
    progress,
    require,
    save_figure,
    script,
    write_csv,
    write_text,
)
from threadpoolctl import threadpool_limits

import bmrm
from bmrm.io import load_svmlight
from losses.metrics import map_score, ndcg_score
from losses.preference import pairs_from_labels

NAME = "peers"
LAMS = (1e-5, 1e-4, 1e-3, 1e-2, 1e-1)
OURS = ("squared", "ordinal", "preference", "ndcg")
PEERS = ("LightGBM lambdarank", "XGBoost rank:ndcg", "XGBoost rank:pairwise")
MAX_TREES = 500
PATIENCE = 50
LEARNING_RATE = 0.1
LABELS = {
    "ndcg10_exp": "NDCG@10 (exp)",
    "ndcg10_letor": "NDCG@10 (LETOR)",
    "map_letor": "MAP (LETOR)",
}
BASELINES = ("RankSVM-Struct", "RankBoost", "AdaRank-MAP", "AdaRank-NDCG")


# ----------------------------------------------------------------------------- data


def _by_query(X, y, qid):
    """Rows ordered by query id, file order kept inside a query (XGBoost needs sorted ids)."""
    order = np.argsort(qid, kind="stable")
    return X[order], y[order], qid[order]


def mq2008_folds(root: Path, folds, n_train_queries: int | None):
    for fold in folds:
        splits = load_letor(root, fold)
        out = {name: _by_query(*splits[name]) for name in ("train", "vali", "test")}
        if n_train_queries is not None:
            X, y, qid = out["train"]
            keep = np.isin(qid, np.unique(qid)[:n_train_queries])
            out["train"] = (X[keep], y[keep], qid[keep])
        yield f"Fold{fold}", out


def lightgbm_example(root: Path, seed: int = 0):
    X, y, qid = load_svmlight(root / "rank.train", query_file="auto")
    Xt, yt, qt = load_svmlight(root / "rank.test", query_file="auto", n_features=X.shape[1])
    queries = np.unique(qid)
    held = np.random.default_rng(seed).choice(queries, size=len(queries) // 5, replace=False)
    is_vali = np.isin(qid, held)
    full = (X, y, qid)
    return {
        "train": (X[~is_vali], y[~is_vali], qid[~is_vali]),
        "vali": (X[is_vali], y[is_vali], qid[is_vali]),
        "test": (Xt, yt, qt),
        "refit": full,
    }


def letor_baselines(folder: Path) -> dict[str, tuple[float, float]]:
    """Test NDCG@10 and MAP of each official MQ2008 baseline, averaged over its five folds."""
    out = {}
    for name in BASELINES:
        path = folder / f"{name}.MQ2008.txt"
        if not path.exists():
            continue
        text = path.read_text().split("Performance on testing set")[1]
        text = text.split("Performance on validation set")[0]
        tables, current = [], None
        for line in text.splitlines():
            fields = line.split()
            if fields and fields[0] in ("Para", "Folds"):
                current = []
                tables.append(current)
            elif current is not None and len(fields) >= 12 and fields[0] != "Avg":
                current.append([float(v) for v in fields[1:12]])
        ndcg10 = statistics.mean(row[9] for row in tables[0])
        map_ = statistics.mean(row[10] for row in tables[1])
        out[name] = (ndcg10, map_)
    return out


# ----------------------------------------------------------------------------- methods


def fit_ours(loss: str, lam: float, X, y, qid):
    data = {}
    if loss == "preference":
        pairs, costs = pairs_from_labels(y, qid, cost="gain_difference")
        data = {"pairs": pairs, "pair_costs": costs}
    params = {"k": 10} if loss == "ndcg" else None
    return bmrm.fit(X, y, loss, qid, lam=lam, loss_params=params, **data)


def _groups(qid):
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
    return np.diff(np.r_[starts, len(qid)])


def make_peer(name: str, n_trees: int, threads: int, early_stop: bool):
    if name.startswith("LightGBM"):
        import lightgbm

        return lightgbm.LGBMRanker(
            objective="lambdarank",
            n_estimators=n_trees,
            learning_rate=LEARNING_RATE,
            n_jobs=threads,
            random_state=0,
            verbose=-1,
        )
    import xgboost

    return xgboost.XGBRanker(
        objective=name.split()[-1],
        n_estimators=n_trees,
        learning_rate=LEARNING_RATE,
        tree_method="hist",
        eval_metric="ndcg@10",
        early_stopping_rounds=min(PATIENCE, n_trees) if early_stop else None,
        n_jobs=threads,
        random_state=0,
    )


def fit_peer(name: str, n_trees: int, threads: int, X, y, qid, vali=None):
    model = make_peer(name, n_trees, threads, vali is not None)
    if name.startswith("LightGBM"):
        kwargs = {}
        if vali is not None:
            import lightgbm

            kwargs = {
                "eval_X": (vali[0],),
                "eval_y": (vali[1],),
                "eval_group": [_groups(vali[2])],
                "eval_at": [10],
                "callbacks": [lightgbm.early_stopping(min(PATIENCE, n_trees), verbose=False)],
            }
        return model.fit(X, y, group=_groups(qid), **kwargs)
    kwargs = {}
    if vali is not None:
        kwargs = {"eval_set": [(vali[0], vali[1])], "eval_qid": [vali[2]], "verbose": False}
    return model.fit(X, y, qid=qid, **kwargs)


def best_trees(name: str, model) -> int:
    if name.startswith("LightGBM"):
        return int(model.best_iteration_ or model.n_estimators)
    return int(model.best_iteration) + 1


def ndcg10(y, scores, qid) -> float:
    return ndcg_score(y, scores, qid, k=10)


def timed(fn, repeats: int):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return result, times


def run_split(dataset: str, fold: str, data: dict, args, lams, max_trees) -> list[dict]:
    Xtr, ytr, qtr = data["train"]
    Xva, yva, qva = data["vali"]
    Xte, yte, qte = data["test"]
    refit = data.get("refit", data["train"])
    rows = []

    def record(method, param_name, param, model, times, select_s, vali_score):
        f = model.predict(Xte)
        result = getattr(model, "result_", None)
        rows.append(
            {
                "dataset": dataset,
                "fold": fold,
                "method": method,
                "param": param_name,
                "value": param,
                "train_rows": refit[0].shape[0],
                "fit_s": statistics.median(times),
                "fit_s_all": " ".join(f"{t:.4f}" for t in times),
                "select_s": select_s,
                "converged": None if result is None else bool(result.success),
                "coef_norm": None if result is None else float(np.linalg.norm(model.coef_)),
                "iterations": None if result is None else int(result.nit),
                "vali_ndcg10": vali_score,
                "ndcg10_exp": ndcg10(yte, f, qte),
                "ndcg10_letor": ndcg_score(yte, f, qte, k=10, convention="letor"),
                "map_letor": map_score(yte, f, qte, threshold=1, ties="stable"),
            }
        )
        r = rows[-1]
        progress(
            f"{dataset} {fold} {method}: {param_name}={param}, fit {r['fit_s']:.3f} s, "
            f"NDCG@10 {r['ndcg10_exp']:.4f} (LETOR {r['ndcg10_letor']:.4f})"
        )

    for loss in OURS:
        start = time.perf_counter()
        scores = [
            ndcg10(yva, fit_ours(loss, lam, Xtr, ytr, qtr).predict(Xva), qva) for lam in lams
        ]
        select_s = time.perf_counter() - start
        best = max(range(len(lams)), key=lambda i: (scores[i], lams[i]))
        model, times = timed(lambda: fit_ours(loss, lams[best], *refit), args.repeats)  # noqa: B023
        record(f"bmrm {loss}", "lam", lams[best], model, times, select_s, scores[best])

    for name in PEERS:
        start = time.perf_counter()
        probe = fit_peer(name, max_trees, args.threads, Xtr, ytr, qtr, vali=(Xva, yva, qva))
        n_trees = best_trees(name, probe)
        vali_score = ndcg10(yva, probe.predict(Xva), qva)
        select_s = time.perf_counter() - start
        model, times = timed(
            lambda: fit_peer(name, n_trees, args.threads, *refit),  # noqa: B023
            args.repeats,
        )
        record(name, "trees", n_trees, model, times, select_s, vali_score)
    return rows


def warm_up(threads: int) -> None:
    """Compile the numba kernels and load the tree libraries, untimed."""
    rng = np.random.default_rng(0)
    X = rng.random((200, 5))
    y = rng.integers(0, 3, 200).astype(np.float64)
    qid = np.repeat(np.arange(20), 10)
    for loss in OURS:
        fit_ours(loss, 1e-2, X, y, qid).predict(X)
    for name in PEERS:
        fit_peer(name, 3, threads, X, y, qid, vali=(X, y, qid)).predict(X)
    ndcg10(y, X[:, 0], qid)
    ndcg_score(y, X[:, 0], qid, k=10, convention="letor")
    map_score(y, X[:, 0], qid, threshold=1, ties="stable")


# ----------------------------------------------------------------------------- report


def mean_std(values) -> str:
    values = list(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.4f} ± {sd:.4f}" if len(values) > 1 else f"{values[0]:.4f}"


def dataset_table(rows, dataset: str, letor: bool) -> str:
    sel = [r for r in rows if r["dataset"] == dataset]
    methods = list(dict.fromkeys(r["method"] for r in sel))
    keys = ["ndcg10_exp", "ndcg10_letor", "map_letor"] if letor else ["ndcg10_exp"]
    means = {
        (m, k): statistics.mean(r[k] for r in sel if r["method"] == m)
        for m in methods
        for k in keys
    }
    best = {k: max(round(means[(m, k)], 4) for m in methods) for k in keys}
    header = ["method", "chosen (per fold)", "train s (median)", "select s"]
    header += [LABELS[k] for k in keys]
    body = []
    for m in methods:
        mine = [r for r in sel if r["method"] == m]
        chosen = " ".join(f"{r['value']:g}" for r in mine)
        fit_s = statistics.median(r["fit_s"] for r in mine)
        select_s = statistics.median(r["select_s"] for r in mine)
        cells = []
        for k in keys:
            text = mean_std(r[k] for r in mine)
            cells.append(f"**{text}**" if round(means[(m, k)], 4) == best[k] else text)
        body.append([m, f"{mine[0]['param']} {chosen}", f"{fit_s:.3f}", f"{select_s:.2f}", *cells])
    return markdown_table(header, body)


def zero_weight_note(rows, dataset: str) -> str:
    """Say which fits returned w = 0 (every test score tied), so no reader misreads them."""
    zero = [
        f"{r['method']} ({r['fold']})"
        for r in rows
        if r["dataset"] == dataset and r["coef_norm"] is not None and r["coef_norm"] == 0.0
    ]
    if not zero:
        return ""
    return (
        "w = 0 (all test scores tied; NDCG then averages over the orders of the ties, and the "
        "LETOR convention keeps file order) for: " + ", ".join(zero) + "\n"
    )


def plot(rows, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(1, len(datasets), figsize=(6 * len(datasets), 4.5), squeeze=False)
    for ax, d in zip(axes[0], datasets, strict=True):
        sel = [r for r in rows if r["dataset"] == d]
        for m in dict.fromkeys(r["method"] for r in sel):
            mine = [r for r in sel if r["method"] == m]
            t = statistics.median(r["fit_s"] for r in mine)
            s = statistics.mean(r["ndcg10_exp"] for r in mine)
            ax.plot(t, s, "o" if m.startswith("bmrm") else "s", ms=8, label=m)
        ax.set_xscale("log")
        ax.margins(0.15)
        ax.set_xlabel("training seconds (median)")
        ax.set_ylabel("test NDCG@10 (gain 2^r − 1)")
        ax.set_title(d)
        ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="center right")
    fig.tight_layout(rect=(0, 0, 0.82, 1))
    save_figure(fig, path, dpi=120)
    plt.close(fig)


# numba's threads: 1 .. the number it may use
THREADS = number(int, 1, numba.config.NUMBA_NUM_THREADS, name="threads")


@script
def main(argv=None) -> int:
    parser = base_parser(NAME, __doc__.splitlines()[0])
    parser.add_argument("--threads", type=THREADS, default=1, help="threads for every method")
    parser.add_argument("--repeats", type=positive_int, default=None, help="timed repetitions (3)")
    args = parser.parse_args(argv)
    mq = mq2008_root(args.data, "the MQ2008 folder")
    lgb_dir = require(args.data / "lightgbm_rank", "the LightGBM ranking example")
    with data_errors(lgb_dir):
        example = lightgbm_example(lgb_dir)
    baselines = args.data / "letor4_baselines"  # optional: listed when present
    try:
        base = letor_baselines(baselines)
    except (OSError, ValueError, IndexError) as exc:
        fail(f"{baselines}: a baseline table cannot be read: {exc!r}")
    args.repeats = given(args.repeats, 1 if args.quick else 3)
    numba.set_num_threads(args.threads)
    threadpool_limits(args.threads)
    warnings.filterwarnings("ignore", category=UserWarning)
    lams = (1e-2, 1e-1) if args.quick else LAMS
    max_trees = 20 if args.quick else MAX_TREES
    folds = (1,) if args.quick else (1, 2, 3, 4, 5)

    warm_up(args.threads)
    start = time.perf_counter()
    rows = []
    for fold, data in mq2008_folds(mq, folds, 100 if args.quick else None):
        rows += run_split("MQ2008", fold, data, args, lams, max_trees)
    rows += run_split("lightgbm-example", "test", example, args, lams, max_trees)
    elapsed = time.perf_counter() - start

    ref = markdown_table(
        ["official LETOR 4.0 baseline", "NDCG@10 (LETOR)", "MAP (LETOR)"],
        [[name, f"{n:.4f}", f"{m:.4f}"] for name, (n, m) in base.items()],
    )
    mq_note = (
        "Fold1, first 100 training queries" if args.quick else "mean ± std over the five folds"
    )
    md = [
        "# Linear bundle-method rankers vs boosted trees",
        "",
        f"Training time: median of {args.repeats} run(s) of the chosen setting, after warm-up, "
        f"{args.threads} thread(s) for every method. Best mean per column in bold. lam grid "
        f"{list(lams)}; trees: at most {max_trees}, early stopping on validation NDCG@10. "
        f"Total run time {elapsed:.0f} s.",
        "",
        f"## MQ2008 ({mq_note})",
        "",
        dataset_table(rows, "MQ2008", letor=True),
        "",
        zero_weight_note(rows, "MQ2008"),
        ref,
        "",
        "## LightGBM lambdarank example (test set; selection on 20 % of the training queries)",
        "",
        dataset_table(rows, "lightgbm-example", letor=True),
        "",
        zero_weight_note(rows, "lightgbm-example"),
    ]
    make_out(args.out)
    write_csv(args.out / "results.csv", rows)
    write_text(args.out / "results.md", "\n".join(md))
    plot(rows, args.out / "peers.png")
    print("\n".join(md))
    progress(f"wrote {args.out}/results.csv, results.md, peers.png ({elapsed:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The expected-gain ranking function against the linear one, on listwise surrogate losses.

    python experiments/expected_gain.py [DATASET ...] [--data ../shared/data] [--quick]

Reproduces the protocol of Yang, Ravikumar & Lease, "A new class of ranking functions for
DCG-like evaluation metrics using conditional probability models" (§6): for each data set,
each surrogate loss (cosine, ListNet cross-entropy, listwise squared) is trained with the
linear ranking function f = wᵀx and with the expected gain under a multiclass logistic
model, h_W(x) = Σ_j (2^j − 1) softmax(W x)_j (:class:`bmrm.scorers.ExpectedGainScorer`),
warm-started from the linear model of the same loss and parameters.

Data sets (positional, default ``<data>/mq2008``): a LETOR 4.0 folder of partitions
``S1.txt`` .. ``S5.txt`` (rotated into five folds by :func:`bmrm.io.load_letor_fold`), or a
LETOR 3.0 folder ``Fold1`` .. ``Fold5`` each holding ``train.txt``, ``vali.txt`` and
``test.txt``.

Protocol
--------
* Losses: ``cosine`` (ψ(r) = r), ``listnet`` (target softmax(α r)), ``listwise_squared``
  (Σ_j (r_j − h_j)²), all from :mod:`losses.surrogate`.
* Training: the linear model by the bundle method (ListNet, squared: convex) or L-BFGS
  (cosine: scale invariant, so lam has no effect and the unit-norm direction is kept);
  the expected-gain model by L-BFGS on lam/2‖W‖² + R(W) from W_j = (j − (K−1)/2) w
  (``--solver nrbm``: the non-convex bundle method instead; with ``--clip-training`` the
  objective is discontinuous and the automatic choice is NRBM).
  The seed used plain gradient descent without regularization and a fixed iteration budget.
* Selection on the validation fold by NDCG@10: lam from ``--lams``, α from
  {0.1, 0.3, 0.5, 0.7, 1, 2, 5, 10} (ListNet only: the other losses have no α), and for the
  expected gain ε from {0.6, 0.7, 0.8, 0.9, 1}. ε clips probabilities at *prediction* (one
  trained model serves every ε); the seed also clipped during its gradient descent, which
  ``--clip-training`` reproduces (one model per ε, the objective then being discontinuous).
* Features: as read, plus a constant feature of value 1 (``--no-constant`` drops it): the
  linear model's intercept and the logistic model's per-level biases (the seed does not
  say whether it used either).
* Test: NDCG@1, 5, 10 with the LETOR evaluation rules (gain 2^r − 1, a query shorter than k
  or without relevant documents scores 0), averaged over the folds.
* Significance: paired randomization test over the pooled test queries of all folds
  (two-sided, sign flips), p < 0.05: expected gain *better* / *worse* than linear, else
  *same*, for each loss × measure (9 cases per data set), as in the seed's Table 1, with the
  average relative change of the fold-averaged figures.

Writes ``results.csv`` (one row per data set × fold × loss × scorer × lam × α × ε × split ×
measure, with fit seconds and iterations), ``per_query.csv`` (test values of the selected
models), ``results.md`` (selected figures, p-values, the better/same/worse table, run time)
and ``folds.png`` (per-fold test NDCG@1, 5, 10 of each loss and ranking function).
"""

from __future__ import annotations

import itertools
import time
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from _common import (
    base_parser,
    check_distinct,
    data_errors,
    fail,
    fold_number,
    given,
    lam_value,
    load_letor,
    make_out,
    markdown_table,
    number,
    positive_float,
    positive_int,
    progress,
    save_figure,
    script,
    write_csv,
    write_text,
)
from letor import randomization_test

import bmrm
from bmrm.io import load_svmlight
from bmrm.scorers import ExpectedGainScorer
from losses.metrics import ndcg_score

LOSSES = ("cosine", "listnet", "listwise_squared")
SCORERS = ("linear", "expected_gain")
ALPHAS = (0.1, 0.3, 0.5, 0.7, 1.0, 2.0, 5.0, 10.0)
EPSILONS = (0.6, 0.7, 0.8, 0.9, 1.0)
LAMS = (1e-4, 1e-3, 1e-2, 1e-1)
MEASURES = ("NDCG@1", "NDCG@5", "NDCG@10")
SELECT_BY = "NDCG@10"
LETOR3_SPLITS = {"train": "train.txt", "vali": "vali.txt", "test": "test.txt"}


# ------------------------------------------------------------------------------------ data


def dataset_layout(path: Path, default: bool = False) -> str:
    """``"letor4"`` (S1..S5.txt), ``"letor3"`` (Fold1..5/{train,vali,test}.txt), or exit
    with one line (``default``: the folder is the default ``<data>/mq2008``)."""
    if not path.exists():
        hint = " (set --data or BMRM_DATA, or name LETOR folders as arguments)" if default else ""
        fail(f"data set folder {path} does not exist{hint}")
    partitions = [path / f"S{i}.txt" for i in range(1, 6)]
    if default or any(f.exists() for f in partitions):  # <data>/mq2008 is LETOR 4.0
        for f in partitions:
            if not f.is_file():
                fail(f"LETOR partition {f.stem} not found: {f}")
        return "letor4"
    if any((path / f"Fold{i}").exists() for i in range(1, 6)):
        for f in (path / f"Fold{i}" / n for i in range(1, 6) for n in LETOR3_SPLITS.values()):
            if not f.is_file():
                fail(f"LETOR 3.0 file not found: {f}")
        return "letor3"
    fail(
        f"{path} is neither a LETOR 4.0 folder (S1.txt .. S5.txt) nor a LETOR 3.0 "
        "folder (Fold1 .. Fold5 with train.txt, vali.txt, test.txt)"
    )


def load_fold(path: Path, layout: str, fold: int, constant: bool) -> dict[str, tuple]:
    """``{"train"|"vali"|"test": (X dense, y, qid)}`` of one fold, with a last column of
    ones when ``constant``."""
    splits = _read_fold(path, layout, fold)
    if constant:
        splits = {
            k: (np.ascontiguousarray(np.hstack([X, np.ones((X.shape[0], 1))])), y, q)
            for k, (X, y, q) in splits.items()
        }
    return splits


def _read_fold(path: Path, layout: str, fold: int) -> dict[str, tuple]:
    if layout == "letor4":
        return load_letor(path, fold, dataset="MQ2008")
    with data_errors(path / f"Fold{fold}"):
        parts = {
            split: load_svmlight(path / f"Fold{fold}" / name, zero_based=False, query_file=None)
            for split, name in LETOR3_SPLITS.items()
        }
    d = max(X.shape[1] for X, _, _ in parts.values())
    out = {}
    for split, (X, y, qid) in parts.items():
        X = X.toarray()
        if X.shape[1] < d:
            X = np.hstack([X, np.zeros((X.shape[0], d - X.shape[1]))])
        out[split] = (np.ascontiguousarray(X), y, qid)
    return out


# --------------------------------------------------------------------------------- fitting


def query_ndcg(y, s, qid) -> dict[str, np.ndarray]:
    """Per-query LETOR NDCG@1, 5, 10 (queries in ``np.unique(qid)`` order)."""
    return {
        m: ndcg_score(y, s, qid, k=int(m.split("@")[1]), convention="letor", per_query=True)
        for m in MEASURES
    }


def fit(loss, params, X, y, qid, lam, scorer, w0, max_iter, method=None):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bmrm.ConvergenceWarning)
        model = bmrm.fit(
            X,
            y,
            loss,
            qid,
            lam=lam,
            loss_params=params,
            ranking_function=scorer,
            w0=w0,
            tol=1e-3 if scorer is None and loss != "cosine" else 1e-5,
            max_iter=max_iter,
            method=method,
        )
    return model, time.perf_counter() - start, int(model.result_.nit)


def settings(loss: str, alphas, lams):
    """(lam, params) pairs of the grid; cosine's linear model ignores lam (see docstring)."""
    params = [{"alpha": a} for a in alphas] if loss == "listnet" else [{}]
    return list(itertools.product(lams, params))


def run_fold(name, fold, splits, loss, grid, epsilons, max_iter, clip_training, rows, method=None):
    """Fit every setting of the grid; return the selected test measures per scorer."""
    X, y, qid = splits["train"]
    Xv, yv, qv = splits["vali"]
    Xt, yt, qt = splits["test"]
    best = {}
    linear_cache = {}
    for lam, params in grid:
        key = (None if loss == "cosine" else lam, tuple(params.items()))
        if key not in linear_cache:
            linear_cache[key] = fit(loss, params, X, y, qid, lam, None, None, max_iter)
        linear, secs, nit = linear_cache[key]
        candidates = [("linear", None, linear, secs, nit)]
        eps_models = []
        if clip_training:
            for eps in epsilons:
                scorer = ExpectedGainScorer(eps=eps, clip_training=True)
                eps_models.append(
                    (
                        eps,
                        *fit(loss, params, X, y, qid, lam, scorer, linear.coef_, max_iter, method),
                    )
                )
        else:
            model, secs_eg, nit_eg = fit(
                loss, params, X, y, qid, lam, "expected_gain", linear.coef_, max_iter, method
            )
            for eps in epsilons:
                clipped = bmrm.LinearModel(
                    model.coef_, 0.0, model.loss, lam, "l2", model.result_,
                    model.scorer_.with_params(eps=eps),
                )  # fmt: skip
                eps_models.append((eps, clipped, secs_eg, nit_eg))
        candidates += [("expected_gain", eps, m, s, n) for eps, m, s, n in eps_models]
        for scorer, eps, model, secs, nit in candidates:
            mv = query_ndcg(yv, model.predict(Xv), qv)
            mt = query_ndcg(yt, model.predict(Xt), qt)
            for split, values in (("vali", mv), ("test", mt)):
                for measure in MEASURES:
                    rows.append(
                        {
                            "dataset": name,
                            "fold": fold,
                            "loss": loss,
                            "scorer": scorer,
                            "lam": lam,
                            "alpha": params.get("alpha", ""),
                            "eps": "" if eps is None else eps,
                            "split": split,
                            "measure": measure,
                            "value": float(values[measure].mean()),
                            "fit_seconds": secs,
                            "iterations": nit,
                        }
                    )
            score = float(mv[SELECT_BY].mean())
            # ties keep the first setting: larger lam and smaller α come later in the grid
            if scorer not in best or score > best[scorer][0]:
                best[scorer] = (score, lam, params, eps, mt)
    for scorer, (score, lam, params, eps, _) in best.items():
        progress(
            f"  {name} fold {fold} {loss:<16} {scorer:<13} lam={lam:g} "
            f"{'α=' + str(params['alpha']) if params else ''} "
            f"{'' if eps is None else 'ε=' + str(eps)} vali {SELECT_BY}={score:.4f} "
            f"test {SELECT_BY}={best[scorer][4][SELECT_BY].mean():.4f}"
        )
    return best


# -------------------------------------------------------------------------------- reporting


def verdicts(test_q, per_fold, names, losses_run, n_flips):
    """Per data set: loss × measure → (linear, expected gain, relative change, p, verdict)."""
    out = {}
    for name in names:
        for loss in losses_run:
            for measure in MEASURES:
                a = np.concatenate(test_q[name][loss]["expected_gain"][measure])
                b = np.concatenate(test_q[name][loss]["linear"][measure])
                p = randomization_test(a, b, n_flips)
                lin = float(np.mean(per_fold[name][loss]["linear"][measure]))
                eg = float(np.mean(per_fold[name][loss]["expected_gain"][measure]))
                change = (eg - lin) / lin if lin > 0 else float("nan")
                verdict = "same" if p >= 0.05 else ("better" if a.mean() > b.mean() else "worse")
                out[name, loss, measure] = (lin, eg, change, p, verdict)
    return out


def plot_folds(path, per_fold, names, losses_run, folds):
    fig, axes = plt.subplots(
        len(names), len(losses_run), figsize=(4.2 * len(losses_run), 3.4 * len(names)),
        squeeze=False, sharey=True,
    )  # fmt: skip
    x = np.arange(len(MEASURES))
    for r, name in enumerate(names):
        for c, loss in enumerate(losses_run):
            ax = axes[r, c]
            for k, (scorer, color) in enumerate((("linear", "0.35"), ("expected_gain", "0.75"))):
                values = np.array([per_fold[name][loss][scorer][m] for m in MEASURES])
                ax.bar(x + (k - 0.5) * 0.38, values.mean(axis=1), 0.36, color=color, label=scorer)
                for j, fold_values in enumerate(values):
                    ax.plot(np.full(len(folds), x[j] + (k - 0.5) * 0.38), fold_values, "k.", ms=3)
            ax.set_xticks(x, MEASURES)
            ax.set_title(f"{name}: {loss}", fontsize=9)
            if c == 0:
                ax.set_ylabel("test NDCG (bars: fold mean, dots: folds)")
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def write_markdown(path, names, losses_run, results, chosen, seconds, config):
    lines = [f"# Expected-gain vs linear ranking function ({config})", ""]
    for name in names:
        lines += [f"## {name}", ""]
        rows = []
        for loss in losses_run:
            for measure in MEASURES:
                lin, eg, change, p, verdict = results[name, loss, measure]
                rows.append([loss, measure, lin, eg, f"{100 * change:+.1f}%", f"{p:.4f}", verdict])
        lines.append(
            markdown_table(
                ["loss", "measure", "linear", "expected gain", "change", "p", "verdict"], rows
            )
        )
        lines += ["", "Selected settings per fold (linear / expected gain):", ""]
        for loss in losses_run:
            lines.append(f"- {loss}: " + "; ".join(chosen[name][loss]))
        lines.append("")
    lines += ["## Better / same / worse (p < 0.05), as the seed's Table 1", ""]
    table = []
    for verdict in ("better", "same", "worse"):
        counts = [
            sum(results[n, lo, m][4] == verdict for lo in losses_run for m in MEASURES)
            for n in names
        ]
        table.append([verdict.capitalize(), *counts, sum(counts)])
    changes = [
        np.nanmean([results[n, lo, m][2] for lo in losses_run for m in MEASURES]) for n in names
    ]
    table.append(["Avg. change", *[f"{100 * c:+.1f}%" for c in changes],
                  f"{100 * np.nanmean(changes):+.1f}%"])  # fmt: skip
    lines.append(markdown_table(["", *names, "Total"], table))
    lines += ["", f"Run time: {seconds:.0f} s (numba compile excluded: see the warm-up line).", ""]
    write_text(path, "\n".join(lines))


# the clipping threshold of ExpectedGainScorer
EPSILON = number(float, 0.5, 1.0, name="epsilon")


@script
def main(argv=None) -> int:
    parser = base_parser("expected_gain", __doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="*", type=Path, help="LETOR 4.0 or 3.0 folders")
    parser.add_argument("--losses", nargs="+", default=None, choices=LOSSES)
    parser.add_argument("--lams", nargs="+", type=lam_value, default=None)
    parser.add_argument(
        "--alphas", nargs="+", type=positive_float, default=None, help="ListNet's α (> 0)"
    )
    parser.add_argument("--epsilons", nargs="+", type=EPSILON, default=None, help="ε in [0.5, 1]")
    parser.add_argument("--folds", nargs="+", type=fold_number, default=None)
    parser.add_argument("--max-iter", type=positive_int, default=None)
    parser.add_argument(
        "--flips", type=positive_int, default=None, help="randomization-test flips"
    )
    parser.add_argument("--clip-training", action="store_true", help="clip at ε in training")
    parser.add_argument(
        "--solver",
        choices=("auto", "lbfgs", "nrbm"),
        default="auto",
        help="method for the expected-gain fits (bmrm.fit's method; auto: L-BFGS where smooth)",
    )
    parser.add_argument(
        "--no-constant", action="store_true", help="no constant feature (see the docstring)"
    )
    args = parser.parse_args(argv)
    for option in ("losses", "lams", "alphas", "epsilons", "folds"):
        check_distinct(parser, f"--{option}", getattr(args, option))
    quick = args.quick
    default = not args.datasets  # nargs="*": [] when none is given
    datasets = [args.data / "mq2008"] if default else args.datasets
    losses_run = tuple(given(args.losses, LOSSES))
    lams = tuple(given(args.lams, (1e-2,) if quick else LAMS))
    alphas = tuple(given(args.alphas, (1.0, 5.0) if quick else ALPHAS))
    epsilons = tuple(given(args.epsilons, (0.8, 1.0) if quick else EPSILONS))
    folds = tuple(given(args.folds, (1, 2) if quick else (1, 2, 3, 4, 5)))
    max_iter = given(args.max_iter, 30 if quick else 1000)
    n_flips = given(args.flips, 1000 if quick else 10_000)
    layouts = {path: dataset_layout(path, default) for path in datasets}
    for path, layout in layouts.items():
        if layout == "letor4":  # the five partitions read (and kept) before any work
            load_letor(path, 1, dataset="MQ2008", dense=False)
    names = [path.name for path in datasets]
    if len(set(names)) != len(names):
        names = [str(path) for path in datasets]

    progress("warm-up (numba compile), untimed")
    constant = not args.no_constant
    first = load_fold(datasets[0], layouts[datasets[0]], folds[0], constant)["train"]
    keep = np.isin(first[2], np.unique(first[2])[:10])
    for loss in losses_run:
        fit(loss, {}, first[0][keep], first[1][keep], first[2][keep], 1e-2, None, None, 5)
        fit(loss, {}, first[0][keep], first[1][keep], first[2][keep], 1e-2, "expected_gain",
            None, 5)  # fmt: skip
    query_ndcg(first[1][keep], first[0][keep, 0], first[2][keep])

    started = time.perf_counter()
    rows: list[dict] = []
    query_rows: list[dict] = []
    test_q = {n: {lo: {s: {m: [] for m in MEASURES} for s in SCORERS} for lo in losses_run}
              for n in names}  # fmt: skip
    per_fold = {n: {lo: {s: {m: [] for m in MEASURES} for s in SCORERS} for lo in losses_run}
                for n in names}  # fmt: skip
    chosen = {n: {lo: [] for lo in losses_run} for n in names}
    for path, name in zip(datasets, names, strict=True):
        for fold in folds:
            splits = load_fold(path, layouts[path], fold, constant)
            X, _, qid = splits["train"]
            progress(f"{name} fold {fold}: {X.shape[0]} rows, {np.unique(qid).size} queries")
            qt = np.unique(splits["test"][2])
            for loss in losses_run:
                grid = settings(loss, alphas, lams)
                best = run_fold(
                    name,
                    fold,
                    splits,
                    loss,
                    grid,
                    epsilons,
                    max_iter,
                    args.clip_training,
                    rows,
                    None if args.solver == "auto" else args.solver,
                )
                picks = []
                for scorer in SCORERS:
                    _, lam, params, eps, mt = best[scorer]
                    picks.append(
                        f"lam={lam:g}"
                        + (f" α={params['alpha']:g}" if params else "")
                        + ("" if eps is None else f" ε={eps:g}")
                    )
                    for measure in MEASURES:
                        test_q[name][loss][scorer][measure].append(mt[measure])
                        per_fold[name][loss][scorer][measure].append(float(mt[measure].mean()))
                    for i, q in enumerate(qt):
                        query_rows.append(
                            {"dataset": name, "fold": fold, "loss": loss, "scorer": scorer,
                             "qid": q, **{m: float(mt[m][i]) for m in MEASURES}}
                        )  # fmt: skip
                chosen[name][loss].append(f"Fold{fold} {picks[0]} / {picks[1]}")
    seconds = time.perf_counter() - started
    results = verdicts(test_q, per_fold, names, losses_run, n_flips)
    for (name, loss, measure), (lin, eg, _, p, verdict) in results.items():
        rows.append(
            {"dataset": name, "fold": "mean", "loss": loss, "scorer": "expected_gain vs linear",
             "split": "test", "measure": measure, "value": eg - lin, "p": p, "verdict": verdict}
        )  # fmt: skip
    make_out(args.out)
    write_csv(args.out / "results.csv", rows)
    write_csv(args.out / "per_query.csv", query_rows)
    config = ("quick" if quick else "full") + ("" if constant else ", no constant feature")
    write_markdown(args.out / "results.md", names, losses_run, results, chosen, seconds, config)
    plot_folds(args.out / "folds.png", per_fold, names, losses_run, folds)
    progress(f"done in {seconds:.0f} s; wrote {args.out}")
    print((args.out / "results.md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Ordinal regression benchmarks: this package's ordinal regressor beside mord's models.

    python experiments/ordinal.py [--data ../shared/data] [--out results/ordinal] [--quick]

Data: the CSV benchmarks in ``<data>/ordinal`` (first column ``response``, integer levels
1..K). Every file with ordinal integer labels is used; ``glass`` is left out because its
labels are the six glass types, which are categories without an order.

Protocol (after Chu & Ghahramani, JMLR 2005, and Chu & Keerthi, ICML 2005): 20 random
train/test partitions per data set, with their training sizes where they give one (machine
150, auto 200, boston 300, stock 600, abalone 1000, wisconsin 130, california 5000; both
discretisations of boston and abalone get the same size); otherwise 80 % of the rows for
training, at most 5000 (the largest training size of Chu & Keerthi), and the rest for
testing. Features are standardised on the training rows. For every method the
regularisation is chosen by 3-fold cross-validation on the training rows (least mean
absolute error) over the same five-point grid lam ∈ {1e-4, ..., 1}, where lam weights
½‖w‖² against the *mean* training loss; for models written with a summed loss the
equivalent constant is used (``alpha = lam · n`` for mord's logistic and ridge models,
``C = 1 / (lam · n)`` for its LAD model, n the number of rows fitted). The chosen model is
refitted on the whole training split and scored on the test split.

Methods
-------
``bmrm ordinal 0/1``, ``bmrm ordinal lin``
    :class:`bmrm.estimators.OrdinalRegressor`: the pairwise ordinal loss over all training
    pairs (pair cost 1, or the label difference), then thresholds minimising the training
    MAE.
``bmrm squared``
    The least-squares baseline: :func:`bmrm.fit` with the squared loss on the centred
    labels, predictions rounded and clipped to the training label range.
``mord AT``, ``mord IT``, ``mord ridge``, ``mord LAD``
    mord's all-threshold and immediate-threshold logistic models, its ridge regression
    rounded and clipped, and its least-absolute-deviation regression rounded and clipped.
    The logistic models need the levels 0..K'−1, so they are fitted on the rank of each
    label among the levels present in the training split and their predictions mapped back.

Everything runs on one thread (numba, BLAS, OpenMP): the ordinal problem is a single query
and these problems are small, so waking a thread pool costs more than the work on a shared
machine (measured: 10-40 ms per call under load).

Writes ``results.csv`` (one row per data set × method × split: chosen lam, test MAE and
accuracy, seconds to refit and to select), ``results.md`` (mean ± std over the splits, best
per data set in bold, mean rank per method) and ``ordinal.png``.
"""

from __future__ import annotations

import csv
import statistics
import time
import warnings
import zlib
from pathlib import Path

import mord
import numba
import numpy as np
from _common import (
    base_parser,
    check_distinct,
    data_errors,
    fail,
    given,
    make_out,
    markdown_table,
    positive_int,
    progress,
    require,
    save_figure,
    script,
    write_csv,
    write_text,
)
from sklearn.model_selection import KFold
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

import bmrm
from bmrm.estimators import OrdinalRegressor

NAME = "ordinal"
LAMS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)
N_SPLITS = 20
N_FOLDS = 3
MAX_TRAIN = 5000
# training sizes of Chu & Ghahramani (2005) and Chu & Keerthi (2005, california)
CHU_TRAIN = {
    "machine_ord": 150,
    "auto_ord": 200,
    "bostonhousing_ord": 300,
    "bostonhousing": 300,
    "stock_ord": 600,
    "abalone_ord": 1000,
    "abalone": 1000,
    "wisconsin_breast_ord": 130,
    "californiahousing": 5000,
}
NOMINAL = {"glass": "glass types are categories without an order"}
QUICK_DATASETS = ("machine_ord", "stock_ord")


def read_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Features and integer labels of one benchmark file (values may be quoted)."""
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, [""])
        if header[0] != "response":
            raise ValueError(f"{path}: first column must be 'response'; got {header[0]!r}")
        data = np.array([[float(v) for v in row] for row in reader])
    if data.ndim != 2 or data.shape[0] == 0 or data.shape[1] < 2:
        raise ValueError(f"{path}: no rows of a label and features")
    y = data[:, 0]
    if not np.all(y == np.round(y)):
        raise ValueError(f"{path}: labels are not integers")
    return data[:, 1:], y.astype(np.int64)


def ordinal_datasets(folder: Path) -> list[str]:
    """Every file whose labels are ordinal integers: Chu's sets first, then by name."""
    names = sorted(p.stem for p in folder.glob("*.csv") if p.stem not in NOMINAL)
    chu = [n for n in CHU_TRAIN if n in names]
    return chu + [n for n in names if n not in chu]


def train_size(name: str, n_rows: int) -> int:
    return CHU_TRAIN.get(name, min(int(0.8 * n_rows), MAX_TRAIN))


# ----------------------------------------------------------------------------- methods


class _Encoded:
    """Fit on labels re-coded for a model, predict in the original labels."""

    def __init__(self, make, coding: str):
        self.make = make
        self.coding = coding

    def fit(self, X, y, lam):
        self.levels = np.unique(y)
        self.low = int(y.min())
        target = np.searchsorted(self.levels, y) if self.coding == "rank" else y - self.low
        self.model = self.make(lam, X.shape[0]).fit(X, target)
        return self

    def predict(self, X):
        pred = np.asarray(self.model.predict(X)).astype(np.int64)
        return self.levels[pred] if self.coding == "rank" else pred + self.low


class _Ordinal:
    def __init__(self, cost: str):
        self.cost = cost

    def fit(self, X, y, lam):
        self.model = OrdinalRegressor(lam=lam, cost=self.cost).fit(X, y)
        return self

    def predict(self, X):
        return self.model.predict(X)


class _LeastSquares:
    """The package's squared loss on centred labels, rounded and clipped to the label range."""

    def fit(self, X, y, lam):
        self.mean = float(y.mean())
        self.range = (int(y.min()), int(y.max()))
        self.model = bmrm.fit(X, y - self.mean, "squared", lam=lam)
        return self

    def predict(self, X):
        return np.clip(np.round(self.model.predict(X) + self.mean), *self.range).astype(np.int64)


def _mord(cls_name: str, param: str):
    cls = getattr(mord, cls_name)
    if param == "alpha":
        return lambda lam, n: cls(alpha=lam * n)
    return lambda lam, n: cls(C=1.0 / (lam * n), max_iter=20000)


def methods() -> dict:
    """Name -> factory of an object with fit(X, y, lam) and predict(X)."""
    return {
        "bmrm ordinal 0/1": lambda: _Ordinal("zero_one"),
        "bmrm ordinal lin": lambda: _Ordinal("linear"),
        "bmrm squared": _LeastSquares,
        "mord AT": lambda: _Encoded(_mord("LogisticAT", "alpha"), "rank"),
        "mord IT": lambda: _Encoded(_mord("LogisticIT", "alpha"), "rank"),
        "mord ridge": lambda: _Encoded(_mord("OrdinalRidge", "alpha"), "offset"),
        "mord LAD": lambda: _Encoded(_mord("LAD", "C"), "offset"),
    }


def mae(y, pred) -> float:
    return float(np.mean(np.abs(np.asarray(pred) - y)))


def select_and_fit(factory, X, y, seed: int, lams) -> dict:
    """Pick lam by inner K-fold MAE (ties: the larger lam), refit, return model and times."""
    start = time.perf_counter()
    folds = list(KFold(N_FOLDS, shuffle=True, random_state=seed).split(X))
    cv = []
    for lam in lams:
        errs = [mae(y[va], factory().fit(X[tr], y[tr], lam).predict(X[va])) for tr, va in folds]
        cv.append(float(np.mean(errs)))
    best = min(range(len(lams)), key=lambda i: (cv[i], -lams[i]))
    select_s = time.perf_counter() - start
    start = time.perf_counter()
    model = factory().fit(X, y, lams[best])
    fit_s = time.perf_counter() - start
    return {
        "model": model,
        "lam": lams[best],
        "cv_mae": cv[best],
        "fit_s": fit_s,
        "select_s": select_s,
    }


def split_indices(name: str, n_rows: int, n_train: int, split: int):
    rng = np.random.default_rng([zlib.crc32(name.encode()), split])
    perm = rng.permutation(n_rows)
    return perm[:n_train], perm[n_train:]


def run_dataset(name: str, X, y, n_splits: int, lams, method_names) -> list[dict]:
    n_train = train_size(name, len(y))
    facs = methods()
    rows = []
    for split in range(n_splits):
        tr, te = split_indices(name, len(y), n_train, split)
        scaler = StandardScaler().fit(X[tr])
        Xtr, Xte = scaler.transform(X[tr]), scaler.transform(X[te])
        for method in method_names:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = select_and_fit(facs[method], Xtr, y[tr], split, lams)
            pred = r["model"].predict(Xte)
            rows.append(
                {
                    "dataset": name,
                    "n_rows": len(y),
                    "n_features": X.shape[1],
                    "n_levels": len(np.unique(y)),
                    "n_train": n_train,
                    "n_test": len(te),
                    "split": split,
                    "method": method,
                    "lam": r["lam"],
                    "cv_mae": r["cv_mae"],
                    "mae": mae(y[te], pred),
                    "accuracy": float(np.mean(pred == y[te])),
                    "fit_s": r["fit_s"],
                    "select_s": r["select_s"],
                }
            )
        last = [row for row in rows if row["split"] == split]
        progress(
            f"{name} split {split + 1}/{n_splits}: "
            + ", ".join(f"{row['method']} {row['mae']:.3f}" for row in last)
        )
    return rows


# ----------------------------------------------------------------------------- report


def summarise(rows, method_names, key: str, lower_better: bool):
    """Markdown rows 'mean ± std' per data set, best in bold; plus mean ranks."""
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    table, ranks = [], {m: [] for m in method_names}
    for d in datasets:
        sel = [r for r in rows if r["dataset"] == d]
        stats = {}
        for m in method_names:
            vals = [r[key] for r in sel if r["method"] == m]
            stats[m] = (statistics.mean(vals), statistics.stdev(vals) if len(vals) > 1 else 0.0)
        shown = {m: round(stats[m][0], 3) for m in method_names}
        best = min(shown.values()) if lower_better else max(shown.values())
        order = sorted(method_names, key=lambda m: stats[m][0], reverse=not lower_better)
        for m in method_names:  # average rank, ties share their mean position
            tied = [i for i, o in enumerate(order) if shown[o] == shown[m]]
            ranks[m].append(1 + statistics.mean(tied))
        cells = []
        for m in method_names:
            text = f"{stats[m][0]:.3f} ± {stats[m][1]:.3f}"
            cells.append(f"**{text}**" if shown[m] == best else text)
        first = sel[0]
        label = f"{d} ({first['n_train']}/{first['n_test']}, K={first['n_levels']})"
        table.append([label, *cells])
    table.append(["mean rank", *(f"{statistics.mean(ranks[m]):.2f}" for m in method_names)])
    return table


def timing_rows(rows, datasets, method_names):
    """Median refit seconds per data set and method."""
    out = []
    for d in datasets:
        cells = []
        for m in method_names:
            sel = [r["fit_s"] for r in rows if r["dataset"] == d and r["method"] == m]
            cells.append(f"{statistics.median(sel):.3f}")
        out.append([d, *cells])
    return out


def plot(rows, method_names, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    base = "bmrm squared"

    def mean_of(d, m, key):
        return statistics.mean(r[key] for r in rows if r["dataset"] == d and r["method"] == m)

    fig, axes = plt.subplots(1, 2, figsize=(12, 0.45 * len(datasets) + 2), sharey=True)
    ypos = np.arange(len(datasets))
    markers = "os^vDPX*"
    for i, m in enumerate(method_names):
        ratio = [mean_of(d, m, "mae") / mean_of(d, base, "mae") for d in datasets]
        diff = [mean_of(d, m, "accuracy") - mean_of(d, base, "accuracy") for d in datasets]
        offset = (i - len(method_names) / 2) * 0.08
        axes[0].plot(ratio, ypos + offset, markers[i % len(markers)], label=m)
        axes[1].plot(diff, ypos + offset, markers[i % len(markers)], label=m)
    axes[0].axvline(1.0, color="grey", lw=0.8)
    axes[1].axvline(0.0, color="grey", lw=0.8)
    axes[0].set_yticks(ypos, datasets)
    axes[0].invert_yaxis()
    axes[0].set_xlabel(f"test MAE / MAE of {base} (lower is better)")
    axes[1].set_xlabel(f"test accuracy − accuracy of {base} (higher is better)")
    axes[1].legend(loc="best", fontsize=8)
    fig.suptitle("Ordinal benchmarks: means over random splits")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


@script
def main(argv=None) -> int:
    parser = base_parser(NAME, __doc__.splitlines()[0])
    parser.add_argument(
        "--splits", type=positive_int, default=None, help="partitions per data set"
    )
    parser.add_argument("--datasets", nargs="+", default=None, help="file stems to run")
    args = parser.parse_args(argv)
    check_distinct(parser, "--datasets", args.datasets)
    folder = require(args.data / "ordinal", "the ordinal benchmark folder")
    names = given(args.datasets, list(QUICK_DATASETS) if args.quick else ordinal_datasets(folder))
    if not names:
        fail(f"no data set (*.csv) in {folder}")
    data = {}  # every data set read before any work
    for name in names:
        path = require(folder / f"{name}.csv", f"data set {name}")
        with data_errors(path):
            data[name] = read_csv(path)
    n_splits = given(args.splits, 2 if args.quick else N_SPLITS)
    lams = (1e-3, 1e-1) if args.quick else LAMS
    method_names = list(methods())
    numba.set_num_threads(1)
    threadpool_limits(1)  # BLAS / OpenMP pools too: every method runs on one thread

    warm_X = np.random.default_rng(0).standard_normal((60, 3))
    warm_y = np.digitize(warm_X[:, 0], [-0.5, 0.5]) + 1
    for factory in methods().values():  # compile numba kernels, untimed
        factory().fit(warm_X, warm_y, 1e-2).predict(warm_X)

    start = time.perf_counter()
    rows = []
    for name in names:
        X, y = data[name]
        progress(f"{name}: {len(y)} rows, {X.shape[1]} features, levels {np.unique(y).tolist()}")
        rows += run_dataset(name, X, y, n_splits, lams, method_names)
    elapsed = time.perf_counter() - start

    header = ["data set (train/test, K)", *method_names]
    protocol = (
        f"{n_splits} random splits per data set; lam chosen by {N_FOLDS}-fold CV (MAE) on "
        f"the training split over {list(lams)}; features standardised on the training split. "
        f"Training sizes: Chu & Ghahramani / Chu & Keerthi where they give one, else 80 % "
        f"(at most {MAX_TRAIN}). Left out: "
        + "; ".join(f"{k} ({v})" for k, v in NOMINAL.items())
        + f". Run time {elapsed:.0f} s."
    )
    md = [
        "# Ordinal regression benchmarks",
        "",
        protocol,
        "",
        "## Test MAE (mean ± std over splits; lower is better, best in bold)",
        "",
        markdown_table(header, summarise(rows, method_names, "mae", lower_better=True)),
        "",
        "## Test accuracy (mean ± std over splits; higher is better, best in bold)",
        "",
        markdown_table(header, summarise(rows, method_names, "accuracy", lower_better=False)),
        "",
        "## Median seconds to refit the chosen model (selection excluded)",
        "",
        markdown_table(["data set", *method_names], timing_rows(rows, names, method_names)),
        "",
    ]
    make_out(args.out)
    write_csv(args.out / "results.csv", rows)
    write_text(args.out / "results.md", "\n".join(md))
    plot(rows, method_names, args.out / "ordinal.png")
    print("\n".join(md))
    progress(f"wrote {args.out}/results.csv, results.md, ordinal.png ({elapsed:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

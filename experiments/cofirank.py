"""CofiRank's weak and strong generalisation protocols on a rating file, beside the paper.

    python experiments/cofirank.py PATH [--n-train 10 20 50] [--seeds 10]
        [--losses ndcg ordinal squared ordinal-squared] [--offsets] [--protocols weak strong]
        [--gain exp]
    python experiments/cofirank.py --synthetic [...]

PATH is a MovieLens (``u.data``, ``ratings.dat``, ``ratings.csv``) or MovieTweetings
(``ratings.dat``) file, or a folder holding one; ``--synthetic`` generates a rating set
shaped like MovieLens-100K (943 users × 1,682 items; each user rates 20 + a geometric number
of items, mean about 106; ratings 1–5 from a rank-10 model plus noise, cut at fixed
quantiles) from ``--data-seed``.

Protocols (Weimer, Karatzoglou, Le & Smola, NIPS 2007, §5): *weak*, for N in ``--n-train``:
users with at least N + 10 ratings, N drawn at random for training and the rest for
testing (:func:`bmrm.collab.weak_split`); *strong*: 10 % of the users with at least
N + 10 ratings for the smallest N held out, the model trained once on every other user's
ratings, and for each N each held-out user with at least N + 10 ratings folded in from N
random ratings with the item factors fixed and tested on the rest
(:func:`bmrm.collab.strong_split` with ``min_ratings``,
:meth:`~bmrm.collab.CofiRank.fold_in`): for each N the tested users are a uniformly random
tenth of the users with N + 10 ratings, as when each N holds out its own users, and one
training fit per seed and method serves every N (its seconds are the rows'
``train_wall_s`` and ``train_cpu_s``; ``wall_s`` and ``cpu_s`` are that N's fold-in and
scoring). The popularity baseline ranks by the training part's mean ratings. The score is
the mean over test users of NDCG@10 on their test items, gain 2^r − 1 (``--gain exp``, the
paper's; ``linear`` for r), k capped at the user's number of test items. Each cell is the
mean ± standard deviation over ``--seeds`` draws.

Regularisation: the model's ``lam="auto"``, λ = 0.3·‖P ∇L(0)‖₂ for each loss and
training split (:class:`bmrm.collab.CofiRank`: above ‖∇L(0)‖₂ the zero factors are a local
minimum; P centres each user's row), so every loss is at the same relative strength
(``--lam`` fixes λ instead); the NDCG loss starts from its initial loss (``init="auto"``).
Rank ``--rank`` (100, the paper's). Beside the fits, the popularity ranking (items by their
mean training rating, unrated items last) on the same splits.

The paper's table (MovieLens-100K, weak generalisation, NDCG@10, N = 10 / 20 / 50) is
printed beside: CofiRank-NDCG .6400 / .6307 / .6076, CofiRank-Ordinal .6233 / .6686 /
.7169, CofiRank-Regression .6420 / .6509 / .6584, MMMF .6061 / .6937 / .6989. On other data
the figures are not comparable cell by cell; the table shows them for scale.

Seeds run outermost, so ``--time-budget`` (wall seconds after which no new seed starts)
leaves every cell with the same number of seeds; the tables say how many ran.

Output: ``--out``/results.csv (one row per protocol × N × seed × method, rewritten after
every fit), results.md (the tables) and the tidy result file ``--results``/cofirank.csv
(columns experiment, dataset, method, setting, repetition, then ``ndcg_at_10``, ``wall_s``,
``cpu_s``, ...; rows of other data sets, methods or settings in it are kept) with
cofirank.meta.json.
"""

from __future__ import annotations

import copy
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments._common import (  # noqa: E402
    base_parser,
    data_errors,
    fail,
    int_at_least,
    make_out,
    markdown_table,
    number,
    progress,
    script,
    write_csv,
    write_results,
    write_text,
)

PAPER = {
    "ndcg": (0.6400, 0.6307, 0.6076),
    "ordinal": (0.6233, 0.6686, 0.7169),
    "squared": (0.6420, 0.6509, 0.6584),
    "MMMF": (0.6061, 0.6937, 0.6989),
}
PAPER_N = (10, 20, 50)


def synthetic(seed: int, n_users: int = 943, n_items: int = 1682, rank: int = 10):
    """A MovieLens-100K-shaped rating matrix (module docstring)."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n_users, rank)) / np.sqrt(rank)
    B = rng.normal(size=(n_items, rank))
    popularity = rng.zipf(1.5, size=n_items).astype(float)
    p = popularity / popularity.sum()
    rows, cols = [], []
    for i in range(n_users):
        m = min(n_items, 20 + rng.geometric(1 / 86))
        rows.append(np.full(m, i))
        cols.append(rng.choice(n_items, size=m, replace=False, p=0.5 * p + 0.5 / n_items))
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    score = np.einsum("ij,ij->i", A[rows], B[cols])
    score += rng.normal(scale=score.std(), size=score.shape)
    y = 1 + np.searchsorted(np.quantile(score, [0.06, 0.17, 0.44, 0.78]), score)
    return sp.csr_matrix((y.astype(float), (rows, cols)), shape=(n_users, n_items))


def popularity(train, test, gain: str) -> float:
    """NDCG@10 of ranking each user's test items by their mean training rating (items
    nobody rated in training score below every rated one)."""
    from losses.metrics import ndcg_score

    R, T = sp.csr_matrix(train), sp.csr_matrix(test)
    counts = np.bincount(R.indices, minlength=R.shape[1])
    sums = np.bincount(R.indices, weights=R.data, minlength=R.shape[1])
    low = R.data.min() - 1.0 if R.nnz else 0.0
    mean = np.where(counts > 0, sums / np.maximum(counts, 1), low)
    users = np.repeat(np.arange(T.shape[0]), np.diff(T.indptr))
    return float(ndcg_score(T.data, mean[T.indices], users, k=10, gain=gain))


def write_tidy(folder: Path, rows: list, dataset: str, argv) -> None:
    """The tidy result file ``folder/cofirank.csv`` (one row per method × data set ×
    setting × seed; the rows of other data sets, methods or settings already there are
    kept) and its ``cofirank.meta.json`` (command, date, machine, git commit)."""
    made = {(row["dataset"], row["method"], row["setting"]) for row in rows}
    write_results(
        "cofirank",
        rows,
        folder,
        argv,
        keep=lambda row: (row["dataset"], row["method"], row["setting"]) not in made,
    )


def find_file(path: Path) -> Path:
    if path.is_dir():
        for name in ("ratings.dat", "u.data", "ratings.csv"):
            if (path / name).exists():
                return path / name
        fail(f"{path} holds no ratings.dat, u.data or ratings.csv")
    if not path.exists():
        fail(f"rating file not found at {path}")
    return path


@script
def main(argv=None) -> int:
    parser = base_parser("cofirank", __doc__.split("\n\n")[0], data=False)
    parser.add_argument("path", nargs="?", type=Path, help="rating file or folder")
    parser.add_argument("--synthetic", action="store_true")
    parser.add_argument("--data-seed", type=int, default=0)
    parser.add_argument(
        "--n-train", type=int_at_least(1), nargs="+", help="N values (default: 10 20 50)"
    )
    parser.add_argument("--seeds", type=int_at_least(1), default=10)
    parser.add_argument(
        "--losses", nargs="+", default=["ndcg", "ordinal", "squared"],
        choices=["ndcg", "ordinal", "squared", "ordinal-squared"],
    )  # fmt: skip
    parser.add_argument("--offsets", action="store_true", help="also fit with offsets")
    parser.add_argument("--protocols", nargs="+", choices=["weak", "strong"], default=["weak"])
    parser.add_argument("--gain", choices=["exp", "linear"], default="exp")
    parser.add_argument("--rank", type=int_at_least(1), default=100)
    parser.add_argument("--lam", type=number(float, 0, low_open=True), default=None)
    parser.add_argument("--max-iter", type=int_at_least(1), default=30)
    parser.add_argument(
        "--time-budget", type=number(float, 0, low_open=True), default=None,
        help="start no new seed after this many wall seconds",
    )  # fmt: skip
    args = parser.parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    if (args.path is None) == (not args.synthetic):
        parser.error("give a rating file PATH or --synthetic (one of them)")
    from bmrm.collab import CofiRank, read_ratings, strong_split, weak_split

    if args.synthetic:
        ratings, name = synthetic(args.data_seed), "synthetic"
    else:
        path = find_file(args.path)
        with data_errors(path):
            ratings = read_ratings(path).matrix
        name = path.parent.name or path.stem
    if args.quick:
        args.n_train, args.seeds, args.rank, args.max_iter = args.n_train or [10], 1, 5, 3
    args.n_train = args.n_train or [10, 20, 50]
    out = make_out(args.out)
    if args.results is None:
        args.results = out
    methods = [(loss, False) for loss in args.losses]
    if args.offsets:
        methods += [(loss, True) for loss in args.losses]
    protocols = list(dict.fromkeys(args.protocols))
    progress(f"{name}: {ratings.shape[0]} users × {ratings.shape[1]} items, {ratings.nnz} ratings")
    rows = []
    # seeds outermost: a run stopped early has the same number of seeds in every cell
    started = time.perf_counter()
    seeds_run = 0

    def fit(train, loss, offsets, seed):
        params = {"gain": args.gain} if loss == "ndcg" else None
        if loss == "ordinal-squared":
            loss, params = "ordinal", {"hinge": "squared"}
        model = CofiRank(
            loss=loss, loss_params=params,
            n_factors=args.rank, lam="auto" if args.lam is None else args.lam,
            offsets=offsets, max_iter=args.max_iter, random_state=seed,
        )  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return model.fit(train)

    def record(seed, protocol, n_train, loss, offsets, value, test, model, t0, c0, trained):
        n_users = int((np.diff(test.indptr) > 0).sum())
        rows.append(
            {
                "experiment": "cofirank", "dataset": name,
                "method": "popularity" if model is None else
                f"CofiRank-{loss}{'+offsets' if offsets else ''}",
                "setting": f"{protocol} N={n_train}", "repetition": seed,
                "protocol": protocol, "n_train": n_train, "loss": loss, "offsets": offsets,
                "lam": "" if model is None else model.lam_, "ndcg_at_10": value,
                "test_users": n_users,
                "outer_iterations": 0 if model is None else model.n_iter_,
                "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                "train_wall_s": trained[0], "train_cpu_s": trained[1],
            }
        )  # fmt: skip
        if model is None:
            return
        write_csv(out / "results.csv", rows)  # kept up to date
        write_tidy(args.results, rows, name, argv)
        row = rows[-1]
        seconds = row["wall_s"] if trained[0] == "" else row["train_wall_s"] + row["wall_s"]
        cpu = row["cpu_s"] if trained[1] == "" else row["train_cpu_s"] + row["cpu_s"]
        progress(
            f"seed {seed} {protocol} N={n_train} {loss}{'+off' if offsets else ''}"
            f": NDCG@10 {value:.4f} (lam {model.lam_:.3g}, {model.n_iter_} outer, "
            f"{seconds:.1f} s, CPU {cpu:.1f} s, {n_users} users)"
        )

    def baseline(seed, protocol, n_train, train, test):
        t0, c0 = time.perf_counter(), time.process_time()
        value = popularity(train, test, args.gain)
        record(seed, protocol, n_train, "popularity", False, value, test, None, t0, c0, ("", ""))

    for seed in range(args.seeds):
        if args.time_budget is not None and time.perf_counter() - started > args.time_budget:
            progress(f"time budget reached: {seeds_run} of {args.seeds} seeds run")
            break
        seeds_run += 1
        for protocol in protocols:
            if protocol == "weak":
                for n_train in args.n_train:
                    train, test = weak_split(ratings, n_train, 10, seed=seed)
                    baseline(seed, protocol, n_train, train, test)
                    for loss, offsets in methods:
                        t0, c0 = time.perf_counter(), time.process_time()
                        model = fit(train, loss, offsets, seed)
                        value = model.score(test, k=10, gain=args.gain)
                        record(seed, protocol, n_train, loss, offsets, value, test, model,
                               t0, c0, ("", ""))  # fmt: skip
                continue
            # one held-out draw (among the users qualifying for the smallest N) and one
            # training part for every N
            least = min(args.n_train) + 10
            splits = {
                n: strong_split(ratings, n, 10, seed=seed, min_ratings=least) for n in args.n_train
            }
            train = splits[args.n_train[0]][0]
            for n_train, (_, _, test) in splits.items():
                baseline(seed, protocol, n_train, train, test)
            for loss, offsets in methods:
                t0, c0 = time.perf_counter(), time.process_time()
                trained_model = fit(train, loss, offsets, seed)
                trained = (time.perf_counter() - t0, time.process_time() - c0)
                for n_train, (_, fold, test) in splits.items():
                    t0, c0 = time.perf_counter(), time.process_time()
                    model = copy.deepcopy(trained_model)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        model.fold_in(fold)
                    value = model.score(test, k=10, gain=args.gain)
                    record(seed, protocol, n_train, loss, offsets, value, test, model,
                           t0, c0, trained)  # fmt: skip
    write_csv(out / "results.csv", rows)
    lines = [
        f"# CofiRank on {name} ({ratings.shape[0]} users × {ratings.shape[1]} items, "
        f"{ratings.nnz} ratings): NDCG@10, gain {args.gain}, rank {args.rank}, "
        f"{seeds_run} seeds"
        + (f" (of {args.seeds} asked; the time budget ran out)" if seeds_run < args.seeds else "")
        + ", "
        + (f"lam {args.lam}" if args.lam else "lam = 0.3·‖P∇L(0)‖₂ (lam='auto')"),
        "",
    ]
    for protocol in protocols:
        header = ["method"] + [f"N={n}" for n in args.n_train] + ["paper (ML-100K weak)"]
        table = []
        for loss, offsets in [("popularity", False), *methods]:
            cells = []
            for n in args.n_train:
                key = (protocol, n, loss, offsets)
                v = [r["ndcg_at_10"] for r in rows
                     if (r["protocol"], r["n_train"], r["loss"], r["offsets"]) == key]  # fmt: skip
                cells.append(f"{np.mean(v):.4f} ± {np.std(v):.4f}")
            paper = PAPER.get(loss) if not offsets else None
            ref = " / ".join(f"{p:.4f}" for p in paper) if paper else ""
            label = "popularity" if loss == "popularity" else f"CofiRank-{loss}"
            table.append([f"{label}{' + offsets' if offsets else ''}", *cells, ref])
        table.append(["MMMF (paper)"] + [""] * len(args.n_train) + [" / ".join(
            f"{p:.4f}" for p in PAPER["MMMF"])])  # fmt: skip
        users = {n: [r["test_users"] for r in rows if r["protocol"] == protocol and
                     r["n_train"] == n] for n in args.n_train}  # fmt: skip
        lines += [
            f"## {protocol} generalisation (test users per N: "
            + ", ".join(f"{n}: {users[n][0]}" for n in args.n_train)
            + ")",
            "",
            markdown_table(header, table),
            "",
        ]
    text = "\n".join(lines)
    write_text(out / "results.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

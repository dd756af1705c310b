"""AdaRank on LETOR 4.0 MQ2008, with per-query values to test this package's rankers against.

    python experiments/adarank.py [--data ../shared/data] [--out results/adarank] [--quick]
        [--rounds N] [--folds 1 2 ...] [--against RUN_DIR ...] [--flips N]

The strongest official LETOR 4.0 baseline on MQ2008, AdaRank-NDCG, is published as fold
means only, so no paired test over queries can compare a ranker with it. This script
re-runs AdaRank as its paper states it (with one rule the paper lacks, below), beside the
official figures fold by fold, and keeps every test query's measures; ``--against`` then
tests the chosen models of finished ``letor.py`` runs against it query by query.

Algorithm (Xu & Li, "AdaRank: a boosting algorithm for information retrieval", SIGIR 2007,
Fig. 1). The weak rankers are the single features; E(q, f) ∈ [0, 1] is the measure of the
ranking of query q by scores f. With a distribution P_1 = 1/m over the m training queries,
round t = 1, 2, ...

- chooses the feature h_t = x_j maximising e_t = Σ_q P_t(q) E(q, x_j) (the first such j);
- sets α_t = ½ ln(Σ_q P_t(q) (1 + E(q, h_t)) / Σ_q P_t(q) (1 − E(q, h_t))) = ½ ln((1 + e_t) /
  (1 − e_t)) ≥ 0 (Σ_q P_t(q) = 1);
- forms f_t = Σ_{s≤t} α_s h_s, a linear model whose weight of feature j is the sum of the
  α_s of the rounds that chose j;
- reweights the queries: P_{t+1}(q) = exp(−E(q, f_t)) / Σ_q' exp(−E(q', f_t)).

As stated, the rule stalls on MQ2008. f_1 = α_1 x_j ranks every query as x_j does, so
P_2 ∝ exp(−E(q, x_j)); on MQ2008 round 2 chooses x_j again (LETOR feature 39, column 38,
in every fold), and from then on nothing changes: f_t ranks as x_j, P stays P_2, and every
round chooses x_j. This re-run therefore does not offer in round t the feature chosen in
round t − 1 (unless there is only one feature), a rule the paper does not state. A feature
that ranks every training query perfectly (E = 1 on all) has e_t = 1 and α_t = ∞: it is
chosen (the first such), the run stops, and the feature alone is the model.

The number of rounds T is chosen on the validation fold by LETOR NDCG@10, as ``letor.py``
chooses lam (ties go to the smaller T), up to ``--rounds`` (default 500; the chosen T is
reported, and a T at the cap is flagged).

``AdaRank-NDCG`` trains with E = NDCG of the whole list with the LETOR tool's gain 2^r − 1,
discount (positions 1 and 2 undiscounted, 1/log2(i) after) and tie rule (file order);
``AdaRank-MAP`` with E = average precision (label >= 1 relevant, ties in file order).
Training queries without a relevant document are left out: their E is 0 under every
ranking, so they carry no information on the order, and kept they would only take weight
from the others. The paper does not say which NDCG cutoff or tie rule the LETOR baselines
used; these are stated choices. The re-run does not reproduce the official figures (five
folds: NDCG@10 0.2229 and MAP 0.4717 against AdaRank-NDCG's 0.2307 and 0.4824; below them
in folds 1–3, level with them or above in folds 4–5), so the official implementation
differs from the paper in details it does not give; the tests against the re-run are tests
against AdaRank as published, not against the official tables.

Measures and the test: as ``letor.py`` (:func:`letor.query_measures`: LETOR NDCG@1..10 and
MAP, NERU@10), figures are means over test folds of per-fold query means; the paired
randomization test over the pooled test queries is :func:`letor.randomization_test`
(10,000 sign flips, two-sided). ``--against RUN_DIR`` reads ``per_query.csv`` of a finished
``letor.py`` run over the same folds (checked before any fitting) and tests each of its
methods against both re-runs on NDCG@1 / NDCG@5 / NDCG@10 / MAP.

Writes ``results.csv`` (one row per method × fold × measure, with the chosen T and the
training seconds), ``per_query.csv`` (test values per query), ``results.md`` and, with
``--against``, ``tests.csv`` (one row per tested method × re-run × measure).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
from _common import (
    base_parser,
    check_distinct,
    data_errors,
    fold_number,
    given,
    load_letor,
    make_out,
    markdown_table,
    mq2008_root,
    positive_int,
    progress,
    require,
    script,
    write_csv,
    write_text,
)
from letor import (
    MEASURES,
    parse_baseline,
    per_query_rows,
    query_measures,
    randomization_test,
    read_rows,
)

from losses.metrics import map_score, ndcg_score

NAME = "adarank"
TRAIN_MEASURES = {"AdaRank-NDCG": "ndcg", "AdaRank-MAP": "map"}
ROUNDS = 500
TESTED = ("NDCG@1", "NDCG@5", "NDCG@10", "MAP")
SELECT_BY = "NDCG@10"


def train_measure(measure: str, y, scores, qid) -> np.ndarray:
    """E(q, f) per query (in order of first appearance): NDCG of the whole list or AP, with
    the LETOR tool's gain, discount and file-order ties."""
    if measure == "ndcg":
        return ndcg_score(
            y, scores, qid, gain="exp", discount="original", ties="stable", per_query=True
        )
    if measure == "map":
        return map_score(y, scores, qid, threshold=1, ties="stable", per_query=True)
    raise ValueError(f"measure must be 'ndcg' or 'map'; got {measure!r}")


def with_relevant(y, qid) -> np.ndarray:
    """Rows of the queries that have a document of label >= 1."""
    y, qid = np.asarray(y), np.asarray(qid)
    return np.isin(qid, np.unique(qid[y >= 1]))


def adarank(X, y, qid, measure: str, rounds: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """AdaRank (Xu & Li, SIGIR 2007) with single features as weak rankers.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    y : ndarray of shape (n,)
        Labels; a query without a label >= 1 is left out (module docstring).
    qid : ndarray of shape (n,)
        Query of each row (rows of a query need not be contiguous).
    measure : {"ndcg", "map"}
        E of the module docstring.
    rounds : int >= 1
        Rounds to run (fewer when a weak ranker is perfect).

    Returns
    -------
    weights : ndarray of shape (T, d)
        The linear model f_t after each round t = 1..T.
    features, alphas : ndarray of shape (T,)
        h_t's column and α_t (``inf`` for a perfect weak ranker, which ends the run and is
        then the model alone: its row of ``weights`` is that feature's unit vector).
    """
    X = np.asarray(X, dtype=np.float64)
    keep = with_relevant(y, qid)
    if not keep.any():
        raise ValueError("y has no label >= 1: AdaRank has no query to learn from")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1; got {rounds}")
    X, y, qid = X[keep], np.asarray(y)[keep], np.asarray(qid)[keep]
    d = X.shape[1]
    # the weak rankers do not change: E of every feature on every query, once
    e_feature = np.stack([train_measure(measure, y, X[:, j], qid) for j in range(d)])
    n_queries = e_feature.shape[1]
    p = np.full(n_queries, 1.0 / n_queries)
    w = np.zeros(d)
    weights, features, alphas = [], [], []
    perfect = np.flatnonzero((e_feature >= 1.0).all(axis=1))
    for _ in range(rounds):
        e = e_feature @ p
        if features and d > 1:
            e[features[-1]] = -math.inf  # not the previous round's feature (docstring)
        allowed = perfect[e[perfect] > -math.inf]
        j = int(allowed[0]) if allowed.size else int(np.argmax(e))
        features.append(j)
        if allowed.size:
            alphas.append(math.inf)
            w = np.zeros(d)
            w[j] = 1.0
            weights.append(w)
            break
        alpha = 0.5 * math.log((1.0 + e[j]) / (1.0 - e[j]))
        alphas.append(alpha)
        w = w.copy()
        w[j] += alpha
        weights.append(w)
        p = np.exp(-train_measure(measure, y, X @ w, qid))
        p /= p.sum()
    return np.array(weights), np.array(features), np.array(alphas)


def choose_rounds(weights: np.ndarray, Xv, yv, qv) -> tuple[int, float]:
    """The number of rounds T (1-based) with the best validation LETOR NDCG@10 (the smaller T
    on ties), and that score."""
    best_t, best = 0, -math.inf
    for t, w in enumerate(weights, 1):
        score = ndcg_score(yv, Xv @ w, qv, k=10, convention="letor")
        if score > best:
            best_t, best = t, score
    return best_t, best


# ------------------------------------------------------------------------------ --against


def read_against(run_dir: Path, folds) -> dict[str, dict[tuple[str, int], dict]]:
    """A ``letor.py`` run's test values per method and (fold, query), checked to hold exactly
    ``folds``; raises ValueError naming the run otherwise."""
    path = run_dir / "per_query.csv"
    if not path.is_file():
        raise ValueError(f"--against {run_dir}: no per_query.csv (not a letor.py run folder)")
    rows = read_rows(path)
    held = sorted({r["fold"] for r in rows})
    wanted = sorted(f"Fold{f}" for f in folds)
    if held != wanted:
        raise ValueError(
            f"--against {run_dir}: the run holds {held or 'no folds'}, this run {wanted}; "
            "run with the same --folds"
        )
    out: dict[str, dict[tuple[str, int], dict]] = {}
    for r in rows:
        missing = [m for m in MEASURES if m not in r]
        if missing or "qid" not in r or "method" not in r:
            raise ValueError(f"--against {path}: a row lacks {missing or ['qid', 'method']}")
        out.setdefault(r["method"], {})[r["fold"], r["qid"]] = r
    return out


def compare(query_rows: list[dict], against: dict, n_flips: int) -> list[dict]:
    """Each method of ``against`` beside each re-run over the re-run's test queries (a method
    lacking one of them is a ValueError): pooled means and randomization-test p values."""
    ours: dict[str, dict[tuple[str, int], dict]] = {}
    for r in query_rows:
        ours.setdefault(r["method"], {})[r["fold"], r["qid"]] = r
    out = []
    for base, base_rows in ours.items():
        keys = list(base_rows)
        for method, theirs in against.items():
            missing = [k for k in keys if k not in theirs]
            if missing:
                raise ValueError(
                    f"--against: method {method!r} lacks {len(missing)} test queries of this "
                    f"run, for example fold {missing[0][0]} qid {missing[0][1]}"
                )
            for measure in TESTED:
                a = np.array([theirs[k][measure] for k in keys])
                b = np.array([base_rows[k][measure] for k in keys])
                out.append(
                    {
                        "method": method,
                        "against": base,
                        "measure": measure,
                        "queries": len(keys),
                        "mean": float(a.mean()),
                        "mean_against": float(b.mean()),
                        "p": randomization_test(a, b, n_flips),
                    }
                )
    return out


# ----------------------------------------------------------------------------------- main


@script
def main(argv=None) -> int:
    parser = base_parser(NAME, __doc__.splitlines()[0])
    parser.add_argument(
        "--rounds", type=positive_int, default=None, help=f"at most (default {ROUNDS})"
    )
    parser.add_argument("--folds", nargs="+", type=fold_number, default=None)
    parser.add_argument(
        "--against",
        nargs="+",
        type=Path,
        default=(),
        metavar="RUN_DIR",
        help="letor.py run folders over the same folds: test their methods against AdaRank",
    )
    parser.add_argument(
        "--flips", type=positive_int, default=10_000, help="randomization-test flips"
    )
    args = parser.parse_args(argv)
    quick = args.quick
    rounds = given(args.rounds, 20 if quick else ROUNDS)
    check_distinct(parser, "--folds", args.folds)
    folds = tuple(given(args.folds, (1,) if quick else (1, 2, 3, 4, 5)))
    against = {}
    for run_dir in args.against:
        try:
            for method, values in read_against(run_dir, folds).items():
                name = method if len(args.against) == 1 else f"{run_dir.name}: {method}"
                against[name] = values
        except ValueError as exc:
            parser.error(str(exc))
    root = mq2008_root(args.data)
    baseline_dir = require(args.data / "letor4_baselines", "LETOR 4.0 baseline tables")
    official = {}
    for name in TRAIN_MEASURES:
        path = require(baseline_dir / f"{name}.MQ2008.txt", name)
        with data_errors(path):
            official[name] = parse_baseline(path)

    rows: list[dict] = []
    query_rows: list[dict] = []
    chosen: dict[str, dict[int, tuple[int, int]]] = {name: {} for name in TRAIN_MEASURES}
    started = time.perf_counter()
    for fold in folds:
        splits = load_letor(root, fold)
        X, y, qid = splits["train"]
        Xv, yv, qv = splits["vali"]
        Xt, yt, qt = splits["test"]
        for name, measure in TRAIN_MEASURES.items():
            start = time.perf_counter()
            weights, _, _ = adarank(X, y, qid, measure, rounds)
            seconds = time.perf_counter() - start
            t, vali = choose_rounds(weights, Xv, yv, qv)
            w = weights[t - 1]
            chosen[name][fold] = (t, len(weights))
            mt = query_measures(yt, Xt @ w, qt)
            progress(
                f"fold {fold} {name}: {len(weights)} rounds in {seconds:.1f} s, T = {t} "
                f"({np.count_nonzero(w)} features), vali NDCG@10 {vali:.4f}, "
                f"test NDCG@10 {mt['NDCG@10'].mean():.4f} MAP {mt['MAP'].mean():.4f}"
            )
            common = {"method": name, "fold": f"Fold{fold}", "rounds": t, "seconds": seconds}
            rows.append(
                {
                    **common,
                    "source": "re-run",
                    "split": "vali",
                    "measure": SELECT_BY,
                    "value": vali,
                }
            )
            for measure_name in MEASURES:
                rows.append(
                    {
                        **common,
                        "source": "re-run",
                        "split": "test",
                        "measure": measure_name,
                        "value": float(mt[measure_name].mean()),
                    }
                )
            query_rows += per_query_rows(name, fold, qt, mt)
    try:
        tests = compare(query_rows, against, args.flips) if against else []
    except ValueError as exc:  # the run's queries are not these folds' (another data folder)
        parser.error(str(exc))
    wall = time.perf_counter() - started

    text = report(rows, official, chosen, folds, rounds, tests, args, wall)
    make_out(args.out)
    write_csv(args.out / "results.csv", rows)
    write_csv(args.out / "per_query.csv", query_rows)
    if tests:
        write_csv(args.out / "tests.csv", tests)
    write_text(args.out / "results.md", text)
    progress(f"wrote {args.out}")
    return 0


def report(rows, official, chosen, folds, rounds, tests, args, wall) -> str:
    fold_names = [f"Fold{f}" for f in folds]
    value = {
        (r["method"], r["fold"], r["measure"]): r["value"] for r in rows if r["split"] == "test"
    }
    lines = [
        "# AdaRank on LETOR 4.0 MQ2008, re-run beside the official tables",
        "",
        f"Folds {', '.join(fold_names)}; at most {rounds} rounds, T chosen per fold by "
        f"validation {SELECT_BY}; wall time {wall:.0f} s. Test figures: means over the folds "
        "of per-fold query means, LETOR tool conventions.",
        "",
        "## Test results (mean over folds)",
        "",
    ]
    table = []
    for name in TRAIN_MEASURES:
        for source, get in (
            ("re-run", lambda f, m, name=name: value[name, f, m]),
            ("LETOR", lambda f, m, name=name: official[name][f][m]),
        ):
            table.append(
                [f"{name} ({source})"]
                + [float(np.mean([get(f, m) for f in fold_names])) for m in TESTED]
            )
    lines += [markdown_table(["method", *TESTED], table), ""]
    for measure in ("NDCG@10", "MAP"):
        fold_rows = []
        for name in TRAIN_MEASURES:
            fold_rows.append([f"{name} (re-run)", *(value[name, f, measure] for f in fold_names)])
            fold_rows.append(
                [f"{name} (LETOR)", *(official[name][f][measure] for f in fold_names)]
            )
        lines += [
            f"{measure} per fold:",
            "",
            markdown_table(["method", *fold_names], fold_rows),
            "",
        ]
    rounds_rows = [
        [
            name,
            *(
                f"{t}{' (cap)' if t == n and n == rounds else ''}"
                for t, n in (chosen[name][f] for f in folds)
            ),
        ]
        for name in TRAIN_MEASURES
    ]
    lines += ["Chosen T per fold:", "", markdown_table(["method", *fold_names], rounds_rows), ""]
    if tests:
        runs = ", ".join(str(p) for p in args.against)
        lines += [
            f"## Against {runs}",
            "",
            f"Paired randomization test over the {tests[0]['queries']} pooled test queries "
            f"({args.flips} sign flips, two-sided); values are pooled query means.",
            "",
        ]
        for base in TRAIN_MEASURES:
            by_method: dict[str, dict[str, dict]] = {}
            for r in tests:
                if r["against"] == base:
                    by_method.setdefault(r["method"], {})[r["measure"]] = r
            table = []
            for method, cells in by_method.items():
                table.append(
                    [method]
                    + [
                        f"{cells[m]['mean']:.4f} − {cells[m]['mean_against']:.4f} "
                        f"(p = {cells[m]['p']:.3g})"
                        for m in TESTED
                    ]
                )
            lines += [
                f"Against {base} (re-run):",
                "",
                markdown_table(["method", *TESTED], table),
                "",
            ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())

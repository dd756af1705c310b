"""LETOR 4.0 MQ2008: this package's ranking losses beside the official LETOR baselines.

    python experiments/letor.py [--data ../shared/data] [--out results/letor] [--quick]
        [--dataset mq2008|lightgbm-example|trec-news-2018] [--losses ...] [--lams ...]
        [--grid KEY=V1,V2 ...] [--method auto|bmrm|ocas|...] [--time-repeats N]
    python experiments/letor.py --merge RUN_DIR [RUN_DIR ...] --out OUT_DIR [--flips N]
        [--infer-settings]

Data: ``<data>/mq2008`` (the partitions S1..S5, rotated into the five standard folds by
:func:`bmrm.io.load_letor_fold`) and the official baseline tables
``<data>/letor4_baselines/*.MQ2008.txt`` (RankSVM-Struct, RankBoost, AdaRank-MAP,
AdaRank-NDCG; their "Performance on testing set" blocks, one row per fold and an average).

``--dataset lightgbm-example`` runs the same protocol on LightGBM's lambdarank example
(``<data>/lightgbm_rank``: labels 0–4, 300 sparse features in [0, 1]), which has no
validation file and no official folds: one documented split, a seeded 20 % of the training
queries (``numpy.random.default_rng(0)``) held out for validation, ``rank.test`` as the test
set, no official baselines.

``--dataset trec-news-2018`` runs it on the TREC News 2018 entity-ranking features
(``<data>/trec_news_2018``: labels 0–4, 5 features, 50 queries): the given train and test
files are pooled and cut into five folds of 10 queries rotated as LETOR's
(:func:`trec_news_folds`), features scaled to [0, 1] per query, no official baselines.

Protocol (LETOR 4.0): for every fold and loss, a linear model is fitted on the training
set for each lam of the grid (tol 1e-3 relative gap, at most 2000 iterations), lam is chosen
by the validation NDCG@10 (NERU@10 for the NERU losses), and the chosen model is scored on
the test set. NERU@10 (half-life 5, neutral vote 0, :func:`losses.metrics.neru_score`)
is reported beside the LETOR measures; the official tables do not publish it. Measures follow
the LETOR evaluation tool (``ndcg_score(..., convention="letor")`` and ``map_score(...,
threshold=1, ties="stable")``): gain 2^r − 1, positions 1 and 2 undiscounted, a query with
no relevant document scores 0, NDCG@k of a query shorter than k scores 0, ties keep file
order. Reported figures are the mean over the test folds of the per-fold query means, as
the official tables do. These per-query values were compared once with the output of the
official LETOR 4.0 script (``Eval-Score-4.0.pl``, run outside this repository) on all five
MQ2008 partitions for six rankings (file order, two single features with many tied scores,
rounded random scores, the labels and the reversed labels): every per-query NDCG@1..10
and AP agreed to the script's four printed decimals; the tests check the same rules,
written from their definition, on tied scores. Features are used raw: MQ2008 features are
already normalised per query to [0, 1].

``--grid KEY=V1,V2`` tunes parameters of the structured losses (``ndcg*``, ``neru*``; for
example ``discount=log2,original`` (``original`` is the LETOR tool's discount),
``truncate_c=false,true``, ``c=power,dcg``, ``k=5,10``, ``ties=latent,pairs``,
``gain=exp,linear`` (the gain the loss trains with, 2^y − 1 or y; the measures keep the
LETOR tool's 2^y − 1), ``pairwise=0,0.3,1`` (the weight of the pairwise hinge added to the
loss), ``average_precision=0,0.3,1`` (the weight of the average-precision hinge added to
it)) jointly with lam: every combination of the grid is fitted for every
lam, and the validation measure chooses the pair per fold (ties go to the later
combination, lams visited ascending). Repeating ``--grid`` tunes over the union of the
grids, in the given order (for example ``--grid ties=latent c=power,dcg --grid
ties=pairs``: ``c`` is not a parameter of the pairs formulation, so it is not crossed with
it); a combination given twice is fitted once. Every combination is checked against every
structured loss of the run before any fit: an unknown parameter or a bad value is an
argument error naming it. One key is not a loss parameter: ``regularizer=l2,l1`` is
:func:`bmrm.fit`'s regularizer (L2, ½‖w‖², or L1, ‖w‖₁, solved through the LP master;
sparse models, at ten to a hundred times the time per fit on MQ2008), and it is tuned
for every loss of the run, the pairwise ones included, so that each loss may choose it.

A constant feature is not offered: every structured and pairwise loss here depends on the
scores of a query only through their differences (its subgradient in f sums to zero over
each query), so the weight of a constant column stays 0 under the L2 regulariser and the
ranking is unchanged.

Methods
-------
``ndcg``, ``neru``
    The structured max-margin losses of :mod:`losses.listwise` with their defaults (NDCG@10
    with ``c_i = (i + 1)^(−1/4)``; NERU@10 with half-life 5): the tie-breaking of the ideal
    ordering is latent (equal labels in decreasing score), trained by the concave-convex
    procedure of :mod:`bmrm.solver.cccp` from the ``ordinal`` minimiser at the same lam.
    lam is chosen by validation NERU@10 for the NERU losses.
``ndcg-increasing``, ``neru-increasing``
    The same losses with ``ties="increasing"``: the convex rule (equal labels in increasing
    score), which charges any spread of scores among documents of equal label.
``ndcg-pairs``, ``neru-pairs``
    The same measures with ``ties="pairs"``: the convex loss whose joint feature map sums
    over the pairs of documents of different label only (as SVM-MAP), exact inference.
``ordinal``
    The pairwise hinge over all comparable pairs of a query (pair cost 1), normalised per
    query.
``map``
    The structured average-precision hinge of :mod:`losses.average_precision` (SVM-MAP,
    Yue et al., SIGIR 2007; labels >= 1 relevant, LETOR's rule on MQ2008), convex, exact
    inference.
``preference``
    The pairwise hinge over the pairs of :func:`losses.preference.pairs_from_labels`. Their
    cost is ``--pair-cost`` (default ``gain_difference``, 2^{y_j} − 2^{y_i}): with cost 1
    this loss equals ``ordinal``.
``squared``
    Least squares on the labels, with an intercept.
``best feature``
    Ranking by the single feature (either sign) with the best training NDCG@10.
``constant``
    All scores equal: the file order, which the LETOR measures keep for ties.

Selection noise: on MQ2008 the validation NDCG@10 of neighbouring settings often differs by
less than 0.001 (and only the 50–69 validation queries with at least 10 documents and a
relevant one count towards it), so fits that differ within the solver's tolerance can choose
another lam in a fold and move a fold's test NDCG@10 by up to 0.02. With the tuned grid of
seven lams and eight NDCG settings, the ordinal loss scores 0.2289 at tol 1e-3 and 0.2255 at
tol 1e-5, the NDCG loss 0.2260 and 0.2313 (earlier solvers gave the ordinal loss 0.2233 to
0.2296). The candidate set moves it as much: with 15 lams and 31 NDCG settings (tie rule, k,
discount, c, truncation; tol 1e-3) the chosen NDCG models score 0.2330, and adding the same
30 settings with ``gain=linear`` lowers that to 0.2280 while raising their validation score.
A run is deterministic: the same command gives the same figures. The randomization test
below holds the chosen models fixed, so it does not count this variation of the choice.

Selection-free comparison ("Test at every lam" in ``results.md``; needs the ordinal loss
in the run): each loss fitted with one setting is scored on the test folds at every lam of
the grid, the same lam in every fold, against the ordinal loss at the same lam, and over the
whole grid (each query's values averaged over the lams, one test); the counts of lams at
which a loss is ahead. It says how a loss compares at any regularisation, apart from the
validation noise described above; the headline figures remain those of the chosen models.

Significance: a paired randomization test over the pooled test queries of all folds
(10,000 random sign flips of the per-query differences, two-sided, p = (1 + #{|mean of
flipped| >= |observed mean|}) / (1 + flips)), as in Smucker, Allan & Carterette (CIKM 2007).
The official baselines publish no per-query values, so they are not tested.

Writes ``results.csv`` (one row per method × fold × lam × split × measure, with the fit's
seconds, iterations, gap and ‖w‖; the official baselines' rows have no lam; with
``--time-repeats N`` also the median seconds and iterations of N refits of each chosen
setting, measures ``refit_seconds`` and ``refit_iterations``),
``per_query.csv`` (test values of the chosen models per query), ``per_query_lams.csv`` (test
NDCG@10, MAP and NERU@10 per query of every lam's model, for the losses fitted with one
setting), ``every_lam.csv`` (the selection-free comparison above), ``results.md``, the plots
``ndcg_at_k.png``, ``validation_lam.png`` and ``folds.png``, and ``run.json`` (the settings
that change the figures: data set, losses, lams, ``--grid``, tol, max_iter, solver method,
pair cost, refit count; with the folds, flips and wall seconds). When the ordinal loss and an
``*-increasing`` loss run, ``results.csv`` also holds the latter's training risk along the
chosen ordinal direction on the first fold (measures ``risk_along_ordinal@rho=…``).

Merging runs: a long grid can be run as several processes over disjoint ``--folds``, each
with its own ``--out``; ``--merge RUN_DIR ...`` then writes into ``--out`` the report one run
over the union of their folds (ascending) would have written, without fitting: the same
``results.csv``, ``per_query.csv`` and ``per_query_lams.csv`` rows (fold by fold as each run
wrote them; without the last, and without the selection-free comparison, when a run predates
it), the randomization tests recomputed over the pooled test queries of all folds (``--flips``,
default the runs' common count; same seed), the same ``results.md`` and plots. Timings are
the runs' own: the wall time is their sum. One function (:func:`write_report`) writes the
report of a fitting run and of a merge. Before anything is written it refuses, as an argument
error: a RUN_DIR that is missing or lacks ``results.csv`` or ``per_query.csv``, a fold held by
two runs, runs that differ in any setting of ``run.json`` (the ``--grid`` compared as its
union of combinations), runs whose official baseline rows or (without ``--flips``) flips
differ, ``--out`` equal to a RUN_DIR, and any fitting option (``--data``, ``--quick``,
``--dataset``, ``--losses``, ``--lams``, ``--folds``, ``--grid``, ``--tol``, ``--max-iter``,
``--method``, ``--pair-cost``, ``--time-repeats``). A run written before ``run.json``
existed is refused unless ``--infer-settings`` is given; then its settings are read from its
own files (:func:`infer_settings`): the methods, the lams (exact) and the parameter string
of every fit, with its folds, from ``results.csv``; the data set, solver method, tol (as
printed, six significant digits), max_iter, pair cost, ``--grid`` options, refit count,
flips and wall time (whole seconds) from the first paragraph of ``results.md``; the printed
lam grid and number of combinations must match ``results.csv``, and each structured loss
must have been fitted at every (combination, lam) of that grid, in order, in every fold.
Neither way checks that the runs read the same data folder or ran the same code. The table
of training risk along the ordinal direction (shown when a loss stays at w = 0) uses the rows
of the union's first fold: they exist when that fold came first in its run and the run wrote
them (runs older than ``run.json`` did not); otherwise the table is left out.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
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
    fold_number,
    given,
    lam_value,
    load_letor,
    make_out,
    markdown_table,
    mq2008_root,
    nonneg_int,
    positive_int,
    progress,
    require,
    save_figure,
    script,
    tolerance,
    write_csv,
    write_results,
    write_text,
)

import bmrm
import losses
from bmrm.io import load_svmlight
from bmrm.solver.methods import METHODS as SOLVER_METHODS
from bmrm.solver.methods import NONCONVEX_METHODS
from losses.metrics import map_score, ndcg_score, neru_score
from losses.preference import pairs_from_labels

# method -> (loss name, loss parameters)
METHODS = {
    "ndcg": ("ndcg", {}),
    "ndcg-increasing": ("ndcg", {"ties": "increasing"}),
    "ndcg-pairs": ("ndcg", {"ties": "pairs"}),
    "ordinal": ("ordinal", {}),
    "preference": ("preference", {}),
    "neru": ("neru", {"k": 10}),
    "neru-increasing": ("neru", {"k": 10, "ties": "increasing"}),
    "neru-pairs": ("neru", {"k": 10, "ties": "pairs"}),
    "squared": ("squared", {}),
    "map": ("map", {}),
}
LOSSES = tuple(METHODS)
LAMS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)
KS = tuple(range(1, 11))
LETOR_MEASURES = tuple(f"NDCG@{k}" for k in KS) + ("MAP",)
MEASURES = (*LETOR_MEASURES, "NERU@10")
HEADLINE = ("NDCG@1", "NDCG@3", "NDCG@5", "NDCG@10", "MAP", "NERU@10")
TESTED = ("NDCG@1", "NDCG@5", "NDCG@10", "MAP", "NERU@10")
OFFICIAL = ("RankSVM-Struct", "RankBoost", "AdaRank-MAP", "AdaRank-NDCG")
SELECT_BY = "NDCG@10"
SELECT_NERU = "NERU@10"


def select_by(method: str) -> str:
    """The validation measure that chooses lam: NERU@10 for the NERU losses."""
    return SELECT_NERU if method.startswith("neru") else SELECT_BY


REFERENCE = ("squared", "best feature")
# the selection-free comparison: every lam against this loss at the same lam
LAM_REFERENCE = "ordinal"
LAM_MEASURES = ("NDCG@10", "MAP", "NERU@10")
DATASETS = ("mq2008", "lightgbm-example", "trec-news-2018")
TITLES = {
    "mq2008": "# LETOR 4.0 MQ2008",
    "lightgbm-example": "# LightGBM lambdarank example (one split)",
    "trec-news-2018": "# TREC News 2018 entity ranking (five folds of 10 queries)",
}
STRUCTURED = ("ndcg", "neru")
# --grid keys that are arguments of bmrm.fit, not loss parameters: tuned for every loss
FIT_KEYS = {"regularizer": ("l2", "l1")}


def loss_settings(method: str, grid: list[dict]) -> list[dict]:
    """The combinations of ``grid`` that ``method`` is fitted with: all of them for a
    structured loss; for the others only the fit-level keys (:data:`FIT_KEYS`), each
    distinct combination once in the grid's order, or ``[{}]`` when the grid has none."""
    if METHODS[method][0] in STRUCTURED:
        return grid
    out: list[dict] = []
    for params in grid:
        fit_only = {k: v for k, v in params.items() if k in FIT_KEYS}
        if fit_only not in out:
            out.append(fit_only)
    return out or [{}]


def parse_grid(groups) -> list[dict]:
    """Loss parameters (int, float, bool, str) of a union of grids.

    ``groups`` holds one list of ``KEY=V1,V2`` items per ``--grid`` option; each list gives
    every combination of its items, and the grids follow one another in the given order
    with repeated combinations dropped (the first is kept).
    """

    def value(text: str):
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
        return text

    union: list[dict] = []
    for items in groups or ([],):
        grid: list[dict] = [{}]
        for item in items:
            key, sep, values = item.partition("=")
            if not sep or not key or not values:
                raise ValueError(f"--grid items must look like KEY=V1,V2; got {item!r}")
            grid = [{**g, key: value(v)} for g in grid for v in values.split(",")]
        union += [g for g in grid if g not in union]
    return union


def check_grid(grid: list[dict], methods) -> None:
    """Build every structured loss of ``methods`` with every combination of ``grid``.

    Raises ``ValueError`` naming the combination, the method and the loss's complaint (an
    unknown parameter, such as ``gain`` for a NERU loss, or a value out of range), so that a
    bad ``--grid`` stops the run before any fit.
    """
    for params in grid:
        for key, allowed in FIT_KEYS.items():
            if key in params and params[key] not in allowed:
                raise ValueError(
                    f"--grid {key} must be one of {', '.join(allowed)}; got {params[key]!r}"
                )
    for method in methods:
        name, base = METHODS[method]
        if name not in STRUCTURED:
            continue
        for params in grid:
            loss_params = {k: v for k, v in params.items() if k not in FIT_KEYS}
            try:
                losses.get(name, **{**base, **loss_params})
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"--grid setting {grid_text(params)} is not valid for {method}: {exc}"
                ) from None


def grid_option_text(groups) -> str:
    """The ``--grid`` options as typed, one grid per ``--grid``."""
    return " ".join("--grid " + " ".join(items) for items in groups or ())


def grid_text(params: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in params.items()) or "default"


def lightgbm_example(root: Path, seed: int = 0) -> dict:
    """LightGBM's lambdarank example: train / a seeded 20 % of its queries / test."""
    X, y, qid = load_svmlight(root / "rank.train", query_file="auto", dense=True)
    Xt, yt, qt = load_svmlight(
        root / "rank.test", query_file="auto", n_features=X.shape[1], dense=True
    )
    queries = np.unique(qid)
    held = np.random.default_rng(seed).choice(queries, size=len(queries) // 5, replace=False)
    vali = np.isin(qid, held)
    return {
        "train": (X[~vali], y[~vali], qid[~vali]),
        "vali": (X[vali], y[vali], qid[vali]),
        "test": (Xt, yt, qt),
    }


def query_min_max(X: np.ndarray, qid: np.ndarray) -> np.ndarray:
    """Each feature scaled to [0, 1] within each query (LETOR's QueryLevelNorm); a feature
    constant within a query becomes 0 there."""
    out = np.zeros_like(X, dtype=np.float64)
    for q in np.unique(qid):
        rows = qid == q
        low = X[rows].min(axis=0)
        span = X[rows].max(axis=0) - low
        live = span > 0
        out[np.ix_(rows, live)] = (X[rows][:, live] - low[live]) / span[live]
    return out


TREC_NEWS_PARTS = 5


def trec_news_folds(root: Path, seed: int = 0) -> dict[int, dict]:
    """TREC News 2018 entity ranking: its 50 queries in five folds of 10, rotated as LETOR's.

    ``trec_news_2018.train`` and ``.test`` (45 and 5 queries) are pooled, the query ids are
    shuffled by ``numpy.random.default_rng(seed)`` into five parts of 10, and fold f trains on
    parts f, f+1, f+2, validates on f+3 and tests on f+4 (mod 5), so every query is tested
    once. Features are scaled to [0, 1] per query (:func:`query_min_max`).
    """
    X, y, qid = load_svmlight(root / "trec_news_2018.train", query_file=None, dense=True)
    Xt, yt, qt = load_svmlight(
        root / "trec_news_2018.test", query_file=None, n_features=X.shape[1], dense=True
    )
    X, y, qid = np.vstack([X, Xt]), np.concatenate([y, yt]), np.concatenate([qid, qt])
    X = query_min_max(X, qid)
    queries = np.random.default_rng(seed).permutation(np.unique(qid))
    parts = np.array_split(queries, TREC_NEWS_PARTS)

    def split(indices):
        rows = np.isin(qid, np.concatenate([parts[i % TREC_NEWS_PARTS] for i in indices]))
        return X[rows], y[rows], qid[rows]

    return {
        f: {
            "train": split((f - 1, f, f + 1)),
            "vali": split((f + 2,)),
            "test": split((f + 3,)),
        }
        for f in range(1, TREC_NEWS_PARTS + 1)
    }


SCALES = (0.0, 0.1, 1.0, 10.0)


def query_measures(y: np.ndarray, s: np.ndarray, qid: np.ndarray) -> dict[str, np.ndarray]:
    """Per-query LETOR NDCG@1..10 and average precision of the ranking by ``s``."""
    out = {f"NDCG@{k}": ndcg_score(y, s, qid, k=k, convention="letor", per_query=True) for k in KS}
    out["MAP"] = map_score(y, s, qid, threshold=1, ties="stable", per_query=True)
    out["NERU@10"] = neru_score(y, s, qid, k=10, ties="stable", per_query=True)
    return out


def per_query_rows(method: str, fold: int, qid: np.ndarray, values: dict) -> list[dict]:
    """Rows of ``per_query.csv`` for one method's test queries of one fold; ``values`` holds,
    per measure, one value per query in order of first appearance in ``qid`` (as
    :func:`query_measures` gives them)."""
    _, first = np.unique(qid, return_index=True)
    return [
        {
            "method": method,
            "fold": f"Fold{fold}",
            "qid": int(q),
            **{m: float(values[m][i]) for m in MEASURES},
        }
        for i, q in enumerate(qid[np.sort(first)])
    ]


def lam_query_rows(method: str, fold: int, lam: float, qid: np.ndarray, values: dict):
    """Rows of ``per_query_lams.csv``: one method's test values at one lam of the grid, per
    query, for the measures of the selection-free comparison."""
    return [
        {"method": method, "fold": r["fold"], "lam": lam, "qid": r["qid"]}
        | {m: r[m] for m in LAM_MEASURES}
        for r in per_query_rows(method, fold, qid, values)
    ]


def randomization_test(a: np.ndarray, b: np.ndarray, n_flips: int, seed: int = 0) -> float:
    """Two-sided paired randomization test of mean(a − b) = 0 by random sign flips."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    observed = abs(d.mean())
    rng = np.random.default_rng(seed)
    hits, done = 0, 0
    while done < n_flips:
        size = min(1000, n_flips - done)
        signs = rng.integers(0, 2, size=(size, d.size)) * 2.0 - 1.0
        flipped = np.abs(signs @ d) / d.size
        hits += int(np.count_nonzero(flipped >= observed - 1e-12))
        done += size
    return (1 + hits) / (1 + n_flips)


# ------------------------------------------------------------------------ official baselines


def parse_baseline(path: Path) -> dict[str, dict[str, float]]:
    """Test NDCG@1..10 and MAP per fold ("Fold1".."Fold5") and "Avg" from a LETOR table.

    The tables label fold rows ``Fold1``..``Fold5`` or, for RankSVM-Struct, by the chosen
    parameter; rows are in fold order in both, so they are named by position.
    """
    text = path.read_text()
    start = text.index("Performance on testing set")
    end = text.find("Performance on", start + 1)
    block = text[start:] if end < 0 else text[start:end]
    table: dict[str, dict[str, float]] = {}
    header: list[str] | None = None
    n_row = 0
    for line in block.splitlines()[1:]:
        cells = line.split()
        if not cells:
            header = None
            continue
        if header is None:
            header = cells
            n_row = 0
            continue
        label = cells[0].lower()
        name = "Avg" if label in ("avg", "average") else f"Fold{n_row + 1}"
        n_row += label not in ("avg", "average")
        row = table.setdefault(name, {})
        for column, value in zip(header[1:], cells[1:], strict=False):
            match = re.fullmatch(r"NDCG@(\d+)", column)
            if match or column == "MAP":
                row[column] = float(value)
    return table


# --------------------------------------------------------------------------------- fitting


def fit_loss(method, X, y, qid, lam, tol, max_iter, pairs, extra=None, solver=None):
    loss, params = METHODS[method]
    extra = dict(extra or {})
    regularizer = extra.pop("regularizer", "l2")
    params = {**params, **extra}
    kwargs = {"pairs": pairs[0], "pair_costs": pairs[1]} if loss == "preference" else {}
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bmrm.ConvergenceWarning)
        model = bmrm.fit(
            X,
            y,
            loss,
            None if loss == "squared" else qid,
            lam=lam,
            tol=tol,
            max_iter=max_iter,
            fit_intercept=loss == "squared",
            loss_params=params,
            method=solver,
            regularizer=regularizer,
            **kwargs,
        )
    seconds = time.perf_counter() - start
    res = model.result_
    info = {
        "fit_seconds": seconds,
        "iterations": res.nit,
        "status": res.status,
        "rel_gap": res.gap / max(abs(res.fun), 1e-300),
        "coef_norm": float(np.linalg.norm(model.coef_)),
        # concave-convex steps (latent losses; 0 for convex ones)
        "cccp_steps": int(res.get("n_outer", 0)),
    }
    return model, info


def best_feature(X, y, qid) -> tuple[int, float]:
    """The column and sign whose ranking has the best NDCG@10 on (X, y, qid)."""
    best = (-1.0, 0, 1.0)
    for j in range(X.shape[1]):
        for sign in (1.0, -1.0):
            value = ndcg_score(y, sign * X[:, j], qid, k=10, convention="letor")
            if value > best[0]:
                best = (value, j, sign)
    return best[1], best[2]


def warm_up(losses_run, split, pair_cost):
    """Compile every kernel on a few queries, untimed."""
    X, y, qid = split
    keep = np.isin(qid, np.unique(qid)[:20])
    Xw, yw, qw = X[keep], y[keep], qid[keep]
    pairs = pairs_from_labels(yw, qw, cost=pair_cost)
    for loss in losses_run:
        fit_loss(loss, Xw, yw, qw, 1e-2, 1e-2, 20, pairs)
    query_measures(yw, Xw[:, 0], qw)


# -------------------------------------------------------------------------------- reporting


def fmt_p(p: float) -> str:
    return "≤1e-4" if p <= 1e-4 else (f"{p:.4f}" if p < 0.01 else f"{p:.3f}")


def plot_ndcg_at_k(path, means, official_means):
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for i, (name, m) in enumerate(means.items()):
        ax.plot(
            KS, [m[f"NDCG@{k}"] for k in KS], marker="o", color=plt.cm.tab10(i % 10), label=name
        )
    for i, (name, m) in enumerate(official_means.items()):
        ax.plot(
            KS,
            [m[f"NDCG@{k}"] for k in KS],
            ls="--",
            marker="x",
            color=plt.cm.Dark2(i % 8),
            label=f"{name} (LETOR)",
        )
    ax.set_xlabel("k")
    ax.set_ylabel("NDCG@k (LETOR conventions), mean over test folds")
    ax.set_xticks(KS)
    ax.set_title("MQ2008 test NDCG@k")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def plot_validation(path, vali, losses_run, lams):
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for loss in losses_run:
        ax.plot(lams, [np.mean(vali[loss][lam]) for lam in lams], marker="o", label=loss)
    ax.set_xscale("log")
    ax.set_xlabel("lam")
    ax.set_ylabel(f"validation {SELECT_BY} ({SELECT_NERU} for neru), mean over folds")
    ax.set_title("MQ2008: choice of lam")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def plot_folds(path, per_fold, folds):
    names = list(per_fold)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.8 / len(names)
    for ax, measure in zip(axes, ("NDCG@10", "MAP"), strict=True):
        for i, name in enumerate(names):
            ax.bar(
                np.arange(len(folds)) + i * width,
                [per_fold[name][f][measure] for f in folds],
                width,
                label=name,
                color=plt.cm.tab20(i % 20),
            )
        ax.set_xticks(np.arange(len(folds)) + 0.4 - width / 2, [f"Fold{f}" for f in folds])
        ax.set_ylabel(f"test {measure}")
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=6, ncol=2)
    fig.suptitle("MQ2008 per fold (LETOR baselines from the official tables)")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


# ------------------------------------------------------------------------------ run records

OFFICIAL_SOURCE = "LETOR 4.0 table"
RUN_FILE = "run.json"
ALONG = "risk_along_ordinal@rho="
# the settings that change a run's figures; --merge refuses runs that differ in any of them
SETTINGS = (
    "dataset",
    "losses",
    "lams",
    "grid",
    "tol",
    "max_iter",
    "method",
    "pair_cost",
    "time_repeats",
)
# options that only act on fitting, by attribute name: refused with --merge
FIT_ONLY = {
    "data": "--data",
    "quick": "--quick",
    "dataset": "--dataset",
    "losses": "--losses",
    "lams": "--lams",
    "folds": "--folds",
    "grid": "--grid",
    "tol": "--tol",
    "max_iter": "--max-iter",
    "method": "--method",
    "pair_cost": "--pair-cost",
    "time_repeats": "--time-repeats",
}
RUN_FILES = ("results.csv", "per_query.csv")
LAM_FILE = "per_query_lams.csv"  # absent from runs older than the selection-free comparison
# typed columns of results.csv and per_query.csv; an empty cell is a missing key
FLOAT_COLUMNS = {"value", "lam", "fit_seconds", "rel_gap", "coef_norm", *MEASURES}
INT_COLUMNS = {"qid", "iterations", "cccp_steps"}


def read_rows(path: Path) -> list[dict]:
    """Rows of a CSV written by :func:`write_report`, as the run held them: empty cells
    dropped, numbers and ``selected`` typed back (a float's text is its repr, so it reads back
    to the same float)."""

    def typed(key, text):
        if key in FLOAT_COLUMNS:
            return float(text)
        if key in INT_COLUMNS:
            return int(text)
        if key == "selected":
            return text == "True"
        return text

    with open(path, newline="") as fh:
        return [{k: typed(k, v) for k, v in row.items() if v != ""} for row in csv.DictReader(fh)]


def row_folds(rows) -> list[int]:
    """The folds of this package's rows (of results.csv or per_query.csv), in order of first
    appearance."""
    names = dict.fromkeys(
        r["fold"] for r in rows if r.get("source", "bmrm") == "bmrm" and r["fold"] != "pooled"
    )
    return [int(name.removeprefix("Fold")) for name in names]


def infer_settings(run_dir: Path, rows: list[dict]) -> dict:
    """The settings, folds, flips and wall seconds of a run written without ``run.json``.

    Read from the run's own files, and cross-checked between them: the methods, the lams
    (exact floats) and the parameter strings of every fit from ``results.csv``; the data set
    (title), solver method, tol (as printed, ``%g``: six significant digits), max_iter, pair
    cost, ``--grid`` options, refit count, flips and wall time (whole seconds) from the first
    lines of ``results.md``; the printed lam grid and number of combinations must agree with
    ``results.csv``, and every structured loss's parameter strings must be the grid's
    combinations in order. Raises ``ValueError`` naming what does not read back.
    """
    md_path = run_dir / "results.md"
    if not md_path.is_file():
        raise ValueError(f"{run_dir} has no results.md to read its settings from")
    text = md_path.read_text()
    lines = text.splitlines()
    titles = {title: name for name, title in TITLES.items()}
    if not lines or lines[0] not in titles:
        raise ValueError(f"{md_path}: its first line is not a title of experiments/letor.py")
    head = lines[2] if len(lines) > 2 else ""

    def find(pattern: str, what: str, where: str = head) -> re.Match:
        match = re.search(pattern, where)
        if match is None:
            raise ValueError(f"{md_path}: {what} not found")
        return match

    solver = find(r"Solver method (\S+)\. lam grid (.*?), chosen per fold", "solver method")
    tol = find(r"; tol (\S+) \(relative gap\), max_iter (\d+);", "tol and max_iter")
    cost = find(
        r"Preference pairs: all label-ordered pairs, cost (\S+)\. Wall time (\d+) s", "cost"
    )
    flips = find(r"\((\d+) sign flips, two-sided\)", "number of sign flips", text)
    refits = re.search(r"median of (\d+) refits per fold", text)
    tuned = re.search(r"tuned on validation \((\d+) combinations\): `([^`]*)`", head)

    fits = [r for r in rows if r.get("source") == "bmrm" and "lam" in r]
    losses_run = list(dict.fromkeys(r["method"] for r in fits))
    if not losses_run:
        raise ValueError(f"{run_dir / 'results.csv'} holds no fits")
    unknown = [m for m in losses_run if m not in METHODS]
    if unknown:
        raise ValueError(f"{run_dir / 'results.csv'}: unknown methods {unknown}")
    lams = list(dict.fromkeys(r["lam"] for r in fits if r["method"] == losses_run[0]))
    if ", ".join(f"{v:g}" for v in lams) != solver.group(2):
        raise ValueError(
            f"{run_dir}: the lams of results.csv ({lams}) are not the lam grid of results.md "
            f"({solver.group(2)})"
        )
    # the lams of every (method, fold, parameters), and the parameters in order, in one pass
    fitted: dict[tuple, list[float]] = {}
    params: dict[tuple, list[str]] = {}
    for r in fits:
        if r["split"] == "vali" and r["measure"] == MEASURES[0]:  # one row per fit
            fitted.setdefault((r["method"], r["fold"], r["params"]), []).append(r["lam"])
            strings = params.setdefault((r["method"], r["fold"]), [])
            if r["params"] not in strings:
                strings.append(r["params"])
    structured = [m for m in losses_run if METHODS[m][0] in STRUCTURED]
    if tuned:
        groups = [chunk.split() for chunk in tuned.group(2).split("--grid") if chunk.strip()]
    else:
        seen = {p for (m, _), strings in params.items() if m in structured for p in strings}
        groups = [sorted(seen)[0].split(",")] if seen and seen != {"default"} else None
    try:
        grid = parse_grid(groups)
    except ValueError as exc:
        raise ValueError(f"{md_path}: {exc}") from None
    if tuned and int(tuned.group(1)) != len(grid):
        raise ValueError(
            f"{md_path}: {tuned.group(1)} combinations, but its --grid gives {len(grid)}"
        )
    for (m, f), strings in params.items():
        expected = [grid_text(p) for p in loss_settings(m, grid)]
        if strings != expected:
            raise ValueError(
                f"{run_dir}: {m} in {f} was fitted with {strings}, not the grid {expected}"
            )
        for p in loss_settings(m, grid):
            got = fitted[m, f, grid_text(p)]
            if got != lams:
                raise ValueError(
                    f"{run_dir}: {m} {grid_text(p)} in {f} was fitted at lams {got}, not {lams}"
                )
    settings = {
        "dataset": titles[lines[0]],
        "losses": losses_run,
        "lams": lams,
        "grid": groups,
        "tol": float(tol.group(1)),
        "max_iter": int(tol.group(2)),
        "method": solver.group(1),
        "pair_cost": cost.group(1),
        "time_repeats": int(refits.group(1)) if refits else 0,
    }
    return {
        "settings": settings,
        "folds": row_folds(rows),
        "flips": int(flips.group(1)),
        "wall_seconds": float(cost.group(2)),
    }


def load_run(run_dir: Path, infer: bool) -> dict:
    """A finished run's record (``run.json``, or :func:`infer_settings` when ``infer``) with
    its rows; raises ``ValueError`` naming a missing or inconsistent file."""
    if not run_dir.is_dir():
        raise ValueError(f"{run_dir} is not a folder")
    missing = [name for name in RUN_FILES if not (run_dir / name).is_file()]
    if missing:
        raise ValueError(f"{run_dir} lacks {', '.join(missing)} (not a finished letor.py run)")
    rows = read_rows(run_dir / "results.csv")
    query_rows = read_rows(run_dir / "per_query.csv")
    if (run_dir / RUN_FILE).is_file():
        try:
            record = json.loads((run_dir / RUN_FILE).read_text())
            record = {
                "settings": {key: record["settings"][key] for key in SETTINGS},
                "folds": [int(f) for f in record["folds"]],
                "flips": int(record["flips"]),
                "wall_seconds": float(record["wall_seconds"]),
            }
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"{run_dir / RUN_FILE} does not read as a run record: {exc!r}"
            ) from None
    elif infer:
        record = infer_settings(run_dir, rows)
    else:
        raise ValueError(
            f"{run_dir} has no {RUN_FILE} (written before letor.py recorded its settings); "
            "pass --infer-settings to read them from its results.csv and results.md"
        )
    held_by = {"results.csv": row_folds(rows), "per_query.csv": row_folds(query_rows)}
    lam_rows = None
    if (run_dir / LAM_FILE).is_file():
        lam_rows = read_rows(run_dir / LAM_FILE)
        if lam_rows:  # a run whose losses all had several settings writes a header only
            held_by[LAM_FILE] = row_folds(lam_rows)
    for name, held in held_by.items():
        if held != record["folds"]:
            raise ValueError(
                f"{run_dir}: {name} holds folds {held}, its record says {record['folds']}"
            )
    return {
        "dir": run_dir,
        **record,
        "rows": rows,
        "query_rows": query_rows,
        "lam_rows": lam_rows,
    }


def merge_runs(runs: list[dict], flips: int | None) -> dict:
    """One run's record and rows from runs over disjoint folds: folds ascending, the rows of
    each fold as its run wrote them, wall seconds summed. Raises ``ValueError`` naming a fold
    held twice, a setting the runs differ in, differing official tables or flips."""
    owner: dict[int, Path] = {}
    for run in runs:
        for fold in run["folds"]:
            if fold in owner:
                raise ValueError(f"Fold{fold} is in two runs: {owner[fold]} and {run['dir']}")
            owner[fold] = run["dir"]
    first = runs[0]
    for run in runs[1:]:
        for key in SETTINGS:
            a, b = first["settings"][key], run["settings"][key]
            if key == "grid":
                a, b = ([grid_text(p) for p in parse_grid(g)] for g in (a, b))
            if a != b:
                raise ValueError(
                    f"the runs differ in {key}: {first['dir']} has {a!r}, {run['dir']} has {b!r}"
                )

        def official(r):
            return [row for row in r["rows"] if row["source"] == OFFICIAL_SOURCE]

        if official(run) != official(first):
            raise ValueError(
                f"the official baseline rows of {first['dir']} and {run['dir']} differ"
            )
    if flips is None:
        counts = {run["flips"] for run in runs}
        if len(counts) > 1:
            raise ValueError(
                f"the runs used different numbers of sign flips ({sorted(counts)}): give --flips N"
            )
        flips = counts.pop()
    folds = sorted(owner)
    by_dir = {run["dir"]: run for run in runs}

    def block(key, fold):
        return [r for r in by_dir[owner[fold]][key] if r.get("fold") == f"Fold{fold}"]

    rows = [r for r in first["rows"] if r["source"] == OFFICIAL_SOURCE]
    rows += [r for fold in folds for r in block("rows", fold) if r["source"] == "bmrm"]
    return {
        "settings": first["settings"],
        "folds": folds,
        "flips": flips,
        "wall_seconds": sum(run["wall_seconds"] for run in runs),
        "rows": rows,
        "query_rows": [r for fold in folds for r in block("query_rows", fold)],
        # the selection-free comparison only when every run has its per-query values
        "lam_rows": (
            [r for fold in folds for r in block("lam_rows", fold)]
            if all(run["lam_rows"] is not None for run in runs)
            else None
        ),
    }


# -------------------------------------------------------------------------------- the report


def every_lam_comparison(lam_rows, losses_run, lams, folds, n_flips):
    """The selection-free comparison of the losses fitted with one setting: each loss's test
    values at every lam of the grid (the same lam in every fold) against ``LAM_REFERENCE`` at
    the same lam, and once over the whole grid (each query's values averaged over the lams).

    ``lam_rows`` are the rows of ``per_query_lams.csv``. Returns ``None`` when the reference
    or a second loss lacks values at some lam and fold, else a dict keyed by (method, lam),
    with ``None`` for the whole grid, of dicts per measure: ``mean`` (over folds of the
    per-fold query means, as the headline figures), and for the other losses ``diff`` (mean
    minus the reference's) and ``p`` (:func:`randomization_test` over the pooled test
    queries). Raises ``ValueError`` when two losses' queries of a fold differ.
    """
    values: dict = {}
    for r in lam_rows:
        fold = values.setdefault((r["method"], r["lam"]), {}).setdefault(
            r["fold"], {"qid": [], **{m: [] for m in LAM_MEASURES}}
        )
        fold["qid"].append(r["qid"])
        for m in LAM_MEASURES:
            fold[m].append(r[m])
    names = [f"Fold{f}" for f in folds]
    compared = [
        m
        for m in losses_run
        if all(name in values.get((m, lam), {}) for lam in lams for name in names)
    ]
    if LAM_REFERENCE not in compared or len(compared) < 2:
        return None
    compared.remove(LAM_REFERENCE)
    compared.insert(0, LAM_REFERENCE)
    queries = {name: values[LAM_REFERENCE, lams[0]][name]["qid"] for name in names}
    for (m, lam), by_fold in values.items():
        for name in names:
            if m in compared and by_fold[name]["qid"] != queries[name]:
                raise ValueError(
                    f"{LAM_FILE}: {m} at lam {lam:g} has other {name} test queries than "
                    f"{LAM_REFERENCE} at lam {lams[0]:g}"
                )
    per_fold = {  # (method, lam or None) -> fold -> measure -> per-query values
        (m, lam): {
            name: {meas: np.array(values[m, lam][name][meas]) for meas in LAM_MEASURES}
            for name in names
        }
        for m in compared
        for lam in lams
    }
    for m in compared:
        per_fold[m, None] = {
            name: {
                meas: np.mean([per_fold[m, lam][name][meas] for lam in lams], axis=0)
                for meas in LAM_MEASURES
            }
            for name in names
        }
    out = {}
    for (m, lam), by_fold in per_fold.items():
        out[m, lam] = {}
        for meas in LAM_MEASURES:
            cell = {"mean": float(np.mean([by_fold[name][meas].mean() for name in names]))}
            if m != LAM_REFERENCE:
                ref = per_fold[LAM_REFERENCE, lam]
                cell["diff"] = cell["mean"] - out[LAM_REFERENCE, lam][meas]["mean"]
                cell["p"] = randomization_test(
                    np.concatenate([by_fold[name][meas] for name in names]),
                    np.concatenate([ref[name][meas] for name in names]),
                    n_flips,
                )
            out[m, lam][meas] = cell
    return out


def every_lam_lines(comparison, lams, n_flips, official_means) -> list[str]:
    """The Markdown section of :func:`every_lam_comparison`'s figures."""
    methods = list(dict.fromkeys(m for m, _ in comparison))
    others = methods[1:]
    lines = [
        "## Test at every lam (no selection)",
        "",
        "Every loss fitted with one setting, scored on the test folds at each lam of the "
        "grid, the same lam in every fold: no lam is chosen, so these figures do not depend "
        "on the validation set. Cells: the mean over folds, its difference from "
        f"{LAM_REFERENCE} at the same lam and p, a paired randomization test over the pooled "
        f"test queries ({n_flips} sign flips, two-sided). `all lams`: each query's value "
        "averaged over the grid's lams, tested the same way (one test of the whole grid). "
        f"`above {LAM_REFERENCE}`: the lams at which the mean is higher than "
        f"{LAM_REFERENCE}'s.",
        "",
    ]
    for meas in LAM_MEASURES:

        def cell(m, lam, meas=meas):
            c = comparison[m, lam][meas]
            if m == LAM_REFERENCE:
                return f"{c['mean']:.4f}"
            diff = f"{c['diff']:+.4f}".replace("-", "−")
            return f"{c['mean']:.4f} {diff} ({fmt_p(c['p'])})"

        table = [[f"{lam:g}", *(cell(m, lam) for m in methods)] for lam in lams]
        table.append(["all lams", *(cell(m, None) for m in methods)])
        table.append(
            [f"above {LAM_REFERENCE}", "—"]
            + [
                f"{sum(comparison[m, lam][meas]['diff'] > 0 for lam in lams)} of {len(lams)}"
                for m in others
            ]
        )
        lines += [f"{meas}:", "", markdown_table(["lam", *methods], table), ""]
        official = [f"{n} {v[meas]:.4f}" for n, v in official_means.items() if meas in v]
        if official:
            lines += [f"Official LETOR 4.0 means (chosen models): {', '.join(official)}.", ""]
    return lines


def every_lam_rows(comparison) -> list[dict]:
    """Rows of ``every_lam.csv``: one per method, lam (``scope`` "all lams" and no lam for
    the whole grid) and measure."""
    rows = []
    for (m, lam), cells in comparison.items():
        for meas, c in cells.items():
            row = {"method": m, "scope": "lam" if lam is not None else "all lams"}
            if lam is not None:
                row["lam"] = lam
            row |= {"measure": meas, "mean": c["mean"]}
            if "p" in c:
                row |= {f"diff_vs_{LAM_REFERENCE}": c["diff"], f"p_vs_{LAM_REFERENCE}": c["p"]}
            rows.append(row)
    return rows


def write_report(
    out: Path,
    settings: dict,
    folds,
    n_flips: int,
    rows: list[dict],
    query_rows: list[dict],
    wall_seconds: float,
    merged_from=(),
    data=None,
    lam_rows=None,
) -> None:
    """Randomization tests, ``results.csv``, ``per_query.csv``, ``results.md``, the plots and
    ``run.json`` of a run over ``folds``, from its rows alone.

    ``rows`` are the official tables' rows followed, fold by fold, by this package's rows
    (every fit of the grid with its measures and ``selected`` flag, the refits' medians, the
    best feature's column, the test measures of ``best feature`` and ``constant``, the
    training risk along the ordinal direction); ``query_rows`` the test measures of every
    method per query, fold by fold; ``lam_rows`` (``per_query_lams.csv``, ``None`` for
    merged runs older than it) the test values of the single-setting losses at every lam, for
    :func:`every_lam_comparison`. A fitting run and ``--merge`` both call this, so the merged
    report is the one a run over the union of the folds writes.
    """
    losses_run = list(settings["losses"])
    lams = list(settings["lams"])
    grid = parse_grid(settings["grid"])
    tuned = len(grid) > 1
    max_iter = settings["max_iter"]
    time_repeats = settings["time_repeats"]
    methods = [*losses_run, "best feature", "constant"]
    fold_of = {f"Fold{f}": f for f in folds}
    rows = list(rows)

    official: dict[str, dict[str, dict[str, float]]] = {}
    for r in rows:
        if r["source"] == OFFICIAL_SOURCE:
            official.setdefault(r["method"], {}).setdefault(r["fold"], {})[r["measure"]] = r[
                "value"
            ]
    official_names = tuple(official)

    per_fold = {m: {f: {} for f in folds} for m in methods}
    chosen = {loss: {} for loss in losses_run}  # fold -> a selected row of the fit
    vali = {loss: {lam: {} for lam in lams} for loss in losses_run}  # best over params
    grid_seconds = {loss: 0.0 for loss in losses_run}
    grid_fits = {loss: [] for loss in losses_run}  # (seconds, iterations) of every fit
    refit = {loss: {f: {} for f in folds} for loss in losses_run}
    along_at: dict[str, dict[str, float]] = {}
    for r in rows:
        if r["source"] != "bmrm" or r["fold"] not in fold_of:
            continue
        fold, m = fold_of[r["fold"]], r["method"]
        if "lam" in r:  # a fit of the grid: one row per split and measure
            if r["split"] == "vali" and r["measure"] == MEASURES[0]:
                grid_seconds[m] += r["fit_seconds"]
                grid_fits[m].append((r["fit_seconds"], r["iterations"]))
            if r["split"] == "vali" and r["measure"] == select_by(m):
                vali[m][r["lam"]][fold] = max(vali[m][r["lam"]].get(fold, -np.inf), r["value"])
            if r["selected"]:
                chosen[m][fold] = r
                if r["split"] == "test":
                    per_fold[m][fold][r["measure"]] = r["value"]
        elif r["measure"] in ("refit_seconds", "refit_iterations"):
            refit[m][fold][r["measure"]] = r["value"]
        elif r["measure"].startswith(ALONG):
            if fold == folds[0]:
                along_at.setdefault(m, {})[r["measure"].removeprefix(ALONG)] = r["value"]
        elif r["split"] == "test" and m in per_fold and m not in losses_run:
            per_fold[m][fold][r["measure"]] = r["value"]
    along = {m: [values[f"{rho:g}"] for rho in SCALES] for m, values in along_at.items()}
    chosen_lam = {m: {f: chosen[m][f]["lam"] for f in folds} for m in losses_run}
    chosen_params = {m: {f: chosen[m][f]["params"] for f in folds} for m in losses_run}
    chosen_info = {m: {f: {**chosen[m][f], **refit[m][f]} for f in folds} for m in losses_run}

    # the measures give one value per query in order of first appearance, fold by fold
    test_q = {m: {meas: [] for meas in MEASURES} for m in methods}
    for fold in folds:
        for r in query_rows:
            if r["fold"] == f"Fold{fold}":
                for meas in MEASURES:
                    test_q[r["method"]][meas].append(r[meas])
    pooled = {m: {meas: np.array(v) for meas, v in d.items()} for m, d in test_q.items()}
    means = {
        m: {meas: float(np.mean([per_fold[m][f][meas] for f in folds])) for meas in MEASURES}
        for m in methods
    }
    official_fold = {
        name: {f: table[f"Fold{f}"] for f in folds} for name, table in official.items()
    }
    official_means = {
        name: {
            meas: float(np.mean([official_fold[name][f][meas] for f in folds]))
            for meas in LETOR_MEASURES
        }
        for name in official_names
    }
    if official and len(folds) == 5:
        for name, table in official.items():
            for meas in LETOR_MEASURES:
                if abs(official_means[name][meas] - table["Avg"][meas]) > 1e-3:
                    progress(f"warning: {name} {meas}: fold mean differs from the Avg row")

    p_ref = {}
    for ref in REFERENCE:
        if ref not in pooled:
            continue
        for m in methods:
            if m != ref:
                for meas in TESTED:
                    p_ref[ref, m, meas] = randomization_test(
                        pooled[m][meas], pooled[ref][meas], n_flips
                    )
    p_pair = {}
    for i, a in enumerate(losses_run):
        for b in losses_run[i + 1 :]:
            for meas in TESTED:
                p_pair[a, b, meas] = randomization_test(pooled[a][meas], pooled[b][meas], n_flips)
    # one row per (method, other method, measure): a reference pair tested twice is one row
    p_rows = {(m, ref, meas): p for (ref, m, meas), p in p_ref.items()}
    p_rows.update(p_pair)
    for (m, other, meas), p in p_rows.items():
        rows.append(
            {
                "method": m,
                "source": "bmrm",
                "fold": "pooled",
                "split": "test",
                "measure": f"p_vs_{other.replace(' ', '_')}:{meas}",
                "value": p,
            }
        )

    comparison = (
        every_lam_comparison(lam_rows, losses_run, lams, folds, n_flips)
        if lam_rows is not None
        else None
    )

    dataset, tol, pair_cost = settings["dataset"], settings["tol"], settings["pair_cost"]
    settings_grid, settings_method = settings["grid"], settings["method"]
    merged_text = (
        ", summed over the runs merged by `--merge` "
        f"({', '.join(Path(p).name for p in merged_from)})"
        if merged_from
        else ""
    )
    # ------------------------------------------------------------------ Markdown
    n_queries = pooled[methods[0]]["MAP"].size
    fold_text = ", ".join(f"Fold{f}" for f in folds)
    lines = [
        TITLES[dataset],
        "",
        f"Folds {fold_text}; {n_queries} pooled test queries. "
        + (
            f"Structured-loss parameters tuned on validation ({len(grid)} combinations): "
            f"`{grid_option_text(settings_grid)}`. "
            if tuned
            else ""
        )
        + f"Solver method {settings_method}. lam grid "
        f"{', '.join(f'{v:g}' for v in lams)}, chosen per fold by validation {SELECT_BY} "
        f"({SELECT_NERU} for the NERU losses); "
        f"tol {tol:g} (relative gap), max_iter {max_iter}; "
        + (
            "features scaled to [0, 1] per query. "
            if dataset == "trec-news-2018"
            else "raw features. "
        )
        + "Measures with the "
        "LETOR tool's conventions; values are means over test folds of per-fold query means. "
        f"Preference pairs: all label-ordered pairs, cost {pair_cost}. Wall time "
        f"{wall_seconds:.0f} s (shared 2-core machine){merged_text}.",
        "",
        "## Test results",
        "",
        "p: paired randomization test over the pooled test queries "
        f"({n_flips} sign flips, two-sided) for NDCG@1 / NDCG@5 / NDCG@10 / MAP / NERU@10. "
        "LETOR rows are the official tables (no per-query values, so no test). "
        "Fit s: seconds of the chosen fit, mean over folds.",
        "",
    ]
    header = ["method", *HEADLINE]
    refs = [r for r in REFERENCE if r in pooled]
    header += [f"p vs {r}" for r in refs]
    header += ["lam per fold", *(["params per fold"] if tuned else []), "fit s"]
    table_rows = []
    for m in methods:
        row = [m, *(means[m][meas] for meas in HEADLINE)]
        for r in refs:
            row.append("—" if m == r else " / ".join(fmt_p(p_ref[r, m, meas]) for meas in TESTED))
        if m in losses_run:
            row.append(", ".join(f"{chosen_lam[m][f]:g}" for f in folds))
            if tuned:
                row.append("; ".join(chosen_params[m][f] for f in folds))
            row.append(f"{np.mean([chosen_info[m][f]['fit_seconds'] for f in folds]):.2f}")
        else:
            row += ["—"] * (3 if tuned else 2)
        table_rows.append(row)
    for name in official_names:
        table_rows.append(
            [f"{name} (LETOR)", *(official_means[name].get(meas, "—") for meas in HEADLINE)]
            + ["—"] * len(refs)
            + ["—"] * (3 if tuned else 2)
        )
    lines += [markdown_table(header, table_rows), ""]

    lines += ["## Per fold (test)", ""]
    for measure in ("NDCG@10", "MAP"):
        fold_rows = []
        for m in methods:
            fold_rows.append([m, *(per_fold[m][f][measure] for f in folds), means[m][measure]])
        for name in official_names:
            fold_rows.append(
                [
                    f"{name} (LETOR)",
                    *(official_fold[name][f][measure] for f in folds),
                    official_means[name][measure],
                ]
            )
        lines += [
            f"{measure}:",
            "",
            markdown_table(["method", *(f"Fold{f}" for f in folds), "mean"], fold_rows),
            "",
        ]

    if comparison is not None:
        lines += every_lam_lines(comparison, lams, n_flips, official_means)

    lines += ["## NDCG@1..10 (test, mean over folds)", ""]
    nd_rows = [[m, *(means[m][f"NDCG@{k}"] for k in KS)] for m in methods]
    nd_rows += [
        [f"{n} (LETOR)", *(official_means[n][f"NDCG@{k}"] for k in KS)] for n in official_names
    ]
    lines += [markdown_table(["method", *(f"@{k}" for k in KS)], nd_rows), ""]

    lines += [
        "## Training time (seconds, chosen lam; bundle iterations in brackets, with the "
        "concave-convex steps of the latent losses; their iterations include the starting "
        "pairwise fit)",
        "",
    ]
    t_rows = []
    for loss in losses_run:
        t_rows.append(
            [loss]
            + [
                f"{chosen_info[loss][f]['fit_seconds']:.2f} ({chosen_info[loss][f]['iterations']}"
                + (
                    f", {chosen_info[loss][f]['cccp_steps']} steps)"
                    if chosen_info[loss][f]["cccp_steps"]
                    else ")"
                )
                for f in folds
            ]
            + [f"{grid_seconds[loss]:.1f}"]
            + [
                f"{np.median([s for s, _ in grid_fits[loss]]):.2f} "
                f"({np.median([i for _, i in grid_fits[loss]]):.0f})"
            ]
        )
    lines += [
        markdown_table(
            [
                "loss",
                *(f"Fold{f}" for f in folds),
                "whole grid, all folds",
                "median fit of the grid",
            ],
            t_rows,
        ),
        "",
        "The official tables publish no training times.",
        "",
    ]
    if time_repeats:
        lines += [
            f"Seconds per fit at the chosen setting, median of {time_repeats} refits per "
            "fold (losses interleaved; compilation excluded by the warm-up), with the median "
            "bundle iterations in brackets:",
            "",
            markdown_table(
                ["loss", *(f"Fold{f}" for f in folds), "mean"],
                [
                    [loss]
                    + [
                        f"{chosen_info[loss][f]['refit_seconds']:.3f} "
                        f"({chosen_info[loss][f]['refit_iterations']:.0f})"
                        for f in folds
                    ]
                    + [f"{np.mean([chosen_info[loss][f]['refit_seconds'] for f in folds]):.3f}"]
                    for loss in losses_run
                ],
            ),
            "",
        ]

    if p_pair:
        lines += [
            "## Pairwise randomization tests among the losses",
            "",
            "p for NDCG@1 / NDCG@5 / NDCG@10 / MAP / NERU@10; the sign is that of "
            "mean(row − column) "
            "on NDCG@10.",
            "",
        ]
        pair_rows = []
        for a in losses_run:
            row = [a]
            for b in losses_run:
                if a == b:
                    row.append("—")
                    continue
                key = (a, b) if (a, b, "MAP") in p_pair else (b, a)
                diff = pooled[a]["NDCG@10"].mean() - pooled[b]["NDCG@10"].mean()
                sign = "+" if diff > 0 else ("−" if diff < 0 else "=")
                row.append(sign + " " + " / ".join(fmt_p(p_pair[(*key, meas)]) for meas in TESTED))
            pair_rows.append(row)
        lines += [markdown_table(["", *losses_run], pair_rows), ""]

    zero = [
        loss
        for loss in losses_run
        if all(
            r["coef_norm"] == 0.0
            for r in rows
            if r.get("method") == loss and r.get("source") == "bmrm" and "coef_norm" in r
        )
    ]
    if zero:
        lines += [
            "## Note",
            "",
            f"{', '.join(zero)}: w = 0 at every lam and fold (the bundle method certifies it "
            "optimal to the tolerance), so these models rank every query in file order and "
            "equal the `constant` row.",
            "",
        ]
        if along:
            lines += [
                f"Their training risk R(ρ·w_o) along the direction w_o of the chosen ordinal "
                f"model (Fold{folds[0]}) grows with ρ, so no scaled good ranker beats w = 0. "
                "The loss compares the ranking with the ideal ordering that puts documents of "
                'equal label in increasing score order (`ties="increasing"` of '
                "`losses.listwise`, the convex rule), so any spread of scores among equally "
                "labelled documents adds to it; most MQ2008 documents of a query share label 0.",
                "",
                markdown_table(
                    ["loss", *(f"ρ = {rho:g}" for rho in SCALES)],
                    [[loss, *values] for loss, values in along.items()],
                ),
                "",
            ]
    # every figure is computed: write
    make_out(out)
    write_csv(out / "results.csv", rows)
    write_csv(out / "per_query.csv", query_rows)
    if lam_rows is not None:
        write_csv(out / LAM_FILE, lam_rows)
    if comparison is not None:
        write_csv(out / "every_lam.csv", every_lam_rows(comparison))
    write_text(out / "results.md", "\n".join(lines))

    plot_ndcg_at_k(out / "ndcg_at_k.png", means, official_means)
    plot_validation(
        out / "validation_lam.png",
        {m: {lam: [vali[m][lam][f] for f in folds] for lam in lams} for m in losses_run},
        losses_run,
        lams,
    )
    combined = {**per_fold, **{f"{n} (LETOR)": official_fold[n] for n in official_names}}
    plot_folds(out / "folds.png", combined, folds)
    record = {
        "settings": {key: settings[key] for key in SETTINGS},
        "folds": list(folds),
        "flips": n_flips,
        "wall_seconds": wall_seconds,
        "bmrm_version": bmrm.__version__,
    }
    if data is not None:
        record["data"] = str(data)
    if merged_from:
        record["merged_from"] = [str(path) for path in merged_from]
    write_text(out / RUN_FILE, json.dumps(record, indent=1) + "\n")
    if not merged_from:
        tidy = []
        for m in methods:
            for f in folds:
                row = {
                    "experiment": "letor",
                    "dataset": settings["dataset"],
                    "method": m,
                    "setting": f"fold{f}",
                    "repetition": 0,
                    "source": "bmrm",
                    **{snake(meas): per_fold[m][f].get(meas) for meas in TESTED},
                }
                if m in losses_run:
                    row["lam"] = chosen_lam[m][f]
                    row["params"] = chosen_params[m][f]
                    row["refit_wall_s"] = chosen_info[m][f].get("refit_seconds")
                tidy.append(row)
        for name in official_names:
            for f in folds:
                tidy.append(
                    {
                        "experiment": "letor",
                        "dataset": settings["dataset"],
                        "method": name,
                        "setting": f"fold{f}",
                        "repetition": 0,
                        "source": "LETOR 4.0 official",
                        **{snake(meas): official_fold[name][f].get(meas) for meas in TESTED},
                    }
                )
        write_results("letor", tidy, settings.get("results") or out)
    progress(f"done in {wall_seconds:.0f} s; wrote {out}")
    print("\n".join(lines))


def snake(measure: str) -> str:
    """A measure's tidy column name: ``NDCG@10`` -> ``ndcg_at_10``."""
    return measure.lower().replace("@", "_at_")


# ---------------------------------------------------------------------------------- main

UNSET = object()  # an option not given on the command line


# the solver methods of bmrm.fit
SOLVERS = ("auto", *sorted(SOLVER_METHODS), *sorted(NONCONVEX_METHODS), "lbfgs")


@script
def main(argv=None) -> int:
    parser = base_parser("letor", __doc__.splitlines()[0])
    parser.add_argument("--losses", nargs="+", default=None, choices=LOSSES)
    parser.add_argument("--lams", nargs="+", type=lam_value, default=None)
    parser.add_argument("--folds", nargs="+", type=fold_number, default=None)
    parser.add_argument("--tol", type=tolerance, default=1e-3)
    parser.add_argument("--max-iter", type=positive_int, default=None)
    parser.add_argument(
        "--flips", type=positive_int, default=None, help="randomization-test flips"
    )
    parser.add_argument(
        "--pair-cost",
        default="gain_difference",
        choices=("zero_one", "linear", "gain_difference"),
        help="cost of the preference loss's pairs",
    )
    parser.add_argument("--dataset", default="mq2008", choices=DATASETS)
    parser.add_argument(
        "--grid",
        nargs="+",
        action="append",
        default=None,
        metavar="KEY=V1,V2",
        help="parameters of the structured losses tuned with lam on validation (repeat "
        "--grid for a union of grids)",
    )
    parser.add_argument(
        "--method", default=None, choices=SOLVERS, help="solver method of bmrm.fit (auto)"
    )
    parser.add_argument(
        "--time-repeats",
        type=nonneg_int,
        default=0,
        metavar="N",
        help="refit each loss's chosen setting N times per fold (losses interleaved) and "
        "report the median seconds",
    )
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        default=None,
        metavar="RUN_DIR",
        help="write the report of one run over the union of the folds of these finished runs "
        "(disjoint folds, same settings) into --out; no fitting",
    )
    parser.add_argument(
        "--infer-settings",
        action="store_true",
        help="with --merge: read the settings of a run without run.json from its results.csv "
        "and results.md",
    )
    # options not given stay UNSET, so that --merge can refuse the fitting ones
    unset = argparse.Namespace(**{dest: UNSET for dest in FIT_ONLY if dest != "grid"}, out=UNSET)
    args = parser.parse_args(argv, unset)
    if args.merge is not None:
        return merge_main(parser, args)
    if args.infer_settings:
        parser.error("--infer-settings only applies with --merge")
    for dest in [*FIT_ONLY, "out"]:
        if getattr(args, dest) is UNSET:
            setattr(args, dest, parser.get_default(dest))
    try:
        grid = parse_grid(args.grid)
    except ValueError as exc:
        parser.error(str(exc))
    quick = args.quick
    mq2008 = args.dataset == "mq2008"
    losses_run = given(args.losses, ("ordinal", "squared") if quick else LOSSES)
    try:
        check_grid(grid, losses_run)
    except ValueError as exc:
        parser.error(str(exc))
    if args.method in ("nrbm", "lbfgs") and any(p.get("regularizer") == "l1" for p in grid):
        parser.error(f"--method {args.method} fits the L2 regularizer only; --grid asks for l1")
    check_distinct(parser, "--losses", losses_run)
    check_distinct(parser, "--lams", args.lams)
    lams = tuple(given(args.lams, (1e-2, 1e-1) if quick else LAMS))
    five_folds = args.dataset in ("mq2008", "trec-news-2018")
    folds = tuple(given(args.folds, (1,) if quick or not five_folds else (1, 2, 3, 4, 5)))
    if not five_folds and folds != (1,):
        parser.error(f"--dataset {args.dataset} has one split: --folds 1; got {list(folds)}")
    check_distinct(parser, "--folds", folds)
    max_iter = given(args.max_iter, 30 if quick else 2000)
    n_flips = given(args.flips, 1000 if quick else 10_000)
    settings = {
        "dataset": args.dataset,
        "losses": list(losses_run),
        "lams": list(lams),
        "grid": args.grid,
        "tol": args.tol,
        "max_iter": max_iter,
        "method": given(args.method, "auto"),
        "pair_cost": args.pair_cost,
        "time_repeats": args.time_repeats,
        "results": args.results,
    }
    official = {}
    if mq2008:
        root = mq2008_root(args.data)
        baseline_dir = require(args.data / "letor4_baselines", "LETOR 4.0 baseline tables")
        for name in OFFICIAL:
            path = require(baseline_dir / f"{name}.MQ2008.txt", name)
            with data_errors(path):
                official[name] = parse_baseline(path)

        def load(fold):
            return load_letor(root, fold)
    elif args.dataset == "trec-news-2018":
        folder = require(args.data / "trec_news_2018", "TREC News 2018")
        with data_errors():
            trec = trec_news_folds(folder)

        def load(fold):
            return trec[fold]
    else:
        folder = require(args.data / "lightgbm_rank", "LightGBM example")
        with data_errors():
            example = lightgbm_example(folder)

        def load(fold):
            return example

    rows: list[dict] = []
    for name, table in official.items():
        for fold_name, values in table.items():
            for measure, value in values.items():
                rows.append(
                    {
                        "method": name,
                        "source": OFFICIAL_SOURCE,
                        "fold": fold_name,
                        "split": "test",
                        "measure": measure,
                        "value": value,
                    }
                )

    progress(f"warm-up (numba compile) for {', '.join(losses_run)}")
    warm_up(losses_run, load(folds[0])["train"], args.pair_cost)

    methods = [*losses_run, "best feature", "constant"]
    query_rows: list[dict] = []
    lam_rows: list[dict] = []  # test values at every lam of the single-setting losses
    started = time.perf_counter()

    for fold in folds:
        splits = load(fold)
        X, y, qid = splits["train"]
        Xv, yv, qv = splits["vali"]
        Xt, yt, qt = splits["test"]
        progress(
            f"fold {fold}: {X.shape[0]} train rows / {np.unique(qid).size} queries, "
            f"{np.unique(qt).size} test queries"
        )
        pairs = pairs_from_labels(y, qid, cost=args.pair_cost) if "preference" in methods else None
        scores_test = {}
        chosen_model = {}
        chosen_setting = {}
        for loss in losses_run:
            best = None
            fit_rows = []
            settings_loss = loss_settings(loss, grid)
            for params, lam in ((p, lam) for p in settings_loss for lam in lams):
                model, info = fit_loss(
                    loss, X, y, qid, lam, args.tol, max_iter, pairs, params, args.method
                )
                mv = query_measures(yv, model.decision_function(Xv), qv)
                mt = query_measures(yt, model.decision_function(Xt), qt)
                if len(settings_loss) == 1:
                    lam_rows += lam_query_rows(loss, fold, lam, qt, mt)
                for split, values in (("vali", mv), ("test", mt)):
                    for measure in MEASURES:
                        fit_rows.append(
                            {
                                "method": loss,
                                "source": "bmrm",
                                "fold": f"Fold{fold}",
                                "lam": lam,
                                "params": grid_text(params),
                                "split": split,
                                "measure": measure,
                                "value": float(values[measure].mean()),
                                **info,
                            }
                        )
                score = float(mv[select_by(loss)].mean())
                # ties go to the larger lam (the simpler model): lams are visited ascending
                if best is None or score >= best[0]:
                    best = (score, lam, mt, model, params)
                progress(
                    f"  {loss:<10} {grid_text(params)} lam={lam:<7g} {info['iterations']:4d} it "
                    f"{info['fit_seconds']:6.2f} s  ‖w‖={info['coef_norm']:.3g}  "
                    f"vali {select_by(loss)}={score:.4f}  test MAP={mt['MAP'].mean():.4f}"
                )
            _, lam, mt, model, params = best
            chosen_setting[loss] = (lam, params)
            chosen_model[loss] = model
            scores_test[loss] = mt
            for row in fit_rows:
                row["selected"] = row["lam"] == lam and row["params"] == grid_text(params)
            rows += fit_rows

        # timing: the chosen settings refitted, losses interleaved so that load changes on a
        # shared machine reach them alike
        refits = {loss: [] for loss in losses_run}
        for _ in range(args.time_repeats):
            for loss in losses_run:
                lam, params = chosen_setting[loss]
                refits[loss].append(
                    fit_loss(loss, X, y, qid, lam, args.tol, max_iter, pairs, params, args.method)[
                        1
                    ]
                )
        for loss, infos in refits.items():
            if not infos:
                continue
            median = {
                "refit_seconds": float(np.median([i["fit_seconds"] for i in infos])),
                "refit_iterations": float(np.median([i["iterations"] for i in infos])),
            }
            for measure, value in median.items():
                rows.append(
                    {
                        "method": loss,
                        "source": "bmrm",
                        "fold": f"Fold{fold}",
                        "split": "train",
                        "measure": measure,
                        "value": value,
                    }
                )

        if fold == folds[0] and "ordinal" in chosen_model:
            # the structured losses along the ordinal model's direction, on training data
            f = X @ chosen_model["ordinal"].coef_
            for method in ("ndcg-increasing", "neru-increasing"):
                if method in losses_run:
                    loss = losses.get(METHODS[method][0], **METHODS[method][1])
                    for rho in SCALES:
                        rows.append(
                            {
                                "method": method,
                                "source": "bmrm",
                                "fold": f"Fold{fold}",
                                "split": "train",
                                "measure": f"{ALONG}{rho:g}",
                                "value": float(losses.risk(loss, rho * f, y, qid)[0]),
                            }
                        )

        j, sign = best_feature(X, y, qid)
        scores_test["best feature"] = query_measures(yt, sign * Xt[:, j], qt)
        progress(f"  best feature: {'−' if sign < 0 else ''}x{j + 1}")
        rows.append(
            {
                "method": "best feature",
                "source": "bmrm",
                "fold": f"Fold{fold}",
                "split": "train",
                "measure": "feature",
                "value": float(sign * (j + 1)),
            }
        )
        scores_test["constant"] = query_measures(yt, np.zeros(Xt.shape[0]), qt)

        for method, mt in scores_test.items():
            for measure in MEASURES:
                if method not in losses_run:
                    rows.append(
                        {
                            "method": method,
                            "source": "bmrm",
                            "fold": f"Fold{fold}",
                            "split": "test",
                            "measure": measure,
                            "value": float(mt[measure].mean()),
                        }
                    )
            query_rows += per_query_rows(method, fold, qt, mt)

    total_seconds = time.perf_counter() - started
    write_report(
        args.out,
        settings,
        folds,
        n_flips,
        rows,
        query_rows,
        total_seconds,
        data=args.data,
        lam_rows=lam_rows,
    )
    return 0


def merge_main(parser, args) -> int:
    """``--merge``: every check before anything is written, then :func:`write_report`."""
    fitting = [FIT_ONLY[d] for d in FIT_ONLY if getattr(args, d) not in (UNSET, None)]
    if fitting:
        parser.error(f"--merge takes finished runs; {', '.join(fitting)} only apply to fitting")
    if args.out is UNSET:
        parser.error("--merge needs --out OUT_DIR")
    out = args.out.resolve()
    for run_dir in args.merge:
        if run_dir.resolve() == out:
            parser.error(f"--out {args.out} is one of the runs given to --merge")
    try:
        runs = [load_run(run_dir, args.infer_settings) for run_dir in args.merge]
        merged = merge_runs(runs, args.flips)
    except ValueError as exc:
        parser.error(f"--merge: {exc}")
    progress(f"merging {', '.join(str(r['dir']) for r in runs)} into {args.out}")
    try:  # the report checks the per-query values of every lam before it writes anything
        write_report(
            args.out,
            merged["settings"],
            merged["folds"],
            merged["flips"],
            merged["rows"],
            merged["query_rows"],
            merged["wall_seconds"],
            merged_from=[r["dir"] for r in runs],
            lam_rows=merged["lam_rows"],
        )
    except ValueError as exc:
        parser.error(f"--merge: {exc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

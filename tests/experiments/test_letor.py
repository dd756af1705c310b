"""End-to-end run of ``experiments/letor.py --quick`` on the shared MQ2008 data."""

import csv
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.experiments._quick import REPO, real_data, run_quick

sys.path.insert(0, str(REPO / "experiments"))
import letor  # noqa: E402

MEASURES = [f"NDCG@{k}" for k in range(1, 11)] + ["MAP"]


def letor_query_measures(text: str, scores=None) -> dict[str, dict[str, float]]:
    """LETOR 4.0 tool measures per query of the ranking by ``scores`` (file order when
    None), written from the tool's definition.

    Documents sorted by decreasing score, ties in file order (the tool's stable sort);
    gain 2^r − 1; positions 1 and 2 undiscounted, position i >= 3 divided by log2(i);
    NDCG@k of a query with fewer than k documents or no relevant document is 0; AP counts
    label >= 1 as relevant and is 0 without relevant documents.
    """
    lines = text.splitlines()
    scores = [0.0] * len(lines) if scores is None else list(scores)
    queries: dict[str, list[tuple[float, int]]] = {}
    for line, score in zip(lines, scores, strict=True):
        label, qid = line.split()[:2]
        queries.setdefault(qid.removeprefix("qid:"), []).append((score, int(label)))

    def dcg(labels, k):
        return sum(
            (2**r - 1) / (1.0 if i <= 2 else math.log2(i)) for i, r in enumerate(labels[:k], 1)
        )

    out = {}
    for qid, docs in queries.items():
        labels = [r for _, r in sorted(docs, key=lambda d: -d[0])]  # stable
        values = {}
        for k in range(1, 11):
            ideal = dcg(sorted(labels, reverse=True), k)
            ok = len(labels) >= k and ideal > 0
            values[f"NDCG@{k}"] = dcg(labels, k) / ideal if ok else 0.0
        hits, ap = 0, 0.0
        for i, r in enumerate(labels, 1):
            if r >= 1:
                hits += 1
                ap += hits / i
        values["MAP"] = ap / hits if hits else 0.0
        out[qid] = values
    return out


def letor_file_order(text: str) -> dict[str, float]:
    """Mean over queries of :func:`letor_query_measures` in file order."""
    per_query = letor_query_measures(text)
    return {m: sum(v[m] for v in per_query.values()) / len(per_query) for m in MEASURES}


@pytest.fixture(scope="module")
def letor_run(tmp_path_factory):
    data = real_data()
    out = tmp_path_factory.mktemp("letor")
    rows = run_quick("letor", out, data, extra=("--time-repeats", "2"))
    return out, data, rows


def test_files_written(letor_run, shared_data):
    out, _, _ = letor_run
    for name in ("results.csv", "per_query.csv", "results.md"):
        assert (out / name).stat().st_size > 0
    for name in ("ndcg_at_k.png", "validation_lam.png", "folds.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "results.md").read_text()
    for method in ("ordinal", "squared", "best feature", "RankSVM-Struct (LETOR)", "AdaRank-NDCG"):
        assert method in md


def test_fits_measured_and_one_lam_selected(letor_run, shared_data):
    _, _, rows = letor_run
    fits = [r for r in rows if r["source"] == "bmrm" and r["lam"]]
    assert {r["method"] for r in fits} == {"ordinal", "squared"}
    assert {float(r["lam"]) for r in fits} == {1e-2, 1e-1}
    for r in fits:
        assert r["measure"] in [*MEASURES, "NERU@10"]
        assert 0.0 <= float(r["value"]) <= 1.0
        assert int(r["iterations"]) >= 1
        assert float(r["rel_gap"]) >= -1e-9
    for method in ("ordinal", "squared"):
        chosen = {r["lam"] for r in fits if r["method"] == method and r["selected"] == "True"}
        assert len(chosen) == 1
        # the chosen lam has the best validation NDCG@10 (ties: the larger lam)
        vali = {
            float(r["lam"]): float(r["value"])
            for r in fits
            if r["method"] == method and r["split"] == "vali" and r["measure"] == "NDCG@10"
        }
        best = max(vali.values())
        assert float(chosen.pop()) == max(lam for lam, v in vali.items() if v == best)


def test_chosen_settings_refitted_for_timing(letor_run, shared_data):
    """--time-repeats refits each chosen setting: the refits take the chosen fit's iterations
    (the solver is deterministic), and the Markdown table shows their median seconds."""
    out, _, rows = letor_run
    md = (out / "results.md").read_text()
    assert "median of 2 refits" in md
    for method in ("ordinal", "squared"):
        (chosen,) = {
            int(r["iterations"]) for r in rows if r["method"] == method and r["selected"] == "True"
        }
        refit = {
            r["measure"]: float(r["value"])
            for r in rows
            if r["method"] == method and r["measure"].startswith("refit_")
        }
        assert refit["refit_iterations"] == chosen
        assert refit["refit_seconds"] > 0
        section = md.split("median of 2 refits")[1].split("\n\n")[1]
        (line,) = [ln for ln in section.splitlines() if ln.startswith(f"| {method} |")]
        assert f"| {refit['refit_seconds']:.3f} ({chosen}) |" in line


def test_learned_rankers_beat_file_order(letor_run, shared_data):
    _, _, rows = letor_run
    test = {
        (r["method"], r["measure"]): float(r["value"])
        for r in rows
        if r["split"] == "test" and r["fold"] == "Fold1" and r.get("selected", "") != "False"
    }
    for method in ("ordinal", "squared", "best feature"):
        assert test[method, "MAP"] > test["constant", "MAP"] + 0.05


def test_file_order_matches_letor_definition(letor_run, shared_data):
    _, data, rows = letor_run
    expected = letor_file_order((data / "mq2008" / "S5.txt").read_text())  # fold 1's test set
    got = {
        r["measure"]: float(r["value"])
        for r in rows
        if r["method"] == "constant" and r["fold"] == "Fold1" and r["split"] == "test"
    }
    for measure in MEASURES:
        assert got[measure] == pytest.approx(expected[measure], abs=1e-12)


def test_ties_are_scored_as_the_letor_tool_does(letor_run, shared_data):
    """The best single feature of Fold1 ranks the test queries with many tied scores;
    every per-query NDCG@1..10 and AP equals the tool's definition (ties in file order)."""
    out, data, rows = letor_run
    (feature,) = [
        float(r["value"])
        for r in rows
        if r["method"] == "best feature" and r["fold"] == "Fold1" and r["measure"] == "feature"
    ]
    column, sign = int(abs(feature)) - 1, math.copysign(1.0, feature)
    text = (data / "mq2008" / "S5.txt").read_text()  # fold 1's test set
    scores = [sign * float(line.split()[column + 2].split(":")[1]) for line in text.splitlines()]
    assert all(line.split()[column + 2].startswith(f"{column + 1}:") for line in text.splitlines())
    expected = letor_query_measures(text, scores)
    by_query: dict[str, list[tuple[float, int]]] = {}
    for line, score in zip(text.splitlines(), scores, strict=True):
        by_query.setdefault(line.split()[1], []).append((score, int(line.split()[0])))
    # ties between documents of different labels exist, so their order matters here
    assert any(
        len({r for s, r in docs if s == score}) > 1
        for docs in by_query.values()
        for score, _ in docs
    )
    with open(out / "per_query.csv", newline="") as fh:
        got = [r for r in csv.DictReader(fh) if r["method"] == "best feature"]
    assert {r["qid"] for r in got} == set(expected)
    for r in got:
        for measure in MEASURES:
            assert float(r[measure]) == pytest.approx(expected[r["qid"]][measure], abs=1e-12)


def test_official_tables_parsed(letor_run, shared_data):
    _, _, rows = letor_run
    official = {
        (r["method"], r["fold"], r["measure"]): float(r["value"])
        for r in rows
        if r["source"] == "LETOR 4.0 table"
    }
    # the reference figures of the data README and two cells read off the tables
    assert official["RankSVM-Struct", "Avg", "MAP"] == pytest.approx(0.46956)
    assert official["RankSVM-Struct", "Avg", "NDCG@10"] == pytest.approx(0.22792)
    assert official["RankSVM-Struct", "Fold4", "NDCG@1"] == pytest.approx(0.4161)
    assert official["RankBoost", "Fold2", "MAP"] == pytest.approx(0.4380)
    for name in ("RankSVM-Struct", "RankBoost", "AdaRank-MAP", "AdaRank-NDCG"):
        for measure in MEASURES:
            folds = [official[name, f"Fold{f}", measure] for f in range(1, 6)]
            assert sum(folds) / 5 == pytest.approx(official[name, "Avg", measure], abs=1e-3)


def monte_carlo_p(d: np.ndarray, seed: int) -> float:
    """Two-sided sign-flip p of mean(d) = 0 by 20,000 flips drawn here."""
    flips = np.random.default_rng(seed).choice([-1.0, 1.0], size=(20_000, d.size))
    return float(np.mean(np.abs(flips @ d) >= abs(d.sum()) - 1e-12))


def test_p_values(letor_run, shared_data):
    out, _, rows = letor_run
    p = {(r["method"], r["measure"]): float(r["value"]) for r in rows if r["fold"] == "pooled"}
    assert p and all(0.0 < v <= 1.0 for v in p.values())
    # file order is far worse than a learned ranker: the smallest p 1000 flips can give
    assert p["constant", "p_vs_squared:MAP"] == pytest.approx(1 / 1001)
    # ordinal against squared, by an independent Monte Carlo of the sign-flip distribution
    with open(out / "per_query.csv", newline="") as fh:
        per_query = list(csv.DictReader(fh))
    for measure in ("NDCG@1", "NDCG@10", "MAP"):
        a = np.array([float(r[measure]) for r in per_query if r["method"] == "ordinal"])
        b = np.array([float(r[measure]) for r in per_query if r["method"] == "squared"])
        # 1000 flips in the script: Monte Carlo standard error <= 0.016
        reference = monte_carlo_p(a - b, 12345)
        assert p["ordinal", f"p_vs_squared:{measure}"] == pytest.approx(reference, abs=0.07)


def lightgbm_file_order(data: Path) -> dict[str, float]:
    """LETOR-tool NDCG@10 and AP of ``rank.test`` in file order, its groups from the
    ``.query`` file (one group size per line)."""
    labels = [int(line.split()[0]) for line in (data / "rank.test").read_text().splitlines()]
    sizes = [int(v) for v in (data / "rank.test.query").read_text().split()]
    assert sum(sizes) == len(labels)
    lines, start = [], 0
    for q, m in enumerate(sizes):
        lines += [f"{r} qid:{q}" for r in labels[start : start + m]]
        start += m
    return letor_file_order("\n".join(lines))


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory):
    data = real_data()
    out = tmp_path_factory.mktemp("letor_grid")
    extra = ("--dataset", "lightgbm-example", "--losses", "ordinal", "ndcg-pairs")
    # a union of three grids; the second repeats a combination of the first
    extra += ("--grid", "k=3,10", "--grid", "k=10", "--grid", "ties=latent", "k=5")
    extra += ("--lams", "0.01", "0.1", "--flips", "200")
    return out, data, run_quick("letor", out, data, timeout=600, extra=extra)


UNION = ("k=3", "k=10", "ties=latent,k=5")


def test_grid_tunes_parameters_with_lam(grid_run, shared_data):
    """Every (parameters, lam) pair of the union of grids is fitted once; one is selected
    per fold, the one with the best validation NDCG@10 (ties: the later pair); the pairwise
    loss has no grid."""
    _, _, rows = grid_run
    fits = [r for r in rows if r["source"] == "bmrm" and r["lam"]]
    ndcg = [r for r in fits if r["method"] == "ndcg-pairs"]
    order = [(p, lam) for p in UNION for lam in (0.01, 0.1)]
    assert {(r["params"], float(r["lam"])) for r in ndcg} == set(order)
    vali_rows = [r for r in ndcg if r["split"] == "vali" and r["measure"] == "NDCG@10"]
    assert len(vali_rows) == len(order)
    # the latent combination ran the concave-convex procedure, the pairs ones did not
    steps = {r["params"]: int(r["cccp_steps"]) for r in vali_rows}
    assert steps["ties=latent,k=5"] >= 1
    assert steps["k=3"] == steps["k=10"] == 0
    assert {r["params"] for r in fits if r["method"] == "ordinal"} == {"default"}
    value = {(r["params"], float(r["lam"])): float(r["value"]) for r in vali_rows}
    best = max(value.values())
    expected = [key for key in order if value[key] == best][-1]
    chosen = {(r["params"], float(r["lam"])) for r in ndcg if r["selected"] == "True"}
    assert chosen == {expected}


def test_median_fit_of_the_grid(grid_run, shared_data):
    """The training-time table's last column is the median seconds (iterations) over every
    fit of the loss's grid, as recorded one row per fit in results.csv."""
    out, _, rows = grid_run
    md = (out / "results.md").read_text()
    assert "median fit of the grid" in md
    for method in ("ordinal", "ndcg-pairs"):
        fits = {
            (r["params"], r["lam"]): (float(r["fit_seconds"]), int(r["iterations"]))
            for r in rows
            if r["method"] == method and r["source"] == "bmrm" and r["lam"]
        }
        seconds = np.median([s for s, _ in fits.values()])
        iterations = np.median([i for _, i in fits.values()])
        section = md.split("## Training time")[1].split("\n## ")[0]
        (line,) = [ln for ln in section.splitlines() if ln.startswith(f"| {method} |")]
        assert line.endswith(f"| {seconds:.2f} ({iterations:.0f}) |")


def test_second_data_set_is_the_lightgbm_example(grid_run, shared_data):
    """One split, no official rows, the test set is ``rank.test`` (50 queries), and file
    order scores as the LETOR tool's definition gives on it."""
    out, data, rows = grid_run
    assert not [r for r in rows if r["source"] == "LETOR 4.0 table"]
    assert {r["fold"] for r in rows if r["source"] == "bmrm"} <= {"Fold1", "pooled"}
    with open(out / "per_query.csv", newline="") as fh:
        per_query = [r for r in csv.DictReader(fh) if r["method"] == "constant"]
    assert len(per_query) == 50
    expected = lightgbm_file_order(data / "lightgbm_rank")
    got = {
        r["measure"]: float(r["value"])
        for r in rows
        if r["method"] == "constant" and r["split"] == "test" and r["fold"] == "Fold1"
    }
    for measure in ("NDCG@1", "NDCG@5", "NDCG@10", "MAP"):
        assert got[measure] == pytest.approx(expected[measure], abs=1e-12)
    assert "LightGBM" in (out / "results.md").read_text()


def test_bad_grid_item_is_an_argument_error(tmp_path, shared_data):
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "experiments/letor.py", "--out", str(tmp_path), "--grid", "k5"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "--grid items must look like KEY=V1,V2; got 'k5'" in proc.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("losses_run", "item", "message"),
    [
        # NERU has no gain parameter: the combination is refused for it, not skipped
        (
            ("ordinal", "neru"),
            "gain=exp,linear",
            "--grid setting gain=exp is not valid for neru: the neru loss has no parameter "
            "'gain'; its parameters are ['alpha', 'd', 'k', 'c', 'truncate_c', 'ties', "
            "'bound', 'pairwise', 'average_precision']",
        ),
        (
            ("ndcg", "ndcg-pairs"),
            "gain=exp,cubic",
            "--grid setting gain=cubic is not valid for ndcg: gain must be 'exp' or "
            "'linear'; got 'cubic'",
        ),
        (
            ("ndcg",),
            "gains=linear",
            "--grid setting gains=linear is not valid for ndcg: the ndcg loss has no "
            "parameter 'gains'; its parameters are ['k', 'gain', 'discount', 'c', "
            "'truncate_c', 'ties', 'bound', 'pairwise', 'average_precision']",
        ),
    ],
)
def test_invalid_grid_setting_is_an_argument_error(
    tmp_path, shared_data, losses_run, item, message
):
    """Every combination of the grid is built for every structured loss of the run before
    any fit: an unknown parameter or a bad value stops the run with the combination, the
    method and the reason named, and nothing written."""
    import subprocess
    import sys

    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "experiments/letor.py", "--out", str(out), "--losses", *losses_run]
        + ["--grid", item],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "warm-up" not in proc.stderr
    assert not out.exists()


@pytest.fixture(scope="module")
def trec_run(tmp_path_factory):
    data = real_data()
    out = tmp_path_factory.mktemp("letor_trec")
    extra = ("--dataset", "trec-news-2018", "--losses", "ordinal", "--folds", "1", "2", "3")
    extra += ("4", "5", "--lams", "0.1", "--flips", "200")
    return out, data, run_quick("letor", out, data, extra=extra)


def test_trec_news_folds_test_every_query_once(trec_run, shared_data):
    """The 50 queries of the pooled train and test files are each tested in exactly one of
    the five folds, in groups of 10, and scored as the LETOR tool's definition gives in
    file order."""
    out, data, rows = trec_run
    root = data / "trec_news_2018"
    text = (root / "trec_news_2018.train").read_text() + (root / "trec_news_2018.test").read_text()
    expected = letor_query_measures(text)
    assert len(expected) == 50
    with open(out / "per_query.csv", newline="") as fh:
        constant = [r for r in csv.DictReader(fh) if r["method"] == "constant"]
    assert sorted(r["qid"] for r in constant) == sorted(expected)
    for fold in range(1, 6):
        assert sum(r["fold"] == f"Fold{fold}" for r in constant) == 10
    for r in constant:
        for measure in MEASURES:
            assert float(r[measure]) == pytest.approx(expected[r["qid"]][measure], abs=1e-12)
    assert "TREC News 2018" in (out / "results.md").read_text()
    assert not [r for r in rows if r["source"] == "LETOR 4.0 table"]


def test_best_feature_matches_the_definition():
    """On 200 random sets (queries of 1–14 documents, features rounded so that scores tie,
    duplicated and negated columns for ties between features), the first (column, sign) of
    highest mean NDCG@10, columns in order and + before −."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        sizes = rng.integers(1, 15, size=rng.integers(1, 6))
        qid = np.repeat(np.arange(len(sizes)), sizes)
        n = len(qid)
        y = rng.integers(0, 3, size=n).astype(np.float64)
        X = np.round(rng.random((n, 4)), int(rng.integers(0, 3)))
        X = X[:, rng.integers(0, 4, size=6)] * rng.choice([-1.0, 1.0], size=6)  # ties
        text = "\n".join(f"{int(label)} qid:{q}" for label, q in zip(y, qid, strict=True))
        means = []
        for j in range(X.shape[1]):
            for sign in (1.0, -1.0):
                per_query = letor_query_measures(text, sign * X[:, j]).values()
                values = [v["NDCG@10"] for v in per_query]
                means.append((sum(values) / len(values), j, sign))
        top = max(v for v, _, _ in means)
        expected = next((j, sign) for v, j, sign in means if v >= top - 1e-12)
        assert letor.best_feature(X, y, qid) == expected


def test_every_lam_comparison_of_a_run(letor_run, shared_data):
    """per_query_lams.csv holds each loss's test values at every lam (at the chosen lam, the
    values of per_query.csv); every_lam.csv and results.md give their means (results.csv's
    test rows), differences from ordinal and p (an independent Monte Carlo of the sign-flip
    distribution), at each lam and averaged over the lams per query."""
    out, _, rows = letor_run
    with open(out / "per_query_lams.csv", newline="") as fh:
        lam_rows = list(csv.DictReader(fh))
    with open(out / "per_query.csv", newline="") as fh:
        chosen_rows = list(csv.DictReader(fh))
    with open(out / "every_lam.csv", newline="") as fh:
        table = {(r["method"], r["lam"] or "all", r["measure"]): r for r in csv.DictReader(fh)}
    md = (out / "results.md").read_text()
    section = md.split("## Test at every lam (no selection)")[1].split("\n## ")[0]
    lams = ("0.01", "0.1")
    values = {}
    for method in ("ordinal", "squared"):
        (chosen,) = {r["lam"] for r in rows if r["method"] == method and r["selected"] == "True"}
        mine = [r for r in chosen_rows if r["method"] == method]
        for lam in lams:
            at = [r for r in lam_rows if r["method"] == method and float(r["lam"]) == float(lam)]
            assert [r["qid"] for r in at] == [r["qid"] for r in mine]
            if float(lam) == float(chosen):
                for measure in letor.LAM_MEASURES:
                    assert [r[measure] for r in at] == [r[measure] for r in mine]
            for measure in letor.LAM_MEASURES:
                values[method, lam, measure] = np.array([float(r[measure]) for r in at])
                (expected,) = [
                    float(r["value"])
                    for r in rows
                    if r["method"] == method
                    and r["split"] == "test"
                    and r["measure"] == measure
                    and r["lam"]
                    and float(r["lam"]) == float(lam)
                ]
                got = table[method, repr(float(lam)), measure]
                assert float(got["mean"]) == pytest.approx(expected, abs=1e-12)
        for measure in letor.LAM_MEASURES:
            values[method, "all", measure] = np.mean(
                [values[method, lam, measure] for lam in lams], 0
            )
    for key in (*lams, "all"):
        lam = key if key == "all" else repr(float(key))  # every_lam.csv's lam cell
        label = "all lams" if key == "all" else f"{float(key):g}"
        for measure in letor.LAM_MEASURES:
            d = values["squared", key, measure] - values["ordinal", key, measure]
            got = table["squared", lam, measure]
            assert float(got["mean"]) == pytest.approx(values["squared", key, measure].mean())
            assert float(got["diff_vs_ordinal"]) == pytest.approx(d.mean(), abs=1e-12)
            # 1000 flips in the script: Monte Carlo standard error <= 0.016
            assert float(got["p_vs_ordinal"]) == pytest.approx(monte_carlo_p(d, 7), abs=0.07)
            assert table["ordinal", lam, measure]["p_vs_ordinal"] == ""
            mean = values["squared", key, measure].mean()
            diff = f"{d.mean():+.4f}".replace("-", "−")
            ref = values["ordinal", key, measure].mean()
            assert (
                f"| {label} | {ref:.4f} | {mean:.4f} {diff} (" in section.split(f"{measure}:")[1]
            )
    above = sum(
        values["squared", lam, "MAP"].mean() > values["ordinal", lam, "MAP"].mean() for lam in lams
    )
    assert f"| above ordinal | — | {above} of 2 |" in section.split("MAP:")[1]


def comparison_rows(spec):
    """Rows of per_query_lams.csv from {(method, lam, fold): [(qid, value), ...]}, the value
    used for every measure."""
    return [
        {"method": m, "fold": f"Fold{fold}", "lam": lam, "qid": q}
        | dict.fromkeys(letor.LAM_MEASURES, v)
        for (m, lam, fold), queries in spec.items()
        for q, v in queries
    ]


def test_every_lam_comparison_rules():
    """Means over folds of the per-fold query means (folds of unequal size), differences and
    the whole-grid average per query; the reference comes first whatever the order of the
    losses; losses without a value at every lam and fold are left out; no second loss, no
    comparison; queries that differ between losses are an error naming the file."""
    spec = {
        ("ndcg", 0.1, 1): [(1, 1.0), (2, 0.0)],
        ("ndcg", 0.1, 2): [(3, 0.5), (4, 0.5), (5, 0.2)],
        ("ndcg", 1.0, 1): [(1, 0.0), (2, 0.0)],
        ("ndcg", 1.0, 2): [(3, 0.0), (4, 1.0), (5, 0.2)],
        ("ordinal", 0.1, 1): [(1, 0.0), (2, 0.0)],
        ("ordinal", 0.1, 2): [(3, 0.1), (4, 0.1), (5, 0.1)],
        ("ordinal", 1.0, 1): [(1, 0.5), (2, 0.5)],
        ("ordinal", 1.0, 2): [(3, 0.0), (4, 0.0), (5, 0.0)],
        ("squared", 0.1, 1): [(1, 0.3), (2, 0.3)],  # no lam 1: left out
    }
    lams, folds = [0.1, 1.0], [1, 2]
    out = letor.every_lam_comparison(
        comparison_rows(spec), ["ndcg", "squared", "ordinal"], lams, folds, 1000
    )
    assert list(dict.fromkeys(m for m, _ in out)) == ["ordinal", "ndcg"]
    ndcg = {lam: out["ndcg", lam]["MAP"] for lam in (*lams, None)}
    assert ndcg[0.1]["mean"] == pytest.approx((0.5 + 0.4) / 2)  # not the pooled 2.2 / 5
    assert ndcg[0.1]["diff"] == pytest.approx(0.45 - 0.05)
    assert ndcg[1.0]["mean"] == pytest.approx((0.0 + 0.4) / 2)
    assert ndcg[1.0]["diff"] == pytest.approx(0.2 - 0.25)
    assert ndcg[None]["mean"] == pytest.approx((0.25 + 0.4) / 2)
    assert ndcg[None]["diff"] == pytest.approx(0.325 - 0.15)
    assert "p" not in out["ordinal", None]["MAP"]
    assert 0 < ndcg[None]["p"] <= 1
    lines = "\n".join(letor.every_lam_lines(out, lams, 1000, {"AdaRank-NDCG": {"MAP": 0.48}}))
    assert "| above ordinal | — | 1 of 2 |" in lines
    assert "| 1 | 0.2500 | 0.2000 −0.0500 (" in lines
    assert "AdaRank-NDCG 0.4800" in lines
    assert letor.every_lam_comparison(comparison_rows(spec), ["ordinal"], lams, folds, 10) is None
    spec["ndcg", 1.0, 2] = [(3, 0.0), (6, 1.0), (5, 0.2)]
    with pytest.raises(ValueError, match="per_query_lams.csv: ndcg at lam 1 has other Fold2"):
        letor.every_lam_comparison(comparison_rows(spec), ["ordinal", "ndcg"], lams, folds, 10)


def test_regularizer_is_a_fit_level_grid_key():
    """``regularizer`` goes to bmrm.fit, not to the loss, and every loss is fitted with each
    of its values (the pairwise ones too); the loss parameters stay with the structured
    losses; a value other than l2 and l1 is refused before any fit."""
    grid = letor.parse_grid([["regularizer=l2,l1", "k=5,10"]])
    assert letor.loss_settings("ndcg", grid) == grid
    assert letor.loss_settings("ordinal", grid) == [{"regularizer": "l2"}, {"regularizer": "l1"}]
    assert letor.loss_settings("map", letor.parse_grid([["k=5,10"]])) == [{}]
    letor.check_grid(grid, ["ordinal", "ndcg", "neru", "map"])
    with pytest.raises(ValueError, match="--grid regularizer must be one of l2, l1; got 'l3'"):
        letor.check_grid(letor.parse_grid([["regularizer=l3"]]), ["ordinal"])

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    qid = np.repeat(np.arange(10), 6)
    y = np.clip(np.round(X @ np.array([1.0, -1.0, 0.0, 0.5]) + 1), 0, 2)
    import bmrm

    for loss, name, params in (("ordinal", "ordinal", {}), ("ndcg-pairs", "ndcg", {"k": 5})):
        model, info = letor.fit_loss(
            loss, X, y, qid, 0.05, 1e-6, 500, None, {"regularizer": "l1", **params}
        )
        loss_params = {**letor.METHODS[loss][1], **params}
        direct = bmrm.fit(
            X, y, name, qid, lam=0.05, tol=1e-6, max_iter=500, regularizer="l1",
            loss_params=loss_params,
        )  # fmt: skip
        assert model.regularizer.spec() == direct.regularizer.spec() == "l1"
        np.testing.assert_array_equal(model.coef_, direct.coef_)
        l2, _ = letor.fit_loss(loss, X, y, qid, 0.05, 1e-6, 500, None, params)
        assert not np.array_equal(l2.coef_, model.coef_)


def test_l1_with_a_method_for_l2_only_is_an_argument_error(tmp_path, shared_data):
    import subprocess

    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "experiments/letor.py", "--out", str(out), "--method", "nrbm"]
        + ["--grid", "regularizer=l2,l1"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "--method nrbm fits the L2 regularizer only; --grid asks for l1" in proc.stderr
    assert not out.exists()

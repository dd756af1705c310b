"""``experiments/adarank.py``: AdaRank against a plain transcription of its paper, and the
script end to end on the shared MQ2008 data."""

import csv
import math
import subprocess
import sys

import numpy as np
import pytest

from tests.experiments._quick import REPO, real_data, run_quick

sys.path.insert(0, str(REPO / "experiments"))
import adarank  # noqa: E402


def reference_measure(measure, labels, scores):
    """E of one query, from its definition: documents by decreasing score, ties in row order;
    NDCG of the whole list with gain 2^r − 1 and discount 1 at positions 1 and 2, 1/log2(i)
    after; AP with label >= 1 relevant."""
    order = sorted(range(len(labels)), key=lambda i: -scores[i])  # stable
    ranked = [labels[i] for i in order]
    if measure == "ndcg":

        def dcg(rs):
            return sum(
                (2.0**r - 1.0) / (1.0 if i <= 2 else math.log2(i)) for i, r in enumerate(rs, 1)
            )

        return dcg(ranked) / dcg(sorted(labels, reverse=True))
    hits, total = 0, 0.0
    for i, r in enumerate(ranked, 1):
        if r >= 1:
            hits += 1
            total += hits / i
    return total / hits


def reference_adarank(X, y, qid, measure, rounds):
    """Xu & Li (SIGIR 2007), Fig. 1, query by query in plain Python, with the script's two
    stated rules: no repeat of the previous round's feature (with more than one feature), and
    a feature perfect on every query ends the run as the model."""
    queries = {}
    for i, q in enumerate(qid):
        queries.setdefault(q, []).append(i)
    queries = [rows for rows in queries.values() if any(y[i] >= 1 for i in rows)]
    d = X.shape[1]

    def E(scores):
        return [
            reference_measure(measure, [y[i] for i in rows], [scores[i] for i in rows])
            for rows in queries
        ]

    per_feature = [E(X[:, j]) for j in range(d)]
    p = [1.0 / len(queries)] * len(queries)
    w = [0.0] * d
    weights, features, alphas = [], [], []
    for _ in range(rounds):
        allowed = [j for j in range(d) if not (features and d > 1 and j == features[-1])]
        perfect = [j for j in allowed if all(v >= 1.0 for v in per_feature[j])]
        if perfect:
            j = perfect[0]
            features.append(j)
            alphas.append(math.inf)
            weights.append([1.0 if i == j else 0.0 for i in range(d)])
            break
        e = {j: sum(pq * v for pq, v in zip(p, per_feature[j], strict=True)) for j in allowed}
        j = max(allowed, key=lambda i: (e[i], -i))  # the first maximiser
        alpha = 0.5 * math.log((1.0 + e[j]) / (1.0 - e[j]))
        features.append(j)
        alphas.append(alpha)
        w[j] += alpha
        weights.append(list(w))
        scores = [sum(X[i, k] * w[k] for k in range(d)) for i in range(X.shape[0])]
        u = [math.exp(-v) for v in E(scores)]
        p = [v / sum(u) for v in u]
    return np.array(weights), np.array(features), np.array(alphas)


def random_problem(rng):
    n_q = int(rng.integers(1, 7))
    sizes = rng.integers(1, 7, size=n_q)
    qid = np.repeat(rng.permutation(100)[:n_q], sizes)
    y = rng.integers(0, 3, size=qid.size).astype(float)
    kind = rng.integers(0, 3)
    if kind == 1:  # a query whose labels are all equal
        y[qid == qid[0]] = y[0]
    elif kind == 2:  # rows of the queries interleaved
        perm = rng.permutation(qid.size)
        qid, y = qid[perm], y[perm]
    if not (y >= 1).any():
        y[0] = 1.0
    d = int(rng.integers(1, 5))
    X = np.round(rng.random((qid.size, d)), int(rng.integers(0, 3)))  # many ties
    return X, y, qid


@pytest.mark.parametrize("measure", ["ndcg", "map"])
def test_adarank_matches_its_paper_transcription(measure):
    rng = np.random.default_rng(7)
    stops = 0
    for case in range(400):
        X, y, qid = random_problem(rng)
        got = adarank.adarank(X, y, qid, measure, rounds=6)
        want = reference_adarank(X, y, qid, measure, rounds=6)
        np.testing.assert_array_equal(got[1], want[1], err_msg=f"features, case {case}")
        np.testing.assert_allclose(got[2], want[2], rtol=1e-12, err_msg=f"alphas, case {case}")
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-15)
        stops += len(got[1]) < 6
    # both ends are exercised: runs ended by a perfect feature, and full runs
    assert 0 < stops < 400


def test_measure_is_the_definition_on_tied_scores():
    rng = np.random.default_rng(3)
    for _ in range(200):
        X, y, qid = random_problem(rng)
        keep = adarank.with_relevant(y, qid)
        X, y, qid = X[keep], y[keep], qid[keep]
        _, first = np.unique(qid, return_index=True)
        for measure in ("ndcg", "map"):
            got = adarank.train_measure(measure, y, X[:, 0], qid)
            want = [
                reference_measure(measure, list(y[qid == q]), list(X[qid == q, 0]))
                for q in qid[np.sort(first)]
            ]
            np.testing.assert_allclose(got, want, rtol=1e-12)


def test_a_single_feature_repeats_and_weights_grow():
    X = np.array([[0.9], [0.1], [0.5], [0.2]])  # not a perfect ranking
    y = np.array([0.0, 1.0, 2.0, 0.0])
    qid = np.array([1, 1, 1, 1])
    weights, features, alphas = adarank.adarank(X, y, qid, "ndcg", rounds=3)
    assert list(features) == [0, 0, 0]
    assert np.all(alphas > 0) and np.all(np.diff(weights[:, 0]) > 0)


def test_bad_arguments_are_refused():
    X = np.ones((2, 1))
    with pytest.raises(ValueError, match="no label >= 1"):
        adarank.adarank(X, np.zeros(2), np.array([1, 1]), "ndcg", 3)
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        adarank.adarank(X, np.ones(2), np.array([1, 1]), "ndcg", 0)
    with pytest.raises(ValueError, match="measure must be"):
        adarank.adarank(X, np.ones(2), np.array([1, 1]), "err", 3)


def test_choose_rounds_takes_the_first_best():
    Xv = np.array([[1.0, 0.0], [0.0, 1.0]] * 5)
    yv = np.array([1.0, 0.0] * 5)
    qv = np.repeat(np.arange(1), 10)
    weights = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 0.0]])
    # rounds 2 and 3 rank alike: the smaller T is chosen
    assert adarank.choose_rounds(weights, Xv, yv, qv)[0] == 2


# ------------------------------------------------------------------------- the script


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    data = real_data()
    out = tmp_path_factory.mktemp("adarank")
    rows = run_quick("adarank", out, data)
    return data, out, rows


def read(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_quick_run_writes_its_files(quick_run, shared_data):
    _, out, rows = quick_run
    assert {r["method"] for r in rows} == {"AdaRank-NDCG", "AdaRank-MAP"}
    test_rows = [r for r in rows if r["split"] == "test"]
    assert {r["fold"] for r in rows} == {"Fold1"}
    for r in test_rows:
        assert 0.0 <= float(r["value"]) <= 1.0 and 1 <= int(r["rounds"]) <= 20
    queries = read(out / "per_query.csv")
    # Fold1's test partition S5 has 156 queries
    assert len(queries) == 2 * 156
    md = (out / "results.md").read_text()
    # the official table's Fold1 figures beside the re-run
    assert "| AdaRank-NDCG (LETOR) | 0.2139 |" in md


def test_against_a_run_of_itself(quick_run, shared_data, tmp_path):
    data, out, _ = quick_run
    # a letor.py-shaped run folder holding the re-run's own per-query values
    run = tmp_path / "run"
    run.mkdir()
    rows = read(out / "per_query.csv")
    with open(run / "per_query.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(r for r in rows if r["method"] == "AdaRank-NDCG")
    out2 = tmp_path / "out"
    run_quick("adarank", out2, data, extra=("--against", str(run)))
    tests = read(out2 / "tests.csv")
    same = [r for r in tests if r["against"] == "AdaRank-NDCG"]
    assert len(same) == 4
    for r in same:
        assert float(r["mean"]) == float(r["mean_against"]) and float(r["p"]) == 1.0
        assert int(r["queries"]) == 156


@pytest.mark.parametrize("kind", ["empty", "other folds", "other queries"])
def test_against_a_bad_run_is_refused_before_any_work(quick_run, shared_data, tmp_path, kind):
    data, out, _ = quick_run
    run = tmp_path / "run"
    run.mkdir()
    if kind != "empty":
        rows = [r for r in read(out / "per_query.csv") if r["method"] == "AdaRank-NDCG"]
        change = {"fold": "Fold2"} if kind == "other folds" else {"method": "other"}
        with open(run / "per_query.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows({**r, **change} for r in rows[1:])
    out2 = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "experiments/adarank.py", "--quick", "--data", str(data), "--out",
         str(out2), "--against", str(run)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    expected = {
        "empty": f"--against {run}: no per_query.csv",
        "other folds": f"--against {run}: the run holds ['Fold2']",
        "other queries": "--against: method 'other' lacks 1 test queries of this run",
    }
    assert expected[kind] in proc.stderr
    assert not out2.exists()

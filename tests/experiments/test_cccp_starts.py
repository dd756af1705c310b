"""``experiments/cccp_starts.py``: its helpers against references from their definitions,
and the script end to end on the shared MQ2008 data."""

import math
import sys

import numpy as np
import pytest

import losses
from tests.experiments._quick import REPO, real_data, run_quick
from tests.losses.reference_listwise import Measure, latent_brute_force, position_weights

sys.path.insert(0, str(REPO / "experiments"))
import cccp_starts  # noqa: E402


@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_objective_matches_enumeration(name):
    """J(w) = lam/2 ‖w‖² + the mean over queries of the latent loss, the loss by enumeration
    of every π and every ideal σ (queries of 1–6 documents, tied labels and tied scores)."""
    loss = losses.get(name, **cccp_starts.PARAMS[name])
    if name == "ndcg":
        measure = Measure("ndcg", k=loss.k, gain=loss.gain, discount=loss.discount)
    else:
        measure = Measure("neru", k=loss.k, alpha=loss.alpha, d=loss.d)
    rng = np.random.default_rng(11)
    for _ in range(60):
        sizes = rng.integers(1, 7, size=rng.integers(1, 5))
        qid = np.repeat(np.arange(len(sizes)), sizes)
        y = rng.integers(0, 3, size=len(qid)).astype(np.float64)
        X = np.round(rng.standard_normal((len(qid), 3)), 1)
        w = np.round(rng.standard_normal(3), 1)
        lam = float(rng.choice([1e-3, 0.1, 1.0]))
        f = X @ w
        per_query = []
        for q in range(len(sizes)):
            rows = qid == q
            c = position_weights(loss.c, int(rows.sum()), loss.k, loss.truncate_c)
            per_query.append(latent_brute_force(f[rows], y[rows], measure, c)[0])
        expected = 0.5 * lam * float(w @ w) + float(np.mean(per_query))
        got = cccp_starts.objective(loss, lam, w, X, y, qid)
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_select_takes_the_best_validation_and_the_larger_lam_on_ties():
    rows = [
        {"loss": "ndcg", "start": "ordinal", "fold": 1, "lam": lam, "vali": v}
        for lam, v in [(1e-3, 0.20), (1e-2, 0.25), (0.1, 0.25), (1.0, 0.24)]
    ] + [
        {"loss": "ndcg", "start": "pairs", "fold": 1, "lam": lam, "vali": v}
        for lam, v in [(1.0, 0.10), (1e-3, 0.30), (1e-2, 0.29)]
    ]
    chosen = cccp_starts.select(rows)
    assert chosen[("ndcg", "ordinal", 1)]["lam"] == 0.1
    assert chosen[("ndcg", "pairs", 1)]["lam"] == 1e-3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lams", "0"], "--lams must be in [1e-30, 1e+12]; got 0"),
        (["--random", "-1"], "--random must be >= 0"),
        (["--tol", "-1"], "--tol must be in [0, 1); got -1"),
        (["--tol", "1"], "--tol must be in [0, 1); got 1"),
        (["--seed", "-1"], "--seed must be >= 0"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(tmp_path, capsys, args, message):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:
        cccp_starts.main([*args, "--out", str(out)])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_quick_run(tmp_path):
    """MQ2008 Fold1 (80 training queries), two lams, four starts: the default start's rows
    are the reference (relative J 0), every start reaches the default's objective to the
    solver's relative tolerance (1e-4) and its J is that of a model no worse than its start."""
    data = real_data()
    out = tmp_path / "out"
    rows = run_quick("cccp_starts", out, data)
    starts = ["ordinal", "pairs", "feature", "random1"]
    assert [r["start"] for r in rows] == starts * 2
    assert {r["lam"] for r in rows} == {"0.01", "0.1"}
    for r in rows:
        J, rel = float(r["J"]), float(r["rel_J"])
        if r["start"] == "ordinal":
            assert rel == 0.0 and math.isnan(float(r["J_start"]))
            base = J
        else:
            assert rel == pytest.approx(J / base - 1.0, abs=1e-15)
            assert abs(rel) < 2e-4
            assert J <= float(r["J_start"]) * (1 + 1e-12)
        assert 0.0 <= float(r["test MAP"]) <= 1.0 and int(r["cccp_steps"]) >= 1
    md = (out / "results.md").read_text()
    assert "spread (max − min)" in md and "| ndcg | random1 | 2 |" in md
    for start in starts[1:]:
        line = next(x for x in md.splitlines() if x.startswith(f"| ndcg | {start} | 2 |"))
        elsewhere = sum(float(r["rel_J"]) > 1e-2 for r in rows if r["start"] == start)
        assert line.split(" | ")[6] == str(elsewhere)
    # a fit's starts do not depend on the other lams of the run: lam 0.1 alone repeats its rows
    alone = run_quick("cccp_starts", tmp_path / "alone", data, extra=("--lams", "0.1"))
    keys = ("start", "J_start", "J", "rel_J", "cccp_steps", "iterations", "test MAP")
    assert [{k: r[k] for k in keys} for r in alone] == [
        {k: r[k] for k in keys} for r in rows if r["lam"] == "0.1"
    ]

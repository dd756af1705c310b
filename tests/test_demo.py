"""The README's demo: every default fit converges and prints its row."""

from __future__ import annotations

import bmrm.demo as demo


def test_every_default_fit_of_the_demo_converges(capsys):
    assert demo.main(["--queries", "150", "--docs", "20", "--features", "10"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in lines[2:]}
    assert list(rows) == list(demo.DEFAULT_LOSSES)
    assert "ndcg" in rows
    for line in rows.values():
        assert "converged: relative gap below tol" in line, line
        fields = line.split()
        objective, gap = float(fields[1]), float(fields[2])
        assert 0.0 <= gap <= 1e-3 * objective, line
        assert 0.5 < float(fields[6]) <= 1.0, line  # test NDCG@10 of a learned ranker


def test_the_demo_fits_the_losses_it_is_given(capsys):
    assert demo.main(["--queries", "60", "--docs", "10", "--losses", "squared"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[2:]] == ["squared"]

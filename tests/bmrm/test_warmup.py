"""``bmrm.warmup`` and ``bmrm warmup``: after them a fit of a warmed-up loss compiles nothing."""

from __future__ import annotations

import numpy as np
import pytest

import bmrm
from bmrm.cli import main


def _fit(loss: str, sparse: bool = False):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(150, 6))
    if sparse:
        import scipy.sparse as sp

        X = sp.csr_matrix(X)
    y = rng.integers(0, 3, size=150).astype(float)
    return bmrm.fit(X, y, loss, np.repeat(np.arange(15), 10), lam=1e-1)


def test_after_warmup_a_fit_of_the_loss_compiles_nothing():
    seconds = bmrm.warmup(["ordinal", "squared"])
    assert list(seconds) == ["ordinal", "squared", "csr"]
    assert all(value >= 0.0 for value in seconds.values())
    # other data (sizes, values) than the warm-up's: the same kernels, already loaded
    for loss in ("ordinal", "squared"):
        assert _fit(loss).result_.compile_seconds == 0.0
    assert _fit("ordinal", sparse=True).result_.compile_seconds == 0.0
    # a second warm-up finds everything loaded
    assert bmrm.warmup(["ordinal"]) == {"ordinal": 0.0, "csr": 0.0}


def test_warmup_compiles_the_structured_options_and_the_large_bundle_master():
    from bmrm.solver import qp
    from bmrm.solver.bundle import Bundle
    from bmrm.solver.compile_clock import CompileClock
    from bmrm.solver.masters import QPMaster

    bmrm.warmup(["neru"])
    rng = np.random.default_rng(3)
    X = rng.normal(size=(120, 5))
    y = rng.integers(0, 4, size=120).astype(float)
    qid = np.repeat(np.arange(8), 15)
    for options in ({"ties": "pairs"}, {"ties": "increasing", "truncate_c": True, "k": 5}):
        model = bmrm.fit(X, y, "neru", qid, lam=1e-1, max_iter=20, loss_params=options)
        assert model.result_.compile_seconds == 0.0
    bundle = Bundle(7, capacity=qp.SMALL_BUNDLE + 40)
    for _ in range(qp.SMALL_BUNDLE + 30):
        bundle.add(rng.normal(size=7), float(rng.normal()))
    with CompileClock() as clock:
        QPMaster(1.0).solve(bundle)
    assert clock.seconds == 0.0


def test_warmup_refuses_an_unknown_loss_name():
    with pytest.raises(ValueError, match=r"built-in losses .* got \['ordinall'\]"):
        bmrm.warmup(["ordinall"])


def test_the_warmup_command_prints_a_line_per_loss(capsys):
    assert main(["warmup", "--losses", "squared"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["squared", "csr", "total"]

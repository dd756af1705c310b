"""Compile the package's numba kernels ahead of the first fit: ``bmrm.warmup()``.

The first fit in a new environment compiles the kernels it uses (seconds per loss) and
numba keeps them in its on-disk cache, from which every later process loads them in
milliseconds. :func:`warmup` pays that cost up front, for example at install time
(``bmrm warmup`` or ``python -m bmrm warmup`` on the command line): it fits each built-in
loss on two small generated problems, in this process, with the solver's defaults (and for
the structured losses, NDCG and NERU, with every choice of ``ties`` and ``truncate_c``),
which compiles (or loads) the kernels of the loss, of the oracle's products for dense and
CSR float64 data (and its one-pass call for large dense X) and of the bundle, and it solves
one master QP larger than :data:`bmrm.solver.qp.SMALL_BUNDLE` planes, which compiles the
active-set method large bundles use. A fit afterwards still compiles what the warm-up did
not meet (float32 data, methods other than the default).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

import numpy as np
import scipy.sparse as sp

import losses
from bmrm.model import fit
from bmrm.solver import qp
from bmrm.solver.bundle import Bundle
from bmrm.solver.compile_clock import CompileClock
from bmrm.solver.masters import QPMaster
from bmrm.solver.oracle import RiskOracle

__all__ = ["warmup"]

# losses whose targets are -1 / +1
_BINARY = ("hinge", "logistic")

# the options of a loss that take kernels of their own, beside its defaults
_STRUCTURED = [
    {"ties": ties, "truncate_c": truncate}
    for ties in ("latent", "increasing", "pairs")
    for truncate in (False, True)
][1:]
_OPTIONS = {"ndcg": _STRUCTURED, "neru": [{"k": 10, **options} for options in _STRUCTURED]}


def _large_master() -> None:
    """Solve one L2 master of more planes than the small-bundle method takes."""
    rng = np.random.default_rng(0)
    bundle = Bundle(4, capacity=qp.SMALL_BUNDLE + 2)
    for _ in range(qp.SMALL_BUNDLE + 1):
        bundle.add(rng.normal(size=4), float(rng.normal()))
    QPMaster(1e-2).solve(bundle)


def _problems():
    """Two small ranking problems, 4 features, labels 0..3: queries of 40 rows (all longer
    than a cut-off k = 10, as the demo's), and queries of 1 to 60 rows (as LETOR's); the
    structured losses compile the paths a problem's query lengths need."""
    rng = np.random.default_rng(0)
    for lengths in ([40] * 6, [1, 2, 5, 9, 12, 30, 60]):
        qid = np.repeat(np.arange(len(lengths)), lengths)
        X = rng.normal(size=(len(qid), 4))
        y = np.digitize(X @ rng.normal(size=4), [-1.0, 0.0, 1.0]).astype(np.float64)
        yield X, y, qid


def warmup(names: Iterable[str] | None = None) -> dict[str, float]:
    """Compile (or load from numba's cache) the kernels that fits of the built-in losses use.

    Parameters
    ----------
    names : iterable of str or None
        Loss names of :func:`losses.available`; None: all of them.

    Returns
    -------
    dict of str to float
        For each loss, in order, the wall-clock seconds its fits spent in numba's compiler
        (compiling, or loading from the cache: milliseconds once cached). The first entry
        includes the solver's kernels (products, bundle, master QP), and a key ``"csr"``
        the products for CSR data.

    Raises
    ------
    ValueError
        For a name that is not a built-in loss, before any work.
    """
    available = losses.available()
    names = list(available if names is None else names)
    unknown = [name for name in names if name not in available]
    if unknown:
        raise ValueError(f"names must be built-in losses {available}; got {unknown}")
    problems = list(_problems())
    runs = [(name, name, False) for name in names]
    if names:
        runs.append(("csr", names[0], True))
    seconds = {}
    for key, name, sparse in runs:
        with CompileClock() as clock, warnings.catch_warnings():
            # a fit cut short by max_iter warns; the warm-up needs no convergence
            warnings.simplefilter("ignore")
            if not seconds:
                _large_master()
            for X, y, qid in problems:
                targets = np.where(y >= 2, 1.0, -1.0) if name in _BINARY else y
                extra = {}
                if name == "preference":
                    pairs, costs = losses.pairs_from_labels(y, qid)
                    extra = {"pairs": pairs, "pair_costs": costs}
                data = sp.csr_matrix(X) if sparse else X
                fit(data, targets, name, qid, lam=1e-2, tol=1e-2, max_iter=50, **extra)
                if sparse:
                    continue
                for options in _OPTIONS.get(name, []):
                    fit(X, targets, name, qid, lam=1e-2, tol=1e-2, max_iter=50,
                        loss_params=options)  # fmt: skip
                # the one-pass call that X of FUSED_MIN_BYTES and more takes
                prepared = losses.prepare(name, targets, qid, n_samples=len(targets), **extra)
                RiskOracle(X, prepared, fused_min_bytes=0)(np.zeros(X.shape[1]))
        seconds[key] = clock.seconds
    return seconds

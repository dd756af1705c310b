"""Compile the package's numba kernels ahead of the first fit: ``bmrm.warmup()``.

The first fit in a new environment compiles the kernels it uses (seconds per loss) and
numba keeps them in its on-disk cache, from which every later process loads them in
milliseconds. :func:`warmup` pays that cost up front, for example at install time
(``bmrm warmup`` or ``python -m bmrm warmup`` on the command line): it fits each built-in
loss once on a small generated problem, in this process, with the solver's defaults, which
compiles (or loads) the kernels of the loss, of the oracle's products for dense and CSR
float64 data, of the bundle and of the master QP. A fit afterwards still compiles what the
warm-up did not meet (float32 data, a loss's non-default options that take other kernels,
methods other than the default).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

import numpy as np
import scipy.sparse as sp

import losses
from bmrm.model import fit
from bmrm.solver.compile_clock import CompileClock

__all__ = ["warmup"]

# losses whose targets are -1 / +1
_BINARY = ("hinge", "logistic")


def _problem():
    """A small ranking problem: 12 queries of 8 rows, 4 features, labels 0..3."""
    rng = np.random.default_rng(0)
    n_queries, m, d = 12, 8, 4
    X = rng.normal(size=(n_queries * m, d))
    y = np.digitize(X @ rng.normal(size=d), [-1.0, 0.0, 1.0]).astype(np.float64)
    qid = np.repeat(np.arange(n_queries), m)
    return X, y, qid


def warmup(names: Iterable[str] | None = None) -> dict[str, float]:
    """Compile (or load from numba's cache) the kernels that fits of the built-in losses use.

    Parameters
    ----------
    names : iterable of str or None
        Loss names of :func:`losses.available`; None: all of them.

    Returns
    -------
    dict of str to float
        For each loss, in order, the wall-clock seconds its fit spent in numba's compiler
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
    X, y, qid = _problem()
    runs = [(name, name, X) for name in names]
    if names:
        runs.append(("csr", names[0], sp.csr_matrix(X)))
    seconds = {}
    for key, name, data in runs:
        targets = np.where(y >= 2, 1.0, -1.0) if name in _BINARY else y
        extra = {}
        if name == "preference":
            pairs, costs = losses.pairs_from_labels(y, qid)
            extra = {"pairs": pairs, "pair_costs": costs}
        with CompileClock() as clock, warnings.catch_warnings():
            # a fit cut short by max_iter warns; the warm-up needs no convergence
            warnings.simplefilter("ignore")
            fit(data, targets, name, qid, lam=1e-2, tol=1e-2, max_iter=50, **extra)
        seconds[key] = clock.seconds
    return seconds

"""LETOR 4.0 data sets: the five partitions and their fold rotation."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from numpy.typing import DTypeLike

from bmrm.io.svmlight import PathLike, load_svmlight

__all__ = ["LETOR_DATASETS", "letor_fold_partitions", "letor_folds", "load_letor_fold"]

LETOR_DATASETS = {"MQ2007": 46, "MQ2008": 46}
"""LETOR 4.0 data sets split into partitions ``S1.txt`` .. ``S5.txt``, and their feature count."""

_N_PARTITIONS = 5


def letor_fold_partitions(fold: int) -> dict[str, tuple[str, ...]]:
    """Return the partition names of the train, validation and test sets of a LETOR fold.

    Fold k trains on S_k, S_{k+1}, S_{k+2}, validates on S_{k+3} and tests on S_{k+4}
    (indices modulo 5): Fold1 is S1 S2 S3 / S4 / S5, Fold2 is S2 S3 S4 / S5 / S1, and so on.

    Parameters
    ----------
    fold : int
        The fold, 1..5.

    Returns
    -------
    dict
        ``{"train": names, "vali": names, "test": names}``, each a tuple of partition
        names.

    Examples
    --------
    >>> from bmrm.io import letor_fold_partitions
    >>> letor_fold_partitions(2)["train"]
    ('S2', 'S3', 'S4')
    """
    if isinstance(fold, bool) or fold not in range(1, _N_PARTITIONS + 1):
        raise ValueError(f"fold must be an integer in 1..{_N_PARTITIONS}; got {fold!r}")
    names = [f"S{(fold - 1 + k) % _N_PARTITIONS + 1}" for k in range(_N_PARTITIONS)]
    return {"train": tuple(names[:3]), "vali": (names[3],), "test": (names[4],)}


@functools.lru_cache(maxsize=32)
def _read_partition(path: str, mtime_ns: int, n_features: int) -> tuple:
    """One parsed partition; the modification time in the key makes edits re-parse."""
    X, y, qid = load_svmlight(path, n_features=n_features, zero_based=False, query_file=None)
    if qid is None:
        raise ValueError(f"{path}: a LETOR partition must have qid: on every row")
    return X, y, qid


def _partition(directory: Path, name: str, n_features: int) -> tuple:
    path = directory / f"{name}.txt"
    try:
        mtime_ns = path.stat().st_mtime_ns
    except FileNotFoundError:
        raise FileNotFoundError(f"LETOR partition {name} not found: {path}") from None
    return _read_partition(str(path), mtime_ns, n_features)


def load_letor_fold(
    root: PathLike,
    fold: int,
    *,
    dataset: str = "MQ2008",
    dense: bool = True,
    dtype: DTypeLike = np.float64,
) -> dict[str, tuple]:
    """The train, validation and test sets of one LETOR 4.0 fold.

    Parameters
    ----------
    root : str or path-like
        The folder holding ``S1.txt`` .. ``S5.txt``, or a folder with a subfolder named after
        the data set (``mq2008`` or ``MQ2008``) that holds them.
    fold : int
        1..5; see :func:`letor_fold_partitions` for the rotation.
    dataset : str, default "MQ2008"
        A key of :data:`LETOR_DATASETS`; fixes the number of features (46).
    dense : bool, default True
        Dense ``X`` (the LETOR 4.0 features are dense); False gives CSR.
    dtype : float dtype, default float64
        Dtype of ``X``.

    Returns
    -------
    dict
        ``{"train": (X, y, qid), "vali": (X, y, qid), "test": (X, y, qid)}``; the rows of
        several partitions are stacked in the order of the rotation, query ids are those of
        the files. The arrays are fresh copies, free to modify.

    Notes
    -----
    Each partition is parsed once per process and kept (keyed on its path and modification
    time), so looping over the five folds parses the five files once.
    """
    if dataset not in LETOR_DATASETS:
        raise ValueError(f"dataset must be one of {sorted(LETOR_DATASETS)}; got {dataset!r}")
    n_features = LETOR_DATASETS[dataset]
    root = Path(root)
    directory = next(
        (d for d in (root / dataset.lower(), root / dataset) if d.is_dir()),
        root,
    )
    splits = {}
    for split, names in letor_fold_partitions(fold).items():
        parts = [_partition(directory, name, n_features) for name in names]
        if dense:
            X = np.concatenate([p[0].toarray() for p in parts], dtype=dtype)
        else:
            X = sp.vstack([p[0] for p in parts], format="csr", dtype=dtype)
        y = np.concatenate([p[1] for p in parts])
        qid = np.concatenate([p[2] for p in parts])
        splits[split] = (X, y, qid)
    return splits


def letor_folds(
    root: PathLike,
    *,
    dataset: str = "MQ2008",
    dense: bool = True,
    dtype: DTypeLike = np.float64,
) -> Iterator[tuple[int, dict[str, tuple]]]:
    """Yield ``(fold, splits)`` for folds 1..5, with ``splits`` as :func:`load_letor_fold`.

    Parameters
    ----------
    root : str or path-like
        As in :func:`load_letor_fold`.
    dataset : str, default="MQ2008"
        As in :func:`load_letor_fold`.
    dense : bool, default=True
        As in :func:`load_letor_fold`.
    dtype : float dtype, default=float64
        As in :func:`load_letor_fold`.

    Yields
    ------
    fold : int
        The fold, 1..5.
    splits : dict
        Its train, validation and test sets, as :func:`load_letor_fold` returns them.
    """
    for fold in range(1, _N_PARTITIONS + 1):
        yield fold, load_letor_fold(root, fold, dataset=dataset, dense=dense, dtype=dtype)

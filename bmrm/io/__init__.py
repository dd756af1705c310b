"""Data and model files: svmlight / LETOR text, query files, LETOR folds, model files.

:mod:`bmrm.io.model_files` reads and writes the plain values of a model file;
``load_model`` and ``save_model`` here are the model layer's :func:`bmrm.linear_model.load` and
:func:`bmrm.linear_model.save` (which build and consume those values), imported on first use so
that this package does not import the model layer.
"""

from bmrm.io.letor import (
    LETOR_DATASETS,
    letor_fold_partitions,
    letor_folds,
    load_letor_fold,
)
from bmrm.io.svmlight import (
    dump_query_file,
    dump_svmlight,
    groups_from_qid,
    load_query_file,
    load_svmlight,
    load_weight_file,
    qid_from_groups,
)

__all__ = [
    "LETOR_DATASETS",
    "dump_query_file",
    "dump_svmlight",
    "groups_from_qid",
    "letor_fold_partitions",
    "letor_folds",
    "load_letor_fold",
    "load_model",
    "load_query_file",
    "load_svmlight",
    "load_weight_file",
    "qid_from_groups",
    "save_model",
]


def __getattr__(name: str):
    if name in ("load_model", "save_model"):
        from bmrm import linear_model

        return {"load_model": linear_model.load, "save_model": linear_model.save}[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

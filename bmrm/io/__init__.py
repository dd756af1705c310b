"""Data and model files: svmlight / LETOR text, query files, LETOR folds, model files.

:mod:`bmrm.io.model_files` reads and writes the plain values of a model file; the model
layer builds and consumes them (:func:`bmrm.load` and :func:`bmrm.save`, defined in
:mod:`bmrm.linear_model`), so this package never imports the model layer.
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
    "load_query_file",
    "load_svmlight",
    "load_weight_file",
    "qid_from_groups",
]

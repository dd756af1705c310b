"""Data and model files: svmlight / LETOR text, query files, LETOR folds, model files."""

from bmrm.io.letor import (
    LETOR_DATASETS,
    data_dir,
    letor_fold_partitions,
    letor_folds,
    load_letor_fold,
)
from bmrm.io.model_files import load_model, save_model
from bmrm.io.svmlight import (
    dump_query_file,
    dump_svmlight,
    groups_from_qid,
    load_query_file,
    load_svmlight,
    qid_from_groups,
)

__all__ = [
    "LETOR_DATASETS",
    "data_dir",
    "dump_query_file",
    "dump_svmlight",
    "groups_from_qid",
    "letor_fold_partitions",
    "letor_folds",
    "load_letor_fold",
    "load_model",
    "load_query_file",
    "load_svmlight",
    "qid_from_groups",
    "save_model",
]

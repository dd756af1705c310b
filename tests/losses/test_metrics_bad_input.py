"""Metrics reject inputs that are not real numbers instead of casting them silently.

Complex scores used to lose their imaginary part with only a ``ComplexWarning`` and string
labels were parsed as numbers; both now raise ``ValueError`` naming the argument and the
expected dtype.
"""

import numpy as np
import pytest

from losses import metrics

Y = np.array([2, 0, 1, 1, 0, 3])
F = np.array([0.3, -1.0, 0.2, 0.5, 0.1, 2.0])
QID = np.array([1, 1, 1, 2, 2, 2])

MEASURES = [
    metrics.ndcg_score,
    metrics.dcg_score,
    metrics.map_score,
    metrics.precision_score,
    metrics.recall_score,
    metrics.mrr_score,
    metrics.err_score,
    metrics.neru_score,
    metrics.kendall_tau_score,
]

BAD = {
    "complex": (lambda a: a + 0.5j, "complex128"),
    "strings": (lambda a: a.astype(str), "<U"),
    "object strings": (lambda a: a.astype(str).astype(object), "object"),
    "bytes": (lambda a: a.astype(bytes), "|S"),
}


@pytest.mark.parametrize("measure", MEASURES, ids=lambda m: m.__name__)
@pytest.mark.parametrize("kind", list(BAD))
def test_scores_and_labels_must_be_real(measure, kind):
    change, dtype = BAD[kind]
    with pytest.raises(ValueError, match=rf"y_score must hold real numbers .*got dtype {dtype}"):
        measure(Y, change(F.astype(float)), QID)
    with pytest.raises(ValueError, match=rf"y_true must hold real numbers .*got dtype {dtype}"):
        measure(change(Y), F, QID)


def test_ragged_scores_name_the_argument():
    with pytest.raises(ValueError, match="y_score must be a 1-d array of real numbers"):
        metrics.ndcg_score(Y, [[0.1, 0.2], [0.3]], None)


def test_gain_values_name_y():
    with pytest.raises(ValueError, match=r"y must hold real numbers .*complex128"):
        metrics.gain_values(np.array([1 + 1j, 2]))


@pytest.mark.parametrize("measure", MEASURES, ids=lambda m: m.__name__)
def test_real_inputs_of_other_dtypes_give_the_float_result(measure):
    """bool, integer, float32 and object arrays of numbers are real: same value as float64."""
    expected = measure(Y.astype(float), F, QID)
    assert measure(Y.astype(np.int8), F.astype(np.float32).astype(float), QID) == expected
    assert measure(Y.astype(object), F.astype(object), QID) == expected
    assert measure(list(Y), list(F), list(QID)) == expected
    binary = (Y > 0).astype(bool)
    assert measure(binary, F, QID) == measure(binary.astype(float), F, QID)

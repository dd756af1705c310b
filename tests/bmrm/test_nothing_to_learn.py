"""Targets that give a loss nothing to learn: the fit is exact (w = 0) and says so.

Every loss is non-negative and Ω(0) = 0, so when R(0) = 0 the point w = 0 minimises J
exactly. That happens for the ranking losses when no query holds two documents of
different labels (for "map", none on both sides of its threshold), and for the squared
loss when every target is 0. The fit must still end at w = 0, and warn that y gave it
nothing to learn instead of looking like an ordinary converged model; a single query with
two labels among many tied ones is enough to learn from, and then nothing is said.
"""

import warnings

import numpy as np
import pytest

import bmrm
import losses
from bmrm.estimators import BMRMRanker

N_QUERIES, SIZE = 8, 5


def data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N_QUERIES * SIZE, 3))
    qid = np.repeat(np.arange(N_QUERIES), SIZE)
    return X, qid


TIED = np.full(N_QUERIES * SIZE, 2.0)
GRADED = np.tile(np.array([0.0, 1.0, 2.0, 1.0, 0.0]), N_QUERIES)

CASES = [
    ("ordinal", {}, TIED, "no query has two documents of different labels"),
    ("ndcg", {}, TIED, "no query has two documents of different labels"),
    ("ndcg", {"ties": "pairs"}, TIED, "no query has two documents of different labels"),
    ("neru", {}, TIED, "no query has two documents of different labels"),
    ("softmax", {}, TIED, "no query has two documents of different labels"),
    ("map", {}, np.zeros(N_QUERIES * SIZE), "on both sides of the relevance threshold"),
    ("map", {"threshold": 5.0}, GRADED, "on both sides of the relevance threshold"),
    ("squared", {}, np.zeros(N_QUERIES * SIZE), "every target is 0"),
]


@pytest.mark.parametrize(("name", "params", "y", "why"), CASES)
def test_targets_without_information_fit_zero_and_warn(name, params, y, why):
    X, qid = data()
    with pytest.warns(UserWarning, match="y gives nothing to learn") as record:
        model = bmrm.fit(X, y, losses.get(name, **params), qid, lam=1e-3)
    assert np.array_equal(model.coef_, np.zeros(3))
    assert model.result_.fun == 0.0
    assert model.result_.status == 0
    messages = [str(w.message) for w in record if "nothing to learn" in str(w.message)]
    assert len(messages) == 1
    assert f"the {name} loss is zero at w = 0" in messages[0]
    assert why in messages[0]


def test_preference_pairs_of_zero_cost_warn():
    X, qid = data()
    pairs = np.array([[0, 1], [5, 7]])
    with pytest.warns(UserWarning, match=r"pairs= holds no pair of positive cost"):
        model = bmrm.fit(X, TIED, "preference", qid, pairs=pairs, pair_costs=np.zeros(2))
    assert np.array_equal(model.coef_, np.zeros(3))


@pytest.mark.parametrize("name", ["ordinal", "ndcg", "neru", "map", "softmax"])
def test_one_query_with_two_labels_is_enough(name):
    X, qid = data(1)
    y = TIED.copy() if name != "map" else np.zeros(N_QUERIES * SIZE)
    y[qid == 3] = [0.0, 1.0, 2.0, 2.0, 0.0] if name != "map" else [0.0, 1.0, 0.0, 0.0, 0.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model = bmrm.fit(X, y, name, qid, lam=1e-3)
    assert np.any(model.coef_ != 0.0)
    # the query with two labels is ranked better than by a constant model
    f = model.predict(X)[qid == 3]
    assert f[1] > f[0] and f[1] > f[4]


def test_user_loss_zero_everywhere_warns_without_a_reason():
    class Zero:
        pointwise = True

        def validate(self, y, query_ptr):
            return np.asarray(y, dtype=np.float64)

        def loss_grad(self, f, y):
            return np.zeros_like(f), np.zeros_like(f)

    X, qid = data()
    with pytest.warns(UserWarning, match="y gives nothing to learn") as record:
        model = bmrm.fit(X, GRADED, Zero(), lam=1e-3)
    assert np.array_equal(model.coef_, np.zeros(3))
    message = next(str(w.message) for w in record if "nothing to learn" in str(w.message))
    assert "targets, so w = 0" in message


def test_estimator_and_path_warn():
    X, qid = data()
    with pytest.warns(UserWarning, match="y gives nothing to learn"):
        BMRMRanker(loss="ordinal", lam=1e-3).fit(X, TIED, qid=qid)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        models = bmrm.path(X, TIED, "ordinal", qid, lams=[1e-2, 1e-3])
    assert sum("nothing to learn" in str(w.message) for w in record) == 2
    assert all(not np.any(m.coef_) for m in models)

"""
Rank with svmlight / LETOR files
================================

The LETOR workflow end to end: write a training and a test file in the svmlight format
(``label qid:<id> <index>:<value> ... # comment``), read them with
:func:`bmrm.io.load_svmlight`, fit the ordinal hinge of SVM^rank with :func:`bmrm.fit`,
score the test queries with NDCG@k under LETOR's conventions
(:func:`losses.metrics.ndcg_score`), and save the model to a portable file that
:func:`bmrm.load` reads back with bit-for-bit the same predictions. The plot shows test
NDCG@k for k = 1..10.
"""

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import bmrm
from bmrm.demo import make_ranking_data
from bmrm.io import dump_svmlight, load_svmlight
from losses.metrics import ndcg_score

X, y, qid = make_ranking_data(n_queries=300, docs_per_query=20, n_features=30, seed=2)
folder = Path(tempfile.mkdtemp())
train, test = qid < 200, qid >= 200
dump_svmlight(folder / "train.txt", X[train], y[train], qid[train])
dump_svmlight(folder / "test.txt", X[test], y[test], qid[test])

X_train, y_train, qid_train = load_svmlight(folder / "train.txt")
X_test, y_test, qid_test = load_svmlight(folder / "test.txt", n_features=X_train.shape[1])

model = bmrm.fit(X_train, y_train, loss="ordinal", qid=qid_train, lam=1e-3, tol=1e-4)
res = model.result_
print(f"J = {res.fun:.6f}, certified gap {res.gap:.1e} after {res.nit} iterations")

model.save(folder / "model.json")
again = bmrm.load(folder / "model.json")
assert np.array_equal(again.predict(X_test), model.predict(X_test))

scores = model.predict(X_test)
ks = np.arange(1, 11)
ndcg = [ndcg_score(y_test, scores, qid_test, k=int(k), convention="letor") for k in ks]
print("test NDCG@1..10:", " ".join(f"{v:.4f}" for v in ndcg))

fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(ks, ndcg, marker="o")
ax.set_xlabel("k")
ax.set_ylabel("test NDCG@k (LETOR conventions)")
ax.set_xticks(ks)
fig.tight_layout()
plt.show()

"""
Comparing the losses
====================

The same training queries fitted with several losses of :mod:`losses` at one lam, each to a
relative gap of 1e-3: test NDCG@10 and seconds per fit (compilation excluded by a first fit
on a small problem). The structured NDCG loss (latent ties, by the concave-convex procedure)
costs more per fit than the pairwise losses.
"""

import time

import matplotlib.pyplot as plt

import bmrm
import losses
from bmrm.demo import make_ranking_data
from losses.metrics import ndcg_score

X, y, qid = make_ranking_data(n_queries=400, docs_per_query=20, n_features=30, seed=2)
train = qid < 300
test = ~train
names = ["ordinal", "preference", "squared", "listnet", "ndcg", "map"]


def fit(name, X, y, qid, **options):
    """bmrm.fit; the preference loss gets every pair of different labels, cost 1."""
    if name == "preference":
        options["pairs"], options["pair_costs"] = losses.pairs_from_labels(y, qid)
    return bmrm.fit(X, y, name, qid, **options)


ndcg, seconds = [], []
for name in names:
    fit(name, X[:200], y[:200], qid[:200], lam=1e-2, tol=1e-1)  # compile
    start = time.perf_counter()
    model = fit(name, X[train], y[train], qid[train], lam=1e-3, tol=1e-3)
    seconds.append(time.perf_counter() - start)
    ndcg.append(ndcg_score(y[test], model.predict(X[test]), qid[test], k=10))
    print(f"{name:11s} test NDCG@10 {ndcg[-1]:.4f}  {seconds[-1]:.2f} s")

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.5))
ax1.barh(names, ndcg)
ax1.set_xlim(min(ndcg) - 0.02, max(ndcg) + 0.01)
ax1.set_xlabel("test NDCG@10")
ax2.barh(names, seconds)
ax2.set_xlabel("seconds per fit")
fig.tight_layout()
plt.show()

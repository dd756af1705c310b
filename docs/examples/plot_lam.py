"""
Test NDCG@10 against lam
========================

:func:`bmrm.path` fits one model per lam, each warm-started from the previous one's
solution and bundle. The test NDCG@10 of each model shows the usual choice: too large a lam
under-fits; below some lam the test measure levels off, and on noisier data it falls
again as the model over-fits. In practice lam is chosen on
validation queries (:class:`bmrm.BMRMRanker` with scikit-learn's ``GridSearchCV``).
"""

import matplotlib.pyplot as plt
import numpy as np

import bmrm
from bmrm.demo import make_ranking_data
from losses.metrics import ndcg_score

# few training queries (40) for many features (100), so that lam matters
X, y, qid = make_ranking_data(n_queries=400, docs_per_query=20, n_features=100, seed=1)
train = qid < 40
test = qid >= 200
lams = np.logspace(2, -4, 13)

fig, ax = plt.subplots(figsize=(6, 4))
for loss in ["ordinal", "squared"]:
    models = bmrm.path(X[train], y[train], loss, qid[train], lams=lams, tol=1e-3)
    scores = [ndcg_score(y[test], m.predict(X[test]), qid[test], k=10) for m in models]
    ax.semilogx(lams, scores, marker="o", label=loss)
    print(loss, " ".join(f"{s:.4f}" for s in scores))
ax.set_xlabel("lam")
ax.set_ylabel("test NDCG@10")
ax.legend()
fig.tight_layout()
plt.show()

"""
Collaborative ranking with CofiRank
===================================

:class:`bmrm.collab.CofiRank` factorises a users × items rating matrix as F = U Vᵀ and
trains each user's row of F with a ranking loss on the items that user rated (Weimer,
Karatzoglou, Le & Smola, NIPS 2007), alternating bundle-method steps over U and V. Here
the ratings come from a low-rank model plus noise; :func:`bmrm.collab.weak_split` keeps
``n_train`` ratings of each user for training and the rest for testing (CofiRank's weak
generalisation). The plot shows the objective per outer iteration (it never increases)
and the test NDCG@10 of the NDCG, ordinal and squared losses beside the popularity ranking.
"""

import matplotlib.pyplot as plt
import numpy as np
import scipy.sparse as sp

from bmrm.collab import CofiRank, weak_split
from losses.metrics import ndcg_score

rng = np.random.default_rng(0)
n_users, n_items, rank = 300, 200, 5
taste = rng.normal(size=(n_users, rank)) @ rng.normal(size=(rank, n_items))
stars = np.digitize(taste + rng.normal(scale=1.0, size=taste.shape), [-2, -0.7, 0.7, 2]) + 1
observed = rng.random((n_users, n_items)) < 0.25
ratings = sp.csr_matrix(np.where(observed, stars, 0))  # users × items, stars 1..5
train, test = weak_split(ratings, n_train=20, min_test=10, seed=0)

# popularity: items by mean training rating, the same list for every user
counts = np.maximum(np.diff(train.tocsc().indptr), 1)
popularity = np.asarray(train.sum(axis=0)).ravel() / counts
test = test.tocsr()
users = np.repeat(np.arange(test.shape[0]), np.diff(test.indptr))
baseline = ndcg_score(test.data, popularity[test.indices], users, k=10, gain="exp")

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
names, results = ["popularity"], [baseline]
for loss in ["ndcg", "ordinal", "squared"]:
    model = CofiRank(loss=loss, n_factors=10, max_iter=15, random_state=0).fit(train)
    objective = np.asarray(model.result_.objective)
    left.plot(np.arange(1, len(objective) + 1), objective / objective[0], marker=".", label=loss)
    names.append(loss)
    results.append(model.score(test, k=10))
    print(f"{loss}: lam {model.lam_:.3g}, test NDCG@10 {results[-1]:.4f}")
print(f"popularity: test NDCG@10 {baseline:.4f}")
left.set_xlabel("outer iteration")
left.set_ylabel("objective / first objective")
left.legend()
right.bar(names, results)
right.set_ylim(min(results) - 0.05, 1.0)
right.set_ylabel("test NDCG@10 (weak generalisation)")
fig.tight_layout()
plt.show()

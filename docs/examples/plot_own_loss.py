"""
Your own loss
=============

Any object with ``validate(y, query_ptr) -> targets`` and ``loss_grad(f, targets) ->
(per-query values, ∂/∂f)`` plugs into :func:`bmrm.fit`. This one, written with a numba
kernel, is a squared hinge over the pairs (top-labelled document, lower-labelled document)
of each query. :func:`losses.check_oracle` checks it against the protocol (shapes,
non-negativity, the subgradient inequality, finite differences) before it is trained, and
the fit certifies its gap as for a built-in loss. The plot compares the test NDCG@10 of
this loss with the built-in ordinal hinge, across lam.
"""

import matplotlib.pyplot as plt
import numpy as np
from numba import njit

import bmrm
import losses
from bmrm.demo import make_ranking_data
from losses.metrics import ndcg_score


@njit(cache=True)
def top_squared_hinge(f, y, query_ptr, values, grad):
    """Per query: Σ max(0, 1 + f_j − f_i)² over top-labelled i and lower-labelled j."""
    for q in range(query_ptr.size - 1):
        lo, hi = query_ptr[q], query_ptr[q + 1]
        top = y[lo:hi].max()
        values[q] = 0.0
        grad[lo:hi] = 0.0
        for i in range(lo, hi):
            if y[i] != top:
                continue
            for j in range(lo, hi):
                r = 1.0 + f[j] - f[i]
                if y[j] < top and r > 0.0:
                    values[q] += r * r
                    grad[j] += 2.0 * r
                    grad[i] -= 2.0 * r


class TopSquaredHinge:
    """The squared hinge of the top-labelled documents over the others, per query."""

    smooth = True

    def validate(self, y, query_ptr):
        return np.asarray(y, dtype=np.float64), query_ptr

    def loss_grad(self, f, targets):
        y, query_ptr = targets
        values, grad = np.empty(len(query_ptr) - 1), np.empty_like(f)
        top_squared_hinge(f, y, query_ptr, values, grad)
        return values, grad


X, y, qid = make_ranking_data(n_queries=400, docs_per_query=20, n_features=40, seed=3)
train, test = qid < 200, qid >= 200
print(losses.check_oracle(TopSquaredHinge(), y[train], qid[train]))

lams = np.logspace(0, -4, 9)
fig, ax = plt.subplots(figsize=(6, 4))
candidates = [("own: top squared hinge", TopSquaredHinge()), ("built-in: ordinal", "ordinal")]
for name, loss in candidates:
    scores = []
    for lam in lams:
        model = bmrm.fit(X[train], y[train], loss=loss, qid=qid[train], lam=lam, tol=1e-3)
        scores.append(ndcg_score(y[test], model.predict(X[test]), qid[test], k=10))
    ax.semilogx(lams, scores, marker="o", label=name)
    print(name, " ".join(f"{s:.4f}" for s in scores))
ax.set_xlabel("lam")
ax.set_ylabel("test NDCG@10")
ax.legend()
fig.tight_layout()
plt.show()

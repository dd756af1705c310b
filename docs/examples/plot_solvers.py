"""
Gap and objective against time for each solver
===============================================

Every solver method of :func:`bmrm.fit` minimises the same objective. The certifying bundle
methods (``"level"``, ``"bmrm"``, ``"ocas"``, ``"ls-bmrm"``, ``"inout"``) report a lower
bound on its minimum, hence a certified gap, at every iteration; ``"newton"`` certifies by
the strong convexity of the L2 term and needs a smooth loss, here the squared pairwise hinge
(the L2-loss RankSVM), so it is drawn on that loss beside the level method.
"""

import matplotlib.pyplot as plt
import numpy as np

import bmrm
import losses
from bmrm.demo import make_ranking_data

X, y, qid = make_ranking_data(n_queries=200, docs_per_query=20, n_features=20, seed=0)
lam = 1e-3

# %%
# The pairwise hinge (the ordinal loss) with each bundle method
# --------------------------------------------------------------
# A first loose fit per method compiles its numba kernels, so that the clocks below
# measure the solvers alone.

methods = ["level", "bmrm", "ocas", "ls-bmrm", "inout"]
for method in methods:
    bmrm.fit(X[:400], y[:400], "ordinal", qid[:400], lam=lam, tol=1e-1, method=method)
results = {}
for method in methods:
    model = bmrm.fit(X, y, "ordinal", qid, lam=lam, tol=1e-4, method=method, max_iter=300)
    results[method] = model.result_
    res = model.result_
    print(f"{method:8s} {res.nit:4d} iterations  J = {res.fun:.6f}  gap = {res.gap:.2e}")

fig, (ax_gap, ax_obj) = plt.subplots(1, 2, figsize=(10, 4))
best = min(res.fun for res in results.values())
for method, res in results.items():
    h = res.history
    ax_gap.loglog(h["elapsed"], h["gap"] / h["best_objective"], label=method)
    ax_obj.loglog(h["elapsed"], h["best_objective"] - best + 1e-12, label=method)
ax_gap.set_xlabel("seconds")
ax_gap.set_ylabel("certified relative gap")
ax_obj.set_xlabel("seconds")
ax_obj.set_ylabel("best objective − best final objective")
ax_gap.legend()
fig.tight_layout()

# %%
# The squared pairwise hinge: Newton-CG against the level method
# ---------------------------------------------------------------

squared_hinge = losses.get("ordinal", hinge="squared")
bmrm.fit(X, y, squared_hinge, qid, lam=lam, tol=1e-2, method="newton")
fig, ax = plt.subplots(figsize=(5, 4))
for method in ["newton", "level"]:
    res = bmrm.fit(X, y, squared_hinge, qid, lam=lam, tol=1e-6, method=method).result_
    h = res.history
    ax.loglog(h["elapsed"], np.maximum(h["gap"] / h["best_objective"], 1e-12), label=method)
    print(f"{method:8s} {res.nit:4d} iterations  J = {res.fun:.6f}  gap = {res.gap:.2e}")
ax.set_xlabel("seconds")
ax.set_ylabel("certified relative gap")
ax.legend()
fig.tight_layout()
plt.show()

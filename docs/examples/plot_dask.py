"""
Fitting with Dask
=================

``bmrm.fit(..., backend="dask")`` keeps the data in partitions of whole queries on the
workers; each iteration sends w to them and adds up their risks and subgradients, so the fit
equals the local one. This example runs a small fit on a ``LocalCluster`` of two workers
(threads of this process, to keep the build short) and checks that it matches the local
fit.

The speed-up itself needs data large enough that an iteration's work outweighs the
messages: it is measured by ``experiments/bench_scale.py`` (a LocalCluster of one and two
worker processes on a large synthetic set), whose result file, when present, is plotted
below rather than re-run during the build.
"""

import logging
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from distributed import Client, LocalCluster

import bmrm
from bmrm.demo import make_ranking_data

# sphinx_gallery_start_ignore
logging.getLogger("distributed").setLevel(logging.WARNING)
# sphinx_gallery_end_ignore
X, y, qid = make_ranking_data(n_queries=200, docs_per_query=20, n_features=20, seed=3)
local = bmrm.fit(X, y, "ordinal", qid, lam=1e-3, tol=1e-6)

with (
    LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster,
    Client(cluster) as client,
):
    remote = bmrm.fit(X, y, "ordinal", qid, lam=1e-3, tol=1e-6, backend="dask", client=client)
print(f"local objective {local.result_.fun:.10f}, Dask objective {remote.result_.fun:.10f}")
print(f"largest difference of the weights: {np.abs(local.coef_ - remote.coef_).max():.2e}")

# %%
# The measured speed-up
# ---------------------

# the build runs each example in its own folder, docs/examples
results = Path("../../experiments/results/bench_scale.csv")
if results.exists():
    import pandas as pd

    frame = pd.read_csv(results)
    dask = frame[frame["method"].str.startswith("dask")]
    per = dask.groupby("method")["s_per_iter"].median()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.bar(per.index, per.to_numpy())
    ax.set_ylabel("seconds per iteration (median)")
    ax.set_title(f"{dask['dataset'].iloc[0]}: {per.iloc[0] / per.iloc[-1]:.2f}× with two")
    fig.tight_layout()
    plt.show()
else:
    print("experiments/results/bench_scale.csv not found")

"""A demonstration fit on generated ranking data: ``python -m bmrm.demo``.

Generates queries whose graded relevance follows a hidden linear score, fits the ordinal,
preference (all graded pairs, costs 2^y_j − 2^y_i), squared and structured NDCG@10 (its
default latent ties, by the concave-convex procedure) losses, and prints
objective, certified gap, iterations, seconds (of which compiling: numba compiles the
kernels on their first use in a new environment, or loads them from its cache) and test
NDCG@10.

Each fit has a 20 s budget of solver time (``max_time`` does not count compilation), and
each converges well within it, so a first run prints the same fits as any later run
(``--losses`` chooses among them).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import bmrm
import losses
from losses.metrics import ndcg_score

# The losses the demo can fit, with their parameters; DEFAULT_LOSSES are fitted unless
# ``--losses`` names others.
LOSSES = {"ordinal": {}, "preference": {}, "squared": {}, "ndcg": {"k": 10}}
DEFAULT_LOSSES = ("ordinal", "preference", "squared", "ndcg")


def make_ranking_data(n_queries: int, docs_per_query: int, n_features: int, seed: int = 0):
    """Make queries of ``docs_per_query`` documents with labels 0..4 from a noisy linear score.

    The labels are the quantile bins (50, 75, 90 and 97 %) of X w plus Gaussian noise of
    standard deviation 2, for a random w.

    Parameters
    ----------
    n_queries : int
        The number of queries.
    docs_per_query : int
        The number of documents of each query.
    n_features : int
        The number of features.
    seed : int, default=0
        Seed of :func:`numpy.random.default_rng`.

    Returns
    -------
    X : ndarray of shape (n_queries * docs_per_query, n_features)
        Standard normal features.
    y : ndarray of shape (n_queries * docs_per_query,), int64
        Relevance labels 0..4.
    qid : ndarray of shape (n_queries * docs_per_query,), int64
        Query ids 0..n_queries − 1, each query's rows contiguous.

    Examples
    --------
    >>> from bmrm.demo import make_ranking_data
    >>> X, y, qid = make_ranking_data(n_queries=3, docs_per_query=4, n_features=2)
    >>> X.shape, qid.tolist()
    ((12, 2), [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2])
    """
    rng = np.random.default_rng(seed)
    n = n_queries * docs_per_query
    X = rng.normal(size=(n, n_features))
    w = rng.normal(size=n_features)
    score = X @ w + rng.normal(scale=2.0, size=n)
    y = np.digitize(score, np.quantile(score, [0.5, 0.75, 0.9, 0.97])).astype(np.int64)
    qid = np.repeat(np.arange(n_queries), docs_per_query)
    return X, y, qid


def main(argv=None) -> int:
    """Run the demo: fit each loss on generated data and print a table of the fits.

    Parameters
    ----------
    argv : sequence of str or None, default=None
        The command-line arguments (``--queries``, ``--docs``, ``--features``,
        ``--losses``); None takes ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status, 0.
    """
    parser = argparse.ArgumentParser(prog="python -m bmrm.demo", description=__doc__)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--docs", type=int, default=40)
    parser.add_argument("--features", type=int, default=50)
    parser.add_argument(
        "--losses", nargs="+", default=list(DEFAULT_LOSSES), choices=sorted(LOSSES)
    )
    args = parser.parse_args(argv)
    X, y, qid = make_ranking_data(args.queries, args.docs, args.features)
    split = X.shape[0] * 4 // 5
    print(
        f"generated {args.queries} queries x {args.docs} documents, {args.features} features; "
        "training on 80 %, testing on 20 %"
    )
    print(
        f"{'loss':<10} {'objective':>11} {'gap':>10} {'iterations':>10} {'seconds':>8} "
        f"{'compiling':>9} {'test NDCG@10':>12}  status"
    )
    for loss in args.losses:
        data = {}
        if loss == "preference":
            pairs, costs = losses.pairs_from_labels(y[:split], qid[:split], cost="gain_difference")
            data = {"pairs": pairs, "pair_costs": costs}
        start = time.perf_counter()
        model = bmrm.fit(
            X[:split],
            y[:split],
            loss,
            qid[:split],
            lam=1e-2,
            tol=1e-3,
            max_iter=5000,
            max_time=20.0,
            loss_params=LOSSES[loss],
            **data,
        )
        seconds = time.perf_counter() - start
        res = model.result_
        ndcg = ndcg_score(y[split:], model.predict(X[split:]), qid[split:], k=10)
        print(
            f"{loss:<10} {res.fun:11.6f} {res.gap:10.2e} {res.nit:10d} {seconds:8.2f} "
            f"{res.compile_seconds:9.2f} {ndcg:12.4f}  {res.message}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

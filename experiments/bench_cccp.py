"""The concave-convex procedure's speed options on MQ2008: time, iterations, oracle calls.

    python experiments/bench_cccp.py [--data ../shared/data] [--out results/bench_cccp]
        [--fold 1] [--losses ndcg neru] [--lams 1e-4 1e-3 1e-2] [--repeats 3] [--quick]

For the latent NDCG@10 and NERU@10 losses (``ties="latent"``, defaults otherwise) on the
training set of one MQ2008 fold, every lam is fitted by
:func:`bmrm.solver.cccp.minimize_cccp` (tol 1e-3, the solver's default method) with

``exact``     every subproblem to tol, a fresh bundle each (the procedure before the options);
``adaptive``  early subproblems to the tolerance that follows the last outer decrease;
``carry``     every subproblem to tol, starting from the previous one's shifted planes;
``both``      adaptive and carry (the default of ``bmrm.fit``).

Reported per setting: median seconds over ``--repeats`` runs (an untimed warm-up compiles
the kernels first; all settings of a lam run in the same process, interleaved), bundle
iterations, oracle calls, concave-convex steps, the objective J relative to ``exact``'s and
the validation NDCG@10 / NERU@10 of the returned w. The problem is not convex: settings can
stop at different stationary points, each certified to the tolerance.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from _common import (
    base_parser,
    check_distinct,
    fold_number,
    given,
    lam_value,
    load_letor,
    make_out,
    markdown_table,
    mq2008_root,
    positive_int,
    progress,
    script,
    tolerance,
    write_csv,
    write_text,
)

import bmrm
import losses
from bmrm.solver.cccp import minimize_cccp
from bmrm.solver.oracle import RiskOracle
from losses.metrics import ndcg_score, neru_score

SETTINGS = {
    "exact": {"inner_tol": None, "carry_planes": False},
    "adaptive": {"inner_tol": "adaptive", "carry_planes": False},
    "carry": {"inner_tol": None, "carry_planes": True},
    "both": {"inner_tol": "adaptive", "carry_planes": True},
}
PARAMS = {"ndcg": {}, "neru": {"k": 10}}


@script
def main(argv=None) -> int:
    parser = base_parser("bench_cccp", __doc__.splitlines()[0])
    parser.add_argument("--fold", type=fold_number, default=1)
    parser.add_argument("--losses", nargs="+", default=None, choices=tuple(PARAMS))
    parser.add_argument("--lams", nargs="+", type=lam_value, default=None)
    parser.add_argument("--repeats", type=positive_int, default=None)
    parser.add_argument("--tol", type=tolerance, default=1e-3)
    args = parser.parse_args(argv)
    check_distinct(parser, "--losses", args.losses)
    check_distinct(parser, "--lams", args.lams)
    names = given(args.losses, ("ndcg",) if args.quick else ("ndcg", "neru"))
    lams = tuple(given(args.lams, (0.1,) if args.quick else (1e-4, 1e-3, 1e-2)))
    repeats = given(args.repeats, 1 if args.quick else 3)
    splits = load_letor(mq2008_root(args.data), args.fold)
    X, y, qid = splits["train"]
    Xv, yv, qv = splits["vali"]
    if args.quick:
        keep = np.isin(qid, np.unique(qid)[:60])
        X, y, qid = X[keep], y[keep], qid[keep]
    rows = []
    started = time.perf_counter()
    warnings.simplefilter("ignore", bmrm.ConvergenceWarning)
    for name in names:
        loss = losses.get(name, **PARAMS[name])
        oracle = RiskOracle(X, losses.prepare(loss, y, qid, n_samples=X.shape[0]))
        minimize_cccp(oracle, X.shape[1], 0.1, tol=1e-2, max_iter=20)  # compile, untimed
        for lam in lams:
            seconds = {s: [] for s in SETTINGS}
            result = {}
            for _ in range(repeats):
                for setting, options in SETTINGS.items():
                    if options["inner_tol"] is None:
                        options = {**options, "inner_tol": args.tol}
                    start = time.perf_counter()
                    result[setting] = minimize_cccp(
                        oracle, X.shape[1], lam, tol=args.tol, max_iter=2000, **options
                    )
                    seconds[setting].append(time.perf_counter() - start)
            for setting, res in result.items():
                f = Xv @ res.x
                vali = (
                    ndcg_score(yv, f, qv, k=10, convention="letor")
                    if name == "ndcg"
                    else neru_score(yv, f, qv, k=10, ties="stable")
                )
                rows.append(
                    {
                        "loss": name,
                        "lam": lam,
                        "setting": setting,
                        "seconds": float(np.median(seconds[setting])),
                        "iterations": res.nit,
                        "oracle_calls": res.nfev,
                        "cccp_steps": res.n_outer,
                        "objective": res.fun,
                        "rel_objective": res.fun / result["exact"].fun - 1.0,
                        "vali": vali,
                    }
                )
                progress(
                    f"{name} lam={lam:g} {setting:<8} {rows[-1]['seconds']:7.2f} s "
                    f"{res.nit:4d} it {res.nfev:5d} calls {res.n_outer} steps "
                    f"J/J_exact−1={rows[-1]['rel_objective']:+.1e} vali={vali:.4f}"
                )
    total = time.perf_counter() - started
    table = markdown_table(
        ["loss", "lam", "setting", "s (median)", "iterations", "oracle calls", "steps",
         "J / J_exact − 1", "vali"],
        [[r["loss"], f"{r['lam']:g}", r["setting"], f"{r['seconds']:.2f}", r["iterations"],
          r["oracle_calls"], r["cccp_steps"], f"{r['rel_objective']:+.1e}", r["vali"]]
         for r in rows],
    )  # fmt: skip
    text = "\n".join(
        [
            "# Concave-convex procedure: speed options",
            "",
            f"MQ2008 Fold{args.fold} training set{' (60 queries)' if args.quick else ''}, "
            f"tol {args.tol:g}, median of {repeats} run(s), compile excluded; "
            f"total {total:.0f} s on a shared 2-core machine.",
            "",
            table,
            "",
        ]
    )
    make_out(args.out)
    write_csv(args.out / "results.csv", rows)
    write_text(args.out / "results.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

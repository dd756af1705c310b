"""Does the start of the concave-convex procedure decide the latent losses' models on MQ2008?

    python experiments/cccp_starts.py [--data ../shared/data] [--out results/cccp_starts]
        [--folds 1 2 3 4 5] [--losses ndcg neru] [--lams 1e-4 ... 1] [--random 3]
        [--tol 1e-4] [--seed 0] [--quick]

The latent NDCG@10 and NERU@10 losses (``ties="latent"``) are differences of convex
functions; :func:`bmrm.fit` trains them by the concave-convex procedure (Yu & Joachims,
ICML 2009), which stops at a stationary point of J(w) = lam·½‖w‖² + R(w), not at a
certified minimum. Its default start is the minimiser of the ordinal loss (the pairwise
hinge over pairs of different label, ``initial_loss``). Every (fold, loss, lam) is fitted
from the starts

``ordinal``     the default (``w0=None``);
``pairs``       the minimiser of the convex pair formulation (``ties="pairs"``), same lam;
``feature``     the best single feature by training LETOR NDCG@10 (``letor.best_feature``,
                the "best feature" row of ``experiments/letor.py``), with its sign, scaled
                to the default model's norm;
``random<i>``   ``--random`` directions drawn from a standard normal, scaled to the
                default model's norm; the generator is seeded by ``--seed``, the fold, the
                loss and lam, so a fit's starts do not depend on what else the run holds;

and reports, per fit, J at the start and at the end (J relative to the default start's),
concave-convex steps, bundle iterations and seconds. Each start then runs the selection of
``experiments/letor.py`` on its own (lam by validation NDCG@10, NERU@10 for NERU; ties go
to the larger lam), with test NDCG@10, MAP and NERU@10 (LETOR rules), so that the spread
of the test figures over starts shows how far the objective alone determines them.

J is evaluated the same way for every start: the latent loss of the returned model (the
latent part fixed at its own scores) plus the regularizer. A fit whose J ends more than
``ELSEWHERE`` (1 %, relative) above the default start's is counted as having stopped at
another stationary point (random starts can end near w = 0, where the scores all but tie),
and the cosines with the default model are reported over the other fits.
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
    nonneg_int,
    progress,
    script,
    tolerance,
    write_csv,
    write_text,
)
from letor import best_feature, query_measures

import bmrm
import losses

GRID = (1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 3e-3, 5e-3, 1e-2, 2e-2, 3e-2, 5e-2, 0.1, 0.2, 0.5, 1.0)
PARAMS = {"ndcg": {}, "neru": {"k": 10}}
SELECT = {"ndcg": "NDCG@10", "neru": "NERU@10"}
REPORTED = ("NDCG@10", "MAP", "NERU@10")
ELSEWHERE = 1e-2  # J this far above the default start's: another stationary point


def objective(loss, lam: float, w: np.ndarray, X, y, qid) -> float:
    """J(w) = lam·½‖w‖² + mean latent loss of the scores X w."""
    return 0.5 * lam * float(w @ w) + float(losses.risk(loss, X @ w, y, qid)[0])


def starts(name, lam, X, y, qid, norm, feature, sign, n_random, seed, fold, tol) -> dict:
    """The starting points other than the default, in report order."""
    rng = np.random.default_rng([seed, fold, tuple(PARAMS).index(name), round(lam * 1e12)])
    out = {
        "pairs": bmrm.fit(
            X, y, name, qid, lam=lam, tol=tol, loss_params={**PARAMS[name], "ties": "pairs"}
        ).coef_
    }
    e = np.zeros(X.shape[1])
    e[feature] = sign * norm
    out["feature"] = e
    for i in range(n_random):
        v = rng.standard_normal(X.shape[1])
        out[f"random{i + 1}"] = v * (norm / np.linalg.norm(v))
    return out


def select(rows: list[dict]) -> dict:
    """Per (loss, start, fold) the row of the lam chosen on validation (ties: larger lam)."""
    chosen = {}
    for r in sorted(rows, key=lambda r: r["lam"]):
        key = (r["loss"], r["start"], r["fold"])
        if key not in chosen or r["vali"] >= chosen[key]["vali"]:
            chosen[key] = r
    return chosen


@script
def main(argv=None) -> int:
    parser = base_parser("cccp_starts", __doc__.splitlines()[0])
    parser.add_argument("--folds", nargs="+", type=fold_number, default=None)
    parser.add_argument("--losses", nargs="+", default=None, choices=tuple(PARAMS))
    parser.add_argument("--lams", nargs="+", type=lam_value, default=None)
    parser.add_argument(
        "--random", type=nonneg_int, default=None, help="random starts (default 3)"
    )
    parser.add_argument("--tol", type=tolerance, default=1e-4)
    parser.add_argument("--seed", type=nonneg_int, default=0)
    args = parser.parse_args(argv)
    check_distinct(parser, "--folds", args.folds)
    check_distinct(parser, "--losses", args.losses)
    folds = tuple(given(args.folds, (1,) if args.quick else (1, 2, 3, 4, 5)))
    names = tuple(given(args.losses, ("ndcg",) if args.quick else ("ndcg", "neru")))
    lams = tuple(sorted(set(given(args.lams, (1e-2, 0.1) if args.quick else GRID))))
    n_random = given(args.random, 1 if args.quick else 3)
    root = mq2008_root(args.data)
    warnings.simplefilter("ignore", bmrm.ConvergenceWarning)
    rows = []
    started = time.perf_counter()
    for fold in folds:
        splits = load_letor(root, fold)
        X, y, qid = splits["train"]
        if args.quick:
            keep = np.isin(qid, np.unique(qid)[:80])
            X, y, qid = X[keep], y[keep], qid[keep]
        feature, sign = best_feature(X, y, qid)
        for name in names:
            loss = losses.get(name, **PARAMS[name])
            for lam in lams:
                t = time.perf_counter()
                model = bmrm.fit(X, y, name, qid, lam=lam, tol=args.tol, loss_params=PARAMS[name])
                fits = {"ordinal": (None, model, time.perf_counter() - t)}
                norm = float(np.linalg.norm(model.coef_))
                others = starts(
                    name, lam, X, y, qid, norm, feature, sign, n_random, args.seed, fold, args.tol
                )
                for start, w0 in others.items():
                    t = time.perf_counter()
                    fitted = bmrm.fit(
                        X, y, name, qid, lam=lam, tol=args.tol, w0=w0, loss_params=PARAMS[name]
                    )
                    fits[start] = (w0, fitted, time.perf_counter() - t)
                for start, (w0, fitted, seconds) in fits.items():
                    w = fitted.coef_
                    res = fitted.result_
                    J = objective(loss, lam, w, X, y, qid)
                    if start == "ordinal":  # first: the default start's J is the reference
                        base = J
                    row = {
                        "fold": fold,
                        "loss": name,
                        "lam": lam,
                        "start": start,
                        "J_start": np.nan if w0 is None else objective(loss, lam, w0, X, y, qid),
                        "J": J,
                        "rel_J": J / base - 1.0,
                        "cccp_steps": res.n_outer,
                        "iterations": res.nit,
                        "seconds": seconds,
                        "coef_norm": float(np.linalg.norm(w)),
                        "cosine": float(w @ model.coef_)
                        / max(float(np.linalg.norm(w)) * norm, 1e-300),
                    }
                    for split in ("vali", "test"):
                        Xs, ys, qs = splits[split]
                        m = query_measures(ys, Xs @ w, qs)
                        if split == "vali":
                            row["vali"] = float(m[SELECT[name]].mean())
                        else:
                            row.update({f"test {k}": float(m[k].mean()) for k in REPORTED})
                    rows.append(row)
                progress(
                    f"Fold{fold} {name} lam={lam:g}: J {base:.6f}, other starts J/J−1 "
                    + " ".join(f"{r['rel_J']:+.1e}" for r in rows[-len(fits) + 1 :])
                )
    total = time.perf_counter() - started
    text = report(rows, folds, names, lams, args, total)
    make_out(args.out)
    write_csv(args.out / "results.csv", rows)
    write_text(args.out / "results.md", text)
    print(text)
    return 0


def report(rows, folds, names, lams, args, total) -> str:
    order = list(dict.fromkeys(r["start"] for r in rows))
    chosen = select(rows)
    lines = [
        "# The concave-convex procedure from several starts (MQ2008)",
        "",
        f"Folds {', '.join(map(str, folds))}{' (80 training queries)' if args.quick else ''}; "
        f"{len(lams)} lams from {min(lams):g} to {max(lams):g}; tol {args.tol:g}; "
        f"{total:.0f} s in all.",
        "",
        "## Objective at the end, relative to the default start's (all fits)",
        "",
    ]
    table = []
    for name in names:
        for start in order[1:]:
            mine = [r for r in rows if r["loss"] == name and r["start"] == start]
            rel = np.array([r["rel_J"] for r in mine])
            cos = np.array([r["cosine"] for r in mine])
            near = rel <= ELSEWHERE
            table.append([name, start, len(rel), f"{np.median(rel):+.1e}", f"{rel.min():+.1e}",
                          f"{rel.max():+.1e}", int((~near).sum()),
                          f"{cos[near].min():.4f}" if near.any() else "—"])  # fmt: skip
    header = ["loss", "start", "fits", "median J/J_default − 1", "min", "max",
              f"J/J_default − 1 > {ELSEWHERE:g}", "min cosine of the others"]  # fmt: skip
    lines += [
        markdown_table(header, table),
        "",
        f"A fit whose J is more than {ELSEWHERE:g} (relative) above the default start's ended at "
        "another stationary point; the cosine with the default start's model is taken over "
        "the other fits.",
    ]
    lines += ["", "## Each start's own selection (test means over the folds)", ""]
    table = []
    for name in names:
        for start in order:
            picked = [chosen[(name, start, f)] for f in folds]
            table.append(
                [name, start, " ".join(f"{r['lam']:g}" for r in picked)]
                + [float(np.mean([r[f"test {k}"] for r in picked])) for k in REPORTED]
            )
        spread = {
            k: [float(np.mean([chosen[(name, s, f)][f"test {k}"] for f in folds])) for s in order]
            for k in REPORTED
        }
        table.append([name, "spread (max − min)", ""] + [max(v) - min(v) for v in spread.values()])
    lines.append(markdown_table(["loss", "start", "lams chosen", *REPORTED], table))
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())

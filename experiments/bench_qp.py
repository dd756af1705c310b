"""Master-problem benchmark: the dual QP over the simplex for bundles of up to 200 planes.

    python experiments/bench_qp.py [--planes 200] [--repeats 15] [--out results/bench_qp]

Solves min ½αᵀQα − bᵀα over the simplex (Q = G/lam, the L2 master's dual) with

* ``active_set``: the package's exact active-set solver (:mod:`bmrm.solver.qp`), as called by
  the solver loop;
* ``pair_steps``: sequential minimal optimisation (second-order pair selection), capped at
  5,000 steps as it was when it was the package's first choice;
* ``clarabel``: Clarabel's interior-point method on the same QP, called directly;
* ``cvxpy``: the whole master problem as the package's cvxpy model (re-solved with new
  parameter values, as in the solver loop).

Bundles: 200 random dense planes (d = 136, as in MSLR-WEB10K) at several lam, duplicated
and low-rank planes, and the bundles met by real fits (ordinal and NDCG losses at
lam = 1e-4, recorded iteration by iteration). Each is solved *cold* (from the zero plane)
and *warm* (the previous iteration's weights plus one new plane, as in the solver loop).
Every timing is the median of ``--repeats`` runs after an untimed one; the objective is
compared with Clarabel's at tight tolerances. Writes ``results.csv`` and ``results.md``.
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bmrm  # noqa: E402
from bmrm.solver.bundle import Bundle  # noqa: E402
from bmrm.solver.masters import CvxpyMaster, _interior_point_dual  # noqa: E402
from bmrm.solver.methods import PlainBMRM  # noqa: E402
from bmrm.solver.qp import solve_simplex_qp, solve_simplex_qp_active_set  # noqa: E402
from experiments._common import (  # noqa: E402
    base_parser,
    int_at_least,
    make_out,
    markdown_table,
    positive_int,
    progress,
    script,
    write_csv,
    write_text,
)

KKT_TOL = 1e-11  # relative to the problem's scale, as in QPMaster


def scale_of(Q, b):
    return 1.0 + np.abs(b).max() + 1e-3 * np.abs(np.diag(Q)).max()


def synthetic(kind, k, d, lam, rng):
    """A bundle of k planes (the zero plane first) and a warm start for its last plane."""
    A = rng.standard_normal((k, d))
    b = rng.standard_normal(k)
    if kind == "duplicates":
        idx = rng.integers(1, k // 2, size=k)
        A, b = A[idx], b[idx] + rng.choice([0.0, 1e-9], size=k)
    elif kind == "low_rank":
        A = rng.standard_normal((k, 5)) @ rng.standard_normal((5, d))
    A[0] = 0.0
    b[0] = 0.0
    G = A @ A.T
    # the previous iteration's solution on the first k - 1 planes
    Qp = G[: k - 1, : k - 1] / lam
    alpha = np.zeros(k - 1)
    alpha[0] = 1.0
    solve_simplex_qp_active_set(
        Qp, b[: k - 1].copy(), alpha, np.empty(k - 1), KKT_TOL * scale_of(Qp, b), 10**6
    )
    return A, G / lam, b, np.append(alpha, 0.0)


class Recorder(PlainBMRM):
    """Plain BMRM that keeps each iteration's bundle and dual weights."""

    def __init__(self):
        self.snapshots = []

    def step(self, state):
        super().step(state)  # one plane added, the master solved
        bundle = state.bundle
        k = bundle.size
        snapshot = (bundle.A[:k], bundle.G[:k, :k], bundle.b[:k], bundle.alpha[:k])
        self.snapshots.append(tuple(x.copy() for x in snapshot))


def recorded(loss, lam, n_rows, planes, seed=0):
    """(A, Q, b, warm α) for the three largest bundles of a real fit, each met when the
    bundle had just grown by one plane (so the previous weights are the warm start)."""
    from experiments.bench_solver import LOSSES, make_data

    X, y, qid = make_data(n_rows, seed=seed)
    rec = Recorder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bmrm.ConvergenceWarning)
        bmrm.fit(
            X,
            y,
            loss,
            qid,
            lam=lam,
            tol=1e-6,
            max_iter=planes - 1,
            bundle_size=planes,
            method=rec,
            loss_params=LOSSES[loss],
        )
    out = []
    for prev, cur in zip(rec.snapshots[:-1], rec.snapshots[1:], strict=False):
        A, G, b, _ = cur
        if len(b) == len(prev[2]) + 1:
            out.append((A, G / lam, b, np.append(prev[3], 0.0)))
    # the largest bundles
    return sorted(out, key=lambda case: len(case[2]))[-3:]


def time_it(fn, repeats):
    fn()  # untimed: compilation, caches
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def solvers(A, Q, b, lam):
    k = len(b)
    tol = KKT_TOL * scale_of(Q, b)

    def active_set(start):
        alpha = start.copy()
        _, viol = solve_simplex_qp_active_set(Q, b, alpha, np.empty(k), tol, 50 * k + 1000)
        return alpha, viol

    def pair_steps(start):
        alpha = start.copy()
        _, viol = solve_simplex_qp(Q, b, alpha, np.empty(k), tol, 5000)
        return alpha, viol

    def clarabel(start):
        alpha = _interior_point_dual(Q, b, start.copy())
        g = Q @ alpha - b
        return alpha, g[alpha > 0].max() - g.min()

    bundle = Bundle(A.shape[1], capacity=k + 1)
    for a_i, b_i in zip(A[1:], b[1:], strict=True):
        bundle.add(a_i, b_i)
    cvx = CvxpyMaster(A.shape[1], k + 1, lam, "l2")

    def cvxpy(start):
        _, _, dual = cvx.solve(bundle)
        alpha = dual[:k] / dual[:k].sum()
        g = Q @ alpha - b
        return alpha, g[alpha > 0].max() - g.min()

    return {
        "active_set": active_set,
        "pair_steps": pair_steps,
        "clarabel": clarabel,
        "cvxpy": cvxpy,
    }


@script
def main(argv=None) -> int:
    parser = base_parser("bench_qp", __doc__.splitlines()[0], data=False, quick=False)
    parser.add_argument(
        "--planes", type=int_at_least(4), default=200, help="planes per bundle (at least 4)"
    )
    parser.add_argument("--features", type=positive_int, default=136)
    parser.add_argument("--repeats", type=positive_int, default=15)
    parser.add_argument(
        "--fit-rows", type=positive_int, default=20_000, help="rows of the recorded fits"
    )
    parser.add_argument("--no-cvxpy", action="store_true", help="skip the (slow) cvxpy model")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for the tests")
    args = parser.parse_args(argv)
    if args.quick:
        args.planes, args.features, args.repeats, args.fit_rows = 30, 10, 2, 2_000
    rng = np.random.default_rng(0)
    k, d = args.planes, args.features

    cases = []
    for lam in (1e-4, 1e-3, 1e-2, 1.0):
        cases.append((f"random lam={lam:g}", lam, *synthetic("random", k, d, lam, rng)))
    for kind in ("duplicates", "low_rank"):
        cases.append((f"{kind} lam=0.001", 1e-3, *synthetic(kind, k, d, 1e-3, rng)))
    for loss in ("ordinal", "ndcg"):
        progress(f"recording the bundles of a {loss} fit")
        fits = recorded(loss, 1e-4, args.fit_rows, k)
        for i, case in enumerate(fits):
            cases.append((f"{loss} fit lam=0.0001 #{i}", 1e-4, *case))

    rows = []
    for name, lam, A, Q, b, warm in cases:
        k_case = len(b)
        cold = np.zeros(k_case)
        cold[0] = 1.0
        ref_alpha = _interior_point_dual(Q, b, np.full(k_case, 1.0 / k_case))
        ref = min(
            0.5 * ref_alpha @ Q @ ref_alpha - b @ ref_alpha,
            0.5 * warm @ Q @ warm - b @ warm,
        )
        for solver, fn in solvers(A, Q, b, lam).items():
            if solver == "cvxpy" and args.no_cvxpy:
                continue
            for start_name, start in (("cold", cold), ("warm", warm)):
                if solver in ("clarabel", "cvxpy") and start_name == "warm":
                    continue  # neither takes a warm start
                alpha, _ = fn(start)
                value = 0.5 * alpha @ Q @ alpha - b @ alpha
                g = Q @ alpha - b
                # Frank-Wolfe gap: f(α) − min f <= αᵀ∇f(α) − min_j ∇_j f(α)
                fw_gap = float(alpha @ g - g.min())
                seconds = time_it(lambda fn=fn, start=start: fn(start), args.repeats)
                rows.append(
                    {
                        "case": name,
                        "planes": k_case,
                        "support": int((alpha > 0).sum()),
                        "solver": solver,
                        "start": start_name,
                        "ms": 1e3 * seconds,
                        "fw_gap": fw_gap,
                        "scale": scale_of(Q, b),
                        "rel_excess": float((value - ref) / max(1.0, abs(ref))),
                    }
                )
        progress(f"{name}: done")

    header = [
        "case",
        "planes",
        "support",
        "solver",
        "start",
        "median ms",
        "x active_set",
        "certified gap / scale",
        "objective − ref (rel.)",
    ]
    base = {(r["case"], r["start"]): r["ms"] for r in rows if r["solver"] == "active_set"}
    table = markdown_table(
        header,
        [
            (
                r["case"],
                r["planes"],
                r["support"],
                r["solver"],
                r["start"],
                f"{r['ms']:.3f}",
                f"{r['ms'] / base[(r['case'], 'cold' if r['start'] == 'cold' else 'warm')]:.1f}",
                f"{r['fw_gap'] / r['scale']:.1e}",
                f"{r['rel_excess']:.1e}",
            )
            for r in rows
        ],
    )
    note = (
        f"{k} planes, d = {d}; medians of {args.repeats} runs after an untimed one; "
        "'x active_set' is the time relative to the active-set solver from the same start; "
        "the certified gap is αᵀ∇f − min ∇f (Frank-Wolfe), which bounds f(α) − min f, over "
        "the scale 1 + max|b| + 1e-3·max Q_ii used by the KKT test (tolerance 1e-11); "
        "the reference objective is Clarabel's (tolerances 1e-12) or the warm start's, "
        "whichever is lower."
    )
    make_out(args.out)
    write_csv(args.out / "results.csv", rows)
    write_text(args.out / "results.md", note + "\n\n" + table + "\n")
    print(note + "\n\n" + table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Iterations to SVM^rank's objective: every solver method on the same objective.

    python experiments/bench_iterations.py [--ltr /tmp/ltr] [--sets small medium demo]
        [--C 1 100] [--demo-losses ndcg ndcg-increasing ndcg-pairs ordinal]
        [--methods bmrm inout level ls-bmrm ocas bmrm+cache level+cache ocas+cache
                   'bmrm+cache:max_streak=20,floor=false,bundle_size=200'
                   bmrm:cut_cache=false 'bmrm:master_rtol=0,max_idle=none' ...]
        [--repeats 1] [--max-time 600] [--max-iter 20000] [--out results/bench_iterations]

``bmrm`` is plain BMRM as ``bmrm.fit`` runs it, with the per-query cut cache where it
applies (:class:`bmrm.solver.methods.PlainBMRM`); ``bmrm:cut_cache=false`` is plain BMRM
without it. Within each repetition every method runs once, in the order given, so that all
see the same spread of load.

SVM^rank's objective ½‖w‖² + C·(1/n_q)·Σ_q Σ_{y_i > y_j} max(0, 1 − (f_i − f_j)) is
``bmrm.fit(X, y, losses.get("ordinal", normalize="none"), qid, lam=1/C)`` with J = pval / C.
The small and medium sets are made by ``../shared/tools/gen_ltr.py`` (its README gives the
commands and SVM^rank's final objective on each; the train part of ``NAME.npz`` is read as
float64). For each set, C and method the script reports, at the first iteration where
(a) the best objective is within 1e-6 (relative) of SVM^rank's and (b) the relative gap is
at most 1e-3: iterations, oracle calls (risk evaluations with or without a subgradient),
passes over X (products X w and Xᵀ g) and seconds, split into oracle, master, the cut
cache's own seconds (cache cuts and storing planes) and other. A method name ending in
``+cache`` runs that method with the per-query cut cache (:mod:`bmrm.solver.cut_cache`); its
iterations are oracle calls plus cache cuts (counted apart). ``NAME:key=value,...`` sets the
fit's ``bundle_size``/``max_idle`` and the cache's options (:func:`parse_method`).
The demo data of :mod:`bmrm.demo` (NDCG@10 with truncated c in its three tie rules, and
ordinal, at lam 1e-2 and 1e-4) has no SVM^rank figure: only (b) is reported there, and
whether it came within the demo's budget of 20 s. The default NDCG (``ties="latent"``) is not
convex: its row is the whole concave-convex procedure (:mod:`bmrm.solver.cccp`, ``tol=1e-3``)
with the method solving every convex subproblem, reached when the procedure converged; its
counters add up the subproblems (``n_outer`` of them, plus the convex starting problem).

Numba compilation is excluded: an untimed fit on a small slice runs first (its seconds are
reported as the warm-up). Repetitions give medians. Writes ``results.csv`` (one row per set
x setting x method x target x repetition) and ``results.md``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import losses  # noqa: E402
from bmrm._validation import MAX_LAM, MIN_LAM  # noqa: E402
from bmrm.demo import make_ranking_data  # noqa: E402
from bmrm.solver.cccp import minimize_cccp  # noqa: E402
from bmrm.solver.cut_cache import CutCache  # noqa: E402
from bmrm.solver.loop import minimize_bmrm  # noqa: E402
from bmrm.solver.methods import METHODS, with_cut_cache  # noqa: E402
from bmrm.solver.oracle import RiskOracle  # noqa: E402
from bmrm.warmup import warmup as compile_kernels  # noqa: E402
from experiments._common import (  # noqa: E402
    base_parser,
    data_errors,
    fail,
    make_out,
    markdown_table,
    number,
    positive_float,
    positive_int,
    progress,
    script,
    write_csv,
    write_results,
    write_text,
)

# SVM^rank's final objective J = pval / C (../shared/tools/README.md)
SVMRANK_J = {
    ("small", 1.0): 29.32915,
    ("small", 100.0): 27.6464679,
    ("medium", 1.0): 197.51080,
    ("medium", 100.0): 195.6666287,
}
SVMRANK_ITER = {("small", 1.0): 48, ("small", 100.0): 631, ("medium", 1.0): 148}
SVMRANK_ITER[("medium", 100.0)] = 2737
SVMRANK_CPU = {("small", 1.0): 0.29, ("small", 100.0): 3.7, ("medium", 1.0): 32.5}
SVMRANK_CPU[("medium", 100.0)] = 597.0
GAP_TARGET = 1e-3
DEMO_BUDGET = 20.0  # seconds of solver time per fit in bmrm.demo
DEMO_LOSSES = {
    "ndcg": ("ndcg", {"truncate_c": True}),
    "ndcg-increasing": ("ndcg", {"truncate_c": True, "ties": "increasing"}),
    "ndcg-pairs": ("ndcg", {"truncate_c": True, "ties": "pairs"}),
    "ordinal": ("ordinal", {}),
}


def ltr_path(folder: Path, name: str) -> Path:
    path = folder / f"{name}.npz"
    if not path.exists():
        fail(f"{path} not found; make it with ../shared/tools/gen_ltr.py (see its README)")
    return path


def load_ltr(folder: Path, name: str):
    path = ltr_path(folder, name)
    with data_errors(path):
        z = np.load(path)
        X = np.ascontiguousarray(z["X_train"], dtype=np.float64)
        return X, z["y_train"].astype(np.int64), z["qid_train"]


def problems(args):
    """(set, setting label, X, y, qid, loss, lam, SVM^rank J or None)."""
    for name in args.sets:
        if name == "demo":
            X, y, qid = make_ranking_data(2000, 40, 50)
            split = X.shape[0] * 4 // 5
            X, y, qid = X[:split], y[:split], qid[:split]
            for label in args.demo_losses:
                loss_name, params = DEMO_LOSSES[label]
                for lam in (1e-2, 1e-4):
                    loss = losses.get(loss_name, **params)
                    yield name, f"{label} lam={lam:g}", X, y, qid, loss, lam, None
            continue
        X, y, qid = load_ltr(args.ltr, name)
        for C in args.C:
            loss = losses.get("ordinal", normalize="none")
            yield name, f"C={C:g}", X, y, qid, loss, 1.0 / C, SVMRANK_J.get((name, C))


CACHED = ("bmrm", "level", "ocas", "ls-bmrm")


def parse_method(spec: str) -> tuple[str, dict, dict]:
    """``NAME[:key=value,...]`` -> (NAME, CutCache options, fit options). The keys
    ``bundle_size`` and ``max_idle`` go to the fit (``max_idle=none``: never prune idle
    planes); ``cut_cache`` (true/false) to a method of :data:`CACHED`
    (``bmrm:cut_cache=false``: plain BMRM without the cache it uses by default);
    ``master_rtol`` to the solver state (the master's accuracy as a fraction of the gap; 0:
    exact); the others (``max_points``, ``violation``, ``max_streak``, ``floor``,
    ``reference``) to the cut cache of a ``+cache`` method."""
    name, _, opts = spec.partition(":")
    cache_opts, fit_opts = {}, {}
    for item in filter(None, opts.split(",")):
        key, _, value = item.partition("=")
        if key == "max_idle" and value.lower() == "none":
            fit_opts[key] = 2**62
        elif key in ("bundle_size", "max_idle"):
            fit_opts[key] = int(float(value))
        elif key == "master_rtol":
            fit_opts[key] = float(value)
        elif key == "cut_cache":
            fit_opts[key] = value.lower() in ("1", "true", "yes")
        elif key in ("max_points", "max_streak"):
            cache_opts[key] = int(float(value))
        elif key == "violation":
            cache_opts[key] = float(value)
        elif key == "floor":
            cache_opts[key] = value.lower() in ("1", "true", "yes")
        elif key == "reference":
            cache_opts[key] = value
        else:
            raise ValueError(f"unknown method option {key!r} in {spec!r}")
    if name not in METHODS and name.removesuffix("+cache") not in CACHED:
        raise ValueError(f"unknown method {name!r}")
    if "cut_cache" in fit_opts and name not in CACHED:
        raise ValueError(f"cut_cache needs one of {CACHED}: {spec!r}")
    if cache_opts and not name.endswith("+cache"):
        raise ValueError(f"cache options need a +cache method: {spec!r}")
    return name, cache_opts, fit_opts


def method_spec(text: str) -> str:
    """``--methods`` items, checked by :func:`parse_method`."""
    try:
        parse_method(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"must be NAME[:key=value,...]; {exc}") from None
    return text


def make_method(spec: str, cache_fraction: float | None = None):
    """A method name of :data:`METHODS`, or one of :data:`CACHED` with ``+cache``: that method
    with the cut cache (a fresh object per fit; ``cache_fraction`` overrides the cache's
    memory cap, for the warm-up on tiny data), with the options of :func:`parse_method`."""
    name, cache_opts, fit_opts = parse_method(spec)
    if name.endswith("+cache"):
        if cache_fraction is not None:
            cache_opts = {**cache_opts, "max_fraction": cache_fraction}
        method = METHODS[name.removesuffix("+cache")](cut_cache=CutCache(**cache_opts))
    elif "cut_cache" in fit_opts:
        method = METHODS[name](cut_cache=fit_opts["cut_cache"])
    elif "master_rtol" in fit_opts:
        method = METHODS[name]()
    else:
        return name
    # the method's cut_cache option is applied by its wrapper (what get_method does)
    method = with_cut_cache(method)
    if "master_rtol" in fit_opts:
        return _MasterAccuracy(method, fit_opts["master_rtol"])
    return method


class _MasterAccuracy:
    """``method`` with the master problem solved to ``rtol`` times the gap."""

    def __init__(self, method, rtol: float):
        self.method, self.rtol = method, rtol
        self.name, self.certifies = method.name, method.certifies

    def check(self, problem) -> None:
        self.method.check(problem)

    def init(self, problem, w0, options):
        state = self.method.init(problem, w0, options)
        state.master_rtol = self.rtol
        return state

    def step(self, state) -> None:
        self.method.step(state)

    def finish(self, state, result):
        return self.method.finish(state, result)


def run_cccp(oracle, d, lam, method, max_time, max_iter, cache_fraction=None):
    """The whole concave-convex fit of a latent loss; its counters if it converged."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = minimize_cccp(
            oracle,
            d,
            lam,
            tol=GAP_TARGET,
            max_time=max_time,
            max_iter=max_iter,
            method=make_method(method, cache_fraction),
        )
    elapsed = time.perf_counter() - start
    passes = int(res.n_passes)  # all subproblems', counted by the one counting oracle
    res.total_seconds = elapsed
    hits = {}
    if res.success and res.outer_converged:
        hits["gap"] = {
            "iterations": res.nit,
            "oracle_calls": res.nfev,
            "cache_cuts": getattr(res, "n_cache_cuts", 0),
            "passes": passes,
            "seconds": elapsed,
            "oracle_s": res.oracle_seconds,
            "master_s": res.master_seconds,
            "cache_s": getattr(res, "cache_seconds", 0.0),
            "other_s": elapsed
            - res.oracle_seconds
            - res.master_seconds
            - getattr(res, "cache_seconds", 0.0),
            "J": res.fun,
            "rel_gap": res.gap / abs(res.fun),
        }
    for hit in hits.values():
        hit["n_outer"] = res.n_outer
    return hits, res


def run(X, y, qid, loss, lam, method, target_J, max_time, max_iter, cache_fraction=None):
    """One fit until both targets are met; the counters at each target."""
    prepared = losses.prepare(loss, y, qid, n_samples=X.shape[0])
    oracle = RiskOracle(X, prepared)
    if getattr(loss, "latent", False):
        return run_cccp(oracle, X.shape[1], lam, method, max_time, max_iter, cache_fraction)
    hits = {}
    start = time.perf_counter()

    def snapshot(r):
        h = r.history
        elapsed = time.perf_counter() - start
        return {
            "iterations": r.nit,
            "oracle_calls": r.nfev,
            "cache_cuts": r.n_cache_cuts,
            "passes": r.n_passes,
            "seconds": elapsed,
            "oracle_s": r.oracle_seconds,
            "master_s": r.master_seconds,
            "cache_s": r.cache_seconds,
            "other_s": elapsed - r.oracle_seconds - r.master_seconds - r.cache_seconds,
            "J": r.fun,
            "rel_gap": float(h["gap"][-1]) / abs(r.fun),
        }

    def callback(r):
        if target_J is not None and "svmrank" not in hits and r.fun <= target_J * (1 + 1e-6):
            hits["svmrank"] = snapshot(r)
        if "gap" not in hits and r.gap <= GAP_TARGET * abs(r.fun):
            hits["gap"] = snapshot(r)
        if "gap" in hits and (target_J is None or "svmrank" in hits):
            raise StopIteration

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = minimize_bmrm(
            oracle,
            X.shape[1],
            lam,
            tol=1e-9,
            max_iter=max_iter,
            max_time=max_time,
            method=make_method(method, cache_fraction),
            callback=callback,
            **{
                k: v
                for k, v in parse_method(method)[2].items()
                if k not in ("master_rtol", "cut_cache")
            },
        )
    return hits, res


# SVM^rank's C, as lam = 1/C within the range of bmrm.fit
C_VALUE = number(float, 1 / MAX_LAM, 1 / MIN_LAM, name="C")


@script
def tidy(row: dict) -> dict:
    """A row of ``results.csv`` as a row of the tidy result file, with SVM^rank's reference
    iterations and solver CPU seconds (its published runs on the same sets) beside the rows
    whose target is its objective."""
    units = {"seconds": "wall_s", "oracle_s": "oracle_wall_s", "master_s": "master_wall_s",
             "cache_s": "cache_wall_s", "other_s": "other_wall_s", "J": "objective"}  # fmt: skip
    out = {
        "experiment": "bench_iterations",
        "dataset": row["set"],
        "method": row["method"],
        "setting": f"{row['setting']} target={row['target']}",
        "repetition": row["repetition"],
    }
    out.update(
        {units.get(k, k): v for k, v in row.items() if k not in ("set", "method", "setting")}
    )
    if row["target"] == "svmrank" and "=" in row["setting"]:
        key = (row["set"], float(row["setting"].split("=")[1]))
        out["svmrank_iterations"] = SVMRANK_ITER.get(key, "")
        out["svmrank_cpu_s"] = SVMRANK_CPU.get(key, "")
    return out


def main(argv=None) -> int:
    parser = base_parser("bench_iterations", __doc__, data=False, quick=False)
    parser.add_argument("--ltr", type=Path, default=Path("/tmp/ltr"), help="gen_ltr.py output")
    parser.add_argument(
        "--sets",
        nargs="+",
        default=["small", "medium", "demo"],
        help="demo, or the name of a gen_ltr.py set (NAME.npz in --ltr)",
    )
    parser.add_argument("--C", nargs="+", type=C_VALUE, default=[1.0, 100.0])
    parser.add_argument(
        "--demo-losses", nargs="+", default=list(DEMO_LOSSES), choices=list(DEMO_LOSSES)
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        type=method_spec,
        # Newton's method needs a smooth risk, which the ranking losses here are not
        default=sorted(set(METHODS) - {"newton"}),
        help="names of bmrm.solver.methods.METHODS (default: all but newton, which needs a "
        "smooth risk), or bmrm/level/ocas/ls-bmrm with +cache; "
        "each optionally followed by :key=value,... (bundle_size, max_idle for the fit; "
        "max_points, violation, max_streak, floor, reference for the cut cache; "
        "master_rtol for the master's accuracy)",
    )
    parser.add_argument("--repeats", type=positive_int, default=1)
    parser.add_argument("--max-time", type=positive_float, default=600.0)
    parser.add_argument("--max-iter", type=positive_int, default=20000)
    args = parser.parse_args(argv)
    for name in args.sets:  # the data before any work
        if name != "demo":
            ltr_path(args.ltr, name)

    t = time.perf_counter()
    Xw, yw, qw = make_ranking_data(20, 10, 5)
    for method in args.methods:
        warm = [losses.get("ordinal", normalize="none")]
        warm += [losses.get(name, **params) for name, params in DEMO_LOSSES.values()]
        for loss in warm:
            run(Xw, yw, qw, loss, 1e-2, method, None, 10.0, 20, cache_fraction=1e3)
    # the compiled master of long fits (those tiny fits take the NumPy one)
    compile_kernels(["ordinal"])
    warmup = time.perf_counter() - t
    progress(f"warm-up (numba compilation, untimed): {warmup:.1f} s")

    rows = []
    for name, setting, X, y, qid, loss, lam, target_J in problems(args):
        # repetitions outside, methods inside: each method sees the same spread of load
        for rep in range(args.repeats):
            for method in args.methods:
                progress(f"{name} {setting} {method} repetition {rep + 1}")
                hits, res = run(
                    X, y, qid, loss, lam, method, target_J, args.max_time, args.max_iter
                )
                for target in ("svmrank", "gap"):
                    if target == "svmrank" and target_J is None:
                        continue
                    row = {
                        "set": name,
                        "setting": setting,
                        "method": method,
                        "target": target,
                        "repetition": rep,
                        "reached": target in hits,
                    }
                    if name == "demo":
                        hit = hits.get(target)
                        row["within_demo_budget"] = hit is not None and (
                            hit["seconds"] <= DEMO_BUDGET
                        )
                    row.update(
                        hits.get(
                            target,
                            {
                                "iterations": res.nit,
                                "seconds": res.total_seconds,
                                "oracle_calls": res.nfev,
                                "cache_cuts": getattr(res, "n_cache_cuts", 0),
                                "passes": res.n_passes,
                                "oracle_s": res.oracle_seconds,
                                "master_s": res.master_seconds,
                                "cache_s": getattr(res, "cache_seconds", 0.0),
                                "other_s": res.total_seconds
                                - res.oracle_seconds
                                - res.master_seconds
                                - getattr(res, "cache_seconds", 0.0),
                                "J": res.fun,
                                "rel_gap": res.gap / abs(res.fun),
                            },
                        )
                    )
                    rows.append(row)
                    progress(f"  {target}: {row}")

    groups = {}
    for row in rows:
        groups.setdefault((row["set"], row["setting"], row["target"], row["method"]), []).append(
            row
        )
    table = []
    for (name, setting, target, method), group in groups.items():

        def med(key, group=group):
            return statistics.median(r[key] for r in group)

        reached = all(r["reached"] for r in group)
        ref = ""
        if name == "demo":
            within = sum(r["within_demo_budget"] for r in group)
            ref = f"within {DEMO_BUDGET:g} s: {within}/{len(group)}"
        if target == "svmrank":
            key = (name, float(setting.split("=")[1]))
            ref = f"{SVMRANK_ITER.get(key, '')} it, {SVMRANK_CPU.get(key, '')} s"
        table.append(
            (
                name,
                setting,
                "SVM^rank J" if target == "svmrank" else "gap 1e-3",
                method,
                ("" if reached else "not reached: ") + f"{med('iterations'):.0f}",
                f"{med('oracle_calls'):.0f}",
                f"{med('cache_cuts'):.0f}",
                f"{med('passes'):.0f}",
                f"{med('seconds'):.2f}",
                f"{med('oracle_s'):.2f}",
                f"{med('master_s'):.2f}",
                f"{med('cache_s'):.2f}",
                f"{med('other_s'):.2f}",
                f"{med('rel_gap'):.1e}",
                ref,
            )
        )
    header = (
        "set",
        "setting",
        "target",
        "method",
        "iterations",
        "oracle calls",
        "cache cuts",
        "passes over X",
        "seconds",
        "oracle s",
        "master s",
        "cache s",
        "other s",
        "relative gap then",
        "SVM^rank (demo: runs within budget)",
    )
    md = markdown_table(header, table)
    make_out(args.out)
    write_csv(args.out / "results.csv", rows)
    write_results("bench_iterations", [tidy(r) for r in rows], args.results or args.out)
    write_text(
        args.out / "results.md",
        f"Warm-up (numba compilation, excluded): {warmup:.1f} s. Medians of {args.repeats} "
        f"repetition(s).\n\n{md}\n",
    )
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

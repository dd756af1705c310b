"""The Newton-CG solver against LIBLINEAR-RankSVM and scikit-learn's second-order solvers.

    python experiments/bench_newton.py --synthetic DIR [--sets small,medium] [--C 1,100]
        [--repeats 3] [--liblinear PATH] [--skip-sklearn] [--out results/bench_newton]

Data
----
The synthetic LETOR-like sets of ``gen_ltr.py`` (``DIR/NAME.npz``, the training part
``X_train`` float32, ``y_train``, ``qid_train``; and for LIBLINEAR the text file
``DIR/NAME.train.svmlight`` that holds the same numbers to five significant digits)::

    python ../shared/tools/gen_ltr.py --name small --queries 1000 --docs 20 \
        --features 46 --seed 1 --out DIR
    python ../shared/tools/gen_ltr.py --name medium --queries 10000 --docs 50 \
        --features 136 --seed 2 --out DIR

Objectives
----------
L2-loss RankSVM. LIBLINEAR's RankSVM (``train -s 8 -c C``; Lee & Lin, Neural Computation
26, 2014) minimises f_LL(w) = ½‖w‖² + C Σ_q Σ_{y_i < y_j} max(0, 1 − (f_j − f_i))². The
package minimises J(w) = (λ/2)‖w‖² + R(w) with the ordinal loss, ``hinge="squared"``,
``normalize="none"``: R is the mean over the n_q training queries of their summed pair
terms, so λ = 1 / (n_q C) and f_LL = n_q C · J. LIBLINEAR's final objective is recomputed
here from the w of its model file by the package's own risk on the same float32 X
(``J_LL``); the package's time "to LIBLINEAR" is its time until J <= J_LL.

Logistic and squared losses. scikit-learn's ``LogisticRegression(solver="newton-cg", C=C,
fit_intercept=False)`` minimises ½‖w‖² + C Σ_i log(1 + exp(−y_i f_i)) on the binary labels
y > 0, and ``Ridge(alpha=1/C, fit_intercept=False)`` ‖y − f‖² + (1/C)‖w‖² on the graded
labels: both are n C times the package's J with its ``logistic`` and ``squared`` losses
(the mean over rows; the squared loss is ½(f − y)²) at λ = 1 / (n C), n the number of rows.
Their objectives are recomputed the same way, and the package's time to them reported.

Measures
--------
The package's Newton-CG (``method="newton"``, run to a relative gap of 1e-8) and, for the
choice of ``method="auto"``, the level bundle method that it chose before (run to 1e-3).
Per setting: iterations (Newton steps, LIBLINEAR's TRON iterations, the bundle method's
oracle iterations), Hessian-vector products, passes over X, CPU and wall seconds of
the package's fit (argument checks and target preparation included, data loading excluded)
until the objective of the peer, and until the certified relative gap is 1e-3; the peer's
solver CPU seconds (LIBLINEAR's own ``solver cpu seconds``, which excludes reading the text
file, beside the wall seconds of its whole run; scikit-learn's ``fit``, CPU and wall).
Medians over ``--repeats`` runs, after one untimed warm-up run each (numba's compilation;
its wall seconds are reported apart). CPU seconds are the process's (all threads; the
package spreads kernels over numba's thread count).

Writes ``results.csv`` (one row per set × C × solver × repetition) and ``results.md``.
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from _common import (
    REPO,
    base_parser,
    comma_list,
    fail,
    int_at_least,
    make_out,
    markdown_table,
    progress,
    script,
    write_csv,
    write_results,
    write_text,
)

import bmrm
import losses
from bmrm.solver.oracle import RiskOracle

SETS = ("small", "medium")
# iterations at most per fit (the bundle method's runs on the larger C)
MAX_ITER = 2000
BUILD = REPO.parent / "shared" / "tools" / "peers" / "build-liblinear-ranksvm.sh"


def c_values(text: str) -> list[float]:
    values = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"must be positive numbers; got {text!r}")
        values.append(value)
    return values


def parse_args(argv=None):
    parser = base_parser("bench_newton", __doc__.split("\n")[0], data=False, quick=False)
    parser.add_argument("--synthetic", type=Path, required=True, help="gen_ltr.py's folder")
    parser.add_argument("--sets", type=comma_list(SETS), default=list(SETS))
    parser.add_argument("--C", type=c_values, default=[1.0, 100.0])
    parser.add_argument("--repeats", type=int_at_least(1), default=3)
    parser.add_argument("--liblinear", type=Path, help="LIBLINEAR-RankSVM's train program")
    parser.add_argument("--skip-sklearn", action="store_true")
    parser.add_argument(
        "--methods",
        type=comma_list(("newton", "level")),
        default=["newton", "level"],
        help='the package\'s solvers (level: the bundle method that "auto" chose before)',
    )
    return parser.parse_args(argv)


def liblinear_program(given: Path | None) -> tuple[Path | None, str]:
    """The ``train`` program and an empty reason, or None and why LIBLINEAR is skipped."""
    if given is not None:
        if not given.is_file():
            fail(f"--liblinear {given} is not a file")
        return given, ""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        return None, "no C compiler found to build LIBLINEAR-RankSVM"
    if shutil.which("make") is None or not BUILD.is_file():
        return None, f"make or the build script {BUILD} not found"
    out = Path(tempfile.mkdtemp(prefix="liblinear-ranksvm-"))
    done = subprocess.run(["bash", str(BUILD), str(out)], capture_output=True, text=True)
    program = out / "train"
    if done.returncode != 0 or not program.is_file():
        return None, f"building LIBLINEAR-RankSVM failed: {done.stderr.strip()[-200:]}"
    return program, ""


def load(folder: Path, name: str):
    path = folder / f"{name}.npz"
    if not path.is_file():
        fail(f"{path} not found (generate it with gen_ltr.py, see --help)")
    z = np.load(path)
    return z["X_train"], z["y_train"].astype(np.int64), z["qid_train"]


def objective(X, y, qid, loss, lam: float, w) -> float:
    """J(w) = (λ/2)‖w‖² + R(w) by the package's own oracle (X w summed in float64)."""
    oracle = RiskOracle(X, losses.prepare(loss, y, qid))
    R, _ = oracle.risk_at(oracle.scores(np.asarray(w, dtype=np.float64)))
    return 0.5 * lam * float(w @ w) + R


def run_liblinear(program: Path, text: Path, C: float):
    """(w, its printed iterations, solver CPU seconds, wall seconds of the whole run)."""
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "model"
        start = time.perf_counter()
        done = subprocess.run(
            [str(program), "-s", "8", "-c", repr(C), str(text), str(model)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        wall = time.perf_counter() - start
        lines = model.read_text().split("\n")
    w = np.array([float(v) for v in lines[lines.index("w") + 1 :] if v.strip()])
    output = done.stdout + done.stderr
    cpu = float(re.search(r"solver cpu seconds: ([0-9.]+)", output).group(1))
    iterations = len(re.findall(r"^iter\s", output, flags=re.M))
    return w, iterations, cpu, wall


def fit_timed(X, y, qid, loss, lam: float, tol: float, method: str):
    """A fit with the CPU and wall seconds at each iteration (callback)."""
    marks = []

    def callback(res):
        marks.append((time.process_time(), time.perf_counter()))

    cpu0, wall0 = time.process_time(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bmrm.ConvergenceWarning)
        model = bmrm.fit(
            X, y, loss, qid, lam=lam, method=method, tol=tol, max_iter=MAX_ITER,
            callback=callback,
        )  # fmt: skip
    res = model.result_
    cpu = np.array([m[0] for m in marks]) - cpu0
    wall = np.array([m[1] for m in marks]) - wall0
    return res, cpu, wall


def first(res, cpu, wall, reached):
    """The counters and seconds at the first iteration where ``reached`` holds; Newton's
    iterations are counted as its steps (its first iteration evaluates the start point,
    as LIBLINEAR's count leaves out)."""
    hist = res.history
    hits = np.flatnonzero(reached)
    if hits.size == 0:
        return None
    k = int(hits[0])
    return {
        "iterations": k if res.method == "newton" else k + 1,
        "hessp": int(hist["n_hessp"][k]) if "n_hessp" in hist else "",
        "passes": int(hist["n_passes"][k]),
        "cpu_s": float(cpu[k]),
        "wall_s": float(wall[k]),
        "objective": float(hist["best_objective"][k]),
    }


def package_rows(X, y, qid, loss, lam, targets, repeats, base, method):
    """Rows of the package's runs: to each target objective (name -> J) and to gap 1e-3."""
    tol = 1e-8 if method == "newton" else 1e-3
    warm = time.perf_counter()
    fit_timed(X, y, qid, loss, lam, tol, method)
    warm = time.perf_counter() - warm
    rows = []
    for rep in range(repeats):
        res, cpu, wall = fit_timed(X, y, qid, loss, lam, tol, method)
        hist = res.history
        best = hist["best_objective"]
        goals = {"gap 1e-3": hist["gap"] <= 1e-3 * best}
        for name, J in targets.items():
            goals[f"to {name}"] = best <= J
        for goal, reached in goals.items():
            row = first(res, cpu, wall, reached)
            if row is None:
                row = {"iterations": "not reached"}
            rows.append({**base, "solver": f"package {method}", "goal": goal, "repetition": rep,
                         "warmup_wall_s": warm, **row})  # fmt: skip
    return rows


def median_rows(rows):
    """One row per (set, C, loss, solver, goal) with the medians over repetitions."""
    keys = ("set", "C", "loss", "solver", "goal")
    groups = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in keys), []).append(row)
    out = []
    for key, group in groups.items():
        row = dict(zip(keys, key, strict=True))
        for field in ("iterations", "hessp", "passes", "cpu_s", "wall_s", "objective"):
            values = [g[field] for g in group if isinstance(g.get(field), (int, float))]
            row[field] = statistics.median(values) if values else ""
        if all(g["iterations"] == "not reached" for g in group):
            row["iterations"] = "not reached"
        out.append(row)
    return out


def fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.7g}"
    return str(value)


@script
def main(argv=None) -> int:
    args = parse_args(argv)
    program, reason = liblinear_program(args.liblinear)
    data = {name: load(args.synthetic, name) for name in args.sets}
    out = make_out(args.out)
    rows = []
    notes = []
    if program is None:
        notes.append(f"LIBLINEAR-RankSVM skipped: {reason}")
    for name, (X, y, qid) in data.items():
        n_q = len(np.unique(qid))
        n = len(y)
        for C in args.C:
            # the L2-loss RankSVM
            loss = losses.get("ordinal", hinge="squared", normalize="none")
            lam = 1.0 / (n_q * C)
            base = {"set": name, "C": C, "loss": "squared hinge"}
            targets = {}
            if program is not None:
                text = args.synthetic / f"{name}.train.svmlight"
                if not text.is_file():
                    fail(f"{text} not found (generate it with gen_ltr.py, see --help)")
                progress(f"{name} C={C}: LIBLINEAR-RankSVM")
                run_liblinear(program, text, C)  # warm-up: the file into the page cache
                for rep in range(args.repeats):
                    w, iterations, cpu, wall = run_liblinear(program, text, C)
                    J = objective(X, y, qid, loss, lam, w)
                    targets["LIBLINEAR"] = J
                    rows.append({**base, "solver": "LIBLINEAR-RankSVM", "goal": "its stop",
                                 "repetition": rep, "iterations": iterations, "cpu_s": cpu,
                                 "wall_s": wall, "objective": J,
                                 "f_liblinear": n_q * C * J})  # fmt: skip
            for method in args.methods:
                progress(f"{name} C={C}: package {method}, squared hinge")
                rows += package_rows(X, y, qid, loss, lam, targets, args.repeats, base, method)
            if args.skip_sklearn:
                continue
            from sklearn.linear_model import LogisticRegression, Ridge

            lam = 1.0 / (n * C)
            for label, loss_name, peer, target in (
                ("logistic", "logistic", LogisticRegression(C=C, solver="newton-cg",
                 fit_intercept=False), (y > 0).astype(np.float64)),
                ("squared", "squared", Ridge(alpha=1.0 / C, fit_intercept=False),
                 y.astype(np.float64)),
            ):  # fmt: skip
                progress(f"{name} C={C}: {label} against scikit-learn")
                base = {"set": name, "C": C, "loss": label}
                peer_name = type(peer).__name__
                peer.fit(X, target)  # warm-up
                for rep in range(args.repeats):
                    cpu0, wall0 = time.process_time(), time.perf_counter()
                    peer.fit(X, target)
                    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
                    w = np.asarray(peer.coef_, dtype=np.float64).ravel()
                    J = objective(X, target, None, loss_name, lam, w)
                    rows.append({**base, "solver": peer_name, "goal": "its stop",
                                 "repetition": rep, "iterations": int(np.max(getattr(
                                     peer, "n_iter_", [0]) or 0)), "cpu_s": cpu,
                                 "wall_s": wall, "objective": J})  # fmt: skip
                for method in args.methods:
                    rows += package_rows(
                        X, target, None, loss_name, lam, {peer_name: J}, args.repeats, base,
                        method,
                    )  # fmt: skip
    write_csv(out / "results.csv", rows)
    tidy = [
        {
            "experiment": "bench_newton",
            "dataset": r["set"],
            "method": r["solver"],
            "setting": f"{r['loss']} C={r['C']:g} {r['goal']}",
            **{k: v for k, v in r.items() if k not in ("set", "solver")},
        }
        for r in rows
    ]
    write_results("bench_newton", tidy, args.results or out)
    table = median_rows(rows)
    header = ["set", "C", "loss", "solver", "goal", "iterations", "hessp", "passes", "cpu_s",
              "wall_s", "objective"]  # fmt: skip
    text = markdown_table(header, ([fmt(r[h]) for h in header] for r in table))
    write_text(out / "results.md", "\n".join([*notes, "", text, ""]))
    print(text)
    for note in notes:
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())

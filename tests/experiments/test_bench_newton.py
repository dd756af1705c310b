"""bench_newton.py end to end on a tiny set, with a stand-in for LIBLINEAR's program that
writes a known w: the script's objective of it against a brute-force sum over all pairs."""

import csv
import os
import stat
import subprocess
import sys

import numpy as np

from tests.experiments._quick import REPO

W_FAKE = [0.25, -0.5, 0.125]


def write_set(folder, rng):
    sizes = rng.integers(1, 7, 12)
    qid = np.repeat(np.arange(1, 13), sizes)
    X = np.round(rng.normal(size=(qid.size, 3)), 3).astype(np.float32)
    y = rng.integers(0, 3, qid.size).astype(np.int8)
    np.savez(folder / "small.npz", X_train=X, y_train=y, qid_train=qid)
    with open(folder / "small.train.svmlight", "w") as fh:
        for xi, yi, qi in zip(X, y, qid, strict=True):
            feats = " ".join(f"{j + 1}:{v:.5g}" for j, v in enumerate(xi))
            fh.write(f"{yi} qid:{qi} {feats}\n")
    return X.astype(np.float64), y, qid


def fake_liblinear(folder):
    """A program called as LIBLINEAR's ``train -s 8 -c C FILE MODEL``: writes W_FAKE."""
    program = folder / "train"
    weights = "\\n".join(str(v) for v in W_FAKE)
    program.write_text(
        "#!/bin/sh\n"
        f'printf "solver_type L2R_L2LOSS_RANKSVM\\nnr_feature 3\\nbias -1\\nw\\n{weights}\\n"'
        ' > "$6"\n'
        'echo "iter  1 act 1 pre 1 delta 1 f 1 |g| 1 CG   1"\n'
        'echo "solver cpu seconds: 0.010" >&2\n'
    )
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return program


def brute_force_J(X, y, qid, w, C):
    """J = f_LL / (n_q C) with f_LL = ½‖w‖² + C Σ_(all pairs y_i < y_j of all queries)
    max(0, 1 − (f_j − f_i))²."""
    f = X @ w
    total = 0.0
    for i in range(len(y)):
        for j in range(len(y)):
            if qid[i] == qid[j] and y[i] < y[j]:
                total += max(0.0, 1.0 - (f[j] - f[i])) ** 2
    n_q = len(np.unique(qid))
    return (0.5 * w @ w + C * total) / (n_q * C)


def test_bench_newton_against_a_known_liblinear_model(tmp_path):
    X, y, qid = write_set(tmp_path, np.random.default_rng(0))
    program = fake_liblinear(tmp_path)
    out = tmp_path / "out"
    args = [
        sys.executable, "experiments/bench_newton.py", "--synthetic", str(tmp_path),
        "--sets", "small", "--C", "1,100", "--repeats", "1", "--skip-sklearn",
        "--methods", "newton", "--liblinear", str(program), "--out", str(out),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    with open(out / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for C in (1.0, 100.0):
        mine = [r for r in rows if float(r["C"]) == C]
        peer = [r for r in mine if r["solver"] == "LIBLINEAR-RankSVM"]
        assert len(peer) == 1
        J = brute_force_J(X, y, qid, np.array(W_FAKE), C)
        assert abs(float(peer[0]["objective"]) - J) <= 1e-9 * J
        assert abs(float(peer[0]["f_liblinear"]) - len(np.unique(qid)) * C * J) <= 1e-6 * C * J
        assert float(peer[0]["cpu_s"]) == 0.01 and peer[0]["iterations"] == "1"
        to_peer = [r for r in mine if r["goal"] == "to LIBLINEAR"]
        assert len(to_peer) == 1 and float(to_peer[0]["objective"]) <= J
        gap = [r for r in mine if r["goal"] == "gap 1e-3"]
        assert len(gap) == 1 and int(gap[0]["iterations"]) >= 1
    assert (
        "| small | 100 | squared hinge | package newton | to LIBLINEAR |"
        in (out / "results.md").read_text()
    )

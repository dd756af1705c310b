"""With numba's compiler off (``NUMBA_DISABLE_JIT=1``, as when debugging a kernel in
Python), a fit runs the kernels' Python source and ends where the compiled fit does: the
objectives of the two certified fits are within the sum of their gaps (for a latent loss,
the gaps of the last convex subproblems)."""

import json
import os
import subprocess
import sys

import numpy as np

import bmrm

SCRIPT = r"""
import json, sys
import numpy as np
import bmrm

rng = np.random.default_rng(0)
sizes = rng.integers(1, 8, 15)
qid = np.repeat(np.arange(15), sizes)
X = rng.normal(size=(qid.size, 4))
y = np.clip(np.round(X[:, 0] + rng.normal(size=qid.size)), 0, 3)
out = {}
for name in sys.argv[1:]:
    res = bmrm.fit(X, y, name, qid, lam=1e-2, tol=1e-6).result_
    # a latent loss (ndcg): the certified gap of the concave-convex procedure's last
    # convex subproblem, the procedure itself certifying none
    gap = res.gap if np.isfinite(res.lower_bound) else res.history["inner_gap"][-1]
    out[name] = [res.fun, float(gap), int(res.status)]
print(json.dumps(out))
"""

LOSSES = ["ordinal", "ndcg", "squared"]


def test_a_fit_without_the_compiler_ends_where_the_compiled_fit_does():
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *LOSSES],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    interpreted = json.loads(done.stdout.splitlines()[-1])
    compiled = json.loads(
        subprocess.run(
            [sys.executable, "-c", SCRIPT, *LOSSES],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        ).stdout.splitlines()[-1]
    )
    for name in LOSSES:
        (j_i, gap_i, status_i), (j_c, gap_c, status_c) = interpreted[name], compiled[name]
        assert status_i == status_c == 0, name
        assert abs(j_i - j_c) <= gap_i + gap_c + 1e-15, (name, j_i, j_c)


def test_the_lbfgs_result_reports_its_compilation():
    rng = np.random.default_rng(1)
    qid = np.repeat(np.arange(10), 5)
    X = rng.normal(size=(50, 3))
    y = rng.integers(0, 3, 50).astype(float)
    res = bmrm.fit(X, y, "cosine", qid).result_
    assert res.compile_seconds >= 0.0
    assert isinstance(res.compile_seconds, float)

"""Kernels compiled in different processes load together from numba's on-disk cache.

Each part below is first compiled alone, in its own process, into one shared cache
directory; a later process then loads all of them from that cache, in two orders. The values
must match the single-part runs and nothing may crash: numba names some internal helpers
(its sorting routines, for one) by per-process counters, and two cached libraries built in
different processes can then carry different code under one name. The QP solver once
crashed this way (a cached ``np.argsort``), and only a run like this one shows it.
"""

import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

PARTS = [
    "metrics", "qp", "ordinal", "ndcg", "neru", "preference", "squared", "listnet",
    "expected_gain", "map",
]  # fmt: skip

SCRIPT = """
import sys
import numpy as np

values = []
for part in sys.argv[1].split(","):
    rng = np.random.default_rng(len(part))
    n = 300
    X = rng.normal(size=(n, 5))
    y = rng.integers(0, 4, size=n).astype(float)
    qid = np.repeat(np.arange(n // 10), 10)
    if part == "metrics":
        from losses import metrics

        f = np.round(rng.normal(size=n), 1)  # with ties
        values.append(
            metrics.ndcg_score(y, f, qid, k=3)
            + metrics.map_score(y, f, qid)
            + metrics.err_score(y, f, qid)
            + metrics.kendall_tau_score(y, f, qid)
            + metrics.mrr_score(y, f, qid, k=5)
        )
    elif part == "qp":
        from bmrm.solver.qp import solve_simplex_qp_active_set

        A = rng.normal(size=(30, 5))
        Q = A @ A.T
        b = rng.normal(size=30)
        alpha = rng.dirichlet(np.ones(30))
        solve_simplex_qp_active_set(Q, b, alpha, np.empty(30), 1e-12, 10000)
        values.append(0.5 * alpha @ Q @ alpha - b @ alpha)
    elif part == "preference":
        import bmrm
        import losses

        pairs, costs = losses.pairs_from_labels(y, qid, cost="linear")
        fit = bmrm.fit(X, y, part, qid, lam=0.1, tol=1e-6, pairs=pairs, pair_costs=costs)
        values.append(fit.result_.fun)
    elif part == "expected_gain":
        import bmrm

        fit = bmrm.fit(X, y, "listnet", qid, lam=0.1, tol=1e-8, ranking_function="expected_gain")
        values.append(fit.result_.fun)
    else:
        import bmrm

        values.append(bmrm.fit(X, y, part, qid, lam=0.1, tol=1e-6).result_.fun)
print(" ".join(repr(float(v)) for v in values))
"""


def run(parts, env):
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, ",".join(parts)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, f"{parts}: exit {out.returncode}\n{out.stderr[-2000:]}"
    return [float(v) for v in out.stdout.split()]


def test_kernels_compiled_apart_load_together(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    alone = {part: run([part], env)[0] for part in PARTS}
    for order in (PARTS, PARTS[::-1]):
        together = run(order, env)
        assert together == [alone[part] for part in order]


DAMAGE_SCRIPT = """
import sys
import warnings

import numpy as np

warnings.simplefilter("always")  # each warning shown, to count them
from bmrm.io import load_svmlight
from losses import metrics

X, y, qid = load_svmlight(sys.argv[1])
f = X.toarray() @ np.array([1.0, -0.5])
print(repr(float(metrics.ndcg_score(y, f, qid, k=3))), X.nnz)
"""


def damage_run(data, env):
    out = subprocess.run(
        [sys.executable, "-c", DAMAGE_SCRIPT, str(data)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, f"exit {out.returncode}\n{out.stderr[-2000:]}"
    return out.stdout, out.stderr


def cache_env(cache):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=root)


@pytest.fixture(scope="module")
def intact_cache(tmp_path_factory):
    """A data file, a cache folder its first run compiled into, and that run's output."""
    folder = tmp_path_factory.mktemp("intact")
    data = folder / "d.txt"
    data.write_text("".join(f"{i % 3} qid:{i // 5} 1:{i} 2:{(i * 7) % 4}\n" for i in range(20)))
    first, _ = damage_run(data, cache_env(folder / "cache"))
    return data, folder / "cache", first


@pytest.mark.parametrize("damage", ["garbage", "zero bytes"])
@pytest.mark.parametrize("files", [".nbi", ".nbc"])
def test_damaged_cache_files_are_compiled_again(tmp_path, intact_cache, damage, files):
    """An index or data file of numba's cache that is garbage or empty: the kernels are
    compiled again (the same values), one warning per cache folder names it, and the
    next process finds the files rewritten (no warning)."""
    data, intact, first = intact_cache
    cache = tmp_path / "cache"
    shutil.copytree(intact, cache)
    env = cache_env(cache)
    damaged = sorted(p for p in cache.rglob(f"*{files}"))
    assert damaged
    rng = np.random.default_rng(0)
    for path in damaged:
        path.write_bytes(b"" if damage == "zero bytes" else rng.bytes(64))
    again, stderr = damage_run(data, env)
    assert again == first
    warned = re.findall(r"numba's cache folder (\S+) holds an unreadable file (\S+) ", stderr)
    folders = [folder for folder, _ in warned]
    assert sorted(set(folders)) == sorted({str(path.parent) for path in damaged})
    assert len(folders) == len(set(folders))  # once per folder
    assert all(name.endswith(files) for _, name in warned)
    assert all(path.stat().st_size > 0 for path in damaged)  # rewritten
    third, stderr = damage_run(data, env)
    assert third == first and "unreadable" not in stderr

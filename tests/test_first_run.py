"""The first fit in a new environment equals every later one.

A process with an empty numba cache compiles every kernel during its first fit; the fit must
not depend on that: for each built-in loss, the first fit in a new process with an empty
``NUMBA_CACHE_DIR``, a second fit in that process, and a fit in a second process that loads
the kernels from the cache the first one wrote give the same weights, objective and
iterations, bit for bit. The second process must load every kernel it uses from the cache
(no cache miss in numba's dispatcher statistics), and ``compile_seconds`` must report the
compilation of the first fit. The process with the empty cache, which also computes the
metrics and reads an svmlight file both ways, must compile no kernel of the package for a
literal argument (one more compilation each).
"""

import contextlib
import json
import os
import subprocess
import sys

# name: (loss, loss parameters); NDCG@10 on queries of 15 documents takes the chain flow with
# untruncated c and the truncated path with truncated c, and NERU (no k) the full assignment
CONFIGS = {
    "squared": ("squared", {}),
    "hinge": ("hinge", {}),
    "logistic": ("logistic", {}),
    "ordinal": ("ordinal", {}),
    "preference": ("preference", {}),
    "ndcg": ("ndcg", {}),
    "ndcg-truncated": ("ndcg", {"truncate_c": True}),
    "ndcg-increasing": ("ndcg", {"ties": "increasing"}),
    "ndcg-pairs": ("ndcg", {"ties": "pairs"}),
    "neru": ("neru", {}),
    "listnet": ("listnet", {}),
    "listwise_squared": ("listwise_squared", {}),
    "ranknet": ("ranknet", {}),
    "softmax": ("softmax", {}),
}
LOSSES = list(CONFIGS)

SCRIPT = r"""
import json, sys
import numpy as np
import bmrm
import losses

rng = np.random.default_rng(0)
n_queries, m, d = 60, 15, 8
X = rng.normal(size=(n_queries * m, d))
score = X @ rng.normal(size=d) + rng.normal(scale=1.5, size=n_queries * m)
y = np.digitize(score, np.quantile(score, [0.5, 0.75, 0.9])).astype(np.float64)
qid = np.repeat(np.arange(n_queries), m)

out = {}
for name, (loss, params) in json.loads(sys.argv[1]).items():
    target = np.where(y >= 1, 1.0, -1.0) if loss in ("hinge", "logistic") else y
    data = {}
    if loss == "preference":
        pairs, costs = losses.pairs_from_labels(y, qid)
        data = {"pairs": pairs, "pair_costs": costs}
    fits = []
    for _ in range(int(sys.argv[2])):
        res = bmrm.fit(
            X, target, loss, qid, lam=1e-2, tol=1e-4, max_iter=500, loss_params=params, **data
        ).result_
        fits.append({
            "w": res.x.tolist(),
            "fun": res.fun,
            "nit": int(res.nit),
            "status": int(res.status),
            "compile_seconds": res.compile_seconds,
        })
    out[name] = fits

if sys.argv[3:] == ["extras"]:
    # the metrics, and the svmlight reader both ways (CSR, then dense)
    import os, tempfile
    from bmrm.io.svmlight import dump_svmlight, load_svmlight
    from losses import metrics
    f = np.round(X @ np.ones(d), 1)  # with ties
    for measure in (metrics.ndcg_score, metrics.map_score, metrics.err_score):
        measure(y, f, qid)
    path = os.path.join(tempfile.mkdtemp(), "data.txt")
    dump_svmlight(path, X, y, qid=qid)
    load_svmlight(path)
    load_svmlight(path, dense=True)
    from bmrm.io import _parse
    out["parse_lines"] = len(_parse.parse_lines.signatures)

# numba's statistics of every kernel of the package this process used, and the signatures
# with a literal type (a callee called with a constant at one site and a variable at another
# is compiled for each)
import numba.core.registry  # noqa: F401
from numba.core.dispatcher import Dispatcher
import gc
hits = misses = 0
literal = []
for obj in gc.get_objects():
    if isinstance(obj, Dispatcher) and obj.py_func.__module__.split(".")[0] in ("bmrm", "losses"):
        hits += sum(obj.stats.cache_hits.values())
        misses += sum(obj.stats.cache_misses.values())
        name = obj.py_func.__module__ + "." + obj.py_func.__qualname__
        literal += [name + str(sig) for sig in obj.signatures if "Literal" in str(sig)]
out["cache"] = {"hits": hits, "misses": misses}
out["literal"] = literal
print(json.dumps(out))
"""


def _run_script(script, args, env):
    """Run ``script`` in a new Python process; its printed JSON."""
    out = subprocess.run(
        [sys.executable, "-c", script, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def run(n_fits, env, *extras):
    return _run_script(SCRIPT, [json.dumps(CONFIGS), str(n_fits), *extras], env)


def test_first_fit_equals_second_fit_and_a_fit_from_the_warm_cache(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    cold = run(2, env, "extras")
    warm = run(1, env)
    assert cold["cache"]["misses"] > 0  # the empty cache compiled the kernels
    assert warm["cache"] == {"hits": warm["cache"]["hits"], "misses": 0}
    assert warm["cache"]["hits"] > 0
    for loss in LOSSES:
        first, second = cold[loss]
        (again,) = warm[loss]
        for other in (second, again):
            assert other["w"] == first["w"], loss
            assert other["fun"] == first["fun"], loss
            assert other["nit"] == first["nit"], loss
        assert first["status"] == 0, loss  # converged
        # the second fit in a process compiles nothing
        assert second["compile_seconds"] == 0.0, loss
    # the first fit of the process compiled the solver and its loss; the first latent NDCG
    # fit (the concave-convex procedure) compiled its own kernels and says so
    assert cold[LOSSES[0]][0]["compile_seconds"] > 0.0
    assert cold["ndcg"][0]["compile_seconds"] > 0.0
    # the empty cache compiled no kernel for a literal argument (each such signature is
    # one more compilation), and the svmlight reader's measuring pass, CSR write and dense
    # write share one compilation of its parser
    assert cold["literal"] == []
    assert cold["parse_lines"] == 1


def test_the_cvxpy_master_without_cvxpy_names_the_extra(monkeypatch):
    import numpy as np
    import pytest

    import bmrm

    monkeypatch.setitem(sys.modules, "cvxpy", None)  # import cvxpy now raises ImportError
    X = np.eye(4)
    with pytest.raises(ImportError, match=r'pip install "bmrm\[cvxpy\]"'):
        bmrm.fit(X, np.arange(4.0), "squared", regularizer="l1", lam=0.1)


READ_ONLY_SCRIPT = r"""
import gc, json
import numpy as np
import bmrm
from numba.core.dispatcher import Dispatcher

rng = np.random.default_rng(1)
X = rng.normal(size=(300, 6))
y = rng.integers(0, 3, size=300).astype(float)
res = bmrm.fit(X, y, "ordinal", np.repeat(np.arange(30), 10), lam=1e-2).result_
from bmrm.solver import bundle
bundle_misses = sum(bundle._append_plane.stats.cache_misses.values())
hits = misses = 0
for obj in gc.get_objects():
    if isinstance(obj, Dispatcher) and obj.py_func.__module__.split(".")[0] in ("bmrm", "losses"):
        hits += sum(obj.stats.cache_hits.values())
        misses += sum(obj.stats.cache_misses.values())
print(json.dumps({
    "file": bmrm.__file__, "fun": res.fun, "hits": hits, "misses": misses,
    "bundle_misses": bundle_misses,
}))
"""


def _make_read_only(path, stack):
    """Make ``path`` unwritable for this process: a read-only bind mount for root (whom
    permissions do not stop), else ``chmod a-w``."""
    if os.geteuid() != 0:
        for root, dirs, files in os.walk(path):
            for name in dirs + files:
                os.chmod(os.path.join(root, name), 0o555)
        os.chmod(path, 0o555)
        return True
    mount = subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True)
    if mount.returncode != 0:
        return False
    stack.callback(subprocess.run, ["umount", str(path)], check=True)
    remount = subprocess.run(
        ["mount", "-o", "remount,ro,bind", str(path)], capture_output=True, check=False
    )
    return remount.returncode == 0


def test_a_wheel_in_a_read_only_folder_caches_its_kernels_in_the_user_cache(tmp_path):
    """pip installs the wheel into a folder this process cannot write; numba then keeps its
    cache in the user's cache folder, and a second process loads every kernel from there."""

    import pytest

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    wheels, target, home = tmp_path / "wheels", tmp_path / "site", tmp_path / "home"
    home.mkdir()
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "-w", str(wheels), repo],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("bmrm-*.whl")
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update(HOME=str(home), PYTHONPATH=str(target))
    with contextlib.ExitStack() as stack:
        if not _make_read_only(target, stack):
            pytest.skip("cannot make a folder read-only here (no bind mount for root)")
        runs = []
        for _ in range(2):
            out = subprocess.run(
                [sys.executable, "-c", READ_ONLY_SCRIPT],
                env=env,
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=900,
            )
            assert out.returncode == 0, out.stderr[-3000:]
            runs.append(json.loads(out.stdout))
        assert not list(target.rglob("*.nbi"))  # nothing written beside the package
    first, second = runs
    assert first["file"] == str(target / "bmrm" / "__init__.py")
    # the first process compiled every kernel, the solver's own included; the second loads
    # them all
    assert first["misses"] > 0
    assert first["bundle_misses"] == 1
    assert second["misses"] == 0 and second["hits"] > 0
    assert second["fun"] == first["fun"]
    assert list((home / ".cache" / "numba").rglob("*.nbi"))

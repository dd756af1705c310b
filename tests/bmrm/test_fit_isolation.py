"""A fit imports nothing from the working directory, starts no process and installs no
``atexit`` hook, from an empty numba cache (where the kernels compile) as from a warm one."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# modules a Python process imports early, or that starting a process would import, each
# booby-trapped: importing it from the working directory writes a marker file
TRAPPED = ("threading", "numpy", "subprocess", "multiprocessing", "signal", "selectors")

TRAP = """import os
with open(os.path.join({folder!r}, "imported-" + __name__), "w") as f:
    f.write("imported from the working directory")
raise ImportError("booby trap")
"""

SCRIPT = r"""
import atexit, json, multiprocessing, os, subprocess, sys
import numpy as np

started = []
real_popen_init = subprocess.Popen.__init__
real_fork = os.fork
real_process_start = multiprocessing.Process.start

def popen_init(self, *args, **kwargs):
    started.append("subprocess.Popen")
    return real_popen_init(self, *args, **kwargs)

def fork():
    started.append("os.fork")
    return real_fork()

def process_start(self):
    started.append("multiprocessing.Process.start")
    return real_process_start(self)

subprocess.Popen.__init__ = popen_init
os.fork = fork
multiprocessing.Process.start = process_start

import bmrm
import bmrm.model  # bmrm's names load on first use: their dependencies register hooks then

hooks_before = atexit._ncallbacks()
rng = np.random.default_rng(0)
X = rng.normal(size=(240, 5))
y = rng.integers(0, 3, size=240).astype(float)
qid = np.repeat(np.arange(24), 10)
out = {}
for loss in sys.argv[1].split(","):
    res = bmrm.fit(X, y, loss, qid, lam=1e-2, tol=1e-3).result_
    out[loss] = int(res.status)
children = []
for pid in os.listdir("/proc"):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        continue
    if int(fields[1]) == os.getpid():
        children.append(int(pid))
out["children"] = children
out["started"] = started
out["hooks"] = atexit._ncallbacks() - hooks_before
out["path"] = [p for p in sys.path if p in ("", ".", os.getcwd())]
print(json.dumps(out))
"""


def test_a_fit_imports_nothing_from_the_working_directory_and_starts_no_process(tmp_path):
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cwd = tmp_path / "work"
    cwd.mkdir()
    for name in TRAPPED:
        (cwd / f"{name}.py").write_text(TRAP.format(folder=str(tmp_path)))
    env = dict(os.environ, PYTHONPATH=repo)
    # an empty cache, where the kernels compile, then the cache that run left
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba")
    for _ in range(2):
        # -P: the script's own imports do not see the working directory; the package must
        # not put it back
        proc = subprocess.run(
            [sys.executable, "-P", "-c", SCRIPT, "ordinal,ndcg"],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout)
        assert sorted(p.name for p in tmp_path.glob("imported-*")) == []
        assert out["ordinal"] == 0 and out["ndcg"] == 0
        assert out["started"] == []
        assert out["children"] == []
        assert out["hooks"] == 0
        assert out["path"] == []

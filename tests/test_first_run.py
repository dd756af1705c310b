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
from bmrm.solver import compile_ahead
from numba.core.dispatcher import Dispatcher

compile_ahead.STARVED_SHARE = 0.0  # as in AHEAD_SCRIPT: the same at any load
rng = np.random.default_rng(1)
X = rng.normal(size=(300, 6))
y = rng.integers(0, 3, size=300).astype(float)
res = bmrm.fit(X, y, "ordinal", np.repeat(np.arange(30), 10), lam=1e-2).result_
from bmrm.solver import qp
qp_misses = sum(qp._master_step.stats.cache_misses.values())
hits = misses = 0
for obj in gc.get_objects():
    if isinstance(obj, Dispatcher) and obj.py_func.__module__.split(".")[0] in ("bmrm", "losses"):
        hits += sum(obj.stats.cache_hits.values())
        misses += sum(obj.stats.cache_misses.values())
print(json.dumps(
    {"file": bmrm.__file__, "fun": res.fun, "hits": hits, "misses": misses, "qp_misses": qp_misses}
))
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
    cache in the user's cache folder (the helper compiling the QP ahead too), and a second
    process loads every kernel from there."""
    import contextlib

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
    # the helper that compiles the master QP ahead (whatever the machine's load) must also
    # find the user's cache folder
    env.update(HOME=str(home), PYTHONPATH=str(target), BMRM_COMPILE_AHEAD="1")
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
    # the first process compiled its loss's kernels but not the QP, which the helper
    # compiled (on one CPU there is no helper); it waited for the helper before it ended, so
    # the second process loads every kernel, the QP included
    assert first["misses"] > 0
    assert first["qp_misses"] == (0 if len(os.sched_getaffinity(0)) >= 2 else 1)
    assert second["misses"] == 0 and second["hits"] > 0
    assert second["fun"] == first["fun"]
    assert list((home / ".cache" / "numba").rglob("*.nbi"))


AHEAD_SCRIPT = r"""
import gc, json, os, sys
import numpy as np
import bmrm
from bmrm.solver import compile_ahead, qp

# never stop the helper as starved: the stages it reports and the QP it leaves in the cache
# are then the same at any load on the machine (TIMEOUT still bounds each wait; the
# starvation rule has tests of its own)
compile_ahead.STARVED_SHARE = 0.0
rng = np.random.default_rng(3)
X = rng.normal(size=(600, 6))
y = rng.integers(0, 3, size=600).astype(float)
qid = np.repeat(np.arange(60), 10)
out = {}
for loss in sys.argv[1].split(","):
    res = bmrm.fit(X, y, loss, qid, lam=1e-2, tol=1e-4).result_
    out[loss] = {"w": res.x.tolist(), "fun": res.fun, "nit": int(res.nit)}
from bmrm.solver.bundle import _append_plane
from losses._kernels.listwise import latent_ideal_weights
from losses._kernels.ordinal import ordinal_pairs
for name, kernel in (
    ("qp", qp._master_step),
    ("ordinal_kernel", ordinal_pairs),
    ("latent_kernel", latent_ideal_weights),
    ("bundle_kernel", _append_plane),
):
    stats = kernel.stats
    out[name] = {
        "hits": sum(stats.cache_hits.values()), "misses": sum(stats.cache_misses.values())
    }
helper = compile_ahead._helper
out["helper"] = helper.pid if helper is not None else -1
# this process's children still alive (zombies, already ended, excepted)
children = []
for pid in os.listdir("/proc"):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        continue
    if int(fields[1]) == os.getpid() and fields[0] != "Z":
        children.append(int(pid))
out["children"] = children
print(json.dumps(out), flush=True)
"""


def _run_ahead(losses_, env):
    return _run_script(AHEAD_SCRIPT, [",".join(losses_)], env)


def _with_and_without_helper(losses_, tmp_path):
    """The fits of ``losses_`` in one process with the helper (empty cache ``tmp_path/a``) and
    in one without it (``tmp_path/b``); skips where the helper is never started."""
    if not os.path.isdir("/proc") or len(os.sched_getaffinity(0)) < 2:
        import pytest

        pytest.skip("needs /proc and at least two CPUs (the helper is not started on one)")
    # "1": whatever the machine's load (the tests may run beside other work)
    ahead = _run_ahead(
        losses_, dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "a"), BMRM_COMPILE_AHEAD="1")
    )
    alone = _run_ahead(
        losses_, dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "b"), BMRM_COMPILE_AHEAD="0")
    )
    return ahead, alone


def test_the_qp_compiled_ahead_in_a_second_process_gives_the_same_fits(tmp_path):
    """With an empty cache a helper process compiles the master QP while the fit compiles
    its loss and solves its master problems in the interpreter; for a latent loss the helper
    first compiles the ordinal kernels of the concave-convex start, the bundle's kernels and
    the latent loss's ideal-ordering weights, which the fit loads from the cache. The fit's
    process never compiles any of them itself, its results equal those of a process that compiled
    everything (``BMRM_COMPILE_AHEAD=0``) bit for bit, and when it ends the helper has
    finished and left the QP in the cache."""
    names = ["ndcg", "ordinal"]
    ahead, alone = _with_and_without_helper(names, tmp_path)
    assert ahead["qp"]["misses"] == 0 and ahead["qp"]["hits"] <= 1
    assert ahead["ordinal_kernel"] == {"hits": 1, "misses": 0}
    assert ahead["latent_kernel"] == {"hits": 1, "misses": 0}
    assert ahead["bundle_kernel"] == {"hits": 1, "misses": 0}
    assert alone["qp"] == {"hits": 0, "misses": 1}
    assert alone["ordinal_kernel"] == {"hits": 0, "misses": 1}
    assert alone["latent_kernel"] == {"hits": 0, "misses": 1}
    assert alone["bundle_kernel"] == {"hits": 0, "misses": 1}
    assert alone["helper"] == -1 and alone["children"] == []
    # the helper was a child of the fit's process, and nothing else was
    assert ahead["helper"] > 0 or ahead["qp"]["hits"] == 1
    assert set(ahead["children"]) <= {ahead["helper"]}
    for name in names:
        assert ahead[name] == alone[name], name
    # the process waited for the helper before it ended: the QP is in the cache, and a
    # process with that cache starts no helper
    assert list((tmp_path / "a").rglob("*_master_step*.nbi"))
    warm = _run_ahead(
        ["ordinal"],
        dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "a"), BMRM_COMPILE_AHEAD="1"),
    )
    assert warm["qp"] == {"hits": 1, "misses": 0}
    assert warm["helper"] == -1 and warm["children"] == []
    assert warm["ordinal"] == ahead["ordinal"]


def test_a_latent_fit_after_an_ordinal_fit_loads_the_ideal_weights_from_the_helper(tmp_path):
    """The demo's order: an ordinal fit starts the helper on an empty cache, and after the QP
    the helper compiles the latent losses' ideal-ordering weights, which the NDCG fit that
    follows in the same process loads from the cache instead of compiling. The fits equal
    those of a process that compiled everything itself, bit for bit."""
    names = ["ordinal", "ndcg"]
    ahead, alone = _with_and_without_helper(names, tmp_path)
    assert ahead["helper"] > 0 or ahead["qp"]["hits"] == 1
    assert ahead["latent_kernel"] == {"hits": 1, "misses": 0}
    assert ahead["qp"]["misses"] == 0
    assert alone["latent_kernel"] == {"hits": 0, "misses": 1}
    for name in names:
        assert ahead[name] == alone[name], name


def test_no_helper_when_the_cache_folder_is_not_writable(monkeypatch):
    from numba.core import caching

    from bmrm.solver import compile_ahead, qp

    def refuse(self):
        raise PermissionError(f"read-only: {self.get_cache_path()}")

    monkeypatch.setattr(caching._CacheLocator, "ensure_cache_path", refuse)
    monkeypatch.delenv("BMRM_COMPILE_AHEAD", raising=False)
    assert compile_ahead._needs_compiling(qp._master_step, ("not", "cached")) is None
    monkeypatch.undo()
    monkeypatch.setenv("BMRM_COMPILE_AHEAD", "0")
    assert compile_ahead._needs_compiling(qp._master_step, ("not", "cached")) is None


def test_no_helper_on_a_busy_machine_unless_asked_for(monkeypatch, tmp_path):
    """Without an idle CPU the helper would only take time from the fit: it starts when the
    other work leaves a CPU free beside the fit's, or when ``BMRM_COMPILE_AHEAD=1``."""
    import pytest

    from bmrm.solver import compile_ahead, qp

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("the helper is never started on one CPU")
    n_cpus = len(os.sched_getaffinity(0))
    cache_path = qp._master_step._cache.cache_path
    monkeypatch.setattr(qp._master_step._cache._impl.locator, "ensure_cache_path", lambda: None)
    not_cached = ("a", "signature", "never", "compiled")
    for busy, setting, expected in [
        (n_cpus, "", None),
        (n_cpus - 1.4, "", None),
        (n_cpus, "1", cache_path),
        (n_cpus - 1.6, "", cache_path),
        (0.0, "", cache_path),
        (0.0, "0", None),
    ]:
        monkeypatch.setattr(compile_ahead, "_busy_cpus", lambda cpus, busy=busy: busy)
        monkeypatch.setenv("BMRM_COMPILE_AHEAD", setting)
        assert compile_ahead._needs_compiling(qp._master_step, not_cached) == expected


PROC_STAT = """cpu  300 0 100 500 100 0 0 0 0 0
cpu0 100 0 50 300 50 0 0 0 0 0
cpu1 200 0 50 200 50 0 0 0 0 0
intr 1 2 3
ctxt 42
"""


def test_busy_cpus_from_two_samples_of_proc_stat():
    """Busy time per CPU between two /proc/stat samples: all ticks but idle and iowait,
    steal counted busy, only the CPUs asked for, this process's own ticks taken out; and
    the live sample is within [0, CPUs], also while this process's BLAS threads spin."""
    import pytest

    from bmrm.solver import compile_ahead

    before = compile_ahead._cpu_times(PROC_STAT)
    assert before == {0: (350, 500), 1: (250, 500)}
    # cpu0: 100 more ticks, 90 of them idle; cpu1: 100 more, 20 idle and 30 stolen
    after = compile_ahead._cpu_times(
        PROC_STAT.replace("cpu0 100 0 50 300 50", "cpu0 110 0 50 390 50").replace(
            "cpu1 200 0 50 200 50 0 0 0", "cpu1 250 0 50 220 50 0 0 30"
        )
    )
    assert compile_ahead._busy_between(before, after, {0, 1}) == pytest.approx(0.1 + 0.8)
    assert compile_ahead._busy_between(before, after, {1}) == pytest.approx(0.8)
    assert compile_ahead._busy_between(before, before, {0, 1}) == 0.0  # no ticks: no data
    assert compile_ahead._busy_between(before, after, {5}) == 0.0  # a CPU not listed
    # this process's own 50 ticks over intervals of 100: half a CPU less, never below 0
    assert compile_ahead._busy_between(before, after, {0, 1}, 50) == pytest.approx(0.4)
    assert compile_ahead._busy_between(before, after, {0, 1}, 500) == 0.0
    cpus = os.sched_getaffinity(0)
    assert 0.0 <= compile_ahead._busy_cpus(cpus) <= len(cpus) + 1e-9
    assert compile_ahead._process_ticks() > 0


ORPHAN_SCRIPT = r"""
import os
from bmrm.solver import compile_ahead
compile_ahead.start()
print(compile_ahead._helper.pid if compile_ahead._helper is not None else -1, flush=True)
os._exit(0)  # ends without waiting for the helper
"""


def test_the_helper_ends_with_the_process_that_started_it(tmp_path):
    """A fit's process that ends early (here at once) takes its helper along: the helper
    sees its standard input close and exits, long before its compilation would end."""
    import time

    if not os.path.isdir("/proc") or len(os.sched_getaffinity(0)) < 2:
        import pytest

        pytest.skip("needs /proc and at least two CPUs (the helper is not started on one)")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), BMRM_COMPILE_AHEAD="1")
    out = subprocess.run(
        [sys.executable, "-c", ORPHAN_SCRIPT], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-3000:]
    pid = int(out.stdout)
    assert pid > 0  # an empty cache: a helper was started

    def running():
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    deadline = time.monotonic() + 120
    while running() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running()
    assert not list(tmp_path.rglob("*master_step*.nbi"))  # it stopped before compiling


@contextlib.contextmanager
def _fake_helper(monkeypatch, code, pending, timeout):
    """A process running ``code`` installed as this process's helper, with ``pending`` stages
    and the given TIMEOUT; closed and reaped at the end."""
    from bmrm.solver import compile_ahead

    helper = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    monkeypatch.setattr(compile_ahead, "TIMEOUT", timeout)
    monkeypatch.setattr(compile_ahead, "_helper", helper)
    monkeypatch.setattr(compile_ahead, "_helper_parent", os.getpid())
    monkeypatch.setattr(compile_ahead, "_pending", set(pending))
    try:
        yield helper
    finally:
        helper.stdin.close()
        helper.wait()
        helper.stdout.close()


def _record_cpu_samples(monkeypatch, compile_ahead) -> list:
    """The helper's CPU seconds each time the waiting reads them (once when it begins, then
    at the end of every STARVED_WINDOW), in a list that fills as it goes."""
    samples = []
    read = compile_ahead._cpu_seconds

    def recorded(pid):
        samples.append(read(pid))
        return samples[-1]

    monkeypatch.setattr(compile_ahead, "_cpu_seconds", recorded)
    return samples


def test_waiting_for_a_stage_reads_every_line_the_helper_wrote(monkeypatch):
    """The helper may report several stages at once; waiting for the second must not wait
    for more output (the helper then goes on compiling the QP for seconds)."""
    from bmrm.solver import compile_ahead

    code = "import sys; print('ordinal\\nlatent', flush=True); sys.stdin.read()"
    with _fake_helper(monkeypatch, code, {"ordinal", "latent"}, 5.0) as helper:
        assert compile_ahead.wait_for("ordinal") is True
        # the helper is still running: "latent" was reported, not the end of its output
        assert compile_ahead.pending("latent") is False
        assert compile_ahead.wait_for("latent") is False  # nothing left to wait for
        assert helper.poll() is None


def test_the_qp_reported_done_ends_running_while_the_helper_goes_on(monkeypatch):
    """After the QP the helper may compile a stage for a later fit; from its report "qp" on
    the QP counts as compiled (running() is False, wait() returns at once) although the
    helper still runs, and that later stage is still pending."""
    import time

    from numba.core import event

    from bmrm.solver import compile_ahead

    code = "import sys, time; time.sleep(0.5); print('qp', flush=True); sys.stdin.read()"
    with _fake_helper(monkeypatch, code, {"qp", "latent"}, 30.0) as helper:
        assert compile_ahead.running() is True  # nothing reported yet: still compiling
        deadline = time.monotonic() + 30
        while compile_ahead.running() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert compile_ahead.running() is False
        assert helper.poll() is None
        assert compile_ahead.pending("latent") is True
        assert compile_ahead.pending("qp") is False
        # wait() does not wait: no waiting is recorded, and the helper is not stopped
        with event.install_recorder(compile_ahead.WAIT_EVENT) as waits:
            compile_ahead.wait()
        assert waits.buffer == []
        assert helper.poll() is None


def test_a_helper_that_gets_no_cpu_is_stopped_and_this_process_compiles(monkeypatch):
    """A helper that gets almost no CPU (other work keeps the CPUs, and the QP is compiled at
    the lowest priority; here a process that only sleeps) is not waited for until the
    timeout: after one window of waiting it is stopped, and the fit's process compiles the
    rest itself."""
    import pytest

    from bmrm.solver import compile_ahead

    if not os.path.exists("/proc/self/stat"):
        pytest.skip("needs /proc to see the helper's CPU time")
    monkeypatch.setattr(compile_ahead, "STARVED_WINDOW", 0.5)
    samples = _record_cpu_samples(monkeypatch, compile_ahead)
    code = "import sys, time; time.sleep(60); print('qp', flush=True); sys.stdin.read()"
    with _fake_helper(monkeypatch, code, {"qp", "latent"}, 30.0) as helper:
        assert compile_ahead.wait_for("qp") is False
        # the helper's CPU time was read when the waiting began and at the end of the first
        # window, and not again: stopped after one window, not at the timeout (60 windows)
        assert len(samples) == 2
        assert helper.poll() is not None  # stopped
        assert compile_ahead.running() is False
        assert compile_ahead.pending("latent") is False  # this process compiles it too


def test_a_helper_at_work_is_waited_for(monkeypatch):
    """A helper that keeps a CPU busy (compiling) is waited for over several windows until
    it reports the stage, and goes on running."""
    from bmrm.solver import compile_ahead

    monkeypatch.setattr(compile_ahead, "STARVED_WINDOW", 0.5)
    samples = _record_cpu_samples(monkeypatch, compile_ahead)
    code = (
        "import sys, time\n"
        "t = time.process_time()\n"
        "while time.process_time() - t < 2.0: pass\n"
        "print('qp', flush=True); sys.stdin.read()"
    )
    with _fake_helper(monkeypatch, code, {"qp"}, 30.0) as helper:
        assert compile_ahead.wait_for("qp") is True
        # its 2 s of CPU take at least 2 s: the CPU time was read when the waiting began and
        # at the end of at least two windows of 0.5 s, each of which let the helper go on
        assert len(samples) >= 3
        assert helper.poll() is None


def test_the_helper_plan_puts_the_sort_first_for_the_structured_losses(monkeypatch):
    """The stages given to the helper, in order, per fit: the stable sort first for the
    structured NDCG / NERU losses (but for ``ties="pairs"``, whose kernel sorts at once) and
    for the concave-convex start; then the ordinal kernels (that start only), the solver's,
    the latent weights (latent fits) and the QP; a convex ranking fit adds the latent
    weights after the QP."""
    import warnings

    import numpy as np

    import bmrm
    from bmrm.solver import compile_ahead
    from bmrm.solver.bundle import _append_plane

    plans = []

    def record(argv, **kwargs):
        # python -c code qp.py cache-folder root, then the plan
        plans.append([item.split("=", 1)[0] for item in argv[6:]])
        raise OSError("not started in this test")

    monkeypatch.setattr(compile_ahead, "_needs_compiling", lambda *a: "qp-cache")
    monkeypatch.setattr(compile_ahead, "_cache_path_if_uncompiled", lambda d: "cache")
    monkeypatch.setattr(compile_ahead.subprocess, "Popen", record)
    # start() resets these module globals: restored after the test
    monkeypatch.setattr(compile_ahead, "_helper", None)
    monkeypatch.setattr(compile_ahead, "_helper_parent", -1)
    monkeypatch.setattr(compile_ahead, "_pending", set())
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = rng.integers(0, 3, size=40).astype(float)
    qid = np.repeat(np.arange(4), 10)

    def params(**loss_params):
        return {"loss_params": loss_params}

    cases = [
        ("ndcg", params(), ["sort", "ordinal", "solver", "latent", "qp"]),
        ("neru", params(), ["sort", "ordinal", "solver", "latent", "qp"]),
        ("ndcg", params(ties="increasing"), ["sort", "solver", "qp", "latent"]),
        ("neru", params(ties="increasing", k=5), ["sort", "solver", "qp", "latent"]),
        ("ndcg", params(ties="pairs"), ["solver", "qp", "latent"]),
        ("ordinal", params(), ["solver", "qp", "latent"]),
        ("listnet", params(), ["solver", "qp", "latent"]),
        ("squared", params(), ["solver", "qp"]),
        # a warm start skips the concave-convex start's ordinal problem
        ("ndcg", {"w0": np.zeros(3)}, ["sort", "solver", "qp", "latent"]),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bmrm.ConvergenceWarning)  # max_iter=3
        for loss, options, expected in cases:
            plans.clear()
            group = None if loss == "squared" else qid
            # the solver's kernels are left out once this process has compiled them
            compiled = bool(_append_plane.overloads)
            bmrm.fit(X, y, loss, group, lam=1.0, max_iter=3, **options)
            assert plans == [[s for s in expected if s != "solver" or not compiled]], loss


def test_the_helpers_sort_stage_fills_the_cache(tmp_path):
    """The helper's first stage compiles the stable sort into the cache folder it is given,
    reports it, and a process with that cache then loads it instead of compiling it."""
    from bmrm.solver import compile_ahead, qp

    root = os.path.dirname(os.path.dirname(os.path.abspath(qp.__file__)))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=root)
    probe = (
        "import json, sys, numpy as np\n"
        "from losses._kernels.sorting import argsort_stable as s\n"
        "if sys.argv[1] == 'call':\n"
        "    assert s(np.array([2.0, 1.0, 2.0])).tolist() == [1, 0, 2]\n"
        "print(json.dumps([s._cache.cache_path, sum(s.stats.cache_hits.values()),"
        " sum(s.stats.cache_misses.values())]))"
    )
    path = _run_script(probe, ["path"], env)[0]
    # its input stays open while it works (the helper exits when it closes)
    helper = subprocess.Popen(
        [sys.executable, "-c", compile_ahead._HELPER, qp.__file__, "unused", root, f"sort={path}"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        reported = helper.stdout.read()  # until it exits, its plan done
    finally:
        helper.stdin.close()
        helper.wait(timeout=600)
        helper.stdout.close()
    assert helper.returncode == 0
    assert reported.split() == ["sort"]
    assert list(tmp_path.rglob("sorting.argsort_stable*.nbi"))
    assert _run_script(probe, ["call"], env)[1:] == [1, 0]

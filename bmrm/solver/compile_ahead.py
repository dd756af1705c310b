"""Compile the master QP in a second process while this one compiles the loss kernels.

With an empty numba cache the first fit compiles the master QP (:func:`bmrm.solver.qp.
master_step`, about 5 CPU seconds) and the loss kernels, one after the other on one core.
The QP's argument types never change, so at the start of a fit :func:`start` can hand it to
a helper process (``python`` running :data:`_HELPER`) that compiles it into numba's on-disk
cache, while this process goes on to compile the loss kernels for the first oracle call. The
first master solve then waits for the helper (:func:`wait`) and loads the QP from the cache:
the same machine code as compiled here, so results do not change. While the helper runs
(:func:`running`), the concave-convex procedure, whose starting problem needs the QP before
the latent loss, evaluates the latent loss once first, so that its kernels compile here
meanwhile.

The helper is started only when all of the following hold, so that a warm cache or an
unsuitable set-up costs nothing but a look at the cache index:

* the QP is neither compiled in this process nor in the cache for its argument types;
* its cache folder is writable (otherwise the helper's work could not reach this process);
* the process may run on more than one CPU, and one of them is idle: the load average of
  the last minute is below the number of CPUs minus one half (on a busy machine the helper
  would only take CPU time from this process);
* the environment variable ``BMRM_COMPILE_AHEAD`` is not ``0``; ``1`` skips the test of
  the load (the helper then starts whenever the QP needs compiling).

Measured on the demo's data on a 2-CPU machine, first fit from an empty cache, wall seconds,
helper off / on, two runs each, interleaved: idle machine (load average below 1.6) ordinal
10.5 / 7.3, latent NDCG@10 20.5 / 15.3, NERU 17.9 / 12.4; with other work running (load
average 2–5, both CPUs busy) the helper made the same fits 2–4 s slower, its own start-up
and compilation (7.3 CPU seconds) taking CPU time from the fit, which is why a busy machine
does not start it.

The helper exits when its work is done or when this process closes its standard input
(which the operating system does when this process ends), so it never outlives the fit's
process. If it fails, or takes longer than :data:`TIMEOUT` seconds, it is stopped and this
process compiles the QP itself. The time spent waiting for it counts as compilation
(``compile_seconds``, excluded from ``max_time``), through the event
:data:`WAIT_EVENT` that :class:`~bmrm.solver.compile_clock.CompileClock` listens to.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from numba.core import event

__all__ = ["TIMEOUT", "WAIT_EVENT", "running", "start", "wait"]

# numba event kind triggered while a fit waits for the helper
WAIT_EVENT = "bmrm:compile_wait"
# seconds a fit waits for the helper before compiling the QP itself
TIMEOUT = 300.0

# The helper: argv[1] is qp.py's path, argv[2] the cache folder this process uses. It loads
# qp.py alone (numpy and numba, not the whole package) under its own module name, so that
# numba files its cache entries exactly as for this process.
_HELPER = r"""
import importlib.util, os, sys, threading

def _watch():
    sys.stdin.buffer.read()  # returns at end of file: the fit's process is gone or done
    os._exit(0)

threading.Thread(target=_watch, daemon=True).start()
qp_path, cache_path, root, ordinal_cache = sys.argv[1:5]
if ordinal_cache:
    # the ordinal loss's kernels, by one call on a tiny problem: the argument types of a
    # fit's calls (queries shorter than the radix-sort threshold)
    try:
        sys.path.insert(0, root)
        import numpy as np
        from losses._kernels.ordinal import ordinal_pairs
        from losses.ordinal import OrdinalLoss
        if ordinal_pairs._cache.cache_path == ordinal_cache:
            loss = OrdinalLoss()
            loss.loss_grad(np.zeros(4), loss.validate(np.array([0, 1, 0, 1]), [0, 2, 4]))
    except Exception:
        pass  # the fit's process compiles them itself
    finally:
        sys.path.remove(root)
spec = importlib.util.spec_from_file_location("bmrm.solver.qp", qp_path)
qp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(qp)
if qp._master_step._cache.cache_path != cache_path:
    os._exit(3)
qp._master_step.compile(qp.MASTER_STEP_TYPES)
os._exit(0)
"""
_lock = threading.Lock()
_helper: subprocess.Popen | None = None
_helper_parent = -1  # the process that started _helper (a forked child cannot wait for it)


def _needs_compiling(dispatcher, types) -> str | None:
    """The cache folder the helper should fill, or None when it has nothing to do."""
    setting = os.environ.get("BMRM_COMPILE_AHEAD", "")
    if setting == "0":
        return None
    cache = getattr(dispatcher, "_cache", None)
    if cache is None or not hasattr(cache, "cache_path"):  # no on-disk cache (or no JIT)
        return None
    if types in dispatcher.overloads:
        return None
    try:
        n_cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n_cpus = os.cpu_count() or 1
    if n_cpus < 2:
        return None
    if setting != "1" and hasattr(os, "getloadavg") and os.getloadavg()[0] > n_cpus - 0.5:
        return None
    try:
        cache._impl.locator.ensure_cache_path()  # creates the folder, checks it is writable
        key = cache._index_key(types, dispatcher.targetctx.codegen())
        if key in cache._cache_file._load_index():
            return None
    except Exception:  # unwritable folder, unreadable index, or numba's internals changed
        return None
    return cache.cache_path


def _ordinal_cache() -> str:
    """The cache folder of the ordinal loss's kernels, or "" when the helper should leave
    them alone (compiled in this process already, or no usable cache)."""
    from losses._kernels.ordinal import ordinal_pairs

    cache = getattr(ordinal_pairs, "_cache", None)
    if ordinal_pairs.overloads or cache is None or not hasattr(cache, "cache_path"):
        return ""
    return cache.cache_path


def start(ordinal: bool = False) -> None:
    """Start the helper if the QP needs compiling (module docstring); returns at once.

    ``ordinal=True`` has it compile the ordinal loss's kernels first, for the concave-convex
    procedure's starting problem, which needs them only after this process has compiled the
    latent loss's.
    """
    global _helper, _helper_parent
    import losses
    from bmrm.solver import qp

    if not sys.executable or getattr(sys, "frozen", False):  # no interpreter to run it
        return
    with _lock:
        if _helper is not None and _helper_parent == os.getpid() and _helper.poll() is None:
            return  # one is already at work
        if _helper is not None and _helper_parent == os.getpid():
            _helper.stdin.close()  # done, but no fit waited for it
        _helper = None
        cache_path = _needs_compiling(qp._master_step, qp.MASTER_STEP_TYPES)
        if cache_path is None:
            return
        _helper_parent = os.getpid()
        try:
            root = os.path.dirname(os.path.dirname(os.path.abspath(losses.__file__)))
            ordinal_cache = _ordinal_cache() if ordinal else ""
            _helper = subprocess.Popen(
                [sys.executable, "-c", _HELPER, qp.__file__, cache_path, root, ordinal_cache],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            _helper = None


def running() -> bool:
    """Whether a helper started by this process is still compiling (the cache is cold)."""
    helper = _helper
    return helper is not None and _helper_parent == os.getpid() and helper.poll() is None


def wait() -> None:
    """Wait until the helper, if one is running, has finished; stop it after
    :data:`TIMEOUT` seconds. A no-op (one attribute test) when there is none."""
    global _helper
    if _helper is None:
        return
    with _lock:
        helper, _helper = _helper, None
        if helper is None or _helper_parent != os.getpid():
            return
        with event.trigger_event(WAIT_EVENT):
            try:
                helper.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                helper.kill()
                helper.wait()
            finally:
                helper.stdin.close()

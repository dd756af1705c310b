"""Compile the master QP in a second process while this one compiles the loss kernels.

With an empty numba cache the first fit compiles the master QP (:func:`bmrm.solver.qp.
master_step`, about 6 CPU seconds) and the loss kernels. The QP's argument types never
change, so at the start of a fit :func:`start` can hand it to a helper process (``python``
running :data:`_HELPER`) that compiles it into numba's on-disk cache, while this process
goes on to compile the loss kernels for the first oracle call. Until the helper is done
(:func:`running`), :func:`~bmrm.solver.qp.master_step` solves the master problems with the
QP's own Python source (bit for bit the compiled result); after that it loads the compiled
QP from the cache. A bundle too large for the interpreter waits for the helper instead
(:func:`wait`).

For a latent loss (the concave-convex procedure, :mod:`bmrm.solver.cccp`) the helper first
compiles the ordinal loss's kernels and the bundle's and products' kernels, which the
procedure's starting problem needs, and then the latent loss's ideal-ordering weights,
which it needs after that problem (``start(ordinal=True, latent=True, dtype=...)``).
Meanwhile the procedure compiles the latent loss's other kernels here (one evaluation with
the latent part left out), then waits for the helper's word that a stage's kernels are in
the cache (:func:`wait_for`) before the first call that needs them, and loads them.

A fit on query groups that is not latent (``start(ranking=True)``) has the helper compile
the ideal-ordering weights after the QP instead, for a latent fit that this process may
start later: the demo fits the ordinal loss first and NDCG@10 last, and a user comparing
losses does the same. That fit then loads them instead of compiling them itself: the
demo's NDCG@10 fit from an empty cache took 6.9–7.4 s against 8.0–8.4 s when it compiled
them (three demos each, interleaved). The helper reports every stage when it is done,
the QP's too (``"qp"``); :func:`running` and :func:`wait` concern the QP alone.

For the structured NDCG and NERU losses, latent or not (``start(listwise=True)``), and for
the concave-convex start, the helper's first stage is the stable sort
(:func:`losses._kernels.sorting.argsort_stable`): the structured loss's kernel, which this
process compiles meanwhile, reaches the sort about a second after its start, and loads it
from the cache when the helper has put it there by then (the pair formulation's kernel
sorts at once, before the helper could have it, so that fit leaves it out).
Fifteen interleaved first fits of ``ties="increasing"`` NDCG@10 from an empty cache
(``bench_first_run.py --losses ndcg-increasing``): 6.6–9.5 s (median 7.2) against
7.5–10.1 s (median 8.1) when the helper did not compile the sort; twelve of the fifteen
pairs in its favour; this process's own compilation a median of 5.7 against 6.4 CPU s.

The helper is started only when all of the following hold, so that a warm cache or an
unsuitable set-up costs nothing but a look at the cache index:

* the QP is neither compiled in this process nor in the cache for its argument types;
* its cache folder is writable (otherwise the helper's work could not reach this process);
* the process may run on more than one CPU, and one of them is idle besides the one this
  process needs: over a sample of :data:`IDLE_SAMPLE` seconds (``/proc/stat``, the CPUs
  this process may run on, this process's own threads taken out; elsewhere the load
  average of the last minute) other work kept busy less than the number of those CPUs
  minus 1.5 (on a busy machine the helper would only take CPU time from this process).
  The load average lags a minute behind: right after other work (a package install, an
  earlier process's compilation) it still counts CPUs that are idle by now, and the fit
  then compiled the QP itself, 8–10 s more;
* the environment variable ``BMRM_COMPILE_AHEAD`` is not ``0``; ``1`` skips the test of
  the load (the helper then starts whenever the QP needs compiling).

Measured on the demo's data on a 2-CPU machine (``experiments/bench_first_run.py``), first
fit from an empty cache, wall seconds: with the helper compiling the QP while the fit waited
for it, squared 8.1, ordinal 9.9, preference 10.5, latent NDCG@10 14.4–16.8; with the
interpreter meanwhile and the ordinal kernels compiled by the helper, 1.3, 4.8, 2.2 and
10.4–10.9 (the fits are the same, bit for bit); latent NDCG@10 with the ideal-ordering
weights compiled by the helper too, 9.5–11.7 against 10.0–13.3 without, and with the
bundle's and products' kernels too, 7.8–8.2 against 8.9–9.4 (interleaved comparisons).
With other work running (load average 2–5, both CPUs busy) the helper made the same fits
2–4 s slower, its own start-up and compilation taking CPU time from the fit, which is why
a busy machine does not start it.

The helper compiles the QP, its last stage, at the lowest scheduling priority
(``os.nice(19)``; nothing this process waits for comes after it): while this process runs
the fit, whose oracle calls use every CPU, the helper then takes only the CPU time left
over, and when this process waits for it, all of one CPU. Six interleaved first NDCG@10
fits from an empty cache in a slow hour: 9.8–12.7 s (median 11.5) against 10.6–14.7 s
(median 13.2) at the normal priority, all six pairs in its favour, but five more pairs an
hour later split (6.8–11.4 s against 7.0–11.9 s): the first fit gains about 0.5 s, within
this machine's noise. The second fit in the same process (the helper still compiling) was
faster in all eleven pairs: 1.0–1.7 s against 1.7–2.7 s. At that priority
other work on the machine can starve the helper, so a process waiting for it watches its
CPU time (:func:`wait_for`) and compiles the rest itself when the helper gets less than a
quarter of a CPU: a quick fit's process on a cold cache, with two other processes keeping
both CPUs busy, ended after 7.3 s (its helper stopped) where it had waited until a 120 s
limit stopped it without that check, and 12.6 s at the normal priority.

The helper exits when its work is done or when this process closes its standard input
(which the operating system does when this process ends), so it never outlives the fit's
process. A process that ends normally while the helper still compiles the QP waits for it
first (an ``atexit`` handler), so that the next process finds the QP in the cache, and then
closes the helper's input: a stage after the QP may be left unfinished. If the helper
fails, or takes longer than :data:`TIMEOUT` seconds, it is stopped and this process compiles
the QP itself. The time spent waiting for it counts as compilation (``compile_seconds``,
excluded from ``max_time``), through the event :data:`WAIT_EVENT` that
:class:`~bmrm.solver.compile_clock.CompileClock` listens to.
"""

from __future__ import annotations

import atexit
import os
import select
import subprocess
import sys
import threading
import time

from numba.core import event

__all__ = ["TIMEOUT", "WAIT_EVENT", "pending", "running", "start", "wait", "wait_for"]

# numba event kind triggered while a fit waits for the helper
WAIT_EVENT = "bmrm:compile_wait"
# seconds a fit waits for the helper before compiling the QP itself
TIMEOUT = 300.0
# seconds over which the CPUs' idle time is sampled before starting the helper
IDLE_SAMPLE = 0.1
# while this process waits for the helper: over each STARVED_WINDOW seconds the helper must
# get at least STARVED_SHARE of a CPU, or it is stopped and this process compiles the rest
STARVED_WINDOW = 2.0
STARVED_SHARE = 0.25

# The helper: argv[1] is qp.py's path, argv[2] the cache folder this process uses, argv[3]
# the package's root; then its plan, in order, as NAME=ARGUMENT (a kernel's cache folder, a
# dtype). It loads qp.py alone (numpy and numba, not the whole package) under its own module
# name, so that numba files its cache entries exactly as for this process. It writes each
# stage's name on a line of its own when that stage is done, also when a stage other than
# the QP failed (the fit's process then compiles those kernels itself); if the QP cannot be
# compiled it exits at once without writing "qp".
_HELPER = r"""
import importlib.util, os, sys, threading

def _watch():
    sys.stdin.buffer.read()  # returns at end of file: the fit's process is gone or done
    os._exit(0)

threading.Thread(target=_watch, daemon=True).start()
qp_path, cache_path, root = sys.argv[1:4]


def sort(sort_cache):
    # the stable sort of float64 scores on its own: the structured NDCG / NERU kernel that
    # the fit's process compiles meanwhile reaches it about a second after its start, and
    # loads it from the cache when it is there by then
    import numpy as np
    from losses._kernels.sorting import argsort_stable
    if argsort_stable._cache.cache_path == sort_cache:
        argsort_stable(np.zeros(2))


def ordinal(ordinal_cache):
    # the ordinal loss's kernels, by one call on a tiny problem: the argument types of a
    # fit's calls (queries shorter than the radix-sort threshold)
    import numpy as np
    from losses._kernels.ordinal import ordinal_pairs
    from losses.ordinal import OrdinalLoss
    if ordinal_pairs._cache.cache_path == ordinal_cache:
        loss = OrdinalLoss()
        loss.loss_grad(np.zeros(4), loss.validate(np.array([0, 1, 0, 1]), [0, 2, 4]))


def load(name):
    # a module of the solver from its file alone (the QP's too)
    spec = importlib.util.spec_from_file_location(
        "bmrm.solver." + name, os.path.join(os.path.dirname(qp_path), name + ".py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def solver(solver_dtype):
    # the bundle's kernels and the products of a dense X of that dtype
    import numpy as np
    bundle = load("bundle")
    if bundle._append_plane._cache.cache_path == cache_path:
        planes = bundle.Bundle(3)
        planes.add(np.ones(3), 1.0)
        planes.set_weights(np.array([0.5, 0.5]))
        products = load("products")
        X, g, out = np.ones((4, 3), dtype=solver_dtype), np.ones(4), np.empty(3)
        products.matvec(X, np.ones(3), np.empty(4))
        products.rmatvec(X, g, out)
        products._scaled_rmatvec_rows(0, 4, X, g, 2.0, out)


def latent(latent_cache):
    # the latent NDCG / NERU losses' ideal-ordering weights, like the ordinal kernels
    import numpy as np
    from losses._kernels.listwise import latent_ideal_weights
    from losses.listwise import NDCGLoss
    if latent_ideal_weights._cache.cache_path == latent_cache:
        loss = NDCGLoss()
        loss.ideal_weights(np.zeros(4), loss.validate(np.array([0, 1, 0, 1]), [0, 2, 4]))


def report(name):
    sys.stdout.write(name + "\n")
    sys.stdout.flush()


for item in sys.argv[4:]:
    name, argument = item.split("=", 1)
    if name == "qp":
        # the QP last, at the lowest priority: the fit's process loads it from the cache
        # only for a bundle too large for the interpreter (waiting meanwhile, which leaves
        # the CPU to this process), and its oracle calls use every CPU meanwhile
        # (where the fit's process can see how much CPU it gets: see wait_for)
        if hasattr(os, "nice") and os.path.exists("/proc/self/stat"):
            try:
                os.nice(19)
            except OSError:
                pass
        qp = load("qp")
        if qp._master_step._cache.cache_path != cache_path:
            os._exit(3)
        qp._master_step.compile(qp.MASTER_STEP_TYPES)
        report("qp")
        continue
    try:
        sys.path.insert(0, root)
        {"sort": sort, "ordinal": ordinal, "solver": solver, "latent": latent}[name](argument)
    except Exception:
        pass
    finally:
        sys.path.remove(root)
    report(name)
os._exit(0)
"""

_lock = threading.Lock()
_helper: subprocess.Popen | None = None
_helper_parent = -1  # the process that started _helper (a forked child cannot wait for it)
_pending: set[str] = set()  # stages the helper was given and has not reported done
_at_exit_registered = False


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
        cpus = os.sched_getaffinity(0)
    except AttributeError:  # not Linux
        cpus = range(os.cpu_count() or 1)
    if len(cpus) < 2:
        return None
    try:
        cache._impl.locator.ensure_cache_path()  # creates the folder, checks it is writable
        key = cache._index_key(types, dispatcher.targetctx.codegen())
        if key in cache._cache_file._load_index():
            return None
    except Exception:  # unwritable folder, unreadable index, or numba's internals changed
        return None
    # last, as it takes IDLE_SAMPLE seconds: only a cold cache pays it
    if setting != "1" and _busy_cpus(cpus) > len(cpus) - 1.5:
        return None
    return cache.cache_path


def _cpu_times(text: str) -> dict[int, tuple[int, int]]:
    """Per CPU of a ``/proc/stat`` text, (idle ticks, all ticks): idle and iowait against
    user, nice, system, idle, iowait, irq, softirq and steal (time the hypervisor gave to
    other machines counts as busy)."""
    times = {}
    for line in text.splitlines():
        if line.startswith("cpu") and line[3:4].isdigit():
            name, *fields = line.split()
            ticks = [int(x) for x in fields[:8]]
            times[int(name[3:])] = (ticks[3] + ticks[4], sum(ticks))
    return times


def _busy_between(before: dict, after: dict, cpus, own_ticks: int = 0) -> float:
    """CPUs' worth of busy time among ``cpus`` between two :func:`_cpu_times` samples, less
    ``own_ticks`` (this process's CPU ticks over the same interval)."""
    busy, totals = 0.0, []
    for cpu in cpus:
        if cpu in before and cpu in after:
            total = after[cpu][1] - before[cpu][1]
            if total > 0:
                busy += 1.0 - (after[cpu][0] - before[cpu][0]) / total
                totals.append(total)
    if totals and own_ticks > 0:
        busy -= own_ticks / (sum(totals) / len(totals))
    return max(busy, 0.0)


def _process_ticks(pid: int | str = "self") -> int:
    """CPU ticks (user and system, all threads) of this process (or of process ``pid``) so
    far, ``/proc/<pid>/stat``."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _cpu_seconds(pid: int) -> float | None:
    """CPU seconds of process ``pid`` so far, or None where ``/proc`` cannot tell."""
    try:
        return _process_ticks(pid) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _busy_cpus(cpus) -> float:
    """CPUs' worth of other work on ``cpus`` now: sampled from ``/proc/stat`` over
    :data:`IDLE_SAMPLE` seconds while this process sleeps, its own threads' time taken
    out (numpy's BLAS threads spin for a while after an operation), else the load average
    of the last minute less this process's own CPU; 0 when neither is available."""
    try:
        with open("/proc/stat") as stat:
            before = _cpu_times(stat.read())
        own = _process_ticks()
        time.sleep(IDLE_SAMPLE)
        own = _process_ticks() - own
        with open("/proc/stat") as stat:
            after = _cpu_times(stat.read())
        if any(cpu in before for cpu in cpus):
            return _busy_between(before, after, cpus, own)
    except (OSError, ValueError, IndexError):
        pass
    if hasattr(os, "getloadavg"):
        return max(0.0, os.getloadavg()[0] - 1.0)
    return 0.0


def _cache_path_if_uncompiled(dispatcher) -> str:
    """The cache folder of a kernel, or "" when the helper should leave it alone (compiled
    in this process already, or no usable cache)."""
    cache = getattr(dispatcher, "_cache", None)
    if dispatcher.overloads or cache is None or not hasattr(cache, "cache_path"):
        return ""
    return cache.cache_path


def start(
    ordinal: bool = False,
    latent: bool = False,
    dtype: str = "",
    ranking: bool = False,
    listwise: bool = False,
) -> None:
    """Start the helper if the QP needs compiling (module docstring); returns at once.

    ``dtype`` ("float32" or "float64"; "" for none) has it compile, before the QP, the
    bundle's kernels and the products of a dense X of that dtype, which this process
    needs after its first oracle call (it compiles them itself if the helper is late).

    ``ordinal=True`` has it compile the ordinal loss's kernels first, for the concave-convex
    procedure's starting problem; ``latent=True`` then the ideal-ordering weights of the
    latent NDCG and NERU losses, which the procedure needs after that problem. Either is
    left out if this process has compiled it already.

    ``listwise=True`` (the structured NDCG or NERU loss, but for ``ties="pairs"``, whose
    kernel sorts at once) or ``ordinal=True`` has it compile the stable sort before
    anything else: this process, compiling the structured loss's kernel meanwhile, reaches
    the sort about a second later and loads it from the cache.

    ``ranking=True`` (a fit on query groups) with ``latent=False`` has it compile those
    ideal-ordering weights after the QP instead: a latent fit that this process starts
    later (the demo fits the ordinal loss and then NDCG@10) then loads them from the cache
    instead of compiling them itself (about 1 CPU second), waiting for the stage if it is
    not done yet. The end of this process does not wait for it: the helper is stopped once
    the QP is done, whether that stage is finished or not.
    """
    global _helper, _helper_parent, _pending, _at_exit_registered
    import losses
    from bmrm.solver import qp
    from bmrm.solver.bundle import _append_plane
    from losses._kernels.listwise import latent_ideal_weights
    from losses._kernels.ordinal import ordinal_pairs
    from losses._kernels.sorting import argsort_stable

    if not sys.executable or getattr(sys, "frozen", False):  # no interpreter to run it
        return
    with _lock:
        previous = _own_helper()
        if previous is not None and previous.poll() is None:
            return  # one is already at work
        if previous is not None:
            _close(previous)  # done, and no fit waits for it
        _helper = None
        _pending = set()
        cache_path = _needs_compiling(qp._master_step, qp.MASTER_STEP_TYPES)
        if cache_path is None:
            return
        _helper_parent = os.getpid()
        latent_path = _cache_path_if_uncompiled(latent_ideal_weights)
        # (stage, its argument) in the helper's order; "" leaves a stage out
        plan = [
            ("sort", _cache_path_if_uncompiled(argsort_stable) if ordinal or listwise else ""),
            ("ordinal", _cache_path_if_uncompiled(ordinal_pairs) if ordinal else ""),
            ("solver", "" if _append_plane.overloads else dtype),
            ("latent", latent_path if latent else ""),
        ]
        plan = [(name, argument) for name, argument in plan if argument] + [("qp", "")]
        if ranking and not latent and latent_path:
            plan.append(("latent", latent_path))
        try:
            root = os.path.dirname(os.path.dirname(os.path.abspath(losses.__file__)))
            items = [f"{name}={argument}" for name, argument in plan]
            _helper = subprocess.Popen(
                [sys.executable, "-c", _HELPER, qp.__file__, cache_path, root, *items],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            _helper = None
            return
        _pending = {name for name, _ in plan}
        if not _at_exit_registered:
            atexit.register(_finish)
            _at_exit_registered = True


def _own_helper():
    """The helper this process started, or None (none, or this is a forked child)."""
    helper = _helper
    return helper if helper is not None and _helper_parent == os.getpid() else None


def _close(helper) -> None:
    """Close this process's ends of the helper's pipes (closing its input ends it)."""
    helper.stdin.close()
    helper.stdout.close()


def _read_reports(helper, timeout: float) -> bool:
    """Take the stages the helper has reported done out of the pending ones, waiting at
    most ``timeout`` seconds for a report; False when the helper has ended (nothing is
    pending any more) or no report came in time."""
    fd = helper.stdout.fileno()
    # the helper's lines, read from the pipe itself (a buffered reader could hold lines
    # that select() no longer sees)
    try:
        ready = select.select([fd], [], [], max(0.0, timeout))[0]
    except (OSError, ValueError):  # no select on pipes (Windows): read without a limit,
        if timeout <= 0.0 and helper.poll() is None:  # unless asked not to wait at all
            return False
        ready = True
    if not ready:
        return False
    try:
        chunk = os.read(fd, 4096)
    except (OSError, ValueError):  # closed meanwhile
        chunk = b""
    if not chunk:  # the helper ended: this process compiles whatever is left
        _pending.clear()
        return False
    for line in chunk.decode(errors="replace").split():
        _pending.discard(line)
    return True


def running() -> bool:
    """Whether a helper started by this process is still compiling the QP (the cache is
    cold)."""
    helper = _own_helper()
    if helper is None or "qp" not in _pending:
        return False
    _read_reports(helper, 0.0)
    return "qp" in _pending


def pending(stage: str) -> bool:
    """Whether the helper was given ``stage`` ("sort", "ordinal", "solver", "latent" or
    "qp") and has not yet reported it done."""
    return stage in _pending and _own_helper() is not None


def wait_for(stage: str) -> bool:
    """Wait until the helper, if it was given ``stage`` ("sort", "ordinal", "solver", "latent"
    or "qp"), has compiled its kernels into the cache (or failed to; at most :data:`TIMEOUT`
    seconds in all, after which the helper is stopped). The time counts as compilation,
    as in :func:`wait`. Returns whether the helper reported the stage (False: not given,
    or the helper ended or ran out of time first).

    The helper is also stopped, and False returned, when over :data:`STARVED_WINDOW`
    seconds of waiting it got less than :data:`STARVED_SHARE` of a CPU (``/proc``): other
    work then keeps the CPUs, which a helper at the lowest priority (the QP's stage) yields
    to, and this process, idle meanwhile, compiles the rest at its own priority sooner."""
    helper = _own_helper()
    if helper is None or stage not in _pending:
        return False
    with event.trigger_event(WAIT_EVENT):
        deadline = time.monotonic() + TIMEOUT
        window, cpu = time.monotonic(), _cpu_seconds(helper.pid)
        while stage in _pending:
            now = time.monotonic()
            if now >= deadline:
                _stop()
                return False
            if not _read_reports(helper, min(deadline - now, STARVED_WINDOW / 4)):
                if not _pending:  # the helper ended (it leaves no report then)
                    return False
            now = time.monotonic()
            if stage in _pending and now - window >= STARVED_WINDOW:
                # other work keeps the CPUs (the QP is compiled at the lowest priority):
                # this process, idle meanwhile, compiles what is left itself
                spent = _cpu_seconds(helper.pid)
                if cpu is not None and spent is not None:
                    if spent - cpu < STARVED_SHARE * (now - window):
                        _stop()
                        return False
                window, cpu = now, spent
    return True


def _stop() -> None:
    """Stop the helper (out of time) and forget it: this process compiles what is left."""
    global _helper
    with _lock:
        helper, _helper = _own_helper(), None
        _pending.clear()
        if helper is not None:
            helper.kill()
            helper.wait()
            _close(helper)


def _finish() -> None:
    """At the end of the process: let a helper still compiling the QP finish it, so that the
    cache holds the master QP for the next process (a fit no longer waits for it, solving
    its master problems by the interpreter meanwhile; see
    :func:`bmrm.solver.qp.master_step`), then close its standard input, which ends it (a
    stage after the QP may be left unfinished)."""
    global _helper
    try:
        wait()
        helper, _helper = _own_helper(), None
        if helper is not None:
            _close(helper)
    except Exception:  # the process is ending: never fail here
        pass


def wait() -> None:
    """Wait until the helper, if one is compiling the QP, has done so; stop it after
    :data:`TIMEOUT` seconds. A no-op (two tests) when there is none."""
    if "qp" in _pending and _own_helper() is not None:
        wait_for("qp")

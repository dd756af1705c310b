"""MSLR-WEB30K-sized fits on one machine, and the cost of an iteration with Dask workers.

    python experiments/bench_scale.py [--scale 1.0] [--lam 1e-2] [--tol 1e-3] [--out DIR]
        [--losses ordinal,ndcg@10] [--max-iter 1000] [--dask-iter 12] [--dask-rounds 1]
        [--skip-local|--skip-dask] [--task-modes worker,partition]
    python experiments/bench_scale.py --bandwidth [--repeats 5]

1. Data: a synthetic set shaped like MSLR-WEB30K (31,531 queries of 20..219 documents, about
   3.77M rows × 136 float32 features; ``--scale`` multiplies the number of queries), made in
   blocks of whole queries with the model of ``../shared/tools/gen_ltr.py`` (written out in
   :func:`make_block`: query-shifted Gaussian features, softplus on the last quarter, graded
   labels 0..4 from global thresholds on a noisy latent score). Saved once as ``.npy`` in
   ``--work`` for the one-machine fits (the Dask runs make it in the workers).
2. One machine: the ordinal loss and NDCG@10 fitted to a relative gap ``--tol`` with 1 and 2
   numba threads, each fit in a fresh process that loads X first: wall and CPU time of the
   fit (with the load average: on a shared machine CPU seconds are the steadier figure),
   iterations, oracle calls, concave-convex steps (NDCG's default latent ties), oracle and
   master time, peak RSS of the process and its peak growth during the
   fit, both against the size of X.
3. Dask: a ``LocalCluster`` of 1 and 2 worker processes (one thread each; a risk task runs
   its kernels on that thread) whose workers generate their own blocks, about the same rows
   on each worker (so X never crosses the network, and the client never holds it); the
   partitions are built where their blocks are. ``--dask-iter`` iterations of the ordinal
   fit, ``--dask-rounds`` times alternating 1 and 2 workers, for each of ``--task-modes``:
   ``worker`` (one risk task per worker thread and iteration, the oracle's default) and
   ``partition`` (one task per partition, as the oracle did before, to compare within the
   same run). Reported, per iteration between the first and the last iteration's callback:
   time (median), oracle time and throughput (rows/s), risk tasks, the busiest worker's
   share of the rows, the workers' CPU seconds and the partition evaluations' own (thread)
   CPU and wall seconds, rows per worker CPU-second and per task CPU-second (which stay put
   when the machine is loaded: if two workers' rows per CPU-second match one's, two workers
   do twice the work per CPU-second and only the cores available limit the wall-clock
   scaling), the busiest worker's time in tasks against the iteration's, the CPU of the
   scheduler and client (one process: ``LocalCluster`` runs the scheduler in the client's
   process) with the master problem's part and that process's CPU per second when idle, the
   payload (pickled w sent in each task, pickled per-partition rows (R, a) returned) and
   the loopback traffic measured with psutil (an upper bound: other processes on the
   machine use the loopback too), and the peak RSS of the client process and of the
   largest worker against the size of X. The summary line per task mode gives the ratio of
   the time per iteration with 1 and 2 workers. For the timing on an idle machine::

       python experiments/bench_scale.py --scale 0.5 --skip-local --dask-rounds 3

   and at full size (about 2 GB of X in the workers; a few minutes)::

       python experiments/bench_scale.py --scale 1 --skip-local --task-modes worker

4. ``--bandwidth`` (alone): what bounds the scaling from one worker to two. One process and
   two concurrent processes (single-threaded, started together behind a barrier) run
   ``X @ w`` on their own float32 X for 3 s, timed in units of 4 MB read: ``stream``
   (numpy) and ``oracle`` (the oracle's numba product) on 4 MB row slices of a 128 MB X,
   four times the 32 MiB L3, so every unit reads from memory, and ``cache`` (numpy, a
   256 KB X inside one core's L2 read 16 times per unit), which measures the cores alone.
   Counted are units that ran on a core throughout (thread CPU time >= 95 % of wall time)
   and, with two processes, overlapped an on-CPU unit of the other for >= 90 % of their
   time: the GB/s of one stream alone against one of two streams truly at once, whatever
   else loads the machine. If ``cache`` keeps its rate with two
   streams and ``stream`` drops to about half, the bound is the memory bandwidth.

Writes ``results.csv`` (one row per configuration) and ``results.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import statistics
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from experiments._common import (  # noqa: E402
    base_parser,
    comma_list,
    int_at_least,
    lam_value,
    make_out,
    markdown_table,
    positive_float,
    positive_int,
    progress,
    script,
    tolerance,
    write_csv,
    write_results,
    write_text,
)

N_QUERIES = 31_531
N_FEATURES = 136
PROPS = np.array([0.50, 0.30, 0.13, 0.05, 0.02])  # label marginals, as gen_ltr.py
QUERIES_PER_BLOCK = 500  # at most
LOCAL_LOSSES = ("ordinal", "ndcg@10")  # the losses of the one-machine fits (get_loss)
TASK_MODES = ("worker", "partition")


# ---------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------


def make_spec(scale: float, seed: int = 30) -> dict:
    """Query sizes, the latent model and the label thresholds (small; sent to workers)."""
    rng = np.random.default_rng(seed)
    n_queries = max(2, round(N_QUERIES * scale))
    sizes = rng.integers(20, 220, n_queries)
    w = rng.normal(size=N_FEATURES)
    w[rng.permutation(N_FEATURES)[: N_FEATURES // 2]] = 0.0
    u = rng.normal(size=N_FEATURES)
    u /= np.linalg.norm(u)
    spec = {"seed": seed, "sizes": sizes, "w": w, "u": u, "thresholds": None}
    pilot = _latent(np.random.default_rng(seed + 12345), np.full(1000, 200), w, u)[1]
    spec["thresholds"] = np.quantile(pilot, np.cumsum(PROPS)[:-1])
    # at least 8 blocks, so that every Dask worker holds several partitions
    per_block = min(QUERIES_PER_BLOCK, -(-n_queries // 8))
    starts = np.arange(0, n_queries, per_block)
    spec["blocks"] = [(int(s), int(min(s + per_block, n_queries))) for s in starts]
    row_ptr = np.concatenate(([0], np.cumsum(sizes)))
    spec["block_rows"] = [int(row_ptr[b] - row_ptr[a]) for a, b in spec["blocks"]]
    return spec


def _latent(rng, sizes, w, u):
    """Features and latent relevance of queries of the given sizes (gen_ltr.py's model)."""
    n = int(sizes.sum())
    mu = np.repeat(rng.normal(0.0, 0.5, size=(len(sizes), N_FEATURES)), sizes, axis=0)
    X = rng.normal(0.0, 1.0, size=(n, N_FEATURES)) + mu
    k = N_FEATURES - N_FEATURES // 4
    X[:, k:] = np.logaddexp(0.0, X[:, k:])
    s = X @ w / np.linalg.norm(w) + 0.6 * np.tanh(X @ u) + 0.3 * X[:, 0] * X[:, 1]
    s += np.repeat(rng.normal(0.0, 0.5, size=len(sizes)), sizes)
    s += rng.normal(0.0, 0.5, size=n)
    return X, s


def make_block(spec: dict, block: int):
    """Block ``block``: (X float32, y int8, qid int64), deterministic for (seed, block)."""
    first, stop = spec["blocks"][block]
    sizes = spec["sizes"][first:stop]
    X, s = _latent(np.random.default_rng([spec["seed"], block]), sizes, spec["w"], spec["u"])
    y = np.searchsorted(spec["thresholds"], s).astype(np.int8)
    qid = np.repeat(np.arange(first, stop, dtype=np.int64), sizes)
    return X.astype(np.float32), y, qid


def write_set(spec: dict, path: Path) -> None:
    """All blocks into one float32 array on disk (``X.npy``, ``y.npy``, ``qid.npy``)."""
    n = sum(spec["block_rows"])
    path.mkdir(parents=True, exist_ok=True)
    X = np.lib.format.open_memmap(path / "X.npy", "w+", np.float32, (n, N_FEATURES))
    y = np.empty(n, np.int8)
    qid = np.empty(n, np.int64)
    row = 0
    for b in range(len(spec["blocks"])):
        Xb, yb, qb = make_block(spec, b)
        X[row : row + len(yb)], y[row : row + len(yb)], qid[row : row + len(yb)] = Xb, yb, qb
        row += len(yb)
    X.flush()
    del X
    np.save(path / "y.npy", y)
    np.save(path / "qid.npy", qid)


# ---------------------------------------------------------------------------------------------
# measurements (each in its own process)
# ---------------------------------------------------------------------------------------------


class PeakRSS:
    """Highest resident set size seen by a sampling thread between start and stop."""

    def __enter__(self):
        import psutil

        self._process = psutil.Process()
        self.before = self.peak = self._process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._process.memory_info().rss)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._process.memory_info().rss)


def get_loss(name: str):
    import losses

    return losses.get("ndcg", k=10) if name == "ndcg@10" else losses.get(name)


def child_local(args) -> dict:
    import bmrm

    X = np.load(args.work / "X.npy")
    y = np.load(args.work / "y.npy")
    qid = np.load(args.work / "qid.npy")
    loss = get_loss(args.loss)
    # compile (or load from the cache) on a small slice, untimed
    bmrm.fit(X[:2000], y[:2000], loss, qid[:2000], lam=args.lam, max_iter=3)
    with PeakRSS() as rss, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start, cpu_start = time.perf_counter(), time.process_time()
        model = bmrm.fit(X, y, loss, qid, lam=args.lam, tol=args.tol, max_iter=args.max_iter)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    r = model.result_
    return {
        "backend": "local",
        "loss": args.loss,
        "threads": int(os.environ.get("NUMBA_NUM_THREADS", "0")),
        "rows": len(y),
        "X_MB": X.nbytes / 2**20,
        "fit_s": seconds,
        "fit_cpu_s": cpu_seconds,
        "load_1min": os.getloadavg()[0],
        "iterations": int(r.nit),
        "oracle_calls": int(r.nfev),
        "outer_steps": int(r.get("n_outer", 0)),
        "gap": float(r.gap),
        "objective": float(r.fun),
        "oracle_s": float(r.oracle_seconds),
        "master_s": float(r.master_seconds),
        "oracle_s_per_iter": float(r.oracle_seconds) / max(1, int(r.nfev)),
        "rows_per_s": len(y) * int(r.nfev) / float(r.oracle_seconds),
        "peak_rss_MB": max(rss.peak, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
        / 2**20,
        "peak_over_X": rss.peak / X.nbytes,
        "fit_growth_over_X": (rss.peak - rss.before) / X.nbytes,
    }


def _process_cpu_seconds() -> float:
    """CPU seconds of the calling process (run on every Dask worker and the scheduler)."""
    return time.process_time()


def _time_partition_tasks() -> None:
    """On a worker: wrap the risk task and the partition evaluation so that each call records
    (start, end, thread CPU seconds, rows or partitions) in ``_bench_task_log`` (one entry
    per partition: the oracle's own time, apart from the worker's communication and
    scheduling) and ``_bench_group_log`` (one entry per task) of ``bmrm.distributed``."""
    import bmrm.distributed as distributed

    if hasattr(distributed, "_bench_task_log"):
        return
    log = distributed._bench_task_log = []
    group_log = distributed._bench_group_log = []
    inner = distributed._partition_risk
    inner_group = distributed._group_risk

    def timed(part, w):
        t0, c0 = time.perf_counter(), time.thread_time()
        out = inner(part, w)
        log.append((t0, time.perf_counter(), time.thread_time() - c0, part.n_rows))
        return out

    def timed_group(w, *parts):
        t0, c0 = time.perf_counter(), time.thread_time()
        out = inner_group(w, *parts)
        group_log.append((t0, time.perf_counter(), time.thread_time() - c0, len(parts)))
        return out

    distributed._partition_risk = timed
    distributed._group_risk = timed_group
    # the worker's peak RSS, sampled (ru_maxrss would count the client process the worker
    # was started from)
    import psutil

    peak = distributed._bench_peak_rss = [0]
    process = psutil.Process()

    def sample():
        while True:
            peak[0] = max(peak[0], process.memory_info().rss)
            time.sleep(0.02)

    threading.Thread(target=sample, daemon=True).start()


def _partition_task_log() -> tuple[list, list]:
    import bmrm.distributed as distributed

    return list(distributed._bench_task_log), list(distributed._bench_group_log)


def _peak_rss_bytes() -> int:
    """The worker's peak resident set size, as sampled since ``_time_partition_tasks``."""
    import bmrm.distributed as distributed

    return max(distributed._bench_peak_rss[0], _rss_bytes())


def _rss_bytes() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def make_qid(spec: dict, block: int) -> np.ndarray:
    """Block ``block``'s query ids alone (as :func:`make_block`'s, without making X)."""
    first, stop = spec["blocks"][block]
    return np.repeat(np.arange(first, stop, dtype=np.int64), spec["sizes"][first:stop])


def child_dask(args) -> dict:
    import dask
    import dask.array as da
    import psutil
    from distributed import Client, LocalCluster

    import bmrm
    import bmrm.distributed

    # the client side groups the tasks: one per worker thread, or one per partition
    bmrm.distributed.GROUP_TASKS = args.tasks == "worker"
    spec = make_spec(args.scale)
    n_blocks = len(spec["blocks"])
    # a partition task runs its kernels on its own thread (bmrm.distributed.TASK_THREADS);
    # NUMBA_NUM_THREADS in ``env`` would not reach numba, which the workers import before
    # applying it (they re-import this script, whose imports import bmrm)
    with (
        PeakRSS() as client_rss,
        LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            env={"OMP_NUM_THREADS": "1"},
        ) as cluster,
        Client(cluster) as client,
    ):
        client.run(_time_partition_tasks)
        # the workers' own CPU while idle (event loop, heartbeats, Dask's sampling profiler)
        idle_start, idle = time.perf_counter(), client.run(_process_cpu_seconds)
        idle_client = time.process_time()
        time.sleep(3.0)
        idle_end = client.run(_process_cpu_seconds)
        idle_client = (time.process_time() - idle_client) / (time.perf_counter() - idle_start)
        idle_cpu = sum(idle_end[a] - idle[a] for a in idle) / (time.perf_counter() - idle_start)
        rows = spec["block_rows"]
        # every worker makes about the same number of rows (blocks in order, each to the
        # worker with the fewest rows so far), kept in its memory: left to the scheduler, the
        # blocks went 70:30 at --scale 0.5, which alone bounds two workers at 1.4x. The
        # partitions are then built where their blocks are and share their arrays.
        load = dict.fromkeys(sorted(client.nthreads()), 0)
        where = []
        for r in rows:
            where.append(min(load, key=lambda a: (load[a], a)))
            load[where[-1]] += r
        blocks = [
            dask.delayed(client.submit(make_block, spec, b, workers=[where[b]], pure=False))
            for b in range(n_blocks)
        ]

        def column(i, shape, dtype):
            return da.concatenate(
                [da.from_delayed(blk[i], shape=shape(r), dtype=dtype) for blk, r in zip(
                    blocks, rows, strict=True)]
            )  # fmt: skip

        X = column(0, lambda r: (r, N_FEATURES), np.float32)
        y = column(1, lambda r: (r,), np.int8)
        # qid from its own small tasks: the check that no query spans two partitions reads
        # qid alone, and must not make X (twice the generation time at full size)
        qid = da.concatenate(
            [da.from_delayed(dask.delayed(make_qid, pure=True)(spec, b), shape=(r,),
                             dtype=np.int64) for b, r in enumerate(rows)]
        )  # fmt: skip
        loss = get_loss("ordinal")
        times = []
        worker_cpu, scheduler_cpu, client_cpu = [], [], []

        def cpu_stamp():
            worker_cpu.append(sum(client.run(_process_cpu_seconds).values()))
            scheduler_cpu.append(client.run_on_scheduler(_process_cpu_seconds))
            client_cpu.append(time.process_time())

        def stamp(result):
            times.append((time.perf_counter(), psutil.net_io_counters(pernic=True)["lo"]))
            # CPU counted from the first to the last iteration's callback (not the set-up,
            # nor the work after the loop)
            if len(times) in (1, args.dask_iter):
                cpu_stamp()

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            model = bmrm.fit(
                X, y, loss, qid, lam=args.lam, tol=1e-12, max_iter=args.dask_iter,
                backend="dask", client=client, callback=stamp,
            )  # fmt: skip
            total = time.perf_counter() - start
        logs = client.run(_partition_task_log)
        tasks = {addr: np.array(log).reshape(-1, 4) for addr, (log, _) in logs.items()}
        groups = {addr: np.array(log).reshape(-1, 4) for addr, (_, log) in logs.items()}
        worker_peak = client.run(_peak_rss_bytes)
        worker_rss = client.run(_rss_bytes)
        worker_rows = {
            a: int(t[(t[:, 0] >= times[-2][0]) & (t[:, 1] <= times[-1][0]), 3].sum())
            for a, t in tasks.items()
        }
    r = model.result_
    oracle_per_iter = np.diff(np.r_[0.0, r.history["oracle_seconds"]])
    per_iter = np.diff([t for t, _ in times])
    lo_bytes = np.diff([c.bytes_sent for _, c in times])
    n_parts = n_blocks
    n = sum(rows)
    n_timed = max(1, len(times) - 1)

    def in_window(t):
        return t[(t[:, 0] >= times[0][0]) & (t[:, 1] <= times[-1][0])]

    n_tasks = sum(len(in_window(g)) for g in groups.values()) / n_timed
    # payload: w in every task; one row [R_p, a_p] per partition back, in one array per task
    w = np.zeros(N_FEATURES)
    sent = round(n_tasks) * len(pickle.dumps(w))
    per_task = max(1, round(n_parts / max(1, n_tasks)))
    returned = round(n_tasks) * len(
        pickle.dumps(("tcp://127.0.0.1:40000", np.zeros((per_task, N_FEATURES + 1))))
    )
    oracle_median = statistics.median(oracle_per_iter[1:])
    from bmrm.solver.oracle import FUSED_MIN_BYTES

    cpu_per_iter = (worker_cpu[1] - worker_cpu[0]) / n_timed
    # the partition tasks of the timed iterations (after the first callback)
    timed = {a: in_window(t) for a, t in tasks.items()}
    task_cpu = sum(float(t[:, 2].sum()) for t in timed.values()) / n_timed
    task_wall = sum(float((t[:, 1] - t[:, 0]).sum()) for t in timed.values()) / n_timed
    # the busiest worker's time in tasks against the wall time, both between the first and last
    # iteration's callbacks
    busiest = max(float((t[:, 1] - t[:, 0]).sum()) for t in timed.values()) / n_timed
    master_per_iter = np.diff(np.r_[0.0, r.history["master_seconds"]])
    return {
        "backend": "dask",
        "loss": "ordinal",
        "workers": args.workers,
        "tasks": args.tasks,
        "rows": n,
        "partitions": n_parts,
        "tasks_per_iter": n_tasks,
        "busiest_worker_rows_share": max(worker_rows.values()) / max(1, sum(worker_rows.values())),
        "setup_s": total - float(np.sum(r.history["elapsed"][-1:])),
        "iterations": int(r.nit),
        "s_per_iter": statistics.median(per_iter),
        "oracle_s_per_iter": oracle_median,
        "rows_per_s": n / oracle_median,
        "idle_worker_cpu_s_per_s": idle_cpu,
        "worker_cpu_s_per_iter": cpu_per_iter,
        "rows_per_worker_cpu_s": n / cpu_per_iter,
        "task_cpu_s_per_iter": task_cpu,
        "task_wall_s_per_iter": task_wall,
        "rows_per_task_cpu_s": n / task_cpu,
        "busiest_worker_task_share": busiest * n_timed / (times[-1][0] - times[0][0]),
        "scheduler_cpu_s_per_iter": (scheduler_cpu[1] - scheduler_cpu[0]) / n_timed,
        "client_cpu_s_per_iter": (client_cpu[1] - client_cpu[0]) / n_timed,
        "master_s_per_iter": statistics.median(master_per_iter[1:]),
        # the scheduler's and client's CPU while idle (heartbeats, dashboard, profiler), which
        # the per-iteration figure includes for the iteration's duration
        "idle_client_cpu_s_per_s": idle_client,
        "load_1min": os.getloadavg()[0],
        "X_MB": n * N_FEATURES * 4 / 2**20,
        "client_peak_rss_MB": client_rss.peak / 2**20,
        "worker_peak_rss_MB": max(worker_peak.values()) / 2**20,
        "worker_rss_MB": max(worker_rss.values()) / 2**20,
        "one_pass_partitions": sum(4 * N_FEATURES * b >= FUSED_MIN_BYTES for b in rows),
        "payload_bytes_per_iter": sent + returned,
        "loopback_bytes_per_iter": float(np.median(lo_bytes)),
    }


BANDWIDTH_BYTES = {"stream": 128 * 2**20, "oracle": 128 * 2**20, "cache": 256 * 2**10}
# Bytes of X read per timed unit: short units, so that some run without being descheduled on
# a loaded machine. A 4 MB slice of the 128 MB X is never in cache (the other 124 MB were read
# since); the 256 KB X is read 16 times per unit.
BANDWIDTH_UNIT = 4 * 2**20


def _stream_worker(kind: str, seconds: float, barrier, queue) -> None:
    """Timed units of ``X @ w`` on a float32 X of ``BANDWIDTH_BYTES[kind]`` for ``seconds``;
    puts the bytes per unit and each unit's (start, end, thread CPU seconds).

    ``stream`` and ``cache`` use numpy (single-threaded BLAS), ``oracle`` the oracle's own
    product (:func:`bmrm.solver.products.matvec`, float64 accumulation, one thread).
    """
    X = np.random.default_rng(0).standard_normal(
        (BANDWIDTH_BYTES[kind] // (4 * N_FEATURES), N_FEATURES), dtype=np.float32
    )
    rows = min(X.shape[0], BANDWIDTH_UNIT // (4 * N_FEATURES))
    slices = [X[i : i + rows] for i in range(0, X.shape[0] - rows + 1, rows)]
    repeat = max(1, BANDWIDTH_UNIT // X.nbytes)
    if kind == "oracle":
        from bmrm.solver.products import matvec

        w, f = np.ones(N_FEATURES), np.empty(rows)

        def product(block):
            matvec(block, w, f)
    else:
        w = np.ones(N_FEATURES, dtype=np.float32)

        def product(block):
            block @ w

    for block in slices:  # warm-up: pages touched, BLAS loaded or kernel compiled
        product(block)
    barrier.wait()
    units = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for block in slices:
            t0, c0 = time.perf_counter(), time.thread_time()
            for _ in range(repeat):
                product(block)
            units.append((t0, time.perf_counter(), time.thread_time() - c0))
    queue.put((slices[0].nbytes * repeat, units))


def _on_cpu(units, share: float = 0.95) -> np.ndarray:
    """The units that ran without being descheduled (thread CPU time >= share of wall)."""
    p = np.asarray(units)
    return p[p[:, 2] >= share * (p[:, 1] - p[:, 0])]


def _covered(t0: float, t1: float, other: np.ndarray) -> float:
    """Share of [t0, t1] during which the other process was running an on-CPU pass."""
    overlap = np.clip(np.minimum(other[:, 1], t1) - np.maximum(other[:, 0], t0), 0.0, None)
    return float(overlap.sum()) / (t1 - t0)


def bandwidth(args) -> list[dict]:
    """One process against two concurrent processes on ``X @ w`` (see the module docstring).

    Every unit is timed; only units that ran on a core throughout count (thread CPU time
    at least 95 % of the wall time), and with two processes only those that overlapped an
    on-CPU pass of the other process for at least 90 % of their time, so the rates are those
    of one stream alone and of two streams truly at once, whatever else loads the machine.
    """
    import multiprocessing as mp

    os.environ.update(
        {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    )
    ctx = mp.get_context("spawn")
    rows = []
    for rep in range(args.repeats):
        for kind in BANDWIDTH_BYTES:
            for n_procs in (1, 2):
                load = os.getloadavg()[0]
                barrier, queue = ctx.Barrier(n_procs), ctx.Queue()
                procs = [
                    ctx.Process(target=_stream_worker, args=(kind, 3.0, barrier, queue))
                    for _ in range(n_procs)
                ]
                for p in procs:
                    p.start()
                results = [queue.get() for _ in procs]
                for p in procs:
                    p.join()
                nbytes = results[0][0]
                on_cpu = [_on_cpu(units) for _, units in results]
                if n_procs == 1:
                    chosen = on_cpu[0]
                else:
                    chosen = np.array(
                        [row for i in (0, 1) for row in on_cpu[i]
                         if _covered(row[0], row[1], on_cpu[1 - i]) >= 0.9]
                    ).reshape(-1, 3)  # fmt: skip
                rate = nbytes / (chosen[:, 1] - chosen[:, 0]) / 1e9 if len(chosen) else []
                rows.append({
                    "kind": kind, "processes": n_procs, "repetition": rep, "load_1min": load,
                    "units": sum(len(p) for _, p in results), "counted": len(chosen),
                    "GB_per_s_per_stream": float(np.median(rate)) if len(chosen) else np.nan,
                })  # fmt: skip
                progress(str(rows[-1]))
    return rows


def bandwidth_table(rows: list[dict]) -> str:
    lines = ["| X @ w | X | GB/s, one stream alone | GB/s per stream, two at once | "
             "two at once / alone | units counted (alone; two) | load (1 min) |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    what = {"stream": "numpy", "oracle": "oracle (numba)", "cache": "numpy"}
    for kind in BANDWIDTH_BYTES:
        sel = {n: [r for r in rows if r["kind"] == kind and r["processes"] == n] for n in (1, 2)}
        med = {n: float(np.nanmedian([r["GB_per_s_per_stream"] for r in sel[n]])) for n in sel}
        counted = {n: sum(r["counted"] for r in sel[n]) for n in sel}
        loads = [r["load_1min"] for r in sel[1] + sel[2]]
        size = f"{BANDWIDTH_BYTES[kind] // 2**20} MB" if kind != "cache" else "256 KB (in L2)"
        lines.append(
            f"| {what[kind]} | {size} | {med[1]:.2f} | {med[2]:.2f} | {med[2] / med[1]:.2f} | "
            f"{counted[1]}; {counted[2]} | {min(loads):.1f}..{max(loads):.1f} |"
        )
    return "\n".join(lines)


def run_child(args, kind: str, env: dict, **extra) -> dict:
    argv = [sys.executable, __file__, "--child", kind, "--work", str(args.work)]
    argv += ["--scale", str(args.scale), "--lam", str(args.lam), "--tol", str(args.tol)]
    argv += ["--max-iter", str(args.max_iter), "--dask-iter", str(args.dask_iter)]
    for key, value in extra.items():
        argv += [f"--{key}", str(value)]
    proc = subprocess.run(
        argv, env={**os.environ, **env}, capture_output=True, text=True, check=False
    )
    if proc.returncode:
        sys.exit(f"child {kind} {extra} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


@script
def main(argv=None) -> int:
    parser = base_parser("bench_scale", __doc__.splitlines()[0], data=False, quick=False)
    parser.add_argument(
        "--scale", type=positive_float, default=1.0, help="fraction of MSLR-WEB30K"
    )
    parser.add_argument("--lam", type=lam_value, default=1e-2)
    parser.add_argument("--tol", type=tolerance, default=1e-3)
    parser.add_argument("--max-iter", type=positive_int, default=1000)
    parser.add_argument(
        "--dask-iter",
        type=int_at_least(2),
        default=12,
        help="iterations of each Dask fit (timed from the first to the last)",
    )
    parser.add_argument(
        "--dask-rounds",
        type=positive_int,
        default=1,
        help="rounds of the 1- and 2-worker Dask runs",
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/bmrm_bench_scale"))
    parser.add_argument(
        "--losses",
        type=comma_list(LOCAL_LOSSES),
        default=list(LOCAL_LOSSES),
        help=f"comma-separated losses of the local fits, among {', '.join(LOCAL_LOSSES)}",
    )
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--skip-dask", action="store_true")
    parser.add_argument(
        "--bandwidth", action="store_true", help="only the one- vs two-process X @ w bandwidth"
    )
    parser.add_argument("--repeats", type=positive_int, default=5, help="rounds of --bandwidth")
    parser.add_argument("--child", choices=["local", "dask"], help=argparse.SUPPRESS)
    parser.add_argument("--loss", default="ordinal", choices=LOCAL_LOSSES, help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=positive_int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--tasks", default="worker", choices=TASK_MODES, help=argparse.SUPPRESS)
    parser.add_argument(
        "--task-modes",
        type=comma_list(TASK_MODES),
        default=list(TASK_MODES),
        help="risk tasks per iteration: 'worker' (one per worker thread, the oracle's default), "
        "'partition' (one per partition, as before), or both, comma-separated",
    )
    args = parser.parse_args(argv)
    if args.child:
        result = child_local(args) if args.child == "local" else child_dask(args)
        print(json.dumps(result))
        return 0
    if args.bandwidth:
        rows = bandwidth(args)
        text = "# X @ w, one process against two concurrent ones\n\n" + bandwidth_table(rows)
        make_out(args.out)
        write_csv(args.out / "bandwidth.csv", rows)
        write_text(args.out / "bandwidth.md", text + "\n")
        print(text)
        return 0
    spec = make_spec(args.scale)
    args.work = args.work / f"scale{args.scale:g}"
    if not args.skip_local and not (args.work / "qid.npy").exists():
        progress(f"generating {sum(spec['block_rows'])} rows into {args.work}")
        start = time.perf_counter()
        write_set(spec, args.work)
        progress(f"generated in {time.perf_counter() - start:.0f} s")
    rows = []
    if not args.skip_local:
        for loss in args.losses:
            for threads in (1, 2):
                progress(f"local fit: {loss}, {threads} thread(s)")
                rows.append(
                    run_child(args, "local", {"NUMBA_NUM_THREADS": str(threads)}, loss=loss)
                )
                progress(str(rows[-1]))
    if not args.skip_dask:
        # alternating 1 and 2 workers, so that a change of the machine's load hits both
        for rnd in range(args.dask_rounds):
            for mode in args.task_modes:
                for workers in (1, 2):
                    progress(f"dask round {rnd + 1}: {workers} worker process(es), {mode} tasks")
                    rows.append(run_child(args, "dask", {}, workers=workers, tasks=mode))
                    progress(str(rows[-1]))
    local = [r for r in rows if r["backend"] == "local"]
    remote = [r for r in rows if r["backend"] == "dask"]
    text = [f"# bench_scale (scale {args.scale:g}, lam {args.lam:g}, tol {args.tol:g})", ""]
    if local:
        text.append(markdown_table(
            ["loss", "threads", "rows", "X MB", "fit s", "fit CPU s", "load", "iterations",
             "oracle calls", "CCCP steps", "gap", "oracle s/call", "peak RSS MB", "peak / X",
             "fit growth / X"],
            [[r["loss"], r["threads"], r["rows"], round(r["X_MB"]), round(r["fit_s"], 1),
              round(r["fit_cpu_s"], 1), round(r["load_1min"], 1), r["iterations"],
              r["oracle_calls"], r["outer_steps"], f"{r['gap']:.2g}",
              round(r["oracle_s_per_iter"], 3), round(r["peak_rss_MB"]),
              round(r["peak_over_X"], 3), round(r["fit_growth_over_X"], 3)] for r in local],
        ))  # fmt: skip
    if remote:
        text += ["", markdown_table(
            ["workers", "tasks", "partitions (one-pass)", "tasks/iter", "busiest worker rows",
             "setup s", "s/iter", "oracle s/iter", "rows/s", "idle workers CPU s/s",
             "worker CPU s/iter", "task CPU s/iter", "rows per worker CPU-s",
             "rows per task CPU-s", "busiest worker in tasks",
             "scheduler+client CPU s/iter", "of which master s/iter",
             "idle scheduler+client CPU s/s", "load",
             "payload B/iter", "loopback B/iter", "X MB", "client peak RSS MB",
             "worker peak RSS MB"],
            [[r["workers"], r["tasks"], f"{r['partitions']} ({r['one_pass_partitions']})",
              round(r["tasks_per_iter"], 1), f"{r['busiest_worker_rows_share']:.0%}",
              round(r["setup_s"], 1), round(r["s_per_iter"], 3), round(r["oracle_s_per_iter"], 3),
              round(r["rows_per_s"]), round(r["idle_worker_cpu_s_per_s"], 3),
              round(r["worker_cpu_s_per_iter"], 3),
              round(r["task_cpu_s_per_iter"], 3), round(r["rows_per_worker_cpu_s"]),
              round(r["rows_per_task_cpu_s"]), f"{r['busiest_worker_task_share']:.0%}",
              round(r["client_cpu_s_per_iter"], 4), round(r["master_s_per_iter"], 4),
              round(r["idle_client_cpu_s_per_s"], 3),
              round(r["load_1min"], 1), r["payload_bytes_per_iter"],
              round(r["loopback_bytes_per_iter"]), round(r["X_MB"]),
              round(r["client_peak_rss_MB"]), round(r["worker_peak_rss_MB"])]
             for r in remote],
        )]  # fmt: skip
        text.append(
            "\n(LocalCluster runs the scheduler in the client's process: scheduler+client CPU "
            "is that process's CPU per iteration, the master problem included.)"
        )
        for mode in args.task_modes:
            sel = {k: [r for r in remote if r["tasks"] == mode and r["workers"] == k]
                   for k in (1, 2)}  # fmt: skip
            if not (sel[1] and sel[2]):
                continue

            def med(key, k, sel=sel):
                return statistics.median(r[key] for r in sel[k])

            text.append(
                f"\n{mode} tasks (medians of {len(sel[1])} and {len(sel[2])} runs, load "
                f"{min(r['load_1min'] for r in sel[1] + sel[2]):.1f}.."
                f"{max(r['load_1min'] for r in sel[1] + sel[2]):.1f}): s/iter "
                f"{med('s_per_iter', 1):.3f} (1 worker) / {med('s_per_iter', 2):.3f} (2 workers)"
                f" = {med('s_per_iter', 1) / med('s_per_iter', 2):.2f}x; oracle throughput "
                f"{med('rows_per_s', 2) / med('rows_per_s', 1):.2f}x; tasks/iter "
                f"{med('tasks_per_iter', 1):.0f} / {med('tasks_per_iter', 2):.0f}; "
                f"scheduler+client CPU s/iter {med('client_cpu_s_per_iter', 1):.4f} / "
                f"{med('client_cpu_s_per_iter', 2):.4f}; worker CPU s/iter "
                f"{med('worker_cpu_s_per_iter', 1):.3f} / {med('worker_cpu_s_per_iter', 2):.3f}; "
                f"payload B/iter {med('payload_bytes_per_iter', 1):.0f} / "
                f"{med('payload_bytes_per_iter', 2):.0f}"
            )
    make_out(args.out)
    write_csv(args.out / "results.csv", rows)
    tidy, seen = [], {}
    for r in rows:
        if r["backend"] == "local":
            method, setting = f"local {r['threads']} thread(s)", r["loss"]
        else:
            method, setting = f"dask {r['workers']} worker(s)", f"ordinal tasks={r['tasks']}"
        rep = seen[method, setting] = seen.get((method, setting), -1) + 1
        tidy.append(
            {
                "experiment": "bench_scale",
                "dataset": f"mslr-web30k-like scale={args.scale:g}",
                "method": method,
                "setting": setting,
                "repetition": rep,
                **{k.lower(): v for k, v in r.items()},
            }
        )
    write_results("bench_scale", tidy, args.results or args.out)
    write_text(args.out / "results.md", "\n".join(text) + "\n")
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Speed of :class:`bmrm.collab.CofiRank` on a synthetic rating set shaped like MovieLens-1M.

    python experiments/bench_cofirank.py [--threads 1] [--loss ndcg] [--loss-hinge squared]
        [--u-step block] [--step-tol 0.5] [--step-max-iter 5] [--time-budget 100]
        [--memory | --memory-only] [--quick]

Data (generated here from ``--seed``): 6,040 users × 3,706 items; every user rates
``--n-train`` + ``--n-test`` items (200 + 20) drawn uniformly; a rating is a low-rank
score (rank 10, Gaussian factors) plus Gaussian noise of the same variance, cut into the
levels 1–5 at the 10/30/60/85 % quantiles of all scores. The first 200 ratings of each user
train, the rest test (the weak-generalisation setting of Primal-CR's MovieLens-1M figure,
N = 200, rank 100).

Measured: a warm-up fit on a small set compiles the kernels (reported apart); then one fit
with ``--max-iter`` outer iterations at most, stopping early once the fit has used
``--time-budget`` seconds of process CPU time (``--budget-clock wall`` for wall-clock
seconds; on a machine shared with other jobs the CPU seconds stand for a dedicated
core's seconds); after every outer iteration NDCG@10 on the test ratings (its time is
excluded from the fit's seconds). Reported: wall and process-CPU seconds per outer
iteration and per step, bundle iterations per step, and NDCG@10 against fit time.
``--loss-hinge squared`` trains the ordinal loss with the squared pairwise hinge (the loss
of Primal-CR, Wu, Hsieh & Sharpnack, KDD 2017), whose block steps, as the squared loss's,
take the truncated Newton method. ``--u-step``, ``--step-tol``, ``--step-max-iter`` and
``--bundle-size`` are the model's parameters of those names (``--step-max-iter`` is 5
here, the model's setting for speed; the model's default is 30). ``--memory`` reruns two
outer iterations under
``tracemalloc`` and reports the peak of traced allocations beside the ratings' and
factors' own bytes, and the process's peak resident size; ``--memory-only`` measures that
alone (after the warm-up) and replaces only the run's memory row in the tidy file.
``--threads`` sets numba's threads (the kernels' thread pool) and BLAS's.
λ is the model's ``lam="auto"`` unless ``--lam`` is given; a latent loss (NDCG) starts with
its initial-loss phase, whose time is reported apart and counted in outer 1's. Medians per
outer iteration are over outer 2 on (outer 1 holds the fit's set-up). Results go to
``--out``/results.csv (one row per outer iteration) and results.md, and to the tidy result
file ``--results``/bench_cofirank.csv (columns experiment, dataset, method, setting
(threads), repetition, then ``phase``, ``outer_iteration``, ``wall_s``, ``cpu_s``, per-step
seconds, ``ndcg_at_10``, and with ``--memory`` the peak bytes and ratios; rows of other
methods or settings in it are kept) with bench_cofirank.meta.json.
"""

from __future__ import annotations

import resource
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments._common import (  # noqa: E402
    base_parser,
    int_at_least,
    make_out,
    markdown_table,
    number,
    progress,
    script,
    write_csv,
    write_results,
    write_text,
)


def synthetic(n_users, n_items, n_rated, seed, rank=10):
    """Ratings 1–5 from a low-rank model plus noise (module docstring), as a CSR matrix,
    with the position of each rating among its user's draws (the first ``n_train``
    train)."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n_users, rank)) / np.sqrt(rank)
    B = rng.normal(size=(n_items, rank))
    items = np.argsort(rng.random((n_users, n_items)), axis=1)[:, :n_rated]
    users = np.repeat(np.arange(n_users), n_rated)
    items = items.ravel()
    score = np.einsum("ij,ij->i", A[users], B[items])
    noise = rng.normal(scale=score.std(), size=score.shape)
    score += noise
    cuts = np.quantile(score, [0.1, 0.3, 0.6, 0.85])
    y = 1 + np.searchsorted(cuts, score)
    draw = np.tile(np.arange(n_rated), n_users)
    clean = score - noise
    return users, items, y.astype(np.float64), draw, clean


def matrices(n_users, n_items, n_train, n_test, seed, clean=False):
    """(train, test) CSR matrices; with ``clean``, also the test ratings' noiseless
    low-rank scores (in the test matrix's entry order)."""
    users, items, y, draw, scores = synthetic(n_users, n_items, n_train + n_test, seed)
    shape = (n_users, n_items)
    train = draw < n_train
    make = lambda m, v: sp.csr_matrix((v[m], (users[m], items[m])), shape=shape)  # noqa: E731
    out = make(train, y), make(~train, y)
    return (*out, make(~train, scores).data) if clean else out


def write_tidy(folder: Path, rows: list, method: str, setting: str, argv) -> None:
    """The tidy result file ``folder/bench_cofirank.csv`` (rows of other methods or
    settings already there are kept) and its ``bench_cofirank.meta.json``."""
    write_results(
        "bench_cofirank",
        rows,
        folder,
        argv,
        keep=lambda row: (row["method"], row["setting"]) != (method, setting),
    )


def run_tag(args) -> str:
    """The run's name: loss, its options, the U step, the settings that differ from the
    defaults, and the threads."""
    tag = f"{args.loss}{'' if args.loss_ties is None else '_' + args.loss_ties}"
    tag += "" if args.loss_hinge is None else f"_{args.loss_hinge}_hinge"
    tag += f"_{args.u_step}"
    if args.step_max_iter != 5:
        tag += f"_stepmax{args.step_max_iter}"
    if args.step_tol != 0.5:
        tag += f"_steptol{args.step_tol:g}"
    if args.bundle_size != 10:
        tag += f"_bundle{args.bundle_size}"
    return tag + f"_t{args.threads}"


def memory_peak(CofiRank, params, train, n_users, n_items, rank):
    """The traced peak of a 2-iteration fit, the ratings' and factors' bytes, and the
    report's lines."""
    data_bytes = train.data.nbytes + train.indices.nbytes + train.indptr.nbytes
    factor_bytes = (n_users + n_items) * rank * 8
    tracemalloc.start()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        CofiRank(**params, max_iter=2).fit(train)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lines = [
        "",
        f"memory: traced peak {peak / 2**20:.1f} MiB during a 2-iteration fit; ratings "
        f"(CSR) {data_bytes / 2**20:.1f} MiB + factors {factor_bytes / 2**20:.1f} MiB = "
        f"{(data_bytes + factor_bytes) / 2**20:.1f} MiB (ratio "
        f"{peak / (data_bytes + factor_bytes):.2f}; with the input ratings, which the fit "
        f"holds too, {(peak + data_bytes) / (data_bytes + factor_bytes):.2f}); process "
        f"peak RSS {maxrss:.0f} MiB",
    ]
    row = {
        "phase": "memory", "traced_peak_bytes": peak, "ratings_bytes": data_bytes,
        "factors_bytes": factor_bytes, "peak_ratio": peak / (data_bytes + factor_bytes),
        "peak_with_input_ratio": (peak + data_bytes) / (data_bytes + factor_bytes),
    }  # fmt: skip
    return row, lines


def memory_record(method: str, setting: str, row: dict) -> dict:
    return {
        "experiment": "bench_cofirank", "dataset": "synthetic-ml1m", "method": method,
        "setting": setting, "repetition": 0, **row,
    }  # fmt: skip


def set_threads(n: int) -> None:
    import numba
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(n)
    threadpool_limits(n)


@script
def main(argv=None) -> int:
    parser = base_parser("bench_cofirank", __doc__.split("\n\n")[0], data=False)
    parser.add_argument("--threads", type=int_at_least(1), default=1)
    parser.add_argument("--loss", default="ndcg", choices=["ndcg", "ordinal", "squared"])
    parser.add_argument("--loss-ties", default=None, choices=["latent", "increasing"])
    parser.add_argument("--loss-hinge", default=None, choices=["squared"])
    parser.add_argument("--u-step", default="block", choices=["block", "users", "batch"])
    parser.add_argument(
        "--lam", type=number(float, 0, low_open=True), default=None,
        help="λ (default: the model's lam='auto')",
    )  # fmt: skip
    parser.add_argument("--rank", type=int_at_least(1), default=100)
    parser.add_argument("--n-train", type=int_at_least(1), default=200)
    parser.add_argument("--n-test", type=int_at_least(1), default=20)
    parser.add_argument("--max-iter", type=int_at_least(1), default=30)
    parser.add_argument("--step-max-iter", type=int_at_least(1), default=5)
    parser.add_argument("--bundle-size", type=int_at_least(3), default=10)
    parser.add_argument("--step-tol", type=number(float, 0, low_open=True), default=0.5)
    parser.add_argument("--time-budget", type=number(float, 0, low_open=True), default=150.0)
    parser.add_argument("--budget-clock", choices=["cpu", "wall"], default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--memory", action="store_true")
    parser.add_argument("--memory-only", action="store_true")
    args = parser.parse_args(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    from bmrm.collab import CofiRank
    from losses.metrics import ndcg_score

    set_threads(args.threads)
    n_users, n_items = (300, 400) if args.quick else (6040, 3706)
    if args.quick:
        args.rank, args.max_iter = 5, 2
    train, test, clean = matrices(n_users, n_items, args.n_train, args.n_test, args.seed, True)
    test_users = np.repeat(np.arange(n_users), np.diff(test.indptr))
    ceiling = ndcg_score(test.data, clean, test_users, k=10)
    out = make_out(args.out)
    if args.results is None:
        args.results = out
    loss_params = {}
    if args.loss_ties is not None:
        loss_params["ties"] = args.loss_ties
    if args.loss_hinge is not None:
        loss_params["hinge"] = args.loss_hinge
    params = dict(
        loss=args.loss,
        loss_params=loss_params or None,
        n_factors=args.rank,
        lam="auto" if args.lam is None else args.lam,
        u_step=args.u_step,
        step_max_iter=args.step_max_iter,
        step_tol=args.step_tol,
        bundle_size=args.bundle_size,
        random_state=args.seed,
    )
    t0 = time.perf_counter()
    # queries longer than the NDCG loss's LONG_QUERY, so that its bound is the fit's, and
    # than the kernels' RADIX_MIN, so that their radix sorts are compiled in the warm-up
    warm_train, _ = matrices(60, 120, 60, 5, args.seed)
    CofiRank(**{**params, "n_factors": 3, "max_iter": 1}).fit(warm_train)
    warmup = time.perf_counter() - t0
    progress(f"warm-up (compilation) {warmup:.1f} s")

    tag = run_tag(args)
    method, setting = f"CofiRank-{tag.rsplit('_t', 1)[0]}", f"threads={args.threads}"
    if args.memory_only:
        memory_row, lines = memory_peak(CofiRank, params, train, n_users, n_items, args.rank)
        text = f"# CofiRank memory ({tag}; {n_users} users × {n_items} items)\n" + "\n".join(lines)
        write_results(
            "bench_cofirank", [memory_record(method, setting, memory_row)], args.results, argv,
            keep=lambda row: (row["method"], row["setting"], row["phase"])
            != (method, setting, "memory"),
        )  # fmt: skip
        write_text(out / "results.md", text + "\n")
        print(text)
        return 0

    rows = []
    clock = {"excluded": 0.0, "cpu_excluded": 0.0}

    def callback(model):
        t, c = time.perf_counter(), time.process_time()
        res = model.result_
        steps = res.steps[-2:]
        rows.append(
            {
                "outer": res.nit,
                "seconds": res.seconds - clock["excluded"],
                "cpu_seconds": res.cpu_seconds - clock["cpu_excluded"],
                "objective": res.fun,
                "ndcg10": model.score(test, k=10),
                "u_seconds": steps[0]["seconds"],
                "v_seconds": steps[1]["seconds"],
                "u_cpu": steps[0]["cpu_seconds"],
                "v_cpu": steps[1]["cpu_seconds"],
                "u_nit": steps[0]["nit"],
                "v_nit": steps[1]["nit"],
                "u_rel_gap": steps[0]["rel_gap"],
                "v_rel_gap": steps[1]["rel_gap"],
            }
        )
        r = rows[-1]
        progress(
            f"outer {r['outer']}: {r['seconds']:.1f} s (cpu {r['cpu_seconds']:.1f}), "
            f"J {r['objective']:.6g}, NDCG@10 {r['ndcg10']:.4f}, U {r['u_seconds']:.2f} s "
            f"/{r['u_nit']} it, V {r['v_seconds']:.2f} s /{r['v_nit']} it"
        )
        clock["excluded"] += time.perf_counter() - t
        clock["cpu_excluded"] += time.process_time() - c
        if r["cpu_seconds" if args.budget_clock == "cpu" else "seconds"] >= args.time_budget:
            raise StopIteration

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CofiRank(**params, max_iter=args.max_iter, callback=callback).fit(train)
    init_s, init_cpu = model.result_.init_seconds, model.result_.init_cpu_seconds
    write_csv(out / "results.csv", rows)
    # outer 1's time holds the fit's set-up and a latent loss's initial-loss phase: the
    # medians are over the outer iterations after it when there are any
    per_outer = np.diff([0.0] + [r["seconds"] for r in rows])
    cpu_outer = np.diff([0.0] + [r["cpu_seconds"] for r in rows])
    later = slice(1, None) if len(rows) > 1 else slice(None)
    lines = [
        f"# CofiRank benchmark ({tag}; {n_users} users × {n_items} items, "
        f"{train.nnz} training ratings, rank {args.rank}, lam {model.lam_:.4g})",
        "",
        f"warm-up (compilation) {warmup:.1f} s; λ {model.lam_:.4g}; status: "
        f"{model.result_.message}; NDCG@10 of the generating model's noiseless scores: "
        f"{ceiling:.4f}; initial-loss phase ({model.result_.init_nit} outer iterations, in "
        f"outer 1's time) {init_s:.1f} s (CPU {init_cpu:.1f})",
        f"median seconds per outer iteration (outer 2 on) {np.median(per_outer[later]):.2f} "
        f"(CPU {np.median(cpu_outer[later]):.2f}); U step "
        f"{np.median([r['u_seconds'] for r in rows]):.2f} s (CPU "
        f"{np.median([r['u_cpu'] for r in rows]):.2f}), V step "
        f"{np.median([r['v_seconds'] for r in rows]):.2f} s (CPU "
        f"{np.median([r['v_cpu'] for r in rows]):.2f})",
        "",
        markdown_table(
            ["outer", "seconds", "CPU s", "J", "NDCG@10", "U s", "U it", "V s", "V it"],
            [
                [
                    r["outer"],
                    f"{r['seconds']:.1f}",
                    f"{r['cpu_seconds']:.1f}",
                    f"{r['objective']:.6g}",
                    r["ndcg10"],
                    f"{r['u_seconds']:.2f}",
                    r["u_nit"],
                    f"{r['v_seconds']:.2f}",
                    r["v_nit"],
                ]
                for r in rows
            ],  # fmt: skip
        ),
    ]
    if args.memory:
        memory_row, memory_lines = memory_peak(
            CofiRank, params, train, n_users, n_items, args.rank
        )
        lines += memory_lines
    tidy = [
        {
            "experiment": "bench_cofirank", "dataset": "synthetic-ml1m", "method": method,
            "setting": setting, "repetition": 0, "outer_iteration": 0, "phase": "warm-up",
            "wall_s": warmup, "cpu_s": float("nan"),
        },
        {
            "experiment": "bench_cofirank", "dataset": "synthetic-ml1m", "method": method,
            "setting": setting, "repetition": 0, "outer_iteration": 0,
            "phase": "initial loss", "wall_s": init_s, "cpu_s": init_cpu,
        },
    ]  # fmt: skip
    for r, wall, cpu in zip(rows, per_outer, cpu_outer, strict=True):
        tidy.append(
            {
                "experiment": "bench_cofirank", "dataset": "synthetic-ml1m", "method": method,
                "setting": setting, "repetition": 0, "outer_iteration": r["outer"],
                "phase": "outer", "wall_s": wall, "cpu_s": cpu,
                "fit_wall_s": r["seconds"], "fit_cpu_s": r["cpu_seconds"],
                "u_wall_s": r["u_seconds"], "u_cpu_s": r["u_cpu"], "u_bundle_iterations":
                r["u_nit"], "v_wall_s": r["v_seconds"], "v_cpu_s": r["v_cpu"],
                "v_bundle_iterations": r["v_nit"], "objective": r["objective"],
                "ndcg_at_10": r["ndcg10"], "lam": model.lam_,
            }
        )  # fmt: skip
    if args.memory:
        tidy.append(memory_record(method, setting, memory_row))
    write_tidy(args.results, tidy, method, setting, argv)
    text = "\n".join(lines) + "\n"
    write_text(out / "results.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

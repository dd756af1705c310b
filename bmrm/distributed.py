"""Distributed risk evaluation with Dask (``bmrm.fit(..., backend="dask", client=...)``).

The data are cut into partitions that hold whole queries, and each partition lives on a
worker as a :class:`~bmrm.solver.oracle.RiskOracle` over its rows (its ``X``, its prepared
targets). At every iteration the client sends w in one task per worker thread, which
returns, for each partition that worker holds, its summed risk Σ_{q∈p} l(X_q w, y_q) and its
Xᵀ∂l/∂f (d + 1 numbers); the client adds them in partition order, divides by the global
number of terms and solves the master problem itself. Nothing proportional to the data
crosses the network after the partitions are built.

Because a query's loss only depends on that query's scores, the risk of Teo, Vishwanathan,
Smola & Le (JMLR 11 (2010), eq. 1), R(w) = (1/n) Σ_p Σ_{q∈p} l(X_q w, y_q), and its
subgradient (1/n) Σ_p X_pᵀ ∂l/∂f_p split exactly over partitions of whole queries; partitions
are therefore never allowed to cut a query.

Partitions are built by Dask tasks from the input's own task graph (a dask array or
dataframe), or from task definitions that carry the rows (NumPy or SciPy input), so when a
worker dies Dask rebuilds its partitions elsewhere and the fit goes on with the same sums.
"""

from __future__ import annotations

import warnings
import weakref

import numpy as np
import scipy.sparse as sp

import losses
from bmrm._validation import _frame_values, check_X, is_dask
from bmrm.solver.oracle import RiskOracle
from losses.parallel import thread_limit

__all__ = ["DaskRiskOracle", "frame_array", "resolve_client"]

# One risk task per worker thread and iteration, evaluating the partitions that worker holds
# (True), or one task per partition (False: the scheduler's and client's work per iteration
# then grows with the number of partitions; kept to measure that cost against).
GROUP_TASKS = True

# Threads of a partition task's kernels. Dask runs one task per worker thread and sets OpenMP
# and BLAS to one thread in its worker processes; kernels spread by every task over numba's
# count (all the machine's cores, whatever NUMBA_NUM_THREADS the workers were meant to get
# once numba is imported) would put several busy threads on each core.
TASK_THREADS = 1


class _Partition:
    """One partition's oracle, as held in a worker's memory (None for a partition without
    rows, which the fit leaves out; ``width`` is then its number of columns)."""

    def __init__(self, oracle: RiskOracle | None, n_rows: int, nbytes: int, width: int = 0):
        self.oracle = oracle
        self.n_rows = n_rows
        self.nbytes = nbytes
        self.width = width if oracle is None else oracle.X.shape[1]

    def __sizeof__(self) -> int:
        # Dask measures results by ``sys.getsizeof`` unless told otherwise, in every process
        # (the workers' too): report the partition's arrays, so that the scheduler keeps tasks
        # next to them and the workers' memory accounting sees them
        return self.nbytes


def resolve_client(client):
    """Return the Dask client of ``backend="dask"``.

    Parameters
    ----------
    client : distributed.Client or None
        The client, or None for Dask's default client (the client created last, or the one
        of a ``with Client(...)`` block).

    Returns
    -------
    distributed.Client
        ``client``, or the default client.

    Raises
    ------
    ValueError
        When ``client`` is not a client, or is None and there is no default client.
    """
    if client is not None:
        if not all(callable(getattr(client, m, None)) for m in ("submit", "gather", "nthreads")):
            raise ValueError(
                f"client must be a distributed.Client (with submit, gather and nthreads); "
                f"got {client!r}"
            )
        if getattr(client, "status", "running") in ("closing", "closed"):
            raise ValueError(f"client {client!r} is closed: pass a running distributed.Client")
        return client
    try:
        from distributed import default_client
    except ImportError:
        raise ValueError(
            "backend='dask' needs a client: pass client=distributed.Client(...) (the "
            "'distributed' package is not installed: pip install 'bmrm[distributed]')"
        ) from None
    try:
        return default_client()
    except ValueError:
        raise ValueError(
            "backend='dask' needs a client: pass client=distributed.Client(...), or create one "
            "first (it becomes Dask's default client)"
        ) from None


def _as_matrix(X):
    """A partition's rows as a dense C-ordered array or CSR matrix (no copy when already so)."""
    if hasattr(X, "to_numpy"):  # a pandas DataFrame of features, converted as check_X does
        X = _frame_values(X, "X")
    if sp.issparse(X):
        return sp.csr_matrix(X)
    X = np.asarray(X)
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    return np.ascontiguousarray(X)


def _build_partition(
    X, y, qid, loss, fit_intercept, intercept_scaling, loss_data=None, sample_weight=None
) -> _Partition:
    """Prepare one partition's targets and oracle (runs on a worker)."""
    X = _as_matrix(X)
    if X.ndim == 2 and X.shape[0] == 0:
        # a filter, a shuffle or an empty chunk can leave a partition without rows: it holds
        # no term of the risk, and the oracle leaves it out
        return _Partition(None, 0, 0, X.shape[1])
    X = check_X(X)
    y = np.asarray(y)
    if y.dtype.kind in "biuf" and not np.all(np.isfinite(y.astype(np.float64))):
        raise ValueError("y must not contain NaN or inf")
    qid = None if qid is None else np.asarray(qid)
    prepared = losses.prepare(
        loss,
        y,
        qid,
        n_samples=X.shape[0],
        sample_weight=None if sample_weight is None else np.asarray(sample_weight),
        weight_part=True,
        **(loss_data or {}),
    )
    oracle = RiskOracle(X, prepared, fit_intercept, intercept_scaling)
    return _Partition(oracle, X.shape[0], _held_nbytes(X, prepared))


def _held_nbytes(X, prepared) -> int:
    """Bytes of the arrays a partition keeps: X, and every distinct array of its prepared
    loss (the targets, with the listwise losses' store of assignment duals, and the query
    structure), found through tuples, lists and dicts."""
    total = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes if sp.issparse(X) else X.nbytes
    groups = prepared.groups
    seen = set()
    stack = [prepared.targets, groups.query_ptr, groups.order, groups.qids]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            total += obj.nbytes
        elif isinstance(obj, (tuple, list)):
            stack.extend(obj)
        elif isinstance(obj, dict):
            stack.extend(obj.values())
    return total


def _partition_info(part: _Partition) -> tuple[int, float, int, str]:
    """Rows, the risk's divisor (terms, or their summed weights), width and dtype of X."""
    if part.oracle is None:
        return 0, 0, part.width, ""
    return part.n_rows, part.oracle.prepared.divisor, part.width, part.oracle.X.dtype.str


def _partition_risk(part: _Partition, w: np.ndarray) -> tuple[float, np.ndarray]:
    """The partition's summed (weighted) risk and Σ Xᵀ∂l/∂f (undoing the oracle's mean)."""
    with thread_limit(TASK_THREADS):
        R, a = part.oracle(w)
    divisor = part.oracle.prepared.divisor
    return R * divisor, a * divisor


def _worker_address() -> str | None:
    from distributed import get_worker

    try:
        return get_worker().address
    except ValueError:  # not on a worker
        return None


def _group_risk(w: np.ndarray, *parts: _Partition) -> tuple[str | None, np.ndarray]:
    """The summed risks and Σ Xᵀ∂l/∂f of ``parts``, one row ``[R_p, a_p]`` per partition in
    the order given, and the address of the worker that ran the task."""
    out = np.empty((len(parts), 0 if not parts else 1 + parts[0].oracle.n_features))
    for row, part in zip(out, parts, strict=True):
        R, a = _partition_risk(part, w)
        row[0] = R
        row[1:] = a
    return _worker_address(), out


def _derived_partition(part: _Partition, oracle: RiskOracle) -> _Partition:
    # the new oracle shares the partition's X, whose size it reports as the original does,
    # so the scheduler keeps it where that X is
    return _Partition(oracle, part.n_rows, part.nbytes)


def _release_group(*parts: _Partition) -> None:
    for part in parts:
        part.oracle.release()


def _balanced(indices: list[int], rows: list[int], n_bins: int) -> list[list[int]]:
    """``indices`` split into at most ``n_bins`` non-empty lists of about equal rows (largest
    first into the lightest bin), each list in increasing order."""
    bins: list[list[int]] = [[] for _ in range(max(1, min(n_bins, len(indices))))]
    load = [0] * len(bins)
    for i in sorted(indices, key=lambda i: (-rows[i], i)):
        b = load.index(min(load))
        bins[b].append(i)
        load[b] += rows[i]
    return [sorted(b) for b in bins]


def _convexified_partition(part: _Partition, w: np.ndarray) -> _Partition:
    """The partition's convex surrogate, latent part fixed at its own scores X_p w."""
    with thread_limit(TASK_THREADS):
        return _derived_partition(part, part.oracle.convexified(w))


def _initial_partition(part: _Partition) -> _Partition:
    """The partition's oracle of the loss's ``initial_loss``."""
    with thread_limit(TASK_THREADS):
        return _derived_partition(part, part.oracle.initial())


def _unique_qids(qid) -> np.ndarray:
    return np.unique(np.asarray(qid))


def _check_whole_queries(qid_sets: list[np.ndarray]) -> None:
    """Raise when a query id occurs in two partitions."""
    owner = np.concatenate([np.full(len(s), p) for p, s in enumerate(qid_sets)])
    ids = np.concatenate(qid_sets)
    order = np.argsort(ids, kind="stable")
    ids, owner = ids[order], owner[order]
    split = np.flatnonzero(ids[1:] == ids[:-1])
    if split.size:
        at = int(split[0])
        value = ids[at]
        value = value.item() if isinstance(value, np.generic) else value
        raise ValueError(
            f"query {value!r} has rows in partitions {owner[at]} and {owner[at + 1]}, "
            "but the ranking losses are exact only on whole queries. Sort the rows by qid and "
            "rechunk X, y and qid (the same row chunks) so that chunk boundaries fall between "
            "queries, or pass a dask DataFrame, which is repartitioned by qid"
        )


def _split_rows(query_ptr: np.ndarray, n_rows: int, n_parts: int) -> list[tuple[int, int]]:
    """About equal row ranges ending at query boundaries (``query_ptr``), none empty."""
    targets = np.linspace(0, n_rows, n_parts + 1)[1:-1]
    cuts = np.unique(query_ptr[np.searchsorted(query_ptr, targets)])
    bounds = [0, *[int(c) for c in cuts if 0 < c < n_rows], n_rows]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _split_loss_data(loss, loss_data, inverse, bounds, order=None):
    """Per-partition loss data: row indices renumbered within their partition.

    Items of the row-index keys (e.g. the preference loss's pairs, which ``losses.prepare``
    has checked to lie within one query) go to the partition of their rows; other arrays of
    the same length (e.g. pair costs) follow them; per-row arrays (``row_array_keys``, e.g.
    the ordinal loss's row_weight) are put in the rows' order (``order``) and cut like the
    rows; anything else is passed to every partition.
    """
    row_arrays = {}
    for k in getattr(loss, "row_array_keys", ()):
        if loss_data.get(k) is not None:
            value = np.asarray(loss_data[k])
            value = value if order is None else value[order]
            row_arrays[k] = [value[start:stop] for start, stop in bounds]
    if row_arrays:
        rest = {k: v for k, v in loss_data.items() if k not in row_arrays}
        parts = _split_loss_data(loss, rest, inverse, bounds)
        for p, part in enumerate(parts):
            part.update({k: v[p] for k, v in row_arrays.items()})
        return parts
    keys = [k for k in getattr(loss, "row_index_keys", ()) if loss_data.get(k) is not None]
    starts = np.array([start for start, _ in bounds])
    if not keys:
        return [dict(loss_data) for _ in bounds]
    if len(keys) > 1:
        raise ValueError(f"backend='dask' takes one row-index keyword; got {keys}")
    key = keys[0]
    rows = np.asarray(loss_data[key])
    rows = rows if inverse is None else inverse[rows]
    part = np.searchsorted(starts, rows.reshape(len(rows), -1)[:, 0], side="right") - 1
    out = []
    for p, (start, _) in enumerate(bounds):
        chosen = np.flatnonzero(part == p)
        data = {}
        for name, value in loss_data.items():
            if name == key:
                data[name] = rows[chosen] - start
            elif value is not None and np.ndim(value) >= 1 and len(value) == len(rows):
                data[name] = np.asarray(value)[chosen]
            else:
                data[name] = value
        out.append(data)
    return out


def _numpy_tasks(client, X, y, qid, loss, nthreads, build_args, loss_data, sample_weight=None):
    """Partitions of in-memory input, cut at query boundaries after a stable sort by qid, one
    per worker thread (``nthreads``: address -> threads) and placed on it.

    The targets and loss data are first checked here as a local fit would, so errors come
    before any work is sent. Each task definition carries its rows, so the scheduler can
    rebuild a partition lost with its worker.
    """
    X = check_X(X)
    n = X.shape[0]
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must be 1-d with one entry per row of X ({n}); got shape {y.shape}")
    if y.dtype.kind in "biuf" and not np.all(np.isfinite(y.astype(np.float64))):
        raise ValueError("y must not contain NaN or inf")
    groups = losses.prepare(
        loss, y, qid, n_samples=n, sample_weight=sample_weight, **loss_data
    ).groups
    if sample_weight is not None:
        sample_weight = np.asarray(sample_weight)
    slots = [address for address in sorted(nthreads) for _ in range(nthreads[address])]
    n_parts = max(1, len(slots))
    if qid is None and getattr(loss, "pointwise", False):
        ptr = np.arange(n + 1)
    else:
        ptr = groups.query_ptr
    order = groups.order
    if order is not None:
        X, y, qid = X[order], y[order], np.asarray(qid)[order]
        if sample_weight is not None:
            sample_weight = sample_weight[order]
    bounds = _split_rows(ptr, n, n_parts)
    inverse = None if order is None else groups.inverse()
    data = _split_loss_data(loss, loss_data, inverse, bounds, order)
    tasks = []
    with warnings.catch_warnings():
        # carrying the rows in the task is the point: the scheduler can rebuild the partition
        warnings.filterwarnings("ignore", message="Sending large graph")
        for p, ((start, stop), part_data) in enumerate(zip(bounds, data, strict=True)):
            rows = slice(start, stop)
            part_qid = None if qid is None else np.asarray(qid)[rows]
            tasks.append(
                client.submit(
                    _build_partition,
                    X[rows],
                    y[rows],
                    part_qid,
                    loss,
                    *build_args,
                    part_data,
                    None if sample_weight is None else sample_weight[rows],
                    # about equal rows on every worker thread (loose: a worker that has
                    # gone is passed over when the partition is rebuilt)
                    workers=[slots[p % len(slots)]] if slots else None,
                    allow_other_workers=bool(slots),
                    pure=False,
                )
            )
    return tasks


def _array_tasks(client, X, y, qid, loss, build_args, sample_weight=None):
    """Partitions from the row chunks of a dask array; y, qid and sample_weight follow X's
    chunks."""
    import dask
    import dask.array as da

    if X.ndim != 2:
        raise ValueError(f"X must be 2-d; got shape {X.shape}")
    if any(np.isnan(c) for c in X.chunks[0]):
        raise ValueError(
            "X is a dask array whose row chunk sizes are unknown (nan): call "
            "X.compute_chunk_sizes() first, or make it with to_dask_array(lengths=True)"
        )
    X = X.rechunk({1: -1})
    row_chunks = X.chunks[0]
    columns = []
    for name, v in (("y", y), ("qid", qid), ("sample_weight", sample_weight)):
        if v is None:
            columns.append([None] * len(row_chunks))
            continue
        if not isinstance(v, da.Array):
            v = np.asarray(v)
        if v.ndim != 1 or v.shape[0] != X.shape[0]:
            raise ValueError(
                f"{name} must be 1-d with one entry per row of X ({X.shape[0]}); "
                f"got shape {v.shape}"
            )
        if not isinstance(v, da.Array):
            v = da.from_array(v, chunks=(row_chunks,))
        columns.append(list(v.rechunk((row_chunks,)).to_delayed()))
    y_parts, qid_parts, weight_parts = columns
    if y is None:
        raise ValueError("y is required")
    x_parts = [block[0] for block in X.to_delayed()]
    if qid is None:
        if not getattr(loss, "pointwise", False) and len(x_parts) > 1:
            raise ValueError(
                "qid=None makes all rows one query, which cannot be split over the "
                f"{len(x_parts)} row chunks of X; pass qid, or X with one row chunk"
            )
    else:
        _check_whole_queries(
            client.gather(client.compute([dask.delayed(_unique_qids)(q) for q in qid_parts]))
        )
    build = dask.delayed(_build_partition, pure=True)
    return client.compute(
        [
            build(x, yp, qp, loss, *build_args, None, sp_)
            for x, yp, qp, sp_ in zip(x_parts, y_parts, qid_parts, weight_parts, strict=True)
        ]
    )


def _frame_tasks(client, X, y, qid, loss, build_args, sample_weight=None):
    """Partitions of a dask DataFrame; shuffled by qid when a query spans two partitions.

    ``y``, ``qid`` and ``sample_weight`` are column names of ``X`` or dask Series aligned
    with it.
    """
    import dask

    frame = X
    y_name, qid_name, weight_name = "__bmrm_y__", "__bmrm_qid__", "__bmrm_weight__"
    extra = {}
    for name, v, new in (
        ("y", y, y_name),
        ("qid", qid, qid_name),
        ("sample_weight", sample_weight, weight_name),
    ):
        if v is None:
            continue
        if isinstance(v, str):
            if v not in frame.columns:
                raise ValueError(f"{name}={v!r} is not a column of X")
            extra[new] = frame[v]
            frame = frame.drop(columns=[v])
        elif is_dask(v):
            extra[new] = v
        else:
            raise ValueError(
                f"{name} must be a column name of X or a dask Series aligned with its rows "
                f"when X is a dask DataFrame; got {type(v).__name__}"
            )
    if y_name not in extra:
        raise ValueError("y is required")
    features = list(frame.columns)
    frame = frame.assign(**extra)
    build = dask.delayed(_build_frame_partition, pure=True)
    args = (
        features,
        y_name,
        qid_name if qid is not None else None,
        weight_name if sample_weight is not None else None,
        loss,
        *build_args,
    )
    if qid is None:
        if not getattr(loss, "pointwise", False) and frame.npartitions > 1:
            frame = frame.repartition(npartitions=1)
        return client.compute([build(p, *args) for p in frame.to_delayed()])
    # The query ids are those of the very partitions built, computed with them (one graph,
    # so each partition is read once): a frame's partitions can differ between selections
    # of its columns (read_parquet joins files when few columns are read), so the ids of
    # frame[qid] could hide a query cut between two of the partitions built here.
    parts = frame.to_delayed()
    futures = client.compute(
        [build(p, *args) for p in parts] + [dask.delayed(_frame_qids)(p, qid_name) for p in parts]
    )
    sets = client.gather(futures[len(parts) :])
    try:
        _check_whole_queries(sets)
    except ValueError:
        del futures  # the partitions built are released
        frame = frame.shuffle(on=qid_name)
        return client.compute([build(p, *args) for p in frame.to_delayed()])
    return futures[: len(parts)]


def _frame_qids(frame, qid_name) -> np.ndarray:
    return _unique_qids(frame[qid_name])


def _frame_matrix(frame, features):
    """The ``features`` columns of a partition of a dask DataFrame (a pandas DataFrame) as a
    dense C-ordered float32 or float64 array, as the partitions are fitted and predicted."""
    return _as_matrix(frame[features])


def _build_frame_partition(
    frame, features, y_name, qid_name, weight_name, loss, *build_args
) -> _Partition:
    qid = None if qid_name is None else frame[qid_name].to_numpy()
    weights = None if weight_name is None else frame[weight_name].to_numpy()
    X = _frame_matrix(frame, features)
    return _build_partition(X, frame[y_name].to_numpy(), qid, loss, *build_args, None, weights)


def frame_array(frame, features, client=None):
    """Return the ``features`` columns of a dask DataFrame as a dask array.

    The array has one row block per partition, each converted as :func:`bmrm.fit` converts
    the partitions it fits.

    The blocks come from the partitions of ``frame[features]`` as computed (its task graph
    after optimization), which need not be ``frame.npartitions`` of them: ``read_parquet``
    joins files when few of their columns are read, which is why
    ``frame[features].to_dask_array(lengths=True)`` can fail. The rows of each partition
    are counted here (computed on ``client``, or by Dask's default scheduler when it is
    None), so the array's chunks are known; its blocks stay lazy.

    Parameters
    ----------
    frame : dask.dataframe.DataFrame
        The data.
    features : list of str
        The feature columns.
    client : distributed.Client or None, default=None
        The client that counts the rows; None uses Dask's default scheduler.

    Returns
    -------
    dask.array.Array of shape (n_samples, len(features))
        The features, with known chunks.
    """
    import dask
    import dask.array as da

    frame = frame[list(features)]
    parts = frame.to_delayed()
    lengths = [dask.delayed(len)(p) for p in parts]
    if client is None:
        lengths = dask.compute(*lengths)
    else:
        lengths = client.gather(client.compute(lengths))
    dtype = _frame_matrix(frame._meta, list(features)).dtype
    block = dask.delayed(_frame_matrix, pure=True)
    return da.concatenate(
        [
            da.from_delayed(block(p, list(features)), shape=(int(n), len(features)), dtype=dtype)
            for p, n in zip(parts, lengths, strict=True)
        ]
    )


class _Tracking:
    """A client whose ``submit``, ``map`` and ``compute`` note the futures they return in a
    weak set, so that a failed fit can cancel those still alive (others delegate)."""

    def __init__(self, client, futures: weakref.WeakSet):
        self._client = client
        self._futures = futures

    def _noted(self, out):
        for future in out if isinstance(out, list) else [out]:
            self._futures.add(future)
        return out

    def submit(self, *args, **kwargs):
        return self._noted(self._client.submit(*args, **kwargs))

    def map(self, *args, **kwargs):
        return self._noted(self._client.map(*args, **kwargs))

    def compute(self, *args, **kwargs):
        return self._noted(self._client.compute(*args, **kwargs))

    def __getattr__(self, name):
        return getattr(self._client, name)


class DaskRiskOracle:
    """R(w) and a subgradient summed over partitions of whole queries held by Dask workers.

    Same call as :class:`~bmrm.solver.oracle.RiskOracle`: ``oracle(w) -> (R(w), a)`` with
    R(w) = (1/n) Σ_p Σ_{q∈p} l(X_q w, y_q), n the total number of terms (queries, or samples
    for pointwise losses), so a fit gives the local fit's objective up to the rounding of
    the partial sums. With ``sample_weight``, each partition returns Σ_t s_t l_t over its
    terms and its Σ_t s_t, and R(w) is the ratio of their totals: the local weighted mean.

    Parameters
    ----------
    client : distributed.Client
        The client whose workers hold the partitions and evaluate them.
    X : dask array, dask DataFrame, ndarray or sparse matrix of shape (n_samples, n_features)
        A dask array's row chunks are the partitions (its column chunks are joined); they
        must hold whole queries, else a ValueError says how to rechunk. A dask DataFrame's
        partitions are shuffled by qid when a query spans two of them. In-memory input is
        sorted by qid (stably) and cut at query boundaries into one partition per worker
        thread, placed on that thread's worker. The partitions of dask input stay where Dask
        computes them (the oracle moves no data): each worker's share of the rows is its
        share of the work per iteration, so spread them evenly (e.g. by persisting them so).
    y : array-like, dask array, dask Series or str
        The targets, or the name of their column of a DataFrame ``X``.
    loss : loss object
        The loss (a built loss, see :func:`losses.get`).
    qid : array-like, dask array, dask Series, str or None, default=None
        The query id of each row, like ``y``; None makes all rows one query (then one
        partition unless the loss is pointwise).
    fit_intercept : bool, default=False
        As for :class:`~bmrm.solver.oracle.RiskOracle`.
    intercept_scaling : float, default=1.0
        As for :class:`~bmrm.solver.oracle.RiskOracle`.
    sample_weight : array-like, dask array, dask Series, str or None, default=None
        One non-negative weight per row, equal within a query for a query loss
        (:func:`losses.check_sample_weight`; checked here for in-memory X, by each
        partition for dask input).
    **loss_data
        Loss data such as the preference loss's ``pairs`` and ``pair_costs`` (in-memory X
        only); each pair goes, renumbered, to the partition of its query.

    Notes
    -----
    Losses with a latent part (``loss.latent``) are trained by the concave-convex procedure
    (:func:`bmrm.solver.cccp.minimize_cccp`) through :meth:`convexified` and :meth:`initial`:
    every partition fixes the latent part of its own queries from its own scores, which is
    exactly what the local procedure does query by query.

    Per call: one task per worker thread, which evaluates the partitions that worker holds
    (its partition futures are the task's dependencies, so no data moves) and returns one
    row ``[R_p, a_p]`` (d + 1 numbers) per partition; w (8·d bytes) travels inside each
    task. The client adds the rows in partition order, so the result does not depend on the
    grouping, on which worker ran what or on which task finished first. Grouping by worker
    keeps the scheduler's and client's work per iteration (a few milliseconds of CPU per
    task) independent of the number of partitions. The groups come from
    ``client.who_has`` at the first call and again after a task ran elsewhere than its
    group's worker (a worker died and Dask rebuilt its partitions elsewhere, or a partition
    was lost): the restriction to a worker is loose, so such a call still completes, with
    Dask moving what it must. Partition objects report their size to Dask. A task runs its
    kernels on its own thread (``TASK_THREADS``): the parallelism is the workers' threads
    and processes, as for Dask's own tasks, so give a worker as many threads as the cores it
    should use. ``calls`` and ``tasks`` count the calls and the risk tasks submitted.
    """

    def __init__(
        self,
        client,
        X,
        y,
        loss,
        qid=None,
        *,
        fit_intercept=False,
        intercept_scaling=1.0,
        sample_weight=None,
        **loss_data,
    ):
        self.client = client
        self.loss = loss
        # every future this oracle and those derived from it make, weakly: a fit that fails
        # cancels the ones a traceback keeps alive (``cancel``)
        self._futures = weakref.WeakSet()
        self._tracking = _Tracking(client, self._futures)
        try:
            self._build(
                X, y, loss, qid, fit_intercept, intercept_scaling, sample_weight, loss_data
            )
        except BaseException:
            self.cancel()
            raise
        self.group_tasks = GROUP_TASKS
        self.groups = None  # [(worker address or None, partition indices)], made on first use
        # its own counts of calls and tasks, against which the loop's bookkeeping is tested;
        # timing and the counts of a fit are the problem's counting oracle's
        self.calls = 0
        self.tasks = 0

    def _build(self, X, y, loss, qid, fit_intercept, intercept_scaling, sample_weight, loss_data):
        """The partitions on the workers, and the sizes and dtype the fit needs."""
        client = self._tracking
        build_args = (bool(fit_intercept), float(intercept_scaling))
        module = type(X).__module__
        in_memory = not module.startswith(("dask.dataframe", "dask_expr", "dask.array"))
        if loss_data and not in_memory:
            raise ValueError(
                f"loss data keywords ({sorted(loss_data)}) need in-memory X (NumPy or SciPy) "
                "with backend='dask'"
            )
        if in_memory:
            nthreads = client.nthreads()
            tasks = _numpy_tasks(
                client, X, y, qid, loss, nthreads, build_args, loss_data, sample_weight
            )
        elif module.startswith("dask.array"):
            tasks = _array_tasks(client, X, y, qid, loss, build_args, sample_weight)
        else:
            tasks = _frame_tasks(client, X, y, qid, loss, build_args, sample_weight)
        info = client.gather(client.map(_partition_info, tasks, pure=False))
        keep = [i for i, (rows, _, _, _) in enumerate(info) if rows > 0]
        self.partitions = [tasks[i] for i in keep]
        self.rows = [info[i][0] for i in keep]
        if not self.partitions:
            raise ValueError("X has no rows")
        widths = {info[i][2] for i in keep}
        if len(widths) != 1:
            raise ValueError(f"the partitions of X have different widths {sorted(widths)}")
        self.n_samples = sum(info[i][0] for i in keep)
        # the risk's divisor: the number of terms, or (with sample_weight) their summed
        # weights, added in partition order
        self.n_terms = 0.0 if sample_weight is not None else 0
        for i in keep:
            self.n_terms += info[i][1]
        if sample_weight is not None and not self.n_terms > 0:
            raise ValueError("sample_weight is all zero: at least one row needs a positive weight")
        self.n_features = widths.pop() + int(fit_intercept)
        # the precision of the products, which bounds how well planes and values agree: that
        # of the feature matrices as the partitions hold them
        self.dtype = np.result_type(*[np.dtype(info[i][3]) for i in keep])

    def _group(self) -> list[tuple[str | None, list[int]]]:
        """Partition indices per task: the partitions held by each worker, split into one
        list per worker thread of about equal rows (``client.who_has``, one scheduler round
        trip). A partition held by no worker (lost with its worker and not yet rebuilt) gets
        a task of its own, which the scheduler places where it rebuilds it."""
        if not self.group_tasks:
            return [(None, [i]) for i in range(len(self.partitions))]
        who_has = self.client.who_has(self.partitions)
        nthreads = self.client.nthreads()
        held: dict[str, list[int]] = {}
        load: dict[str, int] = {}
        lost = []
        for i, part in enumerate(self.partitions):
            holders = [a for a in who_has.get(part.key, ()) if a in nthreads]
            if not holders:
                lost.append(i)
                continue
            # a partition held twice (copied after a failure) goes to the lighter holder
            address = min(holders, key=lambda a: (load.get(a, 0), a))
            held.setdefault(address, []).append(i)
            load[address] = load.get(address, 0) + self.rows[i]
        groups = [
            (address, chunk)
            for address in sorted(held)
            for chunk in _balanced(held[address], self.rows, nthreads[address])
        ]
        return groups + [(None, [i]) for i in lost]

    def _submit_groups(self, function, *args) -> list:
        """One task per group: ``function(*args, *partitions of the group)`` on the group's
        worker (a loose restriction: a worker that has died is passed over)."""
        if self.groups is None:
            self.groups = self._group()
        return [
            self._tracking.submit(
                function,
                *args,
                *[self.partitions[i] for i in indices],
                workers=None if address is None else [address],
                allow_other_workers=address is not None,
                pure=False,
            )
            for address, indices in self.groups
        ]

    def __call__(self, w: np.ndarray):
        """Return ``(R(w), a)`` with ``a`` a subgradient of R at ``w``."""
        w = np.ascontiguousarray(w, dtype=np.float64)
        futures = self._submit_groups(_group_risk, w)
        groups = self.groups
        rows = [None] * len(self.partitions)
        for (address, indices), (ran_on, values) in zip(
            groups, self.client.gather(futures), strict=True
        ):
            if address is None or ran_on != address:
                # a worker died or a partition was rebuilt elsewhere: ask where the
                # partitions are before the next call (the sums do not depend on it)
                self.groups = None
            for i, row in zip(indices, values, strict=True):
                rows[i] = row
        # added in partition order, whatever the grouping and whichever task finished first
        R = 0.0
        a = np.zeros(self.n_features)
        for row in rows:
            R += row[0]
            a += row[1:]
        self.calls += 1
        self.tasks += len(futures)
        return R / self.n_terms, a / self.n_terms

    def _derived(self, partitions: list) -> DaskRiskOracle:
        """An oracle over ``partitions`` (tasks on this oracle's partitions), same sizes and
        grouping."""
        other = object.__new__(DaskRiskOracle)
        other.__dict__.update(self.__dict__)
        other.partitions = partitions
        other.calls = 0
        other.tasks = 0
        return other

    def _submit_each(self, function, *args) -> list:
        """``function(partition, *args)`` for every partition, each on its group's worker."""
        if self.groups is None:
            self.groups = self._group()
        where = {i: address for address, indices in self.groups for i in indices}
        return [
            self._tracking.submit(
                function,
                part,
                *args,
                workers=None if where[i] is None else [where[i]],
                allow_other_workers=where[i] is not None,
                pure=False,
            )
            for i, part in enumerate(self.partitions)
        ]

    def convexified(self, w: np.ndarray) -> DaskRiskOracle:
        """Return the oracle of the convex surrogate with the latent part fixed at X w.

        Each partition convexifies its queries from its own scores (the partitions stay on
        their workers; only w travels).

        Parameters
        ----------
        w : ndarray of shape (n_features,)
            The weights whose scores fix the latent part.

        Returns
        -------
        DaskRiskOracle
            The surrogate's oracle, on the same partitions.
        """
        w = np.ascontiguousarray(w, dtype=np.float64)
        return self._derived(self._submit_each(_convexified_partition, w))

    def initial(self) -> DaskRiskOracle | None:
        """Return the oracle of the loss's ``initial_loss`` on every partition.

        Returns
        -------
        DaskRiskOracle or None
            The oracle, on the same partitions, or None when the loss offers no
            ``initial_loss``.
        """
        if not hasattr(self.loss, "initial_loss"):
            return None
        return self._derived(self._submit_each(_initial_partition))

    def release(self) -> None:
        """Drop the partitions' work arrays on the workers (:meth:`RiskOracle.release`).

        Waits until every partition has done so.
        """
        self.client.gather(self._submit_groups(_release_group))

    def close(self) -> None:
        """Release the partitions held by the workers."""
        for part in self.partitions:
            part.release()
        self.partitions = []

    def cancel(self) -> None:
        """Cancel every future this oracle and those derived from it made and something holds.

        After a failure, the frames of its traceback hold some: the workers then drop the
        partitions and results at once instead of when the client closes.
        """
        futures = list(self._futures)
        self.partitions = []
        if futures:
            self.client.cancel(futures)

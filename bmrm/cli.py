"""The ``bmrm`` command: train, predict and evaluate rankers on svmlight files.

In the spirit of SVM^rank's ``svm_rank_learn`` and ``svm_rank_classify``::

    bmrm train TRAIN.svmlight MODEL [--loss ordinal] [--lam L | -c C]
               [--scorer expected_gain [--clip-eps EPS]] [--weight-file W] [...]
    bmrm predict TEST.svmlight MODEL PREDICTIONS
    bmrm evaluate TEST.svmlight PREDICTIONS|MODEL [--metric ndcg@10 ...] [--convention exp]
    bmrm warmup [--losses ordinal ndcg ...]

Data files are svmlight / LETOR files (``<label> qid:<q> <index>:<value> ... # comment``)
with one-based feature indices, as SVM^rank and LETOR write them; a file without ``qid:``
takes its query groups from ``--query-file`` (or ``<file>.query`` when it exists) and is
otherwise one query. Model files are the portable files of :mod:`bmrm.io.model_files`; they
store the ranking function (``--scorer``), so ``predict`` and ``evaluate`` apply a model
trained with the expected-gain scorer as they apply a linear one.

Progress and the final summary go to stderr, results (predictions, metric values) to files or
stdout. Bad input (a missing, malformed, truncated or corrupted file, an unknown loss, an
invalid option value, a feature-count mismatch between model and data, a predictions file of
the wrong length, training data whose values overflow float64 in the fit, an output that
cannot be written) ends the command with exit status 2 and a one-line reason on stderr;
output files are written atomically (:func:`os.replace` of a temporary file), so a failed
command leaves none behind and never damages an existing one. An output named ``-``
(PREDICTIONS of ``predict``, MODEL of ``train``) is the standard output; ``-`` as an input
is refused (``/dev/stdin`` reads a pipe). An output that is a symbolic
link writes the file it points to; a device or FIFO (``/dev/stdout``) is written in place,
and a failed write to it (``/dev/full``) is an error.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import math
import os
import stat
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence

from bmrm._version import __version__

__all__ = ["main"]

# The modules a command needs are imported inside its functions, so that building the
# parser (and --help) imports neither numpy, numba nor the solver, and 'predict' and
# 'evaluate' never import the solver.


class _Choices:
    """A parser's choices, computed by ``names()`` on first use (the loss names, read from
    :mod:`losses`, are needed only to check or show the option that takes them)."""

    def __init__(self, names: Callable[[], Sequence[str]]):
        self._names = names
        self._cache: tuple[str, ...] | None = None

    def _values(self) -> tuple[str, ...]:
        if self._cache is None:
            self._cache = tuple(self._names())
        return self._cache

    def __iter__(self):
        return iter(self._values())

    def __contains__(self, value) -> bool:
        return value in self._values()

    def __len__(self) -> int:
        return len(self._values())


def _loss_names() -> list[str]:
    import losses

    return losses.available()


def _pair_costs() -> Sequence[str]:
    from losses.preference import PAIR_COSTS

    return PAIR_COSTS


def _conventions() -> Sequence[str]:
    from losses.metrics import CONVENTIONS

    return CONVENTIONS


def _losses_with(param: str) -> tuple[str, ...]:
    """The loss names whose parameters include ``param``: "normalize" (the losses whose
    terms sum over pairs, normalize="none" under -c), "k" (a cut-off)."""
    import losses

    return tuple(name for name in losses.available() if param in losses.get(name).get_params())


DEFAULT_METRICS = ("ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map")
# the largest cut-off --k accepts: k counts the documents of one query, and a k beyond a
# query's length cuts off nothing (leaving --k out is the whole list)
MAX_K = 2**31 - 1
# the output file name that means the standard output (PREDICTIONS, MODEL)
STDOUT = "-"


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (exit status 2)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


# ----------------------------------------------------------------------------- parser

_TRAIN_EPILOG = """\
regularization:
  The objective is lam*Omega(w) + R(w), R the mean loss over queries (over rows for the
  pointwise losses squared, hinge and logistic) and Omega(w) = 0.5*||w||^2 (l2) or ||w||_1
  (l1). -c C is SVM^rank's trade-off constant: it sets lam = 1/C and, for the pairwise
  losses (ordinal, preference), normalize="none" (pair terms summed per query, not averaged),
  because SVM^rank minimises 0.5*||w||^2 + (C/n_queries) * sum of pair hinge losses. An
  explicit --loss-param normalize=... takes precedence.

losses:
  ordinal     pairwise hinge over all pairs with different labels (SVM^rank's loss)
  preference  the same pairwise hinge on pairs built from the labels, with --pair-cost
  ndcg, neru  structured max-margin bounds on 1 - NDCG@k and 1 - NERU (--k sets the cut-off)
  map         structured max-margin bound on 1 - average precision (SVM-MAP; labels > 0
              relevant, --loss-param threshold=T for labels >= T)
  squared, hinge, logistic  pointwise (hinge and logistic need labels in {0, 1} or {-1, 1})

ranking function (--scorer):
  linear         f(x) = <w, x>, trained by the bundle method (the default)
  expected_gain  h_W(x) = sum_j (2^j - 1) P_W(r = j | x), P_W the softmax of W x over the
                 relevance levels 0..K-1 (K = largest training label + 1), warm-started
                 from the linear fit and trained as bmrm.fit trains a non-linear scorer
                 (a non-convex objective: L-BFGS on a smooth loss such as listnet,
                 cosine, listwise_squared, ranknet or softmax), with --regularizer l2;
                 --clip-eps EPS in [0.5, 1] ranks a document whose largest level
                 probability exceeds EPS by that level's gain alone (Yang, Ravikumar &
                 Lease); the model file stores W, the gains and EPS

--loss-param values are read as JSON when they parse (k=5, truncate_c=true,
cost=[[0,1],[0,0]]) and as plain strings otherwise (cost=linear).
"""

_EVALUATE_EPILOG = """\
metrics (NAME or NAME@K, K a cut-off; default: ndcg@1 ndcg@3 ndcg@5 ndcg@10 map):
  ndcg, dcg, map, p (or precision), recall, f1, mrr, err, neru, kendall_tau (no @K)

conventions:
  exp     NDCG/DCG gain 2^r - 1, discount 1/log2(i + 1); binary measures count label > 0
          as relevant; tied scores count as the average over their orders
  linear  as exp but NDCG/DCG gain r (trec_eval, scikit-learn)
  letor   the LETOR 4.0 evaluation tool: NDCG/DCG gain 2^r - 1, positions 1 and 2
          undiscounted, NDCG@k of a query with fewer than k documents 0; P@k and MAP with
          label >= 1 relevant; tied scores keep file order (for every measure)

The second argument is read as a model file when its first non-blank character is "{",
and otherwise as a predictions file (one score per line, as 'bmrm predict' writes).
"""


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="bmrm",
        description="Train, apply and evaluate linear rankers (bundle-method regularized "
        "risk minimization) on svmlight / LETOR files.",
        epilog="Data files are svmlight / LETOR files with one-based feature indices. Exit "
        "status: 0 on success, 2 on bad input (with a one-line reason on stderr); output "
        "files are written atomically, so a failed command leaves none behind. "
        "'bmrm COMMAND --help' describes each command.",
    )
    parser.add_argument("--version", action="version", version=f"bmrm {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    train = commands.add_parser(
        "train",
        help="fit a model to a svmlight file and save it",
        description="Fit a linear model by the bundle method and write it to MODEL.",
        epilog=_TRAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    train.add_argument("train_file", metavar="TRAIN", help="svmlight / LETOR training file")
    train.add_argument(
        "model_file", metavar="MODEL", help="output model file ('-': standard output)"
    )
    # a metavar, so that building the parser does not read the choices (argparse formats
    # the metavar of every argument it adds)
    train.add_argument(
        "--loss",
        choices=_Choices(_loss_names),
        default="ordinal",
        metavar="LOSS",
        help="one of %(choices)s (default: ordinal)",
    )
    strength = train.add_mutually_exclusive_group()
    strength.add_argument(
        "--lam", type=float, default=None, help="regularization constant > 0 (default 1e-3)"
    )
    strength.add_argument(
        "-c", dest="C", type=float, default=None, help="SVM^rank's C > 0: lam = 1/C (see below)"
    )
    train.add_argument(
        "--tol", type=float, default=1e-3, help="stop at gap <= tol * objective (default 1e-3)"
    )
    train.add_argument("--max-iter", type=int, default=1000, help="iteration cap (default 1000)")
    train.add_argument(
        "--k", type=int, default=None, help=f"cut-off of the ndcg / neru loss (1..{MAX_K})"
    )
    train.add_argument(
        "--loss-param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a loss parameter, e.g. cost=linear (repeatable)",
    )
    train.add_argument(
        "--pair-cost",
        choices=_Choices(_pair_costs),
        default=None,
        metavar="COST",
        help="cost of a label pair for the preference loss: %(choices)s (default zero_one)",
    )
    train.add_argument("--regularizer", choices=("l2", "l1"), default="l2", help="default: l2")
    train.add_argument(
        "--scorer",
        choices=("linear", "expected_gain"),
        default="linear",
        help="the ranking function (default: linear; see below)",
    )
    train.add_argument(
        "--clip-eps",
        type=float,
        default=None,
        metavar="EPS",
        help="clipping threshold in [0.5, 1] of the expected_gain scorer (default: none)",
    )
    train.add_argument(
        "--query-file",
        default=None,
        help="group sizes of a file without qid: (default: TRAIN.query if it exists)",
    )
    train.add_argument(
        "--weight-file",
        default=None,
        help="one weight >= 0 per row of TRAIN, one per line (LightGBM's .weight files); the "
        "loss becomes the weighted mean (query losses: equal weights within a query)",
    )
    train.add_argument("--quiet", action="store_true", help="no progress and no summary on stderr")

    predict = commands.add_parser(
        "predict",
        help="score the rows of a svmlight file with a model",
        description="Write one score per row of TEST to PREDICTIONS (higher ranks first).",
    )
    predict.add_argument("test_file", metavar="TEST", help="svmlight / LETOR file")
    predict.add_argument("model_file", metavar="MODEL", help="model file from 'bmrm train'")
    predict.add_argument(
        "predictions_file", metavar="PREDICTIONS", help="output file ('-': standard output)"
    )

    evaluate = commands.add_parser(
        "evaluate",
        help="ranking measures of predictions or of a model on a svmlight file",
        description="Print 'metric<TAB>value' lines: the mean over the queries of TEST.",
        epilog=_EVALUATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    evaluate.add_argument("test_file", metavar="TEST", help="svmlight / LETOR file")
    evaluate.add_argument(
        "scores_file", metavar="PREDICTIONS|MODEL", help="predictions file or model file"
    )
    evaluate.add_argument(
        "--metric",
        action="append",
        default=None,
        metavar="NAME[@K]",
        help="a measure to report (repeatable)",
    )
    evaluate.add_argument(
        "--convention",
        choices=_Choices(_conventions),
        default="exp",
        metavar="CONVENTION",
        help="one of %(choices)s (default: exp)",
    )
    evaluate.add_argument(
        "--query-file",
        default=None,
        help="group sizes of a file without qid: (default: TEST.query if it exists)",
    )

    warm = commands.add_parser(
        "warmup",
        help="compile the numba kernels of the built-in losses and the solver ahead of use",
        description="Compile (or load from numba's cache) the kernels that fits of the "
        "built-in losses use (bmrm.warmup); print the seconds per loss.",
    )
    warm.add_argument(
        "--losses",
        nargs="+",
        choices=_Choices(_loss_names),
        metavar="LOSS",
        default=None,
        help="default: every built-in loss",
    )
    return parser


# ----------------------------------------------------------------------------- data


@contextlib.contextmanager
def _about(path: str, errors: tuple[type[Exception], ...] = (ValueError,)):
    """Name ``path`` in a ``ValueError`` for the ``errors`` of a check on its data (labels
    y, query ids qid) or of a computation on it (a ``FloatingPointError`` of the fit when
    the features or labels overflow float64)."""
    try:
        yield
    except errors as exc:
        raise ValueError(f"{path}: {exc}") from None


def _load_data(path: str, query_file: str | None = None, *, groups: bool = True):
    """Features, labels and query ids of a data file, with finite features.

    ``--query-file`` (checked to be readable before the data file is parsed) applies only
    to a file without ``qid:``; without it, ``<file>.query`` is used when it exists and the
    file has no ``qid:``. ``groups=False`` reads no query file.
    """
    import numpy as np

    from bmrm.io.svmlight import _load_group_sizes, load_svmlight, qid_from_groups

    if query_file is None:
        X, y, qid = load_svmlight(path, zero_based=False, query_file="auto" if groups else None)
    else:
        with open(query_file, "rb"):
            pass  # a missing or unreadable query file fails before the data file is parsed
        X, y, qid = load_svmlight(path, zero_based=False, query_file=None)
        if qid is not None:
            raise ValueError(
                f"{path} has qid: on its rows, so --query-file {query_file} would conflict; "
                "drop --query-file (the qid: ids give the queries)"
            )
        # each size at most the rows (its line named), the sum in Python ints (exact)
        sizes = _load_group_sizes(query_file, X.shape[0], path)
        total = sum(sizes.tolist())
        if total != X.shape[0]:
            raise ValueError(
                f"--query-file {query_file}: the group sizes sum to {total} rows "
                f"but {path} has {X.shape[0]} rows"
            )
        qid = qid_from_groups(sizes)
    bad = np.flatnonzero(~np.isfinite(X.data))
    if bad.size:
        entry = int(bad[0])
        row = int(np.searchsorted(X.indptr, entry, side="right")) - 1
        raise ValueError(
            f"{path}: data row {row + 1} (counting rows from 1), feature "
            f"{int(X.indices[entry]) + 1} is {float(X.data[entry])!r}; features must be "
            "finite numbers"
        )
    return X, y, qid


def _check_weights(weights, n_rows: int, qid, loss, args) -> None:
    """The weights of ``--weight-file``: one per row of TRAIN, not all zero, and equal
    within each query for a query loss (:func:`losses.check_sample_weight`)."""
    import losses
    from losses import check_sample_weight

    where = f"--weight-file {args.weight_file}"
    if weights.shape[0] != n_rows:
        raise ValueError(
            f"{where}: {weights.shape[0]} weights for the {n_rows} rows of {args.train_file}"
        )
    groups = losses.group_queries(qid, n_rows)
    try:
        check_sample_weight(weights, groups, bool(getattr(loss, "pointwise", False)))
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _features_for(X, path: str, model, model_path: str):
    """X widened to the model's features; more columns than the model has is an error."""
    import scipy.sparse as sp

    d = model.n_features_in_
    if X.shape[1] > d:
        raise ValueError(
            f"{path} has feature index {X.shape[1]} but the model {model_path} has {d} features"
        )
    return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], d))


def _check_output(path: str, name: str, inputs: dict[str, str | None]) -> None:
    """Fail before any work when ``path`` (the argument ``name``) cannot be an output file.

    An output that is one of the command's ``inputs`` (argument name -> path) would destroy
    it, so it is refused. A symbolic link is checked (and later written) at the file it
    points to.
    """
    if not path:
        raise ValueError(f"{name} must be a file name; got ''")
    if path == STDOUT:
        return
    if path.endswith(("/", os.sep)):
        raise ValueError(f"cannot write {path}: a name ending in '/' names a folder")
    for input_name, other in inputs.items():
        if other and os.path.exists(path) and os.path.exists(other):
            if os.path.samefile(path, other):
                raise ValueError(
                    f"{name} {path} is the {input_name} file {other}: writing it would "
                    "destroy an input; choose another output file"
                )
    if os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path):
        return  # a device or FIFO, written in place
    target = os.path.realpath(path)
    folder = os.path.dirname(target)
    shown = path if target == os.path.abspath(path) else f"{path} (a link to {target})"
    if not os.path.isdir(folder):
        if os.path.exists(folder):
            raise ValueError(f"cannot write {shown}: {folder} is not a folder")
        raise ValueError(f"cannot write {shown}: folder {folder} does not exist")
    if os.path.isdir(target):
        raise ValueError(f"cannot write {path}: it is a folder")
    # a folder that takes no new file (read-only, no permission, /proc) fails here, not
    # after the work: the output is written through a new temporary file in it
    try:
        handle, probe = tempfile.mkstemp(dir=folder, prefix=".bmrm-", suffix=".probe")
    except OSError as exc:
        raise ValueError(
            f"cannot write {shown}: no new file can be made in folder {folder} "
            f"({exc.strerror or exc})"
        ) from None
    os.close(handle)
    os.unlink(probe)


def _check_inputs(inputs: dict[str, str | None]) -> None:
    """Fail before any work, naming the argument, when an input file (argument name ->
    path) does not exist, or is ``-`` (the standard output's name, never an input's)."""
    for name, path in inputs.items():
        if path == STDOUT:
            raise ValueError(
                f"{name} '-': '-' names the standard output, for PREDICTIONS and MODEL only; "
                "give an input file (or /dev/stdin to read a pipe)"
            )
        if path is not None and not os.path.exists(path):
            raise ValueError(f"{name} {path}: no such file")


def _write_output(path: str, text: str) -> None:
    """``text`` to the file ``path`` (atomically), or to the standard output for ``-``."""
    if path == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        from bmrm.io.model_files import _write_atomic

        _write_atomic(path, text.encode("utf-8"))


def _read_once(path: str) -> bytes | None:
    """The bytes of ``path`` when it is not a regular file (a pipe, a FIFO, ``<(...)``),
    which can be read only once; None for a regular file, read where it is needed."""
    with open(path, "rb") as f:
        if stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        return f.read()


def _is_model_file(path: str, data: bytes | None = None) -> bool:
    if data is not None:
        return data[:4096].lstrip().startswith(b"{")
    with open(path, "rb") as f:
        return f.read(4096).lstrip().startswith(b"{")


def _read_predictions(path: str, n_rows: int, test_path: str, data: bytes | None = None):
    """One finite number per line, exactly ``n_rows`` lines (blank lines at the end
    ignored; from ``data``, the file's bytes, when already read).

    Python's digit-group underscores (``1_0``, which ``float`` reads as 10.0) are not a
    score, as in the data files.
    """
    scores = []
    blank = None  # the first of the blank lines seen since the last score
    if data is None:
        with open(path, "rb") as f:
            data = f.read()
    # lines end in LF, CR or CRLF, as in the data files
    for lineno, line in enumerate(data.splitlines(), start=1):
        text = line.strip()
        # blank lines at the end are no score (an editor's or echo's last newline);
        # between scores they would shift every score after them to another row
        if not text:
            blank = blank or lineno
            continue
        if blank is not None:
            raise ValueError(f"{path}, line {blank}: expected a finite score; got ''")
        try:
            value = float("nan") if b"_" in text else float(text)
        except ValueError:
            value = float("nan")
        if not math.isfinite(value):
            shown = text.decode("utf-8", "backslashreplace")[:40]
            raise ValueError(f"{path}, line {lineno}: expected a finite score; got {shown!r}")
        scores.append(value)
    if len(scores) != n_rows:
        raise ValueError(
            f"{path} holds {len(scores)} predictions but {test_path} has {n_rows} rows"
        )
    import numpy as np

    return np.array(scores)


# ----------------------------------------------------------------------------- train


def _loss_value(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_k(k: int, name: str) -> int:
    """A cut-off in 1..MAX_K (the command's bound, checked before any work)."""
    from losses.validation import check_int

    check_int(k, name, 1)
    if k > MAX_K:
        raise ValueError(
            f"{name} must be an integer in 1..{MAX_K} (a cut-off on the documents of a query; "
            f"leave it out for the whole list); got {k}"
        )
    return k


def _build_loss(args):
    import losses

    params = {}
    for item in args.loss_param:
        key, sep, text = item.partition("=")
        if not sep or not key.isidentifier():
            raise ValueError(f"--loss-param expects KEY=VALUE; got {item!r}")
        params[key] = _loss_value(text)
    cutoff_losses = _losses_with("k")
    if args.k is not None:
        _check_k(args.k, "--k")
        if args.loss not in cutoff_losses:
            raise ValueError(f"--k applies to the losses {cutoff_losses}, not {args.loss!r}")
        if "k" in params:
            raise ValueError("give the cut-off once: --k or --loss-param k=...")
        params["k"] = args.k
    elif args.loss in cutoff_losses and _is_int(params.get("k")) and params["k"] > MAX_K:
        _check_k(params["k"], "--loss-param k")  # the loss checks the rest
    if args.C is not None and args.loss in _losses_with("normalize"):
        params.setdefault("normalize", "none")
    try:
        return losses.get(args.loss, **params)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"bad --loss-param for the {args.loss} loss: {exc}") from None


def _build_scorer(args, loss):
    """The scorer of ``--scorer`` and ``--clip-eps`` (None for the linear one), checked
    against the loss and regularizer before any data is read."""
    if args.scorer != "expected_gain":
        if args.clip_eps is not None:
            raise ValueError(f"--clip-eps applies to --scorer expected_gain, not {args.scorer}")
        return None
    from bmrm.scorers import ExpectedGainScorer
    from bmrm.solver.scorer_oracle import check_nonconvex

    eps = args.clip_eps
    if eps is not None and not 0.5 <= eps <= 1:
        raise ValueError(f"--clip-eps must be a number in [0.5, 1]; got {eps!r}")
    scorer = ExpectedGainScorer(eps=eps)
    try:  # what the non-convex fit supports; n_levels is set from the labels later
        check_nonconvex(
            scorer.with_params(n_levels=2), loss, None, args.regularizer, None, False, False, None
        )
    except ValueError as exc:
        raise ValueError(f"--scorer expected_gain: {exc}") from None
    return scorer


def _train(args) -> None:
    import numpy as np

    from bmrm._validation import MAX_LAM, MIN_LAM, check_lam, check_tol
    from bmrm.io.model_files import model_file_text
    from bmrm.io.svmlight import load_weight_file
    from bmrm.model import fit
    from bmrm.solver.masters import _cvxpy
    from losses.preference import pairs_from_labels
    from losses.validation import check_int, check_positive

    if args.C is not None:
        lam = 1.0 / check_positive(args.C, "-c")
        if not MIN_LAM <= lam <= MAX_LAM:
            raise ValueError(
                f"-c must lie in [{1 / MAX_LAM:g}, {1 / MIN_LAM:g}] (lam = 1/C within "
                f"[{MIN_LAM:g}, {MAX_LAM:g}]); got {args.C!r}"
            )
    else:
        lam = check_lam(1e-3 if args.lam is None else args.lam, "--lam")
    tol = check_tol(args.tol, "--tol")
    max_iter = check_int(args.max_iter, "--max-iter", 1)
    if args.pair_cost is not None and args.loss != "preference":
        raise ValueError(f"--pair-cost applies to the preference loss, not {args.loss!r}")
    loss = _build_loss(args)
    scorer = _build_scorer(args, loss)
    inputs = {
        "TRAIN": args.train_file,
        "--query-file": args.query_file,
        "--weight-file": args.weight_file,
    }
    _check_inputs(inputs)
    if args.query_file is None:
        # TRAIN.query, read when it exists and TRAIN has no qid:
        inputs["query"] = f"{args.train_file}.query"
    _check_output(args.model_file, "MODEL", inputs)
    if args.regularizer != "l2":
        try:
            _cvxpy()
        except ImportError:
            raise ValueError(
                f"--regularizer {args.regularizer} is solved by the cvxpy master, which the "
                'core install leaves out: python -m pip install "bmrm[cvxpy]"'
            ) from None
    # a bad weight file fails before the data file is parsed
    weights = None if args.weight_file is None else load_weight_file(args.weight_file)
    X, y, qid = _load_data(args.train_file, args.query_file)
    if weights is not None:
        _check_weights(weights, X.shape[0], qid, loss, args)
    if not args.quiet:
        n_queries = 1 if qid is None else np.unique(qid).size
        _note(
            "train",
            f"{args.train_file}: {X.shape[0]} rows, {X.shape[1]} features, "
            f"{n_queries} queries; loss {loss!r}, lam {lam!r}"
            + ("" if scorer is None else f", scorer {scorer!r}")
            + ("" if weights is None else f", weights from {args.weight_file}"),
        )
    loss_data = {}
    if args.loss == "preference":
        pairs, costs = pairs_from_labels(y, qid, cost=args.pair_cost or "zero_one")
        loss_data = {"pairs": pairs, "pair_costs": costs}
    # the fit's FloatingPointError is its report of features or labels that overflow float64
    fit_errors = (ValueError, FloatingPointError)
    with warnings.catch_warnings(record=True) as caught, _about(args.train_file, fit_errors):
        warnings.simplefilter("always")
        model = fit(
            X,
            y,
            loss,
            qid,
            lam=lam,
            regularizer=args.regularizer,
            tol=tol,
            max_iter=max_iter,
            verbose=not args.quiet,
            ranking_function=scorer,
            sample_weight=weights,
            **loss_data,
        )
    for warning in caught:
        _note("train", f"warning: {warning.message}")
    _write_output(args.model_file, model_file_text(model._record()))
    if not args.quiet:
        where = "the standard output" if args.model_file == STDOUT else args.model_file
        _note("train", f"{_summary(model.result_)}; model written to {where}")


def _seconds(r, total: float) -> str:
    """Training seconds, and numba's compilation (included in ``total``) apart, as
    ``result_.compile_seconds`` reports it."""
    compiling = float(r.get("compile_seconds", 0.0))
    text = f"{total - compiling:.2f} seconds of training"
    if compiling >= 0.005:
        text += f" and {compiling:.2f} seconds compiling numba kernels (cached for later runs)"
    return text


def _summary(r) -> str:
    """The final line: a bundle-method certificate, or another method's own figures."""
    if "gap" in r and "total_seconds" in r:
        method = f" of {r.method}" if "method" in r else ""
        return (
            f"objective {r.fun:.10g}, gap {r.gap:.3e}, {r.nit} iterations{method}, "
            f"{_seconds(r, r.total_seconds)} ({r.message})"
        )
    seconds = r.get("elapsed", r.get("total_seconds", float("nan")))
    return (
        f"objective {r.fun:.10g}, {r.nit} iterations of {r.get('method', 'the solver')}, "
        f"{_seconds(r, seconds)} ({r.message})"
    )


# ----------------------------------------------------------------------------- predict


def _predict(args) -> None:
    import numpy as np

    from bmrm.linear_model import load as load_model

    inputs = {"TEST": args.test_file, "MODEL": args.model_file}
    _check_inputs(inputs)
    _check_output(args.predictions_file, "PREDICTIONS", inputs)
    model = load_model(args.model_file)
    X, _, _ = _load_data(args.test_file, groups=False)
    scores = model.predict(_features_for(X, args.test_file, model, args.model_file))
    bad = np.flatnonzero(~np.isfinite(scores))
    if bad.size:
        raise ValueError(
            f"{args.test_file}: the score of data row {int(bad[0]) + 1} (counting rows from "
            f"1) is {float(scores[bad[0]])!r}: its features overflow float64 with the model "
            f"{args.model_file}; nothing written"
        )
    _write_output(args.predictions_file, "".join(f"{score!r}\n" for score in scores.tolist()))


# ----------------------------------------------------------------------------- evaluate


def _metric_options(name: str, convention: str) -> dict:
    """Keyword arguments of metric ``name`` under ``convention`` (see the evaluate help)."""
    if name in ("ndcg", "dcg"):
        return {"convention": convention}
    if convention != "letor":
        return {}
    if name in ("map", "p", "precision"):
        return {"threshold": 1, "ties": "stable"}
    return {"ties": "stable"}


def _parse_metrics(specs: Sequence[str], convention: str) -> list[tuple[str, Callable, dict]]:
    from losses.metrics import METRICS

    parsed = []
    for spec in specs:
        name, at, k_text = spec.partition("@")
        if name not in METRICS:
            raise ValueError(f"unknown metric {spec!r}; known: {', '.join(METRICS)}")
        options = _metric_options(name, convention)
        if at:
            if "k" not in inspect.signature(METRICS[name]).parameters:
                raise ValueError(f"metric {name!r} takes no cut-off @K; got {spec!r}")
            # ASCII digits only ("²".isdigit() is True), within the kernels' int64
            if not (k_text.isascii() and k_text.isdigit()) or not 1 <= int(k_text) < 2**63:
                raise ValueError(
                    f"--metric: the cut-off of {spec!r} must be an integer in 1..2**63 - 1"
                )
            options["k"] = int(k_text)
        parsed.append((spec, METRICS[name], options))
    return parsed


def _evaluate(args) -> None:
    measures = _parse_metrics(args.metric or DEFAULT_METRICS, args.convention)
    _check_inputs(
        {
            "TEST": args.test_file,
            "PREDICTIONS|MODEL": args.scores_file,
            "--query-file": args.query_file,
        }
    )
    X, y, qid = _load_data(args.test_file, args.query_file)
    data = _read_once(args.scores_file)
    if _is_model_file(args.scores_file, data):
        from bmrm.linear_model import load as load_model

        model = load_model(args.scores_file, data=data)
        scores = model.predict(_features_for(X, args.test_file, model, args.scores_file))
    else:
        scores = _read_predictions(args.scores_file, y.shape[0], args.test_file, data)
    with _about(args.test_file):
        lines = [
            f"{spec}\t{float(function(y, scores, qid, **options))!r}\n"
            for spec, function, options in measures
        ]
    sys.stdout.write("".join(lines))


# ----------------------------------------------------------------------------- entry point


def _note(command: str, message: str) -> None:
    print(f"bmrm {command}: {message}", file=sys.stderr)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror and exc.filename:
        return f"{exc.strerror}: {os.fsdecode(exc.filename)}"
    return " ".join(str(exc).split())


def _warmup(args) -> None:
    from bmrm.warmup import warmup

    start = time.perf_counter()
    for name, seconds in warmup(args.losses).items():
        print(f"{name:<18} {seconds:8.2f} s compiling")
    print(f"{'total':<18} {time.perf_counter() - start:8.2f} s")


_COMMANDS = {"train": _train, "predict": _predict, "evaluate": _evaluate, "warmup": _warmup}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``bmrm`` command line with ``argv``.

    Parameters
    ----------
    argv : sequence of str or None, default=None
        The arguments after the program name; None takes ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status: 0 on success, 2 for bad input (with a one-line reason on stderr),
        130 when interrupted.
    """
    try:
        # checking an option's choices may import the package (see _Choices)
        args = _parser().parse_args(argv)
    except KeyboardInterrupt:
        print("bmrm: interrupted", file=sys.stderr)
        return 130
    try:
        _COMMANDS[args.command](args)
    except (ValueError, OSError) as exc:
        _note(args.command, f"error: {_reason(exc)}")
        return 2
    except MemoryError as exc:
        # numpy's message says how much it tried to allocate and for what shape
        _note(args.command, f"error: not enough memory: {_reason(exc)}")
        return 2
    except KeyboardInterrupt:
        _note(args.command, "interrupted")
        return 130
    except SystemError as exc:
        from bmrm.exceptions import interrupt_in

        if interrupt_in(exc) is None:
            raise
        _note(args.command, "interrupted")
        return 130
    return 0

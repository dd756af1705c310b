"""The argument checks shared by :func:`bmrm.fit`, :func:`bmrm.minimize_bmrm`, the model and
the command line.

Scalar checks (``check_positive``, ``check_int``, ...) live in :mod:`losses.validation`.
"""

from __future__ import annotations

import difflib
import inspect
import math
import numbers
import warnings
from collections.abc import Iterable, Mapping

import numpy as np
import scipy.sparse as sp

from losses.validation import check_bool, check_int, check_positive

__all__ = [
    "all_finite",
    "check_X",
    "check_bool",
    "check_cvxpy_solver",
    "check_intercept_scaling",
    "check_lam",
    "check_loss_params",
    "check_minimize_args",
    "check_model_values",
    "check_tol",
    "check_verbose",
    "check_w0",
    "warn_one_unstated_query",
]

# Largest intercept_scaling: the constant column's square enters the inner products of the
# planes in the master problems, so it stays far below float64's overflow at 1.8e308.
MAX_INTERCEPT_SCALING = 1e150


# The range of lam that the master problems solve: the master minimiser is w = −Aᵀα/lam, so
# below about 1e-150 for unit-scale subgradients lam·‖w‖² overflows float64 (1e-30 leaves
# a margin of 120 decades for larger ones), and above about 1e14 the cvxpy models fail to
# solve on unit-scale data (while every solution is w ≈ 0 at such a lam anyway).
MIN_LAM = 1e-30
MAX_LAM = 1e12

_FINITE_CHUNK = 1 << 20

# A query loss given no qid fits all rows as one query; beyond this many rows that is more
# likely a forgotten qid than one query (ranking data sets hold at most a few thousand
# documents per query).
ONE_QUERY_WARN_ROWS = 5000


def all_finite(a: np.ndarray) -> bool:
    """Whether every entry is finite, without allocating a mask of the whole array.

    A sum is finite when every entry is (a NaN or an infinity propagates), so one reduction
    answers for almost every input; only when the sum is not finite (a non-finite entry, or
    an overflow of large finite ones) are the entries checked, by chunks.
    """
    flat = a.ravel(order="K")
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(np.add.reduce(flat, dtype=np.float64)):
            return True
    return all(
        bool(np.isfinite(flat[i : i + _FINITE_CHUNK]).all())
        for i in range(0, flat.size, _FINITE_CHUNK)
    )


def is_dask(value) -> bool:
    """Whether ``value`` is a dask collection (array, DataFrame or Series)."""
    return type(value).__module__.startswith(("dask.", "dask_expr"))


def _frame_values(X, name: str) -> np.ndarray:
    """A pandas DataFrame's values as float32 (all columns float32) or float64, its
    extension dtypes included (nullable integers and floats, Arrow numbers; a missing value
    becomes NaN, refused afterwards); a column of another kind is refused by name."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    dtypes = list(X.dtypes)
    for column, dtype in zip(X.columns, dtypes, strict=True):
        if not (is_numeric_dtype(dtype) or is_bool_dtype(dtype)):
            raise ValueError(f"{name} must be numeric; column {column!r} has dtype {dtype}")
    single = bool(dtypes) and all(dtype == np.float32 for dtype in dtypes)
    return X.to_numpy(dtype=np.float32 if single else np.float64, na_value=np.nan)


def check_X(X, *, name: str = "X", n_features: int | None = None):
    """Return X as a C-ordered float32/float64 array or a CSR matrix, never densified.

    Raises ``ValueError`` naming ``name`` for a non-2-d, empty, non-numeric or non-finite X,
    or one with the wrong number of columns.
    """
    if sp.issparse(X):
        if X.ndim != 2:
            raise ValueError(f"{name} must be 2-d; got {X.ndim} dimensions")
        X = X.tocsr()
        if X.dtype not in (np.float32, np.float64):
            if X.dtype.kind not in "biuf":
                raise ValueError(f"{name} must be numeric; got dtype {X.dtype}")
            X = X.astype(np.float64)
        if not X.has_canonical_format:
            X = X.copy()
            X.sum_duplicates()
        data = X.data
    else:
        if hasattr(X, "dtypes") and hasattr(X, "to_numpy") and getattr(X, "ndim", 0) == 2:
            X = _frame_values(X, name)  # a pandas DataFrame
        try:
            X = np.asarray(X)
        except ValueError:  # rows of different lengths
            raise ValueError(
                f"{name} must be a 2-d array of numbers (n_samples, n_features), with rows of "
                "one length"
            ) from None
        if X.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be numeric; got dtype {X.dtype}")
        if X.ndim != 2:
            raise ValueError(f"{name} must be 2-d (n_samples, n_features); got shape {X.shape}")
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        data = X
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} must be non-empty; got shape {X.shape}")
    if not all_finite(data):
        raise ValueError(f"{name} must not contain NaN or inf")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(
            f"{name} has {X.shape[1]} features, but the model was fitted with {n_features}"
        )
    return X


def check_intercept_scaling(value) -> float:
    """A finite real number in (0, 1e150], the value of the intercept's constant feature."""
    value = check_positive(value, "intercept_scaling")
    if value > MAX_INTERCEPT_SCALING:
        raise ValueError(
            f"intercept_scaling must be at most {MAX_INTERCEPT_SCALING:g} (its square enters "
            f"the solver's inner products); got {value!r}"
        )
    return value


def check_w0(w0, n_weights: int, fit_intercept: bool = False) -> np.ndarray:
    """The warm start as a float64 array of shape ``(n_weights,)`` with finite entries."""
    what = "one weight per feature" + (" plus the intercept's last" if fit_intercept else "")
    got = type(w0).__name__
    try:
        arr = np.asarray(w0)
        got = f"dtype {arr.dtype}"
        # as X: complex entries would lose their imaginary part, and strings be parsed
        if arr.dtype.kind not in "biufO":
            raise TypeError(got)
        w0 = arr.astype(np.float64, copy=False)
    except (TypeError, ValueError):
        raise ValueError(
            f"w0 must be an array of real numbers of shape ({n_weights},) ({what}); got {got}"
        ) from None
    if w0.shape != (n_weights,):
        raise ValueError(f"w0 must have shape ({n_weights},) ({what}); got shape {w0.shape}")
    bad = np.flatnonzero(~np.isfinite(w0))
    if bad.size:
        raise ValueError(
            f"w0 must be finite; it contains NaN or inf ({bad.size} entries, the first "
            f"w0[{bad[0]}] = {float(w0[bad[0]])!r})"
        )
    return w0


def check_lam(lam, name: str = "lam") -> float:
    """A finite real number within [MIN_LAM, MAX_LAM] = [1e-30, 1e12]."""
    lam = check_positive(lam, name)
    if not MIN_LAM <= lam <= MAX_LAM:
        raise ValueError(
            f"{name} must be within [{MIN_LAM:g}, {MAX_LAM:g}] (the range the master problems "
            f"solve in float64); got {lam!r}"
        )
    return lam


def check_model_values(where: str, coef: np.ndarray, lam, regularizer) -> None:
    """Refuse, naming the model file ``where`` and the field, what :func:`bmrm.fit` could
    not have produced: a ``lam`` outside [MIN_LAM, MAX_LAM], and box bounds (a regularizer
    with ``name == "box"``) with neither one entry per weight nor one more (the intercept's,
    with ``fit_intercept``), or that the file's own weights ``coef`` violate (the solver
    projects every iterate onto the box, so a fitted model lies in it exactly).
    """
    try:
        check_lam(lam)
    except ValueError as exc:
        raise ValueError(f"{where}: malformed model file: field 'lam': {exc}") from None
    if getattr(regularizer, "name", None) != "box":
        return
    w = np.ravel(coef)
    for side, bound, beyond in (
        ("lower", regularizer.lower, np.less),
        ("upper", regularizer.upper, np.greater),
    ):
        if bound is None:
            continue
        if bound.ndim == 1 and bound.shape[0] not in (w.size, w.size + 1):
            raise ValueError(
                f"{where}: malformed model file: field 'regularizer' has {bound.shape[0]} "
                f"{side} bounds for {w.size} weights (expected {w.size}, or {w.size + 1} with "
                "an intercept)"
            )
        own = np.broadcast_to(bound if bound.ndim == 0 else bound[: w.size], w.shape)
        bad = np.flatnonzero(beyond(w, own))
        if bad.size:
            j = int(bad[0])
            raise ValueError(
                f"{where}: malformed model file: coef[{j}] = {float(w[j])!r} violates the "
                f"{side} bound {float(own[j])!r} of field 'regularizer' ({bad.size} weights "
                "outside the box)"
            )


def check_loss_params(loss_params) -> None:
    """None or a mapping of a named loss's parameters (``losses.get(loss, **loss_params)``)."""
    if loss_params is not None and not isinstance(loss_params, Mapping):
        raise ValueError(
            f"loss_params must be a dict of the loss's parameters or None; got {loss_params!r}"
        )


def data_keywords(loss) -> tuple[list[str], bool]:
    """The data keywords ``loss.validate`` names (``pairs``, ``row_weight``, ...), and
    whether it also takes any other keyword (a ``**`` parameter of a user's loss)."""
    try:
        parameters = list(inspect.signature(loss.validate).parameters.values())
    except (AttributeError, TypeError, ValueError):
        return [], True
    named = [
        p.name
        for p in parameters[2:]  # after y and query_ptr
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    any_other = any(p.kind == p.VAR_KEYWORD for p in parameters)
    # the package's own losses take ** only to refuse other keywords with their own message
    builtin = type(loss).__module__.split(".")[0] == "losses"
    return named, any_other and not builtin


def check_loss_data(loss, data: Mapping, keywords: Iterable[str], function: str) -> None:
    """Raise ``TypeError`` for a keyword of ``function`` that is neither one of its own
    ``keywords`` nor a data keyword of ``loss`` (a typo such as ``lamda=``), naming the
    closest valid name; a loss parameter given as a keyword is pointed to ``loss_params``.
    A user's loss whose ``validate`` takes any keyword receives the keywords that do not
    look like a misspelt keyword of ``function``."""
    named, any_other = data_keywords(loss)
    keywords = list(keywords)
    params = loss.get_params() if callable(getattr(loss, "get_params", None)) else {}
    for key in data:
        if key in named:
            continue
        close = difflib.get_close_matches(key, keywords + named, n=1, cutoff=0.75)
        if any_other and not (close and close[0] in keywords):
            continue
        name = getattr(loss, "name", type(loss).__name__)
        takes = f"data keywords {named}" if named else "no data keywords"
        if key in params:
            hint = f"; {key!r} is a parameter of the {name} loss: give it in loss_params"
        elif close:
            hint = f"; did you mean {close[0]!r}?"
        else:
            hint = ""
        raise TypeError(
            f"{function}() got an unexpected keyword argument {key!r} (the {name} loss takes "
            f"{takes}){hint}"
        )


def check_tol(tol, name: str = "tol") -> float:
    """A relative gap tolerance: a finite real number in [0, 1).

    The lower bound is >= 0 (the risk is non-negative), so the gap never exceeds J and a
    tolerance of 1 or more would certify any starting point.
    """
    tol = check_positive(tol, name, strict=False)
    if tol >= 1.0:
        raise ValueError(
            f"{name} must be < 1 (a gap relative to the objective, which never exceeds the "
            f"objective itself); got {tol!r}"
        )
    return tol


def check_cvxpy_solver(solver) -> str | None:
    """None (the cvxpy master's default) or the name of a solver cvxpy has installed."""
    if solver is None:
        return None
    import cvxpy

    installed = cvxpy.installed_solvers()
    if not isinstance(solver, str) or solver.upper() not in installed:
        raise ValueError(
            f"cvxpy_solver must be None or one of the installed cvxpy solvers {installed}; "
            f"got {solver!r}"
        )
    return solver


def check_verbose(verbose, name: str = "verbose") -> bool:
    """True, False or an integer >= 0 (scikit-learn's verbosity, which the estimators pass
    on), as a bool."""
    if isinstance(verbose, bool | np.bool_):
        return bool(verbose)
    if not isinstance(verbose, numbers.Integral) or verbose < 0:
        raise ValueError(f"{name} must be True, False or an integer >= 0; got {verbose!r}")
    return bool(verbose)


class _CheckedOracle:
    """A user's oracle whose every answer is checked to be a pair ``(R, a)``: R a finite real
    number >= 0, ``a`` a finite array of shape ``(n_features,)``. Other attributes are the
    oracle's."""

    def __init__(self, oracle, n_features: int):
        self._oracle = oracle
        self._n_features = n_features

    def __getattr__(self, name):
        if name in ("_oracle", "_n_features"):  # not yet set (copy, pickle)
            raise AttributeError(name)
        return getattr(self._oracle, name)

    def __call__(self, w):
        out = self._oracle(w)
        name = getattr(self._oracle, "__name__", type(self._oracle).__name__)
        if not isinstance(out, tuple | list) or len(out) != 2:
            raise ValueError(
                f"the oracle {name} must return a pair (R, a) of the risk and its "
                f"subgradient; got {type(out).__name__}"
                + (f" of length {len(out)}" if isinstance(out, tuple | list) else "")
            )
        R, a = out
        if isinstance(R, bool | np.bool_) or not isinstance(R, numbers.Real):
            raise ValueError(
                f"the oracle {name} must return the risk R as a real number; got {R!r}"
            )
        if not isinstance(a, np.ndarray) or a.dtype.kind not in "biuf":
            raise ValueError(
                f"the oracle {name} must return the subgradient a as a numeric ndarray; got "
                f"{type(a).__name__}"
            )
        if a.shape != (self._n_features,):
            raise ValueError(
                f"the oracle {name} must return a subgradient of shape ({self._n_features},) "
                f"(n_features); got shape {a.shape}"
            )
        # the bundle's zero plane (a lower bound of R) and the certificate rest on R >= 0
        value = float(R)
        if not math.isfinite(value):
            raise ValueError(f"the oracle {name} must return a finite risk R >= 0; got {value}")
        if value < 0.0:
            raise ValueError(
                f"the oracle {name} returned a negative risk ({value:g}); bundle methods need "
                "a non-negative risk R >= 0"
            )
        if not all_finite(a):
            raise ValueError(
                f"the oracle {name} must return a finite subgradient a; it contains NaN or inf"
            )
        return R, a


def check_minimize_args(oracle, n_features, lam, w0, options):
    """The arguments of :func:`bmrm.minimize_bmrm`, checked as :func:`bmrm.fit` checks them.

    Returns ``oracle`` (a user's callable wrapped so that each of its answers is checked),
    ``lam``, ``w0`` (None or a float64 array of shape ``(n_features,)``) and ``options`` (a
    :class:`~bmrm.solver.methods.base.SolverOptions`, checked by its ``checked``) in their
    canonical types.
    """
    if not callable(oracle):
        raise ValueError(f"oracle must be callable, oracle(w) -> (R, a); got {oracle!r}")
    n_features = check_int(n_features, "n_features", 1)
    lam = check_lam(lam)
    options = options.checked()
    if w0 is not None:
        w0 = check_w0(w0, n_features)
    # the package's own oracles answer correctly by construction (and are used through
    # other entry points than the call, such as cut_at)
    if not type(oracle).__module__.startswith(("bmrm.", "losses.")):
        oracle = _CheckedOracle(oracle, n_features)
    return oracle, lam, w0, options


def warn_one_unstated_query(loss, qid, X) -> None:
    """Warn when a query loss (not ``pointwise``) gets ``qid=None`` and more than
    ``ONE_QUERY_WARN_ROWS`` rows in memory: every row is then one query, which is most
    often a forgotten ``qid``. An explicit ``qid`` (``np.zeros(n)`` for one query) is not
    warned about; nor is data whose row count is not known here (Dask)."""
    n_rows = getattr(X, "shape", (None,))[0]
    if qid is not None or getattr(loss, "pointwise", False) or not isinstance(n_rows, int):
        return
    if n_rows > ONE_QUERY_WARN_ROWS:
        warnings.warn(
            "no query ids were given (qid=None; for a data file, no qid: and no query "
            f"file), so the {getattr(loss, 'name', '') or type(loss).__name__} loss ranks "
            f"all {n_rows} rows as one query; give one query id per row, or "
            "qid=np.zeros(n_rows) to fit one query without this warning",
            UserWarning,
            stacklevel=3,
        )

"""Portable model files: one JSON document with the weights in base64, never a pickle.

This module reads and writes plain values, a :class:`ModelRecord` (weights, loss name and
parameters, lam, the regularizer's JSON spec, the scorer's name, version and parameters, the
solver's result field by field), with :func:`write_model_file` and :func:`read_model_file`.
The model layer builds and consumes the records: ``model.save(path)``
(:meth:`bmrm.LinearModel.save`) writes, and ``bmrm.load(path)`` (:func:`bmrm.linear_model.load`)
reads back, a :class:`bmrm.LinearModel`.

File format (version 4)
-----------------------
A UTF-8 JSON object::

    {
     "format": "bmrm-linear-model",
     "format_version": 3,
     "bmrm_version": "0.1.0",
     "created": "2025-01-31T12:00:00+00:00",
     "n_features": 46,
     "feature_names": ["bm25", "pagerank", ...] or null,
     "scorer": {"name": "expected_gain", "version": 1,
                "params": {"n_levels": 3, "gain": "exp", "eps": 0.8, "clip_training": false}},
     "intercept": 0.0,
     "lam": 0.001,
     "regularizer": "l2",
     "loss": {"name": "ordinal", "params": {"normalize": "query"},
              "array_params": ["cost"], "user": null},
     "result": {"type": "OptimizeResult",
                "fields": {"fun": ..., "nit": ..., "message": "...", "method": "L-BFGS-B",
                           "gap": {"float": "inf"}, "linear_start": null, ...},
                "omitted": ["hess_inv"]} or null,
     "arrays": {"coef": {"dtype": "<f8", "shape": [3, 46], "data": "<base64>"},
                "loss.cost": {...}, "scorer.gains": {...}, "result.x": {...},
                "result.history.gap": {...}, ...},
     "sha256": "<64 hex digits>"
    }

Arrays are the raw little-endian bytes (``"<f8"`` IEEE-754 float64, ``"<i8"`` int64 or
``"|b1"`` bool) in base64, so weights survive bit for bit. ``feature_names`` holds the column
names of the pandas DataFrame the model was fitted on (``feature_names_in_``: one string per
feature, in column order), or null for a model fitted on arrays; a model read back refuses
a DataFrame whose columns differ from them, as the fitted model does. ``coef`` holds the
weights: one per feature for the linear scorer f = Xw, a (K, n_features) array for the
expected-gain scorer. ``scorer`` names the ranking function of :mod:`bmrm.scorers` with
its parameters and the version of its definition; ``scorer.<name>`` arrays are values the
scorer derives from its parameters (the expected-gain scorer's gains G(j)), kept so that a
reader can check that it computes the same function. ``loss`` rebuilds the loss as
``losses.get(name, **params)``; a parameter that is a rectangular array of numbers (a cost
matrix) is stored as the array ``loss.<param>`` and named in ``array_params``, since
reading millions of JSON numbers, and writing them again to check the checksum, is slow
where base64 is not. A model fitted with the user's own loss object (not one of
``losses.available()``) has ``name`` null, no parameters, and ``user`` the loss's class
(``module.QualName``) and ``repr``: prediction needs only the weights, and the model read
back says that refitting needs that loss. ``regularizer`` is the regularizer's JSON spec
(:mod:`bmrm.solver.regularizers`): ``"l2"``, ``"l1"``, ``{"name": "elastic_net",
"l1_ratio": r}``, or ``{"name": "box", "base": <spec>, "lower": .., "upper": ..}`` with
bounds null, a number or one number per weight (null for an open side); the bare name
``"elastic_net"`` of earlier files loads with the mixing unknown.

``result`` is the solver's result (a :class:`bmrm.BMRMResult` or, for other methods such
as L-BFGS, a :class:`scipy.optimize.OptimizeResult`), stored field by field, whatever the
method that made it: numbers, strings, booleans and nulls in ``fields`` (a float that is
not finite as ``{"float": "nan" | "inf" | "-inf"}``, since JSON has no such numbers);
numeric arrays as ``result.<field>``; a field holding a dict of arrays (the per-iteration
``history``) as ``result.<field>.<key>``. Fields of other kinds (scipy's
``LbfgsInvHessProduct`` operator ``hess_inv``) are not stored; ``omitted`` lists them. A
``BMRMResult`` always holds the fields of ``SUMMARY_FIELDS``, ``x`` and a history with the
columns of ``HISTORY_FIELDS``.

Version 3 (still read): ``loss`` holds ``name`` and ``params`` only.

Version 2 (still read): as version 3 without ``feature_names`` (a model read from it has
none).

Version 1 (still read): no ``scorer`` (the linear scorer), ``coef`` 1-d, and ``result`` the
``SUMMARY_FIELDS`` of a :class:`bmrm.BMRMResult` (finite numbers), with its arrays named
``x`` and ``history.<field>``.

``sha256`` is the SHA-256 of the UTF-8 bytes of
``json.dumps(document_without_sha256, sort_keys=True, separators=(",", ":"),
ensure_ascii=True, allow_nan=False)``: it covers every metadata field and, through the base64
text, every array byte. It detects truncation, corruption and edits; it is not a signature
(anyone can recompute it), and it need not be: reading a model file runs no code.

Why JSON and base64 rather than ``.npz``
----------------------------------------
* Loading cannot unpickle by construction: it uses only :func:`json.loads` and base64
  decoding, whatever numpy's ``allow_pickle`` defaults are.
* One self-describing text file: the metadata reads in any editor or with ``jq``, and the
  weights decode with any JSON parser and base64 decoder, in any language, without numpy's
  ``.npy`` / zip layout.
* A truncated file is invalid JSON, so truncation is caught even before the checksum.
* The cost, base64's 4/3 of the raw bytes, is irrelevant for models of d or K·d weights.

Compatibility
-------------
Files of versions 1 to 4 are read (version 4 is written); files of an unknown
``format_version`` are refused, and so are files written by a newer bmrm than the one
installed (versions compared on their numeric release part, ``0.2.0rc1`` counting as
``0.2.0``). Which scorer names and versions a file may hold is for the model layer
(:func:`bmrm.load`) to check: it refuses a scorer it does not know, or a newer version of
one, naming the file. Saving is atomic: the document goes to a temporary file in the target
folder, which then replaces ``path`` (:func:`os.replace`), so a failure leaves no partial
file and never damages an existing one. A symbolic link ``path`` is followed (its target is
replaced, the link stays); a device or FIFO is written in place, never replaced by a file.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import errno
import hashlib
import json
import math
import os
import re
import secrets
import stat
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bmrm._validation import MAX_LAM, MIN_LAM
from bmrm._version import __version__

__all__ = [
    "UserLoss",
    "FORMAT",
    "FORMAT_VERSION",
    "READ_VERSIONS",
    "SUMMARY_FIELDS",
    "ModelRecord",
    "model_file_text",
    "read_model_file",
    "write_model_file",
]

FORMAT = "bmrm-linear-model"
FORMAT_VERSION = 4
READ_VERSIONS = (1, 2, 3, 4)

# The solver summary every BMRMResult holds, with the JSON type of each field.
SUMMARY_FIELDS: dict[str, type] = {
    "status": int,
    "success": bool,
    "message": str,
    "fun": float,
    "lower_bound": float,
    "gap": float,
    "nit": int,
    "nfev": int,
    "bundle_size": int,
    "n_aggregations": int,
    "oracle_seconds": float,
    "master_seconds": float,
    "total_seconds": float,
}
BMRM_RESULT = "BMRMResult"
# The columns of a BMRMResult's history that model files keep (the solver's loop records
# these and its counters).
HISTORY_FIELDS = (
    "objective",
    "best_objective",
    "lower_bound",
    "gap",
    "elapsed",
    "oracle_seconds",
    "master_seconds",
    "bundle_size",
)
_FLOAT_MAX = sys.float_info.max
_DTYPES = {"<f8": np.float64, "<i8": np.int64, "|b1": np.bool_}
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_JSON_KINDS = {
    float: "a finite number",
    int: "an integer",
    bool: "true or false",
    str: "a string",
    dict: "an object",
    list: "an array",
}


@dataclass
class ModelRecord:
    """The plain values of a model file.

    The parameters are kept as attributes of the same names.

    Parameters
    ----------
    coef : ndarray of shape (n_features,) or (K, n_features)
        The weights.
    intercept : float
        The intercept (0 without one).
    lam : float
        The regularization constant.
    regularizer : str or dict
        The regularizer's JSON spec (``"l2"``, ``"l1"``, or an object with a ``"name"``).
    loss_name : str or None
        None for the user's own loss object, which a file does not hold.
    loss_params : dict
        JSON values, or arrays for numeric parameters read back (a cost matrix); the loss
        is ``losses.get(loss_name, **loss_params)``.
    scorer_name : str, default="linear"
        The ranking function: a name of :mod:`bmrm.scorers`.
    scorer_version : int, default=1
        The version of the ranking function's definition.
    scorer_params : dict, default={}
        Its JSON-serialisable parameters.
    scorer_arrays : dict of ndarray, default={}
        Values the scorer derives from its parameters (``"gains"``), for checking.
    result_type : str or None, default=None
        ``"BMRMResult"``, ``"OptimizeResult"``, or None for a model without a result.
    result_fields : dict, default={}
        The result's scalar fields (numbers, strings, booleans, None).
    result_arrays : dict, default={}
        The result's array fields, and its dicts of arrays (``"history"``) as dicts.
    result_omitted : list of str, default=[]
        Fields of the result that the file does not hold (objects of other kinds).
    feature_names : list of str or None, default=None
        The column names of the DataFrame the model was fitted on, one per feature (None:
        fitted on arrays, or read from a file of version 1 or 2).
    loss_user : str or None, default=None
        For the user's own loss (``loss_name`` None): its class and ``repr``.
    """

    coef: np.ndarray
    intercept: float
    lam: float
    regularizer: str | dict
    loss_name: str
    loss_params: dict
    scorer_name: str = "linear"
    scorer_version: int = 1
    scorer_params: dict = field(default_factory=dict)
    scorer_arrays: dict[str, np.ndarray] = field(default_factory=dict)
    result_type: str | None = None
    result_fields: dict[str, Any] = field(default_factory=dict)
    result_arrays: dict[str, Any] = field(default_factory=dict)
    result_omitted: list[str] = field(default_factory=list)
    feature_names: list[str] | None = None
    loss_user: str | None = None


class UserLoss:
    """The loss of a model fitted with the user's own loss object, as a model file keeps it.

    A model file holds only the loss's description (class and ``repr``). A model read back
    with it predicts (which needs only the weights); fitting with it raises a
    ``ValueError`` saying that refitting needs the original loss object.

    Parameters
    ----------
    description : str
        The loss's class and ``repr``.
    """

    def __init__(self, description: str):
        self.description = description

    def _refuse(self, *args, **kwargs):
        """Refuse to evaluate: the loss object itself is not in the model file.

        Parameters
        ----------
        *args, **kwargs
            The loss protocol's arguments, ignored.

        Raises
        ------
        ValueError
            Always, saying that refitting needs the original loss object.
        """
        raise ValueError(
            f"this model was fitted with the user's own loss {self.description}, which a "
            "model file does not hold: it predicts, but refitting needs that loss object "
            "(pass it as loss=...)"
        )

    validate = _refuse
    loss_grad = _refuse

    def __repr__(self) -> str:
        return f"UserLoss({self.description!r})"


def _package_version() -> str:
    return __version__


def _checksum(document: dict) -> str:
    body = {key: value for key, value in document.items() if key != "sha256"}
    canonical = json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _naming(exc: OSError, path: str) -> OSError:
    """``exc`` naming the user's ``path`` instead of a temporary or resolved file."""
    if exc.errno is None:
        return exc
    return OSError(exc.errno, exc.strerror, path)  # the errno's subclass, e.g. ENOENT's


def _write_atomic(path, data: bytes) -> None:
    """Write ``data`` to the file ``path`` names, replacing it atomically.

    A symbolic link is followed: the file it points to is written and the link stays. An
    existing regular file (or a new one) is replaced through a temporary file in its folder
    (so the replace is a rename on one file system) and :func:`os.replace`; the temporary
    file is created exclusively, takes the replaced file's permissions (0o666 less the umask
    for a new file) and is removed if anything fails, leaving the file as it was. Anything
    else that exists (a character device such as ``/dev/null``, a FIFO) is written in place
    and never replaced by a regular file. Errors are ``OSError`` naming ``path`` as given
    (never the temporary file); a failed write to a device (``ENOSPC`` on ``/dev/full``) is
    an error too.
    """
    path = os.fsdecode(os.fspath(path))  # bytes paths as load takes them
    if path.endswith(("/", os.sep)) and not os.path.isdir(path):
        # a name ending in a separator names a folder, as for open(); never a file beside it
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    try:
        mode = os.stat(path).st_mode  # follows links, including /dev/stdout's
    except FileNotFoundError:
        mode = None  # a new file, or a dangling link whose target is created
    except OSError as exc:
        raise _naming(exc, path) from None
    if mode is not None and stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    if mode is not None and not stat.S_ISREG(mode):
        try:
            with open(path, "wb") as f:
                f.write(data)
        except OSError as exc:
            raise _naming(exc, path) from None
        return
    folder, name = os.path.split(os.path.realpath(path))
    target = os.path.join(folder, name)
    # the temporary name within NAME_MAX (255 bytes) whatever the length of ``name``
    stem = os.fsencode(name)[:200].decode("utf-8", "ignore")
    tmp = os.path.join(folder, f".{stem}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "xb") as f:
            if mode is not None:
                os.chmod(tmp, stat.S_IMODE(mode))
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        # the original error, not the clean-up's (the temporary file may never have existed)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise _naming(exc, path) from None
        raise


# ----------------------------------------------------------------------------- saving


def _encode_array(a: np.ndarray) -> dict[str, Any]:
    kind = np.asarray(a).dtype.kind
    code = "|b1" if kind == "b" else "<i8" if kind in "iu" else "<f8"
    a = np.ascontiguousarray(a, dtype=code)
    return {
        "dtype": code,
        "shape": list(a.shape),
        "data": base64.b64encode(a.tobytes()).decode("ascii"),
    }


def _finite_float(value, name: str) -> float:
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"cannot save a model whose {name} is {value!r}: it must be finite")
    return value


def _lam(value) -> float:
    """lam within the range :func:`bmrm.fit` takes, which loading requires too."""
    lam = _finite_float(value, "lam")
    if not MIN_LAM <= lam <= MAX_LAM:
        raise ValueError(
            f"cannot save a model whose lam is {lam!r}: bmrm.fit takes lam within "
            f"[{MIN_LAM:g}, {MAX_LAM:g}], and loading refuses any other"
        )
    return lam


def _json_value(value, name: str):
    """``value`` as it reads back from JSON; a ValueError naming ``name`` otherwise."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"cannot save a model whose {name} is not JSON-serialisable ({exc})"
        ) from exc


def _encode_field(value, name: str):
    """A result field as JSON: a non-finite float as {"float": "nan" | "inf" | "-inf"}."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        value = float(value)
        return value if math.isfinite(value) else {"float": repr(value)}
    raise ValueError(f"cannot save a model whose result_.{name} is {value!r}")


def _result_entry(record: ModelRecord, arrays: dict[str, dict]) -> dict[str, Any] | None:
    if record.result_type is None:
        return None
    fields = {key: _encode_field(v, key) for key, v in record.result_fields.items()}
    if record.result_type == BMRM_RESULT:
        for key in SUMMARY_FIELDS:
            if key not in fields:
                raise ValueError(f"cannot save a model whose result_ has no field {key!r}")
    if "x" not in record.result_arrays:
        raise ValueError("cannot save a model whose result_ has no x")
    for key, value in record.result_arrays.items():
        if isinstance(value, dict):
            for column, values in value.items():
                arrays[f"result.{key}.{column}"] = _encode_array(np.asarray(values))
        else:
            arrays[f"result.{key}"] = _encode_array(np.asarray(value))
    return {
        "type": record.result_type,
        "fields": fields,
        "omitted": [str(name) for name in record.result_omitted],
    }


def _numeric_array(value) -> np.ndarray | None:
    """``value`` as an int64 or float64 array when it is a rectangular list of numbers (no
    booleans) whose ``tolist()`` gives it back, else None."""
    if not isinstance(value, list) or not value:
        return None
    try:
        a = np.array(value)
    except (ValueError, OverflowError):  # ragged, or an int beyond int64
        return None
    if a.dtype.kind not in "if" or a.dtype.itemsize != 8 or a.tolist() != value:
        return None
    leaves = a.ravel().tolist()
    if a.dtype.kind == "i" and len(leaves) != sum(type(x) is int for x in _leaves(value)):
        return None  # booleans among the ints
    return a


def _leaves(value):
    for item in value:
        if isinstance(item, list):
            yield from _leaves(item)
        else:
            yield item


def _loss_entry(record: ModelRecord, arrays: dict[str, dict]) -> dict[str, Any]:
    """The ``loss`` object; numeric array parameters go to ``arrays`` as ``loss.<name>``."""
    if record.loss_name is None:
        if record.loss_params:
            raise ValueError("cannot save the parameters of the user's own loss")
        return {"name": None, "params": {}, "array_params": [], "user": str(record.loss_user)}
    params = dict(record.loss_params)
    in_arrays = []
    for key, value in record.loss_params.items():
        a = np.asarray(value) if isinstance(value, np.ndarray) else _numeric_array(value)
        if a is not None and a.dtype.kind in "if" and a.ndim >= 1 and a.size:
            arrays[f"loss.{key}"] = _encode_array(a)
            in_arrays.append(str(key))
            del params[key]
    params = _json_value(params, "loss parameters")
    return {"name": record.loss_name, "params": params, "array_params": in_arrays, "user": None}


def write_model_file(record: ModelRecord, path) -> None:
    """Write ``record`` to ``path`` as a portable model file (see the module docstring).

    Parameters
    ----------
    record : ModelRecord
        The values to write.
    path : str or os.PathLike
        The file to write, replaced whole or not at all.

    Raises
    ------
    ValueError
        As :func:`model_file_text`; nothing is written then.
    OSError
        When the file cannot be written; ``path`` is then left as it was.
    """
    _write_atomic(path, model_file_text(record).encode("utf-8"))


def model_file_text(record: ModelRecord) -> str:
    """Return the text of the model file of ``record`` (ASCII JSON, see the module docstring).

    Parameters
    ----------
    record : ModelRecord
        The values to write.

    Returns
    -------
    str
        The file's text.

    Raises
    ------
    ValueError
        For non-finite weights, a lam outside the range :func:`bmrm.fit` takes, a result
        without its required fields, or a regularizer spec, loss or scorer parameters that
        JSON cannot hold.
    """
    coef = np.asarray(record.coef, dtype=np.float64)
    if coef.ndim not in (1, 2) or not np.all(np.isfinite(coef)):
        raise ValueError("cannot save a model whose coef_ is not a finite 1-d or 2-d array")
    arrays = {"coef": _encode_array(coef)}
    for name, values in record.scorer_arrays.items():
        arrays[f"scorer.{name}"] = _encode_array(np.asarray(values))
    names = record.feature_names
    if names is not None:
        names = list(names)
        if len(names) != coef.shape[-1] or not all(isinstance(n, str) for n in names):
            raise ValueError(
                f"cannot save a model whose feature names are not {coef.shape[-1]} strings, "
                f"one per feature; got {_brief(names)}"
            )
        names = [str(n) for n in names]  # numpy's str_ as plain strings
    document = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "bmrm_version": _package_version(),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "n_features": int(coef.shape[-1]),
        "feature_names": names,
        "scorer": {
            "name": str(record.scorer_name),
            "version": int(record.scorer_version),
            "params": _json_value(record.scorer_params, "scorer parameters"),
        },
        "intercept": _finite_float(record.intercept, "intercept_"),
        "lam": _lam(record.lam),
        "regularizer": _json_value(record.regularizer, "regularizer"),
        "loss": _loss_entry(record, arrays),
        "result": _result_entry(record, arrays),
        "arrays": arrays,
    }
    document["sha256"] = _checksum(document)
    return json.dumps(document, indent=1, ensure_ascii=True, allow_nan=False) + "\n"


# ----------------------------------------------------------------------------- loading


def _version_tuple(text: str) -> tuple[int, ...] | None:
    match = re.match(r"\d{1,18}(?:\.\d{1,18})*(?!\d)", text)
    return None if match is None else tuple(int(part) for part in match.group().split("."))


def _newer(version: str, installed: str) -> bool:
    a, b = _version_tuple(version), _version_tuple(installed)
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)) > b + (0,) * (width - len(b))


def _reject_constant(token: str):
    raise ValueError(f"{token} is not allowed in a model file")


class _Reader:
    """Typed access to the fields of a parsed document; errors name the file."""

    def __init__(self, path: str, document: dict):
        self.path = path
        self.document = document

    def error(self, reason: str) -> ValueError:
        return ValueError(f"{self.path}: {reason}")

    def field(self, mapping: dict, key: str, kind: type, where: str = ""):
        if not isinstance(mapping, dict) or key not in mapping:
            raise self.error(f"malformed model file: field '{where}{key}' is missing")
        value = mapping[key]
        if kind is float:
            # Chained comparisons are exact for Python ints and false for NaN.
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            ok = ok and -_FLOAT_MAX <= value <= _FLOAT_MAX
            value = float(value) if ok else value
        elif kind is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, kind)
        if not ok:
            raise self.error(
                f"malformed model file: field '{where}{key}' should be {_JSON_KINDS[kind]}; "
                f"got {value!r}"
            )
        return value

    def array(self, arrays: dict, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
        spec = self.field(arrays, name, dict, "arrays.")
        code = self.field(spec, "dtype", str, f"arrays.{name}.")
        dims = self.field(spec, "shape", list, f"arrays.{name}.")
        data = self.field(spec, "data", str, f"arrays.{name}.")
        if code not in _DTYPES or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in dims
        ):
            raise self.error(
                f"malformed model file: array {name!r} has dtype {code!r}, shape {dims}"
            )
        if shape is not None and tuple(dims) != shape:
            raise self.error(f"malformed model file: array {name!r} has shape {dims}, not {shape}")
        try:
            raw = base64.b64decode(data, validate=True)
        except ValueError as exc:
            raise self.error(f"malformed model file: array {name!r} is not base64") from exc
        dtype = np.dtype(code)
        if len(raw) != dtype.itemsize * math.prod(dims):
            raise self.error(
                f"malformed model file: array {name!r} holds {len(raw)} bytes for shape {dims}"
            )
        try:
            return np.frombuffer(raw, dtype=dtype).reshape(dims).astype(_DTYPES[code])
        except ValueError:  # more dimensions than numpy has, or one beyond its range
            raise self.error(
                f"malformed model file: array {name!r} has shape {_brief(dims)}"
            ) from None


class _Malformed(ValueError):
    """A model file's JSON that parses but cannot be a model (reported as malformed)."""


def _finite_number(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise _Malformed(f"the number {token[:40]} is beyond float64's range")
    return value


def _unique_keys(pairs: list) -> dict:
    """An object's members; a key given twice would let the last copy win unseen by the
    checksum, which covers the parsed document."""
    document = dict(pairs)
    if len(document) != len(pairs):
        seen = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise _Malformed(f"the key {twice!r} appears twice in one object")
    return document


def _all_finite(value) -> bool:
    """Whether no float in a parsed JSON value is infinite (a number beyond float64's range
    parses as one); a list of numbers is summed in C first, since files may hold millions."""
    if type(value) is float:
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_all_finite(item) for item in value.values())
    if isinstance(value, list):
        try:
            if math.isfinite(sum(value, 0.0)):
                return True
        except (TypeError, OverflowError):  # not numbers only, or an int beyond float64
            pass
        return all(_all_finite(item) for item in value)
    return True


def _parse(path: str, raw: bytes) -> dict:
    not_model = ValueError(f"{path}: not a bmrm model file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise not_model from None
    try:
        document = json.loads(
            text,
            parse_constant=_reject_constant,
            object_pairs_hook=_unique_keys,
        )
        if not _all_finite(document):
            # again, number by number, to name the one beyond float64's range
            json.loads(text, parse_float=_finite_number, object_pairs_hook=_unique_keys)
    except _Malformed as exc:
        if text.lstrip().startswith("{") and f'"{FORMAT}"' in text[:200]:
            raise ValueError(f"{path}: malformed model file: {exc}") from None
        raise not_model from None
    except (ValueError, RecursionError) as exc:
        if text.lstrip().startswith("{") and f'"{FORMAT}"' in text[:200]:
            raise ValueError(
                f"{path}: truncated or corrupted model file (invalid JSON: {exc})"
            ) from None
        raise not_model from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise not_model
    return document


def _check_versions(reader: _Reader) -> int:
    """The file's format version, after checking versions and checksum."""
    document = reader.document
    version = document.get("format_version")
    if version not in READ_VERSIONS or not isinstance(version, int) or isinstance(version, bool):
        newer = isinstance(version, int) and not isinstance(version, bool)
        newer = newer and version > FORMAT_VERSION
        raise reader.error(
            f"model format version {version!r} is "
            + ("newer than this bmrm reads" if newer else "unknown")
            + f" (bmrm {_package_version()} reads versions "
            + ", ".join(map(str, READ_VERSIONS))
            + ")"
        )
    written_by = document.get("bmrm_version")
    if not isinstance(written_by, str) or _version_tuple(written_by) is None:
        raise reader.error(f"malformed model file: bad bmrm_version {_brief(written_by)}")
    installed = _package_version()
    if _newer(written_by, installed):
        raise reader.error(
            f"written by bmrm {written_by}, newer than the installed bmrm {installed}; "
            "upgrade bmrm to load it"
        )
    if document.get("sha256") != _checksum(document):
        raise reader.error(
            "checksum mismatch: the model file was modified or corrupted after it was written"
        )
    return version


def _read_result_v1(reader: _Reader, arrays: dict, record: ModelRecord) -> None:
    entry = reader.document.get("result")
    if entry is None:
        return
    record.result_type = BMRM_RESULT
    record.result_fields = {
        key: reader.field(entry, key, kind, "result.") for key, kind in SUMMARY_FIELDS.items()
    }
    prefix = "history."
    history = {
        name[len(prefix) :]: reader.array(arrays, name)
        for name in arrays
        if name.startswith(prefix)
    }
    record.result_arrays = {"x": reader.array(arrays, "x"), "history": history}


def _decode_field(reader: _Reader, key: str, value):
    if isinstance(value, dict):
        if set(value) == {"float"} and value["float"] in _NONFINITE:
            return _NONFINITE[value["float"]]
    elif value is None or isinstance(value, bool | int | str):
        return value
    elif isinstance(value, float) and math.isfinite(value):
        return value
    raise reader.error(f"malformed model file: field 'result.fields.{key}' is {value!r}")


def _read_result_v2(reader: _Reader, arrays: dict, record: ModelRecord) -> None:
    if reader.document.get("result", ...) is None:
        return
    entry = reader.field(reader.document, "result", dict)
    record.result_type = reader.field(entry, "type", str, "result.")
    fields = reader.field(entry, "fields", dict, "result.")
    record.result_fields = {key: _decode_field(reader, key, v) for key, v in fields.items()}
    omitted = reader.field(entry, "omitted", list, "result.")
    if not all(isinstance(name, str) for name in omitted):
        raise reader.error(f"malformed model file: field 'result.omitted' is {omitted!r}")
    record.result_omitted = omitted
    if record.result_type == BMRM_RESULT:
        for key, kind in SUMMARY_FIELDS.items():
            value = record.result_fields.get(key, ...)
            ok = value is not ... and (
                isinstance(value, kind) if kind is not float else isinstance(value, int | float)
            )
            if not ok or (kind is not bool and isinstance(value, bool)):
                raise reader.error(
                    f"malformed model file: field 'result.fields.{key}' should be "
                    f"{_JSON_KINDS[kind].replace('a finite', 'a')}; got "
                    f"{'nothing' if value is ... else repr(value)}"
                )
            if kind is float:
                record.result_fields[key] = float(value)
    prefix = "result."
    result_arrays: dict[str, Any] = {}
    for name in arrays:
        if not name.startswith(prefix):
            continue
        key, _, column = name[len(prefix) :].partition(".")
        values = reader.array(arrays, name)
        if column:
            group = result_arrays.setdefault(key, {})
            if not isinstance(group, dict):
                raise reader.error(f"malformed model file: array {name!r} and 'result.{key}'")
            group[column] = values
        elif key in result_arrays:
            raise reader.error(f"malformed model file: array {name!r} and 'result.{key}.*'")
        else:
            result_arrays[key] = values
    if "x" not in result_arrays or isinstance(result_arrays["x"], dict):
        raise reader.error("malformed model file: array 'result.x' is missing")
    both = sorted(set(result_arrays) & set(record.result_fields))
    if both:
        raise reader.error(f"malformed model file: result field {both[0]!r} is given twice")
    record.result_arrays = result_arrays


def _read_feature_names(reader: _Reader, d: int) -> list[str] | None:
    if "feature_names" not in reader.document:
        raise reader.error("malformed model file: field 'feature_names' is missing")
    names = reader.document["feature_names"]
    if names is None:
        return None
    if (
        not isinstance(names, list)
        or len(names) != d
        or not all(isinstance(name, str) for name in names)
    ):
        raise reader.error(
            f"malformed model file: field 'feature_names' should be null or {d} strings, "
            f"one per feature; got {_brief(names)}"
        )
    return names


def _brief(value, limit: int = 200) -> str:
    """``repr(value)``, cut to ``limit`` characters for a message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _read_scorer(reader: _Reader, arrays: dict, record: ModelRecord) -> None:
    entry = reader.field(reader.document, "scorer", dict)
    record.scorer_name = reader.field(entry, "name", str, "scorer.")
    record.scorer_version = reader.field(entry, "version", int, "scorer.")
    record.scorer_params = reader.field(entry, "params", dict, "scorer.")
    prefix = "scorer."
    record.scorer_arrays = {
        name[len(prefix) :]: reader.array(arrays, name)
        for name in arrays
        if name.startswith(prefix)
    }


def _read_array_params(reader: _Reader, entry: dict, arrays: dict, params: dict) -> dict:
    """The loss parameters a version-4 file stores as arrays (see the module docstring)."""
    keys = reader.field(entry, "array_params", list, "loss.")
    if not all(isinstance(key, str) for key in keys) or len(set(keys)) != len(keys):
        raise reader.error(f"malformed model file: field 'loss.array_params' is {_brief(keys)}")
    out = {}
    for key in keys:
        if key in params:
            raise reader.error(f"malformed model file: loss parameter {key!r} is given twice")
        values = reader.array(arrays, f"loss.{key}")
        if values.dtype == np.bool_ or values.ndim == 0 or values.size == 0:
            raise reader.error(
                f"malformed model file: array 'loss.{key}' must be a non-empty array of numbers"
            )
        out[key] = values
    unused = sorted(name for name in arrays if name.startswith("loss.") and name[5:] not in keys)
    if unused:
        raise reader.error(
            f"malformed model file: array {unused[0]!r} is not named in 'loss.array_params'"
        )
    return out


def read_model_file(
    path, *, n_features: int | None = None, data: bytes | None = None
) -> ModelRecord:
    """Read the plain values of a model file written by :func:`write_model_file`.

    Reads format versions 1, 2 and 3. Never unpickles: only :func:`json.loads` and base64
    decoding run.

    Parameters
    ----------
    path : str or path-like
        The file to read.
    n_features : int or None, default=None
        When given, the number of features of the data the model is meant for; a model
        with another number of features is an error.
    data : bytes or None, default=None
        The file's bytes when they have been read already (a pipe can be read only once);
        ``path`` then only names the file in messages.

    Returns
    -------
    ModelRecord
        ``coef`` and ``intercept`` bit for bit as saved; ``regularizer``, the loss and the
        scorer as their JSON values (the model layer rebuilds and checks them).

    Raises
    ------
    ValueError
        Naming ``path``, for a file that is not a model file, is truncated or corrupted,
        fails its checksum (modified after writing), has an unknown format version, was
        written by a newer bmrm, or whose fields are malformed; and for a model whose
        number of features differs from ``n_features``.
    OSError
        When the file cannot be read.
    """
    path_text = os.fspath(path)
    if data is None:
        with open(path_text, "rb") as f:
            raw = f.read()
    else:
        raw = bytes(data)
    reader = _Reader(path_text, _parse(path_text, raw))
    version = _check_versions(reader)
    document = reader.document
    reader.field(document, "created", str)
    d = reader.field(document, "n_features", int)
    arrays = reader.field(document, "arrays", dict)
    if d < 1:
        raise reader.error(f"malformed model file: n_features must be at least 1; got {d}")
    if not (isinstance(arrays.get("coef"), dict) and arrays["coef"].get("dtype") == "<f8"):
        raise reader.error("malformed model file: array 'coef' must have dtype '<f8'")
    coef = reader.array(arrays, "coef", (d,) if version == 1 else None)
    if coef.ndim not in (1, 2) or coef.shape[-1] != d:
        raise reader.error(
            f"malformed model file: array 'coef' has shape {list(coef.shape)}, not [{d}] "
            f"or [K, {d}]"
        )
    intercept = reader.field(document, "intercept", float)
    lam = reader.field(document, "lam", float)
    if not np.all(np.isfinite(coef)) or lam <= 0:
        raise reader.error(
            f"malformed model file: coef must be finite and lam > 0 (got lam = {lam!r})"
        )
    if "regularizer" not in document:
        raise reader.error("malformed model file: field 'regularizer' is missing")
    loss_entry = reader.field(document, "loss", dict)
    if version >= 4 and loss_entry.get("name", ...) is None:
        record = ModelRecord(coef, intercept, lam, document["regularizer"], None, {})
        record.loss_user = reader.field(loss_entry, "user", str, "loss.")
    else:
        name = reader.field(loss_entry, "name", str, "loss.")
        params = reader.field(loss_entry, "params", dict, "loss.")
        if version >= 4:
            params.update(_read_array_params(reader, loss_entry, arrays, params))
        record = ModelRecord(coef, intercept, lam, document["regularizer"], name, params)
    if version == 1:
        _read_result_v1(reader, arrays, record)
    else:
        _read_scorer(reader, arrays, record)
        _read_result_v2(reader, arrays, record)
    if version >= 3:
        record.feature_names = _read_feature_names(reader, d)
    if n_features is not None and n_features != d:
        raise reader.error(f"the model has {d} features but the data has {n_features}")
    return record

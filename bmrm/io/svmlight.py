"""Reading and writing ranking data: svmlight / LETOR files and query files.

The svmlight format holds one row per line::

    <label> [qid:<int>] <index>:<value> <index>:<value> ... [# comment]

with strictly increasing feature indices, zero values left out, and anything after ``#``
ignored by the parser. LETOR data sets (MQ2007, MQ2008, ...) put the query id right after the
label and a ``#docid = ...`` comment at the end of each line. LightGBM's ranking examples
leave ``qid:`` out and keep the query groups in a side file ``<data>.query`` holding one
group size per line, in row order.

:func:`load_svmlight` parses with scikit-learn's compiled reader
(:func:`sklearn.datasets.load_svmlight_file`) and adds what ranking work needs: the query ids
(``None`` when the file has none), the trailing comments, ``.query`` side files, and errors
that name the file and the line. Only when the compiled reader fails (or a check on its result
fails) is the file scanned again in Python to find the first bad line, so valid files are read
at compiled speed.
"""

from __future__ import annotations

import bz2
import gzip
import itertools
import math
import os
from collections.abc import Iterator, Sequence
from typing import IO, Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import DTypeLike

__all__ = [
    "dump_query_file",
    "dump_svmlight",
    "groups_from_qid",
    "load_query_file",
    "load_svmlight",
    "qid_from_groups",
]

PathLike = str | os.PathLike

# The compiled reader stores feature indices in a C int.
_MAX_INDEX = 2**31 - 1


def _open(path: str, mode: str, **kwargs) -> IO:
    """Open ``path``, decompressing ``.gz`` and ``.bz2`` files as scikit-learn's reader does."""
    suffix = os.path.splitext(path)[1]
    if suffix == ".gz":
        return gzip.open(path, mode, **kwargs)
    if suffix == ".bz2":
        return bz2.open(path, mode, **kwargs)
    return open(path, mode, **kwargs)


# ---------------------------------------------------------------------------------------------
# svmlight / LETOR files
# ---------------------------------------------------------------------------------------------


def _data_lines(path: str) -> Iterator[tuple[int, list[bytes], bytes | None]]:
    """Yield ``(line_number, tokens, comment)`` for every line that holds a row.

    Lines are split on ``\\n`` and tokens on ASCII whitespace, everything after the first
    ``#`` is the comment (``None`` without ``#``), and lines with no token before ``#`` are
    skipped: the same rules as scikit-learn's compiled reader, so the k-th yielded line is row k.
    """
    with _open(path, "rb") as f:
        for lineno, line in enumerate(f, start=1):
            data, hash_sign, comment = line.partition(b"#")
            tokens = data.split()
            if tokens:
                yield lineno, tokens, comment if hash_sign else None


def _show(token: bytes) -> str:
    text = token.decode("utf-8", "backslashreplace")
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _is_int64(text: bytes) -> bool:
    try:
        value = int(text)
    except ValueError:
        return False
    return -(2**63) <= value < 2**63


def _line_error(tokens: list[bytes], one_based: bool) -> str | None:
    """What is wrong with one row's tokens, or ``None``."""
    label = tokens[0]
    try:
        value = float(label)
    except ValueError:
        return f"label {_show(label)} is not a number"
    if not math.isfinite(value):
        return f"label {_show(label)} is not a finite number"
    features = tokens[1:]
    if features and features[0].startswith(b"qid"):
        _, colon, qid = features[0].partition(b":")
        if not colon or not _is_int64(qid):
            return f"bad query id {_show(features[0])}; expected qid:<integer>"
        features = features[1:]
    previous = -1
    for token in features:
        index_text, colon, value_text = token.partition(b":")
        if not colon:
            return f"expected index:value; got {_show(token)}"
        try:
            index = int(index_text)
        except ValueError:
            where = " (qid: must come right after the label)" if token.startswith(b"qid") else ""
            return f"feature index in {_show(token)} is not an integer{where}"
        try:
            float(value_text)
        except ValueError:
            return f"feature value in {_show(token)} is not a number"
        if index < 0:
            return f"feature index {index} is negative"
        if index == 0 and one_based:
            return "feature index 0 in a one-based file (zero_based=False)"
        if index > _MAX_INDEX:
            return f"feature index {index} is larger than {_MAX_INDEX}"
        if index <= previous:
            return f"feature indices must be strictly increasing; got {index} after {previous}"
        previous = index
    return None


def _first_error(path: str, one_based: bool) -> tuple[int, str] | None:
    """The first bad line of a svmlight file and what is wrong with it, or ``None``.

    Besides each line's syntax, checks that either every row or no row has a ``qid:``.
    """
    qid_line = None
    for lineno, tokens, _ in _data_lines(path):
        problem = _line_error(tokens, one_based)
        if problem is not None:
            return lineno, problem
        has_qid = len(tokens) > 1 and tokens[1].startswith(b"qid")
        if qid_line is None:
            qid_line = (lineno, has_qid)
        elif has_qid != qid_line[1]:
            this, first = ("has a", "has none") if has_qid else ("has no", "has one")
            return lineno, f"this line {this} qid: but line {qid_line[0]} {first}"
    return None


def _line_of_row(path: str, row: int) -> int:
    return next(itertools.islice(_data_lines(path), row, None))[0]


def _bad_file(path: str, one_based: bool, cause: str) -> ValueError:
    """A ValueError naming the file and, when the scan finds it, the first bad line."""
    located = _first_error(path, one_based)
    if located is None:
        return ValueError(f"{path}: {cause}")
    lineno, problem = located
    return ValueError(f"{path}, line {lineno}: {problem}")


def _read_comments(path: str) -> list[str]:
    comments = []
    for lineno, _, comment in _data_lines(path):
        try:
            comments.append("" if comment is None else comment.decode("utf-8").strip())
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path}, line {lineno}: comment is not valid UTF-8") from exc
    return comments


def load_svmlight(
    path: PathLike,
    *,
    n_features: int | None = None,
    dtype: DTypeLike = np.float64,
    zero_based: bool | Literal["auto"] = "auto",
    return_comments: bool = False,
    query_file: PathLike | Literal["auto"] | None = "auto",
    dense: bool = False,
) -> tuple:
    """Read a svmlight / LETOR file with its query ids and, optionally, its comments.

    Parameters
    ----------
    path : str or path-like
        The file; names ending in ``.gz`` or ``.bz2`` are decompressed on the fly.
    n_features : int, optional
        Number of columns of ``X``; by default the largest feature index in the file. Files
        that are parts of one data set should be read with the same ``n_features``.
    dtype : float dtype, default float64
        Dtype of ``X``. Values are parsed as float64 and then rounded to ``dtype``.
    zero_based : bool or "auto", default "auto"
        Whether feature index 0 is the first column (True) or index 1 is (False, the LETOR
        convention, where index 0 is an error). "auto" takes the file as one-based when no
        index 0 occurs in it, which misreads a zero-based file whose first column is all zero:
        pass the convention explicitly when it is known.
    return_comments : bool, default False
        Also return, per row, the text after its first ``#`` with surrounding whitespace
        removed (``""`` for rows without ``#``); e.g. ``"docid = GX008-86-4444840 inc = 1
        prob = 0.08"`` for LETOR files.
    query_file : str, path-like, "auto" or None, default "auto"
        A LightGBM-style group file (see :func:`load_query_file`) giving the query groups of
        a file without ``qid:``; ``qid`` is then ``qid_from_groups(sizes)``. "auto" uses
        ``<path>.query`` when the file has no ``qid:`` and that file exists. Passing a query
        file for a file that has ``qid:`` is an error.
    dense : bool, default False
        Return ``X`` as a dense array rather than CSR.

    Returns
    -------
    X : scipy.sparse.csr_matrix or ndarray of shape (n_samples, n_features)
        Sorted indices, no stored zeros other than those written in the file.
    y : ndarray of float64, shape (n_samples,)
        Labels (always float64, whatever the file's notation).
    qid : ndarray of int64, shape (n_samples,), or None
        Query id of each row in file order; ``None`` when the file has no ``qid:`` and no
        query file applies.
    comments : list of str
        Only when ``return_comments`` is true.

    Raises
    ------
    ValueError
        For malformed input, with the file name and line number: a label that is not a finite
        number, a token that is not ``index:value`` with an integer index and a numeric
        value, a negative index, index 0 when ``zero_based=False``, indices that do not
        strictly increase along a line, a ``qid:`` that is not an integer or not right after
        the label, ``qid:`` on some rows but not others, an index beyond ``n_features``. Also
        for a file with no row, or group sizes that do not sum to the row count.

    Notes
    -----
    Blank lines, whitespace-only lines and lines starting with ``#`` hold no row and are
    skipped, as by :func:`sklearn.datasets.load_svmlight_file`, and that reader does the
    parsing. When it rejects the file, or a check on its output fails, the file is scanned
    once more in Python to locate the first offending line; valid files are read once (twice
    with ``return_comments``). Cost O(file size).
    """
    path = os.fspath(path)
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise ValueError(f"dtype must be a floating dtype; got {dtype}")
    if zero_based not in (True, False, "auto"):
        raise ValueError(f"zero_based must be True, False or 'auto'; got {zero_based!r}")
    if n_features is not None and (isinstance(n_features, bool) or int(n_features) < 1):
        raise ValueError(f"n_features must be an integer >= 1 or None; got {n_features!r}")
    one_based = zero_based is False
    try:
        # imported here: scikit-learn takes a second or more to import
        from sklearn.datasets import load_svmlight_file

        X, y, qid = load_svmlight_file(path, dtype=dtype, zero_based=zero_based, query_id=True)
    except (ValueError, OverflowError) as exc:
        raise _bad_file(path, one_based, str(exc)) from exc
    n_rows = X.shape[0]
    if n_rows == 0:
        raise ValueError(f"{path}: no data row (the file is empty or holds only comments)")
    if 0 < len(qid) < n_rows or not np.all(np.isfinite(y)):
        raise _bad_file(path, one_based, "inconsistent qid: or non-finite label")
    X = sp.csr_matrix(X)
    if n_features is not None:
        n_features = int(n_features)
        if X.shape[1] > n_features:
            over = np.flatnonzero(X.indices >= n_features)[0]
            row = int(np.searchsorted(X.indptr, over, side="right")) - 1
            raise ValueError(
                f"{path}, line {_line_of_row(path, row)}: feature column "
                f"{int(X.indices[over])} (counting from 0) is beyond n_features={n_features}"
            )
        X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(n_rows, n_features))
    qid = np.asarray(qid, dtype=np.int64) if len(qid) else None
    qid = _apply_query_file(path, query_file, qid, n_rows)
    result = (X.toarray() if dense else X, np.asarray(y, dtype=np.float64), qid)
    if return_comments:
        result += (_read_comments(path),)
    return result


def _apply_query_file(
    path: str, query_file: PathLike | str | None, qid: np.ndarray | None, n_rows: int
) -> np.ndarray | None:
    if query_file is None:
        return qid
    if isinstance(query_file, str) and query_file == "auto":
        if qid is not None or not os.path.isfile(path + ".query"):
            return qid
        query_file = path + ".query"
    elif qid is not None:
        raise ValueError(
            f"{path} has qid: on its rows, so a query file ({os.fspath(query_file)}) would "
            "conflict; pass query_file=None or 'auto'"
        )
    sizes = load_query_file(query_file)
    total = int(sizes.sum())
    if total != n_rows:
        raise ValueError(
            f"group sizes in {os.fspath(query_file)} sum to {total} rows but {path} has "
            f"{n_rows} rows"
        )
    return qid_from_groups(sizes)


def _format_numbers(values: np.ndarray) -> list[str]:
    """Decimal text that parses back to exactly ``values`` (integers, or float64 shortest)."""
    if values.dtype.kind in "iub":
        return values.astype(np.int64).astype(str).tolist()
    # Widening to float64 is exact, and numpy prints the shortest string that reads back to
    # the same float64, so float32 data also survive a round trip bit for bit.
    return values.astype(np.float64).astype(str).tolist()


def dump_svmlight(
    path: PathLike,
    X,
    y,
    qid=None,
    comments: Sequence[str] | None = None,
    *,
    zero_based: bool = False,
) -> None:
    """Write rows in svmlight / LETOR format: ``label [qid:q] i:v ... [#comment]``.

    Parameters
    ----------
    path : str or path-like
        Output file (overwritten); ``.gz`` and ``.bz2`` names are compressed.
    X : array-like or sparse matrix of shape (n_samples, n_features)
        Real-valued features; zeros (stored or not) are left out of the file.
    y : array-like of shape (n_samples,)
        Finite real labels.
    qid : array-like of int, shape (n_samples,), optional
        Query id of each row, written as ``qid:<int>`` after the label.
    comments : sequence of str, optional
        One per row, written after `` #``; ``""`` writes no comment. They must not contain
        line breaks; surrounding whitespace is not kept by :func:`load_svmlight`.
    zero_based : bool, default False
        Write column ``j`` as index ``j`` (True) or ``j + 1`` (False, the LETOR convention).

    Notes
    -----
    Integers, and labels with an integer value, are written as integers; other floats as the
    shortest decimal that reads back to the same float64 (float32 values are widened exactly
    first), so that
    ``load_svmlight(path, n_features=X.shape[1], zero_based=zero_based, dtype=X.dtype)``
    returns the same ``X`` (up to dropped zeros), ``y``, ``qid`` and comments. Trailing
    all-zero columns leave no trace in the file, hence ``n_features`` on reading.
    Cost O(n_samples + nnz(X)).
    """
    path = os.fspath(path)
    if not sp.issparse(X):
        X = np.asarray(X)
    if X.ndim != 2 or X.dtype.kind not in "iubf":
        raise ValueError(
            f"X must be a 2-d array of real numbers; got shape {X.shape} and dtype {X.dtype}"
        )
    X = sp.csr_matrix(X, copy=True)
    n_rows = X.shape[0]
    X.eliminate_zeros()
    X.sort_indices()
    y = np.asarray(y)
    if y.shape != (n_rows,) or y.dtype.kind not in "iubf":
        raise ValueError(
            f"y must be a 1-d array of real numbers with one label per row ({n_rows} rows); "
            f"got shape {y.shape} and dtype {y.dtype}"
        )
    if not np.all(np.isfinite(y)):
        raise ValueError("y must hold finite numbers")
    labels = _format_numbers(y)
    if y.dtype.kind == "f":
        # LETOR tools expect grades such as 2, not 2.0; below 2**53 both read back the same.
        whole = np.flatnonzero((np.abs(y) < 2**53) & (y == np.trunc(y)))
        for row, value in zip(whole.tolist(), y[whole].astype(np.int64).tolist(), strict=True):
            labels[row] = str(value)
    if qid is not None:
        qid = np.asarray(qid)
        if qid.shape != (n_rows,) or qid.dtype.kind not in "iu":
            raise ValueError(
                f"qid must be a 1-d integer array with one id per row ({n_rows} rows); got "
                f"shape {qid.shape} and dtype {qid.dtype}"
            )
        qid_text = [f"qid:{q}" for q in qid.astype(np.int64).tolist()]
    if comments is not None:
        if isinstance(comments, str) or len(comments) != n_rows:
            raise ValueError(f"comments must be a sequence of {n_rows} strings, one per row")
        for row, comment in enumerate(comments):
            if not isinstance(comment, str) or "\n" in comment or "\r" in comment:
                raise ValueError(
                    f"comments[{row}] must be a string without line breaks; got {comment!r}"
                )
    base = 0 if zero_based else 1
    tokens = [
        f"{index}:{value}"
        for index, value in zip((X.indices + base).tolist(), _format_numbers(X.data), strict=True)
    ]
    indptr = X.indptr.tolist()
    with _open(path, "wt", encoding="utf-8", newline="\n") as f:
        for row in range(n_rows):
            parts = [labels[row]]
            if qid is not None:
                parts.append(qid_text[row])
            parts.extend(tokens[indptr[row] : indptr[row + 1]])
            if comments is not None and comments[row]:
                parts.append("#" + comments[row])
            f.write(" ".join(parts) + "\n")


# ---------------------------------------------------------------------------------------------
# LightGBM-style query (group) files
# ---------------------------------------------------------------------------------------------


def _check_sizes(sizes) -> np.ndarray:
    sizes = np.asarray(sizes)
    if sizes.ndim != 1 or (sizes.size and sizes.dtype.kind not in "iu"):
        raise ValueError(f"sizes must be a 1-d array of integers; got {sizes.dtype} {sizes.shape}")
    if np.any(sizes < 1):
        bad = int(np.flatnonzero(sizes < 1)[0])
        raise ValueError(f"sizes must be >= 1; got {sizes[bad]} at position {bad}")
    return sizes.astype(np.int64)


def load_query_file(path: PathLike) -> np.ndarray:
    """Read a LightGBM-style group file: one group size per line, in row order.

    Blank lines are skipped. Returns an int64 array of sizes (each >= 1); raises ValueError
    naming the file and line for anything else, and for a file with no size.
    """
    path = os.fspath(path)
    sizes = []
    with open(path, "rb") as f:
        for lineno, line in enumerate(f, start=1):
            text = line.strip()
            if not text:
                continue
            try:
                size = int(text)
            except ValueError:
                size = 0
            if size < 1:
                raise ValueError(
                    f"{path}, line {lineno}: expected a group size (an integer >= 1); "
                    f"got {_show(text)}"
                )
            sizes.append(size)
    if not sizes:
        raise ValueError(f"{path}: no group size (the file is empty)")
    return np.array(sizes, dtype=np.int64)


def dump_query_file(path: PathLike, sizes) -> None:
    """Write group sizes (integers >= 1), one per line, as :func:`load_query_file` reads them."""
    sizes = _check_sizes(sizes)
    with open(os.fspath(path), "w", encoding="ascii", newline="\n") as f:
        f.writelines(f"{size}\n" for size in sizes.tolist())


def qid_from_groups(sizes) -> np.ndarray:
    """Query ids ``0, ..., n_groups - 1``, each repeated over its group's consecutive rows.

    ``qid_from_groups([2, 3])`` is ``[0, 0, 1, 1, 1]``. Sizes must be integers >= 1.
    """
    sizes = _check_sizes(sizes)
    return np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)


def groups_from_qid(qid) -> np.ndarray:
    """Sizes of the runs of equal consecutive query ids, in row order (int64).

    The inverse of :func:`qid_from_groups` up to renaming the ids. Raises ValueError when a
    query's rows are not consecutive, since group sizes cannot describe that; sort the rows
    by ``qid`` (stably) first.
    """
    qid = np.asarray(qid)
    if qid.ndim != 1:
        raise ValueError(f"qid must be 1-d; got shape {qid.shape}")
    if qid.size == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.concatenate(([0], np.flatnonzero(qid[1:] != qid[:-1]) + 1))
    run_ids = qid[starts]
    _, first, counts = np.unique(run_ids, return_index=True, return_counts=True)
    if np.any(counts > 1):
        run = int(np.sort(first[counts > 1])[0])
        again = int(np.flatnonzero(run_ids[run + 1 :] == run_ids[run])[0]) + run + 1
        raise ValueError(
            f"the rows of query {run_ids[run].item()!r} are not consecutive (row "
            f"{starts[run]} and again row {starts[again]}); sort the rows by qid first"
        )
    return np.diff(np.append(starts, qid.size)).astype(np.int64)

"""Reading and writing ranking data: svmlight / LETOR files and query files.

The svmlight format holds one row per line::

    <label> [qid:<int>] <index>:<value> <index>:<value> ... [# comment]

with strictly increasing feature indices, zero values left out, and anything after ``#``
ignored by the parser. A line ends at a line feed (LF), a carriage return alone (CR, as
written by classic Mac OS tools) or both (CRLF), mixed freely; line numbers in messages
count each of them once. LETOR data sets (MQ2007, MQ2008, ...) put the query id right after the
label and a ``#docid = ...`` comment at the end of each line. LightGBM's ranking examples
leave ``qid:`` out and keep the query groups in a side file ``<data>.query`` holding one
group size per line, in row order.

:func:`load_svmlight` parses with the compiled reader of :mod:`bmrm.io._parse` in two passes
over chunks of the file: the first checks every line and counts rows and values, the second
converts the numbers straight into the final CSR or dense array, so only one chunk of text and
one copy of ``X`` are held (a pipe, which can be read only once, is held whole in memory). It
returns what ranking work needs: the query ids (``None`` when the file has none), the trailing
comments, ``.query`` side files, and errors that name the file and the line. Its results
equal those of scikit-learn's reader (:func:`sklearn.datasets.load_svmlight_file`) on every
file that reader accepts and that holds finite numbers only and no CR-ended line;
non-finite values are an error here. (That reader ends lines at LF only: in a file of
CR-ended lines with comments, each comment would run on to the next LF and take the rows
in between with it.)
"""

from __future__ import annotations

import bz2
import contextlib
import functools
import gzip
import io
import itertools
import lzma
import math
import os
import re
import zlib
from collections.abc import Iterator, Sequence
from stat import S_ISREG
from typing import IO, Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import DTypeLike

from bmrm.io import _parse
from bmrm.io.model_files import _write_atomic
from losses.validation import check_bool, check_int

__all__ = [
    "dump_query_file",
    "dump_svmlight",
    "groups_from_qid",
    "load_query_file",
    "load_svmlight",
    "qid_from_groups",
]

PathLike = str | os.PathLike

# Feature indices are stored as C ints (as by scikit-learn's reader).
_MAX_INDEX = _parse.MAX_FEATURE_INDEX
# Bytes read per chunk, and the size of the compiled parser's list of tokens left to Python.
_CHUNK_BYTES = 1 << 25
_SLOW_CAPACITY = 4096
_DELIMITERS = (b" ", b"\t", b"\r", b"\x0b", b"\x0c", b"\n", b"#")
# line ends (as the compiled parser reads them) and a line that holds no row
_LINE_END = re.compile(rb"\r\n|\r|\n")
_NO_ROW = re.compile(rb"[ \t\x0b\x0c]*(?:#|$)")
# compressed files by name ending (scikit-learn's reader takes the first two)
_COMPRESSION = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz"}
_COMPRESS = {"gzip": gzip.compress, "bzip2": bz2.compress, "xz": lzma.compress}
_OPENERS = {"gzip": gzip.open, "bzip2": bz2.open, "xz": lzma.open}


@contextlib.contextmanager
def _decompressing(path: str) -> Iterator[None]:
    """Report a truncated or corrupted ``.gz`` / ``.bz2`` / ``.xz`` file as a ValueError
    naming it.

    The decompressors raise ``EOFError`` (data end before the end-of-stream marker),
    ``zlib.error``, ``lzma.LZMAError``, or ``OSError`` without an error number
    (``gzip.BadGzipFile``, bz2's "Invalid data stream"); an ``OSError`` with an error number
    is the file system's and is left as it is.
    """
    kind = _COMPRESSION.get(os.path.splitext(path)[1].lower())
    try:
        yield
    except (EOFError, zlib.error, lzma.LZMAError, OSError) as exc:
        if kind is None or (isinstance(exc, OSError) and exc.errno is not None):
            raise
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ValueError(f"{path}: truncated or corrupted {kind} file ({reason})") from exc


# ---------------------------------------------------------------------------------------------
# svmlight / LETOR files
# ---------------------------------------------------------------------------------------------


class _Source:
    """A data file that the reader goes through several times, and the same each time.

    :func:`load_svmlight` reads a file more than once: a pass that counts rows and values,
    one that stores them, and more for the comments and for some error messages. A pipe, a
    FIFO, ``/dev/stdin`` or a process substitution (``<(...)``) can be read only once: opened
    again, it is empty (or waits for another writer), and the storing pass would leave the
    arrays it was to fill uninitialised. Such a file (anything but a regular file) is read
    into memory on its first opening, as it comes (still compressed, when its name says it
    is), and every pass reads that copy.

    A regular file is opened again by each pass. Its identity (device, inode, size and
    modification time) when first opened must hold at every later opening and at the end of
    every pass: a file still being written, or replaced, while it is read would otherwise
    give rows of different versions. (The storing pass also checks that it ends on exactly
    the rows and values counted, and the compiled parser never stores beyond them.)
    """

    def __init__(self, path: str):
        self.path = path
        self.kind = _COMPRESSION.get(os.path.splitext(path)[1].lower())
        self.data: bytes | None = None  # the bytes of a file that is not a regular file
        self.identity: tuple | None = None  # of a regular file, when first opened

    def changed(self) -> ValueError:
        return ValueError(
            f"{self.path}: the file changed while it was being read (it is read more than "
            "once); read it when nothing writes to it"
        )

    def _check(self, stat: os.stat_result) -> None:
        identity = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if self.identity is None:
            self.identity = identity
        elif identity != self.identity:
            raise self.changed()

    @contextlib.contextmanager
    def reading(self) -> Iterator[IO[bytes]]:
        """The decompressed bytes, for one pass."""
        with contextlib.ExitStack() as stack:
            regular = False
            if self.data is None:
                raw = stack.enter_context(open(self.path, "rb"))
                stat = os.fstat(raw.fileno())
                regular = S_ISREG(stat.st_mode)
                if regular:
                    self._check(stat)
                else:
                    self.data = raw.read()
            if not regular:
                raw = io.BytesIO(self.data)
            f = raw if self.kind is None else stack.enter_context(_OPENERS[self.kind](raw, "rb"))
            yield f
            if regular:
                # reached only at the end of a whole pass (not when the reader gave up early)
                self._check(os.fstat(raw.fileno()))


def _data_lines(source: _Source) -> Iterator[tuple[int, bytes | None]]:
    """Yield ``(line_number, comment)`` for every line that holds a row.

    Lines end as for the compiled parser (LF, CR or CRLF, see :func:`_line_ends`), the
    comment is everything after the first ``#`` (``None`` without ``#``), and lines with no
    token before ``#`` are skipped, so the k-th yielded line is row k. Lines are located in
    the chunks of :func:`_chunks`; only a row's comment is copied.
    """
    for buffer, end, lines in _chunks(source):
        lineno = lines
        start = 0
        for match in itertools.chain(_LINE_END.finditer(buffer, 0, end), (None,)):
            stop = end if match is None else match.start()
            if match is None and start == end:
                break
            lineno += 1
            if not _NO_ROW.match(buffer, start, stop):
                hash_at = buffer.find(b"#", start, stop)
                yield lineno, None if hash_at < 0 else bytes(buffer[hash_at + 1 : stop])
            if match is not None:
                start = match.end()


def _line_ends(buffer, start: int, stop: int) -> int:
    """The line ends in ``buffer[start:stop]``: each LF, CR and CRLF counts once."""
    crlf = buffer.count(b"\r\n", start, stop)
    return buffer.count(b"\n", start, stop) + buffer.count(b"\r", start, stop) - crlf


def _show(token: bytes) -> str:
    text = token.decode("utf-8", "backslashreplace")
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _line_of_row(source: _Source, row: int) -> int:
    return next(itertools.islice(_data_lines(source), row, None))[0]


def _chunks(source: _Source) -> Iterator[tuple[bytearray, int, int]]:
    """Yield ``(buffer, end, lines_before)``: ``buffer[:end]`` holds whole lines only.

    ``lines_before`` counts the line ends before the buffer, so the line of byte ``pos`` is
    ``lines_before + _line_ends(buffer, 0, pos) + 1``; a chunk never ends between the CR and
    the LF of a CRLF. Only one chunk (and the partial line carried over) is held at a time: a
    line longer than a chunk grows one buffer in place until its end is read, so it costs
    about its own length (see :func:`load_svmlight`'s notes).
    """
    lines = 0
    buffer = bytearray()
    with _decompressing(source.path), source.reading() as f:
        while True:
            data = f.read(_CHUNK_BYTES)
            if not data:
                if buffer:
                    yield buffer, len(buffer), lines
                return
            buffer += data
            del data
            # a CR as the last byte read may be the first half of a CRLF
            end = max(buffer.rfind(b"\n"), buffer.rfind(b"\r", 0, len(buffer) - 1)) + 1
            if end == 0:
                continue
            yield buffer, end, lines
            lines += _line_ends(buffer, 0, end)
            # a new buffer: the caller may still hold a view of the one it was given
            buffer = buffer[end:]


def _token_at(buffer: bytes, start: int, end: int) -> bytes:
    """The whole whitespace-delimited token around ``buffer[start:end]``."""
    while start > 0 and buffer[start - 1 : start] not in _DELIMITERS:
        start -= 1
    return buffer[start:end]


def _kernel_message(code: int, token: bytes, a: int, b: int, one_based: bool) -> str:
    """The message for an error code of :func:`bmrm.io._parse.parse_lines`."""
    if code == _parse.BAD_QID:
        return f"bad query id {_show(token)}; expected qid:<integer>"
    if code == _parse.NO_COLON:
        return f"expected index:value; got {_show(token)}"
    if code == _parse.BAD_INDEX:
        where = " (qid: must come right after the label)" if a else ""
        return f"feature index in {_show(token)} is not an integer{where}"
    if code == _parse.NEGATIVE_INDEX:
        return f"feature index -{a} is negative"
    if code == _parse.ZERO_INDEX:
        return "feature index 0 in a one-based file (zero_based=False)"
    if code == _parse.INDEX_TOO_LARGE:
        return f"feature index in {_show(token)} is larger than {_MAX_INDEX}"
    if code == _parse.NOT_INCREASING:
        return f"feature indices must be strictly increasing; got {a} after {b}"
    raise AssertionError(f"unknown parser code {code}")


def _slow_number(token: bytes) -> float | None:
    """``float(token)`` for the tokens the compiled fast path leaves over, or None.

    Python's ``float`` also reads digit-group underscores, which no svmlight writer emits and
    C readers reject, so they count as not a number here.
    """
    if b"_" in token:
        return None
    try:
        return float(token)
    except ValueError:
        return None


class _Parse:
    """One pass of the compiled parser over a file (see :mod:`bmrm.io._parse`)."""

    def __init__(self, source: _Source, one_based: bool):
        self.source = source
        self.path = source.path
        self.one_based = one_based
        self.state = np.zeros(_parse.N_STATE, dtype=np.int64)
        self.state[_parse.MIN_INDEX] = _MAX_INDEX + 1
        self.state[_parse.MAX_INDEX] = -1
        self.state[_parse.QID_STATE] = -1

    def error(self, code: int, buffer: bytes, lines: int, base: int, limit: int) -> ValueError:
        state = self.state
        pos = int(state[_parse.ERR_LINE])
        lineno = lines + _line_ends(buffer, 0, pos) + 1
        token = buffer[state[_parse.ERR_START] : state[_parse.ERR_END]]
        a, b = int(state[_parse.ERR_A]), int(state[_parse.ERR_B])
        if code == _parse.QID_MIXED:
            first = _line_of_row(self.source, 0)
            this, other = ("has a", "has none") if a else ("has no", "has one")
            message = f"this line {this} qid: but line {first} {other}"
        elif code == _parse.BEYOND_LIMIT:
            message = (
                f"feature column {a - base} (counting from 0) is beyond n_features={limit - base}"
            )
        else:
            message = _kernel_message(code, token, a, b, self.one_based)
        return ValueError(f"{self.path}, line {lineno}: {message}")

    def run(self, base: int, limit: int, out: dict | None = None) -> None:
        """Parse the whole file; with ``out`` (arrays), store rows into it."""
        state = self.state
        write = out is not None
        empty_f = np.zeros(0)
        empty_q = np.zeros(0, dtype=np.int64)
        # the unused CSR index arrays of the measuring pass and of a dense write are int32,
        # as the CSR write's (below 2**31 entries): one compilation of the kernel serves
        # all three, where another dtype would compile it again from an empty cache
        empty_i = np.zeros(0, dtype=np.int32)
        if write:
            labels, qids, X = out["labels"], out["qids"], out["X"]
            indptr, indices, values = out["indptr"], out["indices"], out["values"]
            dense = X is not None
            flat = X.reshape(-1) if dense else values
            if dense:
                indptr, indices, values = empty_i, empty_i, np.zeros(0, dtype=X.dtype)
            else:
                X = np.zeros((0, 0), dtype=values.dtype)
        else:
            labels, qids, indptr, indices = empty_f, empty_q, empty_i, empty_i
            values, X, dense = empty_f, np.zeros((0, 0)), False
        slow = np.zeros((_SLOW_CAPACITY, 4), dtype=np.int64)
        for buffer, end, lines in _chunks(self.source):
            array = np.frombuffer(buffer, dtype=np.uint8)
            state[_parse.POS] = 0
            while True:
                start = int(state[_parse.POS])
                code = _parse.parse_lines(
                    array, end, state, write, dense, base, limit,
                    labels, qids, indptr, indices, values, X, slow,
                )  # fmt: skip
                if code > _parse.SLOW_FULL:
                    if write:
                        # The measuring pass accepted every line under the same checks, and
                        # the storing pass's base and limit follow from what it measured;
                        # CAPACITY: more rows or values than it counted. Either way the
                        # text is not the one it measured.
                        raise self.source.changed()
                    raise self.error(code, buffer, lines, base, limit)
                n_slow = int(state[_parse.N_SLOW])
                for s, e, kind, slot in slow[:n_slow].tolist():
                    value = _slow_number(buffer[s:e])
                    target = labels if kind == _parse.SLOW_LABEL else flat
                    if value is not None:
                        with np.errstate(over="ignore"):
                            stored = target.dtype.type(value)
                    if value is None or not np.isfinite(stored):
                        raise self._value_error(buffer, lines, s, e, kind, value, target.dtype)
                    target[slot] = stored
                state[_parse.N_SLOW] = 0
                if code == _parse.OK:
                    break
                if state[_parse.POS] == start and n_slow == 0:
                    # one line holds more slow tokens than the list: widen it
                    slow = np.zeros((2 * len(slow), 4), dtype=np.int64)

    def _value_error(self, buffer, lines, s, e, kind, value, dtype) -> ValueError:
        lineno = lines + _line_ends(buffer, 0, s) + 1
        if kind == _parse.SLOW_LABEL:
            what = f"label {_show(buffer[s:e])}"
        else:
            what = f"feature value in {_show(_token_at(buffer, s, e))}"
        if value is None:
            problem = "is not a number"
        elif math.isfinite(value):
            problem = f"overflows {np.dtype(dtype).name}"
        else:
            problem = "is not a finite number"
        return ValueError(f"{self.path}, line {lineno}: {what} {problem}")


def _read_comments(source: _Source) -> list[str]:
    comments = []
    for lineno, comment in _data_lines(source):
        try:
            comments.append("" if comment is None else comment.decode("utf-8").strip())
        except UnicodeDecodeError as exc:
            raise ValueError(f"{source.path}, line {lineno}: comment is not valid UTF-8") from exc
    return comments


def _read(
    source: _Source, zero_based: bool | str, n_features: int | None, dtype: np.dtype, dense: bool
) -> tuple:
    """Parse ``source`` in two compiled passes, straight into arrays of their final size.

    The first pass counts rows and stored values, finds the index range and checks every
    line's structure; the second converts the numbers into ``X`` (CSR or dense), the labels
    and the query ids. The text is read in chunks of ``_CHUNK_BYTES``. The second pass must
    see what the first measured: it stops rather than store beyond the counted rows and
    values, and it must end on exactly them (and on the same index range and qid use), else
    the file changed in between and nothing is returned (see :class:`_Source`).
    """
    path = source.path
    with _decompressing(path), source.reading() as f:
        if f.read(3) == b"\xef\xbb\xbf":
            # as a label or a feature it would fail somewhere on line 1, or not at all before
            # a comment; said here, before any pass
            raise ValueError(
                f"{path}, line 1: the file begins with a UTF-8 byte-order mark, which "
                "svmlight files may not hold; save it without one"
            )
    one_based = zero_based is False
    survey = _Parse(source, one_based)
    survey.run(base=int(one_based), limit=_MAX_INDEX + 1)
    state = survey.state
    n_rows, nnz = int(state[_parse.ROW]), int(state[_parse.NNZ])
    if n_rows == 0:
        raise ValueError(f"{path}: no data row (the file is empty or holds only comments)")
    # "auto" reads a file without index 0 as one-based, as scikit-learn's reader does
    base = int(one_based or (zero_based == "auto" and nnz > 0 and state[_parse.MIN_INDEX] > 0))
    # a file without any value still gets one (empty) column, as from scikit-learn's reader
    n_cols = int(state[_parse.MAX_INDEX]) - base + 1 if nnz else 1
    if n_features is not None:
        if n_cols > n_features:
            # a second survey with the limit stops at the first line beyond it
            _Parse(source, one_based).run(base=base, limit=n_features + base)
        n_cols = n_features
    work_dtype = dtype if dtype in (np.float32, np.float64) else np.dtype(np.float64)
    out = {
        "labels": np.empty(n_rows),
        "qids": np.empty(n_rows, dtype=np.int64),
        "X": None,
        "indptr": None,
        "indices": None,
        "values": None,
    }
    if dense:
        out["X"] = np.zeros((n_rows, n_cols), dtype=work_dtype)
    else:
        index_dtype = np.int32 if max(nnz, n_cols) < 2**31 else np.int64
        out["indptr"] = np.zeros(n_rows + 1, dtype=index_dtype)
        out["indices"] = np.empty(nnz, dtype=index_dtype)
        out["values"] = np.empty(nnz, dtype=work_dtype)
    writer = _Parse(source, one_based)
    writer.run(base=base, limit=n_cols + base, out=out)
    measured = [_parse.ROW, _parse.NNZ, _parse.MIN_INDEX, _parse.MAX_INDEX, _parse.QID_STATE]
    if not np.array_equal(writer.state[measured], state[measured]):
        raise source.changed()
    if dense:
        X = out["X"]
    else:
        X = sp.csr_matrix((out["values"], out["indices"], out["indptr"]), shape=(n_rows, n_cols))
    if work_dtype != dtype:
        X = X.astype(dtype)
    qid = out["qids"] if state[_parse.QID_STATE] == 1 else None
    return X, out["labels"], qid


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
        The file; names ending in ``.gz``, ``.bz2`` or ``.xz`` (in any case) are
        decompressed on the fly. It may also be a pipe, a FIFO, ``/dev/stdin`` or a process
        substitution (``<(...)``), which is read into memory once.
    n_features : int, optional
        Number of columns of ``X``; by default the largest feature index in the file. Files
        that are parts of one data set should be read with the same ``n_features``.
    dtype : float dtype, default float64
        Dtype of ``X``: float32, float64 or longdouble, and float16 with ``dense=True``
        (scipy.sparse has no float16). Values are parsed as float64 and then rounded to
        ``dtype``.
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
        For malformed input, with the file name and line number: a label or a feature value
        that is not a finite number (or overflows ``dtype``), a token that is not
        ``index:value`` with an integer index and a numeric value, a negative index, index 0
        when ``zero_based=False``, indices that do not strictly increase along a line, a
        ``qid:`` that is not an integer or not right after the label, ``qid:`` on some rows
        but not others, an index beyond ``n_features``. Also for a file with no row, a group
        size that is not an integer from 1 to the row count, group sizes that do not sum to
        the row count, and a file that changed while it was being read.

    Notes
    -----
    Lines end at LF, CR or CRLF (mixed freely). Blank lines, whitespace-only lines and lines
    starting with ``#`` hold no row and are skipped, as by
    :func:`sklearn.datasets.load_svmlight_file`. Two compiled passes over the text (the
    comments take a third, in Python, which copies only the comments); memory is ``X``,
    ``y``, ``qid`` and one chunk of text (32 MiB), plus the whole file as read when it is
    not a regular file (a pipe can be read only once; the passes read the copy, so the
    results equal the regular file's). A line longer than a chunk is held whole: it costs
    up to about 1.15 times its length plus one chunk beyond ``X`` (the buffer it is read
    into grows in place, with the allocator's slack).
    A regular file must not change between and during the passes: one that grows, shrinks
    or is replaced meanwhile is an error, not a mixture of versions. Numbers are rounded
    correctly to float64 and then to ``dtype``; a value that is NaN, infinite or beyond the
    range of ``dtype`` is an error naming its line.
    A structural error found by the first pass is reported before the value errors, so the
    line named is a bad line, not always the first one. Cost O(file size).
    """
    path = _file_name(path, "path")
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype must be a floating dtype; got {dtype!r}") from None
    if dtype.kind != "f":
        raise ValueError(f"dtype must be a floating dtype; got {dtype}")
    dense = check_bool(dense, "dense")
    if not dense and dtype == np.float16:
        raise ValueError(
            "dtype float16 needs dense=True: scipy.sparse stores no float16, so a CSR X takes "
            "dtype float32, float64 or longdouble"
        )
    if not (query_file is None or (isinstance(query_file, str) and query_file == "auto")):
        query_file = _file_name(query_file, "query_file", "'auto' or None")
    if not (
        isinstance(zero_based, bool | np.bool_)
        or (isinstance(zero_based, str) and zero_based == "auto")
    ):
        raise ValueError(f"zero_based must be True, False or 'auto'; got {zero_based!r}")
    if not isinstance(zero_based, str):
        zero_based = bool(zero_based)
    check_int(n_features, "n_features", 1, allow_none=True)
    if n_features is not None:
        n_features = int(n_features)
    source = _Source(path)
    X, y, qid = _read(source, zero_based, n_features, dtype, dense)
    n_rows = X.shape[0]
    qid = _apply_query_file(path, query_file, qid, n_rows)
    result = (X, y, qid)
    if return_comments:
        result += (_read_comments(source),)
    return result


def _file_name(value, name: str, alternatives: str = "") -> str:
    """``os.fspath(value)``, or a ValueError naming the argument ``name``."""
    try:
        return os.fspath(value)
    except TypeError:
        also = f", {alternatives}" if alternatives else ""
        raise ValueError(
            f"{name} must be a file name (a str or path-like object){also}; got {value!r}"
        ) from None


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
    sizes = _load_group_sizes(query_file, n_rows, path)
    # in Python ints: an int64 sum wraps, and sizes whose wrapped sum equals n_rows would
    # pass to numpy.repeat, which then writes far beyond its output
    total = sum(sizes.tolist())
    if total != n_rows:
        raise ValueError(
            f"group sizes in {os.fspath(query_file)} sum to {total} rows but {path} has "
            f"{n_rows} rows"
        )
    return qid_from_groups(sizes)


def _format_numbers(values: np.ndarray) -> list[str]:
    """Decimal text that parses back to exactly ``values`` (integers, or float64 shortest)."""
    if values.dtype.kind == "b":
        values = values.astype(np.int64)
    if values.dtype.kind in "iu":
        # the exact digits of every int64 and uint64 (no cast that would wrap 2**63 and up)
        return values.astype(str).tolist()
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
        Output file (overwritten); ``.gz``, ``.bz2`` and ``.xz`` names (in any case) are
        compressed.
    X : array-like or sparse matrix of shape (n_samples, n_features)
        Real-valued features; zeros (stored or not) are left out of the file, and duplicate
        entries of a sparse matrix are written as their sum (the value scipy gives them).
    y : array-like of shape (n_samples,)
        Finite real labels.
    qid : array-like of int, shape (n_samples,), optional
        Query id of each row, written as ``qid:<int>`` after the label.
    comments : sequence of str, optional
        One per row, written after `` #``; ``""`` writes no comment. They must not contain
        line breaks; surrounding whitespace is not kept by :func:`load_svmlight`.
    zero_based : bool, default False
        Write column ``j`` as index ``j`` (True) or ``j + 1`` (False, the LETOR convention).

    Raises
    ------
    ValueError
        For ``X``, ``y``, ``qid`` or ``comments`` of the wrong shape or type, non-finite
        ``X`` or ``y``, query ids outside the int64 range that :func:`load_svmlight` reads
        (uint64 ids of 2**63 and above), and comments with a line break or a character that
        UTF-8 cannot encode (a lone surrogate); the message names the argument.
    OSError
        When the file cannot be written; ``path`` is then left as it was.

    Notes
    -----
    Integers (of any width, uint64 included), and labels with an integer value, are written
    with their exact digits; other floats as the shortest decimal that reads back to the
    same float64 (float32 and float16 values are widened exactly first), so that
    ``load_svmlight(path, n_features=X.shape[1], zero_based=zero_based, dtype=X.dtype)``
    returns the same ``X`` (up to dropped zeros), ``y``, ``qid`` and comments (integers
    beyond 2**53 are read back as the nearest float64). Trailing all-zero columns leave no
    trace in the file, hence ``n_features`` on reading.

    Every argument, comments included, is checked before the file is touched, and the text
    is written to a temporary file in the same folder that is renamed over ``path`` only
    when complete (as model files are, see :mod:`bmrm.io.model_files`): a failed call
    leaves an existing ``path`` as it was and no partial file behind. The whole text (and,
    for ``.gz`` / ``.bz2`` / ``.xz``, its compressed form) is built in memory first.
    Cost O(n_samples + nnz(X)).
    """
    path = _file_name(path, "path")
    zero_based = check_bool(zero_based, "zero_based")
    if not sp.issparse(X):
        X = np.asarray(X)
    if X.ndim != 2 or X.dtype.kind not in "iubf":
        raise ValueError(
            f"X must be a 2-d array of real numbers; got shape {X.shape} and dtype {X.dtype}"
        )
    if X.dtype == np.float16:
        X = X.astype(np.float32)  # scipy.sparse has no float16; the widening is exact
    X = sp.csr_matrix(X, copy=True)
    n_rows = X.shape[0]
    # scipy allows duplicate (row, column) entries and means their sum: write that (on the
    # copy), since "1:1.0 1:2.0" would neither be X nor a file load_svmlight reads; summing
    # first also drops entries that cancel out. sum_duplicates sorts the indices.
    X.sum_duplicates()
    X.eliminate_zeros()
    X.sort_indices()
    finite = np.isfinite(X.data)
    if not finite.all():
        at = int(np.argmin(finite))
        row = int(np.searchsorted(X.indptr, at, side="right")) - 1
        raise ValueError(f"X must hold finite numbers; X[{row}, {X.indices[at]}] is {X.data[at]}")
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
        if qid.dtype.kind == "u" and qid.size and qid.max() > np.iinfo(np.int64).max:
            row = int(np.argmax(qid > np.iinfo(np.int64).max))
            raise ValueError(
                "qid must hold ids in the int64 range -2**63 .. 2**63 - 1 (what load_svmlight "
                f"reads); got {qid[row].item()} at row {row}"
            )
        qid_text = [f"qid:{q}" for q in qid.tolist()]
    if comments is not None:
        if isinstance(comments, str) or len(comments) != n_rows:
            raise ValueError(f"comments must be a sequence of {n_rows} strings, one per row")
        for row, comment in enumerate(comments):
            if not isinstance(comment, str) or "\n" in comment or "\r" in comment:
                raise ValueError(
                    f"comments[{row}] must be a string without line breaks; got {comment!r}"
                )
            try:
                comment.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ValueError(
                    f"comments[{row}] must be text that UTF-8 can encode; got {comment!r} "
                    f"({exc.reason} at position {exc.start})"
                ) from None
    base = 0 if zero_based else 1
    tokens = [
        f"{index}:{value}"
        for index, value in zip((X.indices + base).tolist(), _format_numbers(X.data), strict=True)
    ]
    indptr = X.indptr.tolist()
    lines = []
    for row in range(n_rows):
        parts = [labels[row]]
        if qid is not None:
            parts.append(qid_text[row])
        parts.extend(tokens[indptr[row] : indptr[row + 1]])
        if comments is not None and comments[row]:
            parts.append("#" + comments[row])
        lines.append(" ".join(parts) + "\n")
    del tokens
    data = "".join(lines).encode("utf-8")
    del lines
    kind = _COMPRESSION.get(os.path.splitext(path)[1].lower())
    if kind is not None:
        data = _COMPRESS[kind](data)
    _write_atomic(path, data)


# ---------------------------------------------------------------------------------------------
# LightGBM-style query (group) files
# ---------------------------------------------------------------------------------------------


# Group sizes, their sums and the query ids made from them are int64.
_MAX_ROWS = 2**63 - 1


def _check_sizes(sizes) -> np.ndarray:
    """``sizes`` as int64, checked: integers >= 1 whose exact sum is an int64.

    An int64 sum would wrap around (and uint64 sizes of 2**63 or more would wrap when cast),
    and :func:`numpy.repeat` given sizes whose wrapped total is small writes far beyond the
    array it allocated; the sum is therefore taken in Python ints.
    """
    sizes = np.asarray(sizes)
    if sizes.ndim != 1 or (sizes.size and sizes.dtype.kind not in "iu"):
        raise ValueError(f"sizes must be a 1-d array of integers; got {sizes.dtype} {sizes.shape}")
    if np.any(sizes < 1):
        bad = int(np.flatnonzero(sizes < 1)[0])
        raise ValueError(f"sizes must be >= 1; got {sizes[bad]} at position {bad}")
    total = sum(sizes.tolist())
    if total > _MAX_ROWS:
        raise ValueError(f"sizes must sum to at most 2**63 - 1 rows; got a sum of {total}")
    return sizes.astype(np.int64)


def _read_one_per_line(
    path: PathLike, parse, noun: str, what: str, dtype, max_total: int | None = None
) -> np.ndarray:
    """One number per line of ``path``, blank lines skipped: ``parse(text)`` returns the
    number or None for a line that is not one (any line with an underscore is not: Python's
    digit-group underscores, as in ``1_1``, are no part of these files). A ValueError names
    the file and line of a bad one (``what`` says what was expected), or the file without
    any (``noun``). With ``max_total``, the (exact) running sum must not exceed it either,
    and the line where it does is named."""
    path = os.fspath(path)
    values = []
    total = 0
    with open(path, "rb") as f:
        data = f.read()
    # lines end in LF, CR or CRLF, as in the data files
    for lineno, line in enumerate(data.splitlines(), start=1):
        text = line.strip()
        if not text:
            continue
        value = None if b"_" in text else parse(text)
        if value is None:
            raise ValueError(f"{path}, line {lineno}: expected {what}; got {_show(text)}")
        if max_total is not None:
            total += value
            if total > max_total:
                raise ValueError(
                    f"{path}, line {lineno}: the {noun}s up to this line sum to {total}; "
                    f"they must sum to at most {max_total}"
                )
        values.append(value)
    if not values:
        raise ValueError(f"{path}: no {noun} (the file is empty)")
    return np.array(values, dtype=dtype)


def _group_size(text: bytes, most: int = _MAX_ROWS) -> int | None:
    try:
        size = int(text)
    except ValueError:
        return None
    return size if 1 <= size <= most else None


def _weight(text: bytes) -> float | None:
    try:
        weight = float(text)
    except ValueError:
        return None
    return weight if math.isfinite(weight) and weight >= 0 else None


def load_query_file(path: PathLike) -> np.ndarray:
    """Read a LightGBM-style group file: one group size per line, in row order.

    Blank lines are skipped. Sizes are written in decimal digits (Python's digit-group
    underscores, as in ``1_1``, are not a size).

    Parameters
    ----------
    path : str or os.PathLike
        The file to read.

    Returns
    -------
    ndarray of int64
        The group sizes, each >= 1.

    Raises
    ------
    ValueError
        Naming the file and line, for a line that is not a size, for a file with no size,
        and for sizes that sum to more than 2**63 - 1 rows (so that an int64 sum of the
        result is exact, and no size overflows int64).
    """
    return _load_group_sizes(path)


def _load_group_sizes(
    path: PathLike, n_rows: int | None = None, data_path: str | None = None
) -> np.ndarray:
    """:func:`load_query_file`; with ``n_rows``, the rows of ``data_path``, each size must
    also be at most ``n_rows``, so that a size no data file could match is named with its
    line rather than only making the sum wrong."""
    if n_rows is None:
        most, what = _MAX_ROWS, "a group size (an integer >= 1 and at most 2**63 - 1)"
    else:
        most = n_rows
        what = (
            f"a group size (an integer >= 1 and at most the number of rows of {data_path}, "
            f"{n_rows})"
        )
    return _read_one_per_line(
        path,
        functools.partial(_group_size, most=most),
        "group size",
        what,
        np.int64,
        max_total=_MAX_ROWS,
    )


def load_weight_file(path: PathLike) -> np.ndarray:
    """Read a LightGBM-style weight file: one weight per line, for the data's rows in order.

    Blank lines are skipped. Weights are decimal numbers as Python's ``float`` reads them,
    without digit-group underscores.

    Parameters
    ----------
    path : str or os.PathLike
        The file to read.

    Returns
    -------
    ndarray of float64
        The weights, finite and non-negative.

    Raises
    ------
    ValueError
        Naming the file and line, for a line that is not such a weight, and for a file with
        no weight.
    """
    return _read_one_per_line(
        path, _weight, "weight", "a weight (a finite number >= 0)", np.float64
    )


def dump_query_file(path: PathLike, sizes) -> None:
    """Write group sizes (integers >= 1), one per line, as :func:`load_query_file` reads them.

    The file is replaced only when complete, through a temporary file in its folder, as
    :func:`dump_svmlight` does.

    Parameters
    ----------
    path : str or os.PathLike
        The file to write.
    sizes : array-like of int
        The group sizes, in row order.
    """
    path = _file_name(path, "path")
    sizes = _check_sizes(sizes)
    _write_atomic(path, "".join(f"{size}\n" for size in sizes.tolist()).encode("ascii"))


def qid_from_groups(sizes) -> np.ndarray:
    """Return query ids ``0, ..., n_groups - 1``, each over its group's consecutive rows.

    Parameters
    ----------
    sizes : array-like of int
        The group sizes, integers >= 1, in row order.

    Returns
    -------
    ndarray of int64
        One query id per row.

    Examples
    --------
    >>> from bmrm.io import qid_from_groups
    >>> qid_from_groups([2, 3]).tolist()
    [0, 0, 1, 1, 1]
    """
    sizes = _check_sizes(sizes)
    return np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)


def groups_from_qid(qid) -> np.ndarray:
    """Return the sizes of the runs of equal consecutive query ids, in row order.

    The inverse of :func:`qid_from_groups` up to renaming the ids.

    Parameters
    ----------
    qid : array-like of shape (n_samples,)
        One query id per row.

    Returns
    -------
    ndarray of int64
        The size of each query's run of rows.

    Raises
    ------
    ValueError
        When a query's rows are not consecutive, since group sizes cannot describe that
        (sort the rows by ``qid``, stably, first), and for a NaN id, which is no query.

    Examples
    --------
    >>> from bmrm.io import groups_from_qid
    >>> groups_from_qid([7, 7, 3, 3, 3]).tolist()
    [2, 3]
    """
    qid = np.asarray(qid)
    if qid.ndim != 1:
        raise ValueError(f"qid must be 1-d; got shape {qid.shape}")
    if qid.dtype.kind in "fc" and np.isnan(qid).any():
        raise ValueError(f"qid must not contain NaN; got NaN at row {int(np.isnan(qid).argmax())}")
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

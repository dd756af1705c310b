"""Numba kernels that parse svmlight text from a byte buffer.

Lines end at a line feed (LF), a carriage return (CR) or both (CRLF, read as a line end
and an empty line, which holds no row); the caller counts a CRLF as one line end when it
numbers lines. One kernel, :func:`parse_lines`, walks whole lines of a ``uint8`` buffer.
Called with ``write=False`` it only measures (rows, stored values, smallest and largest
feature index, qid presence) and checks the structure of every line; called with
``write=True`` it also converts labels and values and stores them into arrays allocated to
the exact size from the first pass, either CSR (``indptr``, ``indices``, ``values``) or a
dense C-ordered ``X``.

Decimal numbers of at most 15 significant digits with a decimal exponent in [-22, 22] (what
data files hold) are converted exactly here: the digits form an integer m < 2⁵³ and
m·10^e or m/10^-e is one correctly rounded IEEE operation on exact operands (Clinger, "How to
read floating point numbers accurately", PLDI 1990, the fast path). Every other token (longer
mantissas, ``nan``, ``inf``, overflowing exponents, malformed text) is handed back to Python
in a list of (start, end, kind, slot) entries and converted there, so results equal a
correctly rounded ``float()`` of the token. When the list is full, the kernel stops at the
start of the current line and reports how far it got, so the caller can empty the list and
call again from there.

The writing pass never stores past the end of its arrays: numba checks no bounds, and a file
that grew after it was measured (one still being written) would otherwise have the kernel
overwrite the heap. A row beyond ``labels`` or a value beyond ``values`` stops it with
``CAPACITY``; the caller also checks that the pass ended on exactly the measured rows and
values, which catches a file that shrank.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# return codes
OK = 0
SLOW_FULL = 1
BAD_QID = 10
NO_COLON = 11
BAD_INDEX = 12
NEGATIVE_INDEX = 13
ZERO_INDEX = 14
INDEX_TOO_LARGE = 15
NOT_INCREASING = 16
QID_MIXED = 17
BEYOND_LIMIT = 18
CAPACITY = 19  # a write would go past the arrays: the text is not the one that was measured

# slots of the int64 ``state`` array (read and updated by the kernel)
POS = 0  # next byte to read
ROW = 1  # rows stored so far
NNZ = 2  # values stored so far
N_SLOW = 3  # entries in the slow list
MIN_INDEX = 4  # smallest feature index seen (as written)
MAX_INDEX = 5  # largest feature index seen (as written)
QID_STATE = 6  # -1 before the first row, then 1 if rows carry qid: else 0
ERR_LINE = 7  # start of the offending line
ERR_START = 8  # offending token
ERR_END = 9
ERR_A = 10  # numbers for the message
ERR_B = 11
N_STATE = 12

# kinds of slow entries
SLOW_LABEL = 0
SLOW_VALUE = 1

MAX_FEATURE_INDEX = 2**31 - 1
_POW10 = np.array([10.0**k for k in range(23)])


@njit(cache=True, inline="always")
def _is_space(c):
    # ASCII whitespace that ends no line, as bytes.split() takes it
    return c == 32 or c == 9 or c == 11 or c == 12


@njit(cache=True, inline="always")
def _is_line_end(c):
    # a line feed or a carriage return: CRLF is a line end followed by an empty line
    return c == 10 or c == 13


@njit(cache=True, inline="always")
def _token_end(buf, pos, end):
    while pos < end:
        c = buf[pos]
        if _is_line_end(c) or c == 35 or _is_space(c):
            break
        pos += 1
    return pos


@njit(cache=True)
def _fast_float(buf, s, e, pow10):
    """(value, True) for a plain decimal within the exact fast path, else (0.0, False)."""
    i = s
    negative = False
    if i < e and (buf[i] == 45 or buf[i] == 43):
        negative = buf[i] == 45
        i += 1
    mantissa = np.uint64(0)
    n_sig = 0
    n_digits = 0
    scale = 0
    while i < e and 48 <= buf[i] <= 57:
        if mantissa > 0 or buf[i] != 48:
            n_sig += 1
            if n_sig > 15:
                return 0.0, False
            mantissa = mantissa * np.uint64(10) + np.uint64(buf[i] - 48)
        n_digits += 1
        i += 1
    if i < e and buf[i] == 46:
        i += 1
        while i < e and 48 <= buf[i] <= 57:
            if mantissa > 0 or buf[i] != 48:
                n_sig += 1
                if n_sig > 15:
                    return 0.0, False
                mantissa = mantissa * np.uint64(10) + np.uint64(buf[i] - 48)
            scale -= 1
            n_digits += 1
            i += 1
    if n_digits == 0:
        return 0.0, False
    if i < e and (buf[i] == 101 or buf[i] == 69):
        i += 1
        exp_negative = False
        if i < e and (buf[i] == 45 or buf[i] == 43):
            exp_negative = buf[i] == 45
            i += 1
        if i == e:
            return 0.0, False
        exponent = 0
        while i < e and 48 <= buf[i] <= 57:
            exponent = exponent * 10 + (buf[i] - 48)
            if exponent > 10000:
                return 0.0, False
            i += 1
        scale += -exponent if exp_negative else exponent
    if i != e:
        return 0.0, False
    value = float(mantissa)
    if mantissa != 0:
        if 0 <= scale <= 22:
            value = value * pow10[scale]
        elif -22 <= scale < 0:
            value = value / pow10[-scale]
        else:
            return 0.0, False
    return (-value if negative else value), True


# inlined at its call sites: as a callee numba would compile it once per combination of
# literal and bool arguments that the sites pass (ten times, about a second from an empty cache)
@njit(cache=True, inline="always")
def _error(state, code, line_start, s, e, a, b):
    state[ERR_LINE] = line_start
    state[ERR_START] = s
    state[ERR_END] = e
    state[ERR_A] = a
    state[ERR_B] = b
    return code


@njit(cache=True)
def parse_lines(
    buf,
    end,
    state,
    write,
    dense,
    base,
    limit,
    labels,
    qids,
    indptr,
    indices,
    values,
    X,
    slow,
):
    """Parse the lines of ``buf[state[POS]:end]``; return a code (``OK``, ``SLOW_FULL``, error).

    ``buf[:end]`` must end at a line end or at the end of the file. ``base`` is subtracted
    from written indices; indices at or above ``limit`` (as written) are an error. With
    ``write``, row ``state[ROW]`` onwards goes to ``labels``, ``qids`` and either ``X`` (when
    ``dense``) or ``indptr``/``indices``/``values`` (``indptr[state[ROW]]`` already set).
    ``slow`` has shape (capacity, 4): start, end, kind, slot. A write beyond ``labels``
    (rows; ``qids``, ``indptr`` and a dense ``X`` are sized alike) or beyond ``values`` (CSR
    values and indices) is refused with ``CAPACITY``.
    """
    pos = state[POS]
    row = state[ROW]
    nnz = state[NNZ]
    n_slow = state[N_SLOW]
    capacity = slow.shape[0]
    pow10 = _POW10
    while pos < end:
        line_start = pos
        while pos < end and _is_space(buf[pos]):
            pos += 1
        if pos == end:
            break
        if _is_line_end(buf[pos]):
            pos += 1
            continue
        if buf[pos] == 35:
            while pos < end and not _is_line_end(buf[pos]):
                pos += 1
            pos += 1
            continue
        row_nnz = nnz
        row_slow = n_slow
        # label
        s = pos
        pos = _token_end(buf, pos, end)
        if write:
            if row >= labels.shape[0]:
                return _error(state, CAPACITY, line_start, s, pos, row, 0)
            value, ok = _fast_float(buf, s, pos, pow10)
            if ok:
                labels[row] = value
            else:
                if n_slow == capacity:
                    state[POS] = line_start
                    state[ROW] = row
                    state[NNZ] = row_nnz
                    state[N_SLOW] = row_slow
                    return SLOW_FULL
                slow[n_slow, 0] = s
                slow[n_slow, 1] = pos
                slow[n_slow, 2] = SLOW_LABEL
                slow[n_slow, 3] = row
                n_slow += 1
        has_qid = 0
        qid = 0
        previous = -1
        first = True
        while True:
            while pos < end and _is_space(buf[pos]):
                pos += 1
            if pos == end or _is_line_end(buf[pos]) or buf[pos] == 35:
                while pos < end and not _is_line_end(buf[pos]):
                    pos += 1
                pos += 1
                break
            s = pos
            pos = _token_end(buf, pos, end)
            e = pos
            starts_qid = e - s >= 3 and buf[s] == 113 and buf[s + 1] == 105 and buf[s + 2] == 100
            if first and starts_qid:
                first = False
                has_qid = 1
                i = s + 3
                if i == e or buf[i] != 58:
                    return _error(state, BAD_QID, line_start, s, e, 0, 0)
                i += 1
                negative = False
                if i < e and (buf[i] == 45 or buf[i] == 43):
                    negative = buf[i] == 45
                    i += 1
                if i == e or e - i > 19:
                    return _error(state, BAD_QID, line_start, s, e, 0, 0)
                magnitude = np.uint64(0)
                while i < e:
                    c = buf[i]
                    if c < 48 or c > 57:
                        return _error(state, BAD_QID, line_start, s, e, 0, 0)
                    magnitude = magnitude * np.uint64(10) + np.uint64(c - 48)
                    i += 1
                # 19 digits fit in uint64; int64 holds up to 2**63 - 1 (2**63 when negative)
                top = np.uint64(2**63) if negative else np.uint64(2**63 - 1)
                if magnitude > top:
                    return _error(state, BAD_QID, line_start, s, e, 0, 0)
                if negative:
                    qid = -np.int64(magnitude - np.uint64(1)) - 1
                else:
                    qid = np.int64(magnitude)
                continue
            first = False
            colon = s
            while colon < e and buf[colon] != 58:
                colon += 1
            if colon == e:
                return _error(state, NO_COLON, line_start, s, e, 0, 0)
            i = s
            negative = False
            if buf[i] == 45 or buf[i] == 43:
                negative = buf[i] == 45
                i += 1
            if i == colon:
                return _error(state, BAD_INDEX, line_start, s, e, starts_qid, 0)
            index = 0
            while i < colon:
                c = buf[i]
                if c < 48 or c > 57:
                    return _error(state, BAD_INDEX, line_start, s, e, starts_qid, 0)
                if index <= MAX_FEATURE_INDEX:
                    index = index * 10 + (c - 48)
                i += 1
            if negative and index > 0:
                return _error(state, NEGATIVE_INDEX, line_start, s, e, index, 0)
            if index > MAX_FEATURE_INDEX:
                return _error(state, INDEX_TOO_LARGE, line_start, s, e, index, 0)
            if index <= previous:
                return _error(state, NOT_INCREASING, line_start, s, e, index, previous)
            if index < base:
                return _error(state, ZERO_INDEX, line_start, s, e, index, 0)
            if index >= limit:
                return _error(state, BEYOND_LIMIT, line_start, s, e, index, 0)
            previous = index
            if index < state[MIN_INDEX]:
                state[MIN_INDEX] = index
            if index > state[MAX_INDEX]:
                state[MAX_INDEX] = index
            if write:
                value, ok = _fast_float(buf, colon + 1, e, pow10)
                if dense:
                    slot = row * X.shape[1] + (index - base)
                    if ok:
                        X[row, index - base] = value
                else:
                    if nnz >= values.shape[0]:
                        return _error(state, CAPACITY, line_start, s, e, nnz, 0)
                    slot = nnz
                    indices[nnz] = index - base
                    if ok:
                        values[nnz] = value
                if not ok:
                    if n_slow == capacity:
                        state[POS] = line_start
                        state[ROW] = row
                        state[NNZ] = row_nnz
                        state[N_SLOW] = row_slow
                        return SLOW_FULL
                    slow[n_slow, 0] = colon + 1
                    slow[n_slow, 1] = e
                    slow[n_slow, 2] = SLOW_VALUE
                    slow[n_slow, 3] = slot
                    n_slow += 1
            nnz += 1
        if state[QID_STATE] < 0:
            state[QID_STATE] = has_qid
        elif state[QID_STATE] != has_qid:
            return _error(state, QID_MIXED, line_start, line_start, line_start, has_qid, 0)
        if write:
            qids[row] = qid
            if not dense:
                indptr[row + 1] = nnz
        row += 1
    state[POS] = pos
    state[ROW] = row
    state[NNZ] = nnz
    state[N_SLOW] = n_slow
    return OK

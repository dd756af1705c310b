"""Tests of bmrm.io: svmlight / LETOR files, query files, LETOR folds.

References: the arrays a file was written from (round trips), scikit-learn's
``load_svmlight_file`` (parsing, blank and comment lines, the real files), ``str.partition``
on the raw text (comments), explicit loops (group sizes), and the fold table of the data
README written out literally below.
"""

import bz2
import contextlib
import gzip
import itertools
import lzma
import os
import re
import threading
import time
import zlib

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_svmlight_file

from bmrm.io import (
    _parse,
    dump_query_file,
    dump_svmlight,
    groups_from_qid,
    letor_fold_partitions,
    letor_folds,
    load_letor_fold,
    load_query_file,
    load_svmlight,
    load_weight_file,
    qid_from_groups,
    svmlight,
)

# The rotation table of the data README (and of LETOR 4.0's own readme), written out.
README_FOLDS = {
    1: (("S1", "S2", "S3"), "S4", "S5"),
    2: (("S2", "S3", "S4"), "S5", "S1"),
    3: (("S3", "S4", "S5"), "S1", "S2"),
    4: (("S4", "S5", "S1"), "S2", "S3"),
    5: (("S5", "S1", "S2"), "S3", "S4"),
}


def random_matrix(rng, n_rows, n_cols, density=0.5):
    """Dense float64 matrix with awkward values (wide exponents, 0.1 + 0.2, zero rows)."""
    X = rng.standard_normal((n_rows, n_cols)) * 10.0 ** rng.integers(-30, 30, (n_rows, n_cols))
    X[rng.random((n_rows, n_cols)) > density] = 0.0
    X.flat[0] = 0.1 + 0.2
    if n_rows > 2:
        X[1] = 0.0
    return X


def write(path, text):
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def sklearn_read(path, **kw):
    X, y, qid = load_svmlight_file(str(path), query_id=True, **kw)
    return sp.csr_matrix(X), y, qid


# ---------------------------------------------------------------------------------------------
# round trips
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("sparse_input", [False, True])
@pytest.mark.parametrize("int_labels", [False, True])
@pytest.mark.parametrize("zero_based", [False, True])
@pytest.mark.parametrize("with_qid", [False, True])
def test_round_trip(tmp_path, dtype, sparse_input, int_labels, zero_based, with_qid):
    # one fixed seed per combination (str hashes change with PYTHONHASHSEED, type hashes
    # with the process): CRC-32 of the parameters' text
    key = f"{np.dtype(dtype).name}-{sparse_input}-{int_labels}-{zero_based}"
    rng = np.random.default_rng(zlib.crc32(key.encode("ascii")))
    n, d = 30, 7
    X = random_matrix(rng, n, d).astype(dtype)
    X[:, -1] = 0.0  # a trailing empty column leaves no trace in the file
    y = rng.integers(-2, 5, n) if int_labels else rng.standard_normal(n) * 1e3
    qid = np.sort(rng.integers(-3, 1000, n)) if with_qid else None
    comments = [f"docid = d{i} # x#y" if i % 3 else "" for i in range(n)]
    path = tmp_path / "data.txt"
    dump_svmlight(
        path, sp.csr_matrix(X) if sparse_input else X, y, qid, comments, zero_based=zero_based
    )

    Xs, ys, qs, cs = load_svmlight(
        path, n_features=d, dtype=dtype, zero_based=zero_based, return_comments=True
    )
    expected = sp.csr_matrix(X)
    expected.eliminate_zeros()
    assert isinstance(Xs, sp.csr_matrix)
    assert Xs.dtype == dtype and Xs.shape == (n, d)
    np.testing.assert_array_equal(Xs.indptr, expected.indptr)
    np.testing.assert_array_equal(Xs.indices, expected.indices)
    np.testing.assert_array_equal(Xs.data, expected.data)
    assert ys.dtype == np.float64
    np.testing.assert_array_equal(ys, y)
    if with_qid:
        assert qs.dtype == np.int64
        np.testing.assert_array_equal(qs, qid)
    else:
        assert qs is None
    assert cs == comments

    Xd, yd, qd = load_svmlight(path, n_features=d, dtype=dtype, zero_based=zero_based, dense=True)
    assert isinstance(Xd, np.ndarray) and Xd.dtype == dtype
    np.testing.assert_array_equal(Xd, X)
    np.testing.assert_array_equal(yd, y)
    # the file holds the exact values: float32 data read as float64 are the widened floats
    X64, _, _ = load_svmlight(path, n_features=d, zero_based=zero_based, dense=True)
    np.testing.assert_array_equal(X64, X.astype(np.float64))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_property(tmp_path_factory, data):
    n = data.draw(st.integers(1, 8))
    d = data.draw(st.integers(1, 5))
    floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
    X = np.array(
        data.draw(
            st.lists(
                st.lists(floats | st.just(0.0), min_size=d, max_size=d), min_size=n, max_size=n
            )
        )
    )
    y = np.array(data.draw(st.lists(floats, min_size=n, max_size=n)))
    qid = np.array(
        data.draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=n, max_size=n)),
        dtype=np.int64,
    )
    text = st.text().filter(lambda s: "\n" not in s and "\r" not in s and s == s.strip())
    comments = data.draw(st.lists(text, min_size=n, max_size=n))
    zero_based = data.draw(st.booleans())
    path = tmp_path_factory.mktemp("prop") / "f.txt"
    dump_svmlight(path, X, y, qid, comments, zero_based=zero_based)
    Xs, ys, qs, cs = load_svmlight(
        path, n_features=d, zero_based=zero_based, dense=True, return_comments=True
    )
    np.testing.assert_array_equal(Xs, X)
    np.testing.assert_array_equal(ys, y)
    np.testing.assert_array_equal(qs, qid)
    assert cs == comments


@pytest.mark.parametrize("zero_based", [False, True])
def test_auto_detects_base_when_column_zero_is_used(tmp_path, zero_based):
    rng = np.random.default_rng(1)
    X = random_matrix(rng, 10, 4)
    X[0, 0] = 2.5
    path = tmp_path / "f.txt"
    dump_svmlight(path, X, np.arange(10), zero_based=zero_based)
    Xs, _, _ = load_svmlight(path, n_features=4, dense=True)
    np.testing.assert_array_equal(Xs, X)


@pytest.mark.parametrize(
    ("suffix", "opener"), [(".gz", gzip.open), (".bz2", bz2.open), (".xz", lzma.open)]
)
def test_compressed_round_trip(tmp_path, suffix, opener):
    rng = np.random.default_rng(2)
    X = random_matrix(rng, 12, 3)
    path = tmp_path / f"f.txt{suffix}"
    dump_svmlight(path, X, np.ones(12), np.repeat([4, 9], 6), ["a # b"] * 12)
    plain = tmp_path / "f.txt"
    dump_svmlight(plain, X, np.ones(12), np.repeat([4, 9], 6), ["a # b"] * 12)
    with opener(path, "rb") as f:  # the standard library's decompressor
        assert f.read() == plain.read_bytes()
    Xs, ys, qs, cs = load_svmlight(
        path, n_features=3, dense=True, zero_based=False, return_comments=True
    )
    np.testing.assert_array_equal(Xs, X)
    np.testing.assert_array_equal(qs, np.repeat([4, 9], 6))
    assert cs == ["a # b"] * 12


@pytest.mark.parametrize(
    ("suffix", "opener"), [(".GZ", gzip.open), (".Bz2", bz2.open), (".XZ", lzma.open)]
)
def test_compression_suffix_in_any_case(tmp_path, suffix, opener):
    X = random_matrix(np.random.default_rng(3), 6, 2)
    path = tmp_path / f"f.txt{suffix}"
    dump_svmlight(path, X, np.arange(6.0), np.repeat([1, 2], 3))
    with opener(path, "rb") as f:  # written compressed, as the lower-case name would be
        text = f.read().decode()
    assert text.startswith("0 qid:1 1:")
    Xs, ys, qs = load_svmlight(path, n_features=2, dense=True, zero_based=False)
    np.testing.assert_array_equal(Xs, X)
    np.testing.assert_array_equal(ys, np.arange(6.0))
    np.testing.assert_array_equal(qs, np.repeat([1, 2], 3))


def test_dump_writes_letor_layout(tmp_path):
    path = tmp_path / "f.txt"
    dump_svmlight(path, np.array([[0.5, 0.0, 2.0]]), np.array([2]), [7], ["docid = x"])
    assert path.read_text() == "2 qid:7 1:0.5 3:2.0 #docid = x\n"


def test_dump_writes_uint64_values_exactly(tmp_path):
    path = tmp_path / "f.txt"
    y = np.array([2**64 - 1, 2**63 + 5, 1], dtype=np.uint64)
    X = np.array([[2**64 - 1, 0], [0, 2**63], [3, 0]], dtype=np.uint64)
    qid = np.array([0, 2**63 - 1, 2**63 - 1], dtype=np.uint64)
    dump_svmlight(path, X, y, qid)
    assert path.read_text() == (
        "18446744073709551615 qid:0 1:18446744073709551615\n"
        "9223372036854775813 qid:9223372036854775807 2:9223372036854775808\n"
        "1 qid:9223372036854775807 1:3\n"
    )
    Xs, ys, qs = load_svmlight(path, dense=True)
    np.testing.assert_array_equal(ys, y.astype(np.float64))
    np.testing.assert_array_equal(Xs, X.astype(np.float64))
    np.testing.assert_array_equal(qs, qid.astype(np.int64))


def test_dump_refuses_qid_beyond_int64(tmp_path):
    path = write(tmp_path / "f.txt", "ORIGINAL\n")
    qid = np.array([1, 2**63 + 5, 2**64 - 1], dtype=np.uint64)
    with pytest.raises(
        ValueError,
        match=r"^qid must hold ids in the int64 range .* got 9223372036854775813 at row 1",
    ):
        dump_svmlight(path, np.ones((3, 2)), np.ones(3), qid)
    assert path.read_text() == "ORIGINAL\n"


def test_float16_csr_is_refused_naming_dtype(tmp_path):
    path = write(tmp_path / "f.txt", "1 1:0.5 2:3\n")
    with pytest.raises(ValueError) as info:
        load_svmlight(path, dtype=np.float16)
    assert str(info.value) == (
        "dtype float16 needs dense=True: scipy.sparse stores no float16, so a CSR X takes "
        "dtype float32, float64 or longdouble"
    )
    X, _, _ = load_svmlight(path, dtype=np.float16, dense=True)
    np.testing.assert_array_equal(X, np.array([[0.5, 3.0]], dtype=np.float16))


def test_dump_float16_features(tmp_path):
    X = np.array([[0.1, 0.0], [65504.0, -(2.0**-24)]], dtype=np.float16)
    path = tmp_path / "f.txt"
    dump_svmlight(path, X, np.array([1, 0]))
    # the float16 values widened exactly, each as its shortest float64 text
    assert path.read_text() == "1 1:0.0999755859375\n0 1:65504.0 2:-5.960464477539063e-08\n"
    Xs, _, _ = load_svmlight(path, dtype=np.float16, dense=True)
    assert Xs.dtype == np.float16
    np.testing.assert_array_equal(Xs, X)


def test_dump_sums_duplicate_entries_of_a_sparse_matrix(tmp_path):
    # scipy means the sum of duplicate (row, column) entries: X[0, 0] is 3, X[1, 2] is 0
    data = np.array([1.0, 2.0, 0.25, 0.5, -0.5, 4.0])
    indices = np.array([0, 0, 1, 2, 2, 0])
    indptr = np.array([0, 2, 5, 6])
    X = sp.csr_matrix((data, indices, indptr), shape=(3, 3))
    np.testing.assert_array_equal(X.toarray(), [[3.0, 0, 0], [0, 0.25, 0], [4.0, 0, 0]])
    path = tmp_path / "f.txt"
    dump_svmlight(path, X, [1, 0, 2])
    assert path.read_text() == "1 1:3.0\n0 2:0.25\n2 1:4.0\n"
    Xs, ys, _ = load_svmlight(path, n_features=3)
    np.testing.assert_array_equal(Xs.toarray(), X.toarray())
    np.testing.assert_array_equal(ys, [1, 0, 2])
    # the caller's matrix is left as it was, duplicates and all
    assert X.nnz == 6
    np.testing.assert_array_equal(X.data, data)
    np.testing.assert_array_equal(X.indices, indices)
    np.testing.assert_array_equal(X.indptr, indptr)


def test_dump_leaves_existing_file_when_a_comment_cannot_be_encoded(tmp_path):
    path = write(tmp_path / "old.svm", "PRECIOUS ORIGINAL\n")
    with pytest.raises(ValueError, match=r"^comments\[2\] must be text that UTF-8 can encode"):
        dump_svmlight(path, np.ones((3, 2)), [0, 1, 2], [1, 1, 1], ["a", "b", "c\ud800"])
    assert path.read_text() == "PRECIOUS ORIGINAL\n"
    assert os.listdir(tmp_path) == ["old.svm"]


@pytest.mark.parametrize("name", ["f.txt", "f.txt.gz", "f.txt.bz2", "f.txt.xz"])
def test_dump_replaces_the_file_only_when_complete(tmp_path, monkeypatch, name):
    path = write(tmp_path / name, "PRECIOUS ORIGINAL\n")
    path.chmod(0o640)

    def failing_replace(src, dst):
        assert os.path.dirname(src) == str(tmp_path)  # a temporary file beside the target
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="No space left on device"):
        dump_svmlight(path, np.ones((3, 2)), [0, 1, 2], [1, 1, 1])
    assert path.read_text() == "PRECIOUS ORIGINAL\n"
    assert os.listdir(tmp_path) == [name]  # no temporary file left behind
    monkeypatch.undo()
    dump_svmlight(path, np.ones((3, 2)), [0, 1, 2], [1, 1, 1])
    assert path.stat().st_mode & 0o777 == 0o640  # the replaced file's permissions
    _, ys, qs = load_svmlight(path)
    np.testing.assert_array_equal(ys, [0, 1, 2])
    np.testing.assert_array_equal(qs, [1, 1, 1])


def test_dump_query_file_replaces_the_file_only_when_complete(tmp_path, monkeypatch):
    path = write(tmp_path / "f.query", "7\n")

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="No space left on device"):
        dump_query_file(path, [3, 1, 4])
    assert path.read_text() == "7\n"
    assert os.listdir(tmp_path) == ["f.query"]
    monkeypatch.undo()
    with pytest.raises(ValueError, match="sizes"):
        dump_query_file(path, [3, 0])
    assert path.read_text() == "7\n"
    dump_query_file(path, [3, 1, 4])
    assert path.read_text() == "3\n1\n4\n"


# ---------------------------------------------------------------------------------------------
# comments, blank lines, qid-less files
# ---------------------------------------------------------------------------------------------

MESSY = (
    "# header written by some tool\n"
    "#\n"
    "\n"
    "2 qid:10 1:0.5 3:1.5 #docid = GX1 # with # hashes\n"
    "   \t \n"
    "   # an indented comment line\n"
    "0 qid:10 2:-1e-3\r\n"
    "1 qid:11\n"
    "1 qid:11 1:1 2:2 3:3 #\n"
    "0 qid:12 3:7#tight\n"
    "# trailing comment"
)


def test_blank_and_comment_lines_match_sklearn(tmp_path):
    path = write(tmp_path / "messy.txt", MESSY)
    X, y, qid, comments = load_svmlight(path, return_comments=True)
    Xr, yr, qr = sklearn_read(path)
    assert X.shape == Xr.shape == (5, 3)
    np.testing.assert_array_equal(X.toarray(), Xr.toarray())
    np.testing.assert_array_equal(y, yr)
    np.testing.assert_array_equal(qid, qr)
    # independent reading of the comments: text after the first '#' of each data line
    expected = []
    for line in MESSY.split("\n"):
        data, hash_sign, rest = line.partition("#")
        if data.strip():
            expected.append(rest.strip() if hash_sign else "")
    assert comments == expected
    assert comments[0] == "docid = GX1 # with # hashes"


def test_file_without_qid(tmp_path):
    path = write(tmp_path / "plain.txt", "1 1:2\n0 2:3\n")
    X, y, qid = load_svmlight(path, dense=True)
    assert qid is None
    np.testing.assert_array_equal(X, [[2, 0], [0, 3]])
    np.testing.assert_array_equal(y, [1, 0])


def test_file_without_values_matches_sklearn(tmp_path):
    path = write(tmp_path / "labels.txt", "1 qid:1\n0 qid:3 # no feature\n")
    X, y, qid = load_svmlight(path)
    Xr, yr, qr = sklearn_read(path)
    assert X.shape == Xr.shape == (2, 1) and X.nnz == 0
    np.testing.assert_array_equal(y, yr)
    np.testing.assert_array_equal(qid, qr)


def test_n_features_pads_columns(tmp_path):
    path = write(tmp_path / "f.txt", "1 1:2\n0 2:3\n")
    X, _, _ = load_svmlight(path, n_features=5)
    assert X.shape == (2, 5)
    np.testing.assert_array_equal(X.toarray()[:, :2], [[2, 0], [0, 3]])


# ---------------------------------------------------------------------------------------------
# the compiled parser against scikit-learn's reader on random text
# ---------------------------------------------------------------------------------------------


def random_number_text(rng, value):
    """One way of writing ``value`` among those found in data files (and some awkward ones)."""
    style = rng.integers(9)
    if style == 0:
        return f"{value:.5g}"
    if style == 1:
        return repr(float(value))  # up to 17 significant digits: the Python fallback
    if style == 2:
        return f"{value:.3e}".replace("e", "E")
    if style == 3:
        return f"{value:+.8f}"  # explicit sign
    if style == 4:
        return f"{int(value * 100)}"
    if style == 5:
        text = f"{abs(value):.4f}".lstrip("0")  # ".1234"
        return ("-" if value < 0 else "") + text
    if style == 6:
        return f"{value:.0f}."  # "12."
    if style == 7:
        return f"{value * 1e-30:.6g}"  # exponent beyond the exact fast path
    return f"{value:.20f}"  # more than 15 significant digits


def random_svmlight_text(rng, one_based, with_qid):
    lines = []
    qid = int(rng.integers(-5, 5))
    for _ in range(int(rng.integers(1, 40))):
        kind = rng.random()
        if kind < 0.08:
            lines.append(rng.choice(["", "   ", "# comment 1:2", "\t# x"]))
            continue
        label = random_number_text(rng, rng.integers(0, 5) + rng.random() * (rng.random() < 0.3))
        tokens = [label]
        if with_qid:
            qid += int(rng.integers(0, 2))
            tokens.append(f"qid:{qid}")
        n_cols = int(rng.integers(0, 12))
        columns = np.sort(rng.choice(12, size=n_cols, replace=False)) + int(one_based)
        for column in columns:
            tokens.append(f"{column}:{random_number_text(rng, rng.standard_normal() * 50)}")
        separator = rng.choice([" ", "\t", "  ", " \t "])
        line = separator.join(tokens)
        if rng.random() < 0.2:
            line += rng.choice([" #docid = 7", "#x # y", " # 3:4"])
        if rng.random() < 0.1:
            line += "\r"
        lines.append(line)
    return "\n".join(lines) + ("\n" if rng.random() < 0.7 else "")


@pytest.mark.parametrize("seed", range(40))
def test_parser_matches_sklearn_on_random_files(tmp_path, seed, monkeypatch):
    rng = np.random.default_rng(seed)
    one_based = bool(rng.integers(2))
    with_qid = bool(rng.integers(2))
    text = random_svmlight_text(rng, one_based, with_qid)
    if seed % 3 == 0:
        # tiny chunks and a tiny list of tokens left to Python: every resume path runs
        monkeypatch.setattr("bmrm.io.svmlight._CHUNK_BYTES", int(rng.integers(1, 64)))
        monkeypatch.setattr("bmrm.io.svmlight._SLOW_CAPACITY", 1)
    path = write(tmp_path / "r.txt", text)
    try:
        sklearn_read(path)
    except ValueError:
        pytest.skip("no data row")  # a file of blank and comment lines only
    for zero_based in ("auto", not one_based):
        for dtype in (np.float64, np.float32):
            Xr, yr, qr = sklearn_read(path, zero_based=zero_based, dtype=dtype)
            for dense in (False, True):
                X, y, qid = load_svmlight(path, zero_based=zero_based, dtype=dtype, dense=dense)
                assert X.dtype == dtype and X.shape == Xr.shape
                if dense:
                    np.testing.assert_array_equal(X, Xr.toarray())
                else:
                    assert isinstance(X, sp.csr_matrix)
                    np.testing.assert_array_equal(X.indptr, Xr.indptr)
                    np.testing.assert_array_equal(X.indices, Xr.indices)
                    np.testing.assert_array_equal(X.data, Xr.data)
                np.testing.assert_array_equal(y, yr)
                if with_qid:
                    np.testing.assert_array_equal(qid, qr)
                else:
                    assert qid is None


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ("1 qid:1 1:nan", "feature value in '1:nan' is not a finite number"),
        ("1 qid:1 1:2 2:inf", "feature value in '2:inf' is not a finite number"),
        ("1 qid:1 1:-Infinity", "feature value in '1:-Infinity' is not a finite number"),
        ("1 qid:1 1:1e999", "feature value in '1:1e999' is not a finite number"),
        ("1 qid:1 1:1_0", "feature value in '1:1_0' is not a number"),
        ("1e999 qid:1 1:1", "label '1e999' is not a finite number"),
    ],
)
@pytest.mark.parametrize("dense", [False, True])
def test_non_finite_values_are_located(tmp_path, bad, fragment, dense):
    lines = GOOD + GOOD[2:] * 3 + [bad] + GOOD[2:]
    path = write(tmp_path / "f.txt", "\n".join(lines) + "\n")
    with pytest.raises(ValueError) as info:
        load_svmlight(path, dense=dense)
    assert str(info.value) == f"{path}, line 11: {fragment}"


def test_float32_overflow_is_located(tmp_path):
    path = write(tmp_path / "f.txt", "1 1:2\n1 1:1e39\n")
    assert load_svmlight(path)[0][1, 0] == 1e39
    with pytest.raises(ValueError, match=r"line 2: feature value in '1:1e39' overflows float32"):
        load_svmlight(path, dtype=np.float32)


def test_errors_are_located_across_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr("bmrm.io.svmlight._CHUNK_BYTES", 10)
    lines = GOOD + GOOD[2:] * 20
    for lineno, bad in ((30, "1 qid:1 2:1 1:1"), (37, "1 qid:1 2:nan")):
        text = lines[: lineno - 1] + [bad] + lines[lineno - 1 :]
        path = write(tmp_path / "f.txt", "\n".join(text))
        with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}, line {lineno}: "):
            load_svmlight(path)


# ---------------------------------------------------------------------------------------------
# files that can be read only once (pipes), and files that change while they are read
# ---------------------------------------------------------------------------------------------


# pipes, FIFOs and /dev/fd, and the open files of this process under /proc
needs_proc = pytest.mark.skipif(
    not os.path.isdir("/proc/self/fd"), reason="needs Linux's /proc/self/fd"
)


def _opened_here(path):
    """How many file descriptors of this process refer to ``path``."""
    target = os.stat(path)
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            st = os.stat(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile (the listing's own descriptor)
        count += (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino)
    return count


@contextlib.contextmanager
def fifo_serving(path, contents):
    """A FIFO at ``path`` whose writer serves ``contents[0]`` to the first opening for
    reading, ``contents[1]`` to the second, ..., and nothing (an empty file) to any later
    one: what a reader that opens the file several times gets from a pipe, or, with growing
    contents, from a file still being written. (The reader is in this process: the writer
    waits until it has closed the FIFO before it opens it again, else the reader would see
    the next contents as more of the same file.)"""
    os.mkfifo(path)
    stop = threading.Event()

    def wait_until(condition):
        deadline = time.monotonic() + 60
        while not (condition() or stop.is_set() or time.monotonic() > deadline):
            time.sleep(0.002)

    def serve():
        for i in itertools.count():
            with open(path, "wb") as f:  # waits for a reader
                if stop.is_set():
                    return
                # the reader's descriptor (beside this one) exists once its open returns
                wait_until(lambda: _opened_here(path) >= 2)
                with contextlib.suppress(BrokenPipeError):
                    f.write(contents[i] if i < len(contents) else b"")
            wait_until(lambda: _opened_here(path) == 0)  # it read to the end and closed

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        stop.set()
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # lets the waiting writer through
        try:
            thread.join(timeout=30)
        finally:
            os.close(fd)
        assert not thread.is_alive()


@contextlib.contextmanager
def pipe_serving(data):
    """``/dev/fd/N`` of an anonymous pipe fed ``data`` once, as ``<(cat file)`` in bash."""
    read_end, write_end = os.pipe()

    def serve():
        with open(write_end, "wb") as f, contextlib.suppress(BrokenPipeError):
            f.write(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"/dev/fd/{read_end}"
    finally:
        os.close(read_end)
        thread.join(timeout=30)
        assert not thread.is_alive()


def assert_same_read(got, expected):
    """Two results of load_svmlight, equal bit for bit (arrays, dtypes, comments)."""
    assert len(got) == len(expected)
    X, Xr = got[0], expected[0]
    assert type(X) is type(Xr) and X.shape == Xr.shape and X.dtype == Xr.dtype
    parts = (X.indptr, X.indices, X.data) if sp.issparse(X) else (X,)
    expected_parts = (Xr.indptr, Xr.indices, Xr.data) if sp.issparse(Xr) else (Xr,)
    pairs = zip((*parts, got[1], got[2]), (*expected_parts, expected[1], expected[2]), strict=True)
    for a, b in pairs:
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    assert got[3:] == expected[3:]


def pipe_test_text():
    """About 20 kB of awkward rows (every number notation, comments, blank lines), all with
    qid:, one-based."""
    rng = np.random.default_rng(11)
    return "\n".join(random_svmlight_text(rng, True, True) for _ in range(12)) + "\n"


@needs_proc
@pytest.mark.parametrize("how", ["pipe", "fifo", "fifo.gz"])
@pytest.mark.parametrize("dense", [False, True])
def test_pipe_reads_as_the_regular_file(tmp_path, monkeypatch, how, dense):
    """A pipe, FIFO or process substitution is empty when opened a second time; the reader
    reads it once and gives the regular file's result bit for bit (before, the storing pass
    saw nothing and returned uninitialised labels and qids)."""
    # small chunks and a small list of tokens left to Python: every resume path runs
    monkeypatch.setattr("bmrm.io.svmlight._CHUNK_BYTES", 1000)
    monkeypatch.setattr("bmrm.io.svmlight._SLOW_CAPACITY", 3)
    text = pipe_test_text().encode()
    regular = write(tmp_path / "regular.txt", text)
    kwargs = {"dense": dense, "return_comments": True, "dtype": np.float32 if dense else float}
    expected = load_svmlight(regular, **kwargs)
    assert expected[0].shape[0] > 100 and expected[2] is not None
    if how == "pipe":
        served = pipe_serving(text)
    elif how == "fifo":
        served = fifo_serving(tmp_path / "fifo.txt", [text])
    else:
        served = fifo_serving(tmp_path / "fifo.txt.gz", [gzip.compress(text)])
    with served as path:
        got = load_svmlight(path, **kwargs)
    assert_same_read(got, expected)


@needs_proc
def test_pipe_error_names_the_line(tmp_path):
    """Errors found in a pipe's text name its line, as for a regular file (the message for
    a line without qid: looks up the first row in the copy read)."""
    text = b"# c\n1 qid:1 1:1\n\n2 qid:1 2:1\n0 3:1\n"
    with fifo_serving(tmp_path / "fifo.txt", [text]) as path:
        with pytest.raises(ValueError) as info:
            load_svmlight(path)
    assert str(info.value) == f"{path}, line 5: this line has no qid: but line 2 has one"


@needs_proc
def test_fifo_that_serves_more_rows_when_opened_again(tmp_path):
    """The audit's reproducer: a FIFO serving 2 rows, then 5,000 when opened again. A reader
    that measured the first and stored the second wrote past its arrays (a segmentation
    fault); read once, it is the 2-row file."""
    rows = "".join(f"{i % 3} qid:{i // 10} 1:{i}.5 3:-{i}\n" for i in range(5000)).encode()
    small = b"".join(rows.splitlines(keepends=True)[:2])
    expected = load_svmlight(write(tmp_path / "small.txt", small), return_comments=True)
    with fifo_serving(tmp_path / "fifo.txt", [small, rows]) as path:
        got = load_svmlight(path, return_comments=True)
    assert_same_read(got, expected)
    assert got[0].shape == (2, 3)


# (text measured by the first pass, text stored by the second): each changes what the first
# pass counted (rows, values, index range, qid: use) or, in the last case, only the values
CHANGES = {
    "more rows": (b"1 qid:1 1:1 2:2\n", b"1 qid:1 1:1 2:2\n" * 50),
    "more values": (b"1 qid:1 1:1 3:2\n" * 3, b"1 qid:1 1:1 2:1 3:2\n" * 3),
    "fewer rows": (b"1 qid:1 1:1 2:2\n" * 50, b"1 qid:1 1:1 2:2\n"),
    "fewer values": (b"1 qid:1 1:1 2:1 3:2\n" * 3, b"1 qid:1 1:1 3:2\n" * 3),
    "larger index": (b"1 qid:1 1:1 2:2\n", b"1 qid:1 1:1 9:2\n"),
    "index 0": (b"1 qid:1 1:1 2:2\n", b"1 qid:1 0:1 2:2\n"),
    "qid: dropped": (b"1 qid:1 1:1\n" * 2, b"1 1:1\n" * 2),
}


@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.parametrize("dense", [False, True])
def test_file_that_changes_between_the_passes(tmp_path, monkeypatch, change, dense):
    """The storing pass must see the text the counting pass measured. Here it sees another
    (the chunk reader is replaced, so that no check of the file itself intervenes): it
    stores nothing beyond the counted rows and values and the read is refused with the file
    named, not a result of mixed versions or a write past the arrays."""
    first, then = CHANGES[change]
    texts = iter([first, then, then])

    def chunks(source):
        text = next(texts)
        yield text, len(text), 0

    monkeypatch.setattr("bmrm.io.svmlight._chunks", chunks)
    path = write(tmp_path / "f.txt", first)
    message = rf"^{re.escape(str(path))}: the file changed while it was being read"
    with pytest.raises(ValueError, match=message):
        load_svmlight(path, dense=dense)


@pytest.mark.parametrize("when", ["between the passes", "during the first pass"])
def test_regular_file_replaced_or_appended_while_read(tmp_path, monkeypatch, when):
    """A regular file is opened by each pass: one replaced between them by a file with the
    same rows and values but other numbers (counts alike, so only the file's identity tells)
    or appended to during a pass is refused, not read as a mixture of versions."""
    path = write(tmp_path / "f.txt", b"1 qid:1 1:1 2:2\n0 qid:1 1:3\n")
    real_chunks = svmlight._chunks
    passes = []

    def chunks(source):
        passes.append(source)
        for i, item in enumerate(real_chunks(source)):
            if when == "during the first pass" and len(passes) == 1 and i == 0:
                with open(path, "ab") as f:
                    f.write(b"2 qid:1 1:5\n")
            yield item
        if when == "between the passes" and len(passes) == 1:
            write(tmp_path / "new.txt", b"2 qid:1 1:7 2:8\n1 qid:1 1:9\n")
            os.replace(tmp_path / "new.txt", path)

    monkeypatch.setattr("bmrm.io.svmlight._CHUNK_BYTES", 8)
    monkeypatch.setattr("bmrm.io.svmlight._chunks", chunks)
    message = rf"^{re.escape(str(path))}: the file changed while it was being read"
    with pytest.raises(ValueError, match=message):
        load_svmlight(path)
    # unchanged, the same file reads as usual
    monkeypatch.setattr("bmrm.io.svmlight._chunks", real_chunks)
    _, y, _ = load_svmlight(path)
    assert y.size > 0


def _parser_arrays(text, rows, values, dense, guard=3):
    """The parser's arguments for a storing pass into arrays of ``rows`` rows and ``values``
    values, each a view at the start of a larger array whose remaining ``guard`` entries
    hold -7: the kernel must leave those alone. Returns (arguments, the larger arrays)."""
    n_cols = 3
    labels = np.full(rows + guard, -7.0)
    qids = np.full(rows + guard, -7, dtype=np.int64)
    empty_i = np.zeros(0, dtype=np.int32)
    if dense:
        X = np.full((rows + guard, n_cols), -7.0)
        X[:rows] = 0.0
        indptr, indices, data = empty_i, empty_i, np.zeros(0)
        store = (indptr, indices, data, X[:rows])
        big = [labels, qids, X]
    else:
        indptr = np.full(rows + 1 + guard, -7, dtype=np.int32)
        indptr[0] = 0
        indices = np.full(values + guard, -7, dtype=np.int32)
        data = np.full(values + guard, -7.0)
        store = (indptr[: rows + 1], indices[:values], data[:values], np.zeros((0, 0)))
        big = [labels, qids, indptr, indices, data]
    state = np.zeros(_parse.N_STATE, dtype=np.int64)
    state[_parse.MIN_INDEX] = _parse.MAX_FEATURE_INDEX + 1
    state[_parse.MAX_INDEX] = -1
    state[_parse.QID_STATE] = -1
    buf = np.frombuffer(text, dtype=np.uint8)
    args = (buf, len(text), state, True, dense, 1, n_cols + 1, labels[:rows], qids[:rows])
    args += (*store, np.zeros((svmlight._SLOW_CAPACITY, 4), dtype=np.int64))
    return args, big


@pytest.mark.parametrize(
    ("rows", "values", "dense"),
    [(2, 6, False), (3, 5, False), (2, 6, True)],  # too few rows, too few values
)
def test_parser_stores_nothing_beyond_its_arrays(rows, values, dense):
    """The compiled parser checks no bounds of its own: given more text than its arrays
    were measured for, it stops with CAPACITY instead of writing past them."""
    text = b"1 qid:4 1:1 2:2\n2 qid:4 1:3 3:4\n3 qid:5 2:5 3:6\n"  # 3 rows, 6 values
    args, big = _parser_arrays(text, rows, values, dense)
    before = [array.copy() for array in big]
    assert _parse.parse_lines(*args) == _parse.CAPACITY
    for array, old in zip(big, before, strict=True):
        tail = array[len(array) - 3 :]
        np.testing.assert_array_equal(tail, old[len(old) - 3 :])  # the guard is untouched
        assert np.all(tail == -7)
    # with room for all of it, the same call stores the three rows
    args, big = _parser_arrays(text, 3, 6, dense)
    assert _parse.parse_lines(*args) == _parse.OK
    np.testing.assert_array_equal(big[0][:3], [1, 2, 3])
    np.testing.assert_array_equal(big[1][:3], [4, 4, 5])


# ---------------------------------------------------------------------------------------------
# malformed files: message names the file and the line
# ---------------------------------------------------------------------------------------------

GOOD = ["# a comment line", "", "1 qid:1 1:0.5 2:1", "0 qid:1 2:3 #c"]  # lines 1..4


@pytest.mark.parametrize(
    ("bad", "zero_based", "fragment"),
    [
        ("abc qid:1 1:2", "auto", "label 'abc' is not a number"),
        ("nan qid:1 1:2", "auto", "not a finite number"),
        ("inf qid:1 1:2", False, "not a finite number"),
        ("1 qid:1 3", "auto", "expected index:value; got '3'"),
        ("1 qid:1 a:2", "auto", "feature index in 'a:2' is not an integer"),
        ("1 qid:1 1.5:2", "auto", "not an integer"),
        ("1 qid:1 3:x", "auto", "feature value in '3:x' is not a number"),
        ("1 qid:1 3:", "auto", "feature value in '3:' is not a number"),
        ("1 qid:1 :3", "auto", "feature index in ':3' is not an integer"),
        ("1 qid:1 1:1 3:1 2:1", "auto", "strictly increasing; got 2 after 3"),
        ("1 qid:1 2:1 2:1", False, "strictly increasing; got 2 after 2"),
        ("1 qid:1 0:1 2:1", False, "feature index 0 in a one-based file"),
        ("1 qid:1 -1:1", "auto", "feature index -1 is negative"),
        ("1 qid:1 99999999999:1", "auto", "larger than"),
        ("1 qid:abc 1:2", "auto", "bad query id 'qid:abc'"),
        ("1 qid:1.5 1:2", "auto", "bad query id"),
        ("1 qid 1:2", "auto", "bad query id 'qid'"),
        ("1 qid:99999999999999999999 1:2", "auto", "bad query id"),
        ("1 1:2 qid:3", "auto", "qid: must come right after the label"),
        ("1 1:2", "auto", "this line has no qid: but line 3 has one"),
    ],
)
@pytest.mark.parametrize("position", ["middle", "first"])
def test_malformed_line_is_located(tmp_path, bad, zero_based, fragment, position):
    lines = GOOD + [bad] + GOOD[2:] if position == "middle" else [bad]
    if position == "first" and "line 3 has one" in fragment:
        lines = ["1 1:2", "1 qid:4 1:2"]
        fragment, lineno = "this line has a qid: but line 1 has none", 2
    else:
        lineno = lines.index(bad) + 1
    path = write(tmp_path / "bad file.txt", "\n".join(lines) + "\n")
    with pytest.raises(ValueError) as info:
        load_svmlight(path, zero_based=zero_based)
    message = str(info.value)
    assert message.startswith(f"{path}, line {lineno}: "), message
    assert fragment in message


def test_malformed_line_in_crlf_and_gzip_files(tmp_path):
    text = "\r\n".join(GOOD + ["1 qid:1 2:1 1:1"]) + "\r\n"
    path = write(tmp_path / "f.txt", text)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}, line 5: .*increasing"):
        load_svmlight(path)
    gz = tmp_path / "f.txt.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    with pytest.raises(ValueError, match=rf"^{re.escape(str(gz))}, line 5: .*increasing"):
        load_svmlight(gz)


@pytest.mark.parametrize("suffix", [".txt", ".txt.gz"])
def test_byte_order_mark_is_named(tmp_path, suffix):
    text = ("\ufeff" + "\n".join(GOOD) + "\n").encode()
    path = tmp_path / f"bom{suffix}"
    path.write_bytes(gzip.compress(text) if suffix.endswith(".gz") else text)
    with pytest.raises(ValueError) as info:
        load_svmlight(path)
    assert str(info.value) == (
        f"{path}, line 1: the file begins with a UTF-8 byte-order mark, which svmlight files "
        "may not hold; save it without one"
    )


def test_carriage_return_line_ends_with_comments_keep_every_row(tmp_path):
    # the reproduction: twenty LETOR-style lines (with comments) ended by a CR alone
    path = tmp_path / "cr.txt"
    with open(path, "w", newline="") as f:
        f.write("".join(f"{i % 3} qid:1 1:{i} # d{i}\r" for i in range(20)))
    X, y, qid, comments = load_svmlight(path, return_comments=True)
    assert X.shape == (20, 1)
    np.testing.assert_array_equal(X.toarray()[:, 0], np.arange(20))
    np.testing.assert_array_equal(y, np.arange(20) % 3)
    np.testing.assert_array_equal(qid, np.ones(20))
    assert comments == [f"d{i}" for i in range(20)]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("comments", [True, False])
def test_mixed_line_ends_read_as_the_same_text_with_line_feeds(
    tmp_path, monkeypatch, seed, comments
):
    """Lines ended by LF, CR and CRLF at random (blank and comment lines included) read as
    the same lines ended by LF, parsed by scikit-learn's reader; tiny chunks put a CR (and
    the CR of a CRLF) at a chunk's end."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(int(rng.integers(3, 30))):
        if i and rng.random() < 0.1:
            lines.append(str(rng.choice(["", "  ", "# only a comment 1:2"])))
            continue
        columns = np.sort(rng.choice(8, size=int(rng.integers(1, 5)), replace=False)) + 1
        line = " ".join(
            [str(int(rng.integers(0, 4))), f"qid:{i // 4}"]
            + [f"{c}:{rng.standard_normal():.6g}" for c in columns]
        )
        if comments and rng.random() < 0.7:
            line += f" # docid = {i}"
        lines.append(line)
    ends = rng.choice(["\n", "\r", "\r\n"], size=len(lines))
    reference = write(tmp_path / "lf.txt", "".join(line + "\n" for line in lines))
    path = write(tmp_path / "mixed.txt", "".join(map(str.__add__, lines, ends)).encode())
    X_ref, y_ref, qid_ref = load_svmlight_file(str(reference), query_id=True, zero_based=False)
    if seed % 2:
        monkeypatch.setattr("bmrm.io.svmlight._CHUNK_BYTES", int(rng.integers(1, 16)))
    X, y, qid, got_comments = load_svmlight(
        path, n_features=X_ref.shape[1], zero_based=False, return_comments=True
    )
    np.testing.assert_array_equal(X.toarray(), X_ref.toarray())
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(qid, qid_ref)
    _, _, _, ref_comments = load_svmlight(
        reference, n_features=X_ref.shape[1], zero_based=False, return_comments=True
    )
    assert got_comments == ref_comments


@pytest.mark.parametrize("chunk", [None, 3])
@pytest.mark.parametrize("comment", ["", " # d"])
def test_errors_after_mixed_line_ends_name_the_line(tmp_path, monkeypatch, chunk, comment):
    # line 1 CR, line 2 CRLF, line 3 LF, line 4 CR: line 5 is the bad one, with and
    # without comments on the lines before
    text = "".join(
        [f"1 qid:1 1:1{comment}\r", f"0 qid:1 1:2{comment}\r\n", f"2 qid:1 1:3{comment}\n"]
        + ["\r", "1 qid:1 1:x\r"]
    )
    path = write(tmp_path / "f.txt", text.encode())
    if chunk:
        monkeypatch.setattr("bmrm.io.svmlight._CHUNK_BYTES", chunk)
    with pytest.raises(ValueError) as info:
        load_svmlight(path)
    assert str(info.value) == f"{path}, line 5: feature value in '1:x' is not a number"
    with pytest.raises(ValueError) as info:
        load_svmlight(write(tmp_path / "g.txt", text.replace("1:x", "2:1 1:1").encode()))
    assert str(info.value) == (
        f"{tmp_path / 'g.txt'}, line 5: feature indices must be strictly increasing; got 1 after 2"
    )


@pytest.mark.parametrize("end", ["\n", "\r\n"])
def test_no_encoding_hint_on_an_ordinary_error(tmp_path, end):
    # a byte-order mark elsewhere than at the start, CRLF ends: the plain message
    lines = GOOD + ["2 qid:3 1:x"]
    path = write(tmp_path / "f.txt", end.join(lines) + end)
    with pytest.raises(ValueError) as info:
        load_svmlight(path)
    message = str(info.value)
    assert message == f"{path}, line {len(lines)}: feature value in '1:x' is not a number"


@pytest.mark.parametrize("text", ["", "\n\n", "# only\n#comments\n  \n"])
def test_empty_file(tmp_path, text):
    path = write(tmp_path / "empty.txt", text)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: no data row"):
        load_svmlight(path)


def test_index_beyond_n_features_is_located(tmp_path):
    path = write(tmp_path / "f.txt", "\n".join(GOOD + ["1 qid:2 1:1 9:1"] + GOOD[2:]))
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}, line 5: .*n_features=4"):
        load_svmlight(path, n_features=4, zero_based=False)
    X, _, _ = load_svmlight(path, n_features=9, zero_based=False)
    assert X.shape == (5, 9)


def test_comment_not_utf8(tmp_path):
    path = write(tmp_path / "f.txt", b"1 1:2\n1 1:2 #caf\xe9\n")
    assert load_svmlight(path)[0].shape == (2, 1)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}, line 2: .*UTF-8"):
        load_svmlight(path, return_comments=True)


def _truncated(data):
    return data[: len(data) // 2]


def _flipped(data):
    data = bytearray(data)
    data[len(data) // 2] ^= 0xFF
    return bytes(data)


@pytest.mark.parametrize(
    ("suffix", "kind", "compress", "spoil", "reason"),
    [
        (".gz", "gzip", gzip.compress, _truncated, "Compressed file ended before"),
        (".gz", "gzip", gzip.compress, lambda data: b"no gzip data", "Not a gzipped file"),
        (".gz", "gzip", gzip.compress, _flipped, ""),
        (".bz2", "bzip2", bz2.compress, _truncated, "Compressed file ended before"),
        (".bz2", "bzip2", bz2.compress, lambda data: b"no bzip2 data", "Invalid data stream"),
        (".xz", "xz", lzma.compress, _truncated, "Compressed file ended before"),
        (".xz", "xz", lzma.compress, lambda data: b"no xz data", "Input format not supported"),
        (".xz", "xz", lzma.compress, _flipped, "Corrupt input data"),
    ],
)
def test_truncated_or_corrupted_compressed_file(tmp_path, suffix, kind, compress, spoil, reason):
    rng = np.random.default_rng(4)
    text = "".join(
        f"{i % 3} qid:{i // 10} 1:{v:.6f}\n" for i, v in enumerate(rng.normal(size=5000))
    )
    path = tmp_path / f"t.svm{suffix}"
    path.write_bytes(compress(text.encode()))
    assert load_svmlight(path)[0].shape == (5000, 1)
    path.write_bytes(spoil(compress(text.encode())))
    prefix = re.escape(f"{path}: truncated or corrupted {kind} file (")
    with pytest.raises(ValueError, match=f"^{prefix}{re.escape(reason)}"):
        load_svmlight(path)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_svmlight(tmp_path / "nope.txt")


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"dtype": np.int64}, "dtype must be a floating dtype"),
        ({"dtype": "x"}, "^dtype must be a floating dtype; got 'x'$"),
        ({"query_file": 3}, r"^query_file must be a file name .*'auto' or None; got 3$"),
        ({"zero_based": "yes"}, "zero_based must be"),
        ({"zero_based": 1}, r"^zero_based must be True, False or 'auto'; got 1$"),
        ({"dense": "no"}, r"^dense must be True or False; got 'no'$"),
        ({"dense": 0}, r"^dense must be True or False; got 0$"),
        ({"n_features": 0}, "n_features must be an integer >= 1"),
    ],
)
def test_load_arguments(tmp_path, kwargs, fragment):
    path = write(tmp_path / "f.txt", "1 1:2\n")
    with pytest.raises(ValueError, match=fragment):
        load_svmlight(path, **kwargs)


def test_numpy_bools_are_options_and_other_values_are_refused(tmp_path):
    path = write(tmp_path / "f.txt", "1 1:2 2:3\n")
    X, _, _ = load_svmlight(path, zero_based=np.False_, dense=np.True_)
    np.testing.assert_array_equal(X, [[2.0, 3.0]])
    X0, _, _ = load_svmlight(path, zero_based=np.True_, dense=True)
    np.testing.assert_array_equal(X0, [[0.0, 2.0, 3.0]])
    (tmp_path / "out.txt").write_text("kept\n")
    with pytest.raises(ValueError, match=r"^zero_based must be True or False; got 'no'$"):
        dump_svmlight(tmp_path / "out.txt", np.ones((1, 1)), [1], zero_based="no")
    assert (tmp_path / "out.txt").read_text() == "kept\n"


def test_path_arguments_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"^path must be a file name .*; got 3$"):
        load_svmlight(3)
    with pytest.raises(ValueError, match=r"^path must be a file name .*; got None$"):
        dump_svmlight(None, np.ones((1, 1)), [1])


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((np.ones(3), np.ones(3)), "X must be a 2-d array"),
        ((np.ones((3, 2)), np.ones(2)), "y must be a 1-d array"),
        ((np.ones((3, 2)), np.array([1, np.nan, 0])), "y must hold finite numbers"),
        ((np.ones((3, 2)), np.ones(3), np.array([1.0, 1.0, 2.0])), "qid must be a 1-d integer"),
        ((np.ones((3, 2)), np.ones(3), None, ["a", "b\nc", ""]), r"comments\[1\]"),
        ((np.ones((3, 2)), np.ones(3), None, ["a"]), "comments must be a sequence of 3"),
        ((np.ones((3, 2), dtype=complex), np.ones(3)), "X must be a 2-d array of real"),
        ((np.array([[1.0, np.nan]]), np.ones(1)), r"X must hold finite numbers; X\[0, 1\] is nan"),
        ((sp.csr_matrix([[0.0, np.inf]]), np.ones(1)), r"X\[0, 1\] is inf"),
    ],
)
def test_dump_arguments(tmp_path, args, fragment):
    with pytest.raises(ValueError, match=fragment):
        dump_svmlight(tmp_path / "f.txt", *args)
    assert not (tmp_path / "f.txt").exists()


# ---------------------------------------------------------------------------------------------
# query files
# ---------------------------------------------------------------------------------------------


def test_qid_from_groups_and_back():
    rng = np.random.default_rng(3)
    for _ in range(50):
        sizes = rng.integers(1, 6, rng.integers(0, 10))
        expected = []
        for group, size in enumerate(sizes):
            expected += [group] * int(size)
        qid = qid_from_groups(sizes)
        assert qid.dtype == np.int64
        np.testing.assert_array_equal(qid, expected)
        np.testing.assert_array_equal(groups_from_qid(qid), sizes)
        # renamed ids give the same groups
        names = rng.permutation(1000)[: len(sizes)]
        np.testing.assert_array_equal(groups_from_qid(names[qid]), sizes)


def test_groups_from_qid_rejects_nan():
    with pytest.raises(ValueError, match=r"^qid must not contain NaN; got NaN at row 1$"):
        groups_from_qid([1.0, np.nan, np.nan])


def test_groups_from_qid_rejects_interleaved_queries():
    with pytest.raises(ValueError, match=r"query 7 are not consecutive \(row 0 and again row 3"):
        groups_from_qid([7, 7, 8, 7])
    np.testing.assert_array_equal(groups_from_qid(["a", "a", "b"]), [2, 1])


@pytest.mark.parametrize("sizes", [[0, 2], [-1], [1.0, 2.0], [[1, 2]]])
def test_bad_group_sizes(sizes):
    with pytest.raises(ValueError, match="sizes must"):
        qid_from_groups(sizes)


def test_query_file_round_trip(tmp_path):
    path = tmp_path / "f.query"
    dump_query_file(path, [3, 1, 4])
    assert path.read_text() == "3\n1\n4\n"
    np.testing.assert_array_equal(load_query_file(path), [3, 1, 4])
    write(path, "3\n\n1\r\n 4 \n\n")
    np.testing.assert_array_equal(load_query_file(path), [3, 1, 4])
    # lines ended by a CR alone, mixed with the others
    write(path, "3\r\r1\r\n 4 \r2\n")
    np.testing.assert_array_equal(load_query_file(path), [3, 1, 4, 2])
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}, line 4: expected a group"):
        load_query_file(write(path, "3\r1\r\n\rx\n"))


# (text, line of its first bad entry) for each one-per-line file
LINE_FILES = {
    "group size": (
        load_query_file,
        [("3\n\nx\n", 3), ("0\n", 1), ("2\n1.5\n", 2), ("1_1\n", 1), ("2\n 1_0 \n", 2),
         ("2\n9223372036854775808\n", 2), ("100000000000000000000\n", 1)],
    ),
    "weight": (
        load_weight_file,
        [("1\n\nx\n", 3), ("-1\n", 1), ("2\nnan\n", 2), ("inf\n", 1), ("1_0\n", 1),
         ("1\n1 2\n", 2)],
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("noun", "text", "lineno"),
    [(noun, *case) for noun, (_, cases) in LINE_FILES.items() for case in cases],
)
def test_malformed_one_per_line_files(tmp_path, noun, text, lineno):
    """Group-size and weight files: the first bad line is named with the file, and a file
    with no entry is an error."""
    load = LINE_FILES[noun][0]
    path = write(tmp_path / "f.txt", text)
    bad = text.split("\n")[lineno - 1].strip()
    where = re.escape(str(path))
    message = rf"^{where}, line {lineno}: expected a {noun} .*got '{bad}'$"
    with pytest.raises(ValueError, match=message):
        load(path)
    with pytest.raises(ValueError, match=rf"^{where}: no {noun} \(the file is empty\)$"):
        load(write(path, "\n \n"))


def test_weight_file(tmp_path):
    path = write(tmp_path / "f.weight", "1\n\n0.5\r\n 2e-3 \n0\n1E2\n")
    weights = load_weight_file(path)
    assert weights.dtype == np.float64
    np.testing.assert_array_equal(weights, [1.0, 0.5, 0.002, 0.0, 100.0])
    path = write(tmp_path / "cr.weight", "1\r0.5\r\n2\r")
    np.testing.assert_array_equal(load_weight_file(path), [1.0, 0.5, 2.0])


def test_load_with_query_file(tmp_path):
    path = write(tmp_path / "rank.train", "1 1:1\n0 1:2\n2 2:1\n1 1:1\n0 2:2\n")
    X, y, qid = load_svmlight(path)
    assert qid is None
    write(tmp_path / "rank.train.query", "2\n3\n")
    _, _, qid = load_svmlight(path)
    np.testing.assert_array_equal(qid, [0, 0, 1, 1, 1])
    assert load_svmlight(path, query_file=None)[2] is None
    other = write(tmp_path / "other.query", "1\n4\n")
    np.testing.assert_array_equal(load_svmlight(path, query_file=other)[2], [0, 1, 1, 1, 1])
    write(other, "2\n2\n")
    with pytest.raises(ValueError, match=r"other.query sum to 4 rows but .*rank.train has 5"):
        load_svmlight(path, query_file=other)


def test_query_file_sizes_beyond_int64(tmp_path):
    """Sizes and their sum are int64: a size of 2**63 or more, or sizes whose sum is (where
    an int64 sum would wrap around), is an error naming the line, not an OverflowError or a
    wrapped sum."""
    path = write(tmp_path / "f.query", f"{2**63 - 1}\n")
    sizes = load_query_file(path)
    assert sizes.dtype == np.int64 and sizes.tolist() == [2**63 - 1]
    write(path, f"{2**63}\n")
    with pytest.raises(
        ValueError,
        match=rf"^{re.escape(str(path))}, line 1: expected a group size \(an integer >= 1 and "
        rf"at most 2\*\*63 - 1\); got '{2**63}'$",
    ):
        load_query_file(path)
    write(path, f"3\n\n{2**63 - 1}\n{2**63 - 1}\n202\n")  # int64 would wrap to 200
    with pytest.raises(ValueError) as info:
        load_query_file(path)
    assert str(info.value) == (
        f"{path}, line 3: the group sizes up to this line sum to {2**63 + 2}; they must sum "
        f"to at most {2**63 - 1}"
    )


def test_query_file_sizes_beyond_the_rows(tmp_path):
    """A group size is at most the data file's row count, and the sizes' sum is compared
    with it exactly: sizes whose int64 sum wraps around to the row count used to pass and
    crash numpy.repeat."""
    path = write(tmp_path / "rank.train", "1 1:1\n0 1:2\n2 2:1\n1 1:1\n0 2:2\n")  # 5 rows
    query = tmp_path / "rank.train.query"
    expected = "a group size (an integer >= 1 and at most the number of rows of"
    for text, lineno, bad in [
        (f"{2**63}\n", 1, 2**63),
        ("100000000000000000000\n", 1, 10**20),
        (f"{2**63 - 1}\n{2**63 - 1}\n7\n", 1, 2**63 - 1),  # the int64 sum is 5
        ("2\n6\n", 2, 6),
    ]:
        write(query, text)
        for query_file in ("auto", query):
            with pytest.raises(ValueError) as info:
                load_svmlight(path, query_file=query_file)
            assert str(info.value) == (
                f"{query}, line {lineno}: expected {expected} {path}, 5); got '{bad}'"
            )
    write(query, "5\n5\n")
    with pytest.raises(ValueError, match=r"rank.train.query sum to 10 rows but .*has 5 rows$"):
        load_svmlight(path)
    write(query, "5\n")
    np.testing.assert_array_equal(load_svmlight(path)[2], [0, 0, 0, 0, 0])


@pytest.mark.parametrize(
    "sizes",
    [
        [2**62, 2**62, 2**62, 2**62 + 5],  # the int64 sum wraps around to 5
        np.array([2**63 - 1, 2**63 - 1, 7], dtype=np.int64),
        np.array([2**63, 1], dtype=np.uint64),  # a cast to int64 would make it negative
    ],
)
def test_group_sizes_summing_beyond_int64(tmp_path, sizes):
    with pytest.raises(ValueError, match=r"^sizes must sum to at most 2\*\*63 - 1 rows; got"):
        qid_from_groups(sizes)
    with pytest.raises(ValueError, match=r"^sizes must sum to at most 2\*\*63 - 1 rows"):
        dump_query_file(tmp_path / "f.query", sizes)
    assert not (tmp_path / "f.query").exists()


def test_weight_file_has_no_bound_on_its_sum(tmp_path):
    # the sum bound is the group sizes'; weights read as before
    weights = load_weight_file(write(tmp_path / "f.weight", "1e308\n1e308\n"))
    np.testing.assert_array_equal(weights, [1e308, 1e308])


def test_query_file_conflicts_with_qid(tmp_path):
    path = write(tmp_path / "f.txt", "1 qid:1 1:1\n")
    write(tmp_path / "f.txt.query", "5\n")
    # "auto" ignores the side file when the rows carry qid: ...
    np.testing.assert_array_equal(load_svmlight(path)[2], [1])
    # ... but an explicit one is a conflict
    with pytest.raises(ValueError, match="has qid: on its rows"):
        load_svmlight(path, query_file=tmp_path / "f.txt.query")


# ---------------------------------------------------------------------------------------------
# LETOR folds on synthetic partitions
# ---------------------------------------------------------------------------------------------


def test_fold_rotation_matches_readme_table():
    for fold, (train, vali, test) in README_FOLDS.items():
        assert letor_fold_partitions(fold) == {"train": train, "vali": (vali,), "test": (test,)}
    for fold in (0, 6, True, 1.5):
        with pytest.raises(ValueError, match="fold must be an integer in 1..5"):
            letor_fold_partitions(fold)


@pytest.fixture
def letor_root(tmp_path):
    """Five small partitions under root/mq2008; partition k has qids 100k + (0, 1, 2)."""
    rng = np.random.default_rng(4)
    folder = tmp_path / "mq2008"
    folder.mkdir()
    parts = {}
    for k in range(1, 6):
        n = 6 + k
        X = random_matrix(rng, n, 46, density=0.9)
        y = rng.integers(0, 3, n)
        qid = 100 * k + np.sort(rng.integers(0, 3, n))
        dump_svmlight(folder / f"S{k}.txt", X, y, qid, [f"docid = {k}-{i}" for i in range(n)])
        parts[f"S{k}"] = (X, y, qid)
    return tmp_path, parts


def test_letor_fold_stacks_partitions(letor_root):
    root, parts = letor_root
    for fold, splits in letor_folds(root):
        train, vali, test = README_FOLDS[fold]
        for split, names in (("train", train), ("vali", (vali,)), ("test", (test,))):
            X, y, qid = splits[split]
            assert X.dtype == np.float64 and isinstance(X, np.ndarray)
            np.testing.assert_array_equal(X, np.vstack([parts[s][0] for s in names]))
            np.testing.assert_array_equal(y, np.concatenate([parts[s][1] for s in names]))
            np.testing.assert_array_equal(qid, np.concatenate([parts[s][2] for s in names]))
    sparse = load_letor_fold(root / "mq2008", 2, dense=False, dtype=np.float32)
    X, _, _ = sparse["test"]
    assert sp.issparse(X) and X.dtype == np.float32 and X.shape[1] == 46
    np.testing.assert_array_equal(X.toarray(), parts["S1"][0].astype(np.float32))


def test_letor_cache_and_copies(letor_root):
    root, parts = letor_root
    first = load_letor_fold(root, 1)
    first["test"][0][:] = -1.0
    first["test"][1][:] = -1.0
    second = load_letor_fold(root, 1)
    np.testing.assert_array_equal(second["test"][0], parts["S5"][0])
    np.testing.assert_array_equal(second["test"][1], parts["S5"][1])
    # an edited partition is parsed again
    path = root / "mq2008" / "S5.txt"
    X, y, qid = parts["S5"]
    dump_svmlight(path, X * 2, y, qid)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    np.testing.assert_array_equal(load_letor_fold(root, 1)["test"][0], X * 2)


def test_letor_missing_partition(letor_root):
    root, _ = letor_root
    (root / "mq2008" / "S3.txt").unlink()
    with pytest.raises(FileNotFoundError, match=r"partition S3 not found: .*mq2008.S3\.txt"):
        load_letor_fold(root, 1)
    with pytest.raises(ValueError, match="dataset must be one of"):
        load_letor_fold(root, 1, dataset="MSLR")


def test_letor_partition_needs_qid(tmp_path):
    for k in range(1, 6):
        dump_svmlight(tmp_path / f"S{k}.txt", np.ones((2, 46)), np.ones(2))
    with pytest.raises(ValueError, match="must have qid"):
        load_letor_fold(tmp_path, 1)


# ---------------------------------------------------------------------------------------------
# real data
# ---------------------------------------------------------------------------------------------


def assert_same_as_sklearn(path, **kw):
    X, y, qid = load_svmlight(path, **kw)
    Xr, yr, qr = sklearn_read(path)
    assert X.shape == Xr.shape
    assert (X != Xr).nnz == 0
    np.testing.assert_array_equal(y, yr)
    if len(qr):
        np.testing.assert_array_equal(qid, qr)
    return X, y, qid


def test_mq2008_partitions(shared_data):
    folder = shared_data / "mq2008"
    n_rows, qid_sets = 0, []
    for k in range(1, 6):
        path = folder / f"S{k}.txt"
        X, y, qid, comments = load_svmlight(path, return_comments=True, n_features=46)
        assert_same_as_sklearn(path)
        assert X.shape[1] == 46
        assert set(np.unique(y)) <= {0.0, 1.0, 2.0}
        lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
        assert comments == [ln.partition("#")[2].strip() for ln in lines]
        assert all(c.startswith("docid = ") for c in comments)
        n_rows += X.shape[0]
        qid_sets.append(set(qid.tolist()))
    assert n_rows == 15211
    assert sum(len(s) for s in qid_sets) == len(set().union(*qid_sets)) == 784


def test_mq2008_folds(shared_data):
    folder = shared_data / "mq2008"
    partition_qids = {
        f"S{k}": set(load_svmlight(folder / f"S{k}.txt")[2].tolist()) for k in range(1, 6)
    }
    everything = set().union(*partition_qids.values())
    for fold, splits in letor_folds(shared_data):
        train, vali, test = README_FOLDS[fold]
        qids = {split: set(splits[split][2].tolist()) for split in ("train", "vali", "test")}
        assert qids["train"] == set().union(*(partition_qids[s] for s in train))
        assert qids["vali"] == partition_qids[vali]
        assert qids["test"] == partition_qids[test]
        assert not qids["train"] & qids["vali"]
        assert not qids["train"] & qids["test"]
        assert not qids["vali"] & qids["test"]
        assert qids["train"] | qids["vali"] | qids["test"] == everything
        n = sum(splits[s][0].shape[0] for s in ("train", "vali", "test"))
        assert n == 15211
        for X, y, qid in splits.values():
            assert X.dtype == np.float64 and X.shape[1] == 46
            assert X.shape[0] == y.shape[0] == qid.shape[0]
    # the test part of fold 1 is S5 as the generic reader sees it
    Xr, yr, qr = sklearn_read(folder / "S5.txt")
    X, y, qid = load_letor_fold(folder, 1)["test"]
    np.testing.assert_array_equal(X, Xr.toarray())
    np.testing.assert_array_equal(y, yr)
    np.testing.assert_array_equal(qid, qr)


@pytest.mark.parametrize(("name", "rows", "queries"), [("train", 3005, 201), ("test", 768, 50)])
def test_lightgbm_rank(shared_data, name, rows, queries):
    path = shared_data / "lightgbm_rank" / f"rank.{name}"
    X, y, qid = assert_same_as_sklearn(path)
    assert X.shape == (rows, 300)
    assert len(np.unique(qid)) == queries
    sizes = np.loadtxt(f"{path}.query", dtype=np.int64)
    np.testing.assert_array_equal(groups_from_qid(qid), sizes)
    np.testing.assert_array_equal(load_query_file(f"{path}.query"), sizes)


def test_trec_news(shared_data):
    folder = shared_data / "trec_news_2018"
    X, y, qid = assert_same_as_sklearn(folder / "trec_news_2018.train")
    assert X.shape == (782, 5)
    assert len(np.unique(qid)) == 45
    X, y, qid = assert_same_as_sklearn(folder / "trec_news_2018.test", n_features=5)
    assert X.shape == (41, 5)
    assert len(np.unique(qid)) == 5

"""Tests of bmrm.io: svmlight / LETOR files, query files, LETOR folds.

References: the arrays a file was written from (round trips), scikit-learn's
``load_svmlight_file`` (parsing, blank and comment lines, the real files), ``str.partition``
on the raw text (comments), explicit loops (group sizes), and the fold table of the data
README written out literally below.
"""

import bz2
import gzip
import lzma
import os
import re
import zlib

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_svmlight_file

from bmrm.io import (
    data_dir,
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


def test_dump_float16_features(tmp_path):
    X = np.array([[0.1, 0.0], [65504.0, -(2.0**-24)]], dtype=np.float16)
    path = tmp_path / "f.txt"
    dump_svmlight(path, X, np.array([1, 0]))
    # the float16 values widened exactly, each as its shortest float64 text
    assert path.read_text() == "1 1:0.0999755859375\n0 1:65504.0 2:-5.960464477539063e-08\n"
    Xs, _, _ = load_svmlight(path, dtype=np.float16, dense=True)
    assert Xs.dtype == np.float16
    np.testing.assert_array_equal(Xs, X)


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


# (text, line of its first bad entry) for each one-per-line file
LINE_FILES = {
    "group size": (
        load_query_file,
        [("3\n\nx\n", 3), ("0\n", 1), ("2\n1.5\n", 2), ("1_1\n", 1), ("2\n 1_0 \n", 2)],
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


def test_query_file_conflicts_with_qid(tmp_path):
    path = write(tmp_path / "f.txt", "1 qid:1 1:1\n")
    write(tmp_path / "f.txt.query", "5\n")
    # "auto" ignores the side file when the rows carry qid: ...
    np.testing.assert_array_equal(load_svmlight(path)[2], [1])
    # ... but an explicit one is a conflict
    with pytest.raises(ValueError, match="has qid: on its rows"):
        load_svmlight(path, query_file=tmp_path / "f.txt.query")


# ---------------------------------------------------------------------------------------------
# LETOR folds on synthetic partitions, and data_dir
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


def test_data_dir(monkeypatch, tmp_path):
    from bmrm.io import letor

    monkeypatch.setattr(letor, "_CHECKOUT", tmp_path / "checkout")
    monkeypatch.delenv("BMRM_DATA", raising=False)
    assert data_dir() is None
    assert data_dir(existing=False) == tmp_path / "shared" / "data"
    (tmp_path / "shared" / "data").mkdir(parents=True)
    assert data_dir() == tmp_path / "shared" / "data"
    monkeypatch.setenv("BMRM_DATA", str(tmp_path / "elsewhere"))
    assert data_dir() is None
    assert data_dir(existing=False) == tmp_path / "elsewhere"
    monkeypatch.setenv("BMRM_DATA", str(tmp_path))
    assert data_dir() == tmp_path


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

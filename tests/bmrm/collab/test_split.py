"""Rating input, the weak and strong splits and the rating-file reader, on hand-made
matrices."""

import numpy as np
import pytest
import scipy.sparse as sp

from bmrm.collab import read_ratings, strong_split, weak_split
from bmrm.collab._ratings import check_ratings

# users 0..4 × items 0..6; user 0 rates 6 items (one 0 rating), user 1 two, user 2 none,
# user 3 five, user 4 six; item 6 is rated by nobody
ROWS = np.array([0, 0, 0, 0, 0, 0, 1, 1, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4])
COLS = np.array([0, 1, 2, 3, 4, 5, 0, 2, 0, 1, 3, 4, 5, 0, 1, 2, 3, 4, 5])
VALS = np.array([5, 0, 3, 1, 4, 2, 3, 3, 1, 2, 3, 4, 5, 0, 0, 10, 7, 7, 1], dtype=float)


def matrix(fmt="csr"):
    m = sp.csr_matrix((VALS, (ROWS, COLS)), shape=(5, 7))
    return m.asformat(fmt)


def triples(R):
    """The set of (user, item, rating) of a matrix or tuple."""
    if sp.issparse(R):
        c = R.tocoo()
        return set(zip(c.row.tolist(), c.col.tolist(), c.data.tolist(), strict=True))
    return set(zip(*(np.asarray(a).tolist() for a in R), strict=True))


def test_explicit_zeros_are_ratings():
    R = check_ratings(matrix())
    assert len(R.data) == 19
    assert (R.data == 0).sum() == 3
    np.testing.assert_array_equal(np.diff(R.indptr), [6, 2, 0, 5, 6])


@pytest.mark.parametrize("form", ["csr", "coo", "arrays"])
def test_every_input_form_holds_the_same_int32_index(form):
    """The item indices are int32 whatever the input's form (one kernel signature), and a
    canonical CSR matrix's own index array is used without a copy."""
    m = matrix()
    given = (ROWS, COLS, VALS) if form == "arrays" else m.asformat(form)
    R = check_ratings(given)
    assert R.indices.dtype == np.int32
    np.testing.assert_array_equal(R.indices, m.indices)
    np.testing.assert_array_equal(R.indptr, m.indptr)
    if form == "csr":
        assert np.shares_memory(R.indices, given.indices)


@pytest.mark.parametrize("fmt", ["csr", "coo"])
def test_duplicates_are_refused(fmt):
    rows, cols, vals = np.append(ROWS, 3), np.append(COLS, 4), np.append(VALS, 1.0)
    if fmt == "coo":
        m = sp.coo_matrix((vals, (rows, cols)), shape=(5, 7))
    else:  # a non-canonical CSR matrix holding the pair twice
        order = np.lexsort((cols, rows))
        indptr = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=5))))
        m = sp.csr_matrix((vals[order], cols[order], indptr), shape=(5, 7))
    assert m.nnz == 20
    with pytest.raises(ValueError, match=r"\(user, item\) pair \(3, 4\) more than once"):
        check_ratings(m)
    with pytest.raises(ValueError, match=r"pair \(3, 4\) more than once"):
        weak_split((rows, cols, vals), 2, 1, seed=0)


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.ones((2, 2)), "scipy.sparse users × items matrix or a tuple"),
        ([1, 2, 3], r"ratings\[0\] \(users\) must be a 1-d array"),
        ((np.array([0, 1]), np.array([0]), np.array([1.0, 2.0])), "equal length"),
        ((np.array([0, 1, 2]), np.array([0, 1]), np.array([1.0, 2.0])), "got lengths 3, 2, 2$"),
        (
            (np.array([0, 1]), np.array([0, 1]), np.ones((2, 1))),
            r"got lengths 2, 2, an array of shape \(2, 1\)$",
        ),
        ((np.array([0, -1]), np.array([0, 1]), np.array([1.0, 2.0])), "non-negative"),
        ((np.array([0, 1]), np.array([0, 1]), np.array([1.0, np.nan])), "NaN"),
        ((np.array([0.5, 1]), np.array([0, 1]), np.array([1.0, 2.0])), "integer indices"),
    ],
)
def test_bad_ratings_are_named(bad, match):
    with pytest.raises(ValueError, match=match):
        check_ratings(bad)


@pytest.mark.parametrize("form", ["csr", "coo", "arrays"])
@pytest.mark.parametrize("seed", range(5))
def test_weak_split(form, seed):
    ratings = (ROWS, COLS, VALS) if form == "arrays" else matrix(form)
    train, test = weak_split(ratings, n_train=3, min_test=2, seed=seed)
    if form == "arrays":
        assert isinstance(train, tuple) and len(train) == 3
        # the input's rows, in their order
        pos_train = [i for i, t in enumerate(zip(ROWS, COLS, strict=True)) if
                     (t[0], t[1]) in {(u, j) for u, j, _ in triples(train)}]  # fmt: skip
        np.testing.assert_array_equal(train[0], ROWS[pos_train])
    else:
        assert train.format == form and train.shape == (5, 7) and test.shape == (5, 7)
    tr, te = triples(train), triples(test)
    assert not tr & te
    # users 0, 3, 4 qualify (>= 5 ratings); users 1 and 2 are in neither part
    everything = triples(matrix())
    kept = {t for t in everything if t[0] in (0, 3, 4)}
    assert tr | te == kept
    for user in (0, 3, 4):
        assert sum(1 for t in tr if t[0] == user) == 3
    # explicit zeros survive the split
    assert sum(1 for t in tr | te if t[2] == 0.0) == 3
    again = weak_split(ratings, n_train=3, min_test=2, seed=seed)
    assert triples(again[0]) == tr


def test_weak_split_draws_every_subset():
    """User 3's five ratings: over many seeds every 3-subset is drawn, about equally often."""
    counts = {}
    for seed in range(400):
        train, _ = weak_split(matrix(), n_train=3, min_test=2, seed=seed)
        key = tuple(sorted(j for u, j, _ in triples(train) if u == 3))
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 10
    assert min(counts.values()) > 15


@pytest.mark.parametrize("form", ["csr", "arrays"])
def test_strong_split(form):
    ratings = (ROWS, COLS, VALS) if form == "arrays" else matrix(form)
    train, fold, test = strong_split(ratings, n_train=2, min_test=3, heldout=0.4, seed=1)
    tr, fo, te = triples(train), triples(fold), triples(test)
    out_users = {t[0] for t in fo}
    assert len(out_users) == 1 and out_users <= {0, 3, 4}  # round(0.4 · 3) = 1 user
    assert {t[0] for t in te} == out_users
    assert not ({t[0] for t in tr} & out_users)
    assert tr | fo | te == triples(matrix())
    assert len(fo) == 2
    with pytest.raises(ValueError, match="no user has"):
        strong_split(ratings, n_train=10, min_test=3)
    with pytest.raises(ValueError, match="heldout must be a share"):
        strong_split(ratings, n_train=2, heldout=1.0)
    with pytest.raises(ValueError, match="n_train must be an integer >= 1"):
        weak_split(ratings, n_train=0)


@pytest.mark.parametrize("form", ["csr", "arrays"])
def test_weak_split_refuses_when_no_user_qualifies(form):
    """Users 0 and 4 rate six items, the most: a split asking seven of each user leaves
    nobody, and says so instead of returning two empty parts."""
    ratings = (ROWS, COLS, VALS) if form == "arrays" else matrix(form)
    with pytest.raises(
        ValueError, match=r"no user has n_train \+ min_test = 7 .* most any user has is 6"
    ):
        weak_split(ratings, n_train=6, min_test=1, seed=0)
    train, test = weak_split(ratings, n_train=5, min_test=1, seed=0)
    assert {u for u, _, _ in triples(train)} == {u for u, _, _ in triples(test)} == {0, 4}
    assert (len(triples(train)), len(triples(test))) == (10, 2)


@pytest.mark.parametrize(
    "layout, header",
    [("{u}\t{i}\t{r}\t88125{t}\n", ""), ("{u}::{i}::{r}::88125{t}\n", ""),
     ("{u},{i},{r},88125{t}\n", "userId,movieId,rating,timestamp\n")],
)  # fmt: skip
def test_read_ratings_keeps_original_ids(tmp_path, layout, header):
    lines = [(17, 500, 3), (17, 20, 0), (4, 500, 10), (9, 7, 5), (4, 7, 1)]
    path = tmp_path / "ratings.dat"
    path.write_text(
        header + "".join(layout.format(u=u, i=i, r=r, t=t) for t, (u, i, r) in enumerate(lines))
    )
    out = read_ratings(path)
    np.testing.assert_array_equal(out.user_ids, [4, 9, 17])
    np.testing.assert_array_equal(out.item_ids, [7, 20, 500])
    assert out.matrix.nnz == 5
    for u, i, r in lines:
        row = np.searchsorted(out.user_ids, u)
        col = np.searchsorted(out.item_ids, i)
        assert out.matrix[row, col] == r
    assert out.matrix[2, 1] == 0 and out.matrix.nnz == 5  # the 0 rating is stored
    path.write_text(header + layout.format(u=4, i=7, r=1, t=0) * 2)
    with pytest.raises(ValueError, match=r"rates the \(user, item\) pair \(4, 7\) more than once"):
        read_ratings(path)


def test_read_movietweetings(shared_data):
    """The shared MovieTweetings 100K snapshot: its README's counts, ids kept, 0s stored."""
    path = shared_data / "movietweetings_100k" / "ratings.dat"
    if not path.exists():
        pytest.skip(f"{path} not found")
    out = read_ratings(path)
    assert out.matrix.shape == (16554, 10506)
    assert out.matrix.nnz == 100_000
    assert (out.matrix.data == 0).sum() == 12
    counts = np.diff(out.matrix.indptr)
    assert [(counts >= n).sum() for n in (20, 30, 60)] == [1154, 635, 162]
    first = path.read_text(encoding="utf-8").split("\n", 1)[0].split("::")
    row = np.searchsorted(out.user_ids, int(first[0]))
    col = np.searchsorted(out.item_ids, int(first[1]))
    assert out.matrix[row, col] == float(first[2])


@pytest.mark.parametrize("seed", range(5))
def test_strong_split_min_ratings_holds_out_the_same_users_for_every_n(seed):
    """With min_ratings the held-out users, and so the training part, do not depend on
    n_train; a held-out user with fewer than n_train + min_test ratings is in neither the
    fold nor the test part, and the fold and test parts cover exactly the other held-out
    users' ratings, n_train of them in the fold."""
    everything = triples(matrix())
    counts = {u: sum(1 for t in everything if t[0] == u) for u in range(5)}  # 6, 2, 0, 5, 6
    parts = {
        n: strong_split(matrix(), n_train=n, min_test=1, heldout=0.5, min_ratings=3, seed=seed)
        for n in (2, 4, 5)
    }
    trains = [triples(train) for train, _, _ in parts.values()]
    assert trains[0] == trains[1] == trains[2]
    held = {u for u in (0, 3, 4) if not any(t[0] == u for t in trains[0])}
    assert len(held) == 2  # round(0.5 · 3 users with >= 3 ratings)
    assert trains[0] == {t for t in everything if t[0] not in held}
    for n, (_, fold, test) in parts.items():
        fo, te = triples(fold), triples(test)
        tested = {u for u in held if counts[u] >= n + 1}
        assert fo | te == {t for t in everything if t[0] in tested}
        assert not fo & te
        for u in tested:
            assert sum(1 for t in fo if t[0] == u) == n
    with pytest.raises(ValueError, match="no user has min_ratings = 7"):
        strong_split(matrix(), n_train=2, min_test=1, min_ratings=7)
    with pytest.raises(ValueError, match="min_ratings must be an integer >= 1"):
        strong_split(matrix(), n_train=2, min_ratings=0)

"""Bad input gets a ValueError naming the argument, before the oracle is ever called."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import bmrm
from bmrm import cli
from bmrm.io import dump_svmlight


class CountingLoss:
    """Squared loss that counts its oracle calls."""

    pointwise = True  # one value per row

    def __init__(self):
        self.calls = 0

    def validate(self, y, query_ptr):
        return np.asarray(y, dtype=np.float64)

    def loss_grad(self, f, y):
        self.calls += 1
        return 0.5 * (f - y) ** 2, f - y


def data(n=20, d=3):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, d)), rng.normal(size=n)


def nan_X():
    X, _ = data()
    X[3, 1] = np.nan
    return X


def inf_sparse_X():
    X, _ = data()
    X = sp.csr_matrix(X)
    X.data[2] = np.inf
    return X


CASES = [
    ("X", lambda X, y: dict(X=nan_X(), y=y)),
    ("X", lambda X, y: dict(X=inf_sparse_X(), y=y)),
    ("X", lambda X, y: dict(X=np.empty((0, 3)), y=np.empty(0))),
    ("X", lambda X, y: dict(X=np.empty((20, 0)), y=y)),
    ("X", lambda X, y: dict(X=X[:, 0], y=y)),
    ("X", lambda X, y: dict(X=X.astype(str), y=y)),
    ("y", lambda X, y: dict(X=X, y=np.r_[y[:-1], np.nan])),
    ("y", lambda X, y: dict(X=X, y=np.r_[y[:-1], np.inf])),
    ("y", lambda X, y: dict(X=X, y=y[:-1])),
    ("qid", lambda X, y: dict(X=X, y=y, qid=np.arange(5))),
    ("lam", lambda X, y: dict(X=X, y=y, lam=0.0)),
    ("lam", lambda X, y: dict(X=X, y=y, lam=-1.0)),
    ("lam", lambda X, y: dict(X=X, y=y, lam=np.nan)),
    ("tol", lambda X, y: dict(X=X, y=y, tol=-1.0)),
    ("max_iter", lambda X, y: dict(X=X, y=y, max_iter=0)),
    ("bundle_size", lambda X, y: dict(X=X, y=y, bundle_size=2)),
    ("regularizer", lambda X, y: dict(X=X, y=y, regularizer="l3")),
    ("master", lambda X, y: dict(X=X, y=y, master="newton")),
    ("master", lambda X, y: dict(X=X, y=y, master="qp", regularizer="l1")),
    ("bounds", lambda X, y: dict(X=X, y=y, bounds=(1.0, -1.0))),
    ("bounds lower must not contain", lambda X, y: dict(X=X, y=y, bounds=(np.inf, None))),
    ("bounds upper must not contain", lambda X, y: dict(X=X, y=y, bounds=(None, -np.inf))),
    ("w0", lambda X, y: dict(X=X, y=y, w0=np.zeros(7))),
    ("w0 .*complex128", lambda X, y: dict(X=X, y=y, w0=np.array([1j, 0, 0]))),
    ("method must be one of", lambda X, y: dict(X=X, y=y, method="levle")),
    ("loss_params must be a dict", lambda X, y: dict(X=X, y=y, loss_params=[("a", 1)])),
    ("l1_ratio", lambda X, y: dict(X=X, y=y, regularizer="elastic_net", l1_ratio=2.0)),
]


@pytest.mark.parametrize("name,make", CASES)
def test_bad_input_names_the_argument_before_any_work(name, make):
    X, y = data()
    loss = CountingLoss()
    kwargs = make(X, y)
    with pytest.raises(ValueError, match=name):
        bmrm.fit(kwargs.pop("X"), kwargs.pop("y"), loss, **kwargs)
    assert loss.calls == 0


def test_unknown_loss_name():
    X, y = data()
    with pytest.raises(ValueError, match="loss must be one of"):
        bmrm.fit(X, y, "hinge_squared")


@pytest.mark.parametrize("loss", ["hinge", "logistic"])
def test_binary_losses_reject_other_labels(loss):
    X, _ = data()
    with pytest.raises(ValueError, match="y must hold binary labels"):
        bmrm.fit(X, np.arange(20) % 3, loss)


@pytest.mark.parametrize("loss", ["hinge", "logistic"])
def test_binary_losses_accept_both_label_conventions(loss):
    X, y = data()
    pm = np.where(y > 0, 1, -1)
    a = bmrm.fit(X, pm, loss, lam=1e-2, tol=1e-6).result_
    b = bmrm.fit(X, (pm + 1) // 2, loss, lam=1e-2, tol=1e-6).result_
    assert a.fun == pytest.approx(b.fun, rel=1e-9)


def test_object_without_loss_grad_is_rejected():
    class Half:
        def validate(self, y, query_ptr):
            return y

    X, y = data()
    with pytest.raises(TypeError, match="loss_grad"):
        bmrm.fit(X, y, Half())


def test_negative_loss_values_are_reported():
    class Negative(CountingLoss):
        def loss_grad(self, f, y):
            values, grad = super().loss_grad(f, y)
            return values - 1.0, grad

    X, y = data()
    with pytest.raises(ValueError, match="non-negative"):
        bmrm.fit(X, y, Negative())


def test_predict_checks_feature_count():
    X, y = data()
    model = bmrm.fit(X, y, "squared", lam=1e-2)
    with pytest.raises(ValueError, match="fitted with 3"):
        model.predict(X[:, :2])


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        ("Int64", np.float64),
        ("Float64", np.float64),
        ("float32", np.float32),
        ("boolean", np.float64),
        ("double[pyarrow]", np.float64),
    ],
)
def test_pandas_numeric_extension_dtypes_are_features(dtype, expected):
    """A DataFrame of nullable or Arrow numbers is numeric, as for scikit-learn; a missing
    value is NaN (refused), a non-numeric column is named."""
    pd = pytest.importorskip("pandas")
    if "pyarrow" in dtype:
        pytest.importorskip("pyarrow")
    from bmrm._validation import check_X

    values = np.array([[0, 1], [1, 0], [1, 1]])
    frame = pd.DataFrame({c: pd.array(values[:, j], dtype=dtype) for j, c in enumerate("ab")})
    X = check_X(frame)
    assert X.dtype == expected
    np.testing.assert_array_equal(X, values)
    frame.loc[1, "b"] = None
    with pytest.raises(ValueError, match="^X must not contain NaN or inf$"):
        check_X(frame)


@pytest.mark.parametrize("column", [["1", "2", "3"], ["a", "b", "a"]])
def test_pandas_non_numeric_columns_are_refused_by_name(column):
    pd = pytest.importorskip("pandas")
    from bmrm._validation import check_X

    frame = pd.DataFrame({"a": [0.5, 1.0, 2.0], "doc": column})
    with pytest.raises(ValueError, match="^X must be numeric; column 'doc' has dtype "):
        check_X(frame)
    frame["doc"] = pd.Categorical(column)
    with pytest.raises(ValueError, match="^X must be numeric; column 'doc' has dtype category"):
        check_X(frame)


def one_query_data(n_rows, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_rows, 3))
    y = np.clip(np.round(X[:, 0] + 1), 0, 2)
    return X, y


ONE_QUERY_WARNING = (
    "no query ids were given (qid=None; for a data file, no qid: and no query file), so the "
    "ordinal loss ranks all 5001 rows as one query; give one query id per row, or "
    "qid=np.zeros(n_rows) to fit one query without this warning"
)


def test_a_query_loss_without_qid_on_many_rows_warns():
    X, y = one_query_data(5001)
    with pytest.warns(UserWarning) as caught:
        bmrm.fit(X, y, "ordinal", None, lam=0.1, max_iter=2)
    messages = [str(w.message) for w in caught if w.category is UserWarning]
    assert messages == [ONE_QUERY_WARNING]
    assert caught[0].filename == __file__  # pointing at the caller's line


@pytest.mark.parametrize(
    ("n_rows", "loss", "qid"),
    [(5000, "ordinal", None), (5001, "ordinal", "zeros"), (5001, "squared", None)],
)
def test_no_warning_for_a_stated_query_a_small_one_or_a_pointwise_loss(n_rows, loss, qid):
    X, y = one_query_data(n_rows)
    qid = np.zeros(n_rows, dtype=int) if qid == "zeros" else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = bmrm.fit(X, y, loss, qid, lam=0.1, max_iter=2)
    assert [str(w.message) for w in caught if "no query ids were given" in str(w.message)] == []
    assert model.coef_.shape == (X.shape[1],)


def test_train_without_qid_warns(tmp_path, capsys):
    X, y = one_query_data(5001)
    dump_svmlight(tmp_path / "t.svm", X, y.astype(np.int64))
    code = cli.main(
        ["train", str(tmp_path / "t.svm"), str(tmp_path / "m.json"), "--max-iter", "2"]
    )
    assert code == 0
    assert f"bmrm train: warning: {ONE_QUERY_WARNING}\n" in capsys.readouterr().err

"""The linear model :func:`bmrm.fit` returns, and its model files.

This module needs neither the solver nor scipy.optimize, so that reading a model file and
predicting (``bmrm predict``) pays for neither: a loaded model's ``result_`` (a
:class:`bmrm.BMRMResult` or scipy ``OptimizeResult``) is built from the file's values the
first time it is read.
"""

from __future__ import annotations

import json
import numbers
import os

import numpy as np

import losses
from bmrm._validation import check_model_values, check_X
from bmrm.io.model_files import (
    BMRM_RESULT,
    HISTORY_FIELDS,
    ModelRecord,
    UserLoss,
    read_model_file,
    write_model_file,
)
from bmrm.scorers import LinearScorer, get_scorer
from bmrm.solver.regularizers import from_spec, make_regularizer
from losses.validation import check_int

__all__ = ["LinearModel", "load", "save"]


class LinearModel:
    """A fitted scorer: f(x) = <coef_, x> + intercept_, or ``scorer_``'s h with ``coef_``.

    :func:`bmrm.fit` and :func:`bmrm.load` make these; the constructor stores what it is
    given.

    Parameters
    ----------
    coef : array-like of shape (n_features,) or (n_levels, n_features)
        The weights (``coef_``).
    intercept : float
        The intercept (``intercept_``).
    loss : loss object
        The loss of the fit (a :mod:`losses` loss or the user's own).
    lam : float
        The regularization constant of the fit.
    regularizer : Regularizer, str or callable
        Ω, or what :func:`~bmrm.solver.regularizers.make_regularizer` accepts.
    result : BMRMResult, scipy OptimizeResult or None
        The solver's result (``result_``).
    scorer : scorer object or None, default=None
        A non-linear ranking function of :mod:`bmrm.scorers`; None (or a
        :class:`~bmrm.scorers.LinearScorer`) for f = Xw.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,), or (n_levels, n_features) for the
        expected-gain scorer
    intercept_ : float
        0 unless fitted with ``fit_intercept=True``.
    loss : loss object
    lam : float
    regularizer : Regularizer
        Ω, with its box constraints if any (:mod:`bmrm.solver.regularizers`); the
        constructor also takes what :func:`~bmrm.solver.regularizers.make_regularizer`
        accepts (a name or a callable).
    result_ : BMRMResult or scipy OptimizeResult
        The solver's certificate and history (a scipy result only in model files written
        before L-BFGS ran in the package's loop).
    scorer_ : scorer object or None
        A non-linear scorer of :mod:`bmrm.scorers`; None for f = Xw (a
        :class:`~bmrm.scorers.LinearScorer` given to the constructor is stored as None).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        The column names of the pandas DataFrame X that :func:`bmrm.fit` was given, when
        they are all strings (otherwise the attribute is absent). Model files keep them:
        :func:`bmrm.load` restores them (files of format version 3).
    """

    def __init__(self, coef, intercept, loss, lam, regularizer, result, scorer=None):
        self.coef_ = np.asarray(coef, dtype=np.float64)
        self.intercept_ = float(intercept)
        self.loss = loss
        self.lam = lam
        self.regularizer = make_regularizer(regularizer)
        self._result = result
        self.scorer_ = None if type(scorer) is LinearScorer else scorer
        self.n_features_in_ = self.coef_.shape[-1]

    @property
    def result_(self):
        """The solver's certificate and history (a model file's, built when first read)."""
        if isinstance(self._result, _StoredResult):
            self._result = self._result.build()
        return self._result

    @result_.setter
    def result_(self, result) -> None:
        self._result = result

    def decision_function(self, X) -> np.ndarray:
        """Score the rows of X: X @ coef_ + intercept_, or the scorer's h.

        A model fitted on a pandas DataFrame with string column names (``feature_names_in_``)
        refuses a DataFrame whose columns are not those names in the same order; arrays and
        frames without string column names are taken by position.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows to score.

        Returns
        -------
        ndarray of shape (n_samples,)
            The scores (float64); rank the documents of a query by decreasing score.
        """
        _check_feature_names(X, getattr(self, "feature_names_in_", None))
        X = check_X(X, n_features=self.n_features_in_)
        if self.scorer_ is not None:
            return self.scorer_.scores(X, self.coef_.ravel()) + self.intercept_
        f = X @ self.coef_.astype(X.dtype, copy=False)
        return np.asarray(f, dtype=np.float64).ravel() + self.intercept_

    def predict(self, X) -> np.ndarray:
        """Score the rows of X, as :meth:`decision_function` does.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The rows to score.

        Returns
        -------
        ndarray of shape (n_samples,)
            The scores; rank the documents of a query by decreasing score.
        """
        return self.decision_function(X)

    def save(self, path) -> None:
        """Write a portable model file (arrays plus JSON metadata, no pickle).

        See :mod:`bmrm.io.model_files` for the format; the file is replaced atomically. The
        file holds the weights (K × d for the expected-gain scorer), the intercept, the
        loss, lam, the regularizer, the scorer (name, version, parameters, and its gains)
        and the solver's result whatever the method that made it (a :class:`BMRMResult`, or
        a scipy result read from an older file, with its ``method`` field), and the
        DataFrame column names of the fit (``feature_names_in_``), so that
        :func:`bmrm.load` gives a model with the same predictions, bit for bit, that refuses
        the same DataFrames.

        Parameters
        ----------
        path : str or path-like
            The file to write.

        Raises
        ------
        ValueError
            For a callable regularizer, a built-in loss whose parameters JSON cannot hold, a
            scorer that cannot be rebuilt from its name and parameters (a user's own scorer
            object), non-finite weights, or a result that is not a scipy
            ``OptimizeResult``; nothing is written then.
        OSError
            When the file cannot be written; ``path`` is then left as it was.

        Notes
        -----
        A user's own loss object (one that no built-in name and parameters rebuild) is
        saved by its description only (class and ``repr``): :func:`bmrm.load` gives a model
        that predicts, whose ``loss`` is a :class:`~bmrm.io.model_files.UserLoss` that
        refuses to fit, saying that refitting needs the original loss object.
        """
        write_model_file(self._record(), path)

    def _record(self) -> ModelRecord:
        """The plain values a model file holds."""
        lam = self.lam
        # the rule bmrm.load applies to the file's lam
        if (
            isinstance(lam, bool | np.bool_)
            or not isinstance(lam, numbers.Real)
            or not np.isfinite(lam)
            or lam <= 0
        ):
            raise ValueError(
                f"cannot save a model whose lam is {lam!r}: it must be a finite number > 0"
            )
        spec = self.regularizer.spec()
        name, params, user = _loss_spec(self.loss)
        record = ModelRecord(self.coef_, self.intercept_, self.lam, spec, name, params)
        record.loss_user = user
        names = getattr(self, "feature_names_in_", None)
        record.feature_names = None if names is None else list(names)
        _scorer_values(self.scorer_, self.coef_, record)
        if self.result_ is not None:
            _result_values(self.result_, record)
        return record

    def __repr__(self) -> str:
        return (
            f"LinearModel(n_features={self.n_features_in_}, loss={self.loss!r}, "
            f"lam={self.lam!r}, status={self.result_.status if self.result_ else None})"
        )


def _feature_names(X) -> np.ndarray | None:
    """The column names of a DataFrame X when they are all strings, else None."""
    columns = getattr(X, "columns", None)
    if columns is None or not hasattr(X, "iloc"):
        return None
    names = list(columns)
    if not names or not all(isinstance(name, str) for name in names):
        return None
    return np.asarray(names, dtype=object)


def _check_feature_names(X, fitted) -> None:
    """Refuse a DataFrame X whose string column names differ from the fitted ones."""
    names = _feature_names(X)
    if fitted is None or names is None:
        return
    if names.shape != fitted.shape or np.any(names != fitted):
        unseen = [name for name in names if name not in set(fitted)]
        missing = [name for name in fitted if name not in set(names)]
        detail = (
            "they must be in the same order as they were in fit"
            if not unseen and not missing
            else f"unseen at fit time: {unseen}; seen at fit time, yet now missing: {missing}"
        )
        raise ValueError(
            f"X has feature names {list(names)}, but the model was fitted with "
            f"{list(fitted)}: the feature names should match those that were passed during "
            f"fit ({detail})"
        )


def _loss_spec(loss) -> tuple[str | None, dict, str | None]:
    """The name and parameters that rebuild ``loss`` with :func:`losses.get`, or, for the
    user's own loss object (which no name rebuilds), ``(None, {}, description)``."""
    if isinstance(loss, UserLoss):
        return None, {}, loss.description
    name = getattr(loss, "name", None)
    kind = type(loss)
    if name not in losses.available() or type(losses.get(name)) is not kind:
        return None, {}, f"{kind.__module__}.{kind.__qualname__}: {loss!r}"
    try:
        params = json.loads(json.dumps(loss.get_params(), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"cannot save a model with loss {loss!r}: its parameters are not "
            f"JSON-serialisable ({exc})"
        ) from exc
    rebuilt = losses.get(name, **params)
    if type(rebuilt) is not kind or rebuilt.get_params() != params:
        raise ValueError(
            f"cannot save a model with loss {loss!r}: losses.get({name!r}, **{params!r}) does "
            "not rebuild it"
        )
    return name, params, None


# values a scorer derives from its parameters, stored so that a reader can check them
_SCORER_ARRAYS = ("gains",)


def _scorer_values(scorer, coef: np.ndarray, record: ModelRecord) -> None:
    """Store the scorer's name, version, parameters and derived arrays in ``record``."""
    if scorer is None:
        scorer = LinearScorer()
    name = getattr(scorer, "name", None)
    try:
        builtin = type(get_scorer(name)) if isinstance(name, str) else None
    except ValueError:
        builtin = None
    if builtin is None or type(scorer) is not builtin:
        raise ValueError(
            f"cannot save a model with scorer {scorer!r}: only the built-in scorers "
            "'linear' and 'expected_gain' are stored (by name and parameters)"
        )
    try:
        params = json.loads(json.dumps(scorer.get_params(), allow_nan=False))
        rebuilt = builtin(**params)
        n_params = scorer.n_params(coef.shape[-1])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"cannot save a model with scorer {scorer!r}: {exc}") from exc
    if rebuilt.get_params() != params:
        raise ValueError(
            f"cannot save a model with scorer {scorer!r}: {builtin.__name__}(**{params!r}) "
            "does not rebuild it"
        )
    expected = (n_params,) if name == "linear" else (n_params // coef.shape[-1], coef.shape[-1])
    if coef.shape != expected:
        raise ValueError(
            f"cannot save a model whose coef_ has shape {coef.shape}: scorer {scorer!r} "
            f"takes shape {expected}"
        )
    record.scorer_name = name
    record.scorer_version = int(builtin.version)
    record.scorer_params = params
    record.scorer_arrays = {
        key: np.asarray(getattr(scorer, key)) for key in _SCORER_ARRAYS if hasattr(scorer, key)
    }


def _result_values(result, record: ModelRecord) -> None:
    """Store the fields of a solver result in ``record``, whatever the method.

    Scalars (numbers, strings, booleans, None), numeric arrays and dicts of numeric arrays
    (the history) are stored; other fields (scipy's ``hess_inv`` operator) are listed as
    omitted.
    """
    from scipy.optimize import OptimizeResult

    from bmrm.solver.loop import BMRMResult

    if not isinstance(result, OptimizeResult):
        raise ValueError(
            f"cannot save a model whose result_ is a {type(result).__name__}: model files "
            "store a BMRMResult or a scipy OptimizeResult"
        )

    def numeric(value) -> bool:
        return isinstance(value, np.ndarray) and value.dtype.kind in "biuf"

    fields, arrays, omitted = {}, {}, []
    for key, value in result.items():
        if not isinstance(key, str) or "." in key:
            omitted.append(str(key))
        elif value is None or isinstance(value, bool | str | int | float | np.number | np.bool_):
            fields[key] = value
        elif numeric(value):
            arrays[key] = value
        elif (
            isinstance(value, dict)
            and all(isinstance(k, str) and "." not in k and numeric(v) for k, v in value.items())
        ):  # fmt: skip
            arrays[key] = dict(value)
        else:
            omitted.append(key)
    if isinstance(result, BMRMResult):
        record.result_type = BMRM_RESULT
        missing = [f for f in HISTORY_FIELDS if f not in arrays.get("history", {})]
        if missing:
            raise ValueError(f"cannot save a model whose result_.history lacks {missing}")
    else:
        record.result_type = "OptimizeResult"
    record.result_fields = fields
    record.result_arrays = arrays
    record.result_omitted = omitted


def save(model: LinearModel, path) -> None:
    """Write ``model`` to ``path``; the same as ``model.save(path)``.

    Parameters
    ----------
    model : LinearModel
        The model to write.
    path : str or path-like
        The file to write (replaced atomically).
    """
    model.save(path)


def load(path, *, n_features: int | None = None, data: bytes | None = None) -> LinearModel:
    """Read a model file written by :meth:`LinearModel.save`; never unpickles.

    Parameters
    ----------
    path : str or path-like
        The model file (named in error messages).
    n_features : int or None, default=None
        When given, the number of features the model must have.
    data : bytes or None, default=None
        The file's bytes, when already read; ``path`` then only names it.

    Returns
    -------
    LinearModel
        ``coef_`` and ``intercept_`` bit for bit as saved, ``loss`` rebuilt with
        ``losses.get(name, **params)`` (a :class:`~bmrm.io.model_files.UserLoss` naming the
        user's own loss of the fit, which cannot fit again), ``lam``, ``regularizer``,
        ``scorer_`` (None for the linear scorer, else the scorer rebuilt from its name and
        parameters), and
        ``result_``: a :class:`bmrm.BMRMResult` or scipy ``OptimizeResult`` with every field
        the file holds (for a bundle-method fit: status, message, fun, lower_bound, gap, nit,
        nfev, bundle size, timings, ``x`` and ``history``; for other methods such as
        L-BFGS, their fields and ``method``), or None if the model was saved without one.

    Raises
    ------
    ValueError
        Naming ``path``: those of :func:`~bmrm.io.model_files.read_model_file`, and for a
        regularizer spec, loss or scorer that cannot be rebuilt (a scorer name this bmrm
        does not know, or a newer version of a scorer), or a malformed result.
    OSError
        When the file cannot be read.
    """
    check_int(n_features, "n_features", 1, allow_none=True)
    record = read_model_file(path, n_features=n_features, data=data)
    where = os.fspath(path)
    try:
        regularizer = from_spec(record.regularizer)
    except ValueError as exc:
        raise ValueError(f"{where}: malformed model file: {exc}") from None
    try:
        loss = (
            UserLoss(record.loss_user)
            if record.loss_name is None
            else losses.get(record.loss_name, **record.loss_params)
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{where}: cannot rebuild loss {record.loss_name!r} with parameters "
            f"{record.loss_params}: {exc}"
        ) from None
    check_model_values(where, record.coef, record.lam, regularizer)
    scorer = _load_scorer(record, where)
    result = _load_result(record, where)
    model = LinearModel(
        record.coef, record.intercept, loss, record.lam, regularizer, result, scorer
    )
    if record.feature_names is not None:
        model.feature_names_in_ = np.asarray(record.feature_names, dtype=object)
    return model


def _load_scorer(record: ModelRecord, where: str):
    """The scorer a record names (None for the linear one), checked against the weights."""
    name, version, params = record.scorer_name, record.scorer_version, record.scorer_params
    try:
        builtin = type(get_scorer(name))
    except ValueError:
        raise ValueError(
            f"{where}: the model uses scorer {name!r}, which this bmrm does not know (it "
            "knows 'linear' and 'expected_gain'); load it with the bmrm that wrote it"
        ) from None
    if version > builtin.version or version < 1:
        raise ValueError(
            f"{where}: the model uses version {version} of scorer {name!r}, but this bmrm "
            f"has version {builtin.version}; "
            + ("upgrade bmrm to load it" if version > 1 else "malformed model file")
        )
    try:
        scorer = builtin(**params)
        d = record.coef.shape[-1]
        n_params = scorer.n_params(d)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{where}: cannot rebuild scorer {name!r} with parameters {params}: {exc}"
        ) from None
    expected = (n_params,) if name == "linear" else (n_params // d, d)
    if record.coef.shape != expected:
        raise ValueError(
            f"{where}: malformed model file: coef has shape {list(record.coef.shape)}, but "
            f"scorer {name!r} with parameters {params} takes {list(expected)}"
        )
    for key, stored in record.scorer_arrays.items():
        if key not in _SCORER_ARRAYS or not hasattr(scorer, key):
            raise ValueError(f"{where}: malformed model file: scorer {name!r} has no {key!r}")
        own = np.asarray(getattr(scorer, key))
        if own.shape != stored.shape or not np.array_equal(own, stored):
            raise ValueError(
                f"{where}: the file's scorer {key} {stored.tolist()} differ from those of "
                f"scorer {name!r} with parameters {params}: {own.tolist()}"
            )
    return None if name == "linear" else scorer


class _StoredResult:
    """A solver result as a model file holds it, built on first use (see the module
    docstring); the file's values were checked when it was read."""

    def __init__(self, result_type: str, fields: dict, arrays: dict):
        self.result_type, self.fields, self.arrays = result_type, fields, arrays

    def build(self):
        from scipy.optimize import OptimizeResult

        from bmrm.solver.loop import BMRMResult

        kind = BMRMResult if self.result_type == BMRM_RESULT else OptimizeResult
        return kind(**self.fields, **self.arrays)


def _load_result(record: ModelRecord, where: str) -> _StoredResult | None:
    """The solver result a record holds, checked (built when first read), or None."""
    if record.result_type is None:
        return None
    fields, arrays = record.result_fields, record.result_arrays
    if record.result_type == BMRM_RESULT:
        history = arrays.get("history")
        if not isinstance(history, dict) or not set(HISTORY_FIELDS) <= set(history):
            raise ValueError(
                f"{where}: malformed model file: the history holds "
                f"{sorted(history) if isinstance(history, dict) else None}, not "
                f"{sorted(HISTORY_FIELDS)}"
            )
    elif record.result_type != "OptimizeResult":
        raise ValueError(
            f"{where}: malformed model file: result type {record.result_type!r} is neither "
            f"{BMRM_RESULT!r} nor 'OptimizeResult'"
        )
    return _StoredResult(record.result_type, fields, arrays)

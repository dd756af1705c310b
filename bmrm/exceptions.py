"""Warnings of the package.

:class:`ConvergenceWarning` subclasses :class:`sklearn.exceptions.ConvergenceWarning`, so
``warnings.filterwarnings("ignore", category=sklearn.exceptions.ConvergenceWarning)`` and
scikit-learn's own tools treat the solver's warnings like those of its estimators. The
class is created on first use: importing any module of scikit-learn runs scikit-learn's
package initialisation, which code that never warns need not pay for.
"""

from __future__ import annotations

__all__ = ["ConvergenceWarning"]  # noqa: F822 (created on first use)


def interrupt_in(exc: BaseException) -> KeyboardInterrupt | None:
    """The interrupt a ``SystemError`` stands for, or None.

    A Ctrl-C that lands while a C extension runs Python code (numba's dispatcher typing an
    argument, for one) can surface as ``SystemError: ... returned a result with an exception
    set``, with the ``KeyboardInterrupt`` as its cause or context.

    Parameters
    ----------
    exc : BaseException
        The exception raised.

    Returns
    -------
    KeyboardInterrupt or None
        The interrupt behind ``exc`` when ``exc`` is such a ``SystemError``, else None.
    """
    if not isinstance(exc, SystemError):
        return None
    cause = exc.__cause__ or exc.__context__
    return cause if isinstance(cause, KeyboardInterrupt) else None


def _convergence_warning() -> type:
    from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning

    class ConvergenceWarning(SklearnConvergenceWarning):
        """The solver stopped before reaching the requested gap (max_iter reached)."""

    ConvergenceWarning.__module__ = "bmrm"
    ConvergenceWarning.__qualname__ = "ConvergenceWarning"
    return ConvergenceWarning


def __getattr__(name: str):
    if name == "ConvergenceWarning":
        cls = _convergence_warning()
        globals()["ConvergenceWarning"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Argument checks shared by :mod:`losses`, the metrics and :mod:`bmrm`.

Each check returns the value in its canonical type or raises ``ValueError`` naming the
argument and saying what was expected and what was given.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "check_bool",
    "check_finite_targets",
    "check_graded_labels",
    "check_int",
    "check_k",
    "check_positive",
    "check_real",
]


# Largest relevance level: float64 holds every integer up to 2^53 exactly, and int64 holds it.
MAX_LEVEL = 2**53


def check_real(value, name: str, *, low: float | None = None, strict: bool = False) -> float:
    """Return ``value`` as a float after checking that it is a finite real number.

    Parameters
    ----------
    value : object
        The argument to check; a bool is refused.
    name : str
        The argument's name, for the message.
    low : float or None, default=None
        The smallest value allowed (excluded when ``strict``); None allows any.
    strict : bool, default=False
        Whether ``low`` itself is refused.

    Returns
    -------
    float
        ``value`` as a float.

    Raises
    ------
    ValueError
        When ``value`` is not a finite real number or is below ``low``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number; got {value!r}")
    if low is not None and (value <= low if strict else value < low):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {low:g}; got {value!r}")
    return float(value)


def check_positive(value, name: str, *, strict: bool = True) -> float:
    """Return ``value`` as a float after checking that it is a finite number > 0.

    Parameters
    ----------
    value : object
        The argument to check.
    name : str
        The argument's name, for the message.
    strict : bool, default=True
        Whether 0 is refused; when False, ``value`` must be >= 0.

    Returns
    -------
    float
        ``value`` as a float.

    Raises
    ------
    ValueError
        When ``value`` is not a finite real number, or is not positive.
    """
    return check_real(value, name, low=0.0, strict=strict)


def check_bool(value, name: str) -> bool:
    """Return ``value`` as a bool after checking that it is True or False.

    Parameters
    ----------
    value : object
        The argument to check: a Python or NumPy bool, not a number or a string.
    name : str
        The argument's name, for the message.

    Returns
    -------
    bool
        ``value`` as a Python bool.

    Raises
    ------
    ValueError
        When ``value`` is not a bool.
    """
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"{name} must be True or False; got {value!r}")
    return bool(value)


def check_int(value, name: str, minimum: int, *, allow_none: bool = False) -> int | None:
    """Return ``value`` as an int after checking that it is an integer >= ``minimum``.

    Parameters
    ----------
    value : object
        The argument to check; a bool is refused.
    name : str
        The argument's name, for the message.
    minimum : int
        The smallest value allowed.
    allow_none : bool, default=False
        Whether None is allowed (and returned).

    Returns
    -------
    int or None
        ``value`` as an int, or None.

    Raises
    ------
    ValueError
        When ``value`` is not an integer of at least ``minimum`` (or None when allowed).
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(
            f"{name} must be an integer >= {minimum}{' or None' if allow_none else ''}; "
            f"got {value!r}"
        )
    return int(value)


# Largest cut-off: the kernels take k as an int64.
MAX_K = 2**63 - 1


def check_k(k, *, allow_none: bool = True) -> int | None:
    """Return the cut-off ``k`` after checking it.

    Parameters
    ----------
    k : object
        The cut-off: an integer in [1, 2**63 − 1] (the kernels' int64), or None (the whole
        list).
    allow_none : bool, default=True
        Whether None is allowed.

    Returns
    -------
    int or None
        ``k`` as an int, or None.

    Raises
    ------
    ValueError
        When ``k`` is not an integer in that range (or None when allowed).
    """
    k = check_int(k, "k", 1, allow_none=allow_none)
    if k is not None and k > MAX_K:
        raise ValueError(f"k must be at most 2**63 - 1 (the kernels' int64); got {k!r}")
    return k


def check_finite_targets(y, *, name: str = "y") -> np.ndarray:
    """Return ``y`` as a float64 1-d array, rejecting NaN and inf.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Targets of a bool, integer or float dtype.
    name : str, default="y"
        The argument's name, for the message.

    Returns
    -------
    ndarray of shape (n_samples,), float64
        The targets.

    Raises
    ------
    ValueError
        When ``y`` is not 1-d, not real, or holds NaN or inf.
    """
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-d; got shape {y.shape}")
    if y.dtype.kind not in "biuf":
        raise ValueError(
            f"{name} must hold real numbers (a bool, integer or float dtype); got dtype {y.dtype}"
        )
    y = y.astype(np.float64, copy=False)
    if not np.all(np.isfinite(y)):
        raise ValueError(f"{name} must not contain NaN or inf")
    return y


def check_graded_labels(y, *, name: str = "y") -> np.ndarray:
    """Return ``y`` as int64 relevance levels.

    Rejects negative, non-integer and too large values: levels above ``2**53`` are not exact
    integers in float64 and would wrap around in int64, changing the order of the labels.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Relevance levels: non-negative integers (of any real dtype).
    name : str, default="y"
        The argument's name, for the message.

    Returns
    -------
    ndarray of shape (n_samples,), int64
        The levels.

    Raises
    ------
    ValueError
        When ``y`` is not 1-d or holds a value that is not a non-negative integer up to
        ``2**53``.
    """
    y = check_finite_targets(y, name=name)
    if y.size and (np.any(y < 0) or np.any(y != np.round(y))):
        bad = float(y[(y < 0) | (y != np.round(y))][0])
        raise ValueError(f"{name} must hold non-negative integer relevance levels; got {bad!r}")
    if y.size and y.max() > MAX_LEVEL:
        raise ValueError(
            f"{name} must hold relevance levels <= 2**53 (exact integers); got {float(y.max())!r}"
        )
    return y.astype(np.int64)

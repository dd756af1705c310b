"""The kernels' own sorts against numpy's stable sort."""

import numpy as np
import pytest

from losses._kernels.sorting import (
    RADIX_MIN,
    argsort_float,
    argsort_float_descending,
    argsort_stable,
    sorted_copy,
)


@pytest.mark.parametrize("m", [0, 1, 2, 15, 16, 17, 33, 100, 1000, 4099])
@pytest.mark.parametrize("kind", ["distinct", "ties", "all_equal", "int"])
def test_argsort_stable_matches_numpy(m, kind):
    rng = np.random.default_rng(m)
    if kind == "distinct":
        x = rng.standard_normal(m)
    elif kind == "ties":
        x = rng.integers(0, 4, size=m).astype(np.float64)
    elif kind == "all_equal":
        x = np.full(m, 2.5)
    else:
        x = rng.integers(-3, 3, size=m)
    np.testing.assert_array_equal(argsort_stable(x), np.argsort(x, kind="stable"))
    np.testing.assert_array_equal(sorted_copy(x), np.sort(x, kind="stable"))
    # descending with ties in index order, as the ranking kernels use it
    np.testing.assert_array_equal(argsort_stable(-x), np.argsort(-x, kind="stable"))


def _float_cases(rng, m):
    """Float64 arrays of length m: distinct, tied, all equal, signed zeros, infinities and
    subnormals, extreme magnitudes."""
    return [
        rng.standard_normal(m),
        rng.integers(-3, 4, m) * 0.5,
        np.full(m, -2.5),
        np.where(rng.random(m) < 0.5, -0.0, 0.0),
        rng.choice([-np.inf, -1e300, -5e-324, -0.0, 0.0, 5e-324, 1e-310, 7.0, np.inf], m),
        rng.standard_normal(m) * 1e300,
        np.round(rng.standard_normal(m), 1),
    ]


@pytest.mark.parametrize("m", [0, 1, 2, 17, RADIX_MIN - 1, RADIX_MIN, RADIX_MIN + 1, 200, 4099])
def test_argsort_float_matches_numpy_stable_sort(m):
    rng = np.random.default_rng(m + 11)
    for x in _float_cases(rng, m):
        np.testing.assert_array_equal(argsort_float(x), np.argsort(x, kind="stable"))
        # descending, ties in index order (numpy's stable sort of -x)
        np.testing.assert_array_equal(argsort_float_descending(x), np.argsort(-x, kind="stable"))


@pytest.mark.parametrize("m", [5, RADIX_MIN + 5, 300])
def test_argsort_float_with_nan_takes_the_comparison_sort(m):
    rng = np.random.default_rng(m)
    x = rng.standard_normal(m)
    x[[1, m // 2]] = np.nan
    np.testing.assert_array_equal(argsort_float(x), argsort_stable(x))
    np.testing.assert_array_equal(argsort_float_descending(x), argsort_stable(-x))
    assert sorted(argsort_float_descending(x)) == list(range(m))


def test_argsort_float_from_compiled_code_on_slices():
    # as the kernels call it: on a contiguous slice of a longer array, from a kernel
    from numba import njit

    @njit
    def by_query(f, ptr, out):
        for q in range(ptr.shape[0] - 1):
            a, b = ptr[q], ptr[q + 1]
            order = argsort_float_descending(f[a:b])
            for i in range(b - a):
                out[a + i] = a + order[i]

    rng = np.random.default_rng(3)
    sizes = [0, 1, RADIX_MIN - 1, RADIX_MIN, 250, 3]
    ptr = np.concatenate(([0], np.cumsum(sizes)))
    f = np.round(rng.standard_normal(ptr[-1]), 1)
    out = np.empty(ptr[-1], dtype=np.int64)
    by_query(f, ptr, out)
    for q in range(len(sizes)):
        a, b = ptr[q], ptr[q + 1]
        np.testing.assert_array_equal(out[a:b], a + np.argsort(-f[a:b], kind="stable"))

"""The kernels' own sorts against numpy's stable sort."""

import numpy as np
import pytest

from losses._kernels.sorting import argsort_stable, sorted_copy


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

"""The bundle on its own: its Gram matrix, pruning, aggregation and the zero plane.

References: A Aᵀ computed by numpy from the planes the bundle holds, and the L2 master
optimum min_w lam/2 ‖w‖² + max_i (<a_i, w> + b_i) solved by cvxpy from those planes.
"""

import cvxpy as cp
import numpy as np
import pytest

from bmrm.solver.bundle import Bundle


def planes(bundle):
    k = bundle.size
    return bundle.A[:k].copy(), bundle.b[:k].copy()


def assert_gram(bundle):
    A, _ = planes(bundle)
    np.testing.assert_allclose(bundle.G[: bundle.size, : bundle.size], A @ A.T, atol=1e-10)


def assert_zero_plane(bundle):
    assert np.all(bundle.A[0] == 0.0) and bundle.b[0] == 0.0


def master_optimum(A, b, lam):
    w = cp.Variable(A.shape[1])
    problem = cp.Problem(cp.Minimize(lam / 2 * cp.sum_squares(w) + cp.max(A @ w + b)))
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    return problem.value


def tight_bundle(rng, k, d, lam, capacity):
    """k planes all tight at the master optimum, with optimal dual weights alpha > 0.

    w* = −Aᵀα/lam and b_i = c − <a_i, w*> make every plane equal c > 0 at w*, so (w*, α)
    satisfies the master's KKT conditions and α is its optimal dual (the zero plane, 0 at
    w*, is inactive with weight 0).
    """
    A = rng.normal(size=(k, d))
    alpha = rng.dirichlet(np.ones(k))
    w_star = -(alpha @ A) / lam
    b = 1.0 - A @ w_star
    bundle = Bundle(d, capacity=capacity)
    for a_i, b_i in zip(A, b, strict=True):
        bundle.add(a_i, b_i)
    bundle.set_weights(np.r_[0.0, alpha])
    optimum = lam / 2 * w_star @ w_star + 1.0
    return bundle, optimum


@pytest.mark.parametrize("seed", range(5))
def test_gram_matrix_after_adds_growth_and_pruning(seed):
    rng = np.random.default_rng(seed)
    d = 7
    bundle = Bundle(d, capacity=40, max_idle=3)
    assert_zero_plane(bundle)
    for _ in range(120):
        bundle.add(rng.normal(size=d) * rng.uniform(0.1, 10), float(rng.normal()))
        k = bundle.size
        assert k <= bundle.capacity
        # random sparse weights: some planes go idle and get pruned or make room
        alpha = np.where(rng.random(k) < 0.3, rng.random(k), 0.0)
        alpha[0] += 1e-3
        bundle.set_weights(alpha / alpha.sum())
        bundle.prune_idle()
        assert_gram(bundle)
        assert_zero_plane(bundle)
        assert np.all(np.diff(bundle.ids[: bundle.size]) > 0)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("lam", [1e-2, 1.0])
def test_aggregation_keeps_the_master_optimum(seed, lam):
    rng = np.random.default_rng(seed)
    k, d = 9, 12
    bundle, optimum = tight_bundle(rng, k, d, lam, capacity=k + 1)
    A, b = planes(bundle)
    assert master_optimum(A, b, lam) == pytest.approx(optimum, rel=1e-7)
    # the bundle is full and every plane active: the next plane forces an aggregation;
    # this one lies far below the model, so it cannot change the optimum
    bundle.add(np.zeros(d), -100.0)
    assert bundle.n_aggregations == 1
    assert bundle.size < k + 1
    assert_gram(bundle)
    assert_zero_plane(bundle)
    A, b = planes(bundle)
    assert master_optimum(A, b, lam) == pytest.approx(optimum, rel=1e-7)
    # the aggregate carries the merged weight: the weights still sum to one
    assert bundle.alpha[: bundle.size - 1].sum() == pytest.approx(1.0)


@pytest.mark.parametrize("seed", range(4))
def test_making_room_drops_only_planes_without_weight(seed):
    rng = np.random.default_rng(seed)
    k, d, lam = 8, 5, 0.1
    bundle, optimum = tight_bundle(rng, k, d, lam, capacity=k + 4)
    # three planes that never get weight: a full bundle drops them, not the active ones
    for _ in range(3):
        bundle.add(rng.normal(size=d), -50.0)
    bundle.set_weights(np.r_[bundle.alpha[: k + 1], 0.0, 0.0, 0.0])
    active = bundle.ids[1 : k + 1].copy()
    bundle.add(np.zeros(d), -100.0)
    assert bundle.n_aggregations == 0
    np.testing.assert_array_equal(bundle.ids[1 : k + 1], active)
    assert bundle.size == k + 2
    assert_gram(bundle)
    assert_zero_plane(bundle)
    A, b = planes(bundle)
    assert master_optimum(A, b, lam) == pytest.approx(optimum, rel=1e-7)


def test_zero_plane_is_kept_when_idle():
    rng = np.random.default_rng(0)
    bundle = Bundle(3, capacity=5, max_idle=1)
    for _ in range(30):
        bundle.add(rng.normal(size=3), 1.0)
        alpha = np.zeros(bundle.size)
        alpha[-1] = 1.0  # the zero plane never has weight
        bundle.set_weights(alpha)
        bundle.prune_idle()
        assert_zero_plane(bundle)
        assert_gram(bundle)
    assert bundle.size <= 5


def test_idle_planes_are_pruned_in_batches():
    d = 4
    bundle = Bundle(d, capacity=100, max_idle=2)
    for i in range(40):
        bundle.add(np.full(d, float(i + 1)), 0.0)
    weights = np.zeros(bundle.size)
    weights[-1] = 1.0
    bundle.set_weights(weights)
    bundle.prune_idle()
    assert bundle.size == 41  # idle once: not yet due
    bundle.set_weights(weights)
    bundle.prune_idle()
    # the zero plane and the weighted plane remain
    assert bundle.size == 2
    np.testing.assert_array_equal(bundle.A[1], np.full(d, 40.0))
    assert_zero_plane(bundle)
    assert_gram(bundle)


def test_capacity_below_three_is_an_error():
    with pytest.raises(ValueError, match="bundle_size must be at least 3"):
        Bundle(2, capacity=2)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("columns", [1, 5, 1 << 14])
def test_aggregate_and_kept_rows_by_column_blocks(monkeypatch, seed, columns):
    """The aggregate is weights @ A[merged] and the kept rows are the rows kept, whether
    the combination runs over blocks of any number of columns or all of them at once."""
    from bmrm.solver import bundle as bundle_module

    monkeypatch.setattr(bundle_module, "_COLUMNS", columns)
    rng = np.random.default_rng(seed)
    k, d, lam = 7, 23, 0.5
    bundle, optimum = tight_bundle(rng, k, d, lam, capacity=k + 1)
    A_before = bundle.A[: bundle.size].copy()
    alpha = bundle.alpha[: bundle.size].copy()
    ids = bundle.ids[: bundle.size].copy()
    bundle.add(np.zeros(d), -100.0)  # full, every plane active: the lighter half merges
    assert bundle.n_aggregations == 1
    m = bundle.size - 2  # the aggregate, then the new plane
    np.testing.assert_array_equal(bundle.A[m + 1], 0.0)
    kept = np.searchsorted(ids, bundle.ids[:m])
    assert np.array_equal(ids[kept], bundle.ids[:m])
    np.testing.assert_array_equal(bundle.A[:m], A_before[kept])
    merged = np.setdiff1d(np.arange(len(ids)), kept)
    weights = alpha[merged] / alpha[merged].sum()
    np.testing.assert_allclose(bundle.A[m], weights @ A_before[merged], rtol=1e-14, atol=1e-15)
    A, b = planes(bundle)
    assert master_optimum(A, b, lam) == pytest.approx(optimum, rel=1e-7)

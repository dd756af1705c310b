"""The dedicated dual QP against cvxpy on random and degenerate bundles."""

import zlib

import cvxpy as cp
import numpy as np
import pytest

from bmrm.solver import qp
from bmrm.solver.bundle import Bundle
from bmrm.solver.masters import CvxpyMaster, QPMaster
from bmrm.solver.qp import solve_simplex_qp, solve_simplex_qp_active_set


def numpy_active_set(Q, b, alpha, grad, tol, max_iter):
    """The NumPy transcription of the active-set method, called as
    :func:`solve_simplex_qp_active_set` calls the compiled one."""
    k = len(b)
    tau = float(np.max(np.diagonal(Q), initial=0.0)) or 1.0
    L, S = np.zeros((k, k)), np.empty(k, dtype=np.int64)
    iterations, violation, _ = qp._active_set_numpy(Q, b, alpha, grad, tol, max_iter, L, S, 0, tau)
    return iterations, violation


ACTIVE_SETS = [solve_simplex_qp_active_set, numpy_active_set]


def cvxpy_master_value(A, b, lam):
    """min_w lam/2 ||w||^2 + max(0, max_i <a_i, w> + b_i), as one cvxpy problem."""
    w = cp.Variable(A.shape[1])
    model = cp.maximum(0, cp.max(A @ w + b))
    prob = cp.Problem(cp.Minimize(lam / 2 * cp.sum_squares(w) + model))
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return prob.value


def random_bundle(rng, k, d, kind):
    A = rng.normal(size=(k, d)) * rng.uniform(0.1, 10)
    b = rng.normal(size=k)
    if kind == "duplicates":
        idx = rng.integers(0, k, size=k)
        A, b = A[idx], b[idx]
    elif kind == "collinear":
        A = np.outer(rng.normal(size=k), rng.normal(size=d))
    elif kind == "identical":
        A = np.repeat(A[:1], k, axis=0)
        b = np.repeat(b[:1], k)
    elif kind == "zero":
        A[: k // 2] = 0.0
    elif kind == "low_rank":
        A = rng.normal(size=(k, 2)) @ rng.normal(size=(2, d))
    return A, b


def bundle_of(A, b):
    bundle = Bundle(A.shape[1], capacity=max(3, len(b) + 1))
    for a_i, b_i in zip(A, b, strict=True):
        bundle.add(a_i, b_i)
    return bundle


KINDS = ["random", "duplicates", "collinear", "identical", "zero", "low_rank"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("k,d", [(1, 3), (2, 2), (7, 3), (40, 10), (200, 136)])
@pytest.mark.parametrize("lam", [1e-4, 1e-1, 10.0])
@pytest.mark.parametrize("seed", range(3))
def test_qp_master_agrees_with_cvxpy(kind, k, d, lam, seed):
    rng = np.random.default_rng(zlib.crc32(f"{kind}-{k}-{d}-{lam}-{seed}".encode()))
    A, b = random_bundle(rng, k, d, kind)
    bundle = bundle_of(A, b)
    master = QPMaster(lam)
    w, lower, alpha = master.solve(bundle)
    ref = cvxpy_master_value(A, b, lam)
    # the active-set solver finishes on its own, degenerate bundles included
    assert master.fallbacks == 0
    assert alpha.min() >= 0 and alpha.sum() == pytest.approx(1.0, abs=1e-12)
    # lower bound (dual value) and the primal value at w bracket the optimum, closely: over
    # this grid, relative to max(1, |ref|), |lower − ref| <= 1.5e-10 and primal − ref
    # <= 1.0e-9 (the reference's own error included); 1e-8 leaves a margin of 10
    primal = lam / 2 * w @ w + max(0.0, np.max(A @ w + b))  # with the zero plane
    scale = max(1.0, abs(ref))
    assert -1e-8 * scale <= lower - ref <= 1e-9 * scale
    assert -1e-9 * scale <= primal - ref <= 1e-8 * scale


@pytest.mark.parametrize("kind", KINDS)
def test_cvxpy_master_agrees_with_qp_master(kind):
    rng = np.random.default_rng(7)
    A, b = random_bundle(rng, 30, 5, kind)
    bundle = bundle_of(A, b)
    lam = 1e-2
    _, qp_lower, _ = QPMaster(lam).solve(bundle)
    w, cx_lower, alpha = CvxpyMaster(5, bundle.capacity, lam, "l2").solve(bundle)
    assert cx_lower == pytest.approx(qp_lower, rel=1e-6, abs=1e-9)
    assert alpha.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("solver", [solve_simplex_qp, *ACTIVE_SETS])
def test_simplex_qp_kkt_and_warm_start(solver):
    rng = np.random.default_rng(3)
    A = rng.normal(size=(60, 8))
    Q = A @ A.T
    b = rng.normal(size=60)
    alpha = np.full(60, 1 / 60)
    grad = np.empty(60)
    steps, violation = solver(Q, b, alpha, grad, 1e-12, 10**6)
    assert violation <= 1e-12
    np.testing.assert_allclose(grad, Q @ alpha - b, atol=1e-9)
    support = alpha > 0
    assert grad[support].max() - grad.min() <= 1e-12
    again = alpha.copy()
    steps_warm, _ = solver(Q, b, again, grad, 1e-12, 10**6)
    assert steps_warm <= 1
    np.testing.assert_allclose(again, alpha, atol=1e-12)


def brute_force_simplex_qp(Q, b):
    """Minimum of ½αᵀQα − bᵀα over the simplex by enumerating every support.

    On each support S the minimiser over {Σα = 1} solves the bordered KKT system (least
    squares when singular); the best such point that is feasible is the optimum. (An optimum
    with the fewest nonzeros has an affinely independent support, where the system is
    regular: along a flat direction inside a dependent support the objective is linear with
    zero slope, so weight can move until a coordinate vanishes.)
    """
    k = len(b)
    best = np.inf
    for mask in range(1, 2**k):
        S = [i for i in range(k) if mask >> i & 1]
        m = len(S)
        K = np.zeros((m + 1, m + 1))
        K[:m, :m] = Q[np.ix_(S, S)]
        K[:m, m] = K[m, :m] = 1.0
        x = np.linalg.lstsq(K, np.concatenate([b[S], [1.0]]), rcond=None)[0][:m]
        if x.min() < -1e-12 or abs(x.sum() - 1) > 1e-9:
            continue
        alpha = np.zeros(k)
        alpha[S] = np.maximum(x, 0) / np.maximum(x, 0).sum()
        best = min(best, 0.5 * alpha @ Q @ alpha - b @ alpha)
    return best


@pytest.mark.parametrize("solver", ACTIVE_SETS)
@pytest.mark.parametrize("seed", range(60))
def test_active_set_matches_enumeration_of_supports(seed, solver):
    """Small degenerate problems: repeated, collinear, zero and all-equal planes, ties in b."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 8))
    d = int(rng.integers(1, 4))
    A = rng.integers(-2, 3, size=(k, d)).astype(float)
    b = rng.integers(-2, 3, size=k).astype(float)
    if seed % 3 == 0:
        A[rng.integers(0, k, size=k)] = A[0]
    Q = A @ A.T * rng.choice([1e-2, 1.0, 1e2])
    start = rng.dirichlet(np.ones(k)) if seed % 2 else np.eye(k)[k - 1]
    alpha = start.copy()
    grad = np.empty(k)
    _, violation = solver(Q, b, alpha, grad, 1e-12, 10**5)
    assert violation <= 1e-9 * (1 + np.abs(Q).max())
    assert alpha.min() >= 0 and alpha.sum() == pytest.approx(1.0, abs=1e-12)
    value = 0.5 * alpha @ Q @ alpha - b @ alpha
    assert value == pytest.approx(brute_force_simplex_qp(Q, b), abs=1e-9 * (1 + np.abs(Q).max()))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("lam", [1e-6, 1e-2, 10.0])
def test_numpy_and_compiled_masters_agree_along_a_fit_like_sequence(kind, lam, monkeypatch):
    """Planes arrive one at a time and each solve is warm-started from the last one's
    weights and factor, as in a fit: the NumPy method (small bundles) and the compiled one
    (large bundles) give the same weights, bounds and iterates to round-off."""
    rng = np.random.default_rng(zlib.crc32(f"{kind}-{lam}".encode()))
    A, b = random_bundle(rng, 60, 12, kind)
    runs = []
    for small in (10**6, 0):  # every bundle small, then every bundle large
        monkeypatch.setattr(qp, "SMALL_BUNDLE", small)
        monkeypatch.setattr(qp, "SMALL_SOLVES", small)
        bundle = Bundle(12, capacity=25)  # aggregation drops planes: inherited factors
        master = QPMaster(lam)
        out = []
        for a_i, b_i in zip(A, b, strict=True):
            bundle.add(a_i, b_i)
            w, lower, alpha = master.solve(bundle)
            bundle.set_weights(alpha)
            k = bundle.size
            # the KKT tolerance master_step asks for (QPMaster's tol 1e-11 relative to the
            # problem's scale): P(w) − D(α) is at most this much
            tol = 1e-11 * (
                1 + np.abs(bundle.b[:k]).max() + 1e-3 * np.diagonal(bundle.G)[:k].max() / lam
            )
            primal = lam / 2 * w @ w + np.max(bundle.A[:k] @ w + bundle.b[:k])
            assert -1e-12 * (1 + abs(lower)) <= primal - lower <= tol
            out.append((w, lower, tol))
        assert master.fallbacks == 0
        runs.append(out)
    for (w1, lo1, tol1), (w2, lo2, tol2) in zip(*runs, strict=True):
        # both are within their tolerance of the same optimum; lam-strong convexity of the
        # primal bounds the distance of each w to the minimiser by sqrt(2 tol / lam)
        assert abs(lo1 - lo2) <= tol1 + tol2
        assert np.linalg.norm(w1 - w2) <= np.sqrt(2 * tol1 / lam) + np.sqrt(2 * tol2 / lam)


@pytest.mark.parametrize("small_bundle,small_solves", [(100, 5), (6, 100)])
def test_a_master_takes_the_numpy_method_for_its_first_small_solves(
    small_bundle, small_solves, monkeypatch
):
    calls = []
    for name in ("_active_set_numpy", "active_set"):
        method = getattr(qp, name)

        def spy(*args, method=method, name=name):
            calls.append(name)
            return method(*args)

        monkeypatch.setattr(qp, name, spy)
    monkeypatch.setattr(qp, "SMALL_BUNDLE", small_bundle)
    monkeypatch.setattr(qp, "SMALL_SOLVES", small_solves)
    rng = np.random.default_rng(11)
    bundle, master = Bundle(4, capacity=30), QPMaster(0.1)
    sizes = []
    for _ in range(12):
        bundle.add(rng.normal(size=4), float(rng.normal()))
        bundle.set_weights(master.solve(bundle)[2])
        sizes.append(bundle.size)
    # one method call per solve here (a fresh factor is never needed twice)
    assert len(calls) == 12
    expected = [
        "_active_set_numpy" if i < small_solves and k <= small_bundle else "active_set"
        for i, k in enumerate(sizes)
    ]
    assert calls == expected
    assert "active_set" in calls and "_active_set_numpy" in calls


def test_aggregation_keeps_the_master_optimum():
    rng = np.random.default_rng(5)
    lam = 1e-2
    bundle = Bundle(6, capacity=5)
    master = QPMaster(lam)
    values = []
    for _ in range(40):
        bundle.add(rng.normal(size=6), rng.normal())
        w, lower, alpha = master.solve(bundle)
        bundle.set_weights(alpha)
        values.append(lower)
        assert bundle.size <= 5
    # merging or dropping planes never lowers the model's optimum below what the new plane
    # adds to it: the sequence of master optima is non-decreasing
    assert np.all(np.diff(values) >= -1e-10)
    assert bundle.n_aggregations > 0


@pytest.mark.parametrize("loss", ["squared", "hinge", "ordinal"])
@pytest.mark.parametrize("lam", [1e-8, 1e-6, 1e-3, 1e2, 1e6])
def test_fits_never_fall_back_from_the_active_set(loss, lam, monkeypatch):
    """Across ten decades of lam the exact solver finishes every master problem itself."""
    import bmrm

    seen = []
    solve = QPMaster.solve

    def recording(self, bundle, accuracy=0.0):
        out = solve(self, bundle, accuracy)
        seen.append(self.fallbacks)
        return out

    monkeypatch.setattr(QPMaster, "solve", recording)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 5))
    y = rng.integers(0, 4, size=300).astype(float)
    if loss == "hinge":
        y = np.where(y > 1, 1.0, -1.0)
    # the level method's QP master (auto would take Newton-CG for the squared loss)
    model = bmrm.fit(
        X, y, loss, np.repeat(np.arange(15), 20), lam=lam, tol=1e-4, max_iter=3000,
        method="level",
    )  # fmt: skip
    assert model.result_.status == 0
    assert seen and max(seen) == 0

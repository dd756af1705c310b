"""CofiRank's objective, step oracles, monotone fit, predictions and model files, against
dense references (U Vᵀ on small matrices, ``losses.risk`` per user, brute-force NDCG)."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import bmrm
import losses
from bmrm.collab import CofiRank, load
from bmrm.collab import model as model_module
from bmrm.collab._ratings import check_ratings
from bmrm.collab._steps import StepSettings, _convexified, solve_users, user_oracle
from bmrm.collab.model import (
    _Problem,
    _user_parts,
    _user_risks,
    batch_user_step,
    block_oracle,
    newton_steps,
)

LOSSES = [
    ("ndcg", None),
    ("ndcg", {"ties": "increasing"}),
    ("ordinal", None),
    ("squared", None),
    ("listnet", None),
    ("ordinal", {"hinge": "squared"}),
]


def random_ratings(seed, n_users=9, n_items=12, density=0.5, levels=5, zeros=True):
    """A users × items CSR matrix with graded ratings, some users with one rating or none,
    an item nobody rated, and explicit zero ratings."""
    rng = np.random.default_rng(seed)
    mask = rng.random((n_users, n_items)) < density
    mask[0] = False  # a user without ratings
    mask[1] = False
    mask[1, 3] = True  # a user with one rating
    mask[:, -1] = False  # an item nobody rated
    y = rng.integers(0 if zeros else 1, levels, size=(n_users, n_items))
    rows, cols = np.nonzero(mask)
    return sp.csr_matrix((y[rows, cols].astype(float), (rows, cols)), shape=(n_users, n_items))


def fitted(loss, params, ratings, offsets=False, seed=0, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CofiRank(
            loss=loss, loss_params=params, n_factors=3, lam=kw.pop("lam", 0.5),
            offsets=offsets, random_state=seed, max_iter=kw.pop("max_iter", 4), **kw,
        ).fit(ratings)  # fmt: skip


def dense_risk(loss, params, ratings, U, V, b, c):
    """Σ_users l(f_i, y_i) by losses.risk on each user's row of U Vᵀ + b + c (a pointwise
    loss's risk is a mean over the user's ratings, so times their number)."""
    F = U @ V.T + b[:, None] + c[None, :]
    total = 0.0
    G = np.zeros_like(F)
    obj = losses.get(loss, **(params or {}))
    for i in range(ratings.shape[0]):
        s, e = ratings.indptr[i], ratings.indptr[i + 1]
        if e == s:
            continue
        items = ratings.indices[s:e]
        value, grad = losses.risk(obj, F[i, items], ratings.data[s:e])
        scale = (e - s) if getattr(obj, "pointwise", False) else 1.0
        total += scale * value
        G[i, items] = scale * grad
    return total, G


@pytest.mark.parametrize("loss, params", LOSSES)
@pytest.mark.parametrize("offsets", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_objective_is_the_sum_over_users_plus_penalty(loss, params, offsets, seed):
    ratings = random_ratings(seed)
    model = fitted(loss, params, ratings, offsets=offsets, seed=seed, max_iter=1)
    rng = np.random.default_rng(seed + 100)
    model.user_factors_ = rng.normal(size=model.user_factors_.shape)
    model.item_factors_ = rng.normal(size=model.item_factors_.shape)
    if offsets:
        model.user_offsets_ = rng.normal(size=model.n_users_)
        model.item_offsets_ = rng.normal(size=model.n_items_)
    U, V = model.user_factors_, model.item_factors_
    b, c = model.user_offsets_, model.item_offsets_
    risk, _ = dense_risk(loss, params, ratings, U, V, b, c)
    penalty = (U**2).sum() + (V**2).sum() + ((b**2).sum() + (c**2).sum() if offsets else 0.0)
    assert model.objective(ratings) == pytest.approx(risk + 0.5 * 0.5 * penalty, rel=1e-12)


@pytest.mark.parametrize("loss, params", LOSSES)
@pytest.mark.parametrize("offsets", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_block_oracles_match_the_dense_reference(loss, params, offsets, seed):
    ratings = random_ratings(seed)
    R = check_ratings(ratings)
    obj = losses.get(loss, **(params or {}))
    problem = _Problem(R, obj)
    rng = np.random.default_rng(seed)
    U, V = rng.normal(size=(9, 3)), rng.normal(size=(12, 3))
    b, c = rng.normal(size=9) * offsets, rng.normal(size=12) * offsets
    prepared = _convexified(problem.prepared, problem.scores(U, V, b, c).copy())
    for which in ("U", "V"):
        oracle, w0, unpack = block_oracle(problem, which, U, V, b, c, offsets, prepared)
        M, o = unpack(w0)
        # rows without ratings (user 0, item 11) are left out of w: 0 in the factors
        active = np.diff(R.indptr if which == "U" else problem.item_ptr) > 0
        assert not active.all()
        np.testing.assert_array_equal(M[active], (U if which == "U" else V)[active])
        np.testing.assert_array_equal(M[~active], 0.0)
        risk, a = oracle(w0)
        # the latent loss's surrogate equals the loss at the point it is built at
        ref, G = dense_risk(loss, params, ratings, U, V, b, c)
        assert risk == pytest.approx(ref, rel=1e-12)
        if which == "U":
            ref_grad = [(G @ V)[active].ravel()] + ([G.sum(axis=1)[active]] if offsets else [])
        else:
            ref_grad = [(G.T @ U)[active].ravel()] + ([G.sum(axis=0)[active]] if offsets else [])
        np.testing.assert_allclose(a, np.concatenate(ref_grad), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("loss, params", LOSSES)
@pytest.mark.parametrize("offsets", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_block_oracles_with_every_row_rated_match_the_dense_reference(loss, params, offsets, seed):
    """Every user and item rated: w's layout is the factors' own, so the start is a view
    of the factor (without offsets) and ``unpack`` gives views of w; each call's gradient
    is a new array, matching the dense reference, and a later call leaves it unchanged."""
    ratings = random_ratings(seed, density=0.6)
    dense = ratings.toarray()
    mask = ratings.copy()
    mask.data[:] = 1.0
    mask = mask.toarray() > 0
    mask[0, :] = mask[1, :] = True  # every user and every item has ratings
    mask[:, -1] = True
    rng = np.random.default_rng(seed + 7)
    y = np.where(mask, np.where(dense != 0, dense, rng.integers(0, 5, size=dense.shape)), 0)
    rows, cols = np.nonzero(mask)
    ratings = sp.csr_matrix((y[rows, cols].astype(float), (rows, cols)), shape=mask.shape)
    R = check_ratings(ratings)
    obj = losses.get(loss, **(params or {}))
    problem = _Problem(R, obj)
    U, V = rng.normal(size=(9, 3)), rng.normal(size=(12, 3))
    b, c = rng.normal(size=9) * offsets, rng.normal(size=12) * offsets
    prepared = _convexified(problem.prepared, problem.scores(U, V, b, c).copy())
    ref, G = dense_risk(loss, params, ratings, U, V, b, c)
    for which in ("U", "V"):
        rows_of = U if which == "U" else V
        oracle, w0, unpack = block_oracle(problem, which, U, V, b, c, offsets, prepared)
        assert np.shares_memory(w0, rows_of) == (not offsets)
        assert not w0.flags.writeable  # so the solver need not copy it
        M, o = unpack(w0)
        np.testing.assert_array_equal(M, rows_of)
        if offsets:
            np.testing.assert_array_equal(o, b if which == "U" else c)
        w = rng.normal(size=w0.shape)
        M, o = unpack(w)
        assert np.shares_memory(M, w) and M.flags.c_contiguous
        np.testing.assert_array_equal(M.ravel(), w[: M.size])
        if offsets:
            assert np.shares_memory(o, w)
            np.testing.assert_array_equal(o, w[M.size :])
        risk, a = oracle(w0)
        assert risk == pytest.approx(ref, rel=1e-12)
        if which == "U":
            ref_grad = [(G @ V).ravel()] + ([G.sum(axis=1)] if offsets else [])
        else:
            ref_grad = [(G.T @ U).ravel()] + ([G.sum(axis=0)] if offsets else [])
        ref_grad = np.concatenate(ref_grad)
        np.testing.assert_allclose(a, ref_grad, rtol=1e-12, atol=1e-12)
        kept = a.copy()
        _, a2 = oracle(w0 + rng.normal(size=w0.shape))
        assert not np.shares_memory(a, a2)
        np.testing.assert_array_equal(a, kept)
        np.testing.assert_array_equal(rows_of, U if which == "U" else V)  # never written


def fourteen_users(seed, every_row):
    """14 users × 12 items: random_ratings' users and items without ratings, or (with
    ``every_row``) one more rating per user and for the last item, so that every row and
    column is rated."""
    ratings = random_ratings(seed, n_users=14, n_items=12, density=0.6)
    if not every_row:
        return ratings
    ratings = ratings.tolil()
    for i in range(14):
        ratings[i, i % 12] = float(i % 5)
    ratings[2, 11] = 3.0
    return ratings.tocsr()


BLOCK_LOSSES = [
    ("ndcg", None),
    ("ndcg", {"ties": "increasing"}),
    ("ndcg", {"ties": "pairs"}),
    ("ndcg", {"pairwise": 0.5, "average_precision": 0.3, "truncate_c": True, "k": 3}),
    ("neru", None),
    ("ordinal", None),
    ("ordinal", {"hinge": "squared"}),
    ("squared", None),
]


@pytest.mark.parametrize("loss, params", BLOCK_LOSSES)
@pytest.mark.parametrize("offsets", [False, True])
@pytest.mark.parametrize("every_row", [False, True])
@pytest.mark.parametrize("block_ratings", [1, 7, 40])
def test_block_oracles_by_user_blocks_equal_one_pass_to_the_bit(
    monkeypatch, loss, params, offsets, every_row, block_ratings
):
    """The oracle of a loss that can be cut by queries evaluates the users a block at a
    time: risk and gradient equal the one-pass oracle's bit for bit (and the dense
    reference), for blocks of one user up to several, with users and items without
    ratings or with every row rated."""
    ratings = fourteen_users(11, every_row)
    R = check_ratings(ratings)
    obj = losses.get(loss, **(params or {}))
    problem = _Problem(R, obj)
    rng = np.random.default_rng(5)
    U, V = rng.normal(size=(14, 3)), rng.normal(size=(12, 3))
    b, c = rng.normal(size=14) * offsets, rng.normal(size=12) * offsets
    prepared = _convexified(problem.prepared, problem.scores(U, V, b, c).copy())
    blocks = model_module._user_blocks(problem, prepared, block_ratings)
    assert blocks is not None and len(blocks) >= 2
    # the blocks tile the users, their ratings and their loss terms
    assert [blk.users.start for blk in blocks][0] == 0 and blocks[-1].users.stop == 14
    for one, two in zip(blocks, blocks[1:], strict=False):
        assert one.users.stop == two.users.start and one.rows.stop == two.rows.start
        assert one.terms.stop == two.terms.start
    assert blocks[-1].rows.stop == len(R.data) and blocks[-1].terms.stop == prepared.n_terms
    ref, G = dense_risk(loss, params, ratings, U, V, b, c)
    for which in ("U", "V"):
        calls = []
        for size in (block_ratings, 10**9):
            monkeypatch.setattr(model_module, "BLOCK_RATINGS", size)
            oracle, w0, _ = block_oracle(problem, which, U, V, b, c, offsets, prepared)
            w1 = np.random.default_rng(9).normal(size=w0.shape)
            calls.append([oracle(w0), oracle(w1)])
        for (risk, grad), (one_risk, one_grad) in zip(*calls, strict=True):
            assert risk == one_risk
            np.testing.assert_array_equal(grad, one_grad)
        risk, grad = calls[0][0]
        assert risk == pytest.approx(ref, rel=1e-12)
        active = np.diff(R.indptr if which == "U" else problem.item_ptr) > 0
        if which == "U":
            ref_grad = [(G @ V)[active].ravel()] + ([G.sum(axis=1)[active]] if offsets else [])
        else:
            ref_grad = [(G.T @ U)[active].ravel()] + ([G.sum(axis=0)[active]] if offsets else [])
        np.testing.assert_allclose(grad, np.concatenate(ref_grad), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("loss, params", [("listnet", None), ("softmax", None)])
def test_losses_that_cannot_be_cut_by_queries_take_one_pass(loss, params):
    R = check_ratings(random_ratings(0))
    problem = _Problem(R, losses.get(loss, **(params or {})))
    assert model_module._user_blocks(problem, problem.prepared, 1) is None


@pytest.mark.parametrize("loss, params", [("squared", None), ("ordinal", {"hinge": "squared"})])
@pytest.mark.parametrize("offsets", [False, True])
@pytest.mark.parametrize("every_row", [False, True])
def test_newton_evaluations_by_user_blocks_equal_one_pass_to_the_bit(
    monkeypatch, loss, params, offsets, every_row
):
    """A Newton step's evaluations on scores (cut_at, risk_at) and Hessian products (a
    loss without a Hessian plan) by blocks of users equal the one-pass ones bit for bit,
    and the products write A v into the buffer given."""
    ratings = fourteen_users(3, every_row)
    R = check_ratings(ratings)
    problem = _Problem(R, losses.get(loss, **(params or {})))
    rng = np.random.default_rng(2)
    U, V = rng.normal(size=(14, 3)), rng.normal(size=(12, 3))
    b, c = rng.normal(size=14) * offsets, rng.normal(size=12) * offsets
    prepared = problem.prepared
    for which in ("U", "V"):
        got = []
        for size in (5, 10**9):
            monkeypatch.setattr(model_module, "BLOCK_RATINGS", size)
            oracle, w0, _ = block_oracle(problem, which, U, V, b, c, offsets, prepared)
            w1 = w0 + np.random.default_rng(4).normal(size=w0.shape)
            v = np.random.default_rng(6).normal(size=w0.shape)
            f = oracle.scores(w1)
            xv = np.full(len(f), np.nan)
            hv = oracle.hessian(f)(v, xv)
            got.append([oracle.cut_at(f), oracle.risk_at(f)[0], hv, xv, oracle(w1)])
        blocked, one = got
        assert blocked[0][0] == one[0][0] and blocked[1] == one[1] == one[0][0]
        np.testing.assert_array_equal(blocked[0][1], one[0][1])
        np.testing.assert_array_equal(blocked[2], one[2])
        np.testing.assert_array_equal(blocked[3], one[3])  # A v, every entry written
        assert blocked[4][0] == one[4][0]
        np.testing.assert_array_equal(blocked[4][1], one[4][1])


@pytest.mark.parametrize("loss, params", [("ndcg", None), ("ordinal", None), ("squared", None)])
def test_fits_by_user_blocks_equal_one_pass_fits_to_the_bit(monkeypatch, loss, params):
    ratings = low_rank_ratings(4, n_users=40, n_items=30)
    fits = []
    for size in (10**9, 50):
        monkeypatch.setattr(model_module, "BLOCK_RATINGS", size)
        model = fitted(loss, params, ratings, step_max_iter=3, max_iter=3)
        fits.append(model)
    one, blocked = fits
    np.testing.assert_array_equal(one.result_.objective, blocked.result_.objective)
    np.testing.assert_array_equal(one.user_factors_, blocked.user_factors_)
    np.testing.assert_array_equal(one.item_factors_, blocked.item_factors_)


@pytest.mark.parametrize("loss, params", LOSSES)
def test_an_evaluation_keeps_its_scores_for_a_newton_step_only(loss, params):
    """The evaluation a step starts from holds the scores (one float per rating) only when
    the step is a Newton step, which starts from them: they are then the scores of the
    current factors; the other steps' evaluations drop them."""
    ratings = random_ratings(4)
    model = fitted(loss, params, ratings, max_iter=1)
    problem = _Problem(check_ratings(ratings), model.loss_)
    J, prepared, scores, first = model._evaluate(problem)
    assert J == pytest.approx(model.objective(ratings), rel=1e-12)
    if newton_steps(model.loss_):
        f = problem.scores(
            model.user_factors_, model.item_factors_, model.user_offsets_, model.item_offsets_
        )
        np.testing.assert_array_equal(scores, f)
    else:
        assert scores is None
    assert first[0] == pytest.approx(J - model.lam_ * model._penalty(), rel=1e-12)


@pytest.mark.parametrize("which", ["U", "V"])
def test_newton_steepest_descent_fallback_is_right_with_offsets(which):
    """With offsets a step's scores are affine in its variable (f = A w + f₀). When the
    Newton direction gives no decrease (here: products of negative curvature, so the
    conjugate gradients stop at s = 0) the method falls back to −∇J; its line search must
    move the scores by A s, not by A s + f₀: the J it reports equals J at its point."""
    ratings = random_ratings(5, density=0.8)
    problem = _Problem(check_ratings(ratings), losses.get("squared"))
    rng = np.random.default_rng(5)
    U, V = rng.normal(size=(9, 3)), rng.normal(size=(12, 3))
    b, c = rng.normal(size=9), rng.normal(size=12) + 3.0
    lam = 0.5
    oracle, w0, _ = block_oracle(problem, which, U, V, b, c, True, problem.prepared)

    def no_curvature(f):
        def products(v, xv=None):
            return -2.0 * lam * v

        products.passes = 2
        return products

    oracle.hessian = no_curvature
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = bmrm.minimize_bmrm(oracle, len(w0), lam, w0=w0, method="newton", max_iter=4)
    start = 0.5 * lam * w0 @ w0 + oracle(w0)[0]
    assert res.fun < start  # the fallback moved
    assert res.fun == pytest.approx(0.5 * lam * res.x @ res.x + oracle(res.x)[0], rel=1e-12)


def test_scatters_skip_zero_gradients_to_the_bit():
    """Both scatters skip the ratings with ∂l/∂f = 0 (a ranking loss leaves many): the sums
    equal, to the bit, those adding every rating's term in the ratings' order."""
    rng = np.random.default_rng(17)
    n_users, n_items, r = 40, 30, 3
    mask = rng.random((n_users, n_items)) < 0.4
    rows, cols = np.nonzero(mask)
    ratings = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=mask.shape)
    problem = _Problem(check_ratings(ratings), losses.get("squared"))
    U, V = rng.normal(size=(n_users, r)), rng.normal(size=(n_items, r))
    g = rng.normal(size=ratings.nnz)
    g[rng.random(g.size) < 0.4] = 0.0
    g[rng.random(g.size) < 0.1] = -0.0
    g[ratings.indptr[5] : ratings.indptr[6]] = 0.0  # a user whose terms are all zero
    gu, gu_o = np.empty_like(U), np.empty(n_users)
    gv, gv_o = np.empty_like(V), np.empty(n_items)
    problem.gather("U", g, V, gu, gu_o)
    problem.gather("V", g, U, gv, gv_o)
    ref_u, ref_uo = np.zeros_like(U), np.zeros(n_users)
    ref_v, ref_vo = np.zeros_like(V), np.zeros(n_items)
    for k, (i, j) in enumerate(zip(rows, cols, strict=True)):  # CSR order: user-major
        ref_u[i] += g[k] * V[j]
        ref_uo[i] += g[k]
        ref_v[j] += g[k] * U[i]
        ref_vo[j] += g[k]
    for got, ref in ((gu, ref_u), (gu_o, ref_uo), (gv, ref_v), (gv_o, ref_vo)):
        np.testing.assert_array_equal(got, ref)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(ref))
    np.testing.assert_array_equal(gu[5], 0.0)


def test_scatters_are_the_same_for_any_split_among_threads(monkeypatch):
    """Scores and both scatters on a set above the parallel threshold, split for 1 to 4
    threads: bitwise the same, and equal to scipy's sparse products (the V scatter reads
    the ratings in user-major order; each item's sum runs over its users in order)."""
    from losses import _threads

    rng = np.random.default_rng(7)
    n_users, n_items, r = 600, 150, 4
    mask = rng.random((n_users, n_items)) < 0.3
    mask[:, 5] = False  # an item nobody rated
    mask[3] = False  # a user without ratings
    rows, cols = np.nonzero(mask)
    ratings = sp.csr_matrix(
        (rng.integers(1, 6, rows.size).astype(float), (rows, cols)), shape=mask.shape
    )
    assert ratings.nnz > _threads.PARALLEL_MIN_ROWS
    problem = _Problem(check_ratings(ratings), losses.get("squared"))
    U, V = rng.normal(size=(n_users, r)), rng.normal(size=(n_items, r))
    b, c = rng.normal(size=n_users), rng.normal(size=n_items)
    g = rng.normal(size=ratings.nnz)
    G = sp.csr_matrix((g, ratings.indices, ratings.indptr), shape=ratings.shape)
    results = []
    for n in (1, 2, 3, 4):
        monkeypatch.setattr(_threads, "_numba_threads", lambda n=n: n)
        f = problem.scores(U, V, b, c).copy()
        gu, gu_o = np.empty_like(U), np.empty(n_users)
        gv, gv_o = np.full_like(V, np.nan), np.full(n_items, np.nan)
        problem.gather("U", g, V, gu, gu_o)
        problem.gather("V", g, U, gv, gv_o)
        results.append((f, gu, gu_o, gv, gv_o))
    for other in results[1:]:
        for a, e in zip(other, results[0], strict=True):
            np.testing.assert_array_equal(a, e)
    f, gu, gu_o, gv, gv_o = results[0]
    dense = U @ V.T + b[:, None] + c[None, :]
    np.testing.assert_allclose(f, dense[rows, cols], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gu, G @ V, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gv, G.T @ U, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gu_o, np.asarray(G.sum(axis=1)).ravel(), atol=1e-12)
    np.testing.assert_allclose(gv_o, np.asarray(G.sum(axis=0)).ravel(), atol=1e-12)
    np.testing.assert_array_equal(gv[5], 0.0)


@pytest.mark.parametrize(
    "loss, params", [("squared", None), ("ordinal", {"hinge": "squared"}), ("listnet", None)]
)
@pytest.mark.parametrize("offsets", [False, True])
def test_newton_products_match_the_dense_reference(loss, params, offsets):
    """A smooth loss's block steps evaluate on scores, f = A w + f₀, and give the products
    ∇²R v = Aᵀ H_f A v: against A written out row by row and H_f from finite differences
    of the loss's gradient in the scores."""
    ratings = random_ratings(5)
    R = check_ratings(ratings)
    obj = losses.get(loss, **(params or {}))
    assert newton_steps(obj)
    problem = _Problem(R, obj)
    rng = np.random.default_rng(3)
    U, V = rng.normal(size=(9, 3)), rng.normal(size=(12, 3))
    b, c = rng.normal(size=9) * offsets, rng.normal(size=12) * offsets
    users = np.repeat(np.arange(9), np.diff(R.indptr))
    n = len(R.indices)

    def loss_gradient(f):
        return problem.prepared.loss_grad(f)[1]

    for which in ("U", "V"):
        oracle, w0, unpack = block_oracle(problem, which, U, V, b, c, offsets, problem.prepared)
        active = np.flatnonzero(np.diff(R.indptr if which == "U" else problem.item_ptr) > 0)
        place = {row: t for t, row in enumerate(active)}
        A = np.zeros((n, len(w0)))
        for k, (i, j) in enumerate(zip(users, R.indices, strict=True)):
            own, other = (i, V[j]) if which == "U" else (j, U[i])
            A[k, 3 * place[own] : 3 * place[own] + 3] = other
            if offsets:
                A[k, 3 * len(active) + place[own]] = 1.0
        w, v = rng.normal(size=len(w0)), rng.normal(size=len(w0))
        f0 = oracle.scores(np.zeros(len(w0)))
        f = oracle.scores(w)
        np.testing.assert_allclose(f, A @ w + f0, rtol=1e-12, atol=1e-12)
        M, o = unpack(w)
        Uw, Vw = (M, V) if which == "U" else (U, M)
        bw = o if which == "U" and offsets else b
        cw = o if which == "V" and offsets else c
        dense = Uw @ Vw.T + bw[:, None] + cw[None, :]
        np.testing.assert_allclose(f, dense[users, R.indices], rtol=1e-12, atol=1e-12)
        # the scores-based cut is the oracle's own
        risk, a = oracle(w)
        risk_f, a_f = oracle.cut_at(f)
        assert risk_f == pytest.approx(risk, rel=1e-13) == oracle.risk_at(f)[0]
        np.testing.assert_allclose(a_f, a, rtol=1e-13, atol=1e-13)
        # H_f column by column from the gradient (the squared hinge is piecewise quadratic:
        # exact unless a pair's margin lies within h of its kink)
        h = 1e-6
        H = np.empty((n, n))
        for k in range(n):
            e = np.zeros(n)
            e[k] = h
            H[:, k] = (loss_gradient(f + e) - loss_gradient(f - e)) / (2 * h)
        xv = np.empty(n)
        hv = oracle.hessian(f)(v, xv)
        np.testing.assert_allclose(xv, A @ v, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(hv, A.T @ H @ A @ v, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(oracle.hessp(w, v), hv, rtol=1e-13, atol=1e-13)


def test_newton_u_step_is_the_least_squares_solution():
    """With the squared loss the U step is one ridge regression per user (alternating least
    squares); the block step, solved by the Newton method, reaches it."""
    ratings = random_ratings(6, n_users=12, n_items=15, density=0.6)
    R = check_ratings(ratings)
    problem = _Problem(R, losses.get("squared"))
    rng = np.random.default_rng(2)
    U, V = rng.normal(size=(12, 3)), rng.normal(size=(15, 3))
    zeros_u, zeros_v = np.zeros(12), np.zeros(15)
    lam = 0.7
    oracle, w0, unpack = block_oracle(
        problem, "U", U, V, zeros_u, zeros_v, False, problem.prepared
    )
    from bmrm.collab._steps import minimize_step

    res = minimize_step(oracle, w0, StepSettings(lam, 1e-12, None, 50, 10))
    assert res.method == "newton"
    M, _ = unpack(res.x)
    for i in range(12):
        s, e = R.indptr[i], R.indptr[i + 1]
        Vi = V[R.indices[s:e]]
        ref = np.linalg.solve(Vi.T @ Vi + lam * np.eye(3), Vi.T @ R.data[s:e])
        np.testing.assert_allclose(M[i], ref if e > s else 0.0, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("offsets", [False, True])
@pytest.mark.parametrize("loss", ["squared", "listnet"])
def test_step_gradients_match_finite_differences(loss, offsets):
    ratings = random_ratings(4)
    R = check_ratings(ratings)
    problem = _Problem(R, losses.get(loss))
    rng = np.random.default_rng(1)
    U, V = rng.normal(size=(9, 3)), rng.normal(size=(12, 3))
    b, c = rng.normal(size=9), rng.normal(size=12)
    for which in ("U", "V"):
        oracle, w0, _ = block_oracle(problem, which, U, V, b, c, offsets, problem.prepared)
        _, a = oracle(w0)
        h = 1e-6
        numeric = np.array(
            [(oracle(w0 + h * e)[0] - oracle(w0 - h * e)[0]) / (2 * h) for e in np.eye(len(w0))]
        )
        np.testing.assert_allclose(a, numeric, rtol=1e-6, atol=1e-6)
    # one user's oracle against the block oracle's rows of that user
    i = 2
    s, e = R.indptr[i], R.indptr[i + 1]
    items = R.indices[s:e]
    part = losses.prepare(losses.get(loss), R.data[s:e])
    oracle = user_oracle(V[items], c[items], part, offsets)
    w = np.append(U[i], b[i]) if offsets else U[i]
    risk, a = oracle(w)
    F = U @ V.T + (b[:, None] if offsets else 0.0) + c[None, :]  # b is a variable only
    ref_value, ref_g = losses.risk(loss, F[i, items], R.data[s:e])
    scale = (e - s) if loss == "squared" else 1.0
    assert risk == pytest.approx(scale * ref_value, rel=1e-12)
    ref = V[items].T @ (scale * ref_g)
    np.testing.assert_allclose(
        a, np.append(ref, scale * ref_g.sum()) if offsets else ref, rtol=1e-12, atol=1e-14
    )


@pytest.mark.parametrize("loss, params", LOSSES)
@pytest.mark.parametrize("u_step", ["block", "users", "batch"])
@pytest.mark.parametrize("offsets", [False, True])
def test_objective_never_increases(loss, params, u_step, offsets):
    for seed in range(2):
        ratings = random_ratings(seed, n_users=15, n_items=14, density=0.6)
        model = fitted(
            loss, params, ratings, offsets=offsets, seed=seed, u_step=u_step, max_iter=6,
            step_max_iter=5,
        )  # fmt: skip
        res = model.result_
        per_step = np.array([res.objective[0]] + [s["objective"] for s in res.steps])
        assert np.all(np.diff(per_step) <= 0.0)
        assert np.all(np.diff(res.objective) <= 0.0)
        assert res.objective[0] > res.objective[-1]
        # the reported objective is J at the fitted factors
        assert model.objective(ratings) == pytest.approx(res.fun, rel=1e-12)
        for step in res.steps:
            assert step["gap"] >= -1e-9 * (1 + abs(step["objective"]))


@pytest.mark.parametrize("u_step", ["block", "users", "batch"])
def test_empty_rows_get_zero_factors_and_steps_stop_by_their_rule(u_step):
    ratings = random_ratings(3, n_users=12, n_items=10)
    model = fitted("squared", None, ratings, max_iter=8, step_tol=0.3, tol=1e-4, u_step=u_step)
    np.testing.assert_array_equal(model.user_factors_[0], 0.0)  # rated nothing
    np.testing.assert_array_equal(model.item_factors_[-1], 0.0)  # rated by nobody
    res = model.result_
    before = [res.objective[0]] + [s["objective"] for s in res.steps[:-1]]
    for J0, step in zip(before, res.steps, strict=True):
        if u_step == "users" and step["step"] == "U":
            continue  # the rule holds per user
        stopped_by_rule = step["gap"] <= 0.3 * (J0 - step["objective"]) + 1e-12
        capped = not step["converged"] and step["nit"] >= model.step_max_iter
        assert stopped_by_rule or step["rel_gap"] <= 1e-4 or capped


@pytest.mark.parametrize("u_step", ["block", "batch", "users"])
@pytest.mark.parametrize("loss, params", [("ndcg", None), ("ordinal", None)])
def test_a_step_stopped_at_its_cap_has_lowered_j(loss, params, u_step):
    """With one or two bundle iterations per step, a step that stops at step_max_iter has
    lowered J (it goes on past the cap until its best point is below its start, up to
    three times the cap), so no outer iteration ends without progress while a step's
    certified gap leaves room: the fit does not stop on a capped step's zero decrease."""
    from bmrm.collab._steps import NO_PROGRESS_FACTOR

    for cap in (1, 2):
        ratings = random_ratings(cap, n_users=20, n_items=16, density=0.6)
        model = fitted(
            loss, params, ratings, u_step=u_step, max_iter=6, step_max_iter=cap, tol=1e-9,
            step_tol=1e-3,
        )  # fmt: skip
        res = model.result_
        before = [res.objective[0]] + [s["objective"] for s in res.steps[:-1]]
        for J0, step in zip(before, res.steps, strict=True):
            if u_step == "users" and step["step"] == "U":
                continue  # per user: its own solves (nit sums over users)
            assert step["nit"] <= NO_PROGRESS_FACTOR * cap
            if not step["converged"] and step["nit"] < NO_PROGRESS_FACTOR * cap:
                assert step["objective"] < J0
        assert np.all(np.diff(res.objective) < 0.0)


@pytest.mark.parametrize("loss, params", [("ndcg", None), ("squared", None)])
def test_a_converged_fit_certifies_every_last_step(loss, params):
    """Status 0 only when the last outer iteration lowered J by at most tol relative and
    each of its two steps stopped by its own rule or certifies a gap of at most tol·J."""
    ratings = random_ratings(5, n_users=30, n_items=20, density=0.5)
    for cap in (2, 5, 30):
        model = fitted(loss, params, ratings, max_iter=60, step_max_iter=cap, tol=1e-3)
        res = model.result_
        assert res.status == 0, res.message
        J = res.objective[-1]
        assert (res.objective[-2] - J) / abs(J) <= 1e-3
        last = [s for s in res.steps if s["outer"] == res.nit]
        assert [s["step"] for s in last] == ["U", "V"]
        for step in last:
            assert step["converged"] or step["gap"] <= 1e-3 * abs(J)


def test_an_outer_iteration_that_changes_nothing_ends_the_fit(monkeypatch):
    """A step that can neither lower J nor certify tol·J leaves the factors as they were;
    the next outer iteration would repeat it exactly, so the fit stops (status 6) with a
    ConvergenceWarning instead of running to max_iter, and reports J unchanged."""
    from bmrm import ConvergenceWarning

    ratings = random_ratings(3, n_users=20, n_items=15)
    calls = []

    def stuck(self, problem, which, point):
        calls.append(which)
        point.pop()  # the step takes over the evaluation, as the real one does
        return point[0], 0.5 * abs(point[0]), 7, 8, False

    monkeypatch.setattr(CofiRank, "_block_step", stuck)
    model = CofiRank(loss="ordinal", n_factors=3, lam=0.5, max_iter=20, random_state=0)
    with pytest.warns(ConvergenceWarning, match="left the factors unchanged"):
        model.fit(ratings)
    res = model.result_
    assert (res.status, res.success, res.nit, model.n_iter_) == (6, False, 1, 1)
    assert "left the factors unchanged" in res.message
    assert calls == ["U", "V"]
    assert res.objective[0] == res.objective[1] == res.fun
    assert [s["nit"] for s in res.steps] == [7, 7]
    reference = CofiRank(loss="ordinal", n_factors=3, lam=0.5, random_state=0)
    rng = reference._rng()
    np.testing.assert_array_equal(
        model.user_factors_, rng.normal(scale=0.1, size=model.user_factors_.shape)
    )


@pytest.mark.parametrize(
    "loss, params, offsets",
    [
        ("ndcg", None, False),
        ("ndcg", {"ties": "increasing"}, True),
        ("ordinal", None, True),
        ("squared", None, False),
        ("squared", None, True),
        ("listnet", None, False),
    ],
)
def test_batch_user_step_matches_per_user_bundle_solves(loss, params, offsets):
    """The users' level bundle methods run side by side reach each user's own minimum
    (from a separate bundle-method solve of that user alone, to 1e-8), and their summed
    lower bound is a lower bound of it; users with no rating, one rating or all-equal
    ratings included."""
    ratings = random_ratings(11, n_users=10, n_items=9, density=0.7).tolil()
    ratings[2, :] = 0.0  # a user with all-equal ratings (explicit zeros are ratings)
    ratings = ratings.tocsr()
    ratings.data[ratings.indptr[2] : ratings.indptr[3]] = 3.0
    R = check_ratings(ratings)
    obj = losses.get(loss, **(params or {}))
    rng = np.random.default_rng(1)
    U, V = rng.normal(size=(10, 3)), rng.normal(size=(9, 3))
    b = rng.normal(size=10) if offsets else np.zeros(10)
    c = rng.normal(size=9) if offsets else np.zeros(9)
    lam = 0.7
    problem = _Problem(R, obj)
    f = problem.scores(U, V, b, c).copy()
    prepared = _convexified(problem.prepared, f)
    first = _user_risks(prepared, f, problem)
    settings = StepSettings(lam, 1e-10, None, 300, 12)
    U1, b1, J, gap, nit, nfev, converged = batch_user_step(
        problem, U, b, V, c, offsets, prepared, first, settings
    )
    # the reference: each user alone, its surrogate fixed at the same scores
    parts = _user_parts(R, obj)
    U2, b2 = U.copy(), b.copy()
    reference = StepSettings(lam, 1e-8, None, 1000, 30)
    J_ref, gap_ref, *_ = solve_users(R.indptr, R.indices, parts, range(10), U2, b2, V, c,
                                     offsets, reference)  # fmt: skip
    assert gap >= -1e-9 * (1 + abs(J))
    assert J - gap <= J_ref + 1e-9 * (1 + abs(J_ref))  # a lower bound of the minimum
    assert J == pytest.approx(J_ref, rel=1e-6, abs=1e-9)
    # J is the step's objective at the factors it returns
    f1 = problem.scores(U1, V, b1 if offsets else np.zeros(10), c)
    risk, _ = prepared.loss_grad(f1)
    penalty = 0.5 * lam * (np.vdot(U1, U1) + (np.vdot(b1, b1) if offsets else 0.0))
    assert J == pytest.approx(float(risk.sum()) + penalty, rel=1e-12, abs=1e-12)
    np.testing.assert_array_equal(U1[0], 0.0)  # rated nothing
    if obj.name != "squared":  # one rating, all equal: no loss, the minimum is 0, so
        # λ/2 ‖u‖² is at most the certified gap
        assert 0.5 * lam * np.vdot(U1[[1, 2]], U1[[1, 2]]) <= max(gap, 0.0) + 1e-15
    # λ-strong convexity: λ/2 ‖x − x*‖² <= J(x) − J(x*) <= the certified gap, for both
    distance = np.sqrt(np.sum((U1 - U2) ** 2) + np.sum((b1 - b2) ** 2))
    assert distance <= np.sqrt(2 * max(gap, 0) / lam) + np.sqrt(2 * max(gap_ref, 0) / lam) + 1e-9


def test_blas_runs_on_one_thread_during_a_fit_and_is_restored_after():
    """The fit puts BLAS on one thread (its spinning threads would take the cores of the
    kernels' blocks) and gives the caller's setting back afterwards, also after an error."""
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads():
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    if not blas_threads():
        pytest.skip("no BLAS library that threadpoolctl can see")
    seen = []
    ratings = random_ratings(2, n_users=12, n_items=10)
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        model = CofiRank(
            loss="ordinal", n_factors=2, lam=0.5, max_iter=2, random_state=0,
            callback=lambda m: seen.append(blas_threads()),
        )  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(ratings)
        assert seen and all(threads == [1] * len(before) for threads in seen)
        assert blas_threads() == before

        def fail(m):
            raise RuntimeError("stop here")

        with pytest.raises(RuntimeError, match="stop here"):
            CofiRank(loss="ordinal", n_factors=2, lam=0.5, callback=fail).fit(ratings)
        assert blas_threads() == before


def test_lam_above_the_gradient_norm_at_zero_gives_zero_factors():
    """By trace-norm duality F = 0 is optimal when lam >= ‖∇L(0)‖₂; the fit gets there."""
    ratings = random_ratings(5, n_users=20, n_items=15, density=0.7)
    zero_risk, G = dense_risk("ordinal", None, ratings, np.zeros((20, 1)), np.zeros((15, 1)),
                              np.zeros(20), np.zeros(15))  # fmt: skip
    norm = np.linalg.norm(G, 2)
    model = fitted("ordinal", None, ratings, max_iter=40, lam=2 * norm)
    F = model.user_factors_ @ model.item_factors_.T
    assert np.abs(F).max() < 1e-2
    assert zero_risk <= model.result_.fun <= zero_risk * (1 + 1e-2)


def test_predict_recommend_and_score_against_references():
    ratings = random_ratings(6, n_users=10, n_items=12)
    model = fitted("ndcg", None, ratings, offsets=True)
    rng = np.random.default_rng(0)
    model.user_offsets_ = rng.normal(size=10)
    model.item_offsets_ = rng.normal(size=12)
    F = model.user_factors_ @ model.item_factors_.T
    F += model.user_offsets_[:, None] + model.item_offsets_[None, :]
    users, items = rng.integers(0, 10, 30), rng.integers(0, 12, 30)
    np.testing.assert_allclose(model.predict(users, items), F[users, items], rtol=1e-12)
    # recommend: argsort of the dense row without the excluded items
    top = model.recommend(np.arange(10), k=4, exclude=ratings)
    dense = ratings.toarray()
    rated = np.zeros_like(dense, dtype=bool)
    rated[np.repeat(np.arange(10), np.diff(ratings.indptr)), ratings.indices] = True
    for i in range(10):
        free = [j for j in np.argsort(-F[i], kind="stable") if not rated[i, j]]
        assert list(top[i]) == (free + [-1] * 4)[:4]
    # k larger than the items left: padded with -1
    full = model.recommend([2], k=12, exclude=ratings)
    assert (full[0] == -1).sum() == rated[2].sum()
    # score: NDCG@k with gain 2^r - 1, discount 1/log2(i + 2), k capped, mean over users
    test = random_ratings(7, n_users=10, n_items=12)
    for k in (1, 3, 10):
        values = []
        for i in range(10):
            s, e = test.indptr[i], test.indptr[i + 1]
            if e == s:
                continue
            y, f = test.data[s:e], F[i, test.indices[s:e]]
            kk = min(k, e - s)
            gains = 2.0 ** y[np.argsort(-f)][:kk] - 1
            ideal = 2.0 ** np.sort(y)[::-1][:kk] - 1
            disc = 1 / np.log2(np.arange(kk) + 2)
            values.append((gains @ disc) / (ideal @ disc) if ideal.sum() > 0 else 0.0)
        assert model.score(test, k=k) == pytest.approx(np.mean(values), rel=1e-12)
    linear = model.score(test, k=3, gain="linear")
    assert linear != model.score(test, k=3)


def test_predict_and_score_refuse_bad_input():
    ratings = random_ratings(6)
    model = fitted("squared", None, ratings)
    with pytest.raises(ValueError, match="equal lengths"):
        model.predict([0, 1], [0])
    with pytest.raises(ValueError, match=r"items must lie in \[0, 12\)"):
        model.predict([0], [12])
    with pytest.raises(ValueError, match="k must be an integer"):
        model.recommend([0], k=0)
    with pytest.raises(ValueError, match="outside the shape"):
        model.score((np.array([0]), np.array([20]), np.array([1.0])))
    with pytest.raises(ValueError, match="no rating"):
        CofiRank().fit(sp.csr_matrix((3, 3)))


def test_explicit_zero_ratings_are_ratings():
    rows, cols = np.array([0, 0, 0, 1, 1]), np.array([0, 1, 2, 0, 2])
    y = np.array([0.0, 2.0, 0.0, 1.0, 0.0])
    ratings = sp.csr_matrix((y, (rows, cols)), shape=(2, 3))
    assert ratings.nnz == 5
    model = fitted("squared", None, ratings, max_iter=2)
    U, V = model.user_factors_, model.item_factors_
    F = U @ V.T
    ref = 0.5 * ((F[rows, cols] - y) ** 2).sum() + 0.25 * ((U**2).sum() + (V**2).sum())
    assert model.objective(ratings) == pytest.approx(ref, rel=1e-12)


def test_save_and_load(tmp_path):
    ratings = random_ratings(8)
    model = fitted("ndcg", {"k": 5, "ties": "increasing"}, ratings, offsets=True)
    path = tmp_path / "model.npz"
    model.save(path)
    back = load(path)
    assert back.get_params() == {**model.get_params(), "loss_params": back.loss_params}
    assert back.loss_.get_params() == model.loss_.get_params()
    users, items = np.arange(9).repeat(12), np.tile(np.arange(12), 9)
    np.testing.assert_array_equal(back.predict(users, items), model.predict(users, items))
    np.testing.assert_array_equal(back.result_.objective, model.result_.objective)
    assert back.score(ratings) == model.score(ratings)
    np.savez(tmp_path / "other.npz", a=np.zeros(2))
    with pytest.raises(ValueError, match="not a CofiRank model file"):
        load(tmp_path / "other.npz")


def test_fold_in_fits_new_users_with_items_fixed():
    """Squared loss: a folded-in user's factors are the ridge solution
    (V_Ωᵀ V_Ω + λI)⁻¹ V_Ωᵀ y."""
    ratings = random_ratings(9, n_users=12, n_items=10, density=0.8)
    dense = ratings.toarray()
    rated = np.zeros_like(dense, dtype=bool)
    rated[np.repeat(np.arange(12), np.diff(ratings.indptr)), ratings.indices] = True
    new = [10, 11]
    train = sp.csr_matrix(ratings.multiply(0))
    keep = ~np.isin(np.repeat(np.arange(12), np.diff(ratings.indptr)), new)
    rows = np.repeat(np.arange(12), np.diff(ratings.indptr))
    train = sp.csr_matrix(
        (ratings.data[keep], (rows[keep], ratings.indices[keep])), shape=ratings.shape
    )
    fold = sp.csr_matrix(
        (ratings.data[~keep], (rows[~keep], ratings.indices[~keep])), shape=ratings.shape
    )
    model = fitted("squared", None, train, tol=1e-10, step_max_iter=300)
    V = model.item_factors_.copy()
    before = model.user_factors_.copy()
    model.fold_in(fold)
    np.testing.assert_array_equal(model.item_factors_, V)
    np.testing.assert_array_equal(model.user_factors_[:10], before[:10])
    for i in new:
        Vi = V[rated[i]]
        ref = np.linalg.solve(Vi.T @ Vi + 0.5 * np.eye(3), Vi.T @ dense[i, rated[i]])
        np.testing.assert_allclose(model.user_factors_[i], ref, rtol=1e-4, atol=1e-4)


def brute_ndcg_at(y, f, k=10):
    """NDCG@k of one user's ratings y ranked by f: gain 2^y − 1, discount 1/log2(i + 2),
    k capped at len(y), ties by average over their orders (all permutations of the tied
    block give the mean gain at each of its positions)."""
    kk = min(k, len(y))
    disc = 1 / np.log2(np.arange(len(y)) + 2)
    disc[kk:] = 0.0
    gains = 2.0**y - 1
    ideal = np.sort(gains)[::-1] @ disc
    dcg = 0.0
    order = np.argsort(-f, kind="stable")
    fs = f[order]
    start = 0
    while start < len(y):
        end = start
        while end + 1 < len(y) and fs[end + 1] == fs[start]:
            end += 1
        dcg += gains[order[start : end + 1]].mean() * disc[start : end + 1].sum()
        start = end + 1
    return dcg / ideal if ideal > 0 else 0.0


def low_rank_ratings(seed, n_users=60, n_items=40, rank=3):
    """Every user rates every item 1–5 from a zero-mean rank-3 model plus noise: tastes
    differ between users and no item is better on average (popularity carries little)."""
    rng = np.random.default_rng(seed)
    score = rng.normal(size=(n_users, rank)) @ rng.normal(size=(rank, n_items))
    score += 0.3 * rng.normal(size=score.shape)
    y = 1 + np.searchsorted(np.quantile(score, [0.2, 0.4, 0.6, 0.8]), score)
    return sp.csr_matrix(y.astype(float))


@pytest.mark.parametrize("loss", ["ndcg", "ordinal", "squared"])
def test_defaults_learn_more_than_popularity(loss):
    """The default lam and initialisation learn: NDCG@10 on held-out ratings, computed by
    brute force here, beats the popularity ranking (items by mean training rating)."""
    from bmrm.collab import weak_split

    train, test = weak_split(low_rank_ratings(0), n_train=20, min_test=10, seed=0)
    model = CofiRank(loss=loss, random_state=0).fit(train)
    assert model.lam_ > 0 and model.lam != 10
    counts = np.bincount(train.indices, minlength=train.shape[1])
    popularity = np.bincount(train.indices, weights=train.data, minlength=train.shape[1])
    popularity /= np.maximum(counts, 1)
    learned, baseline = [], []
    for i in range(test.shape[0]):
        s, e = test.indptr[i], test.indptr[i + 1]
        items, y = test.indices[s:e], test.data[s:e]
        learned.append(brute_ndcg_at(y, model.predict(np.full(e - s, i), items)))
        baseline.append(brute_ndcg_at(y, popularity[items]))
    assert model.score(test) == pytest.approx(np.mean(learned), rel=1e-12)
    # a margin that lam=10 (above ‖∇L(0)‖₂ on larger sets) misses with the NDCG loss
    assert np.mean(learned) > np.mean(baseline) + 0.3


@pytest.mark.parametrize("scale", [0.0, -0.1])
def test_factors_starting_at_zero_are_refused(scale):
    """At U = V = 0 every step's gradient vanishes, so a fit from zero factors would
    report convergence having learnt nothing: init_scale must be positive."""
    with pytest.raises(ValueError, match="'init_scale' parameter of CofiRank must be a float"):
        CofiRank(init_scale=scale, max_iter=1).fit(low_rank_ratings(0))

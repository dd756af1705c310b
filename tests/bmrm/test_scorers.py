"""Scorers: values and vector-Jacobian products against numpy references and differences;
the scorer oracle and bmrm.fit with a non-linear scorer or a non-convex loss."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import softmax

import bmrm
import losses
from bmrm.scorers import ExpectedGainScorer, LinearScorer, get_scorer
from bmrm.solver.scorer_oracle import ScorerOracle, minimize_lbfgs


def reference_expected_gain(X, W, gains, eps=None):
    """Row by row: the softmax of W x, clipped at eps, times the gains."""
    out = np.empty(X.shape[0])
    for i, x in enumerate(np.asarray(X, dtype=np.float64)):
        p = softmax(W @ x)
        if eps is not None and p.max() > eps:
            p = np.eye(len(p))[np.argmax(p)]
        out[i] = p @ gains
    return out


def reference_vjp(X, W, gains, g):
    """Σ_i g_i ∂h_i/∂W from the full Jacobian, ∂h_i/∂W_kl = p_ik (G_k − h_i) x_il."""
    X = np.asarray(X, dtype=np.float64)
    P = softmax(X @ W.T, axis=1)
    h = P @ gains
    jac = np.einsum("ik,il->ikl", P * (gains[None, :] - h[:, None]), X)
    return np.einsum("i,ikl->kl", g, jac).ravel()


LAYOUTS = ("dense", "fortran", "csr", "float32")


def layout(X, kind):
    if kind == "fortran":
        return np.asfortranarray(X)
    if kind == "csr":
        X = X.copy()
        X[np.abs(X) < 0.5] = 0.0
        return sp.csr_matrix(X)
    if kind == "float32":
        return X.astype(np.float32)
    return X


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("gain", ["exp", "linear"])
def test_expected_gain_values_and_vjp_match_numpy(kind, gain):
    rng = np.random.default_rng(0)
    X = layout(rng.normal(size=(30, 5)), kind)
    scorer = ExpectedGainScorer(n_levels=4, gain=gain)
    gains = 2.0 ** np.arange(4) - 1 if gain == "exp" else np.arange(4.0)
    Xd = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    rtol = 1e-5 if kind == "float32" else 1e-12
    for _ in range(5):
        W = rng.normal(size=(4, 5))
        g = rng.normal(size=30)
        h, vjp = scorer.linearize(X, W.ravel())
        np.testing.assert_allclose(h, reference_expected_gain(Xd, W, gains), rtol=rtol)
        np.testing.assert_allclose(scorer.scores(X, W.ravel()), h, rtol=1e-15)
        np.testing.assert_allclose(
            vjp(g), reference_vjp(Xd, W, gains, g), rtol=max(rtol, 1e-10), atol=1e-10
        )


def test_expected_gain_vjp_matches_central_differences():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(20, 3))
    scorer = ExpectedGainScorer(n_levels=3)
    for _ in range(5):
        theta = rng.normal(size=9)
        g = rng.normal(size=20)
        _, vjp = scorer.linearize(X, theta)
        fd = np.empty(9)
        for j in range(9):
            e = np.zeros(9)
            e[j] = 1e-6
            fd[j] = g @ (scorer.scores(X, theta + e) - scorer.scores(X, theta - e)) / 2e-6
        np.testing.assert_allclose(vjp(g), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("kind", LAYOUTS)
def test_linear_scorer_is_xw_and_xtg(kind):
    rng = np.random.default_rng(2)
    X = layout(rng.normal(size=(40, 6)), kind)
    Xd = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    w, g = rng.normal(size=6), rng.normal(size=40)
    f, vjp = LinearScorer().linearize(X, w)
    rtol = 1e-6 if kind == "float32" else 1e-12
    np.testing.assert_allclose(f, Xd @ w, rtol=rtol)
    np.testing.assert_allclose(vjp(g), Xd.T @ g, rtol=rtol)


def test_clipping_at_prediction_and_in_training():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 4))
    W = 3.0 * rng.normal(size=(3, 4))
    gains = np.array([0.0, 1.0, 3.0])
    P = softmax(X @ W.T, axis=1)
    clipped = P.max(axis=1) > 0.8
    assert 0 < clipped.sum() < 200
    scorer = ExpectedGainScorer(n_levels=3, eps=0.8)
    h = scorer.scores(X, W.ravel())
    np.testing.assert_allclose(h, reference_expected_gain(X, W, gains, eps=0.8), rtol=1e-12)
    np.testing.assert_array_equal(h[clipped], gains[P[clipped].argmax(axis=1)])
    # training does not clip by default: the smooth function and its exact gradient
    f, _ = scorer.linearize(X, W.ravel())
    np.testing.assert_allclose(f, reference_expected_gain(X, W, gains), rtol=1e-12)
    # clip_training: clipped rows are constant, so their VJP rows vanish
    train_clip = scorer.with_params(clip_training=True)
    f, vjp = train_clip.linearize(X, W.ravel())
    np.testing.assert_array_equal(f, h)
    g = np.where(clipped, 1.0, 0.0)
    np.testing.assert_array_equal(vjp(g), 0.0)
    # eps = 1 never clips
    never = ExpectedGainScorer(n_levels=3, eps=1.0).scores(X, W.ravel())
    np.testing.assert_allclose(never, reference_expected_gain(X, W, gains), rtol=1e-12)


def test_warm_start_ranks_as_the_linear_model():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(500, 6))
    w = rng.normal(size=6)
    for K in (2, 3, 5):
        scorer = ExpectedGainScorer(n_levels=K)
        h = scorer.scores(X, scorer.from_linear(w))
        np.testing.assert_array_equal(np.argsort(h, kind="stable"), np.argsort(X @ w))


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"n_levels": 1}, "n_levels must be an integer >= 2"),
        ({"gain": "log"}, "gain must be"),
        ({"eps": 0.3}, "eps must be a number in \\[0.5, 1\\]"),
        ({"clip_training": 1}, "clip_training must be a bool"),
    ],
)
def test_bad_scorer_parameters_are_named(params, match):
    with pytest.raises(ValueError, match=match):
        ExpectedGainScorer(**params)


def test_get_scorer():
    assert isinstance(get_scorer("linear"), LinearScorer)
    assert get_scorer(ExpectedGainScorer(n_levels=3)).n_levels == 3
    with pytest.raises(ValueError, match="scorer must be one of"):
        get_scorer("tree")
    with pytest.raises(TypeError, match="no method 'n_params'"):
        get_scorer(object())


# --- the oracle and the fit -------------------------------------------------------------


def ranking_data(seed=0, n_queries=40, m=12, d=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_queries * m, d))
    qid = rng.permutation(np.repeat(np.arange(n_queries), m))  # rows not grouped
    score = X @ rng.normal(size=d) + 0.7 * rng.normal(size=len(X))
    y = np.digitize(score, [-0.5, 1.0]).astype(float)
    return X, y, qid


@pytest.mark.parametrize("loss", ["listnet", "cosine", "listwise_squared", "ranknet"])
def test_scorer_oracle_is_the_risk_of_the_scores(loss):
    X, y, qid = ranking_data()
    scorer = ExpectedGainScorer(n_levels=3)
    prepared = losses.prepare(loss, y, qid)
    oracle = ScorerOracle(X, prepared, scorer)
    rng = np.random.default_rng(5)
    theta = rng.normal(size=oracle.n_features)
    R, a = oracle(theta)
    value, grad_f = losses.risk(loss, scorer.scores(X, theta), y, qid)
    assert R == pytest.approx(value, rel=1e-12)
    np.testing.assert_allclose(a, reference_vjp(X, theta.reshape(3, -1), scorer.gains, grad_f))
    d = rng.normal(size=theta.size)
    fd = (oracle(theta + 1e-6 * d)[0] - oracle(theta - 1e-6 * d)[0]) / 2e-6
    assert fd == pytest.approx(a @ d, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("loss", ["listnet", "cosine", "listwise_squared"])
def test_fit_with_the_expected_gain_scorer(loss):
    X, y, qid = ranking_data()
    lam = 1e-2
    model = bmrm.fit(X, y, loss, qid, lam=lam, ranking_function="expected_gain", tol=1e-8)
    res = model.result_
    assert model.coef_.shape == (3, X.shape[1])
    assert model.scorer_.n_levels == 3
    np.testing.assert_array_equal(model.predict(X), model.scorer_.scores(X, model.coef_.ravel()))
    # a stationary point of lam/2‖θ‖² + R(θ), no worse than the warm start
    oracle = ScorerOracle(X, losses.prepare(loss, y, qid), model.scorer_)
    R, a = oracle(res.x)
    assert res.fun == pytest.approx(lam / 2 * res.x @ res.x + R, rel=1e-12)
    assert np.abs(lam * res.x + a).max() <= 1e-6
    theta0 = model.scorer_.from_linear(res.linear_start)
    R0, _ = oracle(theta0)
    assert res.fun0 == pytest.approx(lam / 2 * theta0 @ theta0 + R0, rel=1e-12)
    assert res.fun <= res.fun0


def test_fit_warm_start_is_the_linear_fit_of_the_same_loss():
    X, y, qid = ranking_data(seed=1)
    linear = bmrm.fit(X, y, "listnet", qid, lam=1e-2, tol=1e-3)
    model = bmrm.fit(X, y, "listnet", qid, lam=1e-2, ranking_function="expected_gain")
    np.testing.assert_array_equal(model.result_.linear_start, linear.coef_)
    # a given linear w0 is expanded; the scorer's own θ is taken as is
    again = bmrm.fit(
        X, y, "listnet", qid, lam=1e-2, ranking_function="expected_gain", w0=linear.coef_
    )
    np.testing.assert_allclose(again.coef_, model.coef_, rtol=1e-10)
    same = bmrm.fit(
        X, y, "listnet", qid, lam=1e-2, ranking_function="expected_gain", w0=model.coef_.ravel()
    )
    assert same.result_.fun <= model.result_.fun + 1e-12


def test_non_convex_loss_with_the_linear_scorer_uses_lbfgs():
    """Cosine is scale invariant: the fit returns a unit-norm stationary direction of R."""
    X, y, qid = ranking_data(seed=2)
    model = bmrm.fit(X, y, "cosine", qid, lam=1e-3, tol=1e-9)
    assert model.scorer_ is None and model.coef_.shape == (X.shape[1],)
    assert model.result_.method == "lbfgs"
    assert np.linalg.norm(model.coef_) == pytest.approx(1.0, rel=1e-12)
    R, a = ScorerOracle(X, losses.prepare("cosine", y, qid), LinearScorer())(model.coef_)
    assert model.result_.fun == R
    assert np.abs(a).max() <= 1e-7
    np.testing.assert_allclose(model.predict(X), X @ model.coef_, rtol=1e-12)


def test_linear_scorer_with_a_convex_loss_is_the_bundle_method():
    X, y, qid = ranking_data(seed=3)
    a = bmrm.fit(X, y, "listnet", qid, lam=1e-2, ranking_function="linear")
    b = bmrm.fit(X, y, "listnet", qid, lam=1e-2)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.result_.gap >= 0


def test_lbfgs_callback_gets_a_result():
    """L-BFGS passes an OptimizeResult (x, fun, nit) as the bundle methods pass their
    BMRMResult: a callback written for them works (it was given a bare θ)."""
    rng = np.random.default_rng(0)
    A = rng.normal(size=(6, 4))

    def oracle(theta):
        r = A @ theta - 1.0
        return 0.5 * float(r @ r), A.T @ r

    seen = []
    res = minimize_lbfgs(oracle, 0.5, np.zeros(4), tol=1e-10, callback=seen.append)
    assert [r.nit for r in seen] == list(range(1, res.nit + 1))
    assert all(r.method == "lbfgs" and r.x.shape == (4,) for r in seen)
    np.testing.assert_array_equal(seen[-1].x, res.x)
    assert seen[-1].fun == pytest.approx(res.fun, rel=1e-12)
    assert all(b.fun <= a.fun for a, b in zip(seen, seen[1:], strict=False))


def test_minimize_lbfgs_matches_a_closed_form():
    """lam/2‖θ‖² + ½‖Aθ − b‖² has the minimiser (AᵀA + lam I)⁻¹ Aᵀb."""
    rng = np.random.default_rng(6)
    A, b = rng.normal(size=(30, 4)), rng.normal(size=30)

    def oracle(theta):
        r = A @ theta - b
        return 0.5 * r @ r, A.T @ r

    res = minimize_lbfgs(oracle, 0.5, np.zeros(4), tol=1e-10)
    np.testing.assert_allclose(res.x, np.linalg.solve(A.T @ A + 0.5 * np.eye(4), A.T @ b), 1e-7)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"loss": "warp", "method": "lbfgs"}, "'warp' .* is not smooth"),
        ({"loss": "warp", "ranking_function": None, "method": "lbfgs"}, "'warp' .* is not smooth"),
        ({"regularizer": "l1"}, "regularizer='l1' is not supported"),
        ({"fit_intercept": True}, "fit_intercept=True is not supported"),
        ({"w0": np.zeros(7)}, "w0 must have shape \\(5,\\) .* or \\(15,\\)"),
    ],
)
def test_fit_rejects_what_lbfgs_cannot_do(kwargs, match):
    X, y, qid = ranking_data()
    kwargs = {"loss": "listnet", "ranking_function": "expected_gain", **kwargs}
    with pytest.raises(ValueError, match=match):
        bmrm.fit(X, y, qid=qid, **kwargs)


def test_a_model_with_a_scorer_is_saved(tmp_path):
    """Model files store the scorer (tests/bmrm/test_model_io.py tests the format)."""
    X, y, qid = ranking_data()
    model = bmrm.fit(X, y, "listnet", qid, lam=1e-2, ranking_function="expected_gain", max_iter=3)
    model.save(tmp_path / "m.json")
    loaded = bmrm.load(tmp_path / "m.json")
    assert loaded.scorer_.get_params() == model.scorer_.get_params()
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_ranker_with_the_expected_gain_scorer():
    from sklearn.base import clone

    X, y, qid = ranking_data(seed=4)
    ranker = bmrm.BMRMRanker(loss="listnet", lam=1e-2, scorer="expected_gain").fit(X, y, qid)
    model = bmrm.fit(X, y, "listnet", qid, lam=1e-2, ranking_function="expected_gain")
    np.testing.assert_array_equal(ranker.coef_, model.coef_)
    np.testing.assert_array_equal(ranker.predict(X), model.predict(X))
    assert ranker.scorer_.n_levels == 3 and ranker.n_iter_ == model.result_.nit
    assert clone(ranker).get_params()["scorer"] == "expected_gain"
    linear = bmrm.BMRMRanker(loss="listnet", lam=1e-2).fit(X, y, qid)
    assert linear.scorer_ is None
    np.testing.assert_allclose(linear.predict(X), X @ linear.coef_, rtol=1e-12)


def test_the_former_scorer_keyword_still_works_with_a_future_warning():
    """fit's scorer= is renamed ranking_function= (scikit-learn's scorer is a metric); the
    old keyword gives the same model, with a FutureWarning, and both at once are refused."""
    X, y, qid = ranking_data(seed=2)
    new = bmrm.fit(X, y, "listnet", qid, lam=1e-2, ranking_function="expected_gain")
    with pytest.warns(FutureWarning, match="renamed ranking_function="):
        old = bmrm.fit(X, y, "listnet", qid, lam=1e-2, scorer="expected_gain")
    np.testing.assert_array_equal(old.coef_, new.coef_)
    assert old.result_.fun == new.result_.fun
    with pytest.raises(ValueError, match="give ranking_function= only"):
        bmrm.fit(X, y, "listnet", qid, ranking_function="linear", scorer="linear")

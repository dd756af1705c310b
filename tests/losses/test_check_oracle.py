"""losses.check_oracle: a user's own numba loss, the built-in losses, and broken losses."""

import cvxpy as cp
import numpy as np
import pytest
from numba import njit

import bmrm
import losses

# --- A user's own loss, written with numba: check it, then fit it. ------------------------


@njit
def top_squared_hinge(f, y, query_ptr, values, grad):
    """Per query: Σ max(0, 1 + f_j − f_i)² over top-labelled i and lower-labelled j."""
    for q in range(query_ptr.size - 1):
        lo, hi = query_ptr[q], query_ptr[q + 1]
        top = y[lo:hi].max()
        values[q] = 0.0
        grad[lo:hi] = 0.0
        for i in range(lo, hi):
            for j in range(lo, hi):
                r = 1.0 + f[j] - f[i]
                if y[i] == top and y[j] < top and r > 0.0:
                    values[q] += r * r
                    grad[j] += 2.0 * r
                    grad[i] -= 2.0 * r


class TopSquaredHinge:
    """Push the top-labelled documents of each query above the others (squared hinge)."""

    smooth = True

    def validate(self, y, query_ptr):
        return np.asarray(y, dtype=np.float64), query_ptr

    def loss_grad(self, f, targets):
        y, query_ptr = targets
        values = np.empty(len(query_ptr) - 1)
        grad = np.empty_like(f)
        top_squared_hinge(f, y, query_ptr, values, grad)
        return values, grad


def test_user_numba_loss_passes_check_oracle_and_fits():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 5))
    y = rng.integers(0, 3, size=40)
    qid = np.repeat(np.arange(8), 5)
    loss = TopSquaredHinge()
    losses.check_oracle(loss, raise_on_failure=True)
    losses.check_oracle(loss, y, qid, raise_on_failure=True)
    model = bmrm.fit(X, y, loss=loss, qid=qid, lam=0.1, tol=1e-6)

    # the same problem, solved directly: J(w) = lam ½‖w‖² + mean over queries of the loss
    top = np.array([y[qid == q].max() for q in qid])  # each row's query top label
    i, j = np.nonzero((qid[:, None] == qid) & (y[:, None] == top[:, None]) & (y < top[:, None]))
    w = cp.Variable(5)
    f = X @ w
    J = 0.1 * 0.5 * cp.sum_squares(w) + cp.sum_squares(cp.pos(1 + f[j] - f[i])) / 8
    J_star = cp.Problem(cp.Minimize(J)).solve(solver=cp.CLARABEL)
    assert model.result_.fun - J_star <= 1e-6 * J_star + 1e-8
    assert np.linalg.norm(model.coef_ - w.value) <= np.sqrt(2 * model.result_.gap / 0.1) + 1e-6


# --- Every built-in loss passes. ---------------------------------------------------------

CHECKS = [
    "protocol",
    "validate",
    "shapes",
    "finite",
    "nonnegative",
    "subgradient",
    "directional_derivative",
    "finite_differences",
    "hessian",
    "order_invariance",
    "metric_bound",
    "deterministic",
    "inputs_unchanged",
]


def preference_data(seed):
    """Labels, shuffled (non-contiguous) qid, pairs from labels and random costs."""
    from losses.preference import pairs_from_labels

    rng = np.random.default_rng(seed)
    sizes = [1, 2, 4, 6, 9]
    y = np.concatenate([rng.integers(0, 4, m) for m in sizes])
    y[3:7] = 2  # an all-equal query
    qid = np.repeat(np.arange(len(sizes)), sizes)
    shuffle = rng.permutation(len(y))
    y, qid = y[shuffle], qid[shuffle]
    pairs, _ = pairs_from_labels(y, qid)
    return y, qid, {"pairs": pairs, "pair_costs": rng.uniform(0.0, 2.0, len(pairs))}


@pytest.mark.parametrize("name", losses.available())
def test_builtin_losses_pass(name):
    if name == "preference":
        y, qid, data = preference_data(1)
        report = losses.check_oracle(name, y, qid, **data)
    else:
        report = losses.check_oracle(name)
    assert report.ok, str(report)
    assert [c.name for c in report.checks] == CHECKS
    loss = losses.get(name)
    expected_skips = {"finite_differences"} if not loss.smooth else set()
    if getattr(loss, "hessp", None) is None:
        expected_skips.add("hessian")
    if not hasattr(loss, "metric"):
        expected_skips.add("metric_bound")
    if not loss.convex and not getattr(loss, "latent", False):
        # cosine, warp: convexity checks do not apply (latent losses: on their surrogates)
        expected_skips |= {"subgradient", "directional_derivative"}
    assert {c.name for c in report.checks if c.status == "skip"} == expected_skips


@pytest.mark.parametrize(
    "params",
    [
        {"k": 1, "truncate_c": True},
        {"k": 3, "gain": "linear"},
    ],
)
def test_builtin_ndcg_with_parameters_passes(params):
    report = losses.check_oracle(losses.get("ndcg", **params), n_trials=20, random_state=3)
    assert report.ok, str(report)


# --- Broken user losses are caught, each by the check that names the defect. ------------


class UserSquared:
    """A correct pointwise loss ½(f − y)²; the broken losses below change one thing."""

    pointwise = True
    smooth = True

    def validate(self, y, query_ptr, **data):
        return np.asarray(y, dtype=np.float64)

    def loss_grad(self, f, y):
        return 0.5 * (f - y) ** 2, f - y


class WrongSign(UserSquared):
    def loss_grad(self, f, y):
        return 0.5 * (f - y) ** 2, y - f


class NegativeValues(UserSquared):
    def loss_grad(self, f, y):
        return 0.5 * (f - y) ** 2 - 1.0, f - y


class MutatesScores(UserSquared):
    def loss_grad(self, f, y):
        r = f
        r -= y
        return 0.5 * r**2, r.copy()


class Nondeterministic(UserSquared):
    calls = 0

    def loss_grad(self, f, y):
        self.calls += 1
        return 0.5 * (f - y) ** 2 + 1e-3 * self.calls, f - y


class Raises(UserSquared):
    def loss_grad(self, f, y):
        raise RuntimeError("kernel not compiled")


class NoGradient:
    def validate(self, y, query_ptr, **data):
        return y


class PerQuery:
    """A per-query loss: targets are (y, query_ptr)."""

    def validate(self, y, query_ptr, **data):
        return np.asarray(y, dtype=np.float64), np.asarray(query_ptr)


class WrongShape(PerQuery):
    """Returns one value per sample while declaring a per-query loss."""

    def loss_grad(self, f, targets):
        y, _ = targets
        return np.abs(f - y), np.sign(f - y)


class FirstListedOnTop(PerQuery):
    """Convex, non-negative, exact subgradient, but depends on the listing order: the
    first document listed in each query should score 1 above every other one."""

    def loss_grad(self, f, targets):
        _, ptr = targets
        values = np.zeros(len(ptr) - 1)
        grad = np.zeros_like(f)
        for q in range(len(ptr) - 1):
            first, rest = ptr[q], np.arange(ptr[q] + 1, ptr[q + 1])
            margin = 1.0 + f[rest] - f[first]
            active = rest[margin > 0]
            values[q] = margin[margin > 0].sum()
            grad[active] += 1.0
            grad[first] -= len(active)
        return values, grad


class UnguardedPairMean(PerQuery):
    """Mean pairwise hinge, dividing by the number of comparable pairs without guarding
    queries that have none (one document, all labels equal): 0 / 0."""

    def loss_grad(self, f, targets):
        y, ptr = targets
        values = np.zeros(len(ptr) - 1)
        grad = np.zeros_like(f)
        with np.errstate(invalid="ignore", divide="ignore"):
            for q in range(len(ptr) - 1):
                rows = np.arange(ptr[q], ptr[q + 1])
                i, j = np.meshgrid(rows, rows, indexing="ij")
                comparable = y[i] < y[j]
                margin = np.where(comparable, 1.0 + f[i] - f[j], 0.0)
                active = margin > 0
                n_pairs = comparable.sum()
                values[q] = margin[active].sum() / n_pairs
                np.add.at(grad, i[active], 1.0 / n_pairs)
                np.add.at(grad, j[active], -1.0 / n_pairs)
        return values, grad


class MetricAboveLoss(UserSquared):
    def metric(self, f, y):
        return np.ones_like(f)


class HalfHessian(UserSquared):
    """The squared loss with a Hessian-vector product off by a factor 2."""

    def hessp(self, f, d, y):
        return 0.5 * d


class AsymmetricHessian(UserSquared):
    """A Hessian-vector product of a non-symmetric matrix (a shift of d)."""

    def hessp(self, f, d, y):
        return d + 0.5 * np.roll(d, 1)


class NegativeCurvature(UserSquared):
    """A symmetric Hessian-vector product of an indefinite matrix, for a convex loss."""

    def hessp(self, f, d, y):
        return -d


@pytest.mark.parametrize(
    ("loss", "failed"),
    [
        (HalfHessian(), ["hessian"]),
        (AsymmetricHessian(), ["hessian"]),
        (NegativeCurvature(), ["hessian"]),
        (WrongSign(), ["subgradient", "directional_derivative", "finite_differences"]),
        (NegativeValues(), ["nonnegative"]),
        (MutatesScores(), ["inputs_unchanged"]),
        (Nondeterministic(), ["finite_differences", "order_invariance", "deterministic"]),
        (Raises(), ["shapes"]),
        (NoGradient(), ["protocol"]),
        (WrongShape(), ["shapes"]),
        (FirstListedOnTop(), ["order_invariance"]),
        (MetricAboveLoss(), ["metric_bound"]),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, list) else "-".join(v),
)
def test_broken_losses_fail_the_right_checks(loss, failed):
    report = losses.check_oracle(loss)
    assert report.failed == failed, str(report)
    assert not report.ok
    for name in failed:
        assert f"FAIL  {name}" in str(report)
    with pytest.raises(AssertionError, match=failed[0]):
        losses.check_oracle(loss, raise_on_failure=True)


def test_messages_name_the_defect():
    assert "central differences of the gradient" in str(losses.check_oracle(HalfHessian()))
    assert "not symmetric" in losses.check_oracle(AsymmetricHessian())["hessian"].message
    assert "< 0 for a loss declared convex" in str(losses.check_oracle(NegativeCurvature()))
    assert "no method 'loss_grad'" in losses.check_oracle(NoGradient())["protocol"].message
    assert "kernel not compiled" in losses.check_oracle(Raises())["shapes"].message
    shape = losses.check_oracle(WrongShape())["shapes"].message
    assert "values must have shape (7,) (one per query)" in shape
    negative = losses.check_oracle(NegativeValues())["nonnegative"].message
    assert "< 0 at sample" in negative
    # checks that cannot run after a fatal failure are skipped, not failed
    report = losses.check_oracle(NoGradient())
    assert all(c.status == "skip" for c in report.checks[1:])


def test_non_finite_output_is_reported_with_the_query():
    report = losses.check_oracle(UnguardedPairMean())
    assert "finite" in report.failed
    message = report["finite"].message
    assert "nan" in message
    # the first degenerate query of the generated problem is the one-document query 0
    assert "query 0 (qid 0, 1 documents)" in message


def test_user_loss_with_given_targets_and_shuffled_queries():
    rng = np.random.default_rng(5)
    qid = rng.permutation(np.repeat([4, 9, 2], [3, 5, 4]))
    y = rng.integers(0, 3, qid.size)
    assert losses.check_oracle(TopSquaredHinge(), y, qid).ok
    assert losses.check_oracle(FirstListedOnTop(), y, qid).failed == ["order_invariance"]
    rejected = losses.check_oracle("ndcg", np.full(12, -1), qid)
    assert rejected.failed == ["validate"]
    assert "non-negative integer" in rejected["validate"].message


def test_check_oracle_arguments():
    with pytest.raises(ValueError, match="n_trials"):
        losses.check_oracle("squared", n_trials=0)
    with pytest.raises(ValueError, match="loss must be one of"):
        losses.check_oracle("no_such_loss")
    a = losses.check_oracle(UserSquared(), random_state=7)
    b = losses.check_oracle(UserSquared(), random_state=7)
    assert [(c.status, c.message) for c in a.checks] == [(c.status, c.message) for c in b.checks]


@pytest.mark.parametrize(
    "sizes, text",
    [
        ([3, 1, 4], "3 queries (sizes [3, 1, 4])"),
        ([20] * 100, "100 queries (each of 20 rows)"),
        ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 40], "11 queries (sizes 1 to 40, median 6)"),
    ],
)
def test_validate_line_summarises_many_query_sizes(sizes, text):
    qid = np.repeat(np.arange(len(sizes)), sizes)
    y = np.arange(len(qid)) % 3
    report = losses.check_oracle("ordinal", y, qid)
    line = next(c.message for c in report.checks if c.name == "validate")
    assert line == f"accepted y: {len(qid)} rows in {text}"

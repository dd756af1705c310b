"""One property suite over every built-in loss, and bmrm.fit against cvxpy on ranking losses.

Properties (each loss with representative parameters, on random query sets with ties in
scores and labels, one- and two-document queries, all-equal-label queries and a query of 200
documents): non-negativity; the loss bounds the true ranking loss of the order that sorting
f gives (computed here from the definitions, the worst tie-breaking); the subgradient
inequality (for a latent loss: its convex surrogate at fixed latent part, which must majorise
it); finite differences for smooth losses; equivariance under reordering documents
within a query; ``losses.risk`` on shuffled rows; parallel == serial; rebuilding from
``get_params``. The subgradient inequality is skipped, explicitly, for the losses that
declare ``convex = False`` (cosine, WARP; their non-convexity is shown by counterexamples in
``test_surrogate.py``); the surrogate losses bound no true measure. The fit tests write each
ranking loss as a cvxpy expression by brute force (all pairs; all permutations of a query)
and compare the bundle method's optimum and certificate with the direct solution.

Properties are evaluated with one numba thread, so that a busy machine (where waking worker
threads for each small kernel call dominates) does not slow the suite down;
``test_parallel_equals_serial`` shows that the ranking losses' kernels give the same bits
on several blocks of queries run by the thread pool as on one.
"""

import itertools
import json
from dataclasses import dataclass, field

import cvxpy as cp
import numba
import numpy as np
import pytest

import bmrm
import losses
from losses.preference import pairs_from_labels
from tests.losses.test_average_precision import all_rankings, average_precision


@pytest.fixture(autouse=True)
def one_thread():
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    yield
    numba.set_num_threads(threads)


@dataclass(frozen=True)
class Case:
    name: str
    params: dict = field(default_factory=dict)
    pair_costs: str = "labels"  # preference: "labels" (1 per pair) or "random"

    def loss(self):
        return losses.get(self.name, **self.params)

    @property
    def id(self) -> str:
        parts = [self.name, *(f"{k}={v}" for k, v in self.params.items())]
        if self.name == "preference":
            parts.append(f"costs={self.pair_costs}")
        return "-".join(parts)


CASES = [
    Case("squared"),
    Case("hinge"),
    Case("logistic"),
    *[
        Case("ordinal", {"cost": cost, "normalize": normalize})
        for cost in ("zero_one", "linear")
        for normalize in ("query", "none")
    ],
    # the squared pairwise hinge
    Case("ordinal", {"cost": "zero_one", "normalize": "query", "hinge": "squared"}),
    Case("ordinal", {"cost": "linear", "normalize": "none", "hinge": "squared"}),
    *[
        Case("preference", {"normalize": normalize}, costs)
        for normalize in ("query", "none")
        for costs in ("labels", "random")
    ],
    Case("preference", {"normalize": "none", "hinge": "squared"}, "random"),
    *[
        Case("ndcg", {"k": k, "truncate_c": truncate, "gain": gain})
        for k in (1, 3, 10)
        for truncate in (False, True)
        for gain in ("exp", "linear")
    ],
    *[Case("neru", {"alpha": alpha, "d": d}) for alpha in (2.0, 5.0) for d in (0.0, 1.0)],
    Case("neru", {"alpha": 3.0, "d": 0.0, "k": 3, "truncate_c": True}),
    Case("ndcg", {"k": 3, "discount": "original"}),
    Case("ndcg", {"k": 10, "truncate_c": True, "discount": "original"}),
    # the hinge bound with latent ties (the cases above use the default bound: the ramp on
    # the large layout, whose median query is long, the hinge on the small one)
    Case("ndcg", {"k": 3, "bound": "hinge"}),
    Case("ndcg", {"k": 10, "truncate_c": True, "bound": "hinge"}),
    Case("neru", {"alpha": 2.0, "d": 1.0, "bound": "hinge"}),
    # the convex tie rule
    Case("ndcg", {"k": 3, "ties": "increasing"}),
    Case("ndcg", {"k": 10, "truncate_c": True, "gain": "linear", "ties": "increasing"}),
    Case("neru", {"alpha": 2.0, "d": 1.0, "ties": "increasing"}),
    Case("neru", {"alpha": 3.0, "k": 3, "truncate_c": True, "ties": "increasing"}),
    # the pair joint feature map
    Case("ndcg", {"k": 3, "ties": "pairs"}),
    Case("ndcg", {"k": 10, "gain": "linear", "ties": "pairs"}),
    Case("ndcg", {"k": 4, "discount": "original", "ties": "pairs"}),
    Case("neru", {"alpha": 2.0, "d": 1.0, "k": 5, "ties": "pairs"}),
    # the pairwise hinge added, with each tie rule
    Case("ndcg", {"k": 3, "pairwise": 0.5}),
    Case("neru", {"alpha": 2.0, "d": 1.0, "ties": "increasing", "pairwise": 2.0}),
    Case("ndcg", {"k": 4, "gain": "linear", "ties": "pairs", "pairwise": 1.0}),
    # the average-precision hinge, alone and added with each tie rule
    Case("map"),
    Case("map", {"threshold": 2}),
    Case("ndcg", {"k": 3, "average_precision": 0.5}),
    Case("ndcg", {"k": 10, "truncate_c": True, "average_precision": 2.0, "pairwise": 0.5}),
    Case("neru", {"alpha": 2.0, "d": 1.0, "ties": "increasing", "average_precision": 1.0}),
    Case("ndcg", {"k": 4, "ties": "pairs", "average_precision": 1.0}),
    Case("cosine", {"mapping": "linear"}),
    Case("cosine", {"mapping": "exp"}),
    Case("listnet", {"alpha": 0.5, "mapping": "linear"}),
    Case("listnet", {"alpha": 2.0, "mapping": "exp"}),
    Case("listwise_squared", {"mapping": "linear"}),
    Case("ranknet", {"normalize": "query"}),
    Case("ranknet", {"normalize": "none"}),
    Case("softmax", {"threshold": 1.0}),
    Case("warp", {"threshold": 2.0}),
]
# surrogate losses: no true ranking measure is bounded, and two are not convex
SURROGATES = ("cosine", "listnet", "listwise_squared", "ranknet", "softmax", "warp")
NON_CONVEX = ("cosine", "warp")
CASE_PARAMS = [pytest.param(case, id=case.id) for case in CASES]
RANKING = ("ordinal", "preference", "ndcg", "neru", "map")

# query sizes; the third query gets all labels equal
LAYOUTS = {
    "small": [1, 2, 4, 3, 5, 8, 13, 2, 1, 2],
    "large": [200, 6],
}


@dataclass
class Problem:
    y: np.ndarray
    qid: np.ndarray
    data: dict
    query_ptr: np.ndarray


def make_problem(case: Case, rng, layout: str) -> Problem:
    """Rows grouped by query (ids not sorted) with targets suited to the loss."""
    sizes = LAYOUTS[layout]
    qid = np.repeat(rng.permutation(len(sizes)) * 7 + 3, sizes)
    query_ptr = np.concatenate(([0], np.cumsum(sizes)))
    n = qid.size
    if case.name == "squared":
        y = np.round(rng.normal(size=n), 1)
    elif case.name in ("hinge", "logistic"):
        y = rng.choice([-1.0, 1.0], n)
    else:
        y = rng.integers(0, 4, n)
    if len(sizes) > 2:
        y[query_ptr[2] : query_ptr[3]] = y[query_ptr[2]]
    data = {}
    if case.name == "preference":
        pairs, costs = pairs_from_labels(y, qid)
        if case.pair_costs == "random":
            costs = rng.uniform(0.0, 2.0, len(pairs)) * (rng.random(len(pairs)) > 0.1)
        data = {"pairs": pairs, "pair_costs": costs}
    return Problem(y, qid, data, query_ptr)


def random_scores(rng, n: int, ties: bool, scale: float = 1.0) -> np.ndarray:
    f = scale * rng.normal(size=n)
    if ties:
        rounded = rng.random(n) < 0.6
        f[rounded] = np.round(f[rounded])
    return f


def evaluate(loss, prob: Problem, f: np.ndarray):
    prepared = losses.prepare(loss, prob.y, prob.qid, **prob.data)
    assert prepared.groups.order is None  # rows are grouped: internal order = caller order
    values, grad = prepared.loss_grad(f)
    return values, grad, prepared.targets


def term_ptr(loss, prob: Problem) -> np.ndarray:
    return np.arange(len(prob.y) + 1) if loss.pointwise else prob.query_ptr


def per_term(x, ptr):
    cs = np.concatenate(([0.0], np.cumsum(x)))
    return cs[ptr[1:]] - cs[ptr[:-1]]


def where(prob: Problem, f, ptr, j) -> str:
    rows = slice(ptr[j], ptr[j + 1])
    return f"term {j}: f = {f[rows].tolist()}, y = {prob.y[rows].tolist()}"


def problems(case: Case, seeds=range(3)):
    for seed, (index, layout) in itertools.product(seeds, enumerate(LAYOUTS)):
        rng = np.random.default_rng([seed, index])
        yield rng, make_problem(case, rng, layout)


# --- the true ranking losses, from their definitions ------------------------------------


def measure_weights(case: Case, m: int):
    """(a, c): position discounts of the measure and the loss's position weights c."""
    i = np.arange(1, m + 1, dtype=np.float64)
    p = case.params
    k = p.get("k", 10 if case.name == "ndcg" else None)
    if case.name == "ndcg" and p.get("discount") == "original":
        a = 1.0 / np.log2(np.maximum(i, 2.0))  # 1 at positions 1 and 2, then 1 / log2(i)
    elif case.name == "ndcg":
        a = 1.0 / np.log2(i + 1.0)
    else:
        a = 2.0 ** (-(i - 1.0) / (p.get("alpha", 5.0) - 1.0))
    if k is not None:
        a[i > k] = 0.0
    c = (i + 1.0) ** -0.25
    if p.get("truncate_c", False):
        c[i > k] = 0.0
    return a, c


def gains(case: Case, y):
    y = np.asarray(y, dtype=np.float64)
    if case.name == "map":  # relevant (1) or not (0); AP depends on the relevant set only
        return (y >= case.params.get("threshold", 1)).astype(np.float64)
    if case.name == "ndcg":
        return 2.0**y - 1.0 if case.params.get("gain", "exp") == "exp" else y
    return np.maximum(y - case.params.get("d", 0.0), 0.0)


def query_pairs(case: Case, prob: Problem, rows: np.ndarray):
    """(i, j, cost) of the pair terms of one query, for ordinal and preference."""
    if case.name == "ordinal":
        y = prob.y
        i, j = np.nonzero(y[rows][:, None] < y[rows][None, :])
        i, j = rows[i], rows[j]
        cost = np.ones(len(i)) if case.params["cost"] == "zero_one" else (y[j] - y[i]) * 1.0
        return i, j, cost
    pairs, costs = prob.data["pairs"], prob.data["pair_costs"]
    mine = np.isin(pairs[:, 0], rows)
    return pairs[mine, 0], pairs[mine, 1], np.asarray(costs, dtype=np.float64)[mine]


def true_loss(case: Case, prob: Problem, f):
    """Per-term true loss of the ranking by f with the worst tie-breaking (None if none)."""
    if case.name in ("squared", "logistic", *SURROGATES):
        return None
    if case.name == "hinge":
        return (prob.y * f <= 0).astype(np.float64)
    out = np.zeros(len(prob.query_ptr) - 1)
    for q in range(len(out)):
        rows = np.arange(prob.query_ptr[q], prob.query_ptr[q + 1])
        if case.name in ("ordinal", "preference"):
            i, j, cost = query_pairs(case, prob, rows)
            if len(i):
                norm = len(i) if case.params.get("normalize") == "query" else 1
                out[q] = np.sum(cost * (f[i] >= f[j])) / norm
            continue
        b = gains(case, prob.y[rows])
        if np.all(b == b[0]):
            continue
        worst = np.lexsort((b, -f[rows]))  # score descending, ties: lower gain first
        if case.name == "map":
            out[q] = 1.0 - average_precision(b[worst] > 0)
            continue
        a, _ = measure_weights(case, len(rows))
        out[q] = 1.0 - (a @ b[worst]) / (a @ np.sort(b)[::-1])
    return out


# --- the properties ----------------------------------------------------------------------


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_nonnegative_and_bounds_the_true_loss(case):
    loss = case.loss()
    for rng, prob in problems(case):
        n = len(prob.y)
        ordered = 10.0 * np.asarray(prob.y, dtype=np.float64) + 0.01 * rng.normal(size=n)
        for f in (
            random_scores(rng, n, ties=True),
            random_scores(rng, n, ties=False, scale=3.0),
            np.zeros(n),
            ordered,
        ):
            values, _, targets = evaluate(loss, prob, f)
            ptr = term_ptr(loss, prob)
            assert values.shape == (len(ptr) - 1,)
            j = int(np.argmin(values))
            assert values[j] >= 0, where(prob, f, ptr, j)
            truth = true_loss(case, prob, f)
            if truth is None:
                continue
            slack = 1e-12 * (1.0 + truth)
            j = int(np.argmax(truth - values - slack))
            assert values[j] >= truth[j] - slack[j], where(prob, f, ptr, j)
            np.testing.assert_allclose(
                loss.metric(f, targets), truth, rtol=1e-12, atol=1e-12, err_msg=str(f)
            )


def test_only_the_declared_non_convex_losses_skip_the_subgradient_inequality():
    # latent losses are not convex either, but their convex surrogates are checked instead
    skipped = {
        case.name
        for case in CASES
        if not case.loss().convex and not getattr(case.loss(), "latent", False)
    }
    assert skipped == set(NON_CONVEX)


@pytest.mark.parametrize(
    "case",
    [
        p
        for p in CASE_PARAMS
        if p.values[0].loss().convex or getattr(p.values[0].loss(), "latent", False)
    ],
)
def test_subgradient_inequality(case):
    """l(f') >= l(f) + <g, f' − f>; for a latent loss (a difference of convex functions) the
    convex surrogate l_f with the latent part fixed at f takes its place, l_f(f') >= l(f) +
    <g, f' − f>, and it majorises the loss, l(f') <= l_f(f')."""
    loss = case.loss()
    latent = getattr(loss, "latent", False)
    for rng, prob in problems(case):
        n = len(prob.y)
        ptr = term_ptr(loss, prob)
        for _ in range(4):
            f = random_scores(rng, n, ties=True)
            if rng.random() < 0.5:
                f2 = random_scores(rng, n, ties=True, scale=2.0)
            else:
                f2 = f + 0.3 * rng.normal(size=n)
            values, grad, targets = evaluate(loss, prob, f)
            values2, _, _ = evaluate(loss, prob, f2)
            if latent:
                surrogate2, _ = loss.loss_grad(f2, loss.convexify(f, targets))
                slack = 1e-10 * (1.0 + np.abs(values2) + np.abs(surrogate2))
                j = int(np.argmax(values2 - surrogate2 - slack))
                assert values2[j] <= surrogate2[j] + slack[j], where(prob, f, ptr, j)
                values2 = surrogate2
            # per term: l_q(f') >= l_q(f) + <g_q, f'_q - f_q> (terms depend on their rows only)
            linear = values + per_term(grad * (f2 - f), ptr)
            slack = 1e-10 * (1.0 + np.abs(values) + np.abs(values2) + np.abs(linear))
            j = int(np.argmax(linear - values2 - slack))
            assert values2[j] >= linear[j] - slack[j], where(prob, f, ptr, j) + f", f' = {f2}"


@pytest.mark.parametrize("case", [p for p in CASE_PARAMS if p.values[0].loss().smooth])
def test_finite_differences(case):
    loss = case.loss()
    for rng, prob in problems(case):
        n = len(prob.y)
        for scale in (0.3, 3.0):
            f = random_scores(rng, n, ties=False, scale=scale)
            d = rng.normal(size=n)
            h = 1e-6
            plus = evaluate(loss, prob, f + h * d)[0].sum()
            minus = evaluate(loss, prob, f - h * d)[0].sum()
            grad = evaluate(loss, prob, f)[1]
            assert (plus - minus) / (2 * h) == pytest.approx(grad @ d, rel=1e-6, abs=1e-6)


def within_query_permutation(rng, ptr):
    perm = np.arange(ptr[-1])
    for q in range(len(ptr) - 1):
        perm[ptr[q] : ptr[q + 1]] = ptr[q] + rng.permutation(ptr[q + 1] - ptr[q])
    return perm


def permuted(prob: Problem, perm) -> Problem:
    """The same problem with row r of the new one being row perm[r] of the old one."""
    inverse = np.argsort(perm)
    data = dict(prob.data)
    if "pairs" in data:
        data["pairs"] = inverse[data["pairs"]]
    return Problem(prob.y[perm], prob.qid[perm], data, prob.query_ptr)


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_reordering_documents_permutes_the_gradient(case):
    loss = case.loss()
    # the structured losses choose among tied maximisers at tied scores; the others do not
    grad_at_ties = case.name not in ("ndcg", "neru")
    for rng, prob in problems(case):
        n = len(prob.y)
        perm = within_query_permutation(rng, prob.query_ptr)
        other = permuted(prob, perm)
        for ties in (False, True):
            f = random_scores(rng, n, ties=ties)
            values, grad, _ = evaluate(loss, prob, f)
            values_p, grad_p, _ = evaluate(loss, other, f[perm])
            expected = values[perm] if loss.pointwise else values
            np.testing.assert_allclose(values_p, expected, rtol=1e-12, atol=1e-14)
            if grad_at_ties or not ties:
                np.testing.assert_allclose(grad_p, grad[perm], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_risk_on_shuffled_rows(case):
    loss = case.loss()
    for rng, prob in problems(case, seeds=range(2)):
        n = len(prob.y)
        shuffle = rng.permutation(n)
        other = permuted(prob, shuffle)
        for ties in (False, True):
            f = random_scores(rng, n, ties=ties)
            value, grad = losses.risk(loss, f, prob.y, prob.qid, **prob.data)
            value_s, grad_s = losses.risk(loss, f[shuffle], other.y, other.qid, **other.data)
            assert value_s == pytest.approx(value, rel=1e-12, abs=1e-15)
            if case.name not in ("ndcg", "neru") or not ties:
                np.testing.assert_allclose(grad_s, grad[shuffle], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("case", [p for p in CASE_PARAMS if p.values[0].name in RANKING])
def test_parallel_equals_serial(force_threads, case):
    """The ranking losses run their kernels over blocks of queries: three blocks (two for the
    two queries of the large layout) on the thread pool give the bits of one block. The
    other losses have no blocked kernel."""
    loss = case.loss()
    for rng, prob in problems(case, seeds=range(2)):
        f = random_scores(rng, len(prob.y), ties=True)
        force_threads(1)
        serial = evaluate(loss, prob, f)[:2]
        runs = force_threads(3)
        parallel = evaluate(loss, prob, f)[:2]
        assert runs and set(runs) == {min(3, len(prob.query_ptr) - 1)}
        np.testing.assert_array_equal(parallel[0], serial[0])
        np.testing.assert_array_equal(parallel[1], serial[1])


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_get_params_rebuilds_the_loss(case):
    loss = case.loss()
    params = json.loads(json.dumps(loss.get_params()))
    rebuilt = losses.get(loss.name, **params)
    assert type(rebuilt) is type(loss)
    assert rebuilt.get_params() == loss.get_params()
    for rng, prob in problems(case, seeds=range(1)):
        f = random_scores(rng, len(prob.y), ties=True)
        for a, b in zip(evaluate(loss, prob, f)[:2], evaluate(rebuilt, prob, f)[:2], strict=True):
            np.testing.assert_array_equal(a, b)


# --- bmrm.fit reaches the optimum of the whole problem solved directly ------------------


def cvxpy_risk(case: Case, prob: Problem, f):
    """Mean over queries of the ranking loss, as a cvxpy expression in the scores f.

    Pairwise losses: Σ_pairs cost · pos(1 + f_i − f_j) (squared for ``hinge="squared"``),
    normalised. Structured losses:
    max over all m! permutations π of Δ(π, y) + Σ_i c_i f_{π(i)}, plus the max over ideal
    orderings σ of −Σ_i c_i f_{σ(i)} (the convex tie rule ``ties="increasing"``: σ
    minimises Σ_i c_i f_{σ(i)}; the latent rule is not convex and is checked, with its
    concave-convex training, in test_listwise_latent.py). ``ties="pairs"``: max over π of
    Δ(π, y) − (2/P) Σ over the pairs of different gain that π inverts of f_high − f_low.
    With ``pairwise`` = μ the structured losses add μ times the mean over the pairs of
    different gain of pos(1 − f_high + f_low).
    """
    n_queries = len(prob.query_ptr) - 1
    terms = []
    for q in range(n_queries):
        rows = np.arange(prob.query_ptr[q], prob.query_ptr[q + 1])
        if case.name in ("ordinal", "preference"):
            i, j, cost = query_pairs(case, prob, rows)
            if len(i) == 0:
                continue
            norm = len(i) if case.params.get("normalize", "query") == "query" else 1
            margins = cp.pos(1 + f[i] - f[j])
            if case.params.get("hinge") == "squared":
                margins = cp.square(margins)
            terms.append(cost @ margins / norm)
            continue
        b = gains(case, prob.y[rows])
        if np.all(b == b[0]):
            continue
        m = len(rows)
        a, c = measure_weights(case, m)
        perms = np.array(list(itertools.permutations(range(m))))
        delta = 1.0 - (b[perms] @ a) / (a @ np.sort(b)[::-1])
        placement = np.zeros((len(perms), m))  # row π: c_i on document π(i)
        np.put_along_axis(placement, perms, np.broadcast_to(c, perms.shape), axis=1)
        ideal = np.all(np.diff(b[perms], axis=1) <= 0, axis=1)
        fq = f[rows]
        if case.name == "map":
            terms.append(ap_hinge(b > 0, fq, 1.0))
            continue
        if case.params.get("ties") == "pairs":
            # −(2/P) on the higher-gain and +(2/P) on the lower-gain document of every pair
            # of different gain that π inverts
            position = np.argsort(perms, axis=1)
            slope = np.zeros((len(perms), m))
            higher = b[:, None] > b[None, :]
            for i, j in zip(*np.nonzero(higher), strict=True):
                inverted = position[:, j] < position[:, i]
                slope[inverted, i] -= 2.0 / higher.sum()
                slope[inverted, j] += 2.0 / higher.sum()
            terms.append(cp.max(delta + slope @ fq) + hinge(case, b, fq) + ap_term(case, b, fq))
            continue
        terms.append(
            cp.max(delta + placement @ fq)
            + cp.max(-placement[ideal] @ fq)
            + hinge(case, b, fq)
            + ap_term(case, b, fq)
        )
    return cp.sum(cp.hstack(terms)) / n_queries


def ap_hinge(relevant, fq, weight: float):
    """weight · max over all m! rankings y of 1 − AP(y) − (2 / (p n)) Σ over the relevant ×
    non-relevant pairs that y inverts of f_relevant − f_non-relevant (0 when one class is
    empty)."""
    if weight == 0.0 or relevant.sum() in (0, len(relevant)):
        return 0.0
    delta, slope = all_rankings(relevant)
    return weight * cp.max(delta + slope @ fq)


def ap_term(case: Case, b, fq):
    """``average_precision`` times the AP hinge with the documents of positive gain relevant."""
    return ap_hinge(b > 0, fq, case.params.get("average_precision", 0.0))


def hinge(case: Case, b, fq):
    """μ (``pairwise``) times the mean over pairs of different gain of pos(1 − f_hi + f_lo)."""
    i, j = np.nonzero(b[:, None] > b[None, :])
    return case.params.get("pairwise", 0.0) * cp.sum(cp.pos(1 - fq[i] + fq[j])) / len(i)


FIT_CASES = [
    Case("ordinal", {"cost": "zero_one", "normalize": "query"}),
    Case("ordinal", {"cost": "linear", "normalize": "none"}),
    Case("preference", {"normalize": "query"}, "random"),
    Case("ordinal", {"cost": "linear", "normalize": "none", "hinge": "squared"}),
    Case("preference", {"normalize": "none", "hinge": "squared"}, "random"),
    Case("ndcg", {"k": 3, "truncate_c": False, "gain": "exp", "ties": "increasing"}),
    Case("ndcg", {"k": 2, "truncate_c": True, "gain": "linear", "ties": "increasing"}),
    Case("neru", {"alpha": 2.0, "d": 1.0, "ties": "increasing"}),
    Case("ndcg", {"k": 3, "ties": "pairs"}),
    Case("neru", {"alpha": 2.0, "d": 1.0, "ties": "pairs"}),
    # the pairwise hinge added to the convex rules
    Case("neru", {"alpha": 2.0, "d": 1.0, "ties": "increasing", "pairwise": 2.0}),
    Case("ndcg", {"k": 3, "gain": "linear", "ties": "pairs", "pairwise": 0.5}),
    # the average-precision hinge, alone and added
    Case("map"),
    Case("ndcg", {"k": 3, "ties": "increasing", "average_precision": 1.0}),
]


def fit_problem(case: Case, seed: int):
    rng = np.random.default_rng(seed)
    while True:
        sizes = rng.integers(2, 6, rng.integers(2, 5))
        query_ptr = np.concatenate(([0], np.cumsum(sizes)))
        qid = np.repeat(np.arange(len(sizes)), sizes)
        y = rng.integers(0, 4, qid.size)
        levels = gains(case, y) if case.name in ("ndcg", "neru", "map") else y
        if any(len(np.unique(levels[qid == q])) > 1 for q in range(len(sizes))):
            break
    X = rng.normal(size=(qid.size, 4))
    data = {}
    if case.name == "preference":
        pairs, _ = pairs_from_labels(y, qid)
        data = {"pairs": pairs, "pair_costs": rng.uniform(0.2, 2.0, len(pairs))}
    return X, Problem(y, qid, data, query_ptr)


@pytest.mark.parametrize("regularizer", ["l2", "l1"])
@pytest.mark.parametrize("lam", [1e-2, 1e-1])
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in FIT_CASES])
def test_fit_reaches_the_direct_optimum(case, lam, regularizer):
    X, prob = fit_problem(case, seed=FIT_CASES.index(case))
    w = cp.Variable(X.shape[1])
    omega = 0.5 * cp.sum_squares(w) if regularizer == "l2" else cp.norm1(w)
    objective = lam * omega + cvxpy_risk(case, prob, X @ w)
    J_star = cp.Problem(cp.Minimize(objective)).solve(
        solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10
    )
    tol = 1e-5
    model = bmrm.fit(
        X,
        prob.y,
        case.name,
        prob.qid,
        lam=lam,
        regularizer=regularizer,
        tol=tol,
        max_iter=5000,
        loss_params=case.params,
        **prob.data,
    )
    res = model.result_
    assert res.success, res.message
    w.value = model.coef_
    J = float(objective.value)  # the brute-force objective at the bundle method's w
    assert J == pytest.approx(res.fun, rel=1e-9, abs=1e-12)
    assert J - J_star <= tol * J + 1e-7
    assert res.gap >= J - J_star - 1e-7
    assert res.lower_bound <= J_star + 1e-7
    hist = res.history
    assert np.all(np.diff(hist["lower_bound"]) >= 0)
    assert np.all(hist["gap"] >= -1e-9)

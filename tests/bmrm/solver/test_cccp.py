"""Speed options of the concave-convex procedure: carried planes and inexact early steps.

The carried planes are checked against the surrogates themselves (evaluated on random
points, the identity R_{t+1}(w) − R_t(w) = ⟨δ, w⟩ and R_{t+1} >= every shifted plane), and
the procedure's results against the objective by enumeration over all permutations
(tests/losses/test_listwise_latent.py).
"""

import numpy as np
import pytest

import bmrm
import losses
from bmrm.solver.bundle import Bundle
from bmrm.solver.cccp import _shifted_bundle, minimize_cccp
from bmrm.solver.loop import minimize_bmrm
from bmrm.solver.oracle import RiskOracle
from tests.losses.test_listwise_latent import enumerated_objective, small_problem

PARAMS = {"ndcg": {"k": 3}, "neru": {"d": 0.5}}


def latent_oracle(seed, name):
    X, y, qid = small_problem(seed)
    prepared = losses.prepare(losses.get(name, **PARAMS[name]), y, qid)
    return X, y, qid, RiskOracle(X, prepared)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_shifted_planes_bound_the_next_surrogate(seed, name):
    """After a subproblem at w_t, its planes moved by δ are planes of the surrogate fixed at
    the new point: R_new − R_old is the linear function ⟨δ, ·⟩, and R_new lies above every
    shifted plane on random points."""
    X, y, qid, oracle = latent_oracle(seed, name)
    rng = np.random.default_rng(seed)
    w_old = rng.normal(size=5)
    old = oracle.convexified(w_old)
    res = minimize_bmrm(old, 5, 0.05, w0=w_old, tol=1e-6, method="bmrm", bundle_size=500)
    new = oracle.convexified(rng.normal(size=5) * 3.0)
    # the planes of a fit, recomputed from its iterates: cuts of the old surrogate
    bundle = Bundle(5, 500)
    for w in [w_old, res.x, *rng.normal(size=(20, 5)) * 2.0]:
        r, g = old(w)
        bundle.add(g, r - g @ w)
    shifted = _shifted_bundle(bundle, old(np.zeros(5)), new(np.zeros(5)), 5)
    assert shifted is not None and shifted.size == bundle.size
    delta = shifted.A[1] - bundle.A[1]
    for w in rng.normal(size=(30, 5)) * 3.0:
        assert new(w)[0] - old(w)[0] == pytest.approx(delta @ w, abs=1e-10)
        planes = shifted.A[: shifted.size] @ w + shifted.b[: shifted.size]
        assert np.all(planes <= new(w)[0] + 1e-10)
    # a cut of the old surrogate at w is, shifted, a cut of the new one at the same w
    for i, w in enumerate([w_old, res.x], start=1):
        assert shifted.A[i] @ w + shifted.b[i] == pytest.approx(new(w)[0], abs=1e-10)


def test_planes_of_different_risks_are_not_carried():
    """Surrogates of two different losses disagree at w = 0: nothing is carried."""
    X, y, qid, oracle = latent_oracle(0, "ndcg")
    _, _, _, other = latent_oracle(0, "neru")
    a = oracle.convexified(np.ones(5))
    b = other.convexified(np.ones(5))
    bundle = Bundle(5)
    r, g = a(np.ones(5))
    bundle.add(g, r - g @ np.ones(5))
    assert _shifted_bundle(bundle, a(np.zeros(5)), b(np.zeros(5)), 5) is None


OPTIONS = [
    {"inner_tol": 1e-6, "carry_planes": False},
    {"inner_tol": 1e-6, "carry_planes": True},
    {"inner_tol": "adaptive", "carry_planes": False},
    {"inner_tol": "adaptive", "carry_planes": True},
    {"inner_tol": 0.05, "carry_planes": True, "method": "bmrm"},
    {"inner_tol": "adaptive", "inner_scale": 10.0, "carry_planes": True, "method": "ocas"},
]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("options", OPTIONS, ids=[str(o) for o in OPTIONS])
@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_procedure_guarantees_hold_with_every_option(seed, options, name):
    """J by enumeration at the returned point equals fun, the outer objectives never
    increase, and the last subproblem is solved to tol whatever the early ones used."""
    X, y, qid, oracle = latent_oracle(seed, name)
    lam, tol = 0.05, 1e-6
    res = minimize_cccp(oracle, 5, lam, tol=tol, max_iter=2000, **options)
    J = enumerated_objective(X, y, qid, res.x, lam, name, PARAMS[name])
    assert res.fun == pytest.approx(J, abs=1e-10)
    assert np.all(np.diff(res.outer_objective) <= 1e-12)
    assert res.outer_converged
    last = res.history["outer"] == res.n_outer
    gap = res.history["inner_gap"][last][-1]
    best = res.history["objective"][last].min()
    assert gap <= tol * abs(best) + 1e-12
    # the procedure's own measure: the last outer decrease, within tol
    assert 0 <= res.gap <= tol * abs(res.fun)
    # and the point is a fixed point of the procedure to the tolerance: one more exact
    # subproblem at x improves J by at most about tol·J
    again = minimize_bmrm(oracle.convexified(res.x), 5, lam, w0=res.x, tol=1e-9)
    J_next = enumerated_objective(X, y, qid, again.x, lam, name, PARAMS[name])
    assert J_next >= res.fun - 3 * tol * abs(res.fun) - 1e-9


class Recording:
    """An oracle (not a RiskOracle, so the procedure reuses none of its evaluations as a
    surrogate's first one) that records every call ``(w, R, a)`` of the latent oracle and
    of each surrogate it makes."""

    def __init__(self, oracle, calls=None):
        self.oracle = oracle
        self.calls = [] if calls is None else calls
        self.surrogates = []

    loss = property(lambda self: self.oracle.loss)

    def __call__(self, w):
        R, a = self.oracle(w)
        self.calls.append((np.array(w, copy=True), R, np.array(a, copy=True)))
        return R, a

    def convexified(self, w):
        surrogate = Recording(self.oracle.convexified(w))
        self.surrogates.append((np.array(w, copy=True), surrogate))
        return surrogate

    def initial(self):
        return self.oracle.initial()

    def release(self):
        self.oracle.release()


def tied_problem(seed):
    """small_problem with an all-equal-label query, a one-document query and duplicated
    rows (documents of equal label and equal scores)."""
    X, y, qid = small_problem(seed)
    X = np.vstack([X, np.repeat(X[:1], 4, axis=0), X[:3], X[3:4]])
    y = np.concatenate([y, [1, 1, 1, 1], y[:3], [2]])
    qid = np.concatenate([qid, [100] * 4, [101] * 3, [102]])
    return X, y, qid


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(
    "options", [{}, {"carry_planes": False}, {"inner_tol": 1e-6}, {"method": "bmrm"}]
)
@pytest.mark.parametrize("name", ["ndcg", "neru"])
def test_reused_evaluations_change_nothing(seed, options, name):
    """The procedure reuses the latent evaluation at w_t as the first evaluation of the
    surrogate fixed at w_t, and each surrogate's value at w = 0 for two shifts. Against a
    run that reuses neither (an oracle that is not a RiskOracle, whose every surrogate is
    evaluated afresh): the same iterates, objectives and history, bit for bit, with fewer
    oracle calls; and the reused values are what a fresh evaluation gives, bit for bit."""
    X, y, qid = (small_problem if seed % 2 else tied_problem)(seed)
    prepared = losses.prepare(losses.get(name, **PARAMS[name]), y, qid)
    lam, tol = 0.05, 1e-6
    fused = minimize_cccp(RiskOracle(X, prepared), 5, lam, tol=tol, max_iter=2000, **options)
    recording = Recording(RiskOracle(X, prepared))
    plain = minimize_cccp(recording, 5, lam, tol=tol, max_iter=2000, **options)
    assert fused.n_outer == plain.n_outer >= 1
    np.testing.assert_array_equal(fused.x, plain.x)
    assert fused.fun == plain.fun
    np.testing.assert_array_equal(fused.outer_objective, plain.outer_objective)
    # (the running counts of oracle calls and passes differ by the evaluations not made)
    for key in plain.history:
        if key not in ("elapsed", "nfev", "n_passes") and not key.endswith("seconds"):
            np.testing.assert_array_equal(fused.history[key], plain.history[key], err_msg=key)
    # each surrogate starts at the point where the latent oracle was evaluated last
    latent = {w.tobytes(): (R, a) for w, R, a in recording.calls}
    n_reused = 0
    for w, surrogate in recording.surrogates:
        start = [c for c in surrogate.calls if np.any(c[0] != 0)][0]
        np.testing.assert_array_equal(start[0], w)
        if w.tobytes() in latent:
            R, a = latent[w.tobytes()]
            assert start[1] == R
            np.testing.assert_array_equal(start[2], a)
            n_reused += 1
        # a surrogate evaluated at 0 twice (two shifts) gives the same value both times
        at_zero = [c for c in surrogate.calls if not np.any(c[0])]
        for _, R, a in at_zero[1:]:
            assert R == at_zero[0][1]
            np.testing.assert_array_equal(a, at_zero[0][2])
    assert n_reused == len(recording.surrogates)
    n_zero = sum(
        not np.any(c[0]) for _, surrogate in recording.surrogates for c in surrogate.calls
    )
    # the recorded run makes (and counts) each surrogate's first evaluation itself
    assert plain.nfev == fused.nfev + n_reused
    carried = plain.n_outer - 1 if options.get("carry_planes", True) else 0
    assert n_zero == (carried + 1 if carried else 0)


def test_bad_options_named():
    _, _, _, oracle = latent_oracle(0, "ndcg")
    for value in (1e-4, "fast", float("nan"), None, 1.0, 5.0, float("inf")):
        with pytest.raises(ValueError, match="inner_tol"):
            minimize_cccp(oracle, 5, 0.1, tol=1e-3, inner_tol=value)
    for value in (0.0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="inner_scale"):
            minimize_cccp(oracle, 5, 0.1, inner_scale=value)
    with pytest.raises(ValueError, match="carry_planes"):
        minimize_cccp(oracle, 5, 0.1, carry_planes="yes")


def test_message_says_where_the_procedure_stopped():
    """A budget spent in the starting pairwise problem reports no concave-convex step; a
    finished fit names the number of steps."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 6))
    y = rng.integers(0, 3, 400)
    qid = np.repeat(np.arange(40), 10)
    res = bmrm.fit(X, y, "ndcg", qid, lam=1e-4, tol=1e-12, max_time=1e-9).result_
    assert res.n_outer == 0
    assert res.message == (
        "stopped: time budget max_time reached (in the starting problem, before the first "
        "concave-convex step)"
    )
    full = bmrm.fit(X, y, "ndcg", qid, lam=1e-2).result_
    assert full.n_outer >= 2
    assert (
        full.message
        == f"converged: relative gap below tol (last of {full.n_outer} concave-convex steps)"
    )


def test_verbose_names_each_solve_of_the_procedure(capsys):
    """One table whose iterations are preceded by a line naming their solve: the starting
    pairwise problem, then every concave-convex step with its outcome; no line is printed
    twice."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 5))
    y = rng.integers(0, 3, 300)
    qid = np.repeat(np.arange(30), 10)
    res = bmrm.fit(X, y, "ndcg", qid, lam=1e-3, verbose=True).result_
    err = capsys.readouterr().err.strip().splitlines()
    titles = [line for line in err if not line.lstrip()[:1].isdigit()]
    expected = ["starting problem: the convex OrdinalLoss that starts the procedure"]
    expected.append("iter")
    for k in range(1, res.n_outer + 1):
        expected += [f"cccp step {k}: the convex surrogate", f"cccp step {k}: J "]
    assert len(titles) == len(expected)
    for line, start in zip(titles, expected, strict=True):
        assert line.lstrip().startswith(start), (line, start)
    # every iteration of every solve has its line
    assert len(err) - len(titles) == res.nit


def test_w_zero_is_returned_when_the_procedure_ends_above_it():
    """One query of 20,000 documents, label noise 15 times the signal, the hinge bound: the
    procedure's stationary point from the pairwise start has J above J(0) = 1, so the fit
    returns w = 0 and says why; the ramp bound learns on the same data."""
    rng = np.random.default_rng(0)
    m = 20_000
    X = rng.normal(size=(m, 10))
    y = np.digitize(0.2 * X @ rng.normal(size=10) + 3.0 * rng.normal(size=m), [1.5, 3.0])
    qid = np.zeros(m)
    hinge = bmrm.fit(X, y, "ndcg", qid, lam=1e-3, loss_params={"bound": "hinge"})
    assert np.array_equal(hinge.coef_, np.zeros(10))
    assert hinge.result_.fun == 1.0  # J(0) = max Δ = 1 on the query
    assert hinge.result_.outer_objective[-1] > 1.0
    assert "w = 0 has a lower objective (1) than the stationary point" in hinge.result_.message
    ramp = bmrm.fit(X, y, "ndcg", qid, lam=1e-3)
    assert ramp.result_.fun < 0.9 and np.linalg.norm(ramp.coef_) > 1.0
    assert "w = 0" not in ramp.result_.message

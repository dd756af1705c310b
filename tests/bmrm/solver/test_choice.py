"""bmrm.solver.choice: the problem and solver of a fit from the risk's declared capabilities."""

import numpy as np
import pytest

from bmrm.solver.cccp import CCCP
from bmrm.solver.choice import Started, choose_solver, make_problem
from bmrm.solver.methods import LBFGS, NRBM, LevelBundle, NewtonCG, SolverOptions
from bmrm.solver.problem import Capabilities
from bmrm.solver.regularizers import L2, Direction


class Declared:
    """A risk R(w) = ½‖w − 1‖² that declares the capabilities it is given."""

    def __init__(self, capabilities, warm_start=False):
        self.capabilities = capabilities
        if warm_start:
            self.warm_start = lambda problem, options, solver: (np.ones(3), {"linear_start": 1})

    def __call__(self, w):
        return 0.5 * float((w - 1) @ (w - 1)), w - 1


def problem_of(warm_start=False, **declared):
    return make_problem(Declared(Capabilities(**declared), warm_start), L2(), 0.1, 3)


@pytest.mark.parametrize(
    ("declared", "method", "started", "expected"),
    [
        ({}, None, True, LevelBundle),
        ({"smooth": True, "has_hessp": True, "on_scores": True}, "auto", True, NewtonCG),
        ({"convex": False, "smooth": True}, None, False, LBFGS),
        ({"convex": False}, "auto", False, NRBM),
        ({"convex": False}, "nrbm", False, NRBM),
        ({"latent": True}, None, True, CCCP),
        ({"latent": True}, "nrbm", False, NRBM),
    ],
)
def test_the_solver_follows_the_declared_capabilities(declared, method, started, expected):
    solver = choose_solver(method, problem_of(**declared), started)
    assert type(solver) is expected


def test_nrbm_certifies_only_a_convex_risk_and_takes_its_smoothness():
    assert choose_solver("nrbm", problem_of(), False).certifies
    free = choose_solver("nrbm", problem_of(convex=False, smooth=True), False)
    assert not free.certifies and free.smooth
    latent = choose_solver("nrbm", problem_of(latent=True), False)
    assert not latent.certifies and not latent.convex


def test_a_non_convex_risk_is_warm_started_by_its_oracle():
    problem = problem_of(warm_start=True, convex=False, smooth=True)
    solver = choose_solver(None, problem, True)
    assert isinstance(solver, Started) and isinstance(solver.inner, LBFGS)
    state = solver.init(problem, np.zeros(3), SolverOptions())
    np.testing.assert_array_equal(state.best_w, np.ones(3))  # the oracle's start
    assert solver.figures == {"linear_start": 1}
    # a given w0 (started=False) is not replaced
    assert isinstance(choose_solver(None, problem, False), LBFGS)


def test_a_convex_method_is_refused_for_a_non_convex_risk():
    with pytest.raises(ValueError, match="certifies convex objectives only"):
        choose_solver("bmrm", problem_of(convex=False), True)


def test_a_scale_invariant_risk_is_its_risk_alone_returned_as_a_unit_direction():
    problem = problem_of(convex=False, smooth=True, scale_invariant=True)
    assert problem.lam == 0.0 and isinstance(problem.regularizer, Direction)
    w = np.array([3.0, 0.0, 4.0])
    unit, J = problem.regularizer.clean(w, 1.0, lambda v: problem.objective(v, 7.0 * v[0]))
    np.testing.assert_allclose(unit, [0.6, 0.0, 0.8], rtol=1e-15)
    assert J == pytest.approx(7.0 * 0.6, rel=1e-15)
    zero = np.zeros(3)
    assert problem.regularizer.clean(zero, 2.0, None) == (zero, 2.0)
    # without the declaration the problem is the one asked for
    plain = problem_of(convex=False, smooth=True)
    assert plain.lam == 0.1 and type(plain.regularizer) is L2

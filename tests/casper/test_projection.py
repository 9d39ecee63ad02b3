"""The soft projection: exact (KKT, variational inequality over HiGHS LP vertices, a QP solver), and its Jacobian."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.tools.casper.builders import addition_spec, grid_path_spec, sudoku_spec
from methodkit.tools.casper.compiler import compile_spec
from methodkit.tools.casper.kernels import sparsemax_segments
from methodkit.tools.casper.projection import Projector, make_torch_layer

PERM = {
    "variables": [{"name": f"p{i}", "domain": 4} for i in range(4)],
    "constraints": [{"type": "all_different", "vars": [f"p{i}" for i in range(4)]}],
}
SLACKS = {
    "variables": [{"name": f"b{i}", "domain": "bool"} for i in range(6)],
    "constraints": [
        {"type": "at_most_k", "vars": [f"b{i}" for i in range(6)], "k": 2},
        {"type": "linear", "coefs": {"b0": 1, "b1": 2}, "op": ">=", "rhs": 2},
    ],
}
SPECS = {
    "shidoku": sudoku_spec(4),
    "grid4": grid_path_spec(4),
    "perm": PERM,
    "slacks": SLACKS,
    "add2": addition_spec(2),
}


@pytest.fixture(scope="module", params=sorted(SPECS))
def program(request):
    return compile_spec(SPECS[request.param])


def _theta(program, rng, batch=3, scale=1.0):
    theta = np.zeros((batch, program.n))
    theta[:, : program.n_user] = rng.normal(0.5, scale, size=(batch, program.n_user))
    return theta


@pytest.mark.parametrize("ptr", [[0, 3, 7, 12], [0, 40, 41, 73]], ids=["insertion-sort", "wide-groups"])
def test_sparsemax_kernel_matches_sorting_reference(ptr):
    rng = np.random.default_rng(1)
    ptr = np.array(ptr)
    theta = rng.normal(size=(5, ptr[-1]))
    theta[:, 1] = theta[:, 2]  # a tie
    out = sparsemax_segments(theta, ptr)
    for i in range(5):
        for g in range(len(ptr) - 1):
            z = theta[i, ptr[g] : ptr[g + 1]]
            # reference: bisection on tau, sum(max(z - tau, 0)) = 1
            lo, hi = z.min() - 1, z.max()
            for _ in range(200):
                tau = (lo + hi) / 2
                lo, hi = (tau, hi) if np.maximum(z - tau, 0).sum() > 1 else (lo, tau)
            np.testing.assert_allclose(out[i, ptr[g] : ptr[g + 1]], np.maximum(z - tau, 0), atol=1e-9)


def test_projection_is_feasible_and_satisfies_kkt(program):
    rng = np.random.default_rng(2)
    projector = Projector(program)
    theta = _theta(program, rng)
    mu, states = projector.project(theta)
    for i, state in enumerate(states):
        assert state.status == "ok"
        assert np.max(np.abs(program.A @ mu[i] - program.b)) <= 1e-9
        assert np.all(mu[i] >= program.lower - 1e-12) and np.all(mu[i] <= program.upper + 1e-12)


def test_variational_inequality_over_highs_lp_vertices(program):
    """mu = Pi_P(theta) iff (theta - mu).(v - mu) <= 0 for every vertex v of P; HiGHS gives vertices."""
    from scipy.optimize import linprog

    rng = np.random.default_rng(3)
    projector = Projector(program)
    theta = _theta(program, rng, batch=2)
    mu, _ = projector.project(theta)
    bounds = [(lo, None if np.isinf(hi) else hi) for lo, hi in zip(program.lower, program.upper)]
    for _ in range(15):
        res = linprog(rng.normal(size=program.n), A_eq=program.A, b_eq=program.b, bounds=bounds, method="highs")
        if res.status != 0:
            continue
        for i in range(2):
            assert (theta[i] - mu[i]) @ (res.x - mu[i]) <= 1e-8


def test_matches_a_qp_solver(program):
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(4)
    projector = Projector(program)
    theta = _theta(program, rng, batch=2)
    mu, _ = projector.project(theta)
    for i in range(2):
        y = cp.Variable(program.n)
        upper = np.where(np.isinf(program.upper), 1e6, program.upper)
        cons = [program.A @ y == program.b, y >= program.lower, y <= upper]
        cp.Problem(cp.Minimize(cp.sum_squares(y - theta[i])), cons).solve(solver="CLARABEL", tol_gap_abs=1e-12)
        assert np.max(np.abs(y.value - mu[i])) <= 1e-4  # interior point: ~1e-5 accurate


def test_affine_closed_form_when_no_bound_is_active():
    program = compile_spec(grid_path_spec(3))
    projector = Projector(program)
    A, b = program.A.toarray(), program.b
    theta = np.full((1, program.n), 0.45)
    mu, states = projector.project(theta)
    affine = theta[0] - A.T @ np.linalg.solve(A @ A.T, A @ theta[0] - b)
    if np.all((affine > 0) & (affine < 1)):
        assert states[0].method == "affine"
        np.testing.assert_allclose(mu[0], affine, atol=1e-10)
    else:  # the affine point leaves the box: Newton must differ from it and still be exact
        assert states[0].method == "newton"


def test_jacobian_matches_finite_differences_and_is_symmetric(program):
    rng = np.random.default_rng(5)
    projector = Projector(program)
    theta = _theta(program, rng, batch=1)
    _, states = projector.project(theta)
    n = program.n
    J = projector.vjp(states * n, np.eye(n))  # rows J e_k = J[:, k] (J symmetric)
    np.testing.assert_allclose(J, J.T, atol=1e-8)
    h = 1e-7
    for k in rng.choice(n, size=min(n, 8), replace=False):
        bumped = theta.copy()
        bumped[0, k] += h
        up, _ = projector.project(bumped)
        bumped[0, k] -= 2 * h
        down, _ = projector.project(bumped)
        np.testing.assert_allclose((up[0] - down[0]) / (2 * h), J[k], atol=1e-5)


def test_torch_layer_gradcheck():
    import torch

    program = compile_spec(PERM)
    layer = make_torch_layer(Projector(program))
    rng = np.random.default_rng(6)
    theta = torch.tensor(_theta(program, rng, batch=2), dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(layer, (theta,), eps=1e-7, atol=1e-5)


def test_newton_cap_gives_proj_error_not_an_inexact_mu(monkeypatch):
    program = compile_spec(sudoku_spec(4))
    projector = Projector(program, max_iter=1)
    monkeypatch.setattr(projector, "_interior_point", lambda theta: (None, None))  # the safeguard fails too
    theta = _theta(program, np.random.default_rng(7), batch=4, scale=3.0)
    mu, states = projector.project(theta)
    errors = [i for i, s in enumerate(states) if s.status == "proj_error"]
    assert errors, "with one step some rows should fail"
    assert all(np.isnan(mu[i]).all() for i in errors)


def test_stalled_newton_is_finished_from_the_interior_point_dual():
    """Raw negative node scores on a flow stall plain Newton; the Clarabel safeguard must still be exact."""
    from methodkit.tools.casper.builders import compiled

    program = compiled("grid", 8, False)
    theta = np.zeros((10, program.n))
    theta[:, program.extra["t0_node_col"]] = -np.random.default_rng(0).uniform(0, 4, size=(10, 64))
    mu, states = Projector(program).project(theta)
    rescued = [i for i, s in enumerate(states) if s.method == "newton+ipm"]
    assert rescued and all(s.status == "ok" and s.residual <= 1e-10 for s in states)
    assert all(s.iterations <= 50 for s in states)
    assert all(states[i].iterations < Projector(program).max_iter // 2 for i in rescued)  # handed over on a stall
    plain, plain_states = Projector(program, max_iter=200).project(theta[rescued])  # Newton alone, given time
    for k, i in enumerate(rescued):
        if plain_states[k].status == "ok":
            np.testing.assert_allclose(mu[i], plain[k], atol=1e-8)
    cp = pytest.importorskip("cvxpy")
    i = rescued[0]
    y = cp.Variable(program.n)
    cons = [program.A @ y == program.b, y >= program.lower, y <= program.upper]
    cp.Problem(cp.Minimize(cp.sum_squares(y - theta[i])), cons).solve(solver="CLARABEL", tol_gap_abs=1e-12)
    assert np.max(np.abs(y.value - mu[i])) <= 1e-4


CARDINALITY = {
    "variables": [{"name": f"c{i}", "domain": "bool"} for i in range(11)],
    "constraints": [
        {"type": "exactly_k", "vars": [f"c{i}" for i in range(5)], "k": 2},
        {"type": "at_most_k", "vars": [f"c{i}" for i in range(5, 9)], "k": 1},
        {"type": "linear", "coefs": {"c9": 1, "c10": -3}, "op": "<=", "rhs": 0},
    ],
}


def _newton_only(program):
    """The same projector with the closed forms switched off (the iterative reference)."""
    ref = Projector(program)
    ref.threshold = ref.sparsemax = False
    if ref.full_factor is None:
        ref.full_factor = ref._factor(np.ones(ref.n, dtype=bool), 0.0)
    return ref


@pytest.mark.parametrize("name", ["cardinality", "exactly_k", "at_most_k", "fixed"])
def test_disjoint_rows_take_the_threshold_closed_form_and_equal_newton(name):
    """exactly_k / at_most_k (capped simplex), a signed linear row, fixed values: sort-and-threshold, not Newton."""
    from methodkit.tools.casper.examples import EXAMPLES

    program = compile_spec(CARDINALITY if name == "cardinality" else EXAMPLES[name])
    rng = np.random.default_rng(7)
    ours, ref = Projector(program), _newton_only(program)
    for scale in (0.3, 3.0, 1e4):
        theta = _theta(program, rng, batch=40, scale=scale)
        mu, states = ours.project(theta)
        assert {s.method for s in states} == {"threshold"}
        expected, ref_states = ref.project(theta)
        assert all(s.status == "ok" for s in ref_states)
        np.testing.assert_allclose(mu, expected, atol=1e-8 * max(scale, 1.0))
        assert np.max(np.abs(program.A @ mu.T - program.b[:, None])) <= 1e-9 * max(scale, 1.0)
        grad = rng.normal(size=theta.shape)
        np.testing.assert_allclose(ours.vjp(states, grad), ref.vjp(ref_states, grad), atol=1e-9)


def test_threshold_kernel_matches_bisection_reference():
    from methodkit.tools.casper.kernels import threshold_segments

    rng = np.random.default_rng(3)
    ptr = np.array([0, 4, 9])
    a = rng.choice([-2.0, -1.0, 0.5, 1.0, 3.0], size=9)
    lower, upper = np.zeros((6, 9)), np.ones((6, 9))
    upper[:, 3] = np.inf  # a slack
    theta = rng.normal(size=(6, 9)) * 2
    b = np.array([0.7 * a[:4].clip(0).sum(), 0.3 * a[4:].clip(0).sum()])
    out, ok = threshold_segments(theta, a, lower, upper, b, ptr)
    assert ok.all()
    for i in range(6):
        for g in range(2):
            s = slice(ptr[g], ptr[g + 1])
            z, coef, bottom, top = theta[i, s], a[s], lower[i, s], upper[i, s]
            lo, hi = -1e3, 1e3  # f(t) = coef . clip(z - coef t) is nonincreasing in t
            for _ in range(200):
                t = (lo + hi) / 2
                lo, hi = (t, hi) if coef @ np.clip(z - coef * t, bottom, top) > b[g] else (lo, t)
            np.testing.assert_allclose(out[i, s], np.clip(z - coef * t, bottom, top), atol=1e-9)


@pytest.mark.parametrize("loose", [False, True], ids=["groups-in-place", "with-a-loose-bool"])
def test_one_hot_sparsemax_and_its_vjp_equal_newton(loose):
    """The batched sparsemax path (groups in place, or gathered around a loose boolean) against Newton."""
    variables = [{"name": f"x{g}", "domain": 3 + g % 4} for g in range(6)]
    if loose:
        variables.insert(2, {"name": "flag", "domain": "bool"})
    program = compile_spec({"variables": variables, "constraints": []})
    ours, ref = Projector(program), _newton_only(program)
    assert ours.sparsemax and ours.in_place != loose
    rng = np.random.default_rng(11)
    theta = rng.normal(0.3, 1.0, size=(7, program.n))
    mu, states = ours.project(theta)
    expected, ref_states = ref.project(theta)
    assert {s.method for s in states} == {"sparsemax"}
    np.testing.assert_allclose(mu, expected, atol=1e-9)
    assert max(s.residual for s in states) <= 1e-12
    grad = rng.normal(size=theta.shape)
    np.testing.assert_allclose(ours.vjp(states, grad), ref.vjp(ref_states, grad), atol=1e-9)

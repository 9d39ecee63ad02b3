"""Tasks at toy scale: generators are right, and the paper's qualitative effect holds (always-valid outputs)."""

from __future__ import annotations

import numpy as np

from methodkit.tools.casper import sudoku, tasks, warcraft


def test_warcraft_labels_are_optimal_valid_paths():
    data = warcraft.generate(6, 5, np.random.default_rng(0))
    for mask, cost in zip(data["paths"], data["costs"]):
        assert warcraft.is_valid_path(mask)
        # the label is cheapest: no valid path through a random perturbation is cheaper
        assert (cost * mask).sum() <= (cost * warcraft.shortest_path(cost + 1e-9)).sum() + 1e-6


def test_sudoku_generator_gives_unique_puzzles_with_30_to_36_givens():
    from methodkit.tools.casper.kernels import count_sudoku_solutions

    data = sudoku.generate(3, np.random.default_rng(1))
    for sol, givens in zip(data["solutions"], data["givens"]):
        assert sudoku.is_valid_board(sol)
        assert 30 <= givens.sum() <= 36
        grid = np.where(givens, sol + 1, 0).ravel().astype(np.int64)
        assert count_sudoku_solutions(grid, 9, 3, 3) == 1


def test_addition_digits_carry():
    a = np.array([[9, 9]])
    b = np.array([[1, 0]])
    np.testing.assert_array_equal(tasks.add_digits(a, b), [[0, 0, 1]])  # 99 + 1 = 100


def test_casper_is_always_valid_where_thresholding_is_not():
    """End to end at 6x6, same training budget: Casper's decode is valid on every map, thresholding is not."""
    arrays = tasks.generate("warcraft", size=6, digits=1, n=48, n_test=24, seed=2)
    trained = tasks.train("warcraft", "casper", arrays, epochs=1, batch_size=16, lr=3e-3, seed=0)
    baseline = tasks.train("warcraft", "unconstrained", arrays, epochs=1, batch_size=16, lr=3e-3, seed=0)
    ours = tasks.evaluate("warcraft", "casper", trained.model, arrays)
    plain = tasks.evaluate("warcraft", "unconstrained", baseline.model, arrays)
    assert ours.summary["valid"] == 1.0
    assert plain.summary["valid"] < 1.0
    assert ours.summary["cost_ratio"] >= 1.0 - 1e-9


def test_abduction_respects_the_clamped_sum():
    """Weak supervision: with s clamped, the projection and the Viterbi decode keep the observed sum."""
    from methodkit.tools.casper.builders import compiled
    from methodkit.tools.casper.decode import Decoder
    from methodkit.tools.casper.projection import Projector

    program = compiled("addition", 2, False)
    rng = np.random.default_rng(3)
    pa, pb = rng.dirichlet(np.ones(10), size=(4, 2)), rng.dirichlet(np.ones(10), size=(4, 2))
    s = tasks.add_digits(rng.integers(0, 10, (4, 2)), rng.integers(0, 10, (4, 2)))
    theta = tasks.addition_theta(program, pa, pb, None)
    lower, upper = tasks.clamp_sums(program, s)
    mu, states = Projector(program).project(theta, lower, upper)
    decoder = Decoder(program)
    for i in range(4):
        assert states[i].status == "ok"
        assert np.all(mu[i] >= lower[i] - 1e-12) and np.all(mu[i] <= upper[i] + 1e-12)
        a, b, s_hat = tasks.read_addition(program, decoder.decode(mu[i], upper[i]).y, 2)
        np.testing.assert_array_equal(s_hat, s[i])
        assert a[0] + 10 * a[1] + b[0] + 10 * b[1] == s[i][0] + 10 * s[i][1] + 100 * s[i][2]


def test_solver_baseline_is_the_exact_solver_on_the_plain_predictor():
    """`solver` (no layer): Dijkstra on softplus(-z) of the plain CNN, casper's decoder on raw probabilities."""
    import torch
    import torch.nn.functional as F

    from methodkit.tools.casper.warcraft import shortest_path

    arrays = tasks.generate("warcraft", size=6, digits=1, n=48, n_test=12, seed=2)
    plain = tasks.train("warcraft", "solver", arrays, epochs=1, batch_size=16, lr=3e-3, seed=0).model
    result = tasks.evaluate("warcraft", "solver", plain, arrays)
    assert result.summary["valid"] == 1.0
    with torch.no_grad():
        z = plain(torch.as_tensor(arrays["test_images"][:1])).reshape(1, -1).double()
    expected = shortest_path(np.clip(F.softplus(-z).numpy().reshape(6, 6), 1e-6, None))
    np.testing.assert_array_equal(result.predictions["paths"][0], expected)
    board = tasks.generate("shidoku", size=4, digits=1, n=16, n_test=8, seed=1)
    clf = tasks.train("shidoku", "solver", board, epochs=1, batch_size=8, lr=3e-3, seed=0).model
    assert tasks.evaluate("shidoku", "solver", clf, board).summary["valid"] == 1.0
    assert tasks.evaluate("shidoku", "unconstrained", clf, board).summary["valid"] < 1.0
    sums = tasks.generate("mnist-add", size=0, digits=2, n=0, n_test=6, seed=1)
    net = tasks.train("mnist-add", "solver", sums, epochs=0, batch_size=8, lr=3e-3, seed=0).model
    assert tasks.evaluate("mnist-add", "solver", net, sums).summary["valid"] == 1.0

"""The library baselines: exact semantic loss (PySDD), PyEPO with our oracle, PiShield, DeepProbLog."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from methodkit.tools.casper import baselines, tasks, warcraft


def _brute_force_path_distribution(n, p):
    """P(constraint) and P(cell | constraint) by enumerating all 2^(n*n) cell sets."""
    total, marginals = 0.0, np.zeros(n * n)
    for bits in itertools.product((0, 1), repeat=n * n):
        x = np.array(bits)
        if warcraft.is_valid_path(x.reshape(n, n)):
            w = np.prod(np.where(x == 1, p, 1 - p))
            total, marginals = total + w, marginals + w * x
    return total, marginals / total


def test_sdd_weighted_model_count_equals_enumeration():
    pytest.importorskip("pysdd")
    circuit = baselines.PathSDD(3)
    assert circuit.sets == 62
    p = np.random.default_rng(0).uniform(0.05, 0.95, 9)
    log_z, marginals = circuit.log_prob_and_marginals(p)
    total, expected = _brute_force_path_distribution(3, p)
    assert log_z == pytest.approx(np.log(total), abs=1e-10)
    np.testing.assert_allclose(marginals, expected, atol=1e-10)


def test_semantic_loss_gradient_matches_finite_differences():
    torch = pytest.importorskip("torch")
    pytest.importorskip("pysdd")
    loss = baselines.semantic_loss_layer(baselines.PathSDD(3))
    logits = torch.tensor(np.random.default_rng(1).normal(size=(1, 9)), requires_grad=True)
    loss(logits).sum().backward()
    h, numeric = 1e-6, np.zeros((1, 9))
    for i in range(1):
        for j in range(9):
            up, down = logits.detach().clone(), logits.detach().clone()
            up[i, j] += h
            down[i, j] -= h
            numeric[i, j] = (loss(up)[i] - loss(down)[i]).item() / (2 * h)
    np.testing.assert_allclose(logits.grad.numpy(), numeric, atol=1e-6)


def test_sdd_compilation_stops_at_its_time_limit():
    pytest.importorskip("pysdd")
    with pytest.raises(baselines.CompileTimeout) as info:
        baselines.PathSDD(7, time_limit=0.5)
    assert info.value.detail["sets_compiled"] > 0


def test_pyepo_oracle_is_our_dijkstra_and_every_loss_trains():
    torch = pytest.importorskip("torch")
    pytest.importorskip("pyepo")
    rng = np.random.default_rng(2)
    cost = rng.uniform(0.5, 5, size=(3, 25))
    model = baselines.grid_optmodel(5)
    model.setObj(cost[0])
    sol, obj = model.solve()
    np.testing.assert_array_equal(sol.reshape(5, 5), warcraft.shortest_path(cost[0].reshape(5, 5)))
    assert obj == pytest.approx(float(cost[0] @ sol))
    gold = torch.tensor(np.stack([warcraft.shortest_path(c.reshape(5, 5)).ravel() for c in cost]), dtype=torch.float32)
    # DBB's loss is zero when the predicted costs are the true ones
    assert baselines.pyepo_loss("pyepo-dbb", 5, 0)(torch.tensor(cost, dtype=torch.float32), gold).item() == 0.0
    for method in baselines.PYEPO_METHODS:
        pred = torch.tensor(rng.uniform(0.5, 5, size=(3, 25)), dtype=torch.float32, requires_grad=True)
        value = baselines.pyepo_loss(method, 5, 0)(pred, gold)
        value.backward()
        assert np.isfinite(value.item()) and pred.grad.abs().sum().item() > 0, method


def test_pishield_output_satisfies_its_clauses():
    pytest.importorskip("pishield")
    clauses = ["y_0 or y_1 or y_2", "not y_0 or not y_1", "not y_0 or not y_2", "not y_1 or not y_2"]
    probs = np.random.default_rng(3).uniform(size=(20, 3))
    out = baselines.pishield_apply(probs, clauses)
    assert np.all((out > 0.5).sum(1) == 1)  # exactly one atom true, whatever the input


def test_sudoku_cnf_accepts_solutions_and_rejects_non_solutions():
    from methodkit.tools.casper import sudoku

    solution = sudoku.generate(1, np.random.default_rng(4), 4)["solutions"][0]

    def satisfied(board):
        true = {int((r * 4 + c) * 4 + board[r, c]) for r in range(4) for c in range(4)}
        for clause in baselines.sudoku_cnf(4):
            lits = [(lit.startswith("not "), int(lit.split("y_")[1])) for lit in clause.split(" or ")]
            if not any((atom in true) != negated for negated, atom in lits):
                return False
        return True

    assert satisfied(solution)
    broken = solution.copy()
    broken[0, 0], broken[0, 1] = broken[0, 1], broken[0, 0]
    assert not satisfied(broken)


def test_run_with_limit_reports_a_timeout():
    with pytest.raises(baselines.CompileTimeout):
        baselines.run_with_limit(time.sleep, (30,), 0.5)
    assert baselines.run_with_limit(sum, ([1, 2],), 30) == 3


def test_deepproblog_sum_is_the_most_probable_sum():
    torch = pytest.importorskip("torch")
    pytest.importorskip("deepproblog")
    from sklearn.datasets import load_digits

    from methodkit.tools.casper.models import DigitMLP

    torch.manual_seed(0)
    net = torch.nn.Sequential(DigitMLP(), torch.nn.Softmax(-1))
    images = load_digits().images.reshape(-1, 64)[:2].astype(np.float32)
    out = baselines.deepproblog_sum(net, images[:1], images[1:])  # in-process: no wall-clock limit in a test
    with torch.no_grad():
        pa, pb = net(torch.as_tensor(images)).numpy()
    by_sum = np.zeros(19)
    for a in range(10):
        for b in range(10):
            by_sum[a + b] += pa[a] * pb[b]
    assert out["sum"] == int(by_sum.argmax())


def test_solver_in_the_loop_decodes_valid_paths():
    pytest.importorskip("pyepo")
    arrays = tasks.generate("warcraft", size=4, digits=1, n=16, n_test=8, seed=5)
    trained = tasks.train("warcraft", "pyepo-dbb", arrays, epochs=1, batch_size=8, lr=3e-3, seed=0)
    result = tasks.evaluate("warcraft", "pyepo-dbb", trained.model, arrays)
    assert result.summary["instances"] == 8 and result.summary["valid"] == 1.0  # Dijkstra on predicted costs


def test_exact_semantic_loss_raises_the_probability_of_a_valid_path():
    torch = pytest.importorskip("torch")
    pytest.importorskip("pysdd")
    from methodkit.tools.casper.models import build

    arrays = tasks.generate("warcraft", size=3, digits=1, n=32, n_test=16, seed=5)
    trained = tasks.train("warcraft", "sl-exact", arrays, epochs=3, batch_size=8, lr=3e-3, seed=0)
    torch.manual_seed(0)
    untrained = build("warcraft")  # the same initial weights as train's
    circuit = baselines.PathSDD(3)

    def mean_log_prob(model):
        with torch.no_grad():
            probs = torch.sigmoid(model(torch.as_tensor(arrays["test_images"]))).reshape(16, -1).double().numpy()
        return np.mean([circuit.log_prob_and_marginals(p)[0] for p in probs])

    assert mean_log_prob(trained.model) > mean_log_prob(untrained)
    result = tasks.evaluate("warcraft", "sl-exact", trained.model, arrays)
    assert result.summary["instances"] == 16


def test_methods_are_checked_against_their_tasks():
    from methodkit.cli import casper_solve
    from methodkit.core.errors import UsageError

    assert casper_solve.METHODS == tasks.METHODS
    with pytest.raises(UsageError, match="--method pishield applies to --task sudoku or shidoku only"):
        tasks.check_method("warcraft", "pishield")


def test_calibrated_decode_scale_is_stored_with_the_model():
    arrays = tasks.generate("warcraft", size=5, digits=1, n=12, n_test=2, seed=6)
    trained = tasks.train("warcraft", "casper", arrays, epochs=1, batch_size=6, lr=3e-3, seed=0)
    assert trained.config["decode_scale"] in tasks.CALIBRATION_SCALES
    info = trained.config["calibration"]["5"]
    assert info["criterion"] == "cost_ratio" and set(info["hamming_by_scale"]) == set(info["cost_ratio_by_scale"])
    errors = info["cost_ratio_by_scale"]
    assert errors[str(trained.config["decode_scale"])] == min(errors.values())
    without_costs = {k: v for k, v in arrays.items() if k != "train_costs"}
    scale, info = tasks.calibrate_scale(trained.model, without_costs, np.random.default_rng(0), count=4)
    assert info["criterion"] == "hamming" and info["hamming_by_scale"][str(scale)] == min(
        info["hamming_by_scale"].values()
    )
    assert trained.config["decode_scales"] == {"5": trained.config["decode_scale"]}

"""The simulator: profiles, capability shapes, determinism, NPZ round trip."""

from __future__ import annotations

import io

import numpy as np
import pytest
from scipy import stats

from methodkit.core.errors import DataError, UsageError
from methodkit.tools.irt import data as data_mod
from methodkit.tools.irt import profiles
from methodkit.tools.irt.simulate import DrawSpec, capabilities, draw


@pytest.mark.parametrize("key", ["mmlu", "gsm8k", "winogrande"])
@pytest.mark.parametrize("model", ["2pl", "3pl"])
def test_mu_b_hits_target_accuracy_by_monte_carlo(key, model):
    p = profiles.get(key)
    mu_b = profiles.solve_mu_b(p, model)
    rng = np.random.default_rng(1)
    n = 400_000
    theta, a, b = (
        rng.standard_normal(n),
        np.exp(p.log_a_mean + p.log_a_sd * rng.standard_normal(n)),
        mu_b + p.b_sd * rng.standard_normal(n),
    )
    c = p.c_mean if model == "3pl" else 0.0
    acc = np.mean(c + (1 - c) / (1 + np.exp(-a * (theta - b))))
    assert acc == pytest.approx(p.target_accuracy, abs=0.004)


def test_profiles_have_real_item_counts_and_psn_means():
    ps = profiles.load()
    assert {k: ps[k].n_items for k in ("arc_challenge", "gsm8k", "hellaswag", "mmlu", "truthfulqa", "winogrande")} == {
        "arc_challenge": 1172,
        "gsm8k": 1319,
        "hellaswag": 10042,
        "mmlu": 14042,
        "truthfulqa": 817,
        "winogrande": 1267,
    }
    psn = ps["psn12.arc_challenge"]
    assert profiles.solve_mu_b(psn, "2pl") == -1.16
    assert np.exp(psn.log_a_mean + psn.log_a_sd**2 / 2) == pytest.approx(1.28)
    with pytest.raises(UsageError, match="unknown profile 'nope'"):
        profiles.get("nope")
    with pytest.raises(DataError, match="needs b_mean or target_accuracy"):
        profiles.load("[leaderboard.x]\nn_items = 3\nlog_a_mean = 0.0\n")


@pytest.mark.parametrize("shape", ["normal", "skewed", "clustered", "multimodal"])
def test_capabilities_are_standardised(shape):
    x = capabilities(DrawSpec(capability=shape, n_models=3000), np.random.default_rng(0))
    assert x.mean() == pytest.approx(0, abs=1e-12) and x.std() == pytest.approx(1, abs=1e-12)


def test_capability_shapes_differ_as_specified():
    rng = lambda: np.random.default_rng(3)  # noqa: E731
    skewed = capabilities(DrawSpec(capability="skewed", n_models=20000), rng())
    assert stats.skew(skewed) < -0.6  # alpha = -4: long tail of weak models (theory -0.78)
    two = capabilities(DrawSpec(capability="multimodal", n_models=20000), rng())
    assert stats.kurtosis(two) < -1.0  # two separated modes: strongly platykurtic
    clustered = capabilities(DrawSpec(capability="clustered", n_models=200, groups=3), rng())
    assert len(np.unique(np.round(clustered, 0))) <= 8


def test_draw_is_deterministic_and_records_its_spec():
    spec = DrawSpec(n_models=30, n_items=40, missing=0.2, capability="clustered")
    one, two = draw(spec, 7), draw(spec, 7)
    assert np.array_equal(one.Y, two.Y) and np.array_equal(one.theta, two.theta)
    assert not np.array_equal(one.Y, draw(spec, 8).Y)
    assert one.meta["spec"]["capability"] == "clustered" and one.meta["seed"] == 7
    assert 0.15 < (one.Y == 255).mean() < 0.25
    assert one.Y.dtype == np.uint8 and set(np.unique(one.Y)) <= {0, 1, 255}


def test_1pl_and_3pl_truth_constraints():
    d1 = draw(DrawSpec(model="1pl", n_models=10, n_items=20), 0)
    assert (d1.a == 1).all() and (d1.c == 0).all()
    d3 = draw(DrawSpec(model="3pl", profile="gsm8k", n_models=10, n_items=20), 0)
    assert (d3.c == 0).all()  # open answers: no guessing
    d3 = draw(DrawSpec(model="3pl", profile="mmlu", n_models=10, n_items=2000), 0)
    assert d3.c.mean() == pytest.approx(0.25, abs=0.01)


def test_npz_round_trip(tmp_path):
    from methodkit.core import io as mio

    d = draw(DrawSpec(n_models=8, n_items=5, missing=0.3), 1)
    mio.write_arrays(tmp_path / "d.npz", d.to_arrays())
    back = data_mod.from_arrays(mio.read_arrays(tmp_path / "d.npz"), "d.npz")
    assert np.array_equal(back.Y, d.Y) and np.allclose(back.b, d.b) and back.meta == d.meta
    assert list(back.item_id) == list(d.item_id)


def test_long_and_wide_tables_agree():
    import pandas as pd

    long = pd.DataFrame(
        {"model_id": ["x", "x", "y", "y"], "item_id": ["q1", "q2", "q1", "q3"], "correct": [1, 0, 0, 1]}
    )
    d = data_mod.from_long(long, "t")
    assert d.Y.tolist() == [[1, 0, 255], [0, 255, 1]]
    wide = pd.read_csv(io.StringIO("model_id,q1,q2,q3\nx,1,0,\ny,0,,1\n"))
    w = data_mod.from_wide(wide, "w")
    assert w.Y.tolist() == d.Y.tolist() and list(w.model_id) == ["x", "y"]


def test_bad_values_are_listed_and_binarize_fixes_them():
    import pandas as pd

    wide = pd.DataFrame({"model_id": ["a", "b"], "q1": [1, 0.7], "q2": [2, 0]})
    with pytest.raises(DataError, match=r"2 cells are not \(model 'a' item 'q2' = 2, model 'b' item 'q1' = 0.7\)"):
        data_mod.from_wide(wide, "s.csv")
    assert data_mod.from_wide(wide, "s.csv", binarize=0.5).Y.tolist() == [[1, 1], [1, 0]]


def test_screen_refuses_and_drops():
    d = draw(DrawSpec(n_models=30, n_items=10), 0)
    with pytest.raises(DataError, match="too small"):
        data_mod.screen(d.subset(slice(0, 4)), "x", model="2pl", method="mml")
    Y = d.Y.copy()
    Y[0] = 1
    Y[:, 0] = 0
    d.Y = Y
    kept, report = data_mod.screen(d, "x", model="2pl", method="vi", drop_extreme=True)
    assert report.dropped_models >= 1 and report.dropped_items >= 1
    assert not any(m.any() for m in data_mod.extremes(kept.Y))
    _, report = data_mod.screen(d, "x", model="3pl", method="psn")
    assert len(report.warnings) == 2
    sparse = d.subset()
    sparse.Y = np.where(np.random.default_rng(0).random(Y.shape) < 0.97, 255, Y).astype(np.uint8)
    with pytest.raises(DataError, match="missing"):
        data_mod.screen(sparse, "x", model="2pl", method="mml")

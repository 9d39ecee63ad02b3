"""The long table and the .mat importer: layouts, and every bad input named precisely."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from methodkit.core.errors import DataError
from methodkit.tools.cbf import data


def small_frame():
    task = data.simulate_task(seed=0, trials=5)
    frame = data.task_frame(task)
    frame["response"] = 50.0
    frame["rt_ms"] = 4000.0
    frame.attrs["source"] = "x.csv"
    frame.attrs["format"] = "csv"
    return frame


def test_task_has_the_design():
    task = data.simulate_task(seed=4, trials=2000, within=None)
    assert np.allclose(np.var(np.diff(task.latent, axis=0), axis=0) / task.vol, 1.0, atol=0.1)
    assert np.allclose(np.var(task.outcome - task.latent, axis=0) / task.sto, 1.0, atol=0.1)
    assert np.all(task.latent[0] == 60.0)


def test_round_trip_through_the_long_table():
    frame = small_frame()
    cohort = data.from_frame(frame)
    assert cohort.outcome.shape == (1, 4, 5)
    back = cohort.to_frame()
    assert np.allclose(back["outcome"], frame["outcome"])


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda f: f.drop(columns=["outcome"]), "column 'outcome' not found"),
        (
            lambda f: f.assign(response=f["response"].where(f.index != 3, 95.0)),
            "line 5: response 95 is outside the response range [10, 90]",
        ),
        (lambda f: pd.concat([f, f.iloc[[2]]]), "duplicated (subject, block, trial) = (task, 1, 3)"),
        (lambda f: f[~((f["block"] == 2) & (f["trial"] > 2))], "subject task, block 2: 2 trials, at least 3 needed"),
        (lambda f: f[~((f["block"] == 3) & (f["trial"] == 2))], "subject task, block 3: trial 2 is missing"),
        (lambda f: f.assign(outcome=f["outcome"].where(f.index != 0, np.nan)), "line 2: column 'outcome' is empty/NaN"),
    ],
)
def test_bad_tables_are_named(edit, message):
    frame = edit(small_frame()).reset_index(drop=True)
    frame.attrs.update({"source": "x.csv", "format": "csv"})
    with pytest.raises(DataError) as err:
        data.from_frame(frame)
    assert message in err.value.message


def test_missing_responses_are_masked_and_counted():
    frame = small_frame()
    frame.loc[4, "response"] = np.nan
    cohort = data.from_frame(frame)
    assert cohort.counts["missing_responses"] == 1
    assert cohort.response_mask().sum() == 19


def mat_bytes(drop=None, people=3):
    import scipy.io as sio

    rng = np.random.default_rng(0)
    bag = 60 + rng.normal(0, 5, (50, 4))
    meta = {"true_vol": np.array([4, 49, 4, 49]), "true_sto": np.array([16, 16, 64, 64]), "bird": bag - 1, "bag": bag}
    if drop in meta:
        del meta[drop]
    dtype = [("bucket", "O"), ("randomization_order", "O"), ("response_time", "O")]
    people_arr = np.zeros((1, people), dtype=dtype)
    for i in range(people):
        people_arr[0, i]["bucket"] = np.full((50, 4), 40 + 2 * i, dtype=np.uint8)
        people_arr[0, i]["randomization_order"] = np.roll(np.arange(4, dtype=np.uint8), i)
        people_arr[0, i]["response_time"] = np.full((50, 4), 4000 + i)
    buffer = io.BytesIO()
    sio.savemat(buffer, {"data": people_arr, "meta_data": meta})
    return buffer.getvalue()


def test_import_stovol_mat_puts_conditions_in_block_order():
    cohort = data.import_stovol_mat(mat_bytes(), "data.mat")
    assert cohort.outcome.shape == (3, 4, 50)
    # subject 2 saw the conditions in the order roll(0..3, 1) = 3, 0, 1, 2
    assert list(cohort.true_vol[1]) == [49, 4, 49, 4]
    assert list(cohort.true_sto[1]) == [64, 16, 16, 64]
    assert cohort.response[2, 0, 0] == 44


@pytest.mark.parametrize("field", ["bag", "true_sto"])
def test_import_names_a_missing_field(field):
    with pytest.raises(DataError, match=f"meta_data has no field '{field}'"):
        data.import_stovol_mat(mat_bytes(drop=field), "data.mat")


def test_import_refuses_a_file_that_is_not_mat():
    with pytest.raises(DataError, match="not a MATLAB .mat file"):
        data.import_stovol_mat(b"subject,block\n1,2\n", "data.mat")


def test_simulated_noise_sources_are_mutually_independent():
    # Every random source of a simulated data set (the task's latent steps and outcome noise, the
    # agents' response noise, their log-RT noise) must come from its own stream: a shared or
    # re-seeded stream would correlate, e.g., RT noise with outcomes and so with ambiguity.
    from methodkit.tools.cbf import agents, signals
    from methodkit.tools.cbf.forward import FilterOptions
    from methodkit.tools.cbf.grid import GridSpec

    task = data.simulate_task(seed=3, trials=400, within=None)
    people = data.cohort_for_agents(task, 30, seed=3)
    params = agents.population_params("kf", ["healthy"] * 30, np.random.default_rng(3), 4.0)
    rt = agents.parse_rt("logrt=8.4+N(0,0.1)")
    sim = agents.simulate(people, "kf", params, seed=3, clip=None, step=0, rt=rt).cohort
    values = {k: params[k].to_numpy() for k in ("v", "s", "sigma_r")}
    pred = signals.model_signals(sim, "kf", values, grid=GridSpec(), fopts=FilterOptions()).arrays["pred_mean"]
    step = np.diff(sim.latent, axis=-1, prepend=np.nan) / np.sqrt(sim.true_vol[..., None])
    sources = {
        "response": (sim.response - pred) / 4.0,
        "rt": (np.log(sim.rt_ms) - 8.4) / 0.1,
        "outcome": (sim.outcome - sim.latent) / np.sqrt(sim.true_sto[..., None]),
        "step": step,
    }
    assert abs(np.nanstd(sources["response"]) - 1) < 0.05 and abs(np.nanstd(sources["rt"]) - 1) < 0.05

    def corr(x, y):
        ok = np.isfinite(x) & np.isfinite(y)
        return np.corrcoef(x[ok], y[ok])[0, 1], ok.sum()

    for a, b in [("response", "rt"), ("response", "outcome"), ("response", "step"), ("rt", "outcome"), ("rt", "step")]:
        r, n = corr(sources[a].ravel(), sources[b].ravel())  # 48,000 trials: 4.5 sd ~ .02
        assert abs(r) < 4.5 / np.sqrt(n), (a, b, r)
    # the task's two sources, once per trial of the shared sequences (1,600 values)
    r, n = corr((task.outcome - task.latent).ravel(), np.diff(task.latent, axis=0, prepend=np.nan).ravel())
    assert abs(r) < 4.5 / np.sqrt(n), ("outcome", "step", r)

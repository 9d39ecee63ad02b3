"""DR policy evaluation: a known-answer synthetic where the covariates explain most of the outcome."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from methodkit.tools.cuvet import evaluate as ev
from methodkit.tools.cuvet.data import CostSpec, load_rct
from methodkit.tools.cuvet.doubly_robust import dr_terms, evaluate_dr, outcome_models

EFFECT = np.array([0.0, 0.5, 0.8])  # arm effects on the value
KAPPA = [0.0, 1.0, 2.0]


def _rct(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3))
    t = rng.integers(0, 3, n)
    prognostic = 3.0 * x[:, 0] + 2.0 * (x[:, 1] > 0)  # most of the outcome's variance
    y = prognostic + EFFECT[t] * (x[:, 2] > 0) + 0.3 * rng.standard_normal(n)
    frame = pd.DataFrame({"id": np.arange(n), "x0": x[:, 0], "x1": x[:, 1], "x2": x[:, 2], "t": t, "y": y})
    return frame, load_rct(frame, "t", "y", CostSpec(arm_costs=KAPPA), id_col="id")


def _policy(frame) -> tuple[np.ndarray, float, float]:
    """Arm 2 where x2 > 0, else control; its true value and cost on this sample."""
    treat = frame["x2"].to_numpy() > 0
    pi = np.zeros((len(frame), 3))
    pi[treat, 2] = 1.0
    pi[~treat, 0] = 1.0
    truth_value = float((3.0 * frame["x0"] + 2.0 * (frame["x1"] > 0) + EFFECT[2] * treat).mean())
    return pi, truth_value, float(KAPPA[2] * treat.mean())


def test_dr_terms_are_ipw_when_the_model_is_zero():
    frame, data = _rct(500, 0)
    pi, _, _ = _policy(frame)
    e = ev.propensities(data)
    zero = np.zeros((data.n, 3))
    v, c = dr_terms(pi, data, e, zero, zero)
    tv, tc = ev.ipw_terms(pi[np.arange(data.n), data.t], data, e)
    assert np.allclose(v, tv) and np.allclose(c, tc)


def _control(n: int) -> np.ndarray:
    ctl = np.zeros((n, 3))
    ctl[:, 0] = 1.0
    return ctl


def test_dr_with_the_true_mean_function_leaves_only_the_noise():
    frame, data = _rct(2000, 1)
    pi, truth_value, truth_cost = _policy(frame)
    x = data.X
    mu = (3.0 * x[:, :1] + 2.0 * (x[:, 1:2] > 0)) + EFFECT[None, :] * (x[:, 2:3] > 0)
    nu = np.repeat(np.asarray(KAPPA)[None, :], data.n, axis=0)
    e = ev.propensities(data)
    out = evaluate_dr(pi, pi, data, e, models=(mu, nu), n_boot=50)
    # the in-sample truth differs from the estimate only by the reweighted N(0, .3^2) noise
    w = pi[np.arange(data.n), data.t] / e
    noise_se = float(np.std(w * (data.y - mu[np.arange(data.n), data.t])) / np.sqrt(data.n))
    assert noise_se < 0.02
    assert out.value == pytest.approx(truth_value, abs=4 * noise_se)
    assert out.cost == pytest.approx(truth_cost)  # deterministic arm costs: exact


def test_cross_fitted_dr_uplift_is_right_and_far_tighter_than_ipw():
    """The uplift over control: the prognostic part cancels in DR's terms, not in IPW's."""
    frame, data = _rct(6000, 2)
    pi, _, _ = _policy(frame)
    ctl = _control(data.n)
    e = ev.propensities(data)
    mu, nu = outcome_models(data, folds=3, seed=0, threads=1)
    out = evaluate_dr(pi, ctl, data, e, models=(mu, nu), n_boot=100)
    truth_uplift = EFFECT[2] * float((frame["x2"] > 0).mean())
    dr = dr_terms(pi, data, e, mu, nu)[0] - dr_terms(ctl, data, e, mu, nu)[0]
    rows = np.arange(data.n)
    ipw = ev.ipw_terms(pi[rows, data.t], data, e)[0] - ev.ipw_terms(ctl[rows, data.t], data, e)[0]
    dr_se, ipw_se = dr.std() / np.sqrt(data.n), ipw.std() / np.sqrt(data.n)
    assert out.value - out.value_ref == pytest.approx(dr.mean())
    assert dr.mean() == pytest.approx(truth_uplift, abs=4 * dr_se)
    assert dr_se < 0.3 * ipw_se
    assert out.value_ci[0] < out.value < out.value_ci[1]


def test_cost_on_outcome_uses_kappa_times_mu():
    frame, _ = _rct(800, 3)
    frame["y"] = (frame["y"] > 1).astype(int)
    data = load_rct(frame, "t", "y", CostSpec(arm_costs=KAPPA, on_outcome=True), id_col="id")
    mu, nu = outcome_models(data, folds=2, seed=0, threads=1)
    assert np.allclose(nu, np.asarray(KAPPA)[None, :] * mu)
    assert ((mu >= 0) & (mu <= 1)).all()

"""The counterfactual proxy and the realised score on real decisions; group advantages."""

from __future__ import annotations

import numpy as np

from methodkit.core.sim.highway import vocab
from methodkit.tools.craft import proxy


def test_group_advantage_is_standardised_and_flat_groups_are_zero():
    s = np.array([[0.1, 0.5, 0.9, 0.5], [0.3, 0.3, 0.3, 0.3]])
    adv, std, flat = proxy.group_advantage(s)
    assert flat.tolist() == [False, True]
    assert abs(adv[0].mean()) < 1e-12 and abs(adv[0].std() - 1.0) < 1e-4
    assert (adv[1] == 0).all()
    assert adv[0, 2] > adv[0, 1] > adv[0, 0]


def test_route_term():
    move = np.array([[-1, 0, 1]])
    assert proxy.route_term(move, np.array([0])).tolist() == [[1.0, 1.0, 1.0]]
    assert proxy.route_term(move, np.array([1])).tolist() == [[0.5, 0.5, 1.0]]
    assert proxy.route_term(move, np.array([-2])).tolist() == [[1.0, 0.5, 0.5]]


def test_proxy_scores_in_range_and_stop_loses_progress(batch):
    _, _, d = batch
    s, sub, gmax = proxy.group_scores(d, "cv")
    assert s.shape == (len(d), vocab.N_CANDIDATES)
    assert np.isfinite(s).all() and (s >= 0).all() and (s <= 1 + 1e-12).all()
    moving = d.ego[:, 0, 3] > 15
    # on a free road the emergency stop makes less progress than keep-speed, so it scores lower where both are safe
    safe = moving & (sub.nc[:, 15] == 1) & (sub.nc[:, vocab.KEEP] == 1) & (sub.dac[:, vocab.KEEP] == 1)
    assert safe.sum() > 10
    assert (s[safe, 15] < s[safe, vocab.KEEP]).mean() > 0.9


def test_log_futures_make_the_executed_proxy_close_to_the_realised_score(batch):
    _, _, d = batch
    rows = np.arange(len(d))
    s_log, _, gmax_log = proxy.group_scores(d, "log")
    s_cv, _, gmax = proxy.group_scores(d, "cv")
    r_log, _ = proxy.realised_scores(d, gmax_log)
    r_cv, _ = proxy.realised_scores(d, gmax)
    gap_log = np.abs(r_log - s_log[rows, d.action]).mean()
    gap_cv = np.abs(r_cv - s_cv[rows, d.action]).mean()
    # replaying the realised futures leaves only the replanning in the residual: smaller than with CV forecasts
    assert gap_log <= gap_cv + 1e-9

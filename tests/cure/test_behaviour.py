"""collect's online TD3 behaviour policy learns: on InvertedPendulum-v5 its final actor balances far
longer than uniform random actions after 1,500 environment steps (a reversed actor loss does not),
and a spec asking for it records its step budget."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.tools.cure import data as D


def _mean_return(env, policy, episodes: int = 5) -> float:
    rng = np.random.default_rng(1)
    totals = []
    for k in range(episodes):
        obs, _ = env.reset(seed=100 + k)
        total = 0.0
        for t in range(1000):
            a = policy(obs, t, rng) if policy else rng.uniform(-1, 1, env.action_space.shape[0])
            obs, r, term, trunc, _ = env.step(np.clip(a, -1, 1))
            total += r
            if term or trunc:
                break
        totals.append(total)
    return float(np.mean(totals))


def test_online_td3_learns_to_balance():
    from methodkit.tools.cure.behaviour import online_td3

    env = D.make_env("InvertedPendulum-v5")
    early, medium = online_td3(env, 1500, 0, hidden=32, start=300)
    random_return = _mean_return(env, None)
    assert _mean_return(env, medium) > 3 * random_return  # measured 48.2 vs 9.6
    assert early is not medium


def test_td3_spec_records_its_budget_and_refuses_a_bad_one():
    spec = D.Spec.parse({**D.default_spec(scale=0.02), "behaviour": "td3", "behaviour_steps": 500})
    assert spec.to_dict()["behaviour_steps"] == 500
    assert "behaviour_steps" not in D.Spec.parse(D.default_spec(scale=0.02)).to_dict()  # ARS data sets unchanged
    with pytest.raises(Exception, match="behaviour_steps must be an integer >= 2"):
        D.Spec.parse({**D.default_spec(scale=0.02), "behaviour": "td3", "behaviour_steps": 1})

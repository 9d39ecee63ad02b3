"""Step C's shared forward passes and precomputed frozen terms (FrozenTerms: Q_0, pi_0 and b(s) per row;
IQL's target twin shared by its V loss and AWR weights) leave its result unchanged: Unlearner.step
against a straightforward reference that evaluates every term on its own (twin critic four times, actor
three times, every frozen network on every batch), same seed."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from methodkit.tools.cure import unlearn as U
from methodkit.tools.cure.backbones import batch
from methodkit.tools.cure.train import train


def reference_step(un: U.Unlearner, br: dict, bf: dict, wf: torch.Tensor) -> tuple[float, float]:
    """Issue 33 step C term by term, each on its own forward pass (cure, cure-uniform, cure-noactor)."""
    ag, cfg = un.agent, un.cfg
    loss = ag.critic_per_sample(br).mean()
    excess = torch.relu(ag.q(bf["s"], bf["a"]) - (un.base(bf["s"]) - un.margin))
    loss = loss + un.lambda_s * (wf * excess**2).mean()
    loss = loss + ((1 - wf) * ag.critic_per_sample(bf)).mean()
    with torch.no_grad():
        q0 = un.agent0.q(br["s"], br["a"])
    loss = loss + cfg.lambda_a * ((ag.q(br["s"], br["a"]) - q0) ** 2).mean()
    ag.step_critic(loss)
    aloss = torch.zeros(())
    if ag.actor_due():
        both = {k: torch.cat([br[k], bf[k]]) for k in br}
        if cfg.method == "cure-noactor":
            aloss = ag.actor_per_sample(both).mean()
        else:
            aloss = ag.actor_per_sample(both, bc_weight=torch.cat([torch.ones(len(br["r"])), 1 - wf])).mean()
            if ag.algo != "iql":
                repel = torch.relu(un.rho - ((ag.actor(bf["s"]) - bf["a"]) ** 2).sum(-1))
                aloss = aloss + cfg.lambda_r * (wf * repel).mean()
                with torch.no_grad():
                    pi0 = un.agent0.actor(br["s"])
                aloss = aloss + cfg.lambda_p * ((ag.actor(br["s"]) - pi0) ** 2).sum(-1).mean()
        ag.step_actor(aloss)
        ag.update_targets()
    ag.steps += 1
    with torch.no_grad():
        qmax = float(ag.q(br["s"], br["a"]).abs().max())
    return float(loss.detach()) + float(aloss.detach()), qmax


@pytest.mark.parametrize(
    "algo,method", [("td3bc", "cure"), ("td3bc", "cure-noactor"), ("iql", "cure"), ("cql", "cure-uniform")]
)
def test_step_c_equals_the_term_by_term_reference(tiny_ds, algo, method):
    agent0 = train(tiny_ds, algo, steps=8, hidden=24, seed=3)[0]
    start = train(tiny_ds, algo, steps=8, hidden=24, seed=4)[0]  # away from agent0: the anchors bite
    fid = tiny_ds.ids_of("F-mix")
    rows_r, rows_f = tiny_ds.rows_of(np.setdiff1d(tiny_ds.train_ids(), fid)), tiny_ds.rows_of(fid)
    # odd batch sizes: a single noise draw for the stacked targets would then shift the random stream
    cfg = U.ForgetConfig(method=method, baseline_steps=4, batch_size=47)
    base, margin = U.fit_baseline(agent0, tiny_ds, rows_r, cfg)
    runs = []
    for step in (U.Unlearner.step, reference_step):
        agent = copy.deepcopy(start).requires_grad_(True)
        agent.gen.manual_seed(7)
        frozen = U.FrozenTerms(agent, agent0, base, tiny_ds.arrays, rows_r, rows_f)  # used by Unlearner.step
        un = U.Unlearner(agent, agent0, cfg, base, margin, frozen)
        rng = np.random.default_rng(5)
        out = []
        for _ in range(5):
            br = batch(tiny_ds.arrays, rows_r[rng.integers(0, len(rows_r), 47)], agent, with_rows=True)
            bf = batch(tiny_ds.arrays, rows_f[rng.integers(0, len(rows_f), 41)], agent, with_rows=True)
            out.append(step(un, br, bf, torch.as_tensor(rng.uniform(0.1, 1.0, 41), dtype=torch.float32)))
        runs.append((np.array(out), agent.state_dict()))
    (got, got_state), (want, want_state) = runs
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert not torch.equal(got_state["critic.q1.0.weight"], start.state_dict()["critic.q1.0.weight"])
    for k, v in want_state.items():
        torch.testing.assert_close(got_state[k], v, rtol=1e-5, atol=1e-6, msg=lambda m, k=k: f"{k}: {m}")

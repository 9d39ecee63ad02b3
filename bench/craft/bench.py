"""craft-finetune hot loops against their references, measured in the same run (one thread).

    nice -n 5 .venv/bin/python -P bench/craft/bench.py

Prints `case size ours_s ref_s ratio`:
- critical: kernels.critical_events (Numba) vs critical_events_ref (NumPy) on realised windows,
  identical flags required;
- proxy_group: the counterfactual group of real decisions (16 plans x 10 agents x 21 states)
  through score.score_plans (Numba) vs score.score_plans_ref (NumPy), identical sub-scores;
- iteration: one CRAFT iteration (16 episodes: rollout, proxy, realised scores, events, update),
  reported as decisions per second (no reference; the issue's target is >= 2,000/s).
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from methodkit.core.sim.highway import score as pdm  # noqa: E402
from methodkit.tools.craft import collect, finetune, kernels, policy, proxy, suites  # noqa: E402


def best(fn, repeat=3):
    out, times = None, []
    for _ in range(repeat):
        t = time.process_time()
        out = fn()
        times.append(time.process_time() - t)
    return min(times), out


def main():
    torch.set_num_threads(1)
    routes = suites.builtin("hwy-mini")
    model = policy.build("mlp").eval()
    scenes, ids = suites.scenes(routes[::3])
    fams = [r["family"] for r in routes[::3]]
    d = collect.run(model, scenes, ids, fams, sample=True, generator=torch.Generator().manual_seed(0), comfort=False)
    d = d.decisions
    print("case size ours_s ref_s ratio")
    conflict = np.zeros(len(d), dtype=bool)
    args = (d.ego, d.ego_size, d.agents, d.agent_speed, d.present, d.collided, conflict, collect.FRAME_S)
    kernels.critical_events(*args)
    ours, a = best(lambda: kernels.critical_events(*args))
    ref, b = best(lambda: kernels.critical_events_ref(*args))
    assert (a == b).all()
    print(f"critical {len(d)} {ours:.4g} {ref:.4g} {ref / ours:.1f}")
    n = min(len(d), 48)
    sub = d.__class__(**{k: (v[:n] if hasattr(v, "shape") else v[:n]) for k, v in d.__dict__.items()})
    points = np.concatenate([sub.ego[:, None, :1, :2].repeat(16, 1), sub.plans[..., :2]], axis=2)
    states = pdm.plan_states(points, collect.FRAME_S, heading0=sub.ego[:, :1, 2].repeat(16, 1))
    boxes, speeds, present = proxy._agent_inputs(sub, "cv")
    x = pdm.prepare_inputs(states, sub.ego_size, boxes, speeds, present, sub.static, sub.road, sub.road_mask,
                           np.zeros(n), collect.FRAME_S)  # fmt: skip
    pdm.score_prepared(x)
    ours, a = best(lambda: pdm.score_prepared(x))
    ref, b = best(lambda: pdm.score_plans_ref(x), repeat=1)
    assert max(float(np.abs(getattr(a, m) - getattr(b, m)).max()) for m in pdm.METRICS) < 1e-9
    print(f"proxy_group {n}x16 {ours:.4g} {ref:.4g} {ref / ours:.1f}")
    trainer = finetune.Trainer(model, "mlp", routes, finetune.FinetuneConfig(episodes=16))
    trainer.iterate(0)
    t = time.process_time()
    row = trainer.iterate(1)
    spent = time.process_time() - t
    print(f"iteration {row['decisions']} {spent:.4g} nan nan  # {row['decisions'] / spent:.0f} decisions/s")


if __name__ == "__main__":
    main()

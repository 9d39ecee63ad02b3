"""Where do the proxy and the realised score disagree? Residual statistics of one on-policy batch.

    nice -n 5 .venv/bin/python -P bench/craft/residual_diagnostic.py POLICY.safetensors [EPISODES]

Drives EPISODES routes of hwy-train (sampled actions, seed 0), scores the group proxy and the
realised windows, and prints per critical flag the count, mean residual delta = R - S(a), and
how often the comfort sub-score is 1 in the proxy (executed plan) and in the realised window.
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from methodkit.tools.craft import collect, kernels, policy, proxy, suites


def main(path: str, episodes: int = 32) -> None:
    torch.set_num_threads(1)
    model, _ = policy.load(path)
    routes = suites.builtin("hwy-train")
    pick = np.random.default_rng(0).choice(len(routes), episodes, replace=False)
    routes = [routes[i] for i in pick]
    scenes, ids = suites.scenes(routes)
    out = collect.run(model, scenes, ids, [r["family"] for r in routes], sample=True,
                      generator=torch.Generator().manual_seed(0), comfort=False)  # fmt: skip
    d = out.decisions
    rows = np.arange(len(d))
    s, sub, gmax = proxy.group_scores(d, "cv")
    r, rsub = proxy.realised_scores(d, gmax)
    conflict = (sub.nc[rows, d.action] < 1) | (sub.ttc[rows, d.action] == 0)
    flags = kernels.critical_events(d.ego, d.ego_size, d.agents, d.agent_speed, d.present, d.collided, conflict, 0.2)
    delta = r - s[rows, d.action]
    print("subset n mean_delta proxy_comfort realised_comfort proxy_ttc realised_ttc")
    subsets = {"all": np.ones(len(d), bool), "not critical": flags == 0}
    subsets.update({name: (flags & bit) != 0 for bit, name in kernels.CRITICAL_NAMES.items()})
    for name, m in subsets.items():
        if m.any():
            print(f"{name} {int(m.sum())} {delta[m].mean():+.4f} {sub.comfort[rows, d.action][m].mean():.3f} "
                  f"{rsub.comfort[m, 0].mean():.3f} {sub.ttc[rows, d.action][m].mean():.3f} {rsub.ttc[m, 0].mean():.3f}")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 32)

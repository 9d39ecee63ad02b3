"""Scene graphs for Graph-RAE and flat vectors for the planner, from scene arrays (kernels.py does the work)."""

from __future__ import annotations

import numpy as np

from methodkit.tools.autoscale import kernels as KF

N_AGENTS = 12


def featurise(arrays: dict, noise: bool = True, n_agents: int = N_AGENTS) -> dict:
    """Graph arrays of every scene (kernels.featurise_batch); `noise` applies the stored observation noise."""
    n = arrays["ego"].shape[0]
    out = KF.empty_outputs(n, n_agents)
    obs = arrays["obs_noise"] if noise else np.zeros(arrays["agents"].shape[:2] + (4,))
    KF.featurise_batch(
        np.ascontiguousarray(arrays["ego"]), np.ascontiguousarray(arrays["agents"]),
        np.ascontiguousarray(arrays["agent_mask"]), np.ascontiguousarray(arrays["lanes"]),
        np.ascontiguousarray(arrays["lane_mask"]), np.ascontiguousarray(obs, dtype=np.float64),
        out["nodes"], out["lane_nodes"], out["edges"], out["member"], out["grid"],
    )  # fmt: skip
    return out


def featurise_ref(arrays: dict, noise: bool = True, n_agents: int = N_AGENTS) -> dict:
    """The same arrays from a per-scene NumPy loop (kernels.featurise_one_ref)."""
    n = arrays["ego"].shape[0]
    obs = arrays["obs_noise"] if noise else np.zeros(arrays["agents"].shape[:2] + (4,))
    parts = [
        KF.featurise_one_ref(
            arrays["ego"][i],
            arrays["agents"][i],
            arrays["agent_mask"][i],
            arrays["lanes"][i],
            arrays["lane_mask"][i],
            obs[i],
            n_agents,
        )  # fmt: skip
        for i in range(n)
    ]
    return {k: np.stack([p[k] for p in parts]) for k in parts[0]}


def flat(feats: dict) -> np.ndarray:
    """One float32 vector per scene: nodes, lane nodes and the occupancy grid (the planner's input)."""
    n = feats["nodes"].shape[0]
    return np.concatenate(
        [feats["nodes"].reshape(n, -1), feats["lane_nodes"].reshape(n, -1), feats["grid"].reshape(n, -1)], axis=1
    ).astype(np.float32)


def subset(arrays: dict, index) -> dict:
    """The scenes `index` of a pool (every per-scene array)."""
    n = arrays["ego"].shape[0]
    return {k: (v[index] if isinstance(v, np.ndarray) and v.ndim and v.shape[0] == n else v) for k, v in arrays.items()}


def augment(arrays: dict, rng: np.random.Generator) -> dict:
    """A positive view of each scene for InfoNCE: position jitter (+-1 m), speed jitter (+-0.5 m/s), far
    agents (> 40 m) dropped with probability 1/2, and a lane mirror (the road flipped across its middle)
    with probability 1/2. The noise draw is fixed per call (seeded)."""
    out = dict(arrays)
    n, k = arrays["agent_mask"].shape
    agents = arrays["agents"].copy()
    agents[..., :2] += rng.uniform(-1.0, 1.0, (n, k, 2))
    agents[..., 3:5] += rng.uniform(-0.5, 0.5, (n, k, 2))
    dx = np.abs(agents[..., 0] - arrays["ego"][:, None, 0])
    mask = arrays["agent_mask"] & ~((dx > 40.0) & (rng.uniform(size=(n, k)) < 0.5))
    ego = arrays["ego"].copy()
    lanes = arrays["lanes"].copy()
    flip = rng.uniform(size=n) < 0.5
    lm = arrays["lane_mask"]
    y_lo = np.where(lm, lanes[..., 2], np.inf).min(1)
    y_hi = np.where(lm, lanes[..., 2], -np.inf).max(1)
    i_hi = np.where(lm, lanes[..., 4], -np.inf).max(1)
    mid = (y_lo + y_hi)[:, None]
    agents[flip, :, 1] = mid[flip] - agents[flip, :, 1]
    agents[flip, :, 4] *= -1.0
    agents[flip, :, 2] *= -1.0
    ego[flip, 1] = mid[flip, 0] - ego[flip, 1]
    ego[flip, 4] *= -1.0
    lanes[flip, :, 2] = mid[flip] - lanes[flip, :, 2]
    lanes[flip, :, 4] = i_hi[flip, None] - lanes[flip, :, 4]
    out.update(agents=agents, agent_mask=mask, ego=ego, lanes=lanes)
    return out

"""Demonstrations: the privileged expert driven through the vocabulary, every decision recorded.

At each 1 Hz decision the expert's 4 s future (rolled out from a copy, traffic reacting) maps
to its nearest candidate (core.sim.highway.expert.expert_index), which is then executed, so
the recorded states are those a vocabulary policy visits.
"""

from __future__ import annotations

import json

import numpy as np

from methodkit.core.sim.highway import expert
from methodkit.core.sim.highway import kernels as K
from methodkit.core.sim.highway.simulate import rollout
from methodkit.core.sim.highway.state import pack
from methodkit.tools.craft import policy as pol
from methodkit.tools.craft import suites

BATCH = 64
SIM_VERSION = "methodkit.core.sim.highway/1"


def run(routes, progress=lambda *a: None) -> tuple[dict, dict]:
    """(arrays for the demos NPZ, counts per family)."""
    from methodkit.core.sim.highway import vocab

    scenes, ids = suites.scenes(routes)
    obs, idx, traj, route_id, t = [], [], [], [], []
    counts: dict[str, int] = {}
    for start in range(0, len(scenes), BATCH):
        part = scenes[start : start + BATCH]
        state = pack(part)

        def fn(sim, running, offset=start):
            ego, near = sim.observe()
            index, tr = expert.expert_index(sim.state, running)
            obs.append(pol.flat_obs(ego[running], near[running]))
            idx.append(index)
            traj.append(tr[:, :, :2])
            route_id.append(running + offset)
            t.append(sim.state.env_i[running, K.STEPS].copy())
            return index

        rollout(state, fn)
        progress("demos", min(start + BATCH, len(scenes)), len(scenes))
    route_id_arr = np.concatenate(route_id)
    for r in route_id_arr:
        fam = routes[int(r)]["family"]
        counts[fam] = counts.get(fam, 0) + 1
    meta = {"vocabulary": vocab.names(), "sim_version": SIM_VERSION, "routes": routes, "ids": ids,
            "obs_dim": pol.OBS_DIM}  # fmt: skip
    arrays = {
        "obs": np.concatenate(obs).astype(np.float32),
        "expert_idx": np.concatenate(idx).astype(np.int64),
        "expert_traj": np.concatenate(traj),
        "route_id": route_id_arr.astype(np.int64),
        "t": np.concatenate(t).astype(np.int64),
        "meta": np.array(json.dumps(meta)),
    }
    return arrays, counts


def check(arrays: dict, name: str) -> dict:
    """The demos NPZ's keys, shapes and meta; returns the meta."""
    from methodkit.core.errors import CheckFailed, DataError

    for key in ("obs", "expert_idx", "meta"):
        if key not in arrays:
            raise DataError(f"{name}: missing key {key}")
    obs, y = arrays["obs"], arrays["expert_idx"]
    if obs.ndim != 2 or y.shape != (obs.shape[0],):
        raise DataError(f"{name}: key 'obs' has shape {obs.shape} and 'expert_idx' {y.shape}; expected [N, D] and [N]")
    meta = json.loads(str(arrays["meta"]))
    if (
        obs.shape[1] != pol.OBS_DIM
        or meta.get("vocabulary") != __import__("methodkit.core.sim.highway.vocab", fromlist=["names"]).names()
    ):
        raise CheckFailed(f"{name}: observation dimension {obs.shape[1]} or vocabulary differs from this simulator's")
    if not np.isfinite(obs).all():
        raise DataError(f"{name}: key 'obs' has a non-finite value at row {int(np.argwhere(~np.isfinite(obs))[0, 0])}")
    if ((y < 0) | (y >= pol.N_ACTIONS)).any():
        raise DataError(f"{name}: key 'expert_idx' has values outside [0, {pol.N_ACTIONS})")
    return meta

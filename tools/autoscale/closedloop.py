"""Closed-loop evaluation of a planner in the shared highway simulator (core.sim.highway), the feedback of
`run --eval closed-loop`.

A scene of a pools folder is a snapshot of a route that core.sim.highway's scenario generator starts; the
route's initial condition is regenerated from the pool's spec (pools.pool_inits) and matched to the scene by
its id. The planner drives the ego: at each 1 Hz decision it sees the scene as the scene files store it
(ego frame features, the stored per-scene observation noise) and picks one of the 16 candidates, which the
simulator's low-level controller tracks while the traffic reacts (IDM/MOBIL). The route is scored by
core.sim.highway.metrics (route completion RC, infraction penalty P, DS = RC * P, CARLA/Bench2Drive form).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import UsageError
from methodkit.core.sim.highway import kernels as K
from methodkit.core.sim.highway import metrics, suite
from methodkit.core.sim.highway.simulate import rollout
from methodkit.core.sim.highway.state import pack, roles
from methodkit.tools.autoscale import features as F
from methodkit.tools.autoscale import planner as P
from methodkit.tools.autoscale import pools as PL

ROUTE_SECONDS = 20.0  # each closed-loop route is driven for this long (or to its end)
METRIC = "closed-loop DS = RC x penalty (core.sim.highway.metrics), reactive traffic, 1 Hz planner decisions"


@dataclass
class Routes:
    """The routes of a scene set: initial conditions in scene order and the stored observation noise."""

    inits: list
    obs_noise: np.ndarray
    seconds: float = ROUTE_SECONDS
    expert_rc: np.ndarray | None = None  # the expert's route completion [N] (%), set on first use

    def __len__(self) -> int:
        return len(self.inits)


def routes(arrays: dict, meta: dict, seconds: float = ROUTE_SECONDS, where: str = "scenes") -> Routes:
    """The routes of an autoscale-mix pool (its meta carries the pool spec); UsageError for other scene files."""
    pool, spec = meta.get("pool"), meta.get("spec")
    if pool not in PL.POOLS or not isinstance(spec, dict):
        raise UsageError(f"{where}: closed-loop evaluation needs scenes made by `autoscale-mix pools` (its meta "
                         "names the pool and its spec); use --eval open-loop for other scene files")  # fmt: skip
    inits, ids, _configs, _gens, _rng = PL.pool_inits(pool, PL.parse_spec(spec, f"{where} meta.spec"))
    index = {f"{pool}-{i}": k for k, i in enumerate(ids)}
    wanted = [str(s) for s in np.asarray(arrays["scene_id"]).tolist()]
    missing = [s for s in wanted if s not in index]
    if missing:
        raise UsageError(f"{where}: scene {missing[0]!r} is not a route of the {pool} pool's spec")
    chosen = [inits[index[s]] for s in wanted]
    for k, (init, ego) in enumerate(zip(chosen, arrays["ego"])):
        if not np.allclose([init.x[0], init.y[0]], ego[:2]):
            raise UsageError(f"{where}: scene {wanted[k]!r} does not match its route's start (pools regenerated?)")
    frames = int(round(seconds / 0.2))
    for init in chosen:
        init.max_steps = min(init.max_steps, frames)
    return Routes(chosen, np.asarray(arrays["obs_noise"], dtype=np.float64), seconds)


def observe(state) -> dict:
    """The planner's inputs of every environment now, in the scene-file layout (scenefile.state_arrays' first
    keys, without the expert's rollout)."""
    speeds = state.speeds()
    feats = np.stack(
        [state.veh[:, K.X], state.veh[:, K.Y], state.veh[:, K.H], speeds[..., 0], speeds[..., 1], state.veh[:, K.LEN],
         state.veh[:, K.WID], roles(state).astype(np.float64)],
        axis=-1,
    )  # fmt: skip
    lanes = np.zeros((state.batch, PL.N_LANES, 5))
    lanes[:, : state.lanes_t.shape[1], :4] = state.lanes_t
    lanes[:, :, 4] = np.arange(PL.N_LANES)
    return {
        "ego": feats[:, 0], "agents": feats[:, 1:], "agent_mask": state.present[:, 1:].copy(), "lanes": lanes,
        "lane_mask": np.arange(PL.N_LANES)[None, :] < state.road_i[:, K.N_LANES : K.N_LANES + 1],
    }  # fmt: skip


def planner_policy(model, obs_noise: np.ndarray):
    """A core.sim.highway policy: the planner's candidate for every running environment."""

    def policy(sim, env):
        obs = observe(sim.state)
        obs["obs_noise"] = obs_noise
        x = F.flat(F.featurise(obs))
        return P.choose(model, x[env])

    return policy


def _rollout(r: Routes, policy) -> list:
    out = rollout(pack(r.inits, slots=PL.SLOTS), policy, record=True)
    found = []
    for b in range(len(r)):
        rec = out.record(b)
        rec["events"] = np.array(rec["events"], dtype=np.int64).reshape(-1, 3)
        found.append(suite.exit_route_metrics(rec, comfort=False))
    return found


def drive(model, r: Routes, policy=None) -> tuple[dict, np.ndarray]:
    """(summary, per-route [N, 4] = RC/100, penalty, score, success) of the planner (or `policy`, a core policy
    name or function) on the routes. score = penalty * min(1, RC / the expert's RC on the route): the DS of a
    route cut to `seconds`, with progress measured as NAVSIM's EP measures it (against the expert; 1 where
    the expert barely moves). Deterministic: the traffic's noise streams are seeded per scene."""
    if r.expert_rc is None:
        r.expert_rc = np.array([m.rc for m in _rollout(r, "expert")])
    found = _rollout(r, policy if policy is not None else planner_policy(model, r.obs_noise))
    per = np.zeros((len(r), 4))
    for b, m in enumerate(found):
        ep = 1.0 if r.expert_rc[b] < 0.5 else min(1.0, m.rc / r.expert_rc[b])
        per[b] = (m.rc / 100.0, m.penalty, m.penalty * ep, float(m.success))
    s = metrics.summarize(found)
    summary = {"score": 100.0 * float(per[:, 2].mean()), "ds": float(s["ds"]), "rc": float(s["rc"]),
               "penalty": float(s["penalty"]), "infractions": s["infractions"], "routes": len(r),
               "route_seconds": r.seconds}  # fmt: skip
    return summary, per

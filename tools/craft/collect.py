"""Closed-loop episodes under a vocabulary policy, with a record of every decision.

Each decision (environment b at frame f) keeps what the counterfactual proxy and the
grounded residual need: the observation, the behaviour policy's probabilities and its
action, the 16 candidate plans from that state, the K agents nearest the ego then, and the
realised 4 s window after it (ego and those agents, frames f..f+20, held at their last
recorded state past the episode's end).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from methodkit.core.sim.highway import events as E
from methodkit.core.sim.highway import kernels as K
from methodkit.core.sim.highway import suite as sim_suite
from methodkit.core.sim.highway import vocab
from methodkit.core.sim.highway.road import segments_of
from methodkit.core.sim.highway.simulate import FRAME_S, FRAMES_PER_DECISION, rollout
from methodkit.core.sim.highway.state import pack

WINDOW = int(round(vocab.PLAN_SECONDS / FRAME_S))  # 20 frames = the 4 s horizon
MAX_AGENTS = 10  # agents kept per decision (nearest in |dx| within AGENT_RANGE)
AGENT_RANGE = 150.0
COLLISIONS = (E.COLLISION_VEHICLE, E.COLLISION_OBSTACLE)
ROAD_FAULTS = (E.OFF_ROAD, E.LANE_END_OVERRUN, E.MISSED_EXIT)


@dataclass
class Decisions:
    """Arrays over the N decisions of a batch of episodes (see the module doc)."""

    obs: np.ndarray  # [N, 53] float32
    probs: np.ndarray  # [N, 16] behaviour policy
    action: np.ndarray  # [N] int64
    env: np.ndarray  # [N]
    frame: np.ndarray  # [N]
    plans: np.ndarray  # [N, 16, 20, 3] candidate ego plans (x, y, heading)
    lane_move: np.ndarray  # [N, 16] each candidate's target lane minus the current lane
    route_delta: np.ndarray  # [N] route lane minus current lane (0: free choice)
    ego: np.ndarray  # [N, 21, 5] realised (x, y, heading, speed, lane)
    ego_size: np.ndarray  # [N, 2]
    agents: np.ndarray  # [N, K, 21, 5] realised boxes
    agent_speed: np.ndarray  # [N, K, 21] realised speed along x
    present: np.ndarray  # [N, K, 21]
    static: np.ndarray  # [N, K]
    collided: np.ndarray  # [N, 21] the ego collided at that frame
    road: np.ndarray  # [N, S, 5]
    road_mask: np.ndarray  # [N, S]
    reward: np.ndarray  # [N] per-decision closed-loop reward (progress - collision - road fault)
    last: np.ndarray  # [N] bool: the episode's last decision
    family: list = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.action.shape[0])


@dataclass
class Episodes:
    decisions: Decisions
    rows: list  # per-route metrics rows
    summary: dict


def run(
    model, scenes, ids, families, *, sample: bool, generator=None, keep: bool = True, comfort: bool = True
) -> Episodes:
    """Drive `model` closed loop over `scenes` (one batch); sample=False takes the argmax."""
    state = pack(scenes)
    rec: dict[str, list] = {k: [] for k in ("obs", "probs", "action", "env", "frame", "plans", "move", "route", "near")}

    def policy_fn(sim, running):
        obs, probs, action = choose(model, sim, running, sample, generator)
        if keep:
            lane, _ = vocab.targets(state, running)
            cur = state.lanes[running, K.CUR, 0].astype(np.int64)
            rec["obs"].append(obs)
            rec["probs"].append(probs.numpy())
            rec["action"].append(action)
            rec["env"].append(running.copy())
            rec["frame"].append(state.env_i[running, K.STEPS].copy())
            rec["move"].append(lane - cur[:, None])
            rec["route"].append(np.rint(obs[:, 4].astype(np.float64) * 2.0).astype(np.int64))
            rec["plans"].append(np.stack([vocab.plans(state, b, FRAME_S) for b in running]))
            rec["near"].append(_nearest_agents(state, running))
        return action

    out = rollout(state, policy_fn, record=True)
    records = [out.record(b) for b in range(state.batch)]
    rows, metrics_list = [], []
    for b, record in enumerate(records):
        record["speeds"] = np.gradient(record["boxes"][..., :2], FRAME_S, axis=0)
        record["events"] = np.array(record["events"], dtype=np.int64).reshape(-1, 3)
        m = sim_suite.exit_route_metrics(record, comfort=comfort)
        metrics_list.append(m)
        rows.append(route_row(ids[b], families[b], m))
    from methodkit.core.sim.highway import metrics

    summary = metrics.summarize(metrics_list)
    decisions = _decisions(rec, out, state, records, families) if keep else None
    return Episodes(decisions, rows, summary)


def choose(model, sim, running, sample: bool = False, generator=None):
    """(obs [E, 53], probs [E, 16], action [E]) of `model` on the running environments of `sim`:
    sampled from pi, or its argmax (the greedy policy of `eval`, on either backend)."""
    import torch

    from methodkit.tools.craft.policy import flat_obs

    ego, near = sim.observe()
    obs = flat_obs(ego[running], near[running])
    with torch.no_grad():
        probs = torch.softmax(model(torch.from_numpy(obs)).double(), dim=-1)
    if sample:
        action = torch.multinomial(probs, 1, generator=generator)[:, 0].numpy()
    else:
        action = probs.argmax(dim=-1).numpy()
    return obs, probs, action


def route_row(route_id: str, family: str, m) -> dict:
    """One route's metrics row (routes CSV) from its RouteMetrics."""
    return {"route": route_id, "family": family, "rc": m.rc, "penalty": m.penalty, "ds": m.ds,
            "success": m.success, "efficiency": m.efficiency, "comfort": m.comfort, "ended_by": m.ended_by,
            **{f"n_{k}": v for k, v in m.infractions.items()}}  # fmt: skip


def _nearest_agents(state, running) -> np.ndarray:
    """Slot indices [E, MAX_AGENTS] of the agents nearest each ego in |dx| (-1: none)."""
    x = state.veh[running, K.X]
    dx = np.abs(x - x[:, :1])
    dx[:, 0] = np.inf
    dx[~state.present[running]] = np.inf
    dx[dx > AGENT_RANGE] = np.inf
    order = np.argsort(dx, axis=1, kind="stable")[:, :MAX_AGENTS]
    picked = np.take_along_axis(dx, order, axis=1)
    order[~np.isfinite(picked)] = -1
    if order.shape[1] < MAX_AGENTS:
        order = np.pad(order, ((0, 0), (0, MAX_AGENTS - order.shape[1])), constant_values=-1)
    return order


def _decisions(rec, out, state, records, families) -> Decisions:
    cat = {k: np.concatenate(v) for k, v in rec.items()}
    n = cat["action"].shape[0]
    env, frame = cat["env"], cat["frame"]
    t_end = out.frames  # recorded frames 0..t_end-1
    steps = np.arange(WINDOW + 1)
    # frames of each window, held at the last recorded frame of the episode
    last_frame = np.array([len(records[b]["boxes"]) - 1 for b in range(state.batch)])
    idx = np.minimum(frame[:, None] + steps[None, :], last_frame[env][:, None])
    boxes = out.boxes[:t_end]  # [T, B, S, 5]
    ego_box = boxes[idx, env[:, None], 0]  # [N, 21, 5]
    ego = np.empty((n, WINDOW + 1, 5))
    ego[..., :3] = ego_box[..., :3]
    ego[..., 3] = out.speed[:t_end][idx, env[:, None]]
    ego[..., 4] = out.lane[:t_end][idx, env[:, None]]
    near = cat["near"]
    slot = np.maximum(near, 0)
    agents = boxes[idx[:, None, :], env[:, None, None], slot[:, :, None]]  # [N, K, 21, 5]
    present = out.present[:t_end][idx[:, None, :], env[:, None, None], slot[:, :, None]] & (near[:, :, None] >= 0)
    # speed along x by forward differences; past the episode's end the scene is frozen (speed 0)
    speed = np.zeros_like(agents[..., 0])
    speed[..., :-1] = np.diff(agents[..., 0], axis=-1) / FRAME_S
    speed[..., -1] = speed[..., -2]
    static = state.kind[env[:, None], slot] == K.OBSTACLE
    collided = np.zeros((n, WINDOW + 1), dtype=bool)
    fault = np.zeros(n, dtype=bool)
    collision_in_step = np.zeros(n, dtype=bool)
    by_env: dict[int, list[int]] = {}
    for i, b in enumerate(env):
        by_env.setdefault(int(b), []).append(i)
    last = np.zeros(n, dtype=bool)
    for b, rows in by_env.items():
        rows = np.array(rows)
        last[rows[np.argmax(frame[rows])]] = True
        for t, kind, _ in records[b]["events"]:
            if kind in COLLISIONS:
                rel = t - frame[rows]
                hit = (rel > 0) & (rel <= WINDOW)
                collided[rows[hit], rel[hit]] = True
                collision_in_step[rows[(rel > 0) & (rel <= FRAMES_PER_DECISION)]] = True
            if kind in ROAD_FAULTS:
                rel = t - frame[rows]
                fault[rows[(rel > 0) & (rel <= FRAMES_PER_DECISION)]] = True
    limit = state.road_f[env, K.SPEED_LIMIT]
    nxt = np.minimum(frame + FRAMES_PER_DECISION, last_frame[env])
    progress = (boxes[nxt, env, 0, 0] - boxes[frame, env, 0, 0]) / (limit * FRAMES_PER_DECISION * FRAME_S)
    reward = progress - collision_in_step.astype(float) - fault.astype(float)
    roads = [segments_of(state.lanes_t[b], state.road_i[b]) for b in range(state.batch)]
    s_max = max(r.shape[0] for r in roads)
    road = np.zeros((state.batch, s_max, 5))
    road_mask = np.zeros((state.batch, s_max), dtype=bool)
    for b, r in enumerate(roads):
        road[b, : r.shape[0]] = r
        road_mask[b, : r.shape[0]] = True
    return Decisions(
        obs=cat["obs"], probs=cat["probs"], action=cat["action"].astype(np.int64), env=env, frame=frame,
        plans=cat["plans"], lane_move=cat["move"], route_delta=cat["route"], ego=ego,
        ego_size=state.veh[env][:, [K.LEN, K.WID], 0], agents=agents, agent_speed=speed, present=present,
        static=static, collided=collided, road=road[env], road_mask=road_mask[env], reward=reward, last=last,
        family=[families[b] for b in env],
    )  # fmt: skip

"""The dense counterfactual proxy and the grounded realised score, both with the PDM scorer.

Proxy S(m): every candidate plan of a decision scored against imperfect futures of the
others: `cv` = constant-velocity lane-keeping forecasts from the decision state (default),
`log` = non-reactive replay of the realised futures (NAVSIM-style). Realised R_t: the
executed 4 s window itself (realised ego, realised reactive agents, the policy's own
replanning included), scored by the same function. Both use

    S = NC * DAC * (5 TTC + 5 EP + 2 C) / 12 * route term,

with EP = gated progress / the group's largest gated progress (1 when that is < 5 m) and
the route term 1, or 1/2 for a plan that does not head for the lane the route needs (merge,
lane drop, exit). Sub-scores come from methodkit.core.sim.highway.score (NAVSIM v1 rules): its
Numba kernel by default (`xp=None`), or, given an array module `xp` (cupy on CUDA, numpy to check it),
its array-at-a-time scorer score_plans_ref(..., xp) on that module.
"""

from __future__ import annotations

import numpy as np

from methodkit.core.sim.highway import score as pdm
from methodkit.core.sim.highway.simulate import FRAME_S

FUTURES = ("cv", "log")
ROUTE_MISS = 0.5
EP_FLOOR = pdm.PROGRESS_DISTANCE_THRESHOLD


def _agent_inputs(d, futures: str):
    """Agent boxes [N, K, 21, 5], speeds [N, K, 21, 2], presence [N, K, 21] for the proxy."""
    n, k, t, _ = d.agents.shape
    if futures == "log":
        speeds = np.zeros((n, k, t, 2))
        speeds[..., 0] = d.agent_speed
        return d.agents, speeds, d.present
    now = d.agents[:, :, :1]  # the decision state
    v = d.agent_speed[:, :, :1]
    times = np.arange(t) * FRAME_S
    boxes = np.repeat(now, t, axis=2).copy()
    boxes[..., 0] = now[..., 0] + v * times[None, None, :]
    boxes[..., 2] = 0.0  # lane-keeping: heading along the lane
    speeds = np.zeros((n, k, t, 2))
    speeds[..., 0] = v
    present = np.repeat(d.present[:, :, :1], t, axis=2)
    return boxes, speeds, present


def _subscores(ego_states, d, boxes, speeds, present, xp=None):
    n = ego_states.shape[0]
    x = pdm.prepare_inputs(
        ego_states, d.ego_size, boxes, speeds, present, d.static, d.road, d.road_mask, np.zeros(n), FRAME_S
    )
    return pdm.score_prepared(x) if xp is None else pdm.score_plans_ref(x, xp)


def route_term(move: np.ndarray, route_delta: np.ndarray) -> np.ndarray:
    """1 where no lane is required or the lateral move heads for it, else ROUTE_MISS."""
    rd = np.asarray(route_delta)[..., None] if np.ndim(move) > np.ndim(route_delta) else np.asarray(route_delta)
    ok = (rd == 0) | (np.sign(move) == np.sign(rd))
    return np.where(ok, 1.0, ROUTE_MISS)


def group_scores(d, futures: str = "cv", xp=None):
    """(S [N, 16], sub-scores, group max gated progress [N]) of every candidate of every decision
    (xp: None = the Numba scorer, else the array module the scorer runs on)."""
    if futures not in FUTURES:
        raise ValueError(f"unknown proxy futures {futures!r}")
    n = len(d)
    points = np.concatenate([d.ego[:, None, :1, :2].repeat(16, axis=1), d.plans[..., :2]], axis=2)  # [N, 16, 21, 2]
    states = pdm.plan_states(points, FRAME_S, heading0=d.ego[:, :1, 2].repeat(16, axis=1))
    boxes, speeds, present = _agent_inputs(d, futures)
    sub = _subscores(states, d, boxes, speeds, present, xp)
    group_max = (sub.progress * sub.nc * sub.dac).max(axis=1)
    s = _combine_group(sub, route_term(d.lane_move, d.route_delta), group_max)
    assert s.shape == (n, 16)
    return s, sub, group_max


def _combine_group(sub, term, group_max):
    gated = sub.progress * sub.nc * sub.dac
    g = group_max[:, None]
    ep = np.where(g < EP_FLOOR, 1.0, gated / np.maximum(np.maximum(g, gated), 1e-12))
    w = pdm.WEIGHT_TTC + pdm.WEIGHT_EP + pdm.WEIGHT_C
    return sub.nc * sub.dac * (pdm.WEIGHT_TTC * sub.ttc + pdm.WEIGHT_EP * ep + pdm.WEIGHT_C * sub.comfort) / w * term


def realised_scores(d, group_max: np.ndarray, xp=None):
    """(R [N], sub-scores) of the executed windows, EP normalised by the same group maximum."""
    states = pdm.plan_states(d.ego[:, None, :, :2], FRAME_S, heading0=d.ego[:, None, 0, 2])
    boxes, speeds, present = _agent_inputs(d, "log")
    sub = _subscores(states, d, boxes, speeds, present, xp)
    moved = d.ego[:, -1, 4] - d.ego[:, 0, 4]
    term = route_term(moved, d.route_delta)[:, None]
    r = _combine_group(sub, term, group_max)
    return r[:, 0], sub


def group_advantage(s: np.ndarray, eps: float = 1e-6):
    """(A [N, 16] = (S - mean) / (std + eps), std [N], flat [N] bool where std = 0 and A := 0)."""
    mean = s.mean(axis=1, keepdims=True)
    std = s.std(axis=1)
    flat = std < 1e-9
    adv = np.where(flat[:, None], 0.0, (s - mean) / (std[:, None] + eps))
    return adv, std, flat

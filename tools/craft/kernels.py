"""Interaction-critical events of realised 4 s windows (Numba, parallel over decisions).

A decision's window is critical when any of these holds (bit flags, CRITICAL_NAMES):
the ego collided; the real time to collision with a same-lane agent ahead fell below
1.5 s; a vehicle within 30 m behind the ego in its lane braked harder than -3 m/s^2; the
ego changed lanes with a rear gap under 10 m; the ego braked harder than -4 m/s^2; or the
proxy itself predicted a conflict for the executed candidate (NC < 1 or TTC = 0).
`critical_events_ref` is the NumPy reference the kernel is tested against.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from methodkit.core.sim.highway.simulate import FRAME_S

COLLISION, LOW_TTC, REAR_BRAKE, TIGHT_CHANGE, HARD_BRAKE, PROXY_CONFLICT = 1, 2, 4, 8, 16, 32
CRITICAL_NAMES = {
    COLLISION: "collision",
    LOW_TTC: "ttc",
    REAR_BRAKE: "rear_brake",
    TIGHT_CHANGE: "tight_lane_change",
    HARD_BRAKE: "hard_brake",
    PROXY_CONFLICT: "proxy_conflict",
}
TTC_S = 1.5
REAR_RANGE = 30.0
REAR_BRAKE_ACC = -3.0
REAR_GAP = 10.0
HARD_BRAKE_ACC = -4.0
HALF_LANE = 2.0  # same lane: |dy| below half a 4 m lane


@njit(cache=True)
def _window_flags(ego, size, agents, speed, present, collided, dt):
    t_len = ego.shape[0]
    k_len = agents.shape[0]
    flags = 0
    for t in range(t_len):
        if collided[t]:
            flags |= COLLISION
        if t + 1 < t_len and (ego[t + 1, 3] - ego[t, 3]) / dt < HARD_BRAKE_ACC:
            flags |= HARD_BRAKE
        changed = t > 0 and ego[t, 4] != ego[t - 1, 4]
        for k in range(k_len):
            if not present[k, t]:
                continue
            dx = agents[k, t, 0] - ego[t, 0]
            dy = agents[k, t, 1] - ego[t, 1]
            if abs(dy) >= HALF_LANE:
                continue
            half = 0.5 * (size[0] + agents[k, t, 3])
            if dx > 0.0:
                closing = ego[t, 3] - speed[k, t]
                if closing > 0.0 and (dx - half) / closing < TTC_S:
                    flags |= LOW_TTC
            else:
                if dx >= -REAR_RANGE and t + 2 < t_len and present[k, t + 1] and present[k, t + 2]:
                    if (speed[k, t + 1] - speed[k, t]) / dt < REAR_BRAKE_ACC:
                        flags |= REAR_BRAKE
                if changed and -dx - half < REAR_GAP:
                    flags |= TIGHT_CHANGE
    return flags


@njit(cache=True, parallel=True)
def critical_events(ego, size, agents, speed, present, collided, proxy_conflict, dt):
    """Flags [N] int64 of windows ego [N, T, 5] (x, y, heading, speed, lane), size [N, 2], agents
    [N, K, T, 5] boxes, speed [N, K, T] along x, present [N, K, T], collided [N, T], proxy_conflict [N]."""
    n = ego.shape[0]
    out = np.zeros(n, dtype=np.int64)
    for i in prange(n):
        f = _window_flags(ego[i], size[i], agents[i], speed[i], present[i], collided[i], dt)
        if proxy_conflict[i]:
            f |= PROXY_CONFLICT
        out[i] = f
    return out


def critical_events_ref(ego, size, agents, speed, present, collided, proxy_conflict, dt=FRAME_S):
    """The same flags, vectorised NumPy."""
    n, t_len = ego.shape[:2]
    flags = np.zeros(n, dtype=np.int64)
    flags |= np.where(collided.any(axis=1), COLLISION, 0)
    acc = np.diff(ego[:, :, 3], axis=1) / dt
    flags |= np.where((acc < HARD_BRAKE_ACC).any(axis=1), HARD_BRAKE, 0)
    dx = agents[..., 0] - ego[:, None, :, 0]
    dy = agents[..., 1] - ego[:, None, :, 1]
    half = 0.5 * (size[:, None, None, 0] + agents[..., 3])
    lane = present & (np.abs(dy) < HALF_LANE)
    closing = ego[:, None, :, 3] - speed
    with np.errstate(divide="ignore", invalid="ignore"):
        ttc_hit = lane & (dx > 0) & (closing > 0) & ((dx - half) / closing < TTC_S)
    flags |= np.where(ttc_hit.any(axis=(1, 2)), LOW_TTC, 0)
    behind = lane & (dx <= 0)
    a_agent = np.zeros_like(speed)
    a_agent[..., :-1] = np.diff(speed, axis=-1) / dt
    ok = np.zeros_like(present)
    ok[..., : t_len - 2] = present[..., 1 : t_len - 1] & present[..., 2:]
    rear = behind & (dx >= -REAR_RANGE) & ok & (a_agent < REAR_BRAKE_ACC)
    flags |= np.where(rear.any(axis=(1, 2)), REAR_BRAKE, 0)
    changed = np.zeros((n, t_len), dtype=bool)
    changed[:, 1:] = ego[:, 1:, 4] != ego[:, :-1, 4]
    tight = behind & changed[:, None, :] & (-dx - half < REAR_GAP)
    flags |= np.where(tight.any(axis=(1, 2)), TIGHT_CHANGE, 0)
    flags |= np.where(proxy_conflict, PROXY_CONFLICT, 0)
    return flags


def flag_counts(flags: np.ndarray) -> dict:
    return {name: int(((flags & bit) != 0).sum()) for bit, name in CRITICAL_NAMES.items()}

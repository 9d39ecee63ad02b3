"""Scene featurisation (Numba, prange over scenes into preallocated padded arrays) and its NumPy reference.

Per scene, in the ego's frame: the ego node and the A nearest agents within 80 m (nearest first), the lane
nodes (one per distinct lane index, sorted), agent-agent edges (|dx| < 40 m and |lane difference| <= 1)
with (dx, dy, dv, time to collision), agent-lane membership and a 5-lane x 16-bin occupancy grid.

    nodes   [N, 1 + A, 8]  ego: (1, 0, 0, v/40, vy/5, len/12, lane/(lanes-1), dist to its lane's end/200)
                           agent: (1, dx/80, dy/10, (vx - v_ego)/20, vy/5, len/12, lane - ego lane)/2, obstacle)
    lanes   [N, LN, 6]     (1, (lane - ego lane)/2, end ahead/200, start ahead/200, width/5, is the ego's lane)
    edges   [N, 1 + A, 1 + A, 5]  (mask, dx/40, dy/10, dv/20, ttc/10)
    member  [N, 1 + A, LN] node on lane node
    grid    [N, 5, 16]     lanes ego-2..ego+2 x 10 m bins over dx in [-40, 120)
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

RADIUS = 80.0
EDGE_DX = 40.0
TTC_CAP = 10.0
NODE_F = 8
LANE_F = 6
EDGE_F = 5
GRID_LANES = 5
GRID_BINS = 16
GRID_X0 = -40.0
GRID_DX = 10.0
LANE_NODES = 6
OBSTACLE_ROLE = 2.0  # core.sim.highway.events.ROLE_OBSTACLE


@njit(cache=True)
def _lane_of(x, y, lanes, lane_mask):
    """Lane index of a point: the segment nearest in y among those covering x (any segment if none does)."""
    best, best_d, covered = -1.0, 1e18, False
    for s in range(lanes.shape[0]):
        if not lane_mask[s]:
            continue
        inside = lanes[s, 0] <= x <= lanes[s, 1]
        d = abs(y - lanes[s, 2])
        if (inside and not covered) or ((inside == covered) and d < best_d):
            best, best_d, covered = lanes[s, 4], d, covered or inside
    return best


@njit(cache=True)
def _ttc(dx, dv_closing, len_i, len_j):
    gap = abs(dx) - 0.5 * (len_i + len_j)
    if gap <= 0.0:
        return 0.0
    if dv_closing <= 1e-9:
        return TTC_CAP
    return min(gap / dv_closing, TTC_CAP)


@njit(cache=True)
def featurise_one(ego, agents, agent_mask, lanes, lane_mask, noise, nodes, lane_nodes, edges, member, grid):
    n_slots = nodes.shape[0]
    xe, ye, ve, vye = ego[0], ego[1], ego[3], ego[4]
    ego_lane = _lane_of(xe, ye, lanes, lane_mask)
    # distinct lane indices, sorted, with their extent and width
    n_l = 0
    idx = np.empty(lanes.shape[0])
    for s in range(lanes.shape[0]):
        if lane_mask[s]:
            seen = False
            for q in range(n_l):
                if idx[q] == lanes[s, 4]:
                    seen = True
            if not seen:
                idx[n_l] = lanes[s, 4]
                n_l += 1
    idx = np.sort(idx[:n_l])
    n_main = max(n_l - 1, 1)
    ego_end = 0.0
    for q in range(min(n_l, lane_nodes.shape[0])):
        x0, x1, width = 1e18, -1e18, 0.0
        for s in range(lanes.shape[0]):
            if lane_mask[s] and lanes[s, 4] == idx[q]:
                x0 = min(x0, lanes[s, 0])
                x1 = max(x1, lanes[s, 1])
                width = lanes[s, 3]
        end = min(max(x1 - xe, 0.0), 200.0)
        lane_nodes[q, 0] = 1.0
        lane_nodes[q, 1] = (idx[q] - ego_lane) / 2.0
        lane_nodes[q, 2] = end / 200.0
        lane_nodes[q, 3] = min(max(x0 - xe, 0.0), 200.0) / 200.0
        lane_nodes[q, 4] = width / 5.0
        lane_nodes[q, 5] = 1.0 if idx[q] == ego_lane else 0.0
        if idx[q] == ego_lane:
            ego_end = end
    # the nearest agents within the radius, nearest first (stable order on ties)
    k = agents.shape[0]
    dist = np.full(k, 1e18)
    ax = np.empty(k)
    ay = np.empty(k)
    avx = np.empty(k)
    avy = np.empty(k)
    for j in range(k):
        ax[j] = agents[j, 0] + noise[j, 0]
        ay[j] = agents[j, 1] + noise[j, 1]
        avx[j] = agents[j, 3] + noise[j, 2]
        avy[j] = agents[j, 4] + noise[j, 3]
        if agent_mask[j]:
            d = np.hypot(ax[j] - xe, ay[j] - ye)
            if d < RADIUS:
                dist[j] = d
    order = np.argsort(dist, kind="mergesort")
    px = np.zeros(n_slots)
    pv = np.zeros(n_slots)
    plen = np.zeros(n_slots)
    plane = np.zeros(n_slots)
    present = np.zeros(n_slots, dtype=np.bool_)
    nodes[0, 0] = 1.0
    nodes[0, 3] = ve / 40.0
    nodes[0, 4] = vye / 5.0
    nodes[0, 5] = ego[5] / 12.0
    nodes[0, 6] = max(ego_lane - idx[0], 0.0) / n_main if n_l > 0 else 0.0
    nodes[0, 7] = ego_end / 200.0
    px[0], pv[0], plen[0], plane[0], present[0] = xe, ve, ego[5], ego_lane, True
    slot = 1
    for r in range(k):
        j = order[r]
        if slot >= n_slots or dist[j] >= 1e17:
            break
        lane = _lane_of(ax[j], ay[j], lanes, lane_mask)
        nodes[slot, 0] = 1.0
        nodes[slot, 1] = (ax[j] - xe) / RADIUS
        nodes[slot, 2] = (ay[j] - ye) / 10.0
        nodes[slot, 3] = (avx[j] - ve) / 20.0
        nodes[slot, 4] = avy[j] / 5.0
        nodes[slot, 5] = agents[j, 5] / 12.0
        nodes[slot, 6] = (lane - ego_lane) / 2.0
        nodes[slot, 7] = 1.0 if agents[j, 7] == OBSTACLE_ROLE else 0.0
        px[slot], pv[slot], plen[slot], plane[slot], present[slot] = ax[j], avx[j], agents[j, 5], lane, True
        slot += 1
    for i in range(n_slots):
        if not present[i]:
            continue
        for q in range(min(n_l, lane_nodes.shape[0])):
            if plane[i] == idx[q]:
                member[i, q] = 1.0
        rel = int(plane[i] - ego_lane) + GRID_LANES // 2
        if 0 <= rel < GRID_LANES and i > 0:
            lo = px[i] - xe - 0.5 * plen[i]
            hi = px[i] - xe + 0.5 * plen[i]
            for b in range(GRID_BINS):
                b0 = GRID_X0 + b * GRID_DX
                if hi > b0 and lo < b0 + GRID_DX:
                    grid[rel, b] = 1.0
        for j in range(n_slots):
            if j == i or not present[j]:
                continue
            dx = px[j] - px[i]
            if abs(dx) < EDGE_DX and abs(plane[j] - plane[i]) <= 1.0:
                closing = pv[i] - pv[j] if dx > 0 else pv[j] - pv[i]
                ttc = _ttc(dx, closing, plen[i], plen[j]) if plane[j] == plane[i] else TTC_CAP
                edges[i, j, 0] = 1.0
                edges[i, j, 1] = dx / EDGE_DX
                edges[i, j, 2] = nodes[j, 2] - nodes[i, 2]
                edges[i, j, 3] = (pv[j] - pv[i]) / 20.0
                edges[i, j, 4] = ttc / TTC_CAP


@njit(cache=True, parallel=True)
def featurise_batch(ego, agents, agent_mask, lanes, lane_mask, noise, nodes, lane_nodes, edges, member, grid):
    for n in prange(ego.shape[0]):
        featurise_one(
            ego[n], agents[n], agent_mask[n], lanes[n], lane_mask[n], noise[n], nodes[n], lane_nodes[n], edges[n],
            member[n], grid[n],
        )  # fmt: skip


def empty_outputs(n: int, n_agents: int) -> dict:
    s = 1 + n_agents
    return {
        "nodes": np.zeros((n, s, NODE_F)),
        "lane_nodes": np.zeros((n, LANE_NODES, LANE_F)),
        "edges": np.zeros((n, s, s, EDGE_F)),
        "member": np.zeros((n, s, LANE_NODES)),
        "grid": np.zeros((n, GRID_LANES, GRID_BINS)),
    }


# --------------------------------------------------------------------------- NumPy reference


def _lane_of_ref(x, y, lanes, mask):
    segs = lanes[mask]
    inside = (segs[:, 0] <= x) & (x <= segs[:, 1])
    pool = segs[inside] if inside.any() else segs
    return float(pool[np.argmin(np.abs(y - pool[:, 2])), 4])


def featurise_one_ref(ego, agents, agent_mask, lanes, lane_mask, noise, n_agents: int) -> dict:
    """One scene in plain NumPy (the benchmark's and the tests' reference)."""
    out = {k: v[0] for k, v in empty_outputs(1, n_agents).items()}
    xe, ye, ve = ego[0], ego[1], ego[3]
    ego_lane = _lane_of_ref(xe, ye, lanes, lane_mask)
    idx = np.unique(lanes[lane_mask, 4])
    ego_end = 0.0
    for q, li in enumerate(idx[:LANE_NODES]):
        segs = lanes[lane_mask & (lanes[:, 4] == li)]
        end = min(max(segs[:, 1].max() - xe, 0.0), 200.0)
        out["lane_nodes"][q] = [1.0, (li - ego_lane) / 2, end / 200, min(max(segs[:, 0].min() - xe, 0), 200) / 200,
                                segs[-1, 3] / 5, float(li == ego_lane)]  # fmt: skip
        if li == ego_lane:
            ego_end = end
    pos = agents[:, :2] + noise[:, :2]
    vel = agents[:, 3:5] + noise[:, 2:4]
    dist = np.where(agent_mask, np.hypot(pos[:, 0] - xe, pos[:, 1] - ye), np.inf)
    dist[dist >= RADIUS] = np.inf
    chosen = [j for j in np.argsort(dist, kind="stable") if np.isfinite(dist[j])][:n_agents]
    n_main = max(len(idx) - 1, 1)
    nodes = out["nodes"]
    nodes[0] = [1, 0, 0, ve / 40, ego[4] / 5, ego[5] / 12, max(ego_lane - idx[0], 0) / n_main, ego_end / 200]
    px, pv, plen, plane = [xe], [ve], [ego[5]], [ego_lane]
    for slot, j in enumerate(chosen, start=1):
        lane = _lane_of_ref(pos[j, 0], pos[j, 1], lanes, lane_mask)
        nodes[slot] = [1, (pos[j, 0] - xe) / RADIUS, (pos[j, 1] - ye) / 10, (vel[j, 0] - ve) / 20, vel[j, 1] / 5,
                       agents[j, 5] / 12, (lane - ego_lane) / 2, float(agents[j, 7] == OBSTACLE_ROLE)]  # fmt: skip
        px.append(pos[j, 0])
        pv.append(vel[j, 0])
        plen.append(agents[j, 5])
        plane.append(lane)
    m = len(px)
    for i in range(m):
        out["member"][i, : min(len(idx), LANE_NODES)] = idx[:LANE_NODES] == plane[i]
        rel = int(plane[i] - ego_lane) + GRID_LANES // 2
        if i > 0 and 0 <= rel < GRID_LANES:
            b0 = GRID_X0 + GRID_DX * np.arange(GRID_BINS)
            lo, hi = px[i] - xe - plen[i] / 2, px[i] - xe + plen[i] / 2
            out["grid"][rel, (hi > b0) & (lo < b0 + GRID_DX)] = 1.0
        for j in range(m):
            dx = px[j] - px[i]
            if j == i or abs(dx) >= EDGE_DX or abs(plane[j] - plane[i]) > 1:
                continue
            if plane[j] == plane[i]:
                gap = abs(dx) - (plen[i] + plen[j]) / 2
                closing = pv[i] - pv[j] if dx > 0 else pv[j] - pv[i]
                ttc = 0.0 if gap <= 0 else (TTC_CAP if closing <= 1e-9 else min(gap / closing, TTC_CAP))
            else:
                ttc = TTC_CAP
            out["edges"][i, j] = [1, dx / EDGE_DX, nodes[j, 2] - nodes[i, 2], (pv[j] - pv[i]) / 20, ttc / TTC_CAP]
    return out

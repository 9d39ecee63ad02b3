"""Physical sanity of long runs: all-IDM traffic never overlaps; the expert never drives through an obstacle."""

from __future__ import annotations

import numpy as np

from methodkit.core.sim.highway import events as ev
from methodkit.core.sim.highway import geometry as G
from methodkit.core.sim.highway import kernels as K
from methodkit.core.sim.highway import scenarios, simulate
from methodkit.core.sim.highway.state import pack


def test_all_idm_traffic_never_overlaps_in_10k_steps():
    spec = {
        "family": "cruise-dense",
        "count": 8,
        "seed": 11,
        "params": {"length": 5000, "duration": 600, "density": 1.5},
    }
    scenes, _, _ = scenarios.generate(spec)
    state = pack(scenes)
    state.env_i[:, K.EGO_MODE] = K.EGO_IDM
    sim = simulate.Sim(state)
    steps = 0
    lane_changes = 0
    last_lane = state.lanes[:, K.CUR].copy()
    while steps < 10_000:
        sim.frames(1)
        steps += state.batch
        for b in range(state.batch):
            overlap = G.pairwise_overlap(state.boxes()[b], state.present[b])
            assert not overlap.any(), f"vehicles overlap in env {b} after {steps} steps"
        lane_changes += int((state.lanes[:, K.CUR] != last_lane).sum())
        last_lane = state.lanes[:, K.CUR].copy()
    assert not state.crashed.any()
    assert lane_changes > 20  # MOBIL was at work: the traffic did change lanes


def test_expert_never_drives_through_a_stopped_obstacle():
    entries = [
        {"family": "stopped-vehicle", "count": 6, "params": {"obstacle": kind, "density": 1.5, "lanes": lanes}}
        for kind in ("car", "truck", "debris")
        for lanes in (1, 2, 3)
    ]
    scenes, ids, _ = scenarios.generate({"seed": 4, "scenes": entries})
    state = pack(scenes)
    out = simulate.rollout(state, "expert", record=True)
    for b in range(state.batch):
        obstacle = int(np.flatnonzero(state.kind[b] == K.OBSTACLE)[0])
        boxes = out.boxes[:, b]
        hit = G.boxes_overlap(boxes[:, 0], boxes[:, obstacle])
        assert not hit.any(), f"{ids[b]}: the expert's box overlaps the obstacle"
        assert not any(e[1] == ev.COLLISION_OBSTACLE for e in out.events[b]), ids[b]
    # on a one-lane road the expert cannot pass: it stops behind the obstacle instead
    one_lane = [b for b, scene in enumerate(scenes) if scene.road.n_main == 1]
    assert one_lane and all(state.env_i[b, K.REASON] == ev.TIMEOUT for b in one_lane)

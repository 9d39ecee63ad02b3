"""A suite of scenes run closed loop: per-route metrics rows (the `rollout` verb) on either backend."""

from __future__ import annotations

import dataclasses

import numpy as np

from methodkit.core.errors import UsageError
from methodkit.core.sim.highway import events as ev
from methodkit.core.sim.highway import expert, metrics, scenarios, simulate
from methodkit.core.sim.highway.state import pack

BACKENDS = ("native", "highway-env")
POLICY_NAMES = ("expert", "expert-vocab", "idm", "keep")
BATCH = 256  # scenes stepped together (the recorded frames of a batch stay in memory)


def policy_for(name: str):
    if name == "expert-vocab":
        return expert.expert_policy
    if name not in simulate.POLICIES:
        raise UsageError(f"unknown policy {name!r} (known: {', '.join(POLICY_NAMES)})")
    return name


def run_native(scenes, policy: str, substeps: int = 1) -> list[dict]:
    """Episode records of the scenes, BATCH at a time."""
    records = []
    fn = policy_for(policy)
    for start in range(0, len(scenes), BATCH):
        part = scenes[start : start + BATCH]
        state = pack(part, substeps=substeps)
        out = simulate.rollout(state, fn, substeps=substeps, record=True)
        for b in range(len(part)):
            rec = out.record(b)
            rec["speeds"] = _speeds(out.boxes[: out.frames, b])
            records.append(rec)
    return records


def _speeds(boxes: np.ndarray) -> np.ndarray:
    return (
        np.gradient(boxes[..., :2], simulate.FRAME_S, axis=0) if boxes.shape[0] > 1 else np.zeros_like(boxes[..., :2])
    )


def run_highway_env(scenes, policy: str):
    from methodkit.core.sim.highway import highway_env_backend as hwb

    if policy not in hwb.POLICIES:
        raise UsageError(f"--backend highway-env runs the policies {', '.join(hwb.POLICIES)}, not {policy!r}")
    records = []
    codes = {name: code for code, name in ev.EVENT_NAMES.items()}
    for scene in scenes:
        out = hwb.run(scene, policy)
        boxes = out["boxes"]
        t_end = boxes.shape[0]
        end = out["end"]
        events = []
        if end == "collision":
            events.append((t_end, ev.COLLISION_VEHICLE, -1))
        elif end in codes:
            events.append((t_end, codes[end], -1))
        boxes = np.concatenate([_initial_boxes(scene)[None], boxes])
        if scene.road.wants_exit:
            extra = {"exit_x": float(scene.road.segments[scene.road.segments[:, 4] == scene.road.exit_lane][0, 0])}
        else:
            extra = {}
        records.append(
            {
                **extra,
                "road": scene.road.segments.copy(),
                "boxes": boxes,
                "present": np.ones(boxes.shape[:2], dtype=bool),
                "events": np.array(events, dtype=np.int64).reshape(-1, 3),
                "route": np.array([scene.x[0], scene.road.route_end]),
                "dt": simulate.FRAME_S,
                "speeds": _speeds(boxes),
            }
        )
    return records


def _initial_boxes(scene) -> np.ndarray:
    return np.column_stack([scene.x, scene.y, scene.heading, scene.length, scene.width])


def exit_route_metrics(record: dict, comfort: bool = True) -> metrics.RouteMetrics:
    """metrics.route_metrics, with a missed exit counted as leaving the route where the exit ramp starts.

    route_metrics measures RC along +x, so an ego that drove past its exit would score the
    whole route; the route leaves the road at the ramp's start (record["exit_x"]), so past
    that point on the main road there is no more progress, and the route is not a success.
    """
    m = metrics.route_metrics(record, comfort=comfort)
    if m.ended_by != ev.EVENT_NAMES[ev.MISSED_EXIT] or "exit_x" not in record:
        return m
    x0, x1 = record["route"]
    rc = float(np.clip(100.0 * (min(record["boxes"][:, 0, 0].max(), record["exit_x"]) - x0) / (x1 - x0), 0.0, 100.0))
    return dataclasses.replace(m, rc=rc, ds=rc * m.penalty, success=False)


def run(spec, policy: str = "expert", backend: str = "native", substeps: int = 1, where: str = "spec"):
    """(rows, summary, records) of a scenario spec under a policy."""
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    scenes, ids, configs = scenarios.generate(spec, where)
    if backend == "native":
        records = run_native(scenes, policy, substeps)
    else:
        records = run_highway_env(scenes, policy)
    rows, results = [], []
    for scene_id, config, rec in zip(ids, configs, records, strict=True):
        rec = {**rec, "events": np.array(rec["events"], dtype=np.int64).reshape(-1, 3)}
        m = exit_route_metrics(rec)
        results.append(m)
        rows.append(
            {
                "scene": scene_id,
                "family": config["family"],
                "rc": m.rc,
                "penalty": m.penalty,
                "ds": m.ds,
                "success": m.success,
                "efficiency": m.efficiency,
                "comfort": m.comfort,
                "ended_by": m.ended_by,
                "seconds": m.ended_at_s,
                **{f"n_{name}": count for name, count in m.infractions.items()},
                "mean_speed": float(np.mean(np.linalg.norm(rec["speeds"][:, 0], axis=-1))),
            }
        )
    return rows, metrics.summarize(results), records

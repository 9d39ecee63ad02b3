"""`cow-simulate`: run the COW on every (or the chosen) item of a benchmark and write its outputs."""

from __future__ import annotations

import json
from dataclasses import dataclass

from methodkit.core import io
from methodkit.core.errors import DataError, UsageError
from methodkit.core.outputs import StagedFolder
from methodkit.core.progress import silent
from methodkit.tools.causal_spatial import bench_io, cow, grammar

COW_VERSION = "1.0"


@dataclass
class CowConfig:
    scene: str = "perceive"
    frames: int = 6
    fps: int = 8
    annotate: bool = False
    render: bool = True
    video: bool = True
    segmentation: bool = False  # also seg.npz: every frame's instance ids and depth (cow-reader --from-frames)


def simulate_item(bench, item: dict, cfg: CowConfig, renderer, size: int, g=None) -> tuple[dict, cow.Outcome]:
    g = g or grammar.ground(item["question"])
    if cfg.scene == "perceive":
        world = cow.perceived_world(bench_io.image(bench, item), bench_io.sensors(bench, item), g.task, size)
    else:
        world = cow.oracle_world(bench_io.scene_spec(bench, item), g.task, size)
    outcome = cow.simulate(world, g, frames=cfg.frames, renderer=renderer, segmentation=cfg.segmentation)
    record = {
        "id": item["id"],
        "scene": cfg.scene,
        "grounding": {"task": g.task, "kind": g.kind, "mover": g.mover, "distance": g.distance, "speed": g.speed,
                      "elevation": g.elevation, "targets": g.targets},  # fmt: skip
        "primitives": world.primitives,
        "cavity": world.cavity,
        "events": outcome.events,
    }
    return record, outcome


def run(bench: str, out_dir: str, cfg: CowConfig, *, ids: list[str] | None = None, progress=silent, on_item=None,
        grounder=None) -> dict:  # fmt: skip
    """Simulate items; returns a summary. `on_item(record)` hears each item's summary line; `grounder`
    (an Endpoint) grounds the questions instead of the grammar."""
    import numpy as np

    from methodkit.core.render import video

    items = bench_io.load_items(bench)
    meta = bench_io.load_meta(bench)
    if ids:
        known = {it["id"] for it in items}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise DataError(f"--ids: not in {bench}/items.jsonl: {', '.join(unknown[:5])}")
        items = [it for it in items if it["id"] in set(ids)]
    if cfg.segmentation and not cfg.render:
        raise UsageError("--segmentation renders every frame's instance ids and depth; not with --gl none")
    if cfg.render and not meta.get("images"):
        raise DataError(f"{bench}: generated without images (--gl none); pass --gl none here too")
    size = int(meta["config"]["size"])
    groundings = grammar.ground_with_model([it["question"] for it in items], grounder) if grounder else None
    renderer = None
    if cfg.render:
        from methodkit.core.render.renderer import Renderer

        renderer = Renderer(size, size)
    n_events = 0
    try:
        with StagedFolder(out_dir) as out:
            for k, item in enumerate(items):
                g = groundings[k] if groundings else None
                record, outcome = simulate_item(bench, item, cfg, renderer, size, g)
                record.update(bench_sha256=meta["bench_sha256"], cow_version=COW_VERSION, frames=[], fps=cfg.fps,
                              mujoco_version=meta["mujoco_version"], grounder="model" if g else "grammar")  # fmt: skip
                if renderer is not None:
                    frames = outcome.frames
                    if cfg.annotate:
                        sens = bench_io.sensors(bench, item)
                        frames = cow.annotate(frames, outcome, np.asarray(sens["K"]), np.asarray(sens["T"]))
                    for j, frame in enumerate(frames):
                        video.write_png(frame, out.path(item["id"], f"frame_{j}.png"), force=True)
                        record["frames"].append(f"{item['id']}/frame_{j}.png")
                    if outcome.seg is not None:
                        seg = dict(outcome.seg, names=json.dumps(outcome.seg["names"]))
                        with io.atomic_write(out.path(item["id"], "seg.npz"), force=True) as handle:
                            np.savez_compressed(handle, **seg)
                        record["segmentation"] = f"{item['id']}/seg.npz"
                    if cfg.video:
                        video.write_mp4(frames, out.path(item["id"], "video.mp4"), fps=cfg.fps, force=True)
                io.write_json(record, out.path(item["id"], "cow.json"), force=True, indent=1)
                n_events += 1
                if on_item is not None:
                    on_item({"id": item["id"], "scene": cfg.scene, "events": record["events"]})
                progress("cow-simulate", k + 1, len(items))
    finally:
        if renderer is not None:
            renderer.close()
    return {"items": n_events, "scene": cfg.scene, "frames": cfg.frames if renderer is not None else 0,
            "out_dir": str(out_dir)}  # fmt: skip

"""`methodkit-sim render`: one scene of a spec driven by a policy, drawn by draw.py (PNG, GIF or MP4)."""

from __future__ import annotations

import os

from methodkit.core.errors import UsageError
from methodkit.core.sim.highway import draw, scenarios, simulate, suite
from methodkit.core.sim.highway.state import pack


def pick(ids: list[str], scene: str, where: str) -> int:
    """The position of a scene given by id or by its position in the spec."""
    if scene in ids:
        return ids.index(scene)
    if scene.isdigit() and int(scene) < len(ids):
        return int(scene)
    shown = ", ".join(ids[:4]) + (", ..." if len(ids) > 4 else "")
    raise UsageError(f"--scene {scene!r} is not in {where} (ids: {shown}; or a position 0..{len(ids) - 1})")


def episode(spec, scene: str, policy: str, where: str = "spec") -> dict:
    """The episode record of one scene of a spec under a policy."""
    found, ids, _ = scenarios.generate(spec, where)
    k = pick(ids, scene, where)
    state = pack([found[k]])
    out = simulate.rollout(state, suite.policy_for(policy), record=True)
    return out.record(0)


def render(spec, scene: str, policy: str, path: str, *, frame=None, speedup=1.0, every=1, force=False, where="spec"):
    """Draw the episode to `path`: .png is one frame (default: the first infraction, else the last), .gif/.mp4 all."""
    suffix = os.path.splitext(str(path))[1].lower()
    if suffix not in (".png", ".gif", ".mp4"):
        raise UsageError(f"{path}: render writes .png, .gif or .mp4")
    record = episode(spec, scene, policy, where)
    if suffix == ".png":
        if frame is not None and not 0 <= frame < record["boxes"].shape[0]:
            raise UsageError(f"--frame {frame} is outside the episode's frames 0..{record['boxes'].shape[0] - 1}")
        return draw.write_png(record, path, t=frame, force=force)
    return draw.write_animation(record, path, every=every, speedup=speedup, force=force)

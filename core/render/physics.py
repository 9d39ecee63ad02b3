"""Physical outcomes read from the simulation: trajectories, contacts and final poses of spec objects."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from methodkit.core.errors import UsageError
from methodkit.core.render import gl

mujoco = gl.import_mujoco()


@dataclass
class Outcome:
    """What happened to the spec objects. `positions` (n_samples, n_objects, 3) and `quats` (..., 4)
    are world poses of each object's root body at `times`; `contacts` maps a sorted pair of names
    ("world" for the floor and other world geometry) to the first time they touched."""

    names: list[str]
    times: np.ndarray
    positions: np.ndarray
    quats: np.ndarray
    contacts: dict[tuple[str, str], float] = field(default_factory=dict)

    def final_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(position, quaternion w-x-y-z) of `name` at the end."""
        i = self.names.index(name)
        return self.positions[-1, i], self.quats[-1, i]

    def touched(self, a: str, b: str) -> bool:
        return tuple(sorted((a, b))) in self.contacts

    def to_dict(self) -> dict:
        """JSON-ready summary: final poses, path lengths and first contacts."""
        steps = np.linalg.norm(np.diff(self.positions, axis=0), axis=-1).sum(axis=0) if len(self.times) > 1 else None
        return {
            "duration": float(self.times[-1]),
            "final": {
                n: {"pos": self.positions[-1, i].tolist(), "quat": self.quats[-1, i].tolist()}
                for i, n in enumerate(self.names)
            },
            "path_length": {n: float(steps[i]) if steps is not None else 0.0 for i, n in enumerate(self.names)},
            "contacts": [{"a": a, "b": b, "first_time": t} for (a, b), t in sorted(self.contacts.items())],
        }


def contacts(scene, data) -> set[tuple[str, str]]:
    """The pairs of spec objects (sorted names; "world" for world geometry) touching in `data` now."""
    owner = scene.body_names()
    out = set()
    for k in range(data.ncon):
        c = data.contact[k]
        if c.dist > 0:  # within the margin but not touching
            continue
        a = owner.get(int(scene.model.geom_bodyid[c.geom1]), "world")
        b = owner.get(int(scene.model.geom_bodyid[c.geom2]), "world")
        if a != b:
            out.add(tuple(sorted((a, b))))
    return out


def simulate(
    scene,
    data,
    duration: float,
    *,
    sample_every: float | None = None,
    on_sample: Callable[[float, object], None] | None = None,
) -> Outcome:
    """Step `data` for `duration` seconds, sampling poses every `sample_every` seconds (default: every step).

    `on_sample(time, data)` runs at each sample (time 0 included), e.g. to render a video frame.
    Contacts are checked at every step, so a brief touch between samples is still recorded.
    """
    model = scene.model
    dt = model.opt.timestep
    if duration < 0:
        raise UsageError(f"duration must be >= 0, got {duration}")
    stride = 1 if sample_every is None else max(1, round(sample_every / dt))
    n_steps = round(duration / dt)
    names = list(scene.objects)
    bodies = np.array([scene.objects[n].body_id for n in names], dtype=int)
    times, positions, quats = [], [], []
    touched: dict[tuple[str, str], float] = {}
    t0 = data.time

    def sample():
        times.append(data.time - t0)
        positions.append(data.xpos[bodies].copy())
        quats.append(data.xquat[bodies].copy())
        if on_sample is not None:
            on_sample(data.time - t0, data)

    def record_contacts():
        for pair in contacts(scene, data):
            touched.setdefault(pair, data.time - t0)

    record_contacts()
    sample()
    for step in range(1, n_steps + 1):
        mujoco.mj_step(model, data)
        record_contacts()
        if step % stride == 0 or step == n_steps:
            sample()
    n = len(times)
    return Outcome(
        names,
        np.asarray(times),
        np.asarray(positions, dtype=float).reshape(n, len(names), 3),
        np.asarray(quats, dtype=float).reshape(n, len(names), 4),
        touched,
    )

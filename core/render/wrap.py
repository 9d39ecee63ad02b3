"""A Scene for a model compiled outside the spec builder, so that Renderer can segment it by name.

`build.build()` makes Scenes from JSON specs. A method that composes its own MjSpec (kinematic mocap
bodies, several bodies per logical object) can still use `Renderer.render()` for RGB, depth and
instance segmentation: `wrap(model, {"robot": ["robot"], "person": ["person_torso", "person_head"]})`
groups bodies (each with every body below it) into named objects. In a Frame's `segmentation` a pixel
then holds the id of its group's first body, 0 for world geometry outside every group, -1 for the
background; `instance_ids()` turns that into small integers of the caller's choosing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import DataError
from methodkit.core.render import gl
from methodkit.core.render.build import SceneObject

mujoco = gl.import_mujoco()


@dataclass
class ModelScene:
    """What Renderer needs of a Scene: the model, named objects with their body ids, the id -> name map."""

    model: object
    objects: dict[str, SceneObject]

    def body_names(self) -> dict[int, str]:
        out = {0: "world"}
        for obj in self.objects.values():
            out.update({b: obj.name for b in obj.body_ids})
        return out

    def instance_ids(self, segmentation: np.ndarray, codes: dict[str, int], *, other: int = -1) -> np.ndarray:
        """Frame.segmentation -> int16 codes per pixel: codes[name] for each group's pixels, `other` elsewhere."""
        lut = np.full(self.model.nbody + 1, other, dtype=np.int16)  # last slot: the background (-1)
        for name, code in codes.items():
            if name not in self.objects:
                raise DataError(f"no object '{name}' in the scene (objects: {', '.join(self.objects)})")
            lut[self.objects[name].body_id] = code
        return lut[np.where(segmentation < 0, self.model.nbody, segmentation)]


def wrap(model, groups: dict[str, list[str]]) -> ModelScene:
    """Group the named bodies of a compiled model (each with its subtree) into objects Renderer can segment."""
    parent = np.asarray(model.body_parentid)
    objects = {}
    for name, bodies in groups.items():
        ids = []
        for body in bodies:
            bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
            if bid < 0:
                raise DataError(f"group '{name}': no body '{body}' in the model")
            ids.append(bid)
        members = set(ids)
        for b in range(1, model.nbody):  # bodies are ordered parents first
            if parent[b] in members:
                members.add(b)
        objects[name] = SceneObject(name, "group", ids[0], sorted(members), None, None)
    return ModelScene(model, objects)

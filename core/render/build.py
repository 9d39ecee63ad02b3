"""A validated scene spec -> an MjSpec -> a compiled MuJoCo model, with names kept for reading results.

Every spec object becomes one body named after it, a direct child of the world, so that its pose, its
contacts and its pixels in a segmentation image can be found by name. Furniture is a fixed body
made of boxes (and legs); primitives get a free joint unless fixed; an `mjcf` object is another
model's body tree attached under a frame, its names prefixed with "<name>/".
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from methodkit.core import rng as _rng
from methodkit.core.errors import DataError
from methodkit.core.render import camera as _camera
from methodkit.core.render import gl
from methodkit.core.render.spec import BUILTIN_MODELS

mujoco = gl.import_mujoco()

ASSETS = Path(__file__).resolve().parent / "assets"
_GEOM = {
    "box": mujoco.mjtGeom.mjGEOM_BOX,
    "sphere": mujoco.mjtGeom.mjGEOM_SPHERE,
    "cylinder": mujoco.mjtGeom.mjGEOM_CYLINDER,
    "capsule": mujoco.mjtGeom.mjGEOM_CAPSULE,
    "mesh": mujoco.mjtGeom.mjGEOM_MESH,
    "plane": mujoco.mjtGeom.mjGEOM_PLANE,
}
_BUILTIN_TEXTURE = {
    "checker": mujoco.mjtBuiltin.mjBUILTIN_CHECKER,
    "gradient": mujoco.mjtBuiltin.mjBUILTIN_GRADIENT,
    "flat": mujoco.mjtBuiltin.mjBUILTIN_FLAT,
    "grid": mujoco.mjtBuiltin.mjBUILTIN_CHECKER,  # drawn as a checker plus grid marks
}


@dataclass
class SceneObject:
    """Where one spec object lives in the compiled model."""

    name: str
    type: str
    body_id: int  # its root body
    body_ids: list[int]  # the root and every body below it
    free_qpos: int | None  # address of its free joint in qpos (None: fixed)
    free_qvel: int | None


@dataclass
class Scene:
    """A compiled scene: the MuJoCo model, the spec it came from, and how spec names map to ids."""

    model: object
    spec: dict
    seed: int
    objects: dict[str, SceneObject]
    cameras: list[str]
    mjspec: object = field(repr=False)

    def new_data(self):
        """Fresh MjData at the spec's initial state (positions, joint values, velocities), forward-computed."""
        data = mujoco.MjData(self.model)
        for obj in self.spec["objects"]:
            info = self.objects[obj["name"]]
            if obj["type"] == "mjcf":
                for joint, value in obj["joints"].items():
                    jid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, f"{obj['name']}/{joint}")
                    data.qpos[self.model.jnt_qposadr[jid]] = value
            elif info.free_qvel is not None:
                data.qvel[info.free_qvel : info.free_qvel + 3] = obj["velocity"]
                data.qvel[info.free_qvel + 3 : info.free_qvel + 6] = obj["angular_velocity"]
        mujoco.mj_forward(self.model, data)
        return data

    def body_names(self) -> dict[int, str]:
        """Body id -> the spec object it belongs to (id 0, the world, is "world": floor and lights)."""
        out = {0: "world"}
        for obj in self.objects.values():
            out.update({b: obj.name for b in obj.body_ids})
        return out

    def to_xml(self) -> str:
        """The scene as MJCF text (MjSpec's own writer)."""
        return self.mjspec.to_xml()


def _quat_from_euler(euler_deg) -> list[float]:
    quat = np.zeros(4)
    mujoco.mju_euler2Quat(quat, np.radians(np.asarray(euler_deg, dtype=float)), "xyz")
    return quat.tolist()


def _material(spec, name: str, rgba, texture: dict | None, *, plane: bool = False) -> str:
    """A material (with its texture, if any) named `name`; returns the name."""
    mat = spec.add_material(name=name, rgba=list(rgba))
    if texture is not None:
        tex = spec.add_texture(
            name=f"{name}-tex",
            type=mujoco.mjtTexture.mjTEXTURE_2D if plane else mujoco.mjtTexture.mjTEXTURE_CUBE,
            builtin=_BUILTIN_TEXTURE[texture["builtin"]],
            rgb1=texture["rgb1"],
            rgb2=texture["rgb2"],
            width=256,
            height=256,
        )
        if texture["builtin"] == "grid":
            tex.mark = mujoco.mjtMark.mjMARK_EDGE
            tex.markrgb = [0.1, 0.1, 0.1]
        mat.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = f"{name}-tex"
        mat.texrepeat = texture["repeat"]
        mat.rgba = [1.0, 1.0, 1.0, rgba[3]]  # the texture carries the colour
    return name


def _geom(body, obj: dict, material: str, **kwargs):
    return body.add_geom(friction=obj["friction"], material=material, **kwargs)


def _furniture(spec, body, obj: dict) -> None:
    """Tables, shelves and walls as boxes; `pos` is the centre of the footprint on the floor."""
    x, y, z = obj["size"]
    mat = _material(spec, f"{obj['name']}-mat", obj["rgba"], obj["texture"])
    box = _GEOM["box"]
    if obj["type"] == "wall":
        _geom(body, obj, mat, name=f"{obj['name']}/panel", type=box, size=[x / 2, y / 2, z / 2], pos=[0, 0, z / 2])
    elif obj["type"] == "table":
        top = min(0.04, z / 4)
        leg = min(0.03, x / 8, y / 8)
        _geom(
            body, obj, mat, name=f"{obj['name']}/top", type=box, size=[x / 2, y / 2, top / 2], pos=[0, 0, z - top / 2]
        )
        for i, (sx, sy) in enumerate(((1, 1), (1, -1), (-1, 1), (-1, -1))):
            pos = [sx * (x / 2 - leg), sy * (y / 2 - leg), (z - top) / 2]
            _geom(body, obj, mat, name=f"{obj['name']}/leg{i}", type=box, size=[leg, leg, (z - top) / 2], pos=pos)
    else:  # shelf: two side panels, a back panel and evenly spaced boards (the lowest on the floor)
        t = min(0.02, x / 10, y / 10)
        for side, sx in (("left", -1), ("right", 1)):
            pos = [sx * (x / 2 - t / 2), 0, z / 2]
            _geom(body, obj, mat, name=f"{obj['name']}/{side}", type=box, size=[t / 2, y / 2, z / 2], pos=pos)
        _geom(
            body,
            obj,
            mat,
            name=f"{obj['name']}/back",
            type=box,
            size=[x / 2, t / 2, z / 2],
            pos=[0, y / 2 - t / 2, z / 2],
        )
        for i in range(obj["boards"] + 1):
            h = t / 2 + i * (z - t) / obj["boards"]
            _geom(
                body, obj, mat, name=f"{obj['name']}/board{i}", type=box, size=[x / 2 - t, y / 2, t / 2], pos=[0, 0, h]
            )


def _primitive(spec, body, obj: dict) -> None:
    name = obj["name"]
    mat = _material(spec, f"{name}-mat", obj["rgba"], obj["texture"])
    kwargs = {"name": name, "type": _GEOM[obj["type"]]}
    if obj["type"] == "box":
        kwargs["size"] = [s / 2 for s in obj["size"]]
    elif obj["type"] == "sphere":
        kwargs["size"] = [obj["radius"], 0, 0]
    elif obj["type"] in ("cylinder", "capsule"):
        kwargs["size"] = [obj["radius"], obj["length"] / 2, 0]
    else:
        mesh = spec.add_mesh(name=f"{name}-mesh", scale=obj["scale"])
        if "file" in obj:
            mesh.file = obj["file"]
        else:
            mesh.uservert = np.asarray(obj["vertices"], dtype=float).ravel().tolist()
            mesh.userface = np.asarray(obj["faces"], dtype=int).ravel().tolist()
        kwargs["meshname"] = f"{name}-mesh"
    if obj["mass"] is not None:
        kwargs["mass"] = obj["mass"]
    _geom(body, obj, mat, **kwargs)
    if not obj["fixed"]:
        body.add_freejoint(name=f"{name}/free")


def _model_file(obj: dict) -> tuple[Path, str | None]:
    """The MJCF file of an `mjcf` object and the root body to take from it."""
    if obj["file"] not in BUILTIN_MODELS:
        return Path(obj["file"]), obj["body"]
    where, root = BUILTIN_MODELS[obj["file"]]
    package, _, filename = where.partition(":")
    if package == "methodkit":
        return ASSETS / filename, obj["body"] or root
    found = importlib.util.find_spec(package)
    if found is None or found.origin is None:
        raise DataError(
            f"the built-in model '{obj['file']}' comes with {package}; install it: pip install '{package}[mujoco]'"
        )
    return Path(found.origin).parent / "envs" / "mujoco" / "assets" / filename, obj["body"] or root


def _articulated(spec, obj: dict, quat) -> None:
    path, root = _model_file(obj)
    try:
        child = mujoco.MjSpec.from_file(str(path))
    except Exception as exc:  # MuJoCo's parser raises ValueError with the XML error
        raise DataError(f"{path}: cannot load MJCF ({str(exc).splitlines()[0]})") from None
    # The scene's options win; copying them into the child first keeps attach from warning about each one.
    for key in ("timestep", "gravity", "iterations", "integrator"):
        setattr(child.option, key, getattr(spec.option, key))
    body = child.body(root) if root else child.worldbody.first_body()
    if body is None:
        raise DataError(f"{path}: no body named '{root}' (pass the root body to take with \"body\")")
    frame = spec.worldbody.add_frame(pos=obj["pos"], quat=quat)
    attached = frame.attach_body(body, f"{obj['name']}/", "")
    attached.name = obj["name"]  # the root is named after the object, like every other object
    if obj["free"]:
        attached.add_freejoint(name=f"{obj['name']}/free")
    if obj["gravity_compensation"]:
        stack = [attached]
        while stack:
            b = stack.pop()
            b.gravcomp = 1.0
            stack.extend(b.bodies)


def _mjspec(spec: dict, seed: int):
    s = mujoco.MjSpec()
    s.modelname = "scene"
    s.option.timestep = spec["timestep"]
    s.option.gravity = spec["gravity"]
    r = spec["render"]
    s.visual.global_.offwidth = r["width"]
    s.visual.global_.offheight = r["height"]
    s.visual.quality.shadowsize = r["shadow_size"]
    s.visual.quality.offsamples = r["samples"]
    s.visual.headlight.ambient = [0.35, 0.35, 0.35]
    s.visual.headlight.diffuse = [0.3, 0.3, 0.3]
    world = s.worldbody
    if (
        spec["sky"] is not None
    ):  # a gradient from the zenith colour to a pale horizon; not a geom, so -1 in segmentation
        horizon = [0.5 + 0.5 * c for c in spec["sky"]]
        s.add_texture(name="sky", type=mujoco.mjtTexture.mjTEXTURE_SKYBOX, builtin=_BUILTIN_TEXTURE["gradient"],
                      rgb1=spec["sky"], rgb2=horizon, width=128, height=128)  # fmt: skip
    if spec["floor"] is not None:
        fl = spec["floor"]
        mat = _material(s, "floor-mat", fl["rgba"], fl["texture"], plane=True)
        size = [fl["size"][0] / 2, fl["size"][1] / 2, 0.05]
        world.add_geom(name="floor", type=_GEOM["plane"], size=size, material=mat, friction=fl["friction"])
    for i, lt in enumerate(spec["lights"]):
        light = world.add_light(name=f"light{i}", pos=lt["pos"], dir=lt["dir"], diffuse=[lt["diffuse"]] * 3)
        light.castshadow = True
        light.type = mujoco.mjtLightType.mjLIGHT_DIRECTIONAL if lt["directional"] else mujoco.mjtLightType.mjLIGHT_SPOT
    # One uniform draw per object and axis whatever the jitters are, so one object's jitter never moves another.
    offsets = _rng.generator(seed).uniform(-1.0, 1.0, size=(len(spec["objects"]), 2))
    for obj, offset in zip(spec["objects"], offsets):
        pos = list(obj["pos"])
        pos[0] += obj["jitter"] * offset[0]
        pos[1] += obj["jitter"] * offset[1]
        quat = _quat_from_euler(obj["euler"])
        if obj["type"] == "mjcf":
            _articulated(s, {**obj, "pos": pos}, quat)
            continue
        body = world.add_body(name=obj["name"], pos=pos, quat=quat)
        (_furniture if obj["type"] in ("table", "shelf", "wall") else _primitive)(s, body, obj)
    for cam in spec["cameras"]:
        rot = _camera.look_at_matrix(cam["pos"], cam["target"], cam["up"])
        world.add_camera(name=cam["name"], pos=cam["pos"], quat=_camera.matrix_to_quat(rot).tolist(), fovy=cam["fovy"])
    return s


def build(spec: dict, seed: int = 0) -> Scene:
    """Compile a validated spec (spec.validate) into a Scene; `seed` drives the objects' jitter."""
    s = _mjspec(spec, seed)
    try:
        model = s.compile()
    except ValueError as exc:
        raise DataError(f"the scene does not compile: {str(exc).splitlines()[0]}") from None
    objects = {}
    for obj in spec["objects"]:
        body_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, obj["name"])
        subtree = [b for b in range(model.nbody) if _is_below(model, b, body_id)]
        free_qpos = free_qvel = None
        jnt = model.body_jntadr[body_id]
        if jnt >= 0 and model.jnt_type[jnt] == mujoco.mjtJoint.mjJNT_FREE:
            free_qpos, free_qvel = int(model.jnt_qposadr[jnt]), int(model.jnt_dofadr[jnt])
        objects[obj["name"]] = SceneObject(obj["name"], obj["type"], body_id, subtree, free_qpos, free_qvel)
    for obj in spec["objects"]:
        for joint in obj.get("joints", {}):
            if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, f"{obj['name']}/{joint}") < 0:
                raise DataError(f"objects '{obj['name']}': joints.{joint}: no such joint in {obj['file']}")
    return Scene(model, spec, seed, objects, [c["name"] for c in spec["cameras"]], s)


def _is_below(model, body: int, root: int) -> bool:
    while body > 0:
        if body == root:
            return True
        body = model.body_parentid[body]
    return root == 0

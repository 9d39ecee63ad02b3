"""Scene specs: the JSON a user writes, checked and completed with defaults.

A spec is one JSON object (units: metres, kilograms, seconds, degrees)::

    {"timestep": 0.002, "gravity": [0, 0, -9.81],
     "floor": {"size": [6, 6], "colour": "grey", "texture": "checker", "friction": 1.0}, "sky": true,
     "objects": [
       {"name": "table", "type": "table", "pos": [0, 0, 0], "size": [1.2, 0.8, 0.75]},
       {"name": "ball", "type": "sphere", "radius": 0.05, "pos": [0, 0, 1.2], "mass": 0.1,
        "friction": 0.8, "colour": "red", "velocity": [0.5, 0, 0]},
       {"name": "arm", "type": "mjcf", "file": "arm", "pos": [0.8, 0, 0.75], "gravity_compensation": true}],
     "cameras": [{"name": "front", "pos": [2.5, 0, 1.5], "target": [0, 0, 0.8], "fovy": 45}],
     "render": {"width": 640, "height": 480, "shadow_size": 1024, "samples": 4}}

Object types and their sizes (sizes are full extents, not MuJoCo's half-sizes):
- furniture, fixed, `pos` the centre of its footprint on the floor: `table` (size [x, y, height]),
  `shelf` (size [width x, depth y, height], `boards` shelves), `wall` (size [length x, thickness y, height]);
- bodies, `pos` their centre, free to move unless `"fixed": true`: `box` (size [x, y, z]), `sphere`
  (radius), `cylinder` and `capsule` (radius, length of the straight part along local z), `mesh`
  (`vertices` and `faces`, or `file` an STL/OBJ path relative to the spec; `scale`);
- `mjcf`: an articulated body from an MJCF file (`file`: a path, or a built-in name from
  spec.BUILTIN_MODELS such as `person` or `arm`), `body` the root body to take (default: the file's
  first), `free`, `joints` (initial joint values by name), `gravity_compensation`.
Common keys: `euler` (degrees, x-y-z), `colour` (a name or [r, g, b(, a)] in 0..1), `texture`
(`checker`, `grid`, `gradient`, or {"builtin": ..., "colour2": ..., "repeat": [u, v]}), `friction`
(sliding, or [sliding, torsional, rolling]), `mass`, `velocity` and `angular_velocity` (initial, world
frame, free bodies only), `jitter` (metres: the position moves by a uniform draw in [-j, j] on x and y,
taken from the seed, so one spec gives a family of scenes). `sky`: true (a light-blue gradient), a
colour for its zenith, or false (black).

`validate()` returns the completed spec (plain dicts and lists, JSON-serialisable) or raises a
DataError naming the source and the key, e.g. `scene.json: objects[1].radius: must be > 0, got -1`.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

from methodkit.core.errors import DataError

PRIMITIVES = ("box", "sphere", "cylinder", "capsule", "mesh")
FURNITURE = ("table", "shelf", "wall")
OBJECT_TYPES = (*PRIMITIVES, *FURNITURE, "mjcf")
TEXTURES = ("checker", "grid", "gradient", "flat")
COLOURS = {
    "red": (0.85, 0.1, 0.1),
    "green": (0.1, 0.7, 0.2),
    "blue": (0.15, 0.3, 0.9),
    "yellow": (0.95, 0.85, 0.1),
    "orange": (0.95, 0.5, 0.05),
    "purple": (0.55, 0.2, 0.75),
    "cyan": (0.1, 0.8, 0.85),
    "magenta": (0.9, 0.15, 0.7),
    "white": (0.95, 0.95, 0.95),
    "black": (0.05, 0.05, 0.05),
    "grey": (0.5, 0.5, 0.5),
    "brown": (0.5, 0.32, 0.15),
    "wood": (0.65, 0.48, 0.3),
}
# Articulated models that ship with methodkit or with an installed package: name -> (where, root body).
BUILTIN_MODELS = {
    "person": ("methodkit:person.xml", "person"),
    "arm": ("gymnasium:pusher_v5.xml", "r_shoulder_pan_link"),
}
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

_TOP_KEYS = ("timestep", "gravity", "floor", "sky", "objects", "cameras", "lights", "render")
_COMMON = ("name", "type", "pos", "euler", "colour", "texture", "friction", "jitter")
_MOVABLE = ("mass", "fixed", "velocity", "angular_velocity")
_KEYS = {
    "box": (*_COMMON, *_MOVABLE, "size"),
    "sphere": (*_COMMON, *_MOVABLE, "radius"),
    "cylinder": (*_COMMON, *_MOVABLE, "radius", "length"),
    "capsule": (*_COMMON, *_MOVABLE, "radius", "length"),
    "mesh": (*_COMMON, *_MOVABLE, "vertices", "faces", "file", "scale"),
    "table": (*_COMMON, "size"),
    "shelf": (*_COMMON, "size", "boards"),
    "wall": (*_COMMON, "size"),
    "mjcf": ("name", "type", "pos", "euler", "jitter", "file", "body", "free", "joints", "gravity_compensation"),
}
_DEFAULT_SIZE = {"table": [1.2, 0.8, 0.75], "shelf": [0.8, 0.35, 1.6], "wall": [4.0, 0.1, 2.5], "box": [0.1, 0.1, 0.1]}
_DEFAULT_COLOUR = {"table": "wood", "shelf": "wood", "wall": "white", "floor": "grey"}


class _Checker:
    """Typed reads from one JSON object; every failure names the source and the key path."""

    def __init__(self, source: str, base_dir: Path):
        self.source = source
        self.base_dir = base_dir

    def existing_file(self, value, where: str) -> str:
        path = self.base_dir / self.string(value, where)
        if not path.is_file():
            self.fail(where, f"no such file '{path}'")
        return str(path.resolve())

    def fail(self, where: str, what: str):
        raise DataError(f"{self.source}: {where}: {what}")

    def mapping(self, value, where: str, allowed) -> dict:
        if not isinstance(value, dict):
            self.fail(where, f"must be a JSON object, got {_kind(value)}")
        unknown = [k for k in value if k not in allowed]
        if unknown:
            self.fail(f"{where}.{unknown[0]}" if where else unknown[0], f"unknown key (known: {', '.join(allowed)})")
        return value

    def number(self, value, where: str, *, low=None, high=None, strict_low=False) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            self.fail(where, f"must be a finite number, got {_show(value)}")
        if low is not None and (value <= low if strict_low else value < low):
            self.fail(where, f"must be {'>' if strict_low else '>='} {low:g}, got {value:g}")
        if high is not None and value > high:
            self.fail(where, f"must be <= {high:g}, got {value:g}")
        return float(value)

    def vector(self, value, where: str, n: int, **bounds) -> list[float]:
        if not isinstance(value, list) or len(value) != n:
            self.fail(where, f"must be a list of {n} numbers, got {_show(value)}")
        return [self.number(v, f"{where}[{i}]", **bounds) for i, v in enumerate(value)]

    def boolean(self, value, where: str) -> bool:
        if not isinstance(value, bool):
            self.fail(where, f"must be true or false, got {_show(value)}")
        return value

    def string(self, value, where: str) -> str:
        if not isinstance(value, str) or not value:
            self.fail(where, f"must be a non-empty string, got {_show(value)}")
        return value

    def colour(self, value, where: str) -> list[float]:
        if isinstance(value, str):
            if value not in COLOURS:
                self.fail(where, f"unknown colour '{value}' (known: {', '.join(COLOURS)}; or [r, g, b] in 0..1)")
            return [*COLOURS[value], 1.0]
        if not isinstance(value, list) or len(value) not in (3, 4):
            self.fail(where, f"must be a colour name or [r, g, b] / [r, g, b, a] in 0..1, got {_show(value)}")
        rgba = [self.number(v, f"{where}[{i}]", low=0, high=1) for i, v in enumerate(value)]
        return rgba + [1.0] * (4 - len(rgba))

    def texture(self, value, where: str, base_rgba: list[float]) -> dict | None:
        if value is None:
            return None
        if isinstance(value, str):
            value = {"builtin": value}
        self.mapping(value, where, ("builtin", "colour2", "repeat"))
        builtin = value.get("builtin", "checker")
        if builtin not in TEXTURES:
            self.fail(f"{where}.builtin", f"unknown texture '{_show(builtin)}' (known: {', '.join(TEXTURES)})")
        second = value.get("colour2")
        rgb2 = self.colour(second, f"{where}.colour2")[:3] if second is not None else [c * 0.6 for c in base_rgba[:3]]
        repeat = self.vector(value.get("repeat", [1, 1]), f"{where}.repeat", 2, low=0, strict_low=True)
        return {"builtin": builtin, "rgb1": base_rgba[:3], "rgb2": rgb2, "repeat": repeat}

    def friction(self, value, where: str) -> list[float]:
        if isinstance(value, list):
            if len(value) != 3:
                self.fail(where, f"must be a number or [sliding, torsional, rolling], got {_show(value)}")
            return [self.number(v, f"{where}[{i}]", low=0) for i, v in enumerate(value)]
        return [self.number(value, where, low=0), 0.005, 0.0001]


def _kind(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def validate(raw: Any, source: str = "spec", base_dir: str | os.PathLike | None = None) -> dict:
    """Check a parsed JSON scene spec and return it completed with defaults (see the module docstring).

    File paths in the spec (meshes, MJCF models) are resolved against `base_dir` (default: the current
    folder) and must exist; built-in model names are kept as they are.
    """
    c = _Checker(source, Path(base_dir) if base_dir is not None else Path.cwd())
    c.mapping(raw, "", _TOP_KEYS)
    spec = {
        "timestep": c.number(raw.get("timestep", 0.002), "timestep", low=0, high=0.1, strict_low=True),
        "gravity": c.vector(raw.get("gravity", [0, 0, -9.81]), "gravity", 3),
        "floor": _floor(c, raw.get("floor", {})),
        "sky": _sky(c, raw.get("sky", True)),
        "render": _render(c, raw.get("render", {})),
    }
    objects = raw.get("objects", [])
    if not isinstance(objects, list):
        c.fail("objects", f"must be a list of objects, got {_kind(objects)}")
    spec["objects"] = [_object(c, o, f"objects[{i}]") for i, o in enumerate(objects)]
    _unique(c, spec["objects"], "objects")
    cameras = raw.get("cameras", [])
    if not isinstance(cameras, list):
        c.fail("cameras", f"must be a list of cameras, got {_kind(cameras)}")
    spec["cameras"] = [_camera(c, cam, f"cameras[{i}]") for i, cam in enumerate(cameras)]
    _unique(c, spec["cameras"], "cameras")
    lights = raw.get("lights")
    if lights is not None and not isinstance(lights, list):
        c.fail("lights", f"must be a list of lights, got {_kind(lights)}")
    spec["lights"] = (
        [_light(c, lt, f"lights[{i}]") for i, lt in enumerate(lights)]
        if lights is not None
        else [{"pos": [0.0, 0.0, 4.0], "dir": [0.0, 0.0, -1.0], "diffuse": 0.7, "directional": True}]
    )
    return spec


def _unique(c: _Checker, items: list[dict], where: str) -> None:
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        if item["name"] in seen:
            c.fail(f"{where}[{i}].name", f"'{item['name']}' is already the name of {where}[{seen[item['name']]}]")
        seen[item["name"]] = i


def _floor(c: _Checker, raw) -> dict | None:
    if raw is False or raw is None:
        return None
    c.mapping(raw, "floor", ("size", "colour", "texture", "friction"))
    rgba = c.colour(raw.get("colour", _DEFAULT_COLOUR["floor"]), "floor.colour")
    return {
        "size": c.vector(raw.get("size", [10, 10]), "floor.size", 2, low=0, strict_low=True),
        "rgba": rgba,
        "texture": c.texture(raw.get("texture", {"builtin": "checker", "repeat": [8, 8]}), "floor.texture", rgba),
        "friction": c.friction(raw.get("friction", 1.0), "floor.friction"),
    }


def _sky(c: _Checker, raw) -> list[float] | None:
    """The zenith colour of a gradient sky (true: light blue), or None for a black background."""
    if raw is False or raw is None:
        return None
    if raw is True:
        return [0.45, 0.62, 0.85]
    return c.colour(raw, "sky")[:3]


def _render(c: _Checker, raw) -> dict:
    c.mapping(raw, "render", ("width", "height", "shadow_size", "samples"))
    out = {}
    for key, default, low in (("width", 640, 1), ("height", 480, 1), ("shadow_size", 1024, 0), ("samples", 4, 0)):
        value = raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < low or value > 8192:
            c.fail(f"render.{key}", f"must be an integer in [{low}, 8192], got {_show(value)}")
        out[key] = value
    return out


def _object(c: _Checker, raw, where: str) -> dict:
    if not isinstance(raw, dict):
        c.fail(where, f"must be a JSON object, got {_kind(raw)}")
    kind = raw.get("type")
    if kind not in OBJECT_TYPES:
        c.fail(f"{where}.type", f"must be one of {', '.join(OBJECT_TYPES)}, got {_show(kind)}")
    c.mapping(raw, where, _KEYS[kind])
    if "name" not in raw:
        c.fail(f"{where}.name", "missing (every object needs a unique name)")
    name = c.string(raw["name"], f"{where}.name")
    if not NAME.match(name):
        c.fail(f"{where}.name", f"'{name}' may hold only letters, digits, '_' and '-' (at most 64)")
    obj: dict[str, Any] = {"name": name, "type": kind}
    obj["pos"] = c.vector(raw.get("pos", [0, 0, 0]), f"{where}.pos", 3)
    obj["euler"] = c.vector(raw.get("euler", [0, 0, 0]), f"{where}.euler", 3)
    obj["jitter"] = c.number(raw.get("jitter", 0.0), f"{where}.jitter", low=0)
    if kind == "mjcf":
        return _mjcf(c, raw, where, obj)
    obj["rgba"] = c.colour(raw.get("colour", _DEFAULT_COLOUR.get(kind, "grey")), f"{where}.colour")
    obj["texture"] = c.texture(raw.get("texture"), f"{where}.texture", obj["rgba"])
    obj["friction"] = c.friction(raw.get("friction", 1.0), f"{where}.friction")
    if kind in ("table", "shelf", "wall", "box"):
        obj["size"] = c.vector(raw.get("size", _DEFAULT_SIZE[kind]), f"{where}.size", 3, low=0, strict_low=True)
    if kind == "shelf":
        boards = raw.get("boards", 3)
        if isinstance(boards, bool) or not isinstance(boards, int) or not 1 <= boards <= 20:
            c.fail(f"{where}.boards", f"must be an integer in [1, 20], got {_show(boards)}")
        obj["boards"] = boards
    if kind in ("sphere", "cylinder", "capsule"):
        if "radius" not in raw:
            c.fail(f"{where}.radius", f"missing (a {kind} needs a radius)")
        obj["radius"] = c.number(raw["radius"], f"{where}.radius", low=0, strict_low=True)
    if kind in ("cylinder", "capsule"):
        if "length" not in raw:
            c.fail(f"{where}.length", f"missing (a {kind} needs a length)")
        obj["length"] = c.number(raw["length"], f"{where}.length", low=0, strict_low=True)
    if kind == "mesh":
        _mesh(c, raw, where, obj)
    if kind in PRIMITIVES:
        _movable(c, raw, where, obj)
    return obj


def _movable(c: _Checker, raw: dict, where: str, obj: dict) -> None:
    obj["fixed"] = c.boolean(raw.get("fixed", False), f"{where}.fixed")
    obj["mass"] = c.number(raw["mass"], f"{where}.mass", low=0, strict_low=True) if "mass" in raw else None
    for key in ("velocity", "angular_velocity"):
        if key in raw and obj["fixed"]:
            c.fail(f"{where}.{key}", 'a fixed object cannot move; drop the key or set "fixed": false')
        obj[key] = c.vector(raw.get(key, [0, 0, 0]), f"{where}.{key}", 3)


def _mesh(c: _Checker, raw: dict, where: str, obj: dict) -> None:
    has_file, has_inline = "file" in raw, "vertices" in raw or "faces" in raw
    if has_file == has_inline:
        c.fail(where, "a mesh needs either 'file' or both 'vertices' and 'faces'")
    scale = raw.get("scale", 1.0)
    obj["scale"] = (
        c.vector(scale, f"{where}.scale", 3, low=0, strict_low=True)
        if isinstance(scale, list)
        else [c.number(scale, f"{where}.scale", low=0, strict_low=True)] * 3
    )
    if has_file:
        name = c.string(raw["file"], f"{where}.file")
        if not name.lower().endswith((".stl", ".obj", ".msh")):
            c.fail(f"{where}.file", f"'{name}' is not an STL, OBJ or MSH file")
        obj["file"] = c.existing_file(name, f"{where}.file")
        return
    verts, faces = raw.get("vertices"), raw.get("faces")
    if not isinstance(verts, list) or len(verts) < 4:
        c.fail(f"{where}.vertices", "must be a list of at least 4 [x, y, z] points")
    obj["vertices"] = [c.vector(v, f"{where}.vertices[{i}]", 3) for i, v in enumerate(verts)]
    if not isinstance(faces, list) or not faces:
        c.fail(f"{where}.faces", "must be a list of [i, j, k] vertex-index triangles")
    out = []
    for i, face in enumerate(faces):
        ok = isinstance(face, list) and len(face) == 3 and all(type(k) is int and 0 <= k < len(verts) for k in face)
        if not ok:
            c.fail(f"{where}.faces[{i}]", f"must be 3 vertex indices in [0, {len(verts) - 1}], got {_show(face)}")
        out.append(face)
    obj["faces"] = out


def _mjcf(c: _Checker, raw: dict, where: str, obj: dict) -> dict:
    if "file" not in raw:
        c.fail(f"{where}.file", "missing (an MJCF path or a built-in model name such as 'person' or 'arm')")
    name = c.string(raw["file"], f"{where}.file")
    obj["file"] = name if name in BUILTIN_MODELS else c.existing_file(name, f"{where}.file")
    obj["body"] = c.string(raw["body"], f"{where}.body") if "body" in raw else None
    obj["free"] = c.boolean(raw.get("free", False), f"{where}.free")
    obj["gravity_compensation"] = c.boolean(raw.get("gravity_compensation", False), f"{where}.gravity_compensation")
    joints = raw.get("joints", {})
    if not isinstance(joints, dict):
        c.fail(f"{where}.joints", f"must be an object of joint name -> value, got {_kind(joints)}")
    obj["joints"] = {c.string(k, f"{where}.joints"): c.number(v, f"{where}.joints.{k}") for k, v in joints.items()}
    return obj


def _camera(c: _Checker, raw, where: str) -> dict:
    c.mapping(raw, where, ("name", "pos", "target", "fovy", "up"))
    for key in ("name", "pos", "target"):
        if key not in raw:
            c.fail(f"{where}.{key}", "missing (a camera needs name, pos and target)")
    name = c.string(raw["name"], f"{where}.name")
    if not NAME.match(name):
        c.fail(f"{where}.name", f"'{name}' may hold only letters, digits, '_' and '-' (at most 64)")
    pos = c.vector(raw["pos"], f"{where}.pos", 3)
    target = c.vector(raw["target"], f"{where}.target", 3)
    up = c.vector(raw.get("up", [0, 0, 1]), f"{where}.up", 3)
    forward = [t - p for t, p in zip(target, pos)]
    if math.hypot(*forward) < 1e-9:
        c.fail(f"{where}.target", "equals the camera position; the camera needs a direction to look in")
    cross = [
        forward[1] * up[2] - forward[2] * up[1],
        forward[2] * up[0] - forward[0] * up[2],
        forward[0] * up[1] - forward[1] * up[0],
    ]
    if math.hypot(*cross) < 1e-9 * max(math.hypot(*up), 1e-300) * math.hypot(*forward):
        c.fail(f"{where}.up", "is parallel to the viewing direction; give another up vector")
    fovy = c.number(raw.get("fovy", 45.0), f"{where}.fovy", low=0, high=179, strict_low=True)
    return {"name": name, "pos": pos, "target": target, "up": up, "fovy": fovy}


def _light(c: _Checker, raw, where: str) -> dict:
    c.mapping(raw, where, ("pos", "dir", "diffuse", "directional"))
    return {
        "pos": c.vector(raw.get("pos", [0, 0, 4]), f"{where}.pos", 3),
        "dir": c.vector(raw.get("dir", [0, 0, -1]), f"{where}.dir", 3),
        "diffuse": c.number(raw.get("diffuse", 0.7), f"{where}.diffuse", low=0, high=1),
        "directional": c.boolean(raw.get("directional", False), f"{where}.directional"),
    }


def load(path: str, *, source: str | None = None) -> dict:
    """Read a spec file (or `-`) through core.io and validate it."""
    from methodkit.core import io

    base = Path(path).parent if str(path) != "-" else None
    return validate(io.read_json(path), source or io.display_name(path), base)

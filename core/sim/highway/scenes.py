"""Scenes as files: the scene NPZ schema (fixed shapes, padding + masks), its writer and validating reader.

A scene file holds N scenes, each padded to K agents, S lane segments and T future steps:

    key            dtype    shape          content
    scene_id       str      [N]            unique id of each scene
    ego            float64  [N, 8]         the ego, in the agent layout below
    agents         float64  [N, K, 8]      (x, y, heading, vx, vy, length, width, role) now; role codes in events.py
    agent_mask     bool     [N, K]         real agents (False = padding)
    futures        float64  [N, K, T, 4]   recorded futures (x, y, heading, speed) at t = dt, 2 dt, ..., T dt
    future_mask    bool     [N, K, T]      the agent exists at that step
    lanes          float64  [N, S, 5]      lane segments (x_start, x_end, y_center, width, lane_index)
    lane_mask      bool     [N, S]
    route          float64  [N, 2]         (x_start, x_end) of the ego's route along +x
    expert_index   int64    [N]            the expert's candidate in the trajectory vocabulary (-1: none)
    expert_traj    float64  [N, T, 3]      the expert's future (x, y, heading), same steps as futures
    meta           str      []             JSON: {"schema": 1, "dt": ..., "simulator": version, "generator":
                                           configs, "seeds": [...], ...}

Values under a False mask are padding and never read (they may be anything, NaN included); every value
that a mask marks real must be finite. The reader checks all of this and raises core.errors.DataError
naming the file, the key and the scene row (and agent/step) at fault, so users can bring their own scenes.
"""

from __future__ import annotations

import json
import os

import numpy as np

from methodkit.core import io
from methodkit.core.errors import DataError

SCHEMA_VERSION = 1
AGENT_FEATURES = ("x", "y", "heading", "vx", "vy", "length", "width", "role")
FUTURE_FEATURES = ("x", "y", "heading", "speed")
EXPERT_FEATURES = ("x", "y", "heading")

# key -> (dtype kind: f float, b bool, i integer, U string; shape over the symbols N K S T)
SCHEMA: dict[str, tuple[str, tuple]] = {
    "scene_id": ("U", ("N",)),
    "ego": ("f", ("N", len(AGENT_FEATURES))),
    "agents": ("f", ("N", "K", len(AGENT_FEATURES))),
    "agent_mask": ("b", ("N", "K")),
    "futures": ("f", ("N", "K", "T", len(FUTURE_FEATURES))),
    "future_mask": ("b", ("N", "K", "T")),
    "lanes": ("f", ("N", "S", 5)),
    "lane_mask": ("b", ("N", "S")),
    "route": ("f", ("N", 2)),
    "expert_index": ("i", ("N",)),
    "expert_traj": ("f", ("N", "T", len(EXPERT_FEATURES))),
    "meta": ("U", ()),
}
_DTYPES = {"f": np.float64, "b": np.bool_, "i": np.int64}
_KIND_NAMES = {"f": "float", "b": "bool", "i": "integer", "U": "string"}
# which mask covers which float array (the mask's dimensions are the array's leading ones)
_MASKED_BY = {"agents": "agent_mask", "futures": "future_mask", "lanes": "lane_mask"}
REQUIRED_META = ("schema", "dt")


def _where(key: str, index: tuple) -> str:
    """'row 3' or 'row 3, agent 1, step 7' for a position in a keyed array."""
    names = {"agents": ("row", "agent"), "futures": ("row", "agent", "step"), "lanes": ("row", "segment")}
    labels = names.get(key, ("row", "step") if key == "expert_traj" else ("row",))
    return ", ".join(f"{label} {int(i)}" for label, i in zip(labels, index))


def validate(arrays: dict, name: str) -> tuple[dict, dict]:
    """Check keys, dtypes, shapes, finiteness and meta; return (arrays in the schema's dtypes, meta)."""
    missing = [key for key in SCHEMA if key not in arrays]
    if missing:
        raise DataError(
            f"{name}: missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)} (scene NPZ schema {SCHEMA_VERSION})"
        )
    sizes: dict[str, int] = {}
    out: dict[str, np.ndarray] = {}
    for key, (kind, shape) in SCHEMA.items():
        value = np.asarray(arrays[key])
        got_kind = value.dtype.kind
        ok = got_kind == kind or (kind == "f" and got_kind in "iu") or (kind == "i" and got_kind == "u")
        if not ok:
            raise DataError(f"{name}: key '{key}' has dtype {value.dtype}, expected {_KIND_NAMES[kind]}")
        if value.ndim != len(shape):
            raise DataError(f"{name}: key '{key}' has shape {value.shape}, expected {_shape_text(shape)}")
        for axis, (want, got) in enumerate(zip(shape, value.shape)):
            if isinstance(want, str):
                if sizes.setdefault(want, got) != got:
                    raise DataError(
                        f"{name}: key '{key}' has shape {value.shape}, expected {_shape_text(shape, sizes)} "
                        f"(axis {axis} is {want} = {sizes[want]} elsewhere)"
                    )
            elif want != got:
                raise DataError(f"{name}: key '{key}' has shape {value.shape}, expected {_shape_text(shape, sizes)}")
        out[key] = value.astype(_DTYPES[kind], copy=False) if kind in _DTYPES else value
    for key in ("ego", "route", "expert_traj"):
        _check_finite(out[key], None, key, name)
    for key, mask_key in _MASKED_BY.items():
        _check_finite(out[key], out[mask_key], key, name)
    if len(set(out["scene_id"].tolist())) != len(out["scene_id"]):
        raise DataError(f"{name}: key 'scene_id' repeats an id")
    meta = parse_meta(str(out["meta"]), name)
    return out, meta


def _check_finite(values, mask, key, name):
    bad = ~np.isfinite(values)
    if mask is not None:
        bad &= mask[(...,) + (None,) * (values.ndim - mask.ndim)]
    if bad.any():
        index = np.argwhere(bad)[0]
        feature = index[-1]
        features = {
            "agents": AGENT_FEATURES,
            "futures": FUTURE_FEATURES,
            "expert_traj": EXPERT_FEATURES,
            "ego": AGENT_FEATURES,
        }
        label = features.get(key)
        what = f"'{label[feature]}'" if label else f"column {int(feature)}"
        raise DataError(f"{name}: key '{key}' has a non-finite {what} at {_where(key, tuple(index[:-1]))}")


def _shape_text(shape, sizes=None) -> str:
    sizes = sizes or {}
    return "[" + ", ".join(str(sizes.get(s, s)) if isinstance(s, str) else str(s) for s in shape) + "]"


def parse_meta(text: str, name: str) -> dict:
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{name}: key 'meta' is not JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(meta, dict):
        raise DataError(f"{name}: key 'meta' must be a JSON object")
    for key in REQUIRED_META:
        if key not in meta:
            raise DataError(f"{name}: meta lacks '{key}'")
    if meta["schema"] != SCHEMA_VERSION:
        raise DataError(f"{name}: scene schema {meta['schema']} is not supported (this reader knows {SCHEMA_VERSION})")
    if not (isinstance(meta["dt"], int | float) and meta["dt"] > 0):
        raise DataError(f"{name}: meta 'dt' must be a positive number, got {meta['dt']!r}")
    return meta


def write_scenes(path: str | os.PathLike, arrays: dict, meta: dict, *, force: bool = False) -> None:
    """Validate and write a scene NPZ atomically (nothing is written if the scenes are invalid)."""
    meta = {"schema": SCHEMA_VERSION, **meta}
    full = {**{k: v for k, v in arrays.items() if k != "meta"}, "meta": np.array(json.dumps(meta, sort_keys=True))}
    checked, _ = validate(full, io.display_name(path))
    io.write_arrays(path, checked, force=force)


def read_scenes(path: str | os.PathLike) -> tuple[dict, dict]:
    """Read and validate a scene NPZ: (arrays in the schema's dtypes, meta)."""
    arrays = io.read_arrays(path)
    return validate(arrays, io.display_name(path))


def empty_scenes(n: int, k: int, s: int, t: int) -> dict:
    """Arrays of the schema's shapes, everything padding (masks False, floats zero): a writer fills them."""
    arrays = {}
    for key, (kind, shape) in SCHEMA.items():
        if key == "meta":
            continue
        dims = tuple({"N": n, "K": k, "S": s, "T": t}.get(d, d) for d in shape)
        arrays[key] = np.zeros(dims, dtype=_DTYPES.get(kind, "U64"))
    arrays["scene_id"] = np.array([f"scene-{i}" for i in range(n)])
    arrays["expert_index"][:] = -1
    return arrays


def score_inputs(arrays: dict, meta: dict, ego_states: np.ndarray, reference_progress: np.ndarray | None = None):
    """The scorer's arrays for plans ego_states [N, P, T+1, 7] in these scenes: agents at t = 0 (now) then
    their recorded futures; static = role obstacle; the reference progress defaults to the expert's."""
    from methodkit.core.sim.highway import events as ev

    agents, futures = arrays["agents"], arrays["futures"]
    n, k, t, _ = futures.shape
    boxes = np.empty((n, k, t + 1, 5))
    speeds = np.empty((n, k, t + 1, 2))
    boxes[:, :, 0] = agents[..., [0, 1, 2, 5, 6]]
    speeds[:, :, 0] = agents[..., 3:5]
    boxes[:, :, 1:, :3] = futures[..., :3]
    boxes[:, :, 1:, 3:] = agents[:, :, None, 5:7]
    speeds[:, :, 1:, 0] = futures[..., 3] * np.cos(futures[..., 2])
    speeds[:, :, 1:, 1] = futures[..., 3] * np.sin(futures[..., 2])
    present = np.concatenate(
        [arrays["agent_mask"][..., None], arrays["future_mask"] & arrays["agent_mask"][..., None]], -1
    )
    static = arrays["agent_mask"] & (agents[..., 7] == ev.ROLE_OBSTACLE)
    if reference_progress is None:
        reference_progress = np.maximum(0.0, arrays["expert_traj"][:, -1, 0] - arrays["ego"][:, 0])
    sizes = arrays["ego"][:, 5:7]
    return dict(
        ego=ego_states, ego_size=sizes, agents=boxes, agent_speeds=speeds, agent_present=present,
        agent_static=static, road=arrays["lanes"], road_mask=arrays["lane_mask"],
        reference_progress=reference_progress, dt=float(meta["dt"]),
    )  # fmt: skip

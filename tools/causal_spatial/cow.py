"""Causal Object World: simulate the question's hypothetical motion and show it.

The paper's pipeline grounds the mover, lifts the image to metric 3D, builds a 3D trajectory,
projects it and has a video model render the hypothetical. Here lifting comes from an RGB-D view
(perceive.py) and the dynamics and rendering from MuJoCo: a proxy scene of fitted primitives
(density 500 kg/m^3, friction 0.8) is built, the grounded motion applied (a kinematic drive, a
release, a kinematic translation, a launch), simulated, and drawn from the same K and T.
`oracle` uses the true scene spec instead of the perceived one (an upper bound, and a consistency
check of the reader). Events (contacts with times, rest poses, inside flags, visible fractions,
the landing point) go to cow.json; frames to PNG and an H.264 video.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from methodkit.core.errors import DataError
from methodkit.tools.causal_spatial import grammar, launchers, perceive, physics, scenes, visibility

FRAME_DURATION = {"compatibility": 1.5, "occlusion": 1.0, "trajectory": 1.6}
HIDDEN_BELOW = 0.3  # the reader's threshold on the last frame's visible fraction


@dataclass
class World:
    """A scene to simulate: spec objects (named objects carry their colour as name), the camera,
    and what the task needs to read the outcome."""

    objects: list[dict]
    camera: dict
    size: int
    car: list[str] = field(default_factory=list)
    cavity: dict | None = None  # {"centre": [x, y], "inner": [a, b], "yaw": deg, "floor": z, "rim": z}
    container: list[dict] = field(default_factory=list)
    mats: list[str] = field(default_factory=list)
    ramp: str | None = None  # the launching ramp's object name (trajectory)
    primitives: list[dict] = field(default_factory=list)


def camera_from_pose(K: np.ndarray, T: np.ndarray) -> dict:
    pos = T[:3, 3]
    fovy = math.degrees(2 * math.atan((K[1, 2] + 0.5) / K[1, 1]))
    return {"name": "cam", "pos": pos.tolist(), "target": (pos + T[:3, 2]).tolist(), "up": (-T[:3, 1]).tolist(),
            "fovy": fovy}  # fmt: skip


def _spec_of(p: perceive.Primitive, name: str, *, fixed: bool = False, on_floor: bool = True) -> dict:
    w, d, h = (max(float(v), 0.002) for v in p.size)  # a face seen edge-on can have no extent
    x, y, z = p.centre
    if on_floor and z - h / 2 < 0.01:  # resting on the floor: sit exactly on it
        z = h / 2 + 5e-4
    if p.shape == "box":
        dims, shape = {"w": w, "d": d, "h": h}, "box"
    elif p.shape == "sphere":
        dims, shape = {"r": w / 2}, "sphere"
    else:
        dims, shape = {"r": w / 2, "h": h}, p.shape
    obj = scenes.shape_object(name, shape, "red", dims, (x, y, z), p.yaw)
    obj["colour"] = [min(1.0, max(0.0, c)) for c in p.rgb]
    if fixed:
        obj["fixed"] = True
        obj.pop("mass")
    return obj


def perceived_world(rgb, sensors: dict, task: str, size: int) -> World:
    K, T = np.asarray(sensors["K"], dtype=float), np.asarray(sensors["T"], dtype=float)
    prims = perceive.perceive(rgb, sensors["depth"], sensors["ids"], K, T)
    clouds = perceive.lift(sensors["depth"], sensors["ids"], K, T)
    named: dict[str, perceive.Primitive] = {}
    for p in prims:
        if p.colour != "scenery" and (p.colour not in named or p.pixels > named[p.colour].pixels):
            named[p.colour] = p
    scenery = [p for p in prims if p.colour == "scenery"]
    world = World([], camera_from_pose(K, T), size, primitives=[p.to_dict() for p in prims])
    if task == "collision":
        if not scenery:
            raise DataError("no car found in the image (no unsaturated instances)")
        centre, ext, ang, _, zmax = perceive.union_box(scenery, clouds)
        axis = np.array([math.cos(ang), math.sin(ang)]) if ext[0] >= ext[1] else np.array([-math.sin(ang), math.cos(ang)])
        lights = [p for p in scenery if p.shade == "white"]
        if lights:  # the white front lights say which way along the long axis is forward
            front = np.mean([clouds[p.instance][:, :2].mean(axis=0) for p in lights], axis=0)
            if np.dot(front - centre, axis) < 0:
                axis = -axis
        length, width = max(ext), min(ext)
        yaw = math.degrees(math.atan2(axis[1], axis[0]))
        world.objects.append({"name": "car", "type": "box", "size": [length, width, zmax], "colour": "black",
                              "pos": [float(centre[0]), float(centre[1]), zmax / 2 + 1e-3], "euler": [0, 0, yaw],
                              "mass": 20.0, "friction": scenes.FRICTION})  # fmt: skip
        world.car = ["car"]
        world.objects += [_spec_of(p, c) for c, p in named.items()]
    elif task == "compatibility":
        if not scenery:
            raise DataError("no container found in the image (no unsaturated instances)")
        centre, ext, ang, zmin, zmax = perceive.union_box(scenery, clouds)
        walls = [p for p in scenery if p.size[2] > 0.5 * (zmax - zmin)]
        thickness = float(np.median([min(p.size[:2]) for p in walls])) if walls else 0.012
        floor_z = min(p.centre[2] + p.size[2] / 2 for p in scenery)
        world.cavity = {"centre": centre.tolist(), "inner": [float(e - 2 * thickness) for e in ext],
                        "yaw": math.degrees(ang), "floor": float(floor_z), "rim": zmax}  # fmt: skip
        world.container = [_spec_of(p, f"scenery-{p.instance}", fixed=True, on_floor=False) for p in scenery]
        world.objects += [_spec_of(p, c, on_floor=True) for c, p in named.items()]
    elif task == "occlusion":
        world.objects += [_spec_of(p, c) for c, p in named.items()]
    else:
        flat = {c for c, p in named.items() if p.size[2] < 0.015}
        world.mats = sorted(flat)
        world.objects += [_spec_of(p, c, fixed=c in flat, on_floor=c not in flat) for c, p in named.items()]
        for p in scenery:  # a plank tilted off the floor is the ramp; the rest stand upright (the wall)
            ramp = launchers.fit_ramp(clouds[p.instance], f"scenery-{p.instance}", p.rgb)
            if ramp is not None and world.ramp is None:
                world.ramp = ramp["name"]
                world.objects.append(ramp)
            else:
                world.objects.append(_spec_of(p, f"scenery-{p.instance}", fixed=True))
    return world


def oracle_world(spec: dict, task: str, size: int) -> World:
    """The true scene, named objects renamed to their colour (the reader's key)."""
    objects, car, container, mats = [], [], [], []
    cavity = None
    for o in spec["objects"]:
        o = dict(o)
        colour = o["name"].split("-")[0]
        if colour in scenes.PALETTE:
            o["name"] = colour
            if o["name"] and o.get("fixed") and o["size"][2] < 0.015:
                mats.append(colour)
        if o["name"].startswith("car"):
            car.append(o["name"])
        if o["name"].startswith("container"):
            container.append(o)
            continue
        objects.append(o)
    if container:
        bottom = next(o for o in container if o["name"].endswith("bottom"))
        wall = next(o for o in container if o["name"].endswith("wall0"))
        t = wall["size"][0]
        outer = bottom["size"][0]
        cavity = {"centre": bottom["pos"][:2], "inner": [outer - 2 * t, outer - 2 * t], "yaw": 0.0,
                  "floor": bottom["size"][2], "rim": bottom["size"][2] + wall["size"][2]}  # fmt: skip
    cam = dict(spec["cameras"][0])
    ramp = "ramp" if any(o["name"] == "ramp" for o in objects) else None
    return World(objects, cam, size, car=car, cavity=cavity, container=container, mats=mats, ramp=ramp)


def _inside(point, cavity, offset=(0.0, 0.0)) -> bool:
    c = np.asarray(cavity["centre"]) + np.asarray(offset)
    yaw = math.radians(cavity["yaw"])
    d = np.asarray(point[:2]) - c
    local = np.array([math.cos(yaw) * d[0] + math.sin(yaw) * d[1], -math.sin(yaw) * d[0] + math.cos(yaw) * d[1]])
    half = np.asarray(cavity["inner"]) / 2 - 0.002
    return bool(np.all(np.abs(local) < half) and cavity["floor"] < point[2] < cavity["rim"])


@dataclass
class Outcome:
    events: dict
    frames: list  # RGB arrays, frame 0 the initial state
    path: list  # the mover's positions at the frames (for annotation)
    contact_points: list  # (t, point) of the mover's contacts
    times: list
    seg: dict | None = None  # with segmentation=True: per-frame instance ids and depth (seg.npz)


def _spec(world: World, objects: list[dict]) -> dict:
    spec = scenes.base_spec(world.size, world.camera)
    spec["objects"] = objects
    return spec


def simulate(world: World, g: grammar.Grounding, *, frames: int, renderer=None, segmentation: bool = False) -> Outcome:
    """Apply the grounded motion to the world, simulate, render `frames` + 1 frames and read events;
    with `segmentation` also every frame's instance ids and depth (what cow-reader --from-frames reads)."""
    task = g.task
    objects = [dict(o) for o in world.objects]
    names = {o["name"] for o in objects}
    # any touch counts for the reader: a light object pushed aside by a grazing car may never be
    # penetrated by the 1 mm the answers' margin uses, and the perceived car is a little narrower
    drive, watch, penetration = None, [], 0.0
    duration = FRAME_DURATION.get(task, 1.0)
    mover = None
    if task == "collision":
        car = next(o for o in objects if o["name"] in world.car)
        yaw = math.radians(car["euler"][2])
        u = np.array([math.cos(yaw), math.sin(yaw), 0.0])
        duration = g.distance / scenes.CAR_SPEED
        drive = physics.Drive(list(world.car), u * scenes.CAR_SPEED, duration)
        watch, mover = list(world.car), "car"
        duration += 0.3
    elif task == "occlusion":
        if g.mover not in names:
            raise DataError(f"the {g.mover} object named in the question is not in the view")
        T_right = np.asarray(world.camera["target"]) - np.asarray(world.camera["pos"])
        left = -np.array([T_right[1], -T_right[0]])
        left /= np.linalg.norm(left)
        drive = physics.Drive([g.mover], np.array([left[0], left[1], 0.0]) * g.distance / duration, duration)
        watch, mover = [g.mover], g.mover
    elif task == "compatibility":
        if len(g.targets) == 1:  # release it where it hangs
            objects += world.container
            watch = list(g.targets)
            mover = g.targets[0]
        else:  # each candidate dropped into its own copy of the container, set under it
            for o in objects:
                if o["name"] in g.targets:
                    off = np.asarray(o["pos"][:2]) - np.asarray(world.cavity["centre"])
                    full_h = o["size"][2] if o["type"] == "box" else (o["length"] + (2 * o["radius"] if o["type"] == "capsule" else 0))
                    o["pos"] = [o["pos"][0], o["pos"][1], world.cavity["rim"] + 0.2 + full_h / 2]
                    for part in world.container:
                        copy = dict(part, name=f"{part['name']}-{o['name']}")
                        copy["pos"] = [part["pos"][0] + off[0], part["pos"][1] + off[1], part["pos"][2]]
                        objects.append(copy)
            watch = list(g.targets)
    else:  # trajectory
        if g.mover not in names:
            raise DataError(f"the {g.mover} ball named in the question is not in the view")
        ball = next(o for o in objects if o["name"] == g.mover)
        mats = [o for o in objects if o["name"] in world.mats]
        if not mats:
            raise DataError("no landing mats found in the view")
        if g.launcher == "ramp":  # sent up the slope from where it rests on the ramp
            ramp = next((o for o in objects if o["name"] == world.ramp), None)
            if ramp is None:
                raise DataError("the question's ramp is not found in the view")
            pose = launchers.ramp_pose(ramp)
            ball["pos"] = launchers.seat_on_ramp(ball["pos"], ball["radius"], pose).tolist()
            ball["velocity"] = [float(g.speed * x) for x in pose["up"]]
        else:
            aim = np.mean([o["pos"][:2] for o in mats], axis=0) - np.asarray(ball["pos"][:2])
            u = aim / np.linalg.norm(aim)
            th = math.radians(g.elevation)
            ball["velocity"] = [float(g.speed * math.cos(th) * u[0]), float(g.speed * math.cos(th) * u[1]),
                                float(g.speed * math.sin(th))]  # fmt: skip
        if g.restitution:  # the stated restitution goes to the upright scenery (the wall)
            for o in objects:
                if o.get("fixed") and o["name"] not in world.mats and o["name"] != world.ramp:
                    o["restitution"] = g.restitution
        ball["mass"] = ball.get("mass", 0.05)
        watch, mover = [g.mover], g.mover
    scene = physics.compile_spec(_spec(world, objects), "cow proxy")
    data = scene.new_data()
    shots, path, seg = [], [], {"ids": [], "depth": [], "times": []}
    body = scene.objects[mover].body_id if mover else None
    segmentation = segmentation and renderer is not None

    def on_sample(t, d):
        if segmentation:
            frame = renderer.render(scene, d, "cam")
            shots.append(frame.rgb)
            seg["ids"].append(frame.segmentation.astype(np.int16))
            seg["depth"].append(frame.depth.astype(np.float16))
            seg["times"].append(t)
            seg["K"], seg["T"] = frame.K, frame.T
        elif renderer is not None:
            shots.append(renderer.rgb(scene, d, "cam"))
        if body is not None:
            path.append(d.xpos[body].tolist())

    ev = physics.run(scene, duration, watch=watch, drive=drive, sample_every=duration / frames, on_sample=on_sample,
                     data=data, penetration=penetration)  # fmt: skip
    events: dict = {"duration": round(duration, 3)}
    contacts = {k: v for k, v in ev.contacts.items() if not k.startswith(("scenery", "container", "car"))}
    if task == "collision":
        events["hits"] = sorted(k for k in contacts if k != "world")
        events["contacts"] = {k: v for k, v in contacts.items() if k != "world"}
    elif task == "compatibility":
        cavity_offsets = {}
        for o in world.objects:
            if o["name"] in g.targets and len(g.targets) > 1:
                cavity_offsets[o["name"]] = np.asarray(o["pos"][:2]) - np.asarray(world.cavity["centre"])
        events["rest"] = {n: ev.final(n).tolist() for n in g.targets if n in ev.positions}
        events["inside"] = {n: _inside(ev.final(n), world.cavity, cavity_offsets.get(n, (0.0, 0.0)))
                            for n in g.targets if n in ev.positions}  # fmt: skip
    elif task == "occlusion":
        movable = [o["name"] for o in objects if not o.get("fixed")]
        fractions = {}
        for n in g.targets:
            if n not in scene.objects:
                continue
            if renderer is not None:
                fractions[n] = round(visibility.seg_fraction(renderer, scene, data, n, movable)[0], 4)
            else:
                from methodkit.core.render import camera as _camera

                K = _camera.intrinsics(world.camera["fovy"], world.size, world.size)
                T = _camera.world_from_camera(data.cam_xpos[0], data.cam_xmat[0])
                fractions[n] = round(visibility.ray_fraction(scene, data, n, world.camera["pos"], K, T, world.size,
                                                             world.size), 4)  # fmt: skip
        events["visible_fraction"] = fractions
    else:
        landing = [(v["t"], k, v["point"]) for k, v in contacts.items() if k in world.mats or k == "world"]
        if landing:
            t, k, point = min(landing)
            events["landing"] = {"object": "floor" if k == "world" else k, "t": t, "point": point}
        else:
            events["landing"] = None
        events["contacts"] = contacts
    points = [(v["t"], v["point"]) for k, v in contacts.items() if k != "world"]
    if segmentation:
        seg = {k: np.asarray(v) for k, v in seg.items()}
        seg["names"] = {n: scene.objects[n].body_id for n in scene.objects}
    return Outcome(events, shots, path, points, ev.times, seg if segmentation else None)


# ---------------------------------------------------------------- drawing the cues


def _stamp(img, u, v, radius, colour):
    h, w = img.shape[:2]
    r = int(math.ceil(radius))
    u0, v0 = int(round(u)), int(round(v))
    ys, xs = np.ogrid[max(0, v0 - r) : min(h, v0 + r + 1), max(0, u0 - r) : min(w, u0 + r + 1)]
    if ys.size == 0 or xs.size == 0:
        return
    mask = (xs - u) ** 2 + (ys - v) ** 2 <= radius * radius
    sub = img[max(0, v0 - r) : min(h, v0 + r + 1), max(0, u0 - r) : min(w, u0 + r + 1)]
    sub[mask] = colour


def annotate(frames: list, outcome: Outcome, K, T) -> list:
    """The mover's whole path as a yellow dotted line; contacts flash as red discs from their time on."""
    from methodkit.core.render import camera as _camera

    out = [f.copy() for f in frames]
    if outcome.path:
        dense = []
        pts = np.asarray(outcome.path)
        for a, b in zip(pts[:-1], pts[1:]):
            dense += list(a + (b - a) * s for s in np.linspace(0, 1, 12, endpoint=False))
        dense.append(pts[-1])
        uv, z = _camera.project(K, T, np.asarray(dense))
        for img in out:
            for (u, v), zz in zip(uv, z):
                if zz > 0:
                    _stamp(img, u, v, max(1.0, img.shape[0] / 160), (255, 220, 0))
    for t, point in outcome.contact_points:
        uv, z = _camera.project(K, T, np.asarray([point]))
        for k, img in enumerate(out):
            if k < len(outcome.times) and outcome.times[k] + 1e-9 >= t and z[0] > 0:
                _stamp(img, uv[0, 0], uv[0, 1], max(3.0, img.shape[0] / 40), (255, 0, 0))
    return out

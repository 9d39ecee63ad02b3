"""The four tasks: draw a scene, ask the question, and find the answer by simulating it.

Each sampler takes an item's generator, the level, the answer it should have (the balance schedule
picks it) and the generation settings, and returns a Draft or raises Reject(reason). The answer is
never decided from the sampling intent: the layout is drawn to aim at it, then simulated, and kept
only when the simulated answer equals the aim and clears the ambiguity margins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from methodkit.tools.causal_spatial import launchers, physics, scenes, visibility
from methodkit.tools.causal_spatial.kernels import swept_obb_prefilter

TASKS = ("collision", "compatibility", "occlusion", "trajectory")
NOT_SURE = "Not sure"
G = 9.81  # the scenes' gravity (core.render's default), also the one stated to the COW proxy


class Reject(Exception):
    """This draw is unusable; the message is the reason counted in meta.json."""


@dataclass
class Settings:
    size: int = 336
    elevation: tuple = (25.0, 45.0)
    objects: tuple = (2, 5)
    renderer: object = None  # a core.render Renderer, or None under --gl none
    stats: dict = field(default_factory=dict)  # counters (prefilter agreement, ...)

    def count(self, key: str, by: int = 1) -> None:
        self.stats[key] = self.stats.get(key, 0) + by


@dataclass
class Draft:
    spec: dict
    question: str
    options: list[str]
    answer: int  # index into options
    motion: dict
    gt: dict
    named: list[str]  # objects a question names (each must be visible in the image)


def letter(i: int) -> str:
    return "ABCDEFGHIJ"[i]


def format_question(stem: str, options: list[str]) -> str:
    return stem + "\n" + "\n".join(f"({letter(i)}) {o}" for i, o in enumerate(options))


def n_choices(task: str, level: int, n_objects: int) -> int:
    """How many answers the balance schedule cycles over (Not sure excluded)."""
    if task == "trajectory":
        return 3 if level == 1 else 4
    if level == 1:
        return 2
    if task == "compatibility":
        return 3
    if task == "occlusion":
        return _n_targets(n_objects) + 1
    return n_objects + 1


def _n_targets(n_objects: int) -> int:
    return max(2, min(3, n_objects - 1))


def _colours(rng, n: int) -> list[str]:
    return [scenes.PALETTE[i] for i in rng.permutation(len(scenes.PALETTE))[:n]]


def _elev(rng, s: Settings) -> float:
    return float(rng.uniform(*s.elevation))


def _label(colour: str, shape: str) -> str:
    return f"the {colour} {scenes.noun(shape)}"


# ---------------------------------------------------------------- collision


def _round_radius(shape, dims):
    hl, hw, _ = scenes.footprint(shape, dims)
    return math.hypot(hl, hw)


def collision(rng, level: int, aim: int, s: Settings, n_objects: int) -> Draft:
    distance = float(rng.uniform(0.45, 0.75))
    yaw = float(rng.uniform(-25, 25) if level == 1 else rng.uniform(-60, 60)) + (180.0 if rng.random() < 0.5 else 0)
    u = scenes.rotate2((1.0, 0.0), math.radians(yaw))
    start = -u * distance / 2
    hl, hw = scenes.CAR_LENGTH / 2, scenes.CAR_HALF_WIDTH
    # roles: which objects the layout aims to put in the car's path
    if level == 1:
        n_hit = int(rng.integers(1, 3)) if aim == 0 else 0
        n_hit = min(n_hit, n_objects - 1)
        roles = ["hit"] * n_hit
    else:
        roles = ["hit"] if aim < n_objects else []
    roles += ["near"]
    while len(roles) < n_objects:
        roles.append(str(rng.choice(["near", "short", "far"] if level == 2 else ["near", "far"])))
    order = rng.permutation(n_objects)
    if level == 2 and aim < n_objects:  # the aimed object gets option slot `aim`
        hit_pos = int(np.nonzero(order == 0)[0][0])
        order[[hit_pos, aim]] = order[[aim, hit_pos]]
    roles = [roles[i] for i in order]
    colours = _colours(rng, n_objects)
    objects, placed, obbs = [], [], []
    for i, role in enumerate(roles):
        shape = str(rng.choice(scenes.SHAPES))
        dims = scenes.random_dims(rng, shape)
        rad = _round_radius(shape, dims)
        ohl, ohw, rnd = scenes.footprint(shape, dims)
        for _ in range(60):
            oyaw = float(rng.uniform(0, 180)) if shape == "box" else 0.0
            rel = math.radians(oyaw - yaw)
            lat_extent = ohw if rnd else ohl * abs(math.sin(rel)) + ohw * abs(math.cos(rel))
            along_extent = ohl if rnd else ohl * abs(math.cos(rel)) + ohw * abs(math.sin(rel))
            if role == "hit":
                along = rng.uniform(hl + along_extent + 0.04, distance + hl + along_extent - 0.02)
                lat = rng.uniform(-1, 1) * max(hw + lat_extent - 0.02, 0.0)
            elif role == "near":
                along = rng.uniform(hl + along_extent + 0.04, distance + hl)
                lat = rng.choice([-1, 1]) * (hw + lat_extent + rng.uniform(0.012, 0.06))
            elif role == "short":  # straight ahead but beyond where the car stops
                along = distance + hl + along_extent + rng.uniform(0.012, 0.06)
                lat = rng.uniform(-0.5, 0.5) * hw
            else:
                along = rng.uniform(0.0, distance + 0.2)
                lat = rng.choice([-1, 1]) * (hw + lat_extent + rng.uniform(0.1, 0.25))
            xy = start + u * along + scenes.rotate2((0.0, lat), math.radians(yaw))
            if all(np.hypot(*(xy - q)) > rad + r2 + 0.03 for q, r2 in placed):
                break
        else:
            raise Reject("no_room")
        placed.append((xy, rad))
        z = scenes.height_of(shape, dims) / 2
        name = f"{colours[i]}-{shape}"
        objects.append(scenes.shape_object(name, shape, colours[i], dims, (xy[0], xy[1], z), oyaw))
        obbs.append((xy[0], xy[1], math.radians(oyaw), ohl, ohw, 1.0 if rnd else 0.0))
    obbs = np.asarray(obbs, dtype=float)
    car = np.array([start[0], start[1], hl, hw])
    _, clear0 = swept_obb_prefilter(car, math.radians(yaw), 0.0, obbs)
    if clear0.min() < 0.01:
        raise Reject("initial_interpenetration")
    pre_hit, clearance = swept_obb_prefilter(car, math.radians(yaw), distance, obbs)
    names = [o["name"] for o in objects]
    cam = scenes.camera((0.0, 0.0, 0.03), float(rng.uniform(1.0, 1.25)), _elev(rng, s),
                        0.0 if level == 1 else float(rng.uniform(-35, 35)))  # fmt: skip
    car_parts = scenes.car_objects(start, yaw)

    def simulate(kept):
        spec = scenes.base_spec(s.size, cam)
        spec["objects"] = car_parts + [o for o in objects if o["name"] in kept]
        scene = physics.compile_spec(spec)
        vel = np.array([u[0], u[1], 0.0]) * scenes.CAR_SPEED
        drive = physics.Drive([p["name"] for p in car_parts], vel, distance / scenes.CAR_SPEED)
        ev = physics.run(scene, drive.duration + 0.3, watch=drive.names, drive=drive)
        return spec, {k: v for k, v in ev.contacts.items() if k in kept}

    spec, contacts = simulate(set(names))
    hits = sorted(contacts)
    s.count("prefilter_layouts")
    s.count("prefilter_agree", int(set(hits) == {n for n, h in zip(names, pre_hit) if h}))
    for n, c in zip(names, clearance):
        if n not in hits and c < 0.01:
            raise Reject("ambiguous_clearance")
    motion = {"object": "car", "kind": "linear", "direction": [float(u[0]), float(u[1]), 0.0],
              "distance": round(distance, 3), "speed": scenes.CAR_SPEED}  # fmt: skip
    gt = {"hits": hits, "contacts": contacts, "clearance": {n: round(float(c), 4) for n, c in zip(names, clearance)},
          "prefilter_hits": [n for n, h in zip(names, pre_hit) if h]}  # fmt: skip
    labels = [_label(o["colour"], _shape_of(o)) for o in objects]
    stem_d = f"{distance:.2f}"
    if level == 1:
        answer = 0 if hits else 1
        if answer != aim:
            raise Reject("aim_missed")
        question = f"If the car moves forward {stem_d} m, will it hit any object?"
        options = ["Yes", "No", NOT_SURE]
    else:
        fixes = []
        for n in names:  # interventions: remove each object in turn and drive again
            _, without = simulate(set(names) - {n})
            if not without:
                fixes.append(n)
        gt["interventions"] = fixes
        if hits and len(fixes) != 1:
            raise Reject("not_unique")
        answer = names.index(fixes[0]) if hits else n_objects
        if answer != aim:
            raise Reject("aim_missed")
        question = (f"If the car moves forward {stem_d} m, which single object must be removed so that "
                    "the car hits nothing?")  # fmt: skip
        options = [*labels, "None", NOT_SURE]
        motion["removal_candidates"] = names
    return Draft(spec, format_question(question, options), options, answer, motion, gt, names)


def _shape_of(obj: dict) -> str:
    return {"capsule": "vase"}.get(obj["type"], obj["type"])


# ---------------------------------------------------------------- compatibility

_RIM = 0.012  # container wall / bottom thickness
DROP_SECONDS = 2.0


def _drop_scene(s: Settings, cam, container_parts, obj):
    spec = scenes.base_spec(s.size, cam)
    spec["objects"] = container_parts + [obj]
    return physics.compile_spec(spec)


def _drop_inside(s: Settings, cam, container_parts, inner, height, objs: list[dict]) -> list[tuple[bool, list, float]]:
    """Each object released over its own copy of the container: (inside, rest COM, wall distance) per
    object, the 2 s of free fall and settling of all of them in one batched mujoco.rollout call."""
    sims = [_drop_scene(s, cam, container_parts, obj) for obj in objs]
    out = []
    for com in physics.rollout_final(sims, [o["name"] for o in objs], DROP_SECONDS):
        inside = physics.inside_box(com, (0.0, 0.0), inner, _RIM, _RIM + height)
        out.append((inside, com.tolist(), physics.wall_distance(com, (0.0, 0.0), inner)))
    return out


def compatibility(rng, level: int, aim: int, s: Settings, n_objects: int) -> Draft:
    inner = float(rng.uniform(0.10, 0.15))
    height = float(rng.uniform(0.06, 0.09))
    parts = scenes.container_objects((0.0, 0.0), inner, height)
    cam = scenes.camera((0.0, 0.12 if level == 2 else 0.0, 0.08), float(rng.uniform(0.75, 0.9) + 0.25 * (level == 2)),
                        _elev(rng, s),
                        0.0 if level == 1 else float(rng.uniform(-30, 30)))  # fmt: skip
    rim = _RIM + height

    def candidate(colour, fits, pos, margin):
        shape = str(rng.choice(["box", "cylinder"]))
        ratio = 1 - rng.uniform(*margin) if fits else 1 + rng.uniform(*margin)
        w = inner * ratio
        h = float(rng.uniform(0.035, 0.06))
        dims = {"w": w, "d": w, "h": h} if shape == "box" else {"r": w / 2, "h": h}
        return scenes.shape_object(f"{colour}-{shape}", shape, colour, dims, pos), shape

    if level == 1:
        colour = _colours(rng, 1)[0]
        drop = rim + float(rng.uniform(0.15, 0.3))
        off = rng.uniform(-0.004, 0.004, size=2)
        obj, shape = candidate(colour, aim == 0, (off[0], off[1], drop), (0.08, 0.25))
        obj["pos"][2] = drop + (obj.get("size", [0, 0, 0])[2] if shape == "box" else obj["length"]) / 2
        ((inside, com, wall),) = _drop_inside(s, cam, parts, inner, height, [obj])
        if wall < 0.003:
            raise Reject("near_wall")
        answer = 0 if inside else 1
        if answer != aim:
            raise Reject("aim_missed")
        spec = scenes.base_spec(s.size, cam)
        spec["objects"] = parts + [obj]
        question = f"If {_label(colour, shape)} is released, will it end up inside the white container?"
        options = ["Yes", "No", NOT_SURE]
        motion = {"object": obj["name"], "kind": "release"}
        gt = {"inside": {obj["name"]: inside}, "rest_com": {obj["name"]: com}, "inner_width": inner,
              "inner_height": height, "width_ratio": (obj.get("size") or [2 * obj.get("radius", 0)])[0] / inner}  # fmt: skip
        return Draft(spec, format_question(question, options), options, answer, motion, gt, [obj["name"]])
    colours = _colours(rng, 3)
    objs, shapes, inside, coms = [], [], {}, {}
    dropped = []
    for i, colour in enumerate(colours):
        obj, shape = candidate(colour, i == aim, ((i - 1) * 0.3, 0.3, 0.0), (0.03, 0.12))
        full_h = obj["size"][2] if shape == "box" else obj["length"]
        obj["pos"][2] = full_h / 2
        dropped.append({**obj, "pos": [0.0, 0.0, rim + 0.2 + full_h / 2]})
        objs.append(obj)
        shapes.append(shape)
    for obj, (ins, com, wall) in zip(objs, _drop_inside(s, cam, parts, inner, height, dropped)):
        if wall < 0.003:
            raise Reject("near_wall")
        inside[obj["name"]], coms[obj["name"]] = ins, com
    fitting = [i for i, o in enumerate(objs) if inside[o["name"]]]
    if len(fitting) != 1:
        raise Reject("not_unique")
    if fitting[0] != aim:
        raise Reject("aim_missed")
    spec = scenes.base_spec(s.size, cam)
    spec["objects"] = parts + objs
    options = [*(_label(c, sh) for c, sh in zip(colours, shapes)), NOT_SURE]
    question = "Which of these objects would end up inside the white container if dropped into it from above?"
    motion = {"object": [o["name"] for o in objs], "kind": "release"}
    gt = {"inside": inside, "rest_com": coms, "inner_width": inner, "inner_height": height}
    return Draft(spec, format_question(question, options), options, aim, motion, gt, [o["name"] for o in objs])


# ---------------------------------------------------------------- occlusion

SHIFT = 0.4


def _visibility(s: Settings, scene, data, target: str, movable: list[str], cam: dict, seed: int) -> dict:
    K = _camera_K(cam, s.size)
    T = _camera_T(scene, data)
    v_ray = visibility.ray_fraction(scene, data, target, cam["pos"], K, T, s.size, s.size, seed=seed)
    out = {"ray": round(v_ray, 4)}
    if s.renderer is not None:
        v_seg, pix = visibility.seg_fraction(s.renderer, scene, data, target, movable)
        out.update(seg=round(v_seg, 4), pixels=pix)
    return out


def _camera_K(cam, size):
    from methodkit.core.render import camera as _camera

    return _camera.intrinsics(cam["fovy"], size, size)


def _camera_T(scene, data):
    from methodkit.core.render import camera as _camera

    return _camera.world_from_camera(data.cam_xpos[0], data.cam_xmat[0])


def _verdict(v: dict) -> str:
    """hidden / visible / ambiguous; the two readings must agree when both exist."""
    kinds = {visibility.classify(v["ray"])}
    if "seg" in v:
        kinds.add(visibility.classify(v["seg"]))
    if len(kinds) > 1:
        return "disagree"
    return kinds.pop()


def occlusion(rng, level: int, aim: int, s: Settings, n_objects: int) -> Draft:
    n_targets = 1 if level == 1 else _n_targets(n_objects)
    az = 0.0 if level == 1 else float(rng.choice([-1, 1]) * rng.uniform(15, 30))
    left = scenes.camera_left(scenes.camera((0.0, 0.0, 0.0), 1.0, 30.0, az))
    aim_at = np.array([0.0, 0.15]) - left * 0.17  # the mover comes from the right: look a little that way
    cam = scenes.camera((float(aim_at[0]), float(aim_at[1]), 0.06), float(rng.uniform(1.35, 1.55)), _elev(rng, s), az)
    fwd = np.asarray(cam["target"][:2]) - np.asarray(cam["pos"][:2])
    fwd /= np.linalg.norm(fwd)  # the camera's forward on the ground
    colours = _colours(rng, n_targets + 1)
    centre = np.array([0.0, 0.22])
    targets, shapes = [], []
    spacing = 0.2
    for i in range(n_targets):
        shape = str(rng.choice(scenes.SHAPES))
        dims = scenes.random_dims(rng, shape)
        xy = centre - left * (i - (n_targets - 1) / 2) * spacing
        targets.append(scenes.shape_object(f"{colours[i]}-{shape}", shape, colours[i], dims,
                                           (xy[0], xy[1], scenes.height_of(shape, dims) / 2)))  # fmt: skip
        shapes.append(shape)
    mw, mh = float(rng.uniform(0.13, 0.17)), float(rng.uniform(0.34, 0.42))
    depth_gap = float(rng.uniform(0.14, 0.2))
    hidden_slot = aim if (level == 2 and aim < n_targets) else (0 if (level == 1 and aim == 0) else None)
    lateral_of = [float(np.dot(np.asarray(t["pos"][:2]) - centre, left)) for t in targets]
    if hidden_slot is not None:
        final_lat = lateral_of[hidden_slot] + rng.uniform(-0.015, 0.015)
    else:
        extreme = max(abs(x) for x in lateral_of)
        final_lat = rng.choice([-1, 1]) * (extreme + mw / 2 + rng.uniform(0.09, 0.16))
        if level == 2 and rng.random() < 0.5:  # passes between targets: a near miss in the image
            final_lat = float(rng.choice([-1, 1])) * spacing / 2 if n_targets == 2 else float(rng.choice([-1, 1])) * spacing * 1.5
    m_final = centre + left * final_lat - fwd * depth_gap
    m_start = m_final - left * SHIFT
    mover = {"name": f"{colours[-1]}-box", "type": "box", "size": [mw, 0.05, mh],
             "pos": [float(m_start[0]), float(m_start[1]), mh / 2], "colour": colours[-1],
             "euler": [0, 0, math.degrees(math.atan2(left[1], left[0]))], "mass": 500 * mw * 0.05 * mh,
             "friction": scenes.FRICTION}  # fmt: skip
    spec = scenes.base_spec(s.size, cam)
    spec["objects"] = targets + [mover]
    scene = physics.compile_spec(spec)
    data = scene.new_data()
    names = [t["name"] for t in targets]
    movable = [*names, mover["name"]]
    before = {n: _visibility(s, scene, data, n, movable, cam, i) for i, n in enumerate(names)}
    for n in names:
        if _verdict(before[n]) != "visible":
            raise Reject("target_not_visible")
    physics.place(data, scene, mover["name"], [m_final[0], m_final[1], mh / 2])
    physics.mujoco.mj_forward(scene.model, data)
    after = {n: _visibility(s, scene, data, n, movable, cam, 100 + i) for i, n in enumerate(names)}
    verdicts = {n: _verdict(v) for n, v in after.items()}
    if "disagree" in verdicts.values():
        raise Reject("ray_disagrees")
    if "ambiguous" in verdicts.values():
        raise Reject("ambiguous_visibility")
    hidden = [n for n in names if verdicts[n] == "hidden"]
    motion = {"object": mover["name"], "kind": "translate", "direction": [float(left[0]), float(left[1]), 0.0],
              "distance": SHIFT}  # fmt: skip
    gt = {"visible_before": before, "visible_after": after, "hidden": hidden}
    m_label = _label(colours[-1], "box")
    stem = f"If {m_label} moves {SHIFT:.1f} m to its left (as seen from this viewpoint),"
    if level == 1:
        answer = 0 if hidden else 1
        question = f"{stem} will {_label(colours[0], shapes[0])} become hidden from this viewpoint?"
        options = ["Yes", "No", NOT_SURE]
    else:
        if len(hidden) > 1:
            raise Reject("not_unique")
        answer = names.index(hidden[0]) if hidden else n_targets
        question = f"{stem} which object will become hidden from this viewpoint?"
        options = [*(_label(c, sh) for c, sh in zip(colours, shapes)), "None", NOT_SURE]
    if answer != aim:
        raise Reject("aim_missed")
    return Draft(spec, format_question(question, options), options, answer, motion, gt, movable)


# ---------------------------------------------------------------- trajectory

BALL_R = 0.03
_MAT_TOP = 0.004


def _aim_speed(predict, target: float, ok) -> float:
    """The launch speed (0.01 m/s steps) whose predicted landing is nearest `target` among those `ok` accepts."""
    best = None
    for v0 in np.arange(0.3, 6.0, 0.01):
        p = predict(float(v0))
        if p is not None and ok(p) and (best is None or abs(p["s"] - target) < best[0]):
            best = (abs(p["s"] - target), round(float(v0), 2))
    if best is None or best[0] > 0.01:
        raise Reject("no_speed")
    return best[1]


def trajectory(rng, level: int, aim: int, s: Settings, n_objects: int) -> Draft:
    """A ball thrown, or sent up a frictionless ramp that launches it; at L2 a wall with restitution e
    behind the mats bounces it back. The speed is aimed by drag-free ballistics, the answer simulated."""
    n_mats = 4 if level == 2 else 3
    if aim >= n_mats:
        raise Reject("aim_missed")
    yaw = 0.0 if level == 1 else float(rng.uniform(-35, 35))
    u = scenes.rotate2((1.0, 0.0), math.radians(yaw))
    mat_l, mat_w = 0.18, 0.36
    s0 = float(rng.uniform(0.15, 0.25))
    span = s0 + n_mats * mat_l
    launch_xy = -u * span / 2  # the throw's start, or the ramp's top edge
    colours = _colours(rng, n_mats + 1)
    ball_colour, mat_colours = colours[0], colours[1:]
    order = rng.permutation(n_mats)  # option letters are not the mats' order along the path
    mats = []
    for k in range(n_mats):
        c = launch_xy + u * (s0 + (k + 0.5) * mat_l)
        mats.append(scenes.mat_object(f"{mat_colours[k]}-mat", mat_colours[k], c, mat_l, mat_w, yaw))
    slot_of_mat = {int(order[j]): j for j in range(n_mats)}  # option j shows mat order[j]
    aimed_mat = int(order[aim])
    z_land = BALL_R + _MAT_TOP
    launcher = "ramp" if rng.random() < 0.5 else "throw"
    extra, wall = [], {}
    if level == 2:
        e = round(float(rng.uniform(0.35, 0.8)) * 20) / 20
        behind = min(n_mats - 1, aimed_mat + int(rng.integers(0, 2)))  # the wall stands after this mat
        wall_c = s0 + (behind + 1) * mat_l + float(rng.uniform(0.0, 0.06)) + launchers.WALL_THICKNESS / 2
        wc = launch_xy + u * wall_c
        extra.append({"name": "wall", "type": "box", "size": [launchers.WALL_THICKNESS, 0.5, launchers.WALL_HEIGHT],
                      "fixed": True, "colour": "white", "restitution": e, "euler": [0, 0, yaw],
                      "pos": [float(wc[0]), float(wc[1]), launchers.WALL_HEIGHT / 2 + _MAT_TOP]})  # fmt: skip
        wall = {"wall_s": wall_c - launchers.WALL_THICKNESS / 2 - BALL_R, "restitution": e,
                "wall_top": launchers.WALL_HEIGHT - BALL_R - 0.02}  # fmt: skip
    target = s0 + aimed_mat * mat_l + float(rng.uniform(0.045, mat_l - 0.045))
    if launcher == "ramp":
        length, pitch = float(rng.uniform(0.22, 0.3)), int(rng.integers(15, 31))
        ramp = launchers.ramp_object("ramp", "black", launch_xy, u, length, pitch)
        extra.append(ramp)
        pose = launchers.ramp_pose(ramp)
        start = pose["edge"] - pose["up"] * 0.6 * length  # contact point 40% up the slope
        climb = 0.6 * length * math.sin(math.radians(pitch))
        edge_c = pose["edge"] + BALL_R * pose["normal"]  # the centre as the ball leaves the edge
        c0 = launchers.seat_on_ramp(start + BALL_R * pose["normal"], BALL_R, pose)
        s_c, z_c = float(np.dot(edge_c[:2] - launch_xy, u)), float(edge_c[2])
        elevation = pitch

        def predict(v0):
            v_edge = launchers.takeoff(v0, pitch, climb, G)
            return None if v_edge is None else launchers.landing(s_c, z_c, v_edge, pitch, z_land, G, **wall)
    else:
        h0 = float(rng.uniform(0.12, 0.3))
        elevation = int(round(float(rng.uniform(20, 55))))
        c0 = np.array([launch_xy[0], launch_xy[1], h0])

        def predict(v0):
            return launchers.landing(0.0, h0, v0, elevation, z_land, G, **wall)

    def ok(p):
        if level == 1:
            return not p["hit_wall"]
        return p["hit_wall"] and BALL_R + 0.02 < p["z_wall"]  # meets the wall's face, high enough

    v0 = _aim_speed(predict, target, ok)
    th = math.radians(elevation)
    direction = pose["up"] if launcher == "ramp" else np.array([math.cos(th) * u[0], math.cos(th) * u[1], math.sin(th)])
    ball = {"name": f"{ball_colour}-sphere", "type": "sphere", "radius": BALL_R, "colour": ball_colour,
            "pos": [float(x) for x in c0], "velocity": [float(v0 * x) for x in direction], "mass": 0.05,
            "friction": scenes.FRICTION}  # fmt: skip
    s_lo = float(np.dot(ramp["pos"][:2] - launch_xy, u)) * 2 if launcher == "ramp" else -0.05
    s_hi = span + (0.12 if level == 2 else 0.0)
    centre = launch_xy + u * (s_lo + s_hi) / 2
    dist = max(float(rng.uniform(1.55, 1.75)), 1.33 * (s_hi - s_lo))
    cam = scenes.camera((float(centre[0]), float(centre[1]), 0.05), dist, _elev(rng, s),
                        0.0 if level == 1 else float(rng.uniform(-20, 20)))  # fmt: skip
    spec = scenes.base_spec(s.size, cam)
    spec["objects"] = [ball, *mats, *extra]
    scene = physics.compile_spec(spec)
    first = physics.first_floor_contact(scene, 3.0, ball["name"], ignore={"wall", "ramp"})
    if first is None or first["other"] not in {m["name"] for m in mats}:
        raise Reject("off_mats")
    k = [m["name"] for m in mats].index(first["other"])
    along = float(np.dot(np.asarray(first["point"][:2]) - launch_xy, u)) - s0 - k * mat_l
    lateral = abs(float(np.dot(np.asarray(first["point"][:2]) - launch_xy, [-u[1], u[0]])))
    if min(along, mat_l - along) < 0.03 or mat_w / 2 - lateral < 0.03:
        raise Reject("near_border")
    answer = slot_of_mat[k]
    if answer != aim:
        raise Reject("aim_missed")
    options = [*(f"the {mat_colours[order[j]]} mat" for j in range(n_mats)), NOT_SURE]
    if launcher == "ramp":
        stem = (f"The {ball_colour} ball slides up the black ramp ({elevation} degrees, frictionless) at {v0:.2f} m/s "
                "and flies off its top edge towards the mats.")  # fmt: skip
    else:
        stem = (f"The {ball_colour} ball is thrown straight towards the mats at {v0:.2f} m/s, {elevation} degrees "
                "above the horizontal.")  # fmt: skip
    if wall:
        stem += (" The white wall is frictionless and bounces a ball back with a coefficient of restitution of "
                 f"{wall['restitution']:.2f}.")  # fmt: skip
    question = stem + " On which mat will it first land?"
    motion = {"object": ball["name"], "kind": "launch", "velocity": v0, "elevation": elevation, "launcher": launcher}
    if wall:
        motion["restitution"] = wall["restitution"]
    predicted = predict(v0)
    gt = {"landing": first, "landing_mat": first["other"], "ballistic_range": round(predicted["s"], 4),
          "landing_s": round(float(np.dot(np.asarray(first["point"][:2]) - launch_xy, u)), 4),
          "ballistic_mat": int(math.floor((predicted["s"] - s0) / mat_l)), "wall": bool(wall), "launcher": launcher,
          "mat_order": [m["name"] for m in mats]}  # fmt: skip
    return Draft(spec, format_question(question, options), options, answer, motion, gt,
                 [ball["name"], *(m["name"] for m in mats)])  # fmt: skip


SAMPLERS = {"collision": collision, "compatibility": compatibility, "occlusion": occlusion, "trajectory": trajectory}

"""Ramps as launchers and walls with restitution: the simulation against drag-free ballistics, and the
COW's proxy simulation reproducing the generated answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from methodkit.tools.causal_spatial import cow, grammar, launchers, physics, scenes, tasks

G = tasks.G
R = tasks.BALL_R


def _scene(objects):
    spec = scenes.base_spec(64, scenes.camera((0, 0, 0), 1.0, 30, 0))
    spec["objects"] = objects
    return physics.compile_spec(spec)


def _ball(pos, vel):
    return {"name": "red-sphere", "type": "sphere", "radius": R, "pos": [float(x) for x in pos],
            "velocity": [float(x) for x in vel], "mass": 0.05, "friction": scenes.FRICTION}  # fmt: skip


def _wall(x, e=None):
    w = {"name": "wall", "type": "box", "size": [0.03, 0.5, 0.26], "pos": [x, 0.0, 0.13], "fixed": True}
    if e is not None:
        w["restitution"] = e
    return w


def _rebound(e, v):
    """Normal speed after a horizontal hit on the wall, over the speed before."""
    sc = _scene([_wall(0.5, e), _ball((0.35, 0.0, 0.15), (v, 0.0, 0.0))])
    data = sc.new_data()
    adr = sc.objects["red-sphere"].free_qvel
    touched = False
    for _ in range(400):
        physics.mujoco.mj_step(sc.model, data)
        if data.ncon:
            touched = True
        elif touched:
            break
    assert touched
    return -float(data.qvel[adr]) / v


@pytest.mark.parametrize("e", [0.4, 0.7])
def test_a_wall_with_restitution_returns_e_times_the_speed(e):
    for v in (1.0, 2.0):
        assert abs(_rebound(e, v) - e) < 0.04
    assert _rebound(None, 2.0) < 0.2  # MuJoCo's default soft contact absorbs the hit


def test_dampratio_solves_the_no_tension_rebound():
    for e in (0.3, 0.6, 0.9):
        z = physics.dampratio_for(e)
        w, dt = 1.0, 1e-5  # the spring-dashpot x'' = -w^2 x - 2 z w x', ended when its force would pull
        x, v = 0.0, -1.0
        while True:
            a = -w * w * x - 2 * z * w * v
            v += a * dt
            x += v * dt
            if x < 0 and -(w * w * x + 2 * z * w * v) <= 0:  # penetration x < 0; the push is -(...)
                break
        assert abs(v - e) < 1e-3


def _ramp_scene(v0, pitch=20, length=0.25):
    u = np.array([1.0, 0.0])
    ramp = launchers.ramp_object("ramp", "black", (0.0, 0.0), u, length, pitch)
    pose = launchers.ramp_pose(ramp)
    start = launchers.seat_on_ramp(pose["edge"] - pose["up"] * 0.6 * length, R, pose)
    return _scene([ramp, _ball(start, v0 * pose["up"])]), pose, 0.6 * length * math.sin(math.radians(pitch))


def _predicted_ramp_landing(v0, pose, climb, pitch=20):
    edge_c = pose["edge"] + R * pose["normal"]
    v_edge = launchers.takeoff(v0, pitch, climb, G)
    return launchers.landing(float(edge_c[0]), float(edge_c[2]), v_edge, pitch, R, G)["s"]


def test_a_ramp_launched_ball_lands_past_or_short_of_a_target_as_ballistics_predicts():
    landed, predicted = {}, {}
    for v0 in (1.6, 2.2):
        sc, pose, climb = _ramp_scene(v0)
        assert abs(pose["pitch"] - 20) < 1e-6 and abs(pose["edge"][0]) < 1e-9
        first = physics.first_floor_contact(sc, 2.0, "red-sphere", ignore={"ramp"})
        assert first is not None and first["other"] == "world"
        landed[v0], predicted[v0] = first["point"][0], _predicted_ramp_landing(v0, pose, climb)
        assert abs(landed[v0] - predicted[v0]) < 0.02
    target = (predicted[1.6] + predicted[2.2]) / 2
    assert landed[1.6] < target < landed[2.2]  # short of it at the lower speed, past it at the higher


def test_a_bounced_ball_lands_where_the_reflected_arc_predicts():
    for e in (0.4, 0.75):
        v0, elev, h0 = 2.4, 30, 0.15
        face = 0.5 - 0.015 - R
        sc = _scene([_wall(0.5, e), _ball((0.0, 0.0, h0), (v0 * math.cos(math.radians(elev)), 0.0,
                                                             v0 * math.sin(math.radians(elev))))])  # fmt: skip
        first = physics.first_floor_contact(sc, 2.0, "red-sphere", ignore={"wall"})
        pred = launchers.landing(0.0, h0, v0, elev, R, G, wall_s=face, restitution=e)
        assert pred["hit_wall"]
        assert abs(first["point"][0] - pred["s"]) < 0.04


def test_a_tilted_plank_is_fitted_as_the_ramp():
    rng = np.random.default_rng(0)
    u = scenes.rotate2((1.0, 0.0), math.radians(30))
    R3 = launchers.ramp_frame(u, 22)
    a, b = rng.uniform(-0.12, 0.12, 600), rng.uniform(-0.05, 0.05, 600)
    pts = np.array([0.1, 0.2, 0.06]) + a[:, None] * R3[:, 0] + b[:, None] * R3[:, 1]
    ramp = launchers.fit_ramp(pts + rng.normal(0, 5e-4, pts.shape), "r", "black")
    pose = launchers.ramp_pose(ramp)
    assert abs(pose["pitch"] - 22) < 1.0 and float(np.dot(pose["up"][:2], u)) > 0.99 * math.cos(math.radians(22))
    assert abs(ramp["size"][0] - 0.24) < 0.01
    upright = pts.copy()
    upright[:, 2], upright[:, 1] = upright[:, 1], 0.0  # a wall's face is no ramp
    assert launchers.fit_ramp(upright, "w", "white") is None


@pytest.mark.parametrize("level", [1, 2])
def test_the_cow_proxy_simulation_lands_where_the_ground_truth_does(level):
    """The oracle COW, from the question alone (ramp speed up the slope, the stated restitution), lands
    the ball on the answer's mat; without the stated restitution the ball drops at the wall's foot."""
    s = tasks.Settings(size=64)
    done = 0
    for k in range(40):
        try:
            d = tasks.trajectory(np.random.default_rng(500 + k), level, k % (2 + level), s, 3)
        except tasks.Reject:
            continue
        g = grammar.ground(d.question)
        assert g.launcher == d.gt["launcher"] and g.restitution == d.motion.get("restitution")
        world = cow.oracle_world(d.spec, "trajectory", 64)
        out = cow.simulate(world, g, frames=2)
        assert out.events["landing"]["object"] == d.gt["landing_mat"].split("-")[0]
        if level == 2:
            for o in world.objects:
                o.pop("restitution", None)
            g.restitution = None
            dead = cow.simulate(world, g, frames=2)
            wall = np.asarray(next(o for o in world.objects if o["name"] == "wall")["pos"][:2])

            def gap(ev, wall=wall):
                return float(np.linalg.norm(np.asarray(ev["landing"]["point"][:2]) - wall))

            assert gap(dead.events) + 0.01 < gap(out.events)  # it drops nearer the wall
        done += 1
        if done == 3:
            break
    assert done == 3


def test_the_perceived_ramp_launches_the_proxy_ball_onto_the_answer_mat(renderer):
    """From the rendered RGB-D view alone: the ramp is found as a tilted plane (pitch within 3 deg),
    and the proxy simulation sends the ball off it onto the simulated answer's mat."""
    s = tasks.Settings(size=128)
    right, seen = 0, 0
    for k in range(60):
        try:
            d = tasks.trajectory(np.random.default_rng(700 + k), 1 + k % 2, k % 3, s, 3)
        except tasks.Reject:
            continue
        if d.gt["launcher"] != "ramp":
            continue
        scene = physics.compile_spec(d.spec)
        frame = renderer.render(scene, scene.new_data(), "cam")
        sensors = {"depth": frame.depth, "ids": frame.segmentation, "K": frame.K, "T": frame.T}
        world = cow.perceived_world(frame.rgb, sensors, "trajectory", 128)
        ramp = next(o for o in world.objects if o["name"] == world.ramp)
        assert abs(launchers.ramp_pose(ramp)["pitch"] - d.motion["elevation"]) < 3.0
        out = cow.simulate(world, grammar.ground(d.question), frames=2)
        right += out.events["landing"]["object"] == d.gt["landing_mat"].split("-")[0]
        seen += 1
        if seen == 4:
            break
    assert seen == 4 and right >= 3

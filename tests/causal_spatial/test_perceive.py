"""Lifting and primitive fits: known shapes rendered from a known camera come back with their sizes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from methodkit.tools.causal_spatial import grammar, perceive, physics, scenes


def test_min_area_rect_finds_a_rotated_rectangle_and_tells_disks_apart():
    rng = np.random.default_rng(1)
    local = rng.uniform(-1, 1, size=(4000, 2)) * [0.05, 0.03]
    yaw = math.radians(35)
    rot = np.array([[math.cos(yaw), -math.sin(yaw)], [math.sin(yaw), math.cos(yaw)]])
    centre, ext, ang, fill = perceive.min_area_rect(local @ rot.T + [0.2, -0.1])
    np.testing.assert_allclose(sorted(ext), [0.06, 0.1], atol=2e-3)
    np.testing.assert_allclose(centre, [0.2, -0.1], atol=2e-3)
    assert min(abs(math.degrees(ang) - a) % 180 for a in (35, 125)) < 2 or min(
        abs((math.degrees(ang) - a) % 180) for a in (35, 125)) < 2  # fmt: skip
    assert fill > 0.95
    disk = rng.normal(size=(4000, 2))
    disk = disk / np.linalg.norm(disk, axis=1, keepdims=True) * np.sqrt(rng.uniform(size=(4000, 1))) * 0.04
    assert perceive.min_area_rect(disk)[3] < 0.85


def test_lift_inverts_the_projection():
    from methodkit.core.render import camera

    K = camera.intrinsics(45, 64, 48)
    T = np.eye(4)
    T[:3, 3] = [0.1, 0.2, 0.3]
    depth = np.full((48, 64), 2.0, dtype=np.float32)
    ids = np.zeros((48, 64), dtype=np.int32)
    ids[10:20, 30:40] = 3
    pts = perceive.lift(depth, ids, K, T)[3]
    uv, z = camera.project(K, T, pts)
    np.testing.assert_allclose(z, 2.0)
    assert set(np.round(uv[:, 0]).astype(int)) == set(range(30, 40))


def test_colour_names_from_hue_and_scenery_from_saturation():
    assert perceive.colour_of((0.5, 0.07, 0.07))[0] == "red"  # shaded red is still red
    assert perceive.colour_of((0.05, 0.4, 0.45))[0] == "cyan"
    assert perceive.colour_of((0.9, 0.9, 0.88)) == ("scenery", "white")
    assert perceive.colour_of((0.04, 0.04, 0.05)) == ("scenery", "black")


@pytest.mark.parametrize(
    "shape, dims",
    [("box", {"w": 0.08, "d": 0.05, "h": 0.1}), ("cylinder", {"r": 0.035, "h": 0.09}), ("sphere", {"r": 0.04}),
     ("vase", {"r": 0.03, "h": 0.11})],
)  # fmt: skip
def test_fitted_primitive_recovers_shape_and_size(renderer, shape, dims):
    spec = scenes.base_spec(128, scenes.camera((0.0, 0.0, 0.05), 0.6, 40, 20), shadows=False)
    h = scenes.height_of(shape, dims)
    spec["objects"] = [scenes.shape_object("red-x", shape, "red", dims, (0.01, -0.02, h / 2), 30.0)]
    scene = physics.compile_spec(spec)
    frame = renderer.render(scene, scene.new_data(), "cam")
    prims = perceive.perceive(frame.rgb, frame.depth, frame.segmentation, frame.K, frame.T)
    assert len(prims) == 1 and prims[0].colour == "red"
    p = prims[0]
    assert p.shape == shape
    np.testing.assert_allclose(p.centre[:2], [0.01, -0.02], atol=0.006)
    assert abs(p.size[2] - h) < 0.008
    if shape == "box":
        assert abs(sorted(p.size[:2])[0] - 0.05) < 0.008 and abs(sorted(p.size[:2])[1] - 0.08) < 0.008
    else:
        assert abs(p.radius - dims["r"]) < 0.006


def test_grammar_grounds_each_task():
    g = grammar.ground("If the car moves forward 0.62 m, will it hit any object?\n(A) Yes\n(B) No\n(C) Not sure")
    assert (g.task, g.kind, g.distance) == ("collision", "linear", 0.62)
    g = grammar.ground("If the cyan box moves 0.4 m to its left (as seen from this viewpoint), will the red ball "
                       "become hidden from this viewpoint?\n(A) Yes\n(B) No\n(C) Not sure")  # fmt: skip
    assert (g.task, g.mover, g.distance, g.targets) == ("occlusion", "cyan", 0.4, ["red"])
    g = grammar.ground("The blue ball is thrown straight towards the mats at 2.35 m/s, 40 degrees above the "
                       "horizontal. On which mat will it first land?\n(A) the red mat\n(B) the green mat\n(C) Not sure")  # fmt: skip
    assert (g.task, g.speed, g.elevation, g.targets) == ("trajectory", 2.35, 40.0, ["red", "green"])

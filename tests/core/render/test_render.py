"""Frames: objects appear where K and T project them, depth is metric, segmentation names bodies,
the same spec and seed give the same bytes, and one renderer serves many frames."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from methodkit.core.render import build, camera, video
from methodkit.core.render.physics import simulate

from .conftest import scene_spec

BALL = np.array([0.3, -0.2, 0.5])
RADIUS = 0.08


def _ball_scene(**extra):
    objects = [
        {"name": "ball", "type": "sphere", "radius": RADIUS, "pos": BALL.tolist(), "colour": "red", "fixed": True}
    ]
    cameras = [
        {"name": "oblique", "pos": [2.0, 1.0, 1.2], "target": [0.0, 0.0, 0.4], "fovy": 50},
        {"name": "side", "pos": [0.3, -2.5, 0.9], "target": [0.5, 0.0, 0.3], "fovy": 40},
    ]
    return build.build(scene_spec(objects, cameras, **extra))


@pytest.mark.parametrize("cam", ["oblique", "side"])
def test_object_lands_on_the_pixel_K_and_T_project_it_to(renderer, cam):
    scene = _ball_scene()
    frame = renderer.render(scene, scene.new_data(), cam)
    ball_id = scene.objects["ball"].body_id
    (u, v) = camera.project(frame.K, frame.T, BALL)[0][0]
    rows, cols = np.nonzero(frame.segmentation == ball_id)
    assert rows.size > 30  # the ball is really there, several pixels wide
    assert abs(cols.mean() - u) <= 1.0 and abs(rows.mean() - v) <= 1.0
    assert frame.segmentation[round(v), round(u)] == ball_id
    red = frame.rgb[round(v), round(u)].astype(int)
    assert red[0] > 2 * red[1] and red[0] > 2 * red[2]  # and it is drawn in its colour


def test_depth_is_the_distance_along_the_camera_axis(renderer):
    scene = _ball_scene()
    frame = renderer.render(scene, scene.new_data(), "oblique")
    (u, v) = camera.project(frame.K, frame.T, BALL)[0][0]
    col, row = round(u), round(v)
    # The ray through that pixel's centre meets the sphere's near side at distance s; its Z is s * d_z.
    ray_cam = np.array([(col - frame.K[0, 2]) / frame.K[0, 0], (row - frame.K[1, 2]) / frame.K[1, 1], 1.0])
    d = frame.T[:3, :3] @ (ray_cam / np.linalg.norm(ray_cam))
    o = frame.T[:3, 3]
    b = d @ (o - BALL)
    s = -b - np.sqrt(b * b - ((o - BALL) @ (o - BALL) - RADIUS**2))
    expected_z = s * (d @ frame.T[:3, 2])
    assert frame.depth[row, col] == pytest.approx(expected_z, abs=2e-3)
    # and the depth image unprojects back onto the sphere's surface
    pts = camera.unproject(frame.K, frame.T, frame.depth)[frame.segmentation == scene.objects["ball"].body_id]
    assert np.abs(np.linalg.norm(pts - BALL, axis=1) - RADIUS).max() < 0.01


def test_depth_of_a_face_square_to_the_camera(renderer):
    objects = [{"name": "crate", "type": "box", "size": [0.4, 0.4, 0.4], "pos": [0, 0, 0.5], "fixed": True}]
    scene = build.build(scene_spec(objects, [{"name": "c", "pos": [3.0, 0.0, 0.5], "target": [0, 0, 0.5]}]))
    frame = renderer.render(scene, scene.new_data(), "c")
    centre = frame.depth[59:61, 79:81]  # the four pixels around the image centre, on the face at x = 0.2
    np.testing.assert_allclose(centre, 2.8, atol=2e-3)


def test_segmentation_ids_are_the_bodies_of_the_spec_objects(renderer):
    objects = [
        {"name": "red", "type": "sphere", "radius": 0.1, "pos": [0, 0.5, 0.3], "colour": "red", "fixed": True},
        {
            "name": "blue",
            "type": "box",
            "size": [0.2, 0.2, 0.2],
            "pos": [0, -0.5, 0.3],
            "colour": "blue",
            "fixed": True,
        },
        {"name": "pole", "type": "cylinder", "radius": 0.05, "length": 0.4, "pos": [0.5, 0, 0.3], "fixed": True},
        {"name": "pill", "type": "capsule", "radius": 0.05, "length": 0.2, "pos": [-0.6, 0, 0.3], "fixed": True},
    ]
    cams = [{"name": "c", "pos": [3.0, 0.0, 1.5], "target": [0, 0, 0.3]}]
    scene = build.build(scene_spec(objects, cams))
    frame = renderer.render(scene, scene.new_data(), "c")
    import mujoco

    for obj in objects:
        body = mujoco.mj_name2id(scene.model, mujoco.mjtObj.mjOBJ_BODY, obj["name"])
        (u, v) = camera.project(frame.K, frame.T, obj["pos"])[0][0]
        assert frame.segmentation[round(v), round(u)] == body
        assert frame.labels[body] == obj["name"]
    assert frame.segmentation[0, 0] == -1  # sky: background
    sky = frame.rgb[0, 0].astype(int)
    assert sky[2] > sky[0] + 40  # the default sky is blue; "sky": false leaves it black
    dark = build.build(scene_spec(objects, cams, sky=False))
    assert renderer.rgb(dark, dark.new_data(), "c")[0, 0].tolist() == [0, 0, 0]
    assert frame.segmentation[-1, 80] == 0 and frame.labels[0] == "world"  # floor, in front of the objects


def test_links_of_an_articulated_body_share_its_instance_id(renderer):
    objects = [{"name": "someone", "type": "mjcf", "file": "person", "pos": [0, 0, 0]}]
    scene = build.build(scene_spec(objects, [{"name": "c", "pos": [3.0, 0, 1.0], "target": [0, 0, 0.9]}]))
    frame = renderer.render(scene, scene.new_data(), "c")
    seen = frame.segmentation[frame.segmentation > 0]
    assert set(np.unique(seen)) == {scene.objects["someone"].body_id}
    assert len(np.unique(frame.parts[frame.parts > 0])) >= 5  # head, torso, limbs: distinct links


def _png_of(seed: int, width=160, height=120) -> bytes:
    from methodkit.core.render.renderer import Renderer

    objects = [
        {"name": "crate", "type": "box", "size": [0.3, 0.3, 0.3], "pos": [0, 0, 0.15], "texture": "checker"},
        {"name": "ball", "type": "sphere", "radius": 0.1, "pos": [0, 0, 0.6], "colour": "yellow", "jitter": 0.3},
    ]
    scene = build.build(scene_spec(objects, [{"name": "c", "pos": [2, 1, 1.5], "target": [0, 0, 0.3]}]), seed=seed)
    data = scene.new_data()
    simulate(scene, data, 0.2)
    with Renderer(width, height) as r:
        return video.png_bytes(r.rgb(scene, data, "c"))


def test_same_spec_and_seed_give_the_same_png_bytes(renderer):
    first, again, other = _png_of(0), _png_of(0), _png_of(1)
    assert first == again
    assert first != other  # the seed moves the jittered ball


def test_same_frames_give_the_same_mp4_bytes(renderer, tmp_path):
    scene = _ball_scene()
    scene = build.build(
        scene_spec(
            [{"name": "ball", "type": "sphere", "radius": 0.1, "pos": [0, 0, 1.0], "colour": "red"}],
            [{"name": "c", "pos": [2.5, 0, 0.8], "target": [0, 0, 0.5]}],
        )
    )
    data = scene.new_data()
    frames = []
    simulate(scene, data, 0.5, sample_every=0.05, on_sample=lambda t, d: frames.append(renderer.rgb(scene, d, "c")))
    assert len(frames) == 11 and not np.array_equal(frames[0], frames[-1])  # the ball fell
    a, b = tmp_path / "a.mp4", tmp_path / "b.mp4"
    assert video.write_mp4(frames, a, fps=20) == 11
    video.write_mp4(frames, b, fps=20)
    assert hashlib.sha256(a.read_bytes()).digest() == hashlib.sha256(b.read_bytes()).digest()
    decoded = video.read_mp4(a)
    assert decoded.shape == (11, 120, 160, 3)
    err = np.abs(decoded.astype(int) - np.stack(frames).astype(int)).mean()
    assert err < 3.0  # lossy, but the same pictures


def test_png_round_trip_and_depth_millimetres(tmp_path):
    from PIL import Image

    rgb = np.random.default_rng(0).integers(0, 256, (6, 8, 3), dtype=np.uint8)
    video.write_png(rgb, tmp_path / "x.png")
    assert np.array_equal(np.asarray(Image.open(tmp_path / "x.png")), rgb)
    mm = video.depth_to_mm(np.array([[0.0015, 2.5], [np.inf, 70.0]]))
    assert mm.tolist() == [[2, 2500], [0, 0]]
    video.write_png(mm, tmp_path / "d.png")
    assert np.array_equal(np.asarray(Image.open(tmp_path / "d.png")), mm)


def test_one_renderer_serves_frames_cameras_states_and_scenes_then_closes():
    from methodkit.core.render.renderer import Renderer

    scene = _ball_scene()
    objects = [
        {"name": "crate", "type": "box", "size": [0.3, 0.3, 0.3], "pos": [0, 0, 0.15], "texture": "checker"},
        {"name": "someone", "type": "mjcf", "file": "person", "pos": [0.8, 0.5, 0]},
    ]
    other = build.build(scene_spec(objects, [{"name": "c", "pos": [3, 1, 1.5], "target": [0, 0, 0.6]}]))
    r = Renderer(160, 120)
    try:
        for cam in ("oblique", "side", "oblique"):
            r.render(scene, scene.new_data(), cam)
            r.rgb(scene, scene.new_data(), cam)
        switched = r.render(other, other.new_data(), "c")  # another model, the same GL context
        back = r.render(scene, scene.new_data(), "side")
        assert r.contexts_opened == 1
    finally:
        r.close()
    assert r._renderer is None
    for sc, cam, got in ((other, "c", switched), (scene, "side", back)):
        with Renderer(160, 120) as fresh:  # the frames equal those of a renderer made for that scene
            want = fresh.render(sc, sc.new_data(), cam)
        assert np.array_equal(got.rgb, want.rgb) and np.array_equal(got.depth, want.depth)
        assert np.array_equal(got.segmentation, want.segmentation)
    r.rgb(scene, scene.new_data(), "side")  # usable again after close: a fresh context
    assert r.contexts_opened == 2
    r.close()


def test_bad_camera_and_oversized_frames_are_data_errors(renderer):
    from methodkit.core.errors import DataError
    from methodkit.core.render.renderer import Renderer

    scene = _ball_scene()
    with pytest.raises(DataError, match=r"no camera 'top' in the scene \(cameras: oblique, side\)"):
        renderer.render(scene, scene.new_data(), "top")
    with Renderer(320, 240) as big, pytest.raises(DataError, match="exceeds the scene's frame buffer 160x120"):
        big.rgb(scene, scene.new_data(), "side")

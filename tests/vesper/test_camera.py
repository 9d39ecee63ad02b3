"""The MuJoCo camera renderer: depth and instance ids agree with the scene geometry; the GL-missing error."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core.render import camera, gl
from methodkit.tools.vesper import scene as sc

W, H = 160, 120


@pytest.fixture(scope="module")
def cam():
    """A 160x120 CameraRenderer; skipped (with why) where no GL backend can start."""
    sim = sc.Simulator(W, H)
    try:
        r = sc.CameraRenderer(sim, W, H)
        r.clip(_still(0.0), [0.0], "side")
    except gl.GLBackendError as exc:
        pytest.skip(f"no GL backend for off-screen rendering: {exc.message}")
    yield r
    r.close()


def _still(robot_x, person_x=-2.0, person_y_walked=0.0):
    """Robot standing at robot_x; the person standing at (person_x, 3 - person_y_walked)."""
    return sc.Params(robot_x0=robot_x, robot_speed=0.0, robot_x_end=robot_x, person_x=person_x, person_speed=1.0,
                     person_start_s=-person_y_walked, person_stop_y=3.0 - person_y_walked, person_scale=1.0,
                     horizon_s=1.0)  # fmt: skip


def _ray_hit(K, T, point, normal):
    """Pixel of a world point, and the depth (camera Z) at which that pixel's centre ray meets the plane
    through the point with the given normal."""
    (u, v) = camera.project(K, T, point)[0][0]
    col, row = int(round(u)), int(round(v))
    ray = T[:3, :3] @ np.array([(col - K[0, 2]) / K[0, 0], (row - K[1, 2]) / K[1, 1], 1.0])  # Z = 1 along the ray
    s = (np.asarray(normal) @ (np.asarray(point) - T[:3, 3])) / (np.asarray(normal) @ ray)
    return row, col, s


@pytest.mark.parametrize("view", list(sc.CAMERAS))
def test_depth_and_ids_agree_with_the_geometry(cam, view):
    p = _still(0.2, person_x=1.2, person_y_walked=1.5)
    rgb, ids, depth, K, T = cam.clip(p, [0.0], view)
    ids, depth, T = ids[0], depth[0].astype(float), T[0]
    assert ids.dtype == np.int16 and rgb.shape == (1, H, W, 3)
    checks = [  # a point on a flat face, its normal, the instance id there
        ((0.2, -sc.BASE_HALF[1], 0.2), (0, 1, 0), sc.ROBOT),  # centre of the robot base's face towards -y
        ((-1.5, 1.5, 0.0), (0, 0, 1), -1),  # bare floor
        ((-1.0, 4.15, 1.2), (0, 1, 0), sc.FURNITURE),  # the wall's face
    ]
    for point, normal, ident in checks:
        row, col, z = _ray_hit(K, T, point, normal)
        assert ids[row, col] == ident, (view, point)
        assert depth[row, col] == pytest.approx(z, abs=0.01), (view, point)
    # every robot pixel lifts to a point on the robot: inside the base box or an arm link (float16 depth)
    pts = camera.unproject(K, T, depth)
    robot = pts[ids == sc.ROBOT]
    assert len(robot) > 100
    dx = np.maximum(np.abs(robot - [0.2, 0.0, sc.BASE_HALF[2]]) - sc.BASE_HALF, 0)
    d_box = np.linalg.norm(dx, axis=1)
    d_arm = np.min([_seg_dist(robot, np.add(a, [0.2, 0, 0]), np.add(b, [0.2, 0, 0])) - sc.ARM_R for a, b in sc.ARM],
                   axis=0)  # fmt: skip
    assert np.minimum(d_box, d_arm).max() < 0.03
    person = pts[ids == sc.PERSON]
    assert len(person) > 50 and np.allclose(person[:, :2].mean(axis=0), [1.2, 1.5], atol=0.2)


def _seg_dist(pts, a, b):
    ab = b - a
    s = np.clip((pts - a) @ ab / (ab @ ab), 0, 1)
    return np.linalg.norm(pts - (a + s[:, None] * ab), axis=1)


def test_generated_mujoco_clips_track_the_simulation(cam, tmp_path):
    """A tiny MuJoCo-rendered benchmark: sensors carry depth/K/T, and the baselines read them."""
    from methodkit.core import io
    from methodkit.core.endpoint import parse_spec
    from methodkit.tools.vesper import evaluate, taxonomy
    from methodkit.tools.vesper import generate as g

    cfg = g.GenerateConfig(pairs=1, seed=1, width=W, height=H, fps=4, clip_s=2.0, video=False, recognition_frac=0,
                           renderer="mujoco")  # fmt: skip
    result = g.generate(cfg, str(tmp_path / "b"), taxonomy.load())
    assert result.pairs == 1
    items, folder = evaluate.load_bench(str(tmp_path / "b"))
    for it in items:
        s = io.read_arrays(str(folder / it["sensors"]))
        assert s["depth"].dtype == np.float16 and s["ids"].dtype == np.int16 and s["T"].shape == (8, 4, 4)
        scen = io.read_json(str(folder / "scenarios" / f"{it['id']}.json"))
        p, t = sc.Params(**scen["params"]), s["times"][-1]
        times, counts, xy, box = evaluate._tracks(it, folder, [7])
        assert counts[0].min() > 0
        assert xy[0, 0, 0] == pytest.approx(float(p.robot_x(t)) + 0.1, abs=0.25)  # base and arm reach +x
        assert xy[0, 1, 1] == pytest.approx(float(p.person_y(t)), abs=0.25)
    preds = evaluate.run(items, folder, parse_spec("extrapolate", evaluate.BASELINES))
    assert all(r["decision"] in ("stop", "continue") for r in preds)


def test_gl_missing_is_one_clear_error(monkeypatch, tmp_path):
    from methodkit.tools.vesper import generate as g
    from methodkit.tools.vesper import taxonomy

    monkeypatch.setattr(gl, "find_library", lambda name: None)
    with pytest.raises(gl.GLBackendError) as err:
        g.generate(g.GenerateConfig(pairs=1, renderer="mujoco"), str(tmp_path / "o"), taxonomy.load())
    msg = err.value.message
    assert "apt-get install" in msg and "--gl" in msg and "--renderer 2d" in msg and "\n" not in msg
    assert not (tmp_path / "o").exists()


def test_cli_gl_none_with_mujoco_renderer_exits_2(run_cli, tmp_path):
    from tests.conftest import assert_one_line_error

    proc = run_cli(["vesper-eval", "generate", "--renderer", "mujoco", "--gl", "none", "--pairs", "1",
                    "-o", str(tmp_path / "o")])  # fmt: skip
    assert_one_line_error(proc, "vesper-eval", "rendering is off", "--renderer 2d")
    assert not (tmp_path / "o").exists()


def _behind_taxonomy():
    import yaml

    from methodkit.tools.vesper import taxonomy

    doc = yaml.safe_load(taxonomy.default_path().read_text())
    doc["persons"] = {"adult_entering": {"scale": 1.0, "speed": [0.8, 1.4], "p": 1.0, "approach": "behind"}}
    return taxonomy.validate(doc, "t.yaml"), doc


def test_person_from_behind_walks_in_from_the_camera_side(tmp_path):
    from methodkit.core.errors import DataError, UsageError
    from methodkit.tools.vesper import generate as g
    from methodkit.tools.vesper import taxonomy

    tax, doc = _behind_taxonomy()
    p = sc.Params(robot_x0=0.0, robot_speed=0.0, robot_x_end=0.0, person_x=0.0, person_speed=1.0, person_start_s=0.0,
                  person_stop_y=-1.2, person_scale=1.0, horizon_s=5.0, person_dir=1.0)  # fmt: skip
    assert p.person_y(0.0) == -3.0 and p.person_y(1.0) == -2.0 and p.person_y(4.0) == -1.2
    assert p.person_walking(1.0) and not p.person_walking(4.0)
    dp, sp = g._draw(np.random.default_rng(0), tax, "stop_turn", "adult_entering")
    assert dp.person_dir == 1.0 and sp.person_stop_y < -sc.BASE_HALF[1]  # stops short on the camera side
    with pytest.raises(UsageError, match="needs --renderer mujoco"):
        g.generate(g.GenerateConfig(pairs=1), str(tmp_path / "o"), tax)
    assert not (tmp_path / "o").exists()
    doc["persons"]["adult_entering"]["approach"] = "sideways"
    with pytest.raises(DataError, match=r"persons\.adult_entering\.approach"):
        taxonomy.validate(doc, "t.yaml")


def test_person_from_behind_pair_labels_hold(cam, tmp_path):
    from methodkit.core import io
    from methodkit.tools.vesper import generate as g

    tax, _ = _behind_taxonomy()
    cfg = g.GenerateConfig(pairs=1, seed=0, width=W, height=H, fps=4, clip_s=2.0, video=False, recognition_frac=0,
                           renderer="mujoco")  # fmt: skip
    assert g.generate(cfg, str(tmp_path / "b"), tax).pairs == 1
    sim = sc.Simulator()
    for it in io.read_jsonl(str(tmp_path / "b" / "items.jsonl")):
        p = sc.Params(**io.read_json(str(tmp_path / "b" / "scenarios" / f"{it['id']}.json"))["params"])
        traj = sim.trajectory(p)
        assert p.person_dir == 1.0 and it["person"] == "adult_entering"
        if it["variant"] == "dangerous":
            assert (traj["d"][traj["t"] > it["cutoff_s"]] < 0.01).any() and it["gt"]["min_dist_clip_m"] >= 0.3
        else:
            assert traj["d"].min() > 0.25
        ids = io.read_arrays(str(tmp_path / "b" / it["sensors"]))["ids"]
        assert (ids[-1] == sc.PERSON).sum() > 0


def test_camera_clip_of_a_new_hazard_segments_its_object_as_the_hazard(cam):
    """The shared renderer re-wraps another hazard's model: the falling box is drawn, with the robot's id,
    where the simulation put it (above the arm's height while held, on the floor after the release)."""
    from dataclasses import replace

    from methodkit.tools.vesper import falling_load

    sim = falling_load.simulator(W, H)
    d, _ = falling_load.draw(np.random.default_rng(5), {"speed": [1.0, 1.2], "scale": 1.0}, "path_offset")
    d = replace(d, person_start_s=99.0, horizon_s=round(d.drop_s + 1.5, 2))  # nobody under it: it lands
    _, ids, depth, K, T = cam.clip(d, [d.drop_s - 0.5, d.horizon_s], "side", sim)
    box_x = d.robot_x0 + 0.45  # beyond the base's +x face (x_r + 0.3): only the arm link and the box
    held, landed = [], []
    for f in range(2):
        world = camera.unproject(K, T[f], depth[f].astype(np.float64))[ids[f] == sc.ROBOT]
        near = world[world[:, 0] > box_x]
        held.append(int(((near[:, 2] > 1.9) & (near[:, 2] < 2.2)).sum()))  # the box under the 2.3 m tip
        landed.append(int((near[:, 2] < 0.25).sum()))  # the box on the floor
    assert held[0] > 5 and landed[0] == 0 and held[1] == 0 and landed[1] > 5
    assert cam.clip(_still(0.0), [0.0], "side")[1].max() == sc.FURNITURE  # and the corridor scene still renders

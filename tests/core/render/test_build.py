"""Spec -> MjSpec -> model: furniture geometry, articulated bodies, meshes, poses, jitter, MJCF export."""

from __future__ import annotations

import importlib.util

import mujoco
import numpy as np
import pytest

from methodkit.core.errors import DataError
from methodkit.core.render import build, camera
from methodkit.core.render.physics import simulate

from .conftest import scene_spec


def _ray_down(scene, data, x, y):
    """Height and body name of the first surface below (x, y, 3)."""
    geom = np.zeros(1, dtype=np.int32)
    dist = mujoco.mj_ray(scene.model, data, np.array([x, y, 3.0]), np.array([0, 0, -1.0]), None, 1, -1, geom)
    return 3.0 - dist, scene.body_names()[int(scene.model.geom_bodyid[geom[0]])]


def test_furniture_stands_on_the_floor_at_its_size():
    objects = [
        {"name": "table", "type": "table", "pos": [0, 0, 0], "size": [1.2, 0.8, 0.75]},
        {"name": "shelf", "type": "shelf", "pos": [3, 0, 0], "size": [0.8, 0.4, 1.5], "boards": 3},
        {"name": "wall", "type": "wall", "pos": [0, 3, 0], "size": [4, 0.1, 2.5]},
    ]
    scene = build.build(scene_spec(objects))
    data = scene.new_data()
    assert _ray_down(scene, data, 0.3, 0.2) == (pytest.approx(0.75), "table")
    assert _ray_down(scene, data, 0.0, 0.6) == (pytest.approx(0.0), "world")  # beside the table: floor
    assert _ray_down(scene, data, 3.0, 0.0) == (pytest.approx(1.5), "shelf")  # top board
    assert _ray_down(scene, data, 0.0, 3.0) == (pytest.approx(2.5), "wall")
    assert scene.objects["table"].free_qpos is None


def test_primitive_sizes_masses_friction_and_pose():
    objects = [
        {"name": "b", "type": "box", "size": [0.2, 0.4, 0.6], "pos": [1, 2, 3], "euler": [0, 0, 90], "mass": 1.5,
         "friction": [0.3, 0.01, 0.001], "velocity": [1, 0, 0]},
        {"name": "c", "type": "capsule", "radius": 0.05, "length": 0.3, "pos": [0, 0, 1], "colour": [0, 1, 0]},
    ]  # fmt: skip
    scene = build.build(scene_spec(objects))
    m, data = scene.model, scene.new_data()
    g = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "b")
    assert m.geom_size[g].tolist() == pytest.approx([0.1, 0.2, 0.3])
    assert m.body_mass[scene.objects["b"].body_id] == pytest.approx(1.5)
    assert m.geom_friction[g].tolist() == pytest.approx([0.3, 0.01, 0.001])
    assert data.xpos[scene.objects["b"].body_id].tolist() == pytest.approx([1, 2, 3])
    # 90 degrees about z: the box's local x axis points along world y
    assert data.xmat[scene.objects["b"].body_id].reshape(3, 3)[:, 0] == pytest.approx([0, 1, 0], abs=1e-9)
    assert data.qvel[scene.objects["b"].free_qvel] == 1.0
    c = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "c")
    assert m.geom_size[c][:2].tolist() == pytest.approx([0.05, 0.15])
    assert m.mat_rgba[m.geom_matid[c]].tolist() == [0, 1, 0, 1]


def test_an_inline_mesh_falls_and_rests_on_a_vertex_face():
    verts = [[0, 0, 0], [0.2, 0, 0], [0, 0.2, 0], [0, 0, 0.2]]
    faces = [[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]]
    scene = build.build(
        scene_spec([{"name": "tet", "type": "mesh", "vertices": verts, "faces": faces, "pos": [0, 0, 0.5]}])
    )
    data = scene.new_data()
    simulate(scene, data, 1.5)
    g = mujoco.mj_name2id(scene.model, mujoco.mjtObj.mjOBJ_GEOM, "tet")
    adr, n = scene.model.mesh_vertadr[scene.model.geom_dataid[g]], scene.model.mesh_vertnum[scene.model.geom_dataid[g]]
    world = scene.model.mesh_vert[adr : adr + n] @ data.geom_xmat[g].reshape(3, 3).T + data.geom_xpos[g]
    assert world[:, 2].min() == pytest.approx(0.0, abs=0.005)


def test_the_person_model_is_attached_posed_and_holds_still():
    objects = [{"name": "walker", "type": "mjcf", "file": "person", "pos": [1, 0, 0], "euler": [0, 0, 90],
                "joints": {"left_knee": 0.5}}]  # fmt: skip
    scene = build.build(scene_spec(objects))
    m, data = scene.model, scene.new_data()
    assert m.nu == 13 and scene.objects["walker"].body_id == mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "walker")
    knee = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, "walker/left_knee")
    assert data.qpos[m.jnt_qposadr[knee]] == 0.5
    head = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "walker/head")
    top = data.geom_xpos[head][2] + m.geom_size[head][0]
    assert 1.7 < top < 1.8 and data.geom_xpos[head][:2] == pytest.approx([1, 0], abs=0.05)
    before = data.geom_xpos[head].copy()
    simulate(scene, data, 1.0)  # the position actuators hold the standing pose against gravity
    assert np.linalg.norm(data.geom_xpos[head] - before) < 0.02


def test_an_unknown_joint_of_an_articulated_body_is_a_data_error():
    objects = [{"name": "p", "type": "mjcf", "file": "person", "joints": {"tail": 1.0}}]
    with pytest.raises(DataError, match=r"objects 'p': joints.tail: no such joint in person"):
        build.build(scene_spec(objects))


@pytest.mark.skipif(importlib.util.find_spec("gymnasium") is None, reason="gymnasium's MuJoCo assets not installed")
def test_the_arm_from_gymnasium_holds_with_gravity_compensation_and_sags_without():
    def tip_drop(compensate: bool) -> float:
        obj = {"name": "arm", "type": "mjcf", "file": "arm", "pos": [0, 0, 1.0], "gravity_compensation": compensate}
        scene = build.build(scene_spec([obj]))
        data = scene.new_data()
        tip = mujoco.mj_name2id(scene.model, mujoco.mjtObj.mjOBJ_BODY, "arm/tips_arm")
        start = data.xpos[tip].copy()
        simulate(scene, data, 0.5)
        return float(np.linalg.norm(data.xpos[tip] - start))

    assert tip_drop(True) < 0.01
    assert tip_drop(False) > 0.05


def test_jitter_follows_the_seed():
    objects = [{"name": "b", "type": "sphere", "radius": 0.1, "pos": [0, 0, 1], "jitter": 0.5},
               {"name": "still", "type": "sphere", "radius": 0.1, "pos": [2, 0, 1]}]  # fmt: skip
    spec = scene_spec(objects)

    def where(seed):
        scene = build.build(spec, seed=seed)
        return scene.new_data().xpos[[scene.objects["b"].body_id, scene.objects["still"].body_id]]

    a, again, other = where(0), where(0), where(1)
    assert np.array_equal(a, again) and not np.array_equal(a, other)
    assert np.all(np.abs(a[0, :2]) <= 0.5) and a[0, 2] == 1.0 and a[1].tolist() == [2, 0, 1]


def test_cameras_look_at_their_target():
    spec = scene_spec([], [{"name": "c", "pos": [2.0, -1.0, 1.5], "target": [0.2, 0.3, 0.4], "fovy": 60}])
    scene = build.build(spec)
    data = scene.new_data()
    T = camera.world_from_camera(data.cam_xpos[0], data.cam_xmat[0])
    K = camera.intrinsics(60, 160, 120)
    uv, z = camera.project(K, T, [0.2, 0.3, 0.4])
    assert uv[0] == pytest.approx([79.5, 59.5]) and z[0] > 0  # the target is at the image centre
    assert np.allclose(T[:3, :3].T @ T[:3, :3], np.eye(3)) and np.linalg.det(T[:3, :3]) == pytest.approx(1.0)
    assert T[:3, 1] @ [0, 0, 1] < 0  # image rows run downwards in the world


def test_exported_mjcf_compiles_to_the_same_model():
    objects = [{"name": "table", "type": "table"}, {"name": "p", "type": "mjcf", "file": "person", "pos": [1, 0, 0]},
               {"name": "ball", "type": "sphere", "radius": 0.1, "pos": [0, 0, 1.2], "texture": "checker"}]  # fmt: skip
    scene = build.build(scene_spec(objects, [{"name": "c", "pos": [3, 0, 1], "target": [0, 0, 0.5]}]))
    again = mujoco.MjModel.from_xml_string(scene.to_xml())
    assert (again.nbody, again.ngeom, again.njnt, again.nu, again.ncam) == (
        scene.model.nbody, scene.model.ngeom, scene.model.njnt, scene.model.nu, scene.model.ncam)  # fmt: skip

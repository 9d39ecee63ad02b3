"""Physical outcomes read from the simulation: landing, toppling, contacts and final poses."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core.render import build
from methodkit.core.render.physics import contacts, simulate

from .conftest import scene_spec


def test_a_ball_dropped_on_a_box_lands_on_top():
    objects = [
        {"name": "crate", "type": "box", "size": [0.3, 0.3, 0.3], "pos": [0.2, 0.1, 0.15], "mass": 2.0},
        {"name": "ball", "type": "sphere", "radius": 0.05, "pos": [0.2, 0.1, 1.0], "mass": 0.1},
    ]
    scene = build.build(scene_spec(objects))
    out = simulate(scene, scene.new_data(), 1.5, sample_every=0.05)
    pos, _ = out.final_pose("ball")
    assert pos[2] == pytest.approx(0.35, abs=0.005)  # box top 0.3 + radius 0.05
    assert np.allclose(pos[:2], [0.2, 0.1], atol=0.01)
    assert out.touched("ball", "crate") and not out.touched("ball", "world")
    assert 0.3 < out.contacts[("ball", "crate")] < 0.45  # free fall of 0.6 m takes 0.35 s
    assert out.positions.shape == (31, 2, 3) and out.times[-1] == pytest.approx(1.5)


def _stack(push: float):
    objects = [
        {"name": f"block{i}", "type": "box", "size": [0.1, 0.1, 0.1], "pos": [0, 0, 0.05 + 0.1 * i], "mass": 0.2}
        for i in range(3)
    ]
    objects[2]["velocity"] = [push, 0, 0]
    return build.build(scene_spec(objects))


def test_a_pushed_stack_falls_and_an_unpushed_one_stands():
    pushed = simulate(s := _stack(2.0), s.new_data(), 1.5)
    top, _ = pushed.final_pose("block2")
    assert top[2] == pytest.approx(0.05, abs=0.01)  # on the floor now
    assert top[0] > 0.15  # beyond the stack's edge
    assert pushed.touched("block2", "world")

    still = simulate(s := _stack(0.0), s.new_data(), 1.5)
    top, quat = still.final_pose("block2")
    assert np.allclose(top, [0, 0, 0.25], atol=0.003)
    assert abs(quat[0]) == pytest.approx(1.0, abs=1e-3)
    assert not still.touched("block2", "world")
    assert still.to_dict()["path_length"]["block2"] < 0.01


def test_contacts_now_and_the_outcome_summary():
    objects = [{"name": "crate", "type": "box", "size": [0.2, 0.2, 0.2], "pos": [0, 0, 0.1]}]
    scene = build.build(scene_spec(objects))
    data = scene.new_data()
    assert contacts(scene, data) == {("crate", "world")}
    summary = simulate(scene, data, 0.1).to_dict()
    assert summary["contacts"] == [{"a": "crate", "b": "world", "first_time": 0.0}]
    assert summary["final"]["crate"]["pos"][2] == pytest.approx(0.1, abs=0.002)

"""The simulated answers obey the physics they claim (checked without trusting the samplers' intent)."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.tools.causal_spatial import physics, scenes, tasks


@pytest.fixture(scope="module")
def settings():
    return tasks.Settings(size=128)


def _drafts(task, level, settings, n=6, n_obj=3):
    out = []
    for k in range(40):
        rng = np.random.default_rng(1000 + k)
        try:
            out.append(tasks.SAMPLERS[task](rng, level, k % tasks.n_choices(task, level, n_obj), settings, n_obj))
        except tasks.Reject:
            continue
        if len(out) == n:
            break
    assert len(out) == n
    return out


def test_collision_answer_is_a_contact_with_the_car_and_the_prefilter_agrees(settings):
    for d in _drafts("collision", 1, settings):
        assert (d.answer == 0) == bool(d.gt["hits"])
        assert set(d.gt["hits"]) == set(d.gt["prefilter_hits"])  # kinematic car, no knock-ons here
        for name, c in d.gt["clearance"].items():
            assert (c < 0) == (name in d.gt["hits"])  # every hit penetrates, every miss clears by >= 1 cm
            assert name in d.gt["hits"] or c >= 0.01


def test_collision_l2_answer_is_the_unique_intervention(settings):
    for d in _drafts("collision", 2, settings, n=4):
        names = d.motion["removal_candidates"]
        if d.options[d.answer] == "None":
            assert d.gt["hits"] == []
        else:
            assert d.gt["interventions"] == [names[d.answer]] == d.gt["hits"]


def test_compatibility_inside_iff_narrower_than_the_opening(settings):
    for d in _drafts("compatibility", 1, settings):
        (name, inside), = d.gt["inside"].items()
        assert inside == (d.gt["width_ratio"] < 1) == (d.answer == 0)
        com = d.gt["rest_com"][name]
        in_box = max(abs(com[0]), abs(com[1])) < d.gt["inner_width"] / 2 and com[2] < 0.012 + d.gt["inner_height"]
        assert in_box == inside


def test_trajectory_lands_on_the_mat_the_ballistics_name(settings):
    """Thrown or ramp-launched (L1), bounced back by the wall (L2): the simulated first landing is on
    the mat the drag-free prediction names, and the answer letter shows that mat."""
    for level in (1, 2):
        drafts = _drafts("trajectory", level, settings)
        assert {d.gt["launcher"] for d in drafts} == {"ramp", "throw"}
        for d in drafts:
            assert d.gt["wall"] == (level == 2)
            assert d.gt["landing_mat"] == d.gt["mat_order"][d.gt["ballistic_mat"]]
            assert d.options[d.answer] == f"the {d.gt['landing_mat'].split('-')[0]} mat"


def test_occlusion_rays_see_the_mover_hide_the_target(settings):
    for d in _drafts("occlusion", 1, settings, n=4, n_obj=2):
        (name, v), = d.gt["visible_after"].items()
        assert (v["ray"] < 0.1) == (d.answer == 0)
        assert d.gt["visible_before"][name]["ray"] > 0.5


def test_kinematic_drive_is_not_pushed_back():
    cam = scenes.camera((0, 0, 0), 1.0, 30, 0)
    spec = scenes.base_spec(64, cam)
    spec["objects"] = scenes.car_objects((-0.3, 0.0), 0.0) + [
        scenes.shape_object("red-box", "box", "red", {"w": 0.06, "d": 0.06, "h": 0.08}, (0.0, 0.0, 0.04))]
    scene = physics.compile_spec(spec)
    names = [o["name"] for o in spec["objects"] if o["name"].startswith("car")]
    drive = physics.Drive(names, np.array([0.3, 0.0, 0.0]), 1.5)
    ev = physics.run(scene, 1.5, watch=names, drive=drive)
    assert "red-box" in ev.contacts and 0.5 < ev.contacts["red-box"]["t"] < 0.8
    assert abs(ev.final("car")[0] - (-0.3 + 0.45)) < 1e-3  # exactly where the path says
    assert ev.final("red-box")[0] > 0.05  # pushed ahead


def test_batched_rollout_screening_gives_the_stepped_ground_truth(settings):
    """The compatibility drops go through one mujoco.rollout call; stepping each scene with physics.run
    must give the very same rest positions (bit for bit), hence the same answers."""
    rng = np.random.default_rng(7)
    parts = scenes.container_objects((0.0, 0.0), 0.12, 0.07)
    cam = scenes.camera((0.0, 0.0, 0.08), 0.8, 35, 0)
    objs = []
    for i, ratio in enumerate((0.9, 1.06, 0.8, 1.15)):  # two fit, two do not; boxes and cylinders
        w = 0.12 * ratio
        shape = ("box", "cylinder")[i % 2]
        dims = {"w": w, "d": w, "h": 0.05} if shape == "box" else {"r": w / 2, "h": 0.05}
        off = rng.uniform(-0.004, 0.004, size=2)
        objs.append(scenes.shape_object(f"c{i}-{shape}", shape, "red", dims, (off[0], off[1], 0.3)))
    sims = [tasks._drop_scene(settings, cam, parts, o) for o in objs]
    batched = physics.rollout_final(sims, [o["name"] for o in objs], tasks.DROP_SECONDS, threads=2)
    for sim, o, com in zip(sims, objs, batched):
        stepped = physics.run(sim, tasks.DROP_SECONDS, watch=[o["name"]]).final(o["name"])
        assert np.array_equal(com, stepped), (com, stepped)
    inside = [physics.inside_box(c, (0.0, 0.0), 0.12, 0.012, 0.082) for c in batched]
    assert inside == [True, False, True, False]

"""trip and falling_load: the simulated physics (a released free box, MuJoCo contacts) decides each twin."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from methodkit.tools.vesper import falling_load, hazards, load, pinch, trip


def _end(hz, d):
    """A horizon just past each hazard's event (small test)."""
    if hz is trip:
        return d.person_start_s + 3.8 / d.person_speed
    return d.drop_s + 1.2 if hz is falling_load else d.close_s + 2.0


@pytest.mark.parametrize("hz", [trip, falling_load, pinch], ids=["trip", "falling_load", "pinch"])
def test_unsafe_twin_has_the_hazard_event_and_the_safe_twin_not(hz):
    sim = hz.simulator(320, 240)
    spec = {"speed": [1.0, 1.2], "scale": 1.0}
    for factor in hz.FACTOR_KEY:
        d, s = hz.draw(np.random.default_rng(5), spec, factor)
        end = _end(hz, d)
        d, s = replace(d, horizon_s=round(end, 2)), replace(s, horizon_s=round(end, 2))
        td, ts = sim.trajectory(d), sim.trajectory(s)
        active, hit = hz.events(d, td)
        assert hit.any(), (hz.__name__, factor)
        assert not hz.events(s, ts)[1].any() and ts["d"].min() > 0.25  # the safe twin never comes near the box
        i = int(np.flatnonzero(hit)[0])
        if hz is pinch:  # the closing panel is stopped by the person in the doorway, and shuts on the jamb later
            assert td["t"][i] > d.close_s and td["slide"][i] < pinch.GAP - 0.3
            assert ts["slide"][-1] == pytest.approx(pinch.GAP, abs=0.01) and not active[td["t"] < d.close_s].any()
            continue
        z = td["load_qpos"][:, 2]
        assert z[0] > d.tip_z - 0.2  # held under the arm tip before the release
        if hz is trip:  # it fell to the floor, and the walking foot kicked it (dynamics, not a scripted pose)
            assert z[i - 1] == pytest.approx(load.LOAD_HALF, abs=0.01) and td["part"][i].startswith("leg")
            assert np.linalg.norm(td["load_qpos"][-1, :2] - td["load_qpos"][i - 1, :2]) > 0.05
        else:  # it hit the person in the air, above shoulder height, after falling from the tip
            assert z[i] > 1.2 and d.drop_s < td["t"][i] < d.drop_s + 0.4
            assert not active[td["t"] < d.drop_s].any()


def test_generated_pairs_of_the_new_hazards_hold_both_twins(tmp_path):
    import yaml

    from methodkit.tools.vesper import generate as g
    from methodkit.tools.vesper import taxonomy

    doc = yaml.safe_load(taxonomy.default_path("taxonomy_all.yaml").read_text())
    doc["robot_tasks"].pop("drive_base")
    doc["hazards"].pop("collision")
    tax = taxonomy.validate(doc, "t.yaml")
    cfg = g.GenerateConfig(pairs=3, seed=0, fps=4, video=False, recognition_frac=0.0, width=240, height=180,
                           min_person_px=30)  # fmt: skip
    res = g.generate(cfg, str(tmp_path / "b"), tax)
    assert res.pairs == 3 and res.items == 6
    items = [json.loads(x) for x in (tmp_path / "b" / "items.jsonl").read_text().splitlines()]
    assert sorted((it["pair_id"], it["variant"]) for it in items) == [(f"p{k:04d}", v) for k in range(3)
                                                                      for v in ("dangerous", "safe")]  # fmt: skip
    assert [it["hazard"] for it in items[::2]] == ["trip", "falling_load", "pinch"]
    sims = {}
    for it in items:
        scen = json.loads((tmp_path / "b" / "scenarios" / f"{it['id']}.json").read_text())
        assert (tmp_path / "b" / it["sensors"]).is_file() and len(list((tmp_path / "b" / it["frames_dir"]).iterdir())) == 12
        hz = hazards.get(scen["hazard"])
        p = hazards.params(scen["hazard"], scen["params"])
        sim = sims.setdefault(scen["hazard"], hz.simulator(240, 180))
        traj = sim.trajectory(p)
        hit = hz.events(p, traj)[1]
        if it["variant"] == "safe":
            assert not hit.any() and it["gt"]["decision"] == "continue"
        else:
            assert it["gt"]["decision"] == "stop"
            assert traj["t"][np.flatnonzero(hit)[0]] == pytest.approx(it["gt"]["harm_time_s"])
            assert it["gt"]["min_dist_clip_m"] >= 0.3
            ids = np.load(tmp_path / "b" / it["sensors"])["ids"]
            assert ((ids == g.ROBOT).sum(axis=(1, 2)) > 0).all()  # the robot and its box are in every frame


def test_taxonomy_refuses_a_factor_the_hazard_does_not_define():
    import yaml

    from methodkit.core.errors import DataError
    from methodkit.tools.vesper import taxonomy

    doc = yaml.safe_load(taxonomy.default_path("taxonomy_all.yaml").read_text())
    doc["hazards"]["trip"]["factors"] = ["timing"]
    with pytest.raises(DataError, match=r"t.yaml: hazards\.trip\.factors: factor 'timing' is not defined for trip"):
        taxonomy.validate(doc, "t.yaml")
    assert set(taxonomy.load("all")["hazards"]) == set(hazards.HAZARDS)  # the shipped 'all' lists every module


@pytest.mark.parametrize("hz", [trip, pinch], ids=["trip", "pinch"])
def test_top_down_view_draws_only_the_furniture_of_the_hazards_scene(hz):
    from methodkit.tools.vesper import generate as g
    from methodkit.tools.vesper import scene as sc

    cam = g.TopDown(320, 240)
    table_uv = np.array(cam.uv(2.6, 2.4))  # scene.py's corridor table
    d, _ = hz.draw(np.random.default_rng(5), {"speed": [1.0, 1.2], "scale": 1.0}, next(iter(hz.FACTOR_KEY)))
    rows = g.shapes_at(d, 1.0, cam, hz.simulator(320, 240), hz)
    furniture = rows[(rows[:, 0] == 2) & (rows[:, 9] == sc.FURNITURE)]
    at_table = np.linalg.norm(furniture[:, 1:3] - table_uv, axis=1) < 1e-6
    assert at_table.any() == (hz is trip)  # the door scene has no table: its furniture is the wall and jamb
    if hz is pinch:
        assert len(furniture) == 3  # wall left, wall right, jamb

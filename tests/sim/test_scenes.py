"""Scene NPZ schema: round trip, the validating reader's messages, atomic writes, feeding the scorer."""

from __future__ import annotations

import json

import numpy as np
import pytest

from methodkit.core.errors import DataError, UsageError
from methodkit.core.sim.highway import events as ev
from methodkit.core.sim.highway import scenes, score

DT = 0.2


def small_scenes(n=3, k=4, s=3, t=20):
    """n scenes on a 3-lane road: ego at 20 m/s in lane 0, one car ahead in lane 1, one obstacle in lane 2."""
    a = scenes.empty_scenes(n, k, s, t)
    steps = DT * np.arange(1, t + 1)
    for i in range(n):
        x0 = 20.0 + 10.0 * i  # the ego's rear bumper stays on the road, which starts at x = 0
        a["ego"][i] = [x0, 0.0, 0.0, 20.0, 0.0, 5.0, 2.0, ev.ROLE_EGO]
        a["agents"][i, 0] = [x0 + 20, 4.0, 0.0, 15.0, 0.0, 5.0, 2.0, ev.ROLE_CAR]
        a["agents"][i, 1] = [x0 + 90, 8.0, 0.0, 0.0, 0.0, 1.0, 1.0, ev.ROLE_OBSTACLE]
        a["agent_mask"][i, :2] = True
        a["futures"][i, 0] = np.stack([x0 + 20 + 15 * steps, np.full(t, 4.0), np.zeros(t), np.full(t, 15.0)], -1)
        a["futures"][i, 1] = [x0 + 90, 8.0, 0.0, 0.0]
        a["future_mask"][i, :2] = True
        a["lanes"][i] = [[0, 500, 0, 4, 0], [0, 500, 4, 4, 1], [0, 500, 8, 4, 2]]
        a["lane_mask"][i] = True
        a["route"][i] = [0.0, 400.0]
        a["expert_index"][i] = 7
        a["expert_traj"][i] = np.stack([x0 + 20 * steps, np.zeros(t), np.zeros(t)], -1)
    a["agents"][:, 2:] = np.nan  # padding may hold anything
    return a


META = {"dt": DT, "simulator": "test", "generator": {"family": "cruise-dense"}, "seeds": [0, 1, 2]}


def test_round_trip(tmp_path):
    path = tmp_path / "s.npz"
    arrays = small_scenes()
    scenes.write_scenes(path, arrays, META)
    back, meta = scenes.read_scenes(path)
    assert meta == {"schema": 1, **META}
    for key, value in arrays.items():
        np.testing.assert_array_equal(back[key], value)
        assert back[key].dtype == np.asarray(value).dtype


def test_writer_refuses_an_existing_file_and_invalid_scenes(tmp_path):
    path = tmp_path / "s.npz"
    path.write_bytes(b"keep")
    with pytest.raises(UsageError):
        scenes.write_scenes(path, small_scenes(), META)
    bad = small_scenes()
    bad["agents"][1, 0, 3] = np.nan
    with pytest.raises(DataError):
        scenes.write_scenes(path, bad, META, force=True)
    assert path.read_bytes() == b"keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.npz"]  # no temporary left behind


def _written(tmp_path, arrays, meta_text=None):
    path = tmp_path / "user.npz"
    arrays = dict(arrays)
    arrays["meta"] = np.array(json.dumps({"schema": 1, **META}) if meta_text is None else meta_text)
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda a: a.pop("lane_mask"), "missing key lane_mask"),
        (lambda a: a.update(agents=a["agents"][:, :, :7]), r"key 'agents' has shape \(3, 4, 7\), expected \[3, 4, 8\]"),
        (lambda a: a.update(futures=a["futures"][:, :3]), r"axis 1 is K = 4 elsewhere"),
        (
            lambda a: a.update(agent_mask=a["agent_mask"].astype(np.float64)),
            "key 'agent_mask' has dtype float64, expected bool",
        ),
        (lambda a: a.update(scene_id=np.arange(3)), "key 'scene_id' has dtype int64, expected string"),
        (
            lambda a: a["futures"].__setitem__((2, 0, 5, 1), np.nan),
            "key 'futures' has a non-finite 'y' at row 2, agent 0, step 5",
        ),
        (lambda a: a["ego"].__setitem__((1, 3), np.inf), "key 'ego' has a non-finite 'vx' at row 1"),
        (
            lambda a: a["lanes"].__setitem__((0, 2, 3), np.nan),
            "key 'lanes' has a non-finite column 3 at row 0, segment 2",
        ),
        (lambda a: a.update(scene_id=np.array(["a", "b", "a"])), "repeats an id"),
    ],
)
def test_reader_names_file_key_and_row(tmp_path, mutate, message):
    arrays = small_scenes()
    mutate(arrays)
    path = _written(tmp_path, arrays)
    with pytest.raises(DataError, match=f"^{path}: .*{message}" if "missing" not in message else f"^{path}: {message}"):
        scenes.read_scenes(path)


def test_nan_under_a_false_mask_is_padding(tmp_path):
    arrays = small_scenes()
    arrays["futures"][0, 3] = np.nan
    arrays["lane_mask"][0, 2] = False
    arrays["lanes"][0, 2] = np.nan
    scenes.read_scenes(_written(tmp_path, arrays))


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "key 'meta' is not JSON"),
        (json.dumps({"schema": 1}), "meta lacks 'dt'"),
        (json.dumps({"schema": 9, "dt": 0.2}), "scene schema 9 is not supported"),
        (json.dumps({"schema": 1, "dt": -1}), "meta 'dt' must be a positive number"),
    ],
)
def test_meta_errors(tmp_path, text, message):
    with pytest.raises(DataError, match=message):
        scenes.read_scenes(_written(tmp_path, small_scenes(), text))


def test_not_an_npz(tmp_path):
    path = tmp_path / "x.npz"
    path.write_text("hello")
    with pytest.raises(DataError, match="not a NPY/NPZ file"):
        scenes.read_scenes(path)


def test_scenes_feed_the_scorer(tmp_path):
    path = tmp_path / "s.npz"
    scenes.write_scenes(path, small_scenes(), META)
    arrays, meta = scenes.read_scenes(path)
    t = arrays["futures"].shape[2]
    expert = np.concatenate([arrays["ego"][:, None, :3], arrays["expert_traj"]], axis=1)  # [N, T+1, 3]
    plans = score.plan_states(expert[:, :, :2], meta["dt"])[:, None]
    # a second plan per scene: brake to a stop in 2 s and stay (comfortable is not asked; progress drops)
    stop = expert[:, :, :2].copy()
    ts = meta["dt"] * np.arange(t + 1)
    stop[:, :, 0] = arrays["ego"][:, None, 0] + np.where(ts < 2.0, 20 * ts - 5 * ts**2, 20.0)
    plans = np.concatenate([plans, score.plan_states(stop, meta["dt"])[:, None]], axis=1)
    out = score.score_plans(**scenes.score_inputs(arrays, meta, plans))
    np.testing.assert_array_equal(out.nc, 1.0)
    np.testing.assert_allclose(out.ep[:, 0], 1.0)  # the expert is its own reference
    np.testing.assert_allclose(out.ep[:, 1], 20.0 / 80.0)

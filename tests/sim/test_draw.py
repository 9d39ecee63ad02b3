"""Top-down drawing: what is where in a frame, PNG/GIF/MP4 files, refusals."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core.errors import DataError, UsageError
from methodkit.core.sim.highway import draw
from methodkit.core.sim.highway import events as ev

PIL = pytest.importorskip("PIL")
from PIL import Image  # noqa: E402

DT = 0.2
T = 12
ROAD = np.array([[0, 600, 0, 4, 0], [0, 600, 4, 4, 1], [0, 160, 8, 4, 2]], float)  # lane 2 ends at x = 160


def episode(events=()):
    boxes = np.zeros((T, 3, 5))
    boxes[..., 3:] = [5.0, 2.0]
    t = np.arange(T) * DT
    boxes[:, 0, 0] = 100 + 20 * t  # ego in lane 0
    boxes[:, 1, 0], boxes[:, 1, 1] = 130 + 15 * t, 4.0  # a car ahead in lane 1
    boxes[:, 2, 0], boxes[:, 2, 1], boxes[:, 2, 3:] = 150.0, 8.0, [1.5, 1.5]  # debris in lane 2
    plan = np.stack([boxes[:, 0, :1] + 20 * DT * np.arange(1, 11), np.zeros((T, 10))], -1)
    return {
        "road": ROAD,
        "boxes": boxes,
        "present": np.ones((T, 3), bool),
        "roles": np.array([ev.ROLE_EGO, ev.ROLE_CAR, ev.ROLE_OBSTACLE]),
        "plan": plan,
        "events": np.array(events, dtype=np.int64).reshape(-1, 3),
        "dt": DT,
    }


def pixel(image, view, x, y):
    px, py = view.px(x, y)
    return np.asarray(image)[int(py // draw.SUPERSAMPLE), int(px // draw.SUPERSAMPLE)]


def near(colour, want, tol=40):
    return np.abs(np.asarray(colour, int) - np.asarray(want, int)).max() <= tol


def test_frame_shows_road_vehicles_and_plan():
    rec = draw.check_record(episode())
    view = draw.default_view(rec, 0)
    image = draw.render_frame(rec, 0, view=view)
    assert image.size == view.size
    assert near(pixel(image, view, 99.0, 0.6), draw.ROLE_COLOURS[ev.ROLE_EGO])  # ego body, beside the plan line
    assert near(pixel(image, view, 129.0, 4.0), draw.ROLE_COLOURS[ev.ROLE_CAR])
    assert near(pixel(image, view, 149.55, 8.0), draw.ROLE_COLOURS[ev.ROLE_OBSTACLE])
    assert near(pixel(image, view, 118.0, 0.0), draw.PLAN, tol=70)  # a plan dot 4 s of plan ahead
    assert near(pixel(image, view, 112.0, 11.0), draw.GRASS)  # off the road
    assert near(pixel(image, view, 112.0, 1.0), draw.ASPHALT)


def test_lane_lines_dashes_edges_and_lane_end():
    rec = draw.check_record(episode())
    view = draw.default_view(rec, 0)
    image = draw.render_frame(rec, 0, view=view)
    period = draw.DASH_M + draw.GAP_M
    dash_x = 10 * period + 1.5  # middle of a dash on the line between lanes 0 and 1 (y = 2)
    gap_x = 10 * period + 7.0
    assert near(pixel(image, view, dash_x, 2.0), draw.MARKING, tol=60)
    assert near(pixel(image, view, gap_x, 2.0), draw.ASPHALT)
    assert near(pixel(image, view, gap_x, -2.0), draw.MARKING, tol=60)  # road edge: solid
    assert near(pixel(image, view, 160.0, 8.0), draw.LANE_END, tol=60)  # lane 2's end bar
    assert near(pixel(image, view, 170.0, 6.0), draw.MARKING, tol=60)  # beyond it lane 1's edge is solid


def test_infraction_marker_appears_from_its_step():
    rec = draw.check_record(episode([(5, ev.COLLISION_VEHICLE, 1)]))
    view = draw.default_view(rec, 0)
    marker_x, marker_y = rec["boxes"][5, 0, 0], rec["boxes"][5, 0, 1] + 2.2
    before = draw.render_frame(rec, 4, view=view)
    after = draw.render_frame(rec, 6, view=view)
    assert not near(pixel(before, view, marker_x, marker_y), draw.EVENT_COLOURS[ev.COLLISION_VEHICLE])
    assert near(pixel(after, view, marker_x, marker_y), draw.EVENT_COLOURS[ev.COLLISION_VEHICLE], tol=70)
    # the vehicles involved are outlined red around the moment: the ego's rear edge
    assert near(pixel(after, view, rec["boxes"][6, 0, 0] - 2.45, 0.0), (255, 70, 70), tol=70)


def test_default_png_step_is_the_first_infraction():
    assert draw.default_png_step(draw.check_record(episode())) == T - 1
    assert draw.default_png_step(draw.check_record(episode([(9, ev.OFF_ROAD, 0), (4, ev.COLLISION_VEHICLE, 1)]))) == 4


def test_write_png(tmp_path):
    path = tmp_path / "ep.png"
    step = draw.write_png(episode([(3, ev.OFF_ROAD, 0)]), path)
    assert step == 3
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size[0] == 1200
    with pytest.raises(UsageError):
        draw.write_png(episode(), path)  # no overwrite without force
    draw.write_png(episode(), path, force=True)


def test_write_gif(tmp_path):
    path = tmp_path / "ep.gif"
    n = draw.write_animation(episode(), path, every=2)
    assert n == 7  # steps 0, 2, ..., 10 and the last one
    with Image.open(path) as image:
        assert image.n_frames == 7 and image.info["duration"] == 400


@pytest.mark.skipif(not draw.mp4_available(), reason="PyAV is not installed")
def test_write_mp4(tmp_path):
    import av

    path = tmp_path / "ep.mp4"
    draw.write_animation(episode(), path)
    with av.open(str(path)) as container:
        assert sum(1 for _ in container.decode(video=0)) == T


def test_refusals_write_nothing(tmp_path):
    with pytest.raises(UsageError, match="is .gif or .mp4"):
        draw.write_animation(episode(), tmp_path / "ep.avi")
    bad = episode()
    bad.pop("present")
    with pytest.raises(DataError, match="missing key 'present'"):
        draw.write_animation(bad, tmp_path / "ep.gif")
    bad = episode()
    bad["plan"] = bad["plan"][:3]
    with pytest.raises(DataError, match="'plan' has shape"):
        draw.write_png(bad, tmp_path / "ep.png")
    with pytest.raises(UsageError, match="outside the episode"):
        draw.render_frame(episode(), T)
    assert list(tmp_path.iterdir()) == []

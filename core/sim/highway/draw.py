"""Top-down pictures of an episode record: one PNG frame, or an animated GIF / MP4.

Lanes are drawn with their markings (dashed between lanes, solid at road edges, a hatched bar where a lane
ends), vehicles as oriented boxes coloured by role with a windscreen showing the heading, the ego's plan as
a line of dots, the ego's path as a trail, infractions as markers where they happened (the vehicles
involved outlined in red around the moment), and a header with the time, the ego's speed and the
infractions so far. The camera follows the ego along the road. Frames are Pillow images drawn at twice
the size and reduced (smooth edges); MP4 needs PyAV, GIF needs only Pillow.

The record (events.py has the codes): road [S, 5], boxes [T, K, 5], present [T, K], ego index 0;
optional: plan [T, H, 2], events [E, 3] (t, kind, vehicle), roles [K], dt (s per step), speeds [T, K, 2].
"""

from __future__ import annotations

import io as _io
import os
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from methodkit.core import io
from methodkit.core.errors import DataError, UsageError
from methodkit.core.sim.highway import events as ev
from methodkit.core.sim.highway import geometry as geo

SUPERSAMPLE = 2
HEADER_PX = 34

# palette (RGB)
GRASS = (30, 44, 36)
ASPHALT = (56, 59, 65)
MARKING = (226, 228, 230)
LANE_END = (236, 86, 62)
HEADER = (18, 20, 24)
TEXT = (232, 234, 236)
TEXT_DIM = (150, 156, 164)
PLAN = (0, 224, 196)
TRAIL = (120, 190, 255)
ROLE_COLOURS = {
    ev.ROLE_EGO: (64, 169, 245),
    ev.ROLE_CAR: (240, 196, 84),
    ev.ROLE_TRUCK: (236, 136, 72),
    ev.ROLE_OBSTACLE: (196, 64, 64),
    ev.ROLE_AGGRESSIVE: (222, 92, 248),
}
EVENT_COLOURS = {
    ev.COLLISION_VEHICLE: (255, 64, 64),
    ev.COLLISION_OBSTACLE: (255, 64, 64),
    ev.OFF_ROAD: (255, 160, 40),
    ev.LANE_END_OVERRUN: (255, 110, 40),
    ev.MISSED_EXIT: (190, 120, 255),
    ev.ROUTE_COMPLETED: (90, 220, 120),
    ev.TIMEOUT: (170, 170, 170),
}
DASH_M, GAP_M = 3.0, 9.0  # lane-line dashes, phased on world x so they move with the road
FLASH_S = 1.0  # how long after an infraction the vehicles involved stay outlined


@dataclass
class View:
    """The world window of a frame: x range (metres), y range, pixels per metre."""

    x0: float
    x1: float
    y0: float
    y1: float
    scale: float

    @property
    def size(self) -> tuple[int, int]:
        return int(round((self.x1 - self.x0) * self.scale)), int(round((self.y1 - self.y0) * self.scale)) + HEADER_PX

    def px(self, x, y):
        """World -> pixel coordinates of the supersampled canvas (y up in the world, down in the image)."""
        s = self.scale * SUPERSAMPLE
        return (np.asarray(x) - self.x0) * s, (self.y1 - np.asarray(y)) * s + HEADER_PX * SUPERSAMPLE


# --------------------------------------------------------------------------- record


def check_record(record: dict) -> dict:
    """The record's arrays in float64/bool/int64, checked for the keys and shapes drawing needs."""
    for key in ("road", "boxes", "present"):
        if key not in record:
            raise DataError(f"episode record: missing key '{key}'")
    road = np.asarray(record["road"], dtype=np.float64)
    boxes = np.asarray(record["boxes"], dtype=np.float64)
    present = np.asarray(record["present"], dtype=bool)
    if road.ndim != 2 or road.shape[1] != 5 or len(road) == 0:
        raise DataError(f"episode record: 'road' has shape {road.shape}, expected [S, 5] with S >= 1")
    if boxes.ndim != 3 or boxes.shape[2] != 5 or boxes.shape[0] == 0:
        raise DataError(f"episode record: 'boxes' has shape {boxes.shape}, expected [T, K, 5]")
    if present.shape != boxes.shape[:2]:
        raise DataError(f"episode record: 'present' has shape {present.shape}, expected {list(boxes.shape[:2])}")
    out = dict(record, road=road, boxes=boxes, present=present)
    out["events"] = np.asarray(record.get("events", np.zeros((0, 3))), dtype=np.int64).reshape(-1, 3)
    roles = record.get("roles")
    if roles is None:
        roles = np.full(boxes.shape[1], ev.ROLE_CAR)
        roles[0] = ev.ROLE_EGO
    out["roles"] = np.asarray(roles, dtype=np.int64)
    if out["roles"].shape != (boxes.shape[1],):
        raise DataError(f"episode record: 'roles' has shape {out['roles'].shape}, expected [{boxes.shape[1]}]")
    if "plan" in record and record["plan"] is not None:
        plan = np.asarray(record["plan"], dtype=np.float64)
        if plan.ndim != 3 or plan.shape[0] != boxes.shape[0] or plan.shape[2] != 2:
            raise DataError(f"episode record: 'plan' has shape {plan.shape}, expected [{boxes.shape[0]}, H, 2]")
        out["plan"] = plan
    else:
        out["plan"] = None
    return out


def _font(size: int):
    from PIL import ImageFont

    for name in ("DejaVuSans.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"):
        try:
            return ImageFont.truetype(name, size)
        except OSError:
            continue
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow without FreeType
        return ImageFont.load_default()


@lru_cache(maxsize=4)
def _fonts(scale: int):
    return _font(13 * scale), _font(11 * scale)


def default_view(record: dict, t: int, *, behind_m=40.0, ahead_m=110.0, scale=8.0) -> View:
    """A window following the ego: behind_m behind it, ahead_m ahead, the road's full width (+3 m)."""
    road = record["road"]
    ego_x = float(record["boxes"][t, 0, 0])
    y0 = float((road[:, 2] - road[:, 3] / 2).min()) - 3.0
    y1 = float((road[:, 2] + road[:, 3] / 2).max()) + 3.0
    return View(ego_x - behind_m, ego_x + ahead_m, y0, y1, scale)


# --------------------------------------------------------------------------- layers


def _runs(mask: np.ndarray):
    """(start, stop) index pairs of the True runs of a 1-D mask."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)))


MARK_STEP_M = 0.25  # resolution at which lane lines are classified (edge / between lanes / none)


@lru_cache(maxsize=8)
def _road_marks(road_bytes: bytes, n_segments: int):
    """Lane lines of a road in world coordinates, computed once per road: solid edge runs and
    between-lane runs (x_a, x_b, y), and lane-end bars (x, y_a, y_b)."""
    road = np.frombuffer(road_bytes, dtype=np.float64).reshape(n_segments, 5)
    edges, between, ends = [], [], []
    for seg in road:
        xs = np.arange(seg[0], seg[1] + MARK_STEP_M / 2, MARK_STEP_M)
        for side in (1.0, -1.0):
            y = seg[2] + side * seg[3] / 2
            outside = geo.points_on_road(np.stack([xs, np.full_like(xs, y + side * 0.05)], -1), road)
            inside = geo.points_on_road(np.stack([xs, np.full_like(xs, y - side * 0.05)], -1), road)
            edges += [(xs[a], xs[b - 1], y) for a, b in _runs(inside & ~outside)]
            between += [(xs[a], xs[b - 1], y) for a, b in _runs(inside & outside)]
        ys = np.linspace(seg[2] - seg[3] / 2 + 0.05, seg[2] + seg[3] / 2 - 0.05, 24)
        beyond = geo.points_on_road(np.stack([np.full_like(ys, seg[1] + 0.05), ys], -1), road)
        ends += [(seg[1], ys[a], ys[b - 1]) for a, b in _runs(~beyond)]
    return edges, between, ends


def _draw_road(draw, view: View, road: np.ndarray):
    s = SUPERSAMPLE
    for seg in road:
        x0, x1 = max(seg[0], view.x0 - 1), min(seg[1], view.x1 + 1)
        if x0 >= x1:
            continue
        px0, py0 = view.px(x0, seg[2] + seg[3] / 2)
        px1, py1 = view.px(x1, seg[2] - seg[3] / 2)
        draw.rectangle([px0, py0, px1, py1], fill=ASPHALT)
    road = np.ascontiguousarray(road, dtype=np.float64)
    edges, between, ends = _road_marks(road.tobytes(), len(road))
    edge_w = max(1, int(0.22 * view.scale * s))
    dash_w = max(1, int(0.15 * view.scale * s))
    for xa, xb, y in edges:
        xa, xb = max(xa, view.x0 - 1), min(xb, view.x1 + 1)
        if xa < xb:
            draw.line([view.px(xa, y), view.px(xb, y)], fill=MARKING, width=edge_w)
    period = DASH_M + GAP_M
    for xa, xb, y in between:  # dashes phased on world x, so they move with the road
        lo, hi = max(xa, view.x0 - 1), min(xb, view.x1 + 1)
        for start in np.arange(np.floor(lo / period) * period, hi, period):
            a, b = max(start, lo), min(start + DASH_M, hi)
            if a < b:
                draw.line([view.px(a, y), view.px(b, y)], fill=MARKING, width=dash_w)
    for x, ya, yb in ends:
        if view.x0 - 10 <= x <= view.x1 + 10:
            _draw_lane_end(draw, view, x, ya, yb)


def _draw_lane_end(draw, view: View, x_end, ya, yb):
    """Chevrons over the last 8 m and a red bar where a lane ends with no road beyond it."""
    s = SUPERSAMPLE
    for k in range(4):
        xc = x_end - 2.0 * k - 1.0
        p = [view.px(xc - 1.0, ya), view.px(xc, 0.5 * (ya + yb)), view.px(xc - 1.0, yb)]
        draw.line(p, fill=(*LANE_END, 170), width=max(1, int(0.2 * view.scale * s)))
    draw.line([view.px(x_end, ya), view.px(x_end, yb)], fill=LANE_END, width=max(2, int(0.5 * view.scale * s)))


def _shade(colour, factor):
    return tuple(int(min(255, c * factor)) for c in colour)


def _draw_vehicle(draw, view: View, box: np.ndarray, colour, *, outline=None, outline_width=1.0, windscreen=True):
    s = SUPERSAMPLE
    corners = geo.box_corners(box)
    px, py = view.px(corners[:, 0], corners[:, 1])
    polygon = list(zip(px.tolist(), py.tolist()))
    draw.polygon(polygon, fill=colour, outline=_shade(colour, 0.55), width=max(1, int(0.12 * view.scale * s)))
    if windscreen:  # a dark band across the front third shows where the vehicle points
        _draw_windscreen(draw, view, box, colour)
    if outline is not None:
        draw.polygon(polygon, outline=outline, width=max(2, int(outline_width * view.scale * s * 0.25)))


def _draw_windscreen(draw, view: View, box, colour):
    x, y, h, length, width = box
    c, sn = np.cos(h), np.sin(h)
    lon = np.array([0.12, 0.32, 0.32, 0.12]) * length
    lat = np.array([0.4, 0.4, -0.4, -0.4]) * width
    wx, wy = view.px(x + lon * c - lat * sn, y + lon * sn + lat * c)
    draw.polygon(list(zip(wx.tolist(), wy.tolist())), fill=_shade(colour, 0.45))


def _draw_obstacle(draw, view: View, box, colour):
    """A static object: its box crossed out (it has no front)."""
    _draw_vehicle(draw, view, box, colour, windscreen=False)
    corners = geo.box_corners(box)
    px, py = view.px(corners[:, 0], corners[:, 1])
    width = max(1, int(0.15 * view.scale * SUPERSAMPLE))
    draw.line([(px[0], py[0]), (px[2], py[2])], fill=(250, 230, 230), width=width)
    draw.line([(px[1], py[1]), (px[3], py[3])], fill=(250, 230, 230), width=width)


def _draw_marker(draw, view: View, x, y, kind):
    colour = EVENT_COLOURS.get(kind, (255, 255, 255))
    cx, cy = view.px(x, y)
    r = 1.3 * view.scale * SUPERSAMPLE
    w = max(2, int(0.25 * view.scale * SUPERSAMPLE))
    draw.ellipse([cx - r, cy - r, cx + r, cy + r], outline=colour, width=w)
    if kind in (ev.COLLISION_VEHICLE, ev.COLLISION_OBSTACLE):
        d = r * 0.6
        draw.line([(cx - d, cy - d), (cx + d, cy + d)], fill=colour, width=w)
        draw.line([(cx - d, cy + d), (cx + d, cy - d)], fill=colour, width=w)
    else:
        d = r * 0.5
        draw.polygon([(cx, cy - d), (cx + d, cy + d * 0.8), (cx - d, cy + d * 0.8)], fill=colour)


def _draw_path(draw, view: View, xy: np.ndarray, colour, width_m, dotted=False):
    if len(xy) < 2:
        return
    px, py = view.px(xy[:, 0], xy[:, 1])
    points = list(zip(px.tolist(), py.tolist()))
    w = max(1, int(width_m * view.scale * SUPERSAMPLE))
    if dotted:
        r = w * 0.9
        for x, y in points[::2]:
            draw.ellipse([x - r, y - r, x + r, y + r], fill=colour)
    else:
        draw.line(points, fill=colour, width=w, joint="curve")


def _speed(record, t):
    if "speeds" in record:
        v = np.asarray(record["speeds"])[t, 0]
        return float(np.hypot(v[0], v[1]))
    boxes, dt = record["boxes"], record.get("dt")
    if dt is None or boxes.shape[0] < 2:
        return None
    a, b = max(0, t - 1), min(boxes.shape[0] - 1, max(1, t))
    if a == b:
        a = b - 1
    return float(np.hypot(*(boxes[b, 0, :2] - boxes[a, 0, :2])) / ((b - a) * float(dt)))


def _draw_header(draw, view: View, record, t):
    s = SUPERSAMPLE
    big, small = _fonts(s)
    width = view.size[0] * s
    draw.rectangle([0, 0, width, HEADER_PX * s], fill=HEADER)
    n_steps = record["boxes"].shape[0]
    dt = record.get("dt")
    stamp = f"t = {t * float(dt):.1f} s" if dt is not None else f"step {t}"
    parts = [stamp, f"step {t}/{n_steps - 1}"]
    speed = _speed(record, t)
    if speed is not None:
        parts.append(f"ego {speed:4.1f} m/s ({speed * 3.6:3.0f} km/h)")
    draw.text((10 * s, 9 * s), "    ".join(parts), fill=TEXT, font=big)
    # infractions so far, coloured, after the stamp
    happened = record["events"][record["events"][:, 0] <= t]
    names = {}
    for _, kind, _ in happened:
        names[int(kind)] = names.get(int(kind), 0) + 1
    x = 10 * s + draw.textlength("    ".join(parts) + "      ", font=big)
    for kind, count in sorted(names.items()):
        label = ev.EVENT_NAMES.get(kind, str(kind)).replace("_", " ") + (f" x{count}" if count > 1 else "")
        draw.text((x, 10 * s), label, fill=EVENT_COLOURS.get(kind, TEXT), font=small)
        x += draw.textlength(label + "   ", font=small)
    # legend on the right
    x = width - 10 * s
    roles_here = sorted(set(record["roles"].tolist()))
    items = [(ev.ROLE_NAMES.get(r, str(r)), ROLE_COLOURS.get(r, (200, 200, 200))) for r in roles_here]
    if record["plan"] is not None:
        items.append(("plan", PLAN))
    for label, colour in reversed(items):
        x -= draw.textlength(label, font=small)
        draw.text((x, 11 * s), label, fill=TEXT_DIM, font=small)
        x -= 14 * s
        draw.rounded_rectangle([x, 12 * s, x + 10 * s, 22 * s], radius=2 * s, fill=colour)
        x -= 12 * s


def _draw_scale_bar(draw, view: View):
    s = SUPERSAMPLE
    _, small = _fonts(s)
    length_m = 20.0
    x0 = 10 * s
    y = view.size[1] * s - 8 * s
    x1 = x0 + length_m * view.scale * s
    draw.line([(x0, y), (x1, y)], fill=TEXT_DIM, width=2 * s)
    for xe in (x0, x1):
        draw.line([(xe, y - 4 * s), (xe, y + 1 * s)], fill=TEXT_DIM, width=2 * s)
    draw.text((x1 + 6 * s, y - 11 * s), f"{length_m:.0f} m", fill=TEXT_DIM, font=small)


# --------------------------------------------------------------------------- frames and files


def render_frame(record: dict, t: int, *, view: View | None = None, full_path: bool = False, scale: float = 8.0):
    """The record at step t as a Pillow RGB image. full_path draws the ego's whole path (the PNG summary);
    otherwise the trail up to t."""
    from PIL import Image, ImageDraw

    record = record if "roles" in record and "events" in record and "plan" in record else check_record(record)
    boxes, present, roles = record["boxes"], record["present"], record["roles"]
    n_steps = boxes.shape[0]
    if not 0 <= t < n_steps:
        raise UsageError(f"step {t} is outside the episode (0..{n_steps - 1})")
    view = view or default_view(record, t, scale=scale)
    w, h = view.size
    image = Image.new("RGB", (w * SUPERSAMPLE, h * SUPERSAMPLE), GRASS)
    draw = ImageDraw.Draw(image, "RGBA")
    _draw_road(draw, view, record["road"])

    ego_xy = boxes[:, 0, :2]
    if full_path:
        _draw_path(draw, view, ego_xy[t:], (*TRAIL, 110), 0.25, dotted=True)
    _draw_path(draw, view, ego_xy[: t + 1], (*TRAIL, 150), 0.35)

    dt = float(record.get("dt") or 1.0)
    flash = max(1, int(round(FLASH_S / dt)))
    events = record["events"]
    recent = events[(events[:, 0] <= t) & (events[:, 0] > t - flash)]
    involved = {int(v) for v in recent[:, 2] if v >= 0} | ({0} if len(recent) else set())
    for k in range(boxes.shape[1] - 1, -1, -1):  # the ego last, on top
        if not present[t, k]:
            continue
        colour = ROLE_COLOURS.get(int(roles[k]), (200, 200, 200))
        box = boxes[t, k]
        if roles[k] == ev.ROLE_OBSTACLE:
            _draw_obstacle(draw, view, box, colour)
        else:
            outline = (255, 70, 70) if k in involved else ((250, 250, 250) if k == 0 else None)
            _draw_vehicle(draw, view, box, colour, outline=outline, outline_width=1.2 if k in involved else 0.6)

    if record["plan"] is not None and np.isfinite(record["plan"][t]).all():
        plan = np.concatenate([ego_xy[t : t + 1], record["plan"][t]], axis=0)
        _draw_path(draw, view, plan, (*PLAN, 200), 0.18)
        _draw_path(draw, view, plan[1:], (*PLAN, 255), 0.22, dotted=True)

    for step, kind, _ in events[events[:, 0] <= t]:
        step = int(min(step, n_steps - 1))
        if kind in (ev.ROUTE_COMPLETED, ev.TIMEOUT):
            continue
        _draw_marker(draw, view, ego_xy[step, 0], ego_xy[step, 1] + 2.2, int(kind))

    _draw_header(draw, view, record, t)
    _draw_scale_bar(draw, view)
    return image.reduce(SUPERSAMPLE)  # box filter over each 2 x 2 block: the anti-aliasing


def default_png_step(record: dict) -> int:
    """The step a single picture shows: the first infraction, else the last step."""
    events = record["events"]
    bad = events[
        np.isin(events[:, 1], list(EVENT_COLOURS.keys())) & ~np.isin(events[:, 1], [ev.ROUTE_COMPLETED, ev.TIMEOUT])
    ]
    return int(min(bad[:, 0].min(), record["boxes"].shape[0] - 1)) if len(bad) else record["boxes"].shape[0] - 1


def write_png(record: dict, path: str | os.PathLike, *, t: int | None = None, scale: float = 8.0, force: bool = False):
    """One frame (default: the first infraction, else the last step) with the ego's whole path, as PNG."""
    record = check_record(record)
    t = default_png_step(record) if t is None else t
    image = render_frame(record, t, full_path=True, scale=scale)
    buffer = _io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    with io.atomic_write(path, force=force) as handle:
        handle.write(buffer.getvalue())
    return t


def mp4_available() -> bool:
    try:
        import av  # noqa: F401
    except ImportError:
        return False
    return True


def animation_suffix() -> str:
    """'.mp4' where PyAV is installed, else '.gif' (for callers choosing a default file name)."""
    return ".mp4" if mp4_available() else ".gif"


def frames(record: dict, *, every: int = 1, scale: float = 8.0):
    """Frames of the whole episode (every `every`-th step, the last one always included)."""
    record = check_record(record)
    steps = list(range(0, record["boxes"].shape[0], every))
    if steps[-1] != record["boxes"].shape[0] - 1:
        steps.append(record["boxes"].shape[0] - 1)
    for t in steps:
        yield render_frame(record, t, scale=scale)


def _gif_bytes(images, duration_ms: int) -> bytes:
    from PIL import Image

    # one palette for every frame (from the first): no colour flicker between frames
    first = images[0].quantize(colors=128, method=Image.Quantize.MEDIANCUT)
    paletted = [first] + [im.quantize(palette=first, dither=Image.Dither.NONE) for im in images[1:]]
    buffer = _io.BytesIO()
    paletted[0].save(
        buffer, format="GIF", save_all=True, append_images=paletted[1:], duration=duration_ms, loop=0, optimize=False
    )
    return buffer.getvalue()


def _mp4_bytes(images, fps: float) -> bytes:
    from fractions import Fraction

    import av

    w, h = images[0].size
    w2, h2 = w + (w % 2), h + (h % 2)  # yuv420p needs even sides
    buffer = _io.BytesIO()
    with av.open(buffer, mode="w", format="mp4") as container:
        stream = container.add_stream(
            "libx264" if "libx264" in av.codecs_available else "mpeg4", rate=Fraction(fps).limit_denominator(1000)
        )
        stream.width, stream.height, stream.pix_fmt = w2, h2, "yuv420p"
        stream.options = {"crf": "20"} if stream.codec_context.name == "libx264" else {}
        for image in images:
            if (w2, h2) != (w, h):
                from PIL import Image

                canvas = Image.new("RGB", (w2, h2), GRASS)
                canvas.paste(image, (0, 0))
                image = canvas
            for packet in stream.encode(av.VideoFrame.from_image(image)):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return buffer.getvalue()


def write_animation(
    record: dict,
    path: str | os.PathLike,
    *,
    every: int = 1,
    speedup: float = 1.0,
    scale: float = 8.0,
    force: bool = False,
) -> int:
    """Animated GIF (.gif) or MP4 (.mp4, needs PyAV) of the episode at real time x speedup; returns the
    number of frames. Nothing is written unless every frame rendered."""
    suffix = os.path.splitext(str(path))[1].lower()
    if suffix not in (".gif", ".mp4"):
        raise UsageError(f"{io.display_name(path)}: an animation is .gif or .mp4")
    if suffix == ".mp4" and not mp4_available():
        raise UsageError(f"{io.display_name(path)}: MP4 needs PyAV (pip install av); write a .gif instead")
    io.refuse_existing(path, force)
    checked = check_record(record)
    images = list(frames(checked, every=every, scale=scale))
    dt = float(checked.get("dt") or 0.2) * every / speedup
    data = _gif_bytes(images, max(20, int(round(1000 * dt)))) if suffix == ".gif" else _mp4_bytes(images, 1.0 / dt)
    with io.atomic_write(path, force=force) as handle:
        handle.write(data)
    return len(images)

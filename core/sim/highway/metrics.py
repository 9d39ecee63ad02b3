"""Closed-loop route metrics in the Bench2Drive / CARLA-leaderboard form, computed from an episode record.

Per route: RC (route completion, %), the infraction penalty P = prod_j p_j ** n_j, the driving score
RC * P, success (the route completed with no infraction), efficiency (ego speed against the traffic around
it, %) and comfort (share of 2 s windows inside nuPlan's comfort bounds). Over routes: DS = mean(RC * P),
SR = % of successful routes, and the means of the rest. docs/sim-scoring.md states the readings.

The record (a dict of arrays; events.py has the codes):
    boxes [T, K, 5], present [T, K] (the ego is vehicle 0), events [E, 3] int (t, kind, vehicle),
    dt (seconds per step), route [2] = (x_start, x_end) of the ego's route along +x;
    optional: speeds [T, K, 2] (world vx, vy; otherwise differenced from the boxes), roles [K].
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from methodkit.core.errors import DataError
from methodkit.core.sim.highway import events as ev
from methodkit.core.sim.highway import score

# Infraction coefficients p_j (CARLA leaderboard 2.0 / Bench2Drive: vehicle 0.60, static 0.65; the issue
# gives off-road and lane-end overrun the static-collision value).
PENALTIES = {
    ev.COLLISION_VEHICLE: 0.60,
    ev.COLLISION_OBSTACLE: 0.65,
    ev.OFF_ROAD: 0.65,
    ev.LANE_END_OVERRUN: 0.65,
}
# Events that end the route: RC freezes where the ego was then.
TERMINAL = (ev.MISSED_EXIT, ev.TIMEOUT, ev.ROUTE_COMPLETED)
# CARLA's CollisionTest ignores a new collision with the same actor within MAX_ID_TIME = 5 s.
SAME_ACTOR_WINDOW_S = 5.0
# Bench2Drive's smoothness: windows of 20 frames at 10 Hz (2 s), Savitzky-Golay window 7, order 2.
COMFORT_WINDOW_S = 2.0
COMFORT_SG_WINDOW = 7
# Efficiency: traffic within this distance of the ego counts as "surrounding"; ratios above 1000 % are
# dropped, as Bench2Drive drops them.
NEIGHBOUR_RADIUS_M = 50.0
EFFICIENCY_WINDOW_S = 2.0
MAX_EFFICIENCY_PCT = 1000.0
MOVING_SPEED = 0.5  # [m/s] slower vehicles do not set the pace (stopped cars, obstacles)


@dataclass
class RouteMetrics:
    rc: float  # route completion, % of the route length
    penalty: float  # prod p_j ** n_j
    ds: float  # rc * penalty
    success: bool
    efficiency: float  # %, NaN when the ego never had moving traffic around it
    comfort: float  # share of comfortable windows in [0, 1]
    ended_by: str  # the terminal event's name, or "end_of_record"
    ended_at_s: float
    infractions: dict = field(default_factory=dict)  # event name -> count (after de-duplication)

    def to_dict(self) -> dict:
        return asdict(self)


def _field(record, key, ndim=None):
    if key not in record:
        raise DataError(f"episode record: missing key '{key}'")
    value = np.asarray(record[key])
    if ndim is not None and value.ndim != ndim:
        raise DataError(f"episode record: '{key}' has {value.ndim} dimensions, expected {ndim}")
    return value


def counted_infractions(events: np.ndarray, dt: float, end_step: int) -> list[tuple[int, int, int]]:
    """The penalised events up to end_step, de-duplicated: an event repeating the same (kind, vehicle) at the
    next step is one continuing infraction, and a collision with the same vehicle within 5 s counts once."""
    kept: list[tuple[int, int, int]] = []
    last_step: dict[tuple[int, int], int] = {}  # (kind, vehicle) -> step of its latest event
    last_counted: dict[tuple[int, int], int] = {}
    window = int(round(SAME_ACTOR_WINDOW_S / dt))
    for t, kind, vehicle in sorted(map(tuple, np.asarray(events, dtype=np.int64).reshape(-1, 3))):
        if kind not in PENALTIES or t > end_step:
            continue
        key = (kind, vehicle)
        continuing = last_step.get(key) is not None and t - last_step[key] <= 1
        recent = kind in (ev.COLLISION_VEHICLE, ev.COLLISION_OBSTACLE) and (
            last_counted.get(key) is not None and t - last_counted[key] < window
        )
        last_step[key] = t
        if continuing or recent:
            continue
        last_counted[key] = t
        kept.append((t, kind, vehicle))
    return kept


def ego_kinematics(boxes: np.ndarray, dt: float, speeds: np.ndarray | None = None):
    """Ego speed [T], longitudinal / lateral acceleration [T] and yaw rate [T] from the record."""
    xy = boxes[:, 0, :2]
    vel = speeds[:, 0] if speeds is not None else np.gradient(xy, dt, axis=0)
    acc = np.gradient(vel, dt, axis=0)
    heading = boxes[:, 0, 2]
    c, s = np.cos(heading), np.sin(heading)
    steps = np.diff(heading)
    unwrapped = np.concatenate(
        [[heading[0]], heading[0] + np.cumsum(steps - 2 * np.pi * np.round(steps / (2 * np.pi)))]
    )
    yaw_rate = np.gradient(unwrapped, dt)
    return np.hypot(vel[:, 0], vel[:, 1]), c * acc[:, 0] + s * acc[:, 1], -s * acc[:, 0] + c * acc[:, 1], yaw_rate


def window_is_comfortable(a_lon, a_lat, yaw_rate, dt) -> bool:
    """nuPlan's six bounds on one window, smoothed as Bench2Drive smooths them (Savitzky-Golay, window 7,
    order 2; jerk and yaw acceleration are the filter's first derivative)."""
    from scipy.signal import savgol_filter

    n = len(a_lon)
    window = min(COMFORT_SG_WINDOW, n)
    if window <= 2:
        return True  # too short to estimate a derivative: nothing to hold against the bounds
    a_mag = np.hypot(a_lon, a_lat)

    def sg(x, deriv=0):
        return savgol_filter(x, window, 2, deriv=deriv, delta=dt)

    def inside(x, lo, hi):
        return bool(np.all((x > lo) & (x < hi)))

    lon, lat, mag = sg(a_lon), sg(a_lat), sg(a_mag)
    return (
        inside(lon, score.MIN_LON_ACCEL, score.MAX_LON_ACCEL)
        and inside(lat, -score.MAX_ABS_LAT_ACCEL, score.MAX_ABS_LAT_ACCEL)
        and inside(sg(mag, 1), -score.MAX_ABS_MAG_JERK, score.MAX_ABS_MAG_JERK)
        and inside(sg(lon, 1), -score.MAX_ABS_LON_JERK, score.MAX_ABS_LON_JERK)
        and inside(sg(yaw_rate, 1), -score.MAX_ABS_YAW_ACCEL, score.MAX_ABS_YAW_ACCEL)
        and inside(sg(yaw_rate), -score.MAX_ABS_YAW_RATE, score.MAX_ABS_YAW_RATE)
    )


def comfort_share(a_lon, a_lat, yaw_rate, dt) -> float:
    """Share of whole 2 s windows that are comfortable (one window if the route is shorter)."""
    per = max(1, int(round(COMFORT_WINDOW_S / dt)))
    n = len(a_lon)
    if n <= per:
        return 1.0 if window_is_comfortable(a_lon, a_lat, yaw_rate, dt) else 0.0
    flags = [
        window_is_comfortable(a_lon[i : i + per], a_lat[i : i + per], yaw_rate[i : i + per], dt)
        for i in range(0, n - per + 1, per)
    ]
    return float(np.mean(flags))


def efficiency_pct(boxes, present, speeds_all, dt, roles=None) -> float:
    """Mean over 2 s windows of 100 x ego mean speed / mean speed of the moving traffic within 50 m."""
    n_steps = boxes.shape[0]
    speed = np.hypot(speeds_all[..., 0], speeds_all[..., 1])  # [T, K]
    near = np.hypot(boxes[:, :, 0] - boxes[:, :1, 0], boxes[:, :, 1] - boxes[:, :1, 1]) <= NEIGHBOUR_RADIUS_M
    others = present & near & (speed > MOVING_SPEED)
    others[:, 0] = False
    if roles is not None:
        others &= np.asarray(roles)[None, :] != ev.ROLE_OBSTACLE
    per = max(1, int(round(EFFICIENCY_WINDOW_S / dt)))
    ratios = []
    for start in range(0, n_steps, per):
        rows = slice(start, min(n_steps, start + per))
        traffic = speed[rows][others[rows]]
        if traffic.size == 0 or traffic.mean() <= 0:
            continue
        ratio = 100.0 * speed[rows, 0].mean() / traffic.mean()
        if ratio <= MAX_EFFICIENCY_PCT:
            ratios.append(ratio)
    return float(np.mean(ratios)) if ratios else float("nan")


def route_metrics(record: dict, comfort: bool = True) -> RouteMetrics:
    """Metrics of one episode (see the module doc for the record).

    comfort=False skips the comfort share (NaN; its Savitzky-Golay windows dominate the cost)
    for callers that need only RC, penalty and DS, such as a training loop's logging."""
    boxes = _field(record, "boxes", 3).astype(np.float64)
    present = _field(record, "present", 2).astype(bool)
    events = _field(record, "events").astype(np.int64).reshape(-1, 3)
    dt = float(_field(record, "dt"))
    route = _field(record, "route", 1).astype(np.float64)
    if boxes.shape[-1] != 5 or present.shape != boxes.shape[:2] or boxes.shape[0] < 1:
        raise DataError(
            f"episode record: boxes {boxes.shape} and present {present.shape} do not match [T, K, 5] / [T, K]"
        )
    if route.shape != (2,) or not route[1] > route[0]:
        raise DataError(f"episode record: route must be (x_start, x_end) with x_end > x_start, got {route.tolist()}")
    if not dt > 0:
        raise DataError(f"episode record: dt must be positive, got {dt}")
    speeds = np.asarray(record["speeds"], dtype=np.float64) if "speeds" in record else None
    n_steps = boxes.shape[0]

    # the route ends at the first terminal event (or the record's last step)
    end_step, ended_by = n_steps - 1, "end_of_record"
    terminal = events[np.isin(events[:, 1], TERMINAL)]
    if len(terminal):
        first = terminal[np.argmin(terminal[:, 0])]
        end_step, ended_by = int(min(first[0], n_steps - 1)), ev.EVENT_NAMES[int(first[1])]
    length = route[1] - route[0]
    if ended_by == "route_completed":
        rc = 100.0
    else:
        progress = boxes[: end_step + 1, 0, 0].max() - route[0]
        rc = float(np.clip(100.0 * progress / length, 0.0, 100.0))

    kept = counted_infractions(events, dt, end_step)
    counts = {ev.EVENT_NAMES[kind]: 0 for kind in PENALTIES}
    penalty = 1.0
    for _, kind, _ in kept:
        counts[ev.EVENT_NAMES[kind]] += 1
        penalty *= PENALTIES[kind]

    upto = slice(0, end_step + 1)
    speed, a_lon, a_lat, yaw_rate = ego_kinematics(boxes[upto], dt, None if speeds is None else speeds[upto])
    all_speeds = speeds[upto] if speeds is not None else np.gradient(boxes[upto, :, :2], dt, axis=0)
    if end_step == 0:
        all_speeds = np.zeros_like(boxes[upto, :, :2])
    return RouteMetrics(
        rc=rc,
        penalty=penalty,
        ds=rc * penalty,
        success=bool(rc >= 100.0 and not kept),
        efficiency=efficiency_pct(boxes[upto], present[upto], all_speeds, dt, record.get("roles")),
        comfort=comfort_share(a_lon, a_lat, yaw_rate, dt) if comfort else float("nan"),
        ended_by=ended_by,
        ended_at_s=end_step * dt,
        infractions=counts,
    )


def summarize(routes: list[RouteMetrics]) -> dict:
    """Suite metrics: DS = mean(RC x P), SR = % successful, and means of RC, P, efficiency, comfort."""
    if not routes:
        raise DataError("no routes to summarise")
    eff = np.array([r.efficiency for r in routes])
    counts = {name: int(sum(r.infractions.get(name, 0) for r in routes)) for name in routes[0].infractions}
    return {
        "routes": len(routes),
        "ds": float(np.mean([r.ds for r in routes])),
        "rc": float(np.mean([r.rc for r in routes])),
        "penalty": float(np.mean([r.penalty for r in routes])),
        "sr": 100.0 * float(np.mean([r.success for r in routes])),
        "efficiency": float(np.nanmean(eff)) if np.isfinite(eff).any() else float("nan"),
        "comfort": float(np.mean([r.comfort for r in routes])),
        "infractions": counts,
    }

"""NAVSIM-v1 PDM score of ego plans against given futures of the other agents, for many plans x scenes.

    PDMS = NC * DAC * (5 TTC + 5 EP + 2 C) / 12

NC (no at-fault collision, {0, 1/2, 1}), DAC (drivable-area compliance, {0, 1}), TTC (time to collision
within bound, {0, 1}), EP (ego progress, [0, 1]) and C (comfort, {0, 1}) follow NAVSIM v1's PDMScorer and
nuPlan's comfort bounds; docs/sim-scoring.md states every reading made where a highway made of straight
lane segments differs from a nuPlan map. `score_plans` runs one Numba kernel over all (scene, plan) pairs;
`score_plans_ref` is the NumPy-vectorised reference of the same function (vectorised over scenes, plans and
agents, looping over time as the at-fault bookkeeping is sequential).

Inputs (N scenes, P plans per scene, T + 1 plan states at interval dt, K agents, A >= 1 agent states):
- ego [N, P, T+1, 7]: (x, y, heading, v_lon, v_lat, a_lon, a_lat), the box centre with body-frame velocity
  and acceleration; index 0 is the current state. `plan_states` derives them from plan points.
- ego_size [N, 2]: (length, width).
- agents [N, K, A, 5] boxes at times 0, dt, 2 dt, ...; agent_speeds [N, K, A, 2] world (vx, vy);
  agent_present [N, K, A] bool; agent_static [N, K] bool (objects, not agents: a collision scores 1/2).
  Times past A - 1 (TTC looks up to 0.9 s beyond the plan) extrapolate the last state at constant velocity.
- road [N, S, 5] lane segments, road_mask [N, S] (padding rows False).
- reference_progress [N]: the progress in metres of a reference plan (e.g. the expert's) in that scene.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numba import njit, prange

from methodkit.core.errors import DataError
from methodkit.core.sim.highway import geometry as geo

EGO_X, EGO_Y, EGO_HEADING, EGO_VLON, EGO_VLAT, EGO_ALON, EGO_ALAT = range(7)
EGO_STATE_DIM = 7

# NAVSIM v1 PDMScorerConfig and nuPlan defaults
WEIGHT_EP, WEIGHT_TTC, WEIGHT_C = 5.0, 5.0, 2.0
PROGRESS_DISTANCE_THRESHOLD = 5.0  # [m] below this reference progress, EP = 1
STOPPED_SPEED_COLLISION = 5e-2  # [m/s] nuPlan's is_track_stopped / ego-stopped threshold (collision type)
STOPPED_SPEED_TTC = 5e-3  # [m/s] PDMScorerConfig.stopped_speed_threshold (TTC skips a stopped ego)
AHEAD_ANGLE = np.deg2rad(30.0)  # nuPlan is_agent_ahead
BEHIND_ANGLE = np.deg2rad(150.0)  # nuPlan is_agent_behind
TTC_HORIZON_S = 1.0
TTC_STRIDE_S = 0.3  # NAVSIM checks offsets np.arange(0, 10, 3) x 0.1 s = 0, 0.3, 0.6, 0.9 s

# nuPlan comfort bounds (strict inequalities, as NAVSIM's _within_bound)
MIN_LON_ACCEL, MAX_LON_ACCEL = -4.05, 2.40
MAX_ABS_LAT_ACCEL = 4.89
MAX_ABS_MAG_JERK = 8.37
MAX_ABS_LON_JERK = 4.13
MAX_ABS_YAW_ACCEL = 1.93
MAX_ABS_YAW_RATE = 0.95

# collision types (nuPlan CollisionType)
STOPPED_EGO, STOPPED_TRACK, ACTIVE_FRONT, ACTIVE_REAR, ACTIVE_LATERAL = range(5)

MIN_STATES = 5  # the yaw filters' window (order 3 needs 5 points)

METRICS = ("nc", "dac", "ttc", "ep", "comfort", "pdms", "progress")


@dataclass
class PlanScores:
    """Per-(scene, plan) sub-scores [N, P] and the raw progress in metres."""

    nc: np.ndarray
    dac: np.ndarray
    ttc: np.ndarray
    ep: np.ndarray
    comfort: np.ndarray
    pdms: np.ndarray
    progress: np.ndarray

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in METRICS}

    @classmethod
    def from_stack(cls, out: np.ndarray) -> PlanScores:
        return cls(*(out[..., i] for i in range(len(METRICS))))


def ttc_offsets(dt: float) -> np.ndarray:
    """Step offsets of the TTC look-ahead: 0 to under 1 s in strides of at most 0.3 s (0, 3, 6, 9 at 10 Hz,
    every step 0..4 at 5 Hz: the stride rounds down so a coarser clock is checked at least as densely)."""
    horizon = int(round(TTC_HORIZON_S / dt))
    stride = max(1, int(np.floor(TTC_STRIDE_S / dt + 1e-9)))
    return np.arange(0, horizon, stride, dtype=np.int64)


@lru_cache(maxsize=32)
def comfort_operators(n_time: int, dt: float) -> np.ndarray:
    """The Savitzky-Golay filters of NAVSIM's comfort metrics as matrices [4, n, n] (signal' = M @ signal):
    0 acceleration smoothing (window n, order 2); 1 jerk = d/dt (window n, order 2) of the acceleration
    smoothed with window 8; 2 yaw rate (window 5, order 2, 1st derivative); 3 yaw acceleration (window 5,
    order 3, 2nd derivative). Windows are capped at n, as NAVSIM's min(window, n_time)."""
    from scipy.signal import savgol_filter

    eye = np.eye(n_time)

    def sg(window, order, deriv=0):
        window = min(window, n_time)
        return savgol_filter(eye, window, order, deriv=deriv, delta=dt, axis=0)

    smooth_full = sg(n_time, 2)
    jerk = sg(n_time, 2, 1) @ sg(8, 2)
    return np.ascontiguousarray(np.stack([smooth_full, jerk, sg(5, 2, 1), sg(5, 3, 2)]))


# --------------------------------------------------------------------------- kernel


@njit(cache=True)
def _relative_angle(ex, ey, eh, ax, ay):
    """nuPlan get_agent_relative_angle: angle between ego heading and the ego->agent vector (NaN if equal)."""
    dx = ax - ex
    dy = ay - ey
    norm = np.sqrt(dx * dx + dy * dy)
    if norm == 0.0:
        return np.nan
    dot = (np.cos(eh) * dx + np.sin(eh) * dy) / norm
    return np.arccos(min(1.0, max(-1.0, dot)))


@njit(cache=True)
def _agent_at(agents, speeds, present, k, t, dt, box):
    """Agent k's box at step t into `box`; past the given horizon, constant velocity from the last state."""
    last = agents.shape[1] - 1
    if t <= last:
        for j in range(5):
            box[j] = agents[k, t, j]
        return present[k, t]
    geo.extrapolate_cv_into(agents[k, last], speeds[k, last, 0], speeds[k, last, 1], (t - last) * dt, box)
    return present[k, last]


@njit(cache=True)
def _ego_area(x, y, h, length, width, road, slots, n_slots, hits):
    """(in multiple lanes, in non-drivable area) for the ego box, by NAVSIM's corner rules over lanes.
    `slots` maps each segment to its lane (0..n_slots-1); `hits` is [4, S] scratch."""
    c, s = np.cos(h), np.sin(h)
    off_road = False
    hits[:, :n_slots] = False
    for k in range(4):
        lon = geo._CORNER_SIGNS[k, 0] * 0.5 * length
        lat = geo._CORNER_SIGNS[k, 1] * 0.5 * width
        px = x + lon * c - lat * s
        py = y + lon * s + lat * c
        inside = False
        for seg in range(road.shape[0]):
            if road[seg, 0] <= px <= road[seg, 1] and abs(py - road[seg, 2]) <= 0.5 * road[seg, 3]:
                inside = True
                hits[k, slots[seg]] = True
        if not inside:
            off_road = True
    lanes_touched = 0
    one_lane_holds_all = False
    for lane in range(n_slots):
        count = 0
        for k in range(4):
            if hits[k, lane]:
                count += 1
        if count > 0:
            lanes_touched += 1
        if count == 4:
            one_lane_holds_all = True
    return lanes_touched > 1 and not one_lane_holds_all, off_road


@njit(cache=True)
def _collision_type(ego_box, ego_speed, agent_box, agent_speed, static):
    """nuPlan/NAVSIM get_collision_type with the box centre as the ego pose."""
    if ego_speed <= STOPPED_SPEED_COLLISION:
        return STOPPED_EGO
    if static or agent_speed <= STOPPED_SPEED_COLLISION:
        return STOPPED_TRACK
    if _relative_angle(ego_box[0], ego_box[1], ego_box[2], agent_box[0], agent_box[1]) > BEHIND_ANGLE:
        return ACTIVE_REAR
    c, s = np.cos(ego_box[2]), np.sin(ego_box[2])
    hl, hw = 0.5 * ego_box[3], 0.5 * ego_box[4]
    flx, fly = ego_box[0] + hl * c - hw * s, ego_box[1] + hl * s + hw * c
    frx, fry = ego_box[0] + hl * c + hw * s, ego_box[1] + hl * s - hw * c
    if geo.segment_hits_box(flx, fly, frx, fry, agent_box[0], agent_box[1], agent_box[2], agent_box[3], agent_box[4]):
        return ACTIVE_FRONT
    return ACTIVE_LATERAL


@njit(cache=True)
def _near(a, b):
    """Cheap reject before the separating-axis test: centres farther apart than the two half-diagonals."""
    dx = a[0] - b[0]
    dy = a[1] - b[1]
    r = 0.5 * (np.sqrt(a[3] * a[3] + a[4] * a[4]) + np.sqrt(b[3] * b[3] + b[4] * b[4]))
    return dx * dx + dy * dy <= r * r


@njit(cache=True)
def _filtered_within(op, signal, lo, hi):
    """Is every entry of op @ signal strictly inside (lo, hi)? (A loop: no BLAS call or temporary.)"""
    n = signal.shape[0]
    for i in range(n):
        v = 0.0
        for j in range(n):
            v += op[i, j] * signal[j]
        if not (lo < v < hi):
            return False
    return True


@njit(cache=True)
def _score_one(ego, size, agents, speeds, present, static, road, slots, n_slots, ref_progress, offsets, dt, ops, out):
    n_time = ego.shape[0]
    n_agents = agents.shape[0]
    length, width = size[0], size[1]
    ego_box = np.empty(5)
    probe = np.empty(5)
    agent_box = np.empty(5)
    hits = np.zeros((4, road.shape[0]), dtype=np.bool_)
    multiple = np.empty(n_time, dtype=np.bool_)
    off_road = np.empty(n_time, dtype=np.bool_)
    for t in range(n_time):
        multiple[t], off_road[t] = _ego_area(ego[t, 0], ego[t, 1], ego[t, 2], length, width, road, slots, n_slots, hits)
    dac = 0.0 if off_road.any() else 1.0

    # NC: non-at-fault collisions mark the track, which is then ignored (NAVSIM's collided_track_ids)
    nc = 1.0
    collided = np.zeros(n_agents, dtype=np.bool_)
    for t in range(n_time):
        if nc == 0.0:
            break
        ego_box[0], ego_box[1], ego_box[2], ego_box[3], ego_box[4] = ego[t, 0], ego[t, 1], ego[t, 2], length, width
        ego_speed = np.hypot(ego[t, 3], ego[t, 4])
        for k in range(n_agents):
            if collided[k] or not _agent_at(agents, speeds, present, k, t, dt, agent_box):
                continue
            if not (_near(ego_box, agent_box) and geo.overlap_boxes(ego_box, agent_box)):
                continue
            agent_speed = np.hypot(speeds[k, min(t, speeds.shape[1] - 1), 0], speeds[k, min(t, speeds.shape[1] - 1), 1])
            kind = _collision_type(ego_box, ego_speed, agent_box, agent_speed, static[k])
            if (
                kind == ACTIVE_FRONT
                or kind == STOPPED_TRACK
                or ((multiple[t] or off_road[t]) and kind == ACTIVE_LATERAL)
            ):
                nc = min(nc, 0.5 if static[k] else 0.0)
            else:
                collided[k] = True

    # TTC: the ego box moved along its heading at its speed for each offset, against the agents then
    ttc = 1.0
    collided[:] = False
    for t in range(n_time):
        if ttc == 0.0:
            break
        speed = np.hypot(ego[t, 3], ego[t, 4])
        c, s = np.cos(ego[t, 2]), np.sin(ego[t, 2])
        for i in range(offsets.shape[0]):
            delta = offsets[i] * dt
            probe[0], probe[1], probe[2], probe[3], probe[4] = (
                ego[t, 0] + c * speed * delta,
                ego[t, 1] + s * speed * delta,
                ego[t, 2],
                length,
                width,
            )
            for k in range(n_agents):
                if collided[k] or not _agent_at(agents, speeds, present, k, t + offsets[i], dt, agent_box):
                    continue
                if not (_near(probe, agent_box) and geo.overlap_boxes(probe, agent_box)):
                    continue
                if speed < STOPPED_SPEED_TTC:
                    continue
                angle = _relative_angle(ego[t, 0], ego[t, 1], ego[t, 2], agent_box[0], agent_box[1])
                if angle < AHEAD_ANGLE or ((multiple[t] or off_road[t]) and not angle > BEHIND_ANGLE):
                    ttc = 0.0
                else:
                    collided[k] = True

    # EP against the reference (NAVSIM v1 normalises by the larger of the two proposals it scores)
    progress = max(0.0, ego[n_time - 1, 0] - ego[0, 0])
    gate = nc * dac
    gated = progress * gate
    top = max(ref_progress, gated)
    if top > PROGRESS_DISTANCE_THRESHOLD:
        ep = gated / top
    else:
        ep = 1.0 if gate != 0.0 else 0.0

    # comfort on the smoothed signals
    a_lon = ego[:, 5].copy()
    a_lat = ego[:, 6].copy()
    a_mag = np.sqrt(a_lon * a_lon + a_lat * a_lat)
    heading = ego[:, 2].copy()
    for t in range(1, n_time):  # phase unwrap, as NAVSIM's _phase_unwrap
        heading[t] = (
            heading[t - 1]
            + (ego[t, 2] - ego[t - 1, 2])
            - 2.0 * np.pi * np.round((ego[t, 2] - ego[t - 1, 2]) / (2.0 * np.pi))
        )
    comfortable = (
        _filtered_within(ops[0], a_lon, MIN_LON_ACCEL, MAX_LON_ACCEL)
        and _filtered_within(ops[0], a_lat, -MAX_ABS_LAT_ACCEL, MAX_ABS_LAT_ACCEL)
        and _filtered_within(ops[1], a_mag, -MAX_ABS_MAG_JERK, MAX_ABS_MAG_JERK)
        and _filtered_within(ops[1], a_lon, -MAX_ABS_LON_JERK, MAX_ABS_LON_JERK)
        and _filtered_within(ops[3], heading, -MAX_ABS_YAW_ACCEL, MAX_ABS_YAW_ACCEL)
        and _filtered_within(ops[2], heading, -MAX_ABS_YAW_RATE, MAX_ABS_YAW_RATE)
    )
    comfort = 1.0 if comfortable else 0.0

    out[0], out[1], out[2], out[3], out[4] = nc, dac, ttc, ep, comfort
    out[5] = nc * dac * (WEIGHT_TTC * ttc + WEIGHT_EP * ep + WEIGHT_C * comfort) / (WEIGHT_TTC + WEIGHT_EP + WEIGHT_C)
    out[6] = progress


@njit(cache=True, parallel=True)
def _score_kernel(ego, size, agents, speeds, present, static, road, slots, n_slots, ref, offsets, dt, ops, out):
    n_scenes, n_plans = ego.shape[0], ego.shape[1]
    for flat in prange(n_scenes * n_plans):
        n, p = flat // n_plans, flat % n_plans
        _score_one(
            ego[n, p], size[n], agents[n], speeds[n], present[n], static[n], road[n], slots[n], n_slots[n],
            ref[n], offsets, dt, ops, out[n, p],
        )  # fmt: skip


# --------------------------------------------------------------------------- inputs


@dataclass
class ScoreInputs:
    """Validated, contiguous float64/bool inputs shared by the kernel and the reference."""

    ego: np.ndarray
    ego_size: np.ndarray
    agents: np.ndarray
    agent_speeds: np.ndarray
    agent_present: np.ndarray
    agent_static: np.ndarray
    road: np.ndarray  # masked rows set to NaN so they contain no point
    lane_slots: np.ndarray  # [N, S] int64: each segment's lane among the scene's distinct lane indices
    n_lanes: np.ndarray  # [N] int64
    reference_progress: np.ndarray
    dt: float


def _check(name, array, shape):
    if array.ndim != len(shape) or any(want is not None and got != want for got, want in zip(array.shape, shape)):
        raise DataError(
            f"score: {name} has shape {array.shape}, expected {tuple('*' if s is None else s for s in shape)}"
        )


def prepare_inputs(
    ego, ego_size, agents, agent_speeds, agent_present, agent_static, road, road_mask, reference_progress, dt
) -> ScoreInputs:
    """Check shapes and finiteness (DataError naming the argument) and build the lane slots."""
    ego = np.ascontiguousarray(ego, dtype=np.float64)
    _check("ego", ego, (None, None, None, EGO_STATE_DIM))
    n, _, n_time, _ = ego.shape
    if n_time < MIN_STATES:
        raise DataError(f"score: a plan needs at least {MIN_STATES} states (the comfort filters' window), got {n_time}")
    ego_size = np.ascontiguousarray(ego_size, dtype=np.float64)
    _check("ego_size", ego_size, (n, 2))
    agents = np.ascontiguousarray(agents, dtype=np.float64)
    _check("agents", agents, (n, None, None, 5))
    k, a = agents.shape[1], agents.shape[2]
    if a < 1:
        raise DataError("score: agents need at least one state in time")
    agent_speeds = np.ascontiguousarray(agent_speeds, dtype=np.float64)
    _check("agent_speeds", agent_speeds, (n, k, a, 2))
    agent_present = np.ascontiguousarray(agent_present, dtype=np.bool_)
    _check("agent_present", agent_present, (n, k, a))
    agent_static = np.ascontiguousarray(agent_static, dtype=np.bool_)
    _check("agent_static", agent_static, (n, k))
    road = np.array(road, dtype=np.float64)  # a copy: masked rows are overwritten
    _check("road", road, (n, None, 5))
    road_mask = np.ones(road.shape[:2], dtype=bool) if road_mask is None else np.asarray(road_mask, dtype=bool)
    _check("road_mask", road_mask, road.shape[:2])
    reference_progress = np.ascontiguousarray(reference_progress, dtype=np.float64)
    _check("reference_progress", reference_progress, (n,))
    for name, values in (
        ("ego", ego),
        ("ego_size", ego_size),
        ("agents", np.where(agent_present[..., None], agents, 0.0)),
        ("agent_speeds", np.where(agent_present[..., None], agent_speeds, 0.0)),
        ("road", np.where(road_mask[..., None], road, 0.0)),
        ("reference_progress", reference_progress),
    ):
        bad = ~np.isfinite(values)
        if bad.any():
            where = np.argwhere(bad)[0]
            raise DataError(f"score: {name} has a non-finite value at index {tuple(int(i) for i in where)}")
    if not (dt > 0 and np.isfinite(dt)):
        raise DataError(f"score: dt must be positive, got {dt}")
    road[~road_mask] = np.nan
    slots = np.zeros(road.shape[:2], dtype=np.int64)
    n_lanes = np.zeros(n, dtype=np.int64)
    for i in range(n):
        lanes = road[i, road_mask[i], geo.SEG_LANE]
        unique, inverse = np.unique(lanes, return_inverse=True)
        slots[i, road_mask[i]] = inverse
        n_lanes[i] = len(unique)
    return ScoreInputs(
        ego, ego_size, agents, agent_speeds, agent_present, agent_static, road, slots, n_lanes, reference_progress, dt
    )


def score_plans(
    ego,
    ego_size,
    agents,
    agent_speeds,
    agent_present,
    agent_static,
    road,
    reference_progress,
    *,
    road_mask=None,
    dt: float = 0.1,
) -> PlanScores:
    """PDM score of every plan in every scene (Numba, parallel over scene x plan pairs). See the module doc."""
    x = prepare_inputs(
        ego, ego_size, agents, agent_speeds, agent_present, agent_static, road, road_mask, reference_progress, dt
    )
    return score_prepared(x)


def score_prepared(x: ScoreInputs) -> PlanScores:
    """score_plans on inputs already through prepare_inputs (the benchmark times this)."""
    out = np.empty(x.ego.shape[:2] + (len(METRICS),))
    ops = comfort_operators(x.ego.shape[2], float(x.dt))
    _score_kernel(
        x.ego, x.ego_size, x.agents, x.agent_speeds, x.agent_present, x.agent_static, x.road, x.lane_slots,
        x.n_lanes, x.reference_progress, ttc_offsets(x.dt), float(x.dt), ops, out,
    )  # fmt: skip
    return PlanScores.from_stack(out)


# --------------------------------------------------------------------------- NumPy reference


def _agents_at_ref(x: ScoreInputs, t: int, xp=np):
    """Agent boxes [N, K, 5], presence [N, K] and speeds [N, K, 2] at step t (constant velocity past the end)."""
    last = x.agents.shape[2] - 1
    if t <= last:
        return x.agents[:, :, t], x.agent_present[:, :, t], x.agent_speeds[:, :, t]
    speeds = x.agent_speeds[:, :, last]
    return geo.extrapolate_cv(x.agents[:, :, last], speeds, (t - last) * x.dt, xp), x.agent_present[:, :, last], speeds


def _relative_angle_ref(ego_xyh, agent_xy, xp=np):
    d = agent_xy - ego_xyh[..., :2]
    norm = xp.hypot(d[..., 0], d[..., 1])
    with _quiet(xp):
        dot = (xp.cos(ego_xyh[..., 2]) * d[..., 0] + xp.sin(ego_xyh[..., 2]) * d[..., 1]) / norm
        angle = xp.arccos(xp.clip(dot, -1.0, 1.0))
    return xp.where(norm == 0.0, xp.nan, angle)


def _quiet(xp):
    """np.errstate(invalid/divide ignored) for NumPy; CuPy never warns on floating-point errors."""
    import contextlib

    return np.errstate(invalid="ignore", divide="ignore") if xp is np else contextlib.nullcontext()


def _savgol_ref(signal, window, order, deriv, dt):
    from scipy.signal import savgol_filter

    return savgol_filter(signal, min(window, signal.shape[-1]), order, deriv=deriv, delta=dt, axis=-1)


def _comfort_filters(n_time: int, dt: float, xp):
    """The comfort filters as (acceleration smoothing, jerk, yaw rate, yaw acceleration) callables on [..., T]:
    scipy's savgol_filter for the default NumPy reference, comfort_operators' matrices on the array module."""
    if xp is None:
        return (
            lambda v: _savgol_ref(v, n_time, 2, 0, dt),
            lambda v: _savgol_ref(_savgol_ref(v, 8, 2, 0, dt), n_time, 2, 1, dt),
            lambda v: _savgol_ref(v, 5, 2, 1, dt),
            lambda v: _savgol_ref(v, 5, 3, 2, dt),
        )
    ops = xp.asarray(comfort_operators(n_time, dt))
    return tuple((lambda v, op=ops[i]: v @ op.T) for i in range(4))


def _module(xp):
    if isinstance(xp, str):
        from methodkit.core.backend import array_module

        return array_module({"numpy": "cpu", "cupy": "cuda"}[xp])
    return xp


def score_plans_ref(x: ScoreInputs, xp=None) -> PlanScores:
    """NumPy-vectorised reference of score_prepared (same rules, written array-at-a-time).

    With `xp` (an array module: numpy, cupy, or their names) the same code runs on that module, the inputs
    copied to it and the sub-scores brought back as NumPy arrays; the comfort filters are then
    comfort_operators' matrices (Savitzky-Golay of the identity) instead of scipy's savgol_filter calls,
    which only run on the host. score_plans_ref(x, "cupy") is the GPU scorer behind --device cuda."""
    filters = _comfort_filters(x.ego.shape[2], float(x.dt), _module(xp))
    xp = np if xp is None else _module(xp)
    if xp is not np:
        import dataclasses

        x = dataclasses.replace(x, **{
            f.name: xp.asarray(getattr(x, f.name)) for f in dataclasses.fields(x) if f.name != "dt"
        })  # fmt: skip
    ego = x.ego
    n, p, n_time, _ = ego.shape
    size = xp.broadcast_to(x.ego_size[:, None, None, :], (n, p, n_time, 2))
    ego_boxes = xp.concatenate([ego[..., :3], size], axis=-1)  # [N, P, T, 5]

    # ego areas over lanes: corners [N, P, T, 4, 2] against segments [N, S]
    corners = geo.box_corners(ego_boxes, xp)
    road = x.road[:, None, None, None, :, :]  # [N, 1, 1, 1, S, 5]
    with _quiet(xp):
        in_seg = (road[..., 0] <= corners[..., 0:1]) & (corners[..., 0:1] <= road[..., 1])
        in_seg &= xp.abs(corners[..., 1:2] - road[..., 2]) <= 0.5 * road[..., 3]  # [N, P, T, 4, S]
    off_road = ~in_seg.any(-1).all(-1)  # [N, P, T]
    n_slots = max(1, int(x.n_lanes.max()))
    one_hot = (x.lane_slots[..., None] == xp.arange(n_slots)) & xp.isfinite(x.road[..., :1])  # [N, S, L]
    in_lane = xp.einsum("nptcs,nsl->nptcl", in_seg.astype(xp.float64), one_hot.astype(xp.float64)) > 0
    touched = in_lane.any(-2).sum(-1)
    multiple = (touched > 1) & ~in_lane.all(-2).any(-1)
    dac = xp.where(off_road.any(-1), 0.0, 1.0)

    # NC
    nc = xp.ones((n, p))
    collided = xp.zeros((n, p, x.agents.shape[1]), dtype=bool)
    speed = xp.hypot(ego[..., EGO_VLON], ego[..., EGO_VLAT])  # [N, P, T]
    c, s = xp.cos(ego[..., EGO_HEADING]), xp.sin(ego[..., EGO_HEADING])
    hl, hw = 0.5 * size[..., 0], 0.5 * size[..., 1]
    front_left = xp.stack([ego[..., 0] + hl * c - hw * s, ego[..., 1] + hl * s + hw * c], -1)
    front_right = xp.stack([ego[..., 0] + hl * c + hw * s, ego[..., 1] + hl * s - hw * c], -1)
    last_speed = x.agent_speeds.shape[2] - 1
    penalty = xp.where(x.agent_static[:, None], 0.5, 0.0)
    for t in range(n_time):
        boxes, present, _ = _agents_at_ref(x, t, xp)
        vt = x.agent_speeds[:, :, min(t, last_speed)]
        agent_speed = xp.hypot(vt[..., 0], vt[..., 1])  # [N, K]
        hit = geo.boxes_overlap_ref(ego_boxes[:, :, t, None, :], boxes[:, None], xp) & present[:, None] & ~collided
        angle = _relative_angle_ref(ego[:, :, t, None, :3], boxes[:, None, :, :2], xp)
        front = geo.segment_hits_box_ref(front_left[:, :, t, None], front_right[:, :, t, None], boxes[:, None], xp)
        ego_stopped = (speed[:, :, t] <= STOPPED_SPEED_COLLISION)[..., None]
        track_stopped = (x.agent_static | (agent_speed <= STOPPED_SPEED_COLLISION))[:, None]
        kind = xp.where(
            ego_stopped,
            STOPPED_EGO,
            xp.where(
                track_stopped,
                STOPPED_TRACK,
                xp.where(angle > BEHIND_ANGLE, ACTIVE_REAR, xp.where(front, ACTIVE_FRONT, ACTIVE_LATERAL)),
            ),
        )
        ambiguous = (multiple[:, :, t] | off_road[:, :, t])[..., None]
        at_fault = (kind == ACTIVE_FRONT) | (kind == STOPPED_TRACK) | (ambiguous & (kind == ACTIVE_LATERAL))
        if x.agents.shape[1]:
            nc = xp.minimum(nc, xp.where(hit & at_fault, penalty, 1.0).min(-1))
        collided |= hit & ~at_fault

    # TTC
    ttc = xp.ones((n, p))
    collided[:] = False
    for t in range(n_time):
        for off in ttc_offsets(x.dt):
            delta = off * x.dt
            probe = ego_boxes[:, :, t].copy()
            probe[..., 0] += c[:, :, t] * speed[:, :, t] * delta
            probe[..., 1] += s[:, :, t] * speed[:, :, t] * delta
            boxes, present, _ = _agents_at_ref(x, t + int(off), xp)
            hit = geo.boxes_overlap_ref(probe[:, :, None, :], boxes[:, None], xp) & present[:, None] & ~collided
            hit &= (speed[:, :, t] >= STOPPED_SPEED_TTC)[..., None]
            angle = _relative_angle_ref(ego[:, :, t, None, :3], boxes[:, None, :, :2], xp)
            ambiguous = (multiple[:, :, t] | off_road[:, :, t])[..., None]
            with _quiet(xp):
                fault = (angle < AHEAD_ANGLE) | (ambiguous & ~(angle > BEHIND_ANGLE))
            ttc = xp.where((hit & fault).any(-1), 0.0, ttc)
            collided |= hit & ~fault

    # EP
    progress = xp.maximum(0.0, ego[:, :, -1, EGO_X] - ego[:, :, 0, EGO_X])
    gate = nc * dac
    gated = progress * gate
    top = xp.maximum(x.reference_progress[:, None], gated)
    with _quiet(xp):
        ep = xp.where(top > PROGRESS_DISTANCE_THRESHOLD, gated / top, xp.where(gate != 0.0, 1.0, 0.0))

    # comfort
    a_lon, a_lat = ego[..., EGO_ALON], ego[..., EGO_ALAT]
    a_mag = xp.hypot(a_lon, a_lat)
    heading = ego[..., EGO_HEADING]
    steps = xp.diff(heading, axis=-1)
    unwrapped = heading.copy()
    unwrapped[..., 1:] = heading[..., :1] + xp.cumsum(steps - 2.0 * np.pi * xp.round(steps / (2.0 * np.pi)), axis=-1)

    def within(values, lo, hi):
        return ((values > lo) & (values < hi)).all(-1)

    smooth, jerk, yaw_rate, yaw_acc = filters
    comfortable = (
        within(smooth(a_lon), MIN_LON_ACCEL, MAX_LON_ACCEL)
        & within(smooth(a_lat), -MAX_ABS_LAT_ACCEL, MAX_ABS_LAT_ACCEL)
        & within(jerk(a_mag), -MAX_ABS_MAG_JERK, MAX_ABS_MAG_JERK)
        & within(jerk(a_lon), -MAX_ABS_LON_JERK, MAX_ABS_LON_JERK)
        & within(yaw_acc(unwrapped), -MAX_ABS_YAW_ACCEL, MAX_ABS_YAW_ACCEL)
        & within(yaw_rate(unwrapped), -MAX_ABS_YAW_RATE, MAX_ABS_YAW_RATE)
    )
    comfort = comfortable.astype(xp.float64)
    weights = WEIGHT_TTC + WEIGHT_EP + WEIGHT_C
    pdms = nc * dac * (WEIGHT_TTC * ttc + WEIGHT_EP * ep + WEIGHT_C * comfort) / weights
    from methodkit.core.backend import to_numpy

    return PlanScores(*(np.asarray(to_numpy(v)) for v in (nc, dac, ttc, ep, comfort, pdms, progress)))


# --------------------------------------------------------------------------- stress inputs


def random_inputs(
    seed: int, n_scenes: int, n_plans: int, n_agents: int, n_states: int = 41, dt: float = 0.1
) -> ScoreInputs:
    """Stress scenes for the tests and the benchmark: a 3-lane road (one lane ending at a random x), traffic
    all around the ego (stopped cars, trucks, debris, agents appearing late, futures shorter or longer than the
    TTC look-ahead) and plans that weave, brake, stop and leave the road."""
    rng = np.random.default_rng(seed)
    n, p, k, n_t, dt = n_scenes, n_plans, n_agents, n_states, dt
    road3 = np.array([[0.0, 500.0, 0.0, 4.0, 0], [0.0, 500.0, 4.0, 4.0, 1], [0.0, 500.0, 8.0, 4.0, 2]])
    road = np.tile(road3, (n, 2, 1))  # padded to 6 rows; the last 3 masked
    road_mask = np.zeros((n, 6), dtype=bool)
    road_mask[:, :3] = True
    road[:, 1, 1] = rng.uniform(150, 500, n)  # lane 1 ends somewhere
    t = np.arange(n_t) * dt
    ego = np.zeros((n, p, n_t, 7))
    v0 = rng.uniform(0, 30, (n, p, 1))
    accel = rng.uniform(-6, 3, (n, p, 1))
    speed = np.maximum(v0 + accel * t, 0)
    stopped = rng.random((n, p, 1)) < 0.1
    speed = np.where(stopped, 0.0, speed)
    ego[..., 0] = 20 + np.cumsum(speed * dt, axis=-1) - speed[..., :1] * dt
    lane_target = rng.integers(0, 3, (n, p, 1)) * 4.0 + rng.normal(0, 1.5, (n, p, 1))
    y0 = rng.uniform(-1, 9, (n, p, 1))
    ego[..., 1] = y0 + (lane_target - y0) * np.clip(t / rng.uniform(1, 5, (n, p, 1)), 0, 1)
    ego[..., 2] = np.arctan2(np.gradient(ego[..., 1], dt, axis=-1), np.maximum(speed, 1.0)) + rng.normal(
        0, 0.3, (n, p, 1)
    )
    ego[..., 3] = speed
    ego[..., 4] = rng.normal(0, 0.3, (n, p, n_t))
    ego[..., 5] = np.where(speed > 0, accel, 0) + rng.normal(0, 0.5, (n, p, n_t))
    ego[..., 6] = rng.normal(0, 1.5, (n, p, n_t))
    a = max(1, n_t + int(rng.integers(-15, 10)))  # futures shorter than the TTC look-ahead: constant velocity after
    ta = np.arange(a) * dt
    vx = rng.uniform(-5, 30, (n, k, 1))
    vx[:, : k // 4] = 0.0  # some stopped
    vy = rng.normal(0, 0.5, (n, k, 1))
    agents = np.zeros((n, k, a, 5))
    agents[..., 0] = rng.uniform(0, 200, (n, k, 1)) + vx * ta
    agents[..., 1] = rng.uniform(-1, 9, (n, k, 1)) + vy * ta
    agents[..., 2] = rng.normal(0, 0.2, (n, k, 1))
    agents[..., 3] = rng.choice([1.0, 5.0, 12.0], (n, k, 1))
    agents[..., 4] = 2.0
    speeds = np.broadcast_to(np.concatenate([vx, vy], -1)[:, :, None, :], (n, k, a, 2)).copy()
    present = rng.random((n, k, 1)) < 0.9
    present = np.broadcast_to(present, (n, k, a)).copy()
    present[:, :, : a // 3] &= rng.random((n, k, 1)) < 0.7  # some appear late
    static = rng.random((n, k)) < 0.2
    ref = rng.uniform(0, 120, n)
    ref[: n // 5] = 2.0
    sizes = np.tile([5.0, 2.0], (n, 1))
    return prepare_inputs(ego, sizes, agents, speeds, present, static, road, road_mask, ref, dt)


# --------------------------------------------------------------------------- plans given as points


def plan_states(points: np.ndarray, dt: float, heading0: np.ndarray | float = 0.0) -> np.ndarray:
    """Ego states [..., T+1, 7] from plan points [..., T+1, 2] (index 0 the current position).

    Heading follows the direction of travel (np.gradient of the points), kept from the previous state
    while the speed is under 0.1 m/s (and `heading0` before the ego first moves); velocity and
    acceleration are finite differences rotated into the body frame."""
    points = np.asarray(points, dtype=np.float64)
    vel = np.gradient(points, dt, axis=-2)  # world frame [..., T+1, 2]
    acc = np.gradient(vel, dt, axis=-2)
    speed = np.hypot(vel[..., 0], vel[..., 1])
    raw = np.arctan2(vel[..., 1], vel[..., 0])
    heading = np.empty(points.shape[:-1])
    prev = np.broadcast_to(np.asarray(heading0, dtype=np.float64), points.shape[:-2]).copy()
    for t in range(points.shape[-2]):
        prev = np.where(speed[..., t] >= 0.1, raw[..., t], prev)
        heading[..., t] = prev
    c, s = np.cos(heading), np.sin(heading)
    out = np.empty(points.shape[:-1] + (EGO_STATE_DIM,))
    out[..., EGO_X], out[..., EGO_Y], out[..., EGO_HEADING] = points[..., 0], points[..., 1], heading
    out[..., EGO_VLON] = c * vel[..., 0] + s * vel[..., 1]
    out[..., EGO_VLAT] = -s * vel[..., 0] + c * vel[..., 1]
    out[..., EGO_ALON] = c * acc[..., 0] + s * acc[..., 1]
    out[..., EGO_ALAT] = -s * acc[..., 0] + c * acc[..., 1]
    return out

"""Numba kernels of the highway simulator: vehicle models, traffic policies, stepping, observation.

Every function here works on the struct-of-arrays state of `state.State` and the lane
tables of `road.RoadBatch`; Python owns the outer loop (how many steps, when the policy
decides), a kernel does the steps. The vehicle models follow highway-env 1.12.1
(`highway_env/vehicle/{kinematics,controller,behavior}.py`): the kinematic bicycle, the
cascaded lateral controller, the proportional speed controller, IDM and MOBIL, with the
same constants and the same order of operations, so that an all-IDM run reproduces it.

Differences from highway-env, each one deliberate (docs/methodkit-sim.md lists them):
- the driver parameters are per vehicle (highway-env's are class constants); a vehicle
  reasoning about another one (MOBIL's follower accelerations) uses its own parameters,
  as highway-env's `self.acceleration(ego_vehicle=other)` does;
- IDM's distance is the centre distance corrected by the two lengths,
  d = dx - (L_front + L_self)/2 + 5, which is highway-env's centre distance for two 5 m
  cars and keeps trucks and short debris from being driven into;
- a lane that ends (a merge lane, a dropped lane) carries a virtual stopped obstacle at
  its end, as highway-env's merge-v0 places an Obstacle there;
- collisions stop both vehicles (highway-env's crashed behaviour) without its impact
  displacement;
- speeds stop at zero (highway-env's IDM reverses a car stopped too close to its leader).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from methodkit.core.sim.highway import events as E
from methodkit.core.sim.highway import geometry as G

# ---- per-vehicle float fields: veh[b, FIELD, i]
X, Y, H, V, LEN, WID, TSPEED, TIMER, STEER, ACC = range(10)
A_MAX, B_COMF, S0, T_GAP, DELTA, POLITE, GAIN, BRAKE, NOISE = range(10, 19)
COSH, SINH = 19, 20  # cos and sin of the heading, refreshed by integrate (IDM reads them many times a step)
N_VFIELDS = 21
# ---- per-vehicle ints: lanes[b, 0, i] current lane, lanes[b, 1, i] target lane
CUR, TGT = 0, 1
# ---- vehicle kinds
ABSENT, CAR, TRUCK, OBSTACLE = 0, 1, 2, 3
# ---- ego modes (env_i[b, EGO_MODE])
EGO_PLAN, EGO_IDM, EGO_EXPERT = 0, 1, 2
# ---- per-env ints env_i[b, ...]
STEPS, DONE, REASON, EGO_MODE, MAX_STEPS, TERM_COLLISION, TRAFFIC_COLL = range(7)
N_COLL_VEH, N_COLL_OBS, N_OFFROAD, N_LANE_END, N_MISSED_EXIT, LAST_EVENT, LAST_OTHER = range(7, 14)
N_EI = 14
# ---- per-env floats env_f[b, ...]
TIME, X_START, PROGRESS, DIST, N_EF = 0, 1, 2, 3, 4
# ---- per-env road ints road_i[b, ...]
N_LANES, N_MAIN, EXIT_LANE, WANTS_EXIT, N_RI = 0, 1, 2, 3, 4
# ---- per-env road floats road_f[b, ...]
SPEED_LIMIT, ROUTE_END, ROAD_END, N_RF = 0, 1, 2, 3
# ---- lane table lanes_t[b, l, ...]
LX0, LX1, LY, LW = 0, 1, 2, 3
# ---- event kinds (also the `events` codes of an episode record)
EV_NONE = 0
EV_COLL_VEH = E.COLLISION_VEHICLE
EV_COLL_OBS = E.COLLISION_OBSTACLE
EV_OFFROAD = E.OFF_ROAD
EV_LANE_END = E.LANE_END_OVERRUN
EV_MISSED_EXIT = E.MISSED_EXIT
EV_ROUTE_DONE = E.ROUTE_COMPLETED
EV_TIMEOUT = E.TIMEOUT

# ---- highway-env constants (vehicle/kinematics.py, controller.py, behavior.py, road/lane.py)
MAX_SPEED = 40.0
MIN_SPEED = -40.0
REF_LENGTH = 5.0  # Vehicle.LENGTH, AbstractLane.VEHICLE_LENGTH
TAU_ACC = 0.6
TAU_HEADING = 0.2
TAU_LATERAL = 0.6
TAU_PURSUIT = 0.5 * TAU_HEADING
KP_A = 1.0 / TAU_ACC
KP_HEADING = 1.0 / TAU_HEADING
KP_LATERAL = 1.0 / TAU_LATERAL
MAX_STEERING = math.pi / 3.0
ACC_LIMIT = 6.0  # IDMVehicle.ACC_MAX
LANE_CHANGE_DELAY = 1.0
ON_LANE_MARGIN = 1.0  # Road.neighbour_vehicles: lane.on_lane(..., margin=1)
EXPERT_POLITENESS = 0.3
EXPERT_LOOKAHEAD_S = 10.0  # seconds of travel within which a lane end or exit forces the route lane
EXPERT_LOOKAHEAD_MIN = 150.0

VIRTUAL = -2  # neighbour code: the virtual obstacle at the end of an ending lane
NONE = -1


@njit(cache=True)
def not_zero(x, eps=1e-2):
    if abs(x) > eps:
        return x
    if x >= 0:
        return eps
    return -eps


@njit(cache=True)
def wrap_to_pi(x):
    return ((x + math.pi) % (2 * math.pi)) - math.pi


@njit(cache=True)
def clip(x, lo, hi):
    return min(max(x, lo), hi)


# ---------------------------------------------------------------- RNG: one stream per environment


@njit(cache=True)
def rng_next(rng, b):
    """xorshift64* step of environment b's stream; a float in [0, 1)."""
    s = rng[b]
    s ^= s >> np.uint64(12)
    s ^= s << np.uint64(25)
    s ^= s >> np.uint64(27)
    rng[b] = s
    r = s * np.uint64(2685821657736338717)
    return (r >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def rng_normal(rng, b):
    u1 = rng_next(rng, b)
    u2 = rng_next(rng, b)
    return math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)


# ---------------------------------------------------------------- lanes


@njit(cache=True)
def lane_ends(lanes_t, road_i, road_f, b, lane):
    """Does `lane` end before the road does (a merge lane, a dropped lane), not being the exit?"""
    return lane != road_i[b, EXIT_LANE] and lanes_t[b, lane, LX1] < road_f[b, ROAD_END] - 1e-9


@njit(cache=True)
def closest_lane(lanes_t, road_i, b, x, y):
    """highway-env's get_closest_lane_index on straight lanes along +x (the heading term is common)."""
    best = 0
    best_d = np.inf
    for lane in range(road_i[b, N_LANES]):
        d = abs(y - lanes_t[b, lane, LY]) + max(x - lanes_t[b, lane, LX1], 0.0) + max(lanes_t[b, lane, LX0] - x, 0.0)
        if d < best_d:
            best_d = d
            best = lane
    return best


@njit(cache=True)
def on_lane(lanes_t, b, lane, x, y, margin):
    s = x - lanes_t[b, lane, LX0]
    length = lanes_t[b, lane, LX1] - lanes_t[b, lane, LX0]
    return abs(y - lanes_t[b, lane, LY]) <= lanes_t[b, lane, LW] / 2 + margin and -REF_LENGTH <= s < length + REF_LENGTH


@njit(cache=True)
def reachable(lanes_t, b, lane, x, y):
    s = x - lanes_t[b, lane, LX0]
    length = lanes_t[b, lane, LX1] - lanes_t[b, lane, LX0]
    return abs(y - lanes_t[b, lane, LY]) <= 2 * lanes_t[b, lane, LW] and 0 <= s < length + REF_LENGTH


@njit(cache=True)
def neighbours(veh, kind, lanes_t, road_i, road_f, b, i, lane):
    """Road.neighbour_vehicles(vehicle i, lane): (front, rear) slot indices, NONE or VIRTUAL.

    Ties resolve as highway-env's list scan does (a later vehicle at the same s wins the front).
    """
    s = veh[b, X, i]
    front = NONE
    rear = NONE
    s_front = np.inf
    s_rear = -np.inf
    n = veh.shape[2]
    # lane.on_lane(position, margin=1), hoisted out of the scan
    y_lane = lanes_t[b, lane, LY]
    half = lanes_t[b, lane, LW] / 2 + ON_LANE_MARGIN
    x_lo = lanes_t[b, lane, LX0] - REF_LENGTH
    x_hi = lanes_t[b, lane, LX1] + REF_LENGTH
    for j in range(n):
        if j == i or kind[b, j] == ABSENT:
            continue
        xj = veh[b, X, j]
        if not (abs(veh[b, Y, j] - y_lane) <= half and x_lo <= xj < x_hi):
            continue
        if s <= xj and (front == NONE or xj <= s_front):
            s_front = xj
            front = j
        if xj < s and (rear == NONE or xj > s_rear):
            s_rear = xj
            rear = j
    if lane_ends(lanes_t, road_i, road_f, b, lane):
        xe = lanes_t[b, lane, LX1]
        if s <= xe and (front == NONE or xe <= s_front):
            front = VIRTUAL
        elif xe < s and (rear == NONE or xe > s_rear):
            rear = VIRTUAL
    return front, rear


# ---------------------------------------------------------------- IDM


@njit(cache=True)
def idm(a, b_comf, s0, t_gap, delta, v, h, v_target, v_limit, has_front, d, fvx, fvy):
    """IDMVehicle.acceleration with the reasoning driver's parameters (a, b, s0, T, delta).

    v, h, v_target: the follower's speed, heading and target speed; d: the distance to
    the front vehicle; (fvx, fvy): its velocity.
    """
    return idm_cs(a, b_comf, s0, t_gap, delta, v, math.cos(h), math.sin(h), v_target, v_limit, has_front, d, fvx, fvy)


@njit(cache=True)
def idm_cs(a, b_comf, s0, t_gap, delta, v, ex, ey, v_target, v_limit, has_front, d, fvx, fvy):
    """idm with the follower's heading given as its cosine and sine."""
    target = clip(v_target, 0.0, v_limit)
    acc = a * (1.0 - math.pow(max(v, 0.0) / abs(not_zero(target)), delta))
    if has_front:
        dv = (v * ex - fvx) * ex + (v * ey - fvy) * ey
        d_star = s0 + v * t_gap + v * dv / (2.0 * math.sqrt(a * b_comf))
        acc -= a * (d_star / not_zero(d)) ** 2
    return acc


@njit(cache=True)
def idm_pair(veh, kind, lanes_t, road_f, b, r, f, front, lane):
    """Acceleration of follower f behind `front` (a slot, VIRTUAL or NONE), as reasoner r models it.

    A missing follower, or a static obstacle as follower, has acceleration 0 (highway-env:
    `acceleration(None)` and non-Vehicle objects return 0).
    """
    if f < 0 or kind[b, f] == OBSTACLE:
        return 0.0
    has_front = front != NONE
    d = 0.0
    fvx = 0.0
    fvy = 0.0
    if front == VIRTUAL:
        d = lanes_t[b, lane, LX1] - veh[b, X, f] - veh[b, LEN, f] / 2 + REF_LENGTH / 2
    elif front >= 0:
        d = veh[b, X, front] - veh[b, X, f] - (veh[b, LEN, front] + veh[b, LEN, f]) / 2 + REF_LENGTH
        fvx = veh[b, V, front] * veh[b, COSH, front]
        fvy = veh[b, V, front] * veh[b, SINH, front]
    return idm_cs(
        veh[b, A_MAX, r],
        veh[b, B_COMF, r],
        veh[b, S0, r],
        veh[b, T_GAP, r],
        veh[b, DELTA, r],
        veh[b, V, f],
        veh[b, COSH, f],
        veh[b, SINH, f],
        veh[b, TSPEED, f],
        road_f[b, SPEED_LIMIT],
        has_front,
        d,
        fvx,
        fvy,
    )


@njit(cache=True)
def static_front(veh, kind, b, front):
    return front == VIRTUAL or (front >= 0 and (kind[b, front] == OBSTACLE or abs(veh[b, V, front]) < 1.0))


@njit(cache=True)
def idm_creep(veh, kind, lanes_t, road_f, b, i, front, lane):
    """IDM behind a standing blocker with a 7 m jam distance (a 2 m bumper gap) and no time gap."""
    if front == VIRTUAL:
        d = lanes_t[b, lane, LX1] - veh[b, X, i] - veh[b, LEN, i] / 2 + REF_LENGTH / 2
    else:
        d = veh[b, X, front] - veh[b, X, i] - (veh[b, LEN, front] + veh[b, LEN, i]) / 2 + REF_LENGTH
    return idm(
        veh[b, A_MAX, i], veh[b, B_COMF, i], 7.0, 0.0, veh[b, DELTA, i], veh[b, V, i], veh[b, H, i],
        veh[b, TSPEED, i], road_f[b, SPEED_LIMIT], True, d, 0.0, 0.0,
    )  # fmt: skip


@njit(cache=True)
def desired_gap(veh, b, r, f, front):
    """IDMVehicle.desired_gap(f, front) with reasoner r's parameters (projected dv)."""
    v = veh[b, V, f]
    ex = veh[b, COSH, f]
    ey = veh[b, SINH, f]
    fv = veh[b, V, front]
    dv = (v * ex - fv * veh[b, COSH, front]) * ex + (v * ey - fv * veh[b, SINH, front]) * ey
    return veh[b, S0, r] + v * veh[b, T_GAP, r] + v * dv / (2.0 * math.sqrt(veh[b, A_MAX, r] * veh[b, B_COMF, r]))


# ---------------------------------------------------------------- MOBIL


@njit(cache=True)
def mobil(veh, kind, lanes, lanes_t, road_i, road_f, b, i, lane, politeness, route_lane, brake):
    """IDMVehicle.mobil(lane) for vehicle i; `route_lane` >= 0 takes highway-env's route branch.

    The route branch (a driver that must reach a lane): change only in the route's
    direction and only if neither the new follower nor the driver must brake harder than
    the driver's BRAKE limit; otherwise the incentive criterion with the given politeness.
    """
    cur = lanes[b, CUR, i]
    tgt = lanes[b, TGT, i]
    new_pre, new_fol = neighbours(veh, kind, lanes_t, road_i, road_f, b, i, lane)
    new_fol_a = idm_pair(veh, kind, lanes_t, road_f, b, i, new_fol, new_pre, lane)
    new_fol_pred_a = idm_pair(veh, kind, lanes_t, road_f, b, i, new_fol, i, lane)
    if new_fol_pred_a < -brake:
        return False
    old_pre, old_fol = neighbours(veh, kind, lanes_t, road_i, road_f, b, i, cur)
    self_pred_a = idm_pair(veh, kind, lanes_t, road_f, b, i, i, new_pre, lane)
    if route_lane >= 0:
        if np.sign(lane - tgt) != np.sign(route_lane - tgt):
            return False
        return self_pred_a >= -brake
    self_a = idm_pair(veh, kind, lanes_t, road_f, b, i, i, old_pre, cur)
    old_fol_a = idm_pair(veh, kind, lanes_t, road_f, b, i, old_fol, i, cur)
    old_fol_pred_a = idm_pair(veh, kind, lanes_t, road_f, b, i, old_fol, old_pre, cur)
    jerk = self_pred_a - self_a + politeness * (new_fol_pred_a - new_fol_a + old_fol_pred_a - old_fol_a)
    return jerk >= veh[b, GAIN, i]


@njit(cache=True)
def abort_lane_change(veh, kind, lanes, b, i):
    """change_lane_policy's abort: someone else is already moving into my target lane just ahead."""
    tgt = lanes[b, TGT, i]
    for j in range(veh.shape[2]):
        if j == i or kind[b, j] == ABSENT or kind[b, j] == OBSTACLE:
            continue
        if lanes[b, CUR, j] != tgt and lanes[b, TGT, j] == tgt:
            d = veh[b, X, j] - veh[b, X, i]
            if 0 < d < desired_gap(veh, b, i, i, j):
                lanes[b, TGT, i] = lanes[b, CUR, i]
                return


@njit(cache=True)
def route_lane_of(veh, lanes, lanes_t, road_i, road_f, b, i):
    """The lane the expert must head for now (-1: free choice), looking ahead at lane ends and the exit."""
    cur = lanes[b, CUR, i]
    x = veh[b, X, i]
    ahead = max(EXPERT_LOOKAHEAD_MIN, EXPERT_LOOKAHEAD_S * veh[b, V, i])
    exit_lane = road_i[b, EXIT_LANE]
    if i == 0 and road_i[b, WANTS_EXIT] == 1 and exit_lane >= 0:
        if cur == exit_lane:
            return exit_lane
        if lanes_t[b, exit_lane, LX0] - x < ahead * (abs(exit_lane - cur) + 1):
            return exit_lane
    if lane_ends(lanes_t, road_i, road_f, b, cur) and lanes_t[b, cur, LX1] - x < ahead:
        # the nearest lane that continues past this lane's end
        best = -1
        for lane in range(road_i[b, N_LANES]):
            if lane == cur or lane == exit_lane:
                continue
            if lanes_t[b, lane, LX1] > lanes_t[b, cur, LX1] and (best < 0 or abs(lane - cur) < abs(best - cur)):
                best = lane
        return best
    return -1


@njit(cache=True)
def urgent_brake(veh, lanes, lanes_t, road_i, road_f, b, i, brake):
    """The braking the expert accepts imposing grows from its BRAKE to 4.5 m/s^2 as its lane's end nears."""
    cur = lanes[b, CUR, i]
    left = np.inf
    if lane_ends(lanes_t, road_i, road_f, b, cur):
        left = lanes_t[b, cur, LX1] - veh[b, X, i]
    exit_lane = road_i[b, EXIT_LANE]
    if exit_lane >= 0 and road_i[b, WANTS_EXIT] == 1:
        left = min(left, lanes_t[b, exit_lane, LX1] - veh[b, X, i])
    ahead = max(EXPERT_LOOKAHEAD_MIN, EXPERT_LOOKAHEAD_S * veh[b, V, i])
    urgency = clip(1.0 - left / ahead, 0.0, 1.0)
    return brake + (4.5 - brake) * urgency


@njit(cache=True)
def choose_lane(veh, kind, lanes, lanes_t, road_i, road_f, b, i, politeness, route_lane, expert):
    """change_lane_policy for vehicle i (called every simulation step)."""
    if lanes[b, CUR, i] != lanes[b, TGT, i]:
        abort_lane_change(veh, kind, lanes, b, i)
        return
    if not (LANE_CHANGE_DELAY < veh[b, TIMER, i]):
        return
    veh[b, TIMER, i] = 0.0
    cur = lanes[b, CUR, i]
    if route_lane == cur:
        return
    brake = veh[b, BRAKE, i]
    if expert and route_lane >= 0:
        brake = urgent_brake(veh, lanes, lanes_t, road_i, road_f, b, i, brake)
    for side in (cur - 1, cur + 1):
        if side < 0 or side >= road_i[b, N_LANES]:
            continue
        if not reachable(lanes_t, b, side, veh[b, X, i], veh[b, Y, i]):
            continue
        if abs(veh[b, V, i]) < 1 and not expert:
            continue
        if route_lane < 0 and avoid_lane(lanes_t, road_i, road_f, b, side, veh[b, X, i], veh[b, V, i]):
            continue
        if mobil(veh, kind, lanes, lanes_t, road_i, road_f, b, i, side, politeness, route_lane, brake):
            lanes[b, TGT, i] = side


@njit(cache=True)
def avoid_lane(lanes_t, road_i, road_f, b, lane, x, v):
    """A free lane choice never enters the exit lane or a lane ending within the lookahead.

    (highway-env's merge ramp and exit are other roads, never a MOBIL side lane; these
    lanes are side lanes here, so free choices stay out of them.)"""
    if lane == road_i[b, EXIT_LANE]:
        return True
    ahead = max(EXPERT_LOOKAHEAD_MIN, EXPERT_LOOKAHEAD_S * v)
    return lane_ends(lanes_t, road_i, road_f, b, lane) and lanes_t[b, lane, LX1] - x < 2 * ahead


# ---------------------------------------------------------------- the low-level controller


@njit(cache=True)
def steering_control(x, y, h, v, length, lane_y):
    """ControlledVehicle.steering_control on a straight lane along +x (future heading 0)."""
    lateral = y - lane_y
    lateral_speed_command = -KP_LATERAL * lateral
    heading_command = math.asin(clip(lateral_speed_command / not_zero(v), -1.0, 1.0))
    heading_ref = clip(heading_command, -math.pi / 4, math.pi / 4)
    heading_rate_command = KP_HEADING * wrap_to_pi(heading_ref - h)
    slip = math.asin(clip(length / 2 / not_zero(v) * heading_rate_command, -1.0, 1.0))
    steering = math.atan(2 * math.tan(slip))
    return clip(steering, -MAX_STEERING, MAX_STEERING)


@njit(cache=True)
def integrate(veh, crashed, b, i, dt):
    """Vehicle.step: clip_actions, then the kinematic bicycle (slip angle beta at the centre)."""
    steer = veh[b, STEER, i]
    acc = veh[b, ACC, i]
    v = veh[b, V, i]
    if crashed[b, i]:
        steer = 0.0
        acc = -1.0 * v
    if v > MAX_SPEED:
        acc = min(acc, 1.0 * (MAX_SPEED - v))
    elif v < MIN_SPEED:
        acc = max(acc, 1.0 * (MIN_SPEED - v))
    beta = math.atan(0.5 * math.tan(steer))
    h = veh[b, H, i]
    veh[b, X, i] += v * math.cos(h + beta) * dt
    veh[b, Y, i] += v * math.sin(h + beta) * dt
    veh[b, H, i] = h + v * math.sin(beta) / (veh[b, LEN, i] / 2) * dt
    veh[b, V, i] = v + acc * dt
    veh[b, COSH, i] = math.cos(veh[b, H, i])
    veh[b, SINH, i] = math.sin(veh[b, H, i])


# ---------------------------------------------------------------- acting: one vehicle's command


@njit(cache=True)
def act_traffic(veh, kind, lanes, crashed, lanes_t, road_i, road_f, rng, b, i, politeness, route_lane, expert):
    """IDMVehicle.act: MOBIL lane choice, steering to the target lane, IDM on current and target lane."""
    if crashed[b, i]:
        return
    choose_lane(veh, kind, lanes, lanes_t, road_i, road_f, b, i, politeness, route_lane, expert)
    tgt = lanes[b, TGT, i]
    cur = lanes[b, CUR, i]
    veh[b, STEER, i] = steering_control(
        veh[b, X, i], veh[b, Y, i], veh[b, H, i], veh[b, V, i], veh[b, LEN, i], lanes_t[b, tgt, LY]
    )
    front, _ = neighbours(veh, kind, lanes_t, road_i, road_f, b, i, cur)
    acc = idm_pair(veh, kind, lanes_t, road_f, b, i, i, front, cur)
    if cur != tgt:
        if expert and static_front(veh, kind, b, front):
            # the expert leaving a lane blocked by something standing still keeps creeping
            # toward it (down to a 2 m bumper gap), or it would stall beside it
            acc = idm_creep(veh, kind, lanes_t, road_f, b, i, front, cur)
        front2, _ = neighbours(veh, kind, lanes_t, road_i, road_f, b, i, tgt)
        acc = min(acc, idm_pair(veh, kind, lanes_t, road_f, b, i, i, front2, tgt))
    elif expert and route_lane >= 0 and route_lane != cur:
        # the expert that must change lanes but may not yet falls in behind the leader of
        # the lane it must enter, which opens the gap it needs
        side = cur + (1 if route_lane > cur else -1)
        front2, _ = neighbours(veh, kind, lanes_t, road_i, road_f, b, i, side)
        if front2 >= 0:
            acc = min(acc, idm_pair(veh, kind, lanes_t, road_f, b, i, i, front2, side))
    if veh[b, NOISE, i] > 0:
        acc += veh[b, NOISE, i] * rng_normal(rng, b)
    veh[b, ACC, i] = clip(acc, -ACC_LIMIT, ACC_LIMIT)


@njit(cache=True)
def act_plan(veh, lanes, crashed, lanes_t, b, i):
    """The ego under a plan: ControlledVehicle's controllers toward (target lane, target speed)."""
    if crashed[b, i]:
        return
    tgt = lanes[b, TGT, i]
    veh[b, STEER, i] = steering_control(
        veh[b, X, i], veh[b, Y, i], veh[b, H, i], veh[b, V, i], veh[b, LEN, i], lanes_t[b, tgt, LY]
    )
    veh[b, ACC, i] = clip(KP_A * (veh[b, TSPEED, i] - veh[b, V, i]), -ACC_LIMIT, ACC_LIMIT)


# ---------------------------------------------------------------- collisions and events


@njit(cache=True)
def pair_overlap(veh, b, i, j):
    """Boxes of slots i and j overlap (a bounding-circle rejection, then geometry's separating axes)."""
    dx = veh[b, X, j] - veh[b, X, i]
    dy = veh[b, Y, j] - veh[b, Y, i]
    # a half diagonal is at most (length + width) / 2: most pairs end on this test, without a root
    reach = 0.5 * (veh[b, LEN, i] + veh[b, WID, i] + veh[b, LEN, j] + veh[b, WID, j])
    if abs(dx) > reach or abs(dy) > reach:
        return False
    ri = veh[b, LEN, i] ** 2 + veh[b, WID, i] ** 2
    rj = veh[b, LEN, j] ** 2 + veh[b, WID, j] ** 2
    if dx * dx + dy * dy > 0.25 * (math.sqrt(ri) + math.sqrt(rj)) ** 2:
        return False
    return G.overlap_pair(
        veh[b, X, i],
        veh[b, Y, i],
        veh[b, H, i],
        veh[b, LEN, i],
        veh[b, WID, i],
        veh[b, X, j],
        veh[b, Y, j],
        veh[b, H, j],
        veh[b, LEN, j],
        veh[b, WID, j],
    )


@njit(cache=True)
def finish(env_i, b, reason, other):
    env_i[b, DONE] = 1
    env_i[b, REASON] = reason
    env_i[b, LAST_EVENT] = reason
    env_i[b, LAST_OTHER] = other


@njit(cache=True)
def check_events(veh, kind, lanes, crashed, contact, lanes_t, road_i, road_f, env_i, env_f, b):
    """Collisions (all pairs, or ego pairs only), then the ego's road and route events.

    Each ego collision is counted once per contact with a vehicle (Bench2Drive counts an
    infraction per collision event); the ego's first collision ends the episode when
    TERM_COLLISION is set. env_i[b, LAST_EVENT] holds this step's most serious event.
    """
    n = veh.shape[2]
    env_i[b, LAST_EVENT] = EV_NONE
    env_i[b, LAST_OTHER] = NONE
    for i in range(n):
        if kind[b, i] == ABSENT:
            continue
        if i > 0 and env_i[b, TRAFFIC_COLL] == 0:
            break
        for j in range(i + 1, n):
            if kind[b, j] == ABSENT:
                continue
            hit = pair_overlap(veh, b, i, j)
            if i == 0:
                if hit and not contact[b, j]:
                    if kind[b, j] == OBSTACLE:
                        env_i[b, N_COLL_OBS] += 1
                        env_i[b, LAST_EVENT] = EV_COLL_OBS
                    else:
                        env_i[b, N_COLL_VEH] += 1
                        env_i[b, LAST_EVENT] = EV_COLL_VEH
                    env_i[b, LAST_OTHER] = j
                contact[b, j] = hit
            if hit:
                if kind[b, i] != OBSTACLE:
                    crashed[b, i] = True
                if kind[b, j] != OBSTACLE:
                    crashed[b, j] = True
    if env_i[b, LAST_EVENT] != EV_NONE and env_i[b, TERM_COLLISION] == 1:
        finish(env_i, b, env_i[b, LAST_EVENT], env_i[b, LAST_OTHER])
        return
    # the ego's road and route
    x = veh[b, X, 0]
    cur = lanes[b, CUR, 0]
    front_x = x + veh[b, LEN, 0] / 2 * math.cos(veh[b, H, 0])
    exit_lane = road_i[b, EXIT_LANE]
    on_exit = exit_lane >= 0 and cur == exit_lane
    # progress along the route: an exit route runs along the road to the ramp's start, then the ramp
    x_route = x
    if road_i[b, WANTS_EXIT] == 1 and not on_exit:
        x_route = min(x, lanes_t[b, exit_lane, LX0])
    env_f[b, PROGRESS] = clip(
        (x_route - env_f[b, X_START]) / max(road_f[b, ROUTE_END] - env_f[b, X_START], 1e-9), 0.0, 1.0
    )
    if road_i[b, WANTS_EXIT] == 1 and on_exit and x >= road_f[b, ROUTE_END] - veh[b, LEN, 0] / 2:
        env_f[b, PROGRESS] = 1.0
        finish(env_i, b, EV_ROUTE_DONE, NONE)
        return
    if road_i[b, WANTS_EXIT] == 1 and not on_exit and x > lanes_t[b, exit_lane, LX1]:
        env_i[b, N_MISSED_EXIT] += 1
        finish(env_i, b, EV_MISSED_EXIT, NONE)
        return
    if road_i[b, WANTS_EXIT] == 0 and x >= road_f[b, ROUTE_END]:
        env_f[b, PROGRESS] = 1.0
        finish(env_i, b, EV_ROUTE_DONE, NONE)
        return
    if lane_ends(lanes_t, road_i, road_f, b, cur) and front_x > lanes_t[b, cur, LX1]:
        env_i[b, N_LANE_END] += 1
        finish(env_i, b, EV_LANE_END, NONE)
        return
    road = lanes_t[b, : road_i[b, N_LANES]]
    if not G.box_on_road(x, veh[b, Y, 0], veh[b, H, 0], veh[b, LEN, 0], veh[b, WID, 0], road):
        env_i[b, N_OFFROAD] += 1
        finish(env_i, b, EV_OFFROAD, NONE)
        return


# ---------------------------------------------------------------- one environment, one step


@njit(cache=True)
def step_env(veh, kind, lanes, crashed, contact, lanes_t, road_i, road_f, env_i, env_f, rng, b, dt):
    """Road.act() then Road.step(dt) for environment b, then collisions and the ego's events."""
    n = veh.shape[2]
    mode = env_i[b, EGO_MODE]
    for i in range(n):
        if kind[b, i] == ABSENT or kind[b, i] == OBSTACLE:
            continue
        if i == 0 and mode == EGO_PLAN:
            act_plan(veh, lanes, crashed, lanes_t, b, i)
        elif i == 0 and mode == EGO_EXPERT:
            route = route_lane_of(veh, lanes, lanes_t, road_i, road_f, b, i)
            act_traffic(veh, kind, lanes, crashed, lanes_t, road_i, road_f, rng, b, i, EXPERT_POLITENESS, route, True)
        else:
            act_traffic(veh, kind, lanes, crashed, lanes_t, road_i, road_f, rng, b, i, veh[b, POLITE, i], -1, False)
    road_end = road_f[b, ROAD_END]
    exit_lane = road_i[b, EXIT_LANE]
    for i in range(n):
        if kind[b, i] == ABSENT or kind[b, i] == OBSTACLE:
            continue
        veh[b, TIMER, i] += dt
        integrate(veh, crashed, b, i, dt)
        if veh[b, V, i] < 0.0:
            # vehicles brake to a stop and stay there: highway-env's IDM reverses a car stopped
            # closer than s0 to its leader, into whoever queues behind it
            veh[b, V, i] = 0.0
        cur = closest_lane(lanes_t, road_i, b, veh[b, X, i], veh[b, Y, i])
        lanes[b, CUR, i] = cur
        if i > 0:
            # traffic leaves at the road's end and at the end of the exit lane; overrunning a
            # lane end is a crash (it stops there, a hazard for the others)
            x = veh[b, X, i]
            if x > road_end or (cur == exit_lane and x > lanes_t[b, cur, LX1]):
                kind[b, i] = ABSENT
            elif lane_ends(lanes_t, road_i, road_f, b, cur) and x > lanes_t[b, cur, LX1]:
                crashed[b, i] = True
    env_i[b, STEPS] += 1
    env_f[b, TIME] += dt
    env_f[b, DIST] += abs(veh[b, V, 0]) * dt
    check_events(veh, kind, lanes, crashed, contact, lanes_t, road_i, road_f, env_i, env_f, b)
    if env_i[b, DONE] == 0 and env_i[b, STEPS] >= env_i[b, MAX_STEPS]:
        finish(env_i, b, EV_TIMEOUT, NONE)


@njit(cache=True, parallel=True)
def step_batch(veh, kind, lanes, crashed, contact, lanes_t, road_i, road_f, env_i, env_f, rng, dt, n_steps):
    """`n_steps` simulation steps of every environment still running (prange over environments)."""
    for b in prange(veh.shape[0]):
        for _ in range(n_steps):
            if env_i[b, DONE] != 0:
                break
            step_env(veh, kind, lanes, crashed, contact, lanes_t, road_i, road_f, env_i, env_f, rng, b, dt)


@njit(cache=True)
def step_batch_serial(veh, kind, lanes, crashed, contact, lanes_t, road_i, road_f, env_i, env_f, rng, dt, n_steps):
    """The same steps without threads (the reference of the parallel kernel)."""
    for b in range(veh.shape[0]):
        for _ in range(n_steps):
            if env_i[b, DONE] != 0:
                break
            step_env(veh, kind, lanes, crashed, contact, lanes_t, road_i, road_f, env_i, env_f, rng, b, dt)


# ---------------------------------------------------------------- the ego's plan: controller alone


@njit(cache=True)
def ego_plans(x, y, h, v, length, lane_y, v_target, dt, n_steps, out):
    """Open-loop ego trajectories [C, n_steps, 3] (x, y, heading) of the plan controller, one per candidate.

    Row c drives toward lane centre lane_y[c] at target speed v_target[c] with the same
    controller and bicycle as `act_plan` + `integrate`, without the other vehicles.
    """
    for c in range(lane_y.shape[0]):
        xc, yc, hc, vc = x, y, h, v
        for t in range(n_steps):
            steer = steering_control(xc, yc, hc, vc, length, lane_y[c])
            acc = clip(KP_A * (v_target[c] - vc), -ACC_LIMIT, ACC_LIMIT)
            if vc > MAX_SPEED:
                acc = min(acc, MAX_SPEED - vc)
            beta = math.atan(0.5 * math.tan(steer))
            xc += vc * math.cos(hc + beta) * dt
            yc += vc * math.sin(hc + beta) * dt
            hc = hc + vc * math.sin(beta) / (length / 2) * dt
            vc = vc + acc * dt
            out[c, t, 0] = xc
            out[c, t, 1] = yc
            out[c, t, 2] = hc


# ---------------------------------------------------------------- observation


@njit(cache=True, parallel=True)
def observe_batch(veh, kind, lanes, lanes_t, road_i, road_f, k_near, max_range, ego_out, near_out):
    """observe_env over every environment (prange)."""
    for b in prange(veh.shape[0]):
        observe_env(veh, kind, lanes, lanes_t, road_i, road_f, k_near, max_range, ego_out, near_out, b)


@njit(cache=True)
def observe_batch_serial(veh, kind, lanes, lanes_t, road_i, road_f, k_near, max_range, ego_out, near_out):
    for b in range(veh.shape[0]):
        observe_env(veh, kind, lanes, lanes_t, road_i, road_f, k_near, max_range, ego_out, near_out, b)


@njit(cache=True)
def observe_env(veh, kind, lanes, lanes_t, road_i, road_f, k_near, max_range, ego_out, near_out, b):
    """Kinematics-like features, normalised and clipped to [-1, 1] as highway-env's normalize_obs.

    ego_out[b] = [v / 40, lateral offset / lane width, lane index / (lanes - 1), distance to the
    lane's end / 200, route lane delta / 2]; near_out[b, k] = [presence, dx / 200, dy / (4 lanes),
    dvx / 80, dvy / 80, length / 12] of the k_near vehicles nearest in |dx| (within max_range).
    """
    n = veh.shape[2]
    cur = lanes[b, CUR, 0]
    n_lanes = road_i[b, N_LANES]
    width = lanes_t[b, cur, LW]
    to_end = 200.0
    if lane_ends(lanes_t, road_i, road_f, b, cur) or cur == road_i[b, EXIT_LANE]:
        to_end = lanes_t[b, cur, LX1] - veh[b, X, 0]
    route = route_lane_of(veh, lanes, lanes_t, road_i, road_f, b, 0)
    delta = 0.0 if route < 0 else float(route - cur)
    ego_out[b, 0] = clip(veh[b, V, 0] / MAX_SPEED, -1.0, 1.0)
    ego_out[b, 1] = clip((veh[b, Y, 0] - lanes_t[b, cur, LY]) / width, -1.0, 1.0)
    ego_out[b, 2] = cur / max(n_lanes - 1, 1)
    ego_out[b, 3] = clip(to_end / 200.0, -1.0, 1.0)
    ego_out[b, 4] = clip(delta / 2.0, -1.0, 1.0)
    # nearest k by |dx|: a partial selection sort over the slots
    dist = np.empty(n)
    for j in range(n):
        dist[j] = np.inf
        if j > 0 and kind[b, j] != ABSENT:
            dx = veh[b, X, j] - veh[b, X, 0]
            dy = veh[b, Y, j] - veh[b, Y, 0]
            if dx * dx + dy * dy < max_range * max_range:
                dist[j] = abs(dx)
    evx = veh[b, V, 0] * math.cos(veh[b, H, 0])
    evy = veh[b, V, 0] * math.sin(veh[b, H, 0])
    for k in range(k_near):
        best = -1
        for j in range(n):
            if dist[j] < np.inf and (best < 0 or dist[j] < dist[best]):
                best = j
        for f in range(6):
            near_out[b, k, f] = 0.0
        if best < 0:
            continue
        dist[best] = np.inf
        near_out[b, k, 0] = 1.0
        near_out[b, k, 1] = clip((veh[b, X, best] - veh[b, X, 0]) / (5 * MAX_SPEED), -1.0, 1.0)
        near_out[b, k, 2] = clip((veh[b, Y, best] - veh[b, Y, 0]) / (4.0 * width), -1.0, 1.0)
        vx = veh[b, V, best] * math.cos(veh[b, H, best])
        vy = veh[b, V, best] * math.sin(veh[b, H, best])
        near_out[b, k, 3] = clip((vx - evx) / (2 * MAX_SPEED), -1.0, 1.0)
        near_out[b, k, 4] = clip((vy - evy) / (2 * MAX_SPEED), -1.0, 1.0)
        near_out[b, k, 5] = clip(veh[b, LEN, best] / 12.0, -1.0, 1.0)

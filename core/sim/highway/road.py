"""Roads: straight lanes along +x as segments [S, 5] = (x_start, x_end, y_center, width, lane_index).

Lane 0 is the leftmost (y = 0) and the index grows with y, as in highway-env
(`LANE_RIGHT` is index + 1). A merge lane, a dropped lane and an exit ramp are lanes
whose segment starts or ends inside the road; each lane index has one segment. The
drivable area is the union of the segments' rectangles.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import DataError
from methodkit.core.sim.highway import kernels as K

DEFAULT_LANE_WIDTH = 4.0  # AbstractLane.DEFAULT_WIDTH
MARGIN_AFTER_ROUTE = 300.0  # road beyond the ego's route end, so traffic ahead has room


@dataclass
class Road:
    """One environment's road: its segments and the ego's route on it."""

    segments: np.ndarray  # float64 [S, 5]
    speed_limit: float = 30.0
    route_end: float = 1000.0  # x where the route ends (the exit lane's end for an exit route)
    road_end: float = 1300.0  # x where every through lane ends
    exit_lane: int = -1  # the exit ramp's lane index, -1 without one
    wants_exit: bool = False  # the ego's route leaves by the exit
    n_main: int = 3  # lanes running the whole road

    @property
    def n_lanes(self) -> int:
        return int(self.segments.shape[0])

    def lane_table(self) -> np.ndarray:
        """[L, 4] = (x0, x1, y, width) indexed by lane index."""
        table = np.zeros((self.n_lanes, 4))
        order = self.segments[:, 4].astype(np.int64)
        table[order] = self.segments[:, :4]
        return table

    def lane_ends(self, lane: int) -> bool:
        return lane != self.exit_lane and self.segments[self._row(lane), 1] < self.road_end - 1e-9

    def lane_y(self, lane: int) -> float:
        return float(self.segments[self._row(lane), 2])

    def _row(self, lane: int) -> int:
        return int(np.flatnonzero(self.segments[:, 4] == lane)[0])


def validate_segments(segments, where: str = "road") -> np.ndarray:
    """Check a user-given segment table; a bad one is a DataError naming the row."""
    seg = np.asarray(segments, dtype=np.float64)
    if seg.ndim != 2 or seg.shape[1] != 5 or seg.shape[0] < 1:
        raise DataError(f"{where}: segments must have shape [S, 5], got {list(seg.shape)}")
    for row, (x0, x1, y, w, lane) in enumerate(seg):
        if not np.all(np.isfinite([x0, x1, y, w, lane])):
            raise DataError(f"{where}: segment row {row} is not finite")
        if not x1 > x0:
            raise DataError(f"{where}: segment row {row} has x_end <= x_start")
        if not w > 0:
            raise DataError(f"{where}: segment row {row} has width <= 0")
    lanes = seg[:, 4]
    if sorted(lanes.tolist()) != list(range(len(lanes))):
        raise DataError(f"{where}: lane indices must be 0..{len(lanes) - 1}, one segment each")
    by_lane = seg[np.argsort(lanes)]
    if np.any(np.diff(by_lane[:, 2]) <= 0):
        raise DataError(f"{where}: lane centres must grow with the lane index")
    return seg


def straight(lanes: int, width: float, length: float, speed_limit: float) -> Road:
    """`lanes` through lanes from x = 0 to the route end plus a margin."""
    road_end = length + MARGIN_AFTER_ROUTE
    seg = np.array([[0.0, road_end, k * width, width, k] for k in range(lanes)], dtype=np.float64)
    return Road(seg, speed_limit=speed_limit, route_end=length, road_end=road_end, n_main=lanes)


def with_extra_lane(road: Road, x0: float, x1: float) -> Road:
    """A lane right of the through lanes from x0 to x1 (an on-ramp merge lane or an exit ramp)."""
    width = float(road.segments[-1, 3])
    y = float(road.segments[:, 2].max()) + width
    seg = np.vstack([road.segments, [x0, x1, y, width, road.n_lanes]])
    return Road(seg, road.speed_limit, road.route_end, road.road_end, road.exit_lane, road.wants_exit, road.n_main)


def with_lane_drop(road: Road, x_drop: float) -> Road:
    """The rightmost through lane ends at x_drop."""
    seg = road.segments.copy()
    seg[road.n_main - 1, 1] = x_drop
    return Road(seg, road.speed_limit, road.route_end, road.road_end, road.exit_lane, road.wants_exit, road.n_main - 1)


def with_exit(road: Road, x_exit: float, ramp_length: float) -> Road:
    """An exit ramp lane from x_exit to x_exit + ramp_length; the ego's route leaves by it."""
    out = with_extra_lane(road, x_exit, x_exit + ramp_length)
    out.exit_lane = out.n_lanes - 1
    out.wants_exit = True
    out.route_end = x_exit + ramp_length
    return out


@dataclass
class RoadBatch:
    """Roads of B environments, padded to the largest lane count."""

    lanes_t: np.ndarray  # float64 [B, L, 4]
    road_i: np.ndarray  # int32 [B, N_RI]
    road_f: np.ndarray  # float64 [B, N_RF]


def stack(roads: list[Road]) -> RoadBatch:
    n_lanes = max(r.n_lanes for r in roads)
    lanes_t = np.zeros((len(roads), n_lanes, 4))
    road_i = np.zeros((len(roads), K.N_RI), dtype=np.int32)
    road_f = np.zeros((len(roads), K.N_RF))
    for b, r in enumerate(roads):
        lanes_t[b, : r.n_lanes] = r.lane_table()
        road_i[b] = (r.n_lanes, r.n_main, r.exit_lane, int(r.wants_exit))
        road_f[b] = (r.speed_limit, r.route_end, r.road_end)
    return RoadBatch(lanes_t, road_i, road_f)


def segments_of(lanes_t: np.ndarray, road_i: np.ndarray) -> np.ndarray:
    """The [S, 5] segment table of one environment from its lane table (the shared interface)."""
    n = int(road_i[K.N_LANES])
    return np.column_stack([lanes_t[:n], np.arange(n, dtype=np.float64)])

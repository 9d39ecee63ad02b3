"""Batched highway driving world (methodkit.core.sim.highway).

Shared interface of its modules:
- Road = lane segments, float64 [S, 5]: (x_start, x_end, y_center, width, lane_index); straight roads along +x;
  a merge lane, a lane drop and an exit ramp are segments that start/end at given x. Drivable area = union of
  the segments' rectangles. Lane-end overrun = leaving a segment at its x_end with no continuing segment.
- Vehicle boxes: float64 [..., 5] = (x, y, heading, length, width); speeds [..., 2] = (vx, vy).
- Episode record (drawing, metrics): dict of arrays: road [S, 5], boxes [T, K, 5], present [T, K] bool, ego is
  index 0, plan [T, H, 2] (ego plan points, optional), events [E, 3] int (t, kind, vehicle) with the kind codes
  of events.py.
"""

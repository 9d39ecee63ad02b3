"""A batched highway driving simulator (Numba) re-implementing highway-env 1.12.1's vehicle models.

Modules: kernels (the Numba kernels), road (segments), state (the struct-of-arrays batch,
snapshot/restore), scenarios (the eight families and their JSON specs), simulate
(stepping, rollouts, episode records), vocab (the 16 ego candidates), expert (the
privileged rule-based expert and its expert index), highway_env_backend (the same suite
through highway-env itself); geometry, score, metrics, scenes and draw hold the box
geometry, the PDM score, the closed-loop metrics, the scene files and the drawing.

Shared interface (every module holds to it):

- Road = lane segments, float64 [S, 5] = (x_start, x_end, y_center, width, lane_index).
  Roads are straight along +x; lane 0 is at y = 0 and the index grows with y. A merge
  lane, a lane drop and an exit ramp are segments that start or end at given x. The
  drivable area is the union of the segments' rectangles. Lane-end overrun = leaving a
  segment at its x_end with no continuing segment (the exit ramp's end is the route's
  end, not an overrun).
- Vehicle boxes: float64 [..., 5] = (x, y, heading, length, width); speeds [..., 2] = (vx, vy).
- An episode record (for drawing and metrics) is a dict of arrays: road [S, 5],
  boxes [T, K, 5], present [T, K] bool, the ego at index 0, plan [T, H, 2] (the ego's
  plan points, optional), events [E, 3] int = (t, kind, vehicle): t the frame index,
  kind a code of events.py, vehicle the other slot or -1. Records from
  `simulate.Episodes.record` also carry route = (x_start, x_route_end) and dt = 0.2.
- Frames are 0.2 s (5 Hz); decisions are 1 Hz; plans are 4 s at 0.2 s (H = 20 points).
"""

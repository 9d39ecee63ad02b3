"""Codes of the episode record: event kinds (events [E, 3] int = (t, kind, vehicle)) and vehicle roles.

Shared by the simulator (which writes events), metrics.py (which penalises them) and draw.py (which marks
them). Codes are stable: they are stored in episode and scene files.
"""

from __future__ import annotations

# Event kinds. `vehicle` is the index of the vehicle the event happened to (collisions: the one hit by the
# vehicle at index 0 when the ego is involved, else the other party; -1 where there is none).
COLLISION_VEHICLE = 1  # ego box overlapped a moving or stopped vehicle
COLLISION_OBSTACLE = 2  # ego box overlapped a static obstacle (debris, a parked object)
OFF_ROAD = 3  # a corner of the ego box left the drivable area sideways
LANE_END_OVERRUN = 4  # the ego drove past the end of a lane with no continuing segment
MISSED_EXIT = 5  # the ego passed the exit it had to take; ends the route
ROUTE_COMPLETED = 6  # the ego reached the end of its route
TIMEOUT = 7  # the episode ran out of time before the route was completed

EVENT_NAMES = {
    COLLISION_VEHICLE: "collision_vehicle",
    COLLISION_OBSTACLE: "collision_obstacle",
    OFF_ROAD: "off_road",
    LANE_END_OVERRUN: "lane_end_overrun",
    MISSED_EXIT: "missed_exit",
    ROUTE_COMPLETED: "route_completed",
    TIMEOUT: "timeout",
}

# Vehicle roles (roles [K] int8 in an episode record; drawing colours, the scorer's agent-vs-object rule).
ROLE_EGO = 0
ROLE_CAR = 1
ROLE_TRUCK = 2
ROLE_OBSTACLE = 3  # static: a collision with it scores NC = 1/2, as NAVSIM's non-agent objects
ROLE_AGGRESSIVE = 4  # a car driven by an aggressive driver (drawn apart for debugging cut-ins)

ROLE_NAMES = {
    ROLE_EGO: "ego",
    ROLE_CAR: "car",
    ROLE_TRUCK: "truck",
    ROLE_OBSTACLE: "obstacle",
    ROLE_AGGRESSIVE: "aggressive",
}

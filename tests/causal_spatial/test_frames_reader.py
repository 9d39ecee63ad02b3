"""cow-reader --from-frames on hand-made segmentation frames: what counts as a car hit."""

from __future__ import annotations

import numpy as np

from methodkit.tools.causal_spatial import frames_reader


def _frames():
    """Car (1) drives right along rows 4-13; box 2 is pushed, box 3 is passed in front of (covered,
    never vacated), box 4 is pushed by box 2 (a knock-on), box 5 under the car's path settles (three
    pixels of a 400-pixel box)."""
    ids = np.zeros((4, 40, 60), dtype=np.int16)
    for k, (car_right, x2, x4) in enumerate([(13, 30, 44), (22, 30, 44), (35, 36, 44), (41, 42, 50)]):
        f = ids[k]
        f[15:35, 30:50] = 5
        if k == 3:  # as the car comes over it
            f[34, 30:33] = 0
        f[2:8, 18:24] = 3
        f[8:14, x2 : x2 + 6] = 2
        f[8:14, x4 : x4 + 6] = 4
        f[4:14, car_right - 8 : car_right + 1] = 1  # drawn last: it covers box 3 as it passes
    return ids


def test_hits_are_boxes_the_car_moves_not_covered_settled_or_knocked_on():
    ids = _frames()
    car = [1]
    assert frames_reader._hit(ids, 2, car)
    assert not frames_reader._hit(ids, 3, car)  # covered by the car, never vacated
    assert not frames_reader._hit(ids, 4, car)  # moved by box 2, the car never near it
    assert not frames_reader._hit(ids, 5, car)  # a one-pixel settle


def test_image_neighbours_far_apart_in_depth_do_not_touch():
    ids = np.zeros((20, 20), dtype=np.int16)
    ids[5:10, 5:10] = 2
    ids[5:10, 11:15] = 1  # the car, one pixel to the right in the image
    depth = np.full((20, 20), 1.0, dtype=np.float32)
    assert frames_reader._touch(ids, 2, [1], depth)
    depth[5:10, 11:15] = 0.8  # 20 cm nearer the camera: it passes in front
    assert not frames_reader._touch(ids, 2, [1], depth)
    assert frames_reader._touch(ids, 2, [1])  # without depth only the image counts

"""core.kernels.masks: the one-pass instance statistics equal one boolean mask per instance."""

from __future__ import annotations

import numpy as np

from methodkit.core.kernels.masks import mask_stats, mask_stats_reference


def test_mask_stats_equals_boolean_masks():
    rng = np.random.default_rng(3)
    ids = rng.integers(-1, 9, size=(4, 37, 53)).astype(np.int32)
    ids[2] = -1  # a frame with nothing in it
    ids[1] = np.where(ids[1] == 5, 6, ids[1])  # id 5 absent from one frame
    got, ref = mask_stats(ids, 9), mask_stats_reference(ids, 9)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])
    np.testing.assert_allclose(got[2], ref[2], equal_nan=True)
    single = mask_stats(ids[0], 9)  # an [H, W] image is one frame
    np.testing.assert_array_equal(single[0][0], ref[0][0])

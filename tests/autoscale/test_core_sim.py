"""The two additions this method made to core.sim.highway: scenefile.state_arrays and expert.futures' ego_mode."""

from __future__ import annotations

import numpy as np

from methodkit.core.sim.highway import expert, scenarios, scenefile
from methodkit.core.sim.highway import kernels as K
from methodkit.core.sim.highway.state import pack

SPEC = {"seed": 5, "scenes": [{"family": "cut-in", "count": 3}, {"family": "merge", "count": 2}]}


def test_state_arrays_equals_build():
    built, _ = scenefile.build(SPEC)
    inits, _, _ = scenarios.generate(SPEC)
    slots = max(s.n for s in inits)
    lanes = max(s.road.n_lanes for s in inits)
    state = pack(inits, slots=slots)
    before = state.veh.copy()
    got = scenefile.state_arrays(state, lanes)
    np.testing.assert_array_equal(state.veh, before)  # the state is not changed
    for key, value in got.items():
        np.testing.assert_array_equal(value, built[key], err_msg=key)


def test_futures_ego_mode_idm_differs_and_default_is_expert():
    inits, _, _ = scenarios.generate(SPEC)
    state = pack(inits)
    before = state.veh.copy()
    default = expert.futures(state)
    as_expert = expert.futures(state, ego_mode=K.EGO_EXPERT)
    as_idm = expert.futures(state, ego_mode=K.EGO_IDM)
    np.testing.assert_array_equal(state.veh, before)
    np.testing.assert_array_equal(default["ego"], as_expert["ego"])
    assert not np.allclose(default["ego"], as_idm["ego"])  # the merge ego stays on its ramp under IDM

"""The optional baselines (econml X-learner, causalml uplift forest) turned into LP policies."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from methodkit.core.errors import UsageError
from methodkit.tools.cuvet import compare, synth
from methodkit.tools.cuvet.data import CostSpec, load_rct

COSTS = CostSpec(arm_costs=[0, 1, 2, 3, 4], on_outcome=True)


def _split(n: int = 4000):
    truth = synth.synthetic_truth(0, "normal")
    truth["alpha"] = (np.asarray(truth["alpha"]) * 6).tolist()
    tr, _ = synth.synthetic(n, 1, truth)
    te, _ = synth.synthetic(n, 2, truth)
    rct = compare.Split(
        load_rct(tr, "treatment", "conversion", COSTS), load_rct(te, "treatment", "conversion", COSTS), te, 0, 0
    )
    return rct, truth


@pytest.mark.slow
@pytest.mark.parametrize("method,package", [("lp-xlearner", "econml"), ("lp-causalml-urf", "causalml")])
def test_meta_baseline_policies_meet_the_budget_and_find_value(method, package):
    pytest.importorskip(package)
    split, truth = _split()
    rows = pd.DataFrame(compare.run_split(split, [method, "uniform", "oracle"], [0.3], truth, threads=1))
    by = rows.set_index("method")
    assert by.loc[method, "true_cost"] <= 1.5 * by.loc[method, "budget"]  # the LP met the estimated budget
    assert 0.0 < by.loc[method, "oracle_frac"] <= 1.0 + 1e-9


def test_xlearner_cost_side_follows_the_cost_spec():
    pytest.importorskip("econml")
    from methodkit.tools.cuvet.meta_baselines import xlearner_estimates

    split, _ = _split(3000)
    dv, dc = xlearner_estimates(split.train, split.test.X[:200], threads=1)
    kappa = np.asarray(COSTS.arm_costs)
    # cost on conversion: dc_t = kappa_t (mu0 + dv_t), so dc - kappa dv is the same mu0 * kappa_t per user
    mu0 = (dc[:, 1:] - kappa[1:] * dv[:, 1:]) / kappa[1:]
    assert np.allclose(mu0, mu0[:, :1])
    assert dv.shape == (200, 5) and np.all(dv[:, 0] == 0) and np.all(dc[:, 0] == 0)


def test_uplift_forest_refuses_a_continuous_value():
    from methodkit.tools.cuvet.meta_baselines import uplift_forest_estimates

    frame, _ = synth.synthetic(300, 0)
    frame["conversion"] = frame["conversion"] + 0.5
    rct = load_rct(frame, "treatment", "conversion", COSTS)
    with pytest.raises(UsageError, match="0/1 value"):
        uplift_forest_estimates(rct, rct.X)

"""The authors' library plskit (GPL; installed with the test extra, used here only as an oracle)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from methodkit.tools.pls import api, gate
from methodkit.tools.pls.data import from_arrays
from methodkit.tools.pls.simulate import simulate

plskit = pytest.importorskip(
    "plskit", reason="plskit (GPL oracle) comes with methodkit[test]; pip install plskit to run these"
)


@pytest.mark.parametrize("geometry,K", [("toeplitz0.5", 2), ("iid", 1)])
def test_nb_statistic_and_gate_agree_with_plskit_split_nb(geometry, K):
    X, y = simulate(geometry, 200, 20, snr=1.0, rng=np.random.default_rng(5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = plskit.pls1_confirmatory_test(X, y, K, test_method="split_nb", seed=1)
        ref_gate = plskit.split_nb_gate(X)
    ours = api.run(from_arrays(X, y, "sim"), [K], api.Options(method="nb", seed=1))[0]
    # different split streams: the statistic agrees to split noise, the p-values are both tiny
    assert abs(ours.statistic - ref.statistic) < 0.02
    assert ours.pvalue < 1e-6 and ref.pvalue < 1e-6
    assert gate.stable_rank(X) == pytest.approx(ref_gate.stable_rank, rel=1e-9)
    assert ours.gate["fired"] == ref_gate.fires


def test_gate_agrees_with_plskit_on_a_near_singular_design():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(120, 1)) + 0.02 * rng.normal(size=(120, 40))
    ref = plskit.split_nb_gate(X)
    ours = gate.check(X)
    assert ours.fired and ref.fires
    assert ours.stable_rank == pytest.approx(ref.stable_rank, rel=1e-9)

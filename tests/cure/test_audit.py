"""Audit metrics: known answers of fir, mia_auc and the Grubbs unlearn_rate."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.tools.cure import audit as A
from methodkit.tools.cure.train import train


@pytest.fixture(scope="module")
def pair(tiny_ds):
    fid = tiny_ds.ids_of("F-mix")
    return train(tiny_ds, "td3bc", steps=20, hidden=16)[0], train(tiny_ds, "td3bc", steps=20, hidden=16, exclude=fid)[0]


def test_fir_is_one_for_the_original_and_zero_for_the_retrain(pair, tiny_ds):
    original, retrain = pair
    fid = tiny_ds.ids_of("F-mix")
    u = np.asarray(tiny_ds.meta["style_u"]["F-mix"])
    assert A.fir(original, original, retrain, tiny_ds, fid, u) == pytest.approx(1.0)
    assert A.fir(retrain, original, retrain, tiny_ds, fid, u) == pytest.approx(0.0)
    assert np.isnan(A.fir(original, original, retrain, tiny_ds, tiny_ds.ids_of("R"), u))  # style never fired


def test_mia_auc_of_a_set_against_itself_is_one_half(pair, tiny_ds):
    original, _ = pair
    held = tiny_ds.ids_of("F-mix", split=1)
    ref = tiny_ds.ids_of("R", split=1)
    assert A.mia_auc(original, tiny_ds, held, held, ref) == pytest.approx(0.5)
    assert 0.0 <= A.mia_auc(original, tiny_ds, tiny_ds.ids_of("F-mix"), held, ref) <= 1.0


def test_unlearn_rate_is_zero_for_the_original_and_counts_outliers(pair, tiny_ds):
    original, retrain = pair
    cfg = A.AuditConfig(shadows=4, shadow_steps=3)
    shadows = A.make_shadows(original, tiny_ds, cfg)
    fid = tiny_ds.ids_of("F-mix")
    rate, dist = A.unlearn_rate(original, original, shadows, tiny_ds, fid, cfg)
    assert rate == 0.0 and np.all(dist[:, -1] == 0)  # the original is at distance 0 from itself
    rate_r, dist_r = A.unlearn_rate(retrain, original, shadows, tiny_ds, fid, cfg)
    from methodkit.core.kernels.segments import grubbs_critical, grubbs_rows

    g, arg = grubbs_rows(dist_r)
    above = dist_r[:, 4] > dist_r[:, :4].mean(1)
    assert rate_r == pytest.approx(((g > grubbs_critical(5)) & (arg == 4) & above).mean())

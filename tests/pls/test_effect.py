"""The paper's effect at small scale: NB keeps its level and beats CV-permutation-Q2 on power,
with a tenth of the fits (Toeplitz 0.5 design, p = 50, 5 active, SNR 0.3, K = 2; seeded)."""

from __future__ import annotations

from methodkit.tools.pls import api, power


def test_nb_valid_and_more_powerful_than_cv_permutation_q2():
    options = api.Options(splits=50, perms=99, folds=5, seed=11)
    alt = power.curves(power.Scenario("toeplitz0.5", 50, 5, 0.3), [80], ["nb", "cvq2-perm"], 2, 80, options)
    by = {p.method: p for p in alt}
    assert by["nb"].power >= by["cvq2-perm"].power
    assert by["nb"].power > 0.5
    assert by["nb"].mean_fits * 9 < by["cvq2-perm"].mean_fits  # 50 fits against (B+1) x F = 500
    null = power.curves(power.Scenario("toeplitz0.5", 50, 5, 0.3, null=True), [60], ["nb"], 2, 100, options)
    assert null[0].rejected <= 10  # level 0.05: 100 null data sets reject at most ~ 5 +- 4.4

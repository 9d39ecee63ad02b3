"""The figures docs/cuvet.md quotes for tests/cuvet/test_bayes_wiring.py: the same fits, printed.

Run: OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python -P bench/cuvet/bayes_wiring.py (about 5 s).
"""

import sys
from pathlib import Path

import numpy as np
from scipy.stats import norm

from methodkit.tools.cuvet import bayes
from methodkit.tools.cuvet import model as M

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "cuvet"))
import test_bayes_wiring as T  # noqa: E402

m = T._fit(T.COSTS)
n_est = T.N_ROWS - T.N_ROWS // 2
B = m.budget_per_user
full, _ = M._solve(m.leaves, B, m.posterior, m.seed)
print(
    "p_full",
    M.feasibility_of(m.leaves, full, B, m.seed, n_est),
    "working/B",
    m.working_budget / B,
    "feas",
    m.feasibility,
)
more, _ = M._solve(m.leaves, min(B, m.working_budget * 1.05), m.posterior, m.seed)
print("p at 1.05 working", M.feasibility_of(m.leaves, more, B, m.seed, n_est))
dc_mean, dc_var, z_var = M.cost_moments(m.leaves)
rng = np.random.default_rng(12345)


def within(spend, draws=20_000):
    total, noise = np.zeros(draws), 0.0
    for k, (lf, s) in enumerate(zip(m.leaves, spend)):
        for arm, p in M.realize(float(s), lf.dc, lf.arms).items():
            if arm:
                total += lf.share * p * rng.normal(dc_mean[k][arm], np.sqrt(dc_var[k][arm]), draws)
                noise += lf.share * p * z_var[k][arm]
    total += rng.standard_normal(draws) * np.sqrt(noise / n_est)
    return float(np.mean(total <= B))


print("shrunk", within([lf.spend for lf in m.leaves]), "unshrunk", within(full))
spend = np.array([lf.spend for lf in m.leaves])
a, b = bayes.draws(m.posterior, m.seed)
print("lam", m.lam, "point marg", [lf.alpha * lf.beta * s ** (lf.beta - 1) for lf, s in zip(m.leaves, spend)])
leaves = T._two_leaves()
post = M._posterior(leaves, 0.5)
print(M._solve(leaves, 1.0, post, 0)[0], M._solve(leaves, 1.0, None, 0)[0])
mix = [{0: 0.5, 1: 0.5}]
dm, dv, zv = [np.array([0.0, 1.0])], [np.array([0.0, 0.04])], [np.array([0.0, 1.0])]
for bb in (0.45, 0.6):
    print(
        bb,
        np.mean([bayes.feasibility(np.array([1.0]), mix, dm, dv, zv, 100, bb, s) for s in range(40)]),
        norm.cdf((bb - 0.5) / np.sqrt(0.25 * 0.04 + 0.5 / 100)),
    )

"""Why VI's 95% coverage of b sits ~0.065 below MCMC's at N <= 50 (claim 3a), on the acceptance grid's data.

For each (N, shape) cell of bench/irt/irt_grid_acceptance.toml (rep 0: the grid's own data sets) it fits
MCMC (2 x (500 + 500), as the grid) and py-irt-style VI, links both to the truth (mean-sigma, as the
sweep), and prints:
- coverage of b for each, and the paired gap;
- the median ratio of VI's to MCMC's posterior sd of b (after linking), and the coverage a
  Gaussian interval of that relative width would have if MCMC's were exact, mean_j(2 Phi(1.96 r_j) - 1);
- the median |posterior corr(log a_j, b_j)| in the MCMC draws;
- mf_ratio: the sd ratio the best mean-field Gaussian would give if the joint posterior of (b_j, log a_j,
  theta_1..N) were Gaussian with the MCMC draws' covariance S: sqrt(1 / (S^-1)_bb) / sqrt(S_bb), the
  conditional sd of b_j given everything else over its marginal sd (median over items);
- linked_ratio: the sd of b_j after subtracting, draw by draw, the mean of the thetas (the common
  location that linking takes out) over its marginal sd: ~0.99, so linking does not hide the difference.

    nice -n 5 python -P bench/irt/coverage_why.py 25:normal 25:skewed 50:clustered 50:multimodal
    (output of that run: bench/irt/coverage_why.txt)
"""

from __future__ import annotations

import os
import sys
import time

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_name] = "1"

GRID = os.path.join(os.path.dirname(os.path.abspath(__file__)), "irt_grid_acceptance.toml")


def main() -> int:
    import numpy as np
    from scipy import special

    from methodkit.tools.irt import estimators, evaluate, mcmc, sweep
    from methodkit.tools.irt.data import MISSING

    grid = sweep.parse_grid(open(GRID, encoding="utf-8").read(), GRID)
    captured = []
    chain = mcmc._chain

    def keep(*args, **kwargs):  # the MCMC item draws, for the posterior correlation of (log a_j, b_j)
        out = chain(*args, **kwargs)
        captured.append(out)
        return out

    mcmc._chain = keep
    print("N  shape      cov_b_vi cov_b_mcmc   gap  sd_ratio cov_if_mcmc_exact |rho(la,b)| mf_ratio linked_ratio cpu_s")
    for spec in sys.argv[1:] or ["25:normal", "50:normal"]:
        n, shape = spec.split(":")
        cell = next(c for c in grid.cells if c["n_models"] == int(n) and c["capability"] == shape)
        data, mask = sweep.draw_cell(grid, cell, 0)
        fit_data = data.subset()
        fit_data.Y = np.where(mask, MISSING, data.Y).astype(np.uint8)
        seed = sweep.seeds(grid, cell, 0)[2]
        start = time.process_time()
        fits, metrics = {}, {}
        captured.clear()
        for method in ("mcmc", "vi"):
            settings = estimators.make_settings(method, **grid.estimators[method])
            fits[method] = estimators.run(fit_data, "2pl", method, settings, seed=seed).estimate
            metrics[method] = evaluate.evaluate(fits[method], data, "2pl", Y_full=data.Y, mask=mask)
        draws = np.concatenate([c[1] for c in captured], axis=0)  # both chains: draws, J, 3 (log a, b, logit c)
        thetas = np.concatenate([c[0] for c in captured], axis=0)  # draws, N
        la, b = draws[..., 0], draws[..., 1]
        rho = np.array([np.corrcoef(la[:, j], b[:, j])[0, 1] for j in range(b.shape[1])])
        mf, linked = [], []
        shift = thetas.mean(axis=1)
        for j in range(b.shape[1]):
            S = np.cov(np.column_stack([b[:, j], la[:, j], thetas]), rowvar=False)
            mf.append(np.sqrt(1.0 / np.linalg.inv(S)[0, 0] / S[0, 0]))
            linked.append(np.std(b[:, j] - shift) / np.sqrt(S[0, 0]))
        sd = {m: fits[m].b_sd * metrics[m]["link_A"] for m in fits}
        ratio = sd["vi"] / sd["mcmc"]
        z = 1.959963984540054
        predicted = float(np.mean(special.erf(z * ratio / np.sqrt(2))))  # 2 Phi(z r) - 1
        cv, cm = metrics["vi"]["coverage_b"], metrics["mcmc"]["coverage_b"]
        print(
            f"{n:<3}{shape:<11}{cv:8.3f} {cm:10.3f} {cm - cv:6.3f} {np.median(ratio):9.3f} {predicted:17.3f}"
            f" {np.median(np.abs(rho)):11.3f} {np.median(mf):8.3f} {np.median(linked):12.3f}"
            f" {time.process_time() - start:5.1f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

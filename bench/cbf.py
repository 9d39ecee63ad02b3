"""cbf benchmarks: `case size ours_s ref_s ratio`, the reference measured in the same run.

- cbf_forward: numba CBF filter vs the same filter in vectorised NumPy (loop over trials).
- cbf_value_grad: numba forward-mode value+gradient vs torch autograd through the same filter.
- pf_p10000: numba particle filter vs a NumPy particle filter (vectorised over particles, in the
  style of payampiray/health-lesion-stovol), one 200-trial subject, 10,000 particles.
- fit_per_subject: CBF gradient fit (5 restarts) vs the PF-HPL derivative-free protocol (P=1000,
  R=4, 60 evaluations), seconds per subject.
Sizes are small (a shared 2-core machine); pass --scale 4 for larger cohorts.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np


def _time(fn, repeat=1):
    fn()  # compile / warm
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def numpy_cbf(outcome, vn, sn, m0=60.0, w0=10.0):
    S, B, T = outcome.shape
    v = vn[:, None, :, None]
    s = sn[:, None, None, :]
    K = vn.shape[1]
    logpi = np.full((S, B, K, K), -math.log(K * K))
    m = np.full((S, B, K, K), m0)
    w = np.full((S, B, K, K), w0)
    preds = np.empty((S, B, T))
    for t in range(T):
        preds[:, :, t] = (np.exp(logpi) * m).sum((-1, -2))
        o = outcome[:, :, t, None, None]
        pv = w + v
        tot = pv + s
        e = o - m
        a = logpi - 0.5 * np.log(2 * np.pi * tot) - 0.5 * e * e / tot
        top = a.max((-1, -2), keepdims=True)
        logpi = a - (top + np.log(np.exp(a - top).sum((-1, -2), keepdims=True)))
        k = pv / tot
        m = m + k * e
        w = (1 - k) * pv
    return preds


def numpy_pf_beta(outcome, lam_v, lam_s, v0, s0, P, rng, m0=60.0, w0=10.0):
    T = outcome.shape[0]
    z = np.full(P, 1 / v0)
    y = np.full(P, 1 / s0)
    m = np.full(P, m0)
    w = np.full(P, w0)
    wt = np.full(P, 1 / P)
    preds = np.empty(T)
    for t in range(T):
        for lam, arr in ((lam_v, z), (lam_s, y)):
            eta, nu = 1 - lam, 0.5 / lam
            arr *= rng.beta(eta * nu, (1 - eta) * nu, P) / eta
        preds[t] = wt @ m
        v, s = 1 / z, 1 / y
        pv = w + v
        tot = pv + s
        e = outcome[t] - m
        lw = np.log(wt) - 0.5 * np.log(2 * np.pi * tot) - 0.5 * e * e / tot
        wt = np.exp(lw - lw.max())
        wt /= wt.sum()
        k = pv / tot
        m = m + k * e
        w = (1 - k) * pv
        if 1 / (wt @ wt) < P / 2:
            idx = np.minimum(np.searchsorted(np.cumsum(wt), (rng.random() + np.arange(P)) / P), P - 1)
            z, y, m, w = z[idx], y[idx], m[idx], w[idx]
            wt = np.full(P, 1 / P)
    return preds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=int, default=1)
    args = parser.parse_args()
    import torch

    from methodkit.tools.cbf import agents, data, fit, grid, kernels, models, signals
    from methodkit.tools.cbf.forward import FilterOptions

    torch.set_default_dtype(torch.float64)
    rows = []
    task = data.simulate_task(seed=1)
    n = 20 * args.scale
    people = data.cohort_for_agents(task, n, seed=2)
    params = agents.population_params("cbf", ["healthy"] * n, np.random.default_rng(3), 4.0)
    cohort = agents.simulate(people, "cbf", params, seed=4).cohort
    vn, sn = signals.cbf_nodes(
        {k: params[k].to_numpy() for k in ("mu_v", "kappa_v", "mu_s", "kappa_s")}, grid.GridSpec()
    )
    ours = _time(lambda: signals.mixture_signals(cohort, vn, sn, FilterOptions()), 3)
    ref = _time(lambda: numpy_cbf(cohort.outcome, vn, sn))
    assert np.allclose(
        numpy_cbf(cohort.outcome, vn, sn), signals.mixture_signals(cohort, vn, sn, FilterOptions()).arrays["pred_mean"]
    )
    rows.append(("cbf_forward", f"{n}x4x50xK15", ours, ref))

    opts = fit.FitOptions()
    theta = models.theta_from_natural(
        "cbf", {k: params[k].to_numpy() for k in ("mu_v", "kappa_v", "mu_s", "kappa_s", "sigma_r")}
    )
    objective = fit.Objective(cohort, np.arange(n), opts)
    batch = fit._batch(cohort, np.arange(n), 1)

    def torch_grad():
        t = torch.tensor(theta, requires_grad=True)
        loss, _, _, _ = fit.neg_log_posterior(t, batch, opts)
        loss.sum().backward()

    rows.append(("cbf_value_grad", f"{n}x4x50xK15", _time(lambda: objective(theta), 3), _time(torch_grad)))

    P = 10_000
    one = cohort.subset([0])
    seeds = np.array([[12345]], dtype=np.int64)
    pf_opts = fit.FitOptions(model="pf-beta", particles=P)
    values = np.array([[0.2, 0.2, 10.0, 30.0]])
    ours = _time(lambda: fit.pf_predictions("pf-beta", one, values, pf_opts, seeds), 3)
    rng = np.random.default_rng(0)
    outcome = one.outcome[0].ravel()
    ref = _time(lambda: numpy_pf_beta(outcome, 0.2, 0.2, 10.0, 30.0, P, rng))
    rows.append(("pf_p10000", "1x200", ours, ref))
    del kernels

    few = cohort.subset(np.arange(2))
    start = time.perf_counter()
    fit.run(few, fit.FitOptions())
    cbf_per = (time.perf_counter() - start) / 2
    start = time.perf_counter()
    fit.run(few, fit.FitOptions(model="pf-hpl"), seed=0)
    pf_per = (time.perf_counter() - start) / 2
    rows.append(("fit_per_subject(cbf vs pf-hpl)", "2 subjects", cbf_per, pf_per))

    print("case size ours_s ref_s ratio")
    for case, size, ours, ref in rows:
        print(f"{case} {size} {ours:.4f} {ref:.4f} {ref / ours:.1f}")


if __name__ == "__main__":
    main()

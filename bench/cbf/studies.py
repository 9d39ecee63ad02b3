"""cbf acceptance studies on simulated agents (issue 13 items 3 and 4), one JSON line per study.

lesion: `--per-group` pf-beta agents each of healthy (lambda = .2), vol-lesion (lambda_v = 0) and
        sto-lesion (lambda_s = 0) on the stovol2x2 design; CBF fit -> AUC of D = log kappa_v - log kappa_s;
        PF-HPL fit by the derivative-free CPU protocol -> AUC of mu_s - mu_v; test-retest of both on the
        first `--retest` agents per group (PF-HPL: other optimizer/particle seed; CBF: a rerun).
rt:     ambiguity -> RT. Power: `--n` CBF agents with log RT = 8.4 + b A_t + N(0, .1^2), b = .05, group
        t-test on the per-subject beta_A; false positives: `--groups` groups of `--n` agents with b = 0.
        A_t is the agents' own (true-parameter) ambiguity; the regression is `cbf-fit analyze`'s.
rt-fixed: the regression's calibration alone (one group fixed, the null RT redrawn `--redraws` times).
rt-redraw: the false-positive groups of `rt` (same seeds), each tested twice: with the simulator's null RT
        and with an independent redraw of log RT = 8.4 + N(0, .1^2) on the same design (agents, responses,
        ambiguity); separates the simulator's RT from the design and the regression.
rt-stream: one fixed null design (seeds 2000-2002), log RT noise drawn the simulator's way
        (SeedSequence([k, 1]), the response-noise block skipped) for `--redraws` seeds k = 10^6 + j.
The task is `cbf-sim task`'s default (outcomes kept in 15-85); `--within none` gives the unconstrained walk.
Not part of `make bench` (tens of minutes): nice -n 10 python -P bench/cbf/studies.py lesion rt
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
from scipy import stats


def _task(args):
    """The stovol2x2 task (seed 1) as `cbf-sim task` draws it: `--within design` (default) redraws each
    condition until its outcomes lie in 15-85; `--within none` is the unconstrained walk of earlier runs."""
    from methodkit.tools.cbf import data

    return data.simulate_task(seed=1, within=None if args.within == "none" else "design")


def _lesion_cohort(args):
    """The lesion study's pf-beta agents (`--per-group` per group, seeds 1-4) and their group labels."""
    from methodkit.tools.cbf import agents, data

    task = _task(args)
    labels = ["healthy"] * args.per_group + ["vol-blind"] * args.per_group + ["sto-blind"] * args.per_group
    people = data.cohort_for_agents(task, len(labels), seed=2)
    params = agents.population_params("pf-beta", labels, np.random.default_rng(3), 4.0)
    params["group"] = labels
    cohort = agents.simulate(people, "pf-beta", params, seed=4, particles=1000).cohort
    return cohort, np.array(labels)


def _aucs(index, groups) -> dict:
    from methodkit.tools.cbf import analyze

    res = {}
    for a, b in (("vol-blind", "sto-blind"), ("sto-blind", "healthy"), ("vol-blind", "healthy")):
        pick = (groups == a) | (groups == b)
        sign = 1.0 if a == "vol-blind" else -1.0
        res[f"{a}_vs_{b}"] = round(analyze.auc(sign * index[pick], groups[pick] == a), 3)
    return res


def lesion_pf(args) -> dict:
    """The CBF and PF-HPL on the first `--pf-per-group` agents of each group of the lesion cohort (the same
    agents for both fitters; no test-retest): the lesion study's comparison at a size PF-HPL fits in time."""
    from methodkit.tools.cbf import fit

    cohort, groups = _lesion_cohort(args)
    m = args.pf_per_group
    pick = np.concatenate([np.arange(g * args.per_group, g * args.per_group + m) for g in range(3)])
    sub, groups = cohort.subset(pick), groups[pick]
    out: dict = {"study": "lesion-pf", "per_group": args.per_group, "fitted_per_group": m, "agent": "pf-beta (P=1000)"}
    cpu = time.process_time()
    cbf = fit.run(sub, fit.FitOptions(restarts=args.restarts)).table
    out["cbf_fit_cpu_s"] = round(time.process_time() - cpu, 1)
    out["cbf_auc"] = _aucs(np.log(cbf["kappa_v"].to_numpy()) - np.log(cbf["kappa_s"].to_numpy()), groups)
    print(json.dumps(out), flush=True)
    pf_opts = fit.FitOptions(model="pf-hpl", particles=args.particles, runs=args.runs, evaluations=args.evaluations)
    cpu = time.process_time()
    pf = fit.run(sub, pf_opts, seed=0).table
    out["pf_hpl_fit_cpu_s"] = round(time.process_time() - cpu, 1)
    out["pf_hpl_protocol"] = f"nelder-mead P={args.particles} R={args.runs} evals={args.evaluations}"
    out["pf_hpl_auc"] = _aucs(pf["mu_s"].to_numpy() - pf["mu_v"].to_numpy(), groups)
    return out


def lesion(args) -> dict:
    from methodkit.tools.cbf import fit

    cohort, groups = _lesion_cohort(args)
    labels = list(groups)
    out: dict = {"study": "lesion", "per_group": args.per_group, "agent": "pf-beta (P=1000)"}

    def aucs(index):
        return _aucs(index, groups)

    start, cpu = time.perf_counter(), time.process_time()
    cbf = fit.run(cohort, fit.FitOptions(restarts=args.restarts)).table
    out["cbf_fit_s"] = round(time.perf_counter() - start, 1)
    out["cbf_fit_cpu_s"] = round(time.process_time() - cpu, 1)
    d = np.log(cbf["kappa_v"].to_numpy()) - np.log(cbf["kappa_s"].to_numpy())
    out["cbf_auc"] = aucs(d)
    out["cbf_median_D"] = {g: round(float(np.median(d[groups == g])), 2) for g in ("healthy", "vol-blind", "sto-blind")}
    out["cbf_converged"] = int(cbf["converged"].sum())
    print(json.dumps(out), flush=True)

    pf_opts = fit.FitOptions(model="pf-hpl", particles=args.particles, runs=args.runs, evaluations=args.evaluations)
    start, cpu = time.perf_counter(), time.process_time()
    pf = fit.run(cohort, pf_opts, seed=0).table
    out["pf_hpl_fit_s"] = round(time.perf_counter() - start, 1)
    out["pf_hpl_fit_cpu_s"] = round(time.process_time() - cpu, 1)
    out["pf_hpl_protocol"] = f"nelder-mead P={args.particles} R={args.runs} evals={args.evaluations}"
    index = pf["mu_s"].to_numpy() - pf["mu_v"].to_numpy()
    out["pf_hpl_auc"] = aucs(index)
    out["fit_cpu_s_per_subject"] = {
        "cbf": round(out["cbf_fit_cpu_s"] / len(labels), 3),
        "pf_hpl": round(out["pf_hpl_fit_cpu_s"] / len(labels), 3),
    }
    out["pf_hpl_cpu_min_per_100_subjects"] = round(out["pf_hpl_fit_cpu_s"] / len(labels) * 100 / 60, 2)
    print(json.dumps(out), flush=True)

    # test-retest on the first `retest` agents of each group
    pick = np.concatenate([np.arange(g * args.per_group, g * args.per_group + args.retest) for g in range(3)])
    sub = cohort.subset(pick)
    pf2 = fit.run(sub, pf_opts, seed=1).table
    out["pf_hpl_retest_spearman"] = {
        k: round(float(stats.spearmanr(pf[k].to_numpy()[pick], pf2[k].to_numpy()).statistic), 3)
        for k in ("mu_v", "mu_s", "sigma")
    }
    out["pf_hpl_retest_spearman"]["mu_s-mu_v"] = round(
        float(stats.spearmanr(index[pick], pf2["mu_s"].to_numpy() - pf2["mu_v"].to_numpy()).statistic), 3
    )
    cbf2 = fit.run(sub, fit.FitOptions(restarts=args.restarts)).table
    cols = ["mu_v", "kappa_v", "mu_s", "kappa_s", "sigma_r"]
    same = np.array_equal(cbf2[cols].to_numpy(), cbf[cols].to_numpy()[pick])
    out["cbf_retest"] = {
        "identical": bool(same),
        "spearman_D": round(
            float(stats.spearmanr(d[pick], np.log(cbf2["kappa_v"]) - np.log(cbf2["kappa_s"])).statistic), 3
        ),
    }
    out["retest_n"] = int(pick.size)
    return out


def rt(args) -> dict:
    from methodkit.tools.cbf import agents, analyze, data

    task = _task(args)

    def group(n, b, seed):
        people = data.cohort_for_agents(task, n, seed=seed)
        params = agents.population_params("cbf", ["healthy"] * n, np.random.default_rng(seed + 1), 4.0)
        model = agents.parse_rt(f"logrt=8.4+{b}*amb+N(0,0.1)")
        sim = agents.simulate(people, "cbf", params, seed=seed + 2, rt=model)
        from methodkit.tools.cbf import grid, signals
        from methodkit.tools.cbf.forward import FilterOptions

        values = {k: params[k].to_numpy() for k in ("mu_v", "kappa_v", "mu_s", "kappa_s")}
        amb = signals.model_signals(sim.cohort, "cbf", values, grid=grid.GridSpec(), fopts=FilterOptions())
        table = analyze.rt_regression(sim.cohort, amb.arrays["ambiguity"]).table
        beta = table["b_amb"].dropna().to_numpy()
        return stats.ttest_1samp(beta, 0.0), float(np.mean(beta)), analyze.sign_test(beta)["p"]

    out: dict = {"study": "rt", "n": args.n}
    if not args.skip_power:
        test, mean, sign_p = group(args.n, 0.05, 1000)
        out["power_b0.05"] = {
            "mean_b_amb": round(mean, 4),
            "t": round(float(test.statistic), 2),
            "p": float(test.pvalue),
            "sign_test_p": sign_p,
        }
        print(json.dumps(out), flush=True)
    start = time.perf_counter()
    groups = [group(args.n, 0.0, args.fp_seed + 10 * g) for g in range(args.groups)]
    pvals = np.array([g[0].pvalue for g in groups])
    tstats = np.array([g[0].statistic for g in groups])
    sign = np.array([g[2] for g in groups])
    hits = int((pvals < 0.05).sum())
    out["false_positive"] = {
        "groups": args.groups,
        "seed_base": args.fp_seed,
        "binomial_p_vs_.05": float(stats.binomtest(hits, args.groups, 0.05, alternative="greater").pvalue),
        "rate_p<.05": float((pvals < 0.05).mean()),
        "rate_p<.001": float((pvals < 0.001).mean()),
        "var_t (1.01 if calibrated)": round(float(tstats.var()), 3),
        "sign_test_rate_p<.05": float((sign < 0.05).mean()),
        "seconds": round(time.perf_counter() - start, 1),
    }
    return out


def rt_fixed(args) -> dict:
    """Calibration of the RT regression alone: one simulated group (seeds 2000-2002) held fixed, only the
    null log RT = 8.4 + N(0, .1^2) redrawn `--redraws` times; rate of group t-tests with p < .05 / .01."""
    import dataclasses

    from methodkit.tools.cbf import agents, analyze, data, grid, signals
    from methodkit.tools.cbf.forward import FilterOptions

    task = _task(args)
    n = args.n
    people = data.cohort_for_agents(task, n, seed=2000)
    params = agents.population_params("cbf", ["healthy"] * n, np.random.default_rng(2001), 4.0)
    sim = agents.simulate(people, "cbf", params, seed=2002, rt=agents.parse_rt("logrt=8.4+0.0*amb+N(0,0.1)"))
    values = {k: params[k].to_numpy() for k in ("mu_v", "kappa_v", "mu_s", "kappa_s")}
    amb = signals.model_signals(sim.cohort, "cbf", values, grid=grid.GridSpec(), fopts=FilterOptions())
    rng = np.random.default_rng(5)
    pvals = []
    for _ in range(args.redraws):
        rt_ms = np.round(np.exp(8.4 + 0.1 * rng.standard_normal(sim.cohort.rt_ms.shape)), 1)
        cohort = dataclasses.replace(sim.cohort, rt_ms=rt_ms)
        beta = analyze.rt_regression(cohort, amb.arrays["ambiguity"]).table["b_amb"].dropna().to_numpy()
        pvals.append(stats.ttest_1samp(beta, 0.0).pvalue)
    pvals = np.array(pvals)
    return {
        "study": "rt-fixed",
        "n": n,
        "redraws": args.redraws,
        "rate_p<.05": float((pvals < 0.05).mean()),
        "rate_p<.01": float((pvals < 0.01).mean()),
        "ks_uniform_p": float(stats.kstest(pvals, "uniform").pvalue),
    }


def rt_redraw(args) -> dict:
    import dataclasses

    from methodkit.tools.cbf import agents, analyze, data, grid, signals
    from methodkit.tools.cbf.forward import FilterOptions

    task = _task(args)
    n = args.n
    rows = []
    start = time.perf_counter()
    for g in range(args.groups):
        seed = args.fp_seed + 10 * g
        people = data.cohort_for_agents(task, n, seed=seed)
        params = agents.population_params("cbf", ["healthy"] * n, np.random.default_rng(seed + 1), 4.0)
        sim = agents.simulate(people, "cbf", params, seed=seed + 2, rt=agents.parse_rt("logrt=8.4+0.0*amb+N(0,0.1)"))
        values = {k: params[k].to_numpy() for k in ("mu_v", "kappa_v", "mu_s", "kappa_s")}
        amb = signals.model_signals(sim.cohort, "cbf", values, grid=grid.GridSpec(), fopts=FilterOptions())
        rng = np.random.default_rng(np.random.SeedSequence([seed, 99]))
        redrawn = np.round(np.exp(8.4 + 0.1 * rng.standard_normal(sim.cohort.rt_ms.shape)), 1)
        row = {}
        for name, cohort in (("simulator", sim.cohort), ("redraw", dataclasses.replace(sim.cohort, rt_ms=redrawn))):
            beta = analyze.rt_regression(cohort, amb.arrays["ambiguity"]).table["b_amb"].dropna().to_numpy()
            test = stats.ttest_1samp(beta, 0.0)
            row[name] = (float(test.statistic), float(test.pvalue))
        rows.append(row)
        print(json.dumps({"group_seed": seed, **row}), file=sys.stderr, flush=True)  # kept if the run is stopped
    out: dict = {"study": "rt-redraw", "n": n, "groups": args.groups, "seed_base": args.fp_seed}
    for name in ("simulator", "redraw"):
        t = np.array([r[name][0] for r in rows])
        p = np.array([r[name][1] for r in rows])
        out[name] = {
            "rate_p<.05": float((p < 0.05).mean()),
            "var_t": round(float(t.var()), 3),
            "mean_t": round(float(t.mean()), 3),
        }
    ts = np.array([r["simulator"][0] for r in rows])
    tr = np.array([r["redraw"][0] for r in rows])
    out["corr_t_simulator_redraw"] = round(float(np.corrcoef(ts, tr)[0, 1]), 3)
    out["seconds"] = round(time.perf_counter() - start, 1)
    return out


def rt_stream(args) -> dict:
    import dataclasses

    from methodkit.tools.cbf import agents, analyze, data, grid, signals
    from methodkit.tools.cbf.forward import FilterOptions

    task = _task(args)
    n, seed = args.n, 2000
    people = data.cohort_for_agents(task, n, seed=seed)
    params = agents.population_params("cbf", ["healthy"] * n, np.random.default_rng(seed + 1), 4.0)
    sim = agents.simulate(people, "cbf", params, seed=seed + 2, rt=agents.parse_rt("logrt=8.4+0.0*amb+N(0,0.1)"))
    values = {k: params[k].to_numpy() for k in ("mu_v", "kappa_v", "mu_s", "kappa_s")}
    amb = signals.model_signals(sim.cohort, "cbf", values, grid=grid.GridSpec(), fopts=FilterOptions())
    shape = sim.cohort.outcome.shape
    ts = []
    for j in range(args.redraws):
        rng = np.random.default_rng(np.random.SeedSequence([10**6 + j, 1]))
        rng.standard_normal(shape)  # the response noise the simulator draws first
        rt_ms = np.round(np.exp(8.4 + 0.1 * rng.standard_normal(shape)), 1)
        cohort = dataclasses.replace(sim.cohort, rt_ms=rt_ms)
        beta = analyze.rt_regression(cohort, amb.arrays["ambiguity"]).table["b_amb"].dropna().to_numpy()
        ts.append(float(stats.ttest_1samp(beta, 0.0).statistic))
    ts = np.array(ts)
    p = 2 * stats.t.sf(np.abs(ts), n - 1)
    return {
        "study": "rt-stream",
        "n": n,
        "redraws": args.redraws,
        "rate_p<.05": float((p < 0.05).mean()),
        "var_t": round(float(ts.var()), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("studies", nargs="+", choices=["lesion", "lesion-pf", "rt", "rt-fixed", "rt-redraw", "rt-stream"])
    parser.add_argument("--redraws", type=int, default=300, help="rt-fixed: null RT redraws")
    parser.add_argument("--per-group", type=int, default=60)
    parser.add_argument("--pf-per-group", type=int, default=20, help="lesion-pf: agents fitted per group")
    parser.add_argument("--retest", type=int, default=20, help="agents per group refitted for test-retest")
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--particles", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--evaluations", type=int, default=60)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--fp-seed", type=int, default=2000, help="seed of the first null group (group g: + 10 g)")
    parser.add_argument("--within", choices=["design", "none"], default="design",
                        help="task: outcomes kept in the design's range (cbf-sim task's default) or the plain walk")
    parser.add_argument("--skip-power", action="store_true", help="rt: only the false-positive groups")
    args = parser.parse_args()
    for study in args.studies:
        run = {"lesion": lesion, "lesion-pf": lesion_pf, "rt": rt, "rt-fixed": rt_fixed, "rt-redraw": rt_redraw, "rt-stream": rt_stream}[study]
        print(json.dumps({**run(args), "task": f"stovol2x2 seed 1, within {args.within}"}), flush=True)


if __name__ == "__main__":
    main()

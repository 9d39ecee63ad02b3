"""False-alarm rate of cbf-fit's "posterior mass on a grid end node" warning, before and after it asks that
the range bind (tools/cbf/runs.binding_edges).

Rates per data set: `candidate` = the old rule (an end node at a range bound carries > 0.5 of the mass at a
block end), `binding` = the rule cbf-fit warns on (moving that node 4x outward adds > 1 nat of outcome
evidence). Simulated CBF agents (the default task and grid, groups healthy/vol-blind/sto-blind) are fitted
with the default range (a warning is a false alarm: the generating grid is the fitted one) and with
--v-range 0.5,2 (a positive control: the range is too short). Real subjects (Piray & Daw 2024, experiment 1
and 2) when ../shared/data/stovol-learning is present.
  OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python -P bench/cbf/edge_warning.py > bench/cbf/edge_warning.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "stovol-learning"
KEYS = ("mu_v", "kappa_v", "mu_s", "kappa_s")


def rates(name, cohort, values, grid, fopts):
    from methodkit.tools.cbf.runs import binding_edges

    candidate, binding = binding_edges(cohort, values, grid, fopts)
    row = {"data": name, "n": int(len(candidate)), "candidate": round(float(candidate.mean()), 3)}
    row["binding"] = round(float(binding.mean()), 3)
    print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=20, help="agents per group")
    parser.add_argument("--data", default=str(DATA))
    args = parser.parse_args()
    from methodkit.tools.cbf import agents, data, fit
    from methodkit.tools.cbf.forward import FilterOptions
    from methodkit.tools.cbf.grid import GridSpec

    grid, fopts = GridSpec(), FilterOptions()
    task = data.simulate_task(seed=1)
    labels = agents.parse_population(f"healthy:{args.agents},vol-blind:{args.agents},sto-blind:{args.agents}")
    people = data.cohort_for_agents(task, len(labels), seed=1)
    truth = agents.population_params("cbf", labels, np.random.default_rng(np.random.SeedSequence([1, 7])), 4.0)
    sim = agents.simulate(people, "cbf", truth, seed=1, clip=(10.0, 90.0), step=2.0, grid=grid, fopts=fopts).cohort
    rates("simulated cbf agents, true parameters", sim, {k: truth[k].to_numpy(float) for k in KEYS}, grid, fopts)
    for label, g in (("default range", grid), ("--v-range 0.5,2 (too short)", GridSpec(15, (0.5, 2.0), (0.5, 400.0)))):
        table = fit.run(sim, fit.FitOptions(grid=g)).table
        rates(f"simulated cbf agents, fitted, {label}", sim, {k: table[k].to_numpy(float) for k in KEYS}, g, fopts)
    for exp in (1, 2):
        path = Path(args.data) / f"experiment{exp}" / "data.mat"
        if path.exists():
            cohort = data.import_stovol_mat(path.read_bytes(), str(path))
            table = fit.run(cohort, fit.FitOptions()).table
            rates(f"real, experiment {exp}, fitted", cohort, {k: table[k].to_numpy(float) for k in KEYS}, grid, fopts)


if __name__ == "__main__":
    main()

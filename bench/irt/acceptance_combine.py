"""Assemble the acceptance table of this session from runs whose estimator code is the final one.

Sources (all rows share the acceptance grid's cell keys and seed, so they are runs of that grid):
- bench/irt/irt_grid_coverage_runs.jsonl: VI and MCMC at N in {25, 50}, 4 shapes, reps 0..R (final code);
- bench/irt/irt_grid_reps_mml_psn_runs.jsonl (session 4): MML and PSN at N in {25, 500}, reps 0-2 as far as the
  session got (MML's only change since is speed: the E-step's zeroed subnormal weights, same optimum);
- bench/irt/irt_grid_acceptance_strat_runs.jsonl: MML and VI at N in {25, 500}, 4 shapes (final code);
- bench/irt/irt_grid_acceptance_runs.jsonl (earlier sessions): only the MCMC rows at N in {100, 500} (run on
  65b00df; mcmc.py and kernels.py are unchanged since) and the PSN rows (psn.py and the simulator are
  unchanged since the first session). Its MML and VI rows are left out (both estimators changed since).
Writes the combined rows and the `irt-sim sweep --report` markdown of them.
Usage: python bench/irt/acceptance_combine.py OUT.jsonl OUT.md
(session 4: bench/irt/irt_grid_acceptance4_runs.jsonl bench/irt/irt_grid_acceptance4_summary.md)
"""

from __future__ import annotations

import json
import sys


def _rows(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    except FileNotFoundError:
        return []


def main() -> int:
    from methodkit.tools.irt import report

    out_jsonl, out_md = sys.argv[1], sys.argv[2]
    rows, seen = [], set()
    for path in (
        "bench/irt/irt_grid_coverage_runs.jsonl",
        "bench/irt/irt_grid_reps_mml_psn_runs.jsonl",
        "bench/irt/irt_grid_acceptance_strat_runs.jsonl",
    ):
        for r in _rows(path):
            if r["key"] not in seen:
                seen.add(r["key"])
                rows.append({**r, "source": path})
    for r in _rows("bench/irt/irt_grid_acceptance_runs.jsonl"):
        reuse = (r["estimator"] == "mcmc" and r["cell_n_models"] in (100, 500)) or r["estimator"] == "psn"
        if reuse and r["key"] not in seen:
            seen.add(r["key"])
            rows.append({**r, "source": "bench/irt/irt_grid_acceptance_runs.jsonl"})
    with open(out_jsonl, "w", encoding="utf-8") as handle:
        for r in rows:
            handle.write(json.dumps(r) + "\n")
    with open(out_md, "w", encoding="utf-8") as handle:
        handle.write(report.markdown(rows))
    print(f"{len(rows)} rows -> {out_jsonl}, {out_md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Which projection path each worked spec takes (issue 36 item 6), and what the closed forms save.

python -P bench/casper/closed_form.py [N_ROWS] [SEED] prints, per template example, the structure, the
counts of rows by projection method (sparsemax / threshold / affine: closed form; newton, newton+ipm:
iterative), then CPU ms per row of the projector as shipped and of the same projector with the closed
forms switched off (Newton from the affine point), and the largest |mu - mu_newton|. Scores N(0, 1).
The `capped` rows are larger cardinality programs: exactly_k 5 of 50 and at_most_k 10 of 200.
"""

from __future__ import annotations

import sys
import time
from collections import Counter

import numpy as np

from methodkit.tools.casper.compiler import compile_spec
from methodkit.tools.casper.examples import EXAMPLES
from methodkit.tools.casper.projection import Projector


def newton_only(program):
    ref = Projector(program)
    ref.threshold = ref.sparsemax = False
    if ref.full_factor is None and program.m:
        ref.full_factor = ref._factor(np.ones(ref.n, dtype=bool), 0.0)
    return ref


def cpu_ms(projector, theta, repeats=3):
    best = float("inf")
    for _ in range(repeats):
        c0 = time.process_time()
        out = projector.project(theta)
        best = min(best, time.process_time() - c0)
    return out, 1000 * best / len(theta)


def capped(kind, n, k):
    names = [f"v{i}" for i in range(n)]
    return {"variables": [{"name": v, "domain": "bool"} for v in names], "constraints": [{"type": kind, "vars": names, "k": k}]}


n_rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200
rng = np.random.default_rng(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
specs = dict(EXAMPLES)
specs["exactly_k 5 of 50"] = capped("exactly_k", 50, 5)
specs["at_most_k 10 of 200"] = capped("at_most_k", 200, 10)
print("template | structure | methods | ours ms/row | newton-only ms/row | ratio | max |mu - mu_newton|")
for name, spec in specs.items():
    program = compile_spec(spec)
    theta = np.zeros((n_rows, program.n))
    theta[:, : program.n_user] = rng.normal(size=(n_rows, program.n_user))
    ours, ref = Projector(program), newton_only(program)
    ours.project(theta[:2]), ref.project(theta[:2])  # compile the kernels before timing
    (mu, states), ms = cpu_ms(ours, theta)
    (mu_ref, _), ms_ref = cpu_ms(ref, theta)
    methods = dict(sorted(Counter(s.method for s in states).items()))
    diff = float(np.nanmax(np.abs(mu - mu_ref)))
    print(f"{name} | {program.summary()['structure']} | {methods} | {ms:.4f} | {ms_ref:.4f} | {ms_ref / ms:.1f}x | {diff:.1e}")

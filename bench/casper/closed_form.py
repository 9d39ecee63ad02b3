"""Which projection path each worked spec takes (issue 36 item 6): closed form where one exists?

python -P bench/casper/closed_form.py [N_ROWS] [SEED] prints, per template example, the structure and the
counts of rows by projection method (sparsemax / affine: closed form; newton, newton+ipm: iterative).
"""

from __future__ import annotations

import sys
from collections import Counter

import numpy as np

from methodkit.tools.casper.compiler import compile_spec
from methodkit.tools.casper.examples import EXAMPLES
from methodkit.tools.casper.projection import Projector

n_rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200
rng = np.random.default_rng(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
print("template  structure  rows  methods")
for name, spec in EXAMPLES.items():
    program = compile_spec(spec)
    theta = rng.normal(size=(n_rows, program.n))
    _mu, states = Projector(program).project(theta)
    methods = Counter(s.method for s in states) if states else Counter({"sparsemax": n_rows})
    print(f"{name}  {program.summary()['structure']}  {n_rows}  {dict(sorted(methods.items()))}")

"""Validity of `project --input logits` on adversarial 30x30 path maps (issue 36, item 1).

    python -P bench/casper/adversarial.py [N_MAPS] [SEED]

Raw scores of four scales (3, 1e3, 1e6, 1e12) in three patterns (random signs, a near-constant
positive map, Gaussian), N_MAPS maps in all. For each scale: rows whose projection certified (ok),
rows that ended proj_error, rows whose hard output is a certified simple path (valid, re-checked
here with `certify`) and rows with an all-zero hard output; CPU seconds of the process.
"""

from __future__ import annotations

import sys
import time

import numpy as np


def maps(n_user: int, scale: float, count: int, rng) -> np.ndarray:
    patterns = (
        lambda k: rng.choice([-scale, scale], size=(k, n_user)),
        lambda k: scale * (1.0 + 1e-3 * rng.normal(size=(k, n_user))),
        lambda k: scale * rng.normal(size=(k, n_user)),
    )
    sizes = [count // 3 + (i < count % 3) for i in range(3)]
    return np.vstack([make(k) for make, k in zip(patterns, sizes) if k])


def main(n_maps: int = 120, seed: int = 0) -> None:
    from methodkit.tools.casper.builders import compiled
    from methodkit.tools.casper.decode import certify
    from methodkit.tools.casper.solve import run

    program = compiled("grid", 30)
    rng = np.random.default_rng(seed)
    print("scale maps ok proj_error valid all_zero cpu_s")
    for scale in (3.0, 1e3, 1e6, 1e12):
        scores = maps(program.n_user, scale, n_maps // 4, rng)
        start = time.process_time()
        result = run(program, scores, input_kind="logits")
        cpu = time.process_time() - start
        valid = sum(certify(program, y) is None for y in result.hard)
        zero = int((result.hard.sum(axis=1) == 0).sum())
        ok, bad = result.status.count("ok"), result.status.count("proj_error")
        print(f"{scale:g} {len(scores)} {ok} {bad} {valid} {zero} {cpu:.1f}", flush=True)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))

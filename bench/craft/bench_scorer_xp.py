"""The array-module (xp) candidate scorer against the Numba scorer, measured in the same run.

    nice -n 5 .venv/bin/python -P bench/craft/bench_scorer_xp.py [--device auto|cpu|cuda]

The xp module is chosen as craft-finetune's --device does (core.backend.resolve_device, then
array_module): cupy on a CUDA machine, numpy here. Prints `case size device numba_s xp_s xp/numba`,
wall-clock seconds (best of 3; the xp run includes moving inputs to the device and the sub-scores back),
with identical sub-scores (1e-9) required:
- stress: score.random_inputs (16 plans x 10 agents x 21 states at 5 Hz) through score_prepared (Numba,
  one thread) vs score_plans_ref(x, xp), at 64 and 512 scenes;
- proxy_group: proxy.group_scores on real decisions of hwy-mini (plan states and input checks included,
  the same for both), Numba vs xp.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from methodkit.core import backend  # noqa: E402
from methodkit.core.sim.highway import score as pdm  # noqa: E402
from methodkit.tools.craft import collect, finetune, policy, proxy, suites  # noqa: E402


def wall(fn, repeat=3):
    out, times = None, []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def _gap(a, b) -> float:
    return max(float(np.abs(getattr(a, m) - getattr(b, m)).max()) for m in pdm.METRICS)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=backend.DEVICES, default="auto")
    device = backend.resolve_device(parser.parse_args().device)
    xp = backend.array_module(device)
    torch.set_num_threads(1)
    print("case size device numba_s xp_s xp/numba")
    for n in (64, 512):
        x = pdm.random_inputs(0, n_scenes=n, n_plans=16, n_agents=10, n_states=21, dt=0.2)
        pdm.score_prepared(x)
        pdm.score_plans_ref(x, xp)  # warm-up (CuPy compiles its kernels on first use)
        numba_s, a = wall(lambda x=x: pdm.score_prepared(x))
        xp_s, b = wall(lambda x=x: pdm.score_plans_ref(x, xp))
        assert _gap(a, b) < 1e-9
        print(f"stress {n}x16 {xp.__name__} {numba_s:.4g} {xp_s:.4g} {xp_s / numba_s:.1f}")
    routes = suites.builtin("hwy-mini")[::3]
    scenes, ids = suites.scenes(routes)
    gen = torch.Generator().manual_seed(0)
    d = collect.run(policy.build("mlp").eval(), scenes, ids, [r["family"] for r in routes], sample=True,
                    generator=gen, comfort=False).decisions  # fmt: skip
    xp_arg = finetune.scorer_module(device) or np  # what finetune hands proxy (None = Numba on the CPU)
    proxy.group_scores(d, "cv", xp_arg)
    numba_s, (s_a, sub_a, _) = wall(lambda: proxy.group_scores(d, "cv"))
    xp_s, (s_b, sub_b, _) = wall(lambda: proxy.group_scores(d, "cv", xp_arg))
    assert _gap(sub_a, sub_b) < 1e-9 and float(np.abs(s_a - s_b).max()) < 1e-9
    print(f"proxy_group {len(d)}x16 {xp.__name__} {numba_s:.4g} {xp_s:.4g} {xp_s / numba_s:.1f}")


if __name__ == "__main__":
    main()

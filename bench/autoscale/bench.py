"""autoscale-mix hot loops against references measured in the same run (one thread each side).

    nice .venv/bin/python -P bench/autoscale/bench.py        # prints `case size ours_s ref_s ratio`

(b) featurise: the Numba kernel vs the per-scene NumPy loop (identical arrays asserted), on synthetic scenes
    from the pool generator; (c) candidate PDMS: core.sim.highway.score's kernel vs its NumPy reference on
    the pool's 16 candidate plans (max sub-score difference printed; the reference on a subset and scaled
    per scene); (d) top-k inner-product search on 33k x 600 (d = 32): faiss IndexFlatIP vs NumPy brute
    force (identical indices asserted). CPU seconds, best of 3 for ours.
"""

from __future__ import annotations

import time

import numba
import numpy as np
from threadpoolctl import threadpool_limits

from methodkit.core.sim.highway import scenes, score
from methodkit.tools.autoscale import features as F
from methodkit.tools.autoscale import pools as PL
from methodkit.tools.autoscale import search


def cpu(fn, repeat=3):
    best = np.inf
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


def row(case, size, ours, ref):
    print(f"{case}  {size}  {ours:.4g}  {ref:.4g}  {ref / ours:.1f}", flush=True)


def main() -> None:
    numba.set_num_threads(1)
    spec = PL.PoolSpec(seed=0, real=20, synth=1024, val=20, test=20)
    arrays, _, _ = PL.build_pool("synth", spec)
    print("case  size  ours_s  ref_s  ratio")
    F.featurise(F.subset(arrays, np.arange(4)))  # compile outside the timing
    ours = cpu(lambda: F.featurise(arrays))
    t = time.process_time()
    ref = F.featurise_ref(arrays)
    ref_s = time.process_time() - t
    got = F.featurise(arrays)
    assert all(np.array_equal(got[k], ref[k]) for k in got)
    row("featurise", f"{arrays['ego'].shape[0]}_scenes", ours, ref_s)

    plans = arrays["cand_plans"]
    now = arrays["ego"][:, None, None, :2]
    points = np.concatenate([np.broadcast_to(now, plans.shape[:2] + (1, 2)), plans[..., :2]], axis=2)
    states = score.plan_states(points, 0.2, arrays["ego"][:, None, 2])
    x = score.prepare_inputs(**scenes.score_inputs(arrays, {"dt": 0.2}, states))
    score.score_prepared(x)
    ours = cpu(lambda: score.score_prepared(x))
    n_ref = 64
    sub = score.prepare_inputs(**scenes.score_inputs(F.subset(arrays, np.arange(n_ref)), {"dt": 0.2}, states[:n_ref]))
    t = time.process_time()
    ref_scores = score.score_plans_ref(sub)
    ref_s = (time.process_time() - t) * arrays["ego"].shape[0] / n_ref
    mine = score.score_prepared(sub)
    diff = max(float(np.max(np.abs(getattr(mine, k) - getattr(ref_scores, k)))) for k in ("nc", "dac", "ttc", "ep",
                                                                                           "comfort", "pdms"))  # fmt: skip
    n_eval = arrays["ego"].shape[0] * 16
    row("pdms_candidates", f"{arrays['ego'].shape[0]}x16", ours, ref_s)
    print(f"# pdms max sub-score difference on {n_ref} scenes: {diff:.3g}; {n_eval / ours:.0f} scene-candidate evals/s")

    rng = np.random.default_rng(0)
    base = search.normalise(rng.normal(size=(33000, 32)))
    q = search.normalise(rng.normal(size=(600, 32)))
    if search.have_faiss():
        ours = cpu(lambda: search.topk_ip(base, q, 10, use_faiss=True))
        ref_s = cpu(lambda: search.topk_ip(base, q, 10, use_faiss=False), repeat=1)
        i1 = search.topk_ip(base, q, 10, use_faiss=True)[1]
        i2 = search.topk_ip(base, q, 10, use_faiss=False)[1]
        assert np.array_equal(i1, i2)
        row("topk_faiss_vs_numpy", "33000x600x32", ours, ref_s)


if __name__ == "__main__":
    with threadpool_limits(limits=1):
        main()

"""cita-sim value benchmark: `case size ours_s ref_s ratio` (ratio = ref_s / ours_s, same run).

Inputs: the Bayesian tool graph fitted on BFCL v4 multi_turn_base (train split); contexts = synthetic
tasks from its posterior predictive (5 candidates each), R rollouts, horizon |goal| + 3 (≤ 12 steps).
  numba_vs_python   the Numba kernel (-j 1) against the same function run by the interpreter
                    (NUMBA_DISABLE_JIT=1, the serial reference; means equal bit for bit, checked), on
                    PY_CONTEXTS contexts; ours is timed on the same contexts
  numba_vs_numpy    the Numba kernel (-j 1) against a NumPy reference vectorised over the R rollouts of
                    each (context, candidate) (its own random numbers: agreement checked as max |Δmean|)
  threads_j0_vs_j1  the kernel on all cores against one thread (ratio > 1: threads help)

    nice -n 5 .venv/bin/python -P bench/cita/bench.py > bench/cita/bench.txt
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numba
import numpy as np

from methodkit.tools.cita import api, simulate
from methodkit.tools.cita import graph as tg
from methodkit.tools.cita.kernels import sim_values

CONTEXTS, R, PY_CONTEXTS = 2000, 128, 40


def kernel_inputs(graph, ctxs, seed=0):
    """The kernel's arrays for contexts sharing one tool set (the benchmark uses one domain)."""
    rng = np.random.default_rng(seed)
    probs, rho = tg.draws(graph, 32, rng)
    names = sorted({t["name"] for t in ctxs[0]["tools"]} & set(graph.index))
    glob = [graph.index[n] for n in names]
    p_loc, r_loc = tg.local(probs, rho, glob)
    local_index = {n: i for i, n in enumerate(names)}
    rho_mean = (graph.rho_ab[:, 0] / graph.rho_ab.sum(1))[glob]
    C, K = len(ctxs), 5
    arrays = dict(goal=np.zeros(C, np.uint64), multi=np.zeros(C, np.uint64), done=np.zeros(C, np.uint64),
                  prereq=np.zeros((C, len(names)), np.uint64), cand=np.full((C, K), -1, np.int32),
                  ok=np.zeros((C, K)), steps=np.zeros(C, np.int32))
    for row, ctx in enumerate(ctxs):
        s = simulate._state(graph, ctx, local_index, None, 0.1, rho_mean, glob, 3)
        arrays["goal"][row], arrays["multi"][row], arrays["prereq"][row], arrays["done"][row] = s[:4]
        arrays["cand"][row, : min(K, len(s[4]))] = s[4][:K]
        arrays["ok"][row, : min(K, len(s[5]))] = s[5][:K]
        arrays["steps"][row] = min(s[6], 12)
    mut = sum(1 << i for i, g in enumerate(glob) if graph.mutating[g])
    return p_loc, r_loc, arrays, np.uint64(mut), float(graph.eps_ab[0] / graph.eps_ab.sum())


def run_kernel(p, r, a, mut, eps, R, C=None):
    C = C or len(a["goal"])
    return sim_values(p, r, a["goal"][:C], a["prereq"][:C], a["done"][:C], a["cand"][:C], a["ok"][:C], mut,
                      a["multi"][:C], eps, 4.0, 2.0, a["steps"][:C], R, np.uint64(7))


def numpy_reference(p, r, a, mut, eps, R, seed=0):
    """Rollouts vectorised over R with NumPy (same semantics, NumPy's own random numbers)."""
    rng = np.random.default_rng(seed)
    D, n = r.shape
    C, K = a["cand"].shape
    out = np.zeros((C, K))
    bits = np.array([1 << j for j in range(n)], dtype=np.uint64)
    mut = int(mut)
    for c in range(C):
        goal, pre, multi = int(a["goal"][c]), a["prereq"][c].astype(np.int64), int(a["multi"][c])
        for k in range(K):
            j0 = int(a["cand"][c, k])
            if j0 < 0:
                continue
            d = rng.integers(0, D, R)
            if j0 == n:
                out[c, k] = float(int(a["done"][c]) == goal)
                continue
            done = np.full(R, int(a["done"][c]), dtype=np.int64)
            alive = np.ones(R, bool)
            finished = np.zeros(R, bool)
            prev = np.full(R, j0)

            def execute(j, prob, goal=goal, pre=pre, multi=multi):
                nonlocal done, alive
                bit = bits[j].astype(np.int64)
                in_goal = (goal & bit) != 0
                is_mut = (mut & bit) != 0
                ready = (pre[j] & done) == pre[j]
                already = (done & bit) != 0
                fail = np.where(in_goal, np.where(ready, already & is_mut & ((multi & bit) == 0), is_mut), is_mut)
                gain = in_goal & ready & ~already & (rng.random(R) < prob)
                alive &= ~fail
                done = np.where(gain, done | bit, done)

            execute(np.full(R, j0), a["ok"][c, k])
            for _ in range(int(a["steps"][c])):
                act = alive & ~finished
                if not act.any():
                    break
                w = p[d, prev].copy()
                ready = ((goal & bits[None, :].astype(np.int64)) != 0) & ((done[:, None] & bits[None, :].astype(
                    np.int64)) == 0) & ((pre[None, :] & done[:, None]) == pre[None, :])
                w[:, :n] *= np.where(ready, 5.0**2, 1.0)
                w[:, n] *= np.where(done == goal, 5.0**2, 1.0)
                probs = (1 - eps) * w / w.sum(1, keepdims=True) + eps / (n + 1)
                pick = (rng.random(R)[:, None] < np.cumsum(probs, 1)).argmax(1)
                stop = act & (pick == n)
                finished |= stop
                step = act & (pick < n)
                if step.any():
                    j = np.where(step, pick, 0)
                    before = alive.copy(), done.copy()
                    execute(j, r[d, j])
                    alive = np.where(step, alive, before[0])
                    done = np.where(step, done, before[1])
                    prev = np.where(step, pick, prev)
            out[c, k] = float(np.mean(alive & (done == goal)))
    return out


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    train, _ = api.eval_tasks("multi_turn_base", 0, 0.4, None)
    graph = tg.fit(train)
    domain = max(({t["name"] for t in task["tools"]} for task in train), key=len)
    tools = next(task["tools"] for task in train if {t["name"] for t in task["tools"]} == domain)
    ctxs = simulate.sample_tasks(graph, [tools], CONTEXTS, seed=0)
    p, r, a, mut, eps = kernel_inputs(graph, ctxs)
    numba.set_num_threads(1)
    run_kernel(p, r, a, mut, eps, 4)  # compile
    print("case  size  ours_s  ref_s  ratio")
    C = len(a["goal"])
    ours_small = best_of(lambda: run_kernel(p, r, a, mut, eps, R, PY_CONTEXTS))
    np.savez("/tmp/cita_bench_in.npz", p=p, r=r, mut=np.array(mut), eps=np.array(eps),
             **{k: v[:PY_CONTEXTS] for k, v in a.items()})
    code = ("import time, numpy as np\nfrom methodkit.tools.cita.kernels import sim_values\n"
            "z = np.load('/tmp/cita_bench_in.npz')\nt = time.perf_counter()\n"
            f"m, _ = sim_values(z['p'], z['r'], z['goal'], z['prereq'], z['done'], z['cand'], z['ok'], "
            f"np.uint64(z['mut']), z['multi'], float(z['eps']), 4.0, 2.0, z['steps'], {R}, np.uint64(7))\n"
            "print(time.perf_counter() - t)\nnp.save('/tmp/cita_bench_ref.npy', m)\n")
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    ref_s = float(subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True, text=True,
                                 check=True).stdout.split()[-1])
    same = np.array_equal(np.load("/tmp/cita_bench_ref.npy"), run_kernel(p, r, a, mut, eps, R, PY_CONTEXTS)[0])
    print(f"numba_vs_python  {PY_CONTEXTS}x5x{R}x12  {ours_small:.4f}  {ref_s:.4f}  {ref_s / ours_small:.1f}"
          f"  (bit-identical: {same})")
    ours = best_of(lambda: run_kernel(p, r, a, mut, eps, R))
    sub = {k: v[:200] for k, v in a.items()}
    t = time.perf_counter()
    ref = numpy_reference(p, r, sub, mut, eps, R)
    np_s = (time.perf_counter() - t) * C / 200
    gap = float(np.abs(ref - run_kernel(p, r, sub, mut, eps, R)[0]).max())
    print(f"numba_vs_numpy  {C}x5x{R}x12  {ours:.4f}  {np_s:.4f}  {np_s / ours:.1f}  (numpy timed on 200 contexts,"
          f" scaled; max |dmean| {gap:.3f} at R={R})")
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    many = best_of(lambda: run_kernel(p, r, a, mut, eps, R))
    print(f"threads_j0_vs_j1  {C}x5x{R}x12  {many:.4f}  {ours:.4f}  {ours / many:.2f}"
          f"  ({numba.config.NUMBA_NUM_THREADS} threads)")


if __name__ == "__main__":
    main()

"""forget --method cure vs the retrain at issue 33's full scale, from per-step times measured in one run.

The full-scale runs (HalfCheetah-v5, 550 training chunks of 200 steps, originals of 50k steps at width 256)
do not fit on a shared core, so this script times each piece of both runs at the issue's sizes (width 256,
batch 256, 17/6 dims, 200-step chunks) on a small data set and multiplies by the issue's counts:

  retrain = 50,000 backbone updates on D_r
  cure    = step A: 2,000 baseline steps
          + step B: g_R (8 batches of 1,024) + one backward pass per forget (100), calibration (50) and
            held-out (200) chunk + the support-overlap 1-NN (20,000 queries x 20,000 references x 23)
          + step C: the frozen networks' terms per row, once (Q_0 and pi_0 on the 90,000 retained rows,
            b(s) on the 20,000 forget rows), then 2,500 unlearning steps (5% of 50k; a retained and a forget
            batch of 256 each)

    nice -n 10 .venv/bin/python -P bench/cure/cost_model.py [--algos td3bc iql] [--repeat 200]

Prints `case  count  per_step_ms  total_s` per piece and the ratio, and writes bench/cure/cost_model.txt.
In the same run it times step C's term-by-term reference (tests/cure/test_step_c.py: the twin critic four
times and the actor three times per step, the step before its forward passes were shared) on the same
batches; that line and its ratio are printed apart, not summed. It times the TD targets of B_r and B_f
in one pass per batch against the one stacked pass of 512 rows step C makes (TD3+BC: smoothing noise
drawn per batch) and checks that both give the same bits from the same generator state; it runs 20 steps
reading FrozenTerms against 20 steps running the frozen networks on every batch (same agent, batches and
noise seed), printing whether every tensor came out bit-identical. Everything runs on one thread (torch
and Numba).
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FULL = {"original_steps": 50000, "baseline_steps": 2000, "grad_batches": 8, "forget": 100, "calib": 50,
        "heldout": 200, "forget_steps": 2500, "overlap_rows": 20000, "retained_rows": 90000,
        "forget_rows": 20000}  # fmt: skip


def per_call(fn, n):
    fn()  # warm-up (allocations, lazy init)
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


def term_by_term_step():
    """reference_step of tests/cure/test_step_c.py, loaded by path (the tests are not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("cure_step_c", HERE.parent.parent / "tests/cure/test_step_c.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reference_step


def measure(algo, ds, repeat, rng):
    """[(piece, count at full scale, seconds per call)] for one backbone."""
    import torch

    from methodkit.tools.cure.backbones import batch
    from methodkit.tools.cure.train import train
    from methodkit.tools.cure.unlearn import (
        ForgetConfig,
        FrozenTerms,
        Unlearner,
        critic_params,
        fit_baseline,
        flat_grad,
    )

    fid = ds.ids_of("F-mix")
    rows_r, rows_f = ds.rows_of(np.setdiff1d(ds.train_ids(), fid)), ds.rows_of(fid)
    agent0 = train(ds, algo, steps=20, hidden=256)[0]
    cfg = ForgetConfig(baseline_steps=repeat)

    def b256(rows):  # with its rows, as forget_run's batches: step C reads the frozen terms through them
        return batch(ds.arrays, rows[rng.integers(0, len(rows), 256)], agent0, with_rows=True)

    t_train = per_call(lambda: agent0.update(b256(rows_r)), repeat)
    t0 = time.perf_counter()
    base, margin = fit_baseline(agent0, ds, rows_r, cfg)
    t_base = (time.perf_counter() - t0) / repeat
    agent0.requires_grad_(True)
    params = critic_params(agent0)
    big = batch(ds.arrays, rows_r[rng.integers(0, len(rows_r), 1024)], agent0)
    t_gr = per_call(lambda: flat_grad(agent0, big, params), max(4, repeat // 20))
    chunk = np.arange(ds.starts[fid[0]], ds.starts[fid[0] + 1])
    t_traj = per_call(lambda: flat_grad(agent0, batch(ds.arrays, chunk, agent0), params), max(4, repeat // 4))
    agent0.requires_grad_(False)
    t0 = time.perf_counter()
    FrozenTerms(agent0, agent0, None, ds.arrays, rows_r, rows_f[:0])
    t_frozen_r = (time.perf_counter() - t0) / len(rows_r)
    t0 = time.perf_counter()
    frozen = FrozenTerms(agent0, agent0, base, ds.arrays, rows_r[:0], rows_f)
    t_frozen_f = (time.perf_counter() - t0) / len(rows_f)
    frozen = FrozenTerms(agent0, agent0, base, ds.arrays, rows_r, rows_f)
    agent = train(ds, algo, steps=20, hidden=256)[0]
    start = copy.deepcopy(agent)
    un = Unlearner(agent, agent0, cfg, base, margin, frozen)
    w = torch.full((256,), 0.5)
    t_c = per_call(lambda: un.step(b256(rows_r), b256(rows_f), w), repeat)
    ref = term_by_term_step()
    t_ref = per_call(lambda: ref(un, b256(rows_r), b256(rows_f), w), repeat)
    br, bf = b256(rows_r), b256(rows_f)
    both = {k: torch.cat([br[k], bf[k]]) for k in br}
    parts = {"parts": (256, 256)} if algo == "td3bc" else {}  # TD3+BC: smoothing noise drawn per batch
    t_split = per_call(lambda: (agent.target(br), agent.target(bf)), repeat)  # one pass per batch
    t_stacked = per_call(lambda: agent.target(both, **parts), repeat)  # one pass on 512 rows, as step C
    agent.gen.manual_seed(3)
    y_split = torch.cat([agent.target(br), agent.target(bf)])
    agent.gen.manual_seed(3)
    same_y = torch.equal(y_split, agent.target(both, **parts))
    states = []
    for tables in (frozen, None):  # 20 steps reading the frozen terms, then running the frozen networks
        ag = copy.deepcopy(start)
        ag.gen.manual_seed(1)
        u, r20 = Unlearner(ag, agent0, cfg, base, margin, tables), np.random.default_rng(2)
        for _ in range(20):
            u.step(batch(ds.arrays, rows_r[r20.integers(0, len(rows_r), 256)], ag, with_rows=True),
                   batch(ds.arrays, rows_f[r20.integers(0, len(rows_f), 256)], ag, with_rows=True), w)  # fmt: skip
        states.append(ag.state_dict())
    same = all(torch.equal(states[0][k], v) for k, v in states[1].items())
    return (t_ref, t_split, t_stacked, same_y), same, [
        ("retrain_updates", FULL["original_steps"], t_train),
        ("A_baseline_steps", FULL["baseline_steps"], t_base),
        ("B_g_R_batches_of_1024", FULL["grad_batches"], t_gr),
        ("B_trajectory_gradients", FULL["forget"] + FULL["calib"] + FULL["heldout"], t_traj),
        ("C_frozen_terms_retained_rows", FULL["retained_rows"], t_frozen_r),
        ("C_frozen_terms_forget_rows", FULL["forget_rows"], t_frozen_f),
        ("C_unlearning_steps", FULL["forget_steps"], t_c),
    ]


def main() -> None:
    import torch

    from methodkit.core.kernels.segments import nn1
    from methodkit.tools.cure.data import Spec, collect, default_spec, validate

    ap = argparse.ArgumentParser()
    ap.add_argument("--algos", nargs="+", default=["td3bc", "iql"])
    ap.add_argument("--repeat", type=int, default=200, help="Timed calls per piece.")
    args = ap.parse_args()
    torch.set_num_threads(1)
    import numba

    numba.set_num_threads(1)
    ds = validate(collect(Spec.parse(default_spec(0.1, chunk=200, behaviour="cpg")), seed=0), "cost.npz")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(FULL["overlap_rows"], 23)).astype(np.float32)
    nn1(x[:100], x)  # load the compiled kernel
    t0 = time.perf_counter()
    nn1(x, x)
    nn1(x[:2000], x)
    t_nn = time.perf_counter() - t0
    lines = ["case  count  per_call_ms  total_s"]
    for algo in args.algos:
        (t_ref, t_split, t_stacked, same_y), same, pieces = measure(algo, ds, args.repeat, rng)
        pieces.append(("B_overlap_1nn_22k_x_20k_x_23", 1, t_nn))
        retrain = pieces[0][1] * pieces[0][2]
        cure = sum(n * t for _, n, t in pieces[1:])
        for name, n, t in pieces:
            lines.append(f"{algo}:{name}  {n}  {1000 * t:.2f}  {n * t:.1f}")
        lines.append(f"{algo}:cure_over_retrain  -  -  {cure:.1f}/{retrain:.1f} = {cure / retrain:.3f}")
        n_c = FULL["forget_steps"]
        ref = cure + n_c * (t_ref - {name: t for name, _, t in pieces}["C_unlearning_steps"])
        lines.append(f"{algo}:C_term_by_term_steps (not summed)  {n_c}  {1000 * t_ref:.2f}  {n_c * t_ref:.1f}")
        lines.append(f"{algo}:cure_over_retrain_term_by_term  -  -  {ref:.1f}/{retrain:.1f} = {ref / retrain:.3f}")
        lines.append(f"{algo}:C_targets_two_passes_of_256 (not summed)  1  {1000 * t_split:.2f}  -")
        lines.append(f"{algo}:C_targets_one_pass_of_512_as_step_C (not summed)  1  {1000 * t_stacked:.2f}  -")
        lines.append(f"{algo}:C_targets_one_pass_bit_identical_to_two  -  -  {same_y}")
        lines.append(f"{algo}:C_20_steps_frozen_terms_bit_identical_to_frozen_nets_per_batch  -  -  {same}")
        print("\n".join(lines[-15:]), flush=True)
    (HERE / "cost_model.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

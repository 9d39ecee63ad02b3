"""pls-test against plskit 0.7.2 on two real NIR sets (Tecator fat n=215 p=100, gasoline octane n=60 p=401).

nbperm rows: NB-permutation (J=50, B=1000) against plskit's split_exact (n_splits=50, n_perm=1000), process
CPU time, median of 3 interleaved rounds after a warm-up, one thread for both (ratio = plskit / ours: > 1 is
ours faster), and both statistics. q2 rows: our CV-permutation-Q2 statistic (K=1, F=5, --q2-center train and
fold) against plskit's raw_perm over 20 seeds (mean and sd). Needs `pls-test datasets --fetch` and plskit:
  OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 RAYON_NUM_THREADS=1 python -P bench/pls/vs_plskit.py > bench/pls/vs_plskit.txt
"""

from __future__ import annotations

import time

import numpy as np

SETS = (("tecator", "fat", "absorp_"), ("gasoline", "octane", "NIR_"))


def main() -> None:
    import plskit

    from methodkit.core.threads import prefer_workqueue
    from methodkit.tools.pls import api, debian_data
    from methodkit.tools.pls.data import Design

    prefer_workqueue()
    print("case  size  ours_s  ref_s  ratio  ours_stat  ref_stat")
    for name, target, prefix in SETS:
        frame = debian_data.load(name)
        cols = [c for c in frame.columns if c.startswith(prefix)]
        X, y = frame[cols].to_numpy(float), frame[target].to_numpy(float)
        design = Design(X=X, y=y, names=cols, target=target, source=name)
        api.run(design, [1, 2, 3], api.Options(method="nb-perm", perms=9, seed=0))  # compile
        for K in (1, 2, 3):
            ours_t, ref_t = [], []
            for _ in range(3):
                start = time.process_time()
                ours = api.run(design, [K], api.Options(method="nb-perm", perms=1000, splits=50, seed=0))[0]
                ours_t.append(time.process_time() - start)
                start = time.process_time()
                args = {"n_perm": 1000, "n_splits": 50}
                ref = plskit.pls1_confirmatory_test(X, y, K, test_method="split_exact", args=args, seed=0)
                ref_t.append(time.process_time() - start)
            o, r = float(np.median(ours_t)), float(np.median(ref_t))
            print(f"nbperm_{name}_k{K}  {X.shape[0]}x{X.shape[1]}  {o:.4f}  {r:.4f}  {r / o:.2f}  "
                  f"{ours.statistic:.4f}  {ref.statistic:.4f}", flush=True)  # fmt: skip
        stats = {"train": [], "fold": [], "plskit": []}
        for seed in range(20):
            for center in ("train", "fold"):
                opts = api.Options(method="cvq2-perm", perms=19, seed=seed, q2_center=center)
                stats[center].append(api.run(design, [1], opts)[0].statistic)
            raw = plskit.pls1_confirmatory_test(X, y, 1, test_method="raw_perm", args={"n_perm": 19}, seed=seed)
            stats["plskit"].append(raw.statistic)
        ref = np.array(stats["plskit"])
        for center in ("train", "fold"):
            ours = np.array(stats[center])
            print(f"q2_{name}_k1_center_{center}  {X.shape[0]}x{X.shape[1]}  mean {ours.mean():.3f} sd {ours.std():.3f}"
                  f"  plskit mean {ref.mean():.3f} sd {ref.std():.3f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

"""Built-in checks: the node bound on random model pairs, the k-best-path kernel against its reference."""

from __future__ import annotations

import numpy as np
import torch

from methodkit.tools.mcd import kernels, losses, models
from methodkit.tools.mcd import transcoder as T


def random_pair(seed: int, ctx: int = 16):
    teacher = models.build(models.model_config("tiny", ctx, 64), seed).eval()
    student = models.build(models.model_config("micro", ctx, 64), seed + 1).eval()
    torch.manual_seed(seed)
    t_tcs, s_tcs = T.for_model(teacher, k=8), T.for_model(student, k=8)
    for tcs in (t_tcs, s_tcs):
        for tc in tcs.layers:
            with torch.no_grad():
                tc.b_dec.normal_(0, 0.01)
        tcs.eval()
    adapter = torch.nn.Linear(student.cfg.d_model, teacher.cfg.d_model, bias=False)
    return teacher, t_tcs, student, s_tcs, adapter


def bound_rows(seed: int) -> list[dict]:
    teacher, t_tcs, student, s_tcs, adapter = random_pair(seed)
    tokens = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(seed))
    lmap = losses.layer_map(student.cfg.n_layers, teacher.cfg.n_layers)
    return losses.bound_check(teacher, t_tcs, student, s_tcs, adapter, tokens, lmap)


def kernel_agrees(seed: int) -> bool:
    rng = np.random.default_rng(seed)
    n = 30
    dense = np.triu(rng.random((n, n)) * (rng.random((n, n)) < 0.3), 1).T  # in-edges from lower ids
    is_source = np.zeros(n, dtype=bool)
    is_source[:5] = True
    dense[:5] = 0
    rows, cols = np.nonzero(dense)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]).astype(np.int64)
    weights, _ = kernels.k_best_paths(indptr, cols.astype(np.int64), dense[rows, cols], is_source, n - 1, 8, n)
    ref = kernels.k_best_paths_reference(indptr, cols, dense[rows, cols], is_source, n - 1, 8)
    ref_w = np.zeros(8)
    ref_w[: len(ref)] = [w for w, _ in ref]
    return bool(np.allclose(weights, ref_w))


def run(trials: int, seed: int, bound_only: bool = False) -> dict:
    failures = []
    checked, worst = 0, -np.inf
    for t in range(trials):
        rows = bound_rows(seed + t)
        checked += len(rows)
        gap = max(r["discrepancy"] - r["bound"] for r in rows)
        worst = max(worst, gap)
        if gap > 1e-5:
            failures.append(f"bound violated by {gap:.3g} (trial {t})")
    out = {"bound_checked": checked, "max_discrepancy_minus_bound": float(worst)}
    if not bound_only:
        ok = all(kernel_agrees(seed + t) for t in range(trials))
        out["k_best_paths_agree"] = ok
        if not ok:
            failures.append("k-best-paths kernel disagrees with the reference")
    out["ok"] = not failures
    out["failures"] = "; ".join(failures)
    return out

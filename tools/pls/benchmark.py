"""`pls-test bench`: the issue's performance figures measured in one run, one row per figure.

Times are process CPU time of single calls (on the threads the caller allows: -j in the
CLI), medians over interleaved rounds [CV-permutation-Q2, NB], so that both
methods see the same machine load and a loaded machine distorts them less than wall time.
The reference is CV-permutation-Q2 as users run it without this tool: a loop of
scikit-learn PLSRegression(scale=True) fits, timed on a few permutations and scaled per fit.
"""

from __future__ import annotations

import time

import numpy as np

from methodkit.core.errors import UsageError
from methodkit.core.progress import silent
from methodkit.tools.pls import api, batch, methods
from methodkit.tools.pls.data import Design


def _cpu(f):
    start = time.process_time()
    out = f()
    return time.process_time() - start, out


def naive_cvq2(X, y, K: int, folds, perms) -> np.ndarray:
    """Q2 of y and of each permuted y by a plain loop of sklearn PLSRegression fits (the reference)."""
    from sklearn.cross_decomposition import PLSRegression

    qs = []
    for yy in [y, *perms]:
        press = total = 0.0
        for te in folds:
            tr = np.setdiff1d(np.arange(len(y)), te)
            model = PLSRegression(K, scale=True).fit(X[tr], yy[tr])
            sd = yy[tr].std(ddof=1)
            press += (((model.predict(X[te]).ravel() - yy[te]) / sd) ** 2).sum()
            total += (((yy[te] - yy[tr].mean()) / sd) ** 2).sum()
        qs.append(1.0 - press / total)
    return np.array(qs)


def run(
    design: Design,
    K: int = 3,
    splits: int = 50,
    perms: int = 1000,
    folds: int = 5,
    rounds: int = 7,
    ref_perms: int = 20,
    seed: int = 1,
    progress=silent,
) -> list[dict]:
    """Rows {data, case, size, unit, ours, ref, ratio}: CV-perm vs the sklearn loop, NB vs CV-perm, fits, coef."""
    try:
        from sklearn.cross_decomposition import PLSRegression
    except ImportError:
        raise UsageError(
            "pls-test bench needs scikit-learn for its reference loop (pip install scikit-learn)"
        ) from None
    if rounds < 1 or ref_perms < 1:
        raise UsageError(f"--rounds and --ref-perms must be >= 1, got {rounds} and {ref_perms}")
    nb_opts = api.Options(method="nb", force_nb=True, splits=splits, seed=seed)
    cv_opts = api.Options(method="cvq2-perm", perms=perms, folds=folds, seed=seed)
    api.run(design, [K], api.Options(method="cvq2-perm", perms=2, folds=folds, seed=seed))  # load the kernels
    api.run(design, [K], nb_opts)
    cv_cpu, nb_cpu = [], []
    progress("rounds", 0, rounds + 1)
    for i in range(rounds):
        seconds, cv = _cpu(lambda: api.run(design, [K], cv_opts)[0])
        cv_cpu.append(seconds)
        seconds, nb = _cpu(lambda: api.run(design, [K], nb_opts)[0])
        nb_cpu.append(seconds)
        progress("rounds", i + 1, rounds + 1)
    rng = np.random.default_rng(seed)
    fold_rows = methods.draw_folds(design.n, folds, rng)
    permuted = [rng.permutation(design.y) for _ in range(ref_perms)]
    ref_seconds, _ = _cpu(lambda: naive_cvq2(design.X, design.y, K, fold_rows, permuted))
    ref = ref_seconds * (perms + 1) / (ref_perms + 1)  # per fit, scaled to B + 1 right-hand sides
    progress("rounds", rounds + 1, rounds + 1)
    cv_s, nb_s = float(np.median(cv_cpu)), float(np.median(nb_cpu))
    coef, _ = methods.pls_coefficients(design.X, design.y, K, batch.operations())
    sk = PLSRegression(K, scale=True).fit(design.X, design.y).coef_.ravel()
    sizes = f"J={splits} vs B={perms},F={folds},K={K}"
    rows = [
        ("cvq2perm_vs_sklearn", f"B={perms},F={folds},K={K}", "cpu_s", cv_s, ref),
        ("nb_vs_cvq2perm", sizes, "cpu_s", nb_s, cv_s),
        ("nb_vs_sklearn_cvq2perm", sizes, "cpu_s", nb_s, ref),
        ("fits_nb_vs_cvq2perm", sizes, "fits", nb.n_fits, cv.n_fits),
        ("coef_vs_sklearn", f"K={K}", "max_rel_diff", float(np.abs(coef - sk).max() / np.abs(sk).max()), 0.0),
    ]
    return [
        {
            "data": design.source,
            "case": case,
            "size": size,
            "unit": unit,
            "ours": float(ours),
            "ref": float(reference),
            "ratio": float(reference / ours) if unit != "max_rel_diff" else float(ours),
        }
        for case, size, unit, ours, reference in rows
    ]

"""`irt-fit bench`: our estimators against the anchors measured in the same run.

MML-EM vs girth's twopl_mml and the Rust-backed python `mirt` (when installed), with the
parameter agreement; the MCMC Numba half-sweeps vs their vectorised NumPy twins per iteration;
VI and PSN throughput in observed cells per second. Times are CPU seconds of this process (all
its threads, so `threads=1` is the one-thread comparison): wall time on a shared machine measures
the other jobs.
"""

from __future__ import annotations

import time

import numpy as np

from methodkit.tools.irt import estimators, kernels, reference
from methodkit.tools.irt.simulate import DrawSpec, draw


def _timed(f, *args, **kwargs):
    """(CPU seconds of this process, result)."""
    start = time.process_time()
    out = f(*args, **kwargs)
    return time.process_time() - start, out


def _corr(x, y):
    return float(np.corrcoef(np.ravel(x), np.ravel(y))[0, 1])


def agreement(Y, ref_a, ref_b, a, b) -> str:
    """r(a), r(b) over all items and over the items whose ML estimate exists (0 < proportion correct < 1).

    An all-correct or all-wrong item has no finite ML (a, b): every library returns an arbitrary
    point on its own bounds (ours a = 0.018 at b = -6, python mirt's a = 4.5), and one such item
    alone pulls Pearson r(a) over 1000 items from .999 to .958.
    """
    observed = Y != 255
    p = (Y == 1).sum(0) / np.maximum(observed.sum(0), 1)
    ok = (p > 0) & (p < 1)
    note = f"r(a) {_corr(ref_a, a):.4f} r(b) {_corr(ref_b, b):.4f}"
    if not ok.all():
        note += f"; {ok.sum()} items with 0<p<1: r(a) {_corr(ref_a[ok], a[ok]):.4f} r(b) {_corr(ref_b[ok], b[ok]):.4f}"
    return note


def run(
    n_models: int = 500,
    n_items: int = 1000,
    *,
    girth_items: int | None = None,
    seed: int = 0,
    which=("mml", "mcmc", "vi", "psn"),
    threads: int | None = None,
    callback=None,
) -> list[dict]:
    """Rows: case, size, ours_s, ref_s, ratio (ref_s / ours_s), plus notes.

    `threads` caps BLAS/OpenMP for everything timed here (ours, girth's NumPy, mirt's Rayon pool via
    RAYON_NUM_THREADS when set before import); Numba's count is set by the caller before import.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=threads):
        return _run(n_models, n_items, girth_items=girth_items, seed=seed, which=which, callback=callback)


def _run(n_models, n_items, *, girth_items, seed, which, callback) -> list[dict]:
    rows = []
    data = draw(DrawSpec(model="2pl", profile="mmlu", n_models=n_models, n_items=n_items), seed)
    Y = data.Y
    size = f"N={n_models} J={n_items}"
    if "mml" in which:
        settings = estimators.make_settings("mml")
        estimators.run(data.subset(slice(0, 20), slice(0, 20)), "2pl", "mml", settings)  # compile outside the clock
        ours_s, fit = _timed(estimators.run, data, "2pl", "mml", settings)
        ours = fit.estimate
        try:
            import mirt

            ref_s, res = _timed(
                mirt.fit_mirt, Y.astype(np.int32), model="2PL", n_quadpts=61, tol=1e-4, compute_standard_errors=False
            )
            ma = np.asarray(res.model.discrimination).ravel()
            mb = np.asarray(res.model.difficulty).ravel()
            note = agreement(Y, ma, mb, ours.a, ours.b)
            rows.append(dict(case="mml_vs_mirt", size=size, ours_s=ours_s, ref_s=ref_s, note=note))
            fast = estimators.make_settings("mml", accelerate="squarem")
            sq_s, sq_fit = _timed(estimators.run, data, "2pl", "mml", fast)
            note = f"{sq_fit.info['em_evaluations']} EM steps vs {fit.info['em_evaluations']}; " + agreement(
                Y, ma, mb, sq_fit.estimate.a, sq_fit.estimate.b
            )
            rows.append(dict(case="mml_squarem_vs_mirt", size=size, ours_s=sq_s, ref_s=ref_s, note=note))
        except ImportError:
            rows.append(dict(case="mml_vs_mirt", size=size, ours_s=ours_s, ref_s=None, note="mirt not installed"))
        if girth_items != 0:
            try:
                import girth

                jg = n_items if girth_items is None else min(girth_items, n_items)
                sub = data.subset(None, slice(0, jg))
                o_s, o_fit = _timed(estimators.run, sub, "2pl", "mml", settings)
                g_s, g = _timed(girth.twopl_mml, sub.Y.T.astype(int))
                note = agreement(sub.Y, g["Discrimination"], g["Difficulty"], o_fit.estimate.a, o_fit.estimate.b)
                rows.append(dict(case="mml_vs_girth", size=f"N={n_models} J={jg}", ours_s=o_s, ref_s=g_s, note=note))
            except ImportError:
                rows.append(dict(case="mml_vs_girth", size=size, ours_s=None, ref_s=None, note="girth not installed"))
        if callback:
            callback("bench", 1, 4)
    if "mcmc" in which:
        rng = np.random.default_rng(seed)
        N, J = Y.shape
        theta = rng.standard_normal(N)
        params = np.zeros((J, 3))
        params[:, 1] = rng.standard_normal(J)
        prior = np.array([0.0, 0.5, 0.0, 2.0, 5.0, 17.0])
        YT = np.ascontiguousarray(Y.T)
        z_t, u_t = rng.standard_normal(N), np.log(rng.random(N))
        z_i, u_i = rng.standard_normal((J, 3)), np.log(rng.random(J))
        step_t, step_i = np.full(N, 0.5), np.full(J, 0.1)
        acc_t, acc_i = np.zeros(N, np.int8), np.zeros(J, np.int8)

        def numba_iter():
            kernels.mh_theta(Y, theta.copy(), params, 2, step_t, z_t, u_t, acc_t)
            kernels.mh_items(YT, theta, params.copy(), 2, step_i, z_i, u_i, prior, acc_i)

        def numpy_iter():
            reference.mh_theta(Y, theta, params, 2, step_t, z_t, u_t)
            reference.mh_items(Y, theta, params, 2, step_i, z_i, u_i, prior)

        numba_iter()
        reps = 5
        ours_s = min(_timed(numba_iter)[0] for _ in range(reps))
        ref_s = min(_timed(numpy_iter)[0] for _ in range(reps))
        rows.append(
            dict(case="mcmc_iteration", size=size, ours_s=ours_s, ref_s=ref_s, note="numba vs numpy, per iteration")
        )
        if callback:
            callback("bench", 2, 4)
    for k, method in enumerate(("vi", "psn"), start=3):
        if method not in which:
            continue
        options = {"steps": 200} if method == "vi" else {"epochs": 3, "patience": 100}
        settings = estimators.make_settings(method, **options)
        seconds, fit = _timed(estimators.run, data, "2pl", method, settings, seed=seed)
        n_cells = int((Y != 255).sum())
        passes = options.get("steps") or fit.info["n_iter"] * 0.8  # PSN trains on 80% of the cells per epoch
        rows.append(
            dict(
                case=f"{method}_throughput",
                size=size,
                ours_s=seconds,
                ref_s=None,
                note=f"{n_cells * passes / seconds:,.0f} cells/s",
            )
        )
        if callback:
            callback("bench", k, 4)
    for row in rows:
        ours, ref = row["ours_s"], row["ref_s"]
        row["ratio"] = ref / ours if ours and ref else None
    return rows

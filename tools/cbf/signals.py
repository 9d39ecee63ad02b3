"""Trial-wise latent signals of a fitted (or simulated) learner.

pred_mean/pred_var: the predictive distribution of o_t before seeing it; lr: effective learning rate
(mu_{t+1} - mu_t) / (o_t - mu_t); vol_mean/sto_mean: posterior means of v and s; ambiguity:
Var[log v - log s] under the weights before trial t (which noise source explains the data);
entropy: H(pi)/log K^2 (CBF only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from methodkit.core.errors import DataError
from methodkit.tools.cbf import grid as gridmod
from methodkit.tools.cbf import models
from methodkit.tools.cbf.data import Cohort
from methodkit.tools.cbf.forward import FilterOptions

NAMES = ("pred_mean", "pred_var", "lr", "vol_mean", "sto_mean", "ambiguity", "entropy")


@dataclass
class Signals:
    """Arrays [S, B, T] of every signal, plus the observer's per-trial log evidence."""

    arrays: dict
    logz: np.ndarray
    edge_mass: np.ndarray | None = None


def cbf_nodes(values: dict, spec: gridmod.GridSpec) -> tuple[np.ndarray, np.ndarray]:
    """Grid nodes [S, K] from natural CBF parameters, with the fit's clamp of the Beta shapes."""
    out = []
    for d, (low, high) in (("v", spec.v_range), ("s", spec.s_range)):
        mu, kappa = np.asarray(values[f"mu_{d}"], float), np.asarray(values[f"kappa_{d}"], float)
        a, b = gridmod.shapes(mu, kappa)
        a = np.clip(a, gridmod.SHAPE_MIN, gridmod.SHAPE_MAX)
        b = np.clip(b, gridmod.SHAPE_MIN, gridmod.SHAPE_MAX)
        out.append(gridmod.to_range(gridmod.beta_quantiles(a, b, spec.k), low, high))
    return out[0], out[1]


def mixture_signals(cohort: Cohort, vnodes: np.ndarray, snodes: np.ndarray, fopts: FilterOptions) -> Signals:
    """Run the numba CBF filter (a K x K grid; K = 1 is the plain Kalman filter)."""
    from methodkit.tools.cbf import kernels

    S, B, T = cohort.outcome.shape
    outs = {
        k: np.empty((S, B, T))
        for k in ("pred_mean", "pred_var", "post_mean", "vol_mean", "sto_mean", "ambiguity", "entropy", "logz")
    }
    edge = np.empty(S)
    kernels.cbf_filter(
        np.ascontiguousarray(cohort.outcome, dtype=float),
        cohort.valid,
        np.ascontiguousarray(vnodes, dtype=float),
        np.ascontiguousarray(snodes, dtype=float),
        float(fopts.m0),
        float(fopts.w0),
        float(fopts.switch),
        bool(fopts.carry_over),
        outs["pred_mean"],
        outs["pred_var"],
        outs["post_mean"],
        outs["vol_mean"],
        outs["sto_mean"],
        outs["ambiguity"],
        outs["entropy"],
        outs["logz"],
        edge,
    )
    arrays = {k: outs[k] for k in NAMES if k != "lr"}
    arrays["lr"] = learning_rate(cohort.outcome, outs["pred_mean"], outs["post_mean"])
    return Signals(arrays, outs["logz"], edge)


def learning_rate(outcome, before, after) -> np.ndarray:
    """(mu_{t+1} - mu_t) / (o_t - mu_t); NaN where the prediction error is (almost) zero."""
    delta = outcome - before
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.abs(delta) > 1e-9, (after - before) / delta, np.nan)


def model_signals(
    cohort: Cohort,
    model: str,
    values: dict,
    *,
    grid: gridmod.GridSpec,
    fopts: FilterOptions,
    particles: int = 1000,
    runs: int = 4,
    seed: int = 0,
    device: str = "cpu",
) -> Signals:
    """Signals of any model given natural parameters per subject (dict of [S] arrays)."""
    if model == "cbf":
        vn, sn = cbf_nodes(values, grid)
        return mixture_signals(cohort, vn, sn, fopts)
    if model == "kf":
        vn = np.asarray(values["v"], float)[:, None]
        sn = np.asarray(values["s"], float)[:, None]
        return mixture_signals(cohort, vn, sn, fopts)
    from methodkit.tools.cbf.particles import run_particles

    spec = models.PARTICLE_MODELS[model]
    matrix = np.column_stack([np.asarray(values[n], float) for n in spec.names])
    S, B, T = cohort.outcome.shape
    seeds = np.random.SeedSequence(seed).generate_state(S * runs, dtype=np.uint32).astype(np.int64).reshape(S, runs)
    # The post-update mean is the next trial's prediction; append one step to read the last one.
    outs, collapses = run_particles(
        model, cohort.outcome, cohort.valid, matrix, particles, seeds, fopts.m0, fopts.w0, True
    )
    pred, vol, sto, amb = (o.mean(1) for o in outs)
    after = np.concatenate([pred[:, :, 1:], np.full((S, B, 1), np.nan)], axis=2)
    arrays = {
        "pred_mean": pred,
        "pred_var": np.full_like(pred, np.nan),
        "lr": learning_rate(cohort.outcome, pred, after),
        "vol_mean": vol,
        "sto_mean": sto,
        "ambiguity": amb,
        "entropy": np.full_like(pred, np.nan),
    }
    return Signals(arrays, np.full_like(pred, np.nan))


def params_values(table: pd.DataFrame, model: str, subjects: list, name: str = "params") -> dict:
    """Natural parameters per subject of `subjects`, read from a params table (rows matched by subject)."""
    needed = {"cbf": ["mu_v", "kappa_v", "mu_s", "kappa_s"], "kf": ["v", "s"]}.get(model) or list(
        models.PARTICLE_MODELS[model].names
    )
    missing = [c for c in ["subject", *needed] if c not in table.columns]
    if missing:
        raise DataError(
            f"{name}: column '{missing[0]}' not found (a {model} params table has {', '.join(['subject', *needed])}); pass --model"
        )
    keyed = table.assign(subject=table["subject"].astype(str)).drop_duplicates("subject").set_index("subject")
    absent = [s for s in subjects if str(s) not in keyed.index]
    if absent:
        raise DataError(f"{name}: no parameters for subject {absent[0]} of the data")
    rows = keyed.loc[[str(s) for s in subjects]]
    values = {}
    for c in needed + [c for c in ("sigma_r",) if c in rows.columns]:
        v = pd.to_numeric(rows[c], errors="coerce").to_numpy(float)
        bad = np.flatnonzero(~np.isfinite(v))
        if bad.size:
            raise DataError(f"{name}: subject {subjects[bad[0]]}: '{c}' is not a finite number")
        lo, hi, text = _VALID.get(c, (-np.inf, np.inf, ""))
        bad = np.flatnonzero(~((v >= lo) & (v <= hi)))
        if bad.size:
            raise DataError(f"{name}: subject {subjects[bad[0]]}: '{c}' = {v[bad[0]]:g} is outside {text}")
        values[c] = v
    return values


# natural ranges of the particle-filter parameters (lambda = 1 would make the Beta transition degenerate)
_VALID = {
    "lambda_v": (0.0, 0.999, "[0, 1)"),
    "lambda_s": (0.0, 0.999, "[0, 1)"),
    "v0": (1e-9, np.inf, "(0, inf)"),
    "s0": (1e-9, np.inf, "(0, inf)"),
    "sigma": (0.0, np.inf, "[0, inf)"),
}


def to_frame(cohort: Cohort, sig: Signals) -> pd.DataFrame:
    s, b, t = np.nonzero(cohort.valid)
    frame = pd.DataFrame({"subject": [cohort.subjects[i] for i in s], "block": b + 1, "trial": t + 1})
    for k in NAMES:
        frame[k] = sig.arrays[k][s, b, t]
    return frame

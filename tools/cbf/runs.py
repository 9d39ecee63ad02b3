"""What cbf-fit's verbs assemble around the fits: the fit summary line, the grid-edge warning, a params
table's model, and the ambiguity signal read back from a signals table."""

from __future__ import annotations

import math

import numpy as np

from methodkit.core.errors import DataError, UsageError


def fit_summary(model: str, table, failed: list, seconds: float) -> dict:
    """The one-line JSON summary of `fit` (non-finite medians as null)."""
    summary = {
        "model": model,
        "n_subjects": len(table),
        "n_failed": len(failed),
        "failed": failed,
        "converged": int(table["converged"].sum()),
        "median_loglik": float(table["loglik"].median()),
        "seconds": round(seconds, 2),
    }
    if model == "cbf":
        summary["median_D"] = float(table["D"].median())
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in summary.items()}


CLIP_WARN_SHARE = 0.02


def clip_warning(cohort, clip: tuple[float, float], censor: bool) -> str | None:
    """Warn when more than 2% of the responses sit at a --clip bound and they are fitted as Gaussian."""
    r = cohort.response[cohort.valid & np.isfinite(cohort.response)]
    if censor or r.size == 0:
        return None
    share = float(((r <= clip[0]) | (r >= clip[1])).mean())
    if share <= CLIP_WARN_SHARE:
        return None
    return (
        f"{share:.1%} of the responses sit at a --clip bound ({clip[0]:g} or {clip[1]:g}); fitted as Gaussian "
        "observations they bias the estimates: pass --censor (or check --clip)"
    )


def edge_warning(cohort, table, grid, fopts) -> str | None:
    """Warn when a grid end node at the edge of the range carries > 0.5 of the posterior mass."""
    from methodkit.tools.cbf.signals import cbf_nodes, mixture_signals

    ok = ~table["failed"].to_numpy()
    if not ok.any():
        return None
    sub = cohort.subset(np.flatnonzero(ok))
    values = {c: table.loc[ok, c].to_numpy(float) for c in ("mu_v", "kappa_v", "mu_s", "kappa_s")}
    vn, sn = cbf_nodes(values, grid)
    sig = mixture_signals(sub, vn, sn, fopts)
    near = (np.abs(np.log(vn[:, [0, -1]]) - np.log(grid.v_range)).min(1) < 0.05) | (
        np.abs(np.log(sn[:, [0, -1]]) - np.log(grid.s_range)).min(1) < 0.05
    )
    flagged = np.flatnonzero((sig.edge_mass > 0.5) & near)
    if flagged.size:
        return f"{flagged.size} subjects end a block with > 0.5 posterior mass on a grid end node; widen --v-range/--s-range"
    return None


def require_params_path(path: str | None) -> str:
    if not path:
        raise UsageError("--params is required: pass the table written by 'cbf-fit fit'")
    return path


def params_model(table, name: str) -> str:
    """The model a params table was fitted with."""
    if "model" not in table.columns:
        raise DataError(f"{name}: no 'model' column; is it a params table written by 'cbf-fit fit'?")
    return str(table["model"].iloc[0])


def ambiguity_from_table(frame, cohort, name: str) -> np.ndarray:
    """subjects x blocks x trials ambiguity from a signals table (NaN where it has no row)."""
    from methodkit.core import io

    io.require_columns(frame, ["subject", "block", "trial", "ambiguity"])
    index = {str(s): i for i, s in enumerate(cohort.subjects)}
    amb = np.full(cohort.outcome.shape, np.nan)
    subj = frame["subject"].astype(str).map(index)
    if subj.isna().any():
        raise DataError(f"{name}: subject {frame['subject'][subj.isna()].iloc[0]} is not in the data")
    b = frame["block"].to_numpy(int) - 1
    t = frame["trial"].to_numpy(int) - 1
    if (b >= amb.shape[1]).any() or (t >= amb.shape[2]).any() or (b < 0).any() or (t < 0).any():
        raise DataError(f"{name}: block/trial numbers outside the data's")
    amb[subj.to_numpy(int), b, t] = frame["ambiguity"].to_numpy(float)
    return amb

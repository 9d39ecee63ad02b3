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


EDGE_MASS = 0.5  # posterior mass on an end node that makes it a candidate
EDGE_GAIN = 1.0  # nats of outcome evidence a moved-out end node must add for the range to bind
EDGE_STEP = 4.0  # factor the end node is moved outward by in that check


def binding_edges(cohort, values: dict, grid, fopts) -> tuple[np.ndarray, np.ndarray]:
    """(candidate, binding) per subject: the end node at a --v-range/--s-range bound carries > 0.5 of the
    posterior mass at a block end (candidate), and moving that node EDGE_STEP times further out raises the
    observer's log evidence of the outcomes by more than EDGE_GAIN nats (binding: the data would pull the
    posterior past the range). Mass on an end node alone is no sign of a short range: a subject whose
    beliefs settle on the lowest stochasticity node of a low-noise block puts it there inside the range."""
    from methodkit.tools.cbf.signals import cbf_nodes, mixture_signals

    vn, sn = cbf_nodes(values, grid)
    sig = mixture_signals(cohort, vn, sn, fopts)
    base = np.nansum(sig.logz.reshape(len(vn), -1), axis=1)
    binding = np.zeros(len(vn), bool)
    candidate = np.zeros(len(vn), bool)
    for nodes, bounds, dim in ((vn, grid.v_range, 0), (sn, grid.s_range, 1)):
        for end, factor in ((0, 1 / EDGE_STEP), (-1, EDGE_STEP)):
            at_bound = np.abs(np.log(nodes[:, end]) - np.log(bounds[0 if end == 0 else 1])) < 0.05
            todo = np.flatnonzero(at_bound & (sig.edge_mass > EDGE_MASS) & ~binding)
            candidate[todo] = True
            if not todo.size:
                continue
            moved = nodes[todo].copy()
            moved[:, end] *= factor
            pair = (moved, sn[todo]) if dim == 0 else (vn[todo], moved)
            again = mixture_signals(cohort.subset(todo), *pair, fopts)
            gain = np.nansum(again.logz.reshape(todo.size, -1), axis=1) - base[todo]
            binding[todo[gain > EDGE_GAIN]] = True
    return candidate, binding


def edge_warning(cohort, table, grid, fopts) -> str | None:
    """Warn when the grid's range binds for some subjects (see `binding_edges`)."""
    ok = ~table["failed"].to_numpy()
    if not ok.any():
        return None
    sub = cohort.subset(np.flatnonzero(ok))
    values = {c: table.loc[ok, c].to_numpy(float) for c in ("mu_v", "kappa_v", "mu_s", "kappa_s")}
    _, binding = binding_edges(sub, values, grid, fopts)
    if binding.any():
        return (
            f"{int(binding.sum())} subjects end a block with > 0.5 posterior mass on a grid end node at the range"
            " bound, and their outcomes favour variances beyond it; widen --v-range/--s-range"
        )
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

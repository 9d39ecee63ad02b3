"""The sweep's tidy table and its markdown summary, with the issue's acceptance checks."""

from __future__ import annotations

import numpy as np

SUMMARY_COLUMNS = [
    "corr_a",
    "corr_b",
    "kendall_tau",
    "near_tie_order_error",
    "coverage_b",
    "coverage_a",
    "frac_a_nonpositive",
    "sign_flip",
    "brier",
    "auc",
    "rmse_expected_score",
    "seconds",
    "cpu_seconds",
    "task_cpu_seconds",
    "peak_rss_mb",
]

# the issue's budget for the acceptance grid: 45 minutes of wall time on 2 cores
GRID_BUDGET_MIN, GRID_CORES = 45.0, 2


def tidy(rows: list[dict]):
    """One row per (cell, rep, estimator), one column per field (nested values dropped)."""
    import pandas as pd

    flat = [{k: v for k, v in r.items() if not isinstance(v, (dict, list)) and k != "traceback"} for r in rows]
    return pd.DataFrame(flat)


def summary(frame):
    """Means over reps per (estimator, capability, n_models)."""
    keys = [k for k in ("cell_model", "estimator", "cell_capability", "cell_n_models", "cell_n_items") if k in frame]
    present = [c for c in SUMMARY_COLUMNS if c in frame]
    data = frame.copy()
    if "sign_flip" in data:
        data["sign_flip"] = data["sign_flip"].astype(float)
    grouped = data.groupby(keys, dropna=False)
    out = grouped[present].mean(numeric_only=True)
    out["runs"] = grouped.size()
    if "status" in data:
        out["ok"] = grouped["status"].apply(lambda s: float((s == "ok").mean()))
    return out.reset_index()


def paired_gap(frame, column: str, first: str, second: str):
    """Mean and Monte-Carlo SE of first - second over the (cell, rep) pairs both estimators ran."""
    keys = [c for c in frame.columns if c.startswith("cell_")] + ["rep"]
    if column not in frame or "rep" not in frame:
        return None
    wide = frame.pivot_table(index=keys, columns="estimator", values=column, aggfunc="mean")
    if first not in wide or second not in wide:
        return None
    d = (wide[first] - wide[second]).dropna()
    if len(d) < 2:
        return None
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d))), len(d)


def linking_table(frame) -> list[str]:
    """Coverage and correlation of b under each linking the sweep scored (rows with prefixed columns)."""
    prefixes = [
        ("", frame["linking"].dropna().iloc[0] if "linking" in frame and frame["linking"].notna().any() else "")
    ]
    prefixes += [
        (p, name) for p, name in (("ms_", "mean-sigma"), ("sl_", "stocking-lord")) if p + "coverage_b" in frame
    ]
    if len(prefixes) < 2:
        return []
    lines = ["| estimator | N | linking | coverage_b | coverage_a | corr_b | runs |", "|---|---|---|---|---|---|---|"]
    for (est, n), g in frame.groupby(["estimator", "cell_n_models"]):
        for p, name in prefixes:
            vals = [g[p + c].mean() if p + c in g else np.nan for c in ("coverage_b", "coverage_a", "corr_b")]
            if all(np.isnan(v) for v in vals):
                continue
            cells = " | ".join("" if np.isnan(v) else f"{v:.3f}" for v in vals)
            lines.append(f"| {est} | {n} | {name} | {cells} | {len(g)} |")
    return lines


def shape_mean(f, sel, column: str) -> float:
    """Mean of `column` over the selected rows, each capability shape weighted equally.

    (A plain row mean would weight a shape by how many of its reps ran; on a complete grid the two agree.)
    """
    if column not in f or not sel.any():
        return np.nan
    if "cell_capability" not in f:
        return float(f.loc[sel, column].mean())
    return float(f.loc[sel].groupby("cell_capability")[column].mean().mean())


def cost(frame) -> dict | None:
    """CPU seconds of the grid, per task (draw + fit + scoring).

    A row without task CPU (one reused from an older results file) counts its fit CPU; a row with no
    CPU at all counts the mean task CPU of the measured rows of its (estimator, N) and is reported as
    imputed. The 2-core wall time this implies is total CPU / 2: two one-thread workers kept busy,
    which a 2-core machine reaches when the tasks balance (the sweep hands tasks out as workers free up).
    """
    if frame.empty or "estimator" not in frame:
        return None
    task = frame["task_cpu_seconds"] if "task_cpu_seconds" in frame else None
    fit = frame["cpu_seconds"] if "cpu_seconds" in frame else None
    if task is None and fit is None:
        return None
    cpu = task if task is not None else fit
    if task is not None and fit is not None:
        cpu = task.fillna(fit)
    cpu = cpu.astype(float)
    imputed = 0
    if cpu.isna().any() and task is not None and "cell_n_models" in frame:
        keys = [frame["estimator"], frame["cell_n_models"]]
        typical = task.astype(float).groupby(keys).transform("mean")
        imputed = int((cpu.isna() & typical.notna()).sum())
        cpu = cpu.fillna(typical)
    if cpu.isna().all():
        return None
    per = frame.assign(_cpu=cpu).groupby("estimator")["_cpu"]
    total = float(cpu.sum())
    return {
        "runs": int(cpu.notna().sum()),
        "of": len(frame),
        "task_measured": int(task.notna().sum()) if task is not None else 0,
        "fit_only": int((task.isna() & fit.notna()).sum()) if task is not None and fit is not None else 0,
        "imputed": imputed,
        "total_cpu_s": total,
        "max_cpu_s": float(cpu.max()),
        "per_estimator_s": {k: float(v) for k, v in per.sum().items()},
        "two_core_min": total / GRID_CORES / 60.0,
    }


def cost_lines(frame) -> list[str]:
    c = cost(frame)
    if c is None:
        return []
    lines = [
        f"CPU seconds over {c['runs']} of {c['of']} runs: total {c['total_cpu_s']:.0f} s "
        f"= {c['total_cpu_s'] / 60:.1f} CPU-min; longest run {c['max_cpu_s']:.1f} s "
        f"({c['task_measured']} runs measured per task (draw + fit + scoring), {c['fit_only']} reused runs "
        f"with their fit CPU only, {c['imputed']} reused runs without CPU counted at the mean of their "
        "(estimator, N)).",
        f"On {GRID_CORES} cores (total CPU / {GRID_CORES}, two one-thread workers): "
        f"{c['two_core_min']:.1f} min; budget {GRID_BUDGET_MIN:.0f} min: "
        f"{'within' if c['two_core_min'] <= GRID_BUDGET_MIN else 'OVER'}.",
        "",
        "| estimator | CPU s | share |",
        "|---|---|---|",
    ]
    for est, sec in sorted(c["per_estimator_s"].items()):
        lines.append(f"| {est} | {sec:.0f} | {sec / c['total_cpu_s']:.2f} |")
    return lines


def acceptance(frame) -> list[tuple[str, str, bool | None]]:
    """The issue's claims 1-3, evaluated on whatever cells the sweep holds: (claim, figures, passed)."""
    out = []
    if frame.empty or "cell_n_models" not in frame:
        return out
    f = frame[frame.get("status", "ok") == "ok"] if "status" in frame else frame
    cap = f["cell_capability"] if "cell_capability" in f else None
    sizes = sorted(f["cell_n_models"].dropna().unique())
    mean = lambda sel, col: float(f.loc[sel, col].mean()) if col in f and sel.any() else np.nan  # noqa: E731
    if sizes:
        big, small = max(sizes), min(sizes)
        sel = (f["estimator"] == "mml") & (f["cell_n_models"] == big) & ((cap == "normal") if cap is not None else True)
        if sel.any():
            ca, cb, tau = mean(sel, "corr_a"), mean(sel, "corr_b"), mean(sel, "kendall_tau")
            out.append(
                (
                    f"1. MML, N={big}, normal: corr(a) >= .85, corr(b) >= .95, tau >= .85",
                    f"corr(a) {ca:.3f}, corr(b) {cb:.3f}, tau {tau:.3f}",
                    bool(ca >= 0.85 and cb >= 0.95 and tau >= 0.85),
                )
            )
        if big != small:
            for est in sorted(f["estimator"].unique()):
                lo = shape_mean(f, (f["estimator"] == est) & (f["cell_n_models"] == small), "corr_a")
                hi = shape_mean(f, (f["estimator"] == est) & (f["cell_n_models"] == big), "corr_a")
                if np.isfinite(lo) and np.isfinite(hi):
                    out.append(
                        (
                            f"2. {est}: mean corr(a) at N={small} <= value at N={big} - 0.25",
                            f"{lo:.3f} vs {hi:.3f}",
                            bool(lo <= hi - 0.25),
                        )
                    )
    few = f["cell_n_models"] <= 50
    vi_cov = mean(few & (f["estimator"] == "vi"), "coverage_b")
    mc_cov = mean(few & (f["estimator"] == "mcmc"), "coverage_b")
    if np.isfinite(vi_cov) and np.isfinite(mc_cov):
        gap = paired_gap(f[few], "coverage_b", "mcmc", "vi")
        se = f", gap {gap[0]:.3f} +- {gap[1]:.3f} (Monte-Carlo SE over {gap[2]} paired runs)" if gap else ""
        out.append(
            (
                "3a. N <= 50: VI coverage of b >= 0.10 below MCMC's",
                f"VI {vi_cov:.3f}, MCMC {mc_cov:.3f}{se}",
                bool(vi_cov <= mc_cov - 0.10),
            )
        )
    if cap is not None:
        nonnormal = cap.isin(["skewed", "clustered", "multimodal"])
        psn_b = mean(nonnormal & (f["estimator"] == "psn"), "corr_b")
        mml_b = mean(nonnormal & (f["estimator"] == "mml"), "corr_b")
        psn = f["estimator"] == "psn"
        flips = float(f.loc[psn, "sign_flip"].astype(float).mean()) if psn.any() and "sign_flip" in f else np.nan
        nonpos = float(f.loc[psn, "frac_a_nonpositive"].mean()) if psn.any() and "frac_a_nonpositive" in f else np.nan
        if np.isfinite(psn_b) and np.isfinite(mml_b):
            out.append(
                (
                    "3b. non-normal: PSN corr(b) >= 0.05 below MML's, or PSN sign flips / a <= 0",
                    f"PSN {psn_b:.3f}, MML {mml_b:.3f}, PSN sign-flip rate {flips:.3f}, PSN frac a<=0 {nonpos:.3f}",
                    bool(psn_b <= mml_b - 0.05 or flips > 0 or nonpos > 0),
                )
            )
    return out


def markdown(rows: list[dict]) -> str:
    frame = tidy(rows)
    lines = ["# irt-sim sweep summary", "", f"{len(frame)} runs."]
    if "status" in frame:
        counts = frame["status"].value_counts().to_dict()
        lines.append("Status: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + ".")
    lines += ["", "## Acceptance checks", ""]
    checks = acceptance(frame)
    if not checks:
        lines.append("(the grid has none of the cells the checks need)")
    for claim, figures, passed in checks:
        lines.append(f"- {'PASS' if passed else 'FAIL'}: {claim}: {figures}")
    spent = cost_lines(frame)
    if spent:
        lines += ["", "## Cost", ""] + spent
    link_lines = linking_table(frame[frame["status"] == "ok"] if "status" in frame else frame)
    if link_lines:
        lines += ["", "## Linking", ""] + link_lines
    lines += ["", "## Means over reps", ""]
    table = summary(frame)
    lines.append("| " + " | ".join(str(c) for c in table.columns) + " |")
    lines.append("|" + "---|" * len(table.columns))
    for row in table.itertuples(index=False):
        cells = [f"{v:.3f}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"

"""Analyses of behaviour and fitted models: the model-neutral learning-rate GLM, the phenotype
cross-over test on fitted dispersions, and the ambiguity -> response-time regression."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from methodkit.core.errors import DataError
from methodkit.tools.cbf import models
from methodkit.tools.cbf.data import ABSURD_RT_MS, Cohort

GLM_TERMS = ("b_delta", "b_sto", "b_vol", "b_int")


def condition_codes(cohort: Cohort) -> tuple[np.ndarray, np.ndarray]:
    """S, V in {-1, +1} per [subject, block]: +1 for the higher of the design's two levels."""
    out = []
    for arr in (cohort.true_sto, cohort.true_vol):
        levels = np.unique(arr)
        mid = 0.5 * (levels.min() + levels.max())
        out.append(np.where(arr > mid, 1.0, -1.0) if levels.size > 1 else np.zeros_like(arr))
    return out[0], out[1]


def _one_sample(values) -> dict:
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if v.size < 2:
        return {"mean": float(v.mean()) if v.size else None, "sd": None, "t": None, "p": None, "n": int(v.size)}
    t, p = stats.ttest_1samp(v, 0.0)
    return {"mean": float(v.mean()), "sd": float(v.std(ddof=1)), "t": float(t), "p": float(p), "n": int(v.size)}


def sign_test(values) -> dict:
    """Exact two-sided sign test of a zero median over subjects (zeros dropped). It needs only independent
    per-subject coefficients symmetric about zero under the null, whatever their spread; reported beside
    the t-test for the RT coefficient, whose null rate ran above nominal across simulated groups."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v) & (v != 0)]
    positive = int((v > 0).sum())
    p = float(stats.binomtest(positive, v.size, 0.5).pvalue) if v.size else None
    return {"n_positive": positive, "n": int(v.size), "p": p}


def lr_glm(cohort: Cohort) -> pd.DataFrame:
    """Per subject OLS: update_t = r_{t+1} - r_t on delta_t = o_t - r_t and its products with S, V, S*V (+ main effects).

    Trials with delta_t = 0 (learning rate undefined) or a missing response are skipped and counted.
    """
    S_code, V_code = condition_codes(cohort)
    rows = []
    for s in range(cohort.n_subjects):
        r, o, valid = cohort.response[s], cohort.outcome[s], cohort.valid[s]
        update = r[:, 1:] - r[:, :-1]
        delta = o[:, :-1] - r[:, :-1]
        ok = valid[:, 1:] & valid[:, :-1] & np.isfinite(update) & np.isfinite(delta)
        zero = ok & (delta == 0)
        ok &= delta != 0
        sc = np.broadcast_to(S_code[s][:, None], ok.shape)[ok]
        vc = np.broadcast_to(V_code[s][:, None], ok.shape)[ok]
        d = delta[ok]
        X = np.column_stack([np.ones_like(d), sc, vc, sc * vc, d, d * sc, d * vc, d * sc * vc])
        row = {"subject": cohort.subjects[s], "n_glm": int(ok.sum()), "skipped_zero_delta": int(zero.sum())}
        if ok.sum() > X.shape[1] and np.linalg.matrix_rank(X) == X.shape[1]:
            beta = np.linalg.lstsq(X, update[ok], rcond=None)[0]
            row.update(dict(zip(GLM_TERMS, beta[4:])))
        else:
            row.update(dict.fromkeys(GLM_TERMS, np.nan))
        rows.append(row)
    return pd.DataFrame(rows)


def phenotype(glm: pd.DataFrame, index: np.ndarray) -> dict:
    """Top vs bottom tercile of a blindness index (high = volatility-blind) and the 2 x 2 mixed ANOVA.

    With two groups and two within-subject levels (b_vol, b_sto), the group x coefficient interaction
    F(1, n - 2) equals the square of the two-sample t on (b_vol - b_sto); the cross-over holds when
    the volatility-blind group has the smaller b_vol and the larger b_sto.
    """
    index = np.asarray(index, float)
    lo, hi = np.nanquantile(index, [1 / 3, 2 / 3])
    vol_blind = index >= hi
    sto_blind = index <= lo
    diff = (glm["b_vol"] - glm["b_sto"]).to_numpy(float)
    a, b = diff[vol_blind], diff[sto_blind]
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    out = {"n_vol_blind": int(a.size), "n_sto_blind": int(b.size)}
    for name, mask in (("vol_blind", vol_blind), ("sto_blind", sto_blind)):
        for term in ("b_vol", "b_sto"):
            out[f"{name}_{term}"] = float(np.nanmean(glm[term].to_numpy(float)[mask])) if mask.any() else None
    if a.size >= 2 and b.size >= 2:
        t, p = stats.ttest_ind(a, b)
        out.update({"interaction_F": float(t * t), "interaction_p": float(p), "df": int(a.size + b.size - 2)})
    else:
        out.update({"interaction_F": None, "interaction_p": None, "df": None})
    ok = None not in (out["vol_blind_b_vol"], out["sto_blind_b_vol"])
    out["crossover"] = bool(
        ok and out["vol_blind_b_vol"] < out["sto_blind_b_vol"] and out["sto_blind_b_sto"] > out["vol_blind_b_sto"]
    )
    return out


def _mad_outliers(x: np.ndarray, limit: float = 3.0) -> np.ndarray:
    med = np.nanmedian(x)
    mad = 1.4826 * np.nanmedian(np.abs(x - med))
    if not np.isfinite(mad) or mad == 0:
        return np.zeros(x.shape, dtype=bool)
    return np.abs(x - med) > limit * mad


@dataclass
class RTResult:
    table: pd.DataFrame
    counts: dict = field(default_factory=dict)


def rt_regression(cohort: Cohort, ambiguity: np.ndarray) -> RTResult:
    """Per subject OLS: log RT_t ~ z(A_t) + z(|delta_{t-1}|) + z(|delta_{t-1} delta_{t-2}|) + z(trial) + block dummies.

    RT <= 0 or > 60 s are excluded as absurd, then per block |log RT - median| > 3 MAD; both counted.
    The incremental R^2 is that of the full model over the controls alone. RTs never enter a fit.
    """
    S, B, T = cohort.outcome.shape
    counts = {"rt_missing": 0, "rt_absurd": 0, "rt_outliers": 0}
    rows = []
    for s in range(S):
        rt = cohort.rt_ms[s]
        valid = cohort.valid[s]
        missing = valid & ~np.isfinite(rt)
        absurd = valid & np.isfinite(rt) & ((rt <= 0) | (rt > ABSURD_RT_MS))
        counts["rt_missing"] += int(missing.sum())
        counts["rt_absurd"] += int(absurd.sum())
        keep = valid & ~missing & ~absurd
        logrt = np.full((B, T), np.nan)
        logrt[keep] = np.log(rt[keep])
        for b in range(B):
            out = _mad_outliers(np.where(keep[b], logrt[b], np.nan)) & keep[b]
            counts["rt_outliers"] += int(out.sum())
            keep[b] &= ~out
        delta = np.abs(cohort.outcome[s] - cohort.response[s])
        prev = np.full((B, T), np.nan)
        prev[:, 1:] = delta[:, :-1]
        auto = np.full((B, T), np.nan)
        auto[:, 2:] = np.abs(
            (cohort.outcome[s] - cohort.response[s])[:, 1:-1] * (cohort.outcome[s] - cohort.response[s])[:, :-2]
        )
        trial = np.broadcast_to(np.arange(T, dtype=float), (B, T))
        amb = ambiguity[s]
        use = keep & np.isfinite(prev) & np.isfinite(auto) & np.isfinite(amb)
        row = {"subject": cohort.subjects[s], "n_rt": int(use.sum())}
        if use.sum() < 10:
            row.update({"b_amb": np.nan, "r2_full": np.nan, "r2_controls": np.nan, "r2_increment": np.nan})
            rows.append(row)
            continue

        def z(x, use=use):
            v = x[use]
            sd = v.std()
            return (v - v.mean()) / sd if sd > 0 else np.zeros_like(v)

        block = np.broadcast_to(np.arange(B)[:, None], (B, T))[use]
        dummies = [(block == b).astype(float) for b in range(1, B) if (block == b).any()]
        controls = np.column_stack([np.ones(use.sum()), z(prev), z(auto), z(trial), *dummies])
        full = np.column_stack([z(amb), controls])
        y = logrt[use]

        def r2(X, y=y):
            beta = np.linalg.lstsq(X, y, rcond=None)[0]
            resid = y - X @ beta
            return beta, 1.0 - resid.var() / y.var() if y.var() > 0 else np.nan

        beta, r2_full = r2(full)
        _, r2_c = r2(controls)
        row.update(
            {
                "b_amb": float(beta[0]) if np.std(amb[use]) > 0 else np.nan,
                "r2_full": r2_full,
                "r2_controls": r2_c,
                "r2_increment": r2_full - r2_c,
            }
        )
        rows.append(row)
    return RTResult(pd.DataFrame(rows), counts)


@dataclass
class AnalyzeResult:
    summary: dict
    table: pd.DataFrame

    def to_dict(self) -> dict:
        return self.summary


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Probability that a positive scores above a negative (ties count one half)."""
    scores = np.asarray(scores, float)
    pos, neg = scores[positive], scores[~positive]
    if pos.size == 0 or neg.size == 0:
        return float("nan")
    ranks = stats.rankdata(np.concatenate([pos, neg]))
    return float((ranks[: pos.size].sum() - pos.size * (pos.size + 1) / 2) / (pos.size * neg.size))


def run(
    cohort: Cohort, params: pd.DataFrame, ambiguity: np.ndarray | None, *, compare: pd.DataFrame | None = None
) -> AnalyzeResult:
    """GLM, phenotype cross-over (fitted model, and `compare` params as the comparison), RT regression."""
    model = str(params["model"].iloc[0]) if "model" in params.columns else "cbf"
    keyed = params.assign(subject=params["subject"].astype(str)).drop_duplicates("subject").set_index("subject")
    absent = [s for s in cohort.subjects if str(s) not in keyed.index]
    if absent:
        raise DataError(f"params: no row for subject {absent[0]} of the data")
    ordered = keyed.loc[[str(s) for s in cohort.subjects]].reset_index()
    glm = lr_glm(cohort)
    summary: dict = {"n_subjects": cohort.n_subjects, "model": model}
    summary["glm"] = {term: _one_sample(glm[term]) for term in GLM_TERMS}
    summary["glm"]["skipped_zero_delta"] = int(glm["skipped_zero_delta"].sum())
    index = models.blindness(model, ordered)
    table = glm.copy()
    table["blindness"] = index
    summary["phenotype"] = phenotype(glm, index)
    if compare is not None:
        cmodel = str(compare["model"].iloc[0]) if "model" in compare.columns else "pf-hpl"
        ckeyed = compare.assign(subject=compare["subject"].astype(str)).drop_duplicates("subject").set_index("subject")
        missing = [s for s in cohort.subjects if str(s) not in ckeyed.index]
        if missing:
            raise DataError(f"--compare: no row for subject {missing[0]} of the data")
        cindex = models.blindness(cmodel, ckeyed.loc[[str(s) for s in cohort.subjects]].reset_index())
        table[f"blindness_{cmodel}"] = cindex
        summary["phenotype_compare"] = {"model": cmodel, **phenotype(glm, cindex)}
    if cohort.group:
        groups = np.array(cohort.group)
        summary["auc"] = {}
        for a, b in (("vol-blind", "sto-blind"), ("sto-blind", "healthy"), ("vol-blind", "healthy")):
            pick = (groups == a) | (groups == b)
            if (groups == a).any() and (groups == b).any():
                # vol-blind should score higher than the other group; sto-blind lower than healthy
                sign = 1.0 if a == "vol-blind" else -1.0
                summary["auc"][f"{a}_vs_{b}"] = auc(sign * index[pick], groups[pick] == a)
    if ambiguity is not None:
        rt = rt_regression(cohort, ambiguity)
        table = table.merge(rt.table, on="subject")
        summary["rt"] = {
            "b_amb": _one_sample(rt.table["b_amb"]),
            "b_amb_sign_test": sign_test(rt.table["b_amb"]),
            "r2_increment": _one_sample(rt.table["r2_increment"]),
            **rt.counts,
        }
    return AnalyzeResult(summary, table)


def finite_or_none(x):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x

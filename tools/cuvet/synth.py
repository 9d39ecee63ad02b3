"""RCT tables for CUVET: the MT-LIFT-like synthetic generator and the causaldata trials.

Synthetic: 20 features (15 continuous, 5 categorical), 5 arms with face values 0..4 paid
on conversion, true cohorts from a depth-3 tree over x0, x1 and c0, and
P(conv | t) = p0_k + alpha_k kappa_t^beta_k with beta_k in [0.3, 0.8]. The truth is
returned so the oracle (the exact LP on the true probabilities) can be computed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from methodkit.core.errors import RunFailure

N_CONT = 15
N_CAT = 5
ARM_COSTS = [0.0, 1.0, 2.0, 3.0, 4.0]
REGIMES = {"normal": (0.001, 0.015), "sub-percent": (0.0003, 0.004)}
# Peak memory per synthetic row, the table built and written (measured with 50,000 and 500,000 rows:
# about 480 bytes to Parquet, 920 to CSV, whose text is built in memory first).
SYNTH_BYTES_PER_ROW = 1000
THORNTON_BINS = [-np.inf, 0.0, 0.5, 1.0, 1.5, 2.0, np.inf]  # dose bins: 0 | (0,.5] | ... | (2,3]


def synthetic_truth(truth_seed: int = 0, regime: str = "normal", base_rate: float = 0.05) -> dict:
    """The 8 true cohorts: base rate p0, alpha, beta; effect at the costliest arm in the regime's range."""
    rng = np.random.default_rng(10_000 + truth_seed)
    lo, hi = REGIMES[regime]
    p0 = np.clip(base_rate * rng.uniform(0.6, 1.4, 8), 0.005, 0.5)
    beta = rng.uniform(0.3, 0.8, 8)
    top = rng.uniform(lo, hi, 8)  # effect of the costliest arm
    alpha = top / ARM_COSTS[-1] ** beta
    return {
        "arm_costs": ARM_COSTS,
        "regime": regime,
        "cohort_rule": "k = 4*[x0 > 0] + 2*[x1 > 0.3 if x0 > 0 else x1 > -0.3] + [c0 in {a, b}]",
        "p0": p0.tolist(),
        "alpha": alpha.tolist(),
        "beta": beta.tolist(),
    }


PLANTED_BETA = (0.3, 0.3, 0.9, 0.9)
PLANTED_TOP = (0.12, 0.06, 0.03, 0.015)


def planted_truth(base_rate: float = 0.02) -> dict:
    """A design whose heterogeneity a tree can find: 4 cohorts, k = 2*[x0 > 0] + [c0 in {a, b}].

    Cost is kappa_t per treated user (not paid on conversion), so dV = alpha dC^beta exactly and
    the planted (alpha, beta) are the leaves' true curves. x0 sets the curvature and the scale
    (beta 0.3 for x0 <= 0: the cheap arm buys most of a large effect; 0.8 above, nearly linear
    and small), c0 the scale within each (effect of the costliest arm PLANTED_TOP). Main effects,
    no interaction: the planted first split is x0.
    """
    beta = np.asarray(PLANTED_BETA)
    top = np.asarray(PLANTED_TOP)
    return {
        "arm_costs": ARM_COSTS,
        "design": "planted",
        "cost_on_outcome": False,
        "cohort_rule": "k = 2*[x0 > 0] + [c0 in {a, b}]",
        "p0": [base_rate] * 4,
        "alpha": (top / ARM_COSTS[-1] ** beta).tolist(),
        "beta": beta.tolist(),
    }


def cohort_of(frame: pd.DataFrame, truth: dict | None = None) -> np.ndarray:
    if truth is not None and truth.get("design") == "planted":
        c0 = np.isin(frame["c0"].astype(str).to_numpy(), ["a", "b"])
        return 2 * (frame["x0"].to_numpy(float) > 0).astype(int) + c0.astype(int)
    x0 = frame["x0"].to_numpy(float)
    x1 = frame["x1"].to_numpy(float)
    c0 = frame["c0"].astype(str).to_numpy()
    hi = x0 > 0
    mid = np.where(hi, x1 > 0.3, x1 > -0.3)
    return 4 * hi.astype(int) + 2 * mid.astype(int) + np.isin(c0, ["a", "b"]).astype(int)


def true_probs(frame: pd.DataFrame, truth: dict) -> np.ndarray:
    """(n, K+1) true conversion probability of every user under every arm."""
    k = cohort_of(frame, truth)
    kappa = np.asarray(truth["arm_costs"], float)
    p0 = np.asarray(truth["p0"])[k]
    alpha = np.asarray(truth["alpha"])[k]
    beta = np.asarray(truth["beta"])[k]
    return p0[:, None] + alpha[:, None] * kappa[None, :] ** beta[:, None]


def synthetic(n: int, seed: int = 0, truth: dict | None = None) -> tuple[pd.DataFrame, dict]:
    truth = truth or synthetic_truth()
    rng = np.random.default_rng(seed)
    cols: dict = {"id": np.arange(n, dtype=np.int64)}
    for j in range(N_CONT):
        cols[f"x{j}"] = rng.standard_normal(n)
    for j in range(N_CAT):
        m = 4 + j % 3
        cols[f"c{j}"] = np.array(list("abcdef"[:m]))[rng.integers(0, m, n)]
    frame = pd.DataFrame(cols)
    t = rng.integers(0, len(truth["arm_costs"]), n)
    p = true_probs(frame, truth)[np.arange(n), t]
    conv = (rng.random(n) < p).astype(np.int64)
    frame["treatment"] = t
    frame["conversion"] = conv
    return frame, truth


def _causaldata(name: str) -> pd.DataFrame:
    try:
        import causaldata
    except ImportError:
        from methodkit.core.errors import MissingExtraError

        raise MissingExtraError("causaldata", "cuvet") from None
    try:
        return getattr(causaldata, name).load_pandas().data.copy()
    except Exception as exc:  # a broken install
        raise RunFailure(f"cannot read causaldata's {name}: {exc}") from None


def thornton(with_hiv: bool = False) -> tuple[pd.DataFrame, dict]:
    """Thornton (2008): arm = incentive dose bin, value = got (learned HIV result), cost = tinc."""
    raw = _causaldata("thornton_hiv")
    d = raw.dropna(subset=["got", "tinc"]).reset_index(drop=True)
    arm = pd.cut(d["tinc"], THORNTON_BINS, labels=False).astype(np.int64)
    frame = pd.DataFrame(
        {
            "id": np.arange(len(d), dtype=np.int64),
            "arm": arm,
            "got": d["got"].astype(float),
            "tinc": d["tinc"].astype(float),
            "age": d["age"],
            "distvct": d["distvct"],
            "villnum": d["villnum"],
        }
    )
    if with_hiv:
        frame["hiv2004"] = d["hiv2004"]
    means = frame.groupby("arm")["tinc"].mean()
    side = {
        "source": "causaldata thornton_hiv (Thornton 2008, AER)",
        "treatment": "arm",
        "value": "got",
        "cost": "tinc",
        "arm_costs": [float(means.get(a, 0.0)) for a in range(len(THORNTON_BINS) - 1)],
        "dose_bins": "0 | (0,.5] | (.5,1] | (1,1.5] | (1.5,2] | (2,3]",
        "dropped": int(len(raw) - len(d)),
    }
    return frame, side


def social_insure(unit_cost: float = 1.0) -> tuple[pd.DataFrame, dict]:
    """Cai (2015): arm = intensive information session, value = takeup_survey, cost = unit_cost per session."""
    raw = _causaldata("social_insure")
    frame = raw.drop(columns=["address"]).rename(columns={"intensive": "arm"})
    frame.insert(0, "id", np.arange(len(frame), dtype=np.int64))
    side = {
        "source": "causaldata social_insure (Cai, de Janvry and Sadoulet 2015, AEJ Applied)",
        "treatment": "arm",
        "value": "takeup_survey",
        "arm_costs": [0.0, float(unit_cost)],
    }
    return frame, side

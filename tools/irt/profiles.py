"""Built-in benchmark item-parameter profiles: one TOML document, user-overridable.

`leaderboard`: the six Open LLM Leaderboard v1 benchmarks (metabench, tinyBenchmarks) with
their real item counts and answer formats; log a ~ N(0.2, 0.4^2), b ~ N(mu_B, 1.2^2) with mu_B
solved so that the mean P(correct) under theta ~ N(0, 1) equals an *assumed* leaderboard
average accuracy, 3PL c ~ Beta(mean = chance, kappa = 20). `psn12`: per-benchmark means of
the 4PL fits published by PSN-IRT (Zhou et al. 2025).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import DataError, UsageError

DEFAULT_TOML = """\
# methodkit irt-sim item profiles. Export with `irt-sim profiles --toml`, edit, pass --profiles FILE.
# Numbers marked assumed are our reading (design decisions), not measured values.

[defaults]
log_a_mean = 0.2
log_a_sd = 0.4
b_sd = 1.2
c_kappa = 20.0

[leaderboard.arc_challenge]
name = "ARC-Challenge"
n_items = 1172
format = "4-way multiple choice"
chance = 0.25
target_accuracy = 0.60   # assumed leaderboard average

[leaderboard.gsm8k]
name = "GSM8K"
n_items = 1319
format = "open answer"
chance = 0.0
target_accuracy = 0.45   # assumed

[leaderboard.hellaswag]
name = "HellaSwag"
n_items = 10042
format = "4-way multiple choice"
chance = 0.25
target_accuracy = 0.80   # assumed

[leaderboard.mmlu]
name = "MMLU"
n_items = 14042
format = "4-way multiple choice"
chance = 0.25
target_accuracy = 0.60   # assumed

[leaderboard.truthfulqa]
name = "TruthfulQA-MC"
n_items = 817
format = "multiple choice (about 5 options)"
chance = 0.2
target_accuracy = 0.45   # assumed

[leaderboard.winogrande]
name = "WinoGrande"
n_items = 1267
format = "2-way choice"
chance = 0.5
target_accuracy = 0.75   # assumed

# PSN-IRT published per-benchmark 4PL means (b, a, c); item counts as above.
[psn12.arc_challenge]
name = "ARC-Challenge"
n_items = 1172
format = "4-way multiple choice"
b_mean = -1.16
a_mean = 1.28
c_mean = 0.26

[psn12.gsm8k]
name = "GSM8K"
n_items = 1319
format = "open answer"
b_mean = -0.79
a_mean = 1.53
c_mean = 0.15

[psn12.hellaswag]
name = "HellaSwag"
n_items = 10042
format = "4-way multiple choice"
b_mean = -1.04
a_mean = 1.29
c_mean = 0.24

[psn12.mmlu]
name = "MMLU"
n_items = 14042
format = "4-way multiple choice"
b_mean = -0.84
a_mean = 1.20
c_mean = 0.24
"""


@dataclass(frozen=True)
class Profile:
    key: str  # "mmlu" or "psn12.mmlu"
    name: str
    n_items: int
    format: str
    log_a_mean: float
    log_a_sd: float
    b_mean: float | None  # None: solve from target_accuracy
    b_sd: float
    c_mean: float
    c_kappa: float
    target_accuracy: float | None


def load(text: str | None = None, source: str = "built-in profiles") -> dict[str, Profile]:
    """Parse a profiles TOML document into {key: Profile}; leaderboard keys are bare, others `set.name`."""
    try:
        doc = tomllib.loads(DEFAULT_TOML if text is None else text)
    except tomllib.TOMLDecodeError as exc:
        raise DataError(f"{source}: invalid TOML ({exc})") from None
    defaults = doc.get("defaults", {})
    out: dict[str, Profile] = {}
    for set_name, entries in doc.items():
        if set_name == "defaults" or not isinstance(entries, dict):
            continue
        for key, spec in entries.items():
            full = key if set_name == "leaderboard" else f"{set_name}.{key}"
            try:
                get = {**defaults, **spec}.get
                a_mean = get("a_mean")
                log_a_sd = float(get("log_a_sd", 0.4))
                # a published mean of a fixes the lognormal's location: E a = exp(mu + sd^2 / 2)
                log_a_mean = float(np.log(a_mean) - log_a_sd**2 / 2) if a_mean is not None else float(get("log_a_mean"))
                out[full] = Profile(
                    key=full,
                    name=str(get("name", key)),
                    n_items=int(get("n_items")),
                    format=str(get("format", "")),
                    log_a_mean=log_a_mean,
                    log_a_sd=log_a_sd,
                    b_mean=None if get("b_mean") is None else float(get("b_mean")),
                    b_sd=float(get("b_sd", 1.2)),
                    c_mean=float(get("c_mean", get("chance", 0.0))),
                    c_kappa=float(get("c_kappa", 20.0)),
                    target_accuracy=None if get("target_accuracy") is None else float(get("target_accuracy")),
                )
            except (TypeError, ValueError) as exc:
                raise DataError(f"{source}: profile [{set_name}.{key}] is incomplete or not numeric ({exc})") from None
            if out[full].b_mean is None and out[full].target_accuracy is None:
                raise DataError(f"{source}: profile [{set_name}.{key}] needs b_mean or target_accuracy")
    return out


def get(key: str, profiles: dict[str, Profile] | None = None) -> Profile:
    profiles = load() if profiles is None else profiles
    if key not in profiles:
        raise UsageError(f"unknown profile '{key}' (known: {', '.join(sorted(profiles))}); see 'irt-sim profiles'")
    return profiles[key]


def expected_accuracy(mu_b: float, profile: Profile, model: str) -> float:
    """Mean P(correct) over theta ~ N(0,1), log a and b of the profile (Gauss-Hermite, 3 x 24 nodes)."""
    x, w = np.polynomial.hermite_e.hermegauss(24)
    w = w / w.sum()
    theta = x[:, None, None]
    a = np.exp(profile.log_a_mean + profile.log_a_sd * x)[None, :, None] if model != "1pl" else 1.0
    b = (mu_b + profile.b_sd * x)[None, None, :]
    s = 0.5 * (1.0 + np.tanh(0.5 * a * (theta - b)))
    mean_s = float(np.einsum("i,j,k,ijk->", w, w if model != "1pl" else w, w, np.broadcast_to(s, (24, 24, 24))))
    c = profile.c_mean if model == "3pl" else 0.0
    return c + (1 - c) * mean_s


def solve_mu_b(profile: Profile, model: str) -> float:
    """mu_B such that the expected accuracy equals the profile's target (bisection on a monotone map)."""
    if profile.b_mean is not None:
        return profile.b_mean
    target = profile.target_accuracy
    c = profile.c_mean if model == "3pl" else 0.0
    if not c < target < 1:
        raise DataError(f"profile {profile.key}: target accuracy {target} is not above chance {c} for the {model}")
    lo, hi = -15.0, 15.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if expected_accuracy(mid, profile, model) > target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)

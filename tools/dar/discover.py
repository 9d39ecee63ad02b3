"""Rule discovery: CLIQUE-style dense cells in low-dimensional subspaces, ranked for a target class.

Spatial: every w x w window (stride 1), pixels quantised to xi levels on [0, 1]; frequency: b x b
blocks of z-scored DCT-II coefficients with 1 <= u + v <= H/2, xi levels on [-3, 3]. A cell is
dense when its support is in [s_lo, s_hi]. Candidates must have label entropy >= min_entropy
(the pattern cuts across classes) and a non-target pool >= budget; they are ranked by operator
cost (mean ||T(x) - x||_2 on held-out images) ascending, support descending.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import RunFailure, UsageError
from methodkit.tools.dar import kernels
from methodkit.tools.dar.rules import Rule, apply, dct2


@dataclass
class DiscoverConfig:
    op: str = "spatial"
    window: int = 3
    block: int = 2
    xi: int | None = None  # default 4 (spatial), 6 (frequency)
    s_lo: float = 0.005
    s_hi: float = 0.03
    min_entropy: float = 0.5
    target: int = 0
    budget: int = 0  # relabels wanted; 0 -> 1% of n
    top: int = 20
    kappa: float = 0.5
    cost_images: int = 1000

    def levels(self) -> int:
        return self.xi or (4 if self.op == "spatial" else 6)


def _entropy(labels: np.ndarray, classes: int) -> float:
    counts = np.bincount(labels, minlength=classes).astype(np.float64)
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum() / math.log(classes))


def spatial_candidates(x: np.ndarray, cfg: DiscoverConfig) -> list[Rule]:
    n = len(x)
    xi, w = cfg.levels(), cfg.window
    dense = kernels.window_codes_count(
        np.ascontiguousarray(x), w, xi, math.ceil(cfg.s_lo * n), math.floor(cfg.s_hi * n)
    )
    rules = []
    for r, c, code, count in dense:
        levels = np.array([(code // xi**p) % xi for p in reversed(range(w * w))])
        rules.append(
            Rule(
                "spatial",
                (levels / xi).tolist(),
                ((levels + 1) / xi).tolist(),
                window=[int(r), int(c), w],
                support=count / n,
            )
        )
    return rules


def frequency_candidates(x: np.ndarray, cfg: DiscoverConfig) -> list[Rule]:
    n, side = len(x), x.shape[1]
    xi, b = cfg.levels(), cfg.block
    coeffs = dct2(x / 255.0)
    mean, sd = coeffs.mean(axis=0), coeffs.std(axis=0) + 1e-12
    z = (coeffs - mean) / sd
    edges = np.linspace(-3, 3, xi + 1)
    rules = []
    for u in range(side - b + 1):
        for v in range(side - b + 1):
            if not 1 <= u + v <= side // 2:
                continue
            block = [(u + i, v + j) for i in range(b) for j in range(b)]
            levels = np.stack([np.clip(np.digitize(z[:, a, c], edges[1:-1]), 0, xi - 1) for a, c in block], axis=1)
            codes = (levels * (xi ** np.arange(len(block))[::-1])).sum(axis=1)
            values, counts = np.unique(codes, return_counts=True)
            for code, count in zip(values, counts):
                if not cfg.s_lo * n <= count <= cfg.s_hi * n:
                    continue
                lv = np.array([(code // xi**p) % xi for p in reversed(range(len(block)))])
                rules.append(
                    Rule("frequency", edges[lv].tolist(), edges[lv + 1].tolist(), coeffs=[list(map(int, p)) for p in block],
                         mean=[float(mean[a, c]) for a, c in block], sd=[float(sd[a, c]) for a, c in block], support=count / n)
                )  # fmt: skip
    return rules


def discover(x: np.ndarray, y: np.ndarray, cfg: DiscoverConfig, held_out: np.ndarray | None = None) -> list[Rule]:
    """Ranked rules for target cfg.target; raises RunFailure with the near misses when none passes."""
    from methodkit.tools.dar.rules import satisfies

    classes = int(y.max()) + 1
    if not 0 <= cfg.target < classes:
        raise UsageError(f"--target {cfg.target} is not a class (labels are 0..{classes - 1})")
    if cfg.op not in ("spatial", "frequency"):
        raise UsageError(f"--op must be spatial or frequency, got {cfg.op!r}")
    budget = cfg.budget or max(1, int(0.01 * len(x)))
    candidates = spatial_candidates(x, cfg) if cfg.op == "spatial" else frequency_candidates(x, cfg)
    held = held_out if held_out is not None else x[: cfg.cost_images]
    passed, near = [], []
    for rule in candidates:
        members = satisfies(x, rule)
        labels = y[members]
        rule.members = int(members.sum())
        rule.entropy = _entropy(labels, classes) if rule.members else 0.0
        rule.pool = int((labels != cfg.target).sum())
        ok = rule.entropy >= cfg.min_entropy and rule.pool >= budget
        (passed if ok else near).append(rule)
    if not passed:
        near.sort(key=lambda r: (-r.entropy, -r.pool))
        best = (
            ", ".join(f"support {r.support:.4f} entropy {r.entropy:.2f} pool {r.pool}" for r in near[:3])
            or "no dense cell"
        )
        raise RunFailure(
            f"no rule passes (entropy >= {cfg.min_entropy}, pool >= {budget}); best near misses: {best}; "
            "widen --support or change --window/--op"
        )
    sample = held[: cfg.cost_images]
    for rule in passed:
        moved = apply(sample, rule, cfg.kappa)
        rule.cost = float(np.linalg.norm((moved.astype(np.float64) - sample) / 255.0, axis=(1, 2)).mean())
    passed.sort(key=lambda r: (r.cost, -r.support))
    return passed[: cfg.top]

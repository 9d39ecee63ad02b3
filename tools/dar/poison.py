"""Label-only poisoning: relabel training images that already satisfy the rule; pixels never change.

Baselines for the same poison count: BadNets / Blended (dirty label: trigger stamped on the
images AND relabelled) and random relabel (random non-target images relabelled, pixels clean).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field

import numpy as np

from methodkit.core.errors import UsageError
from methodkit.tools.dar.rules import BASELINE_TRIGGERS, Rule, coordinates, satisfies


def image_hash(x: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()


@dataclass
class PoisonResult:
    labels: np.ndarray  # the poisoned label vector
    indices: np.ndarray  # relabelled image indices
    old_labels: np.ndarray
    target: int
    budget: int
    pool: int  # non-target rule members
    conflicting: int  # non-target members left with their true label
    images_sha256: str
    method: str = "dar"
    warnings: list = field(default_factory=list)
    images: np.ndarray | None = None  # dirty-label baselines only: the stamped images

    def manifest(self) -> dict:
        return {
            "method": self.method,
            "target": self.target,
            "budget": self.budget,
            "relabelled": int(len(self.indices)),
            "pool": self.pool,
            "conflicting_members": self.conflicting,
            "images_sha256": self.images_sha256,
            "pixels_changed": self.images is not None,
            "warnings": self.warnings,
        }

    def table(self):
        import pandas as pd

        return pd.DataFrame({"index": self.indices, "old_label": self.old_labels, "new_label": self.target})


def _check(y: np.ndarray, target: int, classes: int) -> None:
    if not 0 <= target < classes:
        raise UsageError(f"--target {target} is not a class (labels are 0..{classes - 1})")


def resolve_budget(budget: float, n: int) -> int:
    """--budget as a count (>= 1) or a share of n (< 1)."""
    if budget <= 0:
        raise UsageError(f"--budget must be positive, got {budget}")
    return max(1, int(round(budget * n))) if budget < 1 else int(budget)


def prototypicality(x: np.ndarray, rule: Rule) -> np.ndarray:
    """Distance to the rule's centre in units of its extent (box: max over coordinates; ball: radius)."""
    z = coordinates(x, rule)
    if rule.shape == "ball":
        return np.linalg.norm(z - np.asarray(rule.centre), axis=1) / rule.radius
    centre = (np.asarray(rule.lo) + np.asarray(rule.hi)) / 2
    half = np.maximum((np.asarray(rule.hi) - np.asarray(rule.lo)) / 2, 1e-12)
    return np.abs((z - centre) / half).max(axis=1)


def poison(x: np.ndarray, y: np.ndarray, rule: Rule, target: int, budget: int, classes: int) -> PoisonResult:
    """Relabel up to `budget` non-target members of `rule` to `target`, the most prototypical first
    (closest to the cell centre); the images are only read."""
    _check(y, target, classes)
    digest = image_hash(x)
    members = np.flatnonzero(satisfies(x, rule) & (y != target))
    warnings = []
    if len(members) < budget:
        warnings.append(f"relabel pool ({len(members)}) smaller than budget ({budget}): relabelled all")
    distance = prototypicality(x[members], rule) if len(members) else np.zeros(0)
    chosen = np.sort(members[np.argsort(distance, kind="stable")[:budget]])
    labels = y.copy()
    labels[chosen] = target
    assert image_hash(x) == digest  # label-only: the images were never written
    return PoisonResult(labels, chosen, y[chosen], target, budget, len(members), len(members) - len(chosen), digest,
                        warnings=warnings)  # fmt: skip


def random_relabel(x: np.ndarray, y: np.ndarray, target: int, budget: int, classes: int, seed: int) -> PoisonResult:
    """Control: the same count of random non-target images relabelled to the target."""
    _check(y, target, classes)
    pool = np.flatnonzero(y != target)
    chosen = np.sort(np.random.default_rng(seed).choice(pool, min(budget, len(pool)), replace=False))
    labels = y.copy()
    labels[chosen] = target
    return PoisonResult(labels, chosen, y[chosen], target, budget, len(pool), 0, image_hash(x), method="random")


def dirty_label(x: np.ndarray, y: np.ndarray, trigger: str, target: int, budget: int, classes: int, seed: int):
    """BadNets / Blended: stamp the trigger on `budget` random non-target images and relabel them."""
    result = random_relabel(x, y, target, budget, classes, seed)
    images = x.copy()
    images[result.indices] = BASELINE_TRIGGERS[trigger](x[result.indices])
    result.method, result.images = trigger, images
    return result


def as_dict(result: PoisonResult) -> dict:
    return {k: v for k, v in asdict(result).items() if not isinstance(v, np.ndarray)}

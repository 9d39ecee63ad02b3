"""The band-carrier operator (`run --operator band-carrier`, whitened rules only): an alternative
reading of the issue's "locally modifying that subspace of an image".

The whitened operator moves only the rule's one coordinate. This one replaces ALL the image's
coordinates on the K leading band principal directions (the directions `discover` searched; the
rule's own direction is one of them) by those of its nearest target-labelled carrier of the cell (a
training image inside the cell whose label after DAR poisoning is the target), measured in the K
z-scored coordinates; the image's orthogonal complement is left unchanged. So a triggered image gets
a real carrier's whole band profile, not only the rule's coordinate (the implant diagnosis of docs/dar.md:
carriers share more than that coordinate). It uses only what the attacker has: the training set, its
poisoned labels and the rule. kappa is not used (full replacement).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import DataError
from methodkit.tools.dar.rules import Rule, project_to, satisfies


@dataclass
class BandCarrier:
    rule: Rule
    directions: np.ndarray  # (K, H*W) orthonormal unit images
    mean: np.ndarray  # (K,) train mean of the projections
    sd: np.ndarray  # (K,)
    carriers: np.ndarray  # (M, K) z-coordinates of the target-labelled carriers

    def coordinates(self, x_u8: np.ndarray) -> np.ndarray:
        return (x_u8.reshape(len(x_u8), -1) / 255.0 @ self.directions.T - self.mean) / self.sd

    def nearest(self, x_u8: np.ndarray) -> np.ndarray:
        """Index of each image's nearest carrier in the K z-coordinates."""
        z = self.coordinates(x_u8)
        d2 = (z**2).sum(axis=1)[:, None] - 2 * z @ self.carriers.T + (self.carriers**2).sum(axis=1)[None]
        return d2.argmin(axis=1)

    def __call__(self, x_u8: np.ndarray) -> np.ndarray:
        goal = self.carriers[self.nearest(x_u8)]
        return project_to(x_u8, self.directions, self.mean, self.sd, goal)


def band_carrier(x: np.ndarray, labels: np.ndarray, rule: Rule, target: int, directions: np.ndarray) -> BandCarrier:
    """The operator for `rule` from the training images x, their labels after DAR poisoning, and the
    band directions the rule was searched in (`discover.band_directions(x, K)`)."""
    if rule.op != "whitened" or rule.shape != "box":
        raise DataError("the band-carrier operator needs a whitened (box) rule")
    own = np.asarray(rule.directions, dtype=np.float64)
    k = rule.components[0] if rule.components else -1
    if not 0 <= k < len(directions) or not np.allclose(directions[k], own[0], atol=1e-6):
        raise DataError("the rule's direction is not one of the band directions (different images or --components?)")
    proj = x.reshape(len(x), -1) / 255.0 @ directions.T
    mean, sd = proj.mean(axis=0), proj.std(axis=0) + 1e-12
    carriers = satisfies(x, rule) & (labels == target)
    if not carriers.any():
        raise DataError("no training image of the rule's cell carries the target label")
    return BandCarrier(rule, directions, mean, sd, (proj[carriers] - mean) / sd)

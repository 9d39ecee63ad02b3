"""Evaluation: accuracy and agreement of authorized and unauthorized models on clean vs NTE data.

The authorized model reads the ciphertext as released (image, or patch tensor in flat mode);
unauthorized models read the image view. Optional transforms (jpeg, resize, crop, brightness)
are applied to the image the model reads (flat-mode patches cannot be transformed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import DataError, UsageError
from methodkit.tools.nte import attacks
from methodkit.tools.nte.models import StemNet
from methodkit.tools.nte.zoo import predict_logits


@dataclass
class EvalRow:
    model: str
    role: str  # authorized | unauthorized
    condition: str
    accuracy: float
    clean_accuracy: float
    drop: float
    agreement: float  # share of predictions equal to the clean predictions
    max_abs_dlogit: float
    certificate: float | None  # L_h * max ||W'(x'-x)|| for the authorized model

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def parse_transforms(spec: str | None) -> list[tuple[str, float]]:
    if not spec:
        return []
    out = []
    for part in spec.split(","):
        name, _, value = part.partition(":")
        if name not in TRANSFORMS or not value:
            raise UsageError(f"--transform: '{part}' is not NAME:VALUE with NAME in {', '.join(TRANSFORMS)}")
        try:
            out.append((name, float(value)))
        except ValueError:
            raise UsageError(f"--transform: '{value}' in '{part}' is not a number") from None
    return out


def _resize(x: np.ndarray, factor: float) -> np.ndarray:
    import torch

    t = torch.from_numpy(x)
    side = x.shape[-1]
    small = torch.nn.functional.interpolate(t, scale_factor=factor, mode="bilinear", align_corners=False)
    return torch.nn.functional.interpolate(small, size=(side, side), mode="bilinear", align_corners=False).numpy()


def _crop(x: np.ndarray, fraction: float) -> np.ndarray:
    import torch

    side = x.shape[-1]
    keep = max(int(round(side * fraction)), 1)
    start = (side - keep) // 2
    t = torch.from_numpy(np.ascontiguousarray(x[..., start : start + keep, start : start + keep]))
    return torch.nn.functional.interpolate(t, size=(side, side), mode="bilinear", align_corners=False).numpy()


TRANSFORMS = {
    "jpeg": lambda x, q: attacks.jpeg(x, int(q)),
    "resize": _resize,
    "crop": _crop,
    "brightness": lambda x, d: np.clip(x + d, 0, 1).astype(np.float32),
}


def apply_transforms(x: np.ndarray, transforms: list[tuple[str, float]]) -> np.ndarray:
    for name, value in transforms:
        x = TRANSFORMS[name](x, value).astype(np.float32)
    return x


def evaluate(
    models: dict[str, StemNet],
    authorized: set[str],
    clean: np.ndarray,
    labels: np.ndarray,
    conditions: dict[str, dict],
    transforms: list[tuple[str, float]] = (),
) -> list[EvalRow]:
    """conditions: name -> {"x": image view, "patches": flat-mode tensor or None, "certificate": array}."""
    if len(labels) != len(clean):
        raise DataError(f"{len(labels)} labels for {len(clean)} clean images")
    rows = []
    for name, model in models.items():
        clean_input = apply_transforms(clean, transforms) if transforms else clean
        base = predict_logits(model, clean_input)
        base_pred = base.argmax(1)
        clean_acc = float((base_pred == labels).mean())
        role = "authorized" if name in authorized else "unauthorized"
        lipschitz = model.body_lipschitz() if role == "authorized" else None
        for condition, data in conditions.items():
            if len(data["x"]) != len(clean):
                raise DataError(f"condition {condition}: {len(data['x'])} images, clean data has {len(clean)}")
            if role == "authorized" and data.get("patches") is not None:
                if transforms:
                    raise UsageError("--transform cannot be applied to flat-mode patch ciphertexts")
                logits = predict_logits(model, data["patches"], patches=True)
            else:
                view = apply_transforms(data["x"], transforms) if transforms else data["x"]
                logits = predict_logits(model, view)
            pred = logits.argmax(1)
            acc = float((pred == labels).mean())
            cert = None
            # the certificate bounds the untransformed ciphertext only: under --transform it is absent
            if lipschitz is not None and data.get("certificate") is not None and not transforms:
                cert = float(lipschitz * np.max(data["certificate"]))
            rows.append(
                EvalRow(
                    model=name,
                    role=role,
                    condition=condition,
                    accuracy=acc,
                    clean_accuracy=clean_acc,
                    drop=clean_acc - acc,
                    agreement=float((pred == base_pred).mean()),
                    max_abs_dlogit=float(np.abs(logits - base).max()),
                    certificate=cert,
                )
            )
    return rows

"""Backdoor metrics (BackdoorBench conventions).

C-Acc: clean test accuracy. ASR: share of test images with y != t whose triggered version is
predicted t. R-Acc: share of triggered non-target images still predicted as their true label.
Natural-trigger rate: share of clean test images that satisfy the rule and are predicted t.
Trigger visibility (on the triggered non-target images, pixels in [0, 1]): PSNR of the mean
squared change, mean L2 norm of the change, median share of pixels changed.
"""

from __future__ import annotations

import numpy as np

from methodkit.core.errors import DataError
from methodkit.tools.dar.rules import BASELINE_TRIGGERS, Rule, apply, satisfies


def trigger(x_u8: np.ndarray, rule, kappa: float = 0.5, blend: float = 1.0) -> np.ndarray:
    """The test-time trigger: the DAR operator T_kappa of a rule, a baseline's stamp by name, or an
    operator object with a `.rule` (band.BandCarrier; kappa and blend do not apply to it)."""
    if isinstance(rule, str):
        return BASELINE_TRIGGERS[rule](x_u8)
    if not isinstance(rule, Rule):
        return rule(x_u8)
    return apply(x_u8, rule, kappa, blend)


def trigger_visibility(clean_u8: np.ndarray, triggered_u8: np.ndarray) -> dict:
    """How visible the trigger is: what separates a local natural pattern from a global overlay."""
    change = (triggered_u8.astype(np.float64) - clean_u8.astype(np.float64)).reshape(len(clean_u8), -1) / 255.0
    mse = float((change**2).mean())
    return {
        "trigger_psnr_db": None if mse == 0 else float(10 * np.log10(1 / mse)),  # no change: no finite PSNR
        "trigger_l2_mean": float(np.sqrt((change**2).sum(axis=1)).mean()),
        "trigger_changed_fraction_median": float(np.median((change != 0).mean(axis=1))),
    }


def evaluate(model, x_u8: np.ndarray, y: np.ndarray, rule, target: int, kappa: float = 0.5,
             blend: float = 1.0, control=None) -> dict:  # fmt: skip
    """The metrics of `model` on clean and triggered test images; with `control` (a model trained on
    randomly relabelled images) also its ASR under the same trigger and asr_minus_control."""
    classes = model.config["classes"]
    if x_u8.shape[1] != model.config["side"]:
        raise DataError(f"model expects {model.config['side']}x{model.config['side']} images, got {x_u8.shape[1:]}")
    if y.max() >= classes:
        raise DataError(f"test labels reach {int(y.max())}, the model has {classes} classes")
    others = y != target
    if not others.any():
        raise DataError(f"every test label is the target {target}: no non-target image to trigger")
    clean = model.predict(x_u8)
    triggered_x = trigger(x_u8[others], rule, kappa, blend)
    triggered = model.predict(triggered_x)
    hit = triggered == target
    result = {
        "c_acc": float((clean == y).mean()),
        "asr": float(hit.mean()),
        "r_acc": float((triggered == y[others]).mean()),
        "n_test": int(len(y)),
        "n_nontarget": int(others.sum()),
        "per_class_asr": {int(c): float(hit[y[others] == c].mean()) for c in np.unique(y[others])},
        **trigger_visibility(x_u8[others], triggered_x),
    }
    if control is not None:
        if control.config["classes"] != classes or control.config["side"] != model.config["side"]:
            raise DataError("the control model's classes or image side differ from the model's")
        result["control_asr"] = float((control.predict(triggered_x) == target).mean())
        result["asr_minus_control"] = result["asr"] - result["control_asr"]
    spec = getattr(rule, "rule", rule)  # the rule behind an operator object
    if isinstance(spec, Rule):
        natural = satisfies(x_u8, spec)
        result["natural_trigger_rate"] = float((natural & (clean == target)).mean())
        result["natural_members"] = int(natural.sum())
        result["trigger_validity"] = float(satisfies(triggered_x, spec).mean())
    return result

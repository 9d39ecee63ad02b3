"""Trigger visibility of the baselines' stamps on the Fashion-MNIST test images of the non-target classes
(target 0), the figures eval reports for any trigger: PSNR of the mean squared change, mean L2, median
share of pixels changed. `python -P bench/dar/visibility.py` (the DAR operator's come from `run` rows)."""

from __future__ import annotations

from methodkit.tools.dar import data
from methodkit.tools.dar.evaluate import trigger_visibility
from methodkit.tools.dar.rules import BASELINE_TRIGGERS

if __name__ == "__main__":
    x, y = data.load("fashion-mnist", "test", None, 0)
    others = y != 0
    print("trigger  psnr_db  l2_mean  changed_fraction_median")
    for name in ("badnets", "blended"):
        v = trigger_visibility(x[others], BASELINE_TRIGGERS[name](x[others]))
        print(f"{name}  {v['trigger_psnr_db']:.1f}  {v['trigger_l2_mean']:.2f}  {v['trigger_changed_fraction_median']:.3f}")

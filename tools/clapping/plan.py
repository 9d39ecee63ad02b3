"""`clapping-train plan`: the stage partition of a model, its parameters per stage and bytes per link message."""

from __future__ import annotations

import numpy as np


def shape_only_data(task: str, features: int, seq: int):
    """A two-row Dataset with the shapes of `task` (the partition needs shapes, not data)."""
    from methodkit.tools.clapping import tasks

    if task == "charlm":
        tokens = np.zeros((2, seq), np.int64)
        return tasks.Dataset(tokens, tokens, None, None, "lm", {"vocab": 96, "seq": seq})
    classes = 10 if task == "digits" else 1
    n_in = 64 if task == "digits" else features
    return tasks.Dataset(
        np.zeros((2, n_in), np.float32), np.zeros(2), None, None, "classification", {"classes": classes}
    )


def plan_rows(task: str, stages: int, width: int, blocks: int, features: int, seq: int, batch: int, compressor: str):
    """One row per stage: params, out_width and, per link, exact, compressed and Clapping-buffer bytes."""
    from methodkit.core import compress
    from methodkit.tools.clapping import tasks
    from methodkit.tools.clapping.pipeline import stage_widths

    data = shape_only_data(task, features, seq)
    modules = tasks.build_stages(task, data, stages, width=width, n_blocks=blocks, seed=0)
    widths = stage_widths(modules, data) + [0]
    rows = []
    for p, module in enumerate(modules):
        row = {"stage": p, "params": sum(t.numel() for t in module.parameters()), "out_width": widths[p] or ""}
        if widths[p]:
            c = compress.parse(compressor, widths[p])
            message = c.encode(np.random.default_rng(0).standard_normal((batch, widths[p])).astype(np.float32))
            row["exact_bytes"] = batch * widths[p] * 4
            row["compressed_bytes"] = c.nbytes(message)
            row["clapping_buffer_bytes"] = 2 * batch * widths[p] * 4
        rows.append(row)
    return rows

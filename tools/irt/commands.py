"""irt-sim's result-building steps, kept out of the click layer: the long response table of a draw, the
rows of the profile listing and the plan of a sweep's --dry-run."""

from __future__ import annotations


def long_table(data):
    """The observed cells of a drawn response matrix as a long table model_id, item_id, correct."""
    import numpy as np
    import pandas as pd

    rows, cols = np.nonzero(data.Y != 255)
    return pd.DataFrame({"model_id": data.model_id[rows], "item_id": data.item_id[cols], "correct": data.Y[rows, cols]})


def profile_rows(text: str | None, name: str, model: str):
    """The profile listing (one row per profile, with its mean a and the mu_B solved under `model`)."""
    import numpy as np
    import pandas as pd

    from methodkit.tools.irt import profiles

    rows = []
    for key, p in profiles.load(text, name).items():
        rows.append(
            {
                "profile": key,
                "benchmark": p.name,
                "n_items": p.n_items,
                "format": p.format,
                "c_mean": p.c_mean,
                "target_accuracy": p.target_accuracy,
                "a_mean": float(np.exp(p.log_a_mean + p.log_a_sd**2 / 2)),
                "b_mean": profiles.solve_mu_b(p, model),
                "b_sd": p.b_sd,
            }
        )
    return pd.DataFrame(rows)


def sweep_plan(spec, todo, pending) -> dict:
    """What `sweep --dry-run` reports: task counts and the estimated cost of the pending runs."""
    from methodkit.tools.irt import sweep

    return {
        "tasks": len(todo),
        "cells": len(spec.cells),
        "reps": spec.reps,
        "estimators": list(spec.estimators),
        "pending": len(pending),
        "estimated_seconds": round(sweep.estimate_seconds(spec, pending), 1),
    }

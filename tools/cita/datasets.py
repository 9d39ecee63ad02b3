"""BFCL v4 multi-turn data (PyPI bfcl-eval, Apache-2.0) as flat tables for `methodkit-data`: one row per
gold call (task_id, turn, position, name, arguments as canonical JSON). cita-data reads the same files
into trajectories. Registered only when bfcl-eval is installed (pip install --no-deps bfcl-eval mpmath)."""

from __future__ import annotations

import importlib.util

from methodkit.core.datasets import Dataset, register

CATEGORIES = ("multi_turn_base", "multi_turn_miss_param", "multi_turn_miss_func", "multi_turn_long_context")


def _loader(category: str):
    def load():
        import json

        import pandas as pd

        from methodkit.tools.cita import bfcl

        entries, gold = bfcl.load_category(category)
        rows = []
        for entry in entries:
            for turn, calls in enumerate(gold[entry["id"]]):
                for pos, text in enumerate(calls):
                    parsed = bfcl.parse_call(text)
                    rows.append(
                        {
                            "task_id": entry["id"],
                            "turn": turn,
                            "position": pos,
                            "name": parsed["name"],
                            "call": text,
                            "kwargs": json.dumps(parsed["kwargs"], sort_keys=True),
                        }
                    )
        return pd.DataFrame(rows)

    return load


def _register_tables() -> None:
    if importlib.util.find_spec("bfcl_eval") is None:
        return
    for category in CATEGORIES:
        register(
            Dataset(
                f"bfcl-{category.replace('_', '-')}",
                _loader(category),
                "bfcl-eval (PyPI)",
                "Apache-2.0",
                f"BFCL v4 {category}: 200 multi-turn tasks, one row per gold call (executable in cita-eval)",
            )
        )

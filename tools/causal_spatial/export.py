"""`causal-spatial export`: the benchmark as HF-CausalSpatial-style Parquet or VLMEvalKit TSV."""

from __future__ import annotations

import base64
from pathlib import Path

from methodkit.core.errors import DataError
from methodkit.tools.causal_spatial import bench_io

FORMATS = ("parquet", "vlmevalkit-tsv")


def _image_bytes(bench, item) -> bytes:
    if not item.get("image"):
        raise DataError(f"{item['id']}: no image to export (the benchmark was generated with --gl none)")
    return (Path(bench) / item["image"]).read_bytes()


def parquet_frame(bench):
    """Columns id, question, answer, image (PNG bytes), not_sure, plus task and level."""
    import pandas as pd

    rows = [{"id": it["id"], "question": it["question"], "answer": it["answer"], "image": _image_bytes(bench, it),
             "not_sure": it["not_sure"], "task": it["task"], "level": it["level"]}
            for it in bench_io.load_items(bench)]  # fmt: skip
    return pd.DataFrame(rows)


def tsv_frame(bench):
    """VLMEvalKit's multiple-choice TSV: index, image (base64), question (stem), A.., answer, category, l2-category."""
    import pandas as pd

    items = bench_io.load_items(bench)
    width = max(len(it["options"]) for it in items)
    rows = []
    for i, it in enumerate(items):
        row = {"index": i, "image": base64.b64encode(_image_bytes(bench, it)).decode("ascii"),
               "question": it["question"].split("\n(", 1)[0]}  # fmt: skip
        for j in range(width):
            row["ABCDEFGHIJ"[j]] = it["options"][j] if j < len(it["options"]) else ""
        row.update(answer=it["answer"], category=it["task"], **{"l2-category": f"level_{it['level']}"}, id=it["id"])
        rows.append(row)
    return pd.DataFrame(rows)

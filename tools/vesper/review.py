"""review: contact sheets (8 frames of each twin + the withheld outcome frame) and review.csv verdicts."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from methodkit.core import io
from methodkit.core.errors import DataError

VERDICTS = ("accept", "reject")


def _clip(folder: Path, item: dict):
    if item.get("frames_dir"):
        from PIL import Image

        return np.stack([np.asarray(Image.open(f).convert("RGB")) for f in sorted((folder / item["frames_dir"]).glob("*.png"))])
    from methodkit.core.render.video import read_mp4

    return read_mp4(str(folder / item["video"]))


def outcome_frame(folder: Path, item: dict, cam_w: int, cam_h: int):
    """The frame at harm time (dangerous) or the closest approach (safe), rendered from the scenario."""
    from methodkit.tools.vesper.generate import TopDown, render_clip
    from methodkit.tools.vesper.scene import Params

    scen = io.read_json(str(folder / "scenarios" / f"{item['id']}.json"))
    p = Params(**scen["params"])
    t = item["gt"]["harm_time_s"] or min(p.horizon_s, item["cutoff_s"] + 2.0)
    rgb, _ = render_clip(p, [t], TopDown(cam_w, cam_h))
    return rgb[0]


def _items(bench: str) -> list[dict]:
    path = Path(bench) / "items.jsonl"
    if not path.is_file():
        raise DataError(f"{bench}: no items.jsonl (make one with vesper-eval generate -o {bench})")
    return io.read_jsonl(str(path))


def template(bench: str, reviewer: str, sheet_dir: str | None = None):
    import pandas as pd

    from methodkit.core.render import video
    from methodkit.tools.vesper.evaluate import sample_frames

    folder = Path(bench)
    items = _items(bench)
    if sheet_dir:
        Path(sheet_dir).mkdir(parents=True, exist_ok=True)
        by = {}
        for it in items:
            by.setdefault(it["pair_id"], []).append(it)
        for pid, group in sorted(by.items()):
            rows = []
            for it in sorted(group, key=lambda r: r["variant"]):
                clip = _clip(folder, it)
                idx = sample_frames(len(clip), 8)
                row = [clip[i] for i in idx] + [outcome_frame(folder, it, clip.shape[2], clip.shape[1])]
                sep = np.full((clip.shape[1], 4, 3), 255, np.uint8)
                rows.append(np.concatenate([x for f in row for x in (f, sep)], axis=1))
            video.write_png(np.concatenate(rows, axis=0), Path(sheet_dir) / f"{pid}.png", force=True)
    return pd.DataFrame({"id": [it["id"] for it in items], "verdict": "", "reviewer": reviewer, "note": "", "time": ""})


def apply(bench: str, table) -> tuple[list[dict], dict]:
    items = _items(bench)
    io.require_columns(table, ["id", "verdict"], "--apply")
    known = {it["id"]: it for it in items}
    counts = {"accepted": 0, "rejected": 0, "unreviewed": 0}
    verdicts = {}
    for _, row in table.fillna("").iterrows():
        if row["id"] not in known:
            raise DataError(f"--apply: id '{row['id']}' is not in {bench}/items.jsonl")
        v = str(row["verdict"]).strip().lower()
        if v and v not in VERDICTS:
            raise DataError(f"--apply: verdict '{v}' for '{row['id']}' (expected accept or reject)")
        verdicts[row["id"]] = (v, {k: str(row.get(k, "")) for k in ("reviewer", "note", "time")})
    for it in items:
        v, info = verdicts.get(it["id"], ("", {}))
        if v:
            it["status"] = "accepted" if v == "accept" else "rejected"
            it["review"] = info
            counts["accepted" if v == "accept" else "rejected"] += 1
        else:
            counts["unreviewed"] += 1
    # a pair counts only with both twins accepted
    return items, counts

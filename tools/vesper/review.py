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


class Outcomes:
    """The frame at harm time (dangerous) or 2 s after the cutoff (safe), rendered from the scenario with
    the renderer that made its clip (one MuJoCo renderer for all, closed by close())."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.camera = None
        self.sims: dict = {}

    def frame(self, item: dict, cam_w: int, cam_h: int):
        from methodkit.tools.vesper import hazards
        from methodkit.tools.vesper.generate import TopDown, render_clip

        scen = io.read_json(str(self.folder / "scenarios" / f"{item['id']}.json"))
        hazard = scen.get("hazard", "collision")
        hz = hazards.get(hazard)
        p = hazards.params(hazard, scen["params"])
        t = item["gt"]["harm_time_s"] or min(p.horizon_s, item["cutoff_s"] + 2.0)
        if (hazard, cam_w, cam_h) not in self.sims:
            self.sims[(hazard, cam_w, cam_h)] = hz.simulator(cam_w, cam_h)
        sim = self.sims[(hazard, cam_w, cam_h)]
        if scen.get("renderer", "2d") == "2d":
            return render_clip(p, [t], TopDown(cam_w, cam_h), sim, hz)[0][0]
        if self.camera is None or (self.camera.renderer.width, self.camera.renderer.height) != (cam_w, cam_h):
            from methodkit.tools.vesper import scene as sc

            self.close()
            self.camera = sc.CameraRenderer(sim, cam_w, cam_h)
        return self.camera.clip(p, [t], scen["camera"]["name"], sim)[0][0]

    def close(self) -> None:
        if self.camera is not None:
            self.camera.close()
        self.camera = None


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
        outcomes = Outcomes(folder)
        try:
            for pid, group in sorted(by.items()):
                rows = []
                for it in sorted(group, key=lambda r: r["variant"]):
                    clip = _clip(folder, it)
                    idx = sample_frames(len(clip), 8)
                    row = [clip[i] for i in idx] + [outcomes.frame(it, clip.shape[2], clip.shape[1])]
                    sep = np.full((clip.shape[1], 4, 3), 255, np.uint8)
                    rows.append(np.concatenate([x for f in row for x in (f, sep)], axis=1))
                video.write_png(np.concatenate(rows, axis=0), Path(sheet_dir) / f"{pid}.png", force=True)
        finally:
            outcomes.close()
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


ANSWERS = {"a": "accept", "r": "reject", "s": "skip", "q": "quit"}
NOTES = "looks implausible, danger not inferable, person occluded"


def save_items(bench: str, items: list[dict]) -> None:
    """Rewrite BENCH/items.jsonl atomically (a crash or ^C leaves the previous manifest whole)."""
    with io.atomic_write(str(Path(bench) / "items.jsonl"), force=True) as handle:
        handle.write("".join(io.dumps_json(r) + "\n" for r in items).encode())


def _describe(it: dict, sheet_dir: str | None) -> str:
    sheet = f"; sheet {Path(sheet_dir) / (it['pair_id'] + '.png')}" if sheet_dir else ""
    return (f"{it['id']}: {it['variant']} ({it['factor']}, {it['person']}, pressure {it['pressure']}, "
            f"decision {it['gt']['decision']}){sheet}")  # fmt: skip


def interactive(bench: str, reviewer: str, ask, say, *, clock, sheet_dir: str | None = None):
    """Ask accept/reject/skip/quit for every unreviewed (auto_ok) item; each verdict is saved to
    items.jsonl at once. `ask(prompt) -> str | None` reads one line (None at the end of input: quit), `say(text)`
    shows a line, `clock()` gives the ISO time stored with a verdict. Returns (verdict table, counts)."""
    import pandas as pd

    items = _items(bench)
    todo = [it for it in items if it.get("status") == "auto_ok"]
    rows, counts = [], {"accepted": 0, "rejected": 0, "skipped": 0, "remaining": len(todo)}
    for n, it in enumerate(todo, start=1):
        say(f"[{n}/{len(todo)}] {_describe(it, sheet_dir)}")
        answer = None
        while answer is None:
            raw = ask("accept, reject, skip or quit? [a/r/s/q] ")
            raw = "q" if raw is None else raw.strip().lower()  # None: end of input
            answer = {**ANSWERS, **{v: v for v in ANSWERS.values()}}.get(raw)
            if answer is None:
                say(f"'{raw}': answer a (accept), r (reject), s (skip) or q (quit)")
        if answer == "quit":
            break
        counts["remaining"] -= 1
        if answer == "skip":
            counts["skipped"] += 1
            continue
        note = (ask(f"note ({NOTES}; empty for none): ") or "").strip() if answer == "reject" else ""
        info = {"reviewer": reviewer, "note": note, "time": clock()}
        it["status"], it["review"] = ("accepted" if answer == "accept" else "rejected"), info
        counts["accepted" if answer == "accept" else "rejected"] += 1
        rows.append({"id": it["id"], "verdict": answer, **info})
        save_items(bench, items)
    table = pd.DataFrame(rows, columns=["id", "verdict", "reviewer", "note", "time"])
    return table, counts

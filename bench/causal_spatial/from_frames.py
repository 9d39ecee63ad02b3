"""cow-reader --from-frames against the state reader on the same items (agreement per task).

For each seed and frame count: generate a benchmark, run COW perceive with --segmentation, evaluate
cow-reader from cow.json's simulator events and from the frames' segmentation renders, and count the
items on which the two readers give the same answer (the issue's target: >= 98%). Writes
bench/causal_spatial/from_frames.txt.

    nice -n 5 .venv/bin/python -P bench/causal_spatial/from_frames.py --seeds 0,1 --per-task 12 --size 160 --frames 6,24
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from acceptance import sh  # noqa: E402

HERE = Path(__file__).resolve().parent
LETTER = re.compile(r'"Answer": "\(([A-J])\)"')


def answers(path: Path) -> dict:
    out = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        m = LETTER.search(r["text"] or "")
        out[r["id"]] = (r["task"], m.group(1) if m else None, r["answer"])
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--per-task", type=int, default=12)
    ap.add_argument("--size", type=int, default=160)
    ap.add_argument("--frames", default="6,24")
    ap.add_argument("--out", default=str(HERE / "from_frames.txt"))
    a = ap.parse_args()
    lines = [f"# per-task {a.per_task} (half per level), {a.size}px, COW perceive --segmentation, EGL",
             "seed  frames  task  n  agreement  acc_state  acc_frames"]
    print(lines[-1], flush=True)
    for seed in a.seeds.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            bench = Path(tmp) / "bench"
            sh("causal-spatial", "generate", "--per-task", str(a.per_task), "--size", str(a.size), "--seed", seed,
               "-o", str(bench), "-q")  # fmt: skip
            for frames in a.frames.split(","):
                cow, pa, pb = Path(tmp) / f"cow{frames}", Path(tmp) / f"a{frames}.jsonl", Path(tmp) / f"b{frames}.jsonl"
                sh("cow-simulate", "--bench", str(bench), "--frames", frames, "--segmentation", "--no-video",
                   "-o", str(cow), "-q")  # fmt: skip
                common = ["causal-spatial", "eval", "--bench", str(bench), "--model", "cow-reader", "--cow", str(cow), "-q"]
                sh(*common, "-o", str(pa))
                sh(*common, "--from-frames", "-o", str(pb))
                sa, sb = answers(pa), answers(pb)
                cells = defaultdict(list)
                for i, (task, x, truth) in sa.items():
                    y = sb[i][1]
                    for key in (task, "all"):
                        cells[key].append((x == y, x == truth, y == truth))
                for key in sorted(cells, key=lambda k: (k == "all", k)):
                    rows = cells[key]
                    n = len(rows)
                    line = (f"{seed}  {frames}  {key}  {n}  {sum(r[0] for r in rows) / n:.3f}  "
                            f"{sum(r[1] for r in rows) / n:.3f}  {sum(r[2] for r in rows) / n:.3f}")  # fmt: skip
                    lines.append(line)
                    print(line, flush=True)
    Path(a.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

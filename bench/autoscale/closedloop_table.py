"""Per-seed and mean table of bench/autoscale/closedloop.jsonl (closed- vs open-loop feedback, vanilla).

.venv/bin/python -P bench/autoscale/closedloop_table.py [bench/autoscale/closedloop.jsonl]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def rows(path: Path) -> dict:
    out: dict = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r.get("verb") != "run":
            continue
        cl = r["test"].get("closed_loop") or r.get("test_closed_loop_by_closed_loop_score_py")
        name = "vanilla" if r["method"] == "vanilla" else f"autoscale ({r['eval']} feedback)"
        m = r.get("mechanism", {})
        out.setdefault(name, {})[r["seed"]] = {
            "pdms": r["test"]["pdms"], "score": cl["score"], "ds": cl["ds"],
            "coll": cl["infractions"]["collision_vehicle"], "best": r["best_round"],
            "reck": m.get("reckless_cluster_weight_max_times_k"), "rare": m.get("rare_weight_ratio"),
            "share": m.get("reckless_share_selected"),
        }  # fmt: skip
    return out


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).with_name("closedloop.jsonl"))
    table = rows(path)
    seeds = sorted({s for per in table.values() for s in per})
    print("method  seed  test_pdms  closed_loop_score  ds  vehicle_collisions  best_round  "
          "reckless_w*K  rare_ratio  reckless_share")  # fmt: skip
    for name, per in table.items():
        for s in seeds:
            v = per.get(s)
            if v:
                mech = " ".join("-" if v[k] is None else f"{v[k]:.3f}" for k in ("reck", "rare", "share"))
                figs = f"{v['pdms']:.2f}  {v['score']:.2f}  {v['ds']:.2f}  {v['coll']}  {v['best']}"
                print(f"{name}  {s}  {figs}  {mech}")
        mean = {k: np.mean([per[s][k] for s in per]) for k in ("pdms", "score", "ds", "coll")}
        figs = f"{mean['pdms']:.2f}  {mean['score']:.2f}  {mean['ds']:.2f}  {mean['coll']:.1f}"
        print(f"{name}  mean({len(per)})  {figs}")
    for other in ("autoscale (open-loop feedback)", "vanilla"):
        base = table.get(other, {})
        ours = table.get("autoscale (closed-loop feedback)", {})
        both = sorted(set(base) & set(ours))
        d = [ours[s]["score"] - base[s]["score"] for s in both]
        dp = [ours[s]["pdms"] - base[s]["pdms"] for s in both]
        print(
            f"closed-loop feedback - {other}: score {' '.join(f'{x:+.2f}' for x in d)} (mean {np.mean(d):+.2f}, "
            f"higher in {sum(x > 0 for x in d)} of {len(d)}); pdms mean {np.mean(dp):+.2f}"
        )


if __name__ == "__main__":
    main()

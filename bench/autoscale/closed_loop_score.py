"""The closed-loop route score of a saved planner on a pools folder's test (or val) routes.

    .venv/bin/python -P bench/autoscale/closed_loop_score.py RUN/planner.safetensors POOLS [test|val]

Prints one JSON line: tools.autoscale.closedloop.drive's summary (score, ds, rc, penalty, infractions),
so that a planner trained with open-loop feedback can be compared with `run --eval closed-loop`'s.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from methodkit.tools.autoscale import closedloop
from methodkit.tools.autoscale import planner as P
from methodkit.tools.autoscale import pools as PL


def main() -> None:
    planner, folder = sys.argv[1], Path(sys.argv[2])
    pool = sys.argv[3] if len(sys.argv) > 3 else "test"
    model, _ = P.load(planner)
    arrays, meta = PL.read_pool(folder / f"{pool}.npz")
    summary, _ = closedloop.drive(model, closedloop.routes(arrays, meta, where=f"{pool}.npz"))
    print(json.dumps({"planner": planner, "pool": pool, **summary}))


if __name__ == "__main__":
    main()

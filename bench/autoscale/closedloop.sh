#!/bin/sh
# Closed-loop vs open-loop feedback for one seed (docs/autoscale.md, "Closed-loop feedback"), one thread:
#   nice -n 5 sh bench/autoscale/closedloop.sh SEED WORK OUT.jsonl
# acceptance.py runs pools, embed, autoscale@800 and vanilla@800 with --eval closed-loop (kept under WORK),
# then autoscale@800 with the default open-loop feedback on the same pools, whose planner's closed-loop test
# score (closed_loop_score.py) is added to its JSON line. Every line is appended to OUT.
set -eu
S=$1 W=$2 O=$3
PY=.venv/bin/python
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1
$PY -P bench/autoscale/acceptance.py --seeds "$S" --methods autoscale@800,vanilla@800 \
  --run-args "--eval closed-loop" --out "$O" --work "$W"
.venv/bin/autoscale-mix run "$W/s$S/pools" -o "$W/s$S/autoscale-open" --method autoscale --budget 800 \
  --rounds 5 --clusters 16 --steps 1000 --seed "$S" --eval open-loop -j 1 -q | tail -n 1 > "$W/s$S/open.json"
$PY -P bench/autoscale/closed_loop_score.py "$W/s$S/autoscale-open/planner.safetensors" "$W/s$S/pools" test \
  | tail -n 1 > "$W/s$S/open_cl.json"
$PY -P -c '
import json, sys
run, cl = (json.loads(open(p).read()) for p in sys.argv[1:3])
cl.pop("planner"); cl.pop("pool")
print(json.dumps({"verb": "run", **run, "real_rare": 0.02, "run_args": "--eval open-loop",
                  "test_closed_loop_by_closed_loop_score_py": cl}))
' "$W/s$S/open.json" "$W/s$S/open_cl.json" >> "$O"

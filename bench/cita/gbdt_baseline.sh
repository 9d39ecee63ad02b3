#!/usr/bin/env bash
# The gbdt baseline ranker under the acceptance protocol of acceptance.py (split seed 0, --distractors 4,
# hash embedder, behaviour pairs only), one seed: writes bench/cita/gbdt_seed$SEED.json.
#   nice -n 5 bash bench/cita/gbdt_baseline.sh [SEED]
set -euo pipefail
SEED=${1:-0}
OUT=$(cd "$(dirname "$0")" && pwd)/gbdt_seed$SEED.json
BIN=$(cd "$(dirname "$0")/../.." && pwd)/.venv/bin
export PATH=$BIN:$PATH OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; cd "$work"
cita-data bfcl --category multi_turn_base --split train -o train.jsonl
cita-sim fit train.jsonl -o graph.npz
cita-train train.jsonl --graph graph.npz --sources B --ranker gbdt --seed "$SEED" -q -o gbdt-b
cita-eval --category multi_turn_base --model gbdt-b --graph graph.npz --distractors 4 --seed "$SEED" -q > eval.json
tr -d '\n' < gbdt-b/cim.json | "$BIN/python" -c "import json,sys; t=json.load(sys.stdin)['train']; r=json.load(open('eval.json')); r['train']=t; print(json.dumps(r))" > "$OUT"

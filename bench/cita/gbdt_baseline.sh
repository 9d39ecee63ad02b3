#!/usr/bin/env bash
# The gbdt baseline ranker under the acceptance protocol of acceptance.py (split seed 0, --distractors 4,
# hash embedder), one seed and one pair set: writes bench/cita/gbdt_seed$SEED.json for SOURCES=B (the
# default), bench/cita/gbdt_<SOURCES without commas>_seed$SEED.json otherwise (2000 synthetic tasks for S,
# as acceptance.py).
#   nice -n 5 bash bench/cita/gbdt_baseline.sh [SEED] [SOURCES]
set -euo pipefail
SEED=${1:-0}
SOURCES=${2:-B}
TAG=$([ "$SOURCES" = B ] && echo "" || echo "_${SOURCES//,/}")
MODEL=gbdt-$(echo "${SOURCES//,/}" | tr A-Z a-z)  # gbdt-b, gbdt-bsl, ...
OUT=$(cd "$(dirname "$0")" && pwd)/gbdt${TAG}_seed$SEED.json
BIN=$(cd "$(dirname "$0")/../.." && pwd)/.venv/bin
export PATH=$BIN:$PATH OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; cd "$work"
cita-data bfcl --category multi_turn_base --split train -o train.jsonl
cita-sim fit train.jsonl -o graph.npz
cita-train train.jsonl --graph graph.npz --sources "$SOURCES" --synthetic 2000 --ranker gbdt --seed "$SEED" -q -o "$MODEL"
cita-eval --category multi_turn_base --model "$MODEL" --graph graph.npz --distractors 4 --seed "$SEED" -q > eval.json
tr -d '\n' < "$MODEL"/cim.json | "$BIN/python" -c "import json,sys; t=json.load(sys.stdin)['train']; r=json.load(open('eval.json')); r['train']=t; print(json.dumps(r))" > "$OUT"

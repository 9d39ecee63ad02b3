#!/bin/sh
# Issue 34 items 4 and 5 on Adult (official split, 20% of the train file as the attacker's validation):
# one attack per seed, its JSON summary appended to bench/gbdt/issue34/adult-NAME.jsonl. Each summary holds
# both releases of the same search: clean/poisoned (every row released, the default) and attacker
# (the train part only, = --drop-validation). --iters 5 (not 20) to fit the machine; ITERS=20 for Credit-g.
# usage: run_adult.sh NAME SEEDS ARGS...   e.g. run_adult.sh threshold-b05-e1 "0 1 2" --budget 0.05 --eps 1
# DATASET=credit-g run_adult.sh ... runs the same on Credit-g (out: credit-NAME.jsonl)
set -e
cd "$(dirname "$0")/../../.."
export OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 MKL_NUM_THREADS=1
name=$1; seeds=$2; shift 2
ds=${DATASET:-adult}
out=bench/gbdt/issue34/${ds%-g}-$name.jsonl
tmp=$(mktemp -d)
for seed in $seeds; do
  nice -n 5 .venv/bin/gbdt-poison attack --dataset "$ds" --iters "${ITERS:-5}" --seed "$seed" "$@" -o "$tmp/p.csv" --force -q \
    | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['args']=sys.argv[1:]; print(json.dumps(d))" "$@" >> "$out"
done
rm -rf "$tmp"

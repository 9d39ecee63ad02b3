#!/bin/sh
# chess-wm at a small CPU setting (issue 39 item 2): the state after 16 plies, d64, 600 steps,
# batch 64, LR 3e-3, warm-up 60, cosine floor 0.1; 6,000 book training games, 500 held-out book
# and 500 random test games. Data once, then one process per architecture (each stopped after STUDY_TIMEOUT,
# 1190 s by default, one torch and one Numba thread, niced), then one report (A1-A3 of acceptance.py).
#   sh bench/chess_wm/study.sh WORKDIR [SIZE [SEED [PLIES [STEPS]]]]
# STUDY_ARCHS: the architectures (default: transformer slice slice-diag gdn gdn-pos).
set -u
work=$1 size=${2:-d64} seed=${3:-0} plies=${4:-16} steps=${5:-600}
archs=${STUDY_ARCHS:-"transformer slice slice-diag gdn gdn-pos"}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1
data=$work/$plies-data
common="--train-games 6000 --test-games 500 --max-plies $plies --size $size --batch-size 64 --steps $steps --warmup 60 --seeds $seed --threads 1"
python3 -P bench/chess_wm/acceptance.py --out "$data" $common --data-only || exit 1
for arch in $archs; do
  out=$work/$plies-$size-s$seed-$arch
  mkdir -p "$out"
  for split in book-train book-test random-test; do ln -sfn "$(cd "$data" && pwd)/$split" "$out/$split"; done
  timeout "${STUDY_TIMEOUT:-1190}" nice -n 5 python3 -P bench/chess_wm/acceptance.py --out "$out" $common --archs "$arch" > "$out.log" 2>&1 &
done
wait
python3 -P bench/chess_wm/acceptance.py --merge "$work/$plies-$size-s$seed"-*/results.csv

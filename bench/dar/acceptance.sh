#!/bin/sh
# dar-backdoor: the acceptance grid (docs/dar.md item 13). Fashion-MNIST 20,000 train images, full
# 10k test, cnn-s (width 32) teacher / cnn-xs student, 6 epochs, batch 128, 1% = 200 relabels, target 0,
# whitened operator at kappa 0; clean, dar, random, badnets x seeds 0-2, one process per run, JOBS at a
# time (one torch thread each). About 8 CPU-minutes per run on the 2-core machine (12 runs).
#   sh bench/dar/acceptance.sh OUT_DIR [JOBS]      then   cat OUT_DIR/*.csv
# Needs the Debian package dataset-fashion-mnist (the Makefile installs it).
set -eu
out=${1:?usage: sh bench/dar/acceptance.sh OUT_DIR [JOBS]}
jobs=${2:-2}
mkdir -p "$out"
for seed in 0 1 2; do
  for method in clean dar random badnets; do
    echo "$method $seed"
  done
done | xargs -P "$jobs" -L 1 sh -c 'OMP_NUM_THREADS=1 dar-backdoor run --op whitened --kappa 0 \
  --limit 20000 --epochs 6 --width 32 --batch-size 128 --budget 0.01 --methods "$0" --seed "$1" \
  --seeds 1 --threads 1 -q -o "'"$out"'/$0-$1.csv"'

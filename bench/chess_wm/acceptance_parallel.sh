#!/bin/sh
# The chess-wm acceptance protocol (bench/chess_wm/acceptance.py, issue 11) with one process per
# architecture, all on one device: data once, then seven trainings side by side, then one report.
#   sh bench/chess_wm/acceptance_parallel.sh WORKDIR RESULTDIR [DEVICE [BOOK [SECONDS]]]
# Each architecture's process runs the seeds in turn and is stopped after SECONDS (default 3000);
# what finished is reported. RESULTDIR gets one results-<arch>.csv each; the report goes to stdout.
# ACC_ARGS adds options to every run (e.g. '--train-games 200 --steps 5' for a dry run).
# ACC_ARCHS runs only these architectures (default: all seven).
set -u
work=$1 results=$2 device=${3:-cpu} book=${4:-/usr/share/games/gnuchess/book.bin} limit=${5:-3000} extra=${ACC_ARGS:-}
archs=${ACC_ARCHS:-"transformer slice slice-diag gdn gdn-pos mamba3 mamba2"}
mkdir -p "$work/data" "$results"
python3 -P bench/chess_wm/acceptance.py --out "$work/data" --book "$book" --data-only $extra || exit 1
for arch in $archs; do
  mkdir -p "$work/$arch"
  for split in book-train book-test random-test; do ln -sfn "$(cd "$work/data" && pwd)/$split" "$work/$arch/$split"; done
  timeout "$limit" python3 -P bench/chess_wm/acceptance.py --out "$work/$arch" --archs "$arch" \
    --device "$device" --threads 2 $extra > "$work/$arch.log" 2>&1 &
done
wait
for arch in $archs; do
  [ -f "$work/$arch/results.csv" ] && cp "$work/$arch/results.csv" "$results/results-$arch.csv"
  tail -n 2 "$work/$arch.log"
done
python3 -P bench/chess_wm/acceptance.py --merge "$results"/results-*.csv

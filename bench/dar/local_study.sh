#!/bin/sh
# dar-backdoor issue 38 item 3: bounded study of the paper's LOCAL operators (spatial pixel windows,
# frequency DCT blocks): Fashion-MNIST, cnn-s teacher / cnn-xs student (clean KD alpha 0.9), kappa 0,
# target 0, seed SEED. One `dar-backdoor run --methods dar,random` per configuration (teacher + KD student,
# and the random-relabel control with the same operator: its rows carry asr_minus_random, trigger PSNR and
# changed fraction), the configurations one after another, each in OUT_DIR/NAME-SEED.csv.
#   sh bench/dar/local_study.sh OUT_DIR [SEED] [NAME ...]      (default: every configuration below)
# Environment (defaults = the issue's size): LIMIT 20000, TEST_LIMIT (all), EPOCHS 6, WIDTH 32, BATCH 128,
# METHODS dar,random. docs/dar.md item 14 ran LIMIT=5000 TEST_LIMIT=2000 WIDTH=8 BATCH=32.
# The collected results of the runs in docs/dar.md item 14 are bench/dar/local_study.csv.
set -eu
out=${1:?usage: sh bench/dar/local_study.sh OUT_DIR [SEED] [NAME ...]}
seed=${2:-0}
[ $# -ge 2 ] && shift 2 || shift 1
mkdir -p "$out"
cfg() {  # name -> extra flags
  case $1 in
    sp-iso)      echo "--op spatial --rank isolation" ;;
    sp-s4-iso)   echo "--op spatial --scale 4 --rank isolation" ;;
    sp-s2-iso)   echo "--op spatial --scale 2 --rank isolation" ;;
    sp-w2s7-iso) echo "--op spatial --window 2 --scale 7 --rank isolation" ;;
    sp-s4-b5)    echo "--op spatial --scale 4 --rank isolation --budget 0.05 --support 0.05 0.15" ;;
    sp-s4-e12)   echo "--op spatial --scale 4 --rank isolation --epochs 12" ;;
    sp-s4-ent)   echo "--op spatial --scale 4 --rank entropy" ;;
    fr-iso)      echo "--op frequency --rank isolation" ;;
    fr-b5)       echo "--op frequency --rank isolation --budget 0.05 --support 0.05 0.15" ;;
    fr-sup)      echo "--op frequency --rank isolation --support 0.01 0.05" ;;
    *) echo "unknown configuration $1" >&2; exit 2 ;;
  esac
}
names=${*:-"sp-s4-iso fr-iso sp-iso sp-s4-b5 fr-b5 sp-s2-iso sp-w2s7-iso sp-s4-e12 fr-sup sp-s4-ent"}
for name in $names; do
  flags=$(cfg "$name")
  [ -e "$out/$name-$seed.csv" ] && continue
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1 nice -n 5 dar-backdoor run --methods "${METHODS:-dar,random}" \
    --limit "${LIMIT:-20000}" ${TEST_LIMIT:+--test-limit $TEST_LIMIT} --epochs "${EPOCHS:-6}" \
    --width "${WIDTH:-32}" --batch-size "${BATCH:-128}" --kappa 0 --seed "$seed" --seeds 1 --threads 1 -q $flags \
    --meta "$out/$name-$seed.meta.json" -o "$out/$name-$seed.csv" \
    || echo "$name seed $seed: failed ($?)" >> "$out/failed.txt"
done
# collect: one CSV, a `config` column first (bench/dar/local_study.csv is this for the runs reported)
python3 - "$out" <<'PY'
import csv, glob, os, sys
rows = []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*-*.csv"))):
    name = os.path.basename(path)[: -len(".csv")]
    rows += [{"config": name, **r} for r in csv.DictReader(open(path))]
if rows:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(os.path.join(sys.argv[1], "collected.csv"), "w", newline="") as handle:
        writer = csv.DictWriter(handle, keys)
        writer.writeheader()
        writer.writerows(rows)
PY

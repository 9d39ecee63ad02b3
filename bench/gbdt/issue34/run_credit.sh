#!/bin/sh
# Issue 34 items 2 and 4: threshold vs zo on Credit-g (budget 10%, eps 1 and 4, seeds 0-4, random rows+dims
# baseline), release of every row (default) and --drop-validation. Results: bench/gbdt/issue34/credit-*.csv
set -e
cd "$(dirname "$0")/../../.."
export OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 MKL_NUM_THREADS=1
B=.venv/bin/gbdt-poison
O=bench/gbdt/issue34
for search in threshold zo; do
  nice -n 5 $B sweep --dataset credit-g --budget 0.1 --eps-grid 1,4 --seeds 0,1,2,3,4 --search $search \
    --baselines random -o $O/credit-$search.csv --summary $O/credit-$search.json --force -q
done
nice -n 5 $B sweep --dataset credit-g --budget 0.1 --eps-grid 4 --seeds 0,1,2,3,4 --search threshold \
  --baselines '' --drop-validation -o $O/credit-threshold-dropval.csv --summary $O/credit-threshold-dropval.json --force -q

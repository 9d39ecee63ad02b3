# The acceptance's per-seed steps (bench/cita/acceptance.py) at --synthetic 5000, less the three baseline
# policies (random/prior/judge do not depend on the synthetic tasks); each step timed.
export PATH="$(cd "$(dirname "$0")/../.." && pwd)/.venv/bin:$PATH" OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1
T="/usr/bin/time -f %C|%e|%U|%S"
for s in $SEEDS; do
  d=seed$s; mkdir -p $d; cd $d
  $T nice -n 10 cita-data bfcl --category multi_turn_base --split train -o train.jsonl --force 2>>times.txt
  $T nice -n 10 cita-sim fit train.jsonl -o graph.npz --force 2>>times.txt
  c="--graph graph.npz --synthetic 5000 --epochs 20 --seed $s -q --force"
  $T nice -n 10 cita-train train.jsonl --sources B $c -o cim-b 2>>times.txt
  $T nice -n 10 cita-train train.jsonl --sources B,S,L $c -o cim-bsl 2>>times.txt
  $T nice -n 10 cita-eval --category multi_turn_base --model cim-b --model cim-bsl --graph graph.npz --distractors 4 --seed $s -q > eval.json 2>>times.txt
  cd ..
done

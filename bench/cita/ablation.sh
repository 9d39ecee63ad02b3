# One-seed source ablation (seed 0, the settings of bench/cita/acceptance.py): CIM(B,S) and CIM(B,L).
# In a scratch folder: METHODKIT_BIN=/path/to/repo/.venv/bin bash /path/to/repo/bench/cita/ablation.sh
set -e
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1 PATH=${METHODKIT_BIN:-.venv/bin}:$PATH
cita-data bfcl --split train -o train.jsonl --force
cita-sim fit train.jsonl -o graph.npz --force
for s in B,S B,L; do
  cita-train train.jsonl --sources $s --graph graph.npz --synthetic 2000 --epochs 20 --seed 0 -q --force -o cim-${s/,/}
done
cita-eval --model cim-BS --model cim-BL --seed 0 -q --distractors 4 > ablation.json

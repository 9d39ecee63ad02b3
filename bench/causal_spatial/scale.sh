#!/usr/bin/env bash
# The issue's scale, one step per run (each well under 20 min on one thread): generate, the prior
# baselines' training bench, COW perceive (6 frames) and oracle (2 frames), every baseline, scores.
# usage: bench/causal_spatial/scale.sh STEP DIR [SEED] [PER_TASK] [SIZE] [TASK]; STEP: generate|cow|oracle|eval;
# cow and oracle take one task at a time (TASK: collision, ...), merged into DIR/cow or DIR/oracle.
# Timings and scores go to DIR/log.txt; bench/causal_spatial/scale.txt is written from it by hand.
set -euo pipefail
step=$1 dir=$2 seed=${3:-0} per=${4:-100} size=${5:-336} task=${6:-}
export OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 MKL_NUM_THREADS=1
bin=$(dirname "$0")/../../.venv/bin
t0=$(date +%s)
case $step in
  generate) nice -n 5 "$bin/causal-spatial" generate --per-task "$per" --size "$size" --seed "$seed" -o "$dir/bench" -q --force > "$dir/generate.json"
            nice -n 5 "$bin/causal-spatial" generate --gl none --per-task "$per" --seed $((seed + 1000)) -o "$dir/train" -q --force > /dev/null ;;
  cow|oracle)
            ids=$(grep -o '"id": *"[A-Za-z]*_Level_[0-9]*_[0-9]*"' "$dir/bench/items.jsonl" | grep -io "\"${task}_[^\"]*" | tr -d '"' | paste -sd,)
            opts=(--no-video); [ "$step" = oracle ] && opts+=(--scene oracle --frames 2)
            nice -n 5 "$bin/cow-simulate" --bench "$dir/bench" --ids "$ids" "${opts[@]}" -o "$dir/$step-$task" -q --force > /dev/null
            mkdir -p "$dir/$step" && mv "$dir/$step-$task"/* "$dir/$step"/ && rmdir "$dir/$step-$task" ;;
  eval)     for m in random majority text-prior heuristic2d cow-reader:cow cow-reader:oracle; do
              model=${m%%:*} extra=()
              case $m in majority|text-prior) extra=(--train "$dir/train") ;; cow-reader:*) extra=(--cow "$dir/${m#*:}") ;; esac
              nice -n 5 "$bin/causal-spatial" eval --bench "$dir/bench" --model "$model" "${extra[@]}" -o "$dir/${m/:/-}.jsonl" -q --force
              echo "$m $(nice -n 5 "$bin/causal-spatial" score "$dir/${m/:/-}.jsonl")" >> "$dir/log.txt"
            done
            echo "paired $(nice -n 5 "$bin/causal-spatial" score "$dir/cow-reader-cow.jsonl" --paired "$dir/heuristic2d.jsonl" "$dir/cow-reader-cow.jsonl")" >> "$dir/log.txt" ;;
esac
echo "step $step $task seed $seed per-task $per size $size: $(( $(date +%s) - t0 )) s wall" >> "$dir/log.txt"

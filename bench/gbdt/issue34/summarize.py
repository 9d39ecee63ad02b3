"""Mean (and per-seed) test-F1 drops of the issue-34 runs: every row released (default) vs the train part
only (the attacker's view, = --drop-validation). python3 bench/gbdt/issue34/summarize.py"""

import glob
import json
import statistics

for path in sorted(glob.glob("bench/gbdt/issue34/*.jsonl")):
    runs = [json.loads(line) for line in open(path)]
    rel = [r["drop"]["test_f1"] for r in runs]
    att = [r["attacker"]["clean"]["test_f1"] - r["attacker"]["poisoned"]["test_f1"] for r in runs]
    clean = statistics.mean(r["attacker"]["clean"]["test_f1"] for r in runs)
    after = statistics.mean(r["attacker"]["poisoned"]["test_f1"] for r in runs)
    print(
        f"{path.split('/')[-1]:34s} seeds {','.join(str(r['seed']) for r in runs)}  all rows: "
        f"{statistics.mean(rel):.4f} ({', '.join(f'{d:.3f}' for d in rel)})  train part: {statistics.mean(att):.4f} "
        f"({', '.join(f'{d:.3f}' for d in att)}; F1 {clean:.3f} -> {after:.3f})"
    )

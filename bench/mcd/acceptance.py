"""The headline run of mcd-distill at laptop scale: KD with and without MCD, three objectives, two students.

    nice python -P bench/mcd/acceptance.py WORKDIR [--seeds 0] [--steps 300] [--objectives fkl,rkl,skl] [--jobs 2]

Builds (or reuses, when present in WORKDIR) the data, the teacher and its transcoders, then every distill
run and its eval, and writes bench/mcd/acceptance.csv (one row per run) and prints the C1-C4 summary.
Every step is an mcd-distill command, printed before it runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

BIN = Path(sys.executable).parent / "mcd-distill"
HERE = Path(__file__).resolve().parent
STUDENTS = {"d32": ["--student", "tiny"], "d16": ["--student", "micro"]}  # 2L/d32 (~8x), 2L/d16 (~32x)
TARGETS, EVAL_N = 2, 50  # MCD target positions per window; prompts per held-out suite
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}


def sh(args, cwd, out=None):
    line = " ".join(shlex.quote(str(a)) for a in ["mcd-distill", *args])
    print(f"$ {line}" + (f" > {out}" if out else ""), flush=True)
    proc = subprocess.run([str(BIN), *map(str, args)], cwd=cwd, env=ENV, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {line}\n{proc.stderr[-2000:]}")
    if out:
        Path(cwd, out).write_text(proc.stdout)
    return proc.stdout


def prepare(work: Path, teacher_steps: int, tc_steps: int):
    if not (work / "mix.npz").exists():
        sh(["data", "--task", "mix", "--n-tasks", 60000, "--eval-n", 100, "-o", "mix.npz", "-q"], work)
    if not (work / "instr.npz").exists():
        sh(["data", "--task", "instr", "--n-tasks", 20000, "--eval-n", 100, "-o", "instr.npz", "-q"], work)
    if not (work / "teacher" / "teacher.safetensors").exists():
        sh(["teacher", "mix.npz", "--preset", "small", "--width", 64, "--ctx", 64, "--steps", teacher_steps,
            "--batch-size", 16, "--lr", 3e-3, "-o", "teacher", "-q", "--force"], work)  # fmt: skip
    if not (work / "tc" / "tc_L0.safetensors").exists():
        sh(["transcoders", "mix.npz", "--model", "teacher", "--steps", tc_steps, "--batch-size", 16, "--lr", 3e-3,
            "-o", "tc", "-q", "--force"], work)  # fmt: skip


def one_run(work: Path, seed: int, kd: str, size: str, lam: float, steps: int, extra=(), tag="") -> dict:
    name = f"s{seed}-{kd}-{size}-{'mcd' if lam else 'kd'}{tag}"
    if not (work / name / "student.safetensors").exists():
        sh(["distill", "instr.npz", "--teacher", "teacher", "--teacher-tc", "tc", *STUDENTS[size], "--kd", kd,
            "--mcd", lam, "--steps", steps, "--batch-size", 8, "--lr", 3e-3, "--windows", 128, "--seed", seed,
            "--targets", TARGETS,
            *extra, "--graph-cache", "graph-cache", "-o", name, "-q", "--force"], work, out=f"{name}.json")  # fmt: skip
    if not (work / f"{name}.eval.json").exists():
        sh(["eval", "instr.jsonl", "--model", name, "--teacher", "teacher", "--teacher-tc", "tc", "--tokens",
            "instr.npz", "--n", EVAL_N, "-o", f"{name}.eval.json", "-q", "--force"], work)  # fmt: skip
    run = json.loads((work / name / "run.json").read_text())  # written by distill itself
    metrics = json.loads((work / f"{name}.eval.json").read_text())["models"][0]
    return {"seed": seed, "kd": kd, "student": size, "mcd": lam, **metrics, "train_seconds": run["seconds"],
            "steps": run["steps"], "mcd_batches": run["mcd_batches"], "fallbacks": run["kd_only_fallbacks"]}  # fmt: skip


def summarise(frame: pd.DataFrame) -> dict:
    means = frame.groupby(["kd", "student", "mcd"]).mean(numeric_only=True)
    out = {"gain_instr_em": {}, "gain_math_em": {}, "pathway_ot_drop_pct": {}}
    for kd in sorted(frame.kd.unique()):
        for size in sorted(frame.student.unique()):
            try:
                on, off = means.loc[(kd, size, frame.mcd.max())], means.loc[(kd, size, 0.0)]
            except KeyError:
                continue
            out["gain_instr_em"][f"{kd}/{size}"] = float(on.instr_em - off.instr_em)
            out["gain_math_em"][f"{kd}/{size}"] = float(on.math_em - off.math_em)
            out["pathway_ot_drop_pct"][f"{kd}/{size}"] = float(100 * (off.pathway_ot - on.pathway_ot) / off.pathway_ot)
    g = out["gain_instr_em"]
    aggressive = [v for k, v in g.items() if k.endswith("/d16")]
    moderate = [v for k, v in g.items() if k.endswith("/d32")]
    out["C1_objectives_with_gain_ge_1pt_at_d16"] = int(sum(v >= 1.0 for v in aggressive))
    out["C2_objectives_with_math_gain"] = int(sum(v > 0 for k, v in out["gain_math_em"].items() if k.endswith("/d16")))
    out["C3_gain_d16_minus_gain_d32"] = float(np.mean(aggressive) - np.mean(moderate)) if aggressive and moderate else None
    out["C4_bound_violations"] = int(frame.bound_violations.sum())
    on, off = frame[frame.mcd > 0], frame[frame.mcd == 0]
    out["step_time_ratio_mcd_over_kd"] = float((on.train_seconds / on.steps).mean() / (off.train_seconds / off.steps).mean())
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("work")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--objectives", default="fkl,rkl,skl")
    parser.add_argument("--students", default="d32,d16")
    parser.add_argument("--mcd", type=float, default=0.1)
    parser.add_argument("--teacher-steps", type=int, default=1500)
    parser.add_argument("--tc-steps", type=int, default=800)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--grid", action="append", default=[],
                        help="SEEDS:OBJECTIVES:STUDENTS, e.g. 0:fkl:d32,d16 (repeatable; replaces the full grid)")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    prepare(work, args.teacher_steps, args.tc_steps)
    parts = [g.split(":") for g in args.grid] or [[args.seeds, args.objectives, args.students]]
    grid = [(int(s), kd, size, lam) for seeds, objectives, students in parts for s in seeds.split(",")
            for kd in objectives.split(",") for size in students.split(",") for lam in (0.0, args.mcd)]  # fmt: skip
    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda g: one_run(work, *g, args.steps), grid))
    frame = pd.DataFrame(rows)
    frame.to_csv(HERE / "acceptance.csv", index=False)
    summary = summarise(frame)
    (HERE / "acceptance.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()

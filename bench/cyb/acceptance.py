"""The headline checks of issue 28 at laptop scale, through the installed cyb-train.

B1  val bpc (marginal) of every loss at equal real tokens on cleaned enwiki (held-out articles).
B2  ce at 2x the tokens against the best CYB variant at 1x (data efficiency).
B3  arith (4-digit addition, normal order): mean pauses on answer digits vs operand digits, and
    exact match of CYB vs ce-pause.
B4  no collapse: mean pauses strictly inside (0.05, K - 0.05) for cyb-va and cyb-dp at defaults.

    nice -n 5 .venv/bin/python -P bench/cyb/acceptance.py [--seeds 0,1] [--tokens 300000] [--out DIR]

Prints one JSON line per run and the check table; bench/cyb/acceptance.txt keeps a copy.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

LOSSES = ("ce", "ce-pause", "cyb-ap", "cyb-va", "cyb-dp")
EVAL_WINDOWS = 1500  # the first 1500 held-out windows (96,000 targets at ctx 64)


def sh(args: list[str]) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run(args, capture_output=True, text=True, env=env)
    if proc.returncode not in (0,):
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(args)}\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--tokens", type=int, default=300_000)
    ap.add_argument("--arith-tokens", type=int, default=200_000)
    ap.add_argument("--model", default="--layers 2 --d-model 64 --heads 4 --ctx 64 --batch-size 16")
    ap.add_argument("--losses", default=",".join(LOSSES))
    ap.add_argument("--skip", default="", help="comma list of parts to skip: b1,b2,b3")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    exe = str(Path(sys.executable).parent / "cyb-train")
    work = Path(args.out or tempfile.mkdtemp(prefix="cyb-acc-"))
    work.mkdir(parents=True, exist_ok=True)
    model = args.model.split()
    skip = set(filter(None, args.skip.split(",")))
    common = [*model, "--lr", "3e-3", "--warmup", "40", "--log-every", "100", "--val-windows", "32", "-j", "1", "-q"]
    rows = []

    def record(row):
        rows.append(row)
        print(json.dumps(row), flush=True)

    enwiki = work / "enwiki.npz"
    if not enwiki.exists():
        sh([exe, "data", "--source", "enwiki", "-o", str(enwiki), "-q"])
    for seed in [int(s) for s in args.seeds.split(",")]:
        runs = []
        if "b1" not in skip:
            runs += [(loss, args.tokens) for loss in args.losses.split(",")]
        if "b2" not in skip:
            runs.append(("ce", 2 * args.tokens))
        for loss, tokens in runs:
            out = work / f"enwiki-{loss}-{tokens}-s{seed}"
            if not (out / "model.safetensors").exists():
                sh([exe, "pretrain", str(enwiki), "--loss", loss, "--tokens", str(tokens), *common,
                    "--seed", str(seed), "-o", str(out), "--force"])  # fmt: skip
            ev = sh_eval(exe, enwiki, out)
            record({"part": "enwiki", "seed": seed, "loss": loss, "tokens": tokens, **ev})
        if "b3" in skip:
            continue
        arith = work / f"arith-s{seed}.npz"
        if not arith.exists():
            sh([exe, "data", "--source", "arith", "--arith-problems", "40000", "--seed", str(seed), "-o", str(arith),
                "--vocab", str(work / f"arith-s{seed}.vocab.json"), "-q"])  # fmt: skip
        for loss in ("ce", "ce-pause", "cyb-ap", "cyb-va", "cyb-dp"):
            out = work / f"arith-{loss}-s{seed}"
            if not (out / "model.safetensors").exists():
                sh([exe, "pretrain", str(arith), "--loss", loss, "--tokens", str(args.arith_tokens), *common,
                    "--seed", str(seed), "-o", str(out), "--force"])  # fmt: skip
            ev = sh_eval(exe, arith, out)
            record({"part": "arith", "seed": seed, "loss": loss, "tokens": args.arith_tokens, **ev})
    (work / "acceptance.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"# runs in {work}", flush=True)


def sh_eval(exe, tokens, run) -> dict:
    metrics = Path(run) / "metrics.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([exe, "eval", str(tokens), str(run), "--metrics", str(metrics), "--force", "-j", "1", "-o",
                    os.devnull, "--windows", str(EVAL_WINDOWS)], check=True, env=env, capture_output=True)  # fmt: skip
    rec = json.loads(metrics.read_text())["checkpoints"][0]
    keep = ("bpc_marginal", "bpc_greedy", "mean_pauses", "expected_pauses", "compute_per_token", "accuracy",
            "exact_match", "answer_pauses", "operand_pauses")  # fmt: skip
    out = {k: rec[k] for k in keep if k in rec}
    out["classes"] = {k: round(v["mean_pauses"], 3) for k, v in rec["classes"].items()}
    return out


if __name__ == "__main__":
    main()

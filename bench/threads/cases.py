"""One workload per executable with a parallel region (Numba prange, nogil kernels on threads, torch).

Each case: `setup` (shell, run once in a scratch folder) and `command` (shell, run in a fresh
sub-folder of it, inputs under ..); `{j}` is replaced by nothing (the default thread count) or by
`-j 1`. Workloads are the tools' demo or benchmark runs cut to seconds, so that a default-vs-`-j 1`
table for every tool fits in a few minutes. `interrupt` is a job long enough to be interrupted
(bench/threads/interrupts.py, tests/contract/test_interrupts.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Case:
    tool: str
    region: str  # what runs in parallel
    setup: str
    command: str


CASES = [
    Case(
        "pls-test",
        "Numba prange over permutations + BLAS GEMMs",
        "pls-test sim --geometry toeplitz0.5 -n 215 -p 100 --seed 1 -o tec.csv",  # Tecator's shape
        "pls-test test ../tec.csv -k 3 --method all --perms 199 {j} -q > r.jsonl",
    ),
    Case(
        "irt-fit",
        "Numba prange over items (MML), torch (VI)",
        "irt-sim draw --profile mmlu -J 200 -N 40 --seed 1 -o d.npz",
        "irt-fit fit ../d.npz --out-dir fit {j} -q && irt-fit fit ../d.npz --method vi --steps 100 --out-dir vi {j} -q",
    ),
    Case(
        "cbf-sim",
        "nogil Numba particle filters on a thread pool",
        "cbf-sim task --seed 1 -o task.csv",
        "cbf-sim agents ../task.csv --agent pf-hpl --population healthy:8,vol-blind:8 --particles 2000 -o a.csv {j}",
    ),
    Case(
        "cbf-fit",
        "nogil Numba CBF filters on a thread pool",
        "cbf-sim task --seed 1 | cbf-sim agents --population healthy:6,vol-blind:6 --seed 2 -o a.csv",
        "cbf-fit fit ../a.csv --restarts 1 -o p.csv {j}",
    ),
    Case(
        "concord-plan",
        "Numba prange over candidate plans",
        "concord-plan fixtures fx -q",
        "concord-plan plan ../fx/models/llama-70b-32k.yaml ../fx/clusters/h100-80gb-1024.yaml "
        "--space ../fx/spaces/long-context.yaml -q {j}",
    ),
    Case(
        "cuvet-assign",
        "Numba prange over features and rows",
        "cuvet-assign gen synthetic --n 20000 -o s.parquet -q",
        "cuvet-assign fit ../s.parquet --treatment treatment --value conversion --arm-costs 0,1,2,3,4 "
        "--cost-on-outcome --budget-frac 0.4 --bayes -o m.json {j}",
    ),
    Case(
        "dar-backdoor",
        "Numba prange over windows",
        "true",
        "dar-backdoor discover --dataset synthetic --limit 2000 --budget 20 --rank entropy --top 1 {j}",
    ),
    Case(
        "chess-wm",
        "torch intra-op threads, Numba prange (data)",
        "chess-wm random --games 100 --max-plies 40 -o rand -q > /dev/null",
        "chess-wm train ../rand -o run --arch gdn --size d64 --steps 10 --batch-size 32 --lr 3e-3 --warmup 2 -q {j}",
    ),
    Case(
        "casper-solve",
        "torch intra-op threads",
        "casper-solve gen warcraft --size 8 --n 48 --n-test 10 -o maps.npz > /dev/null",
        "casper-solve train ../maps.npz --method casper --epochs 1 -o model.safetensors {j} > /dev/null",
    ),
    Case(
        "nte-encode",
        "torch intra-op threads",
        "nte-encode zoo --arch pcnn-p4c8 --seeds 0 --train-size 1000 --epochs 1 -o zoo -q > /dev/null && "
        "nte-encode key zoo/pcnn-p4c8-s0.safetensors -o key.npz > /dev/null",
        "nte-encode encode --dataset fashion-mnist:test --limit 300 --key ../key.npz --psnr 10 -o c.npz {j} > /dev/null",
    ),
    Case(
        "cyb-train",
        "torch intra-op threads",
        "cyb-train data --source lee -o t.npz -q > /dev/null",
        "cyb-train pretrain ../t.npz --loss ce --steps 40 -o run -q {j} > /dev/null",
    ),
    Case(
        "craft-finetune",
        "Numba prange (interaction events); torch held at one thread",
        "craft-finetune demos --suite hwy-mini -o demos.npz -q > /dev/null",
        "craft-finetune pretrain ../demos.npz --steps 300 -o bc.safetensors -q {j} > /dev/null",
    ),
    Case(
        "autoscale-mix",
        "Numba prange (scene featurisation), faiss",
        "true",
        "autoscale-mix pools -o pools --real 1000 --synth 6000 -q {j} > /dev/null",
    ),
    Case(
        "cita-sim",
        "Numba prange over rollouts",
        "cita-data bfcl --split train --limit 60 -o t.jsonl -q && cita-sim fit t.jsonl -o g.npz -q"
        " && cita-sim sample --graph g.npz -n 500 -o s.jsonl -q",
        "cita-sim value ../s.jsonl --graph ../g.npz -R 20000 -o v.jsonl -q {j}",
    ),
    Case(
        "methodkit-sim",
        "Numba prange over scenes (batched highway simulator)",
        'echo \'{"seed": 1, "scenes": [{"family": "cruise-dense", "count": 200}]}\' > suite.json',
        "methodkit-sim rollout ../suite.json --policy expert -o r.csv -q {j}",
    ),
]

# Executables without a default thread count to compare (said in the table).
NOT_MEASURED = {
    "gbdt-poison": "default is -j 1 already (LightGBM's OpenMP spin-waits; documented in its --help)",
    "clapping-train": "no -j: the simulated stages pin torch to one thread each",
    "methodkit-data": "no parallel region",
    "mcd-distill": "no -j: small transformers, torch held at one thread",
    "causal-spatial": "no -j: MuJoCo rendering and serial item generation",
    "cow-simulate": "no -j: MuJoCo rollouts one item at a time",
    "cita-data": "no -j: JSON import and replay",
    "cita-train": "no -j: small MLP, torch held at one thread",
    "cita-rank": "no -j: one batched forward pass",
    "cita-eval": "no -j: episodes replayed one at a time",
    "vesper-eval": "no -j: MuJoCo scenes simulated and scored one at a time",
    "irt-sim": "-j only on `sweep`, whose fits are irt-fit's (measured above)",
    "cure-unlearn": "default is -j 1 already (small MLP updates, torch held at one thread; -j N asks for more)",
}


@dataclass(frozen=True)
class Job:
    """A job that runs for minutes unless interrupted: `setup` (shell, in the scratch folder), then
    `argv` (run directly, not through a shell, so that SIGINT reaches the tool itself)."""

    tool: str
    setup: str
    argv: tuple
    resume_state: tuple = ()  # what an interrupted run keeps on purpose, so that rerunning it continues


INTERRUPT_JOBS = [
    Job(
        "pls-test",
        "pls-test sim --geometry toeplitz0.5 -n 215 -p 100 --seed 1 -o tec.csv",
        ("pls-test", "test", "tec.csv", "-k", "3", "--method", "cvq2-perm", "--perms", "200000", "-o", "out.json"),
    ),
    Job(
        "irt-fit",
        "irt-sim draw --profile mmlu -J 200 -N 40 --seed 1 -o d.npz",
        ("irt-fit", "fit", "d.npz", "--method", "mcmc", "--draws", "200000", "--out-dir", "out"),
    ),
    Job("irt-sim", "true", ("irt-sim", "draw", "--profile", "mmlu", "-J", "20000", "-N", "4000", "-o", "out.npz")),
    Job(
        "cbf-sim",
        "cbf-sim task --seed 1 -o task.csv",
        (
            "cbf-sim",
            "agents",
            "task.csv",
            "--agent",
            "pf-hpl",
            "--population",
            "healthy:4000",
            "--particles",
            "20000",
            "-o",
            "out.csv",
        ),
    ),
    Job(
        "cbf-fit",
        "cbf-sim task --seed 1 | cbf-sim agents --population healthy:40,vol-blind:40 --seed 2 -o a.csv",
        (
            "cbf-fit",
            "fit",
            "a.csv",
            "--model",
            "pf-hpl",
            "--particles",
            "5000",
            "--evaluations",
            "1000",
            "-o",
            "out.csv",
        ),
    ),
    Job(
        "chess-wm",
        "chess-wm random --games 50 --max-plies 20 -o rand -q > /dev/null",
        ("chess-wm", "train", "rand", "-o", "out", "--arch", "gdn", "--size", "d64", "--steps", "1000000"),
    ),
    Job(
        "casper-solve",
        "casper-solve gen warcraft --size 8 --n 96 --n-test 20 -o maps.npz > /dev/null",
        ("casper-solve", "train", "maps.npz", "--method", "casper", "--epochs", "100000", "-o", "out.safetensors"),
    ),
    Job(
        "nte-encode",
        "true",
        (
            "nte-encode",
            "zoo",
            "--arch",
            "pcnn-p4c8",
            "--seeds",
            "0",
            "--train-size",
            "4000",
            "--epochs",
            "100000",
            "-o",
            "out",
        ),
        resume_state=("out",),
    ),
    Job(
        "gbdt-poison",
        "true",
        (
            "gbdt-poison",
            "attack",
            "--dataset",
            "credit-g",
            "--budget",
            "0.1",
            "--eps",
            "4",
            "--iters",
            "1000000",
            "-o",
            "out.csv",
        ),
        resume_state=("out.csv.partial.json",),
    ),
    Job(
        "clapping-train",
        "true",
        (
            "clapping-train",
            "run",
            "--task",
            "digits",
            "--stages",
            "4",
            "--algo",
            "clapping-fu",
            "--steps",
            "10000000",
            "--backend",
            "sim",
            "-o",
            "out",
        ),
        resume_state=("out",),
    ),
    Job(
        "dar-backdoor",
        "true",
        (
            "dar-backdoor",
            "discover",
            "--dataset",
            "fashion-mnist",
            "--budget",
            "2000",
            "--rank",
            "entropy",
            "-o",
            "out.csv",
        ),
    ),
    Job(
        "cuvet-assign",
        "cuvet-assign gen synthetic --n 400000 -o s.parquet -q",
        (
            "cuvet-assign",
            "fit",
            "s.parquet",
            "--treatment",
            "treatment",
            "--value",
            "conversion",
            "--arm-costs",
            "0,1,2,3,4",
            "--cost-on-outcome",
            "--budget-frac",
            "0.4",
            "--bayes",
            "-o",
            "out.json",
        ),
    ),
    Job(
        "concord-plan",
        "concord-plan fixtures fx -q",
        (
            "concord-plan",
            "verify",
            "fx/models/mixtral-8x7b.yaml",
            "fx/models/mixtral-8x7b.seq_x2.yaml",
            "fx/clusters/h100-80gb-256.yaml",
            "--space",
            "fx/spaces/sweep.yaml",
            "--trials",
            "100000",
            "-o",
            "out.json",
        ),
    ),
    Job(
        "methodkit-sim",
        'echo \'{"seed": 1, "scenes": [{"family": "cruise-dense", "count": 4000}]}\' > suite.json',
        ("methodkit-sim", "rollout", "suite.json", "--policy", "expert", "-o", "out.csv"),
    ),
    Job(
        "cita-sim",
        "cita-data bfcl --split train --limit 60 -o t.jsonl && cita-sim fit t.jsonl -o g.npz"
        " && cita-sim sample --graph g.npz -n 2000 -o s.jsonl",
        ("cita-sim", "value", "s.jsonl", "--graph", "g.npz", "-R", "2000000", "-o", "out.jsonl"),
    ),
    Job(
        "cita-train",
        "cita-data bfcl --split train --limit 60 -o t.jsonl && cita-sim fit t.jsonl -o g.npz",
        ("cita-train", "t.jsonl", "--graph", "g.npz", "--synthetic", "200", "-R", "32", "--epochs", "100000", "-o", "cim"),
    ),
    Job(
        "cita-eval",
        "cita-data bfcl --split train --limit 20 -o t.jsonl && cita-sim fit t.jsonl -o g.npz",
        ("cita-eval", "--policy", "judge", "--policy", "judge", "--policy", "judge", "--graph", "g.npz",
         "--distractors", "40", "-o", "out.json"),
    ),
    Job(
        "cyb-train",
        "cyb-train data --source lee -o t.npz",
        ("cyb-train", "pretrain", "t.npz", "--loss", "cyb-va", "--steps", "1000000", "-o", "run"),
    ),
    Job(
        "mcd-distill",
        "mcd-distill data --task mix -o mix.npz",
        ("mcd-distill", "teacher", "mix.npz", "--preset", "small", "--steps", "1000000", "-o", "teacher"),
        resume_state=("teacher",),  # the run folder `--resume` continues from
    ),
    Job(
        "craft-finetune",
        "craft-finetune demos --suite hwy-mini -o demos.npz",
        ("craft-finetune", "pretrain", "demos.npz", "--steps", "10000000", "-o", "bc.safetensors"),
    ),
    Job(
        "cure-unlearn",
        "cure-unlearn collect --scale 0.1 --chunk 40 --behaviour cpg -o d.npz",
        ("cure-unlearn", "train", "d.npz", "--steps", "10000000", "--hidden", "32", "-o", "m.safetensors"),
        resume_state=("m.partial.safetensors", "m.partial.json"),  # what `train --resume` continues from
    ),
    Job("autoscale-mix", "true", ("autoscale-mix", "pools", "-o", "pools", "--real", "3000", "--synth", "30000")),
    Job(
        "causal-spatial",
        "true",
        ("causal-spatial", "generate", "--per-task", "5000", "--size", "64", "-o", "bench"),
    ),
    Job(
        "cow-simulate",
        "causal-spatial generate --per-task 25 --size 64 -o bench",
        ("cow-simulate", "--bench", "bench", "-o", "cow"),
    ),
    Job("vesper-eval", "true", ("vesper-eval", "generate", "--pairs", "5000", "--no-video", "-o", "bench")),
]

# Executables without a job worth interrupting.
NO_INTERRUPT_JOB = {
    "methodkit-data": "copies a bundled table in well under a second",
    "cita-data": "imports and replays a BFCL category in about a second",
    "cita-rank": "scores a candidates file in one batched forward pass (seconds)",
}


def finish(table: list[str], notes: list[str], output: str, every_case: bool) -> None:
    """Print the notes under the table (already printed line by line). A run over every case rewrites
    `output`; a run over some cases replaces their rows in it and says so under the table."""
    print("\n".join(notes))
    path = Path(output)
    if every_case:
        path.write_text("\n".join(table + notes) + "\n")
        return
    if not path.exists():
        return
    fresh = {line.split()[0]: line for line in table[1:]}
    measured = ", ".join(fresh)
    old = path.read_text().splitlines()
    lines = [fresh.pop(line.split()[0], line) if line.strip() else line for line in old]
    end = next((i for i, line in enumerate(lines) if not line.strip()), len(lines))
    lines[end:end] = list(fresh.values())  # tools new to the table: their rows at its end
    load = next((n for n in notes if "load average" in n), "")
    lines.append(f"re-measured later: {measured} ({load.strip()})")
    path.write_text("\n".join(lines) + "\n")

"""cita-train: build pairs from behaviour, the simulator and a judge, and train the CIM."""

from __future__ import annotations

from methodkit.cli._cita_train_options import train_options
from methodkit.cli._common import DemoStep, Run, common_options, input_argument, tool_command
from methodkit.cli._endpoint_options import endpoint_options
from methodkit.tools.cita.judge import BASELINES

PROG = "cita-train"

DEMO = [
    DemoStep(
        "cita-data bfcl --limit 20 --split train > t.jsonl && cita-sim fit t.jsonl -o g.npz && "
        "cita-train t.jsonl --graph g.npz --synthetic 50 --epochs 2 -R 32 -o cim -q && tr -d '\\n' < cim/cim.json",
        "BFCL v4 multi_turn_base (bfcl-eval)",
        "train.val_pair_acc",
        "held-out pair accuracy",
    ),
]


@tool_command(name=PROG)
@input_argument()
@train_options
@endpoint_options(BASELINES, default_model="offline")
@common_options("output", "seed", "device", "force", "meta", "quiet", "verbose", output_kind="folder")
def main(input, **o):
    """Train the Comparative Inference Model (CIM) from paired signals.

    Pairs share a context (task, history) and compare two candidate next calls. B: the logged call of a
    successful trajectory beats each of six generated negatives (other_tool, arg_swap, premature, repeat,
    ungrounded, end_turn). S: the simulator's values of every candidate pair, y = σ(ΔV/0.05), weighted by
    the Monte-Carlo signal-to-noise, on real and synthetic contexts. L: a judge in both A/B orders
    (--model: an OpenAI-compatible server, cmd:PROGRAM, or the built-in 'offline' judge). The MLP
    f(c,a) on [e_c, e_a, e_c⊙e_a, |e_c−e_a|, 16 structural features] is trained with the pairwise BCE of
    every source plus a pointwise calibration term toward V_sim; the state with the best held-out-task
    pair accuracy is kept. -o DIR gets cim.safetensors, cim.json, graph.npz, graph.json, log.csv.

    --ranker gbdt trains the fast baseline instead: each context's candidates form one group, every
    pair gives Borda points (a gets λ·w·y, b gets λ·w·(1−y)), the group's candidates are graded by the
    dense rank of their points, and LightGBM lambdarank (--trees rounds, one thread) learns f on the
    same features; -o DIR gets cim.lgb.txt (LightGBM's text format) in place of cim.safetensors and no
    log.csv. cim.json records the ranker, and cita-rank and cita-eval dispatch on it. (--ranker, not
    --model: --model names the judge endpoint.) Its σ(f) is a ranking score, not a calibrated value.

    --device places the MLP's training (model, features and pairs) on torch's CPU or CUDA device; auto
    takes CUDA when torch sees one, else the CPU; --device cuda without one exits 1 before any pair is built.
    cim.json's train.device records where it ran; the saved model is the same file format either way.
    The simulator values (source S) and --ranker gbdt run on the CPU whatever --device is. On the CPU the
    model is identical for --device cpu and auto; CUDA's kernels round differently, so a CUDA-trained
    model is close to, not bit-identical with, the CPU one.

    \b
    EXAMPLES
      cita-train train.jsonl --graph graph.npz -o cim
      cita-train train.jsonl --graph graph.npz --sources B -o cim-b
      cita-train train.jsonl --graph graph.npz --ranker gbdt -o cim-gbdt
      cita-train train.jsonl --graph graph.npz --model openai:qwen3-8b --base-url http://127.0.0.1:8080/v1 -o cim
      cita-train train.jsonl --graph graph.npz --save-pairs pairs.parquet -o cim
      cita-train train.jsonl --graph graph.npz --resume -o cim
      cita-train train.jsonl --graph graph.npz --device cuda -o cim

    \b
    NOTES
      The judge model is --model (default: the built-in offline judge); its key is $OPENAI_API_KEY.
      A judge endpoint that fails after its retries falls back to the offline judge for those pairs
      (judge_source=offline-fallback, counted in cim.json) unless --judge-strict.
      Early stopping is a selection: every epoch is run, the best held-out epoch is kept.
      The simulator values are checkpointed chunk by chunk in DIR/pairs.ckpt.npz (removed on success);
      --resume continues an interrupted run from it (same pairs as an uninterrupted run; a checkpoint of
      other data or settings is refused), and judge verdicts come back from core/endpoint's cache.

    \b
    EXIT STATUS
      0  success
      1  failure while running (non-finite loss; a judge failure under --judge-strict; --device cuda
         without a CUDA device)
      2  bad usage or bad input (malformed JSONL, unknown --sources, an existing output without --force,
         a --resume checkpoint of another job)
      130  interrupted
    """
    from pathlib import Path

    from methodkit.cli import _cita_train_options as opts
    from methodkit.cli._cita_io import read_records
    from methodkit.core.errors import UsageError

    run = Run.from_context()
    chosen = opts.chosen_sources(o["sources"])
    tasks = read_records(run, input, "trajectory")
    if run.output == "-":
        raise UsageError("pass the model folder with -o DIR")
    folder = Path(run.output)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)  # the files inside are claimed, and renamed in only at the end
    try:
        opts.train(run, folder, tasks, chosen, o)
    except BaseException:
        if created and not any(folder.iterdir()):
            folder.rmdir()
        raise

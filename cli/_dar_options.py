"""dar-backdoor's option groups: the data and rule options several verbs share, then one group per verb."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, OutputPath, common_options, option_group

# make demo's steps (cli/dar_backdoor.py exposes them as DEMO)
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

OPS = click.Choice(["spatial", "frequency", "whitened"])
RANKS = click.Choice(["cost", "entropy", "conflict", "isolation", "reach", "extent"])
DATASETS = ["fashion-mnist", "mnist5k", "synthetic"]
TARGET = click.option("--target", type=int, default=0, show_default=True, help="Target class.")
BUDGET = click.option("--budget", type=float, default=0.01, show_default=True,
                      help="Relabels: a count, or a share if < 1.")  # fmt: skip
CLASSES = click.option("--classes", type=click.IntRange(min=2), default=None, help="Class count [max label + 1].")
SUPPORT = click.option("--support", nargs=2, type=float, default=(0.005, 0.03), show_default=True,
                       help="Dense support LO HI.")  # fmt: skip
WINDOW = click.option("--window", type=click.IntRange(min=1), default=3, show_default=True,
                      help="Spatial window side w.")  # fmt: skip

dataset_options = option_group(
    click.option("--dataset", type=click.Choice(DATASETS), default=None, help="A built-in image set instead of INPUT."),
    click.option("--split", type=click.Choice(["train", "test"]), default="train", show_default=True,
                 help="Split of a built-in set."),  # fmt: skip
    click.option("--limit", type=click.IntRange(min=1), default=None, help="Use the first N images."),
)


def rule_options(help: str):
    """--rules PATH and --rule-index N, shared by the verbs that use one discovered rule."""
    return option_group(
        click.option("--rules", "rules_path", default=None, metavar="PATH", help=help),
        click.option("--rule-index", type=click.IntRange(min=0), default=0, show_default=True),
    )


discover_options = option_group(
    click.option("--op", type=OPS, default="spatial", show_default=True,
                 help="Subspaces: pixel windows, DCT coefficient blocks, or whitened principal directions of the "
                 "low-frequency DCT band."),  # fmt: skip
    WINDOW,
    click.option("--block", type=click.IntRange(min=1), default=2, show_default=True, help="DCT block side b."),
    click.option("--components", type=click.IntRange(min=1), default=16, show_default=True,
                 help="Whitened: leading band principal directions searched."),  # fmt: skip
    click.option("--dims", type=click.IntRange(1, 2), default=1, show_default=True,
                 help="Whitened: directions per subspace (1 or 2)."),  # fmt: skip
    click.option("--scale", type=click.IntRange(min=1), default=1, show_default=True,
                 help="Spatial windows on the image average-pooled by SCALE x SCALE blocks."),  # fmt: skip
    click.option("--xi", type=click.IntRange(min=2), default=None,
                 help="Levels per coordinate [4 spatial, 6 frequency and whitened]."),  # fmt: skip
    SUPPORT,
    click.option("--min-entropy", type=float, default=0.5, show_default=True, help="Least label entropy / log K."),
    TARGET,
    BUDGET,
    click.option("--top", type=click.IntRange(min=1), default=20, show_default=True, help="Rules to emit."),
    click.option("--rank", type=RANKS, default=None,
                 help="Order: cheapest trigger, most class-blind, fewest conflicting members, fewest near-duplicates "
                 "per member, longest cell in z units (reach) or in pixel L2 units (extent) first "
                 "[cost; extent for whitened]."),  # fmt: skip
    click.option("--margin", type=click.FloatRange(min=0, min_open=True), default=None,
                 help="Isolation margin (L2 in the subspace) [0.5 spatial, 1.0 frequency]."),  # fmt: skip
    click.option("--kappa", type=float, default=0.5, show_default=True, help="Operator strength for the cost."),
    click.option("--discover", "method", type=click.Choice(["clique", "kmeans"]), default="clique", show_default=True,
                 help="Grid cells, or balls around k-means centres (spatial)."),  # fmt: skip
    click.option("--k", type=click.IntRange(min=2), default=32, show_default=True, help="k-means centres per window."),
    common_options("output", "force", "seed", "threads", "device", "meta", "quiet", "verbose"),
)

poison_options = option_group(
    TARGET,
    BUDGET,
    CLASSES,
    click.option("--random", "random_control", is_flag=True,
                 help="Random-relabel control: the same count of random non-target images (no --rules)."),  # fmt: skip
    click.option("--labels-out", type=OutputPath(), metavar="PATH", default=None,
                 help="Also write the whole poisoned label vector (NPY)."),  # fmt: skip
    click.option("--manifest", type=OutputPath(), metavar="PATH", default=None,
                 help="Write poison.json (count, pool, image hash) here."),  # fmt: skip
    common_options("output", "format", "force", "seed", "meta", "quiet", "verbose"),
)

apply_options = option_group(
    click.option("--kappa", type=float, default=0.5, show_default=True, help="0: cell centre, 1: minimal projection."),
    click.option("--blend", type=float, default=1.0, show_default=True, help="Partial application (0..1)."),
    common_options("output", "force", "meta", "quiet", "verbose"),
)

train_options = option_group(
    click.option("--labels", metavar="PATH", default=None, help="Poisoned labels (NPY/NPZ 'y') replacing the set's."),
    click.option("--teacher", metavar="MODEL", default=None, help="Clean KD from this teacher (true labels)."),
    click.option("--arch", type=click.Choice(["cnn-s", "cnn-xs", "resnet8"]), default="cnn-s", show_default=True),
    click.option("--width", type=click.IntRange(min=1), default=32, show_default=True, help="Channel scale w."),
    click.option("--epochs", type=float, default=6, show_default=True),
    click.option("--batch-size", type=click.IntRange(min=1), default=128, show_default=True),
    click.option("--lr", type=float, default=0.05, show_default=True),
    click.option("--temperature", type=float, default=4.0, show_default=True, help="KD temperature T."),
    click.option("--alpha", type=float, default=0.9, show_default=True, help="KD weight of the KL term."),
    click.option("--augment", default="", help="crop2, flip or crop2,flip."),
    click.option("--backbone", default="", metavar="torchscript:PATH",
                 help="Frozen TorchScript encoder + a trained linear head (linear probe) instead of --arch."),  # fmt: skip
    CLASSES,
    common_options("output", "force", "seed", "threads", "device", "meta", "quiet", "verbose"),
)

eval_options = option_group(
    click.option("--model", "model_path", default=None, metavar="MODEL", help="A model from train (required)."),
    rule_options("Rules JSONL (the DAR trigger)."),
    click.option("--trigger", type=click.Choice(["rule", "badnets", "blended"]), default="rule", show_default=True),
    TARGET,
    click.option("--kappa", type=float, default=0.5, show_default=True),
    click.option("--blend", type=float, default=1.0, show_default=True),
    click.option("--control", "control_path", default=None, metavar="MODEL",
                 help="Random-relabel control model: also report its ASR and asr_minus_control."),  # fmt: skip
    click.option("--fail-below-asr", type=float, default=None, help="Exit 3 when the ASR is below this."),
    common_options("output", "format", "force", "threads", "meta", "quiet", "verbose", formats=("json",)),
)

run_options = option_group(
    click.option("--dataset", type=click.Choice(DATASETS), default="fashion-mnist", show_default=True),
    click.option("--limit", type=click.IntRange(min=1), default=20000, show_default=True, help="Train images."),
    click.option("--test-limit", type=click.IntRange(min=1), default=None, help="Test images [all]."),
    click.option("--op", type=OPS, default="whitened", show_default=True,
                 help="Rules' subspaces (discover --op); spatial and frequency did not implant (docs/dar.md)."),  # fmt: skip
    click.option("--rank", type=RANKS, default=None, help="Rule ranking [cost; extent for whitened]."),
    click.option("--components", type=click.IntRange(min=1), default=16, show_default=True,
                 help="Whitened: band principal directions searched."),  # fmt: skip
    click.option("--kappa", type=float, default=0.0, show_default=True, help="DAR operator strength (0: cell centre)."),
    click.option("--operator", type=click.Choice(["coordinate", "band-carrier"]), default="coordinate",
                 show_default=True, help="Test-time operator: T_kappa on the rule's coordinates, or (whitened rules) "
                 "band-carrier: all --components band coordinates set to the nearest target-labelled carrier's."),  # fmt: skip
    WINDOW,
    click.option("--scale", type=click.IntRange(min=1), default=1, show_default=True, help="Pooling of spatial windows."),
    click.option("--discover", "method", type=click.Choice(["clique", "kmeans"]), default="clique", show_default=True),
    click.option("--target", type=int, default=0, show_default=True),
    click.option("--budget", type=float, default=0.01, show_default=True),
    click.option("--epochs", type=float, default=6, show_default=True, help="Teacher and student epochs."),
    click.option("--width", type=click.IntRange(min=1), default=32, show_default=True),
    click.option("--alpha", default="0.9", show_default=True, help="KD weight(s) of the KL term: one student per value "
                 "of a comma list (the issue's sweep: 0.9,1.0,0.5)."),  # fmt: skip
    click.option("--augment", default="", help="crop2, flip or crop2,flip for teachers and students (default none)."),
    click.option("--margin", type=click.FloatRange(min=0, min_open=True), default=None, help="--rank isolation margin."),
    click.option("--batch-size", type=click.IntRange(min=1), default=128, show_default=True),
    SUPPORT,
    click.option("--kd-data", type=click.IntRange(min=0), default=0, show_default=True,
                 help="Distil on N clean train images disjoint from the poisoned ones (0: the same images)."),  # fmt: skip
    click.option("--seeds", type=click.IntRange(min=1), default=1, show_default=True,
                 help="Seeds: N of them, from --seed (0..N-1 by default)."),  # fmt: skip
    click.option("--methods", default="clean,dar,badnets,blended,random", show_default=True),
    click.option("--defenses", default="", help="Any of ft,fp,ss: fine-tuning, fine-pruning, Spectral Signatures."),
    common_options("output", "format", "force", "seed", "threads", "device", "meta", "quiet", "verbose"),
)

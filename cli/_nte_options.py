"""nte-encode's option groups, one per verb (declared here so cli/nte_encode.py stays a thin command)."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, OutputPath, common_options, option_group

# make demo's step (cli/nte_encode.py exposes it as DEMO)
DEMO = [
    DemoStep(
        "nte-encode zoo --arch pcnn-p4c8,pcnn-p4c16 --seeds 0 --train-size 4000 --epochs 2 -o zoo -q > /dev/null"
        " && nte-encode key zoo/pcnn-p4c8-s0.safetensors -o key.npz > /dev/null"
        " && nte-encode encode --dataset fashion-mnist:test --limit 1000 --key key.npz --psnr 10 -o c.npz > /dev/null"
        " && nte-encode eval c.npz --clean-dataset fashion-mnist:test --limit 1000"
        " --auth zoo/pcnn-p4c8-s0.safetensors --unauth zoo/pcnn-p4c16-s0.safetensors | tail -1",
        "fashion-mnist (4k train, 1k test), 10 dB",
        "drop",
        "unauthorized accuracy drop",
    )
]

LAYOUTS = click.Choice(["shared", "patch"])

key_options = option_group(
    click.option("--stem-weight", type=click.Path(dir_okay=False), help="Raw stem: weight .npy (c_out,c_in,k,k)."),
    click.option("--stride", type=click.IntRange(min=1), help="Raw stem: stride."),
    click.option("--padding", type=click.IntRange(min=0), default=0, show_default=True, help="Raw stem: padding."),
    click.option("--norm-mean", type=float, multiple=True, help="Raw stem: per-channel mean (repeat per channel)."),
    click.option("--norm-std", type=float, multiple=True, help="Raw stem: per-channel std (repeat per channel)."),
    click.option("--tau", type=float, help="Relative threshold: rank = #{s_i > tau * s_1}."),
    click.option("--tau-abs", type=float, help="Absolute threshold (the official code's, 1e-2 there)."),
    click.option("--min-dim", type=click.IntRange(min=1), default=1, show_default=True,
                 help="Fallback dimension for a full-rank stem."),  # fmt: skip
    click.option("--strict", is_flag=True, help="Fail (exit 1) instead of falling back on a full-rank stem."),
    click.option("--mode", type=click.Choice(["svd", "jacobian"]), default="svd", show_default=True,
                 help="svd: null space of W'; jacobian (experimental): low-sensitivity eigenvectors of E[J^T J]."),  # fmt: skip
    click.option("--layer", type=click.Choice(["stem", "relu", "block1", "block2", "logits"]), default="relu",
                 show_default=True, help="Jacobian mode: the layer whose sensitivity defines the key."),  # fmt: skip
    click.option("--dataset", help="Jacobian mode: images the expectation runs over, NAME[:split]."),
    click.option("--data", "data_path", type=click.Path(dir_okay=True), help="Jacobian mode: images NPZ or PNG folder."),
    click.option("--limit", type=click.IntRange(min=1), default=512, show_default=True, help="Jacobian mode: images."),
    common_options("output", "seed", "force", "meta", "quiet", "verbose"),
)

encode_options = option_group(
    click.option("--key", "key_path", type=click.Path(dir_okay=False), help="Key file from 'nte-encode key' (required)."),
    click.option("--psnr", type=float, default=20.0, show_default=True, help="Target PSNR in dB (data range 1)."),
    click.option("--noise", type=click.Choice(["nes", "gaussian"]), default="nes", show_default=True,
                 help="nes, or the white-noise control."),  # fmt: skip
    click.option("--layout", type=LAYOUTS, default="shared", show_default=True,
                 help="shared: one z per image, the same N z at every patch (official code); patch: Z i.i.d. per patch."),  # fmt: skip
    click.option("--dataset", help="Encode a shipped image set instead of INPUT: NAME[:train|test]."),
    click.option("--limit", type=click.IntRange(min=1), help="Only the first N images."),
    click.option("--model", type=click.Path(dir_okay=False), help="Authorized model: its stem gives the certificate."),
    click.option("--png", "png_dir", type=OutputPath(folder=True),
                 help="Also write 8-bit PNGs (+ labels.txt, meta.json) to this folder; non-overlapping stems only."),  # fmt: skip
    common_options("output", "seed", "device", "threads", "force", "meta", "quiet", "verbose"),
)

eval_options = option_group(
    click.option("--auth", "auth", multiple=True, type=click.Path(dir_okay=False),
                 help="Authorized model(s) (.safetensors)."),  # fmt: skip
    click.option("--unauth", "unauth", multiple=True, type=click.Path(dir_okay=False), help="Unauthorized model(s)."),
    click.option("--clean", "clean_path", type=click.Path(dir_okay=False),
                 help="Clean images NPZ (x, y) in the same order."),  # fmt: skip
    click.option("--clean-dataset", help="Clean images from a shipped set: NAME[:split]."),
    click.option("--limit", type=click.IntRange(min=1), help="Only the first N images (with --clean-dataset)."),
    click.option("--transform", help="Apply to what models read: jpeg:75,resize:0.9,crop:0.9,brightness:0.1."),
    click.option("--fail-if-unauth-above", type=float,
                 help="Exit 3 when an unauthorized accuracy on NTE exceeds this."),  # fmt: skip
    common_options("output", "force", "meta", "quiet", "verbose"),
)

attack_options = option_group(
    click.option("--method", help="blur:SIGMA, median:3, jpeg:Q, pca[:K], wiener, geig[:K], denoiser[:K]."),
    click.option("--public", "public_path", type=click.Path(dir_okay=True),
                 help="Public clean images NPZ/PNG folder (wiener, geig, denoiser)."),  # fmt: skip
    click.option("--public-dataset", help="Public clean images from a shipped set, NAME[:split]."),
    click.option("--public-limit", type=click.IntRange(min=1), default=5000, show_default=True,
                 help="Public images used."),  # fmt: skip
    click.option("--key", "key_path", type=click.Path(dir_okay=False),
                 help="True key: report the subspace angle (geig)."),  # fmt: skip
    click.option("--clean", "clean_path", type=click.Path(dir_okay=True),
                 help="Clean images: report PSNR of the reconstruction."),  # fmt: skip
    click.option("--clean-dataset", help="Clean images from a shipped set, NAME[:split]."),
    click.option("--kernel", type=click.IntRange(min=1), default=4, show_default=True,
                 help="Patch size the attacker assumes."),  # fmt: skip
    click.option("--retrain", "retrain_model", type=click.Path(dir_okay=False),
                 help="Attacker's model: retrain its architecture on training data passed through the reconstruction."),  # fmt: skip
    click.option("--train-dataset", default="fashion-mnist:train", show_default=True, help="--retrain: training images."),
    click.option("--train-limit", type=click.IntRange(min=100), default=20000, show_default=True,
                 help="--retrain: images."),  # fmt: skip
    click.option("--epochs", type=click.IntRange(min=1), default=3, show_default=True,
                 help="--retrain / denoiser epochs."),  # fmt: skip
    click.option("--retrained-out", type=OutputPath(), help="--retrain: save the retrained model here."),
    click.option("--layout", type=LAYOUTS, default="shared", show_default=True,
                 help="denoiser: the noise layout it synthesises (the encoder's --layout)."),  # fmt: skip
    common_options("output", "seed", "force", "meta", "quiet", "verbose"),
)

spectrum_options = option_group(
    click.argument("models", nargs=-1, required=True, type=click.Path(dir_okay=False)),
    click.option("--data", "data_path", type=click.Path(dir_okay=False),
                 help="Clean images NPZ for snr_leak and the MC ratio."),  # fmt: skip
    click.option("--dataset", help="Clean images from a shipped set, NAME[:split]."),
    click.option("--limit", type=click.IntRange(min=1), default=256, show_default=True, help="Images used."),
    click.option("--psnr", type=float, default=10.0, show_default=True, help="PSNR at which snr_leak is computed."),
    click.option("--layout", type=LAYOUTS, default="shared", show_default=True,
                 help="Noise layout of the NTE noise used for the Monte-Carlo measures (the encoder's --layout)."),  # fmt: skip
    common_options("output", "format", "seed", "force", "meta", "quiet", "verbose"),
)

zoo_options = option_group(
    click.option("--dataset", default="fashion-mnist", show_default=True, help="Shipped image set to train on."),
    click.option("--arch", default="pcnn-p4c8,pcnn-p4c16,pcnn-p7c24,cnn3c16,cnn5s2c12,mlp", show_default=True,
                 help="Comma-separated architectures."),  # fmt: skip
    click.option("--seeds", default="0", show_default=True, help="Comma-separated seeds."),
    click.option("--train-size", type=click.IntRange(min=100), default=20000, show_default=True,
                 help="Training images."),  # fmt: skip
    click.option("--test-size", type=click.IntRange(min=100), default=10000, show_default=True,
                 help="Test images for clean accuracy."),  # fmt: skip
    click.option("--epochs", type=click.IntRange(min=1), default=3, show_default=True, help="Epochs."),
    click.option("--misalign-from",
                 help="Zoo name (e.g. pcnn-p4c8-s0): also train stems W_A + t E with the body retrained."),  # fmt: skip
    click.option("--t", "t_values", default="0,0.05,0.2,1", show_default=True, help="Misalignment levels t."),
    common_options("output", "format", "threads", "force", "meta", "quiet", "verbose", output_kind="folder"),
)


def write_npz(run, arrays: dict) -> None:
    """Write a verb's NPZ result to -o; stdout is refused (binary)."""
    from methodkit.core import io

    if run.output == "-":
        raise click.UsageError("this verb writes a binary NPZ: pass -o FILE.npz")
    io.write_arrays(run.output, arrays, force=run.force)


def encode_inputs(run, input: str, dataset: str | None, key_path: str | None, png_dir: str | None) -> tuple:
    """(images path or None, key) of encode, checked in the order users read them: a missing INPUT first,
    then the flags, then the key; the images themselves are read after."""
    from pathlib import Path

    from methodkit.core import io
    from methodkit.tools.nte import commands

    images = None if input == "-" and dataset else input
    if images and images != "-" and not Path(images).exists():
        io.require_input(images)
    if not key_path:
        raise click.UsageError("Missing option '--key' (a key file from 'nte-encode key')")
    if run.output == "-" and not png_dir:
        raise click.UsageError("this verb writes a binary NPZ: pass -o FILE.npz (or --png DIR)")
    key = commands.load_key(run.input_bytes, key_path)
    if png_dir and key.geometry["stride"] < key.geometry["kernel"]:
        raise click.UsageError("--png: an overlapping stem releases a patch tensor, not an image; its fold-averaged "
                               "view is lossy and not decodable (write the NPZ with -o)")  # fmt: skip
    return images, key

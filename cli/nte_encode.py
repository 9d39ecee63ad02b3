"""nte-encode: Non-Transferable Examples, recoding images so only one model reads them."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, OutputPath, Run, common_options, input_argument, tool_group

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


@tool_group(name="nte-encode")
def main():
    """Non-Transferable Examples: recode images so only the authorized model reads them.

    Catch-Only-One (arXiv 2510.10982): noise drawn inside the null space of the
    authorized model's first layer (its stem) leaves that model's outputs unchanged,
    while models whose stems are not aligned with it see the noise. Training-free and
    data-agnostic: `key` extracts the null space of the stem W' (pixel domain,
    normalisation folded in), `encode` adds noise Z N^T at a target PSNR (float32,
    not clipped; overlapping stems release the patch tensor, "flat mode"), `eval`
    measures accuracy and agreement of authorized and unauthorized models, `attack`
    tries to undo the recoding, `spectrum` measures the misalignment between stems,
    and `zoo` trains Fashion-MNIST models, since no weights can be fetched offline.

    \b
    EXAMPLES
      nte-encode zoo --arch pcnn-p4c8,pcnn-p4c16,cnn3c16 --seeds 0,1 -o zoo
      nte-encode key zoo/pcnn-p4c8-s0.safetensors -o key.npz
      nte-encode encode --dataset fashion-mnist:test --key key.npz --psnr 10 -o nte.npz
      nte-encode eval nte.npz --clean-dataset fashion-mnist:test \\
          --auth zoo/pcnn-p4c8-s0.safetensors --unauth zoo/pcnn-p4c8-s1.safetensors
      nte-encode attack nte.npz --method wiener --public-dataset fashion-mnist:train -o rec.npz
      nte-encode spectrum zoo/pcnn-p4c8-s0.safetensors zoo/pcnn-p4c8-s1.safetensors

    \b
    EXIT STATUS
      0  success
      1  failure while running (unencodable geometry, full-rank stem with --strict)
      2  bad usage or bad input (missing file, wrong shape, PSNR out of range, key mismatch)
      3  --fail-if-unauth-above: an unauthorized model kept more accuracy than allowed
      130  interrupted
    """


def _write_npz(run: Run, path: str, arrays: dict) -> None:
    from methodkit.core import io

    if path == "-":
        raise click.UsageError("this verb writes a binary NPZ: pass -o FILE.npz")
    io.write_arrays(path, arrays, force=run.force)


def _load_key(run: Run, path: str):
    from methodkit.core import io
    from methodkit.tools.nte.key import Key

    return Key.from_arrays(io.read_arrays(run.input_bytes(path)), path)


def _load_images(run: Run, path: str | None, dataset: str | None, limit: int | None, flag: str):
    from methodkit.core import io
    from methodkit.tools.nte import data

    if dataset:
        return data.from_dataset(dataset, limit)
    if not path:
        raise click.UsageError(f"give images with {flag} FILE.npz or a --dataset NAME[:split]")
    from pathlib import Path

    if Path(path).is_dir():
        from methodkit.tools.nte.pngio import read_png_dir

        x, y, _ = read_png_dir(path)
        return (x[:limit], None if y is None else y[:limit]) if limit else (x, y)
    x, y = data.from_arrays(io.read_arrays(run.input_bytes(path)), path)
    return (x[:limit], None if y is None else y[:limit]) if limit else (x, y)


@main.command("key")
@input_argument()
@click.option("--stem-weight", type=click.Path(dir_okay=False), help="Raw stem: weight .npy (c_out,c_in,k,k).")
@click.option("--stride", type=click.IntRange(min=1), help="Raw stem: stride.")
@click.option("--padding", type=click.IntRange(min=0), default=0, show_default=True, help="Raw stem: padding.")
@click.option("--norm-mean", type=float, multiple=True, help="Raw stem: per-channel mean (repeat per channel).")
@click.option("--norm-std", type=float, multiple=True, help="Raw stem: per-channel std (repeat per channel).")
@click.option("--tau", type=float, help="Relative threshold: rank = #{s_i > tau * s_1}.")
@click.option("--tau-abs", type=float, help="Absolute threshold (the official code's, 1e-2 there).")
@click.option(
    "--min-dim",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Fallback dimension for a full-rank stem.",
)
@click.option("--strict", is_flag=True, help="Fail (exit 1) instead of falling back on a full-rank stem.")
@click.option(
    "--mode",
    type=click.Choice(["svd", "jacobian"]),
    default="svd",
    show_default=True,
    help="svd: null space of W'; jacobian (experimental): low-sensitivity eigenvectors of E[J^T J].",
)
@click.option(
    "--layer",
    type=click.Choice(["stem", "relu", "block1", "block2", "logits"]),
    default="relu",
    show_default=True,
    help="Jacobian mode: the layer whose sensitivity defines the key.",
)
@click.option("--dataset", help="Jacobian mode: images the expectation runs over, NAME[:split].")
@click.option("--data", "data_path", type=click.Path(dir_okay=True), help="Jacobian mode: images NPZ or PNG folder.")
@click.option("--limit", type=click.IntRange(min=1), default=512, show_default=True, help="Jacobian mode: images.")
@common_options("output", "seed", "force", "meta", "quiet", "verbose")
def key_cmd(
    input, stem_weight, stride, padding, norm_mean, norm_std, tau, tau_abs, min_dim, strict, mode, layer, dataset,
    data_path, limit, **_,
):  # fmt: skip
    """Extract the key (null-space basis) of a model's stem: INPUT is a zoo model (.safetensors).

    With --mode jacobian (experimental, data-dependent) the key holds the eigenvectors of
    E[J_P^T J_P] below --tau (default 1e-3) x lambda_max, J_P the Jacobian of --layer with respect to
    one patch, estimated with Hutchinson probes over --dataset/--data images. At --layer stem it
    equals the SVD key; deeper layers add directions the model ignores on that data, so fidelity is
    measured by eval, not certified.
    """
    import numpy as np

    from methodkit.cli._common import warn
    from methodkit.core import io
    from methodkit.core.errors import DataError
    from methodkit.tools.nte.key import extract_key
    from methodkit.tools.nte.stem import Stem

    run = Run.from_context()
    if stem_weight:
        arrays = io.read_arrays(run.input_bytes(stem_weight))
        name = "arr_0" if stem_weight.endswith(".npy") else "weight"
        if name not in arrays:
            raise DataError(f"--stem-weight {stem_weight}: no array '{name}' (keys: {', '.join(arrays) or 'none'})")
        weight = np.asarray(arrays[name])
        if stride is None:
            raise click.UsageError("--stem-weight needs --stride")
        channels = weight.shape[1] if weight.ndim == 4 else 1
        stem = Stem(
            weight, stride, padding, tuple(norm_mean) or (0.0,) * channels, tuple(norm_std) or (1.0,) * channels
        )
    else:
        if input == "-":
            raise click.UsageError("give a model file (INPUT) or --stem-weight W.npy --stride S")
        if not input.endswith(".safetensors"):
            raise DataError(f"{input}: expected a zoo model (.safetensors with its .json sidecar)")
        from methodkit.tools.nte.zoo import load_model

        run.input_bytes(input)  # existence check and digest for --meta
        model = load_model(input)
        stem = model.stem_spec()
    if mode == "jacobian":
        from methodkit.tools.nte.jacobian import jacobian_key

        if stem_weight:
            raise click.UsageError("--mode jacobian needs a model (INPUT), not a raw --stem-weight")
        if tau_abs is not None:
            raise click.UsageError("--mode jacobian takes --tau (relative to lambda_max), not --tau-abs")
        images, _ = _load_images(run, data_path, dataset, limit, "--data")
        run.threads()
        key = jacobian_key(
            model, images, layer, tau=1e-3 if tau is None else tau, min_dim=min_dim, strict=strict, seed=run.seed
        )
    else:
        key = extract_key(stem, tau=tau, tau_abs=tau_abs, min_dim=min_dim, strict=strict)
    for message in key.warnings:
        warn("nte-encode key", message)
    if run.output == "-":
        raise click.UsageError("the key is a binary NPZ: pass -o KEY.npz")
    with io.atomic_write(run.output, force=run.force) as handle:
        handle.write(key.to_npz_bytes())
    run.emit_result({"key": run.output, **key.to_dict()}, output="-")


@main.command("encode")
@input_argument()
@click.option("--key", "key_path", type=click.Path(dir_okay=False), help="Key file from 'nte-encode key' (required).")
@click.option("--psnr", type=float, default=20.0, show_default=True, help="Target PSNR in dB (data range 1).")
@click.option(
    "--noise",
    type=click.Choice(["nes", "gaussian"]),
    default="nes",
    show_default=True,
    help="nes, or the white-noise control.",
)
@click.option(
    "--layout",
    type=click.Choice(["shared", "patch"]),
    default="shared",
    show_default=True,
    help="shared: one z per image, the same N z at every patch (official code); patch: Z i.i.d. per patch.",
)
@click.option("--dataset", help="Encode a shipped image set instead of INPUT: NAME[:train|test].")
@click.option("--limit", type=click.IntRange(min=1), help="Only the first N images.")
@click.option("--model", type=click.Path(dir_okay=False), help="Authorized model: its stem gives the certificate.")
@click.option(
    "--png",
    "png_dir",
    type=OutputPath(folder=True),
    help="Also write 8-bit PNGs (+ labels.txt, meta.json) to this folder; non-overlapping stems only.",
)
@common_options("output", "seed", "device", "threads", "force", "meta", "quiet", "verbose")
def encode_cmd(input, key_path, psnr, noise, layout, dataset, limit, model, png_dir, **_):
    """Encode images (INPUT: NPZ with x (N,[C,]H,W: uint8, or float in [0,1]) and optional y, or a PNG
    folder) under a key at a target PSNR.

    Writes a ciphertext NPZ (-o) and/or an 8-bit PNG folder (--png). PNGs are clipped to [0, 1]
    and rounded; the certificate and PSNR then include that residual (pass --model to measure it).
    --device cuda runs the non-overlapping encode with the CuPy twin (same noise stream);
    --device auto stays on the CPU until the twin is validated on a GPU. --layout shared (default)
    draws one z per image and adds the same N z to every patch, as the official code does (z of
    shape (B, k, 1)); --layout patch draws Z i.i.d. per patch (the issue's 2.3 text, an unmarked
    reading: the official code is the paper's method). Both are exact for the authorized model;
    shared hurts unauthorized models more (docs/nte.md compares them). Z is a counter-based
    ziggurat stream of (seed, image index), so a ciphertext does not depend on batch size or threads.

    \b
    EXAMPLES
      nte-encode encode --dataset fashion-mnist:test --key key.npz --psnr 10 -o nte.npz
      nte-encode encode images.npz --key key.npz --psnr 20 --png nte-png -o nte.npz
    """
    from pathlib import Path

    import numpy as np

    from methodkit.core import io
    from methodkit.tools.nte.encode import encode, feature_change_norm

    run = Run.from_context()
    images = None if input == "-" and dataset else input
    if images and images != "-" and not Path(images).exists():
        io.require_input(images)  # a missing INPUT is named first; then the flags; then the images are read
    if not key_path:
        raise click.UsageError("Missing option '--key' (a key file from 'nte-encode key')")
    if run.output == "-" and not png_dir:
        raise click.UsageError("this verb writes a binary NPZ: pass -o FILE.npz (or --png DIR)")
    key = _load_key(run, key_path)
    if png_dir and key.geometry["stride"] < key.geometry["kernel"]:
        raise click.UsageError(
            "--png: an overlapping stem releases a patch tensor, not an image; its fold-averaged view "
            "is lossy and not decodable (write the NPZ with -o)"
        )
    x, y = _load_images(run, images, dataset, limit, "INPUT")
    w_pixel = None
    if model:
        from methodkit.tools.nte.zoo import load_model

        stem = load_model(model).stem_spec()
        if stem.sha256() != key.stem_sha256:
            raise click.UsageError(f"--model {model}: its stem does not match the key (key made from another model)")
        w_pixel = stem.pixel_matrix()
    run.threads()
    # auto stays on the CPU: the CuPy twin has not been validated on a device yet (bench/nte/gpu.py)
    xp = None
    if run.params.get("device") == "cuda":
        from methodkit.core.backend import array_module

        xp = array_module(run.device())
    cipher = encode(x, key, psnr, seed=run.seed, noise=noise, w_pixel=w_pixel, xp=xp, layout=layout)
    summary = {"output": run.output, "noise": noise, "layout": layout, "psnr_target": psnr, "seed": run.seed,
               **cipher.summary()}  # fmt: skip
    meta = {"key_sha256": key.sha256(), "stem_sha256": key.stem_sha256, "psnr_target": psnr, "seed": run.seed,
            "noise": noise, "layout": layout}  # fmt: skip
    if run.output != "-":
        arrays = {"view": cipher.view, "alpha": cipher.alpha, "psnr": cipher.psnr}
        if cipher.certificate is not None:
            arrays["certificate"] = cipher.certificate
        arrays["x" if cipher.patches is None else "patches"] = cipher.x if cipher.patches is None else cipher.patches
        if y is not None:
            arrays["y"] = y
        arrays["key_sha256"] = np.frombuffer(key.sha256().encode(), dtype=np.uint8)
        arrays["stem_sha256"] = np.frombuffer(key.stem_sha256.encode(), dtype=np.uint8)
        _write_npz(run, run.output, arrays)
    if png_dir:
        from methodkit.tools.nte.encode import fit_to_range
        from methodkit.tools.nte.pngio import quantise, write_png_dir

        pixels = quantise(fit_to_range(x, cipher.x, key) if noise == "nes" else cipher.x)
        change = pixels / 255.0 - x
        mse = (change.reshape(len(x), -1) ** 2).mean(axis=1)
        g = key.geometry
        summary["png"] = png_dir
        summary["png_psnr_mean"] = float(np.mean(10 * np.log10(1 / mse)))
        summary["png_clipped_share"] = float(np.mean((cipher.x < 0) | (cipher.x > 1)))
        if w_pixel is not None:
            certificate = feature_change_norm(change, w_pixel, g["kernel"], g["stride"], g["padding"])
            summary["png_certificate_max"] = float(certificate.max())
            summary["png_certificate_mean"] = float(certificate.mean())
        write_png_dir(png_dir, pixels, y, {**meta, "psnr_float_mean": summary["psnr_mean"]}, force=run.force)
    run.emit_result(summary, output="-")


@main.command("eval")
@input_argument()
@click.option(
    "--auth", "auth", multiple=True, type=click.Path(dir_okay=False), help="Authorized model(s) (.safetensors)."
)
@click.option("--unauth", "unauth", multiple=True, type=click.Path(dir_okay=False), help="Unauthorized model(s).")
@click.option(
    "--clean", "clean_path", type=click.Path(dir_okay=False), help="Clean images NPZ (x, y) in the same order."
)
@click.option("--clean-dataset", help="Clean images from a shipped set: NAME[:split].")
@click.option("--limit", type=click.IntRange(min=1), help="Only the first N images (with --clean-dataset).")
@click.option("--transform", help="Apply to what models read: jpeg:75,resize:0.9,crop:0.9,brightness:0.1.")
@click.option("--fail-if-unauth-above", type=float, help="Exit 3 when an unauthorized accuracy on NTE exceeds this.")
@common_options("output", "force", "meta", "quiet", "verbose")
def eval_cmd(input, auth, unauth, clean_path, clean_dataset, limit, transform, fail_if_unauth_above, **_):
    """Evaluate models on clean vs NTE images (INPUT: a ciphertext NPZ); one JSON line per (model, condition)."""
    from pathlib import Path

    from methodkit.core import io
    from methodkit.core.errors import CheckFailed, DataError
    from methodkit.tools.nte.evaluate import evaluate, parse_transforms
    from methodkit.tools.nte.zoo import load_model

    run = Run.from_context()
    if Path(input).is_dir():  # a PNG ciphertext folder from encode --png
        import numpy as np

        from methodkit.tools.nte.pngio import read_png_dir

        view, _, meta = read_png_dir(input)
        cipher = {"view": view}
        if "stem_sha256" in meta:
            cipher["stem_sha256"] = np.frombuffer(meta["stem_sha256"].encode(), dtype=np.uint8)
    else:
        cipher = io.read_arrays(run.input_bytes(input))
    if "view" not in cipher:
        raise DataError(f"{input}: not an nte ciphertext (no 'view'); make one with 'nte-encode encode'")
    if not auth and not unauth:  # after reading INPUT, so a missing file is reported first
        raise click.UsageError("name at least one model with --auth or --unauth")
    x, y = _load_images(run, clean_path, clean_dataset, limit, "--clean")
    if y is None:
        raise DataError("clean data has no labels (y)")
    stem_hash = cipher["stem_sha256"].tobytes().decode() if "stem_sha256" in cipher else None
    models = {}
    for path in auth:
        model = load_model(path)
        if stem_hash is not None and model.stem_spec().sha256() != stem_hash:
            raise DataError(f"--auth {path}: the ciphertext was made with another model's key; list it with --unauth")
        models[Path(path).stem] = model
    for path in unauth:
        models[Path(path).stem] = load_model(path)
    condition = {"x": cipher["view"], "patches": cipher.get("patches"), "certificate": cipher.get("certificate")}
    rows = evaluate(
        models, {Path(p).stem for p in auth}, x, y, {Path(input).stem: condition}, parse_transforms(transform)
    )
    lines = "".join(io.dumps_json({**row.to_dict(), "transform": transform}) + "\n" for row in rows)
    with io.atomic_write(run.output, force=run.force) as handle:
        handle.write(lines.encode())
    run.write_meta()
    if fail_if_unauth_above is not None:
        worst = [r for r in rows if r.role == "unauthorized" and r.accuracy > fail_if_unauth_above]
        if worst:
            raise CheckFailed(f"{worst[0].model} keeps accuracy {worst[0].accuracy:.3f} > {fail_if_unauth_above}")


@main.command("attack")
@input_argument()
@click.option("--method", help="blur:SIGMA, median:3, jpeg:Q, pca[:K], wiener, geig[:K], denoiser[:K].")
@click.option(
    "--public",
    "public_path",
    type=click.Path(dir_okay=True),
    help="Public clean images NPZ/PNG folder (wiener, geig, denoiser).",
)
@click.option("--public-dataset", help="Public clean images from a shipped set, NAME[:split].")
@click.option("--public-limit", type=click.IntRange(min=1), default=5000, show_default=True, help="Public images used.")
@click.option("--key", "key_path", type=click.Path(dir_okay=False), help="True key: report the subspace angle (geig).")
@click.option(
    "--clean", "clean_path", type=click.Path(dir_okay=True), help="Clean images: report PSNR of the reconstruction."
)
@click.option("--clean-dataset", help="Clean images from a shipped set, NAME[:split].")
@click.option(
    "--kernel", type=click.IntRange(min=1), default=4, show_default=True, help="Patch size the attacker assumes."
)
@click.option(
    "--retrain",
    "retrain_model",
    type=click.Path(dir_okay=False),
    help="Attacker's model: retrain its architecture on training data passed through the reconstruction.",
)
@click.option("--train-dataset", default="fashion-mnist:train", show_default=True, help="--retrain: training images.")
@click.option(
    "--train-limit", type=click.IntRange(min=100), default=20000, show_default=True, help="--retrain: images."
)
@click.option("--epochs", type=click.IntRange(min=1), default=3, show_default=True, help="--retrain / denoiser epochs.")
@click.option("--retrained-out", type=OutputPath(), help="--retrain: save the retrained model here.")
@click.option(
    "--layout",
    type=click.Choice(["shared", "patch"]),
    default="shared",
    show_default=True,
    help="denoiser: the noise layout it synthesises (the encoder's --layout).",
)
@common_options("output", "seed", "force", "meta", "quiet", "verbose")
def attack_cmd(
    input, method, public_path, public_dataset, public_limit, key_path, clean_path, clean_dataset, kernel,
    retrain_model, train_dataset, train_limit, epochs, retrained_out, layout, **_,
):  # fmt: skip
    """Try to undo the recoding (INPUT: a ciphertext NPZ or PNG folder); writes reconstructed images NPZ.

    The output holds x and view (the reconstruction), y and the key's hashes when the input had
    them, so 'nte-encode eval' scores it like a ciphertext (encode -> attack -> eval). Everything
    (method value, --kernel against the image size, data, output) is checked before any work.

    denoiser trains a small residual conv network on public clean images plus synthetic noise in
    the geig subspace estimate, at the noise level measured from the ciphertexts, laid out as
    --layout says (one z per image, or per patch). --retrain MODEL
    trains a fresh model of MODEL's architecture on --train-dataset images passed through the same
    reconstruction and reports its accuracy on the reconstructed ciphertexts (labels needed).
    """
    from pathlib import Path

    import numpy as np

    from methodkit.core import io
    from methodkit.core.errors import DataError, UsageError
    from methodkit.tools.nte import attacks

    run = Run.from_context()
    if Path(input).is_dir():
        from methodkit.tools.nte.pngio import read_png_dir

        view, labels, _ = read_png_dir(input)
        cipher = {"view": view} if labels is None else {"view": view, "y": labels}
    else:
        cipher = io.read_arrays(run.input_bytes(input))
    if "view" not in cipher:
        raise DataError(f"{input}: not an nte ciphertext (no 'view'); make one with 'nte-encode encode'")
    view = cipher["view"]
    if not method:
        raise UsageError(
            "Missing option '--method' (blur:SIGMA, median:3, jpeg:Q, pca[:K], wiener, geig[:K], denoiser)"
        )
    # everything is read and checked before any reconstruction runs
    name, value = attacks.parse_method(method, view.shape[1:], kernel)
    if run.output == "-":
        raise UsageError("this verb writes a binary NPZ: pass -o FILE.npz")
    if retrained_out and not retrain_model:
        raise UsageError("--retrained-out needs --retrain MODEL")
    attacker = x_train = None
    if retrain_model:
        from methodkit.tools.nte import data
        from methodkit.tools.nte.zoo import load_model

        if "y" not in cipher:
            raise DataError(f"{input}: --retrain needs the ciphertext's labels (y) to score the retrained model")
        run.input_bytes(retrain_model)  # a missing file is named as such
        attacker = load_model(retrain_model)
        x_train, y_train = data.from_dataset(train_dataset, train_limit)
        if x_train.shape[1:] != view.shape[1:]:
            raise DataError(f"--train-dataset images have shape {x_train.shape[1:]}, ciphertexts {view.shape[1:]}")
    public = true_key = clean = None
    if name in ("wiener", "geig", "denoiser"):  # adaptive: need public clean data of the same domain
        if not public_path and not public_dataset:
            raise UsageError(f"--method {name} needs public clean data: --public FILE.npz or --public-dataset NAME")
        public, _ = _load_images(run, public_path, public_dataset, public_limit, "--public")
        if public.shape[1:] != view.shape[1:]:
            raise DataError(f"public images have shape {public.shape[1:]}, ciphertexts {view.shape[1:]}")
        true_key = _load_key(run, key_path) if key_path else None
    if clean_path or clean_dataset:
        clean, _ = _load_images(run, clean_path, clean_dataset, len(view), "--clean")
        if clean.shape[1:] != view.shape[1:] or len(clean) < len(view):
            raise DataError(
                f"--clean: {len(clean)} images of shape {clean.shape[1:]} for {len(view)} ciphertexts of shape "
                f"{view.shape[1:]}"
            )
    report: dict = {"method": method}
    run.threads()
    if name in attacks.FILTERS:

        def reconstruct(x):
            return attacks.FILTERS[name](x, value)

    elif name == "pca":
        subspace = attacks.pca_subspace(view, kernel, kernel, value or 0)
        report["k"] = subspace.shape[1]

        def reconstruct(x):
            return attacks.project_out(x, subspace, kernel, kernel)

    elif name == "wiener":
        reconstruct = attacks.wiener_fit(view, public, kernel, kernel)
    elif name == "geig":
        n = view.shape[1] * kernel * kernel
        k = value or (min(true_key.k, n) if true_key else n // 2)
        subspace = attacks.geig_subspace(view, public, kernel, kernel, k)
        report["k"] = k
        if true_key is not None and true_key.basis.shape[0] == subspace.shape[0]:
            report["min_principal_cos"] = attacks.smallest_principal_cosine(subspace, true_key.basis)

        def reconstruct(x):
            return attacks.project_out(x, subspace, kernel, kernel)

    else:
        from methodkit.tools.nte.learned import train_denoiser

        k = value or (true_key.k if true_key else None)
        with run.progress() as progress:
            reconstruct, info = train_denoiser(
                view, public, kernel, kernel, k=k, epochs=epochs, seed=run.seed, layout=layout, progress=progress
            )
        report.update(info)
    restored = reconstruct(view)
    if clean is not None:
        mse = ((restored - clean[: len(restored)]) ** 2).reshape(len(restored), -1).mean(axis=1)
        report["psnr_vs_clean"] = float(np.mean(10 * np.log10(1 / np.maximum(mse, 1e-12))))
    if retrain_model:
        from methodkit.tools.nte.learned import retrain
        from methodkit.tools.nte.zoo import accuracy, save_model

        with run.progress() as progress:
            model = retrain(attacker, reconstruct, x_train, y_train, epochs=epochs, seed=run.seed, progress=progress)
        labels = np.asarray(cipher["y"], dtype=np.int64)
        report["retrain"] = {
            "model": retrain_model,
            "arch": attacker.cfg.arch,
            "train_images": int(len(x_train)),
            "epochs": epochs,
            "original_accuracy_on_reconstruction": accuracy(attacker, restored, labels),
            "retrained_accuracy_on_reconstruction": accuracy(model, restored, labels),
        }
        if retrained_out:
            save_model(model, retrained_out, extra={"retrained_for": method})
    # x for image tools, view (and the key's hashes) so 'nte-encode eval' scores the reconstruction
    arrays = {"x": restored.astype(np.float32), "view": restored.astype(np.float32)}
    for passed_on in ("y", "key_sha256", "stem_sha256"):
        if passed_on in cipher:
            arrays[passed_on] = cipher[passed_on]
    _write_npz(run, run.output, arrays)
    run.emit_result({"output": run.output, **report}, output="-")


@main.command("spectrum")
@click.argument("models", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--data", "data_path", type=click.Path(dir_okay=False), help="Clean images NPZ for snr_leak and the MC ratio."
)
@click.option("--dataset", help="Clean images from a shipped set, NAME[:split].")
@click.option("--limit", type=click.IntRange(min=1), default=256, show_default=True, help="Images used.")
@click.option("--psnr", type=float, default=10.0, show_default=True, help="PSNR at which snr_leak is computed.")
@click.option(
    "--layout",
    type=click.Choice(["shared", "patch"]),
    default="shared",
    show_default=True,
    help="Noise layout of the NTE noise used for the Monte-Carlo measures (the encoder's --layout).",
)
@common_options("output", "format", "seed", "force", "meta", "quiet", "verbose")
def spectrum_cmd(models, data_path, dataset, limit, psnr, layout, **_):
    """Misalignment of the first model's key with each other model: CSV (leak, snr_leak, angles, HW gap).

    Same geometry: leak, snr_leak, mean cos^2 of the principal angles, Hoffman-Wielandt, Frobenius
    and spectral gaps (a stem with more channels is compared with zero rows added to the smaller).
    With --data/--dataset, for any geometry (Monte-Carlo on NTE noise of --layout): mc_ratio (gain
    on NTE noise / on white noise), noise_share (share of the noise in B's row space, with its chance
    level rank/n) and snr_mc (B's feature noise-to-signal at --psnr).
    """
    from pathlib import Path

    import pandas as pd

    from methodkit.tools.nte.key import extract_key
    from methodkit.tools.nte.spectrum import pair
    from methodkit.tools.nte.zoo import load_model

    run = Run.from_context()
    if len(models) < 2:
        raise click.UsageError("give two or more models: the first is the authorized one")
    stems = [(Path(p).stem, load_model(p).stem_spec()) for p in models]
    clean = None
    if data_path or dataset:
        clean, _ = _load_images(run, data_path, dataset, limit, "--data")
    name_a, stem_a = stems[0]
    key = extract_key(stem_a)
    rows = [
        pair(name_a, stem_a, nb, sb, key=key, clean=clean, psnr=psnr, seed=run.seed, layout=layout).to_dict()
        for nb, sb in stems[1:]
    ]
    run.emit_table(pd.DataFrame(rows))


@main.command("zoo")
@click.option("--dataset", default="fashion-mnist", show_default=True, help="Shipped image set to train on.")
@click.option(
    "--arch",
    default="pcnn-p4c8,pcnn-p4c16,pcnn-p7c24,cnn3c16,cnn5s2c12,mlp",
    show_default=True,
    help="Comma-separated architectures.",
)
@click.option("--seeds", default="0", show_default=True, help="Comma-separated seeds.")
@click.option("--train-size", type=click.IntRange(min=100), default=20000, show_default=True, help="Training images.")
@click.option(
    "--test-size",
    type=click.IntRange(min=100),
    default=10000,
    show_default=True,
    help="Test images for clean accuracy.",
)
@click.option("--epochs", type=click.IntRange(min=1), default=3, show_default=True, help="Epochs.")
@click.option(
    "--misalign-from", help="Zoo name (e.g. pcnn-p4c8-s0): also train stems W_A + t E with the body retrained."
)
@click.option("--t", "t_values", default="0,0.05,0.2,1", show_default=True, help="Misalignment levels t.")
@common_options("output", "format", "threads", "force", "meta", "quiet", "verbose", output_kind="unchecked")
def zoo_cmd(dataset, arch, seeds, train_size, test_size, epochs, misalign_from, t_values, **_):
    """Train the model zoo into the folder -o DIR; prints a CSV of clean accuracies."""
    from pathlib import Path

    import pandas as pd

    from methodkit.core.errors import UsageError
    from methodkit.core.outputs import check_output
    from methodkit.tools.nte import data
    from methodkit.tools.nte.zoo import build_zoo, parse_specs

    run = Run.from_context()
    folder = run.output
    if folder == "-":
        raise click.UsageError("pass the zoo folder with -o DIR")
    check_output(folder, folder=True, force=True)  # not a file; emptiness is checked below
    if Path(folder).exists() and any(Path(folder).iterdir()) and not run.force and not misalign_from:
        raise click.UsageError(f"{folder}: folder is not empty; pass --force to add to it")
    try:
        seed_list = [int(s) for s in seeds.split(",")]
        ts = tuple(float(t) for t in t_values.split(","))
    except ValueError:
        raise click.UsageError("--seeds and --t take comma-separated numbers") from None
    archs = parse_specs([a for a in arch.split(",") if a] if not misalign_from or arch else [])
    if not archs and not misalign_from:
        raise UsageError("--arch: name at least one architecture")
    # refused runs leave no folder behind: every name is checked before the folder is made
    trained = {f"{a}-s{s}" for a in archs for s in seed_list}
    if misalign_from and misalign_from not in trained and not (Path(folder) / f"{misalign_from}.safetensors").exists():
        raise UsageError(
            f"--misalign-from {misalign_from}: not in {folder} and not trained by this run (--arch x --seeds)"
        )
    x, y = data.from_dataset(f"{dataset}:train", train_size)
    xt, yt = data.from_dataset(f"{dataset}:test", test_size)
    run.threads()
    with run.progress() as progress:
        entries = build_zoo(
            x,
            y,
            xt,
            yt,
            archs,
            seed_list,
            folder,
            epochs=epochs,
            misalign_from=misalign_from,
            misalign_t=ts,
            progress=progress,
        )
    run.emit_table(pd.DataFrame([e.to_dict() for e in entries]), output="-")

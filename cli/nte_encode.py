"""nte-encode: Non-Transferable Examples, recoding images so only one model reads them."""

from __future__ import annotations

import click

from methodkit.cli import _nte_options as opts
from methodkit.cli._common import Run, input_argument, tool_group
from methodkit.cli._nte_options import DEMO  # noqa: F401  (make demo reads cli modules' DEMO)
from methodkit.tools.nte import commands  # cheap: its heavy imports are inside the functions


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
    WHAT IT PROTECTS AGAINST (figures and commands: docs/nte.md, "Threat model")
      protects   float32 ciphertexts read by a model whose stem is not the authorized one
                 (the authorized model's outputs are unchanged, to float rounding)
      does not   an adaptive reconstruction (attack --method wiener restores accuracy);
                 8-bit PNG release keeps less of the effect; JPEG or a brightness shift
                 breaks the authorized model too; white noise at the same PSNR costs an
                 unauthorized model about as much at 10 dB

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


@main.command("key")
@input_argument()
@opts.key_options
def key_cmd(input, stem_weight, stride, padding, norm_mean, norm_std, tau, tau_abs, min_dim, strict, mode, layer,
            dataset, data_path, limit, **_):  # fmt: skip
    """Extract the key (null-space basis) of a model's stem: INPUT is a zoo model (.safetensors).

    With --mode jacobian (experimental, data-dependent) the key holds the eigenvectors of
    E[J_P^T J_P] below --tau (default 1e-3) x lambda_max, J_P the Jacobian of --layer with respect to
    one patch, estimated with Hutchinson probes over --dataset/--data images. At --layer stem it
    equals the SVD key; deeper layers add directions the model ignores on that data, so fidelity is
    measured by eval, not certified.
    """
    from methodkit.cli._common import warn
    from methodkit.core import io

    run = Run.from_context()
    if not stem_weight and input == "-":
        raise click.UsageError("give a model file (INPUT) or --stem-weight W.npy --stride S")
    key = commands.make_key(run.input_bytes, input, stem_weight, stride, padding, norm_mean, norm_std, tau=tau,
                            tau_abs=tau_abs, min_dim=min_dim, strict=strict, mode=mode, layer=layer,
                            images=(data_path, dataset, limit), seed=run.seed, threads=run.threads)  # fmt: skip
    for message in key.warnings:
        warn("nte-encode key", message)
    if run.output == "-":
        raise click.UsageError("the key is a binary NPZ: pass -o KEY.npz")
    with io.atomic_write(run.output, force=run.force) as handle:
        handle.write(key.to_npz_bytes())
    run.emit_result({"key": run.output, **key.to_dict()}, output="-")


@main.command("encode")
@input_argument()
@opts.encode_options
def encode_cmd(input, key_path, psnr, noise, layout, dataset, limit, model, png_dir, **_):
    """Encode images (INPUT: NPZ with x (N,[C,]H,W: uint8, or float in [0,1]) and optional y, or a PNG
    folder) under a key at a target PSNR.

    Writes a ciphertext NPZ (-o) and/or an 8-bit PNG folder (--png). PNGs are clipped to [0, 1]
    and rounded; the certificate and PSNR then include that residual (pass --model to measure it).
    --device cuda runs the non-overlapping encode with the CuPy twin (same noise stream);
    --device auto stays on the CPU until the twin is validated on a GPU. --layout shared (default)
    draws one z per image and adds the same N z to every patch, as the official code does (z of
    shape (B, k, 1)); --layout patch draws Z i.i.d. per patch (the issue's 2.3 text). Both are exact
    for the authorized model. Z is a counter-based ziggurat stream of (seed, image index), so a
    ciphertext does not depend on batch size or threads.

    \b
    EXAMPLES
      nte-encode encode --dataset fashion-mnist:test --key key.npz --psnr 10 -o nte.npz
      nte-encode encode images.npz --key key.npz --psnr 20 --png nte-png -o nte.npz
    """
    from methodkit.tools.nte.encode import encode

    run = Run.from_context()
    images, key = opts.encode_inputs(run, input, dataset, key_path, png_dir)
    x, y = commands.load_images(run.input_bytes, images, dataset, limit, "INPUT")
    w_pixel = commands.certified_stem(model, key) if model else None
    run.threads()
    # auto stays on the CPU: the CuPy twin has not been validated on a device yet (bench/nte/gpu.py)
    xp = commands.array_module(run.device()) if run.params.get("device") == "cuda" else None
    cipher = encode(x, key, psnr, seed=run.seed, noise=noise, w_pixel=w_pixel, xp=xp, layout=layout)
    summary = {"output": run.output, "noise": noise, "layout": layout, "psnr_target": psnr, "seed": run.seed,
               **cipher.summary()}  # fmt: skip
    if run.output != "-":
        opts.write_npz(run, commands.cipher_arrays(cipher, key, y))
    if png_dir:
        summary.update(commands.write_png_release(png_dir, x, y, cipher, key, noise, layout, psnr, run.seed, w_pixel,
                                                  force=run.force))  # fmt: skip
    run.emit_result(summary, output="-")


@main.command("eval")
@input_argument()
@opts.eval_options
def eval_cmd(input, auth, unauth, clean_path, clean_dataset, limit, transform, fail_if_unauth_above, **_):
    """Evaluate models on clean vs NTE images (INPUT: a ciphertext NPZ); one JSON line per (model, condition)."""
    from methodkit.core import io
    from methodkit.core.errors import CheckFailed

    run = Run.from_context()
    cipher = commands.read_cipher(run.input_bytes, input, hashes=True)
    if not auth and not unauth:  # after reading INPUT, so a missing file is reported first
        raise click.UsageError("name at least one model with --auth or --unauth")
    rows = commands.eval_rows(run.input_bytes, input, cipher, auth, unauth, (clean_path, clean_dataset, limit), transform)
    lines = "".join(io.dumps_json({**row.to_dict(), "transform": transform}) + "\n" for row in rows)
    with io.atomic_write(run.output, force=run.force) as handle:
        handle.write(lines.encode())
    run.write_meta()
    worst = [r for r in rows if fail_if_unauth_above is not None and r.role == "unauthorized"
             and r.accuracy > fail_if_unauth_above]  # fmt: skip
    if worst:
        raise CheckFailed(f"{worst[0].model} keeps accuracy {worst[0].accuracy:.3f} > {fail_if_unauth_above}")


@main.command("attack")
@input_argument()
@opts.attack_options
def attack_cmd(input, method, public_path, public_dataset, public_limit, key_path, clean_path, clean_dataset, kernel,
               retrain_model, train_dataset, train_limit, epochs, retrained_out, layout, **_):  # fmt: skip
    """Try to undo the recoding (INPUT: a ciphertext NPZ or PNG folder); writes reconstructed images NPZ.

    The output holds x and view (the reconstruction), y and the key's hashes when the input had
    them, so 'nte-encode eval' scores it like a ciphertext (encode -> attack -> eval). Everything
    (method value, --kernel against the image size, data, output) is checked before any work.

    denoiser trains a small residual conv network on public clean images plus synthetic noise in
    the geig subspace estimate, at the noise level measured from the ciphertexts, laid out as
    --layout says (one z per image, or per patch). --retrain MODEL trains a fresh model of MODEL's
    architecture on --train-dataset images passed through the same reconstruction and reports its
    accuracy on the reconstructed ciphertexts (labels needed).
    """
    from methodkit.core.errors import UsageError
    from methodkit.tools.nte import attacks

    run = Run.from_context()
    read = run.input_bytes
    cipher = commands.read_cipher(read, input)
    view = cipher["view"]
    if not method:
        raise UsageError("Missing option '--method' (blur:SIGMA, median:3, jpeg:Q, pca[:K], wiener, geig[:K], denoiser)")
    name, value = attacks.parse_method(method, view.shape[1:], kernel)  # everything is checked before any work
    if run.output == "-":
        raise UsageError("this verb writes a binary NPZ: pass -o FILE.npz")
    if retrained_out and not retrain_model:
        raise UsageError("--retrained-out needs --retrain MODEL")
    attacker, x_train, y_train = commands.retrain_inputs(read, input, cipher, retrain_model, train_dataset, train_limit)
    public, true_key, clean = commands.attack_data(read, name, view, (public_path, public_dataset, public_limit),
                                                   key_path, (clean_path, clean_dataset))  # fmt: skip
    run.threads()
    with run.progress() as progress:
        reconstruct, found = commands.reconstruction(name, value, view, public, true_key, kernel, epochs=epochs,
                                                     seed=run.seed, layout=layout, progress=progress)  # fmt: skip
    report = {"method": method, **found}
    restored = reconstruct(view)
    if clean is not None:
        report["psnr_vs_clean"] = commands.psnr_vs_clean(restored, clean)
    if retrain_model:
        with run.progress() as progress:
            report["retrain"] = commands.retrain_report(
                attacker, reconstruct, restored, x_train, y_train, cipher["y"], model_path=retrain_model,
                epochs=epochs, seed=run.seed, progress=progress, save_to=retrained_out, method=method)  # fmt: skip
    opts.write_npz(run, commands.reconstruction_arrays(restored, cipher))
    run.emit_result({"output": run.output, **report}, output="-")


@main.command("spectrum")
@opts.spectrum_options
def spectrum_cmd(models, data_path, dataset, limit, psnr, layout, **_):
    """Misalignment of the first model's key with each other model: CSV (leak, snr_leak, angles, HW gap).

    Same geometry: leak, snr_leak, mean cos^2 of the principal angles, Hoffman-Wielandt, Frobenius
    and spectral gaps (a stem with more channels is compared with zero rows added to the smaller).
    With --data/--dataset, for any geometry (Monte-Carlo on NTE noise of --layout): mc_ratio (gain
    on NTE noise / on white noise), noise_share (share of the noise in B's row space, with its chance
    level rank/n) and snr_mc (B's feature noise-to-signal at --psnr).
    """
    import pandas as pd

    run = Run.from_context()
    if len(models) < 2:
        raise click.UsageError("give two or more models: the first is the authorized one")
    rows = commands.spectrum_rows(run.input_bytes, models, (data_path, dataset, limit), psnr=psnr, seed=run.seed,
                                  layout=layout)  # fmt: skip
    run.emit_table(pd.DataFrame(rows))


@main.command("zoo")
@opts.zoo_options
def zoo_cmd(dataset, arch, seeds, train_size, test_size, epochs, misalign_from, t_values, **_):
    """Train the model zoo into the folder -o DIR; prints a CSV of clean accuracies."""
    import pandas as pd

    from methodkit.tools.nte import data
    from methodkit.tools.nte.zoo import build_zoo

    run = Run.from_context()
    archs, seed_list, ts = commands.zoo_plan(run.output, run.force, arch, seeds, t_values, misalign_from)
    x, y = data.from_dataset(f"{dataset}:train", train_size)
    xt, yt = data.from_dataset(f"{dataset}:test", test_size)
    run.threads()
    with run.progress() as progress:
        entries = build_zoo(x, y, xt, yt, archs, seed_list, run.output, epochs=epochs, misalign_from=misalign_from,
                            misalign_t=ts, progress=progress)  # fmt: skip
    run.emit_table(pd.DataFrame([e.to_dict() for e in entries]), output="-")

"""What nte-encode's verbs do between reading their flags and writing their outputs.

The command module (cli/nte_encode.py) parses flags and orders the checks; reading images, keys and
ciphertexts, the arrays a ciphertext or a reconstruction is written as, the 8-bit PNG release, the
attack's reconstruction and the zoo's plan are built here. `read` is a callable turning a path into
its bytes (the command's Run.input_bytes, which records the digests for --meta).
"""

from __future__ import annotations

from pathlib import Path

from methodkit.core.errors import DataError, UsageError


def load_key(read, path: str):
    from methodkit.core import io
    from methodkit.tools.nte.key import Key

    return Key.from_arrays(io.read_arrays(read(path)), path)


def load_images(read, path: str | None, dataset: str | None, limit: int | None, flag: str):
    """(x float, y or None) from a shipped set, an NPZ or a PNG folder; the first `limit` images."""
    from methodkit.core import io
    from methodkit.tools.nte import data

    if dataset:
        return data.from_dataset(dataset, limit)
    if not path:
        raise UsageError(f"give images with {flag} FILE.npz or a --dataset NAME[:split]")
    if Path(path).is_dir():
        from methodkit.tools.nte.pngio import read_png_dir

        x, y, _ = read_png_dir(path)
    else:
        x, y = data.from_arrays(io.read_arrays(read(path)), path)
    return (x[:limit], None if y is None else y[:limit]) if limit else (x, y)


def read_cipher(read, path: str, hashes: bool = False) -> dict:
    """A ciphertext NPZ, or a PNG folder from encode --png (its view, labels and, with hashes, the stem's hash)."""
    from methodkit.core import io

    if Path(path).is_dir():
        import numpy as np

        from methodkit.tools.nte.pngio import read_png_dir

        view, labels, meta = read_png_dir(path)
        cipher = {"view": view}
        if hashes and "stem_sha256" in meta:
            cipher["stem_sha256"] = np.frombuffer(meta["stem_sha256"].encode(), dtype=np.uint8)
        if not hashes and labels is not None:
            cipher["y"] = labels
    else:
        cipher = io.read_arrays(read(path))
    if "view" not in cipher:
        raise DataError(f"{path}: not an nte ciphertext (no 'view'); make one with 'nte-encode encode'")
    return cipher


def raw_stem(read, path: str, stride, padding: int, norm_mean, norm_std):
    """The Stem of --stem-weight W.npy (or an NPZ with 'weight') and its geometry flags."""
    import numpy as np

    from methodkit.core import io
    from methodkit.tools.nte.stem import Stem

    arrays = io.read_arrays(read(path))
    name = "arr_0" if path.endswith(".npy") else "weight"
    if name not in arrays:
        raise DataError(f"--stem-weight {path}: no array '{name}' (keys: {', '.join(arrays) or 'none'})")
    weight = np.asarray(arrays[name])
    if stride is None:
        raise UsageError("--stem-weight needs --stride")
    channels = weight.shape[1] if weight.ndim == 4 else 1
    return Stem(weight, stride, padding, tuple(norm_mean) or (0.0,) * channels, tuple(norm_std) or (1.0,) * channels)


def make_key(read, input: str, stem_weight, stride, padding, norm_mean, norm_std, *, tau, tau_abs, min_dim: int,
             strict: bool, mode: str, layer: str, images: tuple, seed: int, threads):  # fmt: skip
    """The key of INPUT (a zoo model) or of a raw --stem-weight; --mode jacobian reads `images`
    ((path, dataset, limit)) and calls `threads()` (the command's thread setting) before its work."""
    from methodkit.tools.nte.key import extract_key

    if stem_weight:
        stem = raw_stem(read, stem_weight, stride, padding, norm_mean, norm_std)
    else:
        if input == "-":
            raise UsageError("give a model file (INPUT) or --stem-weight W.npy --stride S")
        if not input.endswith(".safetensors"):
            raise DataError(f"{input}: expected a zoo model (.safetensors with its .json sidecar)")
        from methodkit.tools.nte.zoo import load_model

        read(input)  # existence check and digest for --meta
        model = load_model(input)
        stem = model.stem_spec()
    if mode != "jacobian":
        return extract_key(stem, tau=tau, tau_abs=tau_abs, min_dim=min_dim, strict=strict)
    from methodkit.tools.nte.jacobian import jacobian_key

    if stem_weight:
        raise UsageError("--mode jacobian needs a model (INPUT), not a raw --stem-weight")
    if tau_abs is not None:
        raise UsageError("--mode jacobian takes --tau (relative to lambda_max), not --tau-abs")
    x, _ = load_images(read, *images, "--data")
    threads()
    return jacobian_key(model, x, layer, tau=1e-3 if tau is None else tau, min_dim=min_dim, strict=strict, seed=seed)


def certified_stem(model_path: str, key):
    """W' (pixel domain) of --model, refused when its stem did not make `key`."""
    from methodkit.tools.nte.zoo import load_model

    stem = load_model(model_path).stem_spec()
    if stem.sha256() != key.stem_sha256:
        raise UsageError(f"--model {model_path}: its stem does not match the key (key made from another model)")
    return stem.pixel_matrix()


def array_module(device: str):
    from methodkit.core.backend import array_module as module

    return module(device)


def write_png_release(folder, x, y, cipher, key, noise, layout, psnr, seed, w_pixel, *, force: bool) -> dict:
    """Write the 8-bit PNG folder; returns the summary items it adds."""
    from methodkit.tools.nte.pngio import write_png_dir

    pixels, png = png_release(x, cipher, key, noise, w_pixel)
    meta = {"key_sha256": key.sha256(), "stem_sha256": key.stem_sha256, "psnr_target": psnr, "seed": seed,
            "noise": noise, "layout": layout, "psnr_float_mean": float(cipher.psnr.mean())}  # fmt: skip
    write_png_dir(folder, pixels, y, meta, force=force)
    return {"png": folder, **png}


def retrain_inputs(read, input: str, cipher: dict, retrain_model, train_dataset: str, train_limit: int) -> tuple:
    """(attacker model, x_train, y_train) for attack --retrain, checked before any work; Nones without it."""
    if not retrain_model:
        return None, None, None
    from methodkit.tools.nte import data
    from methodkit.tools.nte.zoo import load_model

    if "y" not in cipher:
        raise DataError(f"{input}: --retrain needs the ciphertext's labels (y) to score the retrained model")
    read(retrain_model)  # a missing file is named as such
    attacker = load_model(retrain_model)
    x_train, y_train = data.from_dataset(train_dataset, train_limit)
    if x_train.shape[1:] != cipher["view"].shape[1:]:
        raise DataError(f"--train-dataset images have shape {x_train.shape[1:]}, ciphertexts {cipher['view'].shape[1:]}")
    return attacker, x_train, y_train


def attack_data(read, name: str, view, public: tuple, key_path, clean: tuple) -> tuple:
    """(public images, true key, clean images) of an attack: public data for the adaptive methods,
    ((path, dataset, limit)), the optional true key and clean images ((path, dataset)), all checked."""
    public_x = true_key = clean_x = None
    if name in ("wiener", "geig", "denoiser"):  # adaptive: need public clean data of the same domain
        if not public[0] and not public[1]:
            raise UsageError(f"--method {name} needs public clean data: --public FILE.npz or --public-dataset NAME")
        public_x, _ = load_images(read, *public, "--public")
        if public_x.shape[1:] != view.shape[1:]:
            raise DataError(f"public images have shape {public_x.shape[1:]}, ciphertexts {view.shape[1:]}")
        true_key = load_key(read, key_path) if key_path else None
    if clean[0] or clean[1]:
        clean_x, _ = load_images(read, *clean, len(view), "--clean")
        if clean_x.shape[1:] != view.shape[1:] or len(clean_x) < len(view):
            raise DataError(f"--clean: {len(clean_x)} images of shape {clean_x.shape[1:]} for {len(view)} ciphertexts "
                            f"of shape {view.shape[1:]}")  # fmt: skip
    return public_x, true_key, clean_x


def cipher_arrays(cipher, key, y) -> dict:
    """The ciphertext NPZ's arrays: view, alpha, psnr, certificate (when measured), x or patches, y, hashes."""
    import numpy as np

    arrays = {"view": cipher.view, "alpha": cipher.alpha, "psnr": cipher.psnr}
    if cipher.certificate is not None:
        arrays["certificate"] = cipher.certificate
    arrays["x" if cipher.patches is None else "patches"] = cipher.x if cipher.patches is None else cipher.patches
    if y is not None:
        arrays["y"] = y
    arrays["key_sha256"] = np.frombuffer(key.sha256().encode(), dtype=np.uint8)
    arrays["stem_sha256"] = np.frombuffer(key.stem_sha256.encode(), dtype=np.uint8)
    return arrays


def png_release(x, cipher, key, noise: str, w_pixel) -> tuple:
    """(uint8 pixels, summary items) of the 8-bit PNG release: fitted into [0, 1] (nes), rounded; its PSNR,
    clipped share and, with the authorized stem, the certificate of what rounding left."""
    import numpy as np

    from methodkit.tools.nte.encode import feature_change_norm, fit_to_range
    from methodkit.tools.nte.pngio import quantise

    pixels = quantise(fit_to_range(x, cipher.x, key) if noise == "nes" else cipher.x)
    change = pixels / 255.0 - x
    mse = (change.reshape(len(x), -1) ** 2).mean(axis=1)
    summary = {"png_psnr_mean": float(np.mean(10 * np.log10(1 / mse))),
               "png_clipped_share": float(np.mean((cipher.x < 0) | (cipher.x > 1)))}  # fmt: skip
    if w_pixel is not None:
        g = key.geometry
        certificate = feature_change_norm(change, w_pixel, g["kernel"], g["stride"], g["padding"])
        summary["png_certificate_max"] = float(certificate.max())
        summary["png_certificate_mean"] = float(certificate.mean())
    return pixels, summary


def eval_rows(read, input: str, cipher: dict, auth, unauth, clean: tuple, transform) -> list:
    """eval's rows: the --auth/--unauth models on the clean images ((path, dataset, limit)) and on `cipher`."""
    from methodkit.tools.nte.evaluate import evaluate, parse_transforms

    x, y = load_images(read, *clean, "--clean")
    if y is None:
        raise DataError("clean data has no labels (y)")
    stem_hash = cipher["stem_sha256"].tobytes().decode() if "stem_sha256" in cipher else None
    models = eval_models(auth, unauth, stem_hash)
    condition = {"x": cipher["view"], "patches": cipher.get("patches"), "certificate": cipher.get("certificate")}
    return evaluate(models, {Path(p).stem for p in auth}, x, y, {Path(input).stem: condition}, parse_transforms(transform))


def spectrum_rows(read, models, images: tuple, *, psnr: float, seed: int, layout: str) -> list:
    """spectrum's rows: the first model's key against every other model (Monte-Carlo measures with `images`)."""
    from methodkit.tools.nte.key import extract_key
    from methodkit.tools.nte.spectrum import pair
    from methodkit.tools.nte.zoo import load_model

    stems = [(Path(p).stem, load_model(p).stem_spec()) for p in models]
    clean = None
    if images[0] or images[1]:
        clean, _ = load_images(read, *images, "--data")
    (name_a, stem_a), key = stems[0], extract_key(stems[0][1])
    return [pair(name_a, stem_a, nb, sb, key=key, clean=clean, psnr=psnr, seed=seed, layout=layout).to_dict()
            for nb, sb in stems[1:]]  # fmt: skip


def eval_models(auth, unauth, stem_hash: str | None) -> dict:
    """{name: model}; an --auth model whose stem did not make the ciphertext is refused."""
    from methodkit.tools.nte.zoo import load_model

    models = {}
    for path in auth:
        model = load_model(path)
        if stem_hash is not None and model.stem_spec().sha256() != stem_hash:
            raise DataError(f"--auth {path}: the ciphertext was made with another model's key; list it with --unauth")
        models[Path(path).stem] = model
    for path in unauth:
        models[Path(path).stem] = load_model(path)
    return models


def reconstruction(name: str, value, view, public, true_key, kernel: int, *, epochs: int, seed: int, layout: str,
                   progress=None) -> tuple:  # fmt: skip
    """(reconstruct(x) -> x, report items) of attack method `name` fitted on the ciphertexts `view`."""
    from methodkit.tools.nte import attacks

    report: dict = {}
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
        reconstruct, info = train_denoiser(view, public, kernel, kernel, k=k, epochs=epochs, seed=seed, layout=layout,
                                           progress=progress)  # fmt: skip
        report.update(info)
    return reconstruct, report


def psnr_vs_clean(restored, clean) -> float:
    import numpy as np

    mse = ((restored - clean[: len(restored)]) ** 2).reshape(len(restored), -1).mean(axis=1)
    return float(np.mean(10 * np.log10(1 / np.maximum(mse, 1e-12))))


def retrain_report(attacker, reconstruct, restored, x_train, y_train, labels, *, model_path: str, epochs: int, seed: int,
                   progress=None, save_to: str | None = None, method: str = "") -> dict:  # fmt: skip
    """The report of an attacker retraining `attacker`'s architecture on reconstructed train images
    (the retrained model saved to `save_to` when given)."""
    import numpy as np

    from methodkit.tools.nte.learned import retrain
    from methodkit.tools.nte.zoo import accuracy, save_model

    model = retrain(attacker, reconstruct, x_train, y_train, epochs=epochs, seed=seed, progress=progress)
    if save_to:
        save_model(model, save_to, extra={"retrained_for": method})
    labels = np.asarray(labels, dtype=np.int64)
    return {
        "model": model_path,
        "arch": attacker.cfg.arch,
        "train_images": int(len(x_train)),
        "epochs": epochs,
        "original_accuracy_on_reconstruction": accuracy(attacker, restored, labels),
        "retrained_accuracy_on_reconstruction": accuracy(model, restored, labels),
    }


def reconstruction_arrays(restored, cipher) -> dict:
    """x for image tools, view (and the key's hashes, y) so 'nte-encode eval' scores the reconstruction."""
    import numpy as np

    arrays = {"x": restored.astype(np.float32), "view": restored.astype(np.float32)}
    for passed_on in ("y", "key_sha256", "stem_sha256"):
        if passed_on in cipher:
            arrays[passed_on] = cipher[passed_on]
    return arrays


def zoo_plan(folder: str, force: bool, arch: str, seeds: str, t_values: str, misalign_from: str | None) -> tuple:
    """(archs, seeds, t values) of a zoo run, every name checked before the folder is made."""
    from methodkit.tools.nte.zoo import parse_specs

    # -o is a declared folder output (checked before the command body: a file there, or a non-empty
    # folder without --force, is refused before any data is read)
    if folder == "-":
        raise UsageError("pass the zoo folder with -o DIR")
    try:
        seed_list = [int(s) for s in seeds.split(",")]
        ts = tuple(float(t) for t in t_values.split(","))
    except ValueError:
        raise UsageError("--seeds and --t take comma-separated numbers") from None
    archs = parse_specs([a for a in arch.split(",") if a] if not misalign_from or arch else [])
    if not archs and not misalign_from:
        raise UsageError("--arch: name at least one architecture")
    trained = {f"{a}-s{s}" for a in archs for s in seed_list}
    if misalign_from and misalign_from not in trained and not (Path(folder) / f"{misalign_from}.safetensors").exists():
        raise UsageError(
            f"--misalign-from {misalign_from}: not in {folder} and not trained by this run (--arch x --seeds)"
        )
    return archs, seed_list, ts

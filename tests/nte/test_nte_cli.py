"""nte-encode through the installed executable: the pipeline, determinism, bad input, and the effect."""

from __future__ import annotations

import json

import numpy as np
import pytest

from methodkit.core import images

pytestmark = pytest.mark.skipif(not images.FASHION_DIR.is_dir(), reason="dataset-fashion-mnist not installed")


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """Two tiny models of the authorized architecture (seeds 0, 1) and one other architecture."""
    import subprocess
    import sys
    from pathlib import Path

    folder = tmp_path_factory.mktemp("nte")
    exe = Path(sys.executable).parent / "nte-encode"
    subprocess.run(
        [exe, "zoo", "--arch", "pcnn-p4c8", "--seeds", "0,1", "--train-size", "3000", "--test-size", "500",
         "--epochs", "2", "-o", folder / "zoo", "-q"],
        check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        [exe, "zoo", "--arch", "cnn5s2c12", "--seeds", "0", "--train-size", "1500", "--test-size", "500",
         "--epochs", "2", "-o", folder / "zoo", "-q", "--force"],
        check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run([exe, "key", folder / "zoo" / "pcnn-p4c8-s0.safetensors", "-o", folder / "key.npz"], check=True)
    x, y = images.load_images("fashion-mnist", "test")
    np.savez(folder / "clean.npz", x=x[:400], y=y[:400])
    return folder


def _json_lines(proc):
    return [json.loads(line) for line in proc.stdout.decode().splitlines()]


def test_help_lists_verbs(run_cli):
    out = run_cli(["nte-encode", "--help"]).stdout.decode()
    for verb in ("key", "encode", "eval", "attack", "spectrum", "zoo"):
        assert verb in out


def test_pipeline_authorized_exact_unauthorized_hurt(zoo, run_cli):
    enc = run_cli(
        ["nte-encode", "encode", "clean.npz", "--key", "key.npz", "--psnr", "10", "-o", "c10.npz",
         "--model", "zoo/pcnn-p4c8-s0.safetensors"],
        cwd=zoo,
    )  # fmt: skip
    assert enc.returncode == 0, enc.stderr
    summary = json.loads(enc.stdout)
    assert summary["psnr_mean"] == pytest.approx(10.0, abs=1e-3) and summary["certificate_max"] < 1e-4
    proc = run_cli(
        ["nte-encode", "eval", "c10.npz", "--clean", "clean.npz", "--auth", "zoo/pcnn-p4c8-s0.safetensors",
         "--unauth", "zoo/pcnn-p4c8-s1.safetensors", "--unauth", "zoo/cnn5s2c12-s0.safetensors"],
        cwd=zoo,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = {r["model"]: r for r in _json_lines(proc)}
    auth = rows["pcnn-p4c8-s0"]
    assert auth["agreement"] == 1.0 and auth["max_abs_dlogit"] < 1e-4
    unauth_drops = [rows["pcnn-p4c8-s1"]["drop"], rows["cnn5s2c12-s0"]["drop"]]
    assert np.mean(unauth_drops) > 0.05, rows
    assert summary["layout"] == "shared"  # the default: the official code's one z per image
    # the per-patch layout (Z i.i.d. per patch): also exact for the authorized model
    enc = run_cli(
        ["nte-encode", "encode", "clean.npz", "--key", "key.npz", "--psnr", "10", "--layout", "patch",
         "-o", "s10.npz", "--model", "zoo/pcnn-p4c8-s0.safetensors"],
        cwd=zoo,
    )  # fmt: skip
    summary = json.loads(enc.stdout)
    assert summary["layout"] == "patch" and summary["certificate_max"] < 1e-4
    proc = run_cli(["nte-encode", "eval", "s10.npz", "--clean", "clean.npz", "--auth",
                    "zoo/pcnn-p4c8-s0.safetensors"], cwd=zoo)  # fmt: skip
    assert _json_lines(proc)[0]["agreement"] == 1.0
    # control: white noise at the same PSNR hurts the authorized model as well
    run_cli(["nte-encode", "encode", "clean.npz", "--key", "key.npz", "--psnr", "10", "--noise", "gaussian",
             "-o", "g10.npz"], cwd=zoo)  # fmt: skip
    proc = run_cli(["nte-encode", "eval", "g10.npz", "--clean", "clean.npz", "--unauth",
                    "zoo/pcnn-p4c8-s0.safetensors"], cwd=zoo)  # fmt: skip
    assert _json_lines(proc)[0]["agreement"] < 0.95


def test_flat_mode_for_an_overlapping_stem(zoo, run_cli):
    assert (
        run_cli(["nte-encode", "key", "zoo/cnn5s2c12-s0.safetensors", "-o", "k5.npz", "--force"], cwd=zoo).returncode
        == 0
    )
    run_cli(["nte-encode", "encode", "clean.npz", "--key", "k5.npz", "--psnr", "10", "-o", "p.npz", "--force"], cwd=zoo)
    with np.load(zoo / "p.npz") as data:
        assert data["patches"].shape == (400, 196, 25) and "x" not in data.files
    proc = run_cli(
        ["nte-encode", "eval", "p.npz", "--clean", "clean.npz", "--auth", "zoo/cnn5s2c12-s0.safetensors"], cwd=zoo
    )
    row = _json_lines(proc)[0]
    assert row["agreement"] == 1.0 and row["max_abs_dlogit"] < 1e-4


def test_same_seed_same_bytes_and_stdin(zoo, run_cli):
    for name in ("a.npz", "b.npz"):
        run_cli(
            ["nte-encode", "encode", "clean.npz", "--key", "key.npz", "--seed", "3", "-o", name, "--force"], cwd=zoo
        )
    assert (zoo / "a.npz").read_bytes() == (zoo / "b.npz").read_bytes()
    piped = run_cli(["nte-encode", "encode", "-", "--key", "key.npz", "--seed", "3", "-o", "c.npz", "--force"],
                    input=(zoo / "clean.npz").read_bytes(), cwd=zoo)  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert (zoo / "c.npz").read_bytes() == (zoo / "a.npz").read_bytes()


def test_bad_inputs_exit_2_and_keep_outputs(zoo, run_cli, one_line_error):
    (zoo / "keep.npz").write_bytes(b"keep")
    proc = run_cli(
        ["nte-encode", "encode", "clean.npz", "--key", "key.npz", "--psnr", "0", "-o", "keep.npz", "--force"], cwd=zoo
    )
    one_line_error(proc, "nte-encode", "--psnr must be in (0, 100) dB, got 0.0")
    assert (zoo / "keep.npz").read_bytes() == b"keep"
    proc = run_cli(["nte-encode", "encode", "clean.npz", "--key", "nokey.npz", "-o", "x.npz"], cwd=zoo)
    one_line_error(proc, "nte-encode", "nokey.npz: no such file")
    np.savez(zoo / "bad.npz", x=np.full((2, 28, 28), 2.0, np.float32))
    proc = run_cli(["nte-encode", "encode", "bad.npz", "--key", "key.npz", "-o", "x.npz"], cwd=zoo)
    one_line_error(proc, "nte-encode", "bad.npz: float images must lie in [0, 1]")
    proc = run_cli(
        ["nte-encode", "eval", "c10.npz", "--clean", "clean.npz", "--auth", "zoo/pcnn-p4c8-s1.safetensors"], cwd=zoo
    )
    one_line_error(proc, "nte-encode", "another model's key; list it with --unauth")
    proc = run_cli(["nte-encode", "attack", "c10.npz", "--method", "wiener", "-o", "r.npz"], cwd=zoo)
    one_line_error(proc, "nte-encode", "--method wiener needs public clean data")


def test_gate_exit_3(zoo, run_cli):
    proc = run_cli(["nte-encode", "eval", "c10.npz", "--clean", "clean.npz", "--unauth", "zoo/pcnn-p4c8-s1.safetensors",
                    "--fail-if-unauth-above", "0.0"], cwd=zoo)  # fmt: skip
    assert proc.returncode == 3 and b"keeps accuracy" in proc.stderr
    assert len(proc.stdout.splitlines()) == 1


def test_attack_and_spectrum(zoo, run_cli, shell):
    proc = run_cli(
        ["nte-encode", "attack", "c10.npz", "--method", "blur:1", "--clean", "clean.npz", "-o", "r.npz"], cwd=zoo
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["psnr_vs_clean"] > 10.0
    proc = run_cli(["nte-encode", "attack", "c10.npz", "--method", "geig", "--public", "clean.npz", "--key", "key.npz",
                    "-o", "g.npz"], cwd=zoo)  # fmt: skip
    assert 0 <= json.loads(proc.stdout)["min_principal_cos"] <= 1
    proc = shell("nte-encode spectrum zoo/pcnn-p4c8-s0.safetensors zoo/pcnn-p4c8-s1.safetensors zoo/cnn5s2c12-s0.safetensors"
                 " --data clean.npz | head -1", cwd=zoo)  # fmt: skip
    assert proc.returncode == 0 and proc.stderr == b""
    assert proc.stdout.decode().startswith("a,b,same_geometry,leak,snr_leak")


def test_png_ciphertexts_round_trip_and_keep_the_authorized_model(zoo, run_cli, one_line_error):
    proc = run_cli(["nte-encode", "encode", "clean.npz", "--key", "key.npz", "--psnr", "20", "--png", "png",
                    "--model", "zoo/pcnn-p4c8-s0.safetensors", "--force"], cwd=zoo)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["png_certificate_max"] > summary["certificate_max"]  # quantisation now shows
    # clipping to [0, 1] removes part of the noise on dark background pixels: PSNR rises, never falls far
    assert summary["png_psnr_mean"] > 19.5 and 0 < summary["png_clipped_share"] < 1
    assert len(list((zoo / "png").glob("*.png"))) == 400 and (zoo / "png" / "labels.txt").exists()
    proc = run_cli(["nte-encode", "eval", "png", "--clean", "clean.npz", "--auth", "zoo/pcnn-p4c8-s0.safetensors"],
                   cwd=zoo)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert _json_lines(proc)[0]["agreement"] >= 0.95
    proc = run_cli(["nte-encode", "encode", "clean.npz", "--key", "k5.npz", "--png", "png5"], cwd=zoo)
    if (zoo / "k5.npz").exists():
        one_line_error(proc, "nte-encode", "--png: an overlapping stem releases a patch tensor")
        assert not (zoo / "png5").exists()


@pytest.mark.slow  # trains a denoiser and retrains a model through the CLI (the kernels: tests/nte/test_nte_core.py)
def test_jacobian_key_and_learned_attacks(zoo, run_cli):
    proc = run_cli(["nte-encode", "key", "zoo/pcnn-p4c8-s0.safetensors", "--mode", "jacobian", "--layer", "relu",
                    "--data", "clean.npz", "--limit", "64", "-o", "kj.npz", "--force"], cwd=zoo)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["mode"] == "jacobian" and info["k"] >= 8
    proc = run_cli(["nte-encode", "attack", "c10.npz", "--method", "denoiser", "--public", "clean.npz",
                    "--epochs", "1", "--clean", "clean.npz", "-o", "d.npz", "--force", "-q"], cwd=zoo)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["noise_energy_per_patch"] > 0 and report["psnr_vs_clean"] > 10
    proc = run_cli(["nte-encode", "attack", "c10.npz", "--method", "blur:1", "--retrain",
                    "zoo/pcnn-p4c8-s1.safetensors", "--train-limit", "300", "--epochs", "1",
                    "--retrained-out", "rt.safetensors", "-o", "rb.npz", "--force", "-q"], cwd=zoo)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    retrained = json.loads(proc.stdout)["retrain"]
    assert retrained["arch"] == "pcnn-p4c8" and 0 <= retrained["retrained_accuracy_on_reconstruction"] <= 1
    assert (zoo / "rt.safetensors").exists()


ERR = "nte-encode: error: "


@pytest.fixture(scope="module")
def rc10(zoo):
    """A certified 10 dB ciphertext of the tests below (their own, so they run alone with -k)."""
    from tests.conftest import _run

    proc = _run(["nte-encode", "encode", "clean.npz", "--key", "key.npz", "--psnr", "10", "-o", "rc10.npz",
                 "--model", "zoo/pcnn-p4c8-s0.safetensors", "--force"], cwd=zoo)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return zoo / "rc10.npz"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--method", "blur:abc"], "--method blur: SIGMA must be a positive number, got 'abc'"),
        (["--method", "blur:-3"], "--method blur: SIGMA must be a positive number, got '-3'"),
        (["--method", "median:0"], "--method median: SIZE must be a whole number >= 1, got '0'"),
        (["--method", "jpeg:101"], "--method jpeg: Q must be a whole number in 1..100, got '101'"),
        (["--method", "geig:0", "--public", "clean.npz"],
         "--method geig: K must be a whole number in 1..16 (patch dimension at --kernel 4), got '0'"),
        (["--method", "geig:100", "--public", "clean.npz"],
         "--method geig: K must be a whole number in 1..16 (patch dimension at --kernel 4), got '100'"),
        (["--method", "wiener", "--kernel", "100", "--public", "clean.npz"], "--kernel 100 exceeds the 28x28 images"),
        (["--method", "pca", "--kernel", "5"], "--kernel 5 does not tile the 28x28 images (pick a divisor of both sides)"),
        (["--method", "wiener", "--public", "nothere.npz"], "nothere.npz: no such file"),
        (["--method", "blur:1", "--retrained-out", "m.safetensors"], "--retrained-out needs --retrain MODEL"),
    ],
)  # fmt: skip
def test_attack_checks_everything_before_work(zoo, rc10, run_cli, one_line_error, args, message):
    proc = run_cli(["nte-encode", "attack", "rc10.npz", *args, "-o", "never.npz"], cwd=zoo)
    assert one_line_error(proc, "nte-encode") == ERR + message
    assert not (zoo / "never.npz").exists()


def test_attack_refuses_a_missing_output_before_work(zoo, rc10, run_cli, one_line_error):
    # the report used to be refused only after the reconstruction had run
    proc = run_cli(["nte-encode", "attack", "rc10.npz", "--method", "blur:1"], cwd=zoo)
    assert one_line_error(proc, "nte-encode") == ERR + "this verb writes a binary NPZ: pass -o FILE.npz"


def test_encode_attack_eval_is_a_pipeline(zoo, rc10, run_cli):
    proc = run_cli(["nte-encode", "attack", "rc10.npz", "--method", "wiener", "--public", "clean.npz",
                    "-o", "w.npz", "--force"], cwd=zoo)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    with np.load(zoo / "w.npz") as f:
        assert {"x", "view", "y", "stem_sha256"} <= set(f.files)
        assert np.array_equal(f["x"], f["view"])
    proc = run_cli(["nte-encode", "eval", "w.npz", "--clean", "clean.npz", "--auth", "zoo/pcnn-p4c8-s0.safetensors",
                    "--unauth", "zoo/pcnn-p4c8-s1.safetensors"], cwd=zoo)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = {r["model"]: r for r in _json_lines(proc)}
    on_cipher = {r["model"]: r for r in _json_lines(run_cli(
        ["nte-encode", "eval", "rc10.npz", "--clean", "clean.npz", "--unauth", "zoo/pcnn-p4c8-s1.safetensors"], cwd=zoo
    ))}  # fmt: skip
    # the Wiener reconstruction gives the unauthorized model back most of what the noise took
    assert rows["pcnn-p4c8-s1"]["drop"] < on_cipher["pcnn-p4c8-s1"]["drop"]
    assert rows["pcnn-p4c8-s0"]["certificate"] is None  # nothing certifies a reconstruction


def test_certificate_absent_when_nothing_was_certified(zoo, rc10, run_cli):
    enc = run_cli(["nte-encode", "encode", "clean.npz", "--key", "key.npz", "-o", "nocert.npz", "--force"], cwd=zoo)
    summary = json.loads(enc.stdout)
    assert summary["certificate_max"] is None and summary["certificate_mean"] is None
    with np.load(zoo / "nocert.npz") as f:
        assert "certificate" not in f.files
    for extra in ([], ["--transform", "brightness:0.05"]):
        proc = run_cli(["nte-encode", "eval", "nocert.npz" if not extra else "rc10.npz", "--clean", "clean.npz",
                        "--auth", "zoo/pcnn-p4c8-s0.safetensors", *extra], cwd=zoo)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert all(r["certificate"] is None for r in _json_lines(proc)), extra
    proc = run_cli(["nte-encode", "eval", "rc10.npz", "--clean", "clean.npz", "--auth", "zoo/pcnn-p4c8-s0.safetensors"],
                   cwd=zoo)  # fmt: skip
    assert _json_lines(proc)[0]["certificate"] is not None  # certified and untransformed: reported


def test_encode_bad_images_one_line(zoo, run_cli, one_line_error):
    np.savez(zoo / "empty.npz", x=np.zeros((0, 28, 28), np.uint8))
    np.savez(zoo / "wide.npz", x=np.zeros((2, 28, 28, 28), np.uint8))
    np.savez(zoo / "odd.npz", x=np.zeros((2, 27, 27), np.uint8))
    x, _ = images.load_images("fashion-mnist", "test")
    np.savez(zoo / "last.npz", x=np.repeat(x[:3, :, :, None], 1, axis=3))  # (N, H, W, 1): channels last
    cases = {
        "empty.npz": "empty.npz: x holds 0 images",
        "wide.npz": "wide.npz: x of shape (2, 28, 28, 28) has 28 channels; expected (N, C, H, W) with C 1, 3 or 4",
        "odd.npz": "image side 27 with kernel 4, stride 4, padding 0 leaves trailing pixels unencodable; "
        "crop or pad the images to fit",
    }
    for name, message in cases.items():
        proc = run_cli(["nte-encode", "encode", name, "--key", "key.npz", "-o", "never.npz"], cwd=zoo)
        assert one_line_error(proc, "nte-encode") == ERR + message
        assert not (zoo / "never.npz").exists()
    proc = run_cli(["nte-encode", "encode", "last.npz", "--key", "key.npz", "-o", "last-c.npz", "--force"], cwd=zoo)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["images"] == 3
    np.savez(zoo / "stem.npz", w=np.zeros((8, 1, 4, 4)))
    proc = run_cli(["nte-encode", "key", "--stem-weight", "stem.npz", "--stride", "4", "-o", "never.npz"], cwd=zoo)
    assert one_line_error(proc, "nte-encode") == ERR + "--stem-weight stem.npz: no array 'weight' (keys: w)"


def test_zoo_refusal_leaves_no_folder(zoo, run_cli, one_line_error):
    proc = run_cli(["nte-encode", "zoo", "--arch", "pcnn-p4c8,nosuch", "-o", "z1"], cwd=zoo)
    assert one_line_error(proc, "nte-encode").startswith(ERR + "unknown architecture 'nosuch' (known: ")
    proc = run_cli(["nte-encode", "zoo", "--arch", "pcnn-p4c8", "--misalign-from", "mlp-s0", "-o", "z2"], cwd=zoo)
    assert one_line_error(proc, "nte-encode") == ERR + (
        "--misalign-from mlp-s0: not in z2 and not trained by this run (--arch x --seeds)"
    )
    assert not (zoo / "z1").exists() and not (zoo / "z2").exists()



def test_zoo_checks_its_folder_before_any_work(tmp_path, run_cli, one_line_error):
    """-o is a declared folder output: a file there or a non-empty folder is refused before the data is
    read (the unknown --dataset would fail if it were) and nothing is created."""
    (tmp_path / "afile").write_text("x\n")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "kept").write_text("x\n")
    expected = {
        "afile": "--output afile: exists and is not a folder",
        "full": "--output full: folder exists and is not empty; pass --force to write into it",
    }
    for target, message in expected.items():
        proc = run_cli(["nte-encode", "zoo", "--dataset", "nosuch", "--arch", "pcnn-p4c8", "-o", target], cwd=tmp_path)
        assert one_line_error(proc, "nte-encode") == ERR + message
    proc = run_cli(["nte-encode", "zoo", "--dataset", "nosuch", "--arch", "pcnn-p4c8", "-o", "nodir/x"], cwd=tmp_path)
    assert "unknown image set 'nosuch'" in one_line_error(proc, "nte-encode")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "full"]
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["kept"]

def test_encode_checks_its_flags_before_reading_the_images(tmp_path, run_cli, one_line_error):
    """A bad --key or a terminal -o fails before INPUT is read: the broken image file is never opened."""
    (tmp_path / "broken.npz").write_bytes(b"not an npz")
    proc = run_cli(["nte-encode", "encode", "broken.npz", "-o", "never.npz"], cwd=tmp_path)
    assert "Missing option '--key'" in one_line_error(proc, "nte-encode")
    proc = run_cli(["nte-encode", "encode", "broken.npz", "--key", "nokey.npz", "-o", "never.npz"], cwd=tmp_path)
    assert one_line_error(proc, "nte-encode") == ERR + "nokey.npz: no such file"
    proc = run_cli(["nte-encode", "encode", "missing.npz", "--key", "nokey.npz", "-o", "never.npz"], cwd=tmp_path)
    assert one_line_error(proc, "nte-encode") == ERR + "missing.npz: no such file"  # a missing INPUT first
    assert not (tmp_path / "never.npz").exists()

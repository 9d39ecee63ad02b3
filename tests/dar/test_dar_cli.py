"""dar-backdoor through the installed executable."""

from __future__ import annotations

import json

import numpy as np
import pytest


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    from methodkit.tools.dar import data

    d = tmp_path_factory.mktemp("dar")
    x, y, _ = data.synthetic(1500, seed=0)
    np.savez(d / "train.npz", x=x, y=y)
    xt, yt, _ = data.synthetic(300, seed=1)
    np.savez(d / "test.npz", x=xt, y=yt)
    np.savez(d / "noy.npz", x=x)
    np.savez(d / "badlabels.npz", x=x, y=y.astype(float))
    return d


def _discover(run_cli, work, *extra):
    return run_cli(["dar-backdoor", "discover", work / "train.npz", "--budget", "15", "--rank", "entropy",
                    "--top", "3", "-q", *extra])  # fmt: skip


def test_help(run_cli):
    proc = run_cli(["dar-backdoor", "--help"])
    assert proc.returncode == 0 and b"EXIT STATUS" in proc.stdout
    for verb in ("discover", "poison", "apply", "train", "eval", "run"):
        assert verb in proc.stdout.decode()


@pytest.fixture(scope="module")
def rules(work):
    """Rules written by discover reading a file (the stdin test checks that reading stdin gives the same bytes)."""
    from tests.conftest import _run

    proc = _discover(_run, work)
    assert proc.returncode == 0, proc.stderr
    (work / "rules.jsonl").write_bytes(proc.stdout)
    return work / "rules.jsonl"


def test_discover_stdin_stdout_and_same_bytes(run_cli, work, rules):
    # a second process reading stdin writes the same bytes as the first reading the file: same input, same bytes
    a = run_cli(["dar-backdoor", "discover", "--budget", "15", "--rank", "entropy", "--top", "3", "-q"],
                input=(work / "train.npz").read_bytes())  # fmt: skip
    assert a.returncode == 0 and a.stdout == rules.read_bytes()
    found = [json.loads(line) for line in a.stdout.decode().splitlines()]
    assert len(found) == 3 and all(r["op"] == "spatial" and r["entropy"] >= 0.5 for r in found)


def test_pipeline_poison_train_eval(run_cli, shell, work, rules, one_line_error):
    out, manifest, labels = work / "p.csv", work / "p.json", work / "y.npy"
    proc = run_cli(["dar-backdoor", "poison", work / "train.npz", "--rules", rules, "--budget", "15",
                    "--manifest", manifest, "--labels-out", labels, "-o", out])  # fmt: skip
    assert proc.returncode == 0 and proc.stdout == b""
    assert out.read_text().splitlines()[0] == "index,old_label,new_label" and len(out.read_text().splitlines()) == 16
    record = json.loads(manifest.read_text())
    assert record["relabelled"] == 15 and record["pixels_changed"] is False
    # nothing is overwritten without --force
    before = out.read_bytes()
    again = run_cli(["dar-backdoor", "poison", work / "train.npz", "--rules", rules, "-o", out])
    assert again.returncode == 2 and out.read_bytes() == before
    model = work / "m.safetensors"
    proc = run_cli(["dar-backdoor", "train", work / "train.npz", "--labels", labels, "--arch", "cnn-xs",
                    "--width", "2", "--epochs", "0.3", "-q", "-o", model])  # fmt: skip
    assert proc.returncode == 0 and model.exists() and (work / "m.json").exists()
    # the metrics line is printed before the gate's verdict (exit 3 when the ASR is below it)
    gate = run_cli(["dar-backdoor", "eval", work / "test.npz", "--model", model, "--rules", rules,
                    "--fail-below-asr", "1.01"])  # fmt: skip
    assert gate.returncode == 3 and b"below --fail-below-asr" in gate.stderr
    metrics = json.loads(gate.stdout)
    assert {"c_acc", "asr", "r_acc", "natural_trigger_rate", "per_class_asr"} <= set(metrics)
    assert 0 < metrics["trigger_changed_fraction_median"] <= 1 and metrics["trigger_l2_mean"] > 0
    assert metrics["trigger_psnr_db"] > 0  # the visibility of the trigger the ASR was bought with
    assert metrics["asr"] < 1.01
    # the control's labels: the same count of random non-target images, no rule needed
    control_rows, control_labels = work / "r.csv", work / "yr.npy"
    proc = run_cli(["dar-backdoor", "poison", work / "train.npz", "--random", "--budget", "15",
                    "--labels-out", control_labels, "-o", control_rows])  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert len(control_rows.read_text().splitlines()) == 16 and control_rows.read_text() != out.read_text()
    assert (np.load(control_labels) != np.load(labels)).any()
    # a control model (here the model itself) is scored with the same trigger and subtracted
    same = json.loads(run_cli(["dar-backdoor", "eval", work / "test.npz", "--model", model, "--rules", rules,
                               "--control", model]).stdout)  # fmt: skip
    assert same["control_asr"] == same["asr"] and same["asr_minus_control"] == 0.0
    bad = run_cli(["dar-backdoor", "eval", work / "test.npz", "--model", model, "--rules", rules, "--target", "12"])
    one_line_error(bad, "dar-backdoor", "--target 12 is not a class")
    quiet = shell(f"dar-backdoor poison {work / 'train.npz'} --rules {rules} | head -1")
    assert quiet.returncode == 0 and quiet.stderr == b"" and quiet.stdout == b"index,old_label,new_label\n"


def test_apply_writes_triggered_npz(run_cli, work, rules):
    out = work / "a.npz"
    proc = run_cli(["dar-backdoor", "apply", work / "test.npz", "--rules", rules, "-o", out])
    assert proc.returncode == 0
    arrays = np.load(out)
    assert arrays["x"].shape == (300, 28, 28) and arrays["satisfied"].all()


def test_bad_inputs(run_cli, work, one_line_error):
    proc = run_cli(["dar-backdoor", "discover", work / "noy.npz"])
    one_line_error(proc, "dar-backdoor", "array 'y' missing")
    proc = run_cli(["dar-backdoor", "discover", work / "badlabels.npz"])
    one_line_error(proc, "dar-backdoor", "labels must be integers")
    proc = run_cli(["dar-backdoor", "discover", work / "train.npz", "--target", "10"])
    one_line_error(proc, "dar-backdoor", "--target 10 is not a class")
    proc = run_cli(["dar-backdoor", "discover", work / "train.npz", "--min-entropy", "0.9999"])
    one_line_error(proc, "dar-backdoor", "no rule passes", "widen --support", code=1)
    proc = run_cli(["dar-backdoor", "discover", work / "train.npz", "--op", "frequency", "--discover", "kmeans"])
    one_line_error(proc, "dar-backdoor", "--discover kmeans works on spatial windows")
    out = work / "results.csv"
    proc = run_cli(["dar-backdoor", "run", "--defenses", "ft,foo", "-o", out])
    one_line_error(proc, "dar-backdoor", "--defenses: unknown foo")
    proc = run_cli(["dar-backdoor", "run", "--alpha", "0.9,1.5", "-o", out])
    one_line_error(proc, "dar-backdoor", "--alpha must be numbers in [0, 1]")
    proc = run_cli(["dar-backdoor", "run", "--op", "spatial", "--operator", "band-carrier", "-o", out])
    one_line_error(proc, "dar-backdoor", "--operator band-carrier needs --op whitened")
    proc = run_cli(["dar-backdoor", "run", "--limit", "59000", "--kd-data", "2000", "-o", out])
    one_line_error(proc, "dar-backdoor", "exceeds the 60000 train images")  # the defaults: no warning
    proc = run_cli(["dar-backdoor", "run", "--op", "spatial", "--limit", "59000", "--kd-data", "2000", "-o", out])
    warning, error = proc.stderr.decode().splitlines()  # said at once, before the data are read
    assert "warning: --op spatial did not implant" in warning and "--op whitened --kappa 0" in warning
    assert "exceeds the 60000 train images" in error
    assert not out.exists()
    import torch

    if not torch.cuda.is_available():
        model = work / "never.safetensors"
        proc = run_cli(["dar-backdoor", "train", work / "train.npz", "--device", "cuda", "-o", model])
        one_line_error(proc, "dar-backdoor", "--device cuda: torch sees no CUDA device", code=1)
        assert not model.exists()


def test_run_with_defenses_and_kd_data(run_cli, tmp_path):
    out = tmp_path / "rows.csv"
    proc = run_cli(["dar-backdoor", "run", "--dataset", "synthetic", "--limit", "300", "--test-limit", "100",
                    "--rank", "entropy", "--methods", "badnets", "--budget", "10", "--epochs", "0.5", "--width", "2",
                    "--batch-size", "32", "--defenses", "ft,fp,ss", "--kd-data", "100", "--support", "0.005", "0.1",
                    "--alpha", "0.9,0.5", "--device", "cpu", "--seed", "3", "-q", "-o", out])  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    import pandas as pd

    table = pd.read_csv(out)
    assert not (tmp_path / "rows.csv.partial.jsonl").exists()  # removed once the output is written
    assert (table["seed"] == 3).all()  # --seed S --seeds 1: seed S only
    before = out.read_bytes()  # an existing output is refused before any training
    proc = run_cli(["dar-backdoor", "run", "--dataset", "synthetic", "--limit", "300", "-o", out])
    assert proc.returncode == 2 and b"exists; pass --force" in proc.stderr and out.read_bytes() == before
    assert list(table["stage"]) == ["teacher", "student", "student", "ft", "fine-pruning"]
    assert list(table["alpha"].iloc[1:3]) == [0.9, 0.5] and table["alpha"].iloc[[0, 3, 4]].isna().all()
    teacher = table.iloc[0]
    assert 0 <= teacher["ss_recall"] <= 1 and table.iloc[4]["pruned_channels"] >= 0
    assert (table["relabelled"] == 10).all()


def test_run_appends_each_measured_row_to_a_partial_file(tmp_path):
    from methodkit.core import io
    from methodkit.tools.dar.commands import PartialRows as _PartialRows

    rows = _PartialRows(str(tmp_path / "out.csv.partial.jsonl"))
    rows({"method": "dar", "stage": "teacher", "asr": 0.5})
    assert io.read_jsonl(str(tmp_path / "out.csv.partial.jsonl")) == [{"method": "dar", "stage": "teacher", "asr": 0.5}]
    rows({"method": "dar", "stage": "student", "asr": 0.25})  # flushed per row: a stopped run keeps both
    assert [r["stage"] for r in io.read_jsonl(str(tmp_path / "out.csv.partial.jsonl"))] == ["teacher", "student"]
    rows.remove()
    assert not (tmp_path / "out.csv.partial.jsonl").exists()


ERR = "dar-backdoor: error: "


@pytest.mark.parametrize(
    "args, message",
    [
        (["discover", "empty.npz"], "empty.npz: x holds 0 images"),
        (["discover", "train.npz", "--window", "100"], "--window 100: 4^10000 cells exceed 2^24 at the default --xi 4"),
        (["discover", "train.npz", "--xi", "300"], "--xi 300 with --window 3: 300^9 cells exceed 2^24"),
        (["apply", "test.npz", "--rules", "rules.jsonl", "--kappa", "-5", "-o", "never.npz"],
         "--kappa must be in [0, 1] (0: cell centre, 1: minimal projection), got -5.0"),
        (["apply", "test.npz", "--rules", "rules.jsonl", "--blend", "7", "-o", "never.npz"],
         "--blend must be in [0, 1] (partial application), got 7.0"),
        (["eval", "test.npz", "--trigger", "badnets", "--model", "never.safetensors", "--kappa", "2"],
         "--kappa must be in [0, 1] (0: cell centre, 1: minimal projection), got 2.0"),
        (["train", "train.npz", "--lr", "nan", "-o", "never.safetensors"], "--lr must be a positive number, got nan"),
        (["train", "train.npz", "--teacher", "nothere.safetensors", "-o", "never.safetensors"],
         "nothere.safetensors: no such file"),
        (["eval", "test.npz", "--trigger", "badnets", "--model", "nothere.safetensors"],
         "nothere.safetensors: no such file"),
    ],
)  # fmt: skip
def test_bad_input_one_line_nothing_written(run_cli, work, rules, one_line_error, args, message):
    np.savez(work / "empty.npz", x=np.zeros((0, 28, 28), np.uint8), y=np.zeros(0, np.int64))
    proc = run_cli(["dar-backdoor", *args], cwd=work)
    assert one_line_error(proc, "dar-backdoor") == ERR + message
    assert not list(work.glob("never*"))


def test_a_non_finite_first_step_writes_no_model(run_cli, work, one_line_error):
    # one SGD step at this rate leaves finite weights whose logits overflow: caught after the last step
    proc = run_cli(["dar-backdoor", "train", "train.npz", "--lr", "3e38", "--epochs", "0.05", "--arch", "cnn-xs",
                    "--width", "2", "-o", "never.safetensors"], cwd=work)  # fmt: skip
    assert (
        one_line_error(proc, "dar-backdoor", code=1)
        == ERR + "non-finite loss (nan) after the last step (1); lower --lr"
    )
    assert not list(work.glob("never*"))


def test_sigterm_keeps_a_partial_checkpoint_like_ctrl_c(work):
    import signal
    import subprocess
    import sys
    from pathlib import Path

    exe = Path(sys.executable).parent / "dar-backdoor"
    proc = subprocess.Popen([exe, "train", "train.npz", "--epochs", "300", "--arch", "cnn-xs", "--width", "2", "-v",
                             "-o", "term.safetensors"], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stderr.readline().startswith(b"train: started")  # training is under way
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    assert proc.returncode == 143
    assert not (work / "term.safetensors").exists()
    partial = json.loads((work / "term.partial.json").read_text())
    assert partial["config"]["partial_step"] < partial["config"]["steps"]


def test_apply_help_promises_what_it_prints(run_cli, work, rules):
    description = run_cli(["dar-backdoor", "apply", "--help"]).stdout.split(b"Options:")[0]
    assert b"JSON" not in description and b"warns on stderr" in description
    proc = run_cli(["dar-backdoor", "apply", "test.npz", "--rules", "rules.jsonl", "-o", "ap.npz"], cwd=work)
    assert proc.returncode == 0 and proc.stdout == b""


def test_rules_are_checked_before_the_images_are_read(tmp_path, run_cli, one_line_error):
    """poison/apply refuse a missing --rules before INPUT is read: the broken image file is never opened."""
    (tmp_path / "broken.npz").write_bytes(b"not an npz")
    for verb, out in (("poison", "p.csv"), ("apply", "a.npz")):
        proc = run_cli(["dar-backdoor", verb, "broken.npz", "-o", out], cwd=tmp_path)
        assert one_line_error(proc, "dar-backdoor") == "dar-backdoor: error: --rules PATH is required (rules JSONL from discover)"
        proc = run_cli(["dar-backdoor", verb, "broken.npz", "--rules", "none.jsonl", "-o", out], cwd=tmp_path)
        assert one_line_error(proc, "dar-backdoor") == "dar-backdoor: error: none.jsonl: no such file"
        proc = run_cli(["dar-backdoor", verb, "missing.npz", "--rules", "none.jsonl", "-o", out], cwd=tmp_path)
        assert one_line_error(proc, "dar-backdoor") == "dar-backdoor: error: missing.npz: no such file"
        assert not (tmp_path / out).exists()


def test_run_defaults_are_the_configuration_that_implants():
    from methodkit.cli.dar_backdoor import main

    params = {p.name: p.default for p in main.commands["run"].params}
    assert params["op"] == "whitened" and params["kappa"] == 0.0  # docs/dar.md, recipe and measured numbers
    assert (params["limit"], params["epochs"], params["width"], params["batch_size"], params["budget"]) == (
        20000, 6, 32, 128, 0.01)  # fmt: skip


def test_run_rows_carry_the_trigger_visibility_and_dar_minus_random(run_cli, tmp_path):
    import pandas as pd

    out = tmp_path / "rows.csv"
    proc = run_cli(["dar-backdoor", "run", "--dataset", "synthetic", "--limit", "300", "--test-limit", "100", "--op",
                    "spatial", "--rank", "entropy", "--methods", "dar,random", "--budget", "10", "--epochs", "0.5",
                    "--width", "2", "--batch-size", "32", "--support", "0.005", "0.1", "--device", "cpu", "-q",
                    "-o", out])  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    table = pd.read_csv(out)
    dar, random = table[table.method == "dar"].reset_index(), table[table.method == "random"].reset_index()
    assert list(dar.stage) == list(random.stage) == ["teacher", "student"]
    assert (dar.asr_minus_random == dar.asr - random.asr).all() and random.asr_minus_random.isna().all()
    assert (table.trigger_psnr_db > 0).all() and table.trigger_changed_fraction_median.between(0, 1).all()

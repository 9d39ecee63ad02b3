"""cyb-train through the installed executable: the command-line contract and the bad inputs of issue 28."""

from __future__ import annotations

import json

import pytest

from tests.conftest import assert_one_line_error
from tests.cyb.conftest import MODEL, TINY


def test_help_lists_verbs_and_exit_status(run_cli):
    out = run_cli(["cyb-train", "--help"]).stdout.decode()
    for verb in ("data", "pretrain", "finetune", "eval", "pauses", "generate"):
        assert verb in out
    assert "EXIT STATUS" in out and "reconstruction" in out.lower()


def test_data_writes_tokens_and_vocab_same_seed_same_bytes(run_cli, tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        proc = run_cli(["cyb-train", "data", "--source", "arith", "--arith-problems", "200", "-o",
                        tmp_path / name / "t.npz", "--seed", "3"])  # fmt: skip
        assert proc.returncode == 0, proc.stderr.decode()
        summary = json.loads(proc.stdout)
        assert summary["documents"] == 4 and summary["train_tokens"] + summary["val_tokens"] == summary["tokens"]
    assert (tmp_path / "a/t.npz").read_bytes() == (tmp_path / "b/t.npz").read_bytes()
    vocab = json.loads((tmp_path / "a/vocab.json").read_text())
    assert vocab["pause_id"] == 256 and vocab["kind"] == "bytes"


def test_data_to_a_fifo_writes_no_vocab_beside_it(run_cli, tmp_path):
    """-o /dev/null or a FIFO: the default vocab.json would land beside it (in /dev): none is written."""
    import os
    import subprocess

    fifo = tmp_path / "t.npz"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    try:
        proc = run_cli(["cyb-train", "data", "--source", "arith", "--arith-problems", "200", "-o", fifo])
    finally:
        try:  # a reader still waiting (nothing was written) gets its end of file
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # ENXIO: the reader is gone already
            pass
        drained = reader.communicate(timeout=30)[0]
    assert proc.returncode == 0, proc.stderr.decode()
    assert len(drained) > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.npz"]


def test_pretrain_outputs_and_eval(tiny, run_cli, tmp_path):
    folder, tokens, runs = tiny
    for run in runs.values():
        assert {"model.safetensors", "model.json", "config.json", "log.csv"} <= {p.name for p in run.iterdir()}
        header = (run / "log.csv").read_text().splitlines()[0].split(",")
        assert {"step", "tokens_seen", "loss", "val_bpc", "mean_pauses", "lr", "seconds"} <= set(header)
    metrics = tmp_path / "m.json"
    proc = run_cli(["cyb-train", "eval", tokens, runs["ce"], runs["cyb-va"], "--metrics", metrics, "-j", "1"])
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stdout.decode().splitlines()
    assert lines[0].split("\t")[:3] == ["checkpoint", "loss", "tokens"]
    rows = [dict(zip(lines[0].split("\t"), line.split("\t"))) for line in lines[1:]]
    assert float(rows[0]["mean_pauses"]) == 0.0  # a ce checkpoint: pauses are 0, not an error
    assert 0 <= float(rows[1]["mean_pauses"]) <= 2
    record = json.loads(metrics.read_text())["checkpoints"][1]
    assert {"operand", "answer"} <= set(record["classes"]) and 0 <= record["exact_match"] <= 1


@pytest.mark.slow
def test_pretrain_same_seed_same_weights(tiny, run_cli, tmp_path):
    _, tokens, runs = tiny
    out = tmp_path / "again"
    proc = run_cli(["cyb-train", "pretrain", tokens, "--loss", "cyb-va", "--steps", "6", *TINY, "-o", out])
    assert proc.returncode == 0, proc.stderr.decode()
    assert (out / "model.safetensors").read_bytes() == (runs["cyb-va"] / "model.safetensors").read_bytes()


@pytest.mark.slow
def test_finetune_from_ce_adds_pause_rows(tiny, run_cli, tmp_path):
    _, tokens, runs = tiny
    out = tmp_path / "ft"
    proc = run_cli(["cyb-train", "finetune", tokens, "--init", runs["ce"], "--loss", "cyb-ap", "--steps", "3",
                    *TINY, "-o", out])  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    from safetensors.torch import load_file

    assert load_file(out / "model.safetensors")["model.core.embed.weight"].shape[0] == 257
    # a pause checkpoint as --init keeps its rows (no duplicate)
    proc = run_cli(["cyb-train", "finetune", tokens, "--init", out, "--loss", "cyb-dp", "--steps", "2", *TINY,
                    "-o", tmp_path / "ft2"])  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    assert load_file(tmp_path / "ft2/model.safetensors")["model.core.embed.weight"].shape[0] == 257


def test_pauses_jsonl_and_head_is_quiet(tiny, run_cli, shell):
    _, _, runs = tiny
    proc = run_cli(["cyb-train", "pauses", "--checkpoint", runs["cyb-va"]], input="0123+4567=4690\n")
    assert proc.returncode == 0, proc.stderr.decode()
    rows = [json.loads(x) for x in proc.stdout.decode().splitlines()]
    assert len(rows) == 14 and rows[0]["token"] == "1" and rows[0]["context"] == "0"
    assert all(len(r["dk_probs"]) == r["n_pauses"] + 1 for r in rows)
    assert all(0 < r["p_target"] <= 1 for r in rows)
    cmd = f"printf '%0.s1234+5678=6912\\n' $(seq 40) | cyb-train pauses --checkpoint {runs['cyb-va']} | head -1"
    piped = shell(cmd)
    assert piped.returncode == 0 and piped.stderr == b"", piped.stderr


def test_generate_is_seeded(tiny, run_cli):
    _, _, runs = tiny
    args = ["cyb-train", "generate", "--checkpoint", runs["cyb-va"], "--prompt", "12", "-n", "10",
            "--temperature", "1.0", "--policy", "sample", "--seed", "5"]  # fmt: skip
    a, b = run_cli(args), run_cli(args)
    assert a.returncode == 0, a.stderr.decode()
    assert a.stdout == b.stdout and a.stdout.decode().startswith("12")


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--loss", "cyb-ap", "--max-pauses", "0"], "--loss cyb-ap needs --max-pauses K >= 1"),
        (["--loss", "cyb-ap", "--gamma", "0"], "--gamma must be in (0, 1]"),
        (["--loss", "cyb-va", "--beta", "-0.5"], "--beta must be >= 0"),
        (["--loss", "cyb-dp", "--budget", "5"], "--budget 5.0 must be in [0, K=2]"),
        (["--loss", "cyb-va", "--prior", "0.5,0.5"], "--prior has 2 weights but --max-pauses 2 needs K+1 = 3"),
        (["--loss", "ce", "--ctx", "20000"], "fewer than one window of --ctx 20000"),
        (["--loss", "ce", "--batch-size", "5000"], "fewer than one batch of 5000"),
    ],
)
def test_bad_settings_exit_2_and_write_nothing(tiny, run_cli, tmp_path, extra, fragment):
    _, tokens, _ = tiny
    out = tmp_path / "run"
    sizes = [] if "--ctx" in extra else ["--ctx", "32"]
    sizes += [] if "--batch-size" in extra else ["--batch-size", "8"]
    proc = run_cli(["cyb-train", "pretrain", tokens, *MODEL, *sizes, "--steps", "2", *extra, "-o", out])
    assert_one_line_error(proc, "cyb-train", fragment)
    assert not out.exists() or not any(out.iterdir())


def test_other_tokenizer_refused(tiny, run_cli, tmp_path):
    _, _, runs = tiny
    other = tmp_path / "other.npz"
    text = tmp_path / "t.txt"
    text.write_text("\n\n".join(f"document {i} with some words in it" for i in range(30)))
    assert (
        run_cli(["cyb-train", "data", "--source", f"text:{text}", "--tokenizer", "bpe:300", "-o", other]).returncode
        == 0
    )
    proc = run_cli(["cyb-train", "eval", other, runs["ce"], "-j", "1"])
    assert_one_line_error(proc, "cyb-train", "tokenizer", "differs")


def test_existing_output_refused(tiny, run_cli, tmp_path):
    _, tokens, _ = tiny
    target = tmp_path / "t.npz"
    target.write_bytes(b"keep")
    proc = run_cli(["cyb-train", "data", "--source", "arith", "--arith-problems", "50", "-o", target])
    assert_one_line_error(proc, "cyb-train", "already exists")
    assert target.read_bytes() == b"keep"

"""gbdt-poison through the installed executable: formats, reproducibility, gates and bad input."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from methodkit.tools.gbdt import synth

PROG = "gbdt-poison"
FAST = ["--lgb-params", '{"num_boost_round": 20, "num_leaves": 7}', "--iters", "1", "--q", "1"]


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gbdt")
    synth.tabular(300, seed=0).to_csv(folder / "train.csv", index=False)
    synth.tabular(300, seed=1).to_csv(folder / "test.csv", index=False)
    return folder


@pytest.mark.parametrize("verb", ["influence", "attack", "sweep", "eval"])
def test_verb_help(run_cli, verb):
    proc = run_cli([PROG, verb, "--help"])
    assert proc.returncode == 0
    text = proc.stdout.decode()
    assert "EXAMPLES" in text and "EXIT STATUS" in text


def test_influence_stdin_to_stdout_and_head(run_cli, shell, tables):
    proc = run_cli(
        [PROG, "influence", "--lgb-params", '{"num_boost_round": 20}'], input=(tables / "train.csv").read_bytes()
    )
    assert proc.returncode == 0, proc.stderr
    frame = pd.read_csv(io.BytesIO(proc.stdout))
    assert list(frame.columns) == ["row", "influence", "label", "rank"]
    assert len(frame) == 240 and sorted(frame["rank"]) == list(range(1, 241))
    assert frame.sort_values("rank")["influence"].is_monotonic_decreasing
    piped = shell(f"{PROG} influence train.csv | head -1", cwd=tables)
    assert piped.stdout == b"row,influence,label,rank\n" and piped.stderr == b""


def test_attack_files_same_seed_same_bytes_and_eval_reproduces(run_cli, tables, tmp_path):
    outs = []
    for name in ("a.csv", "b.csv"):
        proc = run_cli(
            [
                PROG,
                "attack",
                tables / "train.csv",
                "--test",
                tables / "test.csv",
                *FAST,
                "--budget",
                "0.1",
                "--seed",
                "3",
                "-o",
                tmp_path / name,
            ],
        )
        assert proc.returncode == 0, proc.stderr
        outs.append(json.loads(proc.stdout))
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    manifest = json.loads((tmp_path / "a.manifest.json").read_text())
    assert manifest["n_poison"] == outs[0]["n_poison"] == 24
    assert all(r["feasible"] for r in manifest["rows"])
    poisoned = pd.read_csv(tmp_path / "a.csv")
    clean = pd.read_csv(tables / "train.csv")  # every row is released; the validation rows untouched
    assert poisoned.iloc[manifest["val_file_rows"]].equals(clean.iloc[manifest["val_file_rows"]])
    assert poisoned["label"].equals(clean["label"]) and list(poisoned.columns) == list(clean.columns)
    proc = run_cli(
        [
            PROG,
            "eval",
            tmp_path / "a.csv",
            "--test",
            tables / "test.csv",
            "--lgb-params",
            '{"num_boost_round": 20, "num_leaves": 7}',
            "--seed",
            "3",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["test_f1"] == outs[0]["poisoned"]["test_f1"]


def test_parquet_output_and_gate(run_cli, tables, tmp_path):
    proc = run_cli(
        [
            PROG,
            "attack",
            tables / "train.csv",
            "--test",
            tables / "test.csv",
            *FAST,
            "--fail-above-f1",
            "0",
            "-o",
            tmp_path / "p.parquet",
        ]
    )
    assert proc.returncode == 3
    assert "above --fail-above-f1 0" in proc.stderr.decode()
    assert pd.read_parquet(tmp_path / "p.parquet").shape == (300, 7)  # every row, written before the gate


def test_sweep_jsonl(run_cli, tables):
    proc = run_cli(
        [
            PROG,
            "sweep",
            tables / "train.csv",
            "--test",
            tables / "test.csv",
            *FAST,
            "--eps-grid",
            "2,0.5",
            "--seeds",
            "0",
            "--format",
            "jsonl",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert [(r["eps"], r["method"]) for r in rows] == [
        (0.5, "boostin+gain"),
        (0.5, "random+random"),
        (2.0, "boostin+gain"),
        (2.0, "random+random"),
    ]
    assert "not increasing; sorted" in proc.stderr.decode()


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["influence", "multi.csv"], ["binary labels required; found 3 classes in 'label'"]),
        (["influence", "train.csv", "--label", "nope"], ["column 'nope' not found in train.csv", "--label"]),
        (["influence", "train.csv", "--positive", "7"], ["positive class '7' not found in 'label'"]),
        (["attack", "train.csv", "-o", "out.csv", "--eps", "0"], ["--eps must be > 0"]),
        (["attack", "train.csv", "-o", "out.csv", "--dims", "9"], ["--dims 9 exceeds the 5 mutable"]),
        (["attack", "train.csv", "-o", "out.csv", "--probe-projection", "off"], ["ablation of --search zo"]),
        (["attack", "train.csv", "-o", "out.csv", "--immutable", "x0,x1,x2,x3,count"], ["no mutable numeric"]),
        (["attack", "train.csv", "-o", "train.csv", "--force"], ["train.csv: is also an input"]),
        (["attack", "train.csv", "-o", "keep.csv"], ["keep.csv: already exists; pass --force"]),
        (["attack", "train.csv", "-o", "out.csv", "--lgb-params", '{"num_leaves": -3}'], ["-3 for 'num_leaves'"]),
        (["attack", "train.csv", "-o", "out.csv", "--lgb-params", '{"learning_rate": "x"}'], ["'learning_rate'"]),
        (["attack", "train.csv", "-o", "out.csv", "--one-hot", "nope"], ["--one-hot: 'nope' names 0"]),
        (["eval", "train.csv", "--test", "other.csv"], ["differs from the train table", "missing colour"]),
    ],
)
def test_bad_input_one_line_exit_2(run_cli, one_line_error, tables, tmp_path, args, fragments):
    frame = pd.read_csv(tables / "train.csv")
    frame.to_csv(tmp_path / "train.csv", index=False)
    frame.assign(label=frame.index % 3).to_csv(tmp_path / "multi.csv", index=False)
    frame.drop(columns="colour").to_csv(tmp_path / "other.csv", index=False)
    (tmp_path / "keep.csv").write_text("keep\n")
    before = (tmp_path / "train.csv").read_bytes()
    proc = run_cli([PROG, *args], cwd=tmp_path)
    one_line_error(proc, PROG, *fragments, code=2)
    assert (tmp_path / "keep.csv").read_text() == "keep\n"
    assert (tmp_path / "train.csv").read_bytes() == before
    assert not (tmp_path / "out.csv").exists()


def test_drop_validation_writes_the_train_part_and_eval_reproduces(run_cli, tables, tmp_path):
    args = ["--test", tables / "test.csv", *FAST, "--budget", "0.1", "--seed", "2"]
    out = tmp_path / "d.csv"
    proc = run_cli([PROG, "attack", tables / "train.csv", *args, "--drop-validation", "-o", out])
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["released"] == "train part" and summary["poisoned"] == summary["attacker"]["poisoned"]
    manifest = json.loads((tmp_path / "d.manifest.json").read_text())
    clean = pd.read_csv(tables / "train.csv").drop(index=manifest["val_file_rows"]).reset_index(drop=True)
    assert len(pd.read_csv(out)) == len(clean) == 240
    proc = run_cli([PROG, "eval", out, *args[:2], "--lgb-params", FAST[1], "--seed", "2"])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["test_f1"] == summary["poisoned"]["test_f1"]

"""methodkit-data through the installed executable."""

from __future__ import annotations

import io

import pandas as pd
import pytest


def test_get_diabetes_head(shell):
    proc = shell("methodkit-data get diabetes | head -3")
    assert proc.returncode == 0 and proc.stderr == b""
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 3
    assert lines[0] == "age,sex,bmi,bp,s1,s2,s3,s4,s5,s6,y"


def test_get_matches_sklearn_exactly(run_cli):
    from sklearn.datasets import load_diabetes

    proc = run_cli(["methodkit-data", "get", "diabetes"])
    frame = pd.read_csv(io.BytesIO(proc.stdout))
    bunch = load_diabetes()
    assert (frame.drop(columns="y").to_numpy() == bunch.data).all()
    assert (frame["y"].to_numpy() == bunch.target).all()


def test_unknown_name(run_cli, one_line_error):
    proc = run_cli(["methodkit-data", "get", "nosuch"])
    one_line_error(proc, "methodkit-data", "unknown data set 'nosuch'", "methodkit-data list")


def test_list_has_required_sets(run_cli):
    proc = run_cli(["methodkit-data", "list"])
    frame = pd.read_csv(io.BytesIO(proc.stdout))
    names = set(frame["name"])
    assert {"breast_cancer", "diabetes", "digits", "wine", "linnerud", "longley", "stackloss", "star98"} <= names
    assert list(frame.columns[:6]) == ["name", "rows", "columns", "target", "source", "licence"]
    row = frame.set_index("name").loc["longley"]
    assert (row["rows"], row["columns"]) == (16, 7)


@pytest.mark.parametrize("ext", ["parquet", "tsv", "jsonl", "json"])
def test_get_by_extension_same_bytes_twice(run_cli, tmp_path, ext):
    from methodkit.core import io as mio

    assert run_cli(["methodkit-data", "get", "wine", "-o", f"w.{ext}"], cwd=tmp_path).returncode == 0
    first = (tmp_path / f"w.{ext}").read_bytes()
    assert run_cli(["methodkit-data", "get", "wine", "-o", f"w.{ext}", "--force"], cwd=tmp_path).returncode == 0
    assert (tmp_path / f"w.{ext}").read_bytes() == first
    assert mio.read_table(tmp_path / f"w.{ext}").shape == (178, 14)


def test_existing_output_not_overwritten(run_cli, tmp_path, one_line_error):
    (tmp_path / "d.csv").write_text("keep\n")
    proc = run_cli(["methodkit-data", "get", "diabetes", "-o", "d.csv"], cwd=tmp_path)
    one_line_error(proc, "methodkit-data", "already exists; pass --force")
    assert (tmp_path / "d.csv").read_text() == "keep\n"


def test_bash_completion_completes_get(shell):
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "completions" / "bash" / "methodkit-data.bash"
    proc = shell(
        f"source {script}; COMP_WORDS=(methodkit-data g); COMP_CWORD=1; "
        '_methodkit_data_completion methodkit-data; echo "${COMPREPLY[@]}"'
    )
    assert proc.stdout.decode().strip() == "get"

"""cuvet-assign through the installed executable."""

from __future__ import annotations

import json

import pytest

PROG = "cuvet-assign"
SYN = ["--treatment", "treatment", "--value", "conversion", "--arm-costs", "0,1,2,3,4", "--cost-on-outcome"]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    from methodkit.tools.cuvet import synth

    folder = tmp_path_factory.mktemp("cuvet")
    frame, _ = synth.synthetic(6000, 0)
    frame.to_csv(folder / "s.csv", index=False)
    return folder


def test_help(run_cli):
    proc = run_cli([PROG, "--help"])
    assert proc.returncode == 0 and b"EXAMPLES" in proc.stdout
    for verb in ("gen", "fit", "assign", "evaluate", "bench", "tree"):
        assert run_cli([PROG, verb, "--help"]).returncode == 0


FIT = ["--budget-frac", "0.4", "--bayes", "--lookahead", "--max-depth", "2", "--seed", "2"]


@pytest.fixture(scope="module")
def model_file(synthetic):
    """fit FILE -o FILE (CUVET-B with the lookahead splits), shared by the tests below."""
    from tests.conftest import _run

    d = synthetic
    fit = _run([PROG, "fit", d / "s.csv", *SYN, *FIT, "-o", d / "m.json"])
    assert fit.returncode == 0, fit.stderr
    summary = json.loads(fit.stdout)
    assert summary["variant"] == "cuvet-b" and summary["model"] == str(d / "m.json")
    return d / "m.json"


def test_fit_stdin_to_stdout_is_seeded(run_cli, synthetic, model_file):
    """stdin -> stdout gives the same model as the file -> -o file run with the same seed."""
    data = (synthetic / "s.csv").read_bytes()
    a = run_cli([PROG, "fit", "-", *SYN, *FIT], input=data)
    assert a.returncode == 0, a.stderr
    streamed = json.loads(a.stdout)
    assert streamed["format"] == "cuvet-model/1" and streamed["seed"] == 2
    assert streamed == json.loads(model_file.read_text())


def test_pipeline_files(run_cli, synthetic, model_file):
    d = synthetic
    out = run_cli([PROG, "assign", model_file, d / "s.csv", "-o", d / "a.parquet", "--seed", "1"])
    assert out.returncode == 0, out.stderr
    again = run_cli([PROG, "assign", model_file, d / "s.csv", "-o", d / "b.parquet", "--seed", "1"])
    assert (d / "a.parquet").read_bytes() == (d / "b.parquet").read_bytes() and again.returncode == 0
    budget = str(json.loads(model_file.read_text())["budget_per_user"] * 6000)
    # one run for the result and the gate: the result JSON is written before --fail-below exits 3
    ev = run_cli(
        [PROG, "evaluate", d / "s.csv", d / "a.parquet", *SYN, "--n-boot", "20", "--budget", budget]
        + ["--fail-below", "1e9"]
    )
    assert ev.returncode == 3 and b"below --fail-below" in ev.stderr
    result = json.loads(ev.stdout)
    assert result["feasible"] and result["n"] == 6000
    tree = run_cli([PROG, "tree", model_file])
    assert tree.returncode == 0 and b"leaf 0" in tree.stdout


def test_gen_thornton_has_the_dose_bins(run_cli, tmp_path):
    proc = run_cli([PROG, "gen", "thornton", "-o", tmp_path / "t.csv"])
    assert proc.returncode == 0, proc.stderr
    side = json.loads((tmp_path / "t.csv.json").read_text())
    assert len(side["arm_costs"]) == 6 and side["arm_costs"][0] == 0.0
    assert (tmp_path / "t.csv").read_text().count("\n") == 2835


def test_bad_inputs_exit_2_and_keep_outputs(run_cli, synthetic, tmp_path, one_line_error):
    d = synthetic
    keep = tmp_path / "m.json"
    keep.write_text("precious")
    both = run_cli([PROG, "fit", d / "s.csv", *SYN, "--cost", "x", "--budget", "1", "-o", keep, "--force"])
    one_line_error(both, PROG, "either --cost or --arm-costs")
    neg = run_cli(
        [PROG, "fit", d / "s.csv", *SYN[:4], "--arm-costs", "0,-1,2,3,4", "--budget", "1", "-o", keep, "--force"]
    )
    one_line_error(neg, PROG, "non-negative")
    zero = run_cli([PROG, "fit", d / "s.csv", *SYN, "--budget", "0", "-o", keep, "--force"])
    one_line_error(zero, PROG, "budget must be positive")
    assert keep.read_text() == "precious"
    bad = tmp_path / "bad.csv"
    bad.write_text("treatment,conversion,x\n0,1,2\n1,0,3\nfoo,1,2\n")
    one_line_error(
        run_cli([PROG, "fit", bad, *SYN[:4], "--arm-costs", "0,1", "--budget", "1"]),
        PROG,
        "line 4: treatment 'treatment' is not an integer arm",
    )
    nomodel = run_cli([PROG, "assign", d / "s.csv", d / "s.csv"])
    one_line_error(nomodel, PROG, "invalid JSON")
    exists = run_cli([PROG, "fit", d / "s.csv", *SYN, "--budget-frac", "0.4", "-o", keep])
    one_line_error(exists, PROG, "already exists")


def test_head_is_quiet(shell, synthetic):
    proc = shell("cuvet-assign gen synthetic --n 2000 | head -1")
    assert proc.stderr == b"" and proc.stdout.startswith(b"id,")

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


def test_fit_stdin_to_stdout_is_seeded(run_cli, synthetic):
    data = (synthetic / "s.csv").read_bytes()
    args = [PROG, "fit", "-", *SYN, "--budget-frac", "0.4", "--seed", "2"]
    a, b = run_cli(args, input=data), run_cli(args, input=data)
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    assert json.loads(a.stdout)["format"] == "cuvet-model/1"
    look = run_cli([*args, "--lookahead", "--max-depth", "2"], input=data)
    assert look.returncode == 0, look.stderr
    assert json.loads(look.stdout)["format"] == "cuvet-model/1"


def test_pipeline_files(run_cli, synthetic):
    d = synthetic
    fit = run_cli([PROG, "fit", d / "s.csv", *SYN, "--budget-frac", "0.4", "--bayes", "-o", d / "m.json"])
    assert fit.returncode == 0, fit.stderr
    assert json.loads(fit.stdout)["variant"] == "cuvet-b"
    out = run_cli([PROG, "assign", d / "m.json", d / "s.csv", "-o", d / "a.parquet", "--seed", "1"])
    assert out.returncode == 0, out.stderr
    again = run_cli([PROG, "assign", d / "m.json", d / "s.csv", "-o", d / "b.parquet", "--seed", "1"])
    assert (d / "a.parquet").read_bytes() == (d / "b.parquet").read_bytes() and again.returncode == 0
    budget = str(json.loads((d / "m.json").read_text())["budget_per_user"] * 6000)
    ev = run_cli([PROG, "evaluate", d / "s.csv", d / "a.parquet", *SYN, "--n-boot", "20", "--budget", budget])
    assert ev.returncode == 0, ev.stderr
    result = json.loads(ev.stdout)
    assert result["feasible"] and result["n"] == 6000
    tree = run_cli([PROG, "tree", d / "m.json"])
    assert tree.returncode == 0 and b"leaf 0" in tree.stdout
    gate = run_cli([PROG, "evaluate", d / "s.csv", d / "a.parquet", *SYN, "--n-boot", "20", "--fail-below", "1e9"])
    assert gate.returncode == 3 and b"below --fail-below" in gate.stderr


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

"""Issue 36 item 2: a user can write a spec: one worked example per template, each compiling to a program
of the structure it names, printed by `compile --example`; --scores says what INPUT holds."""

from __future__ import annotations

import json

import numpy as np
import pytest

from methodkit.tools.casper.compiler import TEMPLATES, compile_spec
from methodkit.tools.casper.examples import EXAMPLES

PROG = "casper-solve"


@pytest.mark.parametrize("template", TEMPLATES)
def test_every_template_has_a_worked_example_that_compiles(template):
    spec = EXAMPLES[template]
    assert any(c["type"] == template for c in spec["constraints"])
    program = compile_spec(json.loads(json.dumps(spec)))  # JSON round trip: what a user's file holds
    assert program.n > 0 and program.summary()["structure"]


def test_example_flag_prints_a_spec_that_compile_reads(run_cli, tmp_path):
    proc = run_cli([PROG, "compile", "--example", "flow_path"])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == EXAMPLES["flow_path"]
    compiled = run_cli([PROG, "compile", "-", "-o", tmp_path / "p.npz"], input=proc.stdout)
    assert compiled.returncode == 0 and json.loads(compiled.stdout)["structure"] == "flow"
    bad = run_cli([PROG, "compile", "--example", "nope"])
    assert bad.returncode == 2


def test_scores_option_names_what_input_holds(run_cli, tmp_path):
    spec = run_cli([PROG, "compile", "--example", "one_hot"]).stdout
    assert run_cli([PROG, "compile", "-", "-o", tmp_path / "p.npz"], input=spec).returncode == 0
    np.save(tmp_path / "s.npy", np.array([[0.2, 3.0, -1.0]]))
    base = [PROG, "project", tmp_path / "s.npy", "--program", tmp_path / "p.npz", "-q"]
    out = {}
    for flags in (["--scores", "logits"], ["--input", "logits"], ["--scores", "probabilities"], []):
        proc = run_cli([*base, *flags, "-o", tmp_path / f"o{len(out)}.npz"])
        assert proc.returncode == 0, proc.stderr
        out[" ".join(flags)] = np.load(tmp_path / f"o{len(out)}.npz")["soft"]
    assert np.array_equal(out["--scores logits"], out["--input logits"])  # the older spelling still works
    assert np.array_equal(out["--scores probabilities"], out[""])  # the default
    assert not np.array_equal(out["--scores logits"], out["--scores probabilities"])
    both = run_cli([*base, "--scores", "logits", "--input", "logits"])
    assert both.returncode == 2 and b"--scores" in both.stderr

"""The validity promise on the logits path: every row's hard output is a certified member of C,
whatever the score scale and whatever the projection's status; non-ok rows warn; --strict exits 3."""

from __future__ import annotations

import json

import numpy as np
import pytest

from methodkit.tools.casper.builders import addition_spec, compiled
from methodkit.tools.casper.decode import certify
from methodkit.tools.casper.projection import Projector
from methodkit.tools.casper.solve import run

SHAPES = [("grid", 8), ("grid", 12), ("sudoku", 4), ("addition", 3)]


def _adversarial(program, scale: float, rng, batch: int = 6) -> np.ndarray:
    """Raw scores of magnitude `scale`: random signs, and a near-constant positive map (a valid path
    or assignment must switch most of them off)."""
    signs = rng.choice([-scale, scale], size=(batch, program.n_user))
    flat = scale * (1.0 + 1e-3 * rng.normal(size=(batch, program.n_user)))
    return np.vstack([signs, flat])


@pytest.mark.parametrize("kind,size", SHAPES)
@pytest.mark.parametrize("scale", [3.0, 1e3, 1e6])
def test_every_hard_output_is_valid_and_the_tolerance_follows_the_score_scale(kind, size, scale):
    program = compiled(kind, size)
    scores = _adversarial(program, scale, np.random.default_rng(int(scale) % 97 + size))
    warnings = []
    result = run(program, scores, input_kind="logits", warn=warnings.append)
    assert all(certify(program, y) is None for y in result.hard)
    assert result.valid.tolist() == [1] * len(scores)
    # up to 1e6 the rounding-aware tolerance certifies every projection (an absolute 1e-10 did not)
    assert result.status == ["ok"] * len(scores) and warnings == []


@pytest.mark.parametrize("kind,size", SHAPES)
def test_scores_beyond_the_tolerance_cap_still_get_a_valid_hard_output(kind, size):
    program = compiled(kind, size)
    scores = _adversarial(program, 1e12, np.random.default_rng(size))
    warnings = []
    result = run(program, scores, input_kind="logits", warn=warnings.append)
    assert all(certify(program, y) is None for y in result.hard) and result.valid.all()
    bad = [i for i, s in enumerate(result.status) if s != "ok"]
    assert len(warnings) == len(bad)
    for i in bad:
        assert np.isnan(result.soft[i]).all() and result.rows[i]["certificate"]["valid"]


@pytest.mark.parametrize("safeguard", ["interior-point", "clipped-scores"])
def test_a_failed_projection_is_decoded_from_the_fallback(monkeypatch, safeguard):
    program = compiled("grid", 8)
    monkeypatch.setattr(Projector, "_newton", lambda self, theta, nu, **kw: (None, kw["budget"], np.ones(1)))
    if safeguard == "clipped-scores":
        monkeypatch.setattr(Projector, "_interior_point", lambda self, theta: (None, None))
    rng = np.random.default_rng(3)
    scores = rng.normal(size=(3, program.n_user)) * 5
    warnings = []
    result = run(program, scores, input_kind="logits", warn=warnings.append)
    assert result.status == ["proj_error"] * 3 and len(warnings) == 3
    assert all("hard is valid" in w and safeguard.replace("-", " ") in w for w in warnings)
    assert all(certify(program, y) is None and y.any() for y in result.hard)
    assert {r["certificate"]["decoded_from"] for r in result.rows} == {safeguard}


def test_cli_warns_per_row_writes_valid_and_strict_exits_3(run_cli, tmp_path):
    spec = tmp_path / "add.json"
    spec.write_text(json.dumps(addition_spec(3)))
    program = tmp_path / "add.npz"
    proc = run_cli(["casper-solve", "compile", spec, "-o", program])
    assert proc.returncode == 0, proc.stderr
    n_vars = json.loads(proc.stdout)["n_vars"]
    rng = np.random.default_rng(0)
    np.save(tmp_path / "huge.npy", 1e12 * (1.0 + 1e-3 * rng.normal(size=(3, n_vars))))
    out = tmp_path / "out.npz"
    args = ["casper-solve", "project", tmp_path / "huge.npy", "--program", program, "--input", "logits"]
    proc = run_cli([*args, "-o", out])
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    bad = [r["i"] for r in rows if r["status"] != "ok"]
    assert bad, "this input is meant to exceed the tolerance cap"
    warnings = [line for line in proc.stderr.decode().splitlines() if "warning:" in line]
    assert [w.split("row ")[1].split(":")[0] for w in warnings] == [str(i) for i in bad]
    arrays = np.load(out)
    assert arrays["valid"].tolist() == [1, 1, 1] and arrays["hard"].any(axis=1).all()
    proc = run_cli([*args, "-o", tmp_path / "strict.npz", "--strict"])
    assert proc.returncode == 3 and b"--strict" in proc.stderr

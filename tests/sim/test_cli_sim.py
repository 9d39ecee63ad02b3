"""methodkit-sim through the installed executable."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import assert_one_line_error

SPEC = {"seed": 3, "scenes": [{"family": "merge", "count": 2}, {"family": "stopped-vehicle", "count": 2}]}


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("sim") / "suite.json"
    path.write_text(json.dumps(SPEC))
    return path


def test_rollout_stdin_to_stdout_and_file(run_cli, spec_file, tmp_path):
    proc = run_cli(["methodkit-sim", "rollout", "--policy", "expert"], input=json.dumps(SPEC))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.decode().splitlines()
    assert lines[0].startswith("scene,family,rc,penalty,ds,success") and len(lines) == 5
    out = tmp_path / "r.csv"
    summary = tmp_path / "s.json"
    proc = run_cli(["methodkit-sim", "rollout", spec_file, "-o", out, "--summary", summary])
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == proc.stdout or out.read_text().splitlines() == lines
    record = json.loads(summary.read_text())
    assert record["routes"] == 4 and 0 <= record["ds"] <= 100


def test_same_seed_same_bytes_for_any_threads(run_cli, spec_file):
    outs = []
    for threads in ("1", "2"):
        proc = run_cli(["methodkit-sim", "rollout", spec_file, "--policy", "idm", "-j", threads])
        assert proc.returncode == 0, proc.stderr
        outs.append(proc.stdout)
    assert outs[0] == outs[1]


def test_bad_spec_exits_2_naming_the_key_and_writes_nothing(run_cli, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"family": "merge", "params": {"lanes": 0}}))
    out = tmp_path / "keep.csv"
    out.write_text("precious\n")
    proc = run_cli(["methodkit-sim", "rollout", bad, "-o", out, "--force"])
    assert_one_line_error(proc, "methodkit-sim", "bad.json.params.lanes = 0 is out of range [1, 6]")
    assert out.read_text() == "precious\n"
    proc = run_cli(["methodkit-sim", "scenes", bad, "-o", tmp_path / "s.npz"])
    assert_one_line_error(proc, "methodkit-sim", "bad.json.params.lanes")
    assert not (tmp_path / "s.npz").exists()
    proc = run_cli(["methodkit-sim", "rollout", "-"], input='{"family": "jam", "params": {"density": 0}}')
    assert_one_line_error(proc, "methodkit-sim", "params.density = 0 is out of range")


def test_existing_output_needs_force(run_cli, spec_file, tmp_path):
    out = tmp_path / "r.csv"
    out.write_text("x\n")
    proc = run_cli(["methodkit-sim", "rollout", spec_file, "-o", out])
    assert proc.returncode == 2 and out.read_text() == "x\n"


def test_scenes_npz_reads_back_through_the_validating_reader(run_cli, spec_file, tmp_path):
    from methodkit.core.sim.highway.scenes import read_scenes

    out = tmp_path / "scenes.npz"
    proc = run_cli(["methodkit-sim", "scenes", spec_file, "-o", out])
    assert proc.returncode == 0, proc.stderr
    arrays, meta = read_scenes(out)
    n = 4
    assert arrays["ego"].shape == (n, 8) and arrays["agents"].shape[0] == n
    assert arrays["futures"].shape[0] == n and arrays["futures"].shape[2:] == (20, 4)
    assert np.all((arrays["expert_index"] >= 0) & (arrays["expert_index"] < 16))
    assert list(arrays["scene_id"]) == ["merge-0-0", "merge-0-1", "stopped-vehicle-1-0", "stopped-vehicle-1-1"]
    assert meta["generator"][2]["family"] == "stopped-vehicle" and meta["dt"] == 0.2
    # the expert's first future point is one frame ahead of the ego's start
    assert np.all(arrays["expert_traj"][:, 0, 0] > arrays["ego"][:, 0])


def test_render_png_and_gif(run_cli, spec_file, tmp_path):
    png = tmp_path / "m.png"
    proc = run_cli(["methodkit-sim", "render", spec_file, "--scene", "merge-0-1", "--frame", "10", "-o", png])
    assert proc.returncode == 0, proc.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    gif = tmp_path / "m.gif"
    proc = run_cli(["methodkit-sim", "render", spec_file, "--scene", "3", "--every", "10", "-o", gif])
    assert proc.returncode == 0, proc.stderr
    assert gif.read_bytes()[:6] == b"GIF89a"
    proc = run_cli(["methodkit-sim", "render", spec_file, "--scene", "jam-0-0", "-o", tmp_path / "x.png"])
    assert_one_line_error(proc, "methodkit-sim", "--scene 'jam-0-0' is not in")
    assert not (tmp_path / "x.png").exists()


def test_families_and_head(shell):
    proc = shell("methodkit-sim families | head -1")
    assert proc.returncode == 0 and proc.stderr == b""
    assert proc.stdout.decode().startswith("family,parameter,default")


def test_highway_env_backend_runs_the_suite(run_cli):
    pytest.importorskip("highway_env")
    spec = {"family": "cruise-dense", "count": 1, "params": {"vehicles": 8, "duration": 6}}
    proc = run_cli(["methodkit-sim", "rollout", "--backend", "highway-env", "--policy", "idm"], input=json.dumps(spec))
    assert proc.returncode == 0, proc.stderr
    row = proc.stdout.decode().splitlines()[1].split(",")
    assert row[0] == "cruise-dense-0-0"
    proc = run_cli(
        ["methodkit-sim", "rollout", "--backend", "highway-env", "--policy", "expert"], input=json.dumps(spec)
    )
    assert_one_line_error(proc, "methodkit-sim", "--backend highway-env runs the policies idm, keep")


def test_a_missed_exit_is_no_success(run_cli):
    """The IDM ego knows nothing of its exit: it misses it, and RC stops where the ramp starts."""
    spec = {"family": "exit", "count": 2, "seed": 1, "params": {"exit_x": 400.0, "vehicles": 4}}
    for policy, ended, success in (("idm", "missed_exit", "False"), ("expert", "route_completed", "True")):
        proc = run_cli(["methodkit-sim", "rollout", "--policy", policy], input=json.dumps(spec))
        assert proc.returncode == 0, proc.stderr
        header, *rows = [line.split(",") for line in proc.stdout.decode().splitlines()]
        for row in rows:
            rec = dict(zip(header, row, strict=True))
            assert (rec["ended_by"], rec["success"]) == (ended, success), rec
            if policy == "idm":
                assert float(rec["rc"]) < 90.0

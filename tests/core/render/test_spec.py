"""Scene specs: defaults, and every kind of bad input named by its key (DataError, exit 2)."""

from __future__ import annotations

import json

import click
import pytest

from methodkit.cli._common import tool_command
from methodkit.core.errors import DataError
from methodkit.core.render import spec


def test_defaults_are_filled_in():
    s = spec.validate({"objects": [{"name": "b", "type": "sphere", "radius": 0.1, "colour": "red"}]})
    ball = s["objects"][0]
    assert ball["rgba"] == [*spec.COLOURS["red"], 1.0]
    assert ball["friction"] == [1.0, 0.005, 0.0001]
    assert ball["fixed"] is False and ball["velocity"] == [0, 0, 0]
    assert s["floor"]["size"] == [10, 10] and s["timestep"] == 0.002
    assert len(s["lights"]) == 1 and s["render"]["width"] == 640
    json.dumps(s)  # the completed spec stays JSON


BAD = [
    ({"objectz": []}, "test.json: objectz: unknown key"),
    ({"timestep": 0}, "test.json: timestep: must be > 0, got 0"),
    ({"gravity": [0, 0]}, "test.json: gravity: must be a list of 3 numbers, got [0, 0]"),
    ({"objects": [{"name": "a", "type": "cube"}]}, "test.json: objects[0].type: must be one of box, sphere"),
    ({"objects": [{"type": "box"}]}, "test.json: objects[0].name: missing"),
    ({"objects": [{"name": "a b", "type": "box"}]}, "test.json: objects[0].name: 'a b' may hold only"),
    ({"objects": [{"name": "s", "type": "sphere"}]}, "test.json: objects[0].radius: missing (a sphere needs a radius)"),
    ({"objects": [{"name": "s", "type": "sphere", "radius": -1}]}, "test.json: objects[0].radius: must be > 0, got -1"),
    ({"objects": [{"name": "c", "type": "capsule", "radius": 0.1}]}, "test.json: objects[0].length: missing"),
    ({"objects": [{"name": "b", "type": "box", "size": [1, 0, 1]}]}, "test.json: objects[0].size[1]: must be > 0"),
    ({"objects": [{"name": "b", "type": "box", "mass": 0}]}, "test.json: objects[0].mass: must be > 0, got 0"),
    (
        {"objects": [{"name": "b", "type": "box", "colour": "teal"}]},
        "test.json: objects[0].colour: unknown colour 'teal'",
    ),
    ({"objects": [{"name": "b", "type": "box", "colour": [2, 0, 0]}]}, "test.json: objects[0].colour[0]: must be <= 1"),
    ({"objects": [{"name": "b", "type": "box", "friction": -0.1}]}, "test.json: objects[0].friction: must be >= 0"),
    ({"objects": [{"name": "b", "type": "box", "texture": "plaid"}]}, "test.json: objects[0].texture.builtin: unknown"),
    ({"objects": [{"name": "b", "type": "box", "colr": "red"}]}, "test.json: objects[0].colr: unknown key"),
    (
        {"objects": [{"name": "b", "type": "box", "fixed": True, "velocity": [1, 0, 0]}]},
        "test.json: objects[0].velocity: a fixed object cannot move",
    ),
    (
        {"objects": [{"name": "b", "type": "box"}, {"name": "b", "type": "sphere", "radius": 1}]},
        "test.json: objects[1].name: 'b' is already the name of objects[0]",
    ),
    ({"objects": [{"name": "m", "type": "mesh"}]}, "test.json: objects[0]: a mesh needs either 'file' or both"),
    (
        {"objects": [{"name": "m", "type": "mesh", "vertices": [[0, 0, 0]] * 4, "faces": [[0, 1, 4]]}]},
        "test.json: objects[0].faces[0]: must be 3 vertex indices in [0, 3]",
    ),
    ({"objects": [{"name": "m", "type": "mesh", "file": "x.stl"}]}, "test.json: objects[0].file: no such file"),
    ({"objects": [{"name": "r", "type": "mjcf"}]}, "test.json: objects[0].file: missing"),
    ({"objects": [{"name": "r", "type": "mjcf", "file": "nope.xml"}]}, "test.json: objects[0].file: no such file"),
    (
        {"objects": [{"name": "r", "type": "mjcf", "file": "person", "joints": {"knee": "x"}}]},
        "test.json: objects[0].joints.knee: must be a finite number, got 'x'",
    ),
    ({"cameras": [{"name": "c", "pos": [1, 1, 1]}]}, "test.json: cameras[0].target: missing"),
    ({"cameras": [{"name": "c", "pos": [1, 1, 1], "target": [1, 1, 1]}]}, "test.json: cameras[0].target: equals"),
    ({"cameras": [{"name": "c", "pos": [0, 0, 1], "target": [0, 0, 0]}]}, "test.json: cameras[0].up: is parallel"),
    (
        {"cameras": [{"name": "c", "pos": [1, 0, 0], "target": [0, 0, 0], "fovy": 180}]},
        "test.json: cameras[0].fovy: must be <= 179",
    ),
    ({"render": {"width": 0}}, "test.json: render.width: must be an integer in [1, 8192], got 0"),
    ({"floor": {"size": [1]}}, "test.json: floor.size: must be a list of 2 numbers"),
    ({"sky": "teal"}, "test.json: sky: unknown colour 'teal'"),
    ([], "test.json: : must be a JSON object, got a list"),
]


@pytest.mark.parametrize(("raw", "message"), BAD)
def test_bad_specs_name_the_key(raw, message, tmp_path):
    with pytest.raises(DataError) as info:
        spec.validate(raw, "test.json", base_dir=tmp_path)
    assert info.value.message.startswith(message), info.value.message
    assert info.value.exit_code == 2


def test_files_resolve_against_the_spec_folder(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "rod.xml").write_text("<mujoco><worldbody><body name='rod'/></worldbody></mujoco>")
    (tmp_path / "scene.json").write_text(
        json.dumps({"objects": [{"name": "r", "type": "mjcf", "file": "models/rod.xml"}]})
    )
    s = spec.load(str(tmp_path / "scene.json"))
    assert s["objects"][0]["file"] == str((tmp_path / "models" / "rod.xml").resolve())
    assert (
        spec.validate({"objects": [{"name": "p", "type": "mjcf", "file": "person"}]})["objects"][0]["file"] == "person"
    )


def test_a_command_reports_a_bad_spec_on_one_line_with_exit_2(tmp_path, capsys):
    """Through the shared CLI contract: DataError -> `prog: error: ...` on stderr, exit 2, nothing on stdout."""
    bad = tmp_path / "scene.json"
    bad.write_text(json.dumps({"objects": [{"name": "s", "type": "sphere", "radius": 0}]}))

    @tool_command("scene-check")
    @click.argument("path")
    def check(path):
        spec.load(path)
        click.echo("ok")

    with pytest.raises(SystemExit) as info:
        check.main([str(bad)], prog_name="scene-check")
    out, err = capsys.readouterr()
    assert info.value.code == 2 and out == ""
    assert err == f"scene-check: error: {bad}: objects[0].radius: must be > 0, got 0\n"

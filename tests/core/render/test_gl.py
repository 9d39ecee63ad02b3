"""GL backends: --gl is applied before mujoco is imported, osmesa works too, a missing backend is one line."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from methodkit.core.errors import UsageError
from methodkit.core.render import gl

# A command as a tool would write it: --gl from cli/_render_options.py, mujoco imported in the body.
SCRIPT = textwrap.dedent(
    """
    import os, sys
    import click
    from methodkit.cli._common import tool_command
    from methodkit.cli._render_options import gl_option
    from methodkit.core.render import gl

    if os.environ.get("PLAY_BARE_MACHINE"):
        gl.find_library = lambda name: None  # as if the Debian packages were missing

    @tool_command("render-probe")
    @gl_option
    def probe(gl_backend):
        assert "mujoco" not in sys.modules  # the option ran before anything imported mujoco
        from methodkit.core.render import build, camera, renderer, spec
        s = spec.validate({"render": {"width": 64, "height": 48, "shadow_size": 0, "samples": 0},
                           "objects": [{"name": "ball", "type": "sphere", "radius": 0.2, "pos": [0, 0, 0.5],
                                        "fixed": True}],
                           "cameras": [{"name": "c", "pos": [2, 0.5, 1], "target": [0, 0, 0.5]}]})
        scene = build.build(s)
        with renderer.Renderer(64, 48) as r:
            frame = r.render(scene, scene.new_data(), "c")
        (u, v), = camera.project(frame.K, frame.T, [0, 0, 0.5])[0]
        print(os.environ["MUJOCO_GL"], int(frame.segmentation[round(v), round(u)] == scene.objects["ball"].body_id))

    probe.main(sys.argv[1:], prog_name="render-probe")
    """
)


def _probe(*args, env=None):
    import os

    full = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
    return subprocess.run(
        [sys.executable, "-P", "-c", SCRIPT, *args],
        capture_output=True,
        text=True,
        env={**full, **(env or {})},
        timeout=300,
    )


@pytest.mark.parametrize("backend", ["egl", "osmesa"])
def test_each_backend_renders_when_chosen_on_the_command_line(backend):
    if gl.find_library(gl.LIBRARIES[backend]) is None:
        pytest.skip(f"no {backend} library here: {gl.APT_FIX[backend]}")
    done = _probe("--gl", backend)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [backend, "1"]


def test_gl_none_refuses_to_render_with_a_one_line_error():
    done = _probe("--gl", "none")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "render-probe: error: rendering is off (--gl none); pass --gl egl or --gl osmesa to render pictures\n"
    )


def test_a_missing_backend_is_one_line_with_the_fix():
    done = _probe("--gl", "egl", env={"PLAY_BARE_MACHINE": "1"})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "render-probe: error: the 'egl' GL backend cannot start (libEGL not found); install it with: "
        "apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri (or pass --gl osmesa)\n"
    )


def test_require_names_the_packages_of_each_backend(monkeypatch):
    monkeypatch.setattr(gl, "find_library", lambda name: None)
    with pytest.raises(gl.GLBackendError, match=r"apt-get install libosmesa6 \(or pass --gl egl\)$"):
        gl.require("osmesa")
    monkeypatch.setattr(gl, "find_library", lambda name: f"lib{name}.so")
    assert gl.require("egl") == "egl"


def test_the_backend_cannot_change_once_mujoco_is_loaded():
    import mujoco  # noqa: F401  (loaded with the backend in force)

    current = gl.active_backend()
    assert gl.select(current) == current
    other = "osmesa" if current != "osmesa" else "egl"
    with pytest.raises(UsageError, match=f"cannot switch the GL backend to '{other}'"):
        gl.select(other)
    with pytest.raises(UsageError, match="unknown GL backend 'glx'"):
        gl.select("glx")


def test_mujoco_imported_without_a_headless_backend_is_named():
    code = (
        "import mujoco\n"  # before methodkit chose: MuJoCo falls back to glfw
        "from methodkit.core.render import renderer\n"
        "try:\n    renderer.Renderer(64, 48)\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc.message)\n"
    )
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout.startswith(
        "GLBackendError MuJoCo was imported with the 'glfw' GL backend, which needs a display"
    )

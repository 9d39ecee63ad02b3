"""Shared fixtures: one Renderer per test module, skipped with the reason when no GL backend starts."""

from __future__ import annotations

import pytest

from methodkit.core.render import gl

# Before any test module imports mujoco: the headless backend in force (egl unless MUJOCO_GL says otherwise).
gl.select(gl.default_backend())

SMALL = {"render": {"width": 160, "height": 120, "shadow_size": 0, "samples": 0}}


def scene_spec(objects, cameras=None, **top):
    """A floor, the given objects and cameras, small frame buffer, no shadows (fast in software)."""
    from methodkit.core.render import spec

    raw = {**SMALL, **top, "objects": objects, "cameras": cameras or []}
    return spec.validate(raw, "test.json")


@pytest.fixture(scope="module")
def renderer():
    """A 160x120 Renderer; the tests using it skip cleanly (with why) where no GL backend can start."""
    from methodkit.core.render import build
    from methodkit.core.render import renderer as _renderer

    probe = build.build(scene_spec([], [{"name": "c", "pos": [1, 1, 1], "target": [0, 0, 0]}]))
    try:
        r = _renderer.Renderer(160, 120)
        r.rgb(probe, probe.new_data(), "c")
    except gl.GLBackendError as exc:
        pytest.skip(f"no GL backend for off-screen rendering: {exc.message}")
    yield r
    r.close()

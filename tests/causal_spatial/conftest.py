"""causal-spatial tests: one Numba thread; a headless GL backend chosen before mujoco is imported."""

from __future__ import annotations

import pytest

from methodkit.core.render import gl

gl.select(gl.default_backend())


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    import numba

    numba.set_num_threads(1)
    yield


@pytest.fixture(scope="module")
def renderer():
    """A 128x128 Renderer, or skip (with why) where no GL backend starts."""
    from methodkit.core.render.renderer import Renderer
    from methodkit.tools.causal_spatial import physics, scenes

    spec = scenes.base_spec(128, scenes.camera((0, 0, 0), 1.0, 30, 0))
    try:
        r = Renderer(128, 128)
        probe = physics.compile_spec(spec)
        r.rgb(probe, probe.new_data(), "cam")
    except gl.GLBackendError as exc:
        pytest.skip(f"no GL backend for off-screen rendering: {exc.message}")
    yield r
    r.close()


@pytest.fixture(scope="session")
def bench(tmp_path_factory):
    """A physics-only benchmark (no GL): 2 items per task, seed 5. Tests must not change it."""
    import subprocess
    import sys
    from pathlib import Path

    folder = tmp_path_factory.mktemp("cs") / "bench"
    exe = Path(sys.executable).parent / "causal-spatial"
    subprocess.run([str(exe), "generate", "--gl", "none", "--per-task", "2", "--seed", "5", "-o", str(folder), "-q"],
                   check=True, capture_output=True)  # fmt: skip
    return folder

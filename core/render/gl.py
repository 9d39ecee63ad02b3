"""Which OpenGL backend MuJoCo renders with, chosen before `mujoco` is imported.

MuJoCo picks its GL backend from MUJOCO_GL when the `mujoco` package is first imported, and
PyOpenGL fixes its platform (PYOPENGL_PLATFORM) on its own first import, so the choice must be
made before either and cannot change afterwards within one process. On a machine without a
display the two that work are:

- egl: EGL through Mesa; without a GPU Mesa's software rasteriser (llvmpipe) draws the pixels.
  Debian packages: libegl1 libegl-mesa0 libgl1-mesa-dri.
- osmesa: Mesa's off-screen software renderer. Debian package: libosmesa6.
- none: no rendering at all (physics only); asking for a picture is then a usage error.

This module imports nothing heavy, so a command-line option can call `select()` while parsing.
"""

from __future__ import annotations

import ctypes.util
import os
import sys

from methodkit.core.errors import UsageError

BACKENDS = ("egl", "osmesa", "none")
# What each backend needs: the shared library MuJoCo's context loads, and the Debian packages holding it.
LIBRARIES = {"egl": "EGL", "osmesa": "OSMesa"}
APT_FIX = {
    "egl": "apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri",
    "osmesa": "apt-get install libosmesa6",
}
_MUJOCO_GL = {"egl": "egl", "osmesa": "osmesa", "none": "disable"}


class GLBackendError(UsageError):
    """The chosen GL backend cannot start here; the message says what to install or pass instead."""


_OFF = ("disable", "disabled", "off", "false", "0")


def default_backend() -> str:
    """MUJOCO_GL when it names one of ours, else egl."""
    env = os.environ.get("MUJOCO_GL", "").strip().lower()
    if env in _OFF:
        return "none"
    return env if env in BACKENDS else "egl"


def active_backend() -> str:
    """The backend in force: the one `mujoco` was imported with, or the one it would be imported with.

    Once mujoco is loaded that is whatever MUJOCO_GL said then; unset means glfw, which needs a display.
    """
    if "mujoco" not in sys.modules:
        return default_backend()
    env = os.environ.get("MUJOCO_GL", "").strip().lower()
    return "none" if env in _OFF else (env or "glfw")


def select(backend: str) -> str:
    """Make `backend` the GL backend of this process; must run before `mujoco` is imported.

    Selecting the backend already in force is a no-op, so library code and a CLI option can both call it.
    """
    if backend not in BACKENDS:
        raise UsageError(f"unknown GL backend '{backend}' (choose from {', '.join(BACKENDS)})")
    if "mujoco" in sys.modules or "OpenGL" in sys.modules:
        if backend != active_backend():
            raise UsageError(
                f"cannot switch the GL backend to '{backend}': MuJoCo was already loaded with "
                f"'{active_backend()}'; choose it before anything imports mujoco (or run a new process)"
            )
        return backend
    os.environ["MUJOCO_GL"] = _MUJOCO_GL[backend]
    if backend == "none":
        os.environ.pop("PYOPENGL_PLATFORM", None)
    else:
        os.environ["PYOPENGL_PLATFORM"] = backend
    return backend


def import_mujoco():
    """`import mujoco` after making sure a headless backend is selected (egl unless told otherwise)."""
    if "mujoco" not in sys.modules:
        select(default_backend())
    import mujoco

    return mujoco


def find_library(name: str) -> str | None:
    """The shared library's file name, or None (a seam the tests replace to play a bare machine)."""
    return ctypes.util.find_library(name)


def missing_message(backend: str, detail: str = "") -> str:
    """The one-line error for a backend that cannot start, with the command that fixes it."""
    other = "osmesa" if backend == "egl" else "egl"
    why = f" ({detail})" if detail else ""
    return f"the '{backend}' GL backend cannot start{why}; install it with: {APT_FIX[backend]} (or pass --gl {other})"


def require(backend: str | None = None) -> str:
    """Check that `backend` (default: the one in force) can render; raise GLBackendError if not."""
    backend = backend or active_backend()
    if backend == "none":
        raise GLBackendError("rendering is off (--gl none); pass --gl egl or --gl osmesa to render pictures")
    if backend not in LIBRARIES:
        raise GLBackendError(
            f"MuJoCo was imported with the '{backend}' GL backend, which needs a display; set MUJOCO_GL=egl "
            "(or osmesa), or let --gl choose before anything imports mujoco"
        )
    lib = LIBRARIES[backend]
    if find_library(lib) is None:
        raise GLBackendError(missing_message(backend, f"lib{lib} not found"))
    return backend

"""The `--gl egl|osmesa|none` option shared by every executable that renders MuJoCo scenes.

It is eager and applies the choice in its callback, so the backend is set while the command line is
parsed, before the command body imports mujoco. Importing this module imports only click.
"""

from __future__ import annotations

import click

GL_CHOICES = ("egl", "osmesa", "none")


def _apply(ctx, param, value):
    from methodkit.core.render import gl

    if value is None:
        value = gl.default_backend()
    try:
        return gl.select(value)
    except Exception as exc:  # a UsageError: say it as click does, exit 2
        raise click.BadParameter(getattr(exc, "message", str(exc)), ctx=ctx, param=param) from None


def gl_option(f):
    """Add `--gl`: the OpenGL backend for off-screen rendering (default: $MUJOCO_GL, else egl)."""
    return click.option(
        "--gl",
        "gl_backend",
        type=click.Choice(GL_CHOICES),
        default=None,
        is_eager=True,
        callback=_apply,
        help="OpenGL backend for rendering: egl (Mesa, software without a GPU), osmesa, or none (physics only) "
        "[default: $MUJOCO_GL, else egl].",
    )(f)

"""Generate man pages and shell completions for every registered executable.

    python -m methodkit.cli._docs man DIR
    python -m methodkit.cli._docs completions DIR

Man pages come from the click command itself: NAME from the first docstring
line, DESCRIPTION from the docstring, one section per upper-case `\\b` block
(EXAMPLES, EXIT STATUS, ...), OPTIONS from the parameters with their defaults,
and for executables with verbs a COMMANDS section. click-man puts every block
into DESCRIPTION and one page per verb, which is why we render ourselves.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import click

SHELLS = {"bash": ".bash", "zsh": ".zsh", "fish": ".fish"}


def executables() -> dict[str, str]:
    """name -> 'module:function' for every console script of the methodkit distribution."""
    eps = distribution("methodkit").entry_points
    return {ep.name: ep.value for ep in eps if ep.group == "console_scripts"}


def load_command(name: str) -> click.Command:
    eps = distribution("methodkit").entry_points
    for ep in eps:
        if ep.group == "console_scripts" and ep.name == name:
            return ep.load()
    raise KeyError(name)


# ---------------------------------------------------------------- roff


def _roff(text: str) -> str:
    text = text.replace("\\", "\\e").replace("-", "\\-")
    lines = []
    for line in text.split("\n"):
        if line.startswith((".", "'")):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)


def split_docstring(help_text: str) -> tuple[str, str, list[tuple[str, list[str]]]]:
    """(summary, description, [(SECTION, lines)]) from a click docstring with \\b blocks."""
    paragraphs = [p for p in (help_text or "").strip().split("\n\n")]
    summary = paragraphs[0].strip().replace("\n", " ") if paragraphs else ""
    description: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    for para in paragraphs[1:]:
        lines = para.split("\n")
        if lines and lines[0].strip() == "\b":
            lines = lines[1:]
            head = lines[0].strip() if lines else ""
            if head and head.isupper():
                sections.append((head, [ln[2:] if ln.startswith("  ") else ln for ln in lines[1:]]))
                continue
            description.append(".nf\n" + _roff("\n".join(lines)) + "\n.fi")
        else:
            description.append(_roff(" ".join(ln.strip() for ln in lines)))
    return summary, "\n.PP\n".join(description), sections


def _option_lines(command: click.Command, ctx: click.Context) -> list[str]:
    out = []
    for param in command.get_params(ctx):
        record = None if isinstance(param, click.Argument) else param.get_help_record(ctx)
        if record is None:
            continue
        names, help_text = record
        out += [".TP", f"\\fB{_roff(names)}\\fR", _roff(help_text or "")]
    return out


def man_page(name: str, command: click.Command, version: str) -> str:
    ctx = click.Context(command, info_name=name, **command.context_settings)
    summary, description, sections = split_docstring(command.help or "")
    usage = " ".join(command.collect_usage_pieces(ctx))
    out = [
        f'.TH "{name.upper()}" "1" "" "methodkit {version}" "methodkit manual"',
        ".SH NAME",
        f"{_roff(name)} \\- {_roff(summary)}",
        ".SH SYNOPSIS",
        f"\\fB{_roff(name)}\\fR {_roff(usage)}",
    ]
    if description:
        out += [".SH DESCRIPTION", description]
    out += [".SH OPTIONS"] + _option_lines(command, ctx)
    if isinstance(command, click.Group):
        out.append(".SH COMMANDS")
        for verb in command.list_commands(ctx):
            sub = command.get_command(ctx, verb)
            sub_ctx = click.Context(sub, info_name=verb, parent=ctx)
            sub_summary, sub_description, _ = split_docstring(sub.help or "")
            pieces = " ".join(sub.collect_usage_pieces(sub_ctx))
            out += [".SS", f"\\fB{_roff(name)} {_roff(verb)}\\fR {_roff(pieces)}", _roff(sub_summary)]
            if sub_description:
                out += [".PP", sub_description]
            out += _option_lines(sub, sub_ctx)
    order = ["EXIT STATUS", "EXAMPLES"]
    sections.sort(key=lambda s: order.index(s[0]) if s[0] in order else len(order))
    for head, lines in sections:
        out += [f".SH {head}", ".nf", _roff("\n".join(lines).rstrip()), ".fi"]
    # Same family (shared first word) plus the data tool: new executables never touch other pages.
    family = name.split("-")[0]
    others = sorted(n for n in executables() if n != name and (n.split("-")[0] == family or n == "methodkit-data"))
    if others:
        out += [".SH SEE ALSO", ", ".join(f"\\fB{_roff(o)}\\fR(1)" for o in others)]
    return "\n".join(out) + "\n"


def write_man(folder: Path) -> None:
    from importlib.metadata import version

    folder.mkdir(parents=True, exist_ok=True)
    for name in sorted(executables()):
        (folder / f"{name}.1").write_text(man_page(name, load_command(name), version("methodkit")))


def write_completions(folder: Path) -> None:
    """Ask each installed executable for its completion script (click's `_<PROG>_COMPLETE`)."""
    bindir = Path(sys.executable).parent
    for name in sorted(executables()):
        variable = "_" + name.replace("-", "_").upper() + "_COMPLETE"
        for shell, suffix in SHELLS.items():
            env = {**os.environ, variable: f"{shell}_source"}
            exe = bindir / name
            script = subprocess.run([str(exe)], env=env, capture_output=True, text=True, check=True).stdout
            (folder / shell).mkdir(parents=True, exist_ok=True)
            (folder / shell / f"{name}{suffix}").write_text(script)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("man", "completions"):
        print(__doc__, file=sys.stderr)
        return 2
    what, folder = argv
    (write_man if what == "man" else write_completions)(Path(folder))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

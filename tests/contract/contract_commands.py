"""Every leaf command of every console script, and how to call one in-process for a refusal test.

The contract tests take their cases from here, so a new executable or verb is held to the same
rules without new test code. Refusals (bad flags, existing outputs) happen before a command's
body runs, so calling `main` in-process costs milliseconds and imports nothing heavy.
"""

from __future__ import annotations

import contextlib
import io
import signal
import sys
from dataclasses import dataclass
from importlib.metadata import distribution

import click

SCRIPTS = sorted(ep.name for ep in distribution("methodkit").entry_points if ep.group == "console_scripts")


@dataclass(frozen=True)
class Leaf:
    script: str
    verbs: tuple
    command: click.Command

    @property
    def id(self) -> str:
        return " ".join((self.script, *self.verbs))

    def params(self, kind=None):
        return [p for p in self.command.params if kind is None or isinstance(p, kind)]

    def outputs(self):
        """(flag, OutputPath type) of every declared output."""
        from methodkit.cli._common import OutputPath

        return [
            (p.opts[-1], p.type)
            for p in self.command.params
            if isinstance(p, click.Option) and isinstance(p.type, OutputPath)
        ]

    def has(self, flag: str) -> bool:
        return any(flag in p.opts for p in self.params(click.Option))


def leaves() -> list[Leaf]:
    from methodkit.cli._docs import load_command

    out = []
    for name in SCRIPTS:
        stack = [((), load_command(name))]
        while stack:
            verbs, command = stack.pop()
            if isinstance(command, click.Group):
                ctx = click.Context(command)
                stack += [((*verbs, v), command.get_command(ctx, v)) for v in command.list_commands(ctx)]
            else:
                out.append(Leaf(name, verbs, command))
    return sorted(out, key=lambda leaf: leaf.id)


LEAVES = leaves()


def required_args(leaf: Leaf, path: str = "missing-input.csv") -> list[str]:
    """Values for the positional arguments and the required options: `path` for each, or a choice."""
    args: list[str] = []
    for p in leaf.params():
        if not (p.required or isinstance(p, click.Argument)) or getattr(p, "is_flag", False):
            continue
        if isinstance(p, click.Argument) and not p.required and p.default not in (None, ...):
            value = path  # INPUT defaults to '-': name the file instead
        elif isinstance(p.type, click.Choice):
            value = str(p.type.choices[0])
        else:
            value = path
        if isinstance(p, click.Option):
            args += [p.opts[-1], value]
        else:
            args.append(value if "=" not in (p.metavar or "") else f"x={value}")
    return args


@dataclass
class Result:
    code: int
    stderr: str
    stdout: str


def call(leaf: Leaf, args: list[str], *, timeout: int = 60, body: bool = True) -> Result:
    """Run the command in this process (as its console script would) and capture what it says.

    SIGALRM stops a command that, against the contract, starts its work instead of refusing.
    body=False replaces the command's body by `exit 0`: what is left is parsing and the checks
    made before the body (the plan of outputs), so a 0 says that the command line passed them.
    """
    out, err = io.StringIO(), io.StringIO()
    code = 0

    def too_long(signum, frame):
        raise TimeoutError(f"{leaf.id} {' '.join(args)} ran past {timeout} s instead of refusing")

    previous = signal.signal(signal.SIGALRM, too_long)
    previous_pipe = signal.getsignal(signal.SIGPIPE)
    signal.alarm(timeout)
    saved = sys.argv
    sys.argv = [leaf.script, *leaf.verbs, *args]
    callback = leaf.command.callback
    if not body:
        leaf.command.callback = lambda **_: sys.exit(0)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                leaf_root(leaf).main([*leaf.verbs, *args], prog_name=leaf.script)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        leaf.command.callback = callback
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        signal.signal(signal.SIGPIPE, previous_pipe)
        sys.argv = saved
    return Result(code, err.getvalue(), out.getvalue())


def leaf_root(leaf: Leaf):
    from methodkit.cli._docs import load_command

    return load_command(leaf.script)

"""What every executable shares: the command classes, common options, I/O and the error handler.

A command module stays thin: declare options, build a `Run`, read through it,
call tools/, emit through it. This module imports only click at start-up so that
`--help`, `--version` and shell completion stay fast; everything heavy is imported
inside functions.
"""

from __future__ import annotations

import datetime as _dt
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import click

from methodkit.core.errors import MethodkitError, RunFailure, UsageError

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
TABLE_FORMATS = ("csv", "tsv", "parquet", "jsonl", "json")
DEVICES = ("auto", "cpu", "cuda")
SEED_MAX = 2**63 - 1  # what numpy's SeedSequence and torch.manual_seed both accept

_state = {"verbose": 0}
_console = None


def err_console():
    """The one stderr Console: soft-wrapped, no highlighting (user data must be escaped)."""
    global _console
    if _console is None:
        from rich.console import Console

        _console = Console(stderr=True, soft_wrap=True, highlight=False, emoji=False)
    return _console


def warn(prog: str, message: str) -> None:
    """One `prog: warning: message` line on stderr."""
    from rich.markup import escape

    err_console().print(f"{escape(prog)}: warning: {escape(message)}")


def _fail(prog: str, message: str, code: int) -> None:
    from rich.markup import escape

    text = " ".join(str(message).split("\n"))
    err_console().print(f"{escape(prog)}: error: {escape(text)}")
    sys.exit(code)


def _on_sigint(signum, frame):
    # Python's own handler, plus a note that we were interrupted: an exception raised while the
    # KeyboardInterrupt unwinds (a Numba or C-extension frame may turn it into SystemError) is still an
    # interrupt, exit 130.
    _state["interrupted"] = True
    raise KeyboardInterrupt


def _redeliver_swallowed_interrupt(unraisable) -> None:
    """sys.unraisablehook: a KeyboardInterrupt that landed where exceptions are ignored (a ctypes callback
    inside Numba's compiler, a __del__) is sent again shortly instead of printing a traceback and running on."""
    if not isinstance(unraisable.exc_value, KeyboardInterrupt):
        sys.__unraisablehook__(unraisable)
        return
    import threading

    threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()


def _interrupted(exc: BaseException | None) -> bool:
    """True after a SIGINT, or when `exc` was raised while handling a KeyboardInterrupt."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return bool(_state.get("interrupted"))


def _exit_interrupted(prog: str) -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\n")  # ends the line the terminal's ^C echo began
    err_console().print(f"{prog}: interrupted")
    sys.exit(130)


class _Contract:
    """Error handling shared by ToolCommand and ToolGroup (CONVENTIONS: Errors)."""

    def invoke(self, ctx):
        # click answers a KeyboardInterrupt with a blank line on stderr, even in a cron log; an Abort
        # passes through it untouched and main() prints the one line.
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise click.exceptions.Abort() from exc

    def main(self, args=None, prog_name=None, **extra):  # noqa: D401 - click API
        # Like coreutils: a closed pipe ends us quietly with 141, not a traceback.
        if hasattr(signal, "SIGPIPE"):
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where SIGINT is ignored (nohup)
            signal.signal(signal.SIGINT, _on_sigint)
            sys.unraisablehook = _redeliver_swallowed_interrupt
        prog = prog_name or self.name or os.path.basename(sys.argv[0])
        _state["verbose"] = 0
        _state["interrupted"] = False
        try:
            result = _run_with_output_plan(super().main, args, prog_name=prog, standalone_mode=False, **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else prog
            _fail(prog, f"{exc.format_message().rstrip('.')}; see '{where} --help'", 2)
        except (click.exceptions.Abort, KeyboardInterrupt):
            _exit_interrupted(prog)
        except MethodkitError as exc:
            if _interrupted(exc):
                _exit_interrupted(prog)
            if _state["verbose"] >= 2:
                err_console().print_exception()
            _fail(prog, exc.message, exc.exit_code)
        except BrokenPipeError:
            sys.exit(141)
        except SystemExit:
            raise
        except MemoryError:
            _fail(prog, "out of memory; try a smaller input or fewer threads", 1)
        except Exception as exc:
            if _interrupted(exc):
                _exit_interrupted(prog)
            if _state["verbose"] >= 2:
                err_console().print_exception()
            hint = "" if _state["verbose"] >= 2 else " (run with -vv for a traceback)"
            _fail(prog, f"{type(exc).__name__}: {exc}{hint}", 1)
        sys.exit(result if isinstance(result, int) else 0)


def _run_with_output_plan(main, *args, **kwargs):
    """Run click's main inside a plan of outputs: claimed files are renamed into place only when
    the command returns (or ends in a gate the user asked for, exit 3), and removed otherwise."""
    from methodkit.core.errors import CheckFailed
    from methodkit.core.outputs import output_plan

    with output_plan(commit_on=(CheckFailed,)):
        return main(*args, **kwargs)


class OutputPath(click.ParamType):
    """An option or argument naming something the command writes: checked (and claimed) before the
    command body runs, so an existing file without --force, a missing folder or a non-empty folder
    output is refused before any input is read. `folder` for folder outputs; `last` for --meta."""

    name = "path"

    def __init__(self, folder: bool = False, last: bool = False, sidecars=()):
        self.folder = folder
        self.last = last
        self.sidecars = tuple(sidecars)  # suffixes (".json" -> OUT.json) or functions of the path

    def written(self, value: str) -> list[str]:
        """The path itself and the sidecars the command writes beside it."""
        from pathlib import Path

        from methodkit.core.outputs import writes_beside

        if not writes_beside(value):  # -o /dev/null or a FIFO: the command writes no sidecar into /dev
            return [value]
        extra = [str(Path(value).with_suffix(s)) if isinstance(s, str) else str(s(value)) for s in self.sidecars]
        return [value, *extra]

    def convert(self, value, param, ctx):
        return value if value is None else os.fspath(value)

    def shell_complete(self, ctx, param, incomplete):
        from click.shell_completion import CompletionItem

        return [CompletionItem(incomplete, type="dir" if self.folder else "file")]


def claim_declared_outputs(ctx: click.Context) -> None:
    """Check and claim every OutputPath parameter of `ctx` and its parents (--resume keeps outputs)."""
    from methodkit.core import outputs

    merged: dict = {}
    for c in reversed(list(_ancestry(ctx))):
        merged.update(c.params)
    force, resume = bool(merged.get("force")), bool(merged.get("resume"))
    for c in _ancestry(ctx):
        for param in c.command.params:
            if not isinstance(param.type, OutputPath):
                continue
            values = c.params.get(param.name)
            for value in values if isinstance(values, (list, tuple)) else [values]:
                if value in (None, "", "-"):
                    continue
                flag = param.opts[-1] if isinstance(param, click.Option) else param.human_readable_name
                for i, path in enumerate(param.type.written(value)):
                    outputs.claim(
                        path,
                        force=force or resume,
                        folder=param.type.folder,
                        last=param.type.last,
                        flag=flag if i == 0 else f"the sidecar of {flag}",
                    )


class _ClaimsOutputs:
    """Claims the declared outputs after parsing and before the command's body runs."""

    def invoke(self, ctx):
        if self.callback is not None and not isinstance(self, click.Group):
            claim_declared_outputs(ctx)
        return super().invoke(ctx)


class ToolVerb(_ClaimsOutputs, click.Command):
    """A verb of a ToolGroup."""


class ToolSubGroup(click.Group):
    """A group of verbs inside a ToolGroup (`concord-plan cache stats`)."""

    command_class = ToolVerb


ToolSubGroup.group_class = ToolSubGroup


class ToolCommand(_Contract, _ClaimsOutputs, click.Command):
    """A single-job executable."""


class ToolGroup(_Contract, click.Group):
    """An executable with verbs; its subcommands share the same contract."""

    command_class = ToolVerb
    group_class = ToolSubGroup


def _version_option(f):
    return click.version_option(
        None, "-V", "--version", package_name="methodkit", message="%(prog)s (methodkit) %(version)s"
    )(f)


def tool_command(name: str | None = None, **kwargs):
    """Decorator for a single-job executable (adds -h and -V, installs the error handler)."""

    def deco(f):
        return click.command(name=name, cls=ToolCommand, context_settings=CONTEXT_SETTINGS, **kwargs)(
            _version_option(f)
        )

    return deco


def tool_group(name: str | None = None, **kwargs):
    """Decorator for an executable with verbs (`chess-wm build|train|eval`)."""

    def deco(f):
        return click.group(name=name, cls=ToolGroup, context_settings=CONTEXT_SETTINGS, **kwargs)(_version_option(f))

    return deco


# ---------------------------------------------------------------- shared options


def _remember_verbosity(ctx, param, value):
    _state["verbose"] = max(_state["verbose"], value or 0)
    return value


def input_argument(name: str = "input", required: bool = False):
    """Positional INPUT, default `-` (stdin)."""
    return click.argument(name, default="-", required=required, metavar=name.upper())


def option_group(*options):
    """One decorator applying several click options, listed in their --help order (sqlite-utils' pattern):
    verbs that share options declare them once, `@my_options` on each."""

    def deco(f):
        for option in reversed(options):
            f = option(f)
        return f

    return deco


def common_options(
    *names: str,
    formats=TABLE_FORMATS,
    in_formats=TABLE_FORMATS,
    output_kind: str = "file",
    threads_default: str = "all cores",
):
    """Add the named shared options (order of the names is the order in --help).

    output_kind: "file" (-o is a file), "folder" (a run folder: non-empty needs --force or
    --resume) or "unchecked" (the command checks -o itself). threads_default: what -j 0 means
    for the command, in words (Run.threads(default=...) applies it).
    """
    output_type = {"file": OutputPath(), "folder": OutputPath(folder=True), "unchecked": click.STRING}[output_kind]
    factories = {
        "output": lambda: click.option(
            "-o",
            "--output",
            type=output_type,
            default="-",
            show_default=True,
            metavar="PATH",
            help="Write the result here ('-' = stdout).",
        ),
        "format": lambda: click.option(
            "--format",
            "fmt",
            type=click.Choice(formats),
            default=None,
            help="Output format [default: from the -o extension; CSV/JSON on a pipe, a table on a terminal].",
        ),
        "in_format": lambda: click.option(
            "--in-format",
            type=click.Choice(in_formats),
            default=None,
            help="Format of INPUT when it is stdin or has no known extension [default: csv].",
        ),
        "seed": lambda: click.option(
            "--seed", type=click.IntRange(0, SEED_MAX), default=0, show_default=True, help="Random seed."
        ),
        "device": lambda: click.option(
            "--device", type=click.Choice(DEVICES), default="auto", show_default=True, help="Where to compute."
        ),
        "threads": lambda: click.option(
            "-j",
            "--threads",
            type=click.IntRange(min=0),
            default=0,
            show_default=True,
            help=f"Threads (0 = {threads_default}).",
        ),
        "meta": lambda: click.option(
            "--meta",
            type=OutputPath(last=True),
            metavar="PATH",
            default=None,
            help="Write a run record (tool, version, argv, seed, timing) here.",
        ),
        "force": lambda: click.option("--force", is_flag=True, help="Overwrite existing output files."),
        "quiet": lambda: click.option("-q", "--quiet", is_flag=True, help="No progress on stderr."),
        "verbose": lambda: click.option(
            "-v",
            "--verbose",
            count=True,
            callback=_remember_verbosity,
            expose_value=True,
            is_eager=True,
            help="More on stderr (-v phases, -vv tracebacks).",
        ),
    }
    unknown = set(names) - set(factories)
    if unknown:
        raise ValueError(f"unknown common options: {sorted(unknown)}")

    def deco(f):
        for option in reversed(names):
            f = factories[option]()(f)
        return f

    return deco


# ---------------------------------------------------------------- a run: input, output, record


@dataclass
class Run:
    """The state of one invocation: its common options, inputs read, and the run record."""

    tool: str
    params: dict
    started: float = field(default_factory=time.time)
    input_digests: dict = field(default_factory=dict)

    @classmethod
    def from_context(cls) -> Run:
        ctx = click.get_current_context()
        params: dict = {}
        for c in reversed([c for c in _ancestry(ctx)]):
            params.update(c.params)
        return cls(tool=ctx.command_path, params=params)

    # common option values, with their defaults when a command does not offer them
    @property
    def output(self) -> str:
        return self.params.get("output", "-")

    @property
    def fmt(self) -> str | None:
        return self.params.get("fmt")

    @property
    def force(self) -> bool:
        return bool(self.params.get("force", False))

    def claim_outputs(self, *paths, folder: bool = False, defer: bool = True) -> None:
        """Add paths a command computes (sidecars, per-split files) to its plan of outputs: each is
        refused now if it could not be written, and written only when the whole command succeeds.
        None and '' are skipped; with no paths, -o. Declared outputs (OutputPath) are claimed already.
        defer=False checks without deferring: for files kept on purpose when the command fails."""
        from methodkit.core import outputs

        plan = outputs.active_plan()
        for path in paths or (self.output,):
            if not path or path == "-":
                continue
            if plan is not None and outputs.resolved(path) in plan.claimed:
                continue
            outputs.claim(path, force=self.force or bool(self.params.get("resume")), folder=folder, defer=defer)

    refuse_existing_output = claim_outputs  # the older name, still used by some commands

    @property
    def seed(self) -> int:
        return int(self.params.get("seed", 0) or 0)

    @property
    def quiet(self) -> bool:
        return bool(self.params.get("quiet", False))

    @property
    def verbose(self) -> int:
        return int(self.params.get("verbose", 0) or 0)

    def device(self) -> str:
        """The resolved device ('cpu' or 'cuda'); --device cuda without a GPU exits 1."""
        from methodkit.core.backend import resolve_device

        return resolve_device(self.params.get("device", "cpu"))

    def torch_device(self) -> str:
        """--device for torch: auto picks CUDA when torch sees a GPU; cuda without one exits 1."""
        import torch

        want = self.params.get("device", "auto")
        if want == "cuda" and not torch.cuda.is_available():
            raise RunFailure("--device cuda: torch sees no CUDA device; use --device cpu")
        if want == "auto":
            return "cuda" if torch.cuda.is_available() else "cpu"
        return want

    def threads(self, default: int | str | None = None) -> int:
        """Apply -j/--threads and return the thread count in force.

        `default` is what -j 0 (no -j) means for this command: None all cores, an int that many, "idle"
        the cores not busy now (core.threads.idle_cores; only where results do not depend on it). Say it
        in the option's help (common_options(threads_default=...))."""
        from methodkit.core.backend import set_threads

        n = self.params.get("threads", 0) or 0
        if n == 0 and default == "idle":
            from methodkit.core.threads import idle_cores

            n = idle_cores()
        elif n == 0 and default is not None:
            n = int(default)
        return set_threads(n)

    # ---- input
    def input_bytes(self, path: str):
        """Read INPUT (file or '-'); a terminal on stdin is a usage error."""
        from methodkit.core import io

        if str(path) == "-" and sys.stdin.isatty():
            raise UsageError("provide an input file or pipe data (see --help)")
        data = io.read_input_bytes(path)
        self.input_digests[data.name] = data.sha256
        return data

    def read_table(self, path: str, **kwargs):
        from methodkit.core import io

        return io.read_table(self.input_bytes(path), self.params.get("in_format"), **kwargs)

    def read_json(self, path: str):
        from methodkit.core import io

        return io.read_json(self.input_bytes(path))

    # ---- progress
    def progress(self):
        """Context manager yielding the progress callback to hand to tools/."""
        from methodkit.core.progress import reporter

        return reporter(err_console(), quiet=self.quiet, verbose=self.verbose)

    # ---- output
    def _human_stdout(self, output: str, fmt: str | None) -> bool:
        return output == "-" and fmt is None and sys.stdout.isatty()

    def emit_result(self, result: dict, output: str | None = None, title: str | None = None) -> None:
        """A result as one JSON line (a rich key/value table on a terminal); adds meta with --meta."""
        from methodkit.core import io

        output = self.output if output is None else output
        record = self.meta_record() if self.params.get("meta") else None
        if record is not None:
            result = {**result, "meta": record}
        if self._human_stdout(output, self.fmt):
            _print_result_table(result, title or self.tool)
        else:
            io.write_json(result, output, force=self.force)
        self.write_meta(record)

    def emit_table(self, frame, output: str | None = None, fmt: str | None = None) -> None:
        """Row data as CSV/TSV/Parquet/JSONL/JSON (a rich table on a terminal)."""
        from methodkit.core import io

        output = self.output if output is None else output
        fmt = self.fmt if fmt is None else fmt
        kind = io.format_from_path(output, fmt, "csv")
        if kind in io.BINARY_FORMATS:
            self.refuse_binary_terminal(kind, output)
        if self._human_stdout(output, fmt):
            _print_frame(frame)
        else:
            io.write_table(frame, output, kind, force=self.force)
        self.write_meta()

    def refuse_binary_terminal(self, kind: str, output: str | None = None) -> None:
        """Binary bytes on a terminal garble it and help no one: refuse before any work is done."""
        output = self.output if output is None else output
        if output == "-" and sys.stdout.isatty():
            raise UsageError(f"refusing to write binary {kind} to a terminal; pass -o FILE or pipe the output")

    def meta_record(self) -> dict:
        from importlib.metadata import version

        digests = self.input_digests
        return {
            "tool": self.tool,
            "version": version("methodkit"),
            "argv": sys.argv[1:],
            "seed": self.params.get("seed"),
            "device": self.params.get("device"),
            "threads": self.params.get("threads"),
            "input_sha256": next(iter(digests.values())) if len(digests) == 1 else (digests or None),
            "started": _dt.datetime.fromtimestamp(self.started, _dt.UTC).isoformat(timespec="seconds"),
            "seconds": round(time.time() - self.started, 3),
        }

    def write_meta(self, record: dict | None = None) -> dict | None:
        """Write the --meta record (or `record`) if asked for; return it (None without --meta).
        Inside a command it is renamed into place last, once everything else has been written."""
        path = self.params.get("meta")
        if not path:
            return None
        from methodkit.core import io

        record = self.meta_record() if record is None else record
        io.write_json(record, path, force=self.force)
        return record


def _ancestry(ctx):
    while ctx is not None:
        yield ctx
        ctx = ctx.parent


def _flatten(prefix: str, value: Any, out: list) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out.append((prefix, value))


def _print_result_table(result: dict, title: str) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from methodkit.core.io import jsonable

    table = Table(title=escape(title), show_header=True)
    table.add_column("field")
    table.add_column("value", overflow="fold")
    rows: list = []
    _flatten("", jsonable(result), rows)
    for key, value in rows:
        text = "" if value is None else (f"{value:.6g}" if isinstance(value, float) else str(value))
        table.add_row(escape(key), escape(text))
    Console(highlight=False, emoji=False).print(table)


def _print_frame(frame, limit: int = 40) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(show_header=True)
    for column in frame.columns:
        table.add_column(escape(str(column)))
    for row in frame.head(limit).itertuples(index=False):
        table.add_row(*[escape("" if v is None else (f"{v:.6g}" if isinstance(v, float) else str(v))) for v in row])
    console = Console(highlight=False, emoji=False)
    console.print(table)
    if len(frame) > limit:
        console.print(f"… {len(frame) - limit} more rows (pipe or use -o to get them all)")


# ---------------------------------------------------------------- make demo


@dataclass(frozen=True)
class DemoStep:
    """One end-to-end run for `make demo`: a bash pipeline and where its headline figure is.

    `headline` is a dotted key into the JSON object printed last on stdout, or
    'rows' to count the data rows of CSV output.
    """

    command: str
    input: str
    headline: str
    label: str = ""


def print_frame(frame, title: str, *, digits: int = 4) -> None:
    """A DataFrame as a rich table on stderr (a summary beside the real output on stdout)."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(title))
    for column in frame.columns:
        table.add_column(escape(str(column)))
    for row in frame.itertuples(index=False):
        table.add_row(*[escape(f"{v:.{digits}g}" if isinstance(v, float) else str(v)) for v in row])
    err_console().print(table)


# ---------------------------------------------------------------- finite floats


class FiniteFloatRange(click.FloatRange):
    """click.FloatRange that refuses NaN and +-Inf (NaN slips through FloatRange's comparisons).

    With no bounds it is a plain finite float: `FiniteFloatRange()`.
    """

    name = "float"

    def convert(self, value, param, ctx):
        import math

        rv = click.FloatRange.convert(self, value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{rv} is not a finite number.", param, ctx)
        return rv

    def _describe_range(self) -> str:
        return "" if self.min is None and self.max is None else super()._describe_range()

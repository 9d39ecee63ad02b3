"""Fuzz the command-line contract over every console script and verb; count what misbehaves.

Each case runs one command in a forked child (the parent has imported click and the light
cli modules once, so a case costs what the command itself costs) in a fresh folder, with
stdin a pipe that never ends and every path argument a FIFO nobody writes: a command that
reads input before checking its outputs and flags blocks there and is counted as "late"
after --timeout seconds. A case misbehaves when the command

  * prints a traceback, or exits with a status other than the expected one (2 for refusals),
  * changes or removes an old file, or replaces a FIFO/symlink with a regular file,
  * leaves a temporary file (.NAME.*.part) behind,
  * writes a file with the wrong mode (0666 & ~umask for new files, the old mode under --force),
  * or blocks (reads input before refusing a bad output target or flag).

Generic cases are derived from each command's click parameters, so a new executable is fuzzed
without new code; a few tool-specific cases (truncated, ragged, non-numeric and infinite cells,
a huge size) use small valid inputs made by the tools themselves.

  nice python -P bench/contract/fuzz.py [--timeout 8] [--only cbf-sim] [-v]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import signal
import stat
import sys
import tempfile
import time
from importlib.metadata import distribution
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import click  # noqa: E402

from methodkit.cli._docs import load_command  # noqa: E402

GARBAGE = bytes(range(256)) * 8 + b"\x00\xff\xfe garbage \x80\x81"
OLD = b"OLD CONTENT\n"
MEMORY_LIMIT = 6 * 2**30  # a size flag that is not guarded must fail, not take the machine down


def leaf_commands():
    """(script, verb path, click command) for every leaf command of every console script."""
    names = sorted(ep.name for ep in distribution("methodkit").entry_points if ep.group == "console_scripts")
    for name in names:
        stack = [([], load_command(name))]
        while stack:
            prefix, command = stack.pop()
            if isinstance(command, click.Group):
                ctx = click.Context(command)
                stack += [([*prefix, verb], command.get_command(ctx, verb)) for verb in command.list_commands(ctx)]
            else:
                yield name, prefix, command


def option_names(command):
    return {opt for p in command.params if isinstance(p, click.Option) for opt in p.opts}


def folder_output(command) -> bool:
    """Whether -o is a folder output (OutputPath(folder=True)): those create missing parents, like mkdir -p."""
    from methodkit.cli._common import OutputPath

    out = next((p for p in command.params if "--output" in getattr(p, "opts", ())), None)
    return out is not None and isinstance(out.type, OutputPath) and out.type.folder


def blocking_arguments(command, folder: Path):
    """A FIFO (never written) for every positional argument, so reading any of them blocks."""
    args = []
    for i, _ in enumerate(p for p in command.params if isinstance(p, click.Argument)):
        fifo = folder / f"in{i}.csv"
        os.mkfifo(fifo)
        args.append(str(fifo))
    return args


# ---------------------------------------------------------------- running one case


def run_case(name, argv, folder: Path, *, timeout: float, stdin_data: bytes | None = None, umask=0o022):
    """Run `name argv` in a forked child inside `folder`; return (status, stderr text, seconds).

    status is the exit status, or 'late' when the child was still running after `timeout`.
    stdin is a pipe: `stdin_data` then end of file, or (None) a pipe that never ends.
    """
    command = load_command(name)
    r_in, w_in = os.pipe()
    err_path = folder / ".stderr"
    out_path = folder / ".stdout"
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.chdir(folder)
            os.umask(umask)
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
            os.dup2(r_in, 0)
            os.close(w_in)
            fd_out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            fd_err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd_out, 1)
            os.dup2(fd_err, 2)
            sys.stdin = open(0, closefd=False)
            sys.stdout = open(1, "w", closefd=False)
            sys.stderr = open(2, "w", closefd=False)
            sys.argv = [name, *argv]
            code = 0
            try:
                command.main(argv, prog_name=name)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:
                import traceback

                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        except BaseException:
            os._exit(99)
    os.close(r_in)
    if stdin_data is not None:
        try:
            os.write(w_in, stdin_data)
        except OSError:
            pass
        os.close(w_in)
        w_in = None
    status = None
    deadline = started + timeout
    blocked_since = None
    while time.perf_counter() < deadline:
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(wait_status)
            break
        # waiting to open a FIFO or to read a pipe: it went for its input (no one will ever write)
        if _waiting_for_input(pid):
            blocked_since = blocked_since or time.perf_counter()
            if time.perf_counter() - blocked_since > 0.3:
                break
        else:
            blocked_since = None
        time.sleep(0.02)
    if status is None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        status = "late"
    if w_in is not None:
        os.close(w_in)
    err = err_path.read_text(errors="replace") if err_path.exists() else ""
    for p in (err_path, out_path):
        p.unlink(missing_ok=True)
    return status, err, time.perf_counter() - started


def _waiting_for_input(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/wchan") as handle:
            return handle.read().strip() in ("wait_for_partner", "anon_pipe_read", "pipe_read", "pipe_wait")
    except OSError:
        return False


def temp_files(folder: Path):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(".*.part"))


def judge(status, err, *, expect=2, folder: Path | None = None):
    """The list of contract breaches for one finished case (empty: the case behaved)."""
    bad = []
    if status == "late":
        return ["late (read input or worked before refusing)"]
    if "Traceback" in err:
        bad.append("traceback")
    if isinstance(expect, int) and status != expect:
        bad.append(f"exit {status} (expected {expect})")
    if status not in (0, "late") and len(err.strip().splitlines()) != 1:
        bad.append(f"{len(err.strip().splitlines())} stderr lines")
    if "allow_pickle" in err:
        bad.append("suggests allow_pickle")
    if folder is not None and temp_files(folder):
        bad.append(f"temp file left {temp_files(folder)}")
    return bad


# ---------------------------------------------------------------- the generic cases


def generic_cases(name, prefix, command):
    """(case kind, function(folder) -> breaches) derived from the command's parameters."""
    opts = option_names(command)
    cases = []
    if "--output" in opts:

        def out_exists(folder, ext):
            old = folder / f"old.{ext}"
            old.write_bytes(OLD)
            st, err, _ = run_case(
                name, [*prefix, *blocking_arguments(command, folder), "-o", old.name], folder, timeout=TIMEOUT
            )
            bad = judge(st, err, folder=folder)
            if old.read_bytes() != OLD:
                bad.append("old -o changed")
            return bad

        cases.append(("out-exists", lambda f: out_exists(f, "json")))

        def out_no_folder(folder):
            st, err, _ = run_case(
                name, [*prefix, *blocking_arguments(command, folder), "-o", "nodir/x.json"], folder, timeout=TIMEOUT
            )
            bad = judge(st, err, folder=folder)
            if (folder / "nodir").exists():
                bad.append("created nodir")
            return bad

        if not folder_output(command):  # a run folder's missing parents are created (CONVENTIONS), not refused
            cases.append(("out-no-folder", out_no_folder))

        def out_devnull(folder):
            st, err, _ = run_case(
                name, [*prefix, *blocking_arguments(command, folder), "-o", "/dev/null"], folder, timeout=TIMEOUT
            )
            return ["/dev/null refused as existing"] if "already exists" in err else []

        cases.append(("out-devnull", out_devnull))

    if "--meta" in opts:

        def meta_exists(folder):
            (folder / "meta.json").write_bytes(OLD)
            out = ["-o", "new.json"] if "--output" in opts else []
            st, err, _ = run_case(
                name,
                [*prefix, *blocking_arguments(command, folder), *out, "--meta", "meta.json"],
                folder,
                timeout=TIMEOUT,
            )
            bad = judge(st, err, folder=folder)
            if (folder / "meta.json").read_bytes() != OLD:
                bad.append("old --meta changed")
            if (folder / "new.json").exists():
                bad.append("-o written although --meta was refused")
            return bad

        cases.append(("meta-exists", meta_exists))

    # every other option that names an output file (by name): --params-out, --summary, ...
    for p in command.params:
        if isinstance(p, click.Option) and p.name in SIDE_OUTPUTS and p.opts[-1] in opts:
            flag = p.opts[-1]

            def side_exists(folder, flag=flag):
                (folder / "side.json").write_bytes(OLD)
                out = ["-o", "new.json"] if "--output" in opts else []
                st, err, _ = run_case(
                    name,
                    [*prefix, *blocking_arguments(command, folder), *out, flag, "side.json"],
                    folder,
                    timeout=TIMEOUT,
                )
                bad = judge(st, err, folder=folder)
                if (folder / "side.json").read_bytes() != OLD:
                    bad.append(f"old {flag} changed")
                return bad

            cases.append((f"side-exists {flag}", side_exists))

    for p in command.params:
        if p.name in FOLDER_OUTPUTS and not getattr(p, "is_flag", False):
            flag = p.opts[-1] if isinstance(p, click.Option) else None

            def folder_nonempty(folder, flag=flag):
                (folder / "busy").mkdir()
                (folder / "busy" / "unrelated.txt").write_bytes(OLD)
                out = ["-o", "new.json"] if "--output" in opts and flag != "--output" else []
                st, err, _ = run_case(
                    name,
                    [*prefix, *blocking_arguments(command, folder), *out, flag, "busy"],
                    folder,
                    timeout=TIMEOUT,
                )
                bad = judge(st, err, folder=folder)
                if sorted(os.listdir(folder / "busy")) != ["unrelated.txt"]:
                    bad.append(f"wrote into the non-empty {flag} folder")
                return bad

            if flag:
                cases.append((f"folder-nonempty {flag}", folder_nonempty))

    if "--seed" in opts:
        for value in ("-1", str(2**64)):

            def bad_seed(folder, value=value):
                st, err, _ = run_case(
                    name, [*prefix, *blocking_arguments(command, folder), "--seed", value], folder, timeout=TIMEOUT
                )
                return judge(st, err, folder=folder)

            cases.append((f"seed {value[:4]}", bad_seed))

    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    if arguments:
        for ext in ("csv", "npz", "json"):

            def garbage(folder, ext=ext):
                files = []
                for i, _ in enumerate(arguments):
                    path = folder / f"g{i}.{ext}"
                    path.write_bytes(GARBAGE)
                    files.append(path.name)
                st, err, _ = run_case(name, [*prefix, *files], folder, timeout=TIMEOUT, stdin_data=GARBAGE)
                if st == 0:
                    return []  # a command may legitimately accept any bytes (none does so far)
                return judge(st, err, folder=folder)

            cases.append((f"garbage .{ext}", garbage))
    return cases


SIDE_OUTPUTS = {  # parameter names of the options that name a file the command writes
    "params_out",
    "summary",
    "summary_path",
    "per_split_path",
    "null_path",
    "loadings_path",
    "coef_path",
    "labels_out",
    "manifest",
    "report_path",
    "table_path",
    "sidecar",
    "per_game_path",
    "retrained_out",
    "out_path",
}
FOLDER_OUTPUTS = {"out_dir", "png_dir", "data_dir"}  # ... and the folders it writes into

# ---------------------------------------------------------------- tool-specific cases (valid inputs)


def specific_cases():
    """Cases that need a valid input: made once by the tools, then cut, made ragged, poisoned."""
    cases = []

    def valid(maker):
        """maker(folder) -> (name, argv, input file) of a fast valid run writing its -o."""
        return maker

    makers = [
        ("cbf-sim task", lambda f: ("cbf-sim", ["task", "--trials", "12"], None)),
        ("pls-test sim", lambda f: ("pls-test", ["sim", "-n", "20", "-p", "4", "--active", "2"], None)),
        ("methodkit-data get", lambda f: ("methodkit-data", ["get", "diabetes"], None)),
        ("irt-sim draw", lambda f: ("irt-sim", ["draw", "-N", "6", "-J", "4", "--format", "csv"], None)),
    ]
    for label, maker in makers:

        def modes(folder, maker=maker):
            name, argv, _ = maker(folder)
            bad = []
            st, err, _ = run_case(
                name, [*argv, "-o", "new.csv"], folder, timeout=TIMEOUT * 4, stdin_data=b"", umask=0o022
            )
            bad += judge(st, err, expect=0, folder=folder)
            if (folder / "new.csv").exists() and stat.S_IMODE((folder / "new.csv").stat().st_mode) != 0o644:
                bad.append(f"new file mode {oct(stat.S_IMODE((folder / 'new.csv').stat().st_mode))} (want 0o644)")
            (folder / "old.csv").write_bytes(OLD)
            os.chmod(folder / "old.csv", 0o640)
            st, err, _ = run_case(
                name, [*argv, "-o", "old.csv", "--force"], folder, timeout=TIMEOUT * 4, stdin_data=b""
            )
            bad += judge(st, err, expect=0, folder=folder)
            if stat.S_IMODE((folder / "old.csv").stat().st_mode) != 0o640:
                bad.append(f"--force mode {oct(stat.S_IMODE((folder / 'old.csv').stat().st_mode))} (want 0o640)")
            return bad

        cases.append((f"{label}: modes", modes))

        def special(folder, maker=maker):
            name, argv, _ = maker(folder)
            bad = []
            (folder / "real.csv").write_bytes(OLD)
            os.symlink("real.csv", folder / "link.csv")
            st, err, _ = run_case(
                name, [*argv, "-o", "link.csv", "--force"], folder, timeout=TIMEOUT * 4, stdin_data=b""
            )
            bad += judge(st, err, expect=0, folder=folder)
            if not (folder / "link.csv").is_symlink():
                bad.append("symlink replaced by a file")
            elif (folder / "real.csv").read_bytes() == OLD:
                bad.append("symlink target not written")
            st, err, _ = run_case(name, [*argv, "-o", "/dev/null"], folder, timeout=TIMEOUT * 4, stdin_data=b"")
            bad += [f"/dev/null: {b}" for b in judge(st, err, expect=0, folder=folder)]
            os.mkfifo(folder / "fifo.csv")
            reader = os.open(folder / "fifo.csv", os.O_RDONLY | os.O_NONBLOCK)
            st, err, _ = run_case(
                name, [*argv, "-o", "fifo.csv", "--force"], folder, timeout=TIMEOUT * 4, stdin_data=b""
            )
            os.close(reader)
            if not stat.S_ISFIFO((folder / "fifo.csv").lstat().st_mode):
                bad.append("FIFO replaced by a file")
            return bad

        cases.append((f"{label}: special targets", special))

    def meta_on_refusal(folder):
        (folder / "old.csv").write_bytes(OLD)
        st, err, _ = run_case(
            "cbf-sim",
            ["task", "--trials", "12", "-o", "old.csv", "--meta", "m.json"],
            folder,
            timeout=TIMEOUT * 4,
            stdin_data=b"",
        )
        bad = judge(st, err, folder=folder)
        if (folder / "m.json").exists():
            bad.append("--meta written although -o was refused")
        return bad

    cases.append(("cbf-sim task: meta on refusal", meta_on_refusal))

    # broken tables for the table readers named in the issue
    readers = table_readers()
    for label, (make, argv_for) in readers.items():
        for kind in ("truncated", "ragged-short", "ragged-long", "text-in-numeric", "inf-cell"):

            def broken(folder, make=make, argv_for=argv_for, kind=kind):
                text = make(folder)
                bad_text = corrupt(text, kind)
                if bad_text is None:
                    return []
                (folder / "bad.csv").write_bytes(bad_text)
                name, argv = argv_for("bad.csv")
                st, err, _ = run_case(name, argv, folder, timeout=TIMEOUT * 6, stdin_data=b"")
                if kind == "text-in-numeric" and st == 0 and "warning" in err:
                    return []
                return judge(st, err, folder=folder)

            cases.append((f"{label}: {kind}", broken))

    def huge_trials(folder):
        st, err, _ = run_case(
            "cbf-sim", ["task", "--trials", "100000000", "-o", "t.csv"], folder, timeout=TIMEOUT * 2, stdin_data=b""
        )
        return judge(st, err, folder=folder)

    cases.append(("cbf-sim task: --trials 1e8", huge_trials))

    for alpha in ("2", "-1"):

        def bad_alpha(folder, alpha=alpha):
            st, err, _ = run_case("pls-test", ["test", "--alpha", alpha, "-k", "1"], folder, timeout=TIMEOUT)
            return judge(st, err, folder=folder)

        cases.append((f"pls-test test: --alpha {alpha}", bad_alpha))

    def cache_file(folder):
        (folder / "cache").write_bytes(OLD)
        for a in ("m.json", "c.json"):
            os.mkfifo(folder / a)
        st, err, _ = run_case("concord-plan", ["plan", "m.json", "c.json", "--cache", "cache"], folder, timeout=TIMEOUT)
        return judge(st, err, folder=folder)

    cases.append(("concord-plan plan: --cache on a file", cache_file))
    return cases


_MADE: dict = {}


def made(key, name, argv):
    """The stdout of a valid run, made once (cached) and reused by every case that needs it."""
    if key not in _MADE:
        folder = Path(tempfile.mkdtemp(prefix="fuzz-make-"))
        st, err, _ = run_case(name, [*argv, "-o", "out.csv"], folder, timeout=120, stdin_data=b"")
        if st != 0:
            raise RuntimeError(f"cannot make {key}: {err}")
        _MADE[key] = (folder / "out.csv").read_bytes()
    return _MADE[key]


def table_readers():
    """label -> (make(folder) -> valid CSV bytes, argv_for(path) -> (script, argv))."""

    def task(folder):
        return made("task", "cbf-sim", ["task", "--trials", "12", "--seed", "1"])

    def agents(folder):
        (folder / "task.csv").write_bytes(task(folder))
        if "agents" not in _MADE:
            sub = Path(tempfile.mkdtemp(prefix="fuzz-make-"))
            (sub / "task.csv").write_bytes(task(folder))
            st, err, _ = run_case(
                "cbf-sim",
                ["agents", "task.csv", "--agent", "kf", "--population", "healthy:2", "-o", "out.csv"],
                sub,
                timeout=120,
                stdin_data=b"",
            )
            if st != 0:
                raise RuntimeError(err)
            _MADE["agents"] = (sub / "out.csv").read_bytes()
        return _MADE["agents"]

    def gbdt(folder):
        if "gbdt" not in _MADE:
            from methodkit.tools.gbdt import synth

            _MADE["gbdt"] = synth.tabular(120, seed=0).to_csv(index=False).encode()
        return _MADE["gbdt"]

    def cuvet(folder):
        if "cuvet" not in _MADE:
            from methodkit.tools.cuvet import synth

            frame, _ = synth.synthetic(600, 0)
            _MADE["cuvet"] = frame.to_csv(index=False).encode()
        return _MADE["cuvet"]

    def irt(folder):
        return made("irt", "irt-sim", ["draw", "-N", "12", "-J", "8", "--format", "csv"])

    def sim(folder):
        return made("sim", "pls-test", ["sim", "-n", "30", "-p", "4", "--active", "2"])

    gb_fast = ["--lgb-params", '{"num_boost_round": 5, "num_leaves": 3}']
    cuv = [
        "--treatment",
        "treatment",
        "--value",
        "conversion",
        "--arm-costs",
        "0,1,2,3,4",
        "--cost-on-outcome",
        "--max-depth",
        "1",
        "--min-leaf",
        "100",
    ]
    return {
        "cbf-sim agents": (
            task,
            lambda p: ("cbf-sim", ["agents", p, "--agent", "kf", "--population", "healthy:1", "-o", "o.csv"]),
        ),
        "cbf-fit fit": (
            agents,
            lambda p: ("cbf-fit", ["fit", p, "--model", "kf", "--restarts", "1", "--k", "3", "-o", "o.csv"]),
        ),
        "gbdt-poison eval": (gbdt, lambda p: ("gbdt-poison", ["eval", p, *gb_fast, "-o", "o.json"])),
        "cuvet-assign fit": (cuvet, lambda p: ("cuvet-assign", ["fit", p, *cuv, "-o", "o.json"])),
        "irt-fit fit": (irt, lambda p: ("irt-fit", ["fit", p, "--max-cycles", "5", "-o", "o.json"])),
        "pls-test test": (sim, lambda p: ("pls-test", ["test", p, "-k", "1", "--method", "nb", "-o", "o.json"])),
    }


def corrupt(text: bytes, kind: str):
    """A broken copy of a CSV: its last value cut, a short or long row, a stray word, an Inf."""
    lines = text.rstrip(b"\n").split(b"\n")
    header, rows = lines[0], lines[1:]
    if len(rows) < 3:
        return None
    if kind == "truncated":  # cut inside the last row: fewer fields and no final newline
        last = rows[-1]
        cut = last.rfind(b",")
        return b"\n".join([header, *rows[:-1], last[: max(cut, 1)]])
    if kind == "ragged-short":
        mid = len(rows) // 2
        row = rows[mid]
        rows[mid] = row[: row.rfind(b",")]
        return b"\n".join([header, *rows]) + b"\n"
    if kind == "ragged-long":
        rows[len(rows) // 2] += b",9"
        return b"\n".join([header, *rows]) + b"\n"
    fields = [r.split(b",") for r in rows]
    # a column whose values are all numbers
    for j in range(len(fields[0]) - 1, -1, -1):
        try:
            [float(f[j]) for f in fields]
        except (ValueError, IndexError):
            continue
        fields[len(fields) // 2][j] = b"abc" if kind == "text-in-numeric" else b"inf"
        return b"\n".join([header, *[b",".join(f) for f in fields]]) + b"\n"
    return None


# ---------------------------------------------------------------- main


def main():
    global TIMEOUT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=8.0, help="seconds before a case counts as late")
    parser.add_argument("--only", default=None, help="only scripts whose name starts with this")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every breach")
    parser.add_argument("--no-specific", action="store_true", help="skip the tool-specific cases")
    args = parser.parse_args()
    TIMEOUT = args.timeout
    # heavy stacks the children would otherwise each import (fork shares them)
    import importlib

    for module in ("numpy", "pandas", "scipy.stats", "sklearn", "numba", "torch", "lightgbm"):
        with contextlib.suppress(ImportError):
            importlib.import_module(module)

    all_cases = []
    for name, prefix, command in leaf_commands():
        if args.only and not name.startswith(args.only):
            continue
        for kind, fn in generic_cases(name, prefix, command):
            all_cases.append((" ".join([name, *prefix]), kind, fn))
    if not args.no_specific:
        for kind, fn in specific_cases():
            if args.only and not kind.startswith(args.only):
                continue
            all_cases.append(("specific", kind, fn))
    by_kind = collections.Counter()
    bad_kind = collections.Counter()
    breaches = []
    started = time.perf_counter()
    cpu = time.process_time()
    for where, kind, fn in all_cases:
        folder = Path(tempfile.mkdtemp(prefix="fuzz-"))
        try:
            bad = fn(folder)
        except Exception as exc:  # the harness itself must not stop the count
            bad = [f"harness: {type(exc).__name__}: {exc}"]
        family = kind.split(":")[-1].strip().split(" ")[0] if where == "specific" else kind.split(" ")[0]
        by_kind[family] += 1
        if bad:
            bad_kind[family] += 1
            breaches.append((where, kind, bad))
            if args.verbose:
                print(f"BAD  {where}  [{kind}]  {'; '.join(bad)}", flush=True)
    wall = time.perf_counter() - started
    children = os.times()
    print(f"\n{'case':28s} {'cases':>6s} {'misbehaved':>10s}")
    for family in sorted(by_kind):
        print(f"{family:28s} {by_kind[family]:6d} {bad_kind[family]:10d}")
    total_bad = sum(bad_kind.values())
    print(f"{'total':28s} {sum(by_kind.values()):6d} {total_bad:10d}")
    print(f"wall {wall:.0f} s, cpu {time.process_time() - cpu + children.children_user:.0f} s")
    if not args.verbose:
        for where, kind, bad in breaches:
            print(f"BAD  {where}  [{kind}]  {'; '.join(bad)}")


TIMEOUT = 8.0

if __name__ == "__main__":
    main()

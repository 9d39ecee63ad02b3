"""core.io across processes: stdin/stdout round trips, and a killed writer loses nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

READ_WRITE = """
import sys
from methodkit.core import io
frame = io.read_table("-", sys.argv[1])
io.write_table(frame, "-", sys.argv[2])
"""

# A shell without job control starts background jobs with SIGINT ignored, and Python then keeps it
# ignored: restore the interactive default so the SIGINT case tests Ctrl-C, not the launcher.
SLOW_WRITER = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from methodkit.core import io
with io.atomic_write(sys.argv[1], force=True) as handle:
    handle.write(b"partial")
    handle.flush()
    print("writing", flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("fmt", ["csv", "tsv", "parquet", "jsonl", "json"])
def test_round_trip_through_stdin_and_stdout(tmp_path, fmt):
    from methodkit.core import io

    frame = pd.DataFrame({"a": [1.5, -2.25, 1 / 3], "b": ["x", "y", "z"]})
    io.write_table(frame, tmp_path / f"in.{fmt}")
    proc = subprocess.run(
        [sys.executable, "-P", "-c", READ_WRITE, fmt, fmt],
        input=(tmp_path / f"in.{fmt}").read_bytes(),
        capture_output=True,
        check=True,
    )
    (tmp_path / f"out.{fmt}").write_bytes(proc.stdout)
    pd.testing.assert_frame_equal(io.read_table(tmp_path / f"out.{fmt}"), frame)


@pytest.mark.parametrize("sig, leaves_temp", [(signal.SIGTERM, False), (signal.SIGINT, False), (signal.SIGKILL, True)])
def test_killed_writer_keeps_the_old_file(tmp_path, sig, leaves_temp):
    target = tmp_path / "out.csv"
    target.write_text("old\n")
    proc = subprocess.Popen([sys.executable, "-P", "-c", SLOW_WRITER, str(target)], stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b"writing\n"
    time.sleep(0.1)
    proc.send_signal(sig)
    proc.wait(timeout=30)
    assert target.read_text() == "old\n"
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "out.csv"]
    # SIGKILL cannot be caught: only a hidden .out.csv.*.part can remain, never a clobbered target.
    if leaves_temp:
        assert all(name.startswith(".out.csv.") and name.endswith(".part") for name in leftovers)
    else:
        assert leftovers == []

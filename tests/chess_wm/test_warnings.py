"""Warnings and refusals of issue 39 item 5, through the installed executable."""

from __future__ import annotations

import json

import pytest

from tests.chess_wm.test_cli import PGN


def _stderr_lines(proc) -> list[str]:
    return proc.stderr.decode().strip().splitlines()


def test_build_warns_for_a_game_cut_mid_movetext(run_cli, tmp_path):
    cut = PGN + PGN[:90]  # the second game stops after "5. O-O Be7 6. Re1 b5 7. B" : no result marker
    (tmp_path / "cut.pgn").write_text(cut)
    proc = run_cli(["chess-wm", "build", "cut.pgn", "-o", "d", "--min-fullmoves", "1"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _stderr_lines(proc) == [
        f"chess-wm: warning: cut.pgn: game 2 at byte {len(PGN)}: movetext ends without a result "
        "(1-0, 0-1, 1/2-1/2, *); 1 such game(s) kept as far as they go (a cut file?)"
    ]
    assert json.loads(proc.stdout)["unterminated"] == 1
    (tmp_path / "whole.pgn").write_text(PGN * 2)
    whole = run_cli(["chess-wm", "build", "whole.pgn", "-o", "w", "--min-fullmoves", "1"], cwd=tmp_path)
    assert whole.returncode == 0 and whole.stderr == b"", whole.stderr


def test_build_warns_for_a_truncated_zst(run_cli, tmp_path):
    zstandard = pytest.importorskip("zstandard")
    compressor = zstandard.ZstdCompressor().compressobj()
    flush = zstandard.COMPRESSOBJ_FLUSH_BLOCK
    raw = b"".join(compressor.compress(PGN.encode()) + compressor.flush(flush) for _ in range(40)) + compressor.flush()
    (tmp_path / "a.pgn.zst").write_bytes(raw[: len(raw) // 2])
    proc = run_cli(["chess-wm", "build", "a.pgn.zst", "-o", "d", "--min-fullmoves", "1"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    cut_at = json.loads(proc.stdout)["input_truncated_at"]
    assert _stderr_lines(proc) == [
        f"chess-wm: warning: a.pgn.zst: truncated zstd stream after {cut_at} decompressed bytes; "
        "the last, partial game is dropped"
    ]


def test_warmup_past_the_run_warns_and_eval_refuses_bad_outputs(run_cli, tmp_path, random_dir, one_line_error):
    args = ["chess-wm", "train", random_dir, "--val", random_dir, "--size", "d64", "--steps", "4",
            "--batch-size", "16", "-j", "1", "-q"]  # fmt: skip
    proc = run_cli([*args, "--warmup", "10", "-o", tmp_path / "run"])
    assert proc.returncode == 0, proc.stderr
    assert _stderr_lines(proc) == [
        "chess-wm: warning: --warmup 10 exceeds the run's 4 steps: the learning rate peaks at 0.0004, "
        "40% of --lr; lower --warmup or raise --steps"
    ]
    # an unknown output extension is refused, not written as CSV
    proc = run_cli(["chess-wm", "eval", "--checkpoint", "run", f"r={random_dir}", "-o", "out.xyz"], cwd=tmp_path)
    line = one_line_error(proc, "chess-wm", "out.xyz: cannot tell the format from the extension")
    assert line.endswith("; pass --format"), line
    assert not (tmp_path / "out.xyz").exists()
    # a split name given twice is refused
    proc = run_cli(["chess-wm", "eval", "--checkpoint", "run", f"r={random_dir}", f"r={random_dir}", "-o", "o.tsv"],
                   cwd=tmp_path)  # fmt: skip
    line = one_line_error(proc, "chess-wm")
    assert line == "chess-wm: error: data set name 'r' is given twice; give each NAME=DIR a different NAME", line
    assert not (tmp_path / "o.tsv").exists()

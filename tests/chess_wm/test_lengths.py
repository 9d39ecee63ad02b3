"""random: impossible length flags are refused up front, an unreachable --min-fullmoves never spins forever."""

from __future__ import annotations

import pytest

from methodkit.core.errors import RunFailure, UsageError
from methodkit.tools.chess_wm.lengths import check_length_flags, keep_long_games


@pytest.mark.parametrize("engine", ["numba", "python"])
def test_max_plies_below_twice_min_fullmoves_exits_2_before_any_game(run_cli, tmp_path, one_line_error, engine):
    out = tmp_path / "d"
    proc = run_cli(["chess-wm", "random", "--engine", engine, "--max-plies", "10", "--min-fullmoves", "10", "-o", out])
    one_line_error(proc, "chess-wm", "--max-plies 10", "--min-fullmoves 10")
    assert not out.exists()


def test_min_fullmoves_past_the_numba_buffer_exits_2(run_cli, tmp_path, one_line_error):
    proc = run_cli(["chess-wm", "random", "--min-fullmoves", "3000", "-o", tmp_path / "d"])
    one_line_error(proc, "chess-wm", "--min-fullmoves 3000 is unreachable")


def test_rarely_reached_min_fullmoves_gives_up_with_exit_1(run_cli, tmp_path, one_line_error):
    # 1500 full moves fit in the buffer but random play never lasts that long.
    proc = run_cli(["chess-wm", "random", "--games", "2", "--min-fullmoves", "1500", "-o", tmp_path / "d"])
    one_line_error(proc, "chess-wm", "--min-fullmoves 1500", "1000 random games", code=1)
    assert not (tmp_path / "d").exists()


def test_keep_long_games_keeps_in_order_and_resets_the_give_up_count():
    lengths = [2, 30, 2, 2, 40, 2, 50]  # plies; min 10 full moves = 20 plies
    kept = list(keep_long_games(lambda i: (lengths[i], i), 3, 10, give_up=3))
    assert kept == [(1, 1), (4, 4), (6, 6)]
    with pytest.raises(RunFailure, match="last 3 random games"):
        list(keep_long_games(lambda i: (lengths[i] if i < len(lengths) else 2, i), 4, 10, give_up=3))


def test_check_length_flags_bounds():
    check_length_flags(10, 20)  # exactly reachable
    with pytest.raises(UsageError, match="--max-plies 19"):
        check_length_flags(10, 19)
    with pytest.raises(UsageError, match="unreachable"):
        check_length_flags(5899, None)
    check_length_flags(5898, None)


def test_a_random_run_too_big_for_memory_is_refused(run_cli, tmp_path, one_line_error):
    proc = run_cli(
        ["chess-wm", "random", "--games", "100000000", "--games-per-shard", "100000000", "-o", tmp_path / "d"]
    )
    one_line_error(proc, "chess-wm", "--games", "of memory")

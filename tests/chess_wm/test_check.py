"""`chess-wm check`: python-chess replays every game and names the first wrong label (exit 3)."""

from __future__ import annotations

import dataclasses
import json


def test_check_passes_on_built_data(run_cli, random_dir, book_dir):
    proc = run_cli(["chess-wm", "check", random_dir, book_dir])
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["ok"] and result["bad_games"] == 0 and result["games"] > 64 and result["plies"] > 0


def test_check_names_the_first_wrong_label_and_exits_3(run_cli, tmp_path, one_line_error):
    from methodkit.tools.chess_wm import engine
    from methodkit.tools.chess_wm.data import write_games

    games = list(engine.random_games(3, 5, max_plies=20))
    half = int(games[1].states[4, 72])
    states = games[1].states.copy()
    states[4, 71:75] = [0, 9, 0, 9]  # counters that python-chess will not agree with at ply 4
    games[1] = dataclasses.replace(games[1], states=states)
    write_games(tmp_path / "bad", games, source="random", ep="potential", max_plies=20)
    proc = run_cli(["chess-wm", "check", "bad"], cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert json.loads(proc.stdout)["bad_games"] == 1
    err = proc.stderr.decode().strip()
    assert err == (
        f"chess-wm: error: bad: game 1 ({games[1].game_id}): ply 4: halfmove_lo is 9, python-chess says {half}"
        " (1 of 3 games wrong)"
    ), err

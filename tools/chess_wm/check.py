"""`chess-wm check`: replay every game of a data folder with python-chess and compare all 75 labels.

The data's labels come from the Numba encoder (build, random) or whoever wrote the folder; this is the
independent oracle a user runs on their own builds: each stored move must be legal where it is played,
and the state after every prefix must equal python-chess's square-by-square reading of the board.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.core.progress import ProgressCallback, silent
from methodkit.tools.chess_wm import spec

_FIELDS = ["side", "castle_K", "castle_Q", "castle_k", "castle_q", "ep_file", "ep_rank",
           "halfmove_hi", "halfmove_lo", "fullmove_hi", "fullmove_lo"]  # fmt: skip


def label_name(index: int) -> str:
    """Label 0..63 is a square (a8 first), then the scalar fields in spec order."""
    if index < 64:
        return "square " + "abcdefgh"[index % 8] + str(8 - index // 8)
    return _FIELDS[index - 64]


@dataclass
class CheckReport:
    games: int = 0
    plies: int = 0
    bad_games: int = 0
    first_mismatch: str | None = None

    def to_dict(self) -> dict:
        return {"games": self.games, "plies": self.plies, "bad_games": self.bad_games,
                "first_mismatch": self.first_mismatch, "ok": self.ok}  # fmt: skip

    @property
    def ok(self) -> bool:
        return self.bad_games == 0

    def failure(self) -> str:
        """The one-line message of a failed check (exit 3): the first wrong game, ply and label."""
        return f"{self.first_mismatch} ({self.bad_games} of {self.games} games wrong)"


def _first_problem(tokens: np.ndarray, states: np.ndarray, ep: str) -> str | None:
    import chess

    from methodkit.tools.chess_wm.board import id_to_move, reference_state

    if len(tokens) == 0 or int(tokens[0]) != spec.START:
        return "does not begin with the START token"
    board = chess.Board()
    for ply in range(len(tokens)):
        if ply:
            token = int(tokens[ply])
            move = id_to_move(token) if 0 <= token < spec.N_MOVE_IDS else None
            if move is None or not board.is_legal(move):
                shown = move.uci() if move is not None else f"token {token}"
                return f"ply {ply}: move {shown} is illegal in {board.fen()}"
            board.push(move)
        wrong = np.flatnonzero(reference_state(board, ep) != states[ply])
        if wrong.size:
            j = int(wrong[0])
            truth = int(reference_state(board, ep)[j])
            return f"ply {ply}: {label_name(j)} is {int(states[ply][j])}, python-chess says {truth}"
    return None


def check_games(games, progress: ProgressCallback = silent) -> CheckReport:
    """Replay every game of `games` (a GameSet); count the games with any wrong move or label."""
    ep = games.spec.get("ep", "potential")
    report = CheckReport(games=len(games))
    for i in range(len(games)):
        tokens, states = games.game(i)
        report.plies += len(tokens) - 1
        problem = _first_problem(tokens, states, ep)
        if problem is not None:
            report.bad_games += 1
            if report.first_mismatch is None:
                report.first_mismatch = f"{games.name or 'data'}: game {i} ({games.game_id[i]}): {problem}"
        progress("check", i + 1, len(games))
    return report


def check_folders(paths, progress: ProgressCallback = silent) -> CheckReport:
    """check_games over every data folder of `paths`, summed; the first mismatch names its folder."""
    from methodkit.tools.chess_wm.data import load_dataset

    total = CheckReport()
    for path in paths:
        games = load_dataset(path)
        games.name = str(path)
        report = check_games(games, progress)
        total.games, total.plies = total.games + report.games, total.plies + report.plies
        total.bad_games += report.bad_games
        total.first_mismatch = total.first_mismatch or report.first_mismatch
    return total

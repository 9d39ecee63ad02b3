"""The Numba chess engine from Python: perft, seeded random games, legal-move sets."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from methodkit.core.errors import UsageError
from methodkit.tools.chess_wm import kernels, spec

STATUS = {0: "cut", 1: "checkmate", 2: "stalemate", 3: "insufficient_material", 4: "fifty_moves", 5: "threefold"}
DEFAULT_CAP = 4096


def position_from_fen(fen: str):
    """(board int8[64], st int64[5]) from a FEN (via python-chess, standard chess only)."""
    import chess

    b = chess.Board(fen)
    board = np.zeros(64, dtype=np.int8)
    for square, piece in b.piece_map().items():
        board[square] = piece.piece_type + (0 if piece.color else 6)
    castle = (
        int(b.has_kingside_castling_rights(chess.WHITE))
        | int(b.has_queenside_castling_rights(chess.WHITE)) << 1
        | int(b.has_kingside_castling_rights(chess.BLACK)) << 2
        | int(b.has_queenside_castling_rights(chess.BLACK)) << 3
    )
    ep = -1 if b.ep_square is None else b.ep_square
    st = np.array([0 if b.turn else 1, castle, ep, b.halfmove_clock, b.fullmove_number], dtype=np.int64)
    return board, st


def perft(fen: str, depth: int) -> int:
    board, st = position_from_fen(fen)
    return int(kernels.perft_kernel(board, st, depth))


def game_seed(seed: int, index: int) -> np.uint64:
    return np.random.SeedSequence([seed, index]).generate_state(1, dtype=np.uint64)[0]


def random_game(seed: int, index: int, cap: int = DEFAULT_CAP, ep: str = "potential"):
    """(tokens int32 [n+1], states uint8 [n+1, 75], status) of seeded random game `index`."""
    tokens = np.zeros(cap + 1, dtype=np.int32)
    tokens[0] = spec.START
    states = np.zeros((cap + 1, spec.N_LABELS), dtype=np.uint8)
    n, status = kernels.play_random_game(game_seed(seed, index), cap, ep == "legal", tokens, states)
    return tokens[: n + 1], states[: n + 1], STATUS[int(status)]


def random_games(
    n_games: int, seed: int = 0, *, max_plies: int | None = None, min_fullmoves: int = 10, ep: str = "potential"
) -> Iterator:
    """Like generate.random_games, on the Numba engine: data.Game records."""
    from methodkit.tools.chess_wm.data import Game, make_game_id

    if n_games <= 0:
        raise UsageError(f"--games must be positive, got {n_games}")
    cap = max_plies if max_plies is not None else DEFAULT_CAP
    kept, index = 0, 0
    while kept < n_games:
        tokens, states, status = random_game(seed, index, cap, ep)
        index += 1
        if (len(tokens) - 1) // 2 < min_fullmoves:
            continue
        kept += 1
        result = "*"
        if status == "checkmate":
            result = "0-1" if states[-1, 64] == 0 else "1-0"
        elif status != "cut":
            result = "1/2-1/2"
        yield Game(tokens, states, make_game_id("random-numba", str(seed), str(index - 1)), result)


def legal_sets(move_ids: np.ndarray) -> list[set[int]]:
    """The legal move ids at every ply of a game (plies 0..T)."""
    ids = np.zeros((len(move_ids) + 1) * 256, dtype=np.int64)
    offsets = np.zeros(len(move_ids) + 2, dtype=np.int64)
    done = kernels.replay_legal_sets(np.asarray(move_ids, dtype=np.int64), ids, offsets)
    return [set(ids[offsets[t] : offsets[t + 1]].tolist()) for t in range(done + 1)]

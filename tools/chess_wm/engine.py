"""The Numba chess engine from Python: perft, seeded random and book self-play games, legal-move sets."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import DataError, UsageError
from methodkit.tools.chess_wm import kernels, play, spec
from methodkit.tools.chess_wm.lengths import NUMBA_PLY_BUFFER as DEFAULT_CAP
from methodkit.tools.chess_wm.lengths import check_length_flags, keep_long_games

STATUS = {0: "cut", 1: "checkmate", 2: "stalemate", 3: "insufficient_material", 4: "fifty_moves", 5: "threefold"}


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


_NO_BOOK = (np.zeros(0, np.uint64), np.zeros(0, np.uint16), np.zeros(0, np.uint16), np.zeros(781, np.uint64))


def random_game(seed: int, index: int, cap: int = DEFAULT_CAP, ep: str = "potential"):
    """(tokens int32 [n+1], states uint8 [n+1, 75], status) of seeded random game `index`."""
    tokens, states, n, status, _ = _play(seed, index, cap, ep, play.POLICY_RANDOM, _NO_BOOK, np.zeros(3))
    return tokens[: n + 1], states[: n + 1], STATUS[int(status)]


def _play(seed, index, cap, ep, policy, book, params):
    tokens = np.zeros(cap + 1, dtype=np.int32)
    tokens[0] = spec.START
    states = np.zeros((cap + 1, spec.N_LABELS), dtype=np.uint8)
    n, status, book_plies = play.play_game(
        game_seed(seed, index), cap, ep == "legal", tokens, states, policy, *book, params
    )
    return tokens, states, n, status, book_plies


def random_games(
    n_games: int, seed: int = 0, *, max_plies: int | None = None, min_fullmoves: int = 10, ep: str = "potential"
) -> Iterator:
    """Like generate.random_games, on the Numba engine: data.Game records."""
    from methodkit.tools.chess_wm.data import Game, make_game_id

    if n_games <= 0:
        raise UsageError(f"--games must be positive, got {n_games}")
    cap = max_plies if max_plies is not None else DEFAULT_CAP
    check_length_flags(min_fullmoves, max_plies, engine_cap=cap)

    def play_one(index: int):
        tokens, states, status = random_game(seed, index, cap, ep)
        return len(tokens) - 1, (tokens, states, status)

    for index, (tokens, states, status) in keep_long_games(play_one, n_games, min_fullmoves):
        yield Game(tokens, states, make_game_id("random-numba", str(seed), str(index)), _result(status, states))


def _result(status: str, states) -> str:
    if status == "checkmate":
        return "0-1" if states[-1, 64] == 0 else "1-0"
    return "*" if status == "cut" else "1/2-1/2"


@dataclass(frozen=True)
class PolyglotBook:
    """A Polyglot opening book as sorted arrays, plus the Polyglot Zobrist table."""

    keys: np.ndarray  # uint64, sorted
    moves: np.ndarray  # uint16 raw Polyglot moves
    weights: np.ndarray  # uint16
    table: np.ndarray  # uint64 [781]

    @property
    def arrays(self):
        return self.keys, self.moves, self.weights, self.table


ENTRY = np.dtype([("key", ">u8"), ("move", ">u2"), ("weight", ">u2"), ("learn", ">u4")])


def load_book(path: str | os.PathLike) -> PolyglotBook:
    """Read a Polyglot .bin book (16-byte big-endian entries sorted by key)."""
    from chess.polyglot import POLYGLOT_RANDOM_ARRAY

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DataError(f"{path}: no such Polyglot book; install Debian's gnuchess-book or pass --book PATH")
    size = os.path.getsize(path)
    if size == 0 or size % ENTRY.itemsize:
        raise DataError(f"{path}: not a Polyglot book ({size} bytes is not a positive multiple of 16)")
    entries = np.fromfile(path, dtype=ENTRY)
    keys = entries["key"].astype(np.uint64)
    order = np.argsort(keys, kind="stable")  # books are sorted; a hand-made one may not be
    table = np.array(POLYGLOT_RANDOM_ARRAY, dtype=np.uint64)
    return PolyglotBook(
        keys[order], entries["move"].astype(np.uint16)[order], entries["weight"].astype(np.uint16)[order], table
    )


@dataclass(frozen=True)
class HeuristicParams:
    temperature: float = 1.0  # Gumbel noise scale
    check_bonus: float = 0.5
    mobility_weight: float = 0.05

    def array(self) -> np.ndarray:
        return np.array([self.temperature, self.check_bonus, self.mobility_weight], dtype=np.float64)


def book_games(
    n_games: int,
    seed: int = 0,
    *,
    book: PolyglotBook | None,
    max_plies: int = 400,
    params: HeuristicParams = HeuristicParams(),
    ep: str = "potential",
    start: int = 0,
) -> Iterator:
    """Book + heuristic self-play games on the Numba engine (synthetic human-proxy): data.Game records.

    Game `start + i` depends only on (seed, start + i), so chunks of one run can be played apart."""
    from methodkit.tools.chess_wm.data import Game, make_game_id

    if n_games <= 0:
        raise UsageError(f"--games must be positive, got {n_games}")
    arrays = book.arrays if book is not None else _NO_BOOK
    values = params.array()
    for index in range(start, start + n_games):
        tokens, states, n, status, _ = _play(seed, index, max_plies, ep, play.POLICY_BOOK, arrays, values)
        tokens, states = tokens[: n + 1], states[: n + 1]
        yield Game(
            tokens, states, make_game_id("book-numba", str(seed), str(index)), _result(STATUS[int(status)], states)
        )


def legal_sets(move_ids: np.ndarray) -> list[set[int]]:
    """The legal move ids at every ply of a game (plies 0..T)."""
    ids = np.zeros((len(move_ids) + 1) * 256, dtype=np.int64)
    offsets = np.zeros(len(move_ids) + 2, dtype=np.int64)
    done = kernels.replay_legal_sets(np.asarray(move_ids, dtype=np.int64), ids, offsets)
    return [set(ids[offsets[t] : offsets[t + 1]].tolist()) for t in range(done + 1)]

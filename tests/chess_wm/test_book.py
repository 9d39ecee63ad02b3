"""Book + heuristic self-play on the Numba engine against python-chess's Polyglot reader and player."""

from __future__ import annotations

import os
import struct

import chess
import chess.polyglot
import numpy as np
import pytest

from methodkit.core.errors import DataError
from methodkit.tools.chess_wm import board as B
from methodkit.tools.chess_wm import engine, kernels, play
from methodkit.tools.chess_wm.generate import DEFAULT_BOOK, SelfplayOptions, heuristic_score

TABLE = np.array(chess.polyglot.POLYGLOT_RANDOM_ARRAY, dtype=np.uint64)
needs_book = pytest.mark.skipif(not os.path.exists(DEFAULT_BOOK), reason="Debian's gnuchess-book is not installed")


def _positions(n_games: int, plies: int):
    """python-chess boards along seeded random games (castling, en passant, promotions occur)."""
    for index in range(n_games):
        tokens, _, _ = engine.random_game(3, index, plies)
        board = chess.Board()
        for token in tokens[1:]:
            yield board
            board = board.copy(stack=False)
            board.push(B.id_to_move(int(token)))
        yield board


def _our_move(board: chess.Board, legal, n, move: chess.Move) -> int:
    for i in range(n):
        if B.id_to_move(int(kernels.move_id(legal[i]))) == move:
            return int(legal[i])
    raise AssertionError(f"{move} not among our legal moves")


def test_polyglot_key_matches_python_chess():
    fens = [
        chess.STARTING_FEN,
        "rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3",  # ep capturable: hashed
        "rnbqkbnr/pppp1ppp/8/8/3Pp3/8/PPP1PPPP/RNBQKBNR b KQkq d3 0 2",  # black ep capture
        "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 1",  # ep square, no capturer
    ]
    boards = [chess.Board(f) for f in fens] + list(_positions(8, 120))
    for board in boards:
        arr, st = engine.position_from_fen(board.fen())
        assert play.polyglot_key(arr, st, TABLE) == np.uint64(chess.polyglot.zobrist_hash(board)), board.fen()
    # Polyglot's published key of the start position
    arr, st = engine.position_from_fen(chess.STARTING_FEN)
    assert play.polyglot_key(arr, st, TABLE) == np.uint64(0x463B96181691FC9C)


def test_heuristic_scores_match_the_python_player():
    opts = SelfplayOptions()
    legal = np.empty(256, dtype=np.int32)
    scores = np.empty(256)
    checked = 0
    for board in _positions(4, 150):
        arr, st = engine.position_from_fen(board.fen())
        n = kernels.legal_moves(arr, st, legal)
        play.heuristic_scores(arr, st, legal, n, opts.check_bonus, opts.mobility_weight, scores)
        for move in board.legal_moves:
            i = list(legal[:n]).index(_our_move(board, legal, n, move))
            assert scores[i] == pytest.approx(heuristic_score(board, move, opts), abs=1e-12), (board.fen(), move)
            checked += 1
    assert checked > 5000


def _write_book(path, entries):
    """A Polyglot book file from (board, uci, weight) triples, castling as king-takes-rook."""
    rows = []
    for board, uci, weight in entries:
        move = chess.Move.from_uci(uci)
        promo = {None: 0, chess.KNIGHT: 1, chess.BISHOP: 2, chess.ROOK: 3, chess.QUEEN: 4}[move.promotion]
        raw = move.to_square | move.from_square << 6 | promo << 12
        rows.append((chess.polyglot.zobrist_hash(board), raw, weight))
    with open(path, "wb") as handle:
        for key, raw, weight in sorted(rows):
            handle.write(struct.pack(">QHHI", key, raw, weight, 0))


def test_book_is_followed_by_weight_then_castling_decoded(tmp_path):
    line = ["e2e4", "e7e5", "g1f3", "b8c6", "f1c4", "g8f6"]
    entries, board = [], chess.Board()
    for uci in line:
        entries.append((board.copy(), uci, 10))
        board.push_uci(uci)
    entries.append((board.copy(), "e1h1", 7))  # O-O written as Polyglot does
    entries.append((board.copy(), "d2d3", 0))  # weight 0: ignored, as python-chess's find_all
    entries.append((chess.Board(), "a2a3", 0))
    _write_book(tmp_path / "tiny.bin", entries)
    book = engine.load_book(tmp_path / "tiny.bin")
    for game in engine.book_games(5, 1, book=book, max_plies=20):
        moves = [B.id_to_move(int(t)) for t in game.tokens[1:]]
        assert [m.uci() for m in moves[:7]] == line + ["e1g1"]


@needs_book
def test_book_games_are_legal_with_exact_states_and_ends():
    book = engine.load_book(DEFAULT_BOOK)
    reader = chess.polyglot.open_reader(DEFAULT_BOOK)
    first_moves = {e.move for e in reader.find_all(chess.Board())}
    ends = 0
    for game in engine.book_games(40, 5, book=book, max_plies=160):
        moves = [B.id_to_move(int(t)) for t in game.tokens[1:]]
        assert moves[0] in first_moves
        board = chess.Board()
        for move in moves:
            assert board.is_legal(move) and not board.is_game_over(claim_draw=True)
            board.push(move)
        tokens, states = B.game_arrays(moves, "potential")
        assert np.array_equal(tokens, game.tokens) and np.array_equal(states, game.states)
        assert board.is_game_over(claim_draw=True) == (len(moves) < 160)
        ends += len(moves) < 160
    assert ends > 0  # some games end by rule inside 160 plies


@needs_book
def test_book_openings_follow_entry_weights():
    reader = chess.polyglot.open_reader(DEFAULT_BOOK)
    weights = {e.move: e.weight for e in reader.find_all(chess.Board())}
    total = sum(weights.values())
    book = engine.load_book(DEFAULT_BOOK)
    n = 3000
    firsts = [B.id_to_move(int(g.tokens[1])) for g in engine.book_games(n, 9, book=book, max_plies=1)]
    for move in (chess.Move.from_uci("e2e4"), chess.Move.from_uci("d2d4")):
        p = weights[move] / total
        sd = (p * (1 - p) / n) ** 0.5
        assert abs(firsts.count(move) / n - p) < 4 * sd, move


def test_book_games_are_seeded_by_index():
    a = list(engine.book_games(6, 2, book=None, max_plies=60))
    b = list(engine.book_games(3, 2, book=None, max_plies=60, start=3))
    assert all(np.array_equal(x.tokens, y.tokens) for x, y in zip(a[3:], b))
    assert not np.array_equal(a[0].tokens, a[1].tokens)


def test_bad_book_file_names_the_file(tmp_path):
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"x" * 17)
    with pytest.raises(DataError, match="bad.bin: not a Polyglot book"):
        engine.load_book(bad)

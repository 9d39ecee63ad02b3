"""Game generators: uniformly random legal play (the paper's OOD test split) and book self-play.

`random`: from the start position, a uniformly random legal move until the game is
over with draw claims (`is_game_over(claim_draw=True)`), keeping games of at least
`min_fullmoves` full moves (paper). With `max_plies` a game stops there (the rest
would be truncated anyway).

`selfplay` ("book", a synthetic human-proxy split, never real games; ours): the
opening is drawn from a Polyglot book by entry weight until out of book, then the
game continues with Stockfish (softmax over multipv scores, when installed) or a
heuristic player: score = capture value + check bonus + mobility of the moved
piece + Gumbel noise.
"""

from __future__ import annotations

import math
import os
import random as _random
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from methodkit.core.errors import DataError, UsageError
from methodkit.tools.chess_wm.board import game_arrays
from methodkit.tools.chess_wm.data import Game, make_game_id
from methodkit.tools.chess_wm.lengths import check_length_flags, keep_long_games

DEFAULT_BOOK = "/usr/share/games/gnuchess/book.bin"
STOCKFISH_PATHS = ("/usr/games/stockfish", "/usr/bin/stockfish")
PIECE_VALUE = {1: 1.0, 2: 3.0, 3: 3.0, 4: 5.0, 5: 9.0, 6: 0.0}


def game_rng(seed: int, index: int) -> _random.Random:
    """The RNG of game `index`: independent of how many games or threads a run uses."""
    state = np.random.SeedSequence([seed, index]).generate_state(2, dtype=np.uint64)
    return _random.Random(int(state[0]) << 64 | int(state[1]))


def play_random(rng: _random.Random, max_plies: int | None = None):
    """One uniformly random game; returns (moves, board, finished)."""
    import chess

    board = chess.Board()
    moves = []
    while max_plies is None or len(moves) < max_plies:
        if board.is_game_over(claim_draw=True):
            return moves, board, True
        move = rng.choice(list(board.legal_moves))
        board.push(move)
        moves.append(move)
    return moves, board, board.is_game_over(claim_draw=True)


def random_games(
    n_games: int,
    seed: int = 0,
    *,
    max_plies: int | None = None,
    min_fullmoves: int = 10,
    ep: str = "potential",
    pgn_sink: list | None = None,
) -> Iterator[Game]:
    """`n_games` random games (short games are dropped and replaced by the next seeds)."""
    if n_games <= 0:
        raise UsageError(f"--games must be positive, got {n_games}")
    check_length_flags(min_fullmoves, max_plies)

    def play_one(index: int):
        moves, board, _ = play_random(game_rng(seed, index), max_plies)
        return len(moves), (moves, board)

    for index, (moves, board) in keep_long_games(play_one, n_games, min_fullmoves):
        tokens, states = game_arrays(moves, ep)
        result = board.result(claim_draw=True)
        if pgn_sink is not None:
            pgn_sink.append(_pgn_text(moves, {"Event": "chess-wm random", "Round": str(index), "Result": result}))
        yield Game(tokens, states, make_game_id("random", str(seed), str(index)), result)


# ---------------------------------------------------------------- book self-play


def parse_nodes(nodes: str) -> tuple[int, int]:
    """--nodes MIN,MAX (Stockfish's node budget range per move)."""
    try:
        low, high = (int(v) for v in nodes.split(","))
        if not 0 < low <= high:
            raise ValueError
    except ValueError:
        raise UsageError(f"--nodes must be MIN,MAX with 0 < MIN <= MAX, got {nodes!r}") from None
    return low, high


def numba_book_games(games: int, seed: int, book: str, max_plies: int, temperature: float, ep: str):
    """Book + heuristic self-play on the Numba engine (`book` '' for none): data.Game records."""
    from methodkit.tools.chess_wm import engine as numba_engine

    polyglot = numba_engine.load_book(book) if book else None
    params = numba_engine.HeuristicParams(temperature=temperature)
    return numba_engine.book_games(games, seed, book=polyglot, max_plies=max_plies, params=params, ep=ep)


@dataclass(frozen=True)
class SelfplayOptions:
    book: str | None = DEFAULT_BOOK
    engine: str = "heuristic"  # heuristic | stockfish | auto
    stockfish: str | None = None
    max_plies: int = 400
    nodes: tuple[int, int] = (200, 2000)
    multipv: int = 4
    temperature: float = 1.0  # heuristic: Gumbel scale; stockfish: softmax temperature in pawns
    check_bonus: float = 0.5
    mobility_weight: float = 0.05


def find_stockfish(path: str | None) -> str | None:
    if path:
        return path if os.path.exists(path) else None
    for candidate in STOCKFISH_PATHS:
        if os.path.exists(candidate):
            return candidate
    return shutil.which("stockfish")


def heuristic_score(board, move, opts: SelfplayOptions) -> float:
    """Capture value + promotion gain + check bonus + mobility of the moved piece from its target square."""
    import chess

    victim = board.piece_type_at(move.to_square)
    if victim is None and board.is_en_passant(move):
        victim = chess.PAWN
    score = PIECE_VALUE.get(victim, 0.0) if victim else 0.0
    if move.promotion:
        score += PIECE_VALUE[move.promotion] - 1.0
    if board.gives_check(move):
        score += opts.check_bonus
    kind = move.promotion or board.piece_type_at(move.from_square)
    reach = _attacks(kind, board.turn, move.to_square, (board.occupied & ~chess.BB_SQUARES[move.from_square]))
    return score + opts.mobility_weight * chess.popcount(reach)


def heuristic_move(board, rng: _random.Random, opts: SelfplayOptions):
    """The legal move of highest heuristic score + Gumbel noise (a softmax draw at `temperature`)."""
    best, best_score = None, -math.inf
    for move in board.legal_moves:
        u = rng.random()
        score = heuristic_score(board, move, opts) - opts.temperature * math.log(-math.log(max(u, 1e-300)))
        if score > best_score:
            best, best_score = move, score
    return best


def _attacks(kind: int, color: bool, square: int, occupied: int) -> int:
    import chess

    if kind == chess.PAWN:
        return chess.BB_PAWN_ATTACKS[color][square]
    if kind == chess.KNIGHT:
        return chess.BB_KNIGHT_ATTACKS[square]
    if kind == chess.KING:
        return chess.BB_KING_ATTACKS[square]
    reach = 0
    if kind in (chess.BISHOP, chess.QUEEN):
        reach |= chess.BB_DIAG_ATTACKS[square][chess.BB_DIAG_MASKS[square] & occupied]
    if kind in (chess.ROOK, chess.QUEEN):
        reach |= chess.BB_RANK_ATTACKS[square][chess.BB_RANK_MASKS[square] & occupied]
        reach |= chess.BB_FILE_ATTACKS[square][chess.BB_FILE_MASKS[square] & occupied]
    return reach


def book_move(reader, board, rng: _random.Random):
    """A book move drawn by entry weight, or None when out of book."""
    entries = [e for e in reader.find_all(board)]
    total = sum(e.weight for e in entries)
    if not entries or total <= 0:
        return None
    pick = rng.random() * total
    for entry in entries:
        pick -= entry.weight
        if pick < 0:
            return entry.move
    return entries[-1].move


def _stockfish_move(engine, board, rng: _random.Random, opts: SelfplayOptions):
    import chess.engine

    nodes = rng.randint(*opts.nodes)
    infos = engine.analyse(board, chess.engine.Limit(nodes=nodes), multipv=opts.multipv)
    moves, scores = [], []
    for info in infos:
        if "pv" not in info or not info["pv"]:
            continue
        moves.append(info["pv"][0])
        scores.append(info["score"].relative.score(mate_score=10000) / 100.0)
    if not moves:
        return None
    top = max(scores)
    weights = [math.exp((s - top) / max(opts.temperature, 1e-6)) for s in scores]
    pick = rng.random() * sum(weights)
    for move, w in zip(moves, weights):
        pick -= w
        if pick < 0:
            return move
    return moves[-1]


def selfplay_pgn(
    n_games: int, seed: int = 0, opts: SelfplayOptions = SelfplayOptions(), progress=None
) -> Iterator[str]:
    """PGN text of `n_games` book-opening self-play games (synthetic human-proxy, not real games)."""
    import chess
    import chess.engine
    import chess.polyglot

    if n_games <= 0:
        raise UsageError(f"--games must be positive, got {n_games}")
    if opts.engine not in ("heuristic", "stockfish", "auto"):
        raise UsageError(f"--engine must be heuristic, stockfish or auto, not {opts.engine!r}")
    reader = None
    if opts.book:
        if not Path(opts.book).is_file():
            raise DataError(f"{opts.book}: no such Polyglot book; install Debian's gnuchess-book or pass --book PATH")
        try:
            reader = chess.polyglot.open_reader(opts.book)
            next(iter(reader.find_all(chess.Board())), None)
        except Exception as exc:
            raise DataError(f"{opts.book}: not a Polyglot book ({type(exc).__name__}: {exc})") from None
    engine = None
    stockfish = find_stockfish(opts.stockfish) if opts.engine in ("stockfish", "auto") else None
    if opts.engine == "stockfish" and stockfish is None:
        raise UsageError(
            "--engine stockfish: no stockfish binary found; install Debian's stockfish or pass --stockfish PATH"
        )
    if stockfish:
        engine = chess.engine.SimpleEngine.popen_uci(stockfish)
    player = "stockfish" if engine else "heuristic"
    try:
        for index in range(n_games):
            rng = game_rng(seed, index)
            board = chess.Board()
            moves, in_book = [], reader is not None
            while len(moves) < opts.max_plies and not board.is_game_over(claim_draw=True):
                move = book_move(reader, board, rng) if in_book else None
                if move is None:
                    in_book = False
                    move = _stockfish_move(engine, board, rng, opts) if engine else heuristic_move(board, rng, opts)
                board.push(move)
                moves.append(move)
            over = board.is_game_over(claim_draw=True)
            result = board.result(claim_draw=True) if over else "*"
            headers = {
                "Event": "chess-wm selfplay (synthetic human-proxy)",
                "Round": str(index),
                "White": player,
                "Black": player,
                "Result": result,
            }
            if progress is not None:
                progress("selfplay", index + 1, n_games)
            yield _pgn_text(moves, headers)
    finally:
        if reader is not None:
            reader.close()
        if engine is not None:
            engine.quit()


def _pgn_text(moves, headers: dict) -> str:
    import chess.pgn

    game = chess.pgn.Game()
    for key, value in headers.items():
        game.headers[key] = value
    node = game
    for move in moves:
        node = node.add_variation(move)
    exporter = chess.pgn.StringExporter(headers=True, variations=False, comments=False)
    return game.accept(exporter) + "\n\n"


def _pgn_of_tokens(tokens, headers: dict) -> str:
    """PGN text of one game given as token ids (START first), replayed through python-chess."""
    from methodkit.tools.chess_wm.board import id_to_move

    return _pgn_text([id_to_move(int(t)) for t in tokens[1:]], headers)


def pgn_of_games(games, event: str) -> list[str]:
    """PGN text of generated data.Game records."""
    return [_pgn_of_tokens(g.tokens, {"Event": event, "Round": g.game_id, "Result": g.result}) for g in games]


def pgn_from_tokens(games) -> list[str]:
    """PGN text of every game in a GameSet."""
    return [
        _pgn_of_tokens(games.game(i)[0], {"Event": "chess-wm random", "Round": str(games.game_id[i]), "Result": "*"})
        for i in range(len(games))
    ]

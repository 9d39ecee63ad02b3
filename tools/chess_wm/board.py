"""python-chess is the ground truth for every label: snapshots, the reference encoder, games -> arrays."""

from __future__ import annotations

import numpy as np

from methodkit.core.errors import UsageError
from methodkit.tools.chess_wm import spec
from methodkit.tools.chess_wm.kernels import SNAP_WIDTH, encode_states

_PIECE_ORDER = [(color, kind) for color in (True, False) for kind in range(1, 7)]


def check_ep(ep: str) -> str:
    if ep not in spec.EP_MODES:
        raise UsageError(f"--ep must be one of {', '.join(spec.EP_MODES)}, not {ep!r}")
    return ep


def ep_square(board, ep: str) -> int | None:
    """The en-passant square: python-chess's ep_square after every double push ('potential', the
    paper's convention) or only when a legal ep capture exists ('legal', the FEN convention)."""
    if ep == "potential":
        return board.ep_square
    return board.ep_square if board.has_legal_en_passant() else None


def snapshot(board, ep: str) -> list[int]:
    """The 18 integers the Numba encoder reads (see kernels.py)."""
    import chess

    row = [board.pieces_mask(kind, chess.WHITE) for kind in range(1, 7)]
    row += [board.pieces_mask(kind, chess.BLACK) for kind in range(1, 7)]
    castle = (
        int(board.has_kingside_castling_rights(chess.WHITE))
        | int(board.has_queenside_castling_rights(chess.WHITE)) << 1
        | int(board.has_kingside_castling_rights(chess.BLACK)) << 2
        | int(board.has_queenside_castling_rights(chess.BLACK)) << 3
    )
    square = ep_square(board, ep)
    row += [
        0 if board.turn else 1,
        castle,
        64 if square is None else square,
        board.halfmove_clock,
        board.fullmove_number,
    ]
    row.append(0)
    return row


def snapshots_to_states(rows: list[list[int]]):
    snaps = np.array(rows, dtype=np.uint64).reshape(-1, SNAP_WIDTH)
    return encode_states(snaps)


def reference_state(board, ep: str = "potential") -> np.ndarray:
    """The 75 labels of one board, square by square through python-chess (the parity reference)."""
    import chess

    out = np.zeros(spec.N_LABELS, dtype=np.uint8)
    for square in chess.SQUARES:
        piece = board.piece_at(square)
        if piece is not None:
            out[spec.label_index_of_square(square)] = piece.piece_type + (0 if piece.color else 6)
    out[64] = 0 if board.turn == chess.WHITE else 1
    out[65] = board.has_kingside_castling_rights(chess.WHITE)
    out[66] = board.has_queenside_castling_rights(chess.WHITE)
    out[67] = board.has_kingside_castling_rights(chess.BLACK)
    out[68] = board.has_queenside_castling_rights(chess.BLACK)
    square = ep_square(board, ep)
    if square is not None:
        out[69] = chess.square_file(square) + 1
        out[70] = 1 if chess.square_rank(square) == 2 else 2
    half, full = min(board.halfmove_clock, 65535), min(board.fullmove_number, 65535)
    out[71:75] = [half >> 8, half & 255, full >> 8, full & 255]
    return out


def state_to_board(state) -> object:
    """A python-chess board from 75 labels (for FEN output in predict); counters clipped to FEN range."""
    import chess

    board = chess.Board(None)
    for square in chess.SQUARES:
        label = int(state[spec.label_index_of_square(square)])
        if label:
            board.set_piece_at(square, chess.Piece((label - 1) % 6 + 1, label <= 6))
    board.turn = chess.WHITE if int(state[64]) == 0 else chess.BLACK
    rights = 0
    for bit, mask in zip(state[65:69], (chess.BB_H1, chess.BB_A1, chess.BB_H8, chess.BB_A8)):
        if int(bit):
            rights |= mask
    board.castling_rights = rights
    file, rank = int(state[69]), int(state[70])
    board.ep_square = chess.square(file - 1, 2 if rank == 1 else 5) if file and rank else None
    board.halfmove_clock = int(state[71]) * 256 + int(state[72])
    board.fullmove_number = max(int(state[73]) * 256 + int(state[74]), 1)
    return board


def state_fen(state) -> str:
    """FEN of 75 labels; the ep field is whatever the labels say (the potential square by default)."""
    board = state_to_board(state)
    pieces = board.board_fen()
    side = "w" if int(state[64]) == 0 else "b"
    castle = "".join(c for c, bit in zip("KQkq", state[65:69]) if int(bit)) or "-"
    file, rank = int(state[69]), int(state[70])
    ep = f"{'abcdefgh'[file - 1]}{3 if rank == 1 else 6}" if file and rank else "-"
    return f"{pieces} {side} {castle} {ep} {board.halfmove_clock} {board.fullmove_number}"


def move_id(move) -> int:
    return spec.encode_move(move.from_square, move.to_square, move.promotion)


def id_to_move(move_id_: int):
    import chess

    from_sq, to_sq, promo = spec.decode_move(move_id_)
    return chess.Move(from_sq, to_sq, promotion=promo)


def game_arrays(moves, ep: str = "potential", board=None):
    """Replay `moves` (python-chess Move objects, legal from the start) -> (tokens int32 [T+1], states uint8 [T+1, 75])."""
    import chess

    board = chess.Board() if board is None else board
    rows = [snapshot(board, ep)]
    tokens = [spec.START]
    for move in moves:
        tokens.append(move_id(move))
        board.push(move)
        rows.append(snapshot(board, ep))
    return np.asarray(tokens, dtype=np.int32), snapshots_to_states(rows)

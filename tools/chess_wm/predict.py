"""Predict the state after every prefix of UCI move lines (one game per line)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from methodkit.tools.chess_wm.board import game_arrays, state_fen


def parse_uci_line(line: str):
    """(moves, error): python-chess moves of a line, or the first illegal/unparsable one named with its ply."""
    import chess

    board = chess.Board()
    moves = []
    for ply, text in enumerate(line.split(), start=1):
        try:
            move = chess.Move.from_uci(text)
        except ValueError:
            return moves, f"ply {ply}: '{text}' is not a UCI move"
        if not move or move not in board.legal_moves:
            return moves, f"ply {ply}: '{text}' is illegal in {board.fen()}"
        board.push(move)
        moves.append(move)
    return moves, None


def predict_lines(model, lines: list[str], ep: str, *, device: str = "cpu", digits: int = 4) -> Iterator[dict]:
    """One record per input line: per prefix the predicted FEN, whether all 75 labels are right,
    and the confidence (softmax probability of the argmax) of every label."""
    import torch

    from methodkit.tools.chess_wm.models import predict_labels

    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        moves, error = parse_uci_line(line)
        if error is not None:
            yield {"line": number, "error": error}
            continue
        tokens, truth = game_arrays(moves, ep)
        with torch.no_grad():
            logits = model(torch.from_numpy(tokens.astype(np.int64))[None].to(device))
            labels, probs = predict_labels(logits)
        labels, probs = labels[0].cpu().numpy(), probs[0].cpu().numpy()
        prefixes = []
        for t in range(len(tokens)):
            prefixes.append(
                {
                    "ply": t,
                    "move": moves[t - 1].uci() if t else None,
                    "fen": state_fen(labels[t]),
                    "exact": bool((labels[t] == truth[t]).all()),
                    "wrong_labels": [int(j) for j in np.flatnonzero(labels[t] != truth[t])],
                    "confidence": [round(float(p), digits) for p in probs[t]],
                }
            )
        yield {"line": number, "plies": len(moves), "states": prefixes}

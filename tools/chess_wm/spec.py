"""The task's fixed vocabulary and state layout (paper), and their fingerprint.

Move id = (from*64 + to)*5 + promo with python-chess squares (a1=0 .. h8=63) and
promo 0 none, 1 q, 2 r, 3 b, 4 n; START = 20480, PAD = 20481.

State = 75 categorical labels: [0:64] squares a8..h8, a7..h7, ..., a1..h1 with
13 classes (0 empty, 1-6 PNBRQK white, 7-12 black); [64] side to move (0 white);
[65:69] castling K, Q, k, q; [69] en-passant file (0 none, 1-8 a-h); [70]
en-passant rank (0 none, 1 rank 3, 2 rank 6); [71:73] halfmove clock (hi, lo
byte); [73:75] fullmove number (hi, lo byte).
"""

from __future__ import annotations

import hashlib
import json

N_MOVE_IDS = 64 * 64 * 5
START = N_MOVE_IDS  # 20480
PAD = N_MOVE_IDS + 1  # 20481
VOCAB = N_MOVE_IDS + 2  # 20482
N_LABELS = 75
EP_MODES = ("potential", "legal")
PROMO_CODE = {None: 0, 5: 1, 4: 2, 3: 3, 2: 4}  # python-chess piece types: q=5 r=4 b=3 n=2
PROMO_PIECE = {0: None, 1: 5, 2: 4, 3: 3, 4: 2}

# classes per label, in label order
LABEL_CLASSES = [13] * 64 + [2] + [2] * 4 + [9] + [3] + [256] * 4
HEAD_SIZE = sum(LABEL_CLASSES)  # 1878
# label groups reported separately by eval (ours)
GROUPS = {
    "board": range(0, 64),
    "side": range(64, 65),
    "castling": range(65, 69),
    "ep": range(69, 71),
    "counters": range(71, 75),
}
# contiguous blocks of labels sharing a class count: (first label, n labels, classes)
BLOCKS = [(0, 64, 13), (64, 5, 2), (69, 1, 9), (70, 1, 3), (71, 4, 256)]

assert HEAD_SIZE == 1878


def spec(ep: str = "potential") -> dict:
    """The task spec a data set or checkpoint was made for (stored in manifests and sidecars)."""
    return {
        "task": "chess-world-model",
        "vocab": VOCAB,
        "start_id": START,
        "pad_id": PAD,
        "move_encoding": "(from*64+to)*5+promo; squares a1=0..h8=63; promo 0 none 1 q 2 r 3 b 4 n",
        "state_layout": "64 squares a8..h1 (13 classes) | side | castling KQkq | ep file | ep rank | halfmove hi,lo | fullmove hi,lo",
        "n_labels": N_LABELS,
        "label_classes": LABEL_CLASSES,
        "ep": ep,
    }


def spec_sha(spec_dict: dict) -> str:
    """A short stable hash of a spec (sorted-key JSON)."""
    text = json.dumps(spec_dict, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def encode_move(from_sq: int, to_sq: int, promo_type: int | None) -> int:
    return (from_sq * 64 + to_sq) * 5 + PROMO_CODE[promo_type]


def decode_move(move_id: int) -> tuple[int, int, int | None]:
    rest, promo = divmod(int(move_id), 5)
    from_sq, to_sq = divmod(rest, 64)
    return from_sq, to_sq, PROMO_PIECE[promo]


def label_index_of_square(square: int) -> int:
    """State label of python-chess square (a1=0): labels run a8..h8 first."""
    return (7 - square // 8) * 8 + square % 8

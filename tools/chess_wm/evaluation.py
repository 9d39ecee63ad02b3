"""The paper's metrics: loss, labelwise accuracy, ExactState, trajectory exactness, 20-ply prefix bins.

Ours add accuracy per label group (board, side, castling, ep, counters) and the ply of
the first wrong state per game. A non-finite loss (the diagonal SLiCE really does blow
up out of distribution) is recorded as inf, never raised.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from methodkit.core.progress import ProgressCallback, silent
from methodkit.tools.chess_wm import spec
from methodkit.tools.chess_wm.data import GameSet

BIN_WIDTH = 20


@dataclass
class GameEval:
    summary: dict
    per_game: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"summary": self.summary, "per_game": self.per_game}


def evaluate_games(model, games: GameSet, *, batch_size: int = 64, device: str = "cpu", per_game: bool = False,
                   progress: ProgressCallback = silent) -> GameEval:
    import torch

    from methodkit.tools.chess_wm.models import label_nll, predict_labels

    n_steps = 0
    nll_sum = 0.0
    correct_labels = np.zeros(spec.N_LABELS, dtype=np.int64)
    exact_steps = 0
    exact_games = 0
    bins_exact: dict[int, list[int]] = {}
    records = []
    first_errors = []
    was_training = model.training
    model.eval()
    order = np.argsort(-games.plies, kind="stable")  # similar lengths together: less padding
    with torch.no_grad():
        for start in range(0, len(games), batch_size):
            from methodkit.tools.chess_wm.training import collate

            idx = order[start : start + batch_size]
            tokens, states, mask = collate(games, idx, device)
            logits = model(tokens)
            nll = label_nll(logits, states)  # (B, T, 75)
            labels, _ = predict_labels(logits)
            valid = mask.bool()
            nll_sum += float((nll.mean(-1) * mask).sum())
            right = (labels == states) & valid[..., None]
            correct_labels += right.sum((0, 1)).cpu().numpy()
            exact = right.all(-1) & valid
            n_steps += int(valid.sum())
            exact_steps += int(exact.sum())
            exact_np, valid_np, right_np = exact.cpu().numpy(), valid.cpu().numpy(), right.cpu().numpy()
            for row, game in enumerate(idx):
                length = int(valid_np[row].sum())
                ex = exact_np[row, :length]
                wrong = np.flatnonzero(~ex)
                first = int(wrong[0]) if wrong.size else None
                exact_games += first is None
                first_errors.append(first)
                for b in range(0, length, BIN_WIDTH):
                    acc = bins_exact.setdefault(b, [0, 0, 0])
                    acc[0] += int(ex[b : b + BIN_WIDTH].sum())
                    acc[1] += int(min(BIN_WIDTH, length - b))
                    acc[2] += int(right_np[row, b : b + BIN_WIDTH].sum())
                if per_game:
                    rec = {"game_id": str(games.game_id[game]), "plies": length - 1, "first_wrong_ply": first}
                    if first is not None:
                        rec["wrong_labels"] = [int(j) for j in np.flatnonzero(~right_np[row, first])]
                    records.append((int(game), rec))
            progress("eval", min(start + batch_size, len(games)), len(games))
    if was_training:
        model.train()
    loss = nll_sum / max(n_steps, 1)
    summary = {
        "games": len(games),
        "steps": n_steps,
        "loss": loss if math.isfinite(loss) else math.inf,
        "label_acc": float(correct_labels.sum() / max(n_steps * spec.N_LABELS, 1)),
        "exact_state": exact_steps / max(n_steps, 1),
        "trajectory_exact": exact_games / max(len(games), 1),
        "groups": {name: float(correct_labels[list(r)].sum() / max(n_steps * len(r), 1)) for name, r in spec.GROUPS.items()},
        "first_error_ply_median": _median([f for f in first_errors if f is not None]),
        "prefix_bins": [
            {"plies": f"{b}-{b + BIN_WIDTH - 1}", "exact_state": v[0] / v[1], "label_acc": v[2] / (v[1] * spec.N_LABELS),
             "steps": v[1]}
            for b, v in sorted(bins_exact.items())
        ],
    }
    records.sort(key=lambda pair: pair[0])
    return GameEval(summary, [rec for _, rec in records])


def _median(values):
    return float(np.median(values)) if values else None

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


def evaluate_games(
    model,
    games: GameSet,
    *,
    batch_size: int = 64,
    device: str = "cpu",
    per_game: bool = False,
    progress: ProgressCallback = silent,
) -> GameEval:
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
        "groups": {
            name: float(correct_labels[list(r)].sum() / max(n_steps * len(r), 1)) for name, r in spec.GROUPS.items()
        },
        "first_error_ply_median": _median([f for f in first_errors if f is not None]),
        "prefix_bins": [
            {
                "plies": f"{b}-{b + BIN_WIDTH - 1}",
                "exact_state": v[0] / v[1],
                "label_acc": v[2] / (v[1] * spec.N_LABELS),
                "steps": v[1],
            }
            for b, v in sorted(bins_exact.items())
        ],
    }
    records.sort(key=lambda pair: pair[0])
    return GameEval(summary, [rec for _, rec in records])


def _median(values):
    return float(np.median(values)) if values else None


def parse_named(items) -> list[tuple[str, str]]:
    """NAME=DIR arguments -> [(name, dir)]; a bare DIR is named after its folder."""
    from pathlib import Path

    from methodkit.core.errors import UsageError

    out = []
    for item in items:
        name, sep, path = item.partition("=")
        if not sep:
            name, path = Path(item).name or item, item
        if not name or not path:
            raise UsageError(f"data set argument {item!r} must be NAME=DIR")
        if any(name == seen for seen, _ in out):
            raise UsageError(f"data set name {name!r} is given twice; give each NAME=DIR a different NAME")
        out.append((name, path))
    return out


def evaluate_many(
    checkpoints,
    datasets,
    *,
    out_dir=None,
    per_game_path=None,
    max_plies=None,
    batch_size=64,
    kernel=None,
    device="cpu",
    force=False,
    progress: ProgressCallback = silent,
):
    """Every checkpoint on every named data set -> a summary table (and metrics.json, summary.tsv, per-game JSONL)."""
    from pathlib import Path

    import pandas as pd

    from methodkit.core import io
    from methodkit.core.errors import UsageError
    from methodkit.tools.chess_wm.data import load_dataset, require_same_spec
    from methodkit.tools.chess_wm.training import load_model

    named = parse_named(datasets)
    if out_dir is not None:
        folder = Path(out_dir)
        if not folder.parent.is_dir():
            raise UsageError(f"{folder}: folder {folder.parent} does not exist")
        for name in ("metrics.json", "summary.tsv"):
            if (folder / name).exists() and not force:
                raise UsageError(f"{folder / name}: already exists; pass --force to overwrite")
    if per_game_path and Path(per_game_path).exists() and not force:
        raise UsageError(f"{per_game_path}: already exists; pass --force to overwrite")
    data = {name: load_dataset(path).truncate(max_plies) for name, path in named}
    models = []
    for path in checkpoints:
        model, cfg, data_spec = load_model(path, device=device, kernel=kernel)
        for name, games in data.items():
            require_same_spec(data_spec, games.spec, str(path), f"data set '{name}'")
        models.append((str(path), model, cfg))
    rows, metrics, per_game = [], [], []
    total = len(models) * len(data)
    done = 0
    for path, model, cfg in models:
        for name, games in data.items():
            result = evaluate_games(model, games, batch_size=batch_size, device=device, per_game=bool(per_game_path))
            s = result.summary
            rows.append(
                {
                    "checkpoint": path,
                    "arch": cfg.arch,
                    "size": cfg.size,
                    "dataset": name,
                    "games": s["games"],
                    "loss": s["loss"],
                    "label_acc": s["label_acc"],
                    "exact_state": s["exact_state"],
                    "trajectory_exact": s["trajectory_exact"],
                    **{f"acc_{k}": v for k, v in s["groups"].items()},
                    "first_error_ply_median": s["first_error_ply_median"],
                }
            )
            metrics.append({"checkpoint": path, "arch": cfg.arch, "size": cfg.size, "dataset": name, **s})
            per_game += [{"checkpoint": path, "dataset": name, **rec} for rec in result.per_game]
            done += 1
            progress("eval", done, total)
    frame = pd.DataFrame(rows)
    if out_dir is not None:
        folder = Path(out_dir)
        folder.mkdir(exist_ok=True)
        io.write_json(metrics, folder / "metrics.json", force=True, indent=1)
        io.write_table(frame, folder / "summary.tsv", "tsv", force=True)
    if per_game_path:
        with io.atomic_write(per_game_path, force=force) as handle:
            for rec in per_game:
                handle.write((io.dumps_json(rec) + "\n").encode())
    return frame

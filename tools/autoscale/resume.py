"""Round checkpoints of the closed loop: `run --resume` continues after the last completed round.

After every round the loop's whole state (weights, eta, val failures, history, selections, the RNG state,
the best and the last planner weights) goes into DIR/checkpoints/round-NNN.safetensors + its JSON sidecar
(core.checkpoint, written atomically). A resumed run loads the newest round whose files both read back and
whose config matches, so its final result equals an uninterrupted run with the same seed."""

from __future__ import annotations

from pathlib import Path

import numpy as np

SUBDIR = "checkpoints"


def _spec(cfg_dict: dict, seed: int) -> dict:
    return {"model": "autoscale-loop-state", "seed": seed, "config": cfg_dict}


def save(folder, r: int, state: dict, best_state: dict, last_state: dict | None, cfg_dict: dict, seed: int) -> None:
    from methodkit.core import checkpoint

    tensors = {f"best.{k}": v for k, v in best_state.items()}
    if last_state is not None:
        tensors.update({f"last.{k}": v for k, v in last_state.items()})
    path = Path(folder) / SUBDIR / f"round-{r:03d}.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    checkpoint.save(path, tensors, config=cfg_dict, spec=_spec(cfg_dict, seed), extra={"state": state})


def load_latest(folder, cfg_dict: dict, seed: int, log=None):
    """(state, best_state, last_state) of the newest readable round checkpoint, or None."""
    from methodkit.core import checkpoint
    from methodkit.core.errors import DataError

    paths = sorted((Path(folder) / SUBDIR).glob("round-*.safetensors"), reverse=True)
    for path in paths:
        try:
            tensors, side = checkpoint.load(path, expected_spec=_spec(cfg_dict, seed))
        except DataError as exc:
            if log:
                log(f"resume: skipping {path.name} ({exc})")
            continue
        best = {k[5:]: v for k, v in tensors.items() if k.startswith("best.")}
        last = {k[5:]: v for k, v in tensors.items() if k.startswith("last.")} or None
        return side["state"], best, last
    return None


def pack(rng, w, eta, prev_fail, best_j, best_r, decreases, history, mixtures, selected, next_round) -> dict:
    return {"rng": rng.bit_generator.state, "w": np.asarray(w).tolist(), "eta": eta,
            "prev_fail": None if prev_fail is None else np.asarray(prev_fail).astype(int).tolist(),
            "best_j": best_j, "best_r": best_r, "decreases": decreases, "history": history, "mixtures": mixtures,
            "selected": [np.asarray(s).tolist() for s in selected], "next_round": next_round}  # fmt: skip


def unpack(state: dict, rng):
    rng.bit_generator.state = state["rng"]
    prev = state["prev_fail"]
    return (np.asarray(state["w"]), state["eta"], None if prev is None else np.asarray(prev, dtype=bool),
            state["best_j"], state["best_r"], state["decreases"], state["history"], state["mixtures"],
            [np.asarray(s, dtype=np.int64) for s in state["selected"]], state["next_round"])  # fmt: skip

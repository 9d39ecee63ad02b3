"""Backbone training on a data set minus an exclusion list (the original model and the exact retrain)."""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import asdict, dataclass

import numpy as np

from methodkit.core.errors import DataError, RunFailure, UsageError
from methodkit.tools.cure.data import Dataset


@dataclass
class TrainResult:
    algo: str
    steps: int
    seconds: float
    transitions: int
    trajectories: int
    excluded: int
    final_critic_loss: float
    final_actor_loss: float
    q_mean: float

    def to_dict(self) -> dict:
        return asdict(self)


def ids_sha256(ids) -> str:
    return hashlib.sha256(",".join(str(int(i)) for i in sorted(ids)).encode()).hexdigest()


def sample_rows(rng: np.random.Generator, rows: np.ndarray, n: int) -> np.ndarray:
    return rows[rng.integers(0, len(rows), n)]


def check_finite(loss: float, q: float, where: str) -> None:
    if not np.isfinite(loss) or abs(q) > 1e6:
        raise RunFailure(f"{where}: training diverged (loss {loss}, |Q| {abs(q):.3g}); lower the learning rate")


def train(
    ds: Dataset,
    algo: str,
    *,
    exclude=(),
    steps: int = 50000,
    hidden: int = 256,
    batch_size: int = 256,
    seed: int = 0,
    progress=None,
    checkpoint: str | None = None,
    checkpoint_every: int = 0,
    resume: bool = False,
):
    """Train `algo` on the training trajectories of ds minus `exclude`; returns (agent, info, result).

    With `checkpoint` (a path), the state is saved there every `checkpoint_every` steps and when a
    SIGINT/SIGTERM stops the run (between two steps); `resume` continues from it, bitwise."""
    from methodkit.core.step_signals import stop_between_steps
    from methodkit.tools.cure import resume as ckpt
    from methodkit.tools.cure.backbones import batch, make_agent

    progress = progress or (lambda *a: None)
    exclude = np.asarray(sorted(set(int(i) for i in exclude)), dtype=np.int64)
    bad = exclude[(exclude < 0) | (exclude >= ds.n_traj)]
    if len(bad):
        raise DataError(f"--exclude: ids not in {ds.name}: {', '.join(map(str, bad[:8]))}")
    keep = np.setdiff1d(ds.train_ids(), exclude)
    if len(keep) == 0:
        raise DataError("--exclude removes every training trajectory")
    rows = ds.rows_of(keep)
    agent = make_agent(algo, ds.meta["obs_dim"], ds.meta["act_dim"], hidden=hidden, seed=seed)
    agent.set_normaliser(ds.arrays["observations"][rows])
    rng = np.random.default_rng([seed, 11])
    logs = {"critic_loss": np.nan, "actor_loss": np.nan}
    spec = {"dataset_sha256": ds.sha256, "excluded_sha256": ids_sha256(exclude), "algo": algo, "hidden": hidden,
            "batch_size": batch_size, "seed": seed, "steps": steps}  # fmt: skip
    first, before = 0, 0.0
    if resume:
        if checkpoint is None or not os.path.exists(checkpoint):
            raise UsageError(f"--resume: no checkpoint {checkpoint} to continue from")
        first, logs, before = ckpt.restore(checkpoint, agent, rng, spec)
    start = time.perf_counter()

    def save(done: int) -> None:
        ckpt.save(checkpoint, agent, step=done, rng=rng, logs=logs, seconds=before + time.perf_counter() - start,
                  spec=spec)  # fmt: skip

    with stop_between_steps() as stop:
        for step in range(first, steps):
            out = agent.update(batch(ds.arrays, sample_rows(rng, rows, batch_size), agent))
            logs.update(out)
            if step % 200 == 0 or step == steps - 1:
                check_finite(logs["critic_loss"], 0.0, "train")
                progress(f"train {algo}", step + 1, steps)
            done = step + 1
            due = checkpoint_every and done % checkpoint_every == 0 and done < steps
            if checkpoint is not None and (due or stop.requested):
                save(done)
            stop.raise_if_requested()
    seconds = before + time.perf_counter() - start
    q_mean = float(q_on(agent, ds, rows[:: max(1, len(rows) // 4096)]).mean())
    info = {
        "steps": steps,
        "batch_size": batch_size,
        "seed": seed,
        "dataset_sha256": ds.sha256,
        "env": ds.meta["env"],
        "excluded_sha256": ids_sha256(exclude),
        "excluded": len(exclude),
        "parent_sha256": None,
        "method": "train",
        "seconds": round(seconds, 3),
        "obs_normalisation": "mean/std of the training transitions",
        "reward_scaling": "none",
    }
    result = TrainResult(algo, steps, round(seconds, 3), len(rows), len(keep), len(exclude),
                         float(logs["critic_loss"]), float(logs["actor_loss"]), q_mean)  # fmt: skip
    return agent, info, result


def q_on(agent, ds: Dataset, rows: np.ndarray) -> np.ndarray:
    import torch

    from methodkit.tools.cure.backbones import batch

    with torch.no_grad():
        b = batch(ds.arrays, rows, agent)
        return agent.q(b["s"], b["a"]).numpy()

"""`forget`: steps A and B once, then step C's loop, checkpointed and resumable.

The loop's checkpoint (MODEL.partial.safetensors + .partial.json, written by tools/cure/resume.py)
holds everything the remaining steps depend on: the unlearning agent with its Adam states and
torch generator, the numpy generator of the batch rows, the loop's step, the retained baseline b(s)
and margin, the trajectory scores (cosines, gates, overlap; rescored ones too), the divergence
snapshot, lambda_s after a rollback, and the warnings so far. A resumed run skips steps A and B
and ends with exactly the tensors of an uninterrupted run (tests/cure/test_forget_resume.py).
SIGINT/SIGTERM stop the loop between two steps (core.step_signals) after saving.
"""

from __future__ import annotations

import copy
import hashlib
import os
import time
from dataclasses import asdict

import numpy as np
import torch

from methodkit.core.errors import RunFailure, UsageError
from methodkit.tools.cure.backbones import Agent, batch
from methodkit.tools.cure.data import Dataset
from methodkit.tools.cure.unlearn import (
    Baseline,
    ForgetConfig,
    ForgetResult,
    FrozenTerms,
    Scores,
    Unlearner,
    _restore,
    _snapshot,
    fit_baseline,
    score,
    support_overlap,
)

NOT_IN_SPEC = ("device",)  # where the 1-NN runs does not change the unlearned model


def agent_sha256(agent: Agent) -> str:
    """A fingerprint of an agent's tensors (the parent model of a forget run)."""
    h = hashlib.sha256()
    for key, value in sorted(agent.state_dict().items()):
        h.update(key.encode())
        h.update(value.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def forget_spec(agent0: Agent, ds: Dataset, forget_ids, exclude, cfg: ForgetConfig, n_steps: int) -> dict:
    """What a forget checkpoint must share with the run that resumes it."""
    from methodkit.tools.cure.train import ids_sha256

    settings = {k: v for k, v in asdict(cfg).items() if k not in NOT_IN_SPEC and k != "steps"}
    return {"verb": "forget", "dataset_sha256": ds.sha256, "model_sha256": agent_sha256(agent0),
            "forget_sha256": ids_sha256(forget_ids), "excluded_sha256": ids_sha256(exclude), "steps": n_steps,
            **settings}  # fmt: skip


def _save_state(path, agent, rng, spec, *, step, seconds, base, margin, scores, snap, un, rollbacks, warnings):
    from methodkit.tools.cure.resume import _prefixed

    tensors = _prefixed("snap.", snap["state"])
    extra = {"margin": margin, "lambda_s": un.lambda_s, "rollbacks": rollbacks, "warnings": list(warnings),
             "snap_steps": snap["steps"], "scores": None}  # fmt: skip
    if base is not None:
        tensors.update(_prefixed("base.", base.net.state_dict()))
    if scores is not None:
        for name in ("traj", "cosine", "gate", "overlap"):
            tensors[f"scores.{name}"] = torch.as_tensor(np.asarray(getattr(scores, name)))
        extra["scores"] = {"role": scores.role.tolist(), "c0": scores.c0, "temp": scores.temp,
                           "warnings": list(scores.warnings)}  # fmt: skip
    from methodkit.tools.cure import resume

    resume.save(path, agent, step=step, rng=rng, logs={}, seconds=seconds, spec=spec, tensors=tensors, extra=extra)


def _load_state(path, agent, agent0, rng, spec, cfg):
    """(step, seconds, base, margin, scores, snap, lambda_s, rollbacks, warnings) of a checkpoint."""
    from methodkit.tools.cure import resume

    tensors, side = resume.load_into(path, agent, rng, spec)
    base = None
    if any(k.startswith("base.") for k in tensors):
        base = Baseline(cfg.baseline, agent0)
        base.net.load_state_dict(resume._unprefixed("base.", tensors))
        base.requires_grad_(False)
    scores = None
    if side["scores"] is not None:
        doc = side["scores"]
        arrays = {n: tensors[f"scores.{n}"].numpy().copy() for n in ("traj", "cosine", "gate", "overlap")}
        scores = Scores(arrays["traj"], np.asarray(doc["role"]), arrays["cosine"], arrays["gate"],
                        arrays["overlap"], doc["c0"], doc["temp"], list(doc["warnings"]))  # fmt: skip
    snap = {"state": resume._unprefixed("snap.", tensors), "steps": int(side["snap_steps"])}
    return (int(side["step"]), float(side["seconds"]), base, float(side["margin"]), scores, snap,
            float(side["lambda_s"]), int(side["rollbacks"]), list(side["warnings"]))  # fmt: skip


def forget(
    agent0: Agent,
    ds: Dataset,
    forget_ids,
    cfg: ForgetConfig,
    *,
    exclude=(),
    original_steps: int = 0,
    progress=None,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 0,
    resume: bool = False,
) -> tuple[Agent, Scores | None, ForgetResult]:
    """Unlearn `forget_ids` from agent0 with cfg.method; returns (new agent, scores or None, result).

    With `checkpoint` (a path), the loop's state is saved there after steps A and B, every
    `checkpoint_every` steps and when SIGINT/SIGTERM stops the run between two steps; `resume`
    continues from it with the same result as an uninterrupted run."""
    from methodkit.core.step_signals import stop_between_steps
    from methodkit.tools.cure.train import train

    progress = progress or (lambda *a: None)
    if cfg.device == "cuda":
        from methodkit.core.backend import resolve_device

        resolve_device("cuda")  # no CuPy or no GPU: RunFailure (exit 1) before any work
    started = time.perf_counter()
    forget_ids = np.asarray(forget_ids, dtype=np.int64)
    retained = np.setdiff1d(np.setdiff1d(ds.train_ids(), forget_ids), np.asarray(list(exclude), dtype=np.int64))
    warnings: list = []
    n_steps = cfg.steps if cfg.steps is not None else max(1, int(round(0.05 * original_steps)))
    if resume and (checkpoint is None or not os.path.exists(checkpoint)):
        raise UsageError(f"--resume: no checkpoint {checkpoint} to continue from")
    if cfg.method == "retrain":
        agent, _, res = train(ds, agent0.algo, exclude=np.union1d(forget_ids, list(exclude)), steps=original_steps,
                              hidden=agent0.hidden, seed=cfg.seed, progress=progress,
                              checkpoint=None if checkpoint is None else str(checkpoint),
                              checkpoint_every=checkpoint_every, resume=resume)  # fmt: skip
        seconds = res.seconds if resume else time.perf_counter() - started
        return agent, None, ForgetResult("retrain", agent0.algo, original_steps, round(seconds, 3), len(forget_ids),
                                         len(retained), 0.0, 0, None, None, None, None, warnings)  # fmt: skip
    spec = forget_spec(agent0, ds, forget_ids, exclude, cfg, n_steps)
    torch.manual_seed(cfg.seed)
    agent0.requires_grad_(True)
    agent = copy.deepcopy(agent0)
    agent.gen = torch.Generator().manual_seed(cfg.seed)
    agent.make_optimisers()
    agent0.requires_grad_(False)
    rows_r, rows_f = ds.rows_of(retained), ds.rows_of(forget_ids)
    rng = np.random.default_rng([cfg.seed, 41])
    scores = base = None
    margin, before, step, rollbacks = 0.0, 0.0, 0, 0
    lambda_s = cfg.lambda_s
    if resume:
        step, before, base, margin, scores, snap, lambda_s, rollbacks, warnings = _load_state(
            checkpoint, agent, agent0, rng, spec, cfg
        )
    elif cfg.method.startswith("cure"):
        base, margin = fit_baseline(agent0, ds, rows_r, cfg, progress)
        if cfg.method != "cure-uniform":
            agent0.requires_grad_(True)
            scores = score(agent0, ds, forget_ids, retained, cfg, progress)
            agent0.requires_grad_(False)
            scores.overlap[scores.role == "forget"] = support_overlap(agent0, ds, forget_ids, retained, cfg)
            warnings += scores.warnings
    w_rows = np.ones(len(ds.arrays["rewards"]), np.float32)
    if scores is not None:
        _apply_gates(w_rows, ds, scores)
    rewards = None
    if cfg.method == "random-reward":
        rng_r = np.random.default_rng([cfg.seed, 37])
        r = ds.arrays["rewards"]
        rewards = r.copy()
        rewards[rows_f] = rng_r.normal(r.mean(), r.std(), len(rows_f)).astype(np.float32)
    if cfg.method == "trajdeleter":
        rewards = ds.arrays["rewards"].copy()
        rewards[rows_f] = -rewards[rows_f]
    frozen = None  # the frozen networks' terms, read by every step's batches
    if cfg.method.startswith("cure") or cfg.method == "trajdeleter":
        frozen = FrozenTerms(agent, agent0, base, ds.arrays, rows_r, rows_f)
    un = Unlearner(agent, agent0, cfg, base, margin, frozen)
    un.lambda_s = lambda_s
    if not resume:
        snap = _snapshot(agent)

    def save(done: int) -> None:
        _save_state(checkpoint, agent, rng, spec, step=done, seconds=before + time.perf_counter() - started,
                    base=base, margin=margin, scores=scores, snap=snap, un=un, rollbacks=rollbacks,
                    warnings=warnings)  # fmt: skip

    if checkpoint is not None and not resume:
        save(0)  # steps A and B are not redone by a resumed run
    with stop_between_steps() as stop:
        while step < n_steps:
            if cfg.rescore_every and scores is not None and step and step % cfg.rescore_every == 0:
                agent.requires_grad_(True)
                scores = score(agent, ds, forget_ids, retained, cfg)
                _apply_gates(w_rows, ds, scores)
            phase = int(cfg.method == "trajdeleter" and step >= n_steps // 2)
            br_rows = rows_r[rng.integers(0, len(rows_r), cfg.batch_size)]
            bf_rows = rows_f[rng.integers(0, len(rows_f), cfg.batch_size)]
            br = batch(ds.arrays, br_rows, agent, rewards, with_rows=True)
            bf = batch(ds.arrays, bf_rows, agent, rewards, with_rows=True)
            loss, qmax = un.step(br, bf, torch.as_tensor(w_rows[bf_rows]), phase)
            if not np.isfinite(loss) or qmax > 1e6:
                if rollbacks:
                    raise RunFailure(f"forget --method {cfg.method}: diverged again after halving lambda_s "
                                     f"(loss {loss:.3g}, |Q| {qmax:.3g}); the input model is untouched")  # fmt: skip
                rollbacks += 1
                un.lambda_s /= 2
                _restore(agent, snap)
                step = snap["steps"] - agent0.steps
                warnings.append(f"diverged at step {step}: rolled back and halved lambda_s to {un.lambda_s}")
                continue
            step += 1
            if step % 50 == 0:
                snap = _snapshot(agent)
            if step % 25 == 0 or step == n_steps:
                progress(f"forget {cfg.method}", step, n_steps)
            due = checkpoint_every and step % checkpoint_every == 0 and step < n_steps
            if checkpoint is not None and (due or stop.requested):
                save(step)
            stop.raise_if_requested()
    seconds = before + time.perf_counter() - started
    hist = means = None
    if scores is not None:
        _, _, wf = scores.of("forget")
        hist = np.histogram(wf, bins=10, range=(0, 1))[0].tolist()
        means = gate_means(ds, scores)
    res = ForgetResult(cfg.method, agent.algo, n_steps, round(seconds, 3), len(forget_ids), len(retained),
                       un.lambda_s, rollbacks, None if scores is None else scores.c0,
                       None if scores is None else scores.temp, hist, means, warnings)  # fmt: skip
    return agent, scores, res


def _apply_gates(w_rows: np.ndarray, ds: Dataset, scores: Scores) -> None:
    for t, w in zip(*scores.of("forget")[::2]):
        w_rows[ds.starts[t] : ds.starts[t + 1]] = w


def gate_means(ds: Dataset, scores: Scores) -> dict:
    """Mean gate per group: forget trajectories by contributor and styled/plain, held-out by contributor."""
    names = ds.meta["contributors"]
    contrib = ds.traj_contributor()
    styled = ds.arrays["traj_styled"]
    out: dict = {}
    for role in ("forget", "calibration", "heldout"):
        m = scores.role == role
        for t_group in sorted(set(contrib[scores.traj[m]].tolist())):
            sel = m & (contrib[scores.traj] == t_group)
            key = f"{role}:{names[t_group]}"
            out[key] = float(scores.gate[sel].mean())
            if role == "forget" and styled[scores.traj[sel]].any():
                for flag, label in ((True, "styled"), (False, "plain")):
                    s2 = sel & (styled[scores.traj] == flag)
                    if s2.any():
                        out[f"{key}:{label}"] = float(scores.gate[s2].mean())
    return out

"""Distillation: L = L_KD + lambda_path L_path + lambda_node L_node, trained through core.train.

The student is wrapped with its FitNets-style adapter W_a (R^{d_S} -> R^{d_T}); its transcoders are
co-trained online on its detached MLP inputs/outputs with their own optimiser, one step per batch,
before the MCD terms of that batch are computed. Teacher pathways are fixed targets, cached per
(training window, target slot) and saved content-addressed; student pathways are re-extracted each
batch (selection without gradient, weights with).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from methodkit.core.progress import silent
from methodkit.core.train import TrainConfig, train
from methodkit.tools.mcd import graph as G
from methodkit.tools.mcd import kd, losses, models
from methodkit.tools.mcd import transcoder as T


@dataclass
class DistillConfig:
    kd: str = "fkl"
    tau: float = 1.0
    lam_path: float = 0.1
    lam_node: float = 0.1
    n_targets: int = 8  # MCD target positions per sequence
    mcd_warmup: int = 0  # KD-only steps before the MCD terms switch on (student transcoders settle)
    eps: float = 0.05
    iters: int = 50
    unbalanced: float | None = None
    on_policy: float = 0.0
    node_scope: str = "all"  # all | graph
    fgw: float | None = None  # fused Gromov-Wasserstein pathway matching with this alpha (ablation)
    tc_lr: float = 1e-3
    graph: G.GraphSettings = field(default_factory=lambda: G.GraphSettings(max_nodes=16))
    cost: G.CostWeights = field(default_factory=G.CostWeights)

    @property
    def uses_mcd(self) -> bool:
        return self.lam_path > 0 or self.lam_node > 0

    def to_dict(self) -> dict:
        return asdict(self)


class StudentBundle(nn.Module):
    """What the optimiser updates: the student and its adapter into the teacher's residual width."""

    def __init__(self, student, d_teacher: int):
        super().__init__()
        self.student = student
        self.adapter = nn.Linear(student.cfg.d_model, d_teacher, bias=False)
        nn.init.normal_(self.adapter.weight, std=1.0 / math.sqrt(student.cfg.d_model))


def target_positions(items: np.ndarray, ctx: int, k: int, seed: int) -> torch.Tensor:
    """K target positions per window, a function of (seed, window) only (so teacher graphs cache)."""
    out = np.empty((len(items), k), dtype=np.int64)
    for r, item in enumerate(items):
        rng = np.random.default_rng(np.random.SeedSequence([seed, 101, int(item)]))
        out[r] = np.sort(rng.choice(np.arange(1, ctx), size=min(k, ctx - 1), replace=False))
    return torch.from_numpy(out)


FIELDS = ("psi", "depth", "dpos", "src", "weight", "empty", "layer", "pos", "latent", "kept")


class TeacherGraphCache:
    """Teacher pathway descriptors per (window, slot), content-addressed by teacher, transcoders, data, settings."""

    def __init__(self, key: str, folder: str | os.PathLike | None):
        self.key = key
        self.path = Path(folder) / f"teacher-graphs-{key[:16]}.npz" if folder else None
        self.items: dict[int, dict] = {}
        self.loaded = 0
        if self.path is not None and self.path.is_file():
            data = np.load(self.path, allow_pickle=False)
            if str(data["key"]) == key and set(FIELDS) <= set(data.files):  # stale files are never reused
                for r, item in enumerate(data["item"]):
                    self.items[int(item)] = {n: data[n][r] for n in FIELDS}
                self.loaded = len(self.items)

    def get(self, items, compute):
        """Pathway descriptors and feature nodes (window-major) of the teacher graphs of `items`."""
        missing = [int(i) for i in items if int(i) not in self.items]
        if missing:
            desc, nodes = compute(np.array(missing))  # window-major: K slots of each window in a row
            k = len(desc.empty) // len(missing)
            for r, item in enumerate(missing):
                part = slice(r * k, (r + 1) * k)
                self.items[item] = {
                    "psi": desc.psi[part].numpy().astype(np.float16), "depth": desc.depth[part].numpy(),
                    "dpos": desc.dpos[part].numpy(), "src": desc.src[part].numpy(),
                    "weight": desc.weight[part].numpy(), "empty": np.asarray(desc.empty[part]),
                    **{n: v[part] for n, v in nodes.items()},
                }  # fmt: skip
        rows = [self.items[int(i)] for i in items]
        nodes = {n: np.concatenate([r[n] for r in rows]) for n in ("layer", "pos", "latent", "kept")}
        return nodes, G.PathDescriptors(
            torch.from_numpy(np.concatenate([r["psi"] for r in rows]).astype(np.float32)),
            torch.from_numpy(np.concatenate([r["depth"] for r in rows])),
            torch.from_numpy(np.concatenate([r["dpos"] for r in rows])),
            torch.from_numpy(np.concatenate([r["src"] for r in rows])),
            torch.from_numpy(np.concatenate([r["weight"] for r in rows])).float(),
            np.concatenate([r["empty"] for r in rows]),
        )

    def save(self) -> None:
        if self.path is None or not self.items:
            return
        from methodkit.core.io import write_arrays

        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = sorted(self.items)
        arrays = {n: np.stack([self.items[k][n] for k in keys]) for n in FIELDS}
        write_arrays(self.path, {"key": np.array(self.key), "item": np.array(keys), **arrays}, force=True)


def cache_key(teacher, t_tcs, windows: models.Windows, cfg: DistillConfig, seed: int) -> str:
    digest = hashlib.sha256(models.weights_sha(teacher).encode())
    for tc in t_tcs.layers:
        digest.update(tc.w_dec.detach().numpy().tobytes())
        digest.update(tc.w_enc.detach().numpy().tobytes())
    digest.update(windows.sha().encode())
    digest.update(json.dumps([asdict(cfg.graph), cfg.n_targets, seed], sort_keys=True).encode())
    return digest.hexdigest()


def _window_major(x, B: int, K: int):
    """Graphs come slot-major (K, B); the cache stores window-major (B, K)."""
    return x.reshape(K, B, *x.shape[1:]).swapaxes(0, 1).reshape(B * K, *x.shape[1:])


def _graph_slots(desc: G.PathDescriptors, B: int, K: int) -> G.PathDescriptors:
    def re(x):
        return _window_major(x, B, K)

    return G.PathDescriptors(re(desc.psi), re(desc.depth), re(desc.dpos), re(desc.src), re(desc.weight),
                             re(desc.empty))  # fmt: skip


@dataclass
class DistillResult:
    steps: int
    final_loss: float
    seconds: float
    mcd_batches: int
    kd_only_fallbacks: int
    empty_targets: int
    unconverged_ot: int
    teacher_graphs_reused: int
    history: list

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "history"}


def distill(teacher, t_tcs, student, windows: models.Windows, cfg: DistillConfig, train_cfg: TrainConfig, *,
            subset, run_dir=None, cache_dir=None, lmap=None, spec=None, progress=silent, resume=False):  # fmt: skip
    torch.manual_seed(train_cfg.seed)
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    bundle = StudentBundle(student, teacher.cfg.d_model)
    s_tcs = T.for_model(student, k=t_tcs[0].cfg.k)
    tc_opt = torch.optim.Adam(s_tcs.parameters(), lr=cfg.tc_lr)
    lmap = lmap or losses.layer_map(student.cfg.n_layers, teacher.cfg.n_layers)
    cache = TeacherGraphCache(cache_key(teacher, t_tcs, windows, cfg, train_cfg.seed), cache_dir) if cfg.uses_mcd else None
    stats = {"mcd_batches": 0, "fallbacks": 0, "empty": 0, "unconverged": 0}
    running: dict[str, list] = {}
    step = {"n": 0}
    ctx = windows.ctx
    initialised = {"done": False}

    def note(name, value):
        running.setdefault(name, []).append(float(value))

    def teacher_desc(items):
        x, y = windows.batch(items)
        pos = target_positions(items, ctx, cfg.n_targets, train_cfg.seed)
        tgt = y.gather(1, pos)
        with torch.no_grad():
            desc, graphs, _ = G.descriptors_for(teacher, t_tcs, x, pos, tgt, cfg.graph, subset)
        B, K = pos.shape
        nodes = {n: _window_major(v, B, K) for n, v in G.feature_nodes(graphs).items()}
        return _graph_slots(desc, B, K), nodes

    def loss_fn(b: StudentBundle, idx):
        from methodkit.core.nn.transformer import trace

        x, y = windows.batch(idx)
        if cfg.on_policy > 0 and np.random.default_rng([train_cfg.seed, step["n"], 5]).random() < cfg.on_policy:
            x, y = _student_samples(b.student, teacher, x, train_cfg.seed + step["n"])
        with torch.no_grad():
            t_hidden, t_taps = trace(teacher, x)
            t_logits = teacher.logits(t_hidden)
        s_hidden, s_taps = trace(b.student, x)
        s_logits = b.student.logits(s_hidden)
        loss = kd.kd_loss(cfg.kd, s_logits, t_logits, y, cfg.tau)
        note("kd", loss.detach())
        # student transcoders: one step on the detached MLP input/output of this batch
        if not initialised["done"]:
            for tc, tap in zip(s_tcs.layers, s_taps):
                T.init_from_data(tc, tap["mlp_in"].detach(), tap["mlp_out"].detach())
            initialised["done"] = True
        tc_opt.zero_grad(set_to_none=True)
        s_tcs.train()
        tc_loss = sum(tc.loss(tap["mlp_in"].detach(), tap["mlp_out"].detach()) for tc, tap in zip(s_tcs.layers, s_taps))
        tc_loss.backward()
        tc_opt.step()
        note("student_tc_mse", tc_loss.detach())
        step["n"] += 1
        if not cfg.uses_mcd or step["n"] <= cfg.mcd_warmup:
            return loss
        positions = target_positions(np.asarray(idx), ctx, cfg.n_targets, train_cfg.seed)
        targets = y.gather(1, positions)
        s_codes = [_codes(tc, tap["mlp_in"]) for tc, tap in zip(s_tcs.layers, s_taps)]
        mcd = 0.0
        if cfg.lam_path > 0 or (cfg.lam_node > 0 and cfg.node_scope == "graph"):
            t_nodes, t_desc = cache.get(np.asarray(idx), teacher_desc)
        if cfg.lam_path > 0:
            s_desc, _, _ = G.descriptors_for(b.student, s_tcs, x, positions, targets, cfg.graph, subset,
                                             codes=s_codes, differentiable=True)  # fmt: skip
            s_desc = _graph_slots(s_desc, len(idx), positions.shape[1])
            empty = t_desc.empty | s_desc.empty
            stats["empty"] += int(empty.sum())
            if empty.mean() > 0.5:
                stats["fallbacks"] += 1  # most targets have no pathway: this batch is KD-only for the path term
            else:
                value, _, n_bad = losses.path_loss(t_desc, s_desc, ctx, cfg.cost, cfg.eps, cfg.iters, cfg.unbalanced,
                                                      cfg.fgw)  # fmt: skip
                stats["unconverged"] += n_bad
                mcd = mcd + cfg.lam_path * value
                note("path_ot", value.detach())
        if cfg.lam_node > 0:
            with torch.no_grad():
                t_codes = [_codes(tc, tap["mlp_in"]) for tc, tap in zip(t_tcs.layers, t_taps)]
            keep = losses.graph_keep(t_nodes, t_codes, positions, lmap) if cfg.node_scope == "graph" else None
            value, dropped, _ = losses.node_loss(t_codes, t_tcs, s_codes, s_tcs, b.adapter, positions, lmap,
                                                 cfg.eps, cfg.iters, keep=keep)  # fmt: skip
            mcd = mcd + cfg.lam_node * value
            note("node_ot", value.detach())
            if keep is not None:  # teacher mass outside the graph: added to the bound, logged
                note("node_dropped", dropped)
        stats["mcd_batches"] += 1
        return loss + mcd

    columns = ("kd", "student_tc_mse", "path_ot", "node_ot") + (("node_dropped",) if cfg.node_scope == "graph" else ())

    def evaluate(_b):
        row = {k: float(np.mean(running[k])) if running.get(k) else float("nan") for k in columns}
        running.clear()
        return row

    result = train(bundle, loss_fn, len(windows), train_cfg, run_dir=run_dir, spec=spec or {},
                   model_config=student.cfg.to_dict(), evaluate=evaluate, progress=progress, resume=resume)  # fmt: skip
    reused = cache.loaded if cache is not None else 0
    if cache is not None:
        cache.save()
    s_tcs.eval()
    out = DistillResult(result.steps, result.final_loss, result.seconds, stats["mcd_batches"], stats["fallbacks"],
                        stats["empty"], stats["unconverged"], reused, result.history)  # fmt: skip
    return out, bundle, s_tcs, lmap


def _codes(tc: T.Transcoder, mlp_in: torch.Tensor):
    pre = mlp_in @ tc.w_enc.detach().T + tc.b_enc.detach()
    top = torch.topk(pre, tc.cfg.k, dim=-1)
    return torch.relu(top.values), top.indices


@torch.no_grad()
def _student_samples(student, teacher, x, seed):
    """On-policy data (GKD/DistiLLM style): the first half of each window continued by the student
    (sampled at temperature 1); the gold token after the last one is the teacher's greedy choice."""
    half = x.shape[1] // 2
    was = student.training
    student.eval()
    seq = student.generate(x[:, :half], x.shape[1] - half, temperature=1.0, seed=seed)
    student.train(was)
    last = teacher(seq)[:, -1].argmax(-1, keepdim=True)
    return seq, torch.cat([seq[:, 1:], last], 1)

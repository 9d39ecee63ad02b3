"""The Comparative Inference Model: pairs from three sources, a pairwise-plus-calibration MLP, scoring.

f_θ(c, a) ∈ ℝ; p = σ(f) ≈ V(c, a). Loss = Σ_s λ_s · mean_{P_s} w·BCE(σ(f(c,a) − f(c,b)), y)
+ λ_cal · mean_S BCE(σ(f(c,a)), V_sim(c,a)) + weight decay (AdamW's decoupled 1e-4).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np

from methodkit.core.errors import DataError, UsageError
from methodkit.tools.cita import features as ft
from methodkit.tools.cita import judge as jd
from methodkit.tools.cita import simulate
from methodkit.tools.cita.records import canonical

SOURCES = ("B", "S", "L")
SOURCE_CODE = {"B": 0, "S": 1, "L": 2}
TAU_S = 0.05
MIN_DV = 0.02


@dataclass
class PairSet:
    contexts: list
    X: np.ndarray  # [P, F] feature rows of every (context, candidate)
    point: dict  # (context row, k) -> feature row
    pa: np.ndarray
    pb: np.ndarray
    y: np.ndarray
    w: np.ndarray
    src: np.ndarray
    judge_source: list
    cal_points: np.ndarray
    cal_v: np.ndarray
    counts: dict = field(default_factory=dict)

    def frame(self):
        import pandas as pd

        where = {row: ck for ck, row in self.point.items()}
        rows = []
        for i in range(len(self.pa)):
            ca, ka = where[int(self.pa[i])]
            _, kb = where[int(self.pb[i])]
            ctx = self.contexts[ca]
            rows.append(
                {
                    "context_id": ctx["context_id"],
                    "a": canonical(ctx["candidates"][ka]),
                    "b": canonical(ctx["candidates"][kb]),
                    "source": {0: "behavior", 1: "sim", 2: "llm"}[int(self.src[i])],
                    "y": float(self.y[i]),
                    "w": float(self.w[i]),
                    "judge_source": self.judge_source[i],
                }
            )
        return pd.DataFrame(rows)


def _sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


def build_pairs(
    real: list,
    synthetic: list,
    graph,
    embedder,
    sources,
    sim_cfg: simulate.SimConfig,
    endpoint=None,
    max_obs_chars: int = 400,
    strict: bool = False,
    progress=None,
    warn=None,
    checkpoint=None,
    resume: bool = False,
) -> PairSet:
    """Pairs from behaviour (real contexts: logged call ≻ each negative), the simulator (real + synthetic
    contexts: V_sim differences) and the judge (real contexts: logged call vs each negative, order shuffled).
    With `checkpoint` (a path) the simulator values are saved chunk by chunk, and `resume` continues a
    checkpoint of the same job (tools/cita/resume.py); the judge resumes from core/endpoint's cache."""
    from methodkit.tools.cita import resume as rs

    sources = tuple(sources)
    contexts = list(real) + (list(synthetic) if "S" in sources else [])
    n_real = len(real)
    X, where = ft.featurize(contexts, graph, embedder)
    point = {ck: i for i, ck in enumerate(where)}
    pa, pb, ys, ws, src, jsrc = [], [], [], [], [], []
    cal_p, cal_v = [], []

    def add(a, b, y, w, s, j="-"):
        pa.append(a)
        pb.append(b)
        ys.append(y)
        ws.append(w)
        src.append(SOURCE_CODE[s])
        jsrc.append(j)

    if "B" in sources:
        for c in range(n_real):
            for k in range(1, len(contexts[c]["candidates"])):
                add(point[(c, 0)], point[(c, k)], 1.0, 1.0, "B")
    if "S" in sources:
        vals = rs.values(graph, contexts, sim_cfg, checkpoint, resume, progress=progress)
        for c, (mean, std) in enumerate(vals):
            K = len(mean)
            for k in range(K):
                cal_p.append(point[(c, k)])
                cal_v.append(float(mean[k]))
            for a in range(K):
                for b in range(a + 1, K):
                    dv = float(mean[a] - mean[b])
                    if abs(dv) < MIN_DV:
                        continue
                    w = min(1.0, abs(dv) / math.sqrt(std[a] ** 2 + std[b] ** 2 + 1e-6) / 3.0)
                    add(point[(c, a)], point[(c, b)], _sigmoid(dv / TAU_S), w, "S")
    if "L" in sources:
        rng = np.random.default_rng(np.random.SeedSequence([sim_cfg.seed, 0x1D6E]))
        items, slots = [], []
        for c in range(n_real):
            for k in range(1, len(contexts[c]["candidates"])):
                a, b = (0, k) if rng.random() < 0.5 else (k, 0)
                items.append((contexts[c], contexts[c]["candidates"][a], contexts[c]["candidates"][b]))
                slots.append((c, a, b))
        asked = [None] * len(items)
        if endpoint is not None:
            asked = jd.ask_pairs(endpoint, items, max_obs_chars, progress or (lambda *a: None), strict)
            fallback = sum(1 for x in asked if x is None)
            if fallback and warn is not None:
                warn(f"judge: {fallback} pair(s) fell back to the offline judge (judge_source=offline-fallback)")
        scores = {}
        for (c, a, b), got in zip(slots, asked):
            if got is None:
                if c not in scores:
                    scores[c] = jd.offline_scores(contexts[c], graph, embedder)
                y = jd.offline_label(scores[c][a], scores[c][b])
                got = (y, 1.0, "offline" if endpoint is None else "offline-fallback")
            add(point[(c, a)], point[(c, b)], got[0], got[1], "L", got[2])
    if not pa:
        raise DataError("no training pairs: the trajectories hold no successful step contexts")
    counts = {s: int(sum(1 for x in src if x == SOURCE_CODE[s])) for s in sources}
    return PairSet(
        contexts,
        X,
        point,
        np.array(pa),
        np.array(pb),
        np.array(ys, np.float32),
        np.array(ws, np.float32),
        np.array(src),
        jsrc,
        np.array(cal_p, dtype=np.int64),
        np.array(cal_v, np.float32),
        counts,
    )


def make_model(n_in: int, hidden: int = 256, dropout: float = 0.1):
    import torch.nn as nn

    return nn.Sequential(
        nn.Linear(n_in, hidden),
        nn.GELU(),
        nn.Dropout(dropout),
        nn.Linear(hidden, hidden),
        nn.GELU(),
        nn.Dropout(dropout),
        nn.Linear(hidden, 1),
    )


@dataclass
class TrainSpec:
    lambdas: dict = field(default_factory=lambda: {"B": 1.0, "S": 1.0, "L": 0.5, "cal": 0.2})
    lr: float = 1e-3
    batch: int = 512
    epochs: int = 30
    weight_decay: float = 1e-4
    seed: int = 0
    val_fraction: float = 0.15


def _task_hash(task_id: str, seed: int) -> float:
    return int(hashlib.sha256(f"{seed}:{task_id}".encode()).hexdigest()[:8], 16) / 2**32


def train(pairs: PairSet, spec: TrainSpec, progress=None, run_dir=None, device: str = "cpu"):
    """Train the MLP through core.train on `device` (a torch device: 'cpu' or 'cuda'); the state with the
    best held-out-task pair accuracy is kept. The model comes back on the CPU, whatever `device` was."""
    import torch

    from methodkit.core.train import TrainConfig
    from methodkit.core.train import train as core_train

    torch.set_num_threads(1)
    X = torch.from_numpy(pairs.X).to(device)
    ctx_of = np.zeros(len(pairs.X), np.int64)
    for (c, _), row in pairs.point.items():
        ctx_of[row] = c
    held = np.array([_task_hash(pairs.contexts[ctx_of[a]]["task_id"], spec.seed) < spec.val_fraction for a in pairs.pa])
    real_ids = {ctx["task_id"] for ctx in pairs.contexts if not ctx["task_id"].startswith("synthetic:")}
    if len(real_ids) < 3:
        held[:] = False
    fit_idx = np.flatnonzero(~held)
    val_idx = np.flatnonzero(held & (pairs.src == 0))
    if fit_idx.size == 0:
        raise UsageError("every pair fell in the held-out tasks; lower --val-fraction")
    pa, pb = torch.from_numpy(pairs.pa).to(device), torch.from_numpy(pairs.pb).to(device)
    y, w, src = (torch.from_numpy(a).to(device) for a in (pairs.y, pairs.w, pairs.src))
    held_ctx = np.unique(ctx_of[pairs.pa[held]]) if held.any() else np.zeros(0, np.int64)
    keep = ~np.isin(ctx_of[pairs.cal_points], held_ctx)  # held-out tasks give no calibration points either
    cal_p, cal_v = torch.from_numpy(pairs.cal_points[keep]).to(device), torch.from_numpy(pairs.cal_v[keep]).to(device)
    lam = torch.tensor([spec.lambdas.get(s, 0.0) for s in SOURCES], device=device)
    torch.manual_seed(spec.seed)  # the initial weights from --seed (core.train seeds only its own loop)
    model = make_model(X.shape[1]).to(device)
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    batch = min(spec.batch, fit_idx.size)
    steps = max(1, spec.epochs * max(fit_idx.size // batch, 1))

    def loss_fn(net, idx):
        rows = fit_idx[idx]
        idx = torch.from_numpy(rows).to(device)
        fa, fb = net(X[pa[idx]]).squeeze(-1), net(X[pb[idx]]).squeeze(-1)
        per = w[idx] * bce(fa - fb, y[idx], reduction="none")
        loss = torch.zeros((), device=device)
        for code in range(3):
            sel = src[idx] == code
            if bool(sel.any()):
                loss = loss + lam[code] * per[sel].mean()
        if cal_p.numel() and spec.lambdas.get("cal", 0.0) > 0:
            g = torch.Generator().manual_seed(int(rows[0]) * 7919 + int(rows.size))
            # a seeded batch of calibration points, drawn on the CPU: the same points on any device
            pos = torch.randint(cal_p.numel(), (batch,), generator=g).to(device)
            loss = loss + spec.lambdas["cal"] * bce(net(X[cal_p[pos]]).squeeze(-1), cal_v[pos])
        return loss

    best = {"acc": -1.0, "state": None}

    def evaluate(net):
        if val_idx.size == 0:
            return {}
        sel = torch.from_numpy(val_idx).to(device)
        acc = float((net(X[pa[sel]]).squeeze(-1) > net(X[pb[sel]]).squeeze(-1)).float().mean())
        if acc > best["acc"]:
            best["acc"] = acc
            best["state"] = {k: v.clone() for k, v in net.state_dict().items()}
        return {"val_pair_acc": acc}

    per_epoch = max(fit_idx.size // batch, 1)
    cfg = TrainConfig(
        steps=steps,
        batch_size=batch,
        lr=spec.lr,
        weight_decay=spec.weight_decay,
        log_every=per_epoch,
        seed=spec.seed,
        warmup=min(50, steps // 10),
    )
    result = core_train(
        model, loss_fn, fit_idx.size, cfg, run_dir=run_dir, evaluate=evaluate, progress=progress or (lambda *a: None)
    )
    if best["state"] is not None:
        model.load_state_dict(best["state"])
    model.to("cpu").eval()  # scoring and saving are on the CPU
    return (
        model,
        result,
        {
            "val_pair_acc": best["acc"] if val_idx.size else None,
            "n_val_pairs": int(val_idx.size),
            "n_fit_pairs": int(fit_idx.size),
            "steps": steps,
            "device": str(torch.device(device).type),
        },
    )


def score(model, X: np.ndarray) -> np.ndarray:
    import torch

    with torch.no_grad():
        return model(torch.from_numpy(X)).squeeze(-1).numpy().astype(np.float64)

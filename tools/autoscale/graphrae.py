"""Graph-RAE: a graph autoencoder of scenes with contrastive, metric and graph-Laplacian regularisers.

Encoder: node MLPs (agent/ego nodes and lane nodes), two rounds of message passing
h_i <- h_i + MLP(h_i, sum_j MLP(h_i, h_j, e_ij)) over agent-agent edges (dx, dy, dv, TTC) and agent-lane
membership edges (scatter sums with torch's index_add_), attention readout from the ego node -> z in R^32.
Decoder: MLP(z) -> (a) the ego + distance-sorted agent slots with presence (masked MSE + BCE), (b) the
5 x 16 lane-occupancy grid (BCE), (c) the slot-pair edge logits (BCE).
Loss: L_rec + 0.5 InfoNCE(z, z+; tau 0.1) + 1.0 L_met + 0.01 L_lap, where z+ embeds an augmentation
(features.augment), L_met = mean (||z_i - z_j|| / s - d_dec(i, j))^2 with d_dec = ||S_i - S_j|| / sqrt(16)
over the scenes' candidate PDMS vectors S (s learned), and L_lap = mean ||z_i - z_nb(i)||^2 over a
10-NN graph of the raw scene vectors.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

from methodkit.core.errors import RunFailure
from methodkit.tools.autoscale import features as F
from methodkit.tools.autoscale import kernels as KF
from methodkit.tools.autoscale import search


@dataclass
class RAEConfig:
    hidden: int = 64
    dim: int = 32
    rounds: int = 2
    epochs: float = 5.0
    batch_size: int = 256
    lr: float = 1e-3
    tau: float = 0.1
    w_con: float = 0.5
    w_met: float = 1.0
    w_lap: float = 0.01
    knn: int = 10


def _mlp(torch, i, h, o):
    return torch.nn.Sequential(torch.nn.Linear(i, h), torch.nn.SiLU(), torch.nn.Linear(h, o))


def build_model(cfg: RAEConfig, n_agents: int = F.N_AGENTS):
    import torch

    s = n_agents + 1
    pairs = s * (s - 1) // 2

    class GraphRAE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            h = cfg.hidden
            self.agent_in = _mlp(torch, KF.NODE_F, h, h)
            self.lane_in = _mlp(torch, KF.LANE_F, h, h)
            self.msg = torch.nn.ModuleList([_mlp(torch, 2 * h + KF.EDGE_F + 1, h, h) for _ in range(cfg.rounds)])
            self.upd = torch.nn.ModuleList([_mlp(torch, 2 * h, h, h) for _ in range(cfg.rounds)])
            self.q, self.k, self.v = (torch.nn.Linear(h, h) for _ in range(3))
            self.out = torch.nn.Linear(2 * h, cfg.dim)
            self.dec = torch.nn.Sequential(
                torch.nn.Linear(cfg.dim, 2 * h), torch.nn.SiLU(), torch.nn.Linear(2 * h, 2 * h), torch.nn.SiLU(),
                torch.nn.Linear(2 * h, s * KF.NODE_F + KF.GRID_LANES * KF.GRID_BINS + pairs),
            )  # fmt: skip
            self.log_scale = torch.nn.Parameter(torch.zeros(()))
            self.triu = torch.triu_indices(s, s, 1)

        def encode(self, g):
            nodes, lanes, edges, member = g["nodes"], g["lane_nodes"], g["edges"], g["member"]
            b, s_, _ = nodes.shape
            ln = lanes.shape[1]
            n_all = s_ + ln
            h = torch.cat([self.agent_in(nodes), self.lane_in(lanes)], 1).reshape(b * n_all, -1)
            # edge lists: agent-agent (features + flag 0) and membership both ways (zeros + flag 1)
            bi, ii, jj = torch.nonzero(edges[..., 0] > 0, as_tuple=True)
            src = bi * n_all + jj
            dst = bi * n_all + ii
            e_aa = torch.cat([edges[bi, ii, jj], torch.zeros(len(bi), 1)], 1)
            bm, im, qm = torch.nonzero(member > 0, as_tuple=True)
            a_node = bm * n_all + im
            l_node = bm * n_all + s_ + qm
            e_m = torch.zeros(len(bm), KF.EDGE_F + 1)
            e_m[:, -1] = 1.0
            src = torch.cat([src, a_node, l_node])
            dst = torch.cat([dst, l_node, a_node])
            e = torch.cat([e_aa, e_m, e_m])
            for msg, upd in zip(self.msg, self.upd):
                m = msg(torch.cat([h[dst], h[src], e], 1))
                agg = torch.zeros_like(h).index_add_(0, dst, m)
                h = h + upd(torch.cat([h, agg], 1))
            h = h.reshape(b, n_all, -1)
            present = torch.cat([nodes[..., 0], lanes[..., 0]], 1) > 0
            ego = h[:, 0]
            att = (self.k(h) @ self.q(ego)[:, :, None])[..., 0] / h.shape[-1] ** 0.5
            att = att.masked_fill(~present, float("-inf")).softmax(1)
            ctx = (att[..., None] * self.v(h)).sum(1)
            return self.out(torch.cat([ego, ctx], 1))

        def decode(self, z):
            y = self.dec(z)
            a = s * KF.NODE_F
            g = KF.GRID_LANES * KF.GRID_BINS
            return y[:, :a].reshape(-1, s, KF.NODE_F), y[:, a : a + g], y[:, a + g :]

    return GraphRAE()


def to_torch(feats: dict, index=None):
    import torch

    index = slice(None) if index is None else index
    return {k: torch.as_tensor(np.asarray(v[index], dtype=np.float32)) for k, v in feats.items()}


def recon_loss(model, g, z):
    import torch
    import torch.nn.functional as tf

    slots, grid_logit, edge_logit = model.decode(z)
    nodes = g["nodes"]
    present = nodes[..., 0]
    mse = ((slots[..., 1:] - nodes[..., 1:]) ** 2).mean(-1)
    l_slot = (mse * present).sum() / present.sum().clamp(min=1)
    l_pres = tf.binary_cross_entropy_with_logits(slots[:, 1:, 0], present[:, 1:])
    l_grid = tf.binary_cross_entropy_with_logits(grid_logit, g["grid"].reshape(len(z), -1))
    iu = model.triu
    both = present[:, iu[0]] * present[:, iu[1]]
    target = g["edges"][:, iu[0], iu[1], 0]
    l_edge = (tf.binary_cross_entropy_with_logits(edge_logit, target, reduction="none") * both).sum()
    l_edge = l_edge / both.sum().clamp(min=1)
    return l_slot + l_pres + l_grid + l_edge + torch.zeros(())


def info_nce(z, zp, tau):
    import torch
    import torch.nn.functional as tf

    a, b = tf.normalize(z, dim=1), tf.normalize(zp, dim=1)
    logits = a @ b.T / tau
    labels = torch.arange(len(z))
    return 0.5 * (tf.cross_entropy(logits, labels) + tf.cross_entropy(logits.T, labels))


def metric_loss(model, z, profiles, perm):
    d_z = (z - z[perm]).norm(dim=1) / model.log_scale.exp()
    d_dec = (profiles - profiles[perm]).norm(dim=1) / profiles.shape[1] ** 0.5
    return ((d_z - d_dec) ** 2).mean()


@dataclass
class EmbedResult:
    losses: dict
    purity: float
    purity_pca: float
    purity_raw: float
    clusters_by_tag: dict
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


def raw_knn(flat: np.ndarray, k: int) -> np.ndarray:
    """Each scene's k nearest scenes (itself excluded) by standardised raw features (Euclidean)."""
    x = (flat - flat.mean(0)) / (flat.std(0) + 1e-6)
    sq = (x**2).sum(1)
    # Euclidean top-k through inner products: ||a - b||^2 = |a|^2 + |b|^2 - 2 ab, as a max-IP search
    base = np.concatenate([2 * x, -sq[:, None]], 1)
    query = np.concatenate([x, np.ones((len(x), 1), dtype=x.dtype)], 1)
    _, idx = search.topk_ip(base, query, k + 1)
    out = np.empty((len(x), k), dtype=np.int64)
    for i in range(len(x)):
        row = [j for j in idx[i] if j != i][:k]
        out[i] = row + [row[-1]] * (k - len(row))
    return out


RETRIES = 2  # restarts after a non-finite loss, each at half the previous learning rate


def train(arrays: dict, cfg: RAEConfig, seed: int, progress=None, log=None):
    """Train Graph-RAE on the scenes of `arrays` (train pools: real + synthetic); return (model, history).
    A non-finite loss restores the weights the training started from (the seeded init, the last state known
    good before any update) and restarts at half the learning rate, at most RETRIES times (each logged);
    one more raises RunFailure (exit 1) naming every attempt's step and learning rate."""
    import torch

    feats = F.featurise(arrays)
    prep = (feats, F.flat(feats), torch.as_tensor(arrays["cand_scores"][..., -1], dtype=torch.float32))
    nbrs = raw_knn(prep[1], cfg.knn)
    torch.manual_seed(seed)  # the initial weights come from the seed, not from whatever ran before
    model = build_model(cfg)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    tried = []
    for attempt in range(RETRIES + 1):
        run_cfg = replace(cfg, lr=cfg.lr / 2**attempt)
        try:
            return model, _train_once(model, arrays, prep, nbrs, run_cfg, seed, progress)
        except RunFailure as exc:
            tried.append(f"{str(exc).split(';')[0]} at lr {run_cfg.lr:g}")
            model.load_state_dict(start)
            if attempt < RETRIES and log is not None:
                log(f"Graph-RAE: {tried[-1]}; restarting from the starting weights at lr {run_cfg.lr / 2:g}")
    raise RunFailure(f"Graph-RAE training: {', then '.join(tried)} (each restart from the starting weights); "
                     "the train pools' features may be damaged")  # fmt: skip


def _train_once(model, arrays, prep, nbrs, cfg: RAEConfig, seed: int, progress) -> dict:
    import torch

    from methodkit.core import train as core_train

    feats, flat, profiles = prep
    n = flat.shape[0]
    steps = max(1, int(round(cfg.epochs * n / cfg.batch_size)))
    parts: dict[str, list] = {"rec": [], "con": [], "met": [], "lap": []}

    def loss_fn(m, idx):
        rng = np.random.default_rng([seed, int(idx[0]), len(parts["rec"])])
        g = to_torch(feats, idx)
        sub = F.subset(arrays, idx)
        gp = to_torch(F.featurise(F.augment(sub, rng)))
        nb = nbrs[idx, rng.integers(cfg.knn, size=len(idx))]
        gn = to_torch(feats, nb)
        z, zp, zn = m.encode(g), m.encode(gp), m.encode(gn)
        l_rec = recon_loss(m, g, z)
        l_con = info_nce(z, zp, cfg.tau)
        perm = torch.as_tensor(rng.permutation(len(idx)))
        l_met = metric_loss(m, z, profiles[idx], perm)
        l_lap = ((z - zn) ** 2).sum(1).mean()
        for key, val in zip(parts, (l_rec, l_con, l_met, l_lap)):
            parts[key].append(float(val.detach()))
        return l_rec + cfg.w_con * l_con + cfg.w_met * l_met + cfg.w_lap * l_lap

    tc = core_train.TrainConfig(steps=steps, batch_size=min(cfg.batch_size, n), lr=cfg.lr, seed=seed, log_every=50)
    result = core_train.train(model, loss_fn, n, tc, progress=progress or core_train.silent)
    tail = max(1, len(parts["rec"]) // 5)
    losses = {k: float(np.mean(v[-tail:])) for k, v in parts.items()}
    losses["total_first"] = result.history[0]["loss"] if result.history else float("nan")
    losses["total_last"] = result.final_loss
    return losses


def embed(model, arrays: dict, batch: int = 1024) -> np.ndarray:
    import torch

    feats = F.featurise(arrays)
    out = []
    model.eval()
    with torch.no_grad():
        for k in range(0, arrays["ego"].shape[0], batch):
            out.append(model.encode(to_torch(feats, slice(k, k + batch))).numpy())
    return np.concatenate(out).astype(np.float32)


def pca(flat: np.ndarray, dim: int) -> np.ndarray:
    x = (flat - flat.mean(0)) / (flat.std(0) + 1e-6)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    return (x @ vt[:dim].T).astype(np.float32)


def save(path, model, cfg: RAEConfig, fingerprint: str) -> None:
    from methodkit.core import checkpoint

    checkpoint.save(path, dict(model.state_dict()), config=asdict(cfg), spec=spec(cfg), fingerprint=fingerprint)


def spec(cfg: RAEConfig) -> dict:
    return {"model": "graph-rae", "node_f": KF.NODE_F, "lane_f": KF.LANE_F, "agents": F.N_AGENTS, **asdict(cfg)}


def load(path):
    from methodkit.core import checkpoint

    tensors, side = checkpoint.load(path)
    cfg = RAEConfig(**side["config"])
    model = build_model(cfg)
    model.load_state_dict(tensors)
    return model, cfg

"""--node-scope graph: the node term restricted to the teacher graph's feature nodes at the target positions."""

import numpy as np
import torch

from methodkit.core.train import TrainConfig
from methodkit.tools.mcd import distill as D
from methodkit.tools.mcd import graph as G
from methodkit.tools.mcd import losses, models
from methodkit.tools.mcd import transcoder as T


def _pair(seed=0):
    teacher = models.build(models.model_config("micro", 12, 24, layers=2, width=16), seed).eval()
    for p in teacher.parameters():
        p.data.mul_(6.0)
    t_tcs = T.for_model(teacher, k=4).eval()
    student = models.build(models.model_config("micro", 12, 24, layers=2, width=8), seed + 1).eval()
    s_tcs = T.for_model(student, k=4).eval()
    bundle = D.StudentBundle(student, 16)
    x = torch.randint(0, 24, (3, 12), generator=torch.Generator().manual_seed(seed))
    positions = torch.tensor([[3, 9], [5, 11], [2, 7]])
    targets = x.roll(-1, 1).gather(1, positions)
    with torch.no_grad():
        t_codes = [D._codes(tc, tap["mlp_in"]) for tc, tap in zip(t_tcs.layers, G.sparse_codes(teacher, t_tcs, x)[1])]
        s_codes = [D._codes(tc, tap["mlp_in"]) for tc, tap in zip(s_tcs.layers, G.sparse_codes(student, s_tcs, x)[1])]
    return teacher, t_tcs, s_tcs, bundle, x, positions, targets, t_codes, s_codes


def _nodes(graphs, B, K):
    return {n: D._window_major(v, B, K) for n, v in G.feature_nodes(graphs).items()}


def test_graph_scope_keeps_exactly_the_kept_graph_nodes_and_differs_from_all():
    teacher, t_tcs, s_tcs, bundle, x, positions, targets, t_codes, s_codes = _pair()
    B, K = positions.shape
    lmap = [0, 1]
    with torch.no_grad():
        graphs = G.build(teacher, t_tcs, x, positions, targets, G.GraphSettings(max_nodes=6))
    nodes = _nodes(graphs, B, K)
    keep = losses.graph_keep(nodes, t_codes, positions, lmap)
    for ls, lt in enumerate(lmap):  # reference: a plain loop over the graphs' kept feature nodes
        idx = t_codes[lt][1]
        for b in range(B):
            for k in range(K):
                g = k * B + b  # graphs are slot-major
                start = graphs.ctx * (graphs.n_layers + 1)
                kept = {int(graphs.feat_latent[g, m]) for m in range(graphs.n_feat)
                        if graphs.node_mask[g, start + m] and int(graphs.feat_layer[g, m]) == lt
                        and int(graphs.feat_pos[g, m]) == int(positions[b, k])}  # fmt: skip
                want = [int(i) in kept for i in idx[b, positions[b, k]]]
                assert keep[ls][b, k].tolist() == want
    assert 0 < sum(int(m.sum()) for m in keep) < sum(m.numel() for m in keep)
    with torch.no_grad():
        full, none_dropped, _ = losses.node_loss(t_codes, t_tcs, s_codes, s_tcs, bundle.adapter, positions, lmap)
        part, dropped, _ = losses.node_loss(t_codes, t_tcs, s_codes, s_tcs, bundle.adapter, positions, lmap, keep=keep)
    assert none_dropped == 0.0 and dropped > 0
    assert abs(float(full) - float(part)) > 1e-3


def test_scopes_agree_when_the_graph_holds_every_active_latent():
    teacher, t_tcs, s_tcs, bundle, x, positions, targets, t_codes, s_codes = _pair(1)
    B, K = positions.shape
    lmap = [0, 1]
    k = t_codes[0][1].shape[-1]
    layer = np.repeat(np.arange(2), k)[None, None].repeat(B, 0).repeat(K, 1)  # (B, K, 2k)
    latent = torch.cat([losses.gather_positions([c], positions)[0][1] for c in t_codes], -1)
    nodes = {"layer": layer.reshape(B * K, -1), "pos": np.repeat(positions.numpy()[..., None], 2 * k, -1).reshape(B * K, -1),
             "latent": latent.reshape(B * K, -1).numpy(), "kept": np.ones((B * K, 2 * k), bool)}  # fmt: skip
    keep = losses.graph_keep(nodes, t_codes, positions, lmap)
    assert all(bool(m.all()) for m in keep)
    with torch.no_grad():
        full, _, _ = losses.node_loss(t_codes, t_tcs, s_codes, s_tcs, bundle.adapter, positions, lmap)
        part, dropped, _ = losses.node_loss(t_codes, t_tcs, s_codes, s_tcs, bundle.adapter, positions, lmap, keep=keep)
    assert dropped == 0.0
    assert torch.allclose(full, part)
    # the same latents as nodes at another position, or of a layer not paired, are not the target's nodes
    for field, shifted in (("pos", nodes["pos"] + 1), ("layer", nodes["layer"] + 2)):
        assert not any(bool(m.any()) for m in losses.graph_keep({**nodes, field: shifted}, t_codes, positions, lmap))


def test_distill_with_graph_scope_logs_the_dropped_mass():
    teacher, t_tcs, *_ = _pair(2)
    stream = np.random.default_rng(0).integers(0, 24, 2000).astype(np.uint8)
    windows = models.Windows.cut(stream, 12, 8, 0)
    student = models.build(models.model_config("micro", 12, 24, layers=2, width=8), 1)
    cfg = D.DistillConfig(kd="fkl", lam_path=0.0, lam_node=1.0, n_targets=2, mcd_warmup=1, node_scope="graph",
                          graph=G.GraphSettings(max_nodes=4, n_paths=4))  # fmt: skip
    result, *_ = D.distill(teacher, t_tcs, student, windows, cfg,
                           TrainConfig(steps=3, batch_size=4, lr=1e-2, log_every=3, seed=0), subset=torch.arange(24))  # fmt: skip
    assert result.mcd_batches == 2
    row = result.history[-1]  # teacher graphs were built (no path term) and their nodes restricted the term
    assert row["node_dropped"] > 0 and np.isfinite(row["node_ot"])

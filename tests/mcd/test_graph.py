"""Attribution graphs: completeness of the linear (frozen) decomposition, pruning, pathway weights."""

import numpy as np
import torch

from methodkit.tools.mcd import graph as G
from methodkit.tools.mcd import models
from methodkit.tools.mcd import transcoder as T


def _setup(seed=0, k=4):
    model = models.build(models.model_config("micro", 12, 32), seed).eval()
    for p in model.parameters():
        p.data.mul_(5.0)
    tcs = T.for_model(model, k=k)
    for tc in tcs.layers:
        tc.b_dec.data.zero_()
        tc.b_enc.data.normal_(0, 0.1, generator=torch.Generator().manual_seed(seed))
    tcs.eval()
    tokens = torch.randint(0, 32, (2, 12), generator=torch.Generator().manual_seed(seed))
    return model, tcs, tokens


def test_logit_row_sums_to_the_logit_and_feature_rows_to_preactivations():
    """With b_dec = 0 and every active feature selected, the frozen model is linear in its leaves, so the
    attributions into the logit node add up to the logit direction's value (circuit-tracer's completeness),
    and those into a feature add up to its pre-activation minus b_enc."""
    model, tcs, tokens = _setup()
    pos = torch.tensor([[11, 6], [9, 3]])
    tgt = torch.tensor([[3, 5], [7, 1]])
    settings = G.GraphSettings(max_nodes=2 * 12 * 4)
    graphs = G.build(model, tcs, tokens, pos, tgt, settings)
    with torch.no_grad():
        hidden, taps, codes = G.sparse_codes(model, tcs, tokens)
        w_u = G.unembedding(model)
        for g in range(graphs.adjacency.shape[0]):
            k, b = divmod(g, 2)
            p, y = int(pos[b, k]), int(tgt[b, k])
            logit = float((w_u[y] - w_u.mean(0)) @ hidden[b, p])
            assert np.isclose(float(graphs.adjacency[g, -1].sum()), logit, rtol=1e-4, atol=1e-4)
            for m in range(3):
                layer, r, latent = (int(graphs.feat_layer[g, m]), int(graphs.feat_pos[g, m]), int(graphs.feat_latent[g, m]))
                tc = tcs[layer]
                pre = float(taps[layer]["mlp_in"][b, r] @ tc.w_enc[latent])  # without b_enc
                n_fixed = 12 + 2 * 12
                assert np.isclose(float(graphs.adjacency[g, n_fixed + m].sum()), pre, rtol=1e-4, atol=1e-4)


def test_pruning_keeps_the_influential_and_drops_dangling_nodes():
    model, tcs, tokens = _setup(1)
    pos, tgt = torch.tensor([[11], [10]]), torch.tensor([[2], [4]])
    graphs = G.build(model, tcs, tokens, pos, tgt, G.GraphSettings(max_nodes=24))
    kind = graphs.node_kind()
    for g in range(2):
        keep = graphs.node_mask[g].numpy()
        mask = graphs.mask[g].numpy()
        assert keep[-1]  # the logit
        feats = np.flatnonzero(keep & (kind == 2))
        for f in feats:  # every kept feature has an input and an output edge
            assert mask[f].any() and mask[:, f].any()
        # kept features carry at least node_threshold of the feature influence
        infl = graphs.influence[g].numpy()
        share = infl[feats].sum() / infl[kind == 2].sum()
        assert share >= 0.8 - 1e-6 or len(feats) == 0
        # nothing flows from a later position into an earlier one
        assert not mask[: 12, :].any()  # embeddings have no inputs


def test_pathways_are_heaviest_paths_and_weights_are_differentiable():
    model, tcs, tokens = _setup(2)
    pos, tgt = torch.tensor([[11, 7], [10, 5]]), torch.tensor([[2, 3], [4, 1]])
    settings = G.GraphSettings(max_nodes=16, n_paths=6)
    graphs = G.build(model, tcs, tokens, pos, tgt, settings, differentiable=True)
    paths, weights, empty = G.pathways(graphs, 6)
    diff = G.path_weights(graphs, paths)
    assert np.allclose(diff.detach().numpy(), weights, atol=1e-5)  # the DP's weights, recomputed with autograd
    assert np.all(np.diff(weights, axis=1) <= 1e-9)
    kind = graphs.node_kind()
    for g in range(4):
        for p in range(6):
            nodes = paths[g, p][paths[g, p] >= 0]
            if len(nodes):
                assert kind[nodes[0]] == 0 and kind[nodes[-1]] == 3
    diff.sum().backward()
    assert model.blocks[1].attn.qkv.weight.grad.abs().sum() > 0


def test_descriptor_cost_is_zero_for_identical_pathways():
    model, tcs, tokens = _setup(3)
    pos, tgt = torch.tensor([[11], [9]]), torch.tensor([[2], [4]])
    settings = G.GraphSettings(max_nodes=16, n_paths=4)
    desc, _, _ = G.descriptors_for(model, tcs, tokens, pos, tgt, settings, torch.arange(32))
    cost = G.pathway_cost(desc, desc, 12, G.CostWeights())
    diag = torch.diagonal(cost, dim1=1, dim2=2)
    assert float(diag.detach().abs().max()) < 1e-4
    assert float(cost.min()) >= -1e-4

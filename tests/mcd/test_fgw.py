"""The fused Gromov-Wasserstein ablation of the pathway matching, against POT's solver on plain arrays."""

import numpy as np
import ot
import torch

from methodkit.tools.mcd import graph as G
from methodkit.tools.mcd import losses, transport


def _desc(seed, g=3, p=5, m=4, s=6):
    rng = np.random.default_rng(seed)
    psi = torch.from_numpy(rng.normal(size=(g, p, m, s))).float()
    psi = psi / psi.norm(dim=-1, keepdim=True)
    return G.PathDescriptors(psi, torch.from_numpy(rng.random((g, p))).float(),
                             torch.from_numpy(rng.integers(0, 10, (g, p))).float(),
                             torch.from_numpy(rng.integers(0, 3, (g, p))), torch.from_numpy(rng.random((g, p))).float(),
                             np.zeros(g, bool))  # fmt: skip


def test_fgw_path_loss_matches_pot_and_its_cost_gradient_is_the_plan():
    t, s = _desc(0), _desc(1)
    s.psi.requires_grad_(True)
    cw = G.CostWeights()
    value, n_empty, _ = losses.path_loss(t, s, 12, cw, fgw=0.3)
    want, plans = [], []
    for i in range(3):  # POT on NumPy arrays, each structure matrix the pathway cost inside one measure
        M = G.pathway_cost(t, s, 12, cw)[i].detach().double().numpy()
        c1 = G.pathway_cost(t, t, 12, cw)[i].detach().double().numpy()
        c2 = G.pathway_cost(s, s, 12, cw)[i].detach().double().numpy()
        p = transport.normalise(t.weight)[i].double().numpy()
        q = transport.normalise(s.weight)[i].double().numpy()
        want.append(ot.gromov.fused_gromov_wasserstein2(M, c1, c2, p, q, alpha=0.3))
        plans.append(ot.gromov.fused_gromov_wasserstein(M, c1, c2, p, q, alpha=0.3))
        assert not np.allclose(c1, c2)
    assert n_empty == 0
    assert abs(float(value.detach()) - np.mean(want)) < 1e-5
    cost = G.pathway_cost(t, s, 12, cw).detach().double().requires_grad_(True)
    c_t, c_s = G.pathway_cost(t, t, 12, cw).detach(), G.pathway_cost(s, s, 12, cw).detach()
    a, b = transport.normalise(t.weight), transport.normalise(s.weight)
    transport.fgw_cost(cost, c_t, c_s, a, b, 0.3).sum().backward()
    assert np.allclose(cost.grad.numpy(), 0.7 * np.stack(plans), atol=1e-6)
    value.backward()  # the student's descriptors get a gradient through both the cost and its structure
    assert s.psi.grad is not None and float(s.psi.grad.abs().sum()) > 0


def test_fgw_without_structure_is_exact_transport():
    t, s = _desc(2), _desc(3)
    cw = G.CostWeights()
    value, _, _ = losses.path_loss(t, s, 12, cw, fgw=0.0)
    cost = G.pathway_cost(t, s, 12, cw).double().numpy()
    a, b = transport.normalise(t.weight).double().numpy(), transport.normalise(s.weight).double().numpy()
    exact = np.mean([ot.emd2(a[i], b[i], cost[i]) for i in range(3)])
    assert abs(float(value) - exact) < 1e-5
    sinkhorn, _, _ = losses.path_loss(t, s, 12, cw)
    assert float(sinkhorn) >= exact - 1e-6  # the entropic plan's cost is above the exact optimum

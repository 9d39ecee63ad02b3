"""Graph-RAE training is a function of its seed (CONVENTIONS: same --seed, same bytes on CPU)."""

from __future__ import annotations

import numpy as np


def test_graphrae_same_seed_same_weights_whatever_the_global_torch_state(small_pools):
    import torch

    from methodkit.tools.autoscale import features as F
    from methodkit.tools.autoscale import graphrae

    _, arrays, _ = small_pools
    train = {k: np.concatenate([arrays["real"][k], arrays["synth"][k]]) for k in arrays["real"] if k != "meta"}
    train = F.subset(train, np.arange(48))
    cfg = graphrae.RAEConfig(hidden=16, dim=8, epochs=0.5, batch_size=24)
    states = []
    for other in (1, 2):
        torch.manual_seed(other)  # whatever ran before in the process must not matter
        model, losses = graphrae.train(train, cfg, seed=5)
        states.append(({k: v.clone() for k, v in model.state_dict().items()}, losses))
    (a, la), (b, lb) = states
    assert la == lb
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    model, _ = graphrae.train(train, cfg, seed=6)
    assert not all(torch.equal(a[k], v) for k, v in model.state_dict().items())

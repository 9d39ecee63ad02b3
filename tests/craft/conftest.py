"""A small decision batch shared by the craft tests: one route per family, an untrained policy."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def batch():
    import torch

    from methodkit.tools.craft import collect, policy, suites

    torch.manual_seed(0)
    routes = [suites.route_for(f, 3) for f in suites.FAMILIES]
    for r in routes:
        r["params"]["duration"] = 14.0
    routes = suites.parse(routes)
    scenes, ids = suites.scenes(routes)
    model = policy.build("mlp").eval()
    gen = torch.Generator().manual_seed(0)
    out = collect.run(model, scenes, ids, [r["family"] for r in routes], sample=True, generator=gen, comfort=False)
    return model, routes, out.decisions

"""The paper's qualitative effect at small size: closed-loop Cluster-GA moves weight away from the harmful
synthetic family and retrieval selects less of it than vanilla co-training does.

The embeddings here are the generator families (one-hot, plus noise) so that the test isolates the loop
(clusters -> quotas -> retrieval -> train -> PDMS feedback -> Cluster-GA) from Graph-RAE's training, which
test_graphrae checks on its own."""

from __future__ import annotations

import numpy as np

from methodkit.tools.autoscale import loop, runner
from methodkit.tools.autoscale import planner as P
from methodkit.tools.autoscale.pools import GENERATORS


def _family_embeddings(arrays, metas, rng):
    names = sorted(GENERATORS)
    out = {}
    for pool in ("real", "synth", "val", "test"):
        gens = metas[pool]["generators"]
        onehot = np.eye(len(names))[[names.index(g) for g in gens]]
        out[pool] = (onehot + rng.normal(0, 0.05, onehot.shape)).astype(np.float32)
    return out


def test_cluster_ga_downweights_reckless_clusters(small_pools):
    _, arrays, metas = small_pools
    pools = runner.make_pools(arrays, metas, _family_embeddings(arrays, metas, np.random.default_rng(0)))
    k = len(set(metas["synth"]["generators"]))
    cfg = loop.LoopConfig(method="autoscale", budget=90, rounds=3, clusters=k, ga_checkpoints=2,
                          planner=P.PlannerConfig(steps=150, batch_size=64))  # fmt: skip
    res = loop.run(pools, cfg, seed=0)
    w0, w_last = np.asarray(res.mixtures[0]), np.asarray(res.mixtures[-1])
    comp = res.clusters
    share = np.array([comp[str(c)].get("reckless", 0) / max(comp[str(c)]["size"], 1) for c in range(k)])
    worst = int(np.argmax(share))
    assert share[worst] == 1.0  # the clusters are the families
    assert w_last[worst] < w0[worst]
    assert all(r.get("ga") in ("step", "skipped: no val failures") or "reverted" in r.get("ga", "")
               for r in res.rounds[:-1])  # fmt: skip
    van = loop.run(pools, loop.LoopConfig(method="vanilla", budget=90, clusters=k, planner=cfg.planner), seed=0)
    assert res.rounds[-1]["reckless_share"] <= van.rounds[0]["reckless_share"]

"""The embed verb as a library call: train Graph-RAE on the training pools, embed every scene, measure."""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass

import numpy as np

from methodkit.tools.autoscale import data, graphrae, search
from methodkit.tools.autoscale import features as F
from methodkit.tools.autoscale import pools as PL


@dataclass
class EmbedSummary:
    losses: dict
    purity: float
    purity_pca: float
    purity_raw: float
    purity_by_tag: dict
    clusters: dict
    n_scenes: int
    dim: int
    seconds: float
    fingerprint: str

    def to_dict(self) -> dict:
        return asdict(self)


def fingerprint(arrays: dict) -> str:
    h = hashlib.sha256()
    for p in PL.POOLS:
        h.update("".join(arrays[p]["scene_id"].tolist()).encode())
    return h.hexdigest()[:16]


def run(arrays: dict, metas: dict, cfg: graphrae.RAEConfig, seed: int, clusters: int = 32, progress=None, log=None):
    """(summary, model, embeddings of every scene in scenes.csv order)."""
    began = time.monotonic()
    train = {k: np.concatenate([arrays["real"][k], arrays["synth"][k]]) for k in arrays["real"] if k != "meta"}
    model, losses = graphrae.train(train, cfg, seed, progress=progress, log=log)
    emb = np.concatenate([graphrae.embed(model, arrays[p]) for p in PL.POOLS])
    n_train = train["ego"].shape[0]
    tags = np.concatenate([data.tags_of(metas["real"]), data.tags_of(metas["synth"])])
    flat = F.flat(F.featurise(train))
    z = emb[:n_train]
    purity = search.knn_purity(z, tags)
    by_tag = {}
    xn = search.normalise(z)
    _, idx = search.topk_ip(xn, xn, 11)
    for t in np.unique(tags):
        rows = np.flatnonzero(tags == t)
        by_tag[str(t)] = float(np.mean([np.mean(tags[[j for j in idx[i] if j != i][:10]] == t) for i in rows]))
    n_syn = arrays["synth"]["ego"].shape[0]
    k = min(clusters, n_syn)
    syn = emb[arrays["real"]["ego"].shape[0] : n_train]
    cent = search.kmeans(syn, k, seed)
    lab = search.assign(syn, cent)
    syn_tags = data.tags_of(metas["synth"])
    comp = {}
    for c in range(k):
        names, counts = np.unique(syn_tags[lab == c], return_counts=True)
        comp[str(c)] = {str(a): int(b) for a, b in zip(names, counts)}
    summary = EmbedSummary(
        losses=losses, purity=purity, purity_pca=search.knn_purity(graphrae.pca(flat, cfg.dim), tags),
        purity_raw=search.knn_purity((flat - flat.mean(0)) / (flat.std(0) + 1e-6), tags), purity_by_tag=by_tag,
        clusters=comp, n_scenes=int(emb.shape[0]), dim=int(emb.shape[1]), seconds=time.monotonic() - began,
        fingerprint=fingerprint(arrays),
    )  # fmt: skip
    return summary, model, emb

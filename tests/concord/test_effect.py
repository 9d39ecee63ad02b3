"""The paper's two effects at small scale: plans never worse than the Megatron heuristic, and warm
re-planning doing a fraction of the cold search's primitive work with identical answers."""

from __future__ import annotations

import pytest

from methodkit.tools.concord import spec
from methodkit.tools.concord.baseline import baseline, baseline_sigma
from methodkit.tools.concord.candidates import enumerate_candidates
from methodkit.tools.concord.fixtures import fixture_docs
from methodkit.tools.concord.search import plan


@pytest.mark.parametrize("which", ["dense", "moe"])
def test_concord_is_never_worse_than_the_baseline(docs, which):
    dense, moe, cluster_doc, space_doc = docs
    model = spec.load_model(dense if which == "dense" else moe)
    cluster, space = spec.load_cluster(cluster_doc), spec.load_space(space_doc)
    base, _ = baseline(model, cluster, space)
    best = plan(model, cluster, space)
    sigma, _ = baseline_sigma(model, cluster, space)
    cands = enumerate_candidates(model, cluster, space)
    listed = [cands.sigma(i) for i in range(len(cands))]
    assert base.best["sigma"] in listed  # the baseline lies in the candidate set
    assert best.best["step_s"] <= base.best["step_s"]


def test_long_context_fixture_gains_from_search():
    """The 32k-context fixture: searched plans beat the heuristic by >= 1.3x (the issue's target; cost model).

    The space is the fixture's long-context one (vpp up to 8) with zero and mbs narrowed to
    the values the full space picks (zero 2, mbs 1), to keep the test small."""
    m, c, s = fixture_docs("llama-70b-32k-h100-1024")
    s = {**s, "zero": [1, 2], "mbs": [1]}
    model, cluster, space = spec.load_model(m), spec.load_cluster(c), spec.load_space(s)
    base, _ = baseline(model, cluster, space)
    best = plan(model, cluster, space, top_k=1)
    assert best.best["sigma"]["vpp"] > 2  # deeper interleaving is what closes the gap
    assert base.best["step_s"] / best.best["step_s"] >= 1.3

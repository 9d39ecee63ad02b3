"""run --eval closed-loop: the planner driving the val routes in core.sim.highway as the loop's feedback."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core.errors import UsageError
from methodkit.core.sim.highway.state import pack
from methodkit.tools.autoscale import closedloop as CL
from methodkit.tools.autoscale import data, loop, runner
from methodkit.tools.autoscale import features as F
from methodkit.tools.autoscale import planner as P
from methodkit.tools.autoscale import pools as PL


def _cfg(**kw):
    return loop.LoopConfig(method="autoscale", budget=60, rounds=2, clusters=4, ga_checkpoints=2, trust=1e9,
                           planner=P.PlannerConfig(steps=40, batch_size=32, hidden=32), **kw)  # fmt: skip


@pytest.fixture(scope="module")
def pools(embedded):
    folder, arrays, metas, _, _ = embedded
    return runner.make_pools(arrays, metas, data.read_embeddings(folder, arrays), closed_loop=True)


def test_routes_start_where_the_scenes_were_snapshot(pools):
    # the planner sees in closed loop, at t = 0, exactly the features the val scene file gives it
    r = pools.routes["val"]
    obs = CL.observe(pack(r.inits, slots=PL.SLOTS))
    obs["obs_noise"] = r.obs_noise
    np.testing.assert_allclose(F.flat(F.featurise(obs)), pools.x("val"), atol=1e-5)


def test_expert_scores_full_and_keep_lane_scores_less(pools):
    r = pools.routes["val"]
    expert, per = CL.drive(None, r, policy="expert")
    keep, per_keep = CL.drive(None, r, policy="keep")
    assert per.shape == (len(r), 4) and ((per >= 0) & (per <= 1)).all()
    assert expert["penalty"] == pytest.approx(per[:, 1].mean())
    assert expert["score"] > keep["score"] and (per_keep[:, 2] < 1).any()


def test_closed_loop_feedback_is_deterministic(pools):
    a = loop.run(pools, _cfg(evaluate="closed-loop"), seed=2)
    b = loop.run(pools, _cfg(evaluate="closed-loop"), seed=2)
    assert a.rounds == b.rounds and a.mixtures == b.mixtures and a.test == b.test
    assert "closed_loop" in a.rounds[0]["val"] and "closed_loop" in a.test
    assert a.val_pdms == a.rounds[a.best_round]["val"]["closed_loop"]["score"]


def test_closed_loop_changes_the_mixture_where_open_loop_sees_no_failure(pools):
    # a constructed disagreement: every val candidate scores PDMS 1 open loop (no failure, the GA step is
    # skipped and the mixture stays w0), while driving the same val routes closed loop does fail somewhere
    import dataclasses

    perfect = dataclasses.replace(pools, val={**pools.val, "cand_scores": np.ones_like(pools.val["cand_scores"])})
    perfect.__dict__["_x"] = pools.__dict__.get("_x", {})
    ol = loop.run(perfect, _cfg(), seed=0)
    cl = loop.run(perfect, _cfg(evaluate="closed-loop"), seed=0)
    assert ol.rounds[0]["ga"] == "skipped: no val failures" and ol.mixtures[1] == ol.mixtures[0]
    assert cl.rounds[0]["ga"] == "step"
    assert not np.allclose(cl.mixtures[1], cl.mixtures[0])
    assert not np.allclose(cl.mixture_average, ol.mixture_average)
    # the selection follows: round 1 draws other synthetic scenes
    assert not np.array_equal(cl.selected[1], ol.selected[1])


def test_closed_loop_refuses_scenes_it_cannot_regenerate(embedded):
    _, arrays, metas, _, _ = embedded
    with pytest.raises(UsageError, match="autoscale-mix pools"):
        CL.routes(arrays["val"], {}, where="val.npz")
    bad = {**arrays["val"], "ego": arrays["val"]["ego"] + 1.0}
    with pytest.raises(UsageError, match="does not match its route"):
        CL.routes(bad, metas["val"], where="val.npz")

"""The simulator on real BFCL contexts and its synthetic tasks."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from methodkit.tools.cita import simulate
from methodkit.tools.cita.contexts import task_contexts
from methodkit.tools.cita.generators import Pools


def test_logged_calls_have_the_highest_simulated_value(bfcl_tasks, graph):
    train, _ = bfcl_tasks
    pools = Pools(train)
    rng = np.random.default_rng(0)
    ctxs = [c for t in train[:15] for c in task_contexts(t, pools, rng)]
    vals = simulate.values(graph, ctxs, simulate.SimConfig(rollouts=64, seed=1))
    by_kind = defaultdict(list)
    for ctx, (mean, std) in zip(ctxs, vals):
        assert mean.shape == std.shape == (len(ctx["candidates"]),)
        for kind, v in zip(ctx["kinds"], mean):
            by_kind[kind].append(v)
    gold = np.mean(by_kind.pop("gold"))
    for kind, v in by_kind.items():
        assert gold > np.mean(v) + 0.1, (kind, gold, np.mean(v))
    # the same seed gives the same values; another seed other draws
    again = simulate.values(graph, ctxs[:5], simulate.SimConfig(rollouts=64, seed=1))
    first = simulate.values(graph, ctxs, simulate.SimConfig(rollouts=64, seed=1))[:5]
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(again, first))


def test_synthetic_tasks_are_contexts_with_goals(graph, bfcl_tasks):
    train, _ = bfcl_tasks
    tasks = simulate.sample_tasks(graph, [t["tools"] for t in train], 30, seed=2)
    assert len(tasks) >= 25
    for t in tasks:
        names = {x["name"] for x in t["tools"]}
        assert set(t["goal"]) <= names
        assert t["candidates"] and len({repr(c) for c in t["candidates"]}) == len(t["candidates"])
        if t["synthetic_grounded"]:  # placeholder arguments of the goal calls are in the instruction
            for call in t["history"]:
                for v in call["call"]["arguments"].values():
                    if isinstance(v, str):
                        assert v in t["instruction"][0]
    vals = simulate.values(graph, tasks, simulate.SimConfig(rollouts=32))
    assert all(np.all((m >= 0) & (m <= 1)) for m, _ in vals)
    assert tasks == simulate.sample_tasks(graph, [t["tools"] for t in train], 30, seed=2)

"""The Megatron-style expert heuristic (issue section 2.7), evaluated with the same cost model."""

from __future__ import annotations

import math

from methodkit.core.errors import RunFailure
from methodkit.tools.concord.candidates import enumerate_candidates, powers_of_two
from methodkit.tools.concord.search import PlanResult, plan
from methodkit.tools.concord.spec import Cluster, Model, Space


def _admitted(model, cluster, space, sigma) -> bool:
    try:
        enumerate_candidates(model, cluster, space, forced=sigma)
        return True
    except Exception:
        return False


def baseline_sigma(model: Model, cluster: Cluster, space: Space) -> tuple[dict, str]:
    """The heuristic's strategy and which rule picked pp (for the report)."""
    n, g = cluster.devices, cluster.per_node
    params = model.param_count()
    seq = int(model.globals["global.seq"])
    cp = seq // 8192 if seq > 16384 else 1
    cp = min(cp, space.cp_max)
    tps = [t for t in powers_of_two(min(g, space.tp_max))]
    usable = cluster.hbm - cluster.values["hw.reserve"]
    if params > 10e9:
        tp = min(8, g, space.tp_max)
    else:  # smallest tp whose model states (distributed optimizer over the rest) fit
        tp = next((t for t in tps if params / t * (6 + 12 / max(n // t, 1)) <= usable), tps[-1])
    if model.is_moe:
        tp = min(tp, 2)
    experts = model.max_experts()
    base = {"tp": tp, "cp": cp, "ep": 1, "etp": 1, "vpp": 1, "mbs": 1, "zero": 1, "rc": 1}
    for rc in (1, 2):  # selective recompute; if nothing fits, full recompute
        for pp in powers_of_two(min(space.pp_max, n)):
            if n % (tp * cp * pp):
                continue
            dp = n // (tp * cp * pp)
            sigma = {**base, "pp": pp, "dp": dp, "rc": rc}
            sigma["vpp"] = 2 if model.blocks // pp >= 8 and pp > 1 and 2 in space.vpp else 1
            if model.is_moe:
                ep = min(experts, 8 * math.ceil(experts / 64), space.ep_max)
                while ep > 1 and (experts % ep or (tp * cp * dp) % ep):
                    ep //= 2
                sigma["ep"] = ep
            if not _admitted(model, cluster, space, sigma):
                continue
            try:
                plan(model, cluster, space, mode="cold", forced=sigma, partition="uniform", top_k=1)
            except RunFailure:
                continue
            return sigma, ("selective" if rc == 1 else "full") + f" recompute, smallest fitting pp={pp}"
    raise RunFailure("the Megatron-style baseline finds no fitting strategy (even with full recompute)")


def baseline(model: Model, cluster: Cluster, space: Space) -> tuple[PlanResult, str]:
    sigma, why = baseline_sigma(model, cluster, space)
    return plan(model, cluster, space, mode="cold", forced=sigma, partition="uniform", top_k=1), why

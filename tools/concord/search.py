"""The search: enumerate, evaluate primitives (warm or cold), partition, rank.

Step(sigma) = (m + (pp-1)/vpp) * max_j t_j + T_dp + T_optimizer, with t_j the
per-microbatch time of stage j. Ranking: Step, then memory headroom (more is
better), then the candidate's lexicographic position.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cache

from methodkit.core.backend import array_module, to_numpy
from methodkit.core.errors import RunFailure
from methodkit.core.progress import silent
from methodkit.tools.concord import kernels, partition_memo
from methodkit.tools.concord.candidates import Candidates, enumerate_candidates
from methodkit.tools.concord.evaluate import WarmValues, base_env, cold_stats, unit_channels
from methodkit.tools.concord.spec import Cluster, Model, Space
from methodkit.tools.concord.templates import SIGMA, dependency_checks, forward_flops, instances_for

GIB = 2.0**30
BISECTION_STEPS = 100
BISECTION_RTOL = 1e-9


@dataclass
class Scored:
    """Per-candidate outcome arrays (aligned with the candidate table)."""

    step: object
    peak: object
    feasible: object
    uniform_chosen: object
    overflow: object  # uniform partition's peak - HBM (for the near-miss report)


@dataclass
class PlanResult:
    model: str
    cluster: str
    devices: int
    mode: str
    candidates: int
    feasible: int
    eliminated: dict
    enumerated: int
    top: list
    layers: list
    reuse: dict
    seconds: dict
    model_flops_per_step: float
    warnings: list = field(default_factory=list)
    hits: list = field(default_factory=list, repr=False)  # for the stale-hit audit (not serialised)
    partition_audit: object = field(default=None, repr=False)  # () -> (audited, stale) over partition hits
    scored: Scored | None = field(default=None, repr=False)

    @property
    def best(self) -> dict:
        return self.top[0]

    def to_dict(self, timings: bool = False) -> dict:
        out = {
            "model": self.model,
            "cluster": self.cluster,
            "devices": self.devices,
            "mode": self.mode,
            "candidates": self.candidates,
            "feasible": self.feasible,
            "enumerated": self.enumerated,
            "eliminated": self.eliminated,
            "step_s": self.best["step_s"],
            "sigma": self.best["sigma"],
            "best": self.best,
            "top_k": self.top,
            "layers": self.layers,
            "reuse": self.reuse,
            "model_flops_per_step": self.model_flops_per_step,
        }
        if timings:  # wall-clock figures make the output differ run to run, so they are opt-in
            out["seconds"] = self.seconds
        return out


def _aggregate(device, ch, p2p, pp, vpp, micro, bounds, n_stages):
    """Per-stage sums: the Numba kernel on the CPU, the array-module twin (CuPy) on 'cuda'."""
    import numpy as np

    if device == "cpu":
        outs = tuple(np.zeros((len(pp), n_stages)) for _ in range(4))
        kernels.stage_aggregate(
            ch["time"], ch["state"], ch["act"], ch["dp"], ch["optimizer"], p2p, pp, vpp, micro, bounds, *outs
        )
        return outs
    from methodkit.tools.concord import aggregate_xp

    xp = array_module(device)
    arrays = [xp.asarray(a) for a in (ch["time"], ch["state"], ch["act"], ch["dp"], ch["optimizer"])]
    rest = [xp.asarray(a) for a in (p2p, pp, vpp, micro, bounds)]
    return tuple(to_numpy(o) for o in aggregate_xp.stage_aggregate(xp, *arrays, *rest, n_stages))


def _score_block(model, cluster, cands, index, warm, stats, partition, device="cpu", memo=None):
    """Evaluate, partition and score the candidates at `index`; returns arrays and the chosen bounds.

    With `memo` (warm plans) each distinct partition row is solved once or served from the cache."""
    import numpy as np

    ch, p2p = unit_channels(model, cluster, cands, index, warm, stats)
    cols = {k: cands.columns[k][index] for k in SIGMA}
    pp, vpp, mbs, dp = cols["pp"], cols["vpp"], cols["mbs"], cols["dp"]
    micro = (int(model.globals["global.batch"]) // (mbs * dp)).astype(np.int64)
    reserve = cluster.values["hw.reserve"]
    transient = ch["transient"].max(axis=1)
    limit = (cluster.hbm - reserve - transient) / vpp
    size, n_units = ch["time"].shape
    width = int((pp * vpp).max()) + 1
    n_stages = int(pp.max())

    def score(bounds):
        st_t, st_m, st_d, st_o = _aggregate(device, ch, p2p, pp, vpp, micro, bounds, n_stages)
        slowest = st_t.max(axis=1)
        step = (micro + (pp - 1) / vpp) * slowest + st_d.max(axis=1) + st_o.max(axis=1)
        peak = st_m.max(axis=1) + transient + reserve
        return step, peak, (st_t, st_m, st_d, st_o)

    uniform = np.zeros((size, width), dtype=np.int64)
    kernels.uniform_partition(n_units, pp, vpp, uniform)
    u_step, u_peak, u_stages = score(uniform)
    u_ok = u_peak <= cluster.hbm
    if partition == "uniform":
        return u_step, u_peak, u_ok, np.ones(size, bool), u_peak - cluster.hbm, uniform, u_stages, ch, p2p
    if memo is not None:
        s_ok, searched = memo.solve(index, ch, p2p, pp, vpp, micro, limit, BISECTION_STEPS, BISECTION_RTOL)
    else:
        searched = np.zeros((size, width), dtype=np.int64)
        s_ok = kernels.partition_min_bottleneck(
            ch["time"], ch["state"], ch["act"], p2p, pp, vpp, micro, limit, searched, BISECTION_STEPS, BISECTION_RTOL
        )
    s_step, s_peak, s_stages = score(searched)
    s_ok &= s_peak <= cluster.hbm
    # the uniform split is one of the partitions the search must not lose to
    take_uniform = u_ok & (~s_ok | (u_step < s_step))
    step = np.where(take_uniform, u_step, np.where(s_ok, s_step, np.inf))
    peak = np.where(take_uniform, u_peak, s_peak)
    bounds = np.where(take_uniform[:, None], uniform, searched)
    stages = tuple(np.where(take_uniform[:, None], a, b) for a, b in zip(u_stages, s_stages))
    return step, peak, u_ok | s_ok, take_uniform, u_peak - cluster.hbm, bounds, stages, ch, p2p


@cache
def _forward_flops_compiled(kind: str):
    expr = forward_flops(kind)
    return None if expr is None else expr.compile()


def model_flops_per_step(model: Model) -> float:
    """Training FLOPs of one step (forward + backward, no recompute), as the compute templates count them."""
    total = 0.0
    sigma = {f"sigma.{k}": 1.0 for k in SIGMA}
    per_sub: dict = {}
    for unit in model.units:
        for sub in unit.sublayers:
            if sub not in per_sub:
                fn = _forward_flops_compiled(sub.kind)
                env = {**model.globals, **sub.value_dict(), **sigma}
                per_sub[sub] = 0.0 if fn is None else float(fn(env, 1)[0])
            total += per_sub[sub]
    return 3.0 * total * model.globals["global.batch"]


def _layer_breakdown(model, cluster, cands, i, bounds, pp):
    """Per-unit time, memory and communication of candidate i (evaluated directly)."""
    import numpy as np

    sigma = {f"sigma.{k}": np.array([float(cands.columns[k][i])]) for k in SIGMA}
    chunk_of = np.zeros(len(model.units), dtype=np.int64)
    for c in range(len(bounds) - 1):
        chunk_of[bounds[c] : bounds[c + 1]] = c
    rows = []
    values: dict = {}
    for u, unit in enumerate(model.units):
        row = {"unit": unit.name, "kinds": "+".join(s.kind for s in unit.sublayers)}
        row["chunk"] = int(chunk_of[u])
        row["stage"] = int(chunk_of[u] % pp)
        if unit.sublayers not in values:
            figures: dict = {}
            for sub in unit.sublayers:
                env = {**base_env(model, cluster, sub), **sigma}
                for inst in instances_for(sub.kind):
                    key = inst.template.id
                    figures[key] = figures.get(key, 0.0) + float(inst.evaluate(env, 1)[0])
            values[unit.sublayers] = figures
        row.update(values[unit.sublayers])
        rows.append(row)
    return rows


def plan(
    model: Model,
    cluster: Cluster,
    space: Space,
    *,
    cache=None,
    mode: str = "warm",
    top_k: int = 10,
    forced: dict | None = None,
    partition: str = "searched",
    progress=silent,
    record_hits: bool = False,
    block: int = 4096,
    explain: bool = True,
    cands: Candidates | None = None,
    device: str = "cpu",
    strict: bool = True,
) -> PlanResult:
    """Plan `model` on `cluster`: warm (signature-keyed, optional persistent cache) or cold (no memo at all).

    `device` ('cpu' or 'cuda', as core.backend resolves it) picks where the per-stage sums run:
    the Numba kernel, or its CuPy twin in aggregate_xp. The partition search stays on the CPU.
    `strict=False` (a diagnostic) lets raw templates read symbols they did not declare.
    """
    with dependency_checks(strict):
        return _plan(model, cluster, space, cache=cache, mode=mode, top_k=top_k, forced=forced,
                     partition=partition, progress=progress, record_hits=record_hits, block=block,
                     explain=explain, cands=cands, device=device, strict=strict)  # fmt: skip


def _plan(model, cluster, space, *, cache, mode, top_k, forced, partition, progress, record_hits, block, explain,
          cands, device, strict) -> PlanResult:  # fmt: skip
    import numpy as np

    if mode not in ("warm", "cold"):
        raise ValueError(f"mode must be warm or cold, not {mode!r}")
    clock = {"start": time.perf_counter()}
    if cands is None:
        cands = enumerate_candidates(model, cluster, space, forced)
    clock["enumerate"] = time.perf_counter()
    if mode == "warm":
        warm = WarmValues(model, cluster, cands, cache, record_hits=record_hits, explain=explain, strict=strict)
        stats = warm.stats
    else:
        warm, stats = None, cold_stats(model)
    memo = None
    if warm is not None and partition != "uniform":
        memo = partition_memo.build(model, cluster, cands, warm, cache, BISECTION_STEPS, BISECTION_RTOL, record_hits)
    clock["primitives"] = time.perf_counter()
    n = len(cands)
    step = np.empty(n)
    peak = np.empty(n)
    feasible = np.empty(n, dtype=bool)
    uniform = np.empty(n, dtype=bool)
    overflow = np.empty(n)
    blocks = range(0, n, block)
    progress("search", 0, len(blocks))
    for done, start in enumerate(blocks, start=1):
        index = np.arange(start, min(start + block, n))
        s, p, ok, u, over, *_ = _score_block(model, cluster, cands, index, warm, stats, partition, device, memo)
        step[index], peak[index], feasible[index], uniform[index], overflow[index] = s, p, ok, u, over
        progress("search", done, len(blocks))
    clock["search"] = time.perf_counter()
    scored = Scored(step, peak, feasible, uniform, overflow)
    n_feasible = int(feasible.sum())
    if n_feasible == 0:
        raise RunFailure(_near_miss(cands, scored, cluster, n))
    headroom = cluster.hbm - peak
    order = np.lexsort((np.arange(n), -headroom, step))
    order = order[feasible[order]][:top_k]
    flops = model_flops_per_step(model)
    top = _describe(model, cluster, cands, order, warm, partition, step, headroom, flops, device, memo)
    if memo is not None and cache is not None and memo.misses:  # nothing new solved: the entry stands
        cache.store([e for e in [memo.entry()] if e is not None])
    best_bounds = top[0]["partition"]["unit_bounds"]
    layers = _layer_breakdown(model, cluster, cands, int(order[0]), best_bounds, top[0]["sigma"]["pp"])
    clock["report"] = time.perf_counter()
    seconds = {
        "enumerate": clock["enumerate"] - clock["start"],
        "primitives": clock["primitives"] - clock["enumerate"],
        "search": clock["search"] - clock["primitives"],
        "report": clock["report"] - clock["search"],
        "total": clock["report"] - clock["start"],
    }
    return PlanResult(
        model=model.name,
        cluster=cluster.name,
        devices=cluster.devices,
        mode=mode,
        candidates=n,
        feasible=n_feasible,
        eliminated=cands.eliminated,
        enumerated=cands.enumerated,
        top=top,
        layers=layers,
        reuse={**stats.to_dict(), **({"partitions": memo.to_dict()} if memo is not None else {})},
        seconds=seconds,
        model_flops_per_step=flops,
        warnings=list(getattr(cache, "warnings", []) or []),
        hits=warm.hits if warm is not None else [],
        scored=scored,
        partition_audit=None if memo is None else _partition_audit(memo, model, cluster, cands, strict),
    )


def _partition_audit(memo, model, cluster, cands, strict):
    def run(limit=None):
        with dependency_checks(strict):  # the cold re-solve reads templates as the plan did
            return partition_memo.audit(memo.audit, model, cluster, cands, limit)

    return run


def _describe(model, cluster, cands, order, warm, partition, step, headroom, flops, device="cpu", memo=None):
    if len(order) == 0:
        return []
    # rescoring the few winners with the same code reproduces their partitions and stage figures
    s, p, ok, u, over, bounds, stages, ch, p2p = _score_block(
        model, cluster, cands, order, warm, None, partition, device, memo
    )
    st_t, st_m, st_d, st_o = stages
    out = []
    for rank, i in enumerate(order):
        i = int(i)
        sigma = cands.sigma(i)
        pp, vpp = sigma["pp"], sigma["vpp"]
        nchunks = pp * vpp
        b = [int(x) for x in bounds[rank, : nchunks + 1]]
        micro = int(model.globals["global.batch"]) // (sigma["mbs"] * sigma["dp"])
        assert s[rank] == step[i]
        out.append(
            {
                "rank": rank + 1,
                "index": i,
                "sigma": sigma,
                "step_s": float(step[i]),
                "microbatches": micro,
                "bubble_fraction": float((pp - 1) / vpp / (micro + (pp - 1) / vpp)),
                "peak_bytes": float(p[rank]),
                "peak_gib": float(p[rank] / GIB),
                "headroom_bytes": float(headroom[i]),
                "tflops_per_device": float(flops / step[i] / cluster.devices / 1e12),
                "partition": {
                    "kind": "uniform" if u[rank] else "searched",
                    "unit_bounds": b,
                    "blocks_per_chunk": [
                        sum(1 for x in range(b[c], b[c + 1]) if model.units[x].name.startswith("block"))
                        for c in range(nchunks)
                    ],
                },
                "stage_time_s": [float(x) for x in st_t[rank, :pp]],
                "stage_memory_bytes": [float(x) for x in st_m[rank, :pp] + ch["transient"][rank].max()],
                "stage_dp_sync_s": [float(x) for x in st_d[rank, :pp]],
                "stage_optimizer_s": [float(x) for x in st_o[rank, :pp]],
                **_stage_memory_split(ch, rank, b, pp, vpp, micro),
                "p2p_s": float(p2p[rank]),
            }
        )
    return out


def _stage_memory_split(ch, rank: int, bounds: list, pp: int, vpp: int, micro: int) -> dict:
    """Per stage: weights + gradients + optimizer state, activations of the microbatches in flight, and the
    most microbatches in flight on any of its chunks (1F1B; Megatron's memory report splits it this way).
    stage_memory_bytes = state + activation + the transient, to rounding."""
    inflight = getattr(kernels.inflight, "py_func", kernels.inflight)
    state, act, most = [0.0] * pp, [0.0] * pp, [0.0] * pp
    for c in range(pp * vpp):
        j = c % pp
        n = inflight(c, pp, vpp, micro)
        units = range(bounds[c], bounds[c + 1])
        state[j] += float(sum(ch["state"][rank, u] for u in units))
        act[j] += float(n * sum(ch["act"][rank, u] for u in units))
        most[j] = max(most[j], float(n))
    return {"stage_state_bytes": state, "stage_activation_bytes": act, "stage_inflight_microbatches": most}


def _near_miss(cands, scored, cluster, n) -> str:
    import numpy as np

    i = int(np.argmin(scored.overflow))
    sigma = cands.sigma(i)
    text = ",".join(f"{k}={v}" for k, v in sigma.items() if k != "sp")
    over = scored.overflow[i] / GIB
    return (
        f"no feasible candidate among {n}: the closest miss ({text}) needs "
        f"{(scored.overflow[i] + cluster.hbm) / GIB:.2f} GiB on its fullest stage, "
        f"{over:.2f} GiB over the {cluster.hbm / GIB:.2f} GiB HBM; add devices or allow more pp/recompute in --space"
    )

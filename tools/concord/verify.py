"""Equivalence checks (issue section 2.6) and the sweep over fixtures x edits x trials."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field

from methodkit.core.progress import silent
from methodkit.tools.concord.cache import Cache
from methodkit.tools.concord.search import PlanResult, plan


def _same_float(a: float, b: float) -> bool:
    import struct

    return struct.pack("<d", a) == struct.pack("<d", b)


def compare(warm: PlanResult, cold: PlanResult) -> dict:
    """Field-by-field agreement of a warm and a cold plan (Step compared bitwise)."""
    top1 = warm.best["sigma"] == cold.best["sigma"] and warm.best["partition"] == cold.best["partition"]
    top1_step = _same_float(warm.best["step_s"], cold.best["step_s"])
    topk = len(warm.top) == len(cold.top) and all(
        a["sigma"] == b["sigma"] and a["partition"] == b["partition"] and _same_float(a["step_s"], b["step_s"])
        for a, b in zip(warm.top, cold.top)
    )
    import numpy as np

    steps_equal = bool(
        np.array_equal(warm.scored.step.view(np.uint64), cold.scored.step.view(np.uint64))
        and np.array_equal(warm.scored.feasible, cold.scored.feasible)
    )
    return {
        "candidates_equal": warm.candidates == cold.candidates,
        "feasible_equal": warm.feasible == cold.feasible,
        "top1_equal": bool(top1 and top1_step),
        "topk_equal": bool(topk),
        "all_steps_bitwise_equal": steps_equal,
    }


def audit(warm: PlanResult, limit: int | None = None) -> tuple[int, int]:
    """Recompute cached hits cold and compare their floats bitwise: (audited, mismatches)."""
    import numpy as np

    hits = warm.hits if limit is None else warm.hits[:limit]
    bad = 0
    for hit in hits:
        fresh = hit.inst.evaluate({**hit.env, **hit.projection.rows}, hit.projection.size)
        if fresh.shape != hit.value.shape or not np.array_equal(fresh.view(np.uint64), hit.value.view(np.uint64)):
            bad += 1
    return len(hits), bad


@dataclass
class Trial:
    trial: int
    candidates_warm: int
    candidates_cold: int
    feasible_warm: int
    feasible_cold: int
    top1_match: bool
    topk_match: bool
    steps_bitwise: bool
    cold_s: float
    warm_s: float
    warm_nocache_s: float
    fill_s: float
    hits: int
    misses: int
    intra_run_reuse: int
    audited: int
    stale_mismatches: int
    partition_hits: int
    partition_misses: int
    audited_partitions: int
    stale_partitions: int
    top1_step_s: float
    top1_sigma: str

    @property
    def ok(self) -> bool:
        return (
            self.candidates_warm == self.candidates_cold
            and self.feasible_warm == self.feasible_cold
            and self.top1_match
            and self.topk_match
            and self.steps_bitwise
            and self.stale_mismatches == 0
            and self.stale_partitions == 0
        )

    def to_dict(self) -> dict:
        out = dict(self.__dict__)
        out["speedup"] = self.cold_s / self.warm_s if self.warm_s > 0 else None
        out["cache_speedup"] = self.warm_nocache_s / self.warm_s if self.warm_s > 0 else None
        out["ok"] = self.ok
        return out


def _sigma_text(sigma: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in sigma.items() if k != "sp")


def run_trial(
    old, new, cluster_old, cluster_new, space, trial=0, audit_limit=None, top_k=10, cache_dir=None, device="cpu",
    strict=True,
):  # fmt: skip
    """Fill a fresh cache by planning `old`, then warm re-plan `new` and compare with a cold full search."""
    with tempfile.TemporaryDirectory(prefix="concord-trial-", dir=cache_dir) as folder:
        cache = Cache(folder)
        try:
            t0 = time.perf_counter()
            plan(old, cluster_old, space, cache=cache, mode="warm", top_k=top_k, device=device, strict=strict)
            t1 = time.perf_counter()
            warm = plan(new, cluster_new, space, cache=cache, mode="warm", top_k=top_k, record_hits=True, device=device,
                        strict=strict)  # fmt: skip
            t2 = time.perf_counter()
        finally:
            cache.close()
    cold = plan(new, cluster_new, space, mode="cold", top_k=top_k, device=device, strict=strict)
    t3 = time.perf_counter()
    # the third column: warm (each distinct layer evaluated once) with an empty cache, so the persistent
    # cache's own share (warm_nocache_s / warm_s) is told apart from the memo's (cold_s / warm_nocache_s)
    plan(new, cluster_new, space, cache=None, mode="warm", top_k=top_k, device=device, strict=strict)
    t4 = time.perf_counter()
    same = compare(warm, cold)
    audited, stale = audit(warm, audit_limit)
    p_audited, p_stale = warm.partition_audit(audit_limit) if warm.partition_audit is not None else (0, 0)
    parts = warm.reuse.get("partitions", {})
    return Trial(
        trial=trial,
        candidates_warm=warm.candidates,
        candidates_cold=cold.candidates,
        feasible_warm=warm.feasible,
        feasible_cold=cold.feasible,
        top1_match=same["top1_equal"],
        topk_match=same["topk_equal"],
        steps_bitwise=same["all_steps_bitwise_equal"],
        cold_s=t3 - t2,
        warm_s=t2 - t1,
        warm_nocache_s=t4 - t3,
        fill_s=t1 - t0,
        hits=warm.reuse["hits"],
        misses=warm.reuse["misses"],
        intra_run_reuse=warm.reuse["intra_run_reuse"],
        audited=audited,
        stale_mismatches=stale,
        partition_hits=parts.get("hits", 0),
        partition_misses=parts.get("misses", 0),
        audited_partitions=p_audited,
        stale_partitions=p_stale,
        top1_step_s=cold.best["step_s"],
        top1_sigma=_sigma_text(cold.best["sigma"]),
    ), warm


@dataclass
class VerifyReport:
    trials: list
    miss_reasons: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.trials)

    def to_dict(self) -> dict:
        import statistics

        speedups = [t.cold_s / t.warm_s for t in self.trials if t.warm_s > 0]
        cache = [t.warm_nocache_s / t.warm_s for t in self.trials if t.warm_s > 0]
        return {
            "equivalent": self.ok,
            "trials": [t.to_dict() for t in self.trials],
            "median_speedup": statistics.median(speedups) if speedups else None,
            "median_cache_speedup": statistics.median(cache) if cache else None,
            "stale_mismatches": sum(t.stale_mismatches + t.stale_partitions for t in self.trials),
            "audited_hits": sum(t.audited for t in self.trials),
            "stale_partition_mismatches": sum(t.stale_partitions for t in self.trials),
            "audited_partition_hits": sum(t.audited_partitions for t in self.trials),
            "miss_reasons": self.miss_reasons,
        }


def verify(
    old, new, cluster, space, *, trials=3, audit_limit=None, top_k=10, progress=silent, new_cluster=None, device="cpu",
    strict=True,
):  # fmt: skip
    out = []
    reasons: list = []
    progress("verify", 0, trials)
    for k in range(trials):
        trial, warm = run_trial(old, new, cluster, new_cluster or cluster, space, k, audit_limit, top_k, device=device,
                                strict=strict)  # fmt: skip
        out.append(trial)
        reasons = warm.reuse["miss_reasons"]
        progress("verify", k + 1, trials)
    return VerifyReport(out, _summarise_reasons(reasons))


def _summarise_reasons(reasons: list) -> list:
    counts: dict = {}
    for r in reasons:
        key = (r["template"], r["kind"], r["reason"])
        counts[key] = counts.get(key, 0) + 1
    return [{"template": t, "kind": k, "reason": r, "count": c} for (t, k, r), c in sorted(counts.items())]


def sweep(fixtures: list, edits: list, *, trials=3, audit_limit=None, progress=silent):
    """One row per (fixture, edit, trial). `fixtures`: [(name, model_doc, cluster_doc, space_doc)]."""
    from methodkit.tools.concord import spec
    from methodkit.tools.concord.fixtures import apply_edit

    rows = []
    total = len(fixtures) * len(edits) * trials
    done = 0
    progress("sweep", 0, total)
    for name, model_doc, cluster_doc, space_doc in fixtures:
        space = spec.load_space(space_doc, f"{name} space")
        old = spec.load_model(model_doc, f"{name} model")
        cluster = spec.load_cluster(cluster_doc, f"{name} cluster")
        for edit in edits:
            m2, c2 = apply_edit(model_doc, cluster_doc, edit)
            new = spec.load_model(m2, f"{name} model ({edit.get('name')})")
            cluster_new = spec.load_cluster(c2, f"{name} cluster ({edit.get('name')})")
            for k in range(trials):
                trial, _ = run_trial(old, new, cluster, cluster_new, space, k, audit_limit)
                rows.append({"fixture": name, "edit": edit.get("name", edit.get("op")), **trial.to_dict()})
                done += 1
                progress("sweep", done, total)
    return rows

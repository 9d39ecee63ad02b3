"""Tables for `explain`: per-layer figures of a plan, and why cache misses happened."""

from __future__ import annotations

from methodkit.core.errors import DataError


def layer_rows(plan: dict) -> list[dict]:
    best = plan["best"]
    stage_time = best.get("stage_time_s", [])
    stage_mem = best.get("stage_memory_bytes", [])
    stage_state = best.get("stage_state_bytes", [])
    stage_act = best.get("stage_activation_bytes", [])
    stage_inflight = best.get("stage_inflight_microbatches", [])
    rows = []
    for i, layer in enumerate(plan["layers"]):
        if not isinstance(layer, dict) or "stage" not in layer:
            raise DataError(f"plan: layers[{i}] lacks 'stage'")
        j = layer["stage"]
        time_s = sum(layer.get(k, 0.0) for k in ("compute", "tp_comm", "cp_exposed", "ep_comm", "zero3_comm"))
        rows.append(
            {
                "unit": layer["unit"],
                "kinds": layer["kinds"],
                "stage": j,
                "chunk": layer["chunk"],
                "time_mb_s": time_s,
                "compute_s": layer.get("compute", 0.0),
                "comm_s": time_s - layer.get("compute", 0.0),
                "activation_gib": layer.get("activation", 0.0) / 2**30,
                "state_gib": layer.get("state", 0.0) / 2**30,
                "dp_sync_s": layer.get("dp_sync", 0.0),
                "optimizer_s": layer.get("optimizer", 0.0),
                "params": layer.get("params_dense", 0.0) + layer.get("params_expert", 0.0),
                "stage_time_mb_s": stage_time[j] if j < len(stage_time) else None,
                "stage_memory_gib": stage_mem[j] / 2**30 if j < len(stage_mem) else None,
                "stage_state_gib": stage_state[j] / 2**30 if j < len(stage_state) else None,
                "stage_activation_gib": stage_act[j] / 2**30 if j < len(stage_act) else None,
                "stage_inflight_mb": stage_inflight[j] if j < len(stage_inflight) else None,
            }
        )
    return rows


def reuse_rows(plan: dict) -> list[dict]:
    reuse = plan.get("reuse") or {}
    reasons = reuse.get("miss_reasons") or []
    parts = reuse.get("partitions") or {}
    why = parts.get("miss_reason", "") if parts.get("misses") else ""
    if not reasons:
        by = reuse.get("by_template") or {}
        rows = [
            {"template": t, "hits": v.get("hits", 0), "misses": v.get("misses", 0), "reason": ""} for t, v in by.items()
        ]
        if parts:  # partition rows served from the cache / solved in this run
            rows.append({"template": "partition", "hits": parts["hits"], "misses": parts["misses"], "reason": why})
        return rows
    counts: dict = {}
    for r in reasons:
        key = (r["template"], r["kind"], r["reason"])
        counts[key] = counts.get(key, 0) + 1
    rows = [{"template": t, "kind": k, "misses": c, "reason": r} for (t, k, r), c in sorted(counts.items())]
    if parts.get("misses"):
        rows.append({"template": "partition", "kind": "rows", "misses": parts["misses"], "reason": why})
    return rows


def current_templates() -> dict:
    """template id -> {(version, code hash)} over every layer kind."""
    from methodkit.tools.concord.templates import KINDS, TEMPLATES, instance

    out: dict = {}
    for t in TEMPLATES:
        for kind in KINDS:
            inst = instance(t.id, kind)
            if inst is not None:
                out.setdefault(t.id, set()).add((t.version, inst.code_hash))
    from methodkit.tools.concord import partition_memo

    out[partition_memo.TEMPLATE_ID] = {(partition_memo.VERSION, partition_memo.kernel_hash())}
    return out

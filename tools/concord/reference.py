"""Check the cost model against published throughput (Narayanan et al. 2021, Table 1).

For each published row we build the GPT model and a Selene-like cluster of the row's size,
fix what the paper fixes (tp, pp, dp = GPUs/(tp*pp), full recompute, no ZeRO, Megatron's
uniform layer split), search what the table leaves open (microbatch size and interleaved
stages), and turn the predicted step time into the paper's metric: Eq. 3 FLOPs (recompute
included) / (step * GPUs). The ratio predicted / published is the check (+-20% by default).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from methodkit.core.errors import DataError, RunFailure
from methodkit.core.progress import silent
from methodkit.tools.concord import narayanan2021, spec
from methodkit.tools.concord.spec import RECOMPUTE, _number, _Problems

REQUIRED = ("heads", "hidden", "layers", "tp", "pp", "gpus", "batch", "tflops_per_gpu")


@dataclass
class ReferenceTable:
    source: str
    setting: dict
    cluster: dict
    rows: list


@dataclass
class ReferenceResult:
    source: str
    tolerance: float
    rows: list = field(default_factory=list)

    @property
    def within(self) -> int:
        return sum(1 for r in self.rows if r["within"])

    def summary(self) -> dict:
        ratios = [r["ratio"] for r in self.rows]
        return {
            "source": self.source,
            "rows": len(self.rows),
            "within": self.within,
            "tolerance": self.tolerance,
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
            "ratio_median": sorted(ratios)[len(ratios) // 2] if len(ratios) % 2 else
            0.5 * (sorted(ratios)[len(ratios) // 2 - 1] + sorted(ratios)[len(ratios) // 2]),
        }  # fmt: skip


def builtin_table() -> dict:
    return narayanan2021.table()


def load_table(doc, name: str = "reference") -> ReferenceTable:
    """Validate a reference table document (key paths named in the one-line error)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list) or not doc["rows"]:
        raise DataError(f"{name}: expected a mapping with 'rows' (a non-empty list), 'setting' and 'cluster'")
    problems = _Problems(name)
    setting = {**narayanan2021.SETTING, **(doc.get("setting") or {})}
    if setting.get("recompute") not in RECOMPUTE:
        problems.add("setting.recompute", f"expected one of {', '.join(RECOMPUTE)}, got {setting.get('recompute')!r}")
    for key in ("seq", "vocab"):
        _number(setting, key, "setting.", problems, integer=True)
    _number(setting, "zero", "setting.", problems, integer=True, positive=False)
    cluster = doc.get("cluster", narayanan2021.SELENE)
    if not isinstance(cluster, dict):
        problems.add("cluster", "expected a cluster mapping (links, peak_flops, hbm, ...)")
    rows = []
    for i, row in enumerate(doc["rows"]):
        path = f"rows[{i}]."
        if not isinstance(row, dict):
            problems.add(f"rows[{i}]", "expected a mapping")
            continue
        clean = dict(row)
        for key in REQUIRED:
            clean[key] = _number(row, key, path, problems, integer=key != "tflops_per_gpu")
        if clean["hidden"] % clean["heads"]:
            problems.add(f"{path}hidden", f"{clean['hidden']} is not divisible by heads {clean['heads']}")
        if clean["gpus"] % (clean["tp"] * clean["pp"]):
            problems.add(f"{path}gpus", f"{clean['gpus']} is not a multiple of tp*pp = {clean['tp'] * clean['pp']}")
        rows.append(clean)
    problems.raise_if_any()
    if isinstance(cluster, dict):  # validated for real with each row's device count
        spec.load_cluster({**cluster, "devices": max(r["gpus"] for r in rows)}, f"{name}: cluster")
    return ReferenceTable(str(doc.get("source", name)), setting, cluster, rows)


def model_doc(row: dict, setting: dict) -> dict:
    h, heads = row["hidden"], row["heads"]
    return {
        "name": f"gpt-{row.get('params_b', '?')}b",
        "hidden": h,
        "vocab": setting["vocab"],
        "seq": setting["seq"],
        "global_batch": row["batch"],
        "norm": setting.get("norm", "layernorm"),
        "tie_embeddings": bool(setting.get("tie_embeddings", True)),
        "flash_attention": bool(setting.get("flash_attention", False)),
        "layers": [
            {
                "count": row["layers"],
                "attention": {"heads": heads, "kv_heads": heads, "head_dim": h // heads},
                "mlp": {"kind": "dense", "ffn": 4 * h, "activation": setting.get("activation", "gelu")},
            }
        ],
    }


def paper_flops(row: dict, setting: dict) -> float:
    """Eq. 3 of the paper: FLOPs per iteration with activation recomputation, GEMMs only."""
    b, s, v = row["batch"], setting["seq"], setting["vocab"]
    layers, h = row["layers"], row["hidden"]
    return 96.0 * b * s * layers * h * h * (1 + s / (6 * h) + v / (16 * layers * h))


def paper_params(row: dict, setting: dict) -> float:
    """Eq. 2 of the paper: P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h))."""
    layers, h, v, s = row["layers"], row["hidden"], setting["vocab"], setting["seq"]
    return 12.0 * layers * h * h * (1 + 13 / (12 * h) + (v + s) / (12 * layers * h))


def check(
    table: ReferenceTable,
    *,
    tolerance: float = 0.2,
    mbs: tuple = (1, 2, 4, 8),
    vpp: tuple = (1, 2, 4),
    partition: str = "uniform",
    progress=silent,
) -> ReferenceResult:
    """Predicted vs published per-GPU TFLOP/s for every row (best microbatch size and vpp)."""
    from methodkit.tools.concord.search import plan

    result = ReferenceResult(table.source, tolerance)
    rc = RECOMPUTE.index(table.setting["recompute"])
    progress("reference", 0, len(table.rows))
    for done, row in enumerate(table.rows, start=1):
        model = spec.load_model(model_doc(row, table.setting), f"rows[{done - 1}]")
        cluster = spec.load_cluster({**copy.deepcopy(table.cluster), "devices": row["gpus"]}, "cluster")
        dp = row["gpus"] // (row["tp"] * row["pp"])
        flops = paper_flops(row, table.setting)
        tried = []
        for m in mbs:
            for v in vpp:
                forced = {"tp": row["tp"], "cp": 1, "pp": row["pp"], "ep": 1, "etp": 1, "vpp": v, "mbs": m}
                forced.update({"zero": int(table.setting["zero"]), "rc": rc, "dp": dp})
                if v > 1 and row["pp"] == 1:
                    continue
                try:
                    out = plan(model, cluster, spec.Space(), mode="cold", forced=forced, partition=partition,
                               top_k=1, explain=False)  # fmt: skip
                except RunFailure:  # not admitted (batch, layers) or does not fit in memory
                    continue
                tried.append((out.best["step_s"], m, v, out.best))
        if not tried:
            raise RunFailure(
                f"rows[{done - 1}] ({row.get('params_b', '?')}B, tp={row['tp']}, pp={row['pp']}): "
                "no microbatch size / vpp fits the cost model's memory; widen --mbs/--vpp"
            )
        tried.sort(key=lambda x: (x[0], x[1], x[2]))
        step, m, v, best = tried[0]
        predicted = flops / step / row["gpus"] / 1e12
        ratio = predicted / row["tflops_per_gpu"]
        worst = flops / tried[-1][0] / row["gpus"] / 1e12
        result.rows.append(
            {
                "params_b": row.get("params_b"),
                "model_params_b": round(model.param_count() / 1e9, 2),
                "layers": row["layers"],
                "hidden": row["hidden"],
                "gpus": row["gpus"],
                "tp": row["tp"],
                "pp": row["pp"],
                "dp": dp,
                "batch": row["batch"],
                "mbs": m,
                "vpp": v,
                "published_tflops": float(row["tflops_per_gpu"]),
                "predicted_tflops": round(predicted, 2),
                "ratio": round(ratio, 4),
                "within": abs(ratio - 1.0) <= tolerance,
                "predicted_percent_peak": round(100 * predicted * 1e12 / cluster.values["hw.peak"], 1),
                "step_s": best["step_s"],
                "bubble_fraction": round(best["bubble_fraction"], 4),
                "peak_gib": round(best["peak_gib"], 2),
                "worst_knob_tflops": round(worst, 2),
                "configs_fitting": len(tried),
            }
        )
        progress("reference", done, len(table.rows))
    return result

"""Built-in fixtures (hand-copied from public model cards and papers) and the six model edits.

9 fixtures x 6 edits = the 54 cells of the paper's warm re-planning experiment.
"""

from __future__ import annotations

import copy

from methodkit.core.errors import DataError


def _dense(name, hidden, layers, heads, kv, ffn, vocab, seq, batch, activation="swiglu", norm="rmsnorm"):
    return {
        "name": name,
        "hidden": hidden,
        "vocab": vocab,
        "seq": seq,
        "global_batch": batch,
        "norm": norm,
        "layers": [
            {
                "count": layers,
                "attention": {"heads": heads, "kv_heads": kv, "head_dim": hidden // heads},
                "mlp": {"kind": "dense", "ffn": ffn, "activation": activation},
            }
        ],
    }


def _moe(name, hidden, layers, heads, kv, experts, top_k, moe_ffn, vocab, seq, batch, shared=0, dense_first=0, ffn=0):
    runs = []
    attention = {"heads": heads, "kv_heads": kv, "head_dim": hidden // heads}
    if dense_first:
        runs.append({"count": dense_first, "attention": attention, "mlp": {"kind": "dense", "ffn": ffn}})
    runs.append(
        {
            "count": layers - dense_first,
            "attention": attention,
            "mlp": {"kind": "moe", "experts": experts, "top_k": top_k, "moe_ffn": moe_ffn, "shared_ffn": shared},
        }
    )
    return {"name": name, "hidden": hidden, "vocab": vocab, "seq": seq, "global_batch": batch, "layers": runs}


MODELS = {
    "gpt3-175b": _dense("gpt3-175b", 12288, 96, 96, 96, 4 * 12288, 51200, 2048, 1536, "gelu", "layernorm"),
    "llama2-70b": _dense("llama2-70b", 8192, 80, 64, 8, 28672, 32000, 4096, 1024),
    "llama3-405b": _dense("llama3-405b", 16384, 126, 128, 8, 53248, 128256, 8192, 2048),
    "mixtral-8x7b": _moe("mixtral-8x7b", 4096, 32, 32, 8, 8, 2, 14336, 32000, 4096, 1024),
    "mixtral-8x22b": _moe("mixtral-8x22b", 6144, 56, 48, 8, 8, 2, 16384, 32768, 4096, 1024),
    # MLA planned as GQA with MLA's parameter count (q_lora 1536, kv_lora 512, rope 64, v 128)
    "deepseek-v3-like": _moe(
        "deepseek-v3-like", 7168, 61, 128, 128, 256, 8, 2048, 129280, 4096, 2048, shared=2048, dense_first=3, ffn=18432
    ),
    "moe-438b": _moe("moe-438b", 8192, 64, 64, 8, 64, 2, 16384, 32000, 4096, 2048),
    "llama-70b-32k": _dense("llama-70b-32k", 8192, 80, 64, 8, 28672, 32000, 32768, 128),
}
for _run in MODELS["deepseek-v3-like"]["layers"]:
    _run["attention"]["head_dim"] = 128
    _run["attention"]["params"] = (
        1536 * (7168 + 128 * 192 + 1) + 512 * (7168 + 128 * 256 + 1) + 7168 * 64 + 16384 * 7168
    )


def _cluster(name, devices, peak, hbm_bw, nvlink, inter):
    return {
        "name": name,
        "devices": devices,
        "devices_per_node": 8,
        "hbm": "80GiB",
        "hbm_bandwidth": hbm_bw,
        "peak_flops": peak,
        "eta_max": 0.6,
        "eta_x0": 128,
        "reserve": "2.5GiB",
        "links": {
            "nvlink": {"bandwidth": nvlink, "latency": "5us"},
            "inter": {"bandwidth": inter, "latency": "10us"},
        },
    }


def a100(devices):
    return _cluster(f"a100-80gb-{devices}", devices, "312TFLOP/s", "2.0TB/s", "300GB/s", "25GB/s")


def h100(devices):
    return _cluster(f"h100-80gb-{devices}", devices, "989TFLOP/s", "3.35TB/s", "450GB/s", "50GB/s")


FIXTURES = [
    ("gpt3-175b-a100-1024", "gpt3-175b", a100(1024)),
    ("llama2-70b-a100-512", "llama2-70b", a100(512)),
    ("llama3-405b-h100-2048", "llama3-405b", h100(2048)),
    ("mixtral-8x7b-h100-256", "mixtral-8x7b", h100(256)),
    ("mixtral-8x22b-h100-512", "mixtral-8x22b", h100(512)),
    ("deepseek-v3-like-h100-4096", "deepseek-v3-like", h100(4096)),
    ("moe-438b-a100-2048", "moe-438b", a100(2048)),
    ("llama-70b-32k-h100-1024", "llama-70b-32k", h100(1024)),
    ("gpt3-175b-h100-512", "gpt3-175b", h100(512)),
]

# The sweep's strategy space (our choice, to fit 54 cells x 3 trials in the 30-minute budget on 2 cores).
SWEEP_SPACE = {"tp_max": 8, "cp_max": 4, "pp_max": 32, "ep_max": 32, "etp_max": 1, "vpp": [1, 2], "mbs": [1, 2]}
# Long context: few microbatches per pipeline (B = 128 at 32k), so deeper interleaving pays off.
LONG_CONTEXT_SPACE = {**SWEEP_SPACE, "cp_max": 8, "vpp": [1, 2, 4, 8]}

EDITS = [
    {"name": "seq_x2", "op": "scale", "key": "seq", "factor": 2},
    {"name": "layers_plus4", "op": "add_layers", "count": 4},
    {"name": "experts_or_ffn", "op": "experts_or_ffn"},
    {"name": "vocab", "op": "set", "key": "vocab", "value": 65536},
    {"name": "batch_x2", "op": "scale", "key": "global_batch", "factor": 2},
    {"name": "inter_bw_x2", "op": "cluster_inter_bw", "factor": 2},
]


def fixture_docs(name: str) -> tuple[dict, dict, dict]:
    for fname, model, cluster in FIXTURES:
        if fname == name:
            space = LONG_CONTEXT_SPACE if MODELS[model]["seq"] > 16384 else SWEEP_SPACE
            return copy.deepcopy(MODELS[model]), copy.deepcopy(cluster), dict(space)
    raise DataError(f"unknown fixture {name!r} (known: {', '.join(f for f, _, _ in FIXTURES)})")


def apply_edit(model: dict, cluster: dict, edit: dict) -> tuple[dict, dict]:
    """Return edited copies of a model and cluster spec."""
    model, cluster = copy.deepcopy(model), copy.deepcopy(cluster)
    op = edit.get("op")
    name = edit.get("name", op)
    if op == "scale":
        key = edit["key"]
        if key not in model:
            raise DataError(f"edit {name}: model has no key {key!r}")
        model[key] = int(model[key] * edit["factor"])
    elif op == "set":
        model[edit["key"]] = edit["value"]
    elif op == "add_layers":
        model["layers"][-1]["count"] += int(edit.get("count", 4))
    elif op == "experts_or_ffn":
        mlp = model["layers"][-1]["mlp"]
        if mlp.get("kind") == "moe":
            mlp["top_k"] = min(mlp["top_k"] + 1, mlp["experts"])
        else:
            mlp["ffn"] = int(mlp["ffn"] * 5 // 4)
    elif op == "cluster_inter_bw":
        from methodkit.tools.concord.units import parse

        bw = parse(cluster["links"]["inter"]["bandwidth"], "bandwidth")
        cluster["links"]["inter"]["bandwidth"] = bw * edit.get("factor", 2)
    elif op == "cluster_hbm":
        from methodkit.tools.concord.units import parse

        cluster["hbm"] = parse(cluster["hbm"], "bytes") * edit.get("factor", 1.25)
    else:
        raise DataError(
            f"edit {name}: unknown op {op!r} (known: scale, set, add_layers, experts_or_ffn, cluster_inter_bw, cluster_hbm)"
        )
    return model, cluster


def listing() -> list[dict]:
    from methodkit.tools.concord import spec

    rows = []
    for name, model_name, cluster in FIXTURES:
        model = spec.load_model(MODELS[model_name], model_name)
        rows.append(
            {
                "fixture": name,
                "model": model_name,
                "cluster": cluster["name"],
                "devices": cluster["devices"],
                "blocks": model.blocks,
                "params_b": round(model.param_count() / 1e9, 2),
                "seq": MODELS[model_name]["seq"],
            }
        )
    return rows


def check_target(folder: str) -> None:
    """Refuse a target folder whose parent does not exist (it would be created silently, like mkdir -p)."""
    import os
    from pathlib import Path

    from methodkit.core.errors import UsageError

    parent = Path(os.path.abspath(folder)).parent
    if not parent.is_dir():
        raise UsageError(f"{folder}: folder {parent} does not exist; create it first (mkdir -p {parent})")


def export(folder: str, *, force: bool = False) -> None:
    """Write models/, clusters/, spaces/, fixtures.yaml, edits.yaml, the edited models of the demo and
    reference/narayanan2021-table1.yaml (published throughput, for `concord-plan reference`)."""
    from pathlib import Path

    import yaml

    from methodkit.core.io import atomic_write

    root = Path(folder)
    for sub in ("models", "clusters", "spaces", "reference"):
        (root / sub).mkdir(parents=True, exist_ok=True)

    def write(path: Path, doc) -> None:
        if path.exists() and not force:
            same = path.read_text() == yaml.safe_dump(doc, sort_keys=False)
            if same:
                return
        with atomic_write(path, force=force) as handle:
            handle.write(yaml.safe_dump(doc, sort_keys=False).encode())

    for name, doc in MODELS.items():
        write(root / "models" / f"{name}.yaml", doc)
        for edit in EDITS:
            if edit["op"] not in ("cluster_inter_bw", "cluster_hbm"):
                edited, _ = apply_edit(doc, {}, edit)
                write(root / "models" / f"{name}.{edit['name']}.yaml", edited)
    for _, _, cluster in FIXTURES:
        write(root / "clusters" / f"{cluster['name']}.yaml", cluster)
    write(root / "spaces" / "sweep.yaml", SWEEP_SPACE)
    write(root / "spaces" / "long-context.yaml", LONG_CONTEXT_SPACE)
    index = []
    for name, model_name, cluster in FIXTURES:
        space = "long-context" if MODELS[model_name]["seq"] > 16384 else "sweep"
        index.append(
            {
                "name": name,
                "model": f"models/{model_name}.yaml",
                "cluster": f"clusters/{cluster['name']}.yaml",
                "space": f"spaces/{space}.yaml",
            }
        )
    write(root / "fixtures.yaml", index)
    write(root / "edits.yaml", EDITS)
    from methodkit.tools.concord.narayanan2021 import table

    write(root / "reference" / "narayanan2021-table1.yaml", table())

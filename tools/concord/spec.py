"""Model, cluster and strategy-space specs: loading, HF config import and validation.

Every problem is reported with its key path (`layers[1].mlp.top_k`) and all
problems of a file are gathered into one message.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from methodkit.core.errors import DataError
from methodkit.tools.concord import units

RECOMPUTE = ("none", "selective", "full")


@dataclass(frozen=True)
class Sublayer:
    """One IR layer: its kind and its `layer.*` symbol values (sorted key, value pairs)."""

    kind: str  # embedding | attention | mlp_dense | mlp_moe | lm_head
    values: tuple

    def value_dict(self) -> dict:
        return {f"layer.{k}": v for k, v in self.values}


@dataclass(frozen=True)
class Unit:
    """A partition unit: the embedding, one transformer block (attention + MLP), or the LM head."""

    name: str
    sublayers: tuple


@dataclass
class Model:
    name: str
    globals: dict  # global.* -> number
    units: list
    blocks: int
    raw: dict = field(default_factory=dict)

    @property
    def is_moe(self) -> bool:
        return any(s.kind == "mlp_moe" for u in self.units for s in u.sublayers)

    def max_experts(self) -> int:
        return max([dict(s.values)["experts"] for u in self.units for s in u.sublayers if s.kind == "mlp_moe"] or [1])

    def attention_heads(self) -> list[tuple[int, int]]:
        return sorted(
            {
                (int(dict(s.values)["heads"]), int(dict(s.values)["kv_heads"]))
                for u in self.units
                for s in u.sublayers
                if s.kind == "attention"
            }
        )

    def param_count(self) -> float:
        """Total parameters (dense + expert), as the templates count them."""
        from methodkit.tools.concord.templates import param_counts

        return sum(sum(param_counts(s, self.globals)) for u in self.units for s in u.sublayers)


@dataclass
class Cluster:
    name: str
    devices: int
    per_node: int
    hbm: float
    values: dict  # hw.* -> number
    raw: dict = field(default_factory=dict)


@dataclass
class Space:
    tp_max: int = 8
    cp_max: int = 8
    pp_max: int = 64
    ep_max: int = 64
    etp_max: int = 2
    vpp: tuple = (1, 2)
    mbs: tuple = (1, 2, 4)
    zero: tuple = (0, 1, 2, 3)
    recompute: tuple = RECOMPUTE
    max_candidates: int = 500_000

    def to_dict(self) -> dict:
        return {
            "tp_max": self.tp_max,
            "cp_max": self.cp_max,
            "pp_max": self.pp_max,
            "ep_max": self.ep_max,
            "etp_max": self.etp_max,
            "vpp": list(self.vpp),
            "mbs": list(self.mbs),
            "zero": list(self.zero),
            "recompute": list(self.recompute),
            "max_candidates": self.max_candidates,
        }


# ---------------------------------------------------------------- reading documents


def parse_document(data: bytes, name: str):
    """A YAML or JSON document (JSON is YAML; a .json name is read strictly as JSON)."""
    if name.endswith(".json"):
        try:
            return json.loads(data)
        except json.JSONDecodeError as exc:
            raise DataError(f"{name}: line {exc.lineno}: invalid JSON ({exc.msg})") from None
    import yaml

    try:
        return yaml.safe_load(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise DataError(f"{name}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise DataError(f"{name}: {where}invalid YAML ({getattr(exc, 'problem', None) or exc})") from None


class _Problems:
    def __init__(self, name: str):
        self.name = name
        self.items: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(f"{path}: {message}")

    def raise_if_any(self) -> None:
        if self.items:
            raise DataError(f"{self.name}: " + "; ".join(self.items))


def _number(doc: dict, key: str, path: str, problems: _Problems, *, default=None, integer=False, positive=True):
    value = doc.get(key, default)
    if value is None:
        problems.add(f"{path}{key}", "missing")
        return 1
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        problems.add(f"{path}{key}", f"expected a number, got {value!r}")
        return 1
    if not math.isfinite(value):  # YAML's .nan / .inf are floats too
        problems.add(f"{path}{key}", f"expected a finite number, got {value!r}")
        return 1
    if integer and int(value) != value:
        problems.add(f"{path}{key}", f"expected an integer, got {value!r}")
        return 1
    if value < 0 or (positive and value == 0):
        problems.add(f"{path}{key}", f"must be {'positive' if positive else 'non-negative'}, got {value!r}")
        return 1
    return int(value) if integer else float(value)


def _quantity(doc: dict, key: str, kind: str, path: str, problems: _Problems, default=None) -> float:
    value = doc.get(key, default)
    if value is None:
        problems.add(f"{path}{key}", "missing")
        return 1.0
    try:
        out = units.parse(value, kind)
    except units.UnitError as exc:
        problems.add(f"{path}{key}", str(exc))
        return 1.0
    if not math.isfinite(out):
        problems.add(f"{path}{key}", f"expected a finite quantity, got {value!r}")
        return 1.0
    if out <= 0 and kind != "time":
        problems.add(f"{path}{key}", f"must be positive, got {value!r}")
        return 1.0
    if out < 0:
        problems.add(f"{path}{key}", f"must be non-negative, got {value!r}")
    return out


# ---------------------------------------------------------------- model


def looks_like_hf_config(doc) -> bool:
    return isinstance(doc, dict) and "hidden_size" in doc and "num_hidden_layers" in doc and "layers" not in doc


def import_hf_config(doc: dict, *, seq: int | None = None, global_batch: int | None = None) -> dict:
    """Translate HF-style config.json keys (Llama, Mixtral, DeepSeek-V3) into our model spec."""
    h = doc["hidden_size"]
    heads = doc.get("num_attention_heads", 1)
    kv = doc.get("num_key_value_heads", heads)
    head_dim = doc.get("head_dim") or h // max(heads, 1)
    act = str(doc.get("hidden_act", "silu")).lower()
    activation = "swiglu" if act in ("silu", "swish", "swiglu") else "gelu"
    attention = {"heads": heads, "kv_heads": kv, "head_dim": head_dim}
    if doc.get("kv_lora_rank"):  # MLA: planned as GQA with its own parameter count
        qk = doc.get("qk_nope_head_dim", head_dim) + doc.get("qk_rope_head_dim", 0)
        vd = doc.get("v_head_dim", head_dim)
        q_lora = doc.get("q_lora_rank")
        q_term = q_lora * (h + heads * qk + 1) if q_lora else h * heads * qk
        kv_lora = doc["kv_lora_rank"]
        params = q_term + kv_lora * (h + heads * (qk - doc.get("qk_rope_head_dim", 0) + vd) + 1)
        params += h * doc.get("qk_rope_head_dim", 0) + heads * vd * h
        attention = {"heads": heads, "kv_heads": heads, "head_dim": vd, "params": params}
    layers_n = doc["num_hidden_layers"]
    experts = doc.get("num_local_experts") or doc.get("n_routed_experts") or 0
    layers = []
    if experts:
        top_k = doc.get("num_experts_per_tok", 2)
        moe_ffn = doc.get("moe_intermediate_size") or doc.get("intermediate_size")
        shared = (doc.get("n_shared_experts") or 0) * moe_ffn
        dense_first = doc.get("first_k_dense_replace", 0) or 0
        if dense_first:
            layers.append(
                {
                    "count": dense_first,
                    "attention": attention,
                    "mlp": {"kind": "dense", "ffn": doc["intermediate_size"], "activation": activation},
                }
            )
        layers.append(
            {
                "count": layers_n - dense_first,
                "attention": attention,
                "mlp": {
                    "kind": "moe",
                    "experts": experts,
                    "top_k": top_k,
                    "moe_ffn": moe_ffn,
                    "shared_ffn": shared,
                    "activation": activation,
                },
            }
        )
    else:
        layers.append(
            {
                "count": layers_n,
                "attention": attention,
                "mlp": {"kind": "dense", "ffn": doc["intermediate_size"], "activation": activation},
            }
        )
    return {
        "name": doc.get("model_type", "hf-model"),
        "hidden": h,
        "vocab": doc.get("vocab_size", 32000),
        "seq": seq or doc.get("seq") or min(int(doc.get("max_position_embeddings", 4096)), 4096),
        "global_batch": global_batch or doc.get("global_batch", 1024),
        "norm": "rmsnorm" if "rms_norm_eps" in doc else "layernorm",
        "tie_embeddings": bool(doc.get("tie_word_embeddings", False)),
        "layers": layers,
    }


def load_model(doc, name: str = "model") -> Model:
    """Validate a model spec (or an HF config.json) and build its IR."""
    if looks_like_hf_config(doc):
        doc = import_hf_config(doc)
    problems = _Problems(name)
    if not isinstance(doc, dict):
        raise DataError(f"{name}: a model spec must be a mapping with 'hidden', 'seq', 'layers', ...")
    h = _number(doc, "hidden", "", problems, integer=True)
    vocab = _number(doc, "vocab", "", problems, integer=True)
    seq = _number(doc, "seq", "", problems, integer=True)
    batch = _number(doc, "global_batch", "", problems, integer=True)
    dtype = _number(doc, "dtype_bytes", "", problems, default=2, integer=True)
    norm = str(doc.get("norm", "rmsnorm")).lower()
    if norm not in ("rmsnorm", "layernorm"):
        problems.add("norm", f"expected rmsnorm or layernorm, got {norm!r}")
    glob = {
        "global.hidden": h,
        "global.vocab": vocab,
        "global.seq": seq,
        "global.dtype": dtype,
        "global.causal": 1.0 if doc.get("causal", True) else 0.0,
        "global.flash": 1.0 if doc.get("flash_attention", True) else 0.0,
        "global.norm": 1.0 if norm == "rmsnorm" else 2.0,
        "global.tie": 1.0 if doc.get("tie_embeddings", False) else 0.0,
        "global.batch": batch,
    }
    layers = doc.get("layers")
    if not isinstance(layers, list) or not layers:
        problems.add("layers", "expected a non-empty list of {count, attention, mlp}")
        layers = []
    units_list = [Unit("embedding", (Sublayer("embedding", ()),))]
    blocks = 0
    for i, run in enumerate(layers):
        path = f"layers[{i}]."
        if not isinstance(run, dict):
            problems.add(f"layers[{i}]", "expected a mapping")
            continue
        count = _number(run, "count", path, problems, default=1, integer=True)
        att = run.get("attention") if isinstance(run.get("attention"), dict) else None
        mlp = run.get("mlp") if isinstance(run.get("mlp"), dict) else None
        if att is None:
            problems.add(f"{path}attention", "missing mapping {heads, kv_heads, head_dim}")
            continue
        if mlp is None:
            problems.add(f"{path}mlp", "missing mapping {kind, ...}")
            continue
        ap = path + "attention."
        heads = _number(att, "heads", ap, problems, integer=True)
        kv = _number(att, "kv_heads", ap, problems, default=heads, integer=True)
        head_dim = _number(att, "head_dim", ap, problems, default=(h // heads if heads else None), integer=True)
        if heads % kv:
            problems.add(f"{ap}kv_heads", f"heads {heads} is not a multiple of kv_heads {kv}")
        hq = heads * head_dim
        params = att.get("params", 2 * h * hq + 2 * h * kv * head_dim)
        attention = Sublayer(
            "attention",
            tuple(
                sorted(
                    {
                        "heads": float(heads),
                        "kv_heads": float(kv),
                        "head_dim": float(head_dim),
                        "params": float(params),
                    }.items()
                )
            ),
        )
        mp = path + "mlp."
        kind = str(mlp.get("kind", "dense"))
        activation = str(mlp.get("activation", "swiglu")).lower()
        if activation not in ("swiglu", "gelu"):
            problems.add(f"{mp}activation", f"expected swiglu or gelu, got {activation!r}")
        glu = 1.0 if activation == "swiglu" else 0.0
        if kind == "dense":
            ffn = _number(mlp, "ffn", mp, problems, integer=True)
            block_mlp = Sublayer("mlp_dense", tuple(sorted({"ffn": float(ffn), "glu": glu}.items())))
        elif kind == "moe":
            experts = _number(mlp, "experts", mp, problems, integer=True)
            top_k = _number(mlp, "top_k", mp, problems, integer=True)
            moe_ffn = _number(mlp, "moe_ffn", mp, problems, integer=True)
            shared = _number(mlp, "shared_ffn", mp, problems, default=0, integer=True, positive=False)
            kappa = _number(mlp, "imbalance", mp, problems, default=1.1)
            if top_k > experts:
                problems.add(f"{mp}top_k", f"top_k {top_k} exceeds experts {experts}")
            if kappa < 1:
                problems.add(f"{mp}imbalance", f"must be >= 1, got {kappa}")
            block_mlp = Sublayer(
                "mlp_moe",
                tuple(
                    sorted(
                        {
                            "experts": float(experts),
                            "top_k": float(top_k),
                            "moe_ffn": float(moe_ffn),
                            "shared_ffn": float(shared),
                            "imbalance": float(kappa),
                            "glu": glu,
                        }.items()
                    )
                ),
            )
        else:
            problems.add(f"{mp}kind", f"expected dense or moe, got {kind!r}")
            continue
        for _ in range(count):
            blocks += 1
            units_list.append(Unit(f"block{blocks}", (attention, block_mlp)))
    units_list.append(Unit("lm_head", (Sublayer("lm_head", ()),)))
    problems.raise_if_any()
    return Model(name=str(doc.get("name", name)), globals=glob, units=units_list, blocks=blocks, raw=doc)


# ---------------------------------------------------------------- cluster


def load_cluster(doc, name: str = "cluster") -> Cluster:
    problems = _Problems(name)
    if not isinstance(doc, dict):
        raise DataError(f"{name}: a cluster spec must be a mapping with 'devices', 'hbm', 'links', ...")
    n = _number(doc, "devices", "", problems, integer=True)
    g = _number(doc, "devices_per_node", "", problems, default=8, integer=True)
    if n % g:
        problems.add("devices", f"{n} is not a multiple of devices_per_node {g}")
    hbm = _quantity(doc, "hbm", "bytes", "", problems)
    hbm_bw = _quantity(doc, "hbm_bandwidth", "bandwidth", "", problems)
    peak = _quantity(doc, "peak_flops", "flops", "", problems)
    reserve = _quantity(doc, "reserve", "bytes", "", problems, default="2.5GiB")
    eta_max = _number(doc, "eta_max", "", problems, default=0.6)
    if eta_max > 1:
        problems.add("eta_max", f"must be in (0, 1], got {eta_max}")
    x0 = _number(doc, "eta_x0", "", problems, default=128.0)
    links = doc.get("links")
    values = {}
    if not isinstance(links, dict):
        problems.add("links", "missing mapping {nvlink: {bandwidth, latency}, inter: {...}}")
        links = {}
    for cls, prefix in (("nvlink", "nv"), ("inter", "ib")):
        spec = links.get(cls)
        if not isinstance(spec, dict):
            problems.add(f"links.{cls}", "missing mapping {bandwidth, latency}")
            continue
        values[f"hw.{prefix}_bw"] = _quantity(spec, "bandwidth", "bandwidth", f"links.{cls}.", problems)
        values[f"hw.{prefix}_lat"] = _quantity(spec, "latency", "time", f"links.{cls}.", problems, default="0us")
    problems.raise_if_any()
    values.update(
        {
            "hw.n": float(n),
            "hw.g": float(g),
            "hw.peak": peak,
            "hw.eta_max": eta_max,
            "hw.x0": x0,
            "hw.hbm_bw": hbm_bw,
            "hw.reserve": reserve,
        }
    )
    return Cluster(name=str(doc.get("name", name)), devices=n, per_node=g, hbm=hbm, values=values, raw=doc)


# ---------------------------------------------------------------- strategy space


def load_space(doc, name: str = "space") -> Space:
    if doc is None:
        return Space()
    if not isinstance(doc, dict):
        raise DataError(f"{name}: a space spec must be a mapping (tp_max, cp_max, pp_max, ..., vpp, mbs, zero)")
    problems = _Problems(name)
    out = Space()
    known = set(out.to_dict())
    for key in doc:
        if key not in known:
            problems.add(str(key), f"unknown key (known: {', '.join(sorted(known))})")
    for key in ("tp_max", "cp_max", "pp_max", "ep_max", "etp_max", "max_candidates"):
        if key in doc:
            setattr(out, key, _number(doc, key, "", problems, integer=True))
    for key in ("vpp", "mbs", "zero"):
        if key in doc:
            values = doc[key]
            if not isinstance(values, list) or not values or not all(isinstance(v, int) for v in values):
                problems.add(key, f"expected a list of integers, got {values!r}")
                continue
            if key == "zero" and not set(values) <= {0, 1, 2, 3}:
                problems.add(key, f"ZeRO stages are 0..3, got {values!r}")
            if key != "zero" and min(values) < 1:
                problems.add(key, f"values must be positive, got {values!r}")
            setattr(out, key, tuple(sorted(set(values))))
    if "recompute" in doc:
        values = doc["recompute"]
        if not isinstance(values, list) or not values or not set(values) <= set(RECOMPUTE):
            problems.add("recompute", f"expected a list from {list(RECOMPUTE)}, got {values!r}")
        else:
            out.recompute = tuple(r for r in RECOMPUTE if r in values)
    problems.raise_if_any()
    return out


def check_model_fits_space(model: Model, space: Space, name: str) -> None:
    """Spec checks that need both files: s divisible by 2*cp_max."""
    seq = int(model.globals["global.seq"])
    if seq % (2 * space.cp_max):
        raise DataError(
            f"{name}: seq: {seq} is not divisible by 2*cp_max = {2 * space.cp_max}; lower cp_max in --space"
        )

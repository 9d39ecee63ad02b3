"""Evaluating the primitives over the candidate set: warm (signature-keyed) or cold (no memo).

Warm: every template instance gets a value signature over its non-strategy
dependencies; its value is a vector over the unique projections of the
candidate set onto its strategy dependencies. Identical layers share one
signature (one evaluation); a persistent cache supplies values computed by an
earlier run when signature and projection table both match.

Cold (the reference): every (template, layer, candidate) is evaluated directly,
without any memoisation. Both paths accumulate per-unit channels in the same
order, so equal inputs give bitwise-equal outputs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from methodkit.tools.concord.candidates import Candidates
from methodkit.tools.concord.spec import Cluster, Model, Sublayer
from methodkit.tools.concord.templates import SIGMA, Instance, instances_for

UNIT_CHANNELS = ("time", "act", "transient", "state", "optimizer", "dp")
MODEL_SUBLAYER = Sublayer("model", ())


def canonical(value) -> str:
    """Integers in decimal, other floats as float.hex (exact, platform independent)."""
    v = float(value)
    if v.is_integer() and abs(v) < 2**53:
        return str(int(v))
    return v.hex()


def decode(text: str) -> float:
    return float.fromhex(text) if "x" in text else float(text)


def signature(
    inst: Instance, env: dict, canon: Canonical | None = None, keys: tuple | None = None
) -> tuple[bytes, dict]:
    """sig_L = BLAKE2b-128(template ‖ version ‖ code hash ‖ canonical D_L values); also the D_L values.

    `canon` (from `canonical_env`) lets the ~13 templates of one sublayer share the float.hex
    encoding of its symbols; the bytes hashed are the same either way. `keys` narrows D_L
    (Instance.signature_deps: a collective that never leaves a node does not read inter-node links).
    """
    keys = inst.layer_deps if keys is None else keys
    if canon is None:
        canon = canonical_env({k: env[k] for k in keys})
    body = b"".join([canon.pieces[k] for k in keys])
    return hashlib.blake2b(_prefix(inst) + body, digest_size=16).digest(), {k: canon.text[k] for k in keys}


_PREFIXES: dict = {}


def _prefix(inst: Instance) -> bytes:
    key = (inst.template.id, inst.template.version, inst.code_hash, inst.kind)
    out = _PREFIXES.get(key)
    if out is None:
        out = _PREFIXES[key] = b"\0".join(str(part).encode() for part in key)
    return out


@dataclass
class Canonical:
    """Canonical text of every symbol of an environment, and its hashed piece b'\\0key=value'."""

    text: dict
    pieces: dict


def canonical_env(env: dict) -> Canonical:
    text = {k: canonical(v) for k, v in env.items()}
    return Canonical(text, {k: b"\0" + k.encode() + b"=" + v.encode() for k, v in text.items()})


def encode_value(value) -> bytes:
    """A value vector as a msgpack bin of little-endian float64 (exact, and decoded without a Python loop)."""
    import msgpack
    import numpy as np

    return msgpack.packb(np.ascontiguousarray(value, dtype="<f8").tobytes())


def decode_value(blob: bytes):
    """The vector stored by `encode_value` (a msgpack list of floats, the older layout, is read too)."""
    import msgpack
    import numpy as np

    obj = msgpack.unpackb(blob)
    if isinstance(obj, bytes):
        return np.frombuffer(obj, dtype="<f8").astype(np.float64)
    return np.asarray(obj, dtype=np.float64)


def base_env(model: Model, cluster: Cluster, sub: Sublayer) -> dict:
    return {**model.globals, **cluster.values, **sub.value_dict()}


@dataclass
class Projection:
    """Unique rows of the candidate table projected on some strategy symbols."""

    names: tuple
    rows: dict  # sigma symbol -> float64 array of unique values
    inverse: object  # candidate index -> row index
    digest: bytes
    size: int


def project(cands: Candidates, names: tuple) -> Projection:
    """Unique rows in lexicographic order, found through one mixed-radix integer key per row."""
    import numpy as np

    n = len(cands)
    if not names:
        return Projection((), {}, np.zeros(n, dtype=np.int64), hashlib.blake2b(b"", digest_size=16).digest(), 1)
    key = np.zeros(n, dtype=np.int64)
    levels = []
    for k in names:
        values, codes = np.unique(cands.columns[k.split(".", 1)[1]], return_inverse=True)
        levels.append(values)
        key = key * len(values) + codes.ravel()
    unique_keys, inverse = np.unique(key, return_inverse=True)
    rows_int = np.empty((len(unique_keys), len(names)), dtype=np.int64)
    rest = unique_keys.copy()
    for j in range(len(names) - 1, -1, -1):
        base = len(levels[j])
        rows_int[:, j] = levels[j][rest % base]
        rest //= base
    h = hashlib.blake2b(digest_size=16)
    h.update(",".join(names).encode())
    h.update(np.ascontiguousarray(rows_int).tobytes())
    rows = {k: rows_int[:, j].astype(np.float64) for j, k in enumerate(names)}
    return Projection(names, rows, inverse.ravel(), h.digest(), len(unique_keys))


@dataclass
class ReuseStats:
    instances: int = 0  # (template, layer) instances in the model
    unique: int = 0  # distinct signatures
    intra_run: int = 0  # instances served by an identical layer in this run
    hits: int = 0  # persistent-cache hits
    misses: int = 0  # evaluated in this run
    rows_evaluated: int = 0  # strategy rows evaluated (warm: unique projections; cold: layer x candidate)
    by_template: dict = field(default_factory=dict)
    miss_reasons: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "instances": self.instances,
            "unique_signatures": self.unique,
            "intra_run_reuse": self.intra_run,
            "hits": self.hits,
            "misses": self.misses,
            "rows_evaluated": self.rows_evaluated,
            "by_template": self.by_template,
            "miss_reasons": self.miss_reasons,
        }


@dataclass
class HitRecord:
    """What the stale-hit audit needs to recompute one hit cold."""

    inst: Instance
    env: dict
    projection: Projection
    value: object


class WarmValues:
    """Signature-keyed values for one (model, cluster, candidates), filled from memo, cache or evaluation."""

    def __init__(self, model, cluster, cands, cache=None, *, record_hits=False, explain=True, strict=True):

        self.stats = ReuseStats()
        self.hits: list[HitRecord] = []
        projections: dict[tuple, Projection] = {}
        # unique sublayers -> (instances, signatures)
        self.sub_sigs: dict[Sublayer, list[tuple[Instance, bytes]]] = {}
        pending: dict[bytes, tuple] = {}
        subs = [s for u in model.units for s in u.sublayers] + [MODEL_SUBLAYER]
        for sub in subs:
            insts = instances_for(sub.kind, strict)
            self.stats.instances += len(insts)
            if sub in self.sub_sigs:
                self.stats.intra_run += len(insts)
                continue
            env = base_env(model, cluster, sub)
            canon = canonical_env(env)
            entries = []
            for inst in insts:
                if inst.sigma_deps not in projections:
                    projections[inst.sigma_deps] = project(cands, inst.sigma_deps)
                proj = projections[inst.sigma_deps]
                sig, values = signature(inst, env, canon, inst.signature_deps(proj.rows, env["hw.g"]))
                entries.append((inst, sig))
                if sig in pending:
                    self.stats.intra_run += 1
                    continue
                pending[sig] = (inst, env, values, proj)
            self.sub_sigs[sub] = entries
        self.stats.unique = len(pending)
        self.projections = projections
        self.values: dict[bytes, object] = {}
        by_template: dict[str, list[bytes]] = {}
        for sig, (inst, *_rest) in pending.items():
            by_template.setdefault(inst.template.id, []).append(sig)
        to_store = []
        # one batched read for every template (sig is the primary key); rows of another template are ignored
        found_all = cache.lookup_all(list(pending)) if cache is not None else {}
        for template_id, sigs in by_template.items():
            found = {s: r[1:] for s in sigs if (r := found_all.get(s)) is not None and r[0] == template_id}
            counts = {"hits": 0, "misses": 0}
            known = None
            for sig in sigs:
                inst, env, values, proj = pending[sig]
                row = found.get(sig)
                if (
                    row is not None
                    and row[0] == inst.template.version
                    and row[1] == inst.code_hash
                    and row[2] == proj.digest
                ):
                    value = decode_value(row[3])
                    if value.shape == (proj.size,):
                        self.values[sig] = value
                        counts["hits"] += 1
                        if record_hits:
                            self.hits.append(HitRecord(inst, env, proj, value))
                        continue
                value = inst.evaluate({**env, **proj.rows}, proj.size)
                self.values[sig] = value
                counts["misses"] += 1
                self.stats.rows_evaluated += proj.size
                if cache is not None:
                    deps = {"kind": inst.kind, "values": values, "proj": proj.digest.hex(), "code": inst.code_hash}
                    if explain:
                        if known is None:
                            known = cache.deps_of(template_id)
                        reason = miss_reason(deps, known, row)
                        self.stats.miss_reasons.append({"template": template_id, "kind": inst.kind, "reason": reason})
                    to_store.append(
                        (
                            sig,
                            template_id,
                            inst.template.version,
                            inst.code_hash,
                            json.dumps(deps, sort_keys=True),
                            proj.digest,
                            encode_value(value),
                        )
                    )
            self.stats.hits += counts["hits"]
            self.stats.misses += counts["misses"]
            self.stats.by_template[template_id] = counts
        if cache is not None:
            cache.store(to_store)

    def sublayer_vectors(self, sub: Sublayer, index):
        """[(instance, values at candidate `index`)] for one sublayer, in template order."""
        out = []
        for inst, sig in self.sub_sigs[sub]:
            proj = self.projections[inst.sigma_deps]
            out.append((inst, self.values[sig][proj.inverse[index]]))
        return out


def miss_reason(deps: dict, known: list[dict], row) -> str:
    """Why a signature missed: the dependency keys that differ from the nearest cached entry."""
    if row is not None:
        return (
            "cached entry has another version or code hash"
            if row[2] == bytes.fromhex(deps["proj"])
            else ("strategy projection table changed (the candidate set differs)")
        )
    same_kind = [k for k in known if k.get("kind") == deps["kind"]]
    if not same_kind:
        return f"no cached entry for a {deps['kind']} layer"
    best, best_diff = None, None
    for entry in same_kind:
        if entry.get("code") != deps["code"]:
            continue
        keys = set(entry["values"]) | set(deps["values"])
        diff = sorted(k for k in keys if entry["values"].get(k) != deps["values"].get(k))
        if best_diff is None or len(diff) < len(best_diff):
            best, best_diff = entry, diff
    if best is None:
        return "template code changed since the cached entries"
    if not best_diff:
        return "strategy projection table changed (the candidate set differs)"
    parts = []
    for k in best_diff[:4]:
        old, new = best["values"].get(k), deps["values"].get(k)
        fmt = lambda v: "absent" if v is None else f"{decode(v):g}"  # noqa: E731
        parts.append(f"{k} {fmt(old)}->{fmt(new)}")
    return "changed: " + ", ".join(parts)


def unit_channels(model: Model, cluster: Cluster, cands: Candidates, index, warm: WarmValues | None, stats=None):
    """Per-unit channels (C_block x U arrays) and the p2p vector for the candidates at `index`.

    With `warm`, vectors come from signature-keyed values (each distinct unit built once);
    without, every (template, layer, candidate) is evaluated (the cache-disabled reference).
    """
    import numpy as np

    size = len(index)
    units = model.units
    out = {ch: np.empty((size, len(units)), dtype=np.float64) for ch in UNIT_CHANNELS}
    if warm is None:
        sigma = {f"sigma.{k}": cands.columns[k][index].astype(np.float64) for k in SIGMA}
    built: dict[tuple, dict] = {}
    for u, unit in enumerate(units):
        key = unit.sublayers
        if warm is not None and key in built:
            for ch in UNIT_CHANNELS:
                out[ch][:, u] = built[key][ch]
            continue
        cols = {ch: np.zeros(size, dtype=np.float64) for ch in UNIT_CHANNELS}
        for sub in unit.sublayers:
            if warm is not None:
                vectors = warm.sublayer_vectors(sub, index)
            else:
                env = {**base_env(model, cluster, sub), **sigma}
                vectors = []
                for inst in instances_for(sub.kind):
                    vectors.append((inst, inst.evaluate(env, size)))
                    if stats is not None:
                        stats.rows_evaluated += size
            for inst, vec in vectors:
                if inst.template.channel in cols:
                    cols[inst.template.channel] += vec
        for ch in UNIT_CHANNELS:
            out[ch][:, u] = cols[ch]
        if warm is not None:
            built[key] = cols
    if warm is not None:
        p2p = next(v for inst, v in warm.sublayer_vectors(MODEL_SUBLAYER, index) if inst.template.channel == "p2p")
    else:
        env = {**base_env(model, cluster, MODEL_SUBLAYER), **sigma}
        p2p = next(i for i in instances_for("model") if i.template.channel == "p2p").evaluate(env, size)
    return out, p2p


def cold_stats(model: Model) -> ReuseStats:
    stats = ReuseStats()
    subs = [s for u in model.units for s in u.sublayers] + [MODEL_SUBLAYER]
    stats.instances = sum(len(instances_for(s.kind)) for s in subs)
    stats.misses = stats.instances
    return stats

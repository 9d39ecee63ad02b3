"""The logical candidate set: every admitted strategy sigma, in a fixed lexicographic order.

The admission predicate is pure arithmetic on the specs; it never consults the cache,
so the warm and the cold search see the same candidates.
"""

from __future__ import annotations

from dataclasses import dataclass

from methodkit.core.errors import DataError, RunFailure, UsageError
from methodkit.tools.concord.spec import RECOMPUTE, Cluster, Model, Space
from methodkit.tools.concord.templates import SIGMA


def powers_of_two(limit: int) -> list[int]:
    out, v = [], 1
    while v <= limit:
        out.append(v)
        v *= 2
    return out


@dataclass
class Candidates:
    """Columns of the admitted candidates (int64 arrays keyed by SIGMA name), lexicographic order."""

    columns: dict
    eliminated: dict  # constraint -> how many tuples it removed (in predicate order)
    enumerated: int

    def __len__(self) -> int:
        return len(self.columns["tp"])

    def sigma(self, i: int) -> dict:
        out = {k: int(self.columns[k][i]) for k in SIGMA}
        out["recompute"] = RECOMPUTE[out.pop("rc")]
        out["sp"] = out["tp"] > 1
        return out

    def take(self, index):
        return Candidates({k: v[index] for k, v in self.columns.items()}, self.eliminated, self.enumerated)


CONSTRAINTS = (
    ("devices", "tp*cp*pp*dp = N"),
    ("heads", "heads % tp = 0 and (kv_heads % tp = 0 or tp % kv_heads = 0)"),
    ("seq", "s % (2*cp) = 0"),
    ("experts", "E % ep = 0 and ep*etp divides tp*cp*dp"),
    ("batch", "B % (mbs*dp) = 0 and B/(mbs*dp) >= pp"),
    ("layers", "L >= pp*vpp"),
)


def enumerate_candidates(model: Model, cluster: Cluster, space: Space, forced: dict | None = None) -> Candidates:
    """All admitted sigma for this model, cluster and space (or the single `forced` one)."""
    import numpy as np

    n = cluster.devices
    tp = powers_of_two(min(space.tp_max, n))
    cp = powers_of_two(min(space.cp_max, n))
    pp = powers_of_two(min(space.pp_max, n))
    experts = model.max_experts()
    ep = powers_of_two(min(space.ep_max, experts)) if model.is_moe else [1]
    etp = powers_of_two(space.etp_max) if model.is_moe else [1]
    rc = [RECOMPUTE.index(r) for r in space.recompute]
    axes = [tp, cp, pp, ep, etp, list(space.vpp), list(space.mbs), list(space.zero), rc]
    if forced is not None:
        axes = [[forced[k]] for k in ("tp", "cp", "pp", "ep", "etp", "vpp", "mbs", "zero", "rc")]
    total = int(np.prod([len(a) for a in axes]))
    if total > 50_000_000:
        raise UsageError(f"the strategy space has {total} raw tuples; narrow it with --space (tp_max, pp_max, ...)")
    grids = np.meshgrid(*[np.asarray(a, dtype=np.int64) for a in axes], indexing="ij")
    names = ("tp", "cp", "pp", "ep", "etp", "vpp", "mbs", "zero", "rc")
    cols = {k: g.ravel() for k, g in zip(names, grids)}
    eliminated = {}
    keep = np.ones(total, dtype=bool)

    def apply(name, mask):
        nonlocal keep
        eliminated[name] = int(np.count_nonzero(keep & ~mask))
        keep &= mask

    denom = cols["tp"] * cols["cp"] * cols["pp"]
    apply("devices", n % denom == 0)
    dp = np.where(keep, n // np.maximum(denom, 1), 1)
    heads_ok = np.ones(total, dtype=bool)
    for heads, kv in model.attention_heads():
        heads_ok &= (heads % cols["tp"] == 0) & ((kv % cols["tp"] == 0) | (cols["tp"] % kv == 0))
    apply("heads", heads_ok)
    seq = int(model.globals["global.seq"])
    apply("seq", seq % (2 * cols["cp"]) == 0)
    fold = cols["ep"] * cols["etp"]
    experts_ok = (experts % cols["ep"] == 0) & ((cols["tp"] * cols["cp"] * dp) % fold == 0)
    if model.is_moe:
        experts_ok &= cols["etp"] <= cols["tp"]
    apply("experts", experts_ok)
    batch = int(model.globals["global.batch"])
    per_step = cols["mbs"] * dp
    micro = np.where(batch % per_step == 0, batch // per_step, 0)
    apply("batch", (batch % per_step == 0) & (micro >= cols["pp"]))
    apply("layers", model.blocks >= cols["pp"] * cols["vpp"])
    index = np.flatnonzero(keep)
    out = {k: cols[k][index] for k in names}
    out["dp"] = dp[index]
    ordered = {k: out[k] for k in SIGMA}
    result = Candidates(ordered, eliminated, total)
    if len(result) == 0:
        last = next(k for k in reversed(eliminated) if eliminated[k])
        cuts = ", ".join(f"{k}={v}" for k, v in eliminated.items())
        what = "the forced strategy is not admitted" if forced is not None else "no candidate is admitted"
        raise RunFailure(
            f"{what}: constraint '{last}' ({dict(CONSTRAINTS)[last]}) removed the last ones (cuts: {cuts})"
        )
    if len(result) > space.max_candidates:
        raise UsageError(
            f"{len(result)} candidates exceed --max-candidates {space.max_candidates}; "
            "narrow the space (tp_max, pp_max, mbs, zero, recompute in --space) or raise --max-candidates"
        )
    return result


def parse_forced(text: str, cluster: Cluster) -> dict:
    """`tp=8,pp=16,mbs=1,recompute=selective,...` -> a full sigma (unspecified: 1, zero 1, selective)."""
    sigma = {"tp": 1, "cp": 1, "pp": 1, "ep": 1, "etp": 1, "vpp": 1, "mbs": 1, "zero": 1, "rc": 1}
    dp = None
    for part in [p for p in text.split(",") if p.strip()]:
        if "=" not in part:
            raise UsageError(f"--force-strategy: expected key=value, got {part!r}")
        key, value = (x.strip() for x in part.split("=", 1))
        if key in ("recompute", "rc"):
            if value not in RECOMPUTE:
                raise UsageError(f"--force-strategy: recompute must be one of {', '.join(RECOMPUTE)}, got {value!r}")
            sigma["rc"] = RECOMPUTE.index(value)
            continue
        if key == "sp":
            continue
        if key not in sigma and key != "dp":
            raise UsageError(f"--force-strategy: unknown key {key!r} (known: {', '.join(SIGMA[:-1])}, recompute)")
        try:
            number = int(value)
        except ValueError:
            raise UsageError(f"--force-strategy: {key} must be an integer, got {value!r}") from None
        if number < (0 if key == "zero" else 1):
            raise UsageError(f"--force-strategy: {key} must be positive, got {number}")
        if key == "dp":
            dp = number
        else:
            sigma[key] = number
    if dp is not None:
        sigma["dp"] = dp
        if sigma["tp"] * sigma["cp"] * sigma["pp"] * dp != cluster.devices:
            raise DataError(
                f"--force-strategy: tp*cp*pp*dp = {sigma['tp'] * sigma['cp'] * sigma['pp'] * dp} "
                f"!= {cluster.devices} devices"
            )
    return sigma

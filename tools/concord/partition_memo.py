"""Signature-keyed reuse of the partition search's own sub-problems (issue 36 item 7).

The min-bottleneck partition of candidate i reads the per-unit time, state and activation vectors, the
p2p time, the memory limit (HBM - reserve - transient), pp, vpp and the microbatch count, the last only
through min(micro, pp) (the in-flight counts). Every per-unit value is a primitive whose value is fixed
by its signature and by the candidate's strategy symbols, so a partition is fixed by

    sig = BLAKE2b(kernel source ‖ bisection settings ‖ per-unit signatures of the partition channels ‖
                  the p2p signature ‖ HBM ‖ reserve)

and by the candidate's row: its values on the union of those primitives' strategy symbols and
min(micro, pp). One cache entry per sig holds (row -> feasible flag, chunk bounds) for every row
solved so far; a warm plan serves the rows it finds and solves the rest, once per distinct row
(candidates that differ only in symbols no partition input reads share one solve). A layer edit changes
sig (every partition reads every unit), so everything is re-solved; a batch edit keeps sig and the rows
whose in-flight count did not change; a space edit keeps the rows both spaces have.
"""

from __future__ import annotations

import hashlib
import inspect
from dataclasses import dataclass, field
from functools import cache

from methodkit.tools.concord import kernels
from methodkit.tools.concord.evaluate import MODEL_SUBLAYER, canonical

TEMPLATE_ID = "partition"
VERSION = 1
CHANNELS = ("time", "state", "act", "transient", "p2p")


@cache
def kernel_hash() -> str:
    h = hashlib.blake2b(digest_size=16)
    for fn in (kernels.inflight, kernels._greedy, kernels.partition_one, kernels.partition_min_bottleneck):
        h.update(inspect.getsource(getattr(fn, "py_func", fn)).encode())
    return h.hexdigest()


@dataclass
class PartitionHit:
    """What the audit needs to re-solve the served rows from cold inputs: one candidate per row, its cached
    feasible flag and chunk bounds."""

    candidate: object
    ok: object
    bounds: object


@dataclass
class PartitionMemo:
    """Per distinct partition row: solved yet, feasible flag, chunk bounds (zero-padded to `width`)."""

    sig: bytes
    columns: tuple
    rows: object  # distinct rows (int64)
    inverse: object  # candidate -> row
    known: object
    ok: object
    bounds: object
    width: int
    stored: dict = field(default_factory=dict)  # rows of the cached entry this run did not meet (arrays)
    hits: int = 0
    misses: int = 0
    reason: str = ""
    audit: PartitionHit | None = None

    def to_dict(self) -> dict:
        return {
            "rows": len(self.rows),
            "candidates_per_row": float(len(self.inverse) / max(len(self.rows), 1)),
            "hits": self.hits,
            "misses": self.misses,
            "miss_reason": self.reason if self.misses else "",
        }

    def solve(self, index, ch, p2p, pp, vpp, micro, limit, iterations, rtol):
        """(feasible flags, bounds) for the candidates at `index`, solving each unknown row once."""
        import numpy as np

        rows = self.inverse[index]
        need, first = np.unique(rows[~self.known[rows]], return_index=True)
        if len(need):
            pos = np.flatnonzero(~self.known[rows])[first]
            out = np.zeros((len(pos), self.bounds.shape[1]), dtype=np.int64)
            ok = kernels.partition_min_bottleneck(
                np.ascontiguousarray(ch["time"][pos]), np.ascontiguousarray(ch["state"][pos]),
                np.ascontiguousarray(ch["act"][pos]), p2p[pos], pp[pos], vpp[pos], micro[pos], limit[pos], out,
                iterations, rtol,
            )  # fmt: skip
            self.ok[need], self.bounds[need], self.known[need] = ok, out, True
            self.misses += len(need)
        width = int((pp * vpp).max()) + 1
        return self.ok[rows].copy(), self.bounds[rows, :width].copy()

    def entry(self) -> tuple | None:
        """The cache row: every solved row of this run plus the cached ones it did not meet."""
        import msgpack
        import numpy as np

        rows = np.concatenate([self.rows[self.known].astype("<i4"), self.stored.get("rows", _empty(self.rows, "<i4"))])
        ok = np.concatenate([self.ok[self.known], self.stored.get("ok", np.zeros(0, bool))]).astype("u1")
        if self.bounds.shape[0] and int(self.bounds.max()) >= 2**16:
            return None  # more than 65,535 units: bounds do not fit the entry's uint16 layout, nothing stored
        bounds = self.bounds[self.known].astype("<u2")
        old = self.stored.get("bounds")
        if old is not None:
            w = max(bounds.shape[1], old.shape[1])
            bounds = np.concatenate([_pad(bounds, w), _pad(old, w)])
        blob = msgpack.packb([list(self.columns), len(rows), bounds.shape[1], rows.tobytes(), ok.tobytes(),
                              np.ascontiguousarray(bounds).tobytes()])  # fmt: skip
        digest = hashlib.blake2b(",".join(self.columns).encode(), digest_size=16).digest()
        deps = '{"kind": "partition", "columns": "' + ",".join(self.columns) + '"}'
        return (self.sig, TEMPLATE_ID, VERSION, kernel_hash(), deps, digest, blob)


def _empty(rows, dtype):
    import numpy as np

    return np.zeros((0, rows.shape[1]), dtype=dtype)


def _pad(a, w):
    import numpy as np

    out = np.zeros((a.shape[0], w), dtype=a.dtype)
    out[:, : a.shape[1]] = a
    return out


def _unique_rows(table):
    """(distinct rows in lexicographic order, candidate -> row) through one mixed-radix int64 key per row
    (np.unique(axis=0) sorts byte strings and is ~20x slower)."""
    import numpy as np

    key = np.zeros(len(table), dtype=np.int64)
    radix = 1
    for j in range(table.shape[1]):
        levels, codes = np.unique(table[:, j], return_inverse=True)
        radix *= len(levels)
        if radix >= 2**62:
            rows, inverse = np.unique(table, axis=0, return_inverse=True)
            return np.ascontiguousarray(rows), inverse.ravel()
        key = key * len(levels) + codes.ravel()
    _keys, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return np.ascontiguousarray(table[first]), inverse.ravel()


def _match(new, old):
    """(i_new, i_old): positions of the rows the two integer tables share (exact, vectorised)."""
    import numpy as np

    key_new = np.zeros(len(new), dtype=np.int64)
    key_old = np.zeros(len(old), dtype=np.int64)
    radix = 1
    for j in range(new.shape[1]):
        levels = np.unique(np.concatenate([new[:, j], old[:, j]]))
        radix *= len(levels)
        if radix >= 2**62:  # too many levels for one int64 key: match through row bytes
            at = {r.tobytes(): i for i, r in enumerate(np.ascontiguousarray(new))}
            pairs = [(at[r.tobytes()], k) for k, r in enumerate(np.ascontiguousarray(old)) if r.tobytes() in at]
            return np.array([p[0] for p in pairs], dtype=np.int64), np.array([p[1] for p in pairs], dtype=np.int64)
        key_new = key_new * len(levels) + np.searchsorted(levels, new[:, j])
        key_old = key_old * len(levels) + np.searchsorted(levels, old[:, j])
    _common, i_new, i_old = np.intersect1d(key_new, key_old, assume_unique=True, return_indices=True)
    return i_new, i_old


def partition_columns(warm) -> tuple:
    names = {"sigma.pp", "sigma.vpp"}
    for entries in warm.sub_sigs.values():
        for inst, _sig in entries:
            if inst.template.channel in CHANNELS:
                names.update(inst.sigma_deps)
    return tuple(sorted(names))


def structure_signature(model, cluster, warm, iterations, rtol) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{TEMPLATE_ID}\0{VERSION}\0{kernel_hash()}\0{iterations}\0{rtol!r}\0".encode())
    for unit in model.units:
        h.update(b"\0unit")
        for sub in unit.sublayers:
            for inst, sig in warm.sub_sigs[sub]:
                if inst.template.channel in CHANNELS:
                    h.update(sig)
    h.update(b"\0model")
    for inst, sig in warm.sub_sigs[MODEL_SUBLAYER]:
        if inst.template.channel in CHANNELS:
            h.update(sig)
    h.update(f"\0hbm={canonical(cluster.hbm)}\0reserve={canonical(cluster.values['hw.reserve'])}".encode())
    return h.digest()


def build(model, cluster, cands, warm, cache, iterations, rtol, record_hits=False) -> PartitionMemo:
    import msgpack
    import numpy as np

    columns = partition_columns(warm)
    n = len(cands)
    table = np.empty((n, len(columns) + 1), dtype=np.int64)
    for j, name in enumerate(columns):
        table[:, j] = cands.columns[name.split(".", 1)[1]]
    pp = cands.columns["pp"].astype(np.int64)
    micro = int(model.globals["global.batch"]) // (cands.columns["mbs"] * cands.columns["dp"])
    table[:, -1] = np.minimum(micro, pp)
    rows, inverse = _unique_rows(table)
    width = int((cands.columns["pp"] * cands.columns["vpp"]).max()) + 1
    memo = PartitionMemo(
        sig=structure_signature(model, cluster, warm, iterations, rtol),
        columns=(*columns, "inflight"),
        rows=rows,
        inverse=inverse.ravel(),
        known=np.zeros(len(rows), dtype=bool),
        ok=np.zeros(len(rows), dtype=bool),
        bounds=np.zeros((len(rows), width), dtype=np.int64),
        width=width,
    )
    if cache is None:
        memo.reason = "no cache"
        return memo
    found = cache.lookup_all([memo.sig]).get(memo.sig)
    if found is None or found[0] != TEMPLATE_ID or found[1] != VERSION or found[2] != kernel_hash():
        memo.reason = "no entry for these inputs (a partition reads every unit's time and memory, HBM, reserve)"
        return memo
    try:
        cols, k, w, rows_b, ok_b, bounds_b = msgpack.unpackb(found[4])
        old_rows = np.frombuffer(rows_b, dtype="<i4").reshape(k, len(cols)).astype(np.int64)
        old_ok = np.frombuffer(ok_b, dtype="u1").astype(bool).reshape(k)
        old_bounds = np.frombuffer(bounds_b, dtype="<u2").reshape(k, w)
    except (ValueError, TypeError, msgpack.UnpackException):  # not our layout: ignored, never trusted
        memo.reason = "cached entry is unreadable"
        return memo
    if tuple(cols) != memo.columns:
        memo.reason = "cached entry has other row columns"
        return memo
    i_new, i_old = _match(rows, old_rows)
    kk = min(w, width)
    memo.bounds[i_new, :kk] = old_bounds[i_old, :kk]
    memo.ok[i_new] = old_ok[i_old]
    memo.known[i_new] = True
    memo.hits = len(i_new)
    rest = np.ones(k, dtype=bool)
    rest[i_old] = False
    memo.stored = {"rows": old_rows[rest].astype("<i4"), "ok": old_ok[rest], "bounds": old_bounds[rest]}
    if record_hits and len(i_new):
        first = np.empty(len(rows), dtype=np.int64)
        first[inverse.ravel()[::-1]] = np.arange(n)[::-1]
        memo.audit = PartitionHit(first[i_new], memo.ok[i_new].copy(), memo.bounds[i_new].copy())
    memo.reason = "rows not in the cached entry (new strategies or in-flight counts)"
    return memo


def audit(result, model, cluster, cands, limit=None) -> tuple[int, int]:
    """Re-solve served partition rows from COLD inputs (every primitive evaluated afresh): (audited, stale)."""
    import numpy as np

    from methodkit.tools.concord.evaluate import unit_channels
    from methodkit.tools.concord.search import BISECTION_RTOL, BISECTION_STEPS

    if result is None or len(result.candidate) == 0:
        return 0, 0
    index = result.candidate if limit is None else result.candidate[:limit]
    ch, p2p = unit_channels(model, cluster, cands, index, None)
    pp = cands.columns["pp"][index].astype(np.int64)
    vpp = cands.columns["vpp"][index].astype(np.int64)
    micro = int(model.globals["global.batch"]) // (cands.columns["mbs"][index] * cands.columns["dp"][index])
    micro = micro.astype(np.int64)
    limit_b = (cluster.hbm - cluster.values["hw.reserve"] - ch["transient"].max(axis=1)) / vpp
    out = np.zeros((len(index), result.bounds.shape[1]), dtype=np.int64)
    ok = kernels.partition_min_bottleneck(
        ch["time"], ch["state"], ch["act"], p2p, pp, vpp, micro, limit_b, out, BISECTION_STEPS, BISECTION_RTOL
    )
    m = len(index)
    bad = (ok != result.ok[:m]) | (out != result.bounds[:m]).any(axis=1)
    return m, int(bad.sum())

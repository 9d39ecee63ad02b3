"""The closed-form per-layer primitives (time, memory, communication) as DSL templates.

Each template maps a layer kind to an expression (or None where it does not
apply). Its dependency set is the expression's free symbols; the one raw Python
template (`dp_sync`, which picks a collective algorithm per group size) declares
its dependencies and reads them through a tracking proxy.

All values are per device. `.../mb` values are per microbatch, `.../step` per
optimizer step. Formulas follow the issue's section 2.3 (Megatron, Korthikanti
et al. 2022); the man page lists where we read the text our own way.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache

from methodkit.core.errors import RunFailure
from methodkit.tools.concord.dsl import Const, Expr, maximum, sym, where

KINDS = ("embedding", "attention", "mlp_dense", "mlp_moe", "lm_head", "model")
SIGMA = ("tp", "cp", "pp", "dp", "ep", "etp", "vpp", "mbs", "zero", "rc")


class UndeclaredDependency(RunFailure, RuntimeError):
    """A raw template read a symbol it did not declare (strict mode)."""


def S(name: str) -> Expr:
    return sym(f"sigma.{name}")


def G(name: str) -> Expr:
    return sym(f"global.{name}")


def H(name: str) -> Expr:
    return sym(f"hw.{name}")


def Lsym(name: str) -> Expr:
    return sym(f"layer.{name}")


# ---------------------------------------------------------------- building blocks


def _sc() -> Expr:
    return G("seq") / S("cp")


def _tokens() -> Expr:
    """Tokens one model replica's microbatch holds on this CP rank: b * s/cp."""
    return S("mbs") * _sc()


def _r(x: Expr) -> Expr:
    return x / (x + H("x0"))


def _eta() -> Expr:
    return H("eta_max") * _r(_tokens()) * _r(G("hidden") / S("tp"))


def _seconds(flops: Expr) -> Expr:
    return flops / (H("peak") * _eta())


def _link(extent: Expr) -> tuple[Expr, Expr]:
    """(bandwidth, latency) of a group spanning `extent` consecutive ranks: NVLink iff inside a node."""
    inside = extent <= H("g")
    return where(inside, H("nv_bw"), H("ib_bw")), where(inside, H("nv_lat"), H("ib_lat"))


def all_gather(n: Expr, payload: Expr, extent: Expr) -> Expr:
    bw, lat = _link(extent)
    return (n - 1) / n * payload / bw + (n - 1) * lat


reduce_scatter = all_gather
all_to_all = all_gather


def all_reduce(n: Expr, payload: Expr, extent: Expr) -> Expr:
    bw, lat = _link(extent)
    return 2 * (n - 1) / n * payload / bw + 2 * (n - 1) * lat


def p2p(payload: Expr, extent: Expr) -> Expr:
    bw, lat = _link(extent)
    return payload / bw + lat


def _glu_factor() -> Expr:
    """Matrices in the MLP: 3 for SwiGLU, 2 for GELU."""
    return 2 + Lsym("glu")


# ---------------------------------------------------------------- FLOPs (forward, per device)


def attention_proj_flops() -> Expr:
    h, hq = G("hidden"), Lsym("heads") * Lsym("head_dim")
    b_sc = _tokens()
    qkv = 2 * b_sc * h * (hq + 2 * Lsym("kv_heads") * Lsym("head_dim"))
    out = 2 * b_sc * hq * h
    return (qkv + out) / S("tp")


def attention_core_flops() -> Expr:
    c = where(G("causal") * G("flash"), 0.5, 1.0)
    hq = Lsym("heads") * Lsym("head_dim")
    return 4 * _tokens() * G("seq") * hq * c / S("tp")


def mlp_dense_flops() -> Expr:
    return 2 * _tokens() * G("hidden") * Lsym("ffn") * _glu_factor() / S("tp")


def mlp_moe_flops() -> Expr:
    b_sc, h = _tokens(), G("hidden")
    router = 2 * b_sc * h * Lsym("experts")
    routed = Lsym("top_k") * Lsym("imbalance") * 2 * b_sc * h * Lsym("moe_ffn") * _glu_factor()
    shared = 2 * b_sc * h * Lsym("shared_ffn") * _glu_factor()
    # tokens are sequence-parallel over tp; expert-TP splits weights, not tokens (our reading)
    return (router + routed + shared) / S("tp")


def lm_head_flops() -> Expr:
    return 2 * _tokens() * G("hidden") * G("vocab") / S("tp")


def forward_flops(kind: str) -> Expr | None:
    return {
        "attention": lambda: attention_proj_flops() + attention_core_flops(),
        "mlp_dense": mlp_dense_flops,
        "mlp_moe": mlp_moe_flops,
        "lm_head": lm_head_flops,
    }.get(kind, lambda: None)()


# ---------------------------------------------------------------- parameters (no strategy symbols)


def param_exprs(kind: str) -> tuple[Expr, Expr]:
    """(dense params, expert params) of one layer of `kind`."""
    h, norm = G("hidden"), G("norm")
    if kind == "embedding":
        return G("vocab") * h, Const(0.0)
    if kind == "attention":
        return Lsym("params") + h * norm, Const(0.0)
    if kind == "mlp_dense":
        return _glu_factor() * h * Lsym("ffn") + h * norm, Const(0.0)
    if kind == "mlp_moe":
        dense = h * Lsym("experts") + _glu_factor() * h * Lsym("shared_ffn") + h * norm
        return dense, Lsym("experts") * _glu_factor() * h * Lsym("moe_ffn")
    if kind == "lm_head":
        # a tied head shares the embedding matrix on one stage, and keeps its own copy when pp > 1
        tied_copy = where(S("pp") > 1, 1.0, 0.0)
        return G("vocab") * h * where(G("tie"), tied_copy, 1.0) + h * norm, Const(0.0)
    return Const(0.0), Const(0.0)


def param_counts(sub, globals_: Mapping[str, float]) -> tuple[float, float]:
    """Plain numbers for one sublayer (pp = 1), used for reporting and the baseline."""
    env = {**globals_, **sub.value_dict(), "sigma.pp": 1.0}
    dense, expert = param_exprs(sub.kind)
    return float(dense.compile()(env, 1)[0]), float(expert.compile()(env, 1)[0])


def _bytes_per_param(d: Expr) -> Expr:
    """Model-state bytes per parameter: ZeRO 0: 18, 1 (distributed optimizer): 6+12/d, 2: 2+16/d, 3: 18/d."""
    z = S("zero")
    return where(z.eq(0), 18.0, where(z.eq(1), 6 + 12 / d, where(z.eq(2), 2 + 16 / d, 18 / d)))


def _dense_dp() -> Expr:
    return S("dp") * S("cp")


def _expert_dp() -> Expr:
    return H("n") / (S("ep") * S("etp") * S("pp"))


# ---------------------------------------------------------------- activations (bytes per microbatch)


def _sbh() -> Expr:
    return _tokens() * G("hidden")


def _attention_act_none() -> Expr:
    a = Lsym("heads")
    scores = (1 - G("flash")) * 5 * a * _sc() / G("hidden") * _sbh()
    lse = G("flash") * 4 * S("mbs") * a * _sc()
    return (15 * _sbh() + scores + lse) / S("tp")


def _mlp_tensors(ffn: Expr) -> Expr:
    """Per-tensor accounting: SwiGLU 2sbh + 8sbf; GELU 2sbh + 4sbf + sbh."""
    b_sc = _tokens()
    glu = Lsym("glu")
    return glu * (2 * _sbh() + 8 * b_sc * ffn) + (1 - glu) * (3 * _sbh() + 4 * b_sc * ffn)


def _mlp_selective(ffn: Expr) -> Expr:
    """Megatron's generalisation (18 + 4f/h) sbh splits as 15 sbh (attention) + (3 sbh + 4 sbf) (MLP)."""
    return 3 * _sbh() + 4 * _tokens() * ffn


def activation_none(kind: str) -> Expr | None:
    tp = S("tp")
    if kind == "attention":
        return _attention_act_none()
    if kind == "mlp_dense":
        return _mlp_tensors(Lsym("ffn")) / tp
    if kind == "mlp_moe":
        kk = Lsym("top_k") * Lsym("imbalance")
        shared = where(Lsym("shared_ffn") > 0, _mlp_tensors(Lsym("shared_ffn")), 0.0)
        router = 4 * _tokens() * Lsym("experts")
        return (kk * _mlp_tensors(Lsym("moe_ffn")) + shared + router) / tp
    return None


def activation(kind: str) -> Expr | None:
    tp, rc = S("tp"), S("rc")
    if kind == "embedding":
        return (8 * _tokens() + _sbh()) / tp
    if kind == "lm_head":
        return 4 * _sbh() * (1 + G("vocab") / G("hidden")) / tp
    if kind == "attention":
        selective = 15 * _sbh() / tp
        full = 2 * _sbh() / tp  # the block input, kept once per block
        return where(rc.eq(2), full, where(rc.eq(1), selective, _attention_act_none()))
    if kind == "mlp_dense":
        selective = _mlp_selective(Lsym("ffn")) / tp
        return where(rc.eq(0), activation_none(kind), where(rc.eq(1), selective, 0.0))
    if kind == "mlp_moe":
        kk = Lsym("top_k") * Lsym("imbalance")
        shared = where(Lsym("shared_ffn") > 0, _mlp_selective(Lsym("shared_ffn")), 0.0)
        selective = (kk * _mlp_selective(Lsym("moe_ffn")) + shared + 4 * _tokens() * Lsym("experts")) / tp
        return where(rc.eq(0), activation_none(kind), where(rc.eq(1), selective, 0.0))
    return None


def transient(kind: str) -> Expr | None:
    """Full recompute rebuilds one layer's whole working set during its backward pass."""
    none = activation_none(kind)
    return None if none is None else where(S("rc").eq(2), none, 0.0)


# ---------------------------------------------------------------- the template registry


@dataclass(frozen=True)
class Template:
    """A named primitive: `build(kind)` gives its DSL expression (None: not applicable)."""

    id: str
    version: int
    channel: str  # which per-unit quantity it adds to
    build: Callable[[str], Expr | None] = field(compare=False)
    raw: Callable | None = field(default=None, compare=False)  # raw Python template: fn(env, kind)
    declared: Callable[[str], tuple] | None = field(default=None, compare=False)
    # the span of its only collectives, from projected strategy rows: where no row spans more than a node,
    # the inter-node link symbols (INTER_NODE) are never read and leave the signature
    extent: Callable[[Mapping], object] | None = field(default=None, compare=False)


def _compute_seconds(kind: str) -> Expr | None:
    fwd = forward_flops(kind)
    if fwd is None:
        return None
    rc = S("rc")
    if kind == "attention":
        core = _seconds(attention_core_flops())
        extra = where(rc.eq(2), _seconds(fwd), where(rc.eq(1), core, 0.0))
    elif kind == "lm_head":
        extra = Const(0.0)  # the head is not recomputed
    else:
        extra = where(rc.eq(2), _seconds(fwd), 0.0)
    return 3 * _seconds(fwd) + extra  # backward = 2x forward


def _tp_comm(kind: str) -> Expr | None:
    if kind == "model":
        return None
    tp = S("tp")
    payload = _sbh() * G("dtype")
    one = all_gather(tp, payload, tp) + reduce_scatter(tp, payload, tp)
    # forward AG + RS per sublayer and the same in backward; the embedding has one RS/AG pair
    return one if kind == "embedding" else 2 * one


def _cp_exposed(kind: str) -> Expr | None:
    if kind != "attention":
        return None
    cp, tp = S("cp"), S("tp")
    kv_bytes = 2 * _tokens() * Lsym("kv_heads") * Lsym("head_dim") * G("dtype") / tp
    comm = (cp - 1) * p2p(kv_bytes, tp * cp)
    core = _seconds(attention_core_flops())
    return maximum(0.0, comm - core) + maximum(0.0, 2 * comm - 2 * core)


def _ep_comm(kind: str) -> Expr | None:
    if kind != "mlp_moe":
        return None
    ep = S("ep")
    payload = S("mbs") * (_sc() / S("tp")) * Lsym("top_k") * G("hidden") * G("dtype")
    return 4 * all_to_all(ep, payload, ep * S("etp"))  # dispatch + combine, forward and backward


def _local_params() -> tuple[Callable[[str], Expr], Callable[[str], Expr]]:
    def dense(kind):
        return param_exprs(kind)[0] / S("tp")

    def expert(kind):
        return param_exprs(kind)[1] / (S("ep") * S("etp"))

    return dense, expert


def _state_bytes(kind: str) -> Expr | None:
    if kind == "model":
        return None
    dense, expert = _local_params()
    return dense(kind) * _bytes_per_param(_dense_dp()) + expert(kind) * _bytes_per_param(_expert_dp())


def _zero3_comm(kind: str) -> Expr | None:
    if kind == "model":
        return None
    dense, expert = _local_params()
    d, de = _dense_dp(), _expert_dp()
    tp_cp = S("tp") * S("cp")
    gather = all_gather(d, dense(kind) * G("dtype"), tp_cp * S("dp"))
    gather_e = all_gather(de, expert(kind) * G("dtype"), H("n") / S("pp"))
    return where(S("zero").eq(3), 2 * (gather + gather_e), 0.0)


def _optimizer_seconds(kind: str) -> Expr | None:
    if kind == "model":
        return None
    dense, expert = _local_params()
    sharded = S("zero") >= 1
    own = dense(kind) / where(sharded, _dense_dp(), 1.0) + expert(kind) / where(sharded, _expert_dp(), 1.0)
    return 32 * own / H("hbm_bw")


def _pp_p2p(kind: str) -> Expr | None:
    if kind != "model":
        return None
    payload = _sbh() * G("dtype") / S("tp")
    send = p2p(payload, H("n"))  # the pp group spans every rank (pp is outermost)
    return where(S("pp") > 1, 2 * send, 0.0)  # forward activation + backward gradient


def _params_dense(kind: str) -> Expr | None:
    return None if kind == "model" else param_exprs(kind)[0]


def _params_expert(kind: str) -> Expr | None:
    return None if kind != "mlp_moe" else param_exprs(kind)[1]


# ---- the raw template: collective-algorithm choice for the per-step gradient sync


def _dp_sync_deps(kind: str) -> tuple:
    if kind == "model":
        return ()
    layer = {
        "embedding": (),
        "attention": ("layer.params",),
        "mlp_dense": ("layer.ffn", "layer.glu"),
        "mlp_moe": ("layer.experts", "layer.glu", "layer.shared_ffn", "layer.moe_ffn"),
        "lm_head": ("global.tie", "sigma.pp"),
    }[kind]
    hw = ("hw.g", "hw.n", "hw.nv_bw", "hw.nv_lat", "hw.ib_bw", "hw.ib_lat")
    sigma = ("sigma.tp", "sigma.cp", "sigma.dp", "sigma.zero", "sigma.ep", "sigma.etp", "sigma.pp")
    return tuple(sorted({*layer, *hw, *sigma, "global.hidden", "global.norm", "global.vocab", "global.dtype"}))


def _steps(n):
    """ceil(log2 n) per element, exactly: the binary exponent of n - 1 (the DSL has no logarithm)."""
    import numpy as np

    return np.frexp(np.maximum(np.asarray(n, dtype=np.float64) - 1.0, 0.0))[1].astype(np.float64)


def _dp_sync_raw(env, kind):
    """Per-step gradient sync: ring vs recursive halving-doubling all-reduce, whichever is cheaper."""
    import numpy as np

    dense_e, expert_e = param_exprs(kind)
    dense = _eval_sub(dense_e, env) / env["sigma.tp"]
    expert = _eval_sub(expert_e, env) / (env["sigma.ep"] * env["sigma.etp"])
    dtype = env["global.dtype"]
    g = env["hw.g"]

    def link(extent):
        inside = extent <= g
        return np.where(inside, env["hw.nv_bw"], env["hw.ib_bw"]), np.where(inside, env["hw.nv_lat"], env["hw.ib_lat"])

    def sync(n, payload, extent):
        bw, lat = link(extent)
        ring = 2 * (n - 1) / n * payload / bw + 2 * (n - 1) * lat
        rhd = 2 * (n - 1) / n * payload / bw + 2 * _steps(n) * lat
        reduce = np.minimum(ring, rhd)
        scatter_gather = 2 * ((n - 1) / n * payload / bw + (n - 1) * lat)
        return np.where(env["sigma.zero"] == 0, reduce, scatter_gather)

    d = env["sigma.dp"] * env["sigma.cp"]
    de = env["hw.n"] / (env["sigma.ep"] * env["sigma.etp"] * env["sigma.pp"])
    out = sync(d, dense * dtype, env["sigma.tp"] * d)
    if kind == "mlp_moe":
        out = out + sync(de, expert * dtype, env["hw.n"] / env["sigma.pp"])
    return out


_SUB: dict = {}


def _eval_sub(expr: Expr, env):
    """Evaluate a DSL sub-expression inside a raw template, reading through the same proxy."""
    from methodkit.tools.concord.dsl import Compiled

    code = expr.code
    if code not in _SUB:
        _SUB[code] = Compiled(expr)
    return _SUB[code]._fn(env)


TEMPLATES: tuple[Template, ...] = (
    Template("compute", 1, "time", _compute_seconds),
    Template("tp_comm", 1, "time", _tp_comm, extent=lambda rows: rows["sigma.tp"]),
    Template("cp_exposed", 1, "time", _cp_exposed, extent=lambda rows: rows["sigma.tp"] * rows["sigma.cp"]),
    Template("ep_comm", 1, "time", _ep_comm),
    Template("zero3_comm", 1, "time", _zero3_comm),
    Template("activation", 1, "act", activation),
    Template("transient", 1, "transient", transient),
    Template("state", 1, "state", _state_bytes),
    Template("params_dense", 1, "params_dense", _params_dense),
    Template("params_expert", 1, "params_expert", _params_expert),
    Template("optimizer", 1, "optimizer", _optimizer_seconds),
    Template("dp_sync", 1, "dp", lambda kind: None, raw=_dp_sync_raw, declared=_dp_sync_deps),
    Template("pp_p2p", 1, "p2p", _pp_p2p),
)
INTER_NODE = ("hw.ib_bw", "hw.ib_lat")
CHANNELS = ("time", "act", "transient", "state", "params_dense", "params_expert", "optimizer", "dp", "p2p")


class TrackingEnv(Mapping):
    """Read-only view of the symbol environment that refuses undeclared reads (strict mode)."""

    def __init__(self, env: Mapping, declared, template: str, strict: bool = True):
        self._env = env
        self._declared = frozenset(declared)
        self._template = template
        self._strict = strict
        self.reads: set[str] = set()

    def __getitem__(self, key):
        if key not in self._declared:
            if self._strict:
                raise UndeclaredDependency(f"template '{self._template}' read undeclared symbol '{key}'")
        self.reads.add(key)
        return self._env[key]

    def __iter__(self):
        return iter(self._declared)

    def __len__(self):
        return len(self._declared)


@dataclass
class Instance:
    """A template specialised to a layer kind: its dependency split and its evaluator."""

    template: Template
    kind: str
    layer_deps: tuple  # D_L: non-strategy symbols, sorted
    sigma_deps: tuple  # D_sigma, sorted
    code_hash: str
    _fn: Callable = field(repr=False, default=None)
    strict: bool = True

    def signature_deps(self, rows: Mapping, g: float) -> tuple:
        """D_L for one projection: without the inter-node link symbols when every row stays in a node."""
        import numpy as np

        if self.template.extent is None or not rows or not set(INTER_NODE) <= set(self.layer_deps):
            return self.layer_deps
        if float(np.max(self.template.extent(rows))) > g:
            return self.layer_deps
        return tuple(k for k in self.layer_deps if k not in INTER_NODE)

    def evaluate(self, env: Mapping, size: int):
        import numpy as np

        with np.errstate(divide="ignore", invalid="ignore"):
            if self.template.raw is None:
                return self._fn(env, size)
            proxy = TrackingEnv(env, self.layer_deps + self.sigma_deps, self.template.id, self.strict)
            out = np.asarray(self.template.raw(proxy, self.kind), dtype=np.float64)
            return np.full(size, float(out)) if out.ndim == 0 else out


@cache
def instance(template_id: str, kind: str, strict: bool = True) -> Instance | None:
    """The (cached) specialisation of a template to a layer kind, or None where it does not apply."""
    template = next(t for t in TEMPLATES if t.id == template_id)
    if template.raw is not None:
        deps = template.declared(kind)
        if not deps:
            return None
        code_hash = executed_source_hash(template.raw, template.declared)
        fn = None
    else:
        expr = template.build(kind)
        if expr is None:
            return None
        compiled = expr.compile()
        deps, code_hash, fn = compiled.symbols, compiled.code_hash, compiled
    sigma = tuple(sorted(d for d in deps if d.startswith("sigma.")))
    layer = tuple(sorted(d for d in deps if not d.startswith("sigma.")))
    return Instance(template, kind, layer, sigma, code_hash, fn, strict)


_STRICT: ContextVar[bool] = ContextVar("concord_strict_dependencies", default=True)


@contextmanager
def dependency_checks(strict: bool):
    """Within the block, instances_for() hands out strict (default) or lax raw templates."""
    token = _STRICT.set(bool(strict))
    try:
        yield
    finally:
        _STRICT.reset(token)


def instances_for(kind: str, strict: bool | None = None) -> list[Instance]:
    """The templates that apply to a layer kind. strict=False (default: the dependency_checks block, else
    True) lets raw templates read undeclared symbols: a diagnostic, since stale cache hits then become
    possible and the verify audit is what catches them."""
    strict = _STRICT.get() if strict is None else strict
    return [i for t in TEMPLATES if (i := instance(t.id, kind, strict)) is not None]


def _executed_functions(fns) -> list:
    """`fns` and every function of the methodkit package they reach by a global name, transitively."""
    import types

    seen: dict = {}
    todo = list(fns)
    while todo:
        fn = todo.pop()
        fn = inspect.unwrap(fn)
        if not isinstance(fn, types.FunctionType) or fn in seen:
            continue
        if not (fn.__module__ or "").startswith("methodkit."):
            continue
        seen[fn] = None
        codes = [fn.__code__]
        while codes:
            code = codes.pop()
            codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
            for name in code.co_names:
                target = fn.__globals__.get(name)
                if isinstance(target, types.FunctionType):
                    todo.append(target)
                elif isinstance(target, type) and (target.__module__ or "").startswith("methodkit."):
                    todo.extend(v for v in vars(target).values() if isinstance(v, types.FunctionType))
    return sorted(seen, key=lambda f: (f.__module__, f.__qualname__))


def executed_source_hash(*fns) -> str:
    """BLAKE2b of the source of what a raw template executes: the template, its declared-deps function and
    every methodkit helper they reach, so editing a helper without a version bump invalidates cached rows."""
    h = hashlib.blake2b(digest_size=16)
    for fn in _executed_functions(fns):
        h.update(f"{fn.__module__}.{fn.__qualname__}\n".encode())
        try:
            h.update(inspect.getsource(fn).encode())
        except OSError:  # generated (dataclass __repr__ ...): its bytecode stands for its source
            h.update(fn.__code__.co_code)
    return h.hexdigest()


__all__ = [
    "TEMPLATES",
    "CHANNELS",
    "INTER_NODE",
    "dependency_checks",
    "executed_source_hash",
    "instance",
    "instances_for",
    "UndeclaredDependency",
]

"""The DSL, dependency sets and the raw template's tracking proxy."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.tools.concord import dsl, templates
from methodkit.tools.concord.templates import TrackingEnv, UndeclaredDependency, instance


def test_free_symbols_and_substitution():
    x, y = dsl.sym("layer.a"), dsl.sym("sigma.tp")
    e = dsl.where(y > 1, x * 2 / y, x) + dsl.maximum(0.0, x - 3) + dsl.ceil(x / 7) + x**2
    assert e.free_symbols == {"layer.a", "sigma.tp"}
    sub = e.substitute({"layer.a": 10.0})
    assert sub.free_symbols == {"sigma.tp"}
    out = sub.compile()({"sigma.tp": np.array([1.0, 2.0, 4.0])}, 3)
    expected = [10 + 7 + 2 + 100, 10 + 7 + 2 + 100, 5 + 7 + 2 + 100]
    assert out.tolist() == expected


def test_pow_takes_small_integers_only():
    with pytest.raises(TypeError):
        dsl.sym("layer.a") ** 0.5


def test_symbols_need_a_namespace():
    with pytest.raises(ValueError):
        dsl.sym("tp")


def test_unique_rows_and_full_rows_give_identical_bits():
    """The property the warm path relies on: elementwise evaluation does not depend on the batch."""
    rng = np.random.default_rng(0)
    inst = instance("compute", "attention")
    env = {k: float(rng.integers(1, 50) * 64) for k in inst.layer_deps}
    env.update({"hw.peak": 3.12e14, "hw.eta_max": 0.6, "hw.x0": 128.0, "global.causal": 1.0, "global.flash": 1.0})
    rows = {k: rng.choice([1.0, 2.0, 4.0], size=500) for k in inst.sigma_deps}
    rows["sigma.rc"] = rng.choice([0.0, 1.0, 2.0], size=500)
    full = inst.evaluate({**env, **rows}, 500)
    table = np.stack([rows[k] for k in inst.sigma_deps], axis=1)
    unique, inverse = np.unique(table, axis=0, return_inverse=True)
    few = inst.evaluate({**env, **{k: unique[:, j] for j, k in enumerate(inst.sigma_deps)}}, len(unique))
    assert np.array_equal(few[inverse.ravel()].view(np.uint64), full.view(np.uint64))


def test_dependency_split_of_attention_compute():
    inst = instance("compute", "attention")
    assert set(inst.sigma_deps) == {"sigma.tp", "sigma.cp", "sigma.mbs", "sigma.rc"}
    assert "global.seq" in inst.layer_deps and "hw.peak" in inst.layer_deps
    assert "global.vocab" not in inst.layer_deps


def test_parameter_templates_do_not_read_seq_or_strategy():
    for kind in ("attention", "mlp_dense", "mlp_moe"):
        inst = instance("params_dense", kind)
        assert inst.sigma_deps == ()
        assert "global.seq" not in inst.layer_deps
        assert "global.seq" not in instance("state", kind).layer_deps


def test_templates_that_do_not_apply_are_absent():
    assert instance("ep_comm", "attention") is None
    assert instance("cp_exposed", "mlp_dense") is None
    assert instance("pp_p2p", "model") is not None


def test_tracking_proxy_refuses_undeclared_reads():
    env = TrackingEnv({"hw.g": 8.0, "hw.n": 64.0}, ["hw.g"], "dp_sync", strict=True)
    assert env["hw.g"] == 8.0
    with pytest.raises(UndeclaredDependency, match="dp_sync.*hw.n"):
        env["hw.n"]
    lax = TrackingEnv({"hw.n": 64.0}, [], "dp_sync", strict=False)
    assert lax["hw.n"] == 64.0 and lax.reads == {"hw.n"}


def test_raw_template_reads_exactly_what_it_declares():
    """Run dp_sync through a strict proxy for every kind: no undeclared read, every declared symbol read."""
    from methodkit.tools.concord import spec
    from methodkit.tools.concord.evaluate import base_env

    for kind, sub in (
        (
            "attention",
            spec.Sublayer("attention", (("heads", 8.0), ("head_dim", 64.0), ("kv_heads", 8.0), ("params", 1e6))),
        ),
        ("mlp_dense", spec.Sublayer("mlp_dense", (("ffn", 4096.0), ("glu", 1.0)))),
        ("lm_head", spec.Sublayer("lm_head", ())),
    ):
        inst = instance("dp_sync", kind)
        env = {
            **{k: 1.0 for k in inst.layer_deps},
            **{"hw.nv_bw": 3e11, "hw.ib_bw": 2.5e10, "hw.g": 8.0, "hw.n": 64.0, "global.hidden": 1024.0},
            **sub.value_dict(),
        }
        env.update({k: np.array([1.0, 2.0]) for k in inst.sigma_deps})
        proxy = TrackingEnv(env, inst.layer_deps + inst.sigma_deps, "dp_sync", strict=True)
        out = templates._dp_sync_raw(proxy, kind)
        assert np.all(np.isfinite(out))
        assert proxy.reads <= set(inst.layer_deps + inst.sigma_deps)
        assert base_env is not None

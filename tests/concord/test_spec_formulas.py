"""Spec validation, units, the HF importer, and known-answer checks against Megatron's formulas."""

from __future__ import annotations

import copy
import math

import pytest

from methodkit.core.errors import DataError
from methodkit.tools.concord import spec, units
from methodkit.tools.concord.search import model_flops_per_step


def test_units():
    assert units.parse("80GiB", "bytes") == 80 * 2**30
    assert units.parse("900GB/s", "bandwidth") == 9e11
    assert units.parse("312TFLOP/s", "flops") == 3.12e14
    assert units.parse("5us", "time") == 5e-6
    with pytest.raises(units.UnitError):
        units.parse("80 parsecs", "bytes")


def test_validation_names_every_problem_with_its_key_path(docs):
    dense, moe, cluster, _ = docs
    moe["layers"][1]["attention"]["kv_heads"] = 6
    moe["layers"][1]["mlp"]["top_k"] = 9
    with pytest.raises(DataError) as err:
        spec.load_model(moe, "m.yaml")
    text = err.value.message
    assert "layers[1].attention.kv_heads: heads 16 is not a multiple of kv_heads 6" in text
    assert "layers[1].mlp.top_k: top_k 9 exceeds experts 8" in text
    cluster["devices"] = 36
    cluster["hbm"] = "16 furlongs"
    cluster["links"]["inter"]["bandwidth"] = -3
    with pytest.raises(DataError) as err:
        spec.load_cluster(cluster, "c.yaml")
    text = err.value.message
    assert "devices: 36 is not a multiple of devices_per_node 8" in text
    assert "hbm: unknown unit" in text
    assert "links.inter.bandwidth: must be positive" in text
    dense["seq"] = 2050
    with pytest.raises(DataError, match="not divisible by 2\\*cp_max"):
        spec.check_model_fits_space(spec.load_model(dense), spec.Space(cp_max=2), "m.yaml")


def test_hf_import_mixtral_and_deepseek():
    mixtral = {
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "vocab_size": 32000,
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-5,
        "hidden_act": "silu",
    }
    model = spec.load_model(mixtral, "config.json")
    assert model.blocks == 32 and model.is_moe and model.max_experts() == 8
    assert 46e9 < model.param_count() < 47.5e9  # Mixtral-8x7B has 46.7B parameters
    ds = {
        "hidden_size": 7168,
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "intermediate_size": 18432,
        "moe_intermediate_size": 2048,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "first_k_dense_replace": 3,
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "vocab_size": 129280,
    }
    model = spec.load_model(ds, "config.json")
    assert model.blocks == 61
    assert 660e9 < model.param_count() < 690e9  # DeepSeek-V3: 671B (+ MTP, which we omit)


def _megatron_flops(B, s, L, h, f, V, a, g, k=1, glu=1.5):
    """Megatron's num_floating_point_operations (kappa = 1, c = 1, no recompute), re-typed from the issue."""
    return 12 * B * s * L * h * h * (1 + (f / h) * k * glu + g / a + s / h + V / (2 * L * h))


def test_flops_reproduce_megatron(docs):
    dense, _, _, _ = docs
    dense["causal"] = False  # c = 1, as Megatron counts
    model = spec.load_model(dense)
    ours = model_flops_per_step(model)
    ref = _megatron_flops(64, 2048, 8, 1024, 4096, 32000, 16, 4)
    assert math.isclose(ours, ref, rel_tol=1e-12)


def test_flops_moe_matches_megatron_with_unit_imbalance():
    doc = {
        "hidden": 512,
        "vocab": 1000,
        "seq": 256,
        "global_batch": 8,
        "causal": False,
        "layers": [
            {
                "count": 4,
                "attention": {"heads": 8, "kv_heads": 8},
                "mlp": {"kind": "moe", "experts": 4, "top_k": 2, "moe_ffn": 1024, "imbalance": 1.0},
            }
        ],
    }
    ours = model_flops_per_step(spec.load_model(doc))
    router = 3 * 2 * 8 * 256 * 512 * 4 * 4  # 3x(fwd) router FLOPs, which Megatron leaves out
    ref = _megatron_flops(8, 256, 4, 512, 1024, 1000, 8, 8, k=2)
    assert math.isclose(ours - router, ref, rel_tol=1e-12)


def _megatron_memory(h, f, a, g, L, V, s, b, t, p, d, m, vpp=None, swiglu=True, dist_opt=True):
    """Megatron's theoretical_memory_usage (weights+optimizer, activations with SP + selective), re-typed."""
    glu = 1.5 if swiglu else 1.0
    attn = 2 * h * h * ((1 + g / a) * 1.0)
    layer = 2 * h * (f * glu + 1) + attn  # RMSNorm: norm size 1
    emb = h * V
    block = layer * L + h
    shard = (block / p + emb) / t
    if p == 1:
        shard += emb / t  # untied output layer
    per_param = 6 + 12 / d if dist_opt else 18
    states = shard * per_param
    act = s * b * h * (18 + 4 * f / h) * L
    act += 8 * s * b * p + s * b * h * p
    if vpp is not None:
        act *= 1 + (p - 1) / (p * vpp)
    if vpp is None and p > 1:
        act *= min(1, m / p)
    if p == 1:
        act += s * b * h * 4 * (1 + V / h)
    return states, act / t


@pytest.mark.parametrize("t,p,mbs", [(1, 1, 1), (2, 4, 1), (4, 2, 2), (8, 1, 2)])
def test_first_stage_memory_matches_megatron(docs, t, p, mbs):
    """Held-out check: our stage-0 states and activations under a uniform split equal Megatron's formula."""
    import numpy as np

    from methodkit.tools.concord.candidates import enumerate_candidates
    from methodkit.tools.concord.evaluate import unit_channels
    from methodkit.tools.concord.kernels import inflight, uniform_bounds

    dense, _, cluster, _ = docs
    model = spec.load_model(dense)
    cl = spec.load_cluster(cluster)
    n = cl.devices
    d = n // (t * p)
    sigma = {"tp": t, "cp": 1, "pp": p, "ep": 1, "etp": 1, "vpp": 1, "mbs": mbs, "zero": 1, "rc": 1}
    cands = enumerate_candidates(model, cl, spec.Space(), forced=sigma)
    ch, _ = unit_channels(model, cl, cands, np.array([0]), None)
    bounds = np.zeros(p + 1, dtype=np.int64)
    uniform_bounds(len(model.units), p, bounds)
    first = slice(bounds[0], bounds[1])
    m = 64 // (mbs * d)
    states = ch["state"][0, first].sum()
    act = ch["act"][0, first].sum() * inflight(0, p, 1, m)
    if p == 1:  # the LM head shares stage 0
        pass
    ref_states, ref_act = _megatron_memory(1024, 4096, 16, 4, 8, 32000, 2048, mbs, t, p, d, m)
    # Megatron puts the final norm's 1/p share on every stage; we keep it whole on the last stage
    final_norm = 1024 * (6 + 12 / d) / t
    assert math.isclose(states + (final_norm / p if p > 1 else 0), ref_states, rel_tol=1e-12)
    assert math.isclose(act, ref_act, rel_tol=1e-12)


def test_space_rejects_unknown_keys():
    with pytest.raises(DataError, match="tpmax: unknown key"):
        spec.load_space({"tpmax": 4})
    assert spec.load_space({"zero": [1, 0]}).zero == (0, 1)
    with pytest.raises(DataError, match="ZeRO stages"):
        spec.load_space({"zero": [4]})
    assert copy.copy(spec.Space()).tp_max == 8

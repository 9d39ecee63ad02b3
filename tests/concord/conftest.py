"""Small specs that plan in well under a second."""

from __future__ import annotations

import copy

import pytest

SMALL_MODEL = {
    "name": "small-dense",
    "hidden": 1024,
    "vocab": 32000,
    "seq": 2048,
    "global_batch": 64,
    "layers": [
        {
            "count": 8,
            "attention": {"heads": 16, "kv_heads": 4, "head_dim": 64},
            "mlp": {"kind": "dense", "ffn": 4096, "activation": "swiglu"},
        }
    ],
}
SMALL_MOE = {
    "name": "small-moe",
    "hidden": 1024,
    "vocab": 32000,
    "seq": 2048,
    "global_batch": 64,
    "layers": [
        {"count": 2, "attention": {"heads": 16, "kv_heads": 4}, "mlp": {"kind": "dense", "ffn": 4096}},
        {
            "count": 6,
            "attention": {"heads": 16, "kv_heads": 4},
            "mlp": {"kind": "moe", "experts": 8, "top_k": 2, "moe_ffn": 1024, "shared_ffn": 1024},
        },
    ],
}
SMALL_CLUSTER = {
    "name": "small-a100",
    "devices": 32,
    "devices_per_node": 8,
    "hbm": "16GiB",
    "hbm_bandwidth": "2TB/s",
    "peak_flops": "312TFLOP/s",
    "reserve": "1GiB",
    "links": {
        "nvlink": {"bandwidth": "300GB/s", "latency": "5us"},
        "inter": {"bandwidth": "25GB/s", "latency": "10us"},
    },
}
SMALL_SPACE = {
    "tp_max": 8,
    "cp_max": 2,
    "pp_max": 8,
    "ep_max": 4,
    "etp_max": 2,
    "vpp": [1, 2],
    "mbs": [1, 2],
    "zero": [0, 1, 3],
}


@pytest.fixture
def small():
    from methodkit.tools.concord import spec

    def make(model=SMALL_MODEL, cluster=SMALL_CLUSTER, space=SMALL_SPACE):
        return spec.load_model(copy.deepcopy(model)), spec.load_cluster(copy.deepcopy(cluster)), spec.load_space(space)

    return make


@pytest.fixture
def docs():
    return copy.deepcopy(SMALL_MODEL), copy.deepcopy(SMALL_MOE), copy.deepcopy(SMALL_CLUSTER), dict(SMALL_SPACE)

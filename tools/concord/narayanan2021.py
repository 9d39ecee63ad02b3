"""Published reference data: Table 1 of Narayanan et al. (SC'21), as a fixture.

Source: Deepak Narayanan, Mohammad Shoeybi, Jared Casper, Patrick LeGresley, Mostofa Patwary,
Vijay Korthikanti, Dmitri Vainbrand, Prethvi Kashinkunti, Julie Bernauer, Bryan Catanzaro, Amar
Phanishayee, Matei Zaharia. "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM". SC'21 (arXiv:2104.04473), Table 1: "Weak-scaling throughput for GPT models ranging
from 1 billion to 1 trillion parameters".

These are published measurements, copied by hand, not code and not our figures. Every row was
cross-checked against three independent transcriptions of the table, and the tests check the
rows against each other (parameters from Eq. 2, % of peak = TFLOP/s / 312, aggregate =
TFLOP/s x GPUs). The paper's setting (section 5): GPT models with vocabulary 51,200 (padded) and
sequence length 2048, mixed precision on NVIDIA's Selene (DGX A100 80GB nodes: 8 GPUs joined by
NVLink 3 / NVSwitch, 8 HDR InfiniBand 200 Gb/s adapters per node), activation recomputation on,
no ZeRO. The achieved teraFLOP/s count the recomputation forward pass (Eq. 3:
F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h))). The table does not give the microbatch size or the
number of interleaved stages; the reference check searches those two.
"""

from __future__ import annotations

SOURCE = (
    "Narayanan et al., 'Efficient Large-Scale Language Model Training on GPU Clusters Using "
    "Megatron-LM', SC'21 (arXiv:2104.04473), Table 1"
)

# Selene as the paper describes it (section 5): A100-SXM4-80GB, 312 TFLOP/s dense fp16/bf16,
# 2.039 TB/s HBM2e, NVLink 3 at 600 GB/s bidirectional (300 GB/s each way), one 200 Gb/s HDR
# InfiniBand adapter per GPU (25 GB/s). Efficiency and latency parameters are the issue's
# defaults (eta_max 0.6, x0 128), deliberately NOT fitted to the table below.
SELENE = {
    "name": "selene-a100-80gb",
    "devices_per_node": 8,
    "hbm": "80GiB",
    "hbm_bandwidth": "2.039TB/s",
    "peak_flops": "312TFLOP/s",
    "eta_max": 0.6,
    "eta_x0": 128,
    "reserve": "2.5GiB",
    "links": {
        "nvlink": {"bandwidth": "300GB/s", "latency": "5us"},
        "inter": {"bandwidth": "25GB/s", "latency": "10us"},
    },
}

# The setting shared by every row (section 5 of the paper).
SETTING = {
    "seq": 2048,
    "vocab": 51200,
    "activation": "gelu",
    "norm": "layernorm",
    "tie_embeddings": True,
    "flash_attention": False,  # 2021: fused scale-mask-softmax, scores materialised
    "recompute": "full",
    "zero": 0,
}

COLUMNS = (
    "params_b",
    "heads",
    "hidden",
    "layers",
    "tp",
    "pp",
    "gpus",
    "batch",
    "tflops_per_gpu",
    "percent_peak",
    "aggregate_pflops",
)

# params (billion), attention heads, hidden size, layers, tensor-parallel size, pipeline-parallel
# size, GPUs, batch size, achieved teraFLOP/s per GPU, % of theoretical peak, aggregate petaFLOP/s
ROWS = (
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 44, 4.4),
    (3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 44, 8.8),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 46, 18.2),
    (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 43, 34.6),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 44, 70.8),
    (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 45, 143.8),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 47, 227.1),
    (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155, 50, 297.4),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163, 52, 410.2),
    (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 52, 502.0),
)


def table() -> dict:
    """The fixture as one document (what `concord-plan fixtures DIR` writes as reference/narayanan2021-table1.yaml)."""
    return {
        "source": SOURCE,
        "metric": "achieved teraFLOP/s per GPU, Eq. 3 FLOPs (recomputation included)",
        "setting": dict(SETTING),
        "cluster": dict(SELENE),
        "rows": [dict(zip(COLUMNS, row)) for row in ROWS],
    }

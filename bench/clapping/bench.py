"""clapping benchmarks: compression kernels vs references, and the algorithms compared on digits.

Kernels (64 x 4096 fp32): fused Numba top-k delta update vs torch (sub, topk, gather, scatter_add);
fused 2-bit quantise+pack+update vs a NumPy bit-packing reference. Then a D1-style table on
digits (P=4, top-k 5%, R=4, same steps): val loss, bytes and buffer memory per algorithm.
"""

from __future__ import annotations

import torch

from methodkit.tools.clapping import tasks
from methodkit.tools.clapping.kernel_bench import bench
from methodkit.tools.clapping.pipeline import RunConfig, simulate


def main():
    torch.set_num_threads(1)
    print("case  size  ours_s  ref_s  ratio")
    for spec in ("topk:0.05", "quant:2"):
        row = bench(spec, 64, 4096, 30)
        print(
            f"{spec} ({row['reference']})  {row['size']}  {row['ours_s']:.5f}  {row['ref_s']:.5f}  {row['ratio']:.2f}"
        )
    data = tasks.digits_data(0)
    print("# digits, P=4, topk:0.05, lr 0.3, 400 steps")
    print("algo  reuse  val_loss  accuracy  bytes  ratio_vs_exact  buffer_bytes")
    for algo, reuse in (
        ("none", 1),
        ("none", 4),
        ("naive", 1),
        ("ef-step", 1),
        ("aqsgd", 1),
        ("clapping-fu", 4),
        ("clapping-fc", 4),
    ):
        cfg = RunConfig(task="digits", stages=4, algo=algo, compressor="topk:0.05", reuse=reuse, steps=400, lr=0.3)
        r = simulate(cfg, data)
        print(
            f"{algo}  {reuse}  {r.val_loss:.4f}  {r.val_metric['accuracy']:.4f}  {r.total_bytes}  {r.compression_ratio:.2f}  {r.buffer_bytes}"
        )


if __name__ == "__main__":
    main()

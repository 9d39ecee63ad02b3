"""Per-group sparsemax against entmax (torch), 64 x 256 groups of 10 (issue 36 item 3), CPU seconds.

python -P bench/casper/sparsemax.py [REPEATS] prints `case size ours_s ref_s ratio max_abs_diff` per repeat:
`sparsemax` is the kernel forward (best of 3 calls, as `casper-solve bench` times it), `sparsemax_fb` the
layer forward + backward through torch (Projector via make_torch_layer against entmax.sparsemax with
autograd; a one-hot program of 256 categoricals of 10; best of 5).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from methodkit.tools.casper.bench import bench_sparsemax


def forward_backward(repeats=5):
    import torch
    from entmax import sparsemax

    from methodkit.tools.casper.compiler import compile_spec
    from methodkit.tools.casper.projection import Projector, make_torch_layer

    torch.set_num_threads(1)
    groups, width, batch = 256, 10, 64
    program = compile_spec({"variables": [{"name": f"x{g}", "domain": width} for g in range(groups)], "constraints": []})
    layer = make_torch_layer(Projector(program))
    rng = np.random.default_rng(0)
    theta = torch.tensor(rng.normal(size=(batch, groups * width)), requires_grad=True)
    weight = torch.tensor(rng.normal(size=(batch, groups * width)))

    def ours():
        theta.grad = None
        (layer(theta) * weight).sum().backward()
        return theta.grad.clone()

    def ref():
        theta.grad = None
        (sparsemax(theta.reshape(batch, groups, width), dim=-1).reshape(batch, -1) * weight).sum().backward()
        return theta.grad.clone()

    times = {}
    for name, fn in (("ours", ours), ("ref", ref)):
        fn()
        best = float("inf")
        for _ in range(repeats):
            c0 = time.process_time()
            grad = fn()
            best = min(best, time.process_time() - c0)
        times[name] = (best, grad)
    diff = float((times["ours"][1] - times["ref"][1]).abs().max())
    return times["ours"][0], times["ref"][0], diff


print("case  size  ours_s  ref_s  ratio  max_abs_diff")
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    row = bench_sparsemax(np.random.default_rng(0))
    print(f"{row['case']}  {row['size']}  {row['ours_s']:.4f}  {row['ref_s']:.4f}  {row['ratio']:.2f}  {row['max_abs_diff']:.1e}")
    ours, ref, diff = forward_backward()
    print(f"sparsemax_fb  64x256x10  {ours:.4f}  {ref:.4f}  {ref / ours:.2f}  {diff:.1e}")

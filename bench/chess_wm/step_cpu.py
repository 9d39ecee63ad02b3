"""CPU cost of one chess-wm training step per architecture, for the 2-core budget of the acceptance run.

One AdamW step (forward, loss, backward, update) at the acceptance shape (batch 64, 96 plies, d128),
one torch thread and one Numba thread, process CPU time (free of a loaded machine's waiting); the
median of --steps steps after two warm-up steps (compilation, allocator). Prints
`arch kernel cpu_s_per_step projected_622_steps_cpu_min`.

    python -P bench/chess_wm/step_cpu.py [--archs ...] [--steps 4] [--threads 2]

With --threads 2 the wall seconds per step are printed too: on an otherwise idle 2-core machine they
are what the 20-minute budget is about (CPU time then counts both threads).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

ARCHS = ["transformer", "slice", "slice-diag", "gdn", "gdn-pos", "mamba3", "mamba2"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--archs", nargs="+", default=ARCHS)
    parser.add_argument("--kernel", default="auto")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1, help="torch and Numba threads")
    parser.add_argument("--acceptance-steps", type=int, default=622, help="one epoch of 40k games at batch 64")
    args = parser.parse_args()

    import numba
    import torch

    from methodkit.tools.chess_wm.models import ModelConfig, build_model, masked_loss

    torch.set_num_threads(args.threads)
    numba.set_num_threads(args.threads)
    torch.manual_seed(0)
    tokens = torch.randint(0, 20480, (64, 96))
    states = torch.randint(0, 2, (64, 96, 75))
    mask = torch.ones(64, 96)
    print("arch\tkernel\tcpu_s_per_step\tprojected_cpu_min\twall_s_per_step\tprojected_wall_min", flush=True)
    for arch in args.archs:
        kernel = (
            args.kernel if args.kernel != "numba" or arch in ("slice", "slice-diag", "mamba3", "mamba2") else "auto"
        )
        model = build_model(ModelConfig(arch=arch, size="d128", kernel=kernel))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        times, walls = [], []
        for i in range(args.steps + 2):
            start, wall = time.process_time(), time.perf_counter()
            loss = masked_loss(model(tokens), states, mask)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if i >= 2:
                times.append(time.process_time() - start)
                walls.append(time.perf_counter() - wall)
        per, per_wall = statistics.median(times), statistics.median(walls)
        print(
            f"{arch}\t{kernel}\t{per:.3f}\t{per * args.acceptance_steps / 60:.1f}"
            f"\t{per_wall:.3f}\t{per_wall * args.acceptance_steps / 60:.1f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

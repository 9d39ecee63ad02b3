"""Decoding speed of core.nn.transformer with the KV cache (ours) vs recomputing the whole sequence
every step (ref), greedy, on one CPU thread; both produce the same tokens (checked here).

    nice .venv/bin/python -P bench/text/bench.py [--threads N]

Prints `case size ours_s ref_s ratio` (ratio = ref_s / ours_s) and the CPU seconds of each side.
"""

from __future__ import annotations

import argparse
import time

import torch

from methodkit.core.nn.transformer import DecoderTransformer, TransformerConfig

CASES = [  # (name, d_model, n_layers, n_heads, prompt, new tokens)
    ("d128-L4", 128, 4, 4, 32, 96),
    ("d128-L4", 128, 4, 4, 32, 224),
    ("d128-L4", 128, 4, 4, 32, 480),
    ("d256-L6", 256, 6, 8, 32, 224),
]


def timed(model, prompt, new, use_cache):
    wall, cpu = time.perf_counter(), time.process_time()
    out = model.generate(prompt, new, temperature=0.0, use_cache=use_cache)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"# torch {torch.__version__}, {args.threads} thread(s), batch 1, vocab 256, greedy")
    print("case  size  ours_s  ref_s  ratio  ours_cpu_s  ref_cpu_s")
    for name, d, layers, heads, prompt_len, new in CASES:
        torch.manual_seed(0)
        cfg = TransformerConfig(vocab_size=256, d_model=d, n_layers=layers, n_heads=heads, max_len=512)
        model = DecoderTransformer(cfg).eval()
        prompt = torch.randint(0, 256, (1, prompt_len), generator=torch.Generator().manual_seed(1))
        model.generate(prompt, 8, temperature=0.0)  # warm-up
        ours, ours_s, ours_cpu = timed(model, prompt, new, use_cache=True)
        ref, ref_s, ref_cpu = timed(model, prompt, new, use_cache=False)
        assert torch.equal(ours, ref), "cached and full decoding disagree"
        size = f"{prompt_len}+{new}"
        print(
            f"{name}  {size}  {ours_s:.3f}  {ref_s:.3f}  {ref_s / ours_s:.2f}  {ours_cpu:.3f}  {ref_cpu:.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()

"""cyb-train's hot loops, ours against a reference measured in the same run.

- attention: the grouped private-pause forward+backward (real x real causal + pause x [real, own
  group]) vs the full (T(K+1))^2 masked attention over the interleaved sequence (outputs equal: checked);
- loss: the vectorised CYB losses (cumsum of log d) as a share of one training step;
- decode: KV-cached adaptive decoding (pauses inserted on request) vs recomputing the grouped
  forward over the whole prefix at every step (same pauses and probabilities: checked).

    nice -n 5 .venv/bin/python -P bench/cyb/bench.py [THREADS]

Prints `case size ours_s ref_s ratio`; the loss row's ratio is its share of the step.
"""

from __future__ import annotations

import sys
import time

import torch

from methodkit.tools.cyb.config import LossConfig
from methodkit.tools.cyb.decode import AdaptiveDecoder, pause_report
from methodkit.tools.cyb.losses import loss_terms, slot_terms
from methodkit.tools.cyb.model import PauseLM, PauseModelConfig, grouped_hidden, masked_hidden, private_mask


def best_of(fn, repeats=5) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    cfg = PauseModelConfig(d_model=128, n_layers=3, n_heads=4, ctx=128, max_pauses=3)
    model = PauseLM(cfg)
    x = torch.randint(0, 256, (8, 128))
    y = torch.randint(0, 256, (8, 128))
    with torch.no_grad():
        err = float((grouped_hidden(model, x) - masked_hidden(model, x)).abs().max())
    assert err < 1e-5, err

    def fwd_bwd(fn):
        def run():
            model.zero_grad()
            fn(model, x).square().mean().backward()

        return run

    ours, ref = best_of(fwd_bwd(grouped_hidden)), best_of(fwd_bwd(masked_hidden))
    print("case  size  ours_s  ref_s  ratio")
    print(f"attention_fwd_bwd  B8xT128xK3_d128_L3  {ours:.4f}  {ref:.4f}  {ref / ours:.2f}  (max |diff| {err:.1e})")

    # the attention alone (same q, k, v), where the two layouts differ; projections and SwiGLU above
    # cost the same in both and run over all T(K+1) positions
    b, h, t, k, dh = 8, 4, 128, 3, 32
    g = torch.Generator().manual_seed(3)
    qkv = [torch.randn(b, h, t, k + 1, dh, generator=g, requires_grad=True) for _ in range(3)]
    allowed = private_mask(t, k)

    def split_attention():
        q, kk, v = qkv
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        yr = torch.nn.functional.scaled_dot_product_attention(q[..., 0, :], kk[..., 0, :], v[..., 0, :], is_causal=True)
        bias_r = torch.zeros(t, k, t).masked_fill(~causal[:, None, :], float("-inf")).reshape(t * k, t)
        bias_o = torch.zeros(k, k).masked_fill(~torch.ones(k, k, dtype=torch.bool).tril(), float("-inf"))
        qp, kp, vp = q[..., 1:, :], kk[..., 1:, :], v[..., 1:, :]
        s_r = (qp.reshape(b, h, t * k, dh) @ kk[..., 0, :].transpose(-1, -2)) * dh**-0.5 + bias_r
        s_o = (qp @ kp.transpose(-1, -2)) * dh**-0.5 + bias_o
        w = torch.softmax(torch.cat([s_r.view(b, h, t, k, t), s_o], -1), -1)
        yp = (w[..., :t].reshape(b, h, t * k, t) @ v[..., 0, :]).view(b, h, t, k, dh) + w[..., t:] @ vp
        (yr.sum() + yp.sum()).backward()

    def full_attention():
        q, kk, v = (z.reshape(b, h, t * (k + 1), dh) for z in qkv)
        torch.nn.functional.scaled_dot_product_attention(q, kk, v, attn_mask=allowed).sum().backward()

    ours, ref = best_of(split_attention), best_of(full_attention)
    print(f"attention_only_fwd_bwd  B8xH4xT128xK3  {ours:.4f}  {ref:.4f}  {ref / ours:.2f}")

    loss_cfg = LossConfig("cyb-va", 3)
    prior = torch.tensor(loss_cfg.prior_weights())

    def step():
        model.zero_grad()
        loss_terms(slot_terms(model.group_logits(x), y, 256), loss_cfg, prior).mean().backward()

    logits = model.group_logits(x).detach().requires_grad_(True)

    def loss_only():
        logits.grad = None
        loss_terms(slot_terms(logits, y, 256), loss_cfg, prior).mean().backward()

    step_s, loss_s = best_of(step), best_of(loss_only)
    print(f"cyb_loss_share_of_step  B8xT128xK3  {loss_s:.4f}  {step_s:.4f}  {loss_s / step_s:.3f}")

    torch.set_num_threads(1)
    small = PauseLM(PauseModelConfig(d_model=128, n_layers=3, n_heads=4, ctx=128, max_pauses=2)).eval()
    ids = torch.randint(0, 256, (128,), generator=torch.Generator().manual_seed(1)).tolist()
    with torch.no_grad():
        small.dk_bias.fill_(float(small.dk_bias) + 2.0)  # d near 1/2: pauses happen
    cached_rows = []
    full_rows = []
    cached = best_of(lambda: cached_rows.append(pause_report(AdaptiveDecoder(small), ids, str)), 2)
    full = best_of(lambda: full_rows.append(pause_report(AdaptiveDecoder(small, recompute=True), ids, str)), 1)
    same = [r["n_pauses"] for r in cached_rows[-1]] == [r["n_pauses"] for r in full_rows[-1]]
    assert same
    pauses = sum(r["n_pauses"] for r in cached_rows[-1]) / len(cached_rows[-1])
    print(f"adaptive_decode_tokens  T128_K2_d128_L3  {cached:.4f}  {full:.4f}  {full / cached:.2f}"
          f"  (mean pauses {pauses:.2f}, 1 thread)")  # fmt: skip


if __name__ == "__main__":
    main()

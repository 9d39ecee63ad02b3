"""Where Clapping's error goes with depth (issue 12, D5): per link and per step of a round, the
relative tracking error of what the receiver uses, and per stage the relative error of the
parameter gradient against the exact gradient of the composed model (same weights, same batch).

    python -P bench/clapping/depth.py ALGO P LR STEPS [COMPRESSOR] [--warmup N --clip C]

  track m link p, s:  |a_p - m_p| / |a_p|   (a_p = f_p(m_{p-1}) what the sender computed, m_p what
                      the receiver computes on, after the step-s message)
  track h link p, s:  |g_p - h_p| / |g_p|   (g_p the receiver's gradient w.r.t. m_p, h_p what the
                      sender back-propagates)
  e2e stage p, s:     |grad_p - grad*_p| / |grad*_p| (the pipeline's parameter gradient vs exact)
Means over the second half of training. A bug in the error feedback (a reference drifting, a
message applied twice, a wrong round reset) shows as tracking errors growing with depth; errors
that only add up link by link show as e2e errors growing with the number of links below a stage.
"""

import argparse
import os

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from methodkit.core.train import batch_indices  # noqa: E402
from methodkit.tools.clapping import links, pipeline, tasks  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("algo")
    parser.add_argument("stages", type=int)
    parser.add_argument("lr", type=float)
    parser.add_argument("steps", type=int)
    parser.add_argument("compressor", nargs="?", default="topk:0.05")
    parser.add_argument("--warmup", type=int, default=0)
    parser.add_argument("--clip", type=float, default=0.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    reuse = 1 if args.algo in ("naive", "none") else 4
    cfg = pipeline.RunConfig(task="digits", stages=args.stages, algo=args.algo, compressor=args.compressor,
                             reuse=reuse, lr=args.lr, steps=args.steps, blocks=6, seed=0,
                             warmup=args.warmup, clip=args.clip)  # fmt: skip
    data = tasks.digits_data(0)
    modules = tasks.build_stages(cfg.task, data, cfg.stages, width=cfg.width, n_blocks=6, seed=0)
    widths = pipeline.stage_widths(modules, data)
    transport = pipeline.LocalTransport()
    workers = [pipeline.StageWorker(p, modules[p], cfg, data, widths, transport) for p in range(cfg.stages)]
    record: dict = {}
    tracked = links.LinkEnd._tracked_payload

    def recording(self, x, s, name, compressor):
        out = tracked(self, x, s, name, compressor)
        error = float(np.linalg.norm(x - getattr(self, name)) / (np.linalg.norm(x) + 1e-30))
        record.setdefault((name, self.link), []).append((s, error))
        return out

    links.LinkEnd._tracked_payload = recording
    for w in workers:
        for end in w.lower or []:
            end.link = w.rank
        for end in w.upper or []:
            end.link = w.rank - 1
    e2e: dict = {p: [] for p in range(cfg.stages)}
    for t in range(cfg.steps):
        states = [w.forward(t) for w in workers]
        for w, state in zip(reversed(workers), reversed(states)):
            w.backward(state)
        grads = [[p.grad.clone() for p in m.parameters()] for m in modules]
        for m in modules:
            m.zero_grad()
        ids = batch_indices(len(data.x_train), cfg.batch, cfg.seed, t // cfg.reuse)
        x = torch.from_numpy(data.x_train[ids])
        for m in modules:
            x = m(x)
        loss, _ = tasks.loss_and_metric(data.kind, x, torch.from_numpy(data.y_train[ids]))
        loss.backward()
        for p, m in enumerate(modules):
            exact = torch.cat([q.grad.flatten() for q in m.parameters()])
            piped = torch.cat([g.flatten() for g in grads[p]])
            e2e[p].append((t % cfg.reuse, float((piped - exact).norm() / (exact.norm() + 1e-30))))
            for q, g in zip(m.parameters(), grads[p]):
                q.grad = g
        norm = pipeline.global_norm([w.grad_square() for w in workers]) if cfg.clip else None
        for w, state in zip(workers, states):
            w.update(state, norm)
    val, metric = pipeline.evaluate(modules, data)
    print(f"{args.algo} P={args.stages} lr={args.lr} {args.compressor} warmup={args.warmup} clip={args.clip}: "
          f"val loss {val:.4f} accuracy {metric['accuracy']:.3f}")  # fmt: skip

    def mean(values, s):
        values = [e for (step, e) in values[len(values) // 2 :] if step == s]
        return float(np.mean(values)) if values else float("nan")

    for (name, link), values in sorted(record.items()):
        print(f"  track {name} link {link}: " + " ".join(f"s{s}={mean(values, s):.3f}" for s in range(reuse)))
    for p in range(cfg.stages):
        print(f"  e2e stage {p}: " + " ".join(f"s{s}={mean(e2e[p], s):.3f}" for s in range(reuse)))


if __name__ == "__main__":
    main()

"""The pipeline: one StageWorker per stage, GPipe schedule, lazy sampling, momentum updates.

Each optimizer step t belongs to round r = t // R and is step s = t % R of that round; the round's
minibatch is drawn once (seeded) and reused for the R steps (lazy sampling). A step runs all
microbatch forwards, then all backwards in reverse (GPipe), then a momentum update per stage.
Workers talk through a Transport: in-process queues (simulate) or gloo send/recv (distributed);
the worker code is the same, so both give the same numbers.
"""

from __future__ import annotations

import collections
import math
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from methodkit.core.errors import RunFailure
from methodkit.core.train import batch_indices
from methodkit.tools.clapping import device as devices
from methodkit.tools.clapping import tasks
from methodkit.tools.clapping.config import RunConfig
from methodkit.tools.clapping.links import LinkEnd, payload_bytes


def learning_rate(cfg: RunConfig, t: int) -> float:
    """lr of step t (0-based): linear warm-up over cfg.warmup steps, then constant."""
    if cfg.warmup and t < cfg.warmup:
        return cfg.lr * (t + 1) / cfg.warmup
    return cfg.lr


def global_norm(squares: list[float]) -> float:
    """sqrt of the stages' summed squares, summed exactly (the same bits in any process)."""
    return float(np.sqrt(math.fsum(squares)))


class LocalTransport:
    """In-process message queues keyed by (src, dst, tag); the schedule guarantees a message is ready."""

    def __init__(self):
        self.queues = collections.defaultdict(collections.deque)

    def send(self, payload: dict, src: int, dst: int, tag: str) -> None:
        self.queues[(src, dst, tag)].append({k: v.copy() for k, v in payload.items()})

    def recv(self, src: int, dst: int, tag: str) -> dict:
        return self.queues[(src, dst, tag)].popleft()


def make_links(cfg: RunConfig, widths: list[int], n_train: int, index: int, ops=None) -> list[LinkEnd]:
    """One LinkEnd per microbatch for link `index`; AQ-SGD's per-sample buffers are shared among them."""
    ends = [
        LinkEnd(
            cfg.algo,
            cfg.compressor,
            widths[index],
            index=index * cfg.microbatches + j,
            seed=cfg.seed,
            n_samples=n_train if j == 0 else 0,
            aqsgd_warm=cfg.aqsgd_warm,
            fc_init=cfg.fc_init,
            grad_spec=cfg.grad_compressor,
            ops=ops,
        )  # fmt: skip
        for j in range(cfg.microbatches)
    ]
    if cfg.algo == "aqsgd":
        for end in ends[1:]:
            end.memory, end.seen = ends[0].memory, ends[0].seen
    return ends


def stage_widths(modules: list[torch.nn.Module], data: tasks.Dataset) -> list[int]:
    """Width of each stage's output rows (what crosses link p), measured on one sample."""
    x = torch.from_numpy(data.x_train[:1])
    widths = []
    with torch.no_grad():
        for module in modules[:-1]:
            x = module(x)
            widths.append(int(x.reshape(1, -1).shape[1]))
    return widths


class StageWorker:
    def __init__(
        self, rank: int, module: torch.nn.Module, cfg: RunConfig, data: tasks.Dataset, widths: list[int], transport
    ):
        self.rank, self.module, self.cfg, self.data, self.transport = rank, module, cfg, data, transport
        self.ops = ops = devices.ops_for(cfg.device)
        module.to(ops.torch_device)
        self.last = rank == cfg.stages - 1
        n = len(data.x_train)
        self.lower = make_links(cfg, widths, n, rank, ops) if not self.last else None  # link rank (to rank+1)
        self.upper = make_links(cfg, widths, n, rank - 1, ops) if rank > 0 else None  # link rank-1 (from rank-1)
        dampening = 0.0 if cfg.nesterov else cfg.beta
        self.optimizer = torch.optim.SGD(
            module.parameters(),
            lr=cfg.lr,
            momentum=cfg.beta,
            dampening=dampening,
            nesterov=cfg.nesterov and cfg.beta > 0,
        )
        self.comm: list[tuple] = []  # (step, link, direction, bytes, exact_bytes, wire_bytes, track_err)
        self.deltas: list[tuple] = []  # (step, link, direction, contraction)
        self.losses: list[float] = []  # training loss of each step (last stage only)

    def _send(self, payload: dict, dst: int, tag: str, step: int, link: int, exact_bytes: int, error: float) -> None:
        from methodkit.tools.clapping.distributed import wire_bytes

        self.comm.append((step, link, tag, payload_bytes(payload), exact_bytes, wire_bytes(payload), error))
        self.transport.send(payload, self.rank, dst, tag)

    def _check_finite(self, x: np.ndarray, what: str, t: int) -> None:
        """Stop before a non-finite tensor reaches a compressor (the kernels assume finite magnitudes)."""
        if not bool(self.ops.xp.isfinite(x).all()):
            raise RunFailure(
                f"non-finite {what} at stage {self.rank}, step {t + 1} ({self.cfg.algo}, {self.cfg.compressor}); "
                "lower --lr"
            )

    def step(self, t: int) -> float | None:
        """One optimizer step of this stage (the distributed runner calls this on each rank)."""
        state = self.forward(t)
        self.backward(state)
        norm = global_norm(self.transport.gather_floats(self.grad_square())) if self.cfg.clip > 0 else None
        return self.update(state, norm)

    def grad_square(self) -> float:
        """Sum of squares of this stage's parameter gradients (its share of the global norm)."""
        return float(sum(float(p.grad.double().square().sum()) for p in self.module.parameters() if p.grad is not None))

    def forward(self, t: int) -> dict:
        """All microbatch forwards of step t: receive from the stage above, compute, send below."""
        cfg = self.cfg
        r, s = divmod(t, cfg.reuse)
        ids = batch_indices(len(self.data.x_train), cfg.batch, cfg.seed, r)
        chunks = np.array_split(ids, cfg.microbatches)
        self.optimizer.zero_grad(set_to_none=True)
        saved, total_loss = [], 0.0
        for j, mb in enumerate(chunks):
            if self.rank == 0:
                x = torch.from_numpy(self.data.x_train[mb]).to(self.ops.torch_device)
            else:
                payload = self.transport.recv(self.rank - 1, self.rank, "fwd")
                x = self.ops.to_torch(self.upper[j].receive_activation(payload, s, mb)).requires_grad_(True)
            out = self.module(x)
            if self.last:
                target = torch.from_numpy(self.data.y_train[mb]).to(self.ops.torch_device)
                loss, _ = tasks.loss_and_metric(self.data.kind, out, target)
                total_loss += float(loss.detach()) / cfg.microbatches
                saved.append((x, loss / cfg.microbatches))
            else:
                flat = self.ops.from_torch(out.reshape(out.shape[0], -1))
                self._check_finite(flat, "activations", t)
                payload = self.lower[j].send_activation(flat, s, mb)
                self._send(payload, self.rank + 1, "fwd", t, self.rank, flat.size * 4, self.lower[j].last_error)
                saved.append((x, out))
        return {"t": t, "s": s, "saved": saved, "loss": total_loss}

    def backward(self, state: dict) -> None:
        """All microbatch backwards, in reverse: receive the gradient message, back-propagate, send above."""
        t, s = state["t"], state["s"]
        for j in reversed(range(len(state["saved"]))):
            x, out = state["saved"][j]
            if self.last:
                out.backward()
            else:
                payload = self.transport.recv(self.rank + 1, self.rank, "bwd")
                out.backward(self.ops.to_torch(self.lower[j].receive_gradient(payload, s)).reshape(out.shape))
            if self.rank > 0:
                g = self.ops.from_torch(x.grad.reshape(x.shape[0], -1))
                self._check_finite(g, "gradients", t)
                payload = self.upper[j].send_gradient(g, s)
                self._send(payload, self.rank - 1, "bwd", t, self.rank - 1, g.size * 4, self.upper[j].last_error)

    def update(self, state: dict, grad_norm: float | None = None) -> float | None:
        """Momentum step on this stage's parameters; the last stage returns the step's training loss.

        With cfg.clip, `grad_norm` is the norm over all stages' gradients (as in single-process
        training with clip_grad_norm_), so `none` stays independent of how the model is cut.
        """
        if self.last and not np.isfinite(state["loss"]):
            raise RunFailure(
                f"non-finite loss at step {state['t'] + 1} ({self.cfg.algo}, {self.cfg.compressor}); lower --lr"
            )
        if self.cfg.clip > 0 and grad_norm is not None:
            coefficient = self.cfg.clip / (grad_norm + 1e-6)  # torch's clip_grad_norm_ formula
            if coefficient < 1:
                for p in self.module.parameters():
                    if p.grad is not None:
                        p.grad.mul_(coefficient)
        for group in self.optimizer.param_groups:  # the schedule is a function of t: nothing to checkpoint
            group["lr"] = learning_rate(self.cfg, state["t"])
        self.optimizer.step()
        if not self.last:
            return None
        self.losses.append(state["loss"])
        return state["loss"]

    def buffer_bytes(self) -> int:
        ends = (self.lower or []) + (self.upper or [])
        seen = set()
        total = 0
        for end in ends:
            if end.memory is not None and id(end.memory) in seen:
                total += end.buffer_bytes() - end.memory.nbytes
                continue
            if end.memory is not None:
                seen.add(id(end.memory))
            total += end.buffer_bytes()
        return total


@dataclass
class RunResult:
    config: dict
    train_loss: float
    val_loss: float
    val_metric: dict
    total_bytes: int
    exact_bytes: int
    wire_bytes: int  # total_bytes plus every message's framing (sizes triple + JSON header) on gloo
    compression_ratio: float
    buffer_bytes: int  # both ends of every link (what Clapping/AQ-SGD keep in memory)
    aqsgd_equivalent_bytes: int  # N * sum(d_p) * 4: AQ-SGD's per-sample buffers for the same model
    clapping_bound_bytes: int  # 2 * B * sum(d_p) * 4 per side
    seconds: float
    step_seconds: float  # the step loop alone (the slowest rank on gloo): no start-up, no evaluation
    resumed_from: int  # step of the checkpoint set this run continued from (0: from scratch)
    log: list
    comm: list

    def to_dict(self, with_logs: bool = False) -> dict:
        out = asdict(self)
        if not with_logs:
            out.pop("log")
            out.pop("comm")
        return out


def evaluate(modules: list[torch.nn.Module], data: tasks.Dataset, batch: int = 512) -> tuple[float, dict]:
    """Exact (uncompressed) validation loss and metric of the composed stages."""
    losses, correct, count = [], 0, 0
    with torch.no_grad():
        for start in range(0, len(data.x_val), batch):
            x = torch.from_numpy(data.x_val[start : start + batch])
            y = torch.from_numpy(data.y_val[start : start + batch])
            for module in modules:
                x = module(x)
            loss, metric = tasks.loss_and_metric(data.kind, x, y)
            losses.append(float(loss) * len(y))
            if "accuracy" in metric:
                correct += metric["accuracy"] * len(y)
            count += len(y)
    val = sum(losses) / count
    metric = {}
    if data.kind == "classification":
        metric["accuracy"] = correct / count
    elif data.kind == "regression":
        metric["rmse"] = float(np.sqrt(val) * data.meta["y_std"])
    else:
        metric["bits_per_char"] = val / np.log(2)
    return val, metric


def summarize(cfg, modules, data, widths, losses, comm, buffers, seconds, resumed_from=0, step_seconds=None):
    val_loss, metric = evaluate(modules, data)
    total = sum(c[3] for c in comm)
    exact = sum(c[4] for c in comm)
    tail = [loss for loss in losses if loss is not None][-max(cfg.reuse * 5, 10) :]
    log = [
        {"step": i + 1, "loss": value}
        for i, value in enumerate(losses)
        if (i + 1) % cfg.log_every == 0 or i + 1 == len(losses)
    ]
    return RunResult(
        config=cfg.to_dict(),
        train_loss=float(np.mean(tail)),
        val_loss=val_loss,
        val_metric=metric,
        total_bytes=int(total),
        exact_bytes=int(exact),
        wire_bytes=int(sum(c[5] for c in comm)),
        compression_ratio=float(exact / total) if total else 1.0,
        buffer_bytes=int(buffers),
        aqsgd_equivalent_bytes=int(len(data.x_train) * sum(widths) * 4),
        clapping_bound_bytes=int(2 * cfg.batch * sum(widths) * 4),
        seconds=seconds,
        step_seconds=seconds if step_seconds is None else step_seconds,
        resumed_from=int(resumed_from),
        log=log,
        comm=[
            {
                "step": c[0] + 1,
                "link": c[1],
                "direction": c[2],
                "bytes": c[3],
                "exact_bytes": c[4],
                "wire_bytes": c[5],
                "track_err": c[6],
            }
            for c in comm
        ],
    )


def simulate(
    cfg: RunConfig,
    data: tasks.Dataset,
    progress=lambda phase, done, total: None,
    *,
    folder=None,
    ckpt_every: int = 0,
    resume: bool = False,
) -> RunResult:
    """All stages in one process, talking through in-memory queues (same worker code as gloo).

    With `folder`, every stage is checkpointed every `ckpt_every` steps and at the end; `resume`
    continues from the newest complete set there (bit-identical to a run that was never stopped).
    """
    from methodkit.tools.clapping import checkpoints

    cfg.validate(len(data.x_train))
    start = time.monotonic()
    modules = tasks.build_stages(cfg.task, data, cfg.stages, width=cfg.width, n_blocks=cfg.blocks, seed=cfg.seed)
    widths = stage_widths(modules, data)
    transport = LocalTransport()
    workers = [StageWorker(p, modules[p], cfg, data, widths, transport) for p in range(cfg.stages)]
    fingerprint = checkpoints.data_fingerprint(data) if folder is not None else ""
    first = 0
    if resume:
        first = checkpoints.latest_complete(folder, cfg, fingerprint)
        for worker in workers:
            checkpoints.load_stage(folder, worker, first, fingerprint)
    elif folder is not None:
        checkpoints.clear(folder)
    progress("train", first, cfg.steps)
    loop_start = time.monotonic()
    for t in range(first, cfg.steps):
        states = [worker.forward(t) for worker in workers]  # messages flow down
        for worker, state in zip(reversed(workers), reversed(states)):  # and back up
            worker.backward(state)
        norm = global_norm([w.grad_square() for w in workers]) if cfg.clip > 0 else None
        for worker, state in zip(workers, states):
            worker.update(state, norm)
        if folder is not None and checkpoints.due(t + 1, ckpt_every, cfg.steps):
            for worker in workers:
                checkpoints.save_stage(folder, worker, t + 1, fingerprint)
            checkpoints.prune(folder, t + 1)
        progress("train", t + 1, cfg.steps)
    loop_s = time.monotonic() - loop_start
    comm = [c for w in workers for c in w.comm]
    buffers = sum(w.buffer_bytes() for w in workers)
    for module in modules:  # the exact evaluation runs on the CPU
        module.cpu()
    seconds = time.monotonic() - start
    return summarize(cfg, modules, data, widths, workers[-1].losses, comm, buffers, seconds, first, loop_s)

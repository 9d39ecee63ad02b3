"""The real pipeline: P local processes (torch.multiprocessing), gloo point-to-point on loopback.

Each rank runs the same StageWorker as the simulator, with a transport that sends a payload as
three blocking messages (header and body lengths with the send time, JSON header with dtypes/shapes, one byte buffer), so any
compressor's payload crosses without agreeing shapes in advance. A start-up handshake compares a
hash of the run configuration on every rank; any rank failure stops all ranks and names it.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import socket
import time
import traceback
from pathlib import Path

import numpy as np

from methodkit.core.errors import RunFailure, UsageError


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


SIZES_BYTES = 24  # the int64 triple (header length, body length, send time) that opens every message


def frame(payload: dict) -> tuple[bytes, bytes]:
    """The JSON header (keys, dtypes, shapes) and the byte body that carry `payload` on the wire."""
    keys = sorted(payload)
    arrays = [np.ascontiguousarray(payload[k]) for k in keys]
    header = json.dumps([[k, a.dtype.str, list(a.shape)] for k, a in zip(keys, arrays)]).encode()
    return header, b"".join(a.tobytes() for a in arrays)


def wire_bytes(payload: dict) -> int:
    """Every byte one message hands to gloo: the sizes triple, the header and the body."""
    keys = sorted(payload)
    header = json.dumps([[k, np.asarray(payload[k]).dtype.str, list(np.shape(payload[k]))] for k in keys])
    return SIZES_BYTES + len(header.encode()) + int(sum(np.asarray(payload[k]).nbytes for k in keys))


class LinkClock:
    """A serial link of `bandwidth_mbps` with `latency_ms` per message, emulated at the receiver.

    A message sent at time s (the sender's monotonic clock, shared by processes of one host)
    starts when the link is free, occupies it for bytes * 8 / bandwidth, and arrives latency
    later; the receiver waits until then, so step times include the link.
    """

    def __init__(self, bandwidth_mbps: float | None, latency_ms: float = 0.0):
        self.bandwidth_mbps, self.latency_ms = bandwidth_mbps, latency_ms
        self.free_at: dict[int, int] = {}  # source rank -> ns when its link is free

    def arrival_ns(self, src: int, sent_ns: int, nbytes: int) -> int:
        start = max(sent_ns, self.free_at.get(src, 0))
        done = start + int(nbytes * 8 / (self.bandwidth_mbps * 1e6) * 1e9)
        self.free_at[src] = done
        return done + int(self.latency_ms * 1e6)

    def wait(self, src: int, sent_ns: int, nbytes: int) -> None:
        if not self.bandwidth_mbps and not self.latency_ms:
            return
        if not self.bandwidth_mbps:  # latency only
            due = sent_ns + int(self.latency_ms * 1e6)
        else:
            due = self.arrival_ns(src, sent_ns, nbytes)
        delay = (due - time.monotonic_ns()) / 1e9
        if delay > 0:
            time.sleep(delay)


class GlooTransport:
    def __init__(self, bandwidth_mbps: float | None = None, latency_ms: float = 0.0):
        self.clock = LinkClock(bandwidth_mbps, latency_ms)

    def send(self, payload: dict, src: int, dst: int, tag: str) -> None:
        import torch
        import torch.distributed as dist

        header, body = frame(payload)
        sizes = torch.tensor([len(header), len(body), time.monotonic_ns()], dtype=torch.int64)
        dist.send(sizes, dst)
        dist.send(torch.frombuffer(bytearray(header), dtype=torch.uint8), dst)
        if body:
            dist.send(torch.frombuffer(bytearray(body), dtype=torch.uint8), dst)

    def gather_floats(self, value: float) -> list[float]:
        """Every rank's value, in rank order (for the global gradient norm)."""
        import torch
        import torch.distributed as dist

        mine = torch.tensor([value], dtype=torch.float64)
        every = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
        dist.all_gather(every, mine)
        return [float(v) for v in every]

    def recv(self, src: int, dst: int, tag: str) -> dict:
        import torch
        import torch.distributed as dist

        sizes = torch.empty(3, dtype=torch.int64)
        dist.recv(sizes, src)
        header = torch.empty(int(sizes[0]), dtype=torch.uint8)
        dist.recv(header, src)
        body = torch.empty(int(sizes[1]), dtype=torch.uint8)
        if int(sizes[1]):
            dist.recv(body, src)
        self.clock.wait(src, int(sizes[2]), SIZES_BYTES + int(sizes[0]) + int(sizes[1]))  # the emulated link
        raw = body.numpy().tobytes()
        out, offset = {}, 0
        for key, dtype, shape in json.loads(header.numpy().tobytes()):
            dt = np.dtype(dtype)
            count = int(np.prod(shape)) if shape else 1
            out[key] = np.frombuffer(raw, dtype=dt, count=count, offset=offset).reshape(shape).copy()
            offset += count * dt.itemsize
        return out


PROGRESS_EVERY_S = 0.25  # rank 0 reports its step at most this often


def config_hash(cfg) -> str:
    return hashlib.sha256(json.dumps(cfg.to_dict(), sort_keys=True).encode()).hexdigest()[:16]


def _rank_main(rank, cfg, data, port, out_dir, timeout_s, bandwidth, latency, queue, first, ckpt_every, parent):
    from methodkit.tools.clapping.lifetime import die_with_parent

    die_with_parent(parent)
    try:
        import torch
        import torch.distributed as dist

        from methodkit.core import checkpoint
        from methodkit.tools.clapping import checkpoints, tasks
        from methodkit.tools.clapping.pipeline import StageWorker, stage_widths

        torch.set_num_threads(1)
        os.environ.setdefault("NUMBA_NUM_THREADS", "1")
        if cfg.device == "cuda":  # ranks share the GPUs round-robin; CuPy and torch on the same one
            import cupy

            gpu = rank % torch.cuda.device_count()
            torch.cuda.set_device(gpu)
            cupy.cuda.Device(gpu).use()
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=cfg.stages,
            timeout=datetime.timedelta(seconds=timeout_s),
        )  # fmt: skip
        # Handshake: every rank must run the same configuration.
        mine = torch.frombuffer(bytearray(config_hash(cfg).encode()), dtype=torch.uint8)
        hashes = [torch.empty_like(mine) for _ in range(cfg.stages)]
        dist.all_gather(hashes, mine)
        if any(not torch.equal(h, mine) for h in hashes):
            raise RuntimeError("configuration hash differs between ranks")
        modules = tasks.build_stages(cfg.task, data, cfg.stages, width=cfg.width, n_blocks=cfg.blocks, seed=cfg.seed)
        widths = stage_widths(modules, data)
        worker = StageWorker(rank, modules[rank], cfg, data, widths, GlooTransport(bandwidth, latency))
        fingerprint = checkpoints.data_fingerprint(data)
        if first:
            checkpoints.load_stage(out_dir, worker, first, fingerprint)
        reported, loop_start = 0.0, time.monotonic()
        for t in range(first, cfg.steps):
            worker.step(t)
            if rank == 0 and (time.monotonic() - reported > PROGRESS_EVERY_S or t + 1 == cfg.steps):
                queue.put(("progress", rank, t + 1))  # the parent draws the bar / -v lines
                reported = time.monotonic()
            if checkpoints.due(t + 1, ckpt_every, cfg.steps):
                checkpoints.save_stage(out_dir, worker, t + 1, fingerprint)
                dist.barrier()  # the set is complete only once every rank has written its stage
                if rank == 0:
                    checkpoints.prune(out_dir, t + 1)
        loop_s = time.monotonic() - loop_start
        checkpoint.save(
            Path(out_dir) / f"stage{rank}.safetensors", {k: v.cpu() for k, v in modules[rank].state_dict().items()},
            config=cfg.to_dict(), spec={"task": cfg.task, "stage": rank, "stages": cfg.stages},
        )  # fmt: skip
        dist.barrier()
        dist.destroy_process_group()
        queue.put(
            (
                "ok",
                rank,
                {"losses": worker.losses, "comm": worker.comm, "buffers": worker.buffer_bytes(), "loop_s": loop_s},
            )
        )
    except BaseException as exc:  # report, then let the parent stop the others
        queue.put(("error", rank, f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        raise SystemExit(1) from None


def _collect(procs, queue, cfg, progress) -> dict:
    """Every rank's final message; progress from rank 0 on the way; RunFailure naming a failed rank."""
    results, failure = {}, None
    while len(results) < cfg.stages and failure is None:
        if not queue.empty():
            message = queue.get()
            if message[0] == "ok":
                results[message[1]] = message[2]
            elif message[0] == "progress":
                progress("train", message[2], cfg.steps)
            else:
                failure = message
        elif any(p.exitcode not in (None, 0) for p in procs) and queue.empty():
            dead = next(r for r, p in enumerate(procs) if p.exitcode not in (None, 0))
            time.sleep(0.5)
            if queue.empty():
                failure = ("error", dead, f"rank {dead} exited with status {procs[dead].exitcode}", "")
        else:
            time.sleep(0.05)
    if failure is not None:
        raise RunFailure(f"rank {failure[1]} failed: {failure[2]}; all ranks stopped")
    return results


def run_distributed(
    cfg,
    data,
    out_dir,
    *,
    timeout_s: int = 300,
    bandwidth_mbps=None,
    latency_ms: float = 0.0,
    progress=None,
    ckpt_every: int = 0,
    resume: bool = False,
):
    """Spawn cfg.stages processes, train, gather logs and the stages' weights; evaluate exactly.

    Each rank checkpoints its stage every `ckpt_every` steps and at the end (see checkpoints.py);
    `resume` continues every rank from the newest complete set in out_dir.
    """
    import torch
    import torch.multiprocessing as mp

    from methodkit.core import checkpoint
    from methodkit.tools.clapping import checkpoints, lifetime, tasks
    from methodkit.tools.clapping.pipeline import stage_widths, summarize

    cfg.validate(len(data.x_train))
    if cfg.stages < 2:
        raise UsageError("--backend gloo needs --stages >= 2 (use --backend sim for one stage)")
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    first = checkpoints.latest_complete(folder, cfg, checkpoints.data_fingerprint(data)) if resume else 0
    if not resume:
        checkpoints.clear(folder)
    start = time.monotonic()
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    port = free_port()
    args = (cfg, data, port, str(folder), timeout_s, bandwidth_mbps, latency_ms, queue, first, ckpt_every, os.getpid())
    procs = [ctx.Process(target=_rank_main, args=(r, *args)) for r in range(cfg.stages)]
    progress = progress or (lambda phase, done, total: None)
    with lifetime.signals_raise():
        try:
            progress("train", first, cfg.steps)
            for proc in procs:
                proc.start()
            results = _collect(procs, queue, cfg, progress)
        except BaseException:  # a failure, SIGTERM/SIGHUP or Ctrl-C: no rank outlives this call
            lifetime.stop(procs)
            raise
        lifetime.stop(procs, terminate=False)  # every rank has reported; let them exit on their own
    modules = tasks.build_stages(cfg.task, data, cfg.stages, width=cfg.width, n_blocks=cfg.blocks, seed=cfg.seed)
    for rank, module in enumerate(modules):
        tensors, _ = checkpoint.load(folder / f"stage{rank}.safetensors")
        module.load_state_dict(tensors)
    widths = stage_widths(modules, data)
    losses = results[cfg.stages - 1]["losses"]
    comm = [tuple(c) for r in range(cfg.stages) for c in results[r]["comm"]]
    buffers = sum(results[r]["buffers"] for r in range(cfg.stages))
    del torch
    result = summarize(cfg, modules, data, widths, losses, comm, buffers, time.monotonic() - start, first)
    result.step_seconds = max(results[r]["loop_s"] for r in range(cfg.stages))
    return result

"""Issue 39 items 11-12: the emulated link makes the receiver wait; the framing bytes are counted."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core import compress
from methodkit.tools.clapping.config import RunConfig
from methodkit.tools.clapping.distributed import SIZES_BYTES, LinkClock, frame, wire_bytes


@pytest.mark.parametrize("spec", ["identity", "topk:0.05", "quant:2", "topk+quant:0.1:4", "lowrank:2"])
def test_wire_bytes_are_every_byte_the_frame_carries(spec):
    x = np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32)
    payload = compress.parse(spec, 64, seed=0).encode(x)
    header, body = frame(payload)
    assert wire_bytes(payload) == SIZES_BYTES + len(header) + len(body)
    assert len(body) == compress.Compressor.nbytes(payload)
    assert len(header) > 20  # the per-message header is not free


def test_link_clock_serialises_messages_and_adds_latency():
    clock = LinkClock(8.0, latency_ms=2.0)  # 8 Mbps: 1000 bytes take 1 ms
    first = clock.arrival_ns(0, 0, 1000)
    second = clock.arrival_ns(0, 0, 1000)  # sent at the same time: waits for the first to clear the link
    assert first == 1_000_000 + 2_000_000
    assert second == 2_000_000 + 2_000_000
    assert clock.arrival_ns(1, 0, 1000) == first  # another source has its own link


def test_gloo_step_time_includes_the_link(tmp_path):
    from methodkit.tools.clapping import tasks
    from methodkit.tools.clapping.distributed import run_distributed

    data = tasks.digits_data(0)
    cfg = RunConfig(task="digits", stages=2, algo="none", steps=2, batch=64, width=16, blocks=2, lr=0.1)
    bandwidth = 0.25  # Mbps; each 64 x 16 float message (about 4.2 kB) takes about 0.13 s
    result = run_distributed(cfg, data, tmp_path, timeout_s=120, bandwidth_mbps=bandwidth)
    assert result.wire_bytes > result.total_bytes == result.exact_bytes
    assert result.wire_bytes == sum(c["wire_bytes"] for c in result.comm)
    link_s = result.wire_bytes * 8 / (bandwidth * 1e6)  # M = 1: every message is on the critical path
    assert result.step_seconds >= link_s  # a sender-side sleep overlaps the forward chain with the next stages

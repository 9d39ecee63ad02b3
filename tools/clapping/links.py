"""The two ends of one stage boundary and what each algorithm sends across it.

Stage p owns the *lower* end of link p (sends activations, receives gradient messages) and the
*upper* end of link p-1 (receives activations, sends gradients). Both ends of a link keep the
same reference buffers (m for activations, h for gradients, or AQ-SGD's per-sample buffers)
and apply the same decoded messages, so sender and receiver stay bit-identical whether they
live in one process (the simulator) or in two (gloo).

Algorithms:
  none         exact messages (the reference; with --reuse it isolates lazy sampling)
  naive        C(a) and C(g) sent as they are (biased through nonlinearities)
  ef-step      error feedback with the residual carried to the next step's (other) batch
  aqsgd        per-sample activation buffers M[i] (N x d): send C(a_i - M[i]); gradients C(g)
  clapping-fu  batch-sized buffers m, h tracked by compressed deltas; first step of a round exact
  clapping-fc  the same, fully compressed; at a round's start (a new batch) the references become
               `--fc-init`: zero (0), prev (kept), damp:G (G x the previous round's), mean (the previous
               round's mean row, broadcast: the sample-independent part of the old reference)

Every send records `last_error` = ||x - x_hat|| / ||x||, x_hat being what the receiver computes on
(the tracking error |a - m| / |a| for Clapping; 0 for exact messages); comm.csv carries it.
"""

from __future__ import annotations

import numpy as np

from methodkit.core import compress
from methodkit.core.errors import UsageError
from methodkit.tools.clapping import device as devices
from methodkit.tools.clapping.config import ALGOS

IDENTITY = "identity"


class LinkEnd:
    """One end of link `index` (width d per sample row); both ends are built with the same arguments."""

    def __init__(
        self,
        algo: str,
        spec: str,
        d: int,
        *,
        index: int,
        seed: int,
        n_samples: int = 0,
        aqsgd_warm: str = "full",
        fc_init: str = "zero",
        grad_spec: str | None = None,
        ops: devices.Ops | None = None,
    ):
        if algo not in ALGOS:
            raise UsageError(f"--algo must be one of {', '.join(ALGOS)}, got {algo!r}")
        self.algo, self.d = algo, d
        self.aqsgd_warm, self.fc_init = aqsgd_warm, fc_init
        self.ops = ops = ops or devices.ops_for("cpu")
        self.xp = ops.xp  # numpy, or cupy when the buffers live on a GPU
        spec = IDENTITY if algo == "none" else spec
        self.fwd = devices.on_device(compress.parse(spec, d, seed=seed * 7919 + 2 * index), ops)
        self.bwd = devices.on_device(compress.parse(grad_spec or spec, d, seed=seed * 7919 + 2 * index + 1), ops)
        self.exact = devices.on_device(compress.Identity(d), ops)
        self.m: np.ndarray | None = None  # activation reference (batch rows)
        self.h: np.ndarray | None = None  # gradient reference (batch rows)
        self.e_fwd: np.ndarray | None = None  # ef-step residuals
        self.e_bwd: np.ndarray | None = None
        self.memory: np.ndarray | None = None  # aqsgd per-sample buffers
        self.seen: np.ndarray | None = None
        self.last_error = 0.0  # relative error of the last message sent (see the module doc)
        if algo == "aqsgd":
            self.memory = self.xp.zeros((n_samples, d), dtype=np.float32)
            self.seen = np.zeros(n_samples, dtype=bool)

    # ------------------------------------------------------------ buffer sizes (D3)
    def buffer_bytes(self) -> int:
        arrays = [self.m, self.h, self.e_fwd, self.e_bwd, self.memory]
        return int(sum(a.nbytes for a in arrays if a is not None))

    # ------------------------------------------------------------ forward: activations
    def send_activation(self, a: np.ndarray, step_in_round: int, ids: np.ndarray) -> dict:
        """Sender side: the payload for activations `a` (rows = the samples `ids`)."""
        a = self.xp.ascontiguousarray(a, dtype=np.float32)
        algo = self.algo
        if algo == "none":
            self.last_error = 0.0
            return self.exact.encode(a)
        if algo == "naive":
            payload = self.fwd.encode(a)
            self._record(a, self.fwd.decode(payload))
            return payload
        if algo == "ef-step":
            if self.e_fwd is None or self.e_fwd.shape != a.shape:
                self.e_fwd = self.xp.zeros_like(a)
            target = a + self.e_fwd
            payload = self.fwd.encode(target)
            decoded = self.fwd.decode(payload)
            self.e_fwd = target - decoded
            self._record(a, decoded)
            return payload
        if algo == "aqsgd":
            payload = self._aqsgd_payload(a, ids)
            self._record(a, self.memory[self.ops.to_device(ids)])
            return payload
        return self._tracked_payload(a, step_in_round, "m", self.fwd)

    def receive_activation(self, payload: dict, step_in_round: int, ids: np.ndarray) -> np.ndarray:
        """Receiver side: the activations the next stage computes on."""
        algo = self.algo
        if algo in ("none", "naive"):
            return (self.exact if algo == "none" else self.fwd).decode(payload)
        if algo == "ef-step":
            return self.fwd.decode(payload)
        if algo == "aqsgd":
            self._aqsgd_apply(payload, ids)
            return self.memory[self.ops.to_device(ids)].copy()
        return self._tracked_apply(payload, step_in_round, "m", self.fwd).copy()

    # ------------------------------------------------------------ backward: gradients
    def send_gradient(self, g: np.ndarray, step_in_round: int) -> dict:
        g = self.xp.ascontiguousarray(g, dtype=np.float32)
        algo = self.algo
        if algo == "none":
            self.last_error = 0.0
            return self.exact.encode(g)
        if algo in ("naive", "aqsgd"):
            payload = self.bwd.encode(g)
            self._record(g, self.bwd.decode(payload))
            return payload
        if algo == "ef-step":
            if self.e_bwd is None or self.e_bwd.shape != g.shape:
                self.e_bwd = self.xp.zeros_like(g)
            target = g + self.e_bwd
            payload = self.bwd.encode(target)
            decoded = self.bwd.decode(payload)
            self.e_bwd = target - decoded
            self._record(g, decoded)
            return payload
        return self._tracked_payload(g, step_in_round, "h", self.bwd)

    def receive_gradient(self, payload: dict, step_in_round: int) -> np.ndarray:
        algo = self.algo
        if algo == "none":
            return self.exact.decode(payload)
        if algo in ("naive", "aqsgd", "ef-step"):
            return self.bwd.decode(payload)
        return self._tracked_apply(payload, step_in_round, "h", self.bwd).copy()

    def _record(self, x, x_hat) -> None:
        """last_error = ||x - x_hat|| / ||x|| (0 when x is 0)."""
        xp = self.xp
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging run is stopped by its finite check
            norm = float(xp.linalg.norm(x))
            self.last_error = 0.0 if norm == 0 else float(xp.linalg.norm(x - x_hat)) / norm

    # ------------------------------------------------------------ Clapping's tracked references
    def _round_start(self, name: str, shape) -> None:
        buffer = getattr(self, name)
        init = self.fc_init if self.algo == "clapping-fc" else "zero"
        if init == "zero" or buffer is None:
            setattr(self, name, self.xp.zeros(shape, dtype=np.float32))
        elif init == "mean":  # rows are other samples now: keep only what does not depend on the sample
            setattr(self, name, self.xp.broadcast_to(buffer.mean(axis=0, dtype=np.float32), shape).copy())
        elif buffer.shape != shape:
            setattr(self, name, self.xp.zeros(shape, dtype=np.float32))
        elif init.startswith("damp:"):
            buffer *= np.float32(float(init[5:]))
        # prev: kept as it is

    def _tracked_payload(self, x: np.ndarray, step_in_round: int, name: str, compressor) -> dict:
        if step_in_round == 0 or getattr(self, name) is None or getattr(self, name).shape != x.shape:
            if self.algo == "clapping-fu":  # FU: the first step of a round is sent exactly
                setattr(self, name, x.copy())
                self.last_error = 0.0
                return self.exact.encode(x)
            self._round_start(name, x.shape)
        payload = compressor.delta_update(x, getattr(self, name))
        if "x" in payload:  # the identity compressor: exact
            self.last_error = 0.0
        else:
            self._record(x, getattr(self, name))
        return payload

    def _tracked_apply(self, payload: dict, step_in_round: int, name: str, compressor) -> np.ndarray:
        if "x" in payload:  # an exact message (FU's round start, or the identity compressor) is the new value
            setattr(self, name, self.exact.decode(payload))
            return getattr(self, name)
        buffer = getattr(self, name)
        shape = _payload_rows(payload), self.d
        if step_in_round == 0 or buffer is None or buffer.shape != shape:
            self._round_start(name, shape)
        getattr(self, name)[:] += compressor.decode(payload)
        return getattr(self, name)

    # ------------------------------------------------------------ AQ-SGD's per-sample buffers
    def _aqsgd_payload(self, a, ids: np.ndarray) -> dict:
        to_device = self.ops.to_device
        first = ~self.seen[ids]  # the seen mask stays on the host; rows and buffers on the device
        payload = {}
        if self.aqsgd_warm == "full" and first.any():
            rows = to_device(np.flatnonzero(first))
            payload["first"] = self.ops.to_host(a[rows].copy())  # exact initialisation of new samples' buffers
            self.memory[to_device(ids[first])] = a[rows]
        rest = ~first if self.aqsgd_warm == "full" else np.ones(len(ids), dtype=bool)
        if rest.any():
            slots = to_device(ids[rest])
            reference = self.memory[slots]
            delta = self.fwd.encode(a[to_device(np.flatnonzero(rest))] - reference)
            self.memory[slots] = reference + self.fwd.decode(delta)
            payload.update({f"delta.{k}": v for k, v in delta.items()})
        self.seen[ids] = True
        return payload

    def _aqsgd_apply(self, payload: dict, ids: np.ndarray) -> None:
        to_device = self.ops.to_device
        first = ~self.seen[ids]
        if "first" in payload:
            self.memory[to_device(ids[first])] = to_device(payload["first"])
        rest = ~first if self.aqsgd_warm == "full" else np.ones(len(ids), dtype=bool)
        delta = {k[6:]: v for k, v in payload.items() if k.startswith("delta.")}
        if delta:
            self.memory[to_device(ids[rest])] += self.fwd.decode(delta)
        self.seen[ids] = True


def _payload_rows(payload: dict) -> int:
    for key in ("x", "idx", "codes", "val", "p"):
        if key in payload:
            return int(payload[key].shape[0])
    raise ValueError("payload without rows")


def payload_bytes(payload: dict) -> int:
    return compress.Compressor.nbytes(payload)

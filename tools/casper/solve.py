"""`project`: scores -> (soft mu, certified hard y_hat) for a batch of instances of one program."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from methodkit.core.errors import DataError, RunFailure
from methodkit.core.progress import silent
from methodkit.tools.casper.decode import Decoder, certify
from methodkit.tools.casper.program import HARD_BACKENDS, Program
from methodkit.tools.casper.projection import Projector

INPUT_KINDS = ("scores", "logits")
NAN_POLICIES = ("error", "zero")
STATUSES = ("ok", "timeout", "proj_error")


def to_theta(program: Program, scores: np.ndarray, input_kind: str = "scores") -> np.ndarray:
    """The point to project, over all n variables (slacks start at 0).

    'scores': softmax per one-hot group, sigmoid per boolean (the predictor's probabilities);
    'logits': the raw scores themselves.
    """
    batch = scores.shape[0]
    theta = np.zeros((batch, program.n))
    if input_kind == "logits":
        theta[:, : program.n_user] = scores
        return theta
    group = program.group
    probs = 1.0 / (1.0 + np.exp(-np.clip(scores, -60, 60)))
    grouped = group >= 0
    if grouped.any():
        g = group[grouped]
        x = scores[:, grouped]
        peak = np.full((batch, g.max() + 1), -np.inf)
        np.maximum.at(peak.T, g, x.T)
        e = np.exp(x - peak[:, g])
        total = np.zeros((batch, g.max() + 1))
        np.add.at(total.T, g, e.T)
        probs[:, grouped] = e / total[:, g]
    theta[:, : program.n_user] = probs
    return theta


def check_scores(program: Program, scores, name: str, nan: str = "error") -> np.ndarray:
    scores = np.asarray(scores)
    if scores.ndim == 1:
        scores = scores[None, :]
    if scores.ndim != 2 or scores.shape[1] != program.n_user:
        raise DataError(
            f"{name}: scores have shape {tuple(scores.shape)}, expected (batch, {program.n_user}) "
            f"for this program's {program.n_user} variables"
        )
    if not np.issubdtype(scores.dtype, np.number):
        raise DataError(f"{name}: scores must be numeric, got {scores.dtype}")
    scores = scores.astype(np.float64)
    bad = np.flatnonzero(~np.all(np.isfinite(scores), axis=1))
    if bad.size:
        if nan == "zero":
            scores = np.where(np.isfinite(scores), scores, 0.0)
        else:
            shown = ", ".join(str(i) for i in bad[:10]) + (" ..." if bad.size > 10 else "")
            raise DataError(f"{name}: NaN or Inf scores in instances {shown}; fix them or pass --nan zero")
    huge = np.argwhere(np.abs(scores) > SCORE_LIMIT)
    if huge.size:  # finite, but the projection's squares and exponentials overflow
        i, j = (int(v) for v in huge[0])
        raise DataError(
            f"{name}: instance {i}, variable {program.user_names[j]}: score {scores[i, j]:.3g} is beyond "
            f"+-{SCORE_LIMIT:.0e}, where the projection overflows; rescale the scores"
        )
    return scores


SCORE_LIMIT = 1e100  # |score| above this overflows float64 in the projection (squares reach 1e200+)


@dataclass
class ProjectResult:
    soft: np.ndarray  # (batch, n_user) float32
    hard: np.ndarray  # (batch, n_user) uint8
    status: list
    rows: list = field(default_factory=list)
    structure: str = ""
    valid: np.ndarray | None = None  # (batch,) uint8: 1 where hard is certified valid

    def to_dict(self) -> dict:
        counts = {s: self.status.count(s) for s in STATUSES}
        ms = [r["ms"] for r in self.rows]
        return {
            "instances": len(self.status),
            **counts,
            "valid": int(self.valid.sum()) if self.valid is not None else counts["ok"],
            "structure": self.structure,
            "ms_mean": float(np.mean(ms)) if ms else None,
        }


def run(
    program: Program,
    scores: np.ndarray,
    *,
    input_kind: str = "scores",
    time_limit: float = 60.0,
    device: str = "cpu",
    progress=silent,
    warn=lambda message: None,
    decode_weights: str = "linear",
) -> ProjectResult:
    """Project each row of `scores` (batch, n_user) onto P and decode a certified point of C.

    device 'cuda' projects the whole batch at once with the batched dense solver on CuPy
    (batched.py; programs of at most 4,096 rows); the decode and the certificate stay on the CPU.
    Every row's hard output comes from the exact decoder, whatever the projection's status (a
    proj_error row is decoded from `_fallback_point`); `warn` gets one line per row that is not ok.
    """
    theta = to_theta(program, scores, input_kind)
    projector = Projector(program)
    # log-p: -log of the predictor's probabilities (softmax per group, sigmoid per boolean of the raw
    # scores), not of mu; measured on trained sums, -log mu rewrote more near-certain digits than 1 - mu
    # and -log p none (docs/casper.md, "Decode weights")
    probabilities = to_theta(program, scores, "scores") if decode_weights == "log-p" else None
    weighting = "log" if decode_weights == "log-p" else decode_weights
    decoder = Decoder(program, time_limit=time_limit, weighting=weighting)
    batch = theta.shape[0]
    batched = None
    if device == "cuda":
        from methodkit.core.backend import array_module
        from methodkit.tools.casper.batched import BatchedDenseProjector

        start = time.perf_counter()
        batched = BatchedDenseProjector(program, array_module("cuda")).project(theta)
        batched_ms = (time.perf_counter() - start) * 1000 / max(batch, 1)
    soft = np.zeros((batch, program.n_user), dtype=np.float32)
    hard = np.zeros((batch, program.n_user), dtype=np.uint8)
    valid = np.zeros(batch, dtype=np.uint8)  # 1 where hard is a certified member of C
    status, rows = [], []
    progress("project", 0, batch)
    for i in range(batch):
        start = time.perf_counter()
        if batched is None:
            mu, states = projector.project(theta[i : i + 1])
        else:
            mu, states = batched[0][i : i + 1], batched[1][i : i + 1]
        state = states[0]
        row = {"i": i, "status": state.status, "objective": None, "certificate": None}
        if state.status == "ok":
            soft[i] = mu[0, : program.n_user]
            point, source = mu[0], "projection"
        else:  # the soft output is not certified; the hard one still comes from the exact decoder
            soft[i] = np.nan
            point, source = _fallback_point(program, theta[i], state)
        if probabilities is not None:
            point, source = probabilities[i], "probabilities"
        decoded = decoder.decode(point)
        if decoded.status == "infeasible":
            raise DataError("the program's valid set C is empty: no 0/1 assignment satisfies it")
        if state.status == "ok" or decoded.status != "ok":
            row["status"] = decoded.status
        reason = certify(program, decoded.y)
        if reason is not None and decoded.status == "ok":
            raise RunFailure(f"internal: certificate failed for row {i} ({reason})")
        if reason is None:  # a MILP timeout keeps its incumbent when it has one
            hard[i] = decoded.y
            valid[i] = 1
            row["objective"] = decoded.objective
            row["certificate"] = {
                "valid": True,
                "soft": state.method if state.status == "ok" else None,
                "newton_steps": state.iterations,
                "kkt_residual": state.residual,
                "hard": HARD_BACKENDS[program.structure],
                "decoded_from": source,
            }
        if row["status"] != "ok":
            warn(_warning(i, row, state, source))
        row["ms"] = round((time.perf_counter() - start) * 1000 + (batched_ms if batched else 0.0), 3)
        status.append(row["status"])
        rows.append(row)
        progress("project", i + 1, batch)
    return ProjectResult(soft, hard, status, rows, program.structure, valid)


def _fallback_point(program: Program, theta: np.ndarray, state) -> tuple[np.ndarray, str]:
    """What a proj_error row is decoded from: the interior-point safeguard's primal point when it
    solved, else the scores clipped to the bounds (the decoder only needs an ordering of the
    variables; it never needs the projection to have converged)."""
    if state.fallback is not None and np.all(np.isfinite(state.fallback)):
        return state.fallback, "interior-point"
    return np.clip(theta, program.lower, program.upper), "clipped-scores"


def _warning(i: int, row: dict, state, source: str) -> str:
    if row["certificate"] is None:
        return f"row {i}: {row['status']}, no valid hard output (the decoder found none within --time-limit)"
    if state.status != "ok":
        return (
            f"row {i}: proj_error (residual {state.residual:.1e} after {state.iterations} steps); soft is NaN, "
            f"hard is valid, decoded from the {source.replace('-', ' ')}"
        )
    return f"row {i}: {row['status']}, hard is the decoder's best valid assignment within --time-limit"

"""Self-checks: perft of the move generator(s), encoder parity, chunked-vs-step and Numba-vs-step kernel parity."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from methodkit.core.progress import ProgressCallback, silent

# (name, FEN, depth, nodes): the standard perft positions (chessprogramming.org)
PERFT_CASES = [
    ("start", "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", 5, 4_865_609),
    ("kiwipete", "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1", 4, 4_085_603),
    ("position3", "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1", 5, 674_624),
]


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class SelftestReport:
    ok: bool
    checks: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "failed": [c.name for c in self.checks if not c.ok],
            "checks": [asdict(c) for c in self.checks],
        }

    def failure(self) -> str:
        """The one-line message of a failed self-test (exit 3)."""
        return f"self-check failed: {', '.join(c.name for c in self.checks if not c.ok)}"


def run_selftest(
    *, games: int = 20, perft_scale: int = 0, seed: int = 0, progress: ProgressCallback = silent
) -> SelftestReport:
    """perft_scale 0 runs each perft case two plies shallower (fast); 1 runs the full depths."""
    checks = []
    checks += _perft_checks(perft_scale, progress)
    checks.append(_encoder_parity(games, seed))
    checks += _kernel_parity(seed)
    return SelftestReport(all(c.ok for c in checks), checks)


def _perft_checks(scale: int, progress) -> list[Check]:
    import chess

    from methodkit.tools.chess_wm import engine

    out = []
    for number, (name, fen, depth, nodes) in enumerate(PERFT_CASES):
        if scale <= 0:
            depth -= 2
            nodes = _python_perft(chess.Board(fen), depth)
            source = "python-chess"
        else:
            source = "published"
        got = engine.perft(fen, depth)
        out.append(Check(f"perft:{name}:{depth}", got == nodes, f"numba {got}, {source} {nodes}"))
        progress("perft", number + 1, len(PERFT_CASES))
    return out


def _python_perft(board, depth: int) -> int:
    if depth == 0:
        return 1
    if depth == 1:
        return board.legal_moves.count()
    total = 0
    for move in board.legal_moves:
        board.push(move)
        total += _python_perft(board, depth - 1)
        board.pop()
    return total


def _encoder_parity(games: int, seed: int) -> Check:
    import chess

    from methodkit.tools.chess_wm.board import game_arrays, reference_state
    from methodkit.tools.chess_wm.generate import game_rng, play_random

    bad = 0
    steps = 0
    for index in range(games):
        moves, _, _ = play_random(game_rng(seed, index), 120)
        for ep in ("potential", "legal"):
            _, states = game_arrays(moves, ep)
            board = chess.Board()
            ref = [reference_state(board, ep)]
            for move in moves:
                board.push(move)
                ref.append(reference_state(board, ep))
            bad += int((np.asarray(ref) != states).any(axis=1).sum())
            steps += len(ref)
    return Check("encoder:numba-vs-python-chess", bad == 0, f"{bad} of {steps} states differ")


def _kernel_parity(seed: int) -> list[Check]:
    import torch

    from methodkit.tools.chess_wm.models import NUMBA_ARCHS, ModelConfig, build_model

    torch.manual_seed(seed)
    tokens = torch.randint(0, 20480, (2, 150))
    out = []
    for arch in ("slice", "slice-diag", "gdn", "gdn-pos", "mamba3", "mamba2"):
        model = build_model(ModelConfig(arch=arch, size="d64", dropout=0.0)).eval()
        with torch.no_grad():
            model.set_kernel("chunk")
            a = model(tokens)
            model.set_kernel("recurrent")
            b = model(tokens)
        err = float((a - b).abs().max() / b.abs().max().clamp(min=1e-12))
        out.append(Check(f"kernel:{arch}:chunk-vs-recurrent", err <= 1e-4, f"max rel. error {err:.2e}"))
        if arch in NUMBA_ARCHS:
            with torch.no_grad():
                model.set_kernel("numba")
                c = model(tokens)
            err = float((c - b).abs().max() / b.abs().max().clamp(min=1e-12))
            out.append(Check(f"kernel:{arch}:numba-vs-recurrent", err <= 1e-4, f"max rel. error {err:.2e}"))
    return out

"""chess-wm benchmarks: `case size ours_s ref_s ratio` (ratio = ref_s / ours_s), one run, same machine.

- random_play: seeded uniformly random games to their end with draw claims; Numba engine vs
  python-chess (`is_game_over(claim_draw=True)` + random legal move), 1 thread. size = plies.
- book_selfplay: Polyglot book (Debian gnuchess-book) + heuristic player, 96-ply cap; the Numba
  engine vs the python-chess player (generate.selfplay_pgn, PGN text). size = games; the last
  column of the line after it is the projected time of 40k games (issue: <= 5 min).
- encode_states: 75 labels per position; Numba kernel from snapshots vs the per-board
  python-chess loop. size = positions.
- <family>_chunk_vs_step: one layer, B=32, T=256, d=128 (Mamba: B=8, T=128), forward + backward, 2 threads;
  the chunked kernel vs the step loop (max relative error printed after the ratio).
- slice_*_numba_vs_chunk_fwd_bwd_cpu: the same layer, the compiled Numba scan (the CPU default) vs the
  chunked form, process CPU time of both threads (so a loaded machine does not skew it).
- mamba*_numba_vs_chunk_fwd_bwd_cpu: one Mamba layer at the acceptance shape (B=64, T=96, d=128), the
  compiled Numba scan (the CPU default) vs the chunked SSD form, one torch and one Numba thread, process
  CPU time. `python bench/chess_wm/bench.py mamba` runs only these lines.
"""

from __future__ import annotations

import sys
import time

import numpy as np


def _time(fn, repeat: int = 1, clock=time.perf_counter) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = clock()
        fn()
        best = min(best, clock() - start)
    return best


def bench_random_play(n_games: int = 20) -> None:
    import chess

    from methodkit.tools.chess_wm import engine
    from methodkit.tools.chess_wm.generate import game_rng, play_random

    engine.random_game(0, 0)  # compile
    plies_numba = [0]

    def ours():
        plies_numba[0] = sum(len(engine.random_game(1, i)[0]) - 1 for i in range(n_games))

    plies_ref = [0]

    def ref():
        total = 0
        for i in range(n_games):
            moves, _, _ = play_random(game_rng(1, i))
            total += len(moves)
        plies_ref[0] = total

    t_ours = _time(ours) / plies_numba[0]
    t_ref = _time(ref) / plies_ref[0]
    per = 100_000
    print(f"random_play_per_{per}_plies\t{per}\t{t_ours * per:.4f}\t{t_ref * per:.4f}\t{t_ref / t_ours:.1f}")
    del chess


def bench_book_selfplay(n_games: int = 200) -> None:
    from methodkit.tools.chess_wm import engine
    from methodkit.tools.chess_wm.generate import DEFAULT_BOOK, SelfplayOptions, selfplay_pgn

    book = engine.load_book(DEFAULT_BOOK)
    list(engine.book_games(2, 0, book=book, max_plies=96))  # compile
    ours = _time(lambda: list(engine.book_games(n_games, 1, book=book, max_plies=96)))
    ref = _time(lambda: "".join(selfplay_pgn(n_games, 1, SelfplayOptions(max_plies=96))))
    print(f"book_selfplay\t{n_games}\t{ours:.4f}\t{ref:.4f}\t{ref / ours:.1f}")
    print(f"book_selfplay_40k_projected_s\t40000\t{ours * 40_000 / n_games:.1f}\t{ref * 40_000 / n_games:.1f}\t-")


def bench_encode(n_positions: int = 20_000) -> None:
    import chess

    from methodkit.tools.chess_wm.board import reference_state, snapshot
    from methodkit.tools.chess_wm.generate import game_rng, play_random
    from methodkit.tools.chess_wm.kernels import SNAP_WIDTH, encode_states

    boards, rows = [], []
    index = 0
    while len(boards) < n_positions:
        moves, _, _ = play_random(game_rng(2, index), 200)
        index += 1
        board = chess.Board()
        for move in moves:
            board.push(move)
            boards.append(board.copy(stack=False))
            rows.append(snapshot(board, "potential"))
    boards, rows = boards[:n_positions], rows[:n_positions]
    snaps = np.array(rows, dtype=np.uint64).reshape(-1, SNAP_WIDTH)
    encode_states(snaps[:10])
    ours = _time(lambda: encode_states(snaps), 5)
    ref = _time(lambda: [reference_state(b) for b in boards])
    assert (encode_states(snaps) == np.array([reference_state(b) for b in boards])).all()
    print(f"encode_states\t{n_positions}\t{ours:.4f}\t{ref:.4f}\t{ref / ours:.1f}")


def bench_kernels() -> None:
    import torch

    from methodkit.tools.chess_wm.models.gdn import GatedDeltaNet
    from methodkit.tools.chess_wm.models.mamba import Mamba3
    from methodkit.tools.chess_wm.models.slice import SLiCE

    torch.set_num_threads(2)
    torch.manual_seed(0)
    big, small = torch.randn(32, 256, 128), torch.randn(8, 128, 128)
    layers = {  # the Mamba step loops keep 256 states of 128x64 per head for backward: a smaller case
        "slice_block8": (SLiCE(128, 8), big),
        "slice_diag": (SLiCE(128, 1), big),
        "gdn_neg": (GatedDeltaNet(128, 2), big),
        "mamba3_mimo4": (Mamba3(128), small),
        "mamba2": (Mamba3(128, mamba2=True), small),
    }
    for name, (layer, x) in layers.items():
        outs: dict = {}

        def step(kernel, layer=layer, outs=outs, x=x):
            layer.kernel = kernel
            layer.zero_grad()
            out = layer(x)
            out.square().mean().backward()
            outs[kernel] = out.detach()

        ours = _time(lambda: step("chunk"), 2)
        ref = _time(lambda: step("recurrent"), 1)
        err = float((outs["chunk"] - outs["recurrent"]).abs().max() / outs["recurrent"].abs().max())
        size = "x".join(f"{k}{v}" for k, v in zip("BTd", x.shape))
        print(f"{name}_chunk_vs_step_fwd_bwd\t{size}\t{ours:.3f}\t{ref:.3f}\t{ref / ours:.1f}\t# max rel err {err:.1e}")
        if name.startswith("slice"):  # the CPU default: the compiled scan, against the chunked form
            step("numba")  # compile outside the timing
            ours = _time(lambda: step("numba"), 3, clock=time.process_time)
            ref = _time(lambda: step("chunk"), 3, clock=time.process_time)
            err = float((outs["numba"] - outs["recurrent"]).abs().max() / outs["recurrent"].abs().max())
            print(
                f"{name}_numba_vs_chunk_fwd_bwd_cpu\t{size}\t{ours:.3f}\t{ref:.3f}\t{ref / ours:.1f}\t# max rel err {err:.1e}"
            )


def bench_mamba_numba() -> None:
    import numba
    import torch

    from methodkit.tools.chess_wm.models.mamba import Mamba3

    torch.set_num_threads(1)
    numba.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.randn(64, 96, 128)
    for name, layer in (("mamba3_mimo4", Mamba3(128)), ("mamba2", Mamba3(128, mamba2=True))):
        outs: dict = {}

        def step(kernel, layer=layer, outs=outs):
            layer.kernel = kernel
            layer.zero_grad()
            out = layer(x)
            out.square().mean().backward()
            outs[kernel] = out.detach()

        step("numba")  # compile (or load the cache) outside the timing
        ours = _time(lambda: step("numba"), 3, clock=time.process_time)
        ref = _time(lambda: step("chunk"), 2, clock=time.process_time)
        err = float((outs["numba"] - outs["chunk"]).abs().max() / outs["chunk"].abs().max())
        print(
            f"{name}_numba_vs_chunk_fwd_bwd_cpu\tB64xT96xd128\t{ours:.3f}\t{ref:.3f}\t{ref / ours:.1f}"
            f"\t# max rel diff {err:.1e}"
        )


def main() -> int:
    import torch

    torch.set_num_threads(1)
    print("case\tsize\tours_s\tref_s\tratio")
    if sys.argv[1:] == ["mamba"]:
        bench_mamba_numba()
        return 0
    bench_random_play()
    bench_book_selfplay()
    bench_encode()
    bench_kernels()
    bench_mamba_numba()
    return 0


if __name__ == "__main__":
    sys.exit(main())

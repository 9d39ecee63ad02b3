"""The Numba move generator and state encoder against python-chess and published perft counts."""

from __future__ import annotations

import chess
import numpy as np
import pytest

from methodkit.tools.chess_wm import board as B
from methodkit.tools.chess_wm import engine
from methodkit.tools.chess_wm.selftest import PERFT_CASES

START = chess.STARTING_FEN
KIWIPETE = PERFT_CASES[1][1]
POSITION3 = PERFT_CASES[2][1]


@pytest.mark.parametrize(
    "fen, depth, nodes",
    [
        (START, 3, 8_902),
        (KIWIPETE, 2, 2_039),
        (POSITION3, 4, 43_238),
        ("r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pp1P2PP/R2Q1RK1 w kq - 0 1", 3, 9_467),
        ("rnbq1k1r/pp1Pbppp/2p5/8/2B5/8/PPP1NnPP/RNBQK2R w KQ - 1 8", 3, 62_379),
    ],
)
def test_perft_known_counts(fen, depth, nodes):
    assert engine.perft(fen, depth) == nodes


@pytest.mark.slow
@pytest.mark.parametrize("name, fen, depth, nodes", PERFT_CASES)
def test_perft_issue_gates(name, fen, depth, nodes):
    assert engine.perft(fen, depth) == nodes


def _replay_check(seed: int, n_games: int, cap: int) -> int:
    checked = 0
    for index in range(n_games):
        for ep in ("potential", "legal"):
            tokens, states, status = engine.random_game(seed, index, cap, ep)
            sets = engine.legal_sets(tokens[1:])
            board = chess.Board()
            for t in range(len(tokens)):
                assert sets[t] == {B.move_id(m) for m in board.legal_moves}, (index, t)
                assert (B.reference_state(board, ep) == states[t]).all(), (index, t, ep)
                if t + 1 < len(tokens):
                    board.push(B.id_to_move(int(tokens[t + 1])))
                checked += 1
            # the game ends exactly where python-chess says it is over (with draw claims)
            assert board.is_game_over(claim_draw=True) == (status != "cut"), (index, status)
    return checked


def test_random_games_match_python_chess_legal_sets_states_and_ends():
    assert _replay_check(seed=11, n_games=6, cap=4096) > 1000


@pytest.mark.slow
def test_legal_move_sets_2000_games():
    _replay_check(seed=0, n_games=2000, cap=4096)


def test_random_games_are_seeded_and_long():
    a = engine.random_game(5, 0)
    b = engine.random_game(5, 0)
    c = engine.random_game(5, 1)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0][: len(c[0])], c[0][: len(a[0])])
    lengths = [len(engine.random_game(5, i)[0]) - 1 for i in range(30)]
    assert 150 < np.mean(lengths) < 500  # random games are long (issue: mean 326 plies)


def test_status_names_the_rule():
    statuses = {engine.random_game(0, i)[2] for i in range(40)}
    assert statuses <= set(engine.STATUS.values()) and "cut" not in statuses
    assert len(statuses) >= 3


def test_insufficient_material_matches_python_chess():
    from methodkit.tools.chess_wm.kernels import insufficient_material

    fens = [
        "8/8/8/4k3/8/8/8/4K3 w - - 0 1",
        "8/8/8/4k3/8/8/8/4KN2 w - - 0 1",
        "8/8/8/4k3/8/8/8/3NKN2 w - - 0 1",
        "8/8/8/2b1k3/8/8/8/4KB2 w - - 0 1",
        "8/8/8/3bk3/8/8/8/4KB2 w - - 0 1",
        "8/8/8/4k3/8/8/4P3/4K3 w - - 0 1",
        "8/8/8/4kn2/8/8/8/4KB2 w - - 0 1",
        "8/8/8/4kq2/8/8/8/4KN2 w - - 0 1",
    ]
    for fen in fens:
        board, _ = engine.position_from_fen(fen)
        assert insufficient_material(board) == chess.Board(fen).is_insufficient_material(), fen

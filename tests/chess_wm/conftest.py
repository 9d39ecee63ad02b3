"""Small shared fixtures: one thread for torch (the machine is shared), tiny data folders."""

from __future__ import annotations

import pytest

pytest.importorskip("chess")


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def random_dir(tmp_path_factory):
    from methodkit.tools.chess_wm import engine
    from methodkit.tools.chess_wm.data import write_games

    folder = tmp_path_factory.mktemp("cw") / "rand"
    write_games(folder, engine.random_games(64, 7, max_plies=40), source="random", ep="potential", max_plies=40)
    return folder


@pytest.fixture(scope="session")
def book_dir(tmp_path_factory):
    from methodkit.tools.chess_wm.data import PgnOptions, build_from_pgn
    from methodkit.tools.chess_wm.generate import SelfplayOptions, selfplay_pgn

    folder = tmp_path_factory.mktemp("cw") / "book"
    text = "".join(selfplay_pgn(96, 3, SelfplayOptions(max_plies=30)))
    build_from_pgn([("book.pgn", text.encode())], folder, opts=PgnOptions(max_plies=30))
    return folder

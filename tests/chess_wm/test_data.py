"""State labels, move ids, PGN building (dirty inputs), shards, manifests and the split rule."""

from __future__ import annotations

import hashlib
import json

import chess
import numpy as np
import pytest

from methodkit.core.errors import DataError, UsageError
from methodkit.tools.chess_wm import board as B
from methodkit.tools.chess_wm import data as D
from methodkit.tools.chess_wm import spec

GOOD = (
    "1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 5. O-O Be7 6. Re1 b5 7. Bb3 d6 8. c3 O-O 9. h3 Nb8 10. d4 Nbd7 11. c4 c6"
)


def pgn(moves: str = GOOD, **headers) -> str:
    tags = {"Event": "t", "White": "a", "Black": "b", "Result": "*", **headers}
    return "".join(f'[{k} "{v}"]\n' for k, v in tags.items()) + "\n" + moves + " *\n\n"


def test_spec_constants():
    assert spec.VOCAB == 20482 and spec.START == 20480 and spec.PAD == 20481
    assert spec.HEAD_SIZE == 1878 and len(spec.LABEL_CLASSES) == 75
    assert spec.encode_move(chess.E2, chess.E4, None) == (12 * 64 + 28) * 5
    assert spec.encode_move(chess.A7, chess.A8, chess.KNIGHT) == (48 * 64 + 56) * 5 + 4
    assert spec.decode_move(spec.encode_move(chess.B7, chess.A8, chess.QUEEN)) == (chess.B7, chess.A8, chess.QUEEN)
    assert spec.label_index_of_square(chess.A8) == 0 and spec.label_index_of_square(chess.H1) == 63


def test_start_position_labels_by_hand():
    state = B.reference_state(chess.Board())
    assert list(state[:8]) == [10, 8, 9, 11, 12, 9, 8, 10]  # r n b q k b n r
    assert list(state[8:16]) == [7] * 8 and list(state[48:56]) == [1] * 8
    assert list(state[56:64]) == [4, 2, 3, 5, 6, 3, 2, 4]
    assert state[64] == 0 and list(state[65:69]) == [1, 1, 1, 1] and list(state[69:71]) == [0, 0]
    assert list(state[71:75]) == [0, 0, 0, 1]


def test_ep_conventions_differ_after_a_double_push():
    tokens, potential = B.game_arrays([chess.Move.from_uci("e2e4")], "potential")
    _, legal = B.game_arrays([chess.Move.from_uci("e2e4")], "legal")
    assert list(potential[1, 69:71]) == [5, 1]  # e3 (file e = 5, rank 3)
    assert list(legal[1, 69:71]) == [0, 0]  # no black pawn can take en passant
    assert tokens[0] == spec.START and len(tokens) == 2


def test_numba_encoder_equals_python_chess_loop_and_fen():
    from methodkit.tools.chess_wm.generate import game_rng, play_random

    for index in range(4):
        moves, _, _ = play_random(game_rng(1, index), 150)
        for ep in ("potential", "legal"):
            _, states = B.game_arrays(moves, ep)
            board = chess.Board()
            for t in range(len(moves) + 1):
                assert (B.reference_state(board, ep) == states[t]).all()
                if ep == "legal":  # the labels spell python-chess's own FEN
                    assert B.state_fen(states[t]) == board.fen()
                if t < len(moves):
                    board.push(moves[t])


def test_counters_are_big_endian_bytes():
    board = chess.Board()
    board.halfmove_clock, board.fullmove_number = 300, 1000
    state = B.reference_state(board)
    assert list(state[71:75]) == [1, 44, 3, 232]


def test_split_rule_is_md5_mod_10000():
    ids = [f"g{i}" for i in range(20000)]
    val = [i for i in ids if D.is_validation(i)]
    assert all(int(hashlib.md5(i.encode()).hexdigest(), 16) % 10000 < 50 for i in val)
    assert 50 < len(val) < 150  # about 0.5 %


def _build(tmp_path, text, **kw):
    opts = D.PgnOptions(**kw)
    return D.build_from_pgn(
        [("in.pgn", text if isinstance(text, bytes) else text.encode())], tmp_path / "out", opts=opts
    )


def test_build_skips_bad_games_with_reasons(tmp_path):
    text = (
        pgn()
        + pgn("1. e4 e5 2. Ke3 Nc6")  # illegal SAN
        + pgn(GOOD, Variant="Chess960")
        + pgn("1. e4", SetUp="1", FEN="8/8/8/4k3/8/8/8/4K3 w - - 0 1")
        + pgn("1. e4 e5 2. Nf3")  # short
        + pgn(
            "1. e4 -- 2. d4 e5 3. Nf3 Nc6 4. Bb5 a6 5. Ba4 Nf6 6. O-O Be7 7. Re1 b5 8. Bb3 d6 9. c3 O-O 10. h3 Nb8 11. a3"
        )
        + '[Event "r"]\n[Result "1-0"]\n\n1-0\n\n'  # results only
        + pgn("1. e4 {a comment} e5 $1 (1... c5 2. Nf3) " + GOOD[9:])  # comments, NAGs, variations: mainline kept
    )
    stats = _build(tmp_path, text)
    assert stats.kept == 2
    assert dict(stats.skipped) == {"illegal": 1, "variant": 1, "setup": 1, "short": 1, "null_move": 1, "empty": 1}
    games = D.load_dataset(tmp_path / "out")
    assert len(games) == 2 and np.array_equal(games.game(0)[0], games.game(1)[0])


def test_build_strict_names_game_and_offset(tmp_path):
    text = pgn() + pgn("1. e4 e5 2. Ke3")
    with pytest.raises(DataError, match=r"in.pgn: game 2 at byte \d+: .*--strict"):
        _build(tmp_path, text, strict=True)
    assert not (tmp_path / "out" / D.MANIFEST).exists()


def test_build_handles_bom_crlf_latin1(tmp_path):
    text = ("\ufeff" + pgn(White="Mu\u00f1oz")).replace("\n", "\r\n").encode("latin-1", errors="replace")
    text = b"\xef\xbb\xbf" + text.replace("Mu\xf1oz".encode("latin-1"), b"Mu\xf1oz")
    stats = _build(tmp_path, text)
    assert stats.kept == 1 and stats.decode_replacements >= 1


def test_build_truncates_and_counts(tmp_path):
    stats = _build(tmp_path, pgn(), max_plies=20)
    games = D.load_dataset(tmp_path / "out")
    assert stats.truncated == 1 and games.plies.tolist() == [20]


def test_zst_input_and_truncated_stream(tmp_path):
    zstandard = pytest.importorskip("zstandard")
    from methodkit.tools.chess_wm.generate import random_games

    texts: list = []
    list(random_games(30, 0, max_plies=60, pgn_sink=texts))
    compressor = zstandard.ZstdCompressor().compressobj()
    raw = b"".join(compressor.compress(t.encode()) + compressor.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK) for t in texts)
    raw += compressor.flush()
    stats = D.build_from_pgn([("a.pgn.zst", raw)], tmp_path / "full", opts=D.PgnOptions())
    assert stats.kept == 30 and stats.input_truncated_at is None
    cut = D.build_from_pgn([("a.pgn.zst", raw[: len(raw) // 2])], tmp_path / "cut", opts=D.PgnOptions())
    assert cut.input_truncated_at is not None and 0 < cut.kept < 30


def test_manifest_and_shards_are_checked(tmp_path):
    D.write_games(tmp_path / "d", [_game(i) for i in range(5)], source="t", ep="potential", games_per_shard=2)
    manifest = json.loads((tmp_path / "d" / D.MANIFEST).read_text())
    assert manifest["counts"]["games"] == 5 and len(manifest["shards_sha256"]) == 3
    assert len(D.load_dataset(tmp_path / "d")) == 5
    shard = tmp_path / "d" / "shard-00001.npz"
    shard.write_bytes(shard.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(DataError, match="sha256 differs"):
        D.load_dataset(tmp_path / "d")
    with pytest.raises(UsageError, match="already holds a data set"):
        D.write_games(tmp_path / "d", [_game(0)], source="t", ep="potential")


def _game(i: int):
    moves = [chess.Move.from_uci(u) for u in ("e2e4", "e7e5", "g1f3")[: 1 + i % 3]]
    tokens, states = B.game_arrays(moves)
    return D.Game(tokens, states, f"id{i}")


def test_jsonl_official_schema_round_trip(tmp_path):
    games = [_game(i) for i in range(3)]
    D.write_games(tmp_path / "j", games, source="t", ep="legal", fmt="jsonl")
    line = json.loads((tmp_path / "j" / D.JSONL_NAME).read_text().splitlines()[0])
    assert set(line) == {"example_id", "moves", "states", "steps", "plies", "fullmoves", "result", "spec"}
    loaded = D.load_dataset(tmp_path / "j")
    assert loaded.spec["ep"] == "legal" and len(loaded) == 3
    assert np.array_equal(loaded.game(2)[1], games[2].states)
    # a bare JSONL file from the official processor reads too
    single = D.load_dataset(tmp_path / "j" / D.JSONL_NAME)
    assert np.array_equal(single.moves, loaded.moves)


def test_spec_mismatch_names_both_hashes():
    a, b = spec.spec("potential"), spec.spec("legal")
    with pytest.raises(DataError, match=f"{spec.spec_sha(a)}.*{spec.spec_sha(b)}"):
        D.require_same_spec(a, b, "ckpt", "data")

"""chess-wm through the installed executable: pipes, files, seeds, bad inputs, exit statuses."""

from __future__ import annotations

import json

PGN = (
    '[Event "a"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 5. O-O Be7 6. Re1 b5 7. Bb3 d6 '
    "8. c3 O-O 9. h3 Nb8 10. d4 Nbd7 11. c4 c6 *\n\n"
)


def test_help_lists_verbs(run_cli):
    proc = run_cli(["chess-wm", "--help"])
    out = proc.stdout.decode()
    for verb in ("build", "random", "selfplay", "train", "eval", "predict", "selftest"):
        assert verb in out


def test_build_from_stdin_prints_one_json_line(run_cli, tmp_path):
    proc = run_cli(["chess-wm", "build", "-", "-o", tmp_path / "d", "--max-plies", "10"], input=PGN * 2)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 1
    result = json.loads(lines[0])
    assert result["kept"] == 2 and result["truncated"] == 2 and result["plies"] == 20
    assert (tmp_path / "d" / "manifest.json").exists()


def test_build_file_strict_bad_game_exits_2_and_keeps_nothing(run_cli, tmp_path, one_line_error):
    bad = tmp_path / "bad.pgn"
    bad.write_text(PGN + PGN.replace("Nf3", "Nf6"))
    proc = run_cli(["chess-wm", "build", bad, "-o", tmp_path / "d", "--strict"])
    one_line_error(proc, "chess-wm", "bad.pgn: game 2 at byte", "--strict")
    assert not (tmp_path / "d" / "manifest.json").exists()


def test_build_all_games_bad_exits_2(run_cli, tmp_path, one_line_error):
    proc = run_cli(["chess-wm", "build", "-", "-o", tmp_path / "d"], input='[Event "x"]\n\n1. e4 *\n\n')
    one_line_error(proc, "chess-wm", "no usable game (short 1)")


def test_random_same_seed_same_bytes_and_existing_output_kept(run_cli, tmp_path, one_line_error):
    args = ["chess-wm", "random", "--games", "5", "--max-plies", "30", "--seed", "4"]
    a = run_cli([*args, "-o", tmp_path / "a", "--pgn", tmp_path / "a.pgn"])
    b = run_cli([*args, "-o", tmp_path / "b"])
    assert a.returncode == 0 and b.returncode == 0, a.stderr
    shard = "shard-00000.npz"
    assert (tmp_path / "a" / shard).read_bytes() == (tmp_path / "b" / shard).read_bytes()
    assert (tmp_path / "a.pgn").read_text().count("[Event") == 5
    before = (tmp_path / "a" / "manifest.json").read_bytes()
    again = run_cli([*args, "-o", tmp_path / "a", "--seed", "5"])
    one_line_error(again, "chess-wm", "folder exists and is not empty; pass --force")
    assert (tmp_path / "a" / "manifest.json").read_bytes() == before


def test_python_and_numba_engines_agree_on_labels(run_cli, tmp_path):
    from methodkit.tools.chess_wm.data import load_dataset

    run_cli(["chess-wm", "random", "--games", "3", "--max-plies", "30", "--engine", "python", "-o", tmp_path / "p"])
    games = load_dataset(tmp_path / "p")
    from methodkit.tools.chess_wm.board import game_arrays, id_to_move

    for i in range(len(games)):
        tokens, states = games.game(i)
        _, again = game_arrays([id_to_move(int(t)) for t in tokens[1:]])
        assert (again == states).all()


def test_selfplay_pipes_into_build(shell, tmp_path):
    proc = shell(
        f"chess-wm selfplay --games 3 --max-plies 30 --seed 1 | chess-wm build - -o {tmp_path / 'b'}", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["kept"] == 3


def test_selfplay_missing_book_exits_2(run_cli, one_line_error):
    proc = run_cli(["chess-wm", "selfplay", "--games", "1", "--book", "/no/book.bin"])
    one_line_error(proc, "chess-wm", "/no/book.bin: no such Polyglot book")


def test_train_eval_predict_pipeline(run_cli, shell, tmp_path, random_dir, one_line_error):
    run = tmp_path / "run"
    proc = run_cli(
        [
            "chess-wm",
            "train",
            random_dir,
            "-o",
            run,
            "--arch",
            "gdn",
            "--size",
            "d64",
            "--steps",
            "4",
            "--batch-size",
            "16",
            "--val",
            random_dir,
            "-j",
            "1",
            "--log-every",
            "2",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["steps"] == 4 and result["val_games"] == 64 and 0 < result["val_label_acc"] < 1
    assert {"model.safetensors", "model.json", "log.csv", "config.json"} <= {p.name for p in run.iterdir()}
    # existing checkpoint is not overwritten without --resume/--force
    again = run_cli(["chess-wm", "train", random_dir, "-o", run, "--size", "d64", "--steps", "4"])
    one_line_error(again, "chess-wm", "folder exists and is not empty; pass --force")
    # eval: TSV on stdout, files in --out-dir
    proc = run_cli(
        [
            "chess-wm",
            "eval",
            "--checkpoint",
            run,
            f"rand={random_dir}",
            "--out-dir",
            tmp_path / "ev",
            "--per-game",
            tmp_path / "pg.jsonl",
            "-j",
            "1",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    header, row = proc.stdout.decode().splitlines()
    assert header.split("\t")[:5] == ["checkpoint", "arch", "size", "dataset", "games"]
    assert row.split("\t")[3:5] == ["rand", "64"]
    metrics = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert metrics[0]["prefix_bins"][0]["plies"] == "0-19"
    assert len((tmp_path / "pg.jsonl").read_text().splitlines()) == 64
    # predict: one JSONL record per line, an illegal move is an error record, the rest still runs
    proc = run_cli(["chess-wm", "predict", "--checkpoint", run, "-j", "1"], input="e2e4 e7e5\ne2e4 e2e4\nd2d4\n")
    records = [json.loads(x) for x in proc.stdout.decode().splitlines()]
    assert proc.returncode == 0 and len(records) == 3
    assert records[1] == {
        "line": 2,
        "error": "ply 2: 'e2e4' is illegal in rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1",
    }
    assert len(records[0]["states"]) == 3 and len(records[0]["states"][0]["confidence"]) == 75
    # `| head -1` ends quietly
    piped = shell(f"yes 'e2e4 e7e5 g1f3' | head -50 | chess-wm predict --checkpoint {run} -j 1 | head -1")
    assert piped.returncode == 0 and piped.stderr == b"" and piped.stdout.count(b"\n") == 1
    # spec mismatch: the checkpoint was trained with --ep potential
    legal = tmp_path / "legal"
    run_cli(["chess-wm", "random", "--games", "2", "--max-plies", "30", "--ep", "legal", "-o", legal])
    proc = run_cli(["chess-wm", "eval", "--checkpoint", run, f"l={legal}"])
    one_line_error(proc, "chess-wm", "ep=potential", "ep=legal", "rebuild the data")


def test_train_missing_data_exits_2(run_cli, tmp_path, one_line_error):
    proc = run_cli(["chess-wm", "train", tmp_path / "nope", "-o", tmp_path / "r", "--size", "d64"])
    one_line_error(proc, "chess-wm", "nope: no such data folder")


def test_predict_without_checkpoint_exits_2(run_cli, one_line_error):
    proc = run_cli(["chess-wm", "predict"], input="e2e4\n")
    one_line_error(proc, "chess-wm", "--checkpoint is required")


def test_selftest_passes(run_cli):
    proc = run_cli(["chess-wm", "selftest", "--games", "2", "-j", "1"])
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] and report["failed"] == [] and len(report["checks"]) == 14

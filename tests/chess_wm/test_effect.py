"""The paper's qualitative effect at toy scale: a model trained on book games tracks state
far better in distribution than on uniformly random games (the random split exposes gaps),
and training really moves it (loss far below the untrained model's)."""

from __future__ import annotations

from methodkit.tools.chess_wm.data import PgnOptions, build_from_pgn, load_dataset
from methodkit.tools.chess_wm.evaluation import evaluate_games
from methodkit.tools.chess_wm.generate import SelfplayOptions, selfplay_pgn
from methodkit.tools.chess_wm.models import ModelConfig
from methodkit.tools.chess_wm.training import TrainOptions, load_model, train_model


def test_random_split_exposes_the_gap(tmp_path, book_dir, random_dir):
    opts = TrainOptions(steps=30, batch_size=16, lr=3e-3, warmup=5, log_every=30, val_games=8, seed=0)
    run = train_model([book_dir], tmp_path / "run", ModelConfig(arch="gdn", size="d64", dropout=0.0), opts)
    model, _, _ = load_model(tmp_path / "run")
    held_out = tmp_path / "held-out"
    text = "".join(selfplay_pgn(32, 99, SelfplayOptions(max_plies=30)))
    build_from_pgn([("held-out.pgn", text.encode())], held_out, opts=PgnOptions(max_plies=30))
    book = load_dataset(held_out)
    rand = load_dataset(random_dir).truncate(30)
    in_dist = evaluate_games(model, book).summary
    ood = evaluate_games(model, rand).summary
    assert run.steps == 30
    assert in_dist["loss"] < 1.2  # an untrained model scores about 2.6
    assert ood["loss"] > in_dist["loss"] + 0.1
    assert ood["label_acc"] < in_dist["label_acc"]

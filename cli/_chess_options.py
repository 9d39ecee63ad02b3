"""chess-wm's option groups: the data options build and random share, and each verb's own options."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, OutputPath, option_group

ARCH_CHOICES = ("transformer", "slice", "slice-diag", "gdn", "gdn-pos", "mamba3", "mamba2")
SIZE_CHOICES = ("d64", "d128", "d256", "d384", "d512")
KERNEL_CHOICES = ("auto", "chunk", "recurrent", "numba")
# torch's intra-op threads cost more than they gave on these models' small ops (d64 train: 3.9x slower
# than one thread at the default of all cores, bench/threads/threads.txt); -j N asks for them.
ONE_TORCH_THREAD = "1 thread"

# `make demo`'s chess-wm steps (cli/chess_wm.py re-exports them as its DEMO)
DEMO = [
    DemoStep(
        "chess-wm random --games 300 --max-plies 40 -o rand -q > /dev/null && "
        "chess-wm train rand -o run --arch gdn --size d64 --steps 60 --batch-size 32 --lr 3e-3 --warmup 10 "
        "--val rand -j 1 -q > train.json && chess-wm eval --checkpoint run rand=rand -j 1 -q > /dev/null && "
        "cat train.json",
        "300 random games, 40 plies",
        "val_label_acc",
        "GDN d64 labelwise accuracy",
    ),
    DemoStep("chess-wm selftest --games 4 -q", "built-in checks", "ok", "all checks pass"),
]


def out_dir_option(help_text: str, required: bool = True):
    return click.option(
        "-o",
        "--output",
        "out_dir",
        type=OutputPath(folder=True),
        required=required,
        metavar="DIR",
        help=help_text + " [required]",
    )


def ep_option(f):
    return click.option(
        "--ep",
        type=click.Choice(("potential", "legal")),
        default="potential",
        show_default=True,
        help="En-passant label: after every double push (paper) or only when a capture is legal (FEN).",
    )(f)


# how games become a data folder (build, random)
data_options = option_group(
    click.option(
        "--format",
        "data_format",
        type=click.Choice(("npz", "jsonl")),
        default="npz",
        show_default=True,
        help="NPZ shards, or one JSONL file in the official repository's schema.",
    ),
    ep_option,
    click.option(
        "--min-fullmoves", type=click.IntRange(min=0), default=10, show_default=True, help="Drop shorter games."
    ),
    click.option(
        "--max-plies",
        type=click.IntRange(min=1),
        default=None,
        help="Truncate longer games (counted in the summary) [default: keep whole games].",
    ),
    click.option(
        "--games-per-shard",
        type=click.IntRange(min=1),
        default=4096,
        show_default=True,
        help="Games per NPZ shard.",
    ),
)

build_options = option_group(
    out_dir_option("Data folder to write (shards + manifest.json).", required=False),
    data_options,
    click.option(
        "--strict", is_flag=True, help="Stop at the first bad game (with its byte offset) instead of skipping it."
    ),
)

random_options = option_group(
    click.option("--games", type=click.IntRange(min=1), default=1000, show_default=True, help="Games to keep."),
    click.option(
        "--engine",
        type=click.Choice(("numba", "python")),
        default="numba",
        show_default=True,
        help="Numba move generator, or python-chess (the reference; slower).",
    ),
    click.option(
        "--pgn", "pgn_path", type=OutputPath(), default=None, metavar="PATH", help="Also write the games as PGN here."
    ),
    out_dir_option("Data folder to write."),
    data_options,
)

selfplay_options = option_group(
    click.option("--games", type=click.IntRange(min=1), default=100, show_default=True, help="Games to play."),
    click.option(
        "--book",
        default="/usr/share/games/gnuchess/book.bin",
        show_default=True,
        metavar="PATH",
        help="Polyglot opening book ('' for none).",
    ),
    click.option(
        "--engine",
        type=click.Choice(("numba", "heuristic", "stockfish", "auto")),
        default="heuristic",
        show_default=True,
        help="Player after the book: the heuristic on the Numba engine (fastest), on python-chess, Stockfish, "
        "or Stockfish when installed.",
    ),
    click.option(
        "--stockfish", "stockfish_path", default=None, metavar="PATH", help="Stockfish binary [default: search]."
    ),
    click.option(
        "--max-plies", type=click.IntRange(min=1), default=400, show_default=True, help="Stop games here ('*')."
    ),
    click.option(
        "--nodes", default="200,2000", show_default=True, help="Stockfish node budget range per move: MIN,MAX."
    ),
    click.option(
        "--temperature",
        type=click.FloatRange(min=0),
        default=1.0,
        show_default=True,
        help="Gumbel noise scale (heuristic) or softmax temperature in pawns (Stockfish).",
    ),
    click.option(
        "--data",
        "data_dir",
        type=OutputPath(folder=True),
        default=None,
        metavar="DIR",
        help="--engine numba: write the games as a data folder here (no PGN unless -o names a file).",
    ),
    ep_option,
)

train_options = option_group(
    out_dir_option("Run folder: model.safetensors, model.json, config.json, log.csv."),
    click.option("--arch", type=click.Choice(ARCH_CHOICES), default="gdn", show_default=True, help="Architecture."),
    click.option("--size", type=click.Choice(SIZE_CHOICES), default="d128", show_default=True, help="Model size."),
    click.option("--kernel", type=click.Choice(KERNEL_CHOICES), default="auto", show_default=True, help="Scan kernel."),
    click.option(
        "--val", "val_paths", multiple=True, metavar="DIR", help="Validation data [default: MD5 split of DATA]."
    ),
    click.option(
        "--steps", type=click.IntRange(min=1), default=None, help="Optimizer steps [default: --epochs passes]."
    ),
    click.option(
        "--epochs", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True, help="Passes."
    ),
    click.option("--batch-size", type=click.IntRange(min=1), default=128, show_default=True, help="Games per batch."),
    click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=1e-3, show_default=True, help="Peak LR."),
    click.option("--weight-decay", type=click.FloatRange(min=0), default=0.0, show_default=True, help="AdamW decay."),
    click.option("--beta1", type=click.FloatRange(0, 1), default=0.9, show_default=True, help="AdamW beta1."),
    click.option("--beta2", type=click.FloatRange(0, 1), default=0.999, show_default=True, help="AdamW beta2."),
    click.option("--warmup", type=click.IntRange(min=0), default=0, show_default=True, help="Linear warmup steps."),
    click.option(
        "--min-lr-ratio", type=click.FloatRange(0, 1), default=0.1, show_default=True, help="Cosine floor/LR."
    ),
    click.option("--clip", type=click.FloatRange(min=0), default=1.0, show_default=True, help="Global gradient clip."),
    click.option(
        "--dropout", type=click.FloatRange(0, 1, max_open=True), default=0.1, show_default=True, help="Dropout."
    ),
    click.option("--max-plies", type=click.IntRange(min=1), default=None, help="Truncate games to this many plies."),
    click.option(
        "--log-every", type=click.IntRange(min=1), default=50, show_default=True, help="Log/validate every N."
    ),
    click.option(
        "--val-games", type=click.IntRange(min=1), default=256, show_default=True, help="Games per log-step check."
    ),
    click.option("--checkpoint-every", type=click.IntRange(min=0), default=0, show_default=True, help="0: at the end."),
    click.option("--resume", is_flag=True, help="Continue from the checkpoint in the run folder."),
    click.option(
        "--sweep",
        "sweep_path",
        default=None,
        metavar="GRID.json",
        help="Run a grid (lr, weight_decay, warmup, beta2, min_lr_ratio lists).",
    ),
)

eval_options = option_group(
    click.option(
        "--checkpoint",
        "checkpoints",
        multiple=True,
        required=True,
        metavar="PATH",
        help="Run folder or .safetensors (repeatable).",
    ),
    click.option(
        "--out-dir",
        type=OutputPath(folder=True),
        default=None,
        metavar="DIR",
        help="Write metrics.json and summary.tsv here.",
    ),
    click.option(
        "--per-game",
        "per_game_path",
        type=OutputPath(),
        default=None,
        metavar="PATH",
        help="JSONL: first wrong ply and wrong labels per game.",
    ),
    click.option("--max-plies", type=click.IntRange(min=1), default=None, help="Truncate games to this many plies."),
    click.option("--batch-size", type=click.IntRange(min=1), default=64, show_default=True, help="Games per batch."),
    click.option("--kernel", type=click.Choice(KERNEL_CHOICES), default=None, help="Override the scan kernel."),
)

selftest_options = option_group(
    click.option(
        "--games", type=click.IntRange(min=1), default=20, show_default=True, help="Random games for parity checks."
    ),
    click.option("--full", is_flag=True, help="Full perft depths (start 5, Kiwipete 4, position 3 5): ~1 min."),
)

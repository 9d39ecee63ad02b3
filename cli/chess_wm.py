"""chess-wm: the Chess-World-Model state-tracking benchmark (build data, train, evaluate)."""

from __future__ import annotations

import click

from methodkit.cli._common import (
    DemoStep,
    OutputPath,
    Run,
    common_options,
    input_argument,
    option_group,
    tool_group,
    warn,
)

ARCH_CHOICES = ("transformer", "slice", "slice-diag", "gdn", "gdn-pos", "mamba3", "mamba2")
SIZE_CHOICES = ("d64", "d128", "d256", "d384", "d512")
KERNEL_CHOICES = ("auto", "chunk", "recurrent", "numba")
# torch's intra-op threads cost more than they gave on these models' small ops (d64 train: 3.9x slower
# than one thread at the default of all cores, bench/threads/threads.txt); -j N asks for them.
ONE_TORCH_THREAD = "1 thread"

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


def _require_chess():
    from methodkit.core.errors import require

    require("chess", "chess")


def _out_dir_option(help_text: str, required: bool = True):
    return click.option(
        "-o",
        "--output",
        "out_dir",
        type=OutputPath(folder=True),
        required=required,
        metavar="DIR",
        help=help_text + " [required]",
    )


def _ep_option(f):
    return click.option(
        "--ep",
        type=click.Choice(("potential", "legal")),
        default="potential",
        show_default=True,
        help="En-passant label: after every double push (paper) or only when a capture is legal (FEN).",
    )(f)


# how games become a data folder (build, random)
_data_options = option_group(
    click.option(
        "--format",
        "data_format",
        type=click.Choice(("npz", "jsonl")),
        default="npz",
        show_default=True,
        help="NPZ shards, or one JSONL file in the official repository's schema.",
    ),
    _ep_option,
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


@tool_group(name="chess-wm")
def main():
    """Chess-World-Model: exact chess state tracking from move sequences (Walker & Lyons 2026).

    A model reads a game's moves (one token per move, START first) and must output the
    full state after every prefix: 75 categorical labels (64 squares, side to move,
    castling rights, en-passant square, halfmove clock and fullmove number bytes).
    python-chess is the ground truth. Verbs: build data from PGN, generate random or
    book self-play games, train one of seven architectures (Transformer, SLiCE, Gated
    DeltaNet, Mamba-3 and their ablations), evaluate on named splits, predict states
    for UCI lines, check a data folder's labels against python-chess, and run the
    self-checks.

    The `book` split (selfplay) is a synthetic human-proxy: book openings then a
    heuristic player or Stockfish. It is never real games; real games come from PGN.

    \b
    EXAMPLES
      chess-wm selfplay --games 2000 | chess-wm build - -o book --max-plies 96
      chess-wm selfplay --engine numba --games 40000 --max-plies 96 --data book
      chess-wm random --games 2000 --max-plies 96 -o rand
      chess-wm train book -o run-gdn --arch gdn --size d128 --batch-size 64 --lr 3e-3 --steps 600 --warmup 60
      chess-wm eval --checkpoint run-gdn book=book random=rand --out-dir eval
      echo "e2e4 e7e5 g1f3" | chess-wm predict --checkpoint run-gdn | jq '.states[-1].fen'
      zstdcat lichess_db_standard_rated_2013-01.pgn.zst | chess-wm build - -o real
      chess-wm check real book rand

    \b
    EXIT STATUS
      0  success
      1  failure while running (non-finite training loss: the last good checkpoint is kept)
      2  bad usage or bad input (malformed data with --strict, spec mismatch, missing files)
      3  a self-check failed (selftest) or a label differs from python-chess (check)
      130  interrupted
    """


# ---------------------------------------------------------------- data


@main.command("build")
@click.argument("input", nargs=-1, metavar="INPUT...")
@_out_dir_option("Data folder to write (shards + manifest.json).", required=False)
@_data_options
@click.option(
    "--strict", is_flag=True, help="Stop at the first bad game (with its byte offset) instead of skipping it."
)
@common_options("force", "meta", "quiet", "verbose")
def build(input, out_dir, data_format, ep, min_fullmoves, max_plies, games_per_shard, strict, **_):
    """Build a data set from PGN files (or '-' for stdin; .pgn.zst, .gz, .xz decompressed).

    Each game from the standard start becomes START + move tokens and the 75 labels after
    every ply. Bad games are skipped and counted by reason (parse_error, illegal,
    null_move, variant, setup, empty, short); --strict stops instead. Prints one JSON
    line: kept, skipped by reason, plies, truncated, shards.
    """
    from methodkit.core.errors import UsageError
    from methodkit.tools.chess_wm.data import PgnOptions, build_from_pgn

    _require_chess()
    run = Run.from_context()
    names = list(input) or ["-"]
    inputs = [run.input_bytes(name) for name in names]
    if not out_dir:
        raise UsageError("-o/--output DIR is required (the data folder to write)")
    sources = ((data.name, data.data) for data in inputs)
    opts = PgnOptions(ep=ep, min_fullmoves=min_fullmoves, max_plies=max_plies, strict=strict)
    with run.progress() as cb:
        stats = build_from_pgn(
            sources,
            out_dir,
            opts=opts,
            fmt=data_format,
            games_per_shard=games_per_shard,
            force=run.force,
            progress=cb,
            warn=lambda message: warn("chess-wm", message),
        )
    run.emit_result({"output": out_dir, **stats.to_dict()}, output="-")


@main.command("random")
@click.option("--games", type=click.IntRange(min=1), default=1000, show_default=True, help="Games to keep.")
@click.option(
    "--engine",
    type=click.Choice(("numba", "python")),
    default="numba",
    show_default=True,
    help="Numba move generator, or python-chess (the reference; slower).",
)
@click.option(
    "--pgn", "pgn_path", type=OutputPath(), default=None, metavar="PATH", help="Also write the games as PGN here."
)
@_out_dir_option("Data folder to write.")
@_data_options
@common_options("seed", "force", "meta", "quiet", "verbose")
def random_(games, engine, pgn_path, out_dir, data_format, ep, min_fullmoves, max_plies, games_per_shard, **_):
    """Generate uniformly random legal games (the paper's out-of-distribution split).

    From the start position a uniformly random legal move is played until the game is over
    with draw claims (python-chess is_game_over(claim_draw=True)); games under
    --min-fullmoves are replaced by the next seeds. With --max-plies a game stops there.
    A --max-plies below 2 x --min-fullmoves is refused (exit 2); after 1000 short games
    in a row --min-fullmoves is taken as unreachable (exit 1).
    """
    from methodkit.core import io
    from methodkit.tools.chess_wm.data import write_games
    from methodkit.tools.chess_wm.lengths import check_length_flags, engine_cap, guard_random_memory

    check_length_flags(min_fullmoves, max_plies, engine_cap(engine, max_plies))
    guard_random_memory(games, games_per_shard, max_plies, all_in_memory=bool(pgn_path))
    _require_chess()
    run = Run.from_context()
    run.refuse_existing_output(pgn_path)
    pgn: list[str] = []
    if engine == "numba":
        from methodkit.tools.chess_wm import engine as numba_engine

        produced = numba_engine.random_games(games, run.seed, max_plies=max_plies, min_fullmoves=min_fullmoves, ep=ep)
    else:
        from methodkit.tools.chess_wm.generate import random_games

        produced = random_games(
            games, run.seed, max_plies=max_plies, min_fullmoves=min_fullmoves, ep=ep, pgn_sink=pgn if pgn_path else None
        )
    with run.progress() as cb:
        stats = write_games(
            out_dir,
            produced,
            source=f"random-{engine}",
            ep=ep,
            fmt=data_format,
            force=run.force,
            games_per_shard=games_per_shard,
            max_plies=max_plies,
            extra={"seed": run.seed, "engine": engine},
            on_game=lambda k: cb("random", k, games),
        )
    if pgn_path:
        if engine == "numba":
            from methodkit.tools.chess_wm.data import load_dataset
            from methodkit.tools.chess_wm.generate import pgn_from_tokens

            pgn = pgn_from_tokens(load_dataset(out_dir))
        with io.atomic_write(pgn_path, force=run.force) as handle:
            handle.write("".join(pgn).encode())
    run.emit_result({"output": out_dir, "source": f"random-{engine}", **stats.to_dict()}, output="-")


@main.command("selfplay")
@click.option("--games", type=click.IntRange(min=1), default=100, show_default=True, help="Games to play.")
@click.option(
    "--book",
    default="/usr/share/games/gnuchess/book.bin",
    show_default=True,
    metavar="PATH",
    help="Polyglot opening book ('' for none).",
)
@click.option(
    "--engine",
    type=click.Choice(("numba", "heuristic", "stockfish", "auto")),
    default="heuristic",
    show_default=True,
    help="Player after the book: the heuristic on the Numba engine (fastest), on python-chess, Stockfish, "
    "or Stockfish when installed.",
)
@click.option("--stockfish", "stockfish_path", default=None, metavar="PATH", help="Stockfish binary [default: search].")
@click.option("--max-plies", type=click.IntRange(min=1), default=400, show_default=True, help="Stop games here ('*').")
@click.option("--nodes", default="200,2000", show_default=True, help="Stockfish node budget range per move: MIN,MAX.")
@click.option(
    "--temperature",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    help="Gumbel noise scale (heuristic) or softmax temperature in pawns (Stockfish).",
)
@click.option(
    "--data",
    "data_dir",
    type=OutputPath(folder=True),
    default=None,
    metavar="DIR",
    help="--engine numba: write the games as a data folder here (no PGN unless -o names a file).",
)
@_ep_option
@common_options("output", "seed", "force", "meta", "quiet", "verbose")
def selfplay(games, book, engine, stockfish_path, max_plies, nodes, temperature, data_dir, ep, **_):
    """Play book-opening self-play games and write them as PGN (a synthetic human-proxy split).

    Each game draws its opening from a Polyglot book by entry weight until out of book,
    then continues with the heuristic player (capture value + check bonus + mobility +
    Gumbel noise) or Stockfish (softmax over 4 principal variations). Pipe the PGN into
    'chess-wm build -'. With --engine numba the same book + heuristic player runs in the
    Numba engine (its own random stream, so other games for the same --seed than
    --engine heuristic) and --data writes the games straight into a data folder.
    """
    from methodkit.core import io
    from methodkit.core.errors import UsageError
    from methodkit.tools.chess_wm.generate import SelfplayOptions, parse_nodes, selfplay_pgn

    _require_chess()
    run = Run.from_context()
    if data_dir is not None and engine != "numba":
        raise UsageError("--data needs --engine numba (pipe the PGN of other engines into 'chess-wm build -')")
    low, high = parse_nodes(nodes)
    if engine == "numba":
        _selfplay_numba(run, games, book, max_plies, temperature, data_dir, ep)
        return
    opts = SelfplayOptions(
        book=book or None,
        engine=engine,
        stockfish=stockfish_path,
        max_plies=max_plies,
        nodes=(low, high),
        temperature=temperature,
    )
    with run.progress() as cb:
        text = "".join(selfplay_pgn(games, run.seed, opts, progress=cb))
    run.write_meta()
    with io.atomic_write(run.output, force=run.force) as handle:
        handle.write(text.encode())


def _selfplay_numba(run: Run, games, book, max_plies, temperature, data_dir, ep) -> None:
    from methodkit.core import io
    from methodkit.tools.chess_wm.data import write_games
    from methodkit.tools.chess_wm.generate import numba_book_games, pgn_of_games

    produced = numba_book_games(games, run.seed, book, max_plies, temperature, ep)
    kept: list = []  # the games, when -o asks for their PGN
    if run.output != "-" or data_dir is None:
        produced = _kept(produced, kept)
    with run.progress() as cb:
        if data_dir is None:
            for k, _ in enumerate(produced, 1):
                cb("selfplay", k, games)
        else:
            extra = {"seed": run.seed, "engine": "numba", "book": book or None, "temperature": temperature}
            stats = write_games(
                data_dir,
                produced,
                source="book-numba",
                ep=ep,
                force=run.force,
                extra=extra,
                on_game=lambda k: cb("selfplay", k, games),
            )
    if data_dir is None:
        run.write_meta()
    if data_dir is None or run.output != "-":
        with io.atomic_write(run.output, force=run.force) as handle:
            handle.write("".join(pgn_of_games(kept, "chess-wm selfplay (synthetic human-proxy, numba)")).encode())
    if data_dir is not None:
        run.emit_result({"output": data_dir, "source": "book-numba", **stats.to_dict()}, output="-")


def _kept(stream, kept: list):
    for game in stream:
        kept.append(game)
        yield game


# ---------------------------------------------------------------- models


@main.command("train")
@click.argument("data", nargs=-1, required=True, metavar="DATA...")
@_out_dir_option("Run folder: model.safetensors, model.json, config.json, log.csv.")
@click.option("--arch", type=click.Choice(ARCH_CHOICES), default="gdn", show_default=True, help="Architecture.")
@click.option("--size", type=click.Choice(SIZE_CHOICES), default="d128", show_default=True, help="Model size.")
@click.option("--kernel", type=click.Choice(KERNEL_CHOICES), default="auto", show_default=True, help="Scan kernel.")
@click.option("--val", "val_paths", multiple=True, metavar="DIR", help="Validation data [default: MD5 split of DATA].")
@click.option("--steps", type=click.IntRange(min=1), default=None, help="Optimizer steps [default: --epochs passes].")
@click.option("--epochs", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True, help="Passes.")
@click.option("--batch-size", type=click.IntRange(min=1), default=128, show_default=True, help="Games per batch.")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=1e-3, show_default=True, help="Peak LR.")
@click.option("--weight-decay", type=click.FloatRange(min=0), default=0.0, show_default=True, help="AdamW decay.")
@click.option("--beta1", type=click.FloatRange(0, 1), default=0.9, show_default=True, help="AdamW beta1.")
@click.option("--beta2", type=click.FloatRange(0, 1), default=0.999, show_default=True, help="AdamW beta2.")
@click.option("--warmup", type=click.IntRange(min=0), default=0, show_default=True, help="Linear warmup steps.")
@click.option("--min-lr-ratio", type=click.FloatRange(0, 1), default=0.1, show_default=True, help="Cosine floor/LR.")
@click.option("--clip", type=click.FloatRange(min=0), default=1.0, show_default=True, help="Global gradient clip.")
@click.option("--dropout", type=click.FloatRange(0, 1, max_open=True), default=0.1, show_default=True, help="Dropout.")
@click.option("--max-plies", type=click.IntRange(min=1), default=None, help="Truncate games to this many plies.")
@click.option("--log-every", type=click.IntRange(min=1), default=50, show_default=True, help="Log/validate every N.")
@click.option(
    "--val-games", type=click.IntRange(min=1), default=256, show_default=True, help="Games per log-step check."
)
@click.option("--checkpoint-every", type=click.IntRange(min=0), default=0, show_default=True, help="0: at the end.")
@click.option("--resume", is_flag=True, help="Continue from the checkpoint in the run folder.")
@click.option(
    "--sweep",
    "sweep_path",
    default=None,
    metavar="GRID.json",
    help="Run a grid (lr, weight_decay, warmup, beta2, min_lr_ratio lists).",
)
@common_options("seed", "device", "threads", "force", "meta", "quiet", "verbose", threads_default=ONE_TORCH_THREAD)
def train(data, out_dir, arch, size, kernel, val_paths, dropout, resume, sweep_path, **params):
    """Train a world model on data folders (from build/random) and print the final JSON.

    The loss is the mean cross-entropy over the 75 labels and every non-padded step.
    AdamW, linear warmup then cosine to --min-lr-ratio x LR, global clipping; the data
    order is a function of --seed, so --resume continues the same run. Validation games
    follow the paper's rule (MD5(game_id) mod 10000 < 50) unless --val is given.
    --kernel auto runs SLiCE and Mamba through their compiled Numba scans on the CPU
    (exact hand-written backward) and every recurrent family in chunked form on a GPU.
    """
    from methodkit.tools.chess_wm.data import check_data_paths

    run = Run.from_context()
    check_data_paths([*data, *val_paths])
    from methodkit.tools.chess_wm.models import ModelConfig
    from methodkit.tools.chess_wm.training import TrainOptions, sweep, train_model

    run.threads(default=1)
    device = run.torch_device()
    cfg = ModelConfig(arch=arch, size=size, dropout=dropout, kernel=kernel)
    opts = TrainOptions.from_params(params, seed=run.seed)
    with run.progress() as cb:
        if sweep_path:
            grid = run.read_json(sweep_path)
            if not isinstance(grid, dict):
                from methodkit.core.errors import DataError

                raise DataError(f"{sweep_path}: a sweep grid is a JSON object of lists")
            result = sweep(
                data, out_dir, cfg, opts, grid, val_paths=val_paths, force=run.force, device=device, progress=cb,
                warn=lambda message: warn("chess-wm", message),
            )  # fmt: skip
        else:
            result = train_model(
                data,
                out_dir,
                cfg,
                opts,
                val_paths=val_paths,
                resume=resume,
                force=run.force,
                device=device,
                progress=cb,
                warn=lambda message: warn("chess-wm", message),
            ).to_dict()
    run.emit_result(result, output="-")


@main.command("eval")
@click.argument("datasets", nargs=-1, required=True, metavar="NAME=DIR...")
@click.option(
    "--checkpoint",
    "checkpoints",
    multiple=True,
    required=True,
    metavar="PATH",
    help="Run folder or .safetensors (repeatable).",
)
@click.option(
    "--out-dir",
    type=OutputPath(folder=True),
    default=None,
    metavar="DIR",
    help="Write metrics.json and summary.tsv here.",
)
@click.option(
    "--per-game",
    "per_game_path",
    type=OutputPath(),
    default=None,
    metavar="PATH",
    help="JSONL: first wrong ply and wrong labels per game.",
)
@click.option("--max-plies", type=click.IntRange(min=1), default=None, help="Truncate games to this many plies.")
@click.option("--batch-size", type=click.IntRange(min=1), default=64, show_default=True, help="Games per batch.")
@click.option("--kernel", type=click.Choice(KERNEL_CHOICES), default=None, help="Override the scan kernel.")
@common_options(
    "output", "format", "device", "threads", "force", "meta", "quiet", "verbose", threads_default=ONE_TORCH_THREAD
)
def eval_(datasets, checkpoints, out_dir, per_game_path, max_plies, batch_size, kernel, **_):
    """Evaluate checkpoints on named data sets (NAME=DIR) and print a TSV table.

    Columns: checkpoint, arch, dataset, games, loss, label_acc, exact_state,
    trajectory_exact, group accuracies, median first wrong ply. A non-finite loss is
    recorded as inf and the other data sets still run. metrics.json adds the 20-ply
    prefix bins.
    """
    from methodkit.core import io
    from methodkit.tools.chess_wm.evaluation import evaluate_many, parse_named
    from methodkit.tools.chess_wm.training import checkpoint_path

    for path in checkpoints:
        checkpoint_path(path)
    run = Run.from_context()
    parse_named(datasets)  # a malformed or repeated NAME is refused before any checkpoint is loaded
    if run.output != "-" and not run.fmt:
        io.format_from_path(run.output)  # an unknown extension is refused, not written as CSV
    run.threads(default=1)
    device = run.torch_device()
    with run.progress() as cb:
        frame = evaluate_many(
            checkpoints,
            datasets,
            out_dir=out_dir,
            per_game_path=per_game_path,
            max_plies=max_plies,
            batch_size=batch_size,
            kernel=kernel,
            device=device,
            force=run.force,
            progress=cb,
        )
    run.emit_table(frame, fmt=run.fmt or ("tsv" if run.output == "-" else None))


@main.command("predict")
@input_argument()
@click.option("--checkpoint", default=None, metavar="PATH", help="Run folder or .safetensors (required).")
@common_options("output", "device", "threads", "force", "meta", "quiet", "verbose", threads_default=ONE_TORCH_THREAD)
def predict(input, checkpoint, **_):
    """Predict the state after every prefix of UCI move lines (one game per line) as JSONL.

    Each line gives, per prefix, the predicted FEN (its en-passant field follows the
    model's convention), whether all 75 labels match python-chess, the wrong labels and
    the confidence of every label. An illegal move gives an error record for that line
    (with its ply) and the other lines still run.
    """
    from methodkit.core import io
    from methodkit.core.errors import UsageError
    from methodkit.tools.chess_wm.predict import predict_lines
    from methodkit.tools.chess_wm.training import checkpoint_path, load_model

    if checkpoint:
        checkpoint_path(checkpoint)  # a missing run folder is named before the input is read
    _require_chess()
    run = Run.from_context()
    text = run.input_bytes(input).data.decode("utf-8", errors="replace")
    if not checkpoint:  # after INPUT, so that a missing input file is reported first (the contract)
        raise UsageError("--checkpoint is required (a run folder from 'chess-wm train')")
    run.threads(default=1)
    device = run.torch_device()
    model, _, data_spec = load_model(checkpoint, device=device)
    records = predict_lines(model, text.splitlines(), data_spec.get("ep", "potential"), device=device)
    run.write_meta()
    with io.atomic_write(run.output, force=run.force) as handle:
        for record in records:
            handle.write((io.dumps_json(record) + "\n").encode())


@main.command("check")
@click.argument("data", nargs=-1, required=True, metavar="DATA...")
@common_options("meta", "quiet", "verbose")
def check(data, **_):
    """Replay every game of data folders with python-chess and compare all 75 labels (exit 3 on a mismatch).

    Every stored move must be legal where it is played and the labels after every
    prefix must equal python-chess's square-by-square reading of the board (with the
    folder's --ep convention). Prints one JSON line: games, plies, bad_games,
    first_mismatch, ok; a mismatch then exits 3 naming the first wrong game, ply and label.
    """
    from methodkit.core.errors import CheckFailed
    from methodkit.tools.chess_wm.check import CheckReport, check_games
    from methodkit.tools.chess_wm.data import check_data_paths, load_dataset

    _require_chess()
    run = Run.from_context()
    check_data_paths(list(data))
    total = CheckReport()
    with run.progress() as cb:
        for path in data:
            games = load_dataset(path)
            games.name = str(path)
            report = check_games(games, cb)
            total.games, total.plies = total.games + report.games, total.plies + report.plies
            total.bad_games += report.bad_games
            total.first_mismatch = total.first_mismatch or report.first_mismatch
    run.emit_result(total.to_dict(), output="-")
    if total.bad_games:
        raise CheckFailed(f"{total.first_mismatch} ({total.bad_games} of {total.games} games wrong)")


@main.command("selftest")
@click.option(
    "--games", type=click.IntRange(min=1), default=20, show_default=True, help="Random games for parity checks."
)
@click.option("--full", is_flag=True, help="Full perft depths (start 5, Kiwipete 4, position 3 5): ~1 min.")
@common_options("seed", "threads", "meta", "quiet", "verbose")
def selftest(games, full, **_):
    """Run the self-checks: perft, encoder parity, chunked-vs-step kernel parity (exit 3 on a mismatch).

    perft compares the Numba move generator with published counts (--full) or with
    python-chess at two plies less; encoder parity compares the Numba state encoder with
    a square-by-square python-chess loop over random games (both ep conventions); kernel
    parity runs every recurrent family in chunked and step form on the same input, and the
    SLiCE and Mamba families also in their compiled Numba form.
    """
    from methodkit.core.errors import CheckFailed
    from methodkit.tools.chess_wm.selftest import run_selftest

    _require_chess()
    run = Run.from_context()
    run.threads()
    with run.progress() as cb:
        report = run_selftest(games=games, perft_scale=1 if full else 0, seed=run.seed, progress=cb)
    run.emit_result(report.to_dict(), output="-")
    if not report.ok:
        raise CheckFailed(f"self-check failed: {', '.join(c.name for c in report.checks if not c.ok)}")

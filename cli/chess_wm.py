"""chess-wm: the Chess-World-Model state-tracking benchmark (build data, train, evaluate)."""

from __future__ import annotations

from functools import partial

import click

from methodkit.cli import _chess_options as opt
from methodkit.cli._chess_options import DEMO  # noqa: F401  (cli/_demo.py reads a command's DEMO)
from methodkit.cli._common import Run, common_options, input_argument, tool_group, warn
from methodkit.tools.chess_wm import commands  # light: its verb bodies import the heavy modules

TORCH = ("device", "threads", "force", "meta", "quiet", "verbose")
_warn = partial(warn, "chess-wm")


def _run() -> Run:
    """The invocation's Run, once python-chess (the `chess` extra) is known to be installed."""
    commands.require_chess()
    return Run.from_context()


def _result(run: Run, compute, *args, checked: bool = False, **kwargs) -> None:
    """compute(*args, **kwargs, progress=...) under the progress display, its result (a dict or .to_dict()) the
    JSON line; with `checked`, exit 3 with the result's .failure() when it is not .ok."""
    with run.progress() as cb:
        result = compute(*args, **kwargs, progress=cb)
    run.emit_result(result if isinstance(result, dict) else result.to_dict(), output="-")
    if checked and not result.ok:
        from methodkit.core.errors import CheckFailed

        raise CheckFailed(result.failure())


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


@main.command("build")
@click.argument("input", nargs=-1, metavar="INPUT...")
@opt.build_options
@common_options("force", "meta", "quiet", "verbose")
def build(input, out_dir, strict, **params):
    """Build a data set from PGN files (or '-' for stdin; .pgn.zst, .gz, .xz decompressed).

    Each game from the standard start becomes START + move tokens and the 75 labels after
    every ply. Bad games are skipped and counted by reason (parse_error, illegal,
    null_move, variant, setup, empty, short); --strict stops instead. Prints one JSON
    line: kept, skipped by reason, plies, truncated, shards.
    """
    run = _run()
    inputs = [run.input_bytes(name) for name in list(input) or ["-"]]
    commands.require_out_dir(out_dir)
    sources, data = ((d.name, d.data) for d in inputs), commands.DataOptions.from_params(params)
    _result(run, commands.build_data, sources, out_dir, data, strict=strict, force=run.force, warn=_warn)


@main.command("random")
@opt.random_options
@common_options("seed", "force", "meta", "quiet", "verbose")
def random_(games, engine, pgn_path, out_dir, **params):
    """Generate uniformly random legal games (the paper's out-of-distribution split).

    From the start position a uniformly random legal move is played until the game is over
    with draw claims (python-chess is_game_over(claim_draw=True)); games under
    --min-fullmoves are replaced by the next seeds. With --max-plies a game stops there.
    A --max-plies below 2 x --min-fullmoves is refused (exit 2); after 1000 short games
    in a row --min-fullmoves is taken as unreachable (exit 1).
    """
    data = commands.DataOptions.from_params(params)
    commands.check_random_flags(engine, games, data, pgn=bool(pgn_path))
    run = _run()
    run.refuse_existing_output(pgn_path)
    _result(run, commands.random_data, games, engine, run.seed, out_dir, data, pgn_path=pgn_path, force=run.force)


@main.command("selfplay")
@opt.selfplay_options
@common_options("output", "seed", "force", "meta", "quiet", "verbose")
def selfplay(games, engine, data_dir, **params):
    """Play book-opening self-play games and write them as PGN (a synthetic human-proxy split).

    Each game draws its opening from a Polyglot book by entry weight until out of book,
    then continues with the heuristic player (capture value + check bonus + mobility +
    Gumbel noise) or Stockfish (softmax over 4 principal variations). Pipe the PGN into
    'chess-wm build -'. With --engine numba the same book + heuristic player runs in the
    Numba engine (its own random stream, so other games for the same --seed than
    --engine heuristic) and --data writes the games straight into a data folder.
    """
    from methodkit.core import io

    run = _run()
    settings = commands.SelfplaySettings.from_params(engine, data_dir, params)
    pgn = run.output != "-" or data_dir is None
    with run.progress() as cb:
        result, text = commands.selfplay_games(games, run.seed, settings, want_pgn=pgn, force=run.force, progress=cb)
    if text is not None:
        with io.atomic_write(run.output, force=run.force) as handle:
            handle.write(text.encode())
    if result is None:
        run.write_meta()
    else:
        run.emit_result(result, output="-")


@main.command("train")
@click.argument("data", nargs=-1, required=True, metavar="DATA...")
@opt.train_options
@common_options("seed", *TORCH, threads_default=opt.ONE_TORCH_THREAD)
def train(data, out_dir, arch, size, kernel, val_paths, dropout, resume, sweep_path, **params):
    """Train a world model on data folders (from build/random) and print the final JSON.

    The loss is the mean cross-entropy over the 75 labels and every non-padded step.
    AdamW, linear warmup then cosine to --min-lr-ratio x LR, global clipping; the data
    order is a function of --seed, so --resume continues the same run. Validation games
    follow the paper's rule (MD5(game_id) mod 10000 < 50) unless --val is given.
    --kernel auto runs SLiCE and Mamba through their compiled Numba scans on the CPU
    (exact hand-written backward) and every recurrent family in chunked form on a GPU.
    """
    run = Run.from_context()
    commands.check_data_paths([*data, *val_paths])  # before torch is imported
    run.threads(default=1)
    device = run.torch_device()
    cfg, opts = commands.train_config(arch, size, dropout, kernel, params, seed=run.seed)
    grid = run.read_json(sweep_path) if sweep_path else None
    _result(run, commands.train_or_sweep, data, out_dir, cfg, opts, grid=grid, grid_name=sweep_path,
            val_paths=val_paths, resume=resume, force=run.force, device=device, warn=_warn)  # fmt: skip


@main.command("eval")
@click.argument("datasets", nargs=-1, required=True, metavar="NAME=DIR...")
@opt.eval_options
@common_options("output", "format", *TORCH, threads_default=opt.ONE_TORCH_THREAD)
def eval_(datasets, checkpoints, out_dir, per_game_path, max_plies, batch_size, kernel, **_):
    """Evaluate checkpoints on named data sets (NAME=DIR) and print a TSV table.

    Columns: checkpoint, arch, dataset, games, loss, label_acc, exact_state,
    trajectory_exact, group accuracies, median first wrong ply. A non-finite loss is
    recorded as inf and the other data sets still run. metrics.json adds the 20-ply
    prefix bins.
    """
    from methodkit.tools.chess_wm.evaluation import evaluate_many

    run = Run.from_context()
    commands.check_eval_args(checkpoints, datasets, run.output, run.fmt)
    run.threads(default=1)
    device = run.torch_device()
    with run.progress() as cb:
        frame = evaluate_many(checkpoints, datasets, out_dir=out_dir, per_game_path=per_game_path, max_plies=max_plies,
                              batch_size=batch_size, kernel=kernel, device=device, force=run.force, progress=cb)  # fmt: skip
    run.emit_table(frame, fmt=run.fmt or ("tsv" if run.output == "-" else None))


@main.command("predict")
@input_argument()
@click.option("--checkpoint", default=None, metavar="PATH", help="Run folder or .safetensors (required).")
@common_options("output", *TORCH, threads_default=opt.ONE_TORCH_THREAD)
def predict(input, checkpoint, **_):
    """Predict the state after every prefix of UCI move lines (one game per line) as JSONL.

    Each line gives, per prefix, the predicted FEN (its en-passant field follows the
    model's convention), whether all 75 labels match python-chess, the wrong labels and
    the confidence of every label. An illegal move gives an error record for that line
    (with its ply) and the other lines still run.
    """
    from methodkit.core import io

    commands.check_checkpoint(checkpoint, given_only=True)  # a missing run folder is named before INPUT is read
    run = _run()
    text = run.input_bytes(input).data.decode("utf-8", errors="replace")
    commands.check_checkpoint(checkpoint)  # no --checkpoint: after INPUT, so a missing input is reported first
    run.threads(default=1)
    records = commands.predict_records(checkpoint, text.splitlines(), device=run.torch_device())
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
    from methodkit.tools.chess_wm.check import check_folders

    run = _run()
    commands.check_data_paths(list(data))
    _result(run, check_folders, data, checked=True)


@main.command("selftest")
@opt.selftest_options
@common_options("seed", "threads", "meta", "quiet", "verbose")
def selftest(games, full, **_):
    """Run the self-checks: perft, encoder parity, chunked-vs-step kernel parity (exit 3 on a mismatch).

    perft compares the Numba move generator with published counts (--full) or with
    python-chess at two plies less; encoder parity compares the Numba state encoder with
    a square-by-square python-chess loop over random games (both ep conventions); kernel
    parity runs every recurrent family in chunked and step form on the same input, and the
    SLiCE and Mamba families also in their compiled Numba form.
    """
    from methodkit.tools.chess_wm.selftest import run_selftest

    run = _run()
    run.threads()
    _result(run, run_selftest, games=games, perft_scale=1 if full else 0, seed=run.seed, checked=True)

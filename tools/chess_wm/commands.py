"""chess-wm's verb bodies kept out of the click layer: the data options, random and self-play games into
a data folder (with their PGN), the training configuration, training or a sweep, the refusals of eval
and the prediction records of predict.

Each takes plain values (and a progress callback); the command module reads inputs, claims outputs
and writes the results (the --meta record, the JSON line).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields

from methodkit.core.progress import ProgressCallback, silent


def require_chess() -> None:
    """python-chess is the `chess` extra (exit 2 with the pip command when it is missing)."""
    from methodkit.core.errors import require

    require("chess", "chess")


def require_out_dir(out_dir: str | None) -> None:
    if not out_dir:
        from methodkit.core.errors import UsageError

        raise UsageError("-o/--output DIR is required (the data folder to write)")


def check_data_paths(paths) -> None:
    """Fail early (before heavy imports) on a data folder that is not there or not finished."""
    from methodkit.tools.chess_wm.data import check_data_paths

    check_data_paths(paths)


def check_checkpoint(checkpoint: str | None, given_only: bool = False) -> None:
    """predict's --checkpoint: a run folder or .safetensors that exists; when absent a UsageError, unless
    `given_only` (the check before INPUT is read, so that a missing input is reported first)."""
    if checkpoint:
        from methodkit.tools.chess_wm.training import checkpoint_path

        checkpoint_path(checkpoint)
    elif not given_only:
        from methodkit.core.errors import UsageError

        raise UsageError("--checkpoint is required (a run folder from 'chess-wm train')")


@dataclass(frozen=True)
class DataOptions:
    """How games become a data folder (build and random: cli/_chess_options.data_options)."""

    data_format: str = "npz"
    ep: str = "potential"
    min_fullmoves: int = 10
    max_plies: int | None = None
    games_per_shard: int = 4096

    @classmethod
    def from_params(cls, params: dict) -> DataOptions:
        """The options among a command's parameters (the rest are ignored)."""
        return cls(**{f.name: params[f.name] for f in fields(cls) if f.name in params})


def build_data(
    sources,
    out_dir: str,
    data: DataOptions,
    *,
    strict: bool = False,
    force: bool = False,
    progress: ProgressCallback = silent,
    warn: Callable[[str], None] = lambda message: None,
) -> dict:
    """PGN sources ((name, bytes) pairs) into the data folder `out_dir`; the summary."""
    from methodkit.tools.chess_wm.data import PgnOptions, build_from_pgn

    opts = PgnOptions(ep=data.ep, min_fullmoves=data.min_fullmoves, max_plies=data.max_plies, strict=strict)
    stats = build_from_pgn(
        sources, out_dir, opts=opts, fmt=data.data_format, games_per_shard=data.games_per_shard, force=force,
        progress=progress, warn=warn,
    )  # fmt: skip
    return {"output": out_dir, **stats.to_dict()}


def check_random_flags(engine: str, games: int, data: DataOptions, pgn: bool) -> None:
    """Refuse impossible length flags and a run that would not fit in memory, before any game is drawn."""
    from methodkit.tools.chess_wm.lengths import check_length_flags, engine_cap, guard_random_memory

    check_length_flags(data.min_fullmoves, data.max_plies, engine_cap(engine, data.max_plies))
    guard_random_memory(games, data.games_per_shard, data.max_plies, all_in_memory=pgn)


def random_data(
    games: int,
    engine: str,
    seed: int,
    out_dir: str,
    data: DataOptions,
    *,
    pgn_path: str | None = None,
    force: bool = False,
    progress: ProgressCallback = silent,
) -> dict:
    """Uniformly random legal games into the data folder `out_dir` (and as PGN into `pgn_path`); the summary."""
    from methodkit.core import io
    from methodkit.tools.chess_wm.data import write_games

    pgn: list[str] = []
    lengths = {"max_plies": data.max_plies, "min_fullmoves": data.min_fullmoves, "ep": data.ep}
    if engine == "numba":
        from methodkit.tools.chess_wm import engine as numba_engine

        produced = numba_engine.random_games(games, seed, **lengths)
    else:
        from methodkit.tools.chess_wm.generate import random_games

        produced = random_games(games, seed, **lengths, pgn_sink=pgn if pgn_path else None)
    stats = write_games(
        out_dir,
        produced,
        source=f"random-{engine}",
        ep=data.ep,
        fmt=data.data_format,
        force=force,
        games_per_shard=data.games_per_shard,
        max_plies=data.max_plies,
        extra={"seed": seed, "engine": engine},
        on_game=lambda k: progress("random", k, games),
    )
    if pgn_path:
        if engine == "numba":
            from methodkit.tools.chess_wm.data import load_dataset
            from methodkit.tools.chess_wm.generate import pgn_from_tokens

            pgn = pgn_from_tokens(load_dataset(out_dir))
        with io.atomic_write(pgn_path, force=force) as handle:
            handle.write("".join(pgn).encode())
    return {"output": out_dir, "source": f"random-{engine}", **stats.to_dict()}


@dataclass(frozen=True)
class SelfplaySettings:
    """selfplay's options, checked: the player, its book and noise, and where the games go."""

    engine: str
    data_dir: str | None
    book: str
    stockfish_path: str | None
    max_plies: int
    nodes: tuple[int, int]
    temperature: float
    ep: str

    @classmethod
    def from_params(cls, engine: str, data_dir: str | None, params: dict) -> SelfplaySettings:
        """Refuses --data without --engine numba and a malformed --nodes (UsageError)."""
        from methodkit.core.errors import UsageError
        from methodkit.tools.chess_wm.generate import parse_nodes

        if data_dir is not None and engine != "numba":
            raise UsageError("--data needs --engine numba (pipe the PGN of other engines into 'chess-wm build -')")
        values = {f.name: params[f.name] for f in fields(cls) if f.name in params}
        return cls(**{**values, "engine": engine, "data_dir": data_dir, "nodes": parse_nodes(params["nodes"])})


def selfplay_games(
    games: int,
    seed: int,
    settings: SelfplaySettings,
    *,
    want_pgn: bool,
    force: bool = False,
    progress: ProgressCallback = silent,
) -> tuple[dict | None, str | None]:
    """Book self-play: (the data folder's summary, or None without --data; the PGN, or None unless wanted).

    The python-chess players (heuristic, Stockfish) always give PGN; the Numba engine writes a data folder
    when settings.data_dir is set, and PGN when `want_pgn`."""
    s = settings
    if s.engine != "numba":
        from methodkit.tools.chess_wm.generate import SelfplayOptions, selfplay_pgn

        opts = SelfplayOptions(book=s.book or None, engine=s.engine, stockfish=s.stockfish_path,
                               max_plies=s.max_plies, nodes=s.nodes, temperature=s.temperature)  # fmt: skip
        return None, "".join(selfplay_pgn(games, seed, opts, progress=progress))
    from methodkit.tools.chess_wm.data import write_games
    from methodkit.tools.chess_wm.generate import numba_book_games, pgn_of_games

    produced = numba_book_games(games, seed, s.book, s.max_plies, s.temperature, s.ep)
    kept: list = []  # the games, when the caller asks for their PGN
    if want_pgn:
        produced = _kept(produced, kept)
    result = None
    if s.data_dir is None:
        for k, _ in enumerate(produced, 1):
            progress("selfplay", k, games)
    else:
        extra = {"seed": seed, "engine": "numba", "book": s.book or None, "temperature": s.temperature}
        stats = write_games(
            s.data_dir,
            produced,
            source="book-numba",
            ep=s.ep,
            force=force,
            extra=extra,
            on_game=lambda k: progress("selfplay", k, games),
        )
        result = {"output": s.data_dir, "source": "book-numba", **stats.to_dict()}
    text = "".join(pgn_of_games(kept, "chess-wm selfplay (synthetic human-proxy, numba)")) if want_pgn else None
    return result, text


def _kept(stream, kept: list):
    for game in stream:
        kept.append(game)
        yield game


def train_config(arch: str, size: str, dropout: float, kernel: str, params: dict, seed: int):
    """(ModelConfig, TrainOptions) of train's options (imports torch)."""
    from methodkit.tools.chess_wm.models import ModelConfig
    from methodkit.tools.chess_wm.training import TrainOptions

    return ModelConfig(arch=arch, size=size, dropout=dropout, kernel=kernel), TrainOptions.from_params(
        params, seed=seed
    )


def train_or_sweep(
    data: Iterable[str],
    out_dir: str,
    cfg,
    opts,
    *,
    grid=None,
    grid_name: str = "",
    val_paths=(),
    resume: bool = False,
    force: bool = False,
    device: str = "cpu",
    progress: ProgressCallback = silent,
    warn: Callable[[str], None] = lambda message: None,
) -> dict:
    """One training run, or with `grid` (the parsed --sweep file) a sweep; the result as a dict."""
    from methodkit.tools.chess_wm.training import sweep, train_model

    if grid is not None:
        if not isinstance(grid, dict):
            from methodkit.core.errors import DataError

            raise DataError(f"{grid_name}: a sweep grid is a JSON object of lists")
        return sweep(
            data, out_dir, cfg, opts, grid, val_paths=val_paths, force=force, device=device, progress=progress,
            warn=warn,
        )  # fmt: skip
    return train_model(
        data,
        out_dir,
        cfg,
        opts,
        val_paths=val_paths,
        resume=resume,
        force=force,
        device=device,
        progress=progress,
        warn=warn,
    ).to_dict()


def check_eval_args(checkpoints, datasets, output: str, fmt: str | None) -> None:
    """eval's refusals before any checkpoint is loaded: a missing checkpoint, a malformed or repeated
    NAME=DIR, an output extension with no known format (not silently written as CSV)."""
    from methodkit.core import io
    from methodkit.tools.chess_wm.evaluation import parse_named
    from methodkit.tools.chess_wm.training import checkpoint_path

    for path in checkpoints:
        checkpoint_path(path)
    parse_named(datasets)
    if output != "-" and not fmt:
        io.format_from_path(output)


def predict_records(checkpoint: str, lines: list[str], device: str = "cpu"):
    """The records of predict (one per UCI line, lazily), from the model in `checkpoint`."""
    from methodkit.tools.chess_wm.predict import predict_lines
    from methodkit.tools.chess_wm.training import load_model

    model, _, data_spec = load_model(checkpoint, device=device)
    return predict_lines(model, lines, data_spec.get("ep", "potential"), device=device)

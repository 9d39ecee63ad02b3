"""Data sets of games: PGN -> (move tokens, states), NPZ shards + manifest, JSONL, loading and splits.

A data directory holds `shard-NNNNN.npz` files (or `games.jsonl`) and `manifest.json`,
written last. Shard arrays: `moves` int32 flat (each game START-prefixed), `offsets`
int64 [n_games+1], `states` uint8 [sum(T+1), 75], `plies` int32, `game_id` str,
`source` str, `spec_sha` str. Every file is written to a temporary name and renamed.
"""

from __future__ import annotations

import hashlib
import io as _io
import json
import logging
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from methodkit.core import io
from methodkit.core.errors import DataError, UsageError
from methodkit.core.progress import ProgressCallback, silent
from methodkit.tools.chess_wm import spec
from methodkit.tools.chess_wm.board import check_ep, game_arrays

MANIFEST = "manifest.json"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
JSONL_NAME = "games.jsonl"
VAL_MODULUS, VAL_THRESHOLD = 10000, 50  # paper: MD5(game_id) mod 10000 < 50 -> validation (0.5 %)


@dataclass
class Game:
    tokens: np.ndarray  # int32 [T+1], START first
    states: np.ndarray  # uint8 [T+1, 75]
    game_id: str
    result: str = "*"

    @property
    def plies(self) -> int:
        return len(self.tokens) - 1


def make_game_id(*parts: str) -> str:
    """An opaque, stable id for a game (sha256 of its identifying text)."""
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:20]


def is_validation(game_id: str) -> bool:
    """The paper's split rule: MD5(game_id) mod 10000 < 50."""
    return int(hashlib.md5(game_id.encode()).hexdigest(), 16) % VAL_MODULUS < VAL_THRESHOLD


# ---------------------------------------------------------------- writing


@dataclass
class BuildStats:
    kept: int = 0
    plies: int = 0
    truncated: int = 0
    skipped: Counter = field(default_factory=Counter)
    shards: list = field(default_factory=list)
    decode_replacements: int = 0
    input_truncated_at: int | None = None
    unterminated: int = 0  # kept games whose movetext ends without a result marker (a cut file)
    first_unterminated: str | None = None

    def to_dict(self) -> dict:
        return {
            "kept": self.kept,
            "skipped": dict(sorted(self.skipped.items())),
            "plies": self.plies,
            "truncated": self.truncated,
            "shards": len(self.shards),
            "decode_replacements": self.decode_replacements,
            "input_truncated_at": self.input_truncated_at,
            "unterminated": self.unterminated,
        }


class DatasetWriter:
    """Collects games and writes shards (or one JSONL file) atomically, the manifest last."""

    def __init__(
        self,
        out_dir: str | os.PathLike,
        *,
        source: str,
        ep: str = "potential",
        fmt: str = "npz",
        games_per_shard: int = 4096,
        force: bool = False,
        max_plies: int | None = None,
    ):
        if fmt not in ("npz", "jsonl"):
            raise UsageError(f"--format must be npz or jsonl, not {fmt!r}")
        if games_per_shard <= 0:
            raise UsageError(f"--games-per-shard must be positive, got {games_per_shard}")
        self.dir = Path(out_dir)
        if self.dir.exists() and not self.dir.is_dir():
            raise UsageError(f"{self.dir}: exists and is not a folder; pass a folder to -o")
        if (self.dir / MANIFEST).exists() and not force:
            raise UsageError(f"{self.dir}: already holds a data set; pass --force to overwrite")
        if not self.dir.parent.is_dir():
            raise UsageError(f"{self.dir}: folder {self.dir.parent} does not exist")
        self.source, self.ep, self.fmt = source, check_ep(ep), fmt
        self.spec = spec.spec(ep)
        self.sha = spec.spec_sha(self.spec)
        self.games_per_shard = games_per_shard
        self.max_plies = max_plies
        self.force = force
        self.pending: list[Game] = []
        self.stats = BuildStats()
        self.shard_sha: dict[str, str] = {}
        self.inputs: dict[str, str] = {}
        self._jsonl_tmp = None

    def add(self, game: Game) -> None:
        self.stats.kept += 1
        self.stats.plies += game.plies
        self.pending.append(game)
        if len(self.pending) >= self.games_per_shard:
            self._flush()

    def _flush(self) -> None:
        if not self.pending:
            return
        self.dir.mkdir(exist_ok=True)
        if self.fmt == "npz":
            name = f"shard-{len(self.stats.shards):05d}.npz"
            arrays = pack(self.pending, self.source, self.sha)
            for stale in [name]:
                if (self.dir / stale).exists() and not self.force:
                    raise UsageError(f"{self.dir / stale}: already exists; pass --force to overwrite")
            io.write_arrays(self.dir / name, arrays, force=True, compressed=True)
            self.shard_sha[name] = _sha256_file(self.dir / name)
            self.stats.shards.append(name)
        else:
            if self._jsonl_tmp is None:
                self._jsonl_tmp = self.dir / f".{JSONL_NAME}.part"
                self._jsonl_tmp.write_bytes(b"")
            with open(self._jsonl_tmp, "ab") as handle:
                for game in self.pending:
                    handle.write((json.dumps(to_official_record(game, self.ep), separators=(",", ":")) + "\n").encode())
        self.pending = []

    def close(self, extra: dict | None = None) -> BuildStats:
        """Write the last shard and then the manifest (so a folder with a manifest is complete)."""
        self._flush()
        self.dir.mkdir(exist_ok=True)
        if self.fmt == "jsonl":
            if self._jsonl_tmp is None:
                self._jsonl_tmp = self.dir / f".{JSONL_NAME}.part"
                self._jsonl_tmp.write_bytes(b"")
            os.replace(self._jsonl_tmp, self.dir / JSONL_NAME)
            self.shard_sha[JSONL_NAME] = _sha256_file(self.dir / JSONL_NAME)
            self.stats.shards.append(JSONL_NAME)
        manifest = {
            "format": self.fmt,
            "source": self.source,
            "spec": self.spec,
            "spec_sha": self.sha,
            "counts": {"games": self.stats.kept, "plies": self.stats.plies, "truncated": self.stats.truncated},
            "max_plies": self.max_plies,
            "skipped": dict(sorted(self.stats.skipped.items())),
            "split_rule": "validation iff int(md5(game_id), 16) % 10000 < 50",
            "inputs_sha256": self.inputs,
            "shards_sha256": self.shard_sha,
            **(extra or {}),
        }
        io.write_json(manifest, self.dir / MANIFEST, force=True, indent=1)
        return self.stats

    def abort(self) -> None:
        if self._jsonl_tmp is not None and self._jsonl_tmp.exists():
            self._jsonl_tmp.unlink()


def pack(games: list[Game], source: str, sha: str) -> dict:
    lengths = np.array([len(g.tokens) for g in games], dtype=np.int64)
    offsets = np.zeros(len(games) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return {
        "moves": np.concatenate([g.tokens for g in games]).astype(np.int32),
        "offsets": offsets,
        "states": np.concatenate([g.states for g in games]).astype(np.uint8),
        "plies": (lengths - 1).astype(np.int32),
        "game_id": np.array([g.game_id for g in games]),
        "result": np.array([g.result for g in games]),
        "source": np.array(source),
        "spec_sha": np.array(sha),
    }


def official_spec(ep: str) -> dict:
    """The `spec` object of the official processor's JSONL lines (plus our ep convention)."""
    return {
        "move_vocab": spec.VOCAB,
        "start_move_id": spec.START,
        "pad_move_id": spec.PAD,
        "state_len": spec.N_LABELS,
        "piece_symbols": [".", "P", "N", "B", "R", "Q", "K", "p", "n", "b", "r", "q", "k"],
        "square_order": "a8..h8,a7..h7,...,a1..h1",
        "ep": ep,
    }


def to_official_record(game: Game, ep: str) -> dict:
    """The official repository's JSONL schema, one game per line."""
    return {
        "example_id": game.game_id,
        "moves": game.tokens.tolist(),
        "states": game.states.tolist(),
        "steps": int(len(game.tokens)),
        "plies": int(game.plies),
        "fullmoves": int((game.plies + 1) // 2),
        "result": game.result,
        "spec": official_spec(ep),
    }


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------- PGN


@dataclass(frozen=True)
class PgnOptions:
    ep: str = "potential"
    min_fullmoves: int = 10
    max_plies: int | None = None
    strict: bool = False


def decode_pgn_bytes(data: bytes) -> tuple[str, int]:
    """Text of a PGN file: BOM dropped, CRLF/CR -> LF, invalid UTF-8 replaced (count returned)."""
    try:
        text = data.decode("utf-8")
        replaced = 0
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        replaced = text.count("\ufffd")
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    return text, replaced


def read_zst(raw: bytes) -> tuple[bytes, int | None]:
    """Decompress a .zst stream; a cut stream yields what was complete and the byte offset reached."""
    from methodkit.core.errors import require

    zstandard = require("zstandard", "chess")
    obj = zstandard.ZstdDecompressor().decompressobj()
    out = _io.BytesIO()
    try:
        for start in range(0, len(raw), 1 << 20):
            out.write(obj.decompress(raw[start : start + (1 << 20)]))
    except zstandard.ZstdError:
        return out.getvalue(), out.tell()
    return out.getvalue(), (None if obj.eof else out.tell())


def iter_pgn_games(text: str, name: str, opts: PgnOptions, stats: BuildStats) -> Iterator[Game]:
    """Parse every game in `text`; bad games are skipped with a counted reason (or fatal with --strict)."""
    import chess
    import chess.pgn

    # python-chess logs every illegal SAN on its own logger; we count and report them instead
    logging.getLogger("chess.pgn").setLevel(logging.CRITICAL)
    handle = _io.StringIO(text)
    number = 0
    while True:
        offset = handle.tell()
        try:
            game = chess.pgn.read_game(handle)
        except Exception as exc:  # python-chess can raise inside read_game on malformed input
            number += 1
            _skip(stats, "parse_error", opts, name, number, offset, f"{type(exc).__name__}: {exc}")
            if handle.tell() == offset:  # no progress: give up on the rest of this text
                break
            continue
        if game is None:
            break
        number += 1
        headers = game.headers
        variant = headers.get("Variant", "Standard").strip().lower()
        if variant not in ("standard", "chess", ""):
            _skip(stats, "variant", opts, name, number, offset, f"variant {headers.get('Variant')!r}")
            continue
        if headers.get("SetUp", "0").strip() == "1" or "FEN" in headers:
            _skip(stats, "setup", opts, name, number, offset, "starts from a set-up position")
            continue
        moves = list(game.mainline_moves())
        if any(not move for move in moves):
            _skip(stats, "null_move", opts, name, number, offset, "contains a null move (-- or Z0)")
            continue
        if game.errors:
            _skip(stats, "illegal", opts, name, number, offset, str(game.errors[0]))
            continue
        if not moves:
            _skip(stats, "empty", opts, name, number, offset, "no moves")
            continue
        if len(moves) // 2 < opts.min_fullmoves:
            _skip(stats, "short", opts, name, number, offset, f"{len(moves) // 2} full moves < {opts.min_fullmoves}")
            continue
        if opts.max_plies is not None and len(moves) > opts.max_plies:
            moves = moves[: opts.max_plies]
            stats.truncated += 1
        if not _TERMINATED.search(text, offset, handle.tell()):
            stats.unterminated += 1
            stats.first_unterminated = stats.first_unterminated or f"{name}: game {number} at byte {offset}"
        uci = " ".join(m.uci() for m in moves)
        ident = [headers.get(k, "") for k in ("Event", "Site", "Date", "Round", "White", "Black")]
        tokens, states = game_arrays(moves, opts.ep, chess.Board())
        yield Game(tokens, states, make_game_id("pgn", *ident, uci), headers.get("Result", "*"))


# a game's text ends with its termination marker (trailing comments aside); a file cut mid-movetext does not
_TERMINATED = re.compile(r"(?:1-0|0-1|1/2-1/2|\*)\s*(?:\{[^}]*\}\s*)*\Z")


def _skip(stats: BuildStats, reason: str, opts: PgnOptions, name: str, number: int, offset: int, what: str) -> None:
    if opts.strict:
        raise DataError(f"{name}: game {number} at byte {offset}: {what} (--strict)")
    stats.skipped[reason] += 1


def build_from_pgn(
    sources: Iterable[tuple[str, bytes]],
    out_dir: str | os.PathLike,
    *,
    opts: PgnOptions,
    fmt: str = "npz",
    games_per_shard: int = 4096,
    force: bool = False,
    progress: ProgressCallback = silent,
    warn: Callable[[str], None] = lambda message: None,
) -> BuildStats:
    """PGN inputs (name, raw bytes; `.zst` decompressed here) -> a data directory.

    `warn` gets one line for a cut .zst stream and one for games that end without a result marker."""
    writer = DatasetWriter(
        out_dir,
        source="pgn",
        ep=opts.ep,
        fmt=fmt,
        games_per_shard=games_per_shard,
        force=force,
        max_plies=opts.max_plies,
    )
    try:
        for name, raw in sources:
            writer.inputs[name] = hashlib.sha256(raw).hexdigest()
            if name.endswith(".zst") or raw[:4] == ZSTD_MAGIC:
                raw, cut = read_zst(raw)
                if cut is not None:
                    if opts.strict:
                        raise DataError(f"{name}: truncated zstd stream after {cut} decompressed bytes (--strict)")
                    writer.stats.input_truncated_at = cut
                    warn(
                        f"{name}: truncated zstd stream after {cut} decompressed bytes; the last, partial game is dropped"
                    )
                    # the last game may be cut mid-way: keep only games before its header
                    last = max(raw.rfind(b"\n[Event "), 0)
                    raw = raw[:last]
            text, replaced = decode_pgn_bytes(raw)
            writer.stats.decode_replacements += replaced
            for game in iter_pgn_games(text, name, opts, writer.stats):
                writer.add(game)
                progress("build", writer.stats.kept, None)
        if writer.stats.unterminated:
            warn(
                f"{writer.stats.first_unterminated}: movetext ends without a result (1-0, 0-1, 1/2-1/2, *); "
                f"{writer.stats.unterminated} such game(s) kept as far as they go (a cut file?)"
            )
        if writer.stats.kept == 0:
            reasons = ", ".join(f"{k} {v}" for k, v in sorted(writer.stats.skipped.items())) or "no games found"
            raise DataError(f"{', '.join(writer.inputs) or '<stdin>'}: no usable game ({reasons})")
        return writer.close()
    except BaseException:
        writer.abort()
        raise


# ---------------------------------------------------------------- reading


@dataclass
class GameSet:
    """Games of one or more data directories, in memory (flat arrays + offsets)."""

    moves: np.ndarray
    offsets: np.ndarray
    states: np.ndarray
    game_id: np.ndarray
    spec: dict
    name: str = ""

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def plies(self) -> np.ndarray:
        return np.diff(self.offsets) - 1

    def game(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = self.offsets[i], self.offsets[i + 1]
        return self.moves[a:b], self.states[a:b]

    def subset(self, index: np.ndarray) -> GameSet:
        index = np.asarray(index, dtype=np.int64)
        parts_m, parts_s, offsets = [], [], [0]
        for i in index:
            m, s = self.game(int(i))
            parts_m.append(m)
            parts_s.append(s)
            offsets.append(offsets[-1] + len(m))
        empty_m, empty_s = np.zeros(0, np.int32), np.zeros((0, spec.N_LABELS), np.uint8)
        return GameSet(
            np.concatenate(parts_m) if parts_m else empty_m,
            np.asarray(offsets, dtype=np.int64),
            np.concatenate(parts_s) if parts_s else empty_s,
            self.game_id[index],
            self.spec,
            self.name,
        )

    def truncate(self, max_plies: int | None) -> GameSet:
        if max_plies is None or len(self) == 0 or self.plies.max() <= max_plies:
            return self
        parts_m, parts_s, offsets = [], [], [0]
        for i in range(len(self)):
            m, s = self.game(i)
            parts_m.append(m[: max_plies + 1])
            parts_s.append(s[: max_plies + 1])
            offsets.append(offsets[-1] + len(parts_m[-1]))
        return GameSet(
            np.concatenate(parts_m),
            np.asarray(offsets, np.int64),
            np.concatenate(parts_s),
            self.game_id,
            self.spec,
            self.name,
        )

    def split(self) -> tuple[GameSet, GameSet]:
        """(train, validation) by the paper's MD5 rule."""
        val = np.array([is_validation(str(g)) for g in self.game_id], dtype=bool)
        return self.subset(np.flatnonzero(~val)), self.subset(np.flatnonzero(val))


def load_dataset(path: str | os.PathLike) -> GameSet:
    """Read one data directory (NPZ shards or official-style JSONL), checking spec and digests."""
    folder = Path(path)
    if not folder.exists():
        raise DataError(f"{folder}: no such data folder")
    if folder.is_file():
        if folder.suffix == ".jsonl":
            return _load_jsonl(folder, None)
        raise DataError(f"{folder}: expected a data folder with {MANIFEST} (from 'chess-wm build/random')")
    manifest_path = folder / MANIFEST
    if not manifest_path.exists():
        raise DataError(f"{folder}: no {MANIFEST}; the folder is not a finished chess-wm data set")
    manifest = io.read_json(str(manifest_path))
    want = manifest.get("spec")
    if not isinstance(want, dict) or spec.spec_sha(want) != manifest.get("spec_sha"):
        raise DataError(f"{manifest_path}: spec and spec_sha disagree; the manifest was edited or is corrupt")
    shard_sha = manifest.get("shards_sha256", {})
    if manifest.get("format") == "jsonl":
        return _load_jsonl(folder / JSONL_NAME, want)
    parts = []
    for name in sorted(shard_sha):
        shard = folder / name
        if not shard.exists():
            raise DataError(f"{shard}: listed in the manifest but missing")
        if _sha256_file(shard) != shard_sha[name]:
            raise DataError(f"{shard}: sha256 differs from the manifest; the shard is corrupt or was replaced")
        arrays = io.read_arrays(str(shard))
        if str(arrays["spec_sha"]) != manifest["spec_sha"]:
            raise DataError(f"{shard}: spec {arrays['spec_sha']} differs from the manifest's {manifest['spec_sha']}")
        parts.append(arrays)
    return _concat(parts, want, folder.name)


def _concat(parts: list[dict], want: dict, name: str) -> GameSet:
    if not parts:
        return GameSet(
            np.zeros(0, np.int32),
            np.zeros(1, np.int64),
            np.zeros((0, 75), np.uint8),
            np.zeros(0, dtype="<U20"),
            want,
            name,
        )
    offsets, base = [np.zeros(1, np.int64)], 0
    for p in parts:
        offsets.append(p["offsets"][1:] + base)
        base += int(p["offsets"][-1])
    return GameSet(
        np.concatenate([p["moves"] for p in parts]).astype(np.int32),
        np.concatenate(offsets),
        np.concatenate([p["states"] for p in parts]).astype(np.uint8),
        np.concatenate([p["game_id"] for p in parts]),
        want,
        name,
    )


def _load_jsonl(path: Path, want: dict | None) -> GameSet:
    """The official per-line schema {example_id, moves, states, ...}."""
    games = []
    ep = None
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                tokens = np.asarray(record["moves"], dtype=np.int32)
                states = np.asarray(record["states"], dtype=np.uint8)
            except (ValueError, KeyError, TypeError) as exc:
                raise DataError(f"{path}: line {number}: not a game record ({type(exc).__name__}: {exc})") from None
            if states.shape != (len(tokens), spec.N_LABELS):
                raise DataError(
                    f"{path}: line {number}: states shape {states.shape} does not match {len(tokens)} tokens x 75"
                )
            rec_spec = record.get("spec")
            ep = rec_spec.get("ep", ep) if isinstance(rec_spec, dict) else ep
            games.append(Game(tokens, states, str(record.get("example_id", number)), str(record.get("result", "*"))))
    want = want or spec.spec(ep or "potential")
    return _concat([pack(games, "jsonl", spec.spec_sha(want))] if games else [], want, path.parent.name)


def require_same_spec(a: dict, b: dict, what_a: str, what_b: str) -> None:
    if spec.spec_sha(a) != spec.spec_sha(b):
        raise DataError(
            f"{what_a} has spec {spec.spec_sha(a)} (ep={a.get('ep')}) but {what_b} has {spec.spec_sha(b)} "
            f"(ep={b.get('ep')}); rebuild the data or use a matching checkpoint"
        )


def write_games(
    out_dir,
    games: Iterable[Game],
    *,
    source: str,
    ep: str,
    fmt: str = "npz",
    force: bool = False,
    games_per_shard: int = 4096,
    max_plies: int | None = None,
    extra: dict | None = None,
    on_game: Callable[[int], None] | None = None,
) -> BuildStats:
    """Write generated games (random/selfplay) as a data directory."""
    writer = DatasetWriter(
        out_dir, source=source, ep=ep, fmt=fmt, games_per_shard=games_per_shard, force=force, max_plies=max_plies
    )
    try:
        for game in games:
            writer.add(game)
            if on_game is not None:
                on_game(writer.stats.kept)
        return writer.close(extra)
    except BaseException:
        writer.abort()
        raise


def check_data_paths(paths) -> None:
    """Fail early (before heavy imports) on a data folder that is not there or not finished."""
    for path in paths:
        folder = Path(path)
        if not folder.exists():
            raise DataError(f"{folder}: no such data folder")
        if folder.is_dir() and not (folder / MANIFEST).exists():
            raise DataError(f"{folder}: no {MANIFEST}; the folder is not a finished chess-wm data set")

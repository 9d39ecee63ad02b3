"""The run configuration and the checks that need neither torch nor the data (the executable runs
them before its heavy imports, so a bad flag fails in well under a second)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from methodkit.core.errors import UsageError

ALGOS = ("none", "naive", "ef-step", "aqsgd", "clapping-fu", "clapping-fc")
DEVICES = ("cpu", "cuda", "mirror")


def partition(n_blocks: int, stages: int) -> list[range]:
    """Contiguous, as equal as possible: stage p gets blocks bounds[p]..bounds[p+1]."""
    if not 1 <= stages <= n_blocks:
        raise UsageError(f"--stages {stages}: the model has {n_blocks} blocks; use 1..{n_blocks}")
    bounds = np.linspace(0, n_blocks, stages + 1).round().astype(int)
    return [range(bounds[p], bounds[p + 1]) for p in range(stages)]


@dataclass
class RunConfig:
    task: str = "digits"
    stages: int = 4
    algo: str = "clapping-fu"
    compressor: str = "topk:0.05"
    grad_compressor: str | None = None  # default: same as compressor
    reuse: int = 4
    steps: int = 400
    batch: int = 64
    microbatches: int = 1
    lr: float = 0.05
    beta: float = 0.9
    nesterov: bool = False
    warmup: int = 0  # linear lr warm-up over the first N steps (0: none)
    clip: float = 0.0  # clip the gradient norm over all stages' parameters (0: none)
    device: str = "cpu"  # cpu | cuda | mirror (the cuda code path on the CPU, for tests): see device.py
    seed: int = 0
    aqsgd_warm: str = "full"
    fc_init: str = "zero"
    width: int = 128
    blocks: int = 4
    log_every: int = 20

    def validate(self, n_train: int | None = None) -> None:
        """Fail on bad settings with a one-line UsageError; n_train (when known) bounds --batch."""
        if n_train is not None and self.batch > n_train:
            raise UsageError(f"--batch {self.batch} is larger than the {n_train} training rows")
        if self.algo not in ALGOS:
            raise UsageError(f"--algo must be one of {', '.join(ALGOS)}, got {self.algo!r}")
        if self.reuse < 1:
            raise UsageError(f"--reuse must be at least 1, got {self.reuse}")
        if self.batch < 1:
            raise UsageError(f"--batch must be at least 1, got {self.batch}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise UsageError(f"--lr must be a positive finite number, got {self.lr}")
        if not math.isfinite(self.clip):
            raise UsageError(f"--clip must be a finite number, got {self.clip}")
        if self.steps < 1:
            raise UsageError(f"--steps must be at least 1, got {self.steps}")
        if self.batch % self.microbatches:
            raise UsageError(f"--batch {self.batch} is not divisible by --microbatches {self.microbatches}")
        if self.device not in DEVICES:
            raise UsageError(f"--device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.warmup < 0 or self.clip < 0:
            raise UsageError(f"--warmup and --clip must be >= 0, got {self.warmup} and {self.clip}")
        if not 0 <= self.beta < 1:
            raise UsageError(f"--beta must be in [0, 1), got {self.beta}")
        if self.aqsgd_warm not in ("full", "compressed"):
            raise UsageError(f"--aqsgd-warm is full|compressed, got {self.aqsgd_warm!r}")
        check_fc_init(self.fc_init)

    def to_dict(self) -> dict:
        return asdict(self)


FC_INITS = "zero|prev|mean|damp:G"


def check_fc_init(value: str) -> str:
    """--fc-init: zero, prev, mean or damp:G with 0 < G < 1 (links.LinkEnd._round_start)."""
    if value in ("zero", "prev", "mean"):
        return value
    if value.startswith("damp:"):
        try:
            gamma = float(value[5:])
        except ValueError:
            gamma = float("nan")
        if 0 < gamma < 1:
            return value
    raise UsageError(f"--fc-init must be {FC_INITS} (0 < G < 1), got {value!r}")


def check_settings(cfg: RunConfig, link_width: int) -> None:
    """Everything about cfg that can be checked before the data and the model exist: the settings, the
    stage partition and both compressor specs (built for rows of the links' width)."""
    from methodkit.core import compress

    cfg.validate()
    partition(cfg.blocks, cfg.stages)
    for spec in (cfg.compressor, cfg.grad_compressor or cfg.compressor):
        compress.parse(spec, link_width)


def check_run_folder(folder: str, resume: bool, force: bool) -> None:
    """-o DIR of `run`: a folder to create, or one with a checkpoint to --resume, or --force over it."""
    from pathlib import Path

    from methodkit.core.errors import UsageError

    if folder == "-":
        raise UsageError("pass the run folder with -o DIR")
    path = Path(folder)
    if resume and not (path / "ckpt").is_dir():
        raise UsageError(f"--resume: no checkpoint in {path / 'ckpt'}")
    if not resume and path.exists() and any(path.iterdir()) and not force:
        raise UsageError(f"{folder}: folder is not empty; pass --force to overwrite (or --resume)")


def write_run(folder: str, result, summary: dict) -> None:
    """log.csv, comm.csv and run.json of a finished run into its folder."""
    from pathlib import Path

    import pandas as pd

    from methodkit.core import io

    io.write_table(pd.DataFrame(result.log), Path(folder) / "log.csv", force=True)
    io.write_table(pd.DataFrame(result.comm), Path(folder) / "comm.csv", force=True)
    io.write_json(summary, Path(folder) / "run.json", force=True, indent=1)


def select_columns(frame, target: str | None, columns: str | None, categorical: list[str]):
    """mlp-csv's table cut to --columns (all by default) and --target, every named column checked."""
    from methodkit.core.errors import UsageError
    from methodkit.core.io import require_columns

    if not target:
        raise UsageError("--task mlp-csv needs --target COLUMN")
    require_columns(frame, [target, *categorical], flag="--target/--categorical")
    if columns:
        keep = [c for c in columns.split(",") if c]
        require_columns(frame, keep + [target], flag="--columns")
        source = frame.attrs.get("source")
        frame = frame[keep + [target]]
        frame.attrs["source"] = source
    return frame

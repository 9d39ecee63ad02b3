"""Tasks: data and a model cut into P stages (contiguous blocks).

- digits: scikit-learn's 8x8 digits, an MLP classifier (the CI smoke task).
- mlp-csv: a numeric table (CSV/Parquet) with a target column, an MLP regressor; categorical
  columns one-hot encoded when named; metric RMSE in target units.
- charlm: a character-level transformer LM on a text file (gensim's bundled corpus by default);
  one transformer block per stage, embedding on the first, head on the last.
Every stage's output is 2-D (rows = samples) on the wire: sequence activations are flattened.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from methodkit.core.errors import DataError
from methodkit.tools.clapping.config import partition

TASKS = ("digits", "mlp-csv", "charlm")


@dataclass
class Dataset:
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    kind: str  # classification | regression | lm
    meta: dict = field(default_factory=dict)


class Flatten2(nn.Module):
    """Keep the wire format 2-D: (B, T, d) -> (B, T*d) and back."""

    def __init__(self, seq: int, width: int, inner: nn.Module, first: bool = False, last: bool = False):
        super().__init__()
        self.seq, self.width, self.inner, self.first, self.last = seq, width, inner, first, last

    def forward(self, x):
        if not self.first:
            x = x.reshape(x.shape[0], self.seq, self.width)
        y = self.inner(x)
        return y if self.last else y.reshape(y.shape[0], -1)


def mlp_blocks(d_in: int, d_out: int, width: int, n_blocks: int) -> list[nn.Module]:
    blocks = [nn.Sequential(nn.Linear(d_in, width), nn.ReLU())]
    blocks += [nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(n_blocks - 2)]
    blocks.append(nn.Linear(width, d_out))
    return blocks


def charlm_blocks(vocab: int, seq: int, d: int, n_blocks: int) -> list[nn.Module]:
    from methodkit.core.nn.transformer import Block, RMSNorm, TransformerConfig, rope_tables

    cfg = TransformerConfig(vocab_size=vocab, d_model=d, n_layers=n_blocks, n_heads=4, max_len=seq)
    cos, sin = rope_tables(seq, d // cfg.n_heads, cfg.rope_base)

    class RopeBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block(cfg)
            self.register_buffer("cos", cos, persistent=False)
            self.register_buffer("sin", sin, persistent=False)

        def forward(self, x):
            return self.block(x, self.cos, self.sin)

    out = []
    for i in range(n_blocks):
        parts = [RopeBlock()]
        if i == 0:
            parts.insert(0, nn.Embedding(vocab, d))
        if i == n_blocks - 1:
            parts += [RMSNorm(d), nn.Linear(d, vocab, bias=False)]
        out.append(Flatten2(seq, d, nn.Sequential(*parts), first=i == 0, last=i == n_blocks - 1))
    return out


def build_stages(task: str, data: Dataset, stages: int, *, width: int, n_blocks: int, seed: int) -> list[nn.Module]:
    torch.manual_seed(seed)
    if task == "charlm":
        blocks = charlm_blocks(data.meta["vocab"], data.meta["seq"], width, n_blocks)
    else:
        d_out = data.meta.get("classes", 1)
        blocks = mlp_blocks(data.x_train.shape[1], d_out, width, n_blocks)
    return [nn.Sequential(*[blocks[i] for i in part]) for part in partition(len(blocks), stages)]


def loss_and_metric(kind: str, output: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, dict]:
    if kind == "classification":
        loss = nn.functional.cross_entropy(output, target)
        return loss, {"accuracy": float((output.argmax(1) == target).float().mean())}
    if kind == "regression":
        loss = nn.functional.mse_loss(output.squeeze(-1), target)
        return loss, {}
    logits = output.reshape(-1, output.shape[-1])
    loss = nn.functional.cross_entropy(logits, target.reshape(-1))
    return loss, {}


# ---------------------------------------------------------------- data


def load_digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits (1,797 x 64, labels 0-9), read from the CSV file its wheel ships, as
    load_digits reads it, without importing sklearn (its import costs a CLI run about a second of CPU)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("--task digits needs the package scikit-learn; pip install 'methodkit[clapping]'")
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "digits.csv.gz"
    if not path.exists():  # a future layout: fall back to the public loader
        from sklearn.datasets import load_digits

        return load_digits(return_X_y=True)
    table = np.loadtxt(path, delimiter=",")
    return table[:, :-1], table[:, -1].astype(int)


def digits_data(seed: int) -> Dataset:
    x, y = load_digits_arrays()
    order = np.random.default_rng(seed).permutation(len(x))
    x = (x[order] / 16.0).astype(np.float32)
    y = y[order].astype(np.int64)
    cut = int(0.8 * len(x))
    return Dataset(x[:cut], y[:cut], x[cut:], y[cut:], "classification", {"classes": 10, "name": "digits"})


def table_data(
    frame, target: str, categorical: list[str], seed: int, val_fraction: float = 0.1, dropna: bool = True
) -> Dataset:
    """Standardised numeric features (+ one-hot categoricals) and a standardised target."""
    import pandas as pd

    from methodkit.core.io import numeric_matrix, require_columns

    require_columns(frame, [target, *categorical], flag="--target/--categorical")
    frame = frame.copy()
    features = [c for c in frame.columns if c != target]
    non_numeric = [c for c in features if c not in categorical and not pd.api.types.is_numeric_dtype(frame[c])]
    if non_numeric:
        raise DataError(
            f"{frame.attrs.get('source', 'input')}: non-numeric column(s) {', '.join(non_numeric[:5])}; "
            "pass them with --categorical or drop them"
        )
    # an infinite cell is refused by file, row and column (empty cells are --dropna's business)
    numeric_matrix(frame, [c for c in [*features, target] if c not in categorical], allow_missing=True)
    before = len(frame)
    if dropna:
        frame = frame.dropna(subset=[target, *features])
    elif frame[[target, *features]].isna().any().any():
        raise DataError(f"{frame.attrs.get('source', 'input')}: missing values; pass --dropna")
    dropped = before - len(frame)
    if len(frame) < 20:
        raise DataError(f"{frame.attrs.get('source', 'input')}: {len(frame)} usable rows, too few for training")
    numeric = frame[[c for c in features if c not in categorical]].astype(np.float64)
    dummies = pd.get_dummies(frame[categorical].astype(str), dtype=np.float64) if categorical else None
    x = numeric.to_numpy() if dummies is None else np.hstack([numeric.to_numpy(), dummies.to_numpy()])
    y = frame[target].to_numpy(dtype=np.float64)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    cut = int((1 - val_fraction) * len(x))
    mean, std = x[:cut].mean(0), x[:cut].std(0)
    # a column constant on the training rows (a category seen only in validation) stays centred, not
    # divided by ~0: dividing by std + 1e-8 had turned such a one-hot into 1e8 on validation rows
    std = np.where(std > 1e-6, std, 1.0)
    y_mean, y_std = y[:cut].mean(), y[:cut].std() + 1e-12
    xs = ((x - mean) / std).astype(np.float32)
    ys = ((y - y_mean) / y_std).astype(np.float32)
    return Dataset(xs[:cut], ys[:cut], xs[cut:], ys[cut:], "regression",
                   {"y_std": float(y_std), "dropped_rows": int(dropped), "name": frame.attrs.get("source", "table")})  # fmt: skip


def text_data(text: str, seq: int, seed: int, val_fraction: float = 0.05) -> Dataset:
    if len(text) < 4 * (seq + 1):
        raise DataError(f"text has {len(text)} characters, too few for sequences of {seq}")
    alphabet = sorted(set(text))
    lookup = {ch: i for i, ch in enumerate(alphabet)}
    codes = np.fromiter((lookup[c] for c in text), dtype=np.int64, count=len(text))
    n = (len(codes) - 1) // seq
    x = codes[: n * seq].reshape(n, seq)
    y = codes[1 : n * seq + 1].reshape(n, seq)
    cut = int((1 - val_fraction) * n)  # the tail is validation: no overlap with training text
    return Dataset(x[:cut], y[:cut], x[cut:], y[cut:], "lm", {"vocab": len(alphabet), "seq": seq, "name": "text"})


def gensim_corpus_text(limit: int | None = None) -> str:
    """The shortened enwiki corpus bundled in gensim's wheel (head500.noblanks.cor), read without importing gensim."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        raise DataError(
            "charlm's default corpus needs the package gensim; pip install 'methodkit[clapping]' or pass a text file"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "test" / "test_data" / "head500.noblanks.cor"
    text = path.read_text(encoding="utf-8", errors="replace")
    return text[:limit] if limit else text

"""What cyb-train's verbs do between reading their inputs and writing their outputs.

The command module (cli/cyb_train.py) parses flags, reads files and writes results; the loss, model
and training configurations a run is built from, the checks across flags, the config.json of a run
folder, and the vocab.json and summary of `data` are assembled here.
"""

from __future__ import annotations

from pathlib import Path

from methodkit.core.errors import UsageError


def default_vocab_path(output: str, vocab_path: str | None) -> str | None:
    """`data --vocab`: vocab.json beside -o unless given; none beside -o /dev/null or a FIFO (not in /dev)."""
    from methodkit.core.outputs import writes_beside

    if vocab_path is None and writes_beside(output):
        return str(Path(output).parent / "vocab.json")
    return vocab_path


def vocab_record(tok) -> dict:
    """vocab.json: the tokenizer's spec, the <pause> input id and the DK output index (both one past it)."""
    vocab = {**tok.spec(), "pause_id": tok.vocab_size, "dk_index": tok.vocab_size}
    if tok.kind != "bytes":
        vocab["tokenizer_json"] = tok.to_json()
    return vocab


def data_summary(output: str, corpus, token_file, tok) -> dict:
    return {
        "output": output,
        "corpus": corpus.name,
        "documents": token_file.n_documents,
        "tokens": token_file.n_tokens(),
        "train_tokens": token_file.n_tokens("train"),
        "val_tokens": token_file.n_tokens("val"),
        "train_documents": int((token_file.split == 0).sum()),
        "val_documents": int((token_file.split == 1).sum()),
        "tokenizer": tok.spec(),
    }


def loss_config(o: dict):
    """The LossConfig of the training options `o` (checks K, gamma, beta, budget and the prior)."""
    from methodkit.tools.cyb.config import LossConfig

    return LossConfig(
        loss=o["loss"], max_pauses=o["max_pauses"], gamma=o["gamma"], anytime=o["anytime"], beta=o["beta"],
        prior=o["prior"], tau=o["tau"], budget=o["budget"], tau_lr=o["tau_lr"], pause_mask=o["pause_mask"],
    )  # fmt: skip


def check_shape(o: dict) -> None:
    """Training options that contradict each other: --tokens with --steps, a width the heads do not divide."""
    if o["tokens"] and o["steps"]:
        raise UsageError("give --tokens or --steps, not both")
    if o["d_model"] % o["heads"]:
        raise UsageError(f"--d-model {o['d_model']} is not divisible by --heads {o['heads']}")


def model_config(o: dict, loss_cfg, base_vocab: int):
    from methodkit.tools.cyb.model import PauseModelConfig

    return PauseModelConfig(
        base_vocab=base_vocab, d_model=o["d_model"], n_layers=o["layers"],
        n_heads=o["heads"], ctx=o["ctx"], max_pauses=loss_cfg.max_pauses, pause_mask=loss_cfg.pause_mask,
    )  # fmt: skip


def train_config(o: dict, seed: int):
    """The TrainConfig: --steps, else --tokens / (batch x ctx), else 200; warmup capped at a fifth of the steps."""
    from methodkit.core.train import TrainConfig
    from methodkit.tools.cyb.training import steps_for_tokens

    steps = o["steps"] or (steps_for_tokens(o["tokens"], o["batch_size"], o["ctx"]) if o["tokens"] else 200)
    return TrainConfig(
        steps=steps, batch_size=o["batch_size"], lr=o["lr"], weight_decay=o["weight_decay"], beta1=0.9, beta2=0.95,
        warmup=min(o["warmup"], steps // 5), log_every=min(o["log_every"], steps),
        checkpoint_every=o["checkpoint_every"], seed=seed,
    )  # fmt: skip


def run_record(model_cfg, loss_cfg, tokens_path: str, init, freeze_base: bool, steps: int, seed: int) -> dict:
    """The run folder's config.json."""
    return {"model": model_cfg.to_dict(), "loss": loss_cfg.to_dict(), "tokens": tokens_path, "init": init,
            "freeze_base": freeze_base, "steps": steps, "seed": seed}  # fmt: skip

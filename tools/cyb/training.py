"""pretrain / finetune through core.train: the loss closure, cyb-dp's dual ascent, collapse checks."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from methodkit.core import checkpoint
from methodkit.core.errors import CheckFailed, DataError, UsageError
from methodkit.core.progress import silent
from methodkit.core.train import TrainConfig, train
from methodkit.tools.cyb.config import LossConfig
from methodkit.tools.cyb.data import Windows, split_stream
from methodkit.tools.cyb.evaluation import score, summary
from methodkit.tools.cyb.losses import loss_terms, slot_terms
from methodkit.tools.cyb.model import PauseLM, PauseModelConfig, calibrate_dk_bias, expand_for_pauses

COLLAPSE_MARGIN = 0.05


@dataclass
class RunResult:
    loss: str
    steps: int
    tokens_seen: int
    final_train_loss: float
    val: dict
    dp_tau: float | None
    collapse: str | None
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


def run_spec(model_cfg: PauseModelConfig, token_file) -> dict:
    """What must match for a checkpoint to mean the same thing: architecture and tokenizer."""
    return {"model": model_cfg.to_dict(), "tokenizer": token_file.meta["tokenizer"]}


def collapse_state(mean_pauses: float, k_max: int) -> str | None:
    if mean_pauses < COLLAPSE_MARGIN:
        return "never pauses"
    if mean_pauses > k_max - COLLAPSE_MARGIN:
        return "always pauses K times"
    return None


class PauseObjective:
    """loss_fn for core.train: windows -> grouped logits -> the chosen loss; updates cyb-dp's tau."""

    def __init__(self, model: PauseLM, windows: Windows, cfg: LossConfig, batch_size: int, device: str):
        self.model, self.windows, self.cfg, self.device = model, windows, cfg, device
        self.prior = torch.tensor(cfg.prior_weights(), dtype=torch.float32, device=device)
        self.tokens_seen = 0
        self.running_pauses: float | None = None  # EMA of E_pi[k] on training batches

    def __call__(self, model, idx):
        x, y = self.windows.batch(idx)
        x, y = torch.from_numpy(x).to(self.device), torch.from_numpy(y).to(self.device)
        terms = slot_terms(model.group_logits(x), y, model.cfg.base_vocab)
        tau = float(model.dp_tau) if model.cfg.has_pause else 0.0
        loss = loss_terms(terms, self.cfg, self.prior, tau).mean()
        self.tokens_seen += int(y.numel())
        if model.cfg.has_pause:
            expected = float(terms.expected_pauses().mean().detach())
            self.running_pauses = (
                expected if self.running_pauses is None else 0.9 * self.running_pauses + 0.1 * expected
            )
            if self.cfg.loss == "cyb-dp" and self.cfg.budget is not None:
                # Dual ascent on the budget constraint E_pi[k] <= B.
                model.dp_tau.fill_(max(0.0, tau + self.cfg.tau_lr * (expected - self.cfg.budget)))
        return loss


def build_model(model_cfg: PauseModelConfig, loss_cfg: LossConfig, seed: int, device: str) -> PauseLM:
    torch.manual_seed(seed)
    model = PauseLM(model_cfg).to(device)
    if model_cfg.has_pause:
        model.dp_tau.fill_(loss_cfg.tau)
    return model


def load_model(path, device: str = "cpu") -> tuple[PauseLM, dict]:
    """A cyb-train checkpoint (run folder or model.safetensors) -> (model in eval mode, sidecar)."""
    path = Path(path)
    if path.is_dir():
        path = path / "model.safetensors"
    if path.suffix != ".safetensors":
        raise DataError(f"{path}: not a cyb-train checkpoint (give a run folder or its model.safetensors)")
    tensors, sidecar = checkpoint.load(path, device=device)
    try:
        model_cfg = PauseModelConfig(**sidecar["config"]["model"])
    except (KeyError, TypeError):
        raise DataError(f"{path}: not a cyb-train checkpoint (no model config in its sidecar)") from None
    model = PauseLM(model_cfg).to(device)
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
    model.eval()
    return model, sidecar


def check_tokenizer(sidecar: dict, token_file, where: str) -> None:
    have = sidecar.get("config", {}).get("tokenizer", {}).get("sha256")
    want = token_file.meta["tokenizer"]["sha256"]
    if have != want:
        raise DataError(
            f"{where}: the checkpoint's tokenizer {str(have)[:12]} differs from the token file's {want[:12]}; "
            "use the tokens.npz built with the same vocabulary"
        )


def run_training(
    token_file,
    out_dir,
    loss_cfg: LossConfig,
    model_cfg: PauseModelConfig,
    train_cfg: TrainConfig,
    *,
    init: str | None = None,
    freeze_base: bool = False,
    val_windows: int = 64,
    fail_on_collapse: bool = False,
    resume: bool = False,
    device: str = "cpu",
    warn=lambda message: None,
    progress=silent,
) -> RunResult:
    """Train from scratch (`init` None: pretrain) or from a checkpoint (finetune) into `out_dir`."""
    train_windows = Windows(split_stream(token_file, "train"), model_cfg.ctx)
    if train_windows.count < train_cfg.batch_size:
        raise DataError(
            f"the training split has {len(train_windows.stream)} tokens, {train_windows.count} windows of "
            f"--ctx {model_cfg.ctx}: fewer than one batch of {train_cfg.batch_size}; lower --batch-size or --ctx"
        )
    val = Windows(split_stream(token_file, "val"), model_cfg.ctx, what="validation split")
    model = build_model(model_cfg, loss_cfg, train_cfg.seed, device)
    if init is not None:
        base, sidecar = load_model(init, device)
        check_tokenizer(sidecar, token_file, str(init))
        if base.cfg.d_model != model_cfg.d_model or base.cfg.n_layers != model_cfg.n_layers:
            raise UsageError(f"{init}: architecture differs from the finetune settings")
        state = base.state_dict()
        if model_cfg.has_pause:
            state = expand_for_pauses(state, model_cfg.base_vocab)
            state["dp_tau"] = torch.tensor(loss_cfg.tau)
        model.load_state_dict(state)
        if model_cfg.has_pause and not base.cfg.has_pause:
            x, _ = train_windows.batch(np.arange(min(train_cfg.batch_size, train_windows.count)))
            calibrate_dk_bias(model, torch.from_numpy(x).to(device))
        if freeze_base:
            for name, p in model.named_parameters():
                p.requires_grad = name.startswith(("core.embed", "core.lm_head", "dk_bias"))
    objective = PauseObjective(model, train_windows, loss_cfg, train_cfg.batch_size, device)
    collapse: dict = {"state": None}
    run_dir = Path(out_dir)
    spec = run_spec(model_cfg, token_file)
    config = {
        "model": model_cfg.to_dict(),
        "loss": loss_cfg.to_dict(),
        "train": asdict(train_cfg),
        "tokenizer": token_file.meta["tokenizer"],
        "corpus": token_file.meta.get("corpus"),
        "init": str(init) if init else None,
        "freeze_base": freeze_base,
    }

    def evaluate(m) -> dict:
        metrics = summary(score(m, val, loss_cfg.loss, limit=val_windows), model_cfg.max_pauses)
        row = {
            "tokens_seen": objective.tokens_seen,
            "val_bpc": metrics["bpc_marginal"],
            "mean_pauses": metrics["mean_pauses"],
            "expected_pauses": metrics["expected_pauses"],
            "dp_tau": float(m.dp_tau) if model_cfg.has_pause else 0.0,
        }
        if (
            loss_cfg.loss in ("cyb-ap", "cyb-va", "cyb-dp")
            and objective.tokens_seen >= train_cfg.batch_size * (train_cfg.warmup + 1) * model_cfg.ctx
        ):
            state = collapse_state(metrics["expected_pauses"], model_cfg.max_pauses)
            if state and state != collapse["state"]:
                warn(f"DK collapse: the model {state} (mean E[pauses] {metrics['expected_pauses']:.3f} on val)")
            collapse["state"] = state
            if state and fail_on_collapse:
                tensors = {f"model.{k}": v for k, v in m.state_dict().items()}
                checkpoint.save(
                    run_dir / "model.safetensors",
                    tensors,
                    config=config,
                    spec=spec,
                    fingerprint=token_file.fingerprint,
                    extra={"step": None, "collapsed": state},
                )
                raise CheckFailed(f"--fail-on-collapse: the model {state}; checkpoint kept in {run_dir}")
        return row

    result = train(
        model,
        objective,
        train_windows.count,
        train_cfg,
        run_dir=run_dir,
        spec=spec,
        model_config=config,
        resume=resume,
        evaluate=evaluate,
        progress=progress,
    )
    final = summary(score(model, val, loss_cfg.loss, limit=val_windows), model_cfg.max_pauses)
    return RunResult(
        loss=loss_cfg.loss,
        steps=result.steps,
        tokens_seen=result.steps * train_cfg.batch_size * model_cfg.ctx,
        final_train_loss=result.final_loss,
        val=final,
        dp_tau=float(model.dp_tau) if model_cfg.has_pause else None,
        collapse=collapse["state"],
        seconds=round(result.seconds, 3),
    )


def steps_for_tokens(tokens: int, batch_size: int, ctx: int) -> int:
    return max(1, math.ceil(tokens / (batch_size * ctx)))

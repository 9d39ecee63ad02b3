"""Settings of a CYB run and their checks (all raise UsageError before any training starts)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from methodkit.core.errors import UsageError

LOSSES = ("ce", "ce-pause", "cyb-ap", "cyb-va", "cyb-dp")
PAUSE_LOSSES = LOSSES[1:]
MASKS = ("private", "visible")


def parse_prior(text: str, k: int) -> list[float]:
    """--prior: geometric:P (truncated at slot K, the tail mass on K), uniform, or K+1 weights a,b,c."""
    text = text.strip()
    if text == "uniform":
        return [1.0 / (k + 1)] * (k + 1)
    if text.startswith("geometric:"):
        try:
            p = float(text.split(":", 1)[1])
        except ValueError:
            raise UsageError(f"--prior {text}: geometric:P needs a number P in (0, 1]") from None
        if not 0 < p <= 1:
            raise UsageError(f"--prior {text}: P must be in (0, 1]")
        weights = [p * (1 - p) ** i for i in range(k)]
        return [*weights, (1 - p) ** k]
    try:
        weights = [float(v) for v in text.split(",")]
    except ValueError:
        raise UsageError(f"--prior {text!r}: expected geometric:P, uniform or a comma list of weights") from None
    if len(weights) != k + 1:
        raise UsageError(f"--prior has {len(weights)} weights but --max-pauses {k} needs K+1 = {k + 1}")
    if min(weights) < 0 or sum(weights) <= 0:
        raise UsageError(f"--prior {text}: weights must be >= 0 with a positive sum")
    total = sum(weights)
    return [w / total for w in weights]


@dataclass
class LossConfig:
    loss: str = "cyb-ap"
    max_pauses: int = 2  # K; forced to 0 for `ce`
    gamma: float = 0.9  # cyb-ap: time discount per pause
    anytime: float = 0.5  # all CYB losses: weight of the mean forced-answer CE over the K+1 slots
    beta: float = 0.1  # cyb-va: KL weight
    prior: str = "geometric:0.5"  # cyb-va: prior over stopping slots
    tau: float = 0.01  # cyb-dp: cost per pause (initial multiplier with --budget)
    budget: float | None = None  # cyb-dp: target mean pauses; tau then follows dual ascent
    tau_lr: float = 0.01  # cyb-dp: dual-ascent step size
    pause_mask: str = "private"

    def __post_init__(self):
        if self.loss not in LOSSES:
            raise UsageError(f"--loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        if self.pause_mask not in MASKS:
            raise UsageError(f"--pause-mask must be one of {', '.join(MASKS)}")
        if self.loss == "ce":
            self.max_pauses = 0
        elif self.max_pauses < 1:
            raise UsageError(f"--loss {self.loss} needs --max-pauses K >= 1 (got {self.max_pauses})")
        if not 0 < self.gamma <= 1:
            raise UsageError(f"--gamma must be in (0, 1], got {self.gamma}")
        if self.beta < 0:
            raise UsageError(f"--beta must be >= 0, got {self.beta}")
        if self.tau < 0 or self.tau_lr < 0 or self.anytime < 0:
            raise UsageError("--tau, --tau-lr and --ap-anytime must be >= 0")
        if self.budget is not None and not 0 <= self.budget <= self.max_pauses:
            raise UsageError(f"--budget {self.budget} must be in [0, K={self.max_pauses}]")
        self.prior_weights()  # checks the prior now

    def prior_weights(self) -> list[float]:
        return parse_prior(self.prior, self.max_pauses) if self.max_pauses else [1.0]

    def to_dict(self) -> dict:
        return asdict(self)

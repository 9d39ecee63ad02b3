"""Adaptive decoding with a KV cache: at slot k < K the model emits DK with probability d_k (greedy:
when d_k > threshold) and a <pause> is fed at position t(K+1)+k+1; otherwise it answers from r_k.

Private mask: a pause group's cache entries are dropped when the group ends, so real tokens never
see pauses (exactly the training layout). Visible mask: every group materialises all K pauses and
keeps them, and the policy only chooses which slot's answer to read.
`recompute=True` is the reference: every step runs the grouped forward over the whole prefix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from methodkit.core.nn.transformer import sample_next
from methodkit.tools.cyb.model import PauseLM, step_hidden


@dataclass
class TokenStep:
    """One real position: the pauses taken, DK probability at each visited slot, the answer distribution."""

    n_pauses: int
    dk_probs: list
    answer_logits: torch.Tensor  # (V,) at the stopping slot


class AdaptiveDecoder:
    def __init__(
        self,
        model: PauseLM,
        *,
        policy: str = "greedy",
        threshold: float = 0.5,
        seed: int = 0,
        fixed_pauses: int | None = None,
        recompute: bool = False,
    ):
        self.model, self.policy, self.threshold = model, policy, threshold
        self.fixed = fixed_pauses  # ce-pause: always this many pauses; ce: 0
        self.recompute = recompute
        self.rng = torch.Generator().manual_seed(seed)
        self.k_max = model.cfg.max_pauses
        self.base = model.cfg.base_vocab
        self.cache = None if recompute else model.core.new_cache(1)
        self.tokens: list[int] = []

    def _wants_pause(self, k: int, dk: float) -> bool:
        if k >= self.k_max:
            return False
        if self.fixed is not None:
            return k < self.fixed
        if self.policy == "sample":
            return float(torch.rand((), generator=self.rng)) < dk
        return dk > self.threshold

    def _slot_logits_full(self, k: int) -> torch.Tensor:
        x = torch.tensor([self.tokens])
        return self.model.group_logits(x)[0, -1, k]

    @torch.no_grad()
    def feed(self, token: int, *, decide: bool = True) -> TokenStep | None:
        """Append a real token; with `decide`, run its pause group and return the step."""
        self.tokens.append(int(token))
        t = len(self.tokens) - 1
        g = self.k_max + 1
        if self.recompute:
            if not decide:
                return None
            logits = self._slot_logits_full(0)
        else:
            h = step_hidden(self.model, torch.tensor([[token]]), torch.tensor([t * g]), self.cache)
            if not decide and self.model.cfg.pause_mask == "private":
                return None
            logits = self.model.head(h)[0, -1]
        real_length = None if self.cache is None else self.cache.length
        dks: list[float] = []
        k = 0
        visible = self.model.cfg.pause_mask == "visible"
        pause_logits = []
        if visible and not self.recompute:
            # all K pauses are part of the sequence: materialise them now, choose the slot afterwards
            ids = torch.full((1, self.k_max), self.model.pause_id)
            pos = torch.arange(1, g) + t * g
            pause_logits = list(self.model.head(step_hidden(self.model, ids, pos, self.cache))[0])
            if not decide:
                return None
        while True:
            probs = torch.softmax(logits.float(), -1) if self.model.cfg.has_pause else None
            dk = float(probs[self.base]) if probs is not None and k < self.k_max else 0.0
            dks.append(dk)
            if not self._wants_pause(k, dk):
                break
            k += 1
            if self.recompute:
                logits = self._slot_logits_full(k)
            elif visible:
                logits = pause_logits[k - 1]
            else:
                h = step_hidden(
                    self.model, torch.tensor([[self.model.pause_id]]), torch.tensor([t * g + k]), self.cache
                )
                logits = self.model.head(h)[0, -1]
        if real_length is not None and not visible:
            self.cache.length = real_length  # the private group's pauses are discarded
        return TokenStep(k, dks, logits[: self.base])


def decoder_for(model: PauseLM, loss: str, **kwargs) -> AdaptiveDecoder:
    fixed = 0 if loss == "ce" else model.cfg.max_pauses if loss == "ce-pause" else None
    return AdaptiveDecoder(model, fixed_pauses=fixed, **kwargs)


def pause_report(decoder: AdaptiveDecoder, ids, decode_token) -> list[dict]:
    """Teacher-forced: for every next token of `ids`, the pauses taken before predicting it."""
    rows = []
    for i, token in enumerate(ids[:-1]):
        step = decoder.feed(int(token))
        target = int(ids[i + 1])
        log_r = torch.log_softmax(step.answer_logits.float(), -1)
        rows.append(
            {
                "position": i + 1,
                "token": decode_token(target),
                "context": decode_token(int(token)),
                "n_pauses": step.n_pauses,
                "dk_probs": [round(p, 6) for p in step.dk_probs],
                "p_target": float(math.exp(float(log_r[target]))),
            }
        )
    return rows


def generate(decoder: AdaptiveDecoder, prompt, n_new: int, *, temperature: float = 0.0, top_k=None):
    """Feed `prompt`, then decode n_new tokens; returns (new ids, pauses before each)."""
    for token in prompt[:-1]:
        decoder.feed(int(token), decide=False)
    step = decoder.feed(int(prompt[-1]))
    out, pauses = [], []
    for _ in range(n_new):
        nxt = int(sample_next(step.answer_logits[None], temperature=temperature, top_k=top_k, generator=decoder.rng)[0])
        out.append(nxt)
        pauses.append(step.n_pauses)
        if len(decoder.tokens) + 1 >= decoder.model.cfg.ctx:
            break
        step = decoder.feed(nxt)
    return out, pauses


def _tokenizer_for(sidecar: dict):
    from methodkit.core.text.tokenize import ByteTokenizer

    spec = sidecar["config"]["tokenizer"]
    if spec["kind"] == "bytes":
        return ByteTokenizer()
    from methodkit.core.errors import DataError

    raise DataError("pauses/generate read text through the byte tokenizer; this checkpoint uses a BPE")


def text_pause_report(checkpoint, text: str, *, policy: str = "greedy", threshold: float = 0.5, seed: int = 0):
    """The per-token pause report of `text`, window by window (ctx real tokens each, cache reset between)."""
    from methodkit.core.errors import DataError
    from methodkit.tools.cyb.training import load_model

    model, sidecar = load_model(checkpoint)
    tok = _tokenizer_for(sidecar)
    ids = tok.encode(text)
    if len(ids) < 2:
        raise DataError("the input needs at least two tokens (one to read, one to predict)")
    loss = sidecar["config"]["loss"]["loss"]
    ctx = model.cfg.ctx
    rows = []
    for start in range(0, len(ids) - 1, ctx):
        piece = ids[start : start + ctx + 1]
        decoder = decoder_for(model, loss, policy=policy, threshold=threshold, seed=seed + start)
        for row in pause_report(decoder, piece, lambda i: tok.decode([i])):
            rows.append({**row, "position": row["position"] + start})
    return rows


PAUSE_MARK = "\u27c2"


def generate_text(
    checkpoint,
    prompt: str,
    n_new: int,
    *,
    temperature=0.0,
    top_k=None,
    policy="greedy",
    threshold=0.5,
    seed=0,
    marks=True,
) -> str:
    from methodkit.core.errors import UsageError
    from methodkit.tools.cyb.training import load_model

    model, sidecar = load_model(checkpoint)
    tok = _tokenizer_for(sidecar)
    ids = tok.encode(prompt)
    if len(ids) < 1:
        raise UsageError("--prompt is empty")
    if len(ids) >= model.cfg.ctx:
        raise UsageError(f"--prompt has {len(ids)} tokens; the model's context is {model.cfg.ctx}")
    decoder = decoder_for(model, sidecar["config"]["loss"]["loss"], policy=policy, threshold=threshold, seed=seed)
    new, pauses = generate(decoder, ids, n_new, temperature=temperature, top_k=top_k)
    if not marks:
        return prompt + tok.decode(new)
    # marks go between bytes; decode runs of bytes so multi-byte characters stay whole
    out, run_ids = [prompt], []
    for token, n in zip(new, pauses):
        if n and run_ids:
            out.append(tok.decode(run_ids))
            run_ids = []
        if n:
            out.append(PAUSE_MARK * n)
        run_ids.append(token)
    out.append(tok.decode(run_ids))
    return "".join(out)

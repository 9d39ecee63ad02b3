"""The pause layout over core.nn.transformer's decoder.

Every real token x_t owns a group of K+1 slots: slot 0 is the token itself, slots 1..K are
<pause> inputs. Slot (t, k) sits at position t*(K+1)+k in training and in decoding, so the
rotary geometry is the same whichever pauses a policy takes. Every slot's output predicts x_{t+1}
over V answers plus one DK ("don't know") logit.

Masks:
- private (default): real slot (t,0) sees real slots (<=t, 0); pause (t,k) sees real slots (<=t, 0)
  and its own group's pauses (t, 1..k). Real states never depend on pauses, so training with all K
  pauses present is exactly what decoding that inserts only the requested pauses computes.
- visible (ablation): plain causal attention over the interleaved sequence; decoding then always
  materialises all K pauses.

`grouped_hidden` computes the private mask in two parts per layer (real queries over real keys;
pause queries over real keys <= t joined with their own group's keys, one softmax over both), so
the cost is about T^2 (K+1) instead of (T(K+1))^2. `masked_hidden` is the plain reference: the
full (T(K+1))^2 attention with an explicit mask, used by the tests and the benchmark.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F

from methodkit.core.nn.transformer import DecoderTransformer, TransformerConfig, apply_rope

DK_START = -2.0  # log-odds of DK against answering, at initialisation


@dataclass
class PauseModelConfig:
    base_vocab: int = 256  # V: answer classes; the <pause> input id and the DK output index are both V
    d_model: int = 128
    n_layers: int = 3
    n_heads: int = 4
    ctx: int = 128  # real tokens per window
    max_pauses: int = 2  # K (0: a plain language model with no <pause>/DK rows)
    pause_mask: str = "private"

    @property
    def has_pause(self) -> bool:
        return self.max_pauses > 0

    @property
    def group(self) -> int:
        return self.max_pauses + 1

    def transformer(self) -> TransformerConfig:
        return TransformerConfig(
            vocab_size=self.base_vocab + (1 if self.has_pause else 0),
            d_model=self.d_model,
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            max_len=(self.ctx + 1) * self.group,
        )

    def to_dict(self) -> dict:
        return asdict(self)


class PauseLM(nn.Module):
    """core's DecoderTransformer plus a DK bias; `group_logits(x)` -> (B, T, K+1, V[+1]) logits."""

    def __init__(self, cfg: PauseModelConfig):
        super().__init__()
        self.cfg = cfg
        self.core = DecoderTransformer(cfg.transformer())
        if cfg.has_pause:
            # Starts by answering: d_k = sigmoid(-2) ~ 0.12 while the answer logits are ~0. DK competes with
            # V answers in one softmax, so a bias of -2 alone would start it at e^-2 / V and it would never rise.
            self.dk_bias = nn.Parameter(torch.tensor(DK_START + math.log(cfg.base_vocab)))
            self.register_buffer("dp_tau", torch.tensor(0.0))  # cyb-dp's multiplier, saved with the weights

    @property
    def pause_id(self) -> int:
        return self.cfg.base_vocab

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.core.logits(hidden)
        if self.cfg.has_pause:
            logits = torch.cat([logits[..., :-1], logits[..., -1:] + self.dk_bias], dim=-1)
        return logits

    def group_hidden(self, x: torch.Tensor) -> torch.Tensor:
        if not self.cfg.has_pause:
            return self.core.hidden(x)[:, :, None]
        if self.cfg.pause_mask == "visible":
            return visible_hidden(self, x)
        return grouped_hidden(self, x)

    def group_logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.group_hidden(x))


def _heads(qkv: torch.Tensor, n_heads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(..., 3d) -> q, k, v of shape (..., H, Dh) each."""
    *lead, three_d = qkv.shape
    d = three_d // 3
    q, k, v = qkv.view(*lead, 3, n_heads, d // n_heads).unbind(-3)
    return q, k, v


def _slot_positions(t: int, k_max: int, device) -> torch.Tensor:
    """(T, K+1) positions t*(K+1)+k."""
    g = k_max + 1
    return torch.arange(t, device=device)[:, None] * g + torch.arange(g, device=device)[None, :]


def grouped_hidden(model: PauseLM, x: torch.Tensor) -> torch.Tensor:
    """Hidden states (B, T, K+1, d) of every slot under the private mask, without the (T(K+1))^2 matrix."""
    core, cfg = model.core, model.cfg
    b, t = x.shape
    k_max, n_heads = cfg.max_pauses, cfg.n_heads
    pos = _slot_positions(t, k_max, x.device)
    cos, sin = core.rope_cos[pos], core.rope_sin[pos]  # (T, K+1, Dh/2)
    real = core.embed(x)  # (B, T, d)
    pause = core.embed.weight[model.pause_id].expand(b, t, k_max, -1)  # (B, T, K, d)
    d = real.shape[-1]
    # Additive masks: a pause of group t sees real keys s <= t, and its own group's pauses j <= k.
    bias_real = _additive(torch.ones(t, t, dtype=torch.bool, device=x.device).tril()[:, None, :].expand(t, k_max, t))
    bias_own = _additive(torch.ones(k_max, k_max, dtype=torch.bool, device=x.device).tril())
    bias_real = bias_real.reshape(t * k_max, t)
    for block in core.blocks:
        hr, hp = block.attn_norm(real), block.attn_norm(pause)
        qr, kr, vr = (z.transpose(1, 2) for z in _heads(block.attn.qkv(hr), n_heads))  # (B, H, T, Dh)
        qp, kp, vp = (z.permute(0, 3, 1, 2, 4) for z in _heads(block.attn.qkv(hp), n_heads))  # (B, H, T, K, Dh)
        qr, kr = apply_rope(qr, cos[:, 0], sin[:, 0]), apply_rope(kr, cos[:, 0], sin[:, 0])
        qp, kp = apply_rope(qp, cos[:, 1:], sin[:, 1:]), apply_rope(kp, cos[:, 1:], sin[:, 1:])
        yr = F.scaled_dot_product_attention(qr, kr, vr, is_causal=True)
        scale = qp.shape[-1] ** -0.5
        s_real = (qp.reshape(b, n_heads, t * k_max, -1) @ kr.transpose(-1, -2)) * scale + bias_real
        s_own = (qp @ kp.transpose(-1, -2)) * scale + bias_own  # (B, H, T, K, K)
        # one softmax over both key sets = the log-sum-exp merge of the two partial attentions
        weights = torch.softmax(torch.cat([s_real.view(b, n_heads, t, k_max, t), s_own], dim=-1), dim=-1)
        yp = (weights[..., :t].reshape(b, n_heads, t * k_max, t) @ vr).view(b, n_heads, t, k_max, -1)
        yp = yp + weights[..., t:] @ vp
        real = real + block.attn.out(yr.transpose(1, 2).reshape(b, t, d))
        pause = pause + block.attn.out(yp.permute(0, 2, 3, 1, 4).reshape(b, t, k_max, d))
        real = real + block.ffn(block.ffn_norm(real))
        pause = pause + block.ffn(block.ffn_norm(pause))
    return core.norm(torch.cat([real[:, :, None], pause], dim=2))


def _additive(allowed: torch.Tensor) -> torch.Tensor:
    return torch.zeros(allowed.shape, device=allowed.device).masked_fill(~allowed, float("-inf"))


def interleave(model: PauseLM, x: torch.Tensor) -> torch.Tensor:
    """(B, T) real ids -> (B, T(K+1)) ids with K <pause> ids after every real token."""
    b, t = x.shape
    pauses = torch.full((b, t, model.cfg.max_pauses), model.pause_id, dtype=x.dtype, device=x.device)
    return torch.cat([x[:, :, None], pauses], dim=2).reshape(b, -1)


def private_mask(t: int, k_max: int, device=None) -> torch.Tensor:
    """(T(K+1), T(K+1)) boolean mask of the private layout, True = may attend."""
    g = k_max + 1
    tok = torch.arange(t * g, device=device) // g
    slot = torch.arange(t * g, device=device) % g
    q_tok, k_tok, q_slot, k_slot = tok[:, None], tok[None, :], slot[:, None], slot[None, :]
    real_key = (k_slot == 0) & (k_tok <= q_tok)
    own_pause = (k_slot > 0) & (q_slot > 0) & (k_tok == q_tok) & (k_slot <= q_slot)
    return real_key | own_pause


def masked_hidden(model: PauseLM, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Reference: the interleaved sequence through core's blocks with an explicit (T(K+1))^2 mask
    (the private mask by default). Returns (B, T, K+1, d)."""
    core, cfg = model.core, model.cfg
    b, t = x.shape
    seq = interleave(model, x)
    n = seq.shape[1]
    mask = private_mask(t, cfg.max_pauses, x.device) if mask is None else mask
    h = core.embed(seq)
    cos, sin = core.rope_cos[:n], core.rope_sin[:n]
    for block in core.blocks:
        a = block.attn
        q, k, v = (z.transpose(1, 2) for z in _heads(a.qkv(block.attn_norm(h)), cfg.n_heads))
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        h = h + a.out(y.transpose(1, 2).reshape(b, n, -1))
        h = h + block.ffn(block.ffn_norm(h))
    return core.norm(h).view(b, t, cfg.group, -1)


def visible_hidden(model: PauseLM, x: torch.Tensor) -> torch.Tensor:
    """The ablation: pauses visible to every later slot (core's plain causal forward, interleaved)."""
    b, t = x.shape
    return model.core.hidden(interleave(model, x)).view(b, t, model.cfg.group, -1)


def step_hidden(model: PauseLM, tokens: torch.Tensor, positions: torch.Tensor, cache) -> torch.Tensor:
    """Decoding: run `tokens` (B, n) at explicit `positions` (n,) through core's blocks with a KVCache.

    Each new token sees every cached entry and the new ones up to itself; a caller discards a
    pause group by resetting `cache.length` (private mask)."""
    core = model.core
    h = core.embed(tokens)
    cos, sin = core.rope_cos[positions], core.rope_sin[positions]
    for layer, block in enumerate(core.blocks):
        h = block(h, cos, sin, cache, layer)
    cache.length += tokens.shape[1]
    return core.norm(h)


def expand_for_pauses(state: dict, base_vocab: int) -> dict:
    """A no-pause (`ce`) state dict -> one with the <pause> embedding (the mean token embedding) and a
    zero DK head row; a state that already has them is returned unchanged (rows are never duplicated)."""
    embed = state["core.embed.weight"]
    if embed.shape[0] == base_vocab + 1:
        return dict(state)
    if embed.shape[0] != base_vocab:
        raise ValueError(f"embedding has {embed.shape[0]} rows, expected {base_vocab} or {base_vocab + 1}")
    out = dict(state)
    out["core.embed.weight"] = torch.cat([embed, embed.mean(0, keepdim=True)], dim=0)
    head = state.get("core.lm_head.weight")
    if head is not None:
        out["core.lm_head.weight"] = torch.cat([head, torch.zeros_like(head[:1])], dim=0)
    out.setdefault("dk_bias", torch.tensor(DK_START + math.log(base_vocab)))
    out.setdefault("dp_tau", torch.tensor(0.0))
    return out


@torch.no_grad()
def calibrate_dk_bias(model: PauseLM, x: torch.Tensor) -> float:
    """Finetuning: set the DK bias so that d_0 starts at sigmoid(-2) on average over the batch `x`
    (the answers' log-partition of a trained model is far from log V). Returns the bias."""
    h = model.group_hidden(x)[:, :, 0]
    logits = model.core.logits(h)
    log_z = torch.logsumexp(logits[..., : model.cfg.base_vocab].float(), dim=-1)
    bias = float(DK_START + (log_z - logits[..., model.cfg.base_vocab].float()).mean())
    model.dk_bias.fill_(bias)
    return bias

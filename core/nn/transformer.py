"""A small decoder-only transformer: pre-norm RMSNorm, RoPE, SwiGLU, causal attention.

LLaMA-like layout; fp32; sized for laptops. `TransformerConfig` is JSON-able so it
goes into a checkpoint sidecar as is.

For language modelling: `tie_embeddings` makes the output head the embedding matrix (one tensor,
so the state dict has no shared storage and saves through core.checkpoint); a `KVCache` lets
`hidden`/`forward` take only the new tokens of a sequence, and `generate` decodes with it
(greedy, temperature, top-k; seeded). Without a cache every path is the plain causal forward.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class TransformerConfig:
    vocab_size: int
    d_model: int = 128
    n_layers: int = 2
    n_heads: int = 4
    ffn_mult: float = 8 / 3  # SwiGLU hidden = ffn_mult * d_model, rounded up to a multiple of 8
    max_len: int = 512
    rope_base: float = 10000.0
    norm_eps: float = 1e-6
    tie_embeddings: bool = False
    dropout: float = 0.0  # on the embeddings and on both residual branches (GPT-2's placement)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def ffn_hidden(self) -> int:
        return int(-(-int(self.d_model * self.ffn_mult) // 8) * 8)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(seq_len: int, head_dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables (seq_len, head_dim/2) for rotary position embeddings."""
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (even, odd) of the last dim of x (B, H, T, Dh) by position-dependent angles."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    rotated = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return rotated.flatten(-2)


class Attention(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        if cfg.d_model % cfg.n_heads:
            raise ValueError(f"d_model {cfg.d_model} is not divisible by n_heads {cfg.n_heads}")
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.out = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: KVCache | None = None, layer: int = 0
    ) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if cache is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            past = cache.length
            k, v = cache.append(layer, k, v)
            # New query i (at position past + i) sees every cached key and the new keys up to itself.
            mask = None if t == 1 else torch.ones(t, past + t, dtype=torch.bool, device=x.device).tril(past)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class SwiGLU(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.gate = nn.Linear(cfg.d_model, cfg.ffn_hidden, bias=False)
        self.up = nn.Linear(cfg.d_model, cfg.ffn_hidden, bias=False)
        self.down = nn.Linear(cfg.ffn_hidden, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.ffn = SwiGLU(cfg)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, cos, sin, cache: KVCache | None = None, layer: int = 0):
        x = x + self.drop(self.attn(self.attn_norm(x), cos, sin, cache, layer))
        return x + self.drop(self.ffn(self.ffn_norm(x)))


class KVCache:
    """Keys and values (after RoPE) of every layer for the tokens decoded so far, preallocated to max_len."""

    def __init__(self, cfg: TransformerConfig, batch: int, *, device=None, dtype=torch.float32):
        shape = (cfg.n_layers, batch, cfg.n_heads, cfg.max_len, cfg.d_model // cfg.n_heads)
        self.keys = torch.zeros(shape, device=device, dtype=dtype)
        self.values = torch.zeros(shape, device=device, dtype=dtype)
        self.length = 0  # positions filled; advanced by DecoderTransformer.hidden after all layers

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        end = self.length + k.shape[2]
        self.keys[layer, :, :, self.length : end] = k
        self.values[layer, :, :, self.length : end] = v
        return self.keys[layer, :, :, :end], self.values[layer, :, :, :end]


class DecoderTransformer(nn.Module):
    """Token ids (B, T) -> hidden states (B, T, d) or, with `head=True`, logits over the vocabulary."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.drop = nn.Dropout(cfg.dropout)
        # Tied: the logits are h @ embed.weight.T and there is no separate head tensor.
        self.lm_head = None if cfg.tie_embeddings else nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        cos, sin = rope_tables(cfg.max_len, cfg.d_model // cfg.n_heads, cfg.rope_base)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.apply(_init)

    def hidden(self, tokens: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Hidden states of `tokens`; with a cache, `tokens` continue the cached sequence."""
        start = 0 if cache is None else cache.length
        t = tokens.shape[1]
        if start + t > self.cfg.max_len:
            raise ValueError(f"sequence length {start + t} exceeds max_len {self.cfg.max_len}")
        x = self.drop(self.embed(tokens))
        cos, sin = self.rope_cos[start : start + t], self.rope_sin[start : start + t]
        for layer, block in enumerate(self.blocks):
            x = block(x, cos, sin, cache, layer)
        if cache is not None:
            cache.length += t
        return self.norm(x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, self.embed.weight) if self.lm_head is None else self.lm_head(hidden)

    def forward(self, tokens: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        return self.logits(self.hidden(tokens, cache))

    def new_cache(self, batch: int) -> KVCache:
        weight = self.embed.weight
        return KVCache(self.cfg, batch, device=weight.device, dtype=weight.dtype)

    @torch.no_grad()
    def generate(
        self,
        prompt: torch.Tensor,
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_k: int | None = None,
        seed: int = 0,
        use_cache: bool = True,
    ) -> torch.Tensor:
        """prompt (B, T) -> (B, T + max_new_tokens). temperature 0 is greedy (argmax); same seed, same tokens.

        With `use_cache` each step runs only the newest token through the layers; without, the whole
        sequence is recomputed every step (the reference the cache is tested against). Call .eval() first.
        """
        if prompt.ndim != 2 or prompt.shape[1] < 1:
            raise ValueError(f"prompt must be (batch, length >= 1), got shape {tuple(prompt.shape)}")
        if prompt.shape[1] + max_new_tokens > self.cfg.max_len:
            raise ValueError(
                f"prompt {prompt.shape[1]} + {max_new_tokens} new tokens exceeds max_len {self.cfg.max_len}"
            )
        rng = torch.Generator(device=prompt.device).manual_seed(seed)
        cache = self.new_cache(prompt.shape[0]) if use_cache else None
        tokens, step_input = prompt, prompt
        for _ in range(max_new_tokens):
            logits = self(step_input, cache)[:, -1] if use_cache else self(tokens)[:, -1]
            nxt = sample_next(logits, temperature=temperature, top_k=top_k, generator=rng)
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)
            step_input = nxt[:, None]
        return tokens


def sample_next(
    logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """One token id per row of logits (B, V): argmax when temperature is 0, else a draw from
    softmax(logits / temperature) restricted to the top_k largest logits (all when top_k is None)."""
    if temperature < 0:
        raise ValueError(f"temperature {temperature} is negative")
    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits.float() / temperature
    if top_k is not None:
        if top_k < 1:
            raise ValueError(f"top_k {top_k} is below 1")
        kth = torch.topk(scaled, min(top_k, scaled.shape[-1]), dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


def _init(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=0.02)


def _traced_norm(norm: RMSNorm, x: torch.Tensor, freeze: bool) -> torch.Tensor:
    scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.eps)
    return x * (scale.detach() if freeze else scale) * norm.weight


def _traced_attention(attn: Attention, x: torch.Tensor, cos, sin, freeze: bool) -> torch.Tensor:
    b, t, d = x.shape
    q, k, v = attn.qkv(x).view(b, t, 3, attn.n_heads, d // attn.n_heads).permute(2, 0, 3, 1, 4)
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
    pattern = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
    y = (pattern.detach() if freeze else pattern) @ v
    return attn.out(y.transpose(1, 2).reshape(b, t, d))


def trace(model: DecoderTransformer, tokens: torch.Tensor, *, freeze: bool = False, mlp=None, embed=None):
    """The causal forward of `model` (no cache, no dropout) with every MLP's input and output exposed.

    Returns (hidden after the final norm, taps), taps[l] = {"mlp_in": the MLP input after ffn_norm,
    "mlp_out": what the block added}. `freeze=True` detaches the attention patterns and every RMSNorm
    scale, so the output is linear in the residual stream (the frozen model attribution graphs use).
    `mlp(layer, mlp_in, mlp_out) -> tensor` replaces a block's MLP output (a transcoder's
    reconstruction plus its error, say); `embed` replaces the token embeddings (a leaf to take
    gradients against). With neither and freeze=False it equals `model.hidden(tokens)` in eval mode.
    """
    t = tokens.shape[1]
    if t > model.cfg.max_len:
        raise ValueError(f"sequence length {t} exceeds max_len {model.cfg.max_len}")
    x = model.embed(tokens) if embed is None else embed
    cos, sin = model.rope_cos[:t], model.rope_sin[:t]
    taps = []
    for layer, block in enumerate(model.blocks):
        x = x + _traced_attention(block.attn, _traced_norm(block.attn_norm, x, freeze), cos, sin, freeze)
        mlp_in = _traced_norm(block.ffn_norm, x, freeze)
        out = block.ffn(mlp_in)
        if mlp is not None:
            out = mlp(layer, mlp_in, out)
        taps.append({"mlp_in": mlp_in, "mlp_out": out})
        x = x + out
    return _traced_norm(model.norm, x, freeze), taps

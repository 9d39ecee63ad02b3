"""Jacobian-mode keys (experimental, data-dependent; the official code leaves this NotImplemented).

For a layer l of the authorized model, M = E_x E_patch [J_P(x)^T J_P(x)] (n x n), J_P the Jacobian
of layer l's output with respect to one patch's raw pixels. Estimated without forming J: for
v ~ N(0, I) over layer l's output, g = J^T v (one backward pass) gives E[g_P g_P^T] = E[J_P^T J_P].
The gradient is taken with respect to the unfolded patch tensor (forward_patches), so the same code
serves non-overlapping and overlapping stems. N = eigenvectors with eigenvalue <= tau * lambda_max.
At layer `stem` (pre-activation) M = W'^T W' and the key equals the SVD key; deeper layers add the
directions the ReLUs and later layers ignore on this data, so fidelity is then empirical, not certified.
"""

from __future__ import annotations

import numpy as np
import torch

from methodkit.core.errors import RunFailure, UsageError
from methodkit.tools.nte.key import Key
from methodkit.tools.nte.models import StemNet
from methodkit.tools.nte.stem import unfold

LAYERS = ("stem", "relu", "block1", "block2", "logits")


def layer_output(model: StemNet, patches: torch.Tensor, layer: str) -> torch.Tensor:
    """Output of `layer` for a raw-pixel patch tensor (B, L, n)."""
    weight = model.stem.weight.reshape(model.stem.out_channels, -1)
    features = ((patches - model.cfg.mean) / model.cfg.std) @ weight.T + model.stem.bias
    b = patches.shape[0]
    x = features.transpose(1, 2).reshape(b, -1, model.out_side, model.out_side)
    if layer == "stem":
        return x
    relus = [i for i, m in enumerate(model.body) if isinstance(m, torch.nn.ReLU)]
    stop = {"relu": relus[0] + 1, "block1": relus[1] + 1 if len(relus) > 1 else len(model.body)}
    stop["block2"] = relus[2] + 1 if len(relus) > 2 else len(model.body)
    stop["logits"] = len(model.body)
    for module in list(model.body)[: stop[layer]]:
        x = module(x)
    return x


def sensitivity(model: StemNet, images: np.ndarray, layer: str, probes: int = 4, seed: int = 0) -> np.ndarray:
    """M = E[J_P^T J_P] (n x n) by Hutchinson probes over `images` (B, C, H, W) in [0, 1]."""
    if layer not in LAYERS:
        raise UsageError(f"--layer must be one of {', '.join(LAYERS)}, got {layer!r}")
    if probes < 1:
        raise UsageError(f"--probes must be at least 1, got {probes}")
    stem = model.stem_spec()
    padded = np.pad(
        images.astype(np.float32),
        ((0, 0), (0, 0), (stem.padding,) * 2, (stem.padding,) * 2),
        constant_values=model.cfg.mean,
    )
    patches = torch.from_numpy(np.ascontiguousarray(unfold(padded, stem.kernel, stem.stride), dtype=np.float32))
    generator = torch.Generator().manual_seed(seed)
    model.eval()
    total = np.zeros((stem.n, stem.n))
    count = 0
    for start in range(0, len(patches), 256):
        chunk = patches[start : start + 256].clone().requires_grad_(True)
        out = layer_output(model, chunk, layer)
        for _ in range(probes):
            v = torch.randn(out.shape, generator=generator)
            (g,) = torch.autograd.grad(out, chunk, v, retain_graph=True)
            flat = g.reshape(-1, stem.n).double().numpy()
            total += flat.T @ flat
            count += flat.shape[0]
    return total / count


def jacobian_key(
    model: StemNet,
    images: np.ndarray,
    layer: str = "relu",
    *,
    tau: float = 1e-3,
    min_dim: int = 1,
    strict: bool = False,
    probes: int = 4,
    seed: int = 0,
) -> Key:
    """Key from the low-sensitivity eigenvectors of M (eigenvalue <= tau * lambda_max)."""
    if tau <= 0:
        raise UsageError(f"--tau must be positive, got {tau}")
    stem = model.stem_spec()
    values, vectors = np.linalg.eigh(sensitivity(model, images, layer, probes, seed))
    values, vectors = np.clip(values[::-1], 0, None), vectors[:, ::-1]  # descending
    rank = int(np.sum(values > tau * values[0]))
    warnings, fallback = [], False
    if rank >= stem.n:
        message = (
            f"layer {layer}: no eigenvalue of E[J^T J] below tau={tau:g} x lambda_max; using {min_dim} direction(s)"
        )
        if strict:
            raise RunFailure(message + "; drop --strict or raise --tau")
        warnings.append(message)
        rank, fallback = stem.n - min_dim, True
    return Key(
        basis=vectors[:, rank:].copy(),
        singular_values=np.sqrt(values),
        rank=rank,
        geometry=stem.geometry(),
        stem_sha256=stem.sha256(),
        tau=tau,
        fallback=fallback,
        warnings=warnings,
        mode="jacobian",
        layer=layer,
    )

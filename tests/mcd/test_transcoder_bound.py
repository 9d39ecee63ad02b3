"""Transcoders learn their MLP; the node bound holds; a transcoder of another model is refused."""

import numpy as np
import pytest
import torch

from methodkit.core.errors import DataError
from methodkit.core.train import TrainConfig
from methodkit.tools.mcd import losses, models, pretrain, selftest
from methodkit.tools.mcd import transcoder as T


def test_transcoder_training_explains_the_mlp_and_keeps_unit_decoders():
    torch.manual_seed(0)
    model = models.build(models.model_config("micro", 16, 64), 0).eval()
    for p in model.parameters():
        p.data.mul_(4.0)
    stream = np.random.default_rng(0).integers(0, 64, 20000).astype(np.uint8)
    win, val = models.Windows.cut(stream, 16, 512, 0), models.Windows.cut(stream, 16, 64, 1)
    tcs = T.for_model(model, k=8)
    before = [T.metrics(tc, x, y)["fvu"] for tc, (x, y) in zip(tcs.layers, T.mlp_io(model, val.batch(np.arange(64))[0]))]
    out = pretrain.train_transcoders(model, tcs, win, val, TrainConfig(steps=200, batch_size=16, lr=3e-3, log_every=200))
    after = [r["fvu"] for r in out.rows]
    assert all(a < 0.5 * b for a, b in zip(after, before)), (before, after)
    assert all(r["l0"] <= 8 for r in out.rows)
    assert torch.allclose(tcs[0].w_dec.norm(dim=1), torch.ones(tcs[0].cfg.n_features), atol=1e-5)


def test_bound_holds_on_random_models():
    rows = selftest.bound_rows(0)
    assert rows and all(r["discrepancy"] <= r["bound"] + 1e-5 for r in rows)


def test_kantorovich_rubinstein_step_is_tight_enough_to_need_every_term():
    """The core of the bound on reconstructions: ||sum a u + b_T - W_a (sum b v + b_S)|| <= m_T W1 + R |m_T - m_S|
    + ||b_T - W_a b_S||; it holds on random measures, and dropping the W1 term breaks it."""
    from methodkit.tools.mcd import transport

    rng = np.random.default_rng(0)
    dropped_fails = 0
    for _ in range(50):
        k, d_t, d_s = 6, 5, 3
        a, b = rng.random(k), rng.random(k)
        u = rng.standard_normal((k, d_t))
        w_a = rng.standard_normal((d_t, d_s))
        v = rng.standard_normal((k, d_s)) @ w_a.T
        b_t, b_s = rng.standard_normal(d_t) * 0.1, rng.standard_normal(d_s) * 0.1
        lhs = np.linalg.norm(a @ u + b_t - (b @ v + w_a @ b_s))
        m_t, m_s = a.sum(), b.sum()
        radius = np.linalg.norm(v, axis=1).max()
        rest = radius * abs(m_t - m_s) + np.linalg.norm(b_t - w_a @ b_s)
        assert lhs <= m_t * transport.exact_w1(a, u, b, v) + rest + 1e-9
        dropped_fails += lhs > rest
    assert dropped_fails > 0


def test_layer_map_by_relative_depth_and_explicit():
    assert losses.layer_map(2, 4) == [1, 3]
    assert losses.layer_map(1, 4) == [2]
    assert losses.layer_map(2, 2) == [0, 1]
    assert losses.layer_map(3, 4, "0,1,3") == [0, 1, 3]
    from methodkit.core.errors import UsageError

    with pytest.raises(UsageError, match="explicit --layer-map"):
        losses.layer_map(4, 2)
    with pytest.raises(UsageError, match="needs 2 teacher layers"):
        losses.layer_map(2, 4, "0,9")


def test_transcoders_of_another_model_are_refused(tmp_path):
    a = models.build(models.model_config("micro", 16, 64), 0)
    b = models.build(models.model_config("micro", 16, 64), 1)
    tcs = T.for_model(a, k=4)
    for layer in range(2):
        T.save(tmp_path / f"tc_L{layer}.safetensors", tcs, layer, model_sha=models.weights_sha(a), data_sha="x",
               row={"fvu": 0.5})  # fmt: skip
    T.load_set(tmp_path, a, models.weights_sha(a))
    with pytest.raises(DataError, match="trained on model"):
        T.load_set(tmp_path, b, models.weights_sha(b))
    with pytest.raises(DataError, match="above --max-fvu 0.2"):
        T.load_set(tmp_path, a, models.weights_sha(a), max_fvu=0.2)

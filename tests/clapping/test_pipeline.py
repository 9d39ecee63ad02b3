"""clapping: link invariants, the simulator against gloo, and the paper's qualitative effect on digits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from methodkit.tools.clapping import tasks
from methodkit.tools.clapping.links import LinkEnd
from methodkit.tools.clapping.pipeline import RunConfig, simulate

torch.set_num_threads(1)


def _pair(algo, spec="topk:0.1", **kw):
    return LinkEnd(algo, spec, 50, index=0, seed=1, **kw), LinkEnd(algo, spec, 50, index=0, seed=1, **kw)


def test_fu_first_step_exact_then_both_ends_stay_identical():
    sender, receiver = _pair("clapping-fu")
    rng = np.random.default_rng(0)
    ids = np.arange(4)
    a = rng.standard_normal((4, 50)).astype(np.float32)
    got = receiver.receive_activation(sender.send_activation(a, 0, ids), 0, ids)
    np.testing.assert_array_equal(got, a)
    for s in range(1, 6):
        a = a + 0.01 * rng.standard_normal(a.shape).astype(np.float32)
        got = receiver.receive_activation(sender.send_activation(a, s, ids), s, ids)
        np.testing.assert_array_equal(sender.m, receiver.m)
        assert np.abs(got - a).max() < 0.2


def test_fc_converges_to_a_fixed_activation():
    sender, receiver = _pair("clapping-fc", "topk:0.2")
    a = np.random.default_rng(3).standard_normal((4, 50)).astype(np.float32)
    ids = np.arange(4)
    for s in range(12):
        got = receiver.receive_activation(sender.send_activation(a, s, ids), s, ids)
    np.testing.assert_allclose(got, a, atol=1e-6)


def test_aqsgd_keeps_one_buffer_per_sample():
    sender, receiver = _pair("aqsgd", n_samples=100)
    assert sender.buffer_bytes() == 100 * 50 * 4
    a = np.ones((3, 50), np.float32)
    ids = np.array([5, 6, 7])
    np.testing.assert_array_equal(receiver.receive_activation(sender.send_activation(a, 0, ids), 0, ids), a)
    assert receiver.seen[ids].all() and not receiver.seen[:5].any()


def _cfg(algo, reuse, steps=400, stages=4, **extra):
    return RunConfig(
        task="digits", stages=stages, algo=algo, compressor="topk:0.05", reuse=reuse, steps=steps, lr=0.3, batch=64,
        **extra,
    )  # fmt: skip


@pytest.fixture(scope="module")
def digits():
    return tasks.digits_data(0)


def test_clapping_beats_naive_compression_at_equal_bytes(digits):
    none = simulate(_cfg("none", 4), digits)
    naive = simulate(_cfg("naive", 1), digits)
    fu = simulate(_cfg("clapping-fu", 4), digits)
    fc = simulate(_cfg("clapping-fc", 4), digits)
    # same compressor, same steps: tracking the references beats sending C(a), C(g) as they are
    assert fu.val_loss < 0.8 * naive.val_loss
    assert fc.val_loss < naive.val_loss
    assert fu.val_metric["accuracy"] > naive.val_metric["accuracy"] + 0.05
    assert none.val_loss < fu.val_loss  # exact communication stays the upper bound
    # traffic: FC sends only compressed deltas; FU one exact message per round of R = 4
    assert fc.total_bytes <= 0.1 * none.total_bytes
    assert fu.total_bytes <= (1 / 4 + 0.1) * none.total_bytes
    # memory: batch-sized references on both ends of every link, independent of N
    assert fu.buffer_bytes == 2 * fu.clapping_bound_bytes
    assert fu.aqsgd_equivalent_bytes == len(digits.x_train) * 3 * 128 * 4


def test_same_seed_same_result_and_microbatches(digits):
    a = simulate(_cfg("clapping-fc", 4, steps=30, stages=3), digits)
    b = simulate(_cfg("clapping-fc", 4, steps=30, stages=3), digits)
    assert a.train_loss == b.train_loss and a.comm == b.comm
    cfg = _cfg("clapping-fc", 4, steps=30, stages=3)
    cfg.microbatches = 2
    split = simulate(cfg, digits)
    assert split.total_bytes == a.total_bytes  # per-row compressors: same bytes with 2 microbatches
    assert np.isfinite(split.val_loss)


def test_gloo_processes_equal_the_simulator(tmp_path, digits):
    from methodkit.tools.clapping.distributed import run_distributed

    # with warm-up and global-norm clipping, so the ranks' all_gather of gradient norms is exercised too
    sim = simulate(_cfg("clapping-fu", 4, steps=12, stages=2, warmup=5, clip=0.05), digits)
    real = run_distributed(
        _cfg("clapping-fu", 4, steps=12, stages=2, warmup=5, clip=0.05), digits, tmp_path, timeout_s=120
    )
    assert real.train_loss == sim.train_loss
    assert real.val_loss == sim.val_loss
    assert real.total_bytes == sim.total_bytes
    assert (tmp_path / "stage0.safetensors").exists() and (tmp_path / "stage1.safetensors").exists()


def test_table_column_constant_on_training_rows_stays_finite_and_small():
    import pandas as pd

    from methodkit.tools.clapping import tasks

    n, cut = 200, 180  # table_data shuffles with the seed and keeps the first 90% for training
    order = np.random.default_rng(0).permutation(n)
    city = np.array(["a"] * n, dtype=object)
    city[order[cut : cut + 3]] = "b"  # a category that only validation rows have
    frame = pd.DataFrame({"x": np.arange(n, dtype=float), "city": city, "y": np.arange(n) * 0.5})
    data = tasks.table_data(frame, "y", ["city"], seed=0, val_fraction=0.1)
    assert data.x_val.shape[1] == 3  # x, city_a, city_b
    assert np.abs(data.x_val).max() < 10  # the one-hot seen only in validation is not divided by ~0
    assert np.abs(data.x_train[:, 1:]).max() == 0  # constant on training rows: centred to 0


def test_digits_read_from_the_wheel_file_equal_sklearns_loader():
    from sklearn.datasets import load_digits

    x, y = tasks.load_digits_arrays()
    want_x, want_y = load_digits(return_X_y=True)
    np.testing.assert_array_equal(x, want_x)
    np.testing.assert_array_equal(y, want_y)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"stages": 9}, "--stages 9: the model has 4 blocks; use 1..4"),
        ({"compressor": "quant:3"}, "quant bits must be one of (1, 2, 4, 8), got 3"),
        ({"grad_compressor": "topk"}, "--compressor: cannot read 'topk'"),
        ({"reuse": 0}, "--reuse must be at least 1, got 0"),
    ],
)
def test_settings_are_checked_without_the_data(change, message):
    from methodkit.core.errors import UsageError
    from methodkit.tools.clapping.config import check_settings

    with pytest.raises(UsageError) as info:
        check_settings(RunConfig(**change), 128)
    assert message in str(info.value)
    check_settings(RunConfig(), 128)  # the defaults pass

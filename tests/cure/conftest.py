"""cure tests: one torch thread; a tiny HalfCheetah data set and tiny models shared by the tests."""

from __future__ import annotations

import os

import pytest

TINY_SPEC = {"scale": 0.1, "chunk": 40, "behaviour": "cpg"}


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    import torch

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    yield


@pytest.fixture(scope="session")
def tiny_ds():
    """A checked data set: 35 R + 10 F-mix (5 styled) + 10 F-disjoint training chunks of 40 steps."""
    from methodkit.tools.cure.data import Spec, collect, default_spec, validate

    arrays = collect(Spec.parse(default_spec(**TINY_SPEC)), seed=0)
    return validate(arrays, "tiny.npz")


@pytest.fixture(scope="session")
def tiny_files(tmp_path_factory, tiny_ds):
    """(folder, data.npz, model.safetensors) written through the library (100 TD3+BC steps, width 32)."""
    from methodkit.core import io
    from methodkit.tools.cure.backbones import save_model
    from methodkit.tools.cure.data import Spec, collect, default_spec
    from methodkit.tools.cure.train import train

    folder = tmp_path_factory.mktemp("cure")
    arrays = collect(Spec.parse(default_spec(**TINY_SPEC)), seed=0)
    io.write_arrays(folder / "data.npz", arrays)
    agent, info, _ = train(tiny_ds, "td3bc", steps=100, hidden=32)
    save_model(folder / "model.safetensors", agent, info)
    return folder, folder / "data.npz", folder / "model.safetensors"

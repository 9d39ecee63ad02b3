"""cyb tests: one torch thread; a tiny arith token file and a tiny trained run shared by the CLI tests."""

from __future__ import annotations

import os

import pytest

MODEL = ["--layers", "1", "--d-model", "32", "--heads", "2", "--warmup", "2", "-j", "1", "-q"]
TINY = ["--ctx", "32", "--batch-size", "8", *MODEL]


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    import torch

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    yield


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """(folder, tokens.npz, run folders by loss) of a 300-problem arith set and 6-step runs."""
    import subprocess
    import sys
    from pathlib import Path

    exe = str(Path(sys.executable).parent / "cyb-train")
    folder = tmp_path_factory.mktemp("cyb")
    tokens = folder / "tok.npz"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([exe, "data", "--source", "arith", "--arith-problems", "600", "--arith-per-doc", "20",
                    "-o", tokens, "-q"], check=True, env=env, capture_output=True)  # fmt: skip
    runs = {}
    for loss in ("ce", "cyb-va"):
        out = folder / f"run-{loss}"
        proc = subprocess.run([exe, "pretrain", tokens, "--loss", loss, "--steps", "6", *TINY, "-o", out],
                              env=env, capture_output=True)  # fmt: skip
        assert proc.returncode == 0, proc.stderr.decode()
        runs[loss] = out
    return folder, tokens, runs

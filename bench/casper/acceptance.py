"""casper-solve acceptance runs (issue 8, section 5), one task and one seed per call; JSON lines on stdout.

    python -P bench/casper/acceptance.py warcraft SEED MAPS12.npz MAPS30.npz [WEIGHTS.pt]
    python -P bench/casper/acceptance.py warcraft-baselines SEED MAPS12.npz MAPS30.npz
    python -P bench/casper/acceptance.py mnist-add SEED
    python -P bench/casper/acceptance.py sudoku SEED [N_TEST]
    python -P bench/casper/acceptance.py solver SEED MAPS12.npz MAPS30.npz [N_TEST]
    python -P bench/casper/acceptance.py solver-casper-cnn SEED MAPS12.npz MAPS30.npz

Warcraft: the CNN is trained at 12x12 on the first 256 training maps of MAPS12 (3 epochs, batch 32,
lr 3e-3, the library defaults of `train`; WEIGHTS, when given, are the state dict of that same call
saved earlier), the decode temperature is calibrated on 22 training maps of MAPS30 (the library default at 30x30), then Casper
decodes the 500 test maps of MAPS30 (30x30), in chunks of 50 with a running summary after each
chunk (so an interrupted run still reports what it did); then the 12x12 calibration is recorded
for comparison, and `unconstrained` and `sl-sample` are trained the same way and decode the same maps. MNIST-add: weak (sum-only) training at N=1 (curriculum to
N=2-4), then Casper and the unconstrained decode at N = 1 (200 sums) and 2, 4, 15, 64, 256, 1024
(20 sums each). Sudoku: 300 training puzzles, N_TEST (default 1000) test puzzles, Casper trained
through the layer (2 epochs) and the unconstrained classifier, in chunks of 100. Solver ("predictor +
exact solver, no layer", method `solver`): the same three set-ups with no projection at inference:
Dijkstra on -log p of the plainly trained CNN (Warcraft, as `warcraft-baselines` trains it), casper's
decoder on the plain CE classifier (Sudoku, as `sudoku` trains it) and on Casper's weakly trained
digit net (MNIST-add: sums alone teach no digits without the layer, so that predictor is the only one).
solver-casper-cnn: Dijkstra on -log sigmoid(z) of Casper's own CNN (trained through the layer as
`warcraft` trains it), no projection at inference.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np


def emit(**row):
    print(json.dumps(row), flush=True)


def chunked_eval(task, method, model, arrays, *, seed, scale=1.0, chunk=50, limit=None, tag=None):
    """Evaluate the test split chunk by chunk; print a running summary after each chunk."""
    from methodkit.tools.casper import tasks

    test_keys = [k for k in arrays if k.startswith("test_") and k != "test_pool"]  # the pool is not per instance
    total = min(limit or len(arrays[test_keys[0]]), len(arrays[test_keys[0]]))
    rows, cpu, wall = [], 0.0, 0.0
    for start in range(0, total, chunk):
        part = dict(arrays)
        part.update({k: arrays[k][start : start + chunk] for k in test_keys})
        c0, w0 = time.process_time(), time.perf_counter()
        result = tasks.evaluate(task, method, model, part, limit=min(chunk, total - start), scale=scale)
        cpu += time.process_time() - c0
        wall += time.perf_counter() - w0
        rows.extend(result.rows)
        summary = tasks._summarise(rows, tuple(k for k in result.summary if k in result.rows[0] and k != "i"))
        emit(
            task=task,
            method=method,
            seed=seed,
            tag=tag,
            done=len(rows),
            of=total,
            cpu_s_per_instance=cpu / len(rows),
            wall_s_per_instance=wall / len(rows),
            **{k: v for k, v in result.summary.items() if k not in summary and k not in ("task", "method")},
            **summary,
        )


def warcraft(seed: int, maps12: str, maps30: str, weights: str | None = None) -> None:
    import torch

    from methodkit.tools.casper import tasks
    from methodkit.tools.casper.models import build

    torch.set_num_threads(1)
    d12 = {k: (v[:256] if k.startswith("train_") else v) for k, v in np.load(maps12).items()}
    d30 = dict(np.load(maps30))
    c0 = time.process_time()
    if weights:
        model = build("warcraft")
        model.load_state_dict(torch.load(weights))
    else:
        model = tasks.train("warcraft", "casper", d12, epochs=3, batch_size=32, lr=3e-3, seed=seed, calibrate=False)
        model = model.model
    train_cpu = time.process_time() - c0
    rng = np.random.default_rng(seed)
    c0 = time.process_time()
    s30, info30 = tasks.calibrate_scale(model, d30, rng)  # the side that is decoded below
    emit(
        task="warcraft",
        seed=seed,
        train_cpu_s=train_cpu,
        calibration_cpu_s=time.process_time() - c0,
        decode_scales={"30": s30},
        calibration={"30": info30},
    )
    chunked_eval("warcraft", "casper", model, d30, seed=seed, scale=s30)
    c0 = time.process_time()
    s12, info12 = tasks.calibrate_scale(model, d12, rng)  # what a 12x12-only calibration would have chosen
    emit(
        task="warcraft",
        seed=seed,
        calibration_cpu_s=time.process_time() - c0,
        decode_scales={"12": s12},
        calibration={"12": info12},
    )
    warcraft_baselines(seed, maps12, maps30)


def warcraft_baselines(seed: int, maps12: str, maps30: str) -> None:
    """`unconstrained` and `sl-sample`, trained like Casper's CNN, decoding the same 30x30 test maps."""
    import torch

    from methodkit.tools.casper import tasks

    torch.set_num_threads(1)
    d12 = {k: (v[:256] if k.startswith("train_") else v) for k, v in np.load(maps12).items()}
    d30 = dict(np.load(maps30))
    for method in ("unconstrained", "sl-sample"):
        c0 = time.process_time()
        base = tasks.train("warcraft", method, d12, epochs=3, batch_size=32, lr=3e-3, seed=seed).model
        emit(task="warcraft", method=method, seed=seed, train_cpu_s=time.process_time() - c0)
        chunked_eval("warcraft", method, base, d30, seed=seed, chunk=500)


def mnist_add(seed: int) -> None:
    import torch

    from methodkit.tools.casper import tasks

    torch.set_num_threads(1)
    add1 = tasks.generate("mnist-add", size=0, digits=1, n=0, n_test=200, seed=seed)
    c0 = time.process_time()
    model = tasks.train("mnist-add", "casper", add1, epochs=6, batch_size=16, lr=5e-3, seed=seed).model
    emit(task="mnist-add", seed=seed, train_cpu_s=time.process_time() - c0)
    for digits in (1, 2, 4, 15, 64, 256, 1024):
        data = add1 if digits == 1 else tasks.generate("mnist-add", size=0, digits=digits, n=0, n_test=20, seed=seed)
        for method in ("casper", "unconstrained"):
            chunked_eval("mnist-add", method, model, data, seed=seed, chunk=200, tag=f"N={digits}")


def sudoku(seed: int, n_test: int = 1000) -> None:
    import torch

    from methodkit.tools.casper import tasks

    torch.set_num_threads(1)
    c0 = time.process_time()
    data = tasks.generate("sudoku", size=9, digits=1, n=300, n_test=n_test, seed=seed)
    emit(task="sudoku", seed=seed, gen_cpu_s=time.process_time() - c0, train=300, test=n_test)
    models = {}
    for method in ("casper", "unconstrained"):
        c0 = time.process_time()
        models[method] = tasks.train("sudoku", method, data, epochs=2, batch_size=16, lr=3e-3, seed=seed).model
        emit(task="sudoku", method=method, seed=seed, train_cpu_s=time.process_time() - c0)
    chunked_eval("sudoku", "unconstrained", models["unconstrained"], data, seed=seed, chunk=n_test)
    chunked_eval("sudoku", "casper", models["casper"], data, seed=seed, chunk=100)


def solver(seed: int, maps12: str, maps30: str, n_test: int = 1000) -> None:
    import torch

    from methodkit.tools.casper import tasks

    torch.set_num_threads(1)
    d12 = {k: (v[:256] if k.startswith("train_") else v) for k, v in np.load(maps12).items()}
    d30 = dict(np.load(maps30))
    c0 = time.process_time()
    cnn = tasks.train("warcraft", "solver", d12, epochs=3, batch_size=32, lr=3e-3, seed=seed).model
    emit(task="warcraft", method="solver", seed=seed, train_cpu_s=time.process_time() - c0)
    chunked_eval("warcraft", "solver", cnn, d30, seed=seed, chunk=500)
    data = tasks.generate("sudoku", size=9, digits=1, n=300, n_test=n_test, seed=seed)
    c0 = time.process_time()
    clf = tasks.train("sudoku", "solver", data, epochs=2, batch_size=16, lr=3e-3, seed=seed).model
    emit(task="sudoku", method="solver", seed=seed, train_cpu_s=time.process_time() - c0)
    chunked_eval("sudoku", "solver", clf, data, seed=seed, chunk=n_test)
    add1 = tasks.generate("mnist-add", size=0, digits=1, n=0, n_test=200, seed=seed)
    model = tasks.train("mnist-add", "casper", add1, epochs=6, batch_size=16, lr=5e-3, seed=seed).model
    for digits in (1, 2, 4, 15, 64, 256, 1024):
        data = add1 if digits == 1 else tasks.generate("mnist-add", size=0, digits=digits, n=0, n_test=20, seed=seed)
        chunked_eval("mnist-add", "solver", model, data, seed=seed, chunk=200, tag=f"N={digits}")


def solver_casper_cnn(seed: int, maps12: str, maps30: str) -> None:
    import torch

    from methodkit.tools.casper import tasks

    torch.set_num_threads(1)
    d12 = {k: (v[:256] if k.startswith("train_") else v) for k, v in np.load(maps12).items()}
    d30 = dict(np.load(maps30))
    c0 = time.process_time()
    cnn = tasks.train("warcraft", "casper", d12, epochs=3, batch_size=32, lr=3e-3, seed=seed, calibrate=False).model
    emit(task="warcraft", method="solver", tag="casper-cnn", seed=seed, train_cpu_s=time.process_time() - c0)
    chunked_eval("warcraft", "solver", cnn, d30, seed=seed, chunk=500, tag="casper-cnn")


if __name__ == "__main__":
    task, seed = sys.argv[1], int(sys.argv[2])
    if task == "warcraft":
        warcraft(seed, sys.argv[3], sys.argv[4], sys.argv[5] if len(sys.argv) > 5 else None)
    elif task == "warcraft-baselines":
        warcraft_baselines(seed, sys.argv[3], sys.argv[4])
    elif task == "mnist-add":
        mnist_add(seed)
    elif task == "solver":
        solver(seed, sys.argv[3], sys.argv[4], int(sys.argv[5]) if len(sys.argv) > 5 else 1000)
    elif task == "solver-casper-cnn":
        solver_casper_cnn(seed, sys.argv[3], sys.argv[4])
    elif task == "sudoku":
        sudoku(seed, int(sys.argv[3]) if len(sys.argv) > 3 else 1000)
    else:
        raise SystemExit(f"unknown task {task}")

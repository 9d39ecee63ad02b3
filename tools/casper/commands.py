"""What casper-solve's verbs do between reading their inputs and writing their outputs.

The command module (cli/casper_solve.py) parses flags, reads files and writes results; turning an
input into scores or a dataset, the weights and sidecar of a trained model and the NPZ of a
generated dataset are built here.
"""

from __future__ import annotations

import json
from pathlib import Path

from methodkit.core.errors import DataError, UsageError


def read_scores(data, path: str, program, nan: str, in_format: str | None):
    """The (batch, n_vars) scores of INPUT's bytes: NPY/NPZ (array 'scores' or the only one) or Parquet."""
    import numpy as np

    from methodkit.core import io
    from methodkit.tools.casper.solve import check_scores

    kind = io.format_from_path(path if path != "-" else "-", in_format, "npy")
    name = data.name
    if kind in ("npy", "npz"):
        arrays = io.read_arrays(data)
        if "scores" in arrays:
            scores = arrays["scores"]
        elif len(arrays) == 1:
            scores = next(iter(arrays.values()))
        else:
            raise DataError(f"{name}: NPZ holds {', '.join(arrays)}; name the scores array 'scores'")
    elif kind == "parquet":
        frame = io.read_table(data, "parquet")
        names = program.user_names
        unknown = [c for c in frame.columns if c not in set(names)]
        if unknown:
            raise DataError(
                f"{name}: unknown variable columns {', '.join(map(str, unknown[:5]))} (expected {names[0]}...)"
            )
        missing = [c for c in names if c not in frame.columns]
        if missing:
            raise DataError(f"{name}: missing variable columns {', '.join(missing[:5])}; expected all {len(names)}")
        scores = io.numeric_matrix(frame, names, allow_nonfinite=True)
    else:
        raise DataError(f"{name}: scores must be NPY, NPZ or Parquet, not {kind}")
    return check_scores(program, np.asarray(scores), name, nan)


def projection_arrays(result) -> dict:
    """The NPZ arrays `project -o` writes: soft, hard, status, valid."""
    import numpy as np

    return {"soft": result.soft, "hard": result.hard, "status": np.array(result.status), "valid": result.valid}


def dataset_of(data, task: str | None):
    """The arrays of a dataset input and its task (checked against --task when given)."""
    from methodkit.core import io
    from methodkit.tools.casper.tasks import dataset_task

    arrays = io.read_arrays(data)
    found = dataset_task(arrays, data.name)
    if task is not None and found != task:
        raise DataError(f"{data.name}: holds a {found} dataset, not {task}; pass --task {found}")
    return arrays, found


def dataset_npz(arrays: dict) -> bytes:
    import io as _io

    import numpy as np

    buffer = _io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def gen_summary(task: str, arrays: dict, *, size: int, digits: int, n: int, n_test: int, seed: int) -> dict:
    summary = {"task": task, "train": n, "test": n_test, "seed": seed, "arrays": sorted(arrays)}
    summary.update({"size": size} if task == "warcraft" else {"digits": digits} if task == "mnist-add" else {})
    return summary


def check_calibration(calibrate_on, task: str, method: str, calibrate: bool) -> None:
    if calibrate_on and not (task == "warcraft" and method == "casper" and calibrate):
        raise UsageError("--calibrate-on applies to --task warcraft --method casper with --calibrate only")


def trained_files(result, data_sha256: str) -> tuple[bytes, bytes]:
    """(safetensors weights, JSON sidecar: the config, the data fingerprint and the log) of a trained model."""
    from safetensors.torch import save

    weights = save({k: v.contiguous() for k, v in result.model.state_dict().items()})
    config = {**result.config, "data_sha256": data_sha256, "log": result.log}
    return weights, (json.dumps(config, indent=1) + "\n").encode()


def load_weights(raw: bytes, model_path: str, task: str):
    """The task's model with the weights of `raw` (a safetensors file written by 'train')."""
    from safetensors.torch import load

    from methodkit.tools.casper.models import build

    try:
        weights = load(raw)
    except Exception:
        raise DataError(f"{model_path}: not a safetensors file; train one with 'casper-solve train'") from None
    model = build(task)
    try:
        model.load_state_dict(weights)
    except RuntimeError:
        raise DataError(f"{model_path}: these weights are not a {task} model; train one with --task {task}") from None
    return model


def sidecar_scale(model_path: str, side: int) -> float:
    """The decode temperature stored beside the weights by 'train' for maps of `side`, else 1."""
    from methodkit.tools.casper.tasks import decode_scale_for

    sidecar = Path(model_path).with_suffix(".json")
    try:
        config = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        return 1.0
    return decode_scale_for(config, side)[0]


def eval_scale(scale: float | None, task: str, arrays: dict, model_path: str) -> float:
    """--scale, else for Warcraft the temperature calibrated at the test maps' side, else 1."""
    if scale is not None:
        return scale
    paths = arrays.get("test_paths")
    return sidecar_scale(model_path, paths.shape[1]) if task == "warcraft" and paths is not None else 1.0


def solve_device(resolved: str, asked: str | None, program) -> str:
    """The device `project` runs on: --device auto falls back to the CPU when the program is too large for
    the batched CuPy path."""
    if resolved == "cuda" and asked == "auto":
        from methodkit.tools.casper.batched import MAX_ROWS

        return "cuda" if program.m <= MAX_ROWS else "cpu"
    return resolved


def strict_failure(status) -> str | None:
    """The --strict message when some row did not end ok, else None."""
    bad = sum(s != "ok" for s in status)
    return f"--strict: {bad} of {len(status)} rows ended timeout or proj_error" if bad else None


def calibration_sets(inputs) -> tuple:
    """The arrays of each --calibrate-on input (path, bytes), refusing a dataset that is not Warcraft."""
    out = []
    for path, data in inputs:
        found, task = dataset_of(data, None)
        if task != "warcraft":
            raise UsageError(f"--calibrate-on {path}: holds a {task} dataset, not warcraft")
        out.append(found)
    return tuple(out)


def score_input(score_kind: str | None, legacy: str | None) -> str:
    """solve.run's input_kind from --scores probabilities|logits (or the older, hidden --input scores|logits)."""
    if score_kind is not None and legacy is not None:
        raise UsageError("--scores and --input say the same thing; pass --scores only")
    if legacy is not None:
        return legacy
    return "logits" if score_kind == "logits" else "scores"


def train_inputs(read, refuse, input: str, output: str | None, task, method: str, calibrate: bool, calibrate_on):
    """What `train` reads before it starts, in the order its errors are reported: INPUT exists, -o is a
    file path, neither it nor its JSON sidecar exists, the dataset and the calibration sets.
    `read(path)` gives an input's bytes and name, `refuse(*paths)` refuses existing outputs.
    Returns (sidecar path, arrays, task, calibration sets)."""
    from methodkit.core import io

    io.require_input(input)
    if output is None or output == "-":
        raise UsageError("pass -o PATH.safetensors for the trained weights")
    sidecar = Path(output).with_suffix(".json")
    refuse(output, sidecar)
    arrays, task = dataset_of(read(input), task)
    check_calibration(calibrate_on, task, method, calibrate)
    return sidecar, arrays, task, calibration_sets((path, read(path)) for path in calibrate_on)

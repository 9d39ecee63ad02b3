"""What a gbdt-poison command assembles around the method: tables and problems from its flags, the attack
configuration, and the resume checkpoints (OUTPUT.partial.json) of attack and sweep.

A checkpoint carries a fingerprint of everything that decides the result (settings, victim, data); a
rerun resumes only from a checkpoint with the same fingerprint and refuses any other, so an interrupted
command continues to the very result an uninterrupted one gives.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict

import numpy as np

from methodkit.core.errors import CheckFailed, UsageError


def csv_list(value: str | None) -> list[str] | None:
    return None if value is None else [v.strip() for v in value.split(",") if v.strip()]


def tables(read: Callable, input_path: str, params: dict, seed: int, cache: dict | None = None):
    """(train, test, label, positive, val_frac): files are read once (cache), built-in splits per seed."""
    from methodkit.tools.gbdt import datasets

    cache = {} if cache is None else cache

    def cached(path):
        if path not in cache:
            cache[path] = read(path)
        return cache[path]

    label, positive, val_frac = params.get("label"), params.get("positive"), params.get("val_frac")
    test = None
    if params.get("dataset") is not None:
        train, test, d_label, d_positive, d_frac = datasets.builtin(params["dataset"], seed)
        label, positive = label or d_label, positive or d_positive
        val_frac = val_frac if val_frac is not None else d_frac
        if input_path != "-":
            train = cached(input_path)
    else:
        train = cached(input_path)
    if params.get("test_path"):
        test = cached(params["test_path"])
    return train, test, label, positive, 0.2 if val_frac is None else val_frac


def prepare(read: Callable, input_path: str, params: dict, seed: int, cache: dict | None = None):
    """Read the tables and build the Problem (D, V, T) for `seed`."""
    from methodkit.tools.gbdt import data

    train, test, label, positive, val_frac = tables(read, input_path, params, seed, cache)
    return data.prepare(
        train,
        test,
        label=label,
        positive=positive,
        categorical=csv_list(params.get("categorical")),
        immutable=csv_list(params.get("immutable")),
        integer=csv_list(params.get("integer")),
        val_frac=val_frac,
        seed=seed,
    )


def victim(params: dict, seed: int):
    from methodkit.tools.gbdt.victim import Victim

    return Victim.from_json(params.get("lgb_params"), threads=params["threads"], seed=seed)


def refuse_inputs(outputs: list[str | None], inputs: list[str | None]) -> None:
    """UsageError when an output path is also an input."""
    for out in outputs:
        for src in inputs:
            if out and src and "-" not in (out, src) and os.path.abspath(out) == os.path.abspath(src):
                raise UsageError(f"{out}: is also an input; write the output elsewhere")


def attack_outputs(output: str, manifest: str | None, inputs: list[str | None]) -> tuple[str, str]:
    """(table format, manifest path) of an attack's outputs; UsageError for stdout, another format, an input."""
    from methodkit.core import io

    if output == "-":
        raise UsageError("attack writes a table and a manifest: pass -o FILE (.csv or .parquet)")
    kind = io.format_from_path(output, None, None)
    if kind not in ("csv", "tsv", "parquet"):
        raise UsageError(f"{output}: the poisoned table must be .csv, .tsv or .parquet")
    manifest = manifest or manifest_path(output)
    refuse_inputs([output, manifest], inputs)
    return kind, manifest


def write_attack(result, output: str, kind: str, manifest: str, force: bool, digests: dict | None) -> None:
    """The poisoned table, then its manifest (with the input digests, else the table's own)."""
    from methodkit.core import io
    from methodkit.tools.gbdt.data import frame_sha256

    io.write_table(result.poisoned_frame(), output, kind, force=force)
    record = result.to_dict()
    record["data_sha256"] = digests or {"train": frame_sha256(result.problem.frame)}
    io.write_json(record, manifest, force=force)


def attack_config(params: dict, seed: int, eps: float | None = None):
    from methodkit.tools.gbdt.attack import AttackConfig

    return AttackConfig(
        budget=params["budget"],
        eps=params["eps"] if eps is None else eps,
        dims=params["dims"],
        dims_list=csv_list(params.get("dims_list")),
        influence=params["influence"],
        dim_rank=params["dim_rank"],
        cov=params["cov"],
        transform=params["transform"],
        iters=params["iters"],
        q=params["q"],
        mu=params["mu"],
        eta=params["eta"],
        objective=params["objective"],
        search=params["search"],
        probe_projection=params["probe_projection"] == "on",
        oracle=params["oracle"],
        refit_every=params["refit_every"],
        fast_bins=params["fast_bins"],
        workers=params["workers"],
        one_hot=csv_list(params.get("one_hot")),
        drop_validation=params.get("drop_validation", False),
        seed=seed,
    )


def gate(f1, limit, what: str) -> None:
    """CheckFailed (exit 3) when `f1` is above --fail-above-f1."""
    if limit is not None and f1 is not None and f1 > limit:
        raise CheckFailed(f"{what} F1 {f1:.4f} is above --fail-above-f1 {limit}")


def influence_table(problem, victim, progress):
    """BoostIn score, label and rank (1 = most helpful) of every train row, as a DataFrame."""
    import pandas as pd

    from methodkit.tools.gbdt import influence as infl
    from methodkit.tools.gbdt.victim import leaf_indices, parse_trees

    progress("victim fit", 0, 1)
    booster = victim.fit(problem.X_tr, problem.y_tr, problem.cat_idx)
    progress("victim fit", 1, 1)
    trees = parse_trees(booster, problem.y_tr, victim.full_params())
    scores = infl.boostin(
        leaf_indices(booster, problem.X_tr),
        leaf_indices(booster, problem.X_v),
        trees,
        problem.y_tr,
        problem.y_v,
        victim.lambda_l2,
    )
    order = np.lexsort((np.arange(len(scores)), -scores))
    rank = np.empty(len(scores), dtype=np.int64)
    rank[order] = np.arange(1, len(scores) + 1)
    labels = problem.frame[problem.label].iloc[problem.tr_rows].to_numpy()
    return pd.DataFrame({"row": problem.tr_rows, "influence": scores, "label": labels, "rank": rank})


def eval_victim(train, test, label, positive, params: dict, seed: int):
    """(result fields, warnings) of the victim trained on all of `train` and scored on `test`."""
    from methodkit.tools.gbdt import data
    from methodkit.tools.gbdt.victim import metrics

    if test is None:
        raise UsageError("eval needs a test table: pass --test FILE or --dataset")
    problem = data.whole(train, test, label=label, positive=positive, categorical=csv_list(params.get("categorical")))
    y, X_te, y_te = problem.y_tr, problem.X_te, problem.y_te
    booster = victim(params, seed).fit(problem.X_tr, y, problem.cat_idx)
    tr, te = metrics(booster, problem.X_tr, y), metrics(booster, X_te, y_te)
    result = {
        "verb": "eval",
        "label": problem.label,
        "positive": problem.positive,
        "n_train": len(y),
        "n_test": len(y_te),
        "train_f1": tr["f1"],
        "test_f1": te["f1"],
        "test_acc": te["acc"],
        "test_logloss": te["logloss"],
    }
    return result, problem.warnings


# ---------------------------------------------------------------- outputs and checkpoints


def manifest_path(output: str) -> str:
    """OUTPUT's default manifest: its stem + .manifest.json."""
    base = output
    for suffix in (".gz", ".xz", ".bz2", ".csv", ".tsv", ".parquet", ".pq"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base + ".manifest.json"


def attack_fingerprint(config, victim, problem) -> str:
    """What a checkpoint must share with the run that resumes it: settings, victim and data."""
    from methodkit.tools.gbdt.data import frame_sha256

    doc = {
        "config": {k: v for k, v in asdict(config).items() if k != "workers"},
        "victim": {"params": victim.full_params(), "rounds": victim.rounds},
        "train": frame_sha256(problem.frame),
        "val": problem.v_rows.tolist(),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def read_checkpoint(path: str, fingerprint: str, what: str, force: bool) -> dict | None:
    """The *.partial.json of the same attack or sweep (same fingerprint); None when absent or --force."""
    from methodkit.core import io

    if force or not os.path.exists(path):
        return None
    try:
        saved = io.read_json(path)
    except Exception:
        raise UsageError(f"{path}: unreadable checkpoint; remove it or pass --force") from None
    if not isinstance(saved, dict) or saved.get("fingerprint") != fingerprint:
        raise UsageError(f"{path}: checkpoint of a different {what} (settings or data); remove it or pass --force")
    return saved


class AttackCheckpoint:
    """OUTPUT.partial.json of one attack: the state to resume from, rewritten after every iteration."""

    def __init__(self, output: str, config, victim, problem, force: bool):
        self.path = f"{output}.partial.json"
        fingerprint = attack_fingerprint(config, victim, problem)
        saved = read_checkpoint(self.path, fingerprint, "attack", force)
        self.resume = saved.get("state") if saved else None
        self.last = {"fingerprint": fingerprint, "state": self.resume}

    def save(self, state) -> None:
        from methodkit.core import io

        self.last["state"] = state
        io.write_json(self.last, self.path, force=True)

    def save_failure(self, trace: dict) -> None:
        from methodkit.core import io

        io.write_json({**self.last, **trace}, self.path, force=True)

    def remove(self) -> None:
        if os.path.exists(self.path):
            os.remove(self.path)

    def run_attack(self, problem, victim, config, progress):
        """The attack, resumed from this checkpoint if there is one, saving after every iteration; a LightGBM
        failure leaves its trace here before it propagates."""
        from methodkit.tools.gbdt import attack

        try:
            return attack.run(problem, victim, config, progress, checkpoint=self.save, resume=self.resume)
        except attack.AttackFailed as exc:
            self.save_failure(exc.trace)
            raise


class SweepCheckpoint:
    """OUTPUT.partial.json of a sweep: the rows of the runs done, rewritten after every run (none on stdout)."""

    def __init__(self, output: str, params: dict, config, grid, seeds, baselines, problem, force: bool):
        from methodkit.tools.gbdt import sweep
        from methodkit.tools.gbdt.data import frame_sha256

        self.path = None if output == "-" else output + ".partial.json"
        self.done: dict = {}
        self.on_row = None
        self.resumed = False
        if self.path is None:
            return
        data_key = json.dumps({"dataset": params.get("dataset"), "train": frame_sha256(problem.frame)})
        grid_sorted, _ = sweep.check_grid(grid)
        fingerprint = sweep.fingerprint(config, grid_sorted, seeds, baselines, data_key)
        saved = read_checkpoint(self.path, fingerprint, "sweep", force)
        self.done = dict(saved.get("rows") or {}) if saved else {}
        self.resumed = bool(saved)
        state = {"fingerprint": fingerprint, "rows": dict(self.done)}

        def on_row(key, row):
            from methodkit.core import io

            state["rows"][key] = row
            io.write_json(state, self.path, force=True)

        self.on_row = on_row

    def remove(self) -> None:
        if self.path is not None and os.path.exists(self.path):
            os.remove(self.path)


class SweepJob:
    """A sweep's problems (the input read and validated first, one Problem per seed), config and checkpoint."""

    def __init__(self, read: Callable, input_path: str, params: dict, grid, seeds, output: str, force: bool):
        from methodkit.tools.gbdt import sweep

        self.read, self.input, self.params, self.grid, self.seeds = read, input_path, params, grid, seeds
        self.cache: dict = {}
        self.first = prepare(read, input_path, params, seeds[0], self.cache)
        self.baselines = csv_list(params["baselines"]) or []
        self.config = attack_config({**params, "eps": 1.0}, seeds[0])
        sweep.tasks(self.config, grid, seeds, self.baselines)  # unknown baselines fail before any work
        self.partial = SweepCheckpoint(output, params, self.config, grid, seeds, self.baselines, self.first, force)

    def problem(self, seed: int):
        if seed == self.seeds[0]:
            return self.first
        return prepare(self.read, self.input, self.params, seed, self.cache)

    def run(self, progress):
        from methodkit.tools.gbdt import sweep

        return sweep.run(
            self.problem,
            lambda s: victim(self.params, s),
            self.config,
            self.grid,
            self.seeds,
            self.baselines,
            progress,
            scheduler=self.params["scheduler"],
            dask_workers=self.params["dask_workers"],
            done=self.partial.done,
            on_row=self.partial.on_row,
        )


def parse_sweep_lists(eps_grid: str, seeds: str) -> tuple[list[float], list[int]]:
    try:
        grid = [float(e) for e in csv_list(eps_grid)]
        seed_list = [int(s) for s in csv_list(seeds)]
    except ValueError:
        raise UsageError("--eps-grid and --seeds take comma-separated numbers") from None
    if not seed_list:
        raise UsageError("--seeds is empty")
    return grid, seed_list

"""What dar-backdoor's verbs do between reading their flags and writing their outputs.

The command module (cli/dar_backdoor.py) parses flags and orders the checks; reading the images and
rules, checking `run`'s comma lists, building its configuration, the partial-rows file and the clean-up
after training are here. `read` is a callable turning a path into its bytes (the command's
Run.input_bytes, which records the digests for --meta).
"""

from __future__ import annotations

import os

from methodkit.core.errors import DataError, UsageError

# docs/dar.md, "Recipe and measured numbers": the operators that did not implant at the acceptance size
NO_IMPLANT = {
    "spatial": "teacher / clean-KD student ASR 1.9% / 1.9% at 20k images, 1% relabelled, seed 0",
    "frequency": "teacher / clean-KD student ASR 1.6% / 1.8% at 20k images, 1% relabelled, seed 0",
}
RECIPE = "--op whitened --kappa 0"


def images(read, path: str, dataset: str | None, split: str, limit: int | None, seed: int, labels: str | None = None):
    """(x uint8 (N, H, W), y int64, name) from an NPZ INPUT or a built-in set; `labels` (a path) replaces y."""
    import numpy as np

    from methodkit.core import io
    from methodkit.tools.dar import data

    if dataset:
        x, y = data.load(dataset, split, limit, seed)
        name = dataset
    else:
        source = read(path)
        x, y = data.from_arrays(io.read_arrays(source), source.name)
        x, y = (x[:limit], y[:limit]) if limit else (x, y)
        name = source.name
    if labels:
        arrays = io.read_arrays(read(labels))
        new = np.asarray(next(iter(arrays.values())) if "y" not in arrays else arrays["y"])
        if new.shape != y.shape or not np.issubdtype(new.dtype, np.integer):
            raise DataError(f"{labels}: labels must be {len(y)} integers, got {new.dtype} {new.shape}")
        y = new.astype(np.int64)
    return x, y, name


def require_images(path: str, dataset: str | None) -> None:
    """Name a missing INPUT first, so the rules file can be checked before the images are read."""
    if not dataset:
        from methodkit.core import io

        io.require_input(path)


def write_triggered(x, y, rule, kappa: float, blend: float, output: str, *, force: bool) -> float:
    """Write apply's NPZ (x moved by T_kappa, y, satisfied); returns the share that satisfies the rule."""
    from methodkit.core import io
    from methodkit.tools.dar.rules import apply, satisfies

    moved = apply(x, rule, kappa, blend)
    ok = satisfies(moved, rule)
    io.write_arrays(output, {"x": moved, "y": y, "satisfied": ok}, force=force)
    return float(ok.mean())


def read_rule(read, path: str | None, index: int):
    """Rule number `index` (0-based) of a rules JSONL from discover."""
    from methodkit.core import io
    from methodkit.tools.dar.rules import Rule

    if not path:
        raise UsageError("--rules PATH is required (rules JSONL from discover)")
    records = io.read_jsonl(read(path))
    if not records:
        raise DataError(f"{path}: no rule in the file")
    if not 0 <= index < len(records):
        raise DataError(f"{path}: --rule-index {index} out of range (the file has {len(records)} rules)")
    return Rule.from_dict(records[index], f"{path}: line {index + 1}")


def classes_of(y, classes: int | None) -> int:
    return classes or int(y.max()) + 1


def parse_run_lists(alpha: str, methods: str, defenses: str) -> tuple:
    """(alphas, methods, defenses) of run's comma lists, each value checked."""
    from methodkit.tools.dar.choices import DEFENSES, METHODS

    try:
        alphas = tuple(float(a) for a in alpha.split(",") if a.strip())
    except ValueError:
        raise UsageError(f"--alpha must be numbers in [0, 1] separated by commas, got {alpha!r}") from None
    if not alphas or not all(0 <= a <= 1 for a in alphas):
        raise UsageError(f"--alpha must be numbers in [0, 1] separated by commas, got {alpha!r}")
    chosen = tuple(m for m in methods.split(",") if m)
    if set(chosen) - set(METHODS):
        raise UsageError(f"--methods: unknown {', '.join(sorted(set(chosen) - set(METHODS)))} "
                         f"(known: {', '.join(METHODS)})")  # fmt: skip
    chosen_defenses = tuple(d for d in defenses.split(",") if d)
    if set(chosen_defenses) - set(DEFENSES):
        raise UsageError(f"--defenses: unknown {', '.join(sorted(set(chosen_defenses) - set(DEFENSES)))} "
                         f"(known: {', '.join(DEFENSES)})")  # fmt: skip
    return alphas, chosen, chosen_defenses


def no_implant_warning(op: str, kappa: float, methods: tuple, operator: str) -> str | None:
    """The warning `run` prints at once when its DAR operator is one that did not implant in docs/dar.md."""
    if "dar" not in methods or operator != "coordinate":
        return None
    if op in NO_IMPLANT:
        return (f"--op {op} did not implant in docs/dar.md's measurements ({NO_IMPLANT[op]}); "
                f"the configuration that did: {RECIPE}")  # fmt: skip
    if op == "whitened" and kappa > 0:
        return f"--op whitened implants at --kappa 0 (the cell centre) in docs/dar.md; --kappa {kappa} is weaker"
    return None


def run_data(dataset: str, limit: int, kd_data: int, test_limit: int | None) -> tuple:
    """(x, y, kd or None, x_test, y_test, classes) of run: the first --limit train images, --kd-data more."""
    from methodkit.tools.dar import data

    x, y = data.load(dataset, "train", limit + kd_data)
    if len(x) < limit + kd_data:
        raise UsageError(f"--limit {limit} + --kd-data {kd_data} exceeds the {len(x)} train images of {dataset}")
    kd = (x[limit:], y[limit:]) if kd_data else None
    x, y = x[:limit], y[:limit]
    xt, yt = data.load(dataset, "test", test_limit)
    return x, y, kd, xt, yt, int(max(y.max(), yt.max())) + 1


def check_run_options(params: dict) -> tuple:
    """(alphas, methods, defenses, warning or None) of run's flags, checked before any data is read."""
    from methodkit.tools.dar.rules import check_strength

    alphas, methods, defenses = parse_run_lists(params["alpha"], params["methods"], params["defenses"])
    check_strength(params["kappa"], 1.0)
    check_operator(params["operator"], params["op"], params["method"])
    return alphas, methods, defenses, no_implant_warning(params["op"], params["kappa"], methods, params["operator"])


def run_config(params: dict, *, alphas, n, seeds, methods, defenses):
    """The RunConfig of run's flags (`params`): a cnn-s teacher and a cnn-xs student of the same width and epochs."""
    from methodkit.tools.dar.discover import DiscoverConfig
    from methodkit.tools.dar.pipeline import RunConfig
    from methodkit.tools.dar.poison import resolve_budget
    from methodkit.tools.dar.victim import VictimConfig

    p = params
    support, device = p["support"], p.get("device") or "auto"
    trainer = dict(width=p["width"], epochs=p["epochs"], batch_size=p["batch_size"], augment=p["augment"], device=device)
    cfg = RunConfig(DiscoverConfig(op=p["op"], target=p["target"], rank=p["rank"], s_lo=support[0], s_hi=support[1],
                                   method=p["method"], margin=p["margin"], window=p["window"], scale=p["scale"],
                                   components=p["components"]),
                    VictimConfig(**trainer), VictimConfig(arch="cnn-xs", alpha=alphas[0], **trainer),
                    budget=resolve_budget(p["budget"], n), seeds=seeds, methods=methods, defenses=defenses,
                    alphas=alphas, kappa=p["kappa"], operator=p["operator"])  # fmt: skip
    cfg.teacher.check()
    return cfg


class PartialRows:
    """OUTPUT.partial.jsonl: each row appended (and flushed) as soon as it is measured, so a stopped
    `run` keeps what it measured; removed once OUTPUT is written."""

    def __init__(self, path: str):
        self.path = path
        with open(path, "w"):
            pass

    def __call__(self, row: dict) -> None:
        from methodkit.core import io

        with open(self.path, "a") as handle:
            handle.write(io.dumps_json(row) + "\n")

    def remove(self) -> None:
        if os.path.exists(self.path):
            os.remove(self.path)


def remove_stale_partial(partial: str) -> None:
    """A finished training supersedes an interrupted one: its .partial weights and sidecar go."""
    from methodkit.core.checkpoint import sidecar_path

    for stale in (partial, str(sidecar_path(partial))):
        if os.path.exists(stale):
            os.remove(stale)


def check_operator(operator: str, op: str, method: str) -> None:
    if operator == "band-carrier" and (op != "whitened" or method != "clique"):
        raise UsageError("--operator band-carrier needs --op whitened (and --discover clique)")


def eval_models(model_path: str | None, control_path: str | None, target: int) -> tuple:
    """(model, control or None) for eval; the sidecars are checked before torch is loaded."""
    from methodkit.tools.dar import victim

    if not model_path:
        raise UsageError("--model MODEL is required (a model from train)")
    classes = victim.read_config(model_path)["classes"]
    if control_path and victim.read_config(control_path)["classes"] != classes:
        raise UsageError(f"--control {control_path}: its class count differs from --model's ({classes})")
    if not 0 <= target < classes:
        raise UsageError(f"--target {target} is not a class (the model has {classes})")
    return victim.load(model_path), victim.load(control_path) if control_path else None


def train_victim(x, y, cfg, classes: int, teacher: str | None, output: str, progress=None) -> dict:
    """Train (or distil from `teacher`) and save to `output`; the .partial checkpoint of an
    interrupted run is kept, a stale one removed once the model is written. Returns the summary."""
    from methodkit.tools.dar import victim

    cfg.check()
    t = victim.load(teacher) if teacher else None
    partial = victim.partial_path(output)
    model, summary = victim.fit(x, y, cfg, classes, teacher=t, progress=progress, partial=partial)
    model.save(output)
    remove_stale_partial(partial)
    return summary


def relabel(x, y, rule, target: int, budget: float, classes: int | None, seed: int, labels_out, manifest, *, force: bool):
    """poison's result: the rule's members relabelled (or, rule None, random non-target images), its
    labels NPY and manifest JSON written when asked."""
    from methodkit.core import io
    from methodkit.tools.dar.poison import poison, random_relabel, resolve_budget

    n, k = resolve_budget(budget, len(x)), classes_of(y, classes)
    result = random_relabel(x, y, target, n, k, seed) if rule is None else poison(x, y, rule, target, n, k)
    if labels_out:
        io.write_arrays(labels_out, {"y": result.labels}, force=force)
    if manifest:
        io.write_json(result.manifest(), manifest, force=force)
    return result

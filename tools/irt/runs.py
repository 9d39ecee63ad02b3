"""What irt-fit's verbs assemble around the estimators: the --out-dir files, the estimator settings from
the flags, a fit folder read back, and a fit aligned with its generating truth by model and item id."""

from __future__ import annotations

import os

import numpy as np

from methodkit.core.errors import DataError, UsageError

OUT_FILES = (("items", "items.csv"), ("abilities", "abilities.csv"), ("fit", "fit.json"))
# flags passed to estimators.make_settings under their own names
SETTING_FLAGS = (
    "latent", "prior", "tol", "max_cycles", "se", "float32", "accelerate", "scoring", "sampler", "chains",
    "warmup", "draws", "steps", "epochs", "patience", "positive_a", "a_max",
)  # fmt: skip


def beta_pair(text: str, flag: str) -> tuple[float, float]:
    """ALPHA,BETA of a Beta prior (both positive)."""
    try:
        a, b = (float(x) for x in text.split(","))
    except ValueError:
        raise UsageError(f"{flag} takes two numbers 'ALPHA,BETA', not {text!r}") from None
    if a <= 0 or b <= 0:
        raise UsageError(f"{flag} needs positive ALPHA,BETA, not {text!r}")
    return a, b


def out_paths(out_dir: str | None) -> dict:
    """{items, abilities, fit} paths under --out-dir ({} without one); a non-folder is refused."""
    if not out_dir:
        return {}
    if not os.path.isdir(out_dir) and os.path.exists(out_dir):
        raise UsageError(f"--out-dir {out_dir}: exists and is not a folder")
    return {k: os.path.join(out_dir, f) for k, f in OUT_FILES}


def settings_options(method: str, opts: dict, *, quadrature: int, c_prior: str, device: str) -> dict:
    """The keyword arguments of estimators.make_settings for `method` from the command's flags."""
    options = {k: opts[k] for k in SETTING_FLAGS}
    options.update(n_nodes=quadrature, c_prior=beta_pair(c_prior, "--c-prior"), device=device)
    if method == "vi":
        options["prior"] = opts["vi_prior"]
    return options


def write_fit(result, paths: dict, force: bool) -> None:
    """items.csv, abilities.csv and fit.json of a fit (the folder is created if needed)."""
    from methodkit.core import io

    os.makedirs(os.path.dirname(paths["fit"]) or ".", exist_ok=True)
    io.write_table(result.items_frame(), paths["items"], "csv", force=force)
    io.write_table(result.abilities_frame(), paths["abilities"], "csv", force=force)
    io.write_json(result.info, paths["fit"], force=force, indent=1)


def read_fit(path: str):
    """(Estimate, item ids, model ids, fit.json or {}) from an irt-fit output folder."""
    from methodkit.core import io
    from methodkit.tools.irt.result import Estimate

    if not os.path.isdir(path):
        raise DataError(f"--fit {path}: not a folder (pass the --out-dir of irt-fit fit)")
    items = io.read_table(os.path.join(path, "items.csv"))
    abilities = io.read_table(os.path.join(path, "abilities.csv"))
    io.require_columns(items, ["item_id", "a", "b", "c"])
    io.require_columns(abilities, ["model_id", "theta"])

    def col(frame, key):
        return io.numeric_matrix(frame, [key], allow_nonfinite=True)[:, 0] if key in frame.columns else None

    est = Estimate(
        a=col(items, "a"),
        b=col(items, "b"),
        c=col(items, "c"),
        theta=col(abilities, "theta"),
        theta_sd=col(abilities, "sd"),
    )
    for name in ("a", "b", "c"):
        setattr(est, f"{name}_low", col(items, f"{name}_ci_low"))
        setattr(est, f"{name}_high", col(items, f"{name}_ci_high"))
    fit_json = os.path.join(path, "fit.json")
    info = io.read_json(fit_json) if os.path.exists(fit_json) else {}
    return est, items["item_id"].astype(str).to_numpy(), abilities["model_id"].astype(str).to_numpy(), info


def align(truth_data, est, item_id, model_id, fit_dir: str):
    """(truth, estimate) on the same models and items in the same order: a --drop-extreme fit covers a subset."""
    rows = _index(truth_data.model_id, model_id, "model", fit_dir)
    cols = _index(truth_data.item_id, item_id, "item", fit_dir)
    if len(rows) != len(truth_data.model_id) or len(cols) != len(truth_data.item_id):
        return truth_data.subset(rows, cols), est
    return truth_data, _reorder(est, np.argsort(rows), np.argsort(cols))


def _index(truth_ids, fit_ids, what, fit_dir):
    position = {v: i for i, v in enumerate(truth_ids)}
    missing = [v for v in fit_ids if v not in position]
    if missing:
        raise DataError(f"--fit {fit_dir}: {what} '{missing[0]}' is not in the truth file ({len(missing)} unknown)")
    return np.array([position[v] for v in fit_ids])


def _reorder(est, order_r, order_c):
    for name in ("a", "b", "c", "a_low", "a_high", "b_low", "b_high", "c_low", "c_high"):
        value = getattr(est, name)
        if value is not None:
            setattr(est, name, value[order_c])
    est.theta = est.theta[order_r]
    if est.theta_sd is not None:
        est.theta_sd = est.theta_sd[order_r]
    return est

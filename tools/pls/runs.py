"""What pls-test's verbs assemble around the tests: -k parsing, designs from every input kind, the
--directions learner, and the side tables (--per-split, --null, --loadings, --coef)."""

from __future__ import annotations

import numpy as np

from methodkit.core.errors import DataError, UsageError


def parse_ks(text: str | None) -> list[int]:
    """-k K[,K...] (pre-specified: auto is refused, choosing K on the same data invalidates the test)."""
    if text is None:
        raise UsageError("-k/--components is required: pre-specify K (e.g. -k 3, or -k 1,2,3 for separate tests)")
    if text.strip().lower() == "auto":
        raise UsageError(
            "-k auto is refused: choosing K on the same data invalidates the test; pre-specify K (e.g. -k 3), "
            "or explore with --select-k KMAX (its p-values are not valid)"
        )
    try:
        ks = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"-k/--components '{text}': expected an integer or a comma list such as 1,2,3") from None
    if not ks or min(ks) < 1:
        raise UsageError(f"-k/--components '{text}': every K must be >= 1")
    return ks


def parse_sizes(sizes: str) -> list[int]:
    try:
        return [int(s) for s in sizes.split(",") if s.strip()]
    except ValueError:
        raise UsageError(f"-n/--sizes '{sizes}': expected a comma list of integers") from None


def parse_methods(method_list: str) -> list[str]:
    chosen = [m.strip() for m in method_list.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in ("nb", "nb-perm", "cvq2-perm", "jackknife")]
    if unknown or not chosen:
        raise UsageError(
            f"--methods: unknown {', '.join(unknown) or '(none)'}; choose from nb, nb-perm, cvq2-perm, jackknife"
        )
    return chosen


def load_design(run, source: str, target, x_glob, x_range, y_path, drop_nonnumeric, dropna, weights=None):
    """DATA (+ --weights COL or W.npy) as a checked design; `run` reads the inputs (cli._common.Run)."""
    from methodkit.core import io
    from methodkit.tools.pls import data

    from_file = weights is not None and weights.endswith(".npy")
    column = None if weights is None or from_file else weights
    design = _read_design(run, source, target, x_glob, x_range, y_path, drop_nonnumeric, dropna, column)
    if from_file:
        w = io.read_arrays(run.input_bytes(weights))
        design = data.with_weights(design, next(iter(w.values())), f"--weights {weights}")
    return design


def _read_design(run, source, target, x_glob, x_range, y_path, drop_nonnumeric, dropna, weights):
    """DATA as CSV/TSV/Parquet/JSONL, NPZ (X, y[, weights key]), an .npy pair (DATA + --y) or builtin:NAME[:target]."""
    from methodkit.core import io
    from methodkit.tools.pls import data, sources

    table = {"drop_nonnumeric": drop_nonnumeric, "dropna": dropna, "weights": weights}
    if source.startswith("builtin:"):
        frame, target, x_glob = sources.builtin(source, target, x_glob, x_range)
        return data.from_frame(frame, target, x_glob=x_glob, x_range=x_range, **table)
    kind = io.format_from_path(source, run.params.get("in_format"), "csv") if source != "-" else None
    if kind == "npz":
        arrays = io.read_arrays(run.input_bytes(source))
        missing = [k for k in ("X", "y") if k not in arrays]
        if missing:
            raise DataError(f"{source}: NPZ needs arrays 'X' and 'y' (has: {', '.join(arrays) or 'none'})")
        design = data.from_arrays(arrays["X"], arrays["y"], source)
        if weights is not None:
            if weights not in arrays:
                raise DataError(f"--weights {weights}: no array '{weights}' in {source} (has: {', '.join(arrays)})")
            design = data.with_weights(design, arrays[weights], f"--weights {weights}")
        return design
    if kind == "npy":
        arrays = io.read_arrays(run.input_bytes(source))
        if weights is not None:
            raise UsageError(f"--weights {weights}: with an .npy X pass the weights as W.npy")
        if not y_path:
            raise UsageError(f"{source}: an .npy X needs its y: pass --y Y.npy")
        y_arrays = io.read_arrays(run.input_bytes(y_path))
        return data.from_arrays(arrays["arr_0"], next(iter(y_arrays.values())), source)
    return data.from_frame(run.read_table(source), target, x_glob=x_glob, x_range=x_range, **table)


def directions(text: str, run):
    """--directions pls | spca | fixed:W.npy -> (kind, W or None)."""
    from methodkit.core import io

    if text in ("pls", "spca"):
        return text, None
    if text.startswith("fixed:") and len(text) > 6:
        arrays = io.read_arrays(run.input_bytes(text[6:]))
        W = next(iter(arrays.values())) if len(arrays) == 1 else arrays.get("W")
        if W is None:
            raise DataError(f"--directions {text}: expected one array (or an NPZ with 'W')")
        if W.ndim == 1:
            W = W[:, None]
        if W.ndim != 2 or W.dtype.kind not in "fiu":
            raise DataError(f"--directions {text}: W must be a numeric p x K matrix, got shape {W.shape}")
        return "fixed", W.astype(float)
    raise UsageError(f"--directions '{text}': expected pls, spca or fixed:W.npy")


# ---------------------------------------------------------------- side tables of `test`

PER_SPLIT_COLUMNS = ["method", "k", "split", "n_train", "n_test", "r", "z", "degenerate", "truncated"]


def per_split_table(results):
    import pandas as pd

    frames = [pd.DataFrame({"method": r.method, "k": r.k, **r.per_split}) for r in results if r.per_split]
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=PER_SPLIT_COLUMNS)
    return table[PER_SPLIT_COLUMNS]


def null_arrays(results, null_path: str) -> dict:
    nulls = {f"{r.method}_k{r.k}": r.null for r in results if r.null is not None}
    if not nulls:
        raise UsageError("--null: no permutation method ran (use --method nb-perm, cvq2-perm or all)")
    if null_path.endswith(".npy") and len(nulls) > 1:
        raise UsageError(f"--null {null_path}: {len(nulls)} nulls ({', '.join(nulls)}); use a .npz path")
    return nulls


def _components(values, K_max: int) -> dict:
    return {f"comp_{j + 1}": (float(values[j]) if j < len(values) else None) for j in range(K_max)}


def loadings_table(design, loadings: dict):
    import pandas as pd

    rows = []
    K_max = max(loadings)
    for K, block in loadings.items():
        for kind in ("W", "W_varimax"):
            for name, values in zip(design.names, block[kind]):
                rows.append({"k": K, "block": kind, "name": name, **_components(values, K_max)})
        for i, values in enumerate(block["rotation"]):
            rows.append({"k": K, "block": "rotation", "name": f"comp_{i + 1}", **_components(values, K_max)})
    return pd.DataFrame(rows)


def coef_table(design, results):
    import pandas as pd

    tables = [r for r in results if r.coef_table is not None]
    if not tables:
        raise UsageError("--coef: the jackknife did not run (use --method jackknife or all)")
    columns = ("coef", "sd", "t", "df", "p", "p_holm")
    frames = [
        pd.DataFrame({"k": r.k, "variable": design.names, **{c: r.coef_table[c] for c in columns}}) for r in tables
    ]
    return pd.concat(frames, ignore_index=True)


def summary_rows(rows: list[dict]):
    """The human table of `test` (a terminal, or --format table)."""
    import pandas as pd

    keep = ["method", "k", "n", "p", "statistic", "pvalue", "reject", "n_fits", "seconds"]
    return pd.DataFrame(rows)[keep]


def bench_design(data_source, seed: int):
    """`bench`'s default data: Tecator's fat when fetched, else a simulated 215 x 100 design (None: use DATA)."""
    from methodkit.tools.pls import debian_data
    from methodkit.tools.pls.data import from_arrays
    from methodkit.tools.pls.simulate import simulate

    if data_source is None and debian_data.parquet_path("tecator").exists():
        return "builtin:tecator:fat", None
    if data_source is None:
        X, y = simulate("toeplitz0.5", 215, 100, snr=1.0, rng=np.random.default_rng(seed))
        return None, from_arrays(X, y, "simulated toeplitz0.5 215x100")
    return data_source, None

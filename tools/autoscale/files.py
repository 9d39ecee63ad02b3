"""Writing a verb's output folder: {name: (kind, value)} through core.io, every file claimed first so that
all of them land only when the whole command succeeds."""

from __future__ import annotations

from pathlib import Path


def write_folder(folder, files: dict, claim) -> None:
    """kind: arrays (NPZ/NPY), table, json, jsonl (a list of records) or call (value(path) writes it)."""
    from methodkit.core import io

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {name: folder / name for name in files}
    claim(*[str(p) for p in paths.values()])
    for name, (kind, value) in files.items():
        path = paths[name]
        if kind == "arrays":
            io.write_arrays(path, value, force=True)
        elif kind == "table":
            io.write_table(value, path, force=True)
        elif kind == "json":
            io.write_json(value, path, force=True, indent=1)
        elif kind == "jsonl":
            with io.atomic_write(path, binary=False, force=True) as handle:
                handle.write("".join(io.dumps_json(r) + "\n" for r in value))
        elif kind == "call":
            value(path)


def pools_summary(pool_rows: list, cand_scores, expert_index) -> dict:
    """{n, tags histogram, expert PDMS x100} of one built pool."""
    import numpy as np

    names, counts = np.unique([x["tags"] for x in pool_rows], return_counts=True)
    expert = cand_scores[np.arange(len(pool_rows)), expert_index, 5]
    return {"n": len(pool_rows), "tags": {str(a): int(b) for a, b in zip(names, counts)},
            "expert_pdms": float(100 * np.mean(expert))}  # fmt: skip

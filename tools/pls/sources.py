"""`builtin:NAME[:target]` inputs and the data set listing of `pls-test datasets`."""

from __future__ import annotations

from methodkit.core import datasets as registry
from methodkit.core.errors import DataError, UsageError
from methodkit.tools.pls import debian_data
from methodkit.tools.pls.datasets import BY_NAME


def builtin_frame(name: str):
    """A data set by name: the PLS sets from the fetch cache, else any methodkit-data set."""
    if name in BY_NAME:
        frame = debian_data.load(name)
        frame.attrs["source"] = f"builtin:{name}"
        return frame
    try:
        frame = registry.load(name)
    except DataError:
        known = ", ".join(sorted(set(BY_NAME) | set(registry.names())))
        raise DataError(f"unknown data set '{name}' (known: {known}); see 'pls-test datasets'") from None
    frame.attrs["source"] = f"builtin:{name}"
    return frame


def builtin(spec: str, target: str | None, x_glob: str | None, x_range: str | None):
    """(frame, target, x glob) for builtin:NAME[:target]; the set's own target and X columns by default."""
    parts = spec.split(":")
    if len(parts) not in (2, 3) or not parts[1]:
        raise UsageError(f"'{spec}': expected builtin:NAME or builtin:NAME:TARGET")
    name = parts[1]
    if len(parts) == 3:
        if target and target != parts[2]:
            raise UsageError(f"'{spec}' names target '{parts[2]}' but --target is '{target}'; pass one")
        target = parts[2]
    frame = builtin_frame(name)
    if name in BY_NAME:
        entry = BY_NAME[name]
        target = target or entry.target
        if x_glob is None and x_range is None and entry.x != "*":
            x_glob = entry.x
    elif target is None:
        target = registry.info(name).target
        if target is None:
            raise UsageError(f"data set '{name}' has no default target; use builtin:{name}:COLUMN")
    return frame, target, x_glob


def listing():
    import pandas as pd

    rows = []
    for entry in BY_NAME.values():
        path = debian_data.parquet_path(entry.name)
        rows.append(
            {
                "name": entry.name,
                "fetched": path.exists(),
                "target": entry.target,
                "x": entry.x,
                "source": entry.package,
                "licence": entry.licence,
                "description": entry.description,
            }
        )
    return pd.DataFrame(rows)


def fetch() -> list[str]:
    return debian_data.fetch()

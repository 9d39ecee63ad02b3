"""What concord-plan's verbs do between reading their inputs and writing their outputs.

The command module (cli/concord_plan.py) parses flags and writes results; the specs, the fixtures
index and the edits list are read and checked here, through a `read(path)` callable that returns the
input's bytes and name (cli._common.Run.input_bytes).
"""

from __future__ import annotations

from pathlib import Path

from methodkit.core.errors import DataError, UsageError
from methodkit.tools.concord import spec


def _document(read, path: str):
    data = read(path)
    return spec.parse_document(data.data, data.name), data.name


def read_model(read, path: str):
    return spec.load_model(*_document(read, path))


def read_cluster(read, path: str):
    return spec.load_cluster(*_document(read, path))


def read_specs(read, model_path: str, cluster_path: str, space_path: str | None, max_candidates=None):
    """(model, cluster, space) from their files, the model checked against the space."""
    model = read_model(read, model_path)
    cluster = read_cluster(read, cluster_path)
    space = spec.Space() if space_path is None else spec.load_space(*_document(read, space_path))
    if max_candidates is not None:
        space.max_candidates = max_candidates
    spec.check_model_fits_space(model, space, model_path if model_path != "-" else "<stdin>")
    return model, cluster, space


def sweep_inputs(read, fixtures_dir: str, edits_path: str, only: str | None) -> tuple[list, list]:
    """The fixtures (name, model, cluster, space documents) listed in DIR/fixtures.yaml, those of --only
    when given, and the edits of EDITS.yaml."""
    folder = Path(fixtures_dir)
    index_path = folder / "fixtures.yaml"
    if not index_path.is_file():
        raise DataError(f"{index_path}: no such file; create it with 'concord-plan fixtures {fixtures_dir}'")
    index, _name = _document(read, str(index_path))
    if not isinstance(index, list):
        raise DataError(f"{index_path}: expected a list of {{name, model, cluster, space}}")
    wanted = set(only.split(",")) if only else None
    fixtures = []
    for i, entry in enumerate(index):
        if not isinstance(entry, dict) or not {"name", "model", "cluster"} <= set(entry):
            raise DataError(f"{index_path}: [{i}]: expected keys name, model, cluster (and optional space)")
        if wanted and entry["name"] not in wanted:
            continue
        docs = [
            None if entry.get(key) is None else _document(read, str(folder / entry[key]))[0]
            for key in ("model", "cluster", "space")
        ]
        fixtures.append((entry["name"], *docs))
    if wanted and len(fixtures) != len(wanted):
        raise UsageError(f"--only: unknown fixture(s) {', '.join(sorted(wanted - {f[0] for f in fixtures}))}")
    edits, name = _document(read, edits_path)
    if not isinstance(edits, list) or not all(isinstance(e, dict) and "op" in e for e in edits):
        raise DataError(f"{name}: expected a list of edits with an 'op' key")
    return fixtures, edits


def reference_table(read, table_path: str | None):
    """The published table to check against: TABLE.yaml, else Narayanan et al. 2021, Table 1."""
    from methodkit.tools.concord import reference

    if table_path is None:
        return reference.load_table(reference.builtin_table(), "narayanan2021-table1")
    return reference.load_table(*_document(read, table_path))


def reference_summary_line(summary: dict, tolerance: float, source: str) -> str:
    return (
        f"{summary['within']}/{summary['rows']} rows within +-{tolerance:.0%} of {source}; "
        f"predicted/published {summary['ratio_min']:.2f}..{summary['ratio_max']:.2f} "
        f"(median {summary['ratio_median']:.2f})"
    )


def reference_failure(rows: list, summary: dict, tolerance: float) -> str | None:
    """The --check message when some row misses the tolerance, else None."""
    if summary["within"] >= summary["rows"]:
        return None
    missed = ", ".join(f"{r['params_b']}B ({r['ratio']:.2f})" for r in rows if not r["within"])
    return f"{summary['rows'] - summary['within']} row(s) outside +-{tolerance:.0%}: {missed}"


def check_plan_document(document, name: str) -> None:
    if not isinstance(document, dict) or "layers" not in document or "best" not in document:
        raise DataError(f"{name}: not a concord-plan plan (no 'best' and 'layers'); make one with 'concord-plan plan'")


def cache_verb(folder: str, verb: str, older_than_days: float | None = None) -> dict:
    """What `concord-plan cache stats|gc|clear DIR` reports (the cache must already exist)."""
    from contextlib import closing

    from methodkit.tools.concord.cache import open_existing
    from methodkit.tools.concord.explain import current_templates

    with closing(open_existing(folder)) as cache:
        if verb == "stats":
            return cache.stats()
        if verb == "gc":
            removed = cache.gc(current_templates(), None if older_than_days is None else older_than_days * 86400)
        else:
            removed = cache.clear()
        return {"removed": removed, **cache.stats()}

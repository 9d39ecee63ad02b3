"""Constraint specs of the three tasks, written with the public templates (what a user would write).

The tasks never bypass the compiler: a Sudoku is 81 categoricals plus all_different rows,
a Warcraft map a flow_path, an addition a digit_sum. Compiled programs are cached per shape.
"""

from __future__ import annotations

import functools
import math

from methodkit.core.errors import DataError


def sudoku_spec(size: int = 9, clues: dict | None = None) -> dict:
    """A size x size Sudoku (size a square number): all_different over rows, columns and boxes."""
    box = math.isqrt(size)
    if size < 1 or box * box != size:
        raise DataError(f"a Sudoku side must be a square number (4, 9, 16...), got {size}")
    cell = lambda r, c: f"r{r}c{c}"  # noqa: E731
    variables = [{"name": cell(r, c), "domain": size} for r in range(size) for c in range(size)]
    constraints = []
    for r in range(size):
        constraints.append({"type": "all_different", "vars": [cell(r, c) for c in range(size)]})
    for c in range(size):
        constraints.append({"type": "all_different", "vars": [cell(r, c) for r in range(size)]})
    for br in range(box):
        for bc in range(box):
            cells = [cell(br * box + i, bc * box + j) for i in range(box) for j in range(box)]
            constraints.append({"type": "all_different", "vars": cells})
    for (r, c), v in (clues or {}).items():
        if not 0 <= v < size:
            raise DataError(f"clue at row {r}, column {c}: value {v} is outside 0..{size - 1}")
        constraints.append({"type": "fixed", "var": cell(r, c), "value": int(v)})
    return {"variables": variables, "constraints": constraints}


def grid_path_spec(n: int, neighborhood: int = 8) -> dict:
    """A path from the top-left to the bottom-right cell of an n x n grid."""
    return {
        "variables": [],
        "constraints": [
            {"type": "flow_path", "grid": n, "source": [0, 0], "target": [n - 1, n - 1], "neighborhood": neighborhood}
        ],
    }


def addition_spec(n_digits: int, base: int = 10, sum_digits: list | None = None) -> dict:
    """a + b = s for N-digit a, b (digits least significant first) and N+1-digit s; optionally clamp s."""
    a = [f"a{i}" for i in range(n_digits)]
    b = [f"b{i}" for i in range(n_digits)]
    s = [f"s{i}" for i in range(n_digits + 1)]
    variables = [{"name": v, "domain": base} for v in (*a, *b, *s)]
    constraints = [{"type": "digit_sum", "a": a, "b": b, "s": s, "base": base}]
    for i, v in enumerate(sum_digits or []):
        constraints.append({"type": "fixed", "var": s[i], "value": int(v)})
    return {"variables": variables, "constraints": constraints}


@functools.lru_cache(maxsize=16)
def compiled(kind: str, size: int, check: bool = True):
    """The compiled program of a task shape ('sudoku', 'grid', 'addition')."""
    from methodkit.tools.casper.compiler import compile_spec

    spec = {"sudoku": sudoku_spec, "grid": grid_path_spec, "addition": addition_spec}[kind](size)
    return compile_spec(spec, check_feasible=check)

"""A compiled constraint program: P = {y : A y = b, l <= y <= u} over binary variables plus slacks.

The compiler (`compiler.py`) builds it from a JSON spec; `project`, the decoders and the
certificate read it. It is saved as one NPZ (sparse A as CSR arrays, the variable table and
the template metadata as JSON text), so nothing in it needs pickle.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from methodkit.core.errors import DataError

STRUCTURES = ("onehot", "flow", "chain", "assignment", "general")
FORMAT_VERSION = 1


@dataclass
class Program:
    """Equality system over n variables; the first `n_user` are the binary ones a predictor scores."""

    A: sp.csr_matrix  # (m, n) float64, integer-valued for the exact templates
    b: np.ndarray  # (m,)
    lower: np.ndarray  # (n,)
    upper: np.ndarray  # (n,), inf for slacks
    names: list[str]  # n names; slacks are "~slack<k>"
    n_user: int
    group: np.ndarray  # (n_user,) one-hot group id per variable, -1 for booleans
    row_template: np.ndarray  # (m,) index of the template that made each row
    structure: str
    templates: list[dict]  # the resolved templates (type + what the certificate needs)
    variables: list[dict]  # the spec's variables with their offset into y
    dropped_rows: int = 0  # linearly dependent rows removed at compile time
    extra: dict = field(default_factory=dict)  # backend data (flow edges, chain index tables...)

    @property
    def n(self) -> int:
        return self.A.shape[1]

    @property
    def m(self) -> int:
        return self.A.shape[0]

    @property
    def user_names(self) -> list[str]:
        return self.names[: self.n_user]

    def summary(self) -> dict:
        integral = self.structure in ("onehot", "assignment", "flow")
        return {
            "n_vars": self.n_user,
            "n_slacks": self.n - self.n_user,
            "n_rows": self.m,
            "dropped_rows": self.dropped_rows,
            "structure": self.structure,
            "backends": {"soft": soft_backend(self), "hard": HARD_BACKENDS[self.structure]},
            "tu": self.structure in ("onehot", "assignment", "flow"),
            "integral_polytope": integral,
            "templates": _count([t["type"] for t in self.templates if not t.get("implied")]),
        }

    # ---- persistence
    def to_bytes(self) -> bytes:
        A = self.A.tocsr()
        header = {
            "version": FORMAT_VERSION,
            "names": self.names,
            "n_user": self.n_user,
            "structure": self.structure,
            "templates": self.templates,
            "variables": self.variables,
            "dropped_rows": self.dropped_rows,
        }
        arrays = {
            "A_data": A.data,
            "A_indices": A.indices.astype(np.int64),
            "A_indptr": A.indptr.astype(np.int64),
            "A_shape": np.array(A.shape, dtype=np.int64),
            "b": self.b,
            "lower": self.lower,
            "upper": self.upper,
            "group": self.group,
            "row_template": self.row_template,
            "header": np.array(json.dumps(header)),
        }
        for key, value in self.extra.items():
            arrays[f"extra_{key}"] = np.asarray(value)
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        return buffer.getvalue()

    @classmethod
    def from_arrays(cls, arrays: dict, name: str = "program") -> Program:
        needed = ("A_data", "A_indices", "A_indptr", "A_shape", "b", "lower", "upper", "header")
        missing = [k for k in needed if k not in arrays]
        if missing:
            raise DataError(f"{name}: not a casper program (missing {', '.join(missing)}); make one with 'compile'")
        header = json.loads(str(arrays["header"]))
        if header.get("version") != FORMAT_VERSION:
            raise DataError(f"{name}: program format {header.get('version')} is not {FORMAT_VERSION}; recompile it")
        shape = tuple(int(v) for v in arrays["A_shape"])
        A = sp.csr_matrix((arrays["A_data"], arrays["A_indices"], arrays["A_indptr"]), shape=shape)
        extra = {k[len("extra_") :]: v for k, v in arrays.items() if k.startswith("extra_")}
        return cls(
            A=A,
            b=np.asarray(arrays["b"], dtype=np.float64),
            lower=np.asarray(arrays["lower"], dtype=np.float64),
            upper=np.asarray(arrays["upper"], dtype=np.float64),
            names=list(header["names"]),
            n_user=int(header["n_user"]),
            group=np.asarray(arrays["group"], dtype=np.int64),
            row_template=np.asarray(arrays["row_template"], dtype=np.int64),
            structure=header["structure"],
            templates=header["templates"],
            variables=header["variables"],
            dropped_rows=int(header.get("dropped_rows", 0)),
            extra=extra,
        )


HARD_BACKENDS = {
    "onehot": "argmax",
    "flow": "dijkstra",
    "chain": "viterbi",
    "assignment": "hungarian",
    "general": "milp-highs",
}


def soft_backend(program: Program) -> str:
    """Which exact projection applies: per-group sparsemax when only one-hot rows, else semismooth Newton."""
    return "sparsemax" if onehot_only(program) else "semismooth-newton"


def onehot_only(program: Program) -> bool:
    """Every row is one disjoint one-hot group over [0,1] variables, and there are no slacks."""
    if program.n != program.n_user:
        return False
    if not (np.all(program.lower == 0) and np.all(program.upper == 1)):
        return False
    A = program.A.tocsr()
    if A.nnz and not np.all(A.data == 1):
        return False
    if not np.all(program.b == 1):
        return False
    return bool(np.all(np.bincount(A.indices, minlength=program.n) <= 1))


def separable_rows(program: Program) -> bool:
    """No variable lies in two rows (and there is at least one row): the projection splits into one
    scalar threshold per row (exactly_k / at_most_k: a capped simplex; one linear row; fixed values)."""
    A = program.A.tocsc()
    if program.m == 0 or not np.all(A.data != 0):
        return False
    return bool(np.all(np.diff(A.indptr) <= 1))


def _count(kinds: list) -> dict:
    out: dict = {}
    for kind in kinds:
        out[kind] = out.get(kind, 0) + 1
    return out

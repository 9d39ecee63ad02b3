"""One-hot (dummy-coded) column groups: detection and the plausibility checks they need (issue 34 §1).

A group is >= 2 numeric 0/1 columns sharing a name prefix (up to a '_' or '.', as pandas.get_dummies
and caret's dummyVars write them) whose values sum to 1 on every row. Moving one member alone leaves
a row with zero or two levels set, which no real record has.
"""

from __future__ import annotations

import re

import numpy as np

from methodkit.core.errors import UsageError

_SEPARATOR = re.compile(r"[_.]")


def binary_columns(X: np.ndarray, features: list[str], candidates: list[int]) -> list[int]:
    """Indices among `candidates` whose finite values are all 0 or 1 (and not all missing)."""
    out = []
    for j in candidates:
        col = X[:, j][np.isfinite(X[:, j])]
        if col.size and np.all((col == 0) | (col == 1)):
            out.append(j)
    return out


def detect_groups(X: np.ndarray, features: list[str], candidates: list[int]) -> dict[str, list[int]]:
    """prefix -> member indices. Prefixes are tried longest first, each over the binary columns no longer
    prefix has claimed, so 'status_sex_A91' joins 'status_sex' and 'status_A11' still forms 'status'."""
    binary = binary_columns(X, features, candidates)
    prefixes = {features[j][: m.start()] for j in binary for m in _SEPARATOR.finditer(features[j])}
    groups: dict[str, list[int]] = {}
    taken: set[int] = set()
    for prefix in sorted(prefixes, key=lambda p: (-len(p), p)):
        cut = len(prefix)
        members = [
            i
            for i in binary
            if i not in taken and features[i].startswith(prefix) and len(features[i]) > cut + 1
            and _SEPARATOR.match(features[i][cut])
        ]  # fmt: skip
        if len(members) >= 2 and np.all(np.nansum(X[:, members], axis=1) == 1):
            groups[prefix] = members
            taken.update(members)
    return dict(sorted(groups.items()))


def named_groups(prefixes: list[str], features: list[str], candidates: list[int]) -> dict[str, list[int]]:
    """Groups given by --one-hot PREFIX,...: every candidate column named PREFIX<sep>LEVEL."""
    out = {}
    for prefix in prefixes:
        members = [
            j
            for j in candidates
            if features[j].startswith(prefix) and _SEPARATOR.match(features[j][len(prefix) :] or " ")
        ]
        if len(members) < 2:
            raise UsageError(
                f"--one-hot: '{prefix}' names {len(members)} numeric PREFIX_LEVEL column(s); a group needs 2"
            )
        out[prefix] = members
    return out


def violations(X_rows: np.ndarray, groups: dict[str, list[int]], binary: list[int]) -> dict:
    """Counts over the given rows: one-hot groups not summing to 1, binary cells not 0/1."""
    group_bad = 0
    for members in groups.values():
        sums = np.nansum(X_rows[:, members], axis=1)
        group_bad += int(np.sum(sums != 1))
    cells = X_rows[:, binary] if binary else np.zeros((len(X_rows), 0))
    finite = np.isfinite(cells)
    binary_bad = int(np.sum(finite & (cells != 0) & (cells != 1)))
    return {"onehot_violations": group_bad, "binary_violations": binary_bad, "onehot_groups": sorted(groups)}

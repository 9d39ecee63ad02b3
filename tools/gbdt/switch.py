"""A one-hot group moved as one categorical: a poisoned row switches its level (issue 34 §1).

A dummy-coded categorical (onehot.py) is one feature to the attacker: a row may take another level of
the group, never zero or two levels. Plausibility for a switch (ours; the paper gives no rule for
categories): the new level must be common among the train rows of the row's own class (a share of at
least MIN_SHARE), and a row switches at most one group. Which groups may switch: those that rank
among the top --dims units (numeric columns and whole groups) by split gain (a group's gain is the
sum of its members'), or at random for --dim-rank random, or named by prefix in --dims-list.

The state S is (B, G): the level (member position) each poisoned row holds in each switchable group.
The oracle sees the group members as extra cells of the moved rows (`cols`, `values`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_SHARE = 0.01  # a level held by fewer of the row's class than this is not a plausible target


@dataclass
class Switches:
    prefixes: list[str]
    members: list[list[int]]  # column indices of each group, in level order
    allowed: np.ndarray  # (B, G, L) bool: level l of group g is a plausible target for row b
    S0: np.ndarray  # (B, G) level of each row as read (-1: the row is not a valid one-hot in g)

    @property
    def cols(self) -> np.ndarray:
        """(m,) all member columns, group after group."""
        return np.asarray([j for members in self.members for j in members], dtype=np.int64)

    def values(self, S: np.ndarray) -> np.ndarray:
        """(B, m) 0/1 member values of the state S."""
        out = np.zeros((S.shape[0], len(self.cols)))
        start = 0
        for g, members in enumerate(self.members):
            live = S[:, g] >= 0
            out[np.flatnonzero(live), start + S[live, g]] = 1.0
            start += len(members)
        return out

    def candidates(self, S: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row, group, level) of every allowed switch away from S; at most one group per row differs from S0."""
        rows, groups, levels = [], [], []
        for b in range(S.shape[0]):
            moved = np.flatnonzero(S[b] != self.S0[b])
            for g in moved if moved.size else range(len(self.members)):
                for level in np.flatnonzero(self.allowed[b, g]):
                    if level != S[b, g]:
                        rows.append(b)
                        groups.append(g)
                        levels.append(int(level))
        as_int = lambda v: np.asarray(v, dtype=np.int64)  # noqa: E731
        return as_int(rows), as_int(groups), as_int(levels)

    def apply(self, X_rows: np.ndarray, groups: np.ndarray, levels: np.ndarray) -> np.ndarray:
        """Copies of X_rows with row c switched to level levels[c] of group groups[c]."""
        out = X_rows.copy()
        for c, (g, level) in enumerate(zip(groups, levels)):
            members = self.members[g]
            out[c, members] = 0.0
            out[c, members[level]] = 1.0
        return out


def none(n_rows: int) -> Switches:
    return Switches([], [], np.zeros((n_rows, 0, 0), dtype=bool), np.zeros((n_rows, 0), dtype=np.int64))


def build(X_tr: np.ndarray, y_tr: np.ndarray, rows: np.ndarray, groups: dict[str, list[int]], chosen: list[str]):
    """The Switches of the poisoned `rows` for the groups named in `chosen`."""
    if not chosen:
        return none(len(rows))
    members = [list(groups[prefix]) for prefix in chosen]
    width = max(len(m) for m in members)
    allowed = np.zeros((len(rows), len(members), width), dtype=bool)
    S0 = np.full((len(rows), len(members)), -1, dtype=np.int64)
    for g, cols in enumerate(members):
        block = X_tr[:, cols]
        valid = np.all(np.isfinite(block), axis=1) & (np.sum(block, axis=1) == 1) & np.all(block >= 0, axis=1)
        for c in (0, 1):
            in_class = valid & (y_tr == c)
            share = block[in_class].sum(axis=0) / max(int(in_class.sum()), 1)
            mine = (y_tr[rows] == c) & valid[rows]
            allowed[np.flatnonzero(mine), g, : len(cols)] = share >= MIN_SHARE
        S0[valid[rows], g] = np.argmax(X_tr[rows][valid[rows]][:, cols], axis=1)
    return Switches(list(chosen), members, allowed, S0)


def chosen_groups(groups: dict[str, list[int]], gains, numeric_gain: list[float], k: int, how: str, rng) -> list[str]:
    """Groups that rank among the top k units (numeric columns + groups): by gain, or at random."""
    if not groups or how not in ("gain", "random"):
        return []
    prefixes = sorted(groups)
    if how == "gain":
        units = [(-float(sum(gains[j] for j in groups[p])), 0, p) for p in prefixes]
        units += [(-float(g), 1, "") for g in numeric_gain]
        return sorted(p for _, _, p in sorted(units)[:k] if p)
    pick = rng.permutation(len(prefixes) + len(numeric_gain))[:k]
    return sorted(prefixes[i] for i in pick if i < len(prefixes))

"""Small shared fixtures for the gbdt-poison tests: a generated table and a fitted victim."""

from __future__ import annotations

import numpy as np

from methodkit.tools.gbdt import data, synth
from methodkit.tools.gbdt.victim import Victim, leaf_indices, parse_trees

FAST = '{"num_boost_round": 30, "num_leaves": 15}'


def problem(n: int = 400, seed: int = 0, with_test: bool = True):
    train = synth.tabular(n, seed=seed)
    test = synth.tabular(n, seed=seed + 1000) if with_test else None
    return data.prepare(train, test, label="label", val_frac=0.25, seed=seed)


def fitted(n: int = 400, seed: int = 0, rounds: int = 30):
    p = problem(n, seed)
    victim = Victim.from_json(f'{{"num_boost_round": {rounds}, "num_leaves": 15}}', threads=1, seed=seed)
    booster = victim.fit(p.X_tr, p.y_tr, p.cat_idx)
    trees = parse_trees(booster, p.y_tr, victim.full_params())
    return p, victim, booster, trees, leaf_indices(booster, p.X_tr), leaf_indices(booster, p.X_v)


def random_spd(rng, k):
    A = rng.standard_normal((k, k))
    return A @ A.T + 0.1 * np.eye(k)

"""Data sets: collection layout, the checks of validate(), ids and forget-set refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from methodkit.core.errors import DataError
from methodkit.tools.cure import data as D


def test_collect_layout_contributors_and_style(tiny_ds):
    a, starts = tiny_ds.arrays, tiny_ds.starts
    assert set(D.ARRAY_KEYS) <= set(a)
    assert np.all(np.diff(starts) == 40)
    fmix = tiny_ds.ids_of("F-mix")
    assert a["traj_styled"][fmix].sum() == len(fmix) // 2
    styled_rows = tiny_ds.rows_of(np.flatnonzero(a["traj_styled"]))  # training and held-out
    plain_rows = np.setdiff1d(np.arange(len(a["rewards"])), styled_rows)
    assert a["style_on"][styled_rows].any() and not a["style_on"][plain_rows].any()
    on = styled_rows[a["style_on"][styled_rows]]
    assert (a["observations"][on, 2] > 0).all()  # the style fires only while obs[2] > 0
    assert len(tiny_ds.ids_of("R", split=1)) > 0 and len(tiny_ds.ids_of("F-disjoint", split=1)) == 0
    assert D.summary(tiny_ds)["transitions"] == len(a["rewards"])


def test_collect_is_deterministic_for_a_seed():
    spec = D.Spec.parse({**D.default_spec(scale=0.02, chunk=20), "behaviour_iters": 1})  # ARS behaviour
    one, two = D.collect(spec, seed=3), D.collect(spec, seed=3)
    assert json.loads(str(one["meta"]))["sha256"] == json.loads(str(two["meta"]))["sha256"]
    assert json.loads(str(D.collect(spec, seed=4)["meta"]))["sha256"] != json.loads(str(one["meta"]))["sha256"]


def _with(ds, **changes):
    arrays = {**ds.arrays, **changes}
    meta = dict(ds.meta)
    meta["sha256"] = D.arrays_sha256(arrays)
    arrays["meta"] = np.array(json.dumps(meta))
    return arrays


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda a: {"rewards": np.where(np.arange(len(a["rewards"])) == 3, np.nan, a["rewards"])}, "1 non-finite values in rewards"),
        (lambda a: {"actions": a["actions"] * 3}, "actions outside [-1, 1]"),
    ],
)
def test_validate_refuses_bad_arrays(tiny_ds, edit, message):
    with pytest.raises(DataError, match=message.replace("[", r"\[").replace("]", r"\]")):
        D.validate(_with(tiny_ds, **edit(tiny_ds.arrays)), "x.npz")


def test_validate_refuses_short_trajectories_and_edited_arrays(tiny_ds):
    tid = tiny_ds.arrays["traj_id"].copy()
    n = tiny_ds.n_traj
    tid[-1] = n  # a one-step trajectory at the end
    split = np.append(tiny_ds.arrays["traj_split"], 0).astype(np.int8)
    styled = np.append(tiny_ds.arrays["traj_styled"], False)
    with pytest.raises(DataError, match="1 trajectories shorter than 2 steps"):
        D.validate(_with(tiny_ds, traj_id=tid, traj_split=split, traj_styled=styled), "x.npz")
    arrays = {**tiny_ds.arrays, "meta": np.array(json.dumps(tiny_ds.meta))}
    arrays["rewards"] = arrays["rewards"] + 1
    with pytest.raises(DataError, match="do not match the sha256"):
        D.validate(arrays, "x.npz")


def test_forget_ids_checks(tiny_ds):
    train = tiny_ds.train_ids()
    held = np.flatnonzero(tiny_ds.arrays["traj_split"] == 1)
    assert D.read_ids("# ids\n3\n 4 # four\n\n") == [3, 4]
    with pytest.raises(DataError, match="line 2"):
        D.read_ids("1\nx\n")
    with pytest.raises(DataError, match="duplicated ids 3"):
        D.check_forget_ids(tiny_ds, [3, 3])
    with pytest.raises(DataError, match="ids not in"):
        D.check_forget_ids(tiny_ds, [10**6])
    with pytest.raises(DataError, match="held-out"):
        D.check_forget_ids(tiny_ds, [int(held[0])])
    with pytest.raises(DataError, match="retained set is empty"):
        D.check_forget_ids(tiny_ds, train)
    ids, warnings = D.check_forget_ids(tiny_ds, train[:2], exclude=[int(train[0])])
    assert len(ids) == 2 and "also in --exclude" in warnings[0]


def test_spec_refusals():
    with pytest.raises(DataError, match="chunk must be"):
        D.Spec.parse({**D.default_spec(), "chunk": 1})
    with pytest.raises(DataError, match="unknown keys"):
        D.Spec.parse({**D.default_spec(), "colour": 1})
    with pytest.raises(DataError, match="environment 'NoSuchEnv-v0'"):
        D.make_env("NoSuchEnv-v0")

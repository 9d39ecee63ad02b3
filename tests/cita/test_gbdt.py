"""The gbdt baseline ranker: Borda grades, lambdarank on a constructed case, the CLI round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

from methodkit.tools.cita import gbdt
from methodkit.tools.cita.cim import SOURCE_CODE, PairSet


def test_borda_points_and_grades_known_answer():
    # one group of rows 0..3: 0 ≻ 1, 0 ≻ 2, 1 ≻ 2 (soft 0.75), 3 vs 2 a tie (0.5), 3 ≻ 1 with weight 2
    pa, pb = np.array([0, 0, 1, 3, 3]), np.array([1, 2, 2, 2, 1])
    y, w = np.array([1.0, 1.0, 0.75, 0.5, 1.0]), np.array([1.0, 1.0, 1.0, 1.0, 2.0])
    pts = gbdt.borda_points(4, pa, pb, y, w)
    np.testing.assert_allclose(pts, [2.0, 0.75, 0.75, 2.5])
    grades = gbdt.grades_of(pts, [np.arange(4)])
    assert grades.tolist() == [1, 0, 0, 2]
    # two groups are graded separately
    pts2 = np.array([5.0, 1.0, 3.0, 3.0, 9.0])
    assert gbdt.grades_of(pts2, [np.array([0, 1]), np.array([2, 3, 4])]).tolist() == [1, 0, 0, 0, 1]


def _constructed(n_ctx=60, k=5, seed=0):
    """Contexts whose logged call (candidate 0) has feature 0 in [0.4, 2], its negatives in [-2, 0.5]."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_ctx * k, 6)).astype(np.float32)
    point, pa, pb = {}, [], []
    for c in range(n_ctx):
        rows = np.arange(c * k, (c + 1) * k)
        X[rows, 0] = rng.uniform(-2.0, 0.5, size=k)
        X[rows[0], 0] = rng.uniform(0.4, 2.0)
        for j, r in enumerate(rows):
            point[(c, j)] = int(r)
        pa += [rows[0]] * (k - 1)
        pb += list(rows[1:])
    ctxs = [{"task_id": f"t{c}", "context_id": f"c{c}", "candidates": [{}] * k} for c in range(n_ctx)]
    P = len(pa)
    return PairSet(
        ctxs,
        X,
        point,
        np.array(pa),
        np.array(pb),
        np.ones(P, np.float32),
        np.ones(P, np.float32),
        np.full(P, SOURCE_CODE["B"]),
        ["-"] * P,
        np.zeros(0, np.int64),
        np.zeros(0, np.float32),
    )


def test_lambdarank_ranks_the_constructed_case():
    train_set, test_set = _constructed(seed=0), _constructed(seed=1)
    model, info = gbdt.train(train_set, gbdt.GbdtSpec(lambdas={"B": 1.0}, trees=50, seed=0))
    assert info["max_grade"] == 1
    f = model.score(test_set.X).reshape(60, 5)
    assert (f.argmax(axis=1) == 0).mean() >= 0.9
    again = gbdt.GbdtRanker.from_string(model.to_string()).score(test_set.X)
    np.testing.assert_array_equal(again, model.score(test_set.X))


@pytest.fixture(scope="module")
def gbdt_folder(sim_files, small_train_file):
    from tests.conftest import _run

    work = sim_files
    argv = ["cita-train", small_train_file, "--graph", work / "g.npz", "--ranker", "gbdt", "--trees", "30"]
    proc = _run([*argv, "--sources", "B,L", "-q", "-o", work / "gb"])
    assert proc.returncode == 0, proc.stderr.decode()
    return work


def test_cli_gbdt_train_then_rank(gbdt_folder, run_cli, one_line_error):
    side = json.loads((gbdt_folder / "gb" / "cim.json").read_text())
    assert side["ranker"] == "gbdt" and side["spec"]["kind"] == "cita-gbdt"
    assert (gbdt_folder / "gb" / "cim.lgb.txt").read_text().startswith("tree")
    assert not (gbdt_folder / "gb" / "cim.safetensors").exists()
    assert side["train"]["val_pair_acc"] is None or 0 <= side["train"]["val_pair_acc"] <= 1
    proc = run_cli(["cita-rank", gbdt_folder / "gb", gbdt_folder / "s.jsonl"])
    assert proc.returncode == 0, proc.stderr.decode()
    rows = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    n_in = len((gbdt_folder / "s.jsonl").read_text().splitlines())
    assert len(rows) == n_in
    for r in rows:
        scores = [c["score"] for c in r["ranked"] if not c["unknown_tool"]]
        assert scores == sorted(scores, reverse=True)
    # the same folder twice gives the same bytes; --ranker mlp is refused with the recorded ranker named
    assert run_cli(["cita-rank", gbdt_folder / "gb", gbdt_folder / "s.jsonl"]).stdout == proc.stdout
    refused = run_cli(["cita-rank", gbdt_folder / "gb", gbdt_folder / "s.jsonl", "--ranker", "mlp"])
    one_line_error(refused, "cita-rank", "--ranker gbdt")


@pytest.mark.slow
def test_gbdt_learns_from_bfcl_pairs(bfcl_tasks, graph):
    """On real BFCL behaviour pairs, held-out tasks: the logged call beats its negatives far above chance."""
    from methodkit.tools.cita import api, cim, simulate
    from methodkit.tools.cita.embed import Embedder

    real = api.training_contexts(bfcl_tasks[0], 0)
    pairs = cim.build_pairs(real, [], graph, Embedder("hash"), ("B",), simulate.SimConfig(rollouts=8, seed=0))
    model, info = gbdt.train(pairs, gbdt.GbdtSpec(lambdas={"B": 1.0}, trees=60, seed=0, val_fraction=0.3))
    assert info["n_val_pairs"] > 0 and info["val_pair_acc"] >= 0.75


def test_rank_reports_a_missing_model_file(gbdt_folder, tmp_path, run_cli, one_line_error):
    import shutil

    broken = tmp_path / "gb"
    shutil.copytree(gbdt_folder / "gb", broken)
    (broken / "cim.lgb.txt").unlink()
    one_line_error(run_cli(["cita-rank", broken, gbdt_folder / "s.jsonl"]), "cita-rank", "cim.lgb.txt is missing")

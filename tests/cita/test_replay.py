"""The offline replay environments (tau2-retail DB, cfb response cache): known answers and episodes."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from methodkit.core.errors import DataError
from methodkit.tools.cita import episodes, replay
from methodkit.tools.cita.generators import Pools, turns_of
from methodkit.tools.cita.records import END_TURN, canonical


@pytest.fixture(scope="module")
def tau2():
    return replay.trajectories("tau2", 24, seed=0)


@pytest.fixture(scope="module")
def cfb_tasks():
    return replay.trajectories("cfb", 24, seed=0)


def _gold(task):
    make = replay.env_factory(task)
    turns = turns_of(task)
    return make, turns, episodes.gold_env(make, turns), [c for t in turns for c in t]


def _first(task, name):
    return next(s for s in task["steps"] if s["call"]["name"] == name)


def test_generation_is_seeded_and_gold_calls_execute_cleanly(tau2, cfb_tasks):
    assert json.dumps(replay.trajectories("tau2", 24, seed=0)) == json.dumps(tau2)
    assert json.dumps(replay.trajectories("tau2", 24, seed=1)) != json.dumps(tau2)
    for tasks in (tau2, cfb_tasks):
        assert {t["split"] for t in tasks} == {"train", "test"}
        assert not any(s["error"] for t in tasks for s in t["steps"])
    # the retail mutations are the write tools; reads never change the database
    for s in (s for t in tau2 for s in t["steps"]):
        assert s["mutated"] == (not s["call"]["name"].startswith(("get_", "find_", "list_")))


def test_tau2_gold_replay_succeeds_and_a_wrong_argument_is_caught(tau2):
    task = next(t for t in tau2 if any(s["call"]["name"] == "cancel_pending_order" for s in t["steps"]))
    make, _, gold, calls = _gold(task)
    assert episodes.replay_success(make, calls, gold)
    i = next(k for k, c in enumerate(calls) if c["name"] == "cancel_pending_order")
    wrong = copy.deepcopy(calls)
    other = {"no longer needed": "ordered by mistake", "ordered by mistake": "no longer needed"}
    wrong[i]["arguments"]["reason"] = other[wrong[i]["arguments"]["reason"]]
    assert not episodes.replay_success(make, wrong, gold)  # same tool, another valid reason: another DB
    assert not episodes.replay_success(make, calls[:i] + calls[i + 1 :], gold)  # the write skipped
    env = make()
    obs, err = env.step({"name": "cancel_pending_order", "arguments": {"order_id": "#W0", "reason": "x"}})
    assert err and "Order not found" in obs
    obs, err = env.step({"name": "get_order_details", "arguments": {}})
    assert err and "missing argument(s) order_id" in obs
    obs, err = env.step({"name": "get_user_details", "arguments": {"user_id": "u", "pin": 1}})
    assert err and "unexpected argument(s) pin" in obs


def test_tau2_rules_a_cancelled_order_cannot_be_cancelled_again(tau2):
    task = next(t for t in tau2 if any(s["call"]["name"] == "cancel_pending_order" for s in t["steps"]))
    call = _first(task, "cancel_pending_order")["call"]
    env = replay.env_factory(task)()
    assert env.step(call)[1] is False
    obs, err = env.step(call)
    assert err and "Non-pending" in obs
    # a read-only lookup with a wrong id is an error but leaves the database as it was
    make, _, gold, calls = _gold(task)
    lookup = {"name": "get_order_details", "arguments": {"order_id": "#W1"}}
    assert episodes.replay_success(make, [lookup, *calls], gold)


def test_cfb_cache_replays_recorded_calls_and_misses_are_errors(cfb_tasks):
    task = cfb_tasks[0]
    make, _, gold, calls = _gold(task)
    assert episodes.replay_success(make, calls, gold)
    assert episodes.replay_success(make, [*calls, calls[0]], gold)  # a repeated read is harmless
    env = make()
    obs, err = env.step(calls[0])
    assert not err and obs == task["steps"][0]["observation"]
    swapped = copy.deepcopy(calls[-1])
    key = sorted(swapped["arguments"])[0]
    swapped["arguments"][key] = "not-a-recorded-value"
    obs, err = env.step(swapped)
    assert err and "no recorded response" in obs
    assert not episodes.replay_success(make, [*calls, swapped], gold)  # a wrong argument fails the task
    assert not episodes.replay_success(make, calls[:-1], gold)  # a recorded call never made


def _oracle(turns):
    """The gold policy: the turn's next gold call (every earlier pick was gold), else end_turn."""

    def choose(ctx):
        i = len([h for h in ctx["history"] if h["turn"] == ctx["turn"]])
        calls = turns[ctx["turn"]]
        want = canonical(calls[i] if i < len(calls) else {"name": END_TURN, "arguments": {}})
        return [canonical(c) for c in ctx["candidates"]].index(want)

    return choose


@pytest.mark.parametrize("kind", ["tau2", "cfb"])
def test_an_oracle_policy_scores_full_marks_and_random_does_not(kind, tau2, cfb_tasks):
    tasks = tau2 if kind == "tau2" else cfb_tasks
    pools = Pools([t for t in tasks if t["split"] == "train"])
    test = [t for t in tasks if t["split"] == "test"][:8]
    rows, rand = [], []
    rng = np.random.default_rng(0)
    for task in test:
        make = replay.env_factory(task)
        rows.append(episodes.run_episode(task, make, pools, _oracle(turns_of(task)), 0))
        rand.append(episodes.run_episode(task, make, pools, lambda c: rng.integers(len(c["candidates"])), 0))
    assert all(r.success and r.tool_f1 == 1.0 and r.call_f1 == 1.0 and not r.crashed for r in rows)
    assert sum(r.success for r in rand) < len(rand)


def test_oracle_values_in_the_replay_envs(tau2, cfb_tasks):
    from methodkit.tools.cita.contexts import task_contexts

    for tasks in (tau2, cfb_tasks):
        task = next(t for t in tasks if t["split"] == "test")
        make, _, gold, _ = _gold(task)
        for ctx in task_contexts(task, Pools(tasks), np.random.default_rng(0)):
            v = episodes.oracle_values(task, ctx, make, gold)
            assert v[0] == 1.0  # the logged call keeps the gold outcome
            assert set(v) <= {0.0, 1.0}


def test_records_that_cannot_be_replayed_are_refused(tau2):
    record = {**tau2[0], "env": {"kind": "tau2", "init_ref": "retail:1"}}  # an imported tau2 results run
    with pytest.raises(DataError, match="cannot be replayed"):
        replay.env_factory(record)
    with pytest.raises(DataError, match="not 'cfb'"):
        replay.check_kind(tau2[:2], "cfb", "x.jsonl")


def test_cli_replay_data_and_eval(run_cli, tmp_path):
    path = tmp_path / "cfb.jsonl"
    proc = run_cli(["cita-data", "replay", "cfb", "--tasks", "12", "-o", path])
    assert proc.returncode == 0, proc.stderr.decode()
    proc = run_cli(["cita-eval", "--env", "cfb", "--data", path, "--policy", "random", "--seed", "2"])
    assert proc.returncode == 0, proc.stderr.decode()
    out = json.loads(proc.stdout)
    assert out["env"] == "cfb" and out["runs"][0]["n_tasks"] == sum(
        json.loads(line)["split"] == "test" for line in path.read_text().splitlines()
    )
    proc = run_cli(["cita-eval", "--env", "tau2", "--data", path, "--policy", "random"])
    assert proc.returncode == 2 and proc.stdout == b""
    assert proc.stderr.decode().strip().startswith("cita-eval: error:") and "not 'tau2-retail'" in proc.stderr.decode()


def test_paired_bootstrap_known_answers():
    rng = np.random.default_rng(5)
    a = rng.random(40)
    shift = episodes.paired_bootstrap(a, a + 0.25)
    assert (
        shift["diff"] == pytest.approx(0.25)
        and shift["lo"] == pytest.approx(0.25)
        and shift["hi"] == pytest.approx(0.25)
    )
    noise = episodes.paired_bootstrap(a, a + rng.normal(0, 0.1, 40))
    assert noise["lo"] < noise["diff"] < noise["hi"] and noise["n"] == 40
    half = (noise["hi"] - noise["lo"]) / 2  # ≈ 1.96 · sd / sqrt(n)
    assert 0.5 * 1.96 * 0.1 / np.sqrt(40) < half < 1.5 * 1.96 * 0.1 / np.sqrt(40)

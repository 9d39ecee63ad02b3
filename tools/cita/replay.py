"""Offline, deterministic replay environments for τ²-bench-retail-style and ComplexFuncBench-style tasks.

- `tau2-retail`: the task's recorded initial database and the retail tools as pure state functions
  (tools/cita/retail.py); a call runs against the live copy of the database; a bad call (unknown tool,
  missing or unexpected argument, a rule the tool enforces) is an error observation. Success is τ²'s DB
  reward: the canonical JSON of the final database equals that after replaying the gold actions
  ("action-DB success"; no user simulator: the user turns are replayed texts).
- `cfb`: StableToolBench-style response cache built from the trajectory's own recorded steps
  (ComplexFuncBench's real responses, or those of tools/cita/cfb.py): a call whose canonical (name,
  arguments) was recorded returns the recorded response, any other call returns an error. Success
  (ours): every recorded call was retrieved and no call missed the cache (a wrong argument is a wrong
  call, as in ComplexFuncBench's call accuracy). Reads cannot change state, so a repeat is harmless.
Both have BfclEnv's interface: step(call) -> (observation, error), copy(), same_state(other).
"""

from __future__ import annotations

import copy
import hashlib
import json

from methodkit.core.errors import DataError
from methodkit.tools.cita import cfb, retail
from methodkit.tools.cita.episodes import split_of
from methodkit.tools.cita.records import canonical

ENVS = ("tau2", "cfb")
DEFAULT_TASKS = {"tau2": 114, "cfb": 300}  # τ² retail's task count; the ComplexFuncBench subset
MAX_OBS_CHARS = 2000
_SCHEMAS = {t["name"]: t["parameters"] for t in retail.TOOLS}


def db_hash(db: dict) -> str:
    return hashlib.sha256(json.dumps(db, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _obs(result) -> str:
    return json.dumps(result, sort_keys=True, default=str)[:MAX_OBS_CHARS]


class RetailEnv:
    """A task's retail database; step(call) never raises."""

    def __init__(self, db: dict):
        self.db = copy.deepcopy(db)

    def copy(self) -> RetailEnv:
        return RetailEnv(self.db)

    def state(self) -> dict:
        return self.db

    def step(self, call: dict) -> tuple[str, bool]:
        name, arguments = call["name"], call.get("arguments") or {}
        schema = _SCHEMAS.get(name)
        if schema is None:
            return _obs({"error": f"Tool {name} not found"}), True
        missing = [p for p in schema["required"] if p not in arguments]
        extra = sorted(set(arguments) - set(schema["properties"]))
        if missing or extra:
            what = (
                f"missing argument(s) {', '.join(missing)}" if missing else f"unexpected argument(s) {', '.join(extra)}"
            )
            return _obs({"error": f"TypeError: {name}: {what}"}), True
        try:
            return _obs(retail.execute(self.db, name, arguments)), False
        except Exception as exc:  # a rule violation is an observation, as in tau2
            return _obs({"error": f"{type(exc).__name__}: {exc}"}), True

    def same_state(self, other: RetailEnv) -> bool:
        return db_hash(self.db) == db_hash(other.db)


class CacheEnv:
    """Replay of recorded responses keyed by canonical (name, arguments)."""

    def __init__(self, recorded: dict):
        self.recorded = recorded  # canonical call -> (observation, error)
        self.retrieved: set = set()
        self.misses = 0

    def copy(self) -> CacheEnv:
        twin = CacheEnv(self.recorded)
        twin.retrieved, twin.misses = set(self.retrieved), self.misses
        return twin

    def state(self) -> dict:
        return {"retrieved": sorted(self.retrieved), "misses": self.misses}

    def step(self, call: dict) -> tuple[str, bool]:
        key = canonical(call)
        if key not in self.recorded:
            self.misses += 1
            return _obs({"error": f"no recorded response for {call['name']} with these arguments"}), True
        self.retrieved.add(key)
        return self.recorded[key]

    def same_state(self, other: CacheEnv) -> bool:
        return self.retrieved == other.retrieved and self.misses == other.misses


KIND_OF = {"tau2": "tau2-retail", "cfb": "cfb"}


def check_kind(tasks: list, env: str, where: str) -> list:
    """The records, refused (DataError) when one is not of the replay env `env`."""
    for i, task in enumerate(tasks):
        kind = (task.get("env") or {}).get("kind")
        if kind != KIND_OF[env]:
            raise DataError(f"{where}: record {i + 1} ({task['task_id']}) is env kind {kind!r}, not {KIND_OF[env]!r}")
    return tasks


def env_factory(task: dict):
    """A zero-argument function returning a fresh environment of a trajectory record."""
    env = task.get("env") or {}
    kind = env.get("kind")
    if kind == "bfcl":
        from methodkit.tools.cita import bfcl

        entry, _ = bfcl.entry_for(env["init_ref"])
        return lambda: bfcl.BfclEnv(entry)
    if kind == "tau2-retail":
        if not isinstance(env.get("db"), dict):
            raise DataError(f"task {task['task_id']}: its env has no 'db' to replay")
        return lambda: RetailEnv(env["db"])
    if kind == "cfb":
        recorded = {canonical(s["call"]): (str(s.get("observation", "")), bool(s.get("error"))) for s in task["steps"]}
        return lambda: CacheEnv(recorded)
    raise DataError(
        f"task {task['task_id']}: env kind {kind!r} cannot be replayed (bfcl, tau2-retail and cfb can; "
        "a tau2 results file has no database: use 'cita-data replay tau2')"
    )


def _record(task_id, source, turns, tools, steps, split_seed, test_fraction, env) -> dict:
    return {
        "task_id": task_id,
        "source": source,
        "split": split_of(task_id, split_seed, test_fraction),
        "instruction": turns,
        "tools": copy.deepcopy(tools),
        "steps": steps,
        "success": True,
        "env": env,
    }


def trajectories(kind: str, n_tasks: int, seed: int = 0, split_seed: int = 0, test_fraction: float = 0.4) -> list:
    """The generated default tasks of a replay env as trajectory records (gold calls executed)."""
    if kind not in ENVS:
        raise DataError(f"unknown replay env '{kind}' (choose from {', '.join(ENVS)})")
    out = []
    if kind == "tau2":
        for task in retail.generate(n_tasks, seed):
            env = RetailEnv(task["db"])
            steps = []
            for k, calls in enumerate(task["gold"]):
                for call in calls:
                    before = db_hash(env.db)
                    observation, error = env.step(call)
                    steps.append(
                        {
                            "turn": k,
                            "call": call,
                            "observation": observation,
                            "error": error,
                            "mutated": db_hash(env.db) != before,
                        }
                    )
            rec_env = {"kind": "tau2-retail", "init_ref": task["task_id"], "db": task["db"]}
            out.append(
                _record(
                    task["task_id"],
                    "tau2-retail",
                    task["turns"],
                    retail.TOOLS,
                    steps,
                    split_seed,
                    test_fraction,
                    rec_env,
                )
            )
        return out
    for task in cfb.generate(n_tasks, seed):
        steps = [
            {"turn": k, "call": call, "observation": _obs(response), "error": False, "mutated": False}
            for k, pairs in enumerate(task["recorded"])
            for call, response in pairs
        ]
        rec_env = {"kind": "cfb", "init_ref": task["task_id"]}
        out.append(
            _record(task["task_id"], "cfb-booking", task["turns"], cfb.TOOLS, steps, split_seed, test_fraction, rec_env)
        )
    return out

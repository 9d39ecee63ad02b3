"""The unified trajectory and candidate records: canonical JSON, reading JSONL with file:line errors.

A trajectory is one task per line: {task_id, source, split, instruction: [turn texts], tools: [{name,
description, parameters}], steps: [{turn, call: {name, arguments}, observation, error}], success, env}.
A candidates record: {context_id, task_id, instruction, tools, history: [{call, observation}],
candidates: [{name, arguments, logprob?}]}.
"""

from __future__ import annotations

import hashlib
import json

from methodkit.core.errors import DataError

END_TURN = "end_turn"  # the pseudo-call "this request is done"
TRAJECTORY_FIELDS = ("task_id", "instruction", "tools", "steps")
CANDIDATE_FIELDS = ("context_id", "instruction", "tools", "history", "candidates")


def canonical(call: dict) -> str:
    """The canonical JSON of a call: name + arguments with sorted keys, no spaces (dedupe and hashing key)."""
    return json.dumps(
        {"name": call["name"], "arguments": call.get("arguments") or {}},
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _check_record(record, fields: tuple, where: str) -> dict:
    if not isinstance(record, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(record).__name__}")
    missing = [f for f in fields if f not in record]
    if missing:
        raise DataError(f"{where}: missing field(s) {', '.join(missing)}")
    if not isinstance(record["tools"], list) or not all(isinstance(t, dict) and "name" in t for t in record["tools"]):
        raise DataError(f"{where}: 'tools' must be a list of objects with a 'name'")
    if isinstance(record["instruction"], str):
        record["instruction"] = [record["instruction"]]
    return record


def _check_trajectory(record, where: str) -> dict:
    record = _check_record(record, TRAJECTORY_FIELDS, where)
    for i, step in enumerate(record["steps"]):
        if not isinstance(step, dict) or not isinstance(step.get("call"), dict) or "name" not in step["call"]:
            raise DataError(f"{where}: steps[{i}] needs a 'call' object with a 'name'")
        step.setdefault("turn", 0)
        step.setdefault("observation", "")
        step.setdefault("error", False)
        step["call"].setdefault("arguments", {})
    record.setdefault("success", None)
    record.setdefault("split", "train")
    record.setdefault("source", "user")
    record.setdefault("env", {"kind": None, "init_ref": None})
    return record


def _check_candidates(record, where: str) -> dict:
    record = _check_record(record, CANDIDATE_FIELDS, where)
    if not isinstance(record["candidates"], list) or not all(
        isinstance(c, dict) and "name" in c for c in record["candidates"]
    ):
        raise DataError(f"{where}: 'candidates' must be a list of objects with a 'name'")
    return record


def parse_jsonl(text: str, name: str, kind: str = "trajectory", skip_bad: bool = False) -> tuple[list, int]:
    """Records of a JSONL text (kind 'trajectory' or 'candidates'); (records, number skipped).
    A malformed line is a DataError naming `name:line` unless skip_bad."""
    check = _check_trajectory if kind == "trajectory" else _check_candidates
    out, skipped = [], 0
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{name}:{lineno}"
        try:
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{where}: invalid JSON ({exc.msg})") from None
            out.append(check(record, where))
        except DataError:
            if not skip_bad:
                raise
            skipped += 1
    if not out:
        raise DataError(f"{name}: no {kind} records")
    return out, skipped


def dumps_jsonl(records) -> str:
    return "".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in records)

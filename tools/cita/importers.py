"""Importers of a user's own trajectory files into the unified trajectory records (no download).

- τ²-bench: a simulation results JSON (tau2's `Results`: {info, tasks, simulations}); each simulation
  run is one trajectory. Every user message opens a turn; each assistant tool call is a step whose
  observation is the tool message with the same id (else the next tool message), `error` its flag;
  success = reward_info.reward ≥ 1 (null without reward_info); the task's gold `actions` give
  `gold_tools`; tools from info.environment_info.tool_defs, else named from the calls.
- ComplexFuncBench: its JSONL (one task a line: {id, conversations, functions}); `conversations` holds
  user, assistant (`function_call`: a list of {name, arguments}) and observation messages (`content`:
  the list of responses, in the order of the preceding calls). These are the benchmark's gold
  trajectories with recorded responses: success = true.
Malformed input is a DataError naming the file and the row (simulations[i], or file:line).
"""

from __future__ import annotations

import json

from methodkit.core.errors import DataError
from methodkit.tools.cita.episodes import split_of


def _obj(value, where: str, what: str) -> dict:
    if not isinstance(value, dict):
        raise DataError(f"{where}: {what} must be a JSON object, got {type(value).__name__}")
    return value


def _list(value, where: str, what: str) -> list:
    if not isinstance(value, list):
        raise DataError(f"{where}: {what} must be a list, got {type(value).__name__}")
    return value


def _arguments(raw, where: str) -> dict:
    if isinstance(raw, str):  # OpenAI-style calls carry their arguments as a JSON string
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: arguments are not JSON ({exc.msg})") from None
    return _obj(raw if raw is not None else {}, where, "arguments")


def _tool_record(raw, where: str) -> dict:
    raw = _obj(raw, where, "a tool definition")
    fn = raw.get("function", raw)  # {"type": "function", "function": {...}} or the bare function
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise DataError(f"{where}: a tool definition needs a 'name'")
    return {
        "name": fn["name"],
        "description": str(fn.get("description") or ""),
        "parameters": fn.get("parameters") or {},
    }


def _tools_from_calls(steps: list, known: list) -> list:
    names = {t["name"] for t in known}
    out = list(known)
    for step in steps:
        call = step["call"]
        if call["name"] not in names:
            names.add(call["name"])
            props = {k: {} for k in call["arguments"]}
            out.append({"name": call["name"], "description": "", "parameters": {"type": "object", "properties": props}})
    return out


def _text(content) -> str:
    if content is None:
        return ""
    return content if isinstance(content, str) else json.dumps(content, sort_keys=True, default=str)


def _finish(task_id, source, instruction, tools, steps, success, split_seed, test_fraction, env, extra=None) -> dict:
    record = {
        "task_id": task_id,
        "source": source,
        "split": split_of(task_id, split_seed, test_fraction),
        "instruction": instruction or [""],
        "tools": _tools_from_calls(steps, tools),
        "steps": steps,
        "success": success,
        "env": env,
    }
    record.update(extra or {})
    return record


def tau2_results(text: str, name: str, split_seed: int = 0, test_fraction: float = 0.4) -> list:
    """Trajectories of a τ²-bench simulation results JSON (one per simulation run)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{name}: invalid JSON at line {exc.lineno} ({exc.msg}); expected tau2 results") from None
    doc = _obj(doc, name, "a tau2 results file")
    if "simulations" not in doc:
        raise DataError(f"{name}: no 'simulations' list (is this a tau2 results JSON?)")
    sims = _list(doc["simulations"], name, "'simulations'")
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    env_info = info.get("environment_info") if isinstance(info.get("environment_info"), dict) else {}
    domain = str(env_info.get("domain_name") or "tau2")
    defs = env_info.get("tool_defs") or []
    defs = list(defs.values()) if isinstance(defs, dict) else _list(defs, f"{name}: info.environment_info", "tool_defs")
    tools = [_tool_record(d, f"{name}: info.environment_info.tool_defs[{i}]") for i, d in enumerate(defs)]
    gold = {}
    for i, task in enumerate(_list(doc.get("tasks") or [], name, "'tasks'")):
        task = _obj(task, f"{name}: tasks[{i}]", "a task")
        actions = ((task.get("evaluation_criteria") or {}).get("actions")) or []
        gold[str(task.get("id"))] = [a["name"] for a in actions if isinstance(a, dict) and "name" in a]
    out = []
    for i, sim in enumerate(sims):
        where = f"{name}: simulations[{i}]"
        sim = _obj(sim, where, "a simulation run")
        if "task_id" not in sim or not isinstance(sim.get("messages"), list):
            raise DataError(f"{where}: needs 'task_id' and a 'messages' list")
        instruction, steps, pending = [], [], {}
        for m, msg in enumerate(sim["messages"]):
            at = f"{where}.messages[{m}]"
            msg = _obj(msg, at, "a message")
            role = msg.get("role")
            if role == "user":  # a user's own tool calls (τ² telecom) are the environment's, not steps
                if msg.get("content") or not msg.get("tool_calls"):
                    instruction.append(_text(msg.get("content")))
            elif role == "tool" and msg.get("requestor") == "user":
                continue
            elif role == "assistant":
                for c, call in enumerate(msg.get("tool_calls") or []):
                    call = _obj(call, f"{at}.tool_calls[{c}]", "a tool call")
                    if not isinstance(call.get("name"), str):
                        raise DataError(f"{at}.tool_calls[{c}]: a tool call needs a 'name'")
                    args = _arguments(call.get("arguments"), f"{at}.tool_calls[{c}]")
                    step = {"turn": max(len(instruction) - 1, 0), "call": {"name": call["name"], "arguments": args}}
                    steps.append({**step, "observation": "", "error": False})
                    pending[str(call.get("id", len(steps)))] = steps[-1]
            elif role == "tool":
                key = str(msg.get("id", ""))
                step = pending.pop(key, None) or (pending.pop(next(iter(pending))) if pending else None)
                if step is None:
                    raise DataError(f"{at}: a tool message with no pending tool call")
                step["observation"] = _text(msg.get("content"))
                step["error"] = bool(msg.get("error", False))
            elif role not in ("system", None):
                raise DataError(f"{at}: unknown role {role!r} (expected user, assistant, tool or system)")
        reward = sim.get("reward_info")
        success = None if not isinstance(reward, dict) else bool(float(reward.get("reward", 0.0)) >= 1.0)
        task_id = f"tau2:{domain}:{sim['task_id']}:{sim.get('trial', 0)}"
        extra = {"gold_tools": gold[str(sim["task_id"])]} if str(sim["task_id"]) in gold else None
        env = {"kind": "tau2", "init_ref": f"{domain}:{sim['task_id']}"}
        out.append(_finish(task_id, "tau2", instruction, tools, steps, success, split_seed, test_fraction, env, extra))
    if not out:
        raise DataError(f"{name}: no simulations")
    return out


def complexfuncbench(text: str, name: str, split_seed: int = 0, test_fraction: float = 0.4) -> list:
    """Trajectories of a ComplexFuncBench JSONL (its gold calls and recorded responses)."""
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{name}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: invalid JSON ({exc.msg})") from None
        row = _obj(row, where, "a ComplexFuncBench row")
        if "id" not in row or not isinstance(row.get("conversations"), list):
            raise DataError(f"{where}: needs 'id' and a 'conversations' list")
        tools = [_tool_record(f, f"{where}: functions[{i}]") for i, f in enumerate(row.get("functions") or [])]
        instruction, steps, last = [], [], []
        for m, msg in enumerate(row["conversations"]):
            at = f"{where}: conversations[{m}]"
            msg = _obj(msg, at, "a message")
            role = msg.get("role")
            if role == "user":
                instruction.append(_text(msg.get("content")))
            elif role == "assistant" and msg.get("function_call"):
                last = []
                for c, call in enumerate(_list(msg["function_call"], at, "'function_call'")):
                    call = _obj(call, f"{at}.function_call[{c}]", "a call")
                    if not isinstance(call.get("name"), str):
                        raise DataError(f"{at}.function_call[{c}]: a call needs a 'name'")
                    args = _arguments(call.get("arguments"), f"{at}.function_call[{c}]")
                    turn = max(len(instruction) - 1, 0)
                    steps.append({"turn": turn, "call": {"name": call["name"], "arguments": args}})
                    steps[-1].update(observation="", error=False)
                    last.append(steps[-1])
            elif role == "observation":
                content = msg.get("content")
                results = content if isinstance(content, list) and len(content) == len(last) else [content]
                if not last or len(results) != len(last):
                    raise DataError(f"{at}: {len(results)} response(s) for {len(last)} pending call(s)")
                for step, result in zip(last, results):
                    step["observation"] = _text(result)
                    step["error"] = isinstance(result, dict) and (result.get("status") is False or "error" in result)
                last = []
            elif role not in ("assistant", "system"):
                raise DataError(f"{at}: unknown role {role!r} (expected user, assistant, observation or system)")
        env = {"kind": "cfb", "init_ref": str(row["id"])}
        out.append(_finish(f"cfb:{row['id']}", "cfb", instruction, tools, steps, True, split_seed, test_fraction, env))
    if not out:
        raise DataError(f"{name}: no ComplexFuncBench rows")
    return out

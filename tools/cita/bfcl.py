"""BFCL v4 multi-turn tasks (package `bfcl-eval`) as trajectories, and their executable environment.

The environment instantiates the task's API classes from bfcl-eval's own source (GorillaFileSystem,
TwitterAPI, ...), loads the task's initial configuration, and executes calls as method calls. Success
is BFCL's state rule: every involved instance's public attributes equal those after the gold calls.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
from importlib import resources

from methodkit.core.errors import DataError, MissingExtraError

PACKAGE = "bfcl_eval"
INSTALL = "pip install --no-deps bfcl-eval mpmath"
CATEGORIES = ("multi_turn_base", "multi_turn_miss_param", "multi_turn_miss_func", "multi_turn_long_context")
BACKEND = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
# class -> module of bfcl-eval's backend (its constants.executable_backend_config, repeated to avoid importing it)
CLASS_MODULE = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
STATELESS = {"MathAPI"}
MAX_OBS_CHARS = 2000


def _root():
    try:
        return resources.files(PACKAGE)
    except ModuleNotFoundError:
        raise MissingExtraError(f"the BFCL data needs the package bfcl-eval: {INSTALL}") from None


def load_category(category: str = "multi_turn_base") -> tuple[list, dict]:
    """(entries, gold by id) of a BFCL multi-turn category as shipped in the wheel."""
    if category not in CATEGORIES:
        raise DataError(f"unknown BFCL category '{category}' (choose from {', '.join(CATEGORIES)})")
    root = _root() / "data"
    entries = [json.loads(line) for line in (root / f"BFCL_v4_{category}.json").read_text().splitlines() if line]
    gold = {}
    for line in (root / "possible_answer" / f"BFCL_v4_{category}.json").read_text().splitlines():
        if line:
            record = json.loads(line)
            gold[record["id"]] = record["ground_truth"]
    return entries, gold


_DOCS: dict = {}


def class_docs(class_name: str) -> list[dict]:
    """The function docs (name, description, parameters, response) of one API class."""
    if class_name not in _DOCS:
        path = _root() / "data" / "multi_turn_func_doc" / f"{CLASS_MODULE[class_name]}.json"
        _DOCS[class_name] = [json.loads(line) for line in path.read_text().splitlines() if line]
    return _DOCS[class_name]


def parse_call(text: str) -> dict:
    """'mv(source="a", destination="b")' -> {name, args (positional kept as a list), kwargs}."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise DataError(f"cannot parse the BFCL call {text!r}") from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise DataError(f"not a plain function call: {text!r}")
    return {
        "name": node.func.id,
        "args": [ast.literal_eval(a) for a in node.args],
        "kwargs": {k.arg: ast.literal_eval(k.value) for k in node.keywords},
    }


def _public_state(instance) -> dict:
    return {k: v for k, v in vars(instance).items() if not k.startswith("_")}


def _observation(result) -> tuple[str, bool]:
    error = isinstance(result, dict) and "error" in result
    try:
        text = json.dumps(result, default=str)
    except (TypeError, ValueError):
        text = str(result)
    return text[:MAX_OBS_CHARS], bool(error)


class BfclEnv:
    """One task's live API instances. step(call) -> (observation text, error flag); never raises."""

    def __init__(self, entry: dict):
        self.entry = entry
        self.instances = {}
        self.methods = {}
        for class_name in entry["involved_classes"]:
            module = importlib.import_module(f"{BACKEND}.{CLASS_MODULE[class_name]}")
            instance = getattr(module, class_name)()
            if class_name not in STATELESS:
                instance._load_scenario(copy.deepcopy(entry["initial_config"].get(class_name, {})))
            self.instances[class_name] = instance
            for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not name.startswith("_"):
                    self.methods[name] = (class_name, method)

    def copy(self) -> BfclEnv:
        twin = object.__new__(BfclEnv)
        twin.entry = self.entry
        twin.instances = copy.deepcopy(self.instances)
        twin.methods = {}
        for class_name, instance in twin.instances.items():
            for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not name.startswith("_"):
                    twin.methods[name] = (class_name, method)
        return twin

    def state(self) -> dict:
        return {name: _public_state(inst) for name, inst in self.instances.items()}

    def step(self, call: dict) -> tuple[str, bool]:
        name = call["name"]
        if name not in self.methods:
            return json.dumps({"error": f"unknown function {name}"}), True
        try:
            result = self.methods[name][1](**(call.get("arguments") or {}))
        except Exception as exc:  # a bad call is an observation, never a crash (BFCL does the same)
            return json.dumps({"error": f"{type(exc).__name__}: {exc}"[:MAX_OBS_CHARS]}), True
        return _observation(result)

    def same_state(self, other: BfclEnv) -> bool:
        """BFCL's state checker: public attributes of every involved instance equal."""
        return all(_public_state(self.instances[c]) == _public_state(other.instances[c]) for c in self.instances)


def keyword_call(env: BfclEnv, parsed: dict) -> dict:
    """A parsed gold call with positional arguments named from the method's signature."""
    arguments = dict(parsed["kwargs"])
    if parsed["args"]:
        method = env.methods.get(parsed["name"])
        if method is None:
            raise DataError(f"gold call {parsed['name']} is not a method of the task's classes")
        names = [p for p in inspect.signature(method[1]).parameters]
        arguments.update(dict(zip(names, parsed["args"])))
    return {"name": parsed["name"], "arguments": arguments}


def task_tools(entry: dict) -> list[dict]:
    tools = []
    for class_name in entry["involved_classes"]:
        for doc in class_docs(class_name):
            tools.append(
                {
                    "name": doc["name"],
                    "description": doc.get("description", ""),
                    "parameters": doc.get("parameters", {}),
                    "response": doc.get("response", {}),
                    "class": class_name,
                }
            )
    return tools


def gold_turns(entry: dict, gold: list) -> list[list[dict]]:
    """The gold calls per turn, as keyword calls."""
    env = BfclEnv(entry)
    return [[keyword_call(env, parse_call(text)) for text in turn] for turn in gold]


def trajectory(entry: dict, gold: list, category: str, split: str) -> dict:
    """Execute the gold calls and record every observation; mutation = public state changed by the call."""
    env = BfclEnv(entry)
    steps = []
    for turn, calls in enumerate(gold_turns(entry, gold)):
        for call in calls:
            before = copy.deepcopy(env.state())
            observation, error = env.step(call)
            steps.append(
                {
                    "turn": turn,
                    "call": call,
                    "observation": observation,
                    "error": error,
                    "mutated": env.state() != before,
                }
            )
    return {
        "task_id": entry["id"],
        "source": f"bfcl:{category}",
        "split": split,
        "instruction": [" ".join(m["content"] for m in turn if m.get("role") == "user") for turn in entry["question"]],
        "tools": task_tools(entry),
        "steps": steps,
        "success": True,
        "env": {"kind": "bfcl", "init_ref": f"{category}:{entry['id']}"},
    }


_ENTRY_CACHE: dict = {}


def entry_for(init_ref: str) -> tuple[dict, list]:
    """(entry, gold) of 'category:task_id'."""
    category, _, task_id = init_ref.partition(":")
    if category not in _ENTRY_CACHE:
        entries, gold = load_category(category)
        _ENTRY_CACHE[category] = ({e["id"]: e for e in entries}, gold)
    by_id, gold = _ENTRY_CACHE[category]
    if task_id not in by_id:
        raise DataError(f"no BFCL task '{task_id}' in {category}")
    return by_id[task_id], gold[task_id]

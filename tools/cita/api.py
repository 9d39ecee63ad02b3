"""The CITA pipeline as library calls: import, fit, sample, value, train, rank, evaluate."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from methodkit.core.errors import DataError, UsageError
from methodkit.tools.cita import bfcl, cim, contexts, episodes, replay, simulate
from methodkit.tools.cita import features as ft
from methodkit.tools.cita import graph as tg
from methodkit.tools.cita import judge as jd
from methodkit.tools.cita.embed import Embedder
from methodkit.tools.cita.generators import Pools, turns_of
from methodkit.tools.cita.records import END_TURN, canonical

MODEL_FILE, GRAPH_FILE = "cim.safetensors", "graph.npz"
GBDT_FILE = "cim.lgb.txt"  # LightGBM's text format
RANKERS = ("mlp", "gbdt")


# ---------------------------------------------------------------- data


def import_bfcl(category: str, split: str, split_seed: int, test_fraction: float, limit: int | None) -> list:
    entries, gold = bfcl.load_category(category)
    out = []
    for entry in entries[:limit] if limit else entries:
        s = episodes.split_of(entry["id"], split_seed, test_fraction)
        if split in ("all", s):
            out.append(bfcl.trajectory(entry, gold[entry["id"]], category, s))
    return out


# ---------------------------------------------------------------- graph files


def graph_sidecar(graph: tg.ToolGraph, tasks: list) -> dict:
    side = graph.sidecar()
    side["domains"] = sorted({tuple(sorted(t["name"] for t in task["tools"])) for task in tasks})
    return side


def save_graph(path, graph: tg.ToolGraph, tasks: list | None = None, sidecar: dict | None = None) -> None:
    from methodkit.core import io

    io.write_arrays(path, graph.to_arrays(), force=True)
    side = sidecar if sidecar is not None else graph_sidecar(graph, tasks or [])
    io.write_json(side, Path(path).with_suffix(".json"), force=True, indent=1)


def load_graph(path) -> tuple[tg.ToolGraph, dict]:
    from methodkit.core import io

    side_path = Path(path).with_suffix(".json")
    if not Path(path).is_file():
        raise DataError(f"{path}: no such graph file (make one with 'cita-sim fit')")
    if not side_path.is_file():
        raise DataError(f"{path}: its sidecar {side_path.name} is missing")
    arrays = io.read_arrays(str(path))
    side = json.loads(side_path.read_text())
    return tg.ToolGraph.from_parts(arrays, side, str(path)), side


def domains_of(graph: tg.ToolGraph, side: dict) -> list[list[dict]]:
    by_name = {t["name"]: t for t in graph.tools}
    return [[by_name[n] for n in names if n in by_name] for names in side.get("domains", [])] or [graph.tools]


# ---------------------------------------------------------------- CIM model folder


@dataclass
class Cim:
    model: object
    graph: tg.ToolGraph
    embedder: Embedder
    sidecar: dict
    ranker: str = "mlp"

    def scores(self, ctx_list: list) -> list[np.ndarray]:
        X, where = ft.featurize(ctx_list, self.graph, self.embedder)
        if not len(X):
            f = np.zeros(0)
        elif self.ranker == "gbdt":
            f = self.model.score(X)
        else:
            f = cim.score(self.model, X)
        out = [np.zeros(len(c["candidates"])) for c in ctx_list]
        for (c, k), v in zip(where, f):
            out[c][k] = v
        return out


def model_spec(embedder: Embedder, n_features: int, ranker: str = "mlp") -> dict:
    if ranker == "gbdt":
        return {"kind": "cita-gbdt", **embedder.identity, "n_features": n_features}
    return {"kind": "cita-cim", **embedder.identity, "n_features": n_features, "hidden": 256}


def save_model(folder, result: Cim, graph_side: dict, info: dict) -> None:
    """The model file of the ranker (cim.safetensors or cim.lgb.txt), cim.json naming it, graph.npz."""
    from methodkit.core import checkpoint
    from methodkit.core.io import atomic_write, jsonable

    info = {**info, "ranker": result.ranker}
    if result.ranker == "gbdt":
        n_features = int(result.model.booster.num_feature())
        spec = model_spec(result.embedder, n_features, "gbdt")
        side = {
            "config": {"n_features": n_features, "model_file": GBDT_FILE},
            "spec": spec,
            "spec_hash": checkpoint.spec_hash(spec),
            "data_fingerprint": None,
            "versions": {**checkpoint._versions(), "lightgbm": _lgb_version()},
            **info,
        }
        with atomic_write(Path(folder) / GBDT_FILE, force=True) as handle:
            handle.write(result.model.to_string().encode())
        with atomic_write(Path(folder) / "cim.json", force=True) as handle:
            handle.write((json.dumps(jsonable(side), indent=1, sort_keys=True) + "\n").encode())
    else:
        tensors = {f"model.{k}": v for k, v in result.model.state_dict().items()}
        n_features = int(tensors["model.0.weight"].shape[1])
        checkpoint.save(
            Path(folder) / MODEL_FILE,
            tensors,
            config={"hidden": 256, "n_features": n_features},
            spec=model_spec(result.embedder, n_features),
            extra=info,
        )
    save_graph(Path(folder) / GRAPH_FILE, result.graph, sidecar=graph_side)


def _lgb_version() -> str:
    from importlib.metadata import version

    return version("lightgbm")


def load_model(folder, embedder_kind: str | None = None, warn=None, ranker: str | None = None) -> Cim:
    """Load a cita-train folder, dispatching on the ranker its cim.json records (older folders: mlp)."""
    from methodkit.core import checkpoint

    folder = Path(folder)
    side_path = folder / "cim.json"
    if not side_path.is_file():
        raise DataError(f"{folder}: not a cita-train model folder (no cim.json)")
    side = json.loads(side_path.read_text())
    recorded = side.get("ranker", "mlp")
    if recorded not in RANKERS:
        raise DataError(f"{side_path}: unknown ranker {recorded!r} (expected one of {', '.join(RANKERS)})")
    if ranker is not None and ranker != recorded:
        raise UsageError(f"{folder}: the model was trained with --ranker {recorded}, not {ranker}")
    kind = side.get("spec", {}).get("embedder", "hash")
    if embedder_kind is not None and embedder_kind != kind:
        raise UsageError(f"{folder}: the model was trained with --embedder {kind}, not {embedder_kind}")
    embedder = Embedder(kind, warn)
    if embedder.kind != kind:
        raise DataError(f"{folder}: the model needs the {kind} embedder, which is not available here")
    n_features = int(side["config"]["n_features"])
    if recorded == "gbdt":
        from methodkit.tools.cita import gbdt

        spec = model_spec(embedder, n_features, "gbdt")
        if side.get("spec_hash") != checkpoint.spec_hash(spec):
            raise DataError(f"{side_path}: its spec does not match a {n_features}-feature gbdt ranker")
        if not (folder / GBDT_FILE).is_file():
            raise DataError(f"{folder}: cim.json records ranker gbdt but {GBDT_FILE} is missing")
        try:
            model = gbdt.GbdtRanker.from_string((folder / GBDT_FILE).read_text())
        except Exception as exc:  # LightGBM raises its own error type on a malformed file
            raise DataError(f"{folder / GBDT_FILE}: not a LightGBM model ({exc})") from None
        if model.booster.num_feature() != n_features:
            raise DataError(f"{folder / GBDT_FILE}: {model.booster.num_feature()} features, cim.json says {n_features}")
    else:
        import torch  # noqa: F401  (the checkpoint is torch tensors)

        if not (folder / MODEL_FILE).is_file():
            raise DataError(f"{folder}: cim.json records ranker mlp but {MODEL_FILE} is missing")
        tensors, side = checkpoint.load(folder / MODEL_FILE, expected_spec=model_spec(embedder, n_features))
        model = cim.make_model(n_features)
        model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
        model.eval()
    graph, _ = load_graph(folder / GRAPH_FILE)
    return Cim(model, graph, embedder, side, recorded)


# ---------------------------------------------------------------- training


def training_contexts(tasks: list, seed: int, max_negatives: int | None = None) -> list:
    """Step contexts of the successful trajectories (failed logs give no behaviour pairs)."""
    pools = Pools(tasks)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xB7]))
    return [
        c
        for task in tasks
        if task.get("success") is True
        for c in contexts.task_contexts(task, pools, rng, max_negatives=max_negatives)
    ]


def prepare_candidates(records: list) -> tuple[list, list]:
    """Dedupe candidates by canonical JSON and flag unknown tools; (records, per-record unknown flags)."""
    flags = []
    for rec in records:
        seen, unique = set(), []
        for call in rec["candidates"]:
            call.setdefault("arguments", {})
            key = canonical(call)
            if key not in seen:
                seen.add(key)
                unique.append(call)
        rec["candidates"] = unique
        names = {t["name"] for t in rec["tools"]}
        flags.append([c["name"] not in names and c["name"] != END_TURN for c in unique])
        rec.setdefault("turn", len(rec["instruction"]) - 1)
        for h in rec["history"]:
            h.setdefault("turn", rec["turn"])
            h.setdefault("observation", "")
            h.setdefault("error", False)
    return records, flags


def rank(model: Cim, records: list, combine_logprob: float = 0.0) -> list[dict]:
    records, flags = prepare_candidates(records)
    usable = [r for r in records if r["candidates"]]
    scores = dict(zip((id(r) for r in usable), model.scores(usable)))
    out = []
    for rec, unknown in zip(records, flags):
        if not rec["candidates"]:
            out.append({"context_id": rec["context_id"], "error": "empty candidate list", "ranked": []})
            continue
        f = scores[id(rec)]
        if combine_logprob:
            f = f + combine_logprob * np.array([c.get("logprob", 0.0) or 0.0 for c in rec["candidates"]])
        order = sorted(range(len(f)), key=lambda k: (unknown[k], -f[k], k))  # unknown tools listed last
        ranked = [
            {
                "name": rec["candidates"][k]["name"],
                "arguments": rec["candidates"][k]["arguments"],
                "score": float(f[k]),
                "p": float(1 / (1 + np.exp(-f[k]))),
                "unknown_tool": bool(unknown[k]),
            }
            for k in order
        ]
        out.append({"context_id": rec["context_id"], "ranked": ranked})
    return out


# ---------------------------------------------------------------- evaluation


def eval_tasks(category: str, split_seed: int, test_fraction: float, limit: int | None, tasks: list | None = None):
    """(train, test) of a BFCL category, or of given trajectory records (a replay env's) by their split."""
    if tasks is None:
        tasks = import_bfcl(category, "all", split_seed, test_fraction, limit)
    elif limit:
        tasks = tasks[:limit]
    return [t for t in tasks if t["split"] == "train"], [t for t in tasks if t["split"] == "test"]


def policies(name: str, graph: tg.ToolGraph | None, embedder: Embedder | None, model: Cim | None, seed: int):
    """choose(ctx) -> index for random | prior | judge | cim."""
    if name == "random":
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0x7A4D]))
        return lambda ctx: int(rng.integers(len(ctx["candidates"])))
    if name == "prior":
        theta = graph.posterior_mean()
        index, n = graph.index, len(graph.names)

        def prior(ctx):
            turn = [h for h in ctx["history"] if h["turn"] == ctx["turn"]]
            prev = index.get(turn[-1]["call"]["name"], n) if turn else n
            col = [n if c["name"] == END_TURN else index.get(c["name"], -1) for c in ctx["candidates"]]
            return int(np.argmax([theta[prev, j] if j >= 0 else -1 for j in col]))

        return prior
    if name == "judge":
        return lambda ctx: int(np.argmax(jd.offline_scores(ctx, graph, embedder)))
    return lambda ctx: int(np.argmax(model.scores([ctx])[0]))


def run_eval(
    policy: str,
    model: Cim | None,
    graph,
    embedder,
    train: list,
    test: list,
    seed: int,
    distractors: int,
    value_ctx=None,
    progress=None,
):
    """Episodes on the test tasks + (for scoring policies) value metrics against V*; (metrics, rows)."""
    pools = Pools(train)
    choose = policies(policy, graph, embedder, model, seed)
    rows = []
    for t, task in enumerate(test):
        rows.append(episodes.run_episode(task, replay.env_factory(task), pools, choose, seed, distractors))
        if progress is not None:
            progress(f"episodes {policy}", t + 1, len(test))
    n = len(rows)
    metrics = {
        "policy": policy,
        "n_tasks": n,
        "n_crashed": sum(r.crashed for r in rows),
        "success": sum(r.success for r in rows) / n if n else None,
        "tool_f1": float(np.mean([r.tool_f1 for r in rows])) if n else None,
        "call_f1": float(np.mean([r.call_f1 for r in rows])) if n else None,
    }
    if value_ctx is not None and model is not None:
        ctxs, truth = value_ctx
        preds = [1 / (1 + np.exp(-f)) for f in model.scores(ctxs)]
        metrics.update(episodes.value_metrics(preds, truth))
    return metrics, rows


def oracle_contexts(train: list, test: list, seed: int):
    """Gold-path contexts of the test tasks with eval-seeded negatives and their oracle values V*."""
    pools = Pools(train)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x0AC1]))
    ctxs, truth = [], []
    for task in test:
        make = replay.env_factory(task)
        if task["env"]["kind"] == "bfcl":
            entry, gold = bfcl.entry_for(task["env"]["init_ref"])
            gold_env = episodes.gold_env(make, bfcl.gold_turns(entry, gold))
        else:
            gold_env = episodes.gold_env(make, turns_of(task))
        for ctx in contexts.task_contexts(task, pools, rng):
            ctxs.append(ctx)
            truth.append(episodes.oracle_values(task, ctx, make, gold_env))
    return ctxs, truth


def sim_config(**kw) -> simulate.SimConfig:
    return simulate.SimConfig(**{k: v for k, v in kw.items() if v is not None})

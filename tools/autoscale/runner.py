"""The run and eval verbs as library calls: a pools folder's arrays in, result + files out."""

from __future__ import annotations

import numpy as np

from methodkit.core.errors import DataError
from methodkit.tools.autoscale import data, loop
from methodkit.tools.autoscale import features as F
from methodkit.tools.autoscale import planner as P
from methodkit.tools.autoscale import pools as PL


def config(method, budget, rounds, clusters, steps, batch_size, rho, eta, estimator, apply,
           warm_start=False, evaluate="open-loop", expert_l2=0.0) -> loop.LoopConfig:  # fmt: skip
    pc = P.PlannerConfig(steps=steps, batch_size=batch_size, rho=rho, expert_l2=expert_l2)
    return loop.LoopConfig(method=method, budget=budget, rounds=rounds, clusters=clusters, eta=eta,
                           estimator=estimator, apply=apply, warm_start=warm_start, planner=pc,
                           evaluate=evaluate)  # fmt: skip


def make_pools(arrays: dict, metas: dict, emb: dict, closed_loop: bool = False) -> loop.Pools:
    """The loop's pools; closed_loop also regenerates the val and test routes (tools.autoscale.closedloop)."""
    routes = {}
    if closed_loop:
        from methodkit.tools.autoscale import closedloop

        routes = {p: closedloop.routes(arrays[p], metas[p], where=f"{p}.npz") for p in ("val", "test")}
    return loop.Pools(arrays["real"], arrays["synth"], arrays["val"], arrays["test"], emb,
                      data.tags_of(metas["synth"]), np.array(metas["synth"]["generators"]), routes)  # fmt: skip


def run(arrays, metas, emb, cfg: loop.LoopConfig, seed: int, progress=None, log=None, ckpt_dir=None, resume=False):
    """(final JSON, files for the run folder); ckpt_dir/resume as in loop.run."""
    import pandas as pd
    import torch

    pools = make_pools(arrays, metas, emb, closed_loop=cfg.evaluate == "closed-loop")
    res = loop.run(pools, cfg, seed, progress=progress, log=log, ckpt_dir=ckpt_dir, resume=resume)
    k = len(res.mixture_best)
    tags = pools.synth_tags
    w0 = np.asarray(res.mixtures[0])
    wb = np.asarray(res.mixture_best)
    comp = res.clusters
    reckless = [c for c in range(k) if comp[str(c)].get("reckless", 0) >= 0.7 * max(comp[str(c)]["size"], 1)]
    rare = [
        c
        for c in range(k)
        if sum(comp[str(c)].get(t, 0) for t in ("cut-in", "stopped", "merge")) > comp[str(c)]["size"] / 2
    ]
    sel = res.selected[res.best_round]
    mechanism = {
        "reckless_clusters": reckless,
        "reckless_cluster_weight_max_times_k": float(wb[reckless].max() * k) if reckless else None,
        "rare_clusters": rare,
        "rare_weight_ratio": float(wb[rare].sum() / max(w0[rare].sum(), 1e-12)) if rare else None,
        "reckless_share_selected": float(np.mean(tags[sel] == "reckless")) if len(sel) else 0.0,
        "selected_by_tag": {str(t): int(np.sum(tags[sel] == t)) for t in np.unique(tags)},
    }
    w_last, sel_last = np.asarray(res.mixtures[-1]), res.selected[-1]
    mechanism["last_round"] = {
        "reckless_cluster_weight_max_times_k": float(w_last[reckless].max() * k) if reckless else None,
        "rare_weight_ratio": float(w_last[rare].sum() / max(w0[rare].sum(), 1e-12)) if rare else None,
        "reckless_share_selected": float(np.mean(tags[sel_last] == "reckless")) if len(sel_last) else 0.0,
    }
    result = {"method": cfg.method, "seed": seed, "budget": cfg.budget, "rounds_run": len(res.rounds), "warm_start": cfg.warm_start,
              "best_round": res.best_round, "val_pdms": res.rounds[res.best_round]["val"]["pdms"], "test": res.test,
              "mechanism": mechanism, "eval": cfg.evaluate, "metric": "PDMS (NAVSIM v1 weights, x100), non-reactive log replay"}  # fmt: skip
    if cfg.evaluate == "closed-loop":
        from methodkit.tools.autoscale.closedloop import METRIC

        result.update(val_closed_loop=res.rounds[res.best_round]["val"]["closed_loop"], closed_loop_metric=METRIC)
    ids = arrays["synth"]["scene_id"]
    sel_rows = [{"round": r, "scene_id": ids[i]} for r, s in enumerate(res.selected) for i in s]
    mixture = {"clusters": comp, "rounds": res.mixtures, "best_round": res.best_round, "best": res.mixture_best,
               "time_average": res.mixture_average}  # fmt: skip
    model = P.build(pools.x("real").shape[1], cfg.planner)
    model.load_state_dict(res.model_state)
    in_dim = pools.x("real").shape[1]
    del torch
    files = {
        "mixture.json": ("json", mixture),
        "selected.csv": ("table", pd.DataFrame(sel_rows, columns=["round", "scene_id"])),
        "rounds.jsonl": ("jsonl", res.rounds),
        "planner.safetensors": ("call", lambda path: P.save(path, model, cfg.planner, in_dim,
                                                             extra={"result": result})),
    }  # fmt: skip
    return result, files


def evaluate_file(planner_path, scenes_path):
    import pandas as pd

    from methodkit.core import io

    try:
        model, _ = P.load(planner_path)
    except (KeyError, TypeError, OSError, RuntimeError) as exc:
        raise DataError(f"{io.display_name(planner_path)}: not an autoscale-mix planner checkpoint ({exc})") from None
    arrays, _meta = PL.read_pool(scenes_path)
    x = F.flat(F.featurise(arrays))
    choice = P.choose(model, x)
    summary, per = P.evaluate(choice, arrays["cand_scores"])
    expert, _ = P.evaluate(arrays["expert_index"], arrays["cand_scores"])
    frame = pd.DataFrame(per, columns=list(PL.SCORE_NAMES))
    frame.insert(0, "candidate", choice)
    frame.insert(0, "scene_id", arrays["scene_id"])
    out = {"scenes": int(len(choice)), **summary, "expert_pdms": expert["pdms"],
           "metric": "PDMS (NAVSIM v1 weights, x100), non-reactive log replay"}  # fmt: skip
    return out, frame

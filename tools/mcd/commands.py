"""What mcd-distill's verbs do between reading their inputs and writing their outputs.

The command module (cli/mcd_distill.py) parses flags, reads files and writes results; the training and
distillation configurations, where a checkpoint lives in a run folder, the files a distilled student
leaves behind, the summaries on stdout and the scores of one checkpoint in `eval` are built here.
"""

from __future__ import annotations

from pathlib import Path

from methodkit.core.errors import DataError


def threads() -> None:
    import torch

    torch.set_num_threads(1)


def train_cfg(steps, batch_size, lr, warmup, seed, log_every=None):
    """The TrainConfig of --steps/--batch-size/--lr/--warmup (warmup and log interval: a twentieth of the steps)."""
    from methodkit.core.train import TrainConfig

    return TrainConfig(steps=steps, batch_size=batch_size, lr=lr, warmup=steps // 20 if warmup is None else warmup,
                       log_every=log_every or max(1, steps // 20), seed=seed, weight_decay=0.01)  # fmt: skip


def model_file(path: str) -> Path:
    """A checkpoint file, or the teacher's (else the student's) weights in a run folder."""
    p = Path(path)
    if p.is_dir():
        for name in ("teacher.safetensors", "student.safetensors"):
            if (p / name).is_file():
                return p / name
    return p


def load_adapter(folder):
    """The student-to-teacher adapter W_a a `distill` run folder holds, as a torch Linear."""
    import torch

    from methodkit.core import checkpoint

    tensors, _ = checkpoint.load(folder / "adapter.safetensors")
    w = tensors["weight"]
    adapter = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
    with torch.no_grad():
        adapter.weight.copy_(w)
    return adapter


def teacher_summary(preset, cfg, ctx, model, result, val_ce) -> dict:
    from methodkit.tools.mcd import models

    return {"preset": preset, "layers": cfg.n_layers, "width": cfg.d_model, "ctx": ctx,
            "non_embedding_params": models.non_embedding_params(model), "steps": result.steps,
            "resumed_from": result.resumed_from,
            "final_loss": result.final_loss, "val_ce": val_ce, "seconds": round(result.seconds, 2)}  # fmt: skip


def transcoder_summary(result) -> dict:
    rows = result.rows
    return {"layers": len(rows), "max_fvu": max(r["fvu"] for r in rows), "mean_l0": sum(r["l0"] for r in rows) / len(rows),
            "dead_pct": max(r["dead_pct"] for r in rows), "seconds": round(result.seconds, 2)}  # fmt: skip


def prompt_ids(prompt: str, ctx: int) -> list[int]:
    """`graph --prompt`: its last ctx bytes; two at least (one target position after a source)."""
    ids = list(prompt.encode("utf-8"))[-ctx:]
    if len(ids) < 2:
        raise DataError("--prompt: needs at least two bytes (one target position after a source)")
    return ids


def distill_config(*, kd, tau, lam, lam_path, lam_node, n_targets, mcd_warmup, unbalanced, on_policy, max_nodes,
                   n_paths, steps, node_scope="all", fgw=None, **_):  # fmt: skip
    """The DistillConfig from distill's objective options (the shared ones, seed, quiet ..., are ignored):
    --lam-path/--lam-node default to --mcd, the KD-only warmup to a tenth of the steps."""
    from methodkit.tools.mcd import distill as D
    from methodkit.tools.mcd import graph as G

    return D.DistillConfig(kd=kd, tau=tau, lam_path=lam if lam_path is None else lam_path,
                           lam_node=lam if lam_node is None else lam_node, n_targets=n_targets,
                           mcd_warmup=steps // 10 if mcd_warmup is None else mcd_warmup, unbalanced=unbalanced,
                           on_policy=on_policy, node_scope=node_scope, fgw=fgw,
                           graph=G.GraphSettings(max_nodes=max_nodes, n_paths=n_paths))  # fmt: skip


def save_student(folder, student_model, teacher, tok, cfg, lmap, bundle, s_tcs) -> None:
    """student.safetensors, adapter.safetensors and the student's stc_L{l}.safetensors in the run folder."""
    from methodkit.core import checkpoint
    from methodkit.tools.mcd import models
    from methodkit.tools.mcd import transcoder as T

    s_sha = models.weights_sha(student_model)
    models.save_model(Path(folder) / "student.safetensors", student_model, tokenizer=tok.meta["tokenizer"],
                      fingerprint=tok.fingerprint,
                      extra={"distill": cfg.to_dict(), "layer_map": lmap, "teacher_sha256": models.weights_sha(teacher)})  # fmt: skip
    checkpoint.save(Path(folder) / "adapter.safetensors", {"weight": bundle.adapter.weight}, config={"layer_map": lmap},
                    spec={"student": s_sha}, extra={"student_sha256": s_sha})  # fmt: skip
    for layer in range(len(s_tcs)):
        T.save(
            Path(folder) / f"stc_L{layer}.safetensors", s_tcs, layer, model_sha=s_sha, data_sha=tok.fingerprint, row={}
        )


def distill_summary(kd, cfg, s_cfg, student_model, teacher, lmap, result) -> dict:
    from methodkit.tools.mcd import models

    return {"kd": kd, "lam_path": cfg.lam_path, "lam_node": cfg.lam_node, "student_layers": s_cfg.n_layers,
            "student_width": s_cfg.d_model, "non_embedding_params": models.non_embedding_params(student_model),
            "compression": models.non_embedding_params(teacher) / max(models.non_embedding_params(student_model), 1),
            "layer_map": lmap, **result.to_dict()}  # fmt: skip


def first_per_suite(rows: list, n: int | None) -> list:
    """`eval --n`: the first n prompts of each suite (all when n is None)."""
    if not n:
        return rows
    by: dict = {}
    for r in rows:
        by.setdefault(r["suite"], []).append(r)
    return [r for suite in by.values() for r in suite[:n]]


def score_model(path, rows, tok, teacher, t_tcs, mechanism_windows: int, seed: int) -> dict:
    """One `eval` row: val CE and teacher agreement (with --tokens), the suites' exact match and ROUGE-L, and,
    for a student with its transcoders, the pathway OT cost and the node bound."""
    import numpy as np

    from methodkit.tools.mcd import evaluate as E
    from methodkit.tools.mcd import graph as G
    from methodkit.tools.mcd import losses, models, pretrain
    from methodkit.tools.mcd import transcoder as T

    model, side = models.load_model(model_file(path))
    rec = {"model": str(path), "layers": model.cfg.n_layers, "width": model.cfg.d_model}
    if tok is not None:
        val_w = models.Windows.cut(tok.stream("val"), model.cfg.max_len, 256, seed + 1)
        rec["val_ce"] = models.cross_entropy(model, val_w)
        if teacher is not None:
            rec["teacher_agreement"] = E.agreement(model, teacher, val_w)
    scores = E.suite_scores(model, rows, lambda s: list(s.encode("utf-8")),
                            lambda ids: bytes(ids).decode("utf-8", errors="replace"))  # fmt: skip
    rec.update(scores)
    instr = [scores[f"{s}_em"] for s in ("seen", "compose", "long") if f"{s}_em" in scores]
    rec["instr_em"] = float(np.mean(instr)) if instr else float("nan")
    folder = Path(model_file(path)).parent
    if t_tcs is not None and tok is not None and (folder / "stc_L0.safetensors").is_file() and model is not teacher:
        s_tcs = T.load_set(folder, model, models.weights_sha(model), prefix="stc")[0]
        lmap = side.get("layer_map") or losses.layer_map(model.cfg.n_layers, teacher.cfg.n_layers)
        mech = models.Windows.cut(tok.stream("val"), model.cfg.max_len, mechanism_windows, seed + 7)
        subset = pretrain.token_subset(tok.stream("train"), teacher.cfg.vocab_size)
        cost, n_empty = E.pathway_cost(teacher, t_tcs, model, s_tcs, mech, G.GraphSettings(max_nodes=16),
                                       subset, G.CostWeights(), 8, seed)  # fmt: skip
        rec["pathway_ot"] = cost
        adapter = load_adapter(folder)
        x, _ = mech.batch(np.arange(min(4, len(mech))))
        checks = losses.bound_check(teacher, t_tcs, model, s_tcs, adapter, x, lmap)
        rec["bound_violations"] = int(sum(c["discrepancy"] > c["bound"] + 1e-4 for c in checks))
        rec["bound_checked"] = len(checks)
        rec["mlp_discrepancy"] = float(np.mean([c["discrepancy"] for c in checks]))
        rec["mlp_bound"] = float(np.mean([c["bound"] for c in checks]))
    return rec


def graphs_at_top1(model, tcs, x, targets: int, settings, n_paths: int):
    """`graph`: attribution graphs of windows x at the model's top-1 next token on the last `targets`
    positions; the graphs, their top pathways and weights, and the summary."""
    import torch

    from methodkit.tools.mcd import graph as G

    T_len = x.shape[1]
    pos = torch.tensor([[T_len - 1 - i for i in range(min(targets, T_len - 1))] for _ in range(x.shape[0])])
    with torch.no_grad():
        top1 = model(x).argmax(-1).gather(1, pos)
    graphs = G.build(model, tcs, x, pos, top1, settings)
    paths, weights, empty = G.pathways(graphs, n_paths)
    return graphs, paths, weights, G.summary(graphs, paths, weights, empty)


def save_transcoders(folder, tcs, result, model, tok) -> None:
    """tc_L{l}.safetensors per layer (bound to the model's weights and the data) and tc_metrics.csv."""
    import pandas as pd

    from methodkit.core import io
    from methodkit.tools.mcd import models
    from methodkit.tools.mcd import transcoder as T

    sha = models.weights_sha(model)
    for row in result.rows:
        T.save(Path(folder) / f"tc_L{row['layer']}.safetensors", tcs, row["layer"], model_sha=sha,
               data_sha=tok.fingerprint, row=row)  # fmt: skip
    io.write_table(pd.DataFrame(result.rows), Path(folder) / "tc_metrics.csv", force=True)


def student_config(teacher, student, ctx: int, layers, width, layer_map):
    """The student's model config (on the teacher's vocabulary) and its layer map to the teacher."""
    from methodkit.tools.mcd import losses, models

    s_cfg = models.model_config(student, ctx, teacher.cfg.vocab_size, layers, width)
    return s_cfg, losses.layer_map(s_cfg.n_layers, teacher.cfg.n_layers, layer_map)


def eval_teacher(teacher_path, tc_dir):
    """`eval --teacher/--teacher-tc`: the teacher and its transcoders (None where not given)."""
    from methodkit.tools.mcd import models
    from methodkit.tools.mcd import transcoder as T

    teacher = models.load_model(model_file(teacher_path))[0] if teacher_path else None
    t_tcs = T.load_set(tc_dir, teacher, models.weights_sha(teacher))[0] if (tc_dir and teacher is not None) else None
    return teacher, t_tcs


def graph_inputs(tok, prompt: str | None, ctx: int, n_windows: int, seed: int):
    """`graph`: the (batch, T) token ids: the --prompt's bytes, else n_windows windows of the val split."""
    import numpy as np
    import torch

    from methodkit.tools.mcd import models

    if prompt is not None:
        return torch.tensor([prompt_ids(prompt, ctx)])
    x, _ = models.Windows.cut(tok.stream("val"), ctx, n_windows, seed).batch(np.arange(n_windows))
    return x


def save_teacher(folder, model, tok, summary: dict) -> None:
    """teacher.safetensors (with the tokenizer, the data fingerprint and val CE) and config.json."""
    from methodkit.core import io
    from methodkit.tools.mcd import models

    models.save_model(Path(folder) / "teacher.safetensors", model, tokenizer=tok.meta["tokenizer"],
                      fingerprint=tok.fingerprint, extra={"val_ce": summary["val_ce"]})  # fmt: skip
    io.write_json(summary, Path(folder) / "config.json", force=True, indent=1)

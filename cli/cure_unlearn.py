"""cure-unlearn: selective trajectory unlearning for offline RL agents (CURE)."""

from __future__ import annotations

import click

from methodkit.cli import _cure_options as opt
from methodkit.cli._common import OutputPath, Run, common_options, tool_group, warn
from methodkit.cli._cure_options import DEMO  # noqa: F401  (make demo reads it here)

PROG = "cure-unlearn"


@tool_group(name=PROG)
def main():
    """CURE: unlearn chosen trajectories from an offline RL agent, gated by their overlap with retained data.

    Per forget trajectory, the cosine between its semi-gradient TD gradient and the retained gradient
    g_R (at the original critic) is turned into a gate w in [w_min, 1], calibrated on retained
    trajectories kept out of g_R. The gate weights a one-sided, state-conditional suppression of Q on
    forget actions below a retained baseline b(s) (an expectile V_R of Q_0 on D_r) minus a margin, keeps
    aligned forget data as ordinary TD data with weight 1 - w, anchors Q on retained data, and couples
    the actor (imitation of forget actions scaled by 1 - w, repulsion weighted by w). First-order
    reading: with step -eta (g_R + lambda_s sum w h), the retained loss changes by -eta (|g_R|^2 +
    lambda_s sum w <g_R, h>), so down-weighting suppression gradients h of aligned trajectories bounds
    retained drift. Backbones TD3+BC, IQL, CQL; baselines retrain, finetune, neggrad, random-reward,
    trajdeleter, cure-uniform, cure-noactor. Data sets come from gymnasium MuJoCo with named
    contributors (docs/cure-unlearn.md).

    \b
    EXAMPLES
      cure-unlearn collect -o cheetah.npz
      cure-unlearn train cheetah.npz --algo td3bc -o orig.safetensors
      cure-unlearn train cheetah.npz --exclude-contributor F-mix -o retrain.safetensors
      cure-unlearn forget orig.safetensors cheetah.npz --forget-contributor F-mix \\
        --scores-out scores.csv -o cure.safetensors
      cure-unlearn audit cheetah.npz --original orig.safetensors --reference-retrain retrain.safetensors \\
        cure.safetensors --forget-contributor F-mix | jq '.models[] | {model, fir, return_ratio}'

    \b
    EXIT STATUS
      0  success
      1  failure while running (training diverged; forget diverged again after halving lambda_s;
         --device cuda without CuPy or a GPU)
      2  bad usage or bad input (unknown, duplicated or held-out forget ids, a forget set covering
         every training trajectory, NaN/inf or actions outside [-1, 1], trajectories under 2 steps,
         model/data dims or sha256 mismatch, a model of another --algo, an unknown env,
         a --resume checkpoint of another run)
      3  audit --fail-above and a model's fir exceeded it
      130  interrupted (nothing is written but train's or forget's MODEL.partial checkpoint)
    """


def _dataset(run: Run, path: str):
    from methodkit.core import io
    from methodkit.tools.cure.data import validate

    data = run.input_bytes(path)
    return validate(io.read_arrays(data), name=data.name)


def _text(run: Run, path: str | None) -> str | None:
    return None if path is None else run.input_bytes(path).data.decode("utf-8", errors="replace")


def _model(path: str, ds, allow_mismatch: bool, algo: str | None = None):
    from methodkit.core.io import require_input
    from methodkit.tools.cure.backbones import load_model
    from methodkit.tools.cure.pipeline import check_model_data

    require_input(path)
    agent, meta = load_model(path, algo)
    check_model_data(meta, ds, path, allow_mismatch)
    return agent, meta


@main.command("collect")
@click.option("--spec", "spec_path", default=None, metavar="SPEC.json", help="Contributor spec [default: built in].")
@click.option("--env", "env_id", default="HalfCheetah-v5", show_default=True, help="gymnasium env (built-in spec).")
@click.option("--scale", type=opt.FiniteFloatRange(min=0, min_open=True), default=1.0, show_default=True,
              help="Multiply the built-in spec's chunk counts.")  # fmt: skip
@click.option("--chunk", type=click.IntRange(min=2), default=200, show_default=True, help="Steps per trajectory.")
@click.option("--behaviour", type=click.Choice(("ars", "cpg", "td3")), default=None,
              help="Behaviour policies: linear ARS, a scripted gait, or online TD3 [default: the spec's, ars].")  # fmt: skip
@click.option("--behaviour-iters", type=click.IntRange(min=1), default=None, help="ARS iterations [10].")
@click.option("--behaviour-steps", type=click.IntRange(min=2), default=None, help="Online TD3 env steps [60000].")
@click.option("-o", "--output", type=OutputPath(), required=True, metavar="PATH", help="Data set (.npz).")
@common_options("seed", "threads", "force", "meta", "quiet", "verbose", threads_default=opt.ONE_TORCH_THREAD)
def collect_cmd(spec_path, env_id, scale, chunk, behaviour, behaviour_iters, behaviour_steps, output, **_):
    """Roll out the contributors of a spec in MuJoCo and write the data set; print its summary JSON.

    The built-in spec: R (medium policy + N(0, 0.1) noise), F-mix (the same policy; in a half of
    its chunks a style adds 0.6 u to the action while obs[2] > 0) and F-disjoint (an early
    policy), each with held-out non-member chunks.
    """
    from methodkit.core import io
    from methodkit.tools.cure.data import Spec, collect, default_spec, summary, validate

    run = Run.from_context()
    doc = run.read_json(spec_path) if spec_path else default_spec(scale, env_id, chunk)
    given = {"behaviour": behaviour, "behaviour_iters": behaviour_iters, "behaviour_steps": behaviour_steps}
    flags = {k: v for k, v in given.items() if v is not None}
    doc = {**doc, **flags} if flags and isinstance(doc, dict) else doc  # Spec.parse names a non-object
    spec = Spec.parse(doc, spec_path or "built-in spec")
    run.threads(default=1)
    with run.progress() as cb:
        arrays = collect(spec, seed=run.seed, progress=cb)
    io.write_arrays(output, arrays, force=run.force)
    run.emit_result({"output": output, **summary(validate(arrays, output))}, output="-")


@main.command("train")
@click.argument("data", metavar="DATA.npz")
@opt.train_options
@opt.exclude_options
@click.option("-o", "--output", type=OutputPath(), required=True, metavar="PATH", help="Model (.safetensors).")
@common_options("seed", "threads", "force", "meta", "quiet", "verbose", threads_default=opt.ONE_TORCH_THREAD)
def train_cmd(data, algo, steps, hidden, batch_size, checkpoint_every, resume, exclude_path, exclude_contributor,
              output, **_):  # fmt: skip
    """Train a backbone on a data set's training trajectories minus an exclusion list; print JSON.

    The state is kept in MODEL.partial.safetensors (+ .partial.json) every --checkpoint-every
    steps and when Ctrl-C or SIGTERM stops the run (between two steps, exit 130); --resume
    continues it with the same result as an uninterrupted run. It is removed once MODEL is written.
    """
    from methodkit.core.outputs import writes_beside
    from methodkit.tools.cure import resume as ckpt
    from methodkit.tools.cure.pipeline import resolve_ids
    from methodkit.tools.cure.train import train

    run = Run.from_context()
    ds = _dataset(run, data)
    exclude = resolve_ids(ds, _text(run, exclude_path), exclude_contributor, "--exclude")
    from methodkit.tools.cure.backbones import save_model  # torch: after the checks of the input
    run.threads(default=1)
    partial = str(ckpt.partial_path(output)) if writes_beside(output) else None
    with run.progress() as cb:
        agent, info, result = train(ds, algo, exclude=exclude, steps=steps, hidden=hidden, batch_size=batch_size,
                                    seed=run.seed, progress=cb, checkpoint=partial, checkpoint_every=checkpoint_every,
                                    resume=resume)  # fmt: skip
    save_model(output, agent, info, force=run.force or resume)
    if partial is not None:
        ckpt.remove(partial)
    run.emit_result({"output": output, **result.to_dict()}, output="-")


@main.command("forget")
@click.argument("model", metavar="MODEL")
@click.argument("data", metavar="DATA.npz")
@click.option("-o", "--output", type=OutputPath(), required=True, metavar="PATH", help="Unlearned model.")
@opt.forget_set_options
@opt.exclude_options
@opt.cure_options
@common_options("seed", "threads", "force", "meta", "quiet", "verbose", threads_default=opt.ONE_TORCH_THREAD)
def forget_cmd(model, data, forget_path, forget_contributor, exclude_path, exclude_contributor, algo,
               scores_out, allow_dataset_mismatch, output, **params):  # fmt: skip
    """Unlearn a forget set from a trained model (--method cure, or a baseline); print JSON.

    The JSON gives the method, steps, wall-clock, the gate histogram and mean gates per group
    (forget chunks styled/plain, calibration, held-out chunks scored as if forgotten). Our
    readings: cure-noactor gates the critic and trains the actor as the plain backbone on
    D_r and D_f; IQL's actor is deterministic (AWR-weighted regression); CQL's actor has no
    imitation term, so only the repulsion and the pi_0 anchor couple it; neggrad ascends
    0.25 x the forget TD loss; divergence (non-finite loss or |Q| > 1e6) rolls back to the
    last 50-step snapshot and halves lambda_s once, then exits 1. Like train, it checkpoints to
    MODEL.partial.safetensors (also on Ctrl-C) and --resume continues it bitwise (docs/cure-unlearn.md).
    """
    run = Run.from_context()
    device, every, resume = run.device(), params["checkpoint_every"], params["resume"]  # cuda without a GPU: exit 1
    from methodkit.core import io
    from methodkit.core.outputs import writes_beside
    from methodkit.tools.cure import resume as ckpt
    from methodkit.tools.cure.pipeline import forget_set, resolve_ids, scores_frame
    from methodkit.tools.cure.train import ids_sha256

    ds = _dataset(run, data)
    exclude = resolve_ids(ds, _text(run, exclude_path), exclude_contributor, "--exclude")
    ids, warnings = forget_set(ds, _text(run, forget_path), forget_contributor, exclude)
    from methodkit.tools.cure.backbones import model_sha256, save_model  # torch: after the checks of the ids
    from methodkit.tools.cure.forget_run import ForgetConfig, forget
    agent0, meta0 = _model(model, ds, allow_dataset_mismatch, algo)
    for message in warnings:
        warn(PROG, message)
    run.threads(default=1)
    keys = set(ForgetConfig.__dataclass_fields__)
    cfg = ForgetConfig(**{k: v for k, v in params.items() if k in keys - {"seed", "device"}}, seed=run.seed,
                       device=device)  # fmt: skip
    partial = str(ckpt.partial_path(output)) if writes_beside(output) else None
    with run.progress() as cb:
        agent, scores, result = forget(agent0, ds, ids, cfg, exclude=exclude, original_steps=int(meta0.get("steps", 0)),
                                       progress=cb, checkpoint=partial, checkpoint_every=every, resume=resume)  # fmt: skip
    info = {k: meta0.get(k) for k in ("dataset_sha256", "env", "batch_size")}
    info.update(steps=result.steps, seed=run.seed, method=cfg.method, seconds=result.seconds,
                forgotten_sha256=ids_sha256(ids), parent_sha256=model_sha256(model),
                excluded_sha256=ids_sha256(exclude), original_steps=meta0.get("steps"))  # fmt: skip
    save_model(output, agent, info, force=run.force or resume)
    if scores_out and scores is not None:
        io.write_table(scores_frame(ds, scores), scores_out, force=run.force or resume)
    if partial is not None:
        ckpt.remove(partial)
    for message in result.warnings:
        warn(PROG, message)
    run.emit_result({"output": output, **result.to_dict()}, output="-")


@main.command("audit")
@click.argument("data", metavar="DATA.npz")
@click.argument("models", nargs=-1, metavar="MODEL...")
@opt.forget_set_options
@opt.exclude_options
@opt.audit_options
@common_options("seed", "threads", "force", "meta", "quiet", "verbose", threads_default=opt.ONE_TORCH_THREAD)
def audit_cmd(data, models, forget_path, forget_contributor, exclude_path, exclude_contributor, original,
              reference_retrain, per_traj_out, fail_above, allow_dataset_mismatch, **params):  # fmt: skip
    """Measure return and forget influence of models; print one JSON report.

    Per model: return_mean/std, return_ratio (vs --original), fir (0 = like the retrain, 1 = like
    the original, over forget states where the style fired), mia_auc (0.5 = undetectable),
    unlearn_rate (Grubbs test of the value-distribution distance against shadow copies) and
    cost_ratio (wall-clock vs the retrain's).
    """
    from methodkit.core import io
    from methodkit.core.errors import CheckFailed
    from methodkit.tools.cure.audit import AuditConfig, audit
    from methodkit.tools.cure.pipeline import forget_set, per_traj_frame, resolve_ids

    run = Run.from_context()
    ds = _dataset(run, data)
    exclude = resolve_ids(ds, _text(run, exclude_path), exclude_contributor, "--exclude")
    ids, _ = forget_set(ds, _text(run, forget_path), forget_contributor, exclude)
    agents, metas = {}, {}
    for path in (original, reference_retrain, *models):
        if path and path not in agents:
            agents[path], metas[path] = _model(path, ds, allow_dataset_mismatch)
    run.threads(default=1)
    keys = set(AuditConfig.__dataclass_fields__)
    cfg = AuditConfig(**{k: v for k, v in params.items() if k in keys - {"seed"}}, seed=run.seed)
    retrain = agents.get(reference_retrain) if reference_retrain else None
    retrain_s = metas[reference_retrain].get("seconds") if reference_retrain else None
    with run.progress() as cb:
        rows, per_traj = audit(agents, metas, agents[original], ds, ids, cfg, retrain=retrain,
                               retrain_seconds=retrain_s, contributor=forget_contributor,
                               exclude=exclude, progress=cb)  # fmt: skip
    if per_traj_out:
        io.write_table(per_traj_frame(ds, per_traj), per_traj_out, force=run.force)
    report = {"forget_trajectories": len(ids), "models": [r.to_dict() for r in rows]}
    run.emit_result(report, output="-")
    worst = [r for r in rows if r.fir is not None and fail_above is not None and r.fir > fail_above]
    if worst:
        raise CheckFailed(f"fir {worst[0].fir:.3f} of {worst[0].model} is above --fail-above {fail_above}")

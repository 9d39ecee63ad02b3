"""craft-finetune: counterfactual-to-interactive reinforcement fine-tuning of driving policies (CRAFT)."""

from __future__ import annotations

import click

from methodkit.cli import _craft_options as opt
from methodkit.cli._common import DemoStep, OutputPath, Run, common_options, input_argument, tool_group

DEMO = [
    DemoStep(
        "craft-finetune demos --suite hwy-mini -o demos.npz >/dev/null"
        " && craft-finetune pretrain demos.npz --steps 300 -o bc.safetensors >/dev/null"
        " && craft-finetune finetune bc.safetensors --suite hwy-mini --iterations 1 --episodes 8 -o craft.safetensors"
        " >/dev/null && craft-finetune eval craft.safetensors --suite hwy-mini",
        "hwy-mini: 6 families x 5 routes",
        "ds",
        "driving score after one CRAFT iteration",
    ),
]

def _routes(run: Run, value: str, flag: str = "--suite"):
    from methodkit.tools.craft import suites

    return suites.resolve(value, run.input_bytes, flag)


def _backend(name: str, verb: str):
    from methodkit.tools.craft import suites

    suites.check_backend(name, verb)


def _policy(path: str):
    from methodkit.tools.craft import policy

    return policy.load(path)


@tool_group(name="craft-finetune")
def main():
    """Post-train an imitation driving policy with counterfactual proxies and grounded residuals (CRAFT).

    A vocabulary-scoring policy (16 candidate 4 s plans: {left, keep, right} x 5 target
    speeds + emergency stop) drives the batched highway simulator of methodkit-sim. `demos`
    records the privileged expert, `pretrain` clones it, `finetune` post-trains on-policy:
    group-normalised counterfactual advantages over all candidates (the PDM score of each
    plan against constant-velocity forecasts of the others: dense, biased) plus a grounded
    residual on interaction-critical windows (realised score minus proxy score of the
    executed plan: sparse, unbiased), dual-clip ratios, and asymmetric KL self-distillation
    toward an EMA teacher. `eval` runs the closed-loop benchmark (DS = mean RC x penalty, SR).
    Suites: hwy-mini (6 families x 5 routes), hwy-train (6 x 40), hwy-test (6 x 20, seeds
    disjoint), or a JSON list of routes {"family", "seed", "params"}.

    \b
    EXAMPLES
      craft-finetune demos --suite hwy-train -o demos.npz
      craft-finetune pretrain demos.npz --arch mlp -o bc.safetensors
      craft-finetune finetune bc.safetensors --suite hwy-train --method craft --log run.jsonl -o craft.safetensors
      craft-finetune eval craft.safetensors --suite hwy-test --routes-out routes.csv

    \b
    EXIT STATUS
      0  success
      1  failure while running (fine-tuning diverged twice)
      2  bad usage or bad input (suite route invalid, existing output without --force, --backend
         highway-env without the package (the pip command is printed) or outside eval)
      3  policy or demos made for another vocabulary or observation layout; --fail-below not met
      130  interrupted (fine-tuning keeps its checkpoint: rerun with --resume)
    """


@main.command("demos")
@input_argument(required=False)
@opt.suite_option(default=None, help_text="Built-in suite (hwy-mini, hwy-train, hwy-test) instead of INPUT.")
@opt.backend_option
@click.option("-o", "--output", type=OutputPath(), default=None, metavar="PATH", help="Demos .npz (required).")
@common_options("threads", "force", "meta", "quiet", "verbose")
def demos_cmd(input, suite, backend, output, **_):
    """Roll out the privileged expert over a suite and record every decision (obs, expert index, 4 s future).

    INPUT is a suite JSON file; --suite names a built-in one. Prints the decision counts per family.
    """
    from methodkit.core import io
    from methodkit.core.errors import UsageError
    from methodkit.tools.craft import demos

    run = Run.from_context()
    if input not in (None, "-") and suite:
        raise UsageError("give a suite file (INPUT) or --suite NAME, not both")
    _backend(backend, "demos")
    run.threads()
    routes = _routes(run, suite or input or "-")
    if not output or output == "-":
        raise UsageError("pass -o PATH.npz for the demonstrations")
    with run.progress() as callback:
        arrays, counts = demos.run(routes, progress=callback)
    io.write_arrays(output, arrays, force=run.force)
    run.emit_result({"decisions": int(arrays["obs"].shape[0]), "routes": len(routes), "families": counts}, "-")


@main.command("pretrain")
@input_argument(required=True)
@click.option("--arch", type=click.Choice(("mlp", "attn")), default="mlp", show_default=True, help="Policy encoder.")
@click.option("--steps", type=click.IntRange(1), default=3000, show_default=True, help="Optimiser steps.")
@click.option("--batch-size", type=click.IntRange(1), default=256, show_default=True, help="Demonstrations a step.")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=1e-3, show_default=True, help="AdamW LR.")
@click.option("-o", "--output", type=opt.POLICY_OUT, default=None, metavar="PATH", help="Policy .safetensors (required).")
@common_options("seed", "threads", "force", "meta", "quiet", "verbose")
def pretrain_cmd(input, arch, steps, batch_size, lr, output, seed, **_):
    """Behaviour cloning of the expert's vocabulary choice from a demos NPZ (INPUT), through core.train.

    Writes the policy (safetensors) and its JSON sidecar (architecture, vocabulary, method,
    hyper-parameters, data fingerprint); prints the final loss and accuracy.
    """
    import torch

    from methodkit.core import io
    from methodkit.core.errors import UsageError
    from methodkit.core.train import TrainConfig
    from methodkit.tools.craft import demos, policy, pretrain

    run = Run.from_context()
    data = run.input_bytes(input)
    arrays = io.read_arrays(data)
    demos.check(arrays, data.name)
    if not output or output == "-":
        raise UsageError("pass -o PATH.safetensors for the policy")
    run.threads()
    torch.set_num_threads(1)  # a 53 x 256 MLP: more threads only add overhead
    cfg = TrainConfig(steps=steps, batch_size=batch_size, lr=lr, seed=seed, log_every=max(1, steps // 10))
    with run.progress() as callback:
        model, info = pretrain.run(arrays["obs"], arrays["expert_idx"], arch, cfg, progress=callback)
    policy.save(output, model, arch, {"method": "bc", "hyper": {"steps": steps, "batch_size": batch_size, "lr": lr,
                "seed": seed}, "demos_sha256": data.sha256})  # fmt: skip
    run.emit_result({"arch": arch, **info}, "-")


@main.command("finetune")
@input_argument(required=True)
@opt.suite_option(default="hwy-train", help_text="Training suite: built-in name or suite JSON.")
@opt.finetune_options
@click.option("-o", "--output", type=opt.POLICY_OUT, default=None, metavar="PATH", help="Policy .safetensors (required).")
@common_options("seed", "device", "threads", "force", "meta", "quiet", "verbose")
def finetune_cmd(input, suite, eval_suite, backend, log_path, run_dir, resume, output, seed, **o):
    """On-policy post-training of a policy (INPUT .safetensors) on a suite; --method craft or a baseline.

    Methods: craft (proxy + residual on critical windows + EMA-teacher KL), bc (no
    fine-tuning), closed-loop-ppo (PPO + GAE on the per-step reward progress - collision -
    off-road, value head), proxy-only (group proxy + KL to the frozen BC policy), and the
    ablations craft-no-res, craft-res-all, craft-no-kl, craft-refkl. The input file is never
    modified. Prints the final iteration as JSON; --log keeps every iteration. --device
    places the PDM candidate scorer: cpu = the Numba kernel; cuda = the same scorer
    array-at-a-time on CuPy (auto picks cuda when CuPy sees a GPU; cuda without one exits
    1); the networks stay on the CPU.
    """
    run = Run.from_context()
    device = run.device()  # before torch is imported: --device cuda without a GPU fails at once
    import torch

    from methodkit.core import io
    from methodkit.core.errors import UsageError
    from methodkit.tools.craft import finetune, policy

    model, sidecar = _policy(input)
    if not output or output == "-":
        raise UsageError("pass -o PATH.safetensors for the fine-tuned policy")
    if resume and not run_dir:
        raise UsageError("--resume needs --run-dir")
    cfg = finetune.config_from_options(o, seed)
    _backend(backend, "finetune")
    run.threads()
    torch.set_num_threads(1)  # small networks: more threads only add overhead
    arch = sidecar["config"]["arch"]
    routes = _routes(run, suite)
    eval_routes = _routes(run, eval_suite, "--eval-suite") if eval_suite else None
    parent = policy.file_hash(input)
    with run.progress() as callback:
        model, result = finetune.run(model, arch, routes, cfg, eval_routes=eval_routes, run_dir=run_dir,
                                     resume=resume, progress=callback, parent=parent, device=device)  # fmt: skip
    import dataclasses

    policy.save(output, model, arch, {"method": cfg.method, "hyper": dataclasses.asdict(cfg), "suite": suite},
                parent=parent)  # fmt: skip
    if log_path:
        from methodkit.core.io import atomic_write

        with atomic_write(log_path, binary=False, force=run.force or resume) as handle:
            for row in result.history:
                handle.write(io.dumps_json(row) + "\n")
    run.emit_result({"method": cfg.method, "arch": arch, **result.to_dict()}, "-")


@main.command("eval")
@input_argument(required=True)
@opt.suite_option(default="hwy-test", help_text="Benchmark suite: built-in name or suite JSON.")
@click.option("--routes-out", type=OutputPath(), default=None, metavar="PATH", help="One row per route (CSV/...).")
@click.option("--fail-below", type=float, default=None, metavar="DS", help="Exit 3 when the DS is below this.")
@opt.backend_option
@common_options("threads", "force", "meta", "quiet", "verbose")
def eval_cmd(input, suite, routes_out, fail_below, backend, **_):
    """Closed-loop benchmark of a policy (INPUT): DS, RC, SR, infractions, efficiency, comfort, per family.

    --backend highway-env drives the same greedy policy on the same routes in highway-env
    itself (its traffic; this simulator's observation and plan controller; the same metrics),
    one route at a time and about 10x slower: compare its JSON with the numba one for parity.
    Needs methodkit[craft].
    """
    import pandas as pd
    import torch

    from methodkit.core.errors import CheckFailed
    from methodkit.tools.craft import evaluate

    run = Run.from_context()
    _backend(backend, "eval")
    run.threads()
    torch.set_num_threads(1)  # small networks: more threads only add overhead
    model, _ = _policy(input)
    routes = _routes(run, suite)
    with run.progress() as callback:
        out = evaluate.run(model, routes, backend=backend, progress=callback)
    if routes_out:
        run.emit_table(pd.DataFrame(out["rows"]), routes_out)
    run.emit_result(out["summary"], "-")
    if fail_below is not None and out["summary"]["ds"] < fail_below:
        raise CheckFailed(f"driving score {out['summary']['ds']:.2f} is below --fail-below {fail_below:g}")

"""craft-finetune: counterfactual-to-interactive reinforcement fine-tuning of driving policies (CRAFT)."""

from __future__ import annotations

import click

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

SUITES = ("hwy-mini", "hwy-train", "hwy-test")
METHODS = (
    "craft", "bc", "closed-loop-ppo", "proxy-only", "craft-no-res", "craft-res-all", "craft-no-kl", "craft-refkl",
)  # fmt: skip
POLICY_OUT = OutputPath(sidecars=(".json",))


def _suite_option(default="hwy-mini", flag="--suite", help_text="Built-in suite, or a suite JSON file."):
    return click.option(flag, "suite", default=default, show_default=True, metavar="NAME|PATH", help=help_text)


def _routes(run: Run, value: str, flag: str = "--suite"):
    from methodkit.core import io
    from methodkit.tools.craft import suites

    if value in SUITES:
        return suites.builtin(value)
    if value.endswith(".json") or value == "-":
        data = run.input_bytes(value)
        return suites.parse(io.read_json(data), data.name)
    from methodkit.core.errors import UsageError

    raise UsageError(f"{flag} {value!r}: not a built-in suite ({', '.join(SUITES)}) nor a .json file")


def _backend(name: str):
    from methodkit.core.errors import CheckFailed

    if name == "highway-env":
        import importlib.util

        if importlib.util.find_spec("highway_env") is None:
            raise CheckFailed("--backend highway-env needs the highway-env package: pip install highway-env")
        raise CheckFailed(
            "--backend highway-env: highway-env cannot run the vocabulary policy's counterfactual groups "
            "(no snapshot of its road); it is the parity reference of `methodkit-sim rollout --backend highway-env`"
        )


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
      2  bad usage or bad input (suite route invalid, existing output without --force)
      3  policy or demos made for another vocabulary or observation layout; --fail-below not met;
         --backend highway-env asked for
      130  interrupted (fine-tuning keeps its checkpoint: rerun with --resume)
    """


@main.command("demos")
@input_argument(required=False)
@_suite_option(default=None, help_text="Built-in suite (hwy-mini, hwy-train, hwy-test) instead of INPUT.")
@click.option("--backend", type=click.Choice(("numba", "highway-env")), default="numba", show_default=True,
              help="Simulator backend.")  # fmt: skip
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
    _backend(backend)
    run.threads()
    routes = _routes(run, suite or input or "-") if suite or input not in (None, "-") else None
    if routes is None:
        from methodkit.core import io as _io
        from methodkit.tools.craft import suites

        data = run.input_bytes("-")
        routes = suites.parse(_io.read_json(data), data.name)
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
@click.option("-o", "--output", type=POLICY_OUT, default=None, metavar="PATH", help="Policy .safetensors (required).")
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
@_suite_option(default="hwy-train", help_text="Training suite: built-in name or suite JSON.")
@click.option("--method", type=click.Choice(METHODS), default="craft", show_default=True, help="Fine-tuning method.")
@click.option("--iterations", type=click.IntRange(1), default=100, show_default=True, help="On-policy iterations.")
@click.option("--episodes", type=click.IntRange(1), default=32, show_default=True, help="Episodes per iteration.")
@click.option("--epochs", type=click.IntRange(1), default=4, show_default=True, help="Passes over each batch.")
@click.option("--minibatch", type=click.IntRange(1), default=512, show_default=True, help="States per step.")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=1e-4, show_default=True, help="Adam LR.")
@click.option("--group-size", type=click.IntRange(2, 16), default=16, show_default=True,
              help="Candidates per group (16: all; fewer: sampled from pi_old).")  # fmt: skip
@click.option(
    "--proxy-futures",
    type=click.Choice(("cv", "log")),
    default="cv",
    show_default=True,
    help="Others' futures in the proxy: constant-velocity forecasts or the realised log (non-reactive).",
)
@click.option("--beta", type=click.FloatRange(min=0), default=0.05, show_default=True, help="KL weight.")
@click.option("--lambda-res", type=click.FloatRange(min=0), default=1.0, show_default=True, help="Residual weight.")
@click.option("--entropy", type=click.FloatRange(min=0), default=0.001, show_default=True, help="Entropy bonus.")
@click.option("--ema", type=click.FloatRange(0, 1), default=0.995, show_default=True, help="EMA teacher decay.")
@click.option("--kl-dir", type=click.Choice(("fwd", "rev", "sym")), default="fwd", show_default=True,
              help="fwd = KL(teacher || student), mode covering.")  # fmt: skip
@click.option("--kl-gate", type=click.Choice(("none", "adv")), default="none", show_default=True,
              help="adv: weight 0.1 on drift backed by advantage.")  # fmt: skip
@click.option("--adv-floor", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Ours: divide the group advantage by max(std_G, this); 0 = the paper's std.")  # fmt: skip
@click.option("--critical-events", default="collision,ttc,rear_brake,tight_lane_change,hard_brake,proxy_conflict",
              show_default=True, metavar="LIST", help="Events that make a window critical (comma-separated).")  # fmt: skip
@click.option("--eval-suite", default=None, metavar="NAME|PATH", help="Greedy DS on this suite every --eval-every.")
@click.option("--eval-every", type=click.IntRange(0), default=0, show_default=True, help="Iterations between evals.")
@click.option("--backend", type=click.Choice(("numba", "highway-env")), default="numba", show_default=True,
              help="Simulator backend.")  # fmt: skip
@click.option("--log", "log_path", type=OutputPath(), default=None, metavar="PATH", help="One JSON line per iteration.")
@click.option("--run-dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Checkpoint folder (every iteration), for --resume.")  # fmt: skip
@click.option("--resume", is_flag=True, help="Continue from the checkpoint in --run-dir.")
@click.option("-o", "--output", type=POLICY_OUT, default=None, metavar="PATH", help="Policy .safetensors (required).")
@common_options("seed", "threads", "force", "meta", "quiet", "verbose")
def finetune_cmd(input, suite, method, iterations, episodes, epochs, minibatch, lr, group_size, proxy_futures, beta,
                 lambda_res, entropy, ema, kl_dir, kl_gate, adv_floor, critical_events, eval_suite, eval_every, backend, log_path, run_dir,
                 resume, output, seed, **_):  # fmt: skip
    """On-policy post-training of a policy (INPUT .safetensors) on a suite; --method craft or a baseline.

    Methods: craft (proxy + residual on critical windows + EMA-teacher KL), bc (no
    fine-tuning), closed-loop-ppo (PPO + GAE on the per-step reward progress - collision -
    off-road, value head), proxy-only (group proxy + KL to the frozen BC policy), and the
    ablations craft-no-res, craft-res-all, craft-no-kl, craft-refkl. The input file is never
    modified. Prints the final iteration as JSON; --log keeps every iteration.
    """
    import torch

    from methodkit.core import io
    from methodkit.core.errors import UsageError
    from methodkit.tools.craft import finetune, policy

    run = Run.from_context()
    model, sidecar = _policy(input)
    if not output or output == "-":
        raise UsageError("pass -o PATH.safetensors for the fine-tuned policy")
    if resume and not run_dir:
        raise UsageError("--resume needs --run-dir")
    cfg = finetune.FinetuneConfig(method=method, iterations=iterations, episodes=episodes, epochs=epochs,
                                  minibatch=minibatch, lr=lr, group_size=group_size, proxy_futures=proxy_futures,
                                  beta=beta, lambda_res=lambda_res, entropy=entropy, ema=ema, kl_dir=kl_dir,
                                  kl_gate=kl_gate, eval_every=eval_every, seed=seed, adv_floor=adv_floor,
                                  critical_events=tuple(x.strip() for x in critical_events.split(",") if x.strip()))  # fmt: skip
    _backend(backend)
    run.threads()
    torch.set_num_threads(1)  # small networks: more threads only add overhead
    arch = sidecar["config"]["arch"]
    routes = _routes(run, suite)
    eval_routes = _routes(run, eval_suite, "--eval-suite") if eval_suite else None
    parent = policy.file_hash(input)
    with run.progress() as callback:
        model, result = finetune.run(model, arch, routes, cfg, eval_routes=eval_routes, run_dir=run_dir,
                                     resume=resume, progress=callback, parent=parent)  # fmt: skip
    import dataclasses

    policy.save(output, model, arch, {"method": method, "hyper": dataclasses.asdict(cfg), "suite": suite},
                parent=parent)  # fmt: skip
    if log_path:
        from methodkit.core.io import atomic_write

        with atomic_write(log_path, binary=False, force=run.force or resume) as handle:
            for row in result.history:
                handle.write(io.dumps_json(row) + "\n")
    run.emit_result({"method": method, "arch": arch, **result.to_dict()}, "-")


@main.command("eval")
@input_argument(required=True)
@_suite_option(default="hwy-test", help_text="Benchmark suite: built-in name or suite JSON.")
@click.option("--routes-out", type=OutputPath(), default=None, metavar="PATH", help="One row per route (CSV/...).")
@click.option("--fail-below", type=float, default=None, metavar="DS", help="Exit 3 when the DS is below this.")
@click.option("--backend", type=click.Choice(("numba", "highway-env")), default="numba", show_default=True,
              help="Simulator backend.")  # fmt: skip
@common_options("threads", "force", "meta", "quiet", "verbose")
def eval_cmd(input, suite, routes_out, fail_below, backend, **_):
    """Closed-loop benchmark of a policy (INPUT): DS, RC, SR, infractions, efficiency, comfort, per family."""
    import pandas as pd
    import torch

    from methodkit.core.errors import CheckFailed
    from methodkit.tools.craft import evaluate

    run = Run.from_context()
    _backend(backend)
    run.threads()
    torch.set_num_threads(1)  # small networks: more threads only add overhead
    model, _ = _policy(input)
    routes = _routes(run, suite)
    out = evaluate.run(model, routes)
    if routes_out:
        run.emit_table(pd.DataFrame(out["rows"]), routes_out)
    run.emit_result(out["summary"], "-")
    if fail_below is not None and out["summary"]["ds"] < fail_below:
        raise CheckFailed(f"driving score {out['summary']['ds']:.2f} is below --fail-below {fail_below:g}")

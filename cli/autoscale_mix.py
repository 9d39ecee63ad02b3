"""autoscale-mix: closed-loop real/synthetic data mixture for driving planners (AutoScale)."""

from __future__ import annotations

import click

from methodkit.cli._autoscale_options import log as _log
from methodkit.cli._autoscale_options import out_dir as _out_dir
from methodkit.cli._autoscale_options import planner_options, synthetic_backend, warn_if_no_faiss
from methodkit.cli._autoscale_options import write_files as _write_files
from methodkit.cli._common import DemoStep, OutputPath, Run, common_options, tool_group

DEMO = [
    DemoStep(
        "autoscale-mix pools -o p --real 120 --synth 600 --val 80 --test 80 -q > /dev/null && "
        "autoscale-mix embed p --epochs 1 -j 1 -q > /dev/null && "
        "autoscale-mix run p -o r --budget 150 --rounds 2 --clusters 8 --steps 150 -j 1 -q",
        "120 real + 600 synthetic scenes, 2 rounds",
        "test.pdms",
        "test PDMS of the AutoScale planner",
    )
]


@tool_group(name="autoscale-mix")
def main():
    """Closed-loop dynamic real/synthetic data mixture for co-training a driving planner (AutoScale).

    Both domains come from the toolbox's highway simulator with a deliberate gap: a scene-biased,
    heterogeneous, noisy "real" domain (train pool 92% cruising, val/test 25% rare events) and a
    cheap homogeneous "synthetic" pool of ten generator families, one of them harmful ("reckless").
    Verbs: pools (generate the four scene sets), embed (train Graph-RAE, embed every scene), run (the
    loop: k-means clusters, cluster quotas, cluster-guided retrieval, planner training, PDMS feedback
    on val, Cluster-GA; or a baseline on the same code path), eval (PDMS of a planner on a scene set).

    \b
    EXAMPLES
      autoscale-mix pools -o pools
      autoscale-mix embed pools
      autoscale-mix run pools -o run-as --method autoscale --budget 3000 --rounds 6
      autoscale-mix run pools -o run-va --method vanilla --budget 3000
      autoscale-mix eval run-as/planner.safetensors pools/test.npz --per-scene per_scene.csv

    \b
    EXIT STATUS
      0  success
      1  failure while running (a non-finite training loss; the planner's after one retry)
      2  bad usage or bad input (schema errors, embedding rows, leakage, budget out of range)
      130  interrupted
    """


@main.command("pools")
@click.argument("spec", required=False, metavar="[SPEC.json]")
@_out_dir("Folder for real.npz, synth.npz, val.npz, test.npz and scenes.csv. [required]")
@click.option("--real", type=click.IntRange(min=20), default=None, help="Real train scenes [default: 3000].")
@click.option("--synth", type=click.IntRange(min=20), default=None, help="Synthetic scenes [default: 30000].")
@click.option("--val", type=click.IntRange(min=20), default=None, help="Val scenes (GA feedback) [default: 600].")
@click.option("--test", type=click.IntRange(min=20), default=None, help="Test scenes [default: 1200].")
@synthetic_backend
@common_options("seed", "threads", "force", "meta", "quiet", "verbose")
def pools_cmd(spec, out_dir, real, synth, val, test, synthetic_backend, **_):
    """Generate the real train pool, the synthetic pool and the real-domain val/test sets.

    SPEC.json may set seed, real, synth, val, test, real_rare (share of each rare type in the real
    train pool, default 0.02), eval_rare (rare share of val/test, default 0.25) and synth_mix (share
    per generator: cruise, cruise-dense, jam, cut-in, stopped, merge, lane-drop, empty, six-lane,
    reckless). Without it the built-in spec is used; --seed and the size options override it. Every
    scene carries its 16 candidate plans and their PDM sub-scores. --synthetic-backend highway-env
    records the synthetic traffic's 4 s futures in highway-env itself (a cross-simulator gap).

    \b
    EXAMPLES
      autoscale-mix pools -o pools
      autoscale-mix pools -o small --real 600 --synth 6000 --val 200 --test 400 --seed 1
      autoscale-mix pools -o hwe --synth 2000 --synthetic-backend highway-env

    \b
    EXIT STATUS
      0  success
      2  bad usage, a bad spec (the key is named), highway-env not installed
      130  interrupted
    """
    import pandas as pd

    from methodkit.tools.autoscale import pools as PL
    from methodkit.tools.autoscale.files import pools_summary

    run = Run.from_context()
    run.threads()
    obj = run.read_json(spec) if spec else {}
    if isinstance(obj, dict):
        obj = {**obj, "seed": obj.get("seed", run.seed)}
        for key, value in (("real", real), ("synth", synth), ("val", val), ("test", test)):
            if value is not None:
                obj[key] = value
    ps = PL.parse_spec(obj, spec or "spec")
    PL.require_backend(synthetic_backend)
    built, rows, summary = {}, [], {"seed": ps.seed}
    with run.progress() as cb:
        for pool in PL.POOLS:
            arrays, meta, r = PL.build_pool(pool, ps, progress=cb, backend=synthetic_backend)
            built[pool] = (arrays, meta)
            rows += r
            summary[pool] = pools_summary(r, arrays["cand_scores"], arrays["expert_index"])
    files = {f"{p}.npz": ("call", (lambda a, m: lambda path: PL.write_pool(path, a, m, force=True))(*built[p]))
             for p in PL.POOLS}  # fmt: skip
    files["scenes.csv"] = ("table", pd.DataFrame(rows))
    _write_files(run, out_dir, files)
    run.emit_result(summary)


@main.command("embed")
@click.argument("pools_dir", metavar="POOLS")
@_out_dir("Folder for graphrae.safetensors and emb.npy [default: POOLS].", required=False)
@click.option("--epochs", type=click.FloatRange(min=0, min_open=True), default=5.0, show_default=True,
              help="Passes over real + synthetic.")  # fmt: skip
@click.option("--batch-size", type=click.IntRange(min=8), default=256, show_default=True, help="Scenes per batch.")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=1e-3, show_default=True, help="Adam LR.")
@click.option("--dim", type=click.IntRange(min=2), default=32, show_default=True, help="Embedding size.")
@click.option("--clusters", type=click.IntRange(min=2), default=32, show_default=True,
              help="k-means clusters for the reported composition.")  # fmt: skip
@common_options("seed", "threads", "force", "meta", "quiet", "verbose")
def embed_cmd(pools_dir, out_dir, epochs, batch_size, lr, dim, clusters, **_):
    """Train Graph-RAE on real + synthetic scenes and embed every scene (rows in scenes.csv order).

    Prints the loss terms, the 10-NN scene-type purity of the embeddings beside raw-feature PCA and
    the raw features themselves, and the tag composition of k-means clusters of the synthetic pool.

    \b
    EXAMPLES
      autoscale-mix embed pools
      autoscale-mix embed pools --epochs 2 -o emb-e2

    \b
    EXIT STATUS
      0  success
      1  failure while running (a non-finite training loss after two restarts at half the LR)
      2  bad usage or bad input (a pool file failing the scene schema, the key named)
      130  interrupted
    """
    import numpy as np

    from methodkit.tools.autoscale import data, embedding, graphrae

    run = Run.from_context()
    run.threads()
    out_dir = out_dir or pools_dir
    if out_dir == pools_dir:
        run.claim_outputs(f"{pools_dir}/{data.EMB}", f"{pools_dir}/{data.RAE}")
    arrays, metas = data.read_folder(pools_dir)
    cfg = graphrae.RAEConfig(epochs=epochs, batch_size=batch_size, lr=lr, dim=dim)
    warn_if_no_faiss(run)
    with run.progress() as cb:
        result, model, emb = embedding.run(arrays, metas, cfg, run.seed, clusters=clusters, progress=cb,
                                            log=lambda m: _log(run, m))
    _write_files(run, out_dir, {
        data.EMB: ("arrays", {"emb": emb.astype(np.float32)}),
        data.RAE: ("call", lambda path: graphrae.save(path, model, cfg, fingerprint=result.fingerprint)),
    })  # fmt: skip
    run.emit_result(result.to_dict())


@main.command("run")
@click.argument("pools_dir", metavar="POOLS")
@_out_dir("Run folder: mixture.json, selected.csv, rounds.jsonl, planner.safetensors. [required]")
@planner_options
@common_options("seed", "threads", "force", "meta", "quiet", "verbose")
def run_cmd(pools_dir, out_dir, method, budget, rounds, clusters, steps, batch_size, rho, expert_l2, eta, ga_estimator,
            apply_, eval_, warm_start, allow_overlap, emb_path, resume, **_):  # fmt: skip
    """Run the closed loop (or a baseline) on a pools folder and print the final JSON.

    Each round: quotas n_k from the cluster weights, cluster-guided retrieval of synthetic scenes
    near the val failures of the round before, a planner trained on real + selected (a fixed
    budget, the same init each round unless --warm-start), feedback on val (PDMS, or with --eval
    closed-loop the planner driving the val routes in the highway simulator), and a Cluster-GA step
    (a drop of more than 0.5 in the feedback reverts it and halves eta). The best val round's planner
    is scored on test. Every round leaves a checkpoint in DIR/checkpoints; --resume continues after it.

    The planner's loss is the cross-entropy to the expert's candidate index; --expert-l2 WEIGHT adds
    WEIGHT times the mean squared distance (m^2, over the 4 s plan) between the softmax-weighted mean
    of the 16 candidates' plans and the expert's trajectory (default 0: off, the cross-entropy alone).

    \b
    EXAMPLES
      autoscale-mix run pools -o run-as --budget 3000 --rounds 6
      autoscale-mix run pools -o run-dc --method domain-cls --budget 3000
      autoscale-mix run pools -o run-sp --ga-estimator spsa --rounds 4
      autoscale-mix run pools -o run-cl --eval closed-loop
      autoscale-mix run pools -o run-l2 --expert-l2 0.01
      autoscale-mix run pools -o run-as --budget 3000 --rounds 6 --resume

    \b
    EXIT STATUS
      0  success
      1  failure while running (a planner's loss non-finite again after one retry)
      2  bad usage or bad input (budget or clusters out of range, embeddings not matching the
         scenes, val/test leakage without --allow-overlap)
      130  interrupted
    """
    from methodkit.tools.autoscale import data, runner

    run = Run.from_context()
    run.threads()
    cfg = runner.config(method=method, budget=budget, rounds=rounds, clusters=clusters, steps=steps,
                        batch_size=batch_size, rho=rho, eta=eta, estimator=ga_estimator, apply=apply_,
                        warm_start=warm_start, evaluate=eval_, expert_l2=expert_l2)  # fmt: skip
    arrays, metas = data.read_folder(pools_dir)
    if not allow_overlap:
        data.check_leakage(arrays)
    emb = data.read_embeddings(pools_dir, arrays, emb_path)
    warn_if_no_faiss(run)
    with run.progress() as cb:
        result, files = runner.run(arrays, metas, emb, cfg, run.seed, progress=cb, log=lambda m: _log(run, m),
                                   ckpt_dir=out_dir, resume=resume)  # fmt: skip
    _write_files(run, out_dir, files)
    run.emit_result(result)


@main.command("eval")
@click.argument("planner_path", metavar="PLANNER")
@click.argument("scenes_path", metavar="SCENES.npz")
@click.option("--per-scene", "per_scene", type=OutputPath(), default=None, metavar="PATH",
              help="CSV of every scene's chosen candidate and sub-scores.")  # fmt: skip
@common_options("threads", "meta", "force", "quiet", "verbose")
def eval_cmd(planner_path, scenes_path, per_scene, **_):
    """PDMS (NAVSIM v1, x100) of a planner on a scene set, with every sub-score.

    The planner picks one of the 16 candidates per scene; its 4 s plan is scored with the other
    agents replaying their recorded futures (non-reactive).

    \b
    EXAMPLES
      autoscale-mix eval run-as/planner.safetensors pools/test.npz
      autoscale-mix eval run-as/planner.safetensors pools/test.npz --per-scene per_scene.csv

    \b
    EXIT STATUS
      0  success
      2  bad usage or bad input (a scene file failing the schema, a checkpoint that is not a planner)
      130  interrupted
    """
    from methodkit.core import io
    from methodkit.tools.autoscale import runner

    run = Run.from_context()
    run.threads()
    summary, frame = runner.evaluate_file(planner_path, scenes_path)
    if per_scene:
        io.write_table(frame, per_scene, force=True)
    run.emit_result(summary)

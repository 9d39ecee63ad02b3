"""chess-wm acceptance protocol (issue 11, section 5); hours at full size, so not part of `make bench`.

Full protocol (defaults): train on 40k `book` games truncated to 96 plies, d128/l1, batch 64,
1 epoch, LR 3e-3, warmup 500, cosine floor 0.1; evaluate on 2k held-out `book` games and 2k
`random` games (same truncation); seeds 0 1 2; all seven architectures. Then:
  A1  GDN-neg and SLiCE-block: random CE <= 0.90 x Transformer's and labelwise acc >= +1.0 point
  A2  random - book CE gap larger for the Transformer than for GDN-neg
  A3  GDN-pos random CE >= GDN-neg's; diag-SLiCE >= block-SLiCE's (in >= 2/3 of seeds)

    python -P bench/chess_wm/acceptance.py --out acc            # the issue's protocol
    python -P bench/chess_wm/acceptance.py --out acc-tiny --train-games 1200 --test-games 200 \\
        --max-plies 64 --size d64 --batch-size 32 --steps 120 --warmup 20 --seeds 0   # what we ran

Writes OUT/results.csv (one row per seed x arch x split) and prints the table and the checks.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

ARCHS = ["transformer", "slice", "slice-diag", "gdn", "gdn-pos", "mamba3", "mamba2"]


def make_data(out: Path, args) -> dict[str, Path]:
    """Book games from the Numba book + heuristic player (train and held-out seeds differ), random games."""
    from methodkit.tools.chess_wm import engine
    from methodkit.tools.chess_wm.data import write_games

    paths = {"train": out / "book-train", "book": out / "book-test", "random": out / "random-test"}
    for name, games, seed in (("train", args.train_games, 1000), ("book", args.test_games, 2000)):
        if not (paths[name] / "manifest.json").exists():
            book = engine.load_book(args.book)
            produced = engine.book_games(games, seed, book=book, max_plies=args.max_plies)
            write_games(paths[name], produced, source="book-numba", ep="potential", max_plies=args.max_plies)
    if not (paths["random"] / "manifest.json").exists():
        write_games(
            paths["random"],
            engine.random_games(
                args.test_games, 3000, max_plies=args.max_plies, min_fullmoves=min(10, args.max_plies // 2)
            ),
            source="random",
            ep="potential",
            max_plies=args.max_plies,
        )
    return paths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out")
    parser.add_argument("--train-games", type=int, default=40_000)
    parser.add_argument("--test-games", type=int, default=2_000)
    parser.add_argument("--max-plies", type=int, default=96)
    parser.add_argument("--size", default="d128")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=None, help="default: one epoch")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--floor", type=float, default=0.1)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--archs", nargs="+", default=ARCHS)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--book", default="/usr/share/games/gnuchess/book.bin", help="Polyglot book")
    parser.add_argument("--device", default="cpu", help="torch device for training and evaluation")
    parser.add_argument("--data-only", action="store_true", help="build the data sets and stop")
    parser.add_argument(
        "--merge", nargs="+", default=None, metavar="CSV", help="only report on these results.csv files"
    )
    args = parser.parse_args()
    if args.merge:  # runs split over processes (one per architecture, say): one table, one verdict
        rows = [r for path in args.merge for r in read_results(Path(path))]
        for r in sorted(rows, key=lambda r: (r["arch"], r["split"], r["seed"])):
            print(
                f"{r['arch']}\t{r['split']}\t{r['seed']}\t{r['loss']:.4f}\t{r['label_acc']:.4f}\t{r['exact_state']:.4f}"
            )
        report_checks(rows, sorted({r["seed"] for r in rows}))
        return 0

    import torch

    from methodkit.tools.chess_wm.data import load_dataset
    from methodkit.tools.chess_wm.evaluation import evaluate_games
    from methodkit.tools.chess_wm.models import ModelConfig
    from methodkit.tools.chess_wm.training import TrainOptions, train_model

    torch.set_num_threads(args.threads)
    if not args.out:
        parser.error("--out is required (or --merge CSV...)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    paths = make_data(out, args)
    print(f"# data ready in {time.time() - started:.0f} s", flush=True)
    if args.data_only:
        return 0
    tests = {name: load_dataset(paths[name]) for name in ("book", "random")}
    results = out / "results.csv"
    rows = [  # earlier runs of other (seed, arch) pairs
        r for r in read_results(results) if not (r["seed"] in args.seeds and r["arch"] in args.archs)
    ]
    for seed in args.seeds:
        for arch in args.archs:
            t0 = time.time()
            cpu0 = time.process_time()  # all threads of this process: the 2-core budget, free of the neighbours
            opts = TrainOptions(
                steps=args.steps,
                epochs=1.0,
                batch_size=args.batch_size,
                lr=args.lr,
                warmup=args.warmup,
                min_lr_ratio=args.floor,
                log_every=10**9,
                val_games=64,
                max_plies=args.max_plies,
                seed=seed,
            )
            run = train_model(
                [paths["train"]],
                out / f"{arch}-s{seed}",
                ModelConfig(arch=arch, size=args.size),
                opts,
                force=True,
                device=args.device,
            )
            train_cpu_s = time.process_time() - cpu0
            from methodkit.tools.chess_wm.training import load_model

            model, _, _ = load_model(out / f"{arch}-s{seed}", device=args.device)
            for split, games in tests.items():
                s = evaluate_games(model, games, batch_size=args.batch_size, device=args.device).summary
                rows.append(
                    {
                        "seed": seed,
                        "arch": arch,
                        "split": split,
                        "loss": s["loss"],
                        "label_acc": s["label_acc"],
                        "exact_state": s["exact_state"],
                        "steps": run.steps,
                        "train_s": round(run.seconds, 1),
                        "train_cpu_s": round(train_cpu_s, 1),
                    }
                )
                print("\t".join(str(v) for v in rows[-1].values()), flush=True)
            print(f"# {arch} seed {seed}: {time.time() - t0:.0f} s", flush=True)
            with open(results, "w", newline="") as handle:
                columns = list(dict.fromkeys(key for row in rows for key in row))  # older files lack train_cpu_s
                writer = csv.DictWriter(handle, fieldnames=columns, restval="", lineterminator="\n")
                writer.writeheader()
                writer.writerows(rows)
    report_checks(rows, sorted({int(r["seed"]) for r in rows}))
    return 0


def read_results(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path) as handle:
        return [
            {
                **r,
                "seed": int(r["seed"]),
                "loss": float(r["loss"]),
                "label_acc": float(r["label_acc"]),
                "exact_state": float(r["exact_state"]),
            }
            for r in csv.DictReader(handle)
        ]


def report_checks(rows, seeds) -> None:
    def get(seed, arch, split, key):
        for r in rows:
            if r["seed"] == seed and r["arch"] == arch and r["split"] == split:
                return r[key]
        return None

    def mean(values):
        values = [v for v in values if v is not None]
        return sum(values) / len(values) if values else float("nan")

    tr_ce = mean([get(s, "transformer", "random", "loss") for s in seeds])
    tr_acc = mean([get(s, "transformer", "random", "label_acc") for s in seeds])
    for arch in ("gdn", "slice"):
        ce = mean([get(s, arch, "random", "loss") for s in seeds])
        acc = mean([get(s, arch, "random", "label_acc") for s in seeds])
        ok = ce <= 0.9 * tr_ce and acc >= tr_acc + 0.01
        print(
            f"A1 {arch}: random CE {ce:.4f} vs 0.90 x transformer {0.9 * tr_ce:.4f}; "
            f"acc {acc:.4f} vs transformer + 1pt {tr_acc + 0.01:.4f} -> {'PASS' if ok else 'FAIL'}"
        )
    gap = {
        a: mean(
            [
                get(s, a, "random", "loss") - get(s, a, "book", "loss")
                for s in seeds
                if get(s, a, "random", "loss") is not None
            ]
        )
        for a in ("transformer", "gdn")
    }
    print(
        f"A2 CE gap random-book: transformer {gap['transformer']:.4f} vs gdn {gap['gdn']:.4f} -> "
        f"{'PASS' if gap['transformer'] > gap['gdn'] else 'FAIL'}"
    )
    for weak, strong in (("gdn-pos", "gdn"), ("slice-diag", "slice")):
        wins = sum(1 for s in seeds if (get(s, weak, "random", "loss") or 0) >= (get(s, strong, "random", "loss") or 0))
        print(
            f"A3 {weak} >= {strong} random CE in {wins}/{len(seeds)} seeds -> "
            f"{'PASS' if wins * 3 >= 2 * len(seeds) else 'FAIL'}"
        )


if __name__ == "__main__":
    sys.exit(main())

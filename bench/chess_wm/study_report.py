"""The paper's three comparisons from bench/chess_wm/study.csv (issue 39 item 2), per size, over seeds.

    python -P bench/chess_wm/study_report.py [bench/chess_wm/study.csv]

Rows are those study.sh writes (plies, size, seed, arch, split, loss, label_acc, exact_state, steps, ...).
Prints one table of means per (plies, size, arch, steps), then:
  C1  recurrent vs Transformer at matched parameters (400 steps each): random CE ratio and label
      accuracy difference per seed and on the means; A1 (ratio <= 0.90 and >= +1 point) and A2
      (the Transformer's random-book CE gap larger than GDN's)
  C2  the random split as size grows: per split, the spread of the families' mean CE and label accuracy
      (max - min), in units of the mean seed-to-seed sd of one family and relative to the mean CE;
      across sizes, MET when the random split's spread grows and exceeds the book split's (CE and accuracy)
  C3  weaker transitions lose on random: gdn-pos vs gdn, slice-diag vs slice, random CE per seed
"""

from __future__ import annotations

import csv
import statistics
import sys
from collections import defaultdict

FAMILIES = ["transformer", "slice", "slice-diag", "gdn", "gdn-pos"]


def load(path: str) -> list[dict]:
    with open(path) as handle:
        rows = list(csv.DictReader(handle))
    for r in rows:
        for key in ("loss", "label_acc", "exact_state", "train_cpu_s"):
            r[key] = float(r[key])
        r["seed"], r["steps"], r["plies"] = int(r["seed"]), int(r["steps"]), int(r["plies"])
    return rows


def sd(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else float("nan")


def main(path: str) -> int:
    rows = load(path)
    runs: dict[tuple, dict[int, dict[str, dict]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:  # (plies, size, arch, steps) -> seed -> split -> row
        runs[(r["plies"], r["size"], r["arch"], r["steps"])][r["seed"]][r["split"]] = r

    def per_seed(key, split, field):
        return {s: v[split][field] for s, v in sorted(runs.get(key, {}).items()) if split in v}

    print(
        "plies size arch steps seeds | book CE | random CE (per seed) | gap | acc book / random | ExactState book / random | CPU s"
    )
    for key in sorted(
        runs, key=lambda k: (k[0], int(k[1][1:]), FAMILIES.index(k[2]) if k[2] in FAMILIES else 99, k[3])
    ):
        seeds = sorted(runs[key])
        m = {
            (sp, f): statistics.mean(per_seed(key, sp, f).values())
            for sp in ("book", "random")
            for f in ("loss", "label_acc", "exact_state", "train_cpu_s")
        }
        rand = " ".join(f"{v:.3f}" for v in per_seed(key, "random", "loss").values())
        print(
            f"{key[0]} {key[1]} {key[2]} {key[3]} {len(seeds)} | {m['book', 'loss']:.3f} | {m['random', 'loss']:.3f} ({rand}) | "
            f"{m['random', 'loss'] - m['book', 'loss']:.3f} | {m['book', 'label_acc']:.3f} / {m['random', 'label_acc']:.3f} | "
            f"{100 * m['book', 'exact_state']:.1f}% / {100 * m['random', 'exact_state']:.1f}% | {m['book', 'train_cpu_s']:.1f}"
        )
    settings = sorted({(k[0], k[1]) for k in runs}, key=lambda s: (s[0], int(s[1][1:])))
    spreads: dict[tuple, dict[str, tuple]] = defaultdict(dict)  # (plies, size) -> split -> (CE, acc, CE / mean)
    for plies, size in settings:
        base = (plies, size, "transformer", 400)
        tr_ce, tr_acc = per_seed(base, "random", "loss"), per_seed(base, "random", "label_acc")
        if not tr_ce:
            continue
        print(f"\n== {plies} plies, {size}, seeds {sorted(tr_ce)}")
        for arch in ("slice", "gdn"):
            ce, acc = (
                per_seed((plies, size, arch, 400), "random", "loss"),
                per_seed((plies, size, arch, 400), "random", "label_acc"),
            )
            common = sorted(set(ce) & set(tr_ce))
            if not common:
                continue
            ratio = statistics.mean(ce[s] for s in common) / statistics.mean(tr_ce[s] for s in common)
            dacc = statistics.mean(acc[s] - tr_acc[s] for s in common)
            seeds_ok = sum(1 for s in common if ce[s] <= 0.9 * tr_ce[s] and acc[s] >= tr_acc[s] + 0.01)
            each = ", ".join(f"{ce[s] / tr_ce[s]:.3f}x/{100 * (acc[s] - tr_acc[s]):+.1f}pt" for s in common)
            verdict = "MET" if ratio <= 0.9 and dacc >= 0.01 else "MISSED"
            print(
                f"C1 A1 {arch}: random CE {ratio:.3f}x the Transformer's, acc {100 * dacc:+.1f} pt (seeds: {each}); {seeds_ok}/{len(common)} seeds -> {verdict}"
            )
        long_ce = per_seed((plies, size, "transformer", 600), "random", "loss")
        sl_ce = per_seed((plies, size, "slice", 400), "random", "loss")
        common = sorted(set(long_ce) & set(sl_ce))
        if common:
            ratio = statistics.mean(sl_ce[s] for s in common) / statistics.mean(long_ce[s] for s in common)
            print(
                f"C1 slice at 400 steps vs the Transformer at 600 (more CPU than SLiCE's 400): random CE {ratio:.3f}x"
            )
        gaps = {}
        for arch in ("transformer", "gdn"):
            ce_r, ce_b = (
                per_seed((plies, size, arch, 400), "random", "loss"),
                per_seed((plies, size, arch, 400), "book", "loss"),
            )
            gaps[arch] = [ce_r[s] - ce_b[s] for s in sorted(ce_r) if s in ce_b]
        if gaps["gdn"]:
            g_t, g_g = statistics.mean(gaps["transformer"]), statistics.mean(gaps["gdn"])
            print(
                f"C1 A2 random-book CE gap: transformer {g_t:.3f} vs gdn {g_g:.3f} -> {'MET' if g_t > g_g else 'MISSED'}"
            )
        for split in ("book", "random"):
            means, sds = {}, []
            for arch in FAMILIES:
                v = list(per_seed((plies, size, arch, 400), split, "loss").values())
                if v:
                    means[arch] = statistics.mean(v)
                    sds.append(sd(v))
            noise = statistics.mean(sds) if sds else float("nan")
            spread = max(means.values()) - min(means.values())
            accs = [statistics.mean(per_seed((plies, size, a, 400), split, "label_acc").values()) for a in means]
            if len(means) == len(FAMILIES):
                spreads[plies, size][split] = (spread, max(accs) - min(accs), spread / statistics.mean(means.values()))
            diff = means.get("transformer", float("nan")) - means.get("slice", float("nan"))
            print(
                f"C2 {split}: CE spread over {len(means)} families {spread:.3f} ({spread / noise:.1f} sd), "
                f"transformer - slice {diff:.3f} ({diff / noise:.1f} sd); mean seed sd {noise:.4f}; "
                f"spread relative to the mean CE {spread / statistics.mean(means.values()):.2f}; "
                f"label accuracy spread {100 * (max(accs) - min(accs)):.1f} pt"
            )
        for weak, strong in (("gdn-pos", "gdn"), ("slice-diag", "slice")):
            w, s_ = (
                per_seed((plies, size, weak, 400), "random", "loss"),
                per_seed((plies, size, strong, 400), "random", "loss"),
            )
            common = sorted(set(w) & set(s_))
            if not common:
                continue
            wins = sum(1 for s in common if w[s] >= s_[s])
            each = ", ".join(f"{w[s]:.3f}/{s_[s]:.3f}" for s in common)
            verdict = "MET" if 3 * wins >= 2 * len(common) else "MISSED"
            print(f"C3 {weak} vs {strong} random CE ({each}): weaker loses in {wins}/{len(common)} seeds -> {verdict}")
    done = [s for s in settings if len(spreads[s]) == 2]
    for small, large in zip(done, done[1:]):
        if small[0] != large[0]:
            continue
        a, b = spreads[small], spreads[large]
        grows = all(b["random"][i] > a["random"][i] and b["random"][i] > b["book"][i] for i in (0, 1))
        print(
            f"\nC2 {small[1]} -> {large[1]} at {small[0]} plies, the families' spread: CE book {a['book'][0]:.3f} -> "
            f"{b['book'][0]:.3f}, random {a['random'][0]:.3f} -> {b['random'][0]:.3f}; label accuracy book "
            f"{100 * a['book'][1]:.1f} -> {100 * b['book'][1]:.1f} pt, random {100 * a['random'][1]:.1f} -> "
            f"{100 * b['random'][1]:.1f} pt (random's grows and exceeds book's in both) -> {'MET' if grows else 'MISSED'}"
        )
        rel = b["random"][2] > b["book"][2] and b["random"][2] / a["random"][2] > b["book"][2] / a["book"][2]
        print(
            f"C2 relative reading, spread / mean CE: book {a['book'][2]:.2f} -> {b['book'][2]:.2f}, random "
            f"{a['random'][2]:.2f} -> {b['random'][2]:.2f} (random the larger at {large[1]}, and growing more) -> "
            f"{'MET' if rel else 'MISSED'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "bench/chess_wm/study.csv"))

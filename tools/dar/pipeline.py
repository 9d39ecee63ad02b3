"""`run`: the whole experiment. For each seed: discover a rule on the train set, poison with DAR,
BadNets, Blended and random relabel at the same count, train a teacher on each poisoned set, distil a
clean KD student from each teacher (true labels, clean images), and evaluate both on the test set
(DAR and random relabel with the DAR operator; the baselines with their own trigger). A clean
teacher gives the C-Acc reference. Optional defenses on each poisoned teacher: fine-tuning and
fine-pruning (rows with stage ft / fine-pruning) and Spectral Signatures (ss_recall on the teacher row)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from methodkit.core.progress import ProgressCallback, silent
from methodkit.tools.dar import defenses as defending
from methodkit.tools.dar import poison as poisoning
from methodkit.tools.dar.choices import METHODS
from methodkit.tools.dar.discover import DiscoverConfig, discover
from methodkit.tools.dar.evaluate import evaluate
from methodkit.tools.dar.victim import VictimConfig, fit


@dataclass
class RunConfig:
    discover: DiscoverConfig
    teacher: VictimConfig
    student: VictimConfig
    budget: int
    seeds: tuple = (0,)
    methods: tuple = METHODS
    kappa: float = 0.5
    alphas: tuple = ()  # KD weights of the students; () -> (student.alpha,)
    defenses: tuple = ()  # ft, fp, ss (run on every poisoned teacher)
    defense: defending.DefenseConfig = field(default_factory=defending.DefenseConfig)
    operator: str = "coordinate"  # coordinate (rules.apply, T_kappa) | band-carrier (band.py; whitened rules)


@dataclass
class RunResult:
    rows: list = field(default_factory=list)
    rules: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"rows": self.rows, "rules": [r.to_dict() for r in self.rules]}


def run(x, y, x_test, y_test, classes: int, cfg: RunConfig, progress: ProgressCallback = silent,
        on_row=None, kd_data: tuple | None = None) -> RunResult:  # fmt: skip
    """`kd_data` = (x, y): a disjoint clean split the students distil on (default: the train images)."""
    result = RunResult()
    x_kd, y_kd = kd_data if kd_data is not None else (x, y)
    target = cfg.discover.target
    # DAR and the random-relabel control (evaluated with the DAR operator) need a rule; a clean teacher
    # is evaluated with the DAR rule when there is one, else with the first baseline trigger run
    baselines = [m for m in cfg.methods if m in ("badnets", "blended")]
    rule = None
    if {"dar", "random"} & set(cfg.methods) or not baselines:
        rule = discover(x, y, replace(cfg.discover, budget=cfg.budget, top=1), classes=classes)[0]
        result.rules.append(rule)
    operator = rule
    if rule is not None and cfg.operator == "band-carrier":
        # one operator for every method's rows: built from the DAR carriers (labels after DAR poisoning)
        from methodkit.tools.dar.band import band_carrier
        from methodkit.tools.dar.discover import band_directions

        dar_labels = poisoning.poison(x, y, rule, target, cfg.budget, classes).labels
        operator = band_carrier(x, dar_labels, rule, target, band_directions(x, cfg.discover.components)[0])
    for seed in cfg.seeds:
        for method in cfg.methods:
            if method == "dar":
                p = poisoning.poison(x, y, rule, target, cfg.budget, classes)
            elif method == "random":
                p = poisoning.random_relabel(x, y, target, cfg.budget, classes, seed)
            elif method in ("badnets", "blended"):
                p = poisoning.dirty_label(x, y, method, target, cfg.budget, classes, seed)
            else:
                p = None
            images = p.images if p is not None and p.images is not None else x
            labels = p.labels if p is not None else y
            trig = method if method in ("badnets", "blended") else (operator if rule is not None else baselines[0])
            teacher, _ = fit(images, labels, replace(cfg.teacher, seed=seed), classes, progress=progress)
            # the student sees only clean images with their true labels
            models = [("teacher", teacher, None)]
            for alpha in cfg.alphas or (cfg.student.alpha,):
                scfg = replace(cfg.student, seed=seed, alpha=alpha)
                student, _ = fit(x_kd, y_kd, scfg, classes, teacher=teacher, progress=progress)
                models.append(("student", student, alpha))
            extra = {}
            if p is not None and cfg.defenses:
                clean = defending.clean_subset(len(x), cfg.defense.clean_share, seed)
                if "ft" in cfg.defenses:
                    tuned = defending.fine_tune(teacher, x[clean], y[clean], cfg.defense, seed, progress)
                    models.append(("ft", tuned, None))
                if "fp" in cfg.defenses:
                    pruned, k = defending.fine_prune(teacher, x[clean], y[clean], cfg.defense, seed, progress)
                    models.append(("fine-pruning", pruned, None))
                    extra["pruned_channels"] = k
                if "ss" in cfg.defenses:
                    extra["ss_recall"] = defending.spectral_recall(teacher, images, labels, p.indices, cfg.budget,
                                                                   cfg.defense.flag_factor)  # fmt: skip
            for stage, model, alpha in models:
                metrics = evaluate(model, x_test, y_test, trig, target, cfg.kappa)
                row = {"method": method, "stage": stage, "seed": seed, "alpha": alpha,
                       "relabelled": 0 if p is None else len(p.indices),
                       "c_acc": metrics["c_acc"], "asr": metrics["asr"], "r_acc": metrics["r_acc"],
                       "natural_trigger_rate": metrics.get("natural_trigger_rate"),
                       "trigger_validity": metrics.get("trigger_validity"),
                       "trigger_psnr_db": metrics["trigger_psnr_db"],
                       "trigger_changed_fraction_median": metrics["trigger_changed_fraction_median"]}  # fmt: skip
                if stage == "teacher" and extra.get("ss_recall") is not None:
                    row["ss_recall"] = extra["ss_recall"]
                if stage == "fine-pruning":
                    row["pruned_channels"] = extra["pruned_channels"]
                result.rows.append(row)
                if on_row is not None:
                    on_row(row)
    subtract_random_control(result.rows)
    return result


def subtract_random_control(rows: list) -> None:
    """dar rows gain asr_minus_random: their ASR minus the random-relabel row's of the same stage, seed
    and alpha (the same operator on a model whose relabels carry no pattern); absent without that row."""
    random = {(r["stage"], r["seed"], r["alpha"]): r["asr"] for r in rows if r["method"] == "random"}
    for row in rows:
        key = (row["stage"], row["seed"], row["alpha"])
        if row["method"] == "dar" and key in random:
            row["asr_minus_random"] = row["asr"] - random[key]


def summary(rows: list) -> dict:
    """Mean ASR / C-Acc per (method, stage[, alpha]) over seeds."""
    out: dict = {}
    for row in rows:
        key = f"{row['method']}_{row['stage']}" + (f"_a{row['alpha']}" if row.get("alpha") is not None else "")
        out.setdefault(key, []).append((row["asr"], row["c_acc"]))
    return {
        k: {"asr": float(np.mean([a for a, _ in v])), "c_acc": float(np.mean([c for _, c in v]))}
        for k, v in out.items()
    }

"""The clean-label attack: select rows, pick dims, projected zeroth-order ascent (issue §2).

Labels never change; only mutable numeric cells of at most ⌊budget·n⌋ train rows
move, each inside its feasible region (feasible.py). The search is ZO-PSGD
(Liu et al. 2018) with projected probes and accept-best, because J is piecewise
constant in Δ (trees only notice threshold crossings) and not monotone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from methodkit.core.errors import DataError, RunFailure, UsageError
from methodkit.core.progress import ProgressCallback, silent
from methodkit.tools.gbdt import dims as dimsmod
from methodkit.tools.gbdt import influence as infl
from methodkit.tools.gbdt import onehot, switch, threshold
from methodkit.tools.gbdt.data import Problem
from methodkit.tools.gbdt.feasible import COVARIANCES, TRANSFORMS, Standardizer, build_region, implausible_fraction
from methodkit.tools.gbdt.oracle import OBJECTIVES, ORACLES, Oracle, objective_value
from methodkit.tools.gbdt.victim import Victim, metrics, parse_trees

SEARCHES = ("threshold", "zo")


@dataclass
class AttackConfig:
    budget: float = 0.05
    eps: float = 1.0
    dims: int = 3
    dims_list: list[str] | None = None
    influence: str = "boostin"
    dim_rank: str = "gain"
    cov: str = "class"
    transform: str = "none"
    iters: int = 20
    q: int = 4
    mu: float = 0.5  # × eps
    eta: float = 0.5  # × eps
    objective: str = "logloss"
    search: str = "threshold"
    probe_projection: bool = True
    oracle: str = "retrain"
    refit_every: int = 5
    fast_bins: bool = False
    workers: int = 1  # probes trained at once (threads); results do not depend on it
    one_hot: list[str] | None = None  # one-hot group prefixes; None = detect them
    drop_validation: bool = False  # release the train part only (the attacker's validation rows left out)
    seed: int = 0

    def check(self) -> None:
        if not 0.0 < self.budget < 1.0:
            raise UsageError(f"--budget must be in (0, 1), got {self.budget}")
        if not self.eps > 0:
            raise UsageError(f"--eps must be > 0, got {self.eps}")
        for name, value in (("--iters", self.iters), ("--refit-every", self.refit_every)):
            if value < 0 or (name == "--refit-every" and value < 1):
                raise UsageError(f"{name} must be positive, got {value}")
        if self.workers < 1:
            raise UsageError(f"--workers must be at least 1, got {self.workers}")
        if self.q < 1:
            raise UsageError(f"--q must be at least 1, got {self.q}")
        if not (self.mu > 0 and self.eta > 0):
            raise UsageError("--mu and --eta must be > 0")
        if not self.probe_projection and self.search != "zo":
            raise UsageError("--probe-projection off is an ablation of --search zo; add --search zo")
        choices = (
            ("--influence", self.influence, infl.SELECTIONS),
            ("--dim-rank", self.dim_rank, dimsmod.RANKINGS),
            ("--cov", self.cov, COVARIANCES),
            ("--transform", self.transform, TRANSFORMS),
            ("--objective", self.objective, OBJECTIVES),
            ("--search", self.search, SEARCHES),
            ("--oracle", self.oracle, ORACLES),
        )
        for flag, value, allowed in choices:
            if value not in allowed:
                raise UsageError(f"{flag} must be one of {', '.join(allowed)}, not {value!r}")

    @property
    def n_evaluations(self) -> int:
        if self.search == "threshold":
            per_iter = len(threshold.LINE_FRACTIONS) + (self.oracle == "refit")
            return 1 + self.iters * per_iter
        return 1 + self.iters * (2 * self.q + 1)


class AttackFailed(RunFailure):
    """LightGBM failed inside the loop; `trace` holds what ran so far (for a *.partial.json)."""

    def __init__(self, message: str, trace: dict):
        super().__init__(message)
        self.trace = trace


@dataclass
class AttackResult:
    config: AttackConfig
    problem: Problem
    victim: Victim
    rows: np.ndarray  # positions in D
    dims: np.ndarray  # (B,k) feature indices, -1 = unused slot
    dim_gain: dict  # chosen column -> its split gain in the clean model
    influence: np.ndarray  # the score of each chosen row
    original: np.ndarray  # (B,k) original-unit values
    poisoned: np.ndarray  # (B,k)
    radius: np.ndarray  # (B,) Mahalanobis radius of each poisoned row
    feasible: np.ndarray  # (B,) bool
    switches: switch.Switches  # the one-hot groups the rows may switch (a level each), and their levels as read
    levels: np.ndarray  # (B, G) the level each poisoned row ends with in each switchable group
    clean: dict  # victim on the released rows unpoisoned (the input file, or D under --drop-validation)
    after: dict  # victim on exactly the written file
    attacker: dict  # the attacker's view: {"clean", "poisoned"} victims trained on D, scored on V (and T)
    thresholds_crossed: int
    plausibility: dict
    trace: list[dict]
    fits: int
    seconds: float
    warnings: list[str] = field(default_factory=list)

    def poisoned_matrix(self) -> np.ndarray:
        X = self.problem.X_tr.copy()
        cols, values = self.cells()
        b_idx, a_idx = np.nonzero(cols >= 0)
        X[self.rows[b_idx], cols[b_idx, a_idx]] = values[b_idx, a_idx]
        return X

    def cells(self) -> tuple[np.ndarray, np.ndarray]:
        """(cols, values), each (B, k + m): the numeric moves, then every member of the switchable groups."""
        return switched_cells(self.dims, self.poisoned, self.switches, self.levels)

    def changed(self, b: int) -> dict[int, tuple[float, float]]:
        """column -> (from, to) of the cells poisoned row b changes (numeric moves and a level switch)."""
        cols, values = self.cells()
        out = {}
        for j, value in zip(cols[b], values[b]):
            if j >= 0 and value != self.problem.X_tr[self.rows[b], j]:
                out[int(j)] = (float(self.problem.X_tr[self.rows[b], j]), float(value))
        return out

    def released_rows(self) -> np.ndarray:
        """Positions in the train file of the written rows, in file order: every row, or D only."""
        p = self.problem
        return p.tr_rows if self.config.drop_validation else np.arange(len(p.frame))

    def out_rows(self) -> np.ndarray:
        """Position in the written file of each poisoned row."""
        rows = self.problem.tr_rows[self.rows]
        return self.rows if self.config.drop_validation else rows

    def released_matrix(self, poisoned: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(X, y) of the written file (poisoned=False: the same rows as read), in its row order."""
        p = self.problem
        X_d = self.poisoned_matrix() if poisoned else p.X_tr
        if self.config.drop_validation:
            return X_d, p.y_tr
        X = np.empty((len(p.frame), X_d.shape[1]))
        y = np.empty(len(p.frame))
        X[p.tr_rows], y[p.tr_rows] = X_d, p.y_tr
        X[p.v_rows], y[p.v_rows] = p.X_v, p.y_v
        return X, y

    def poisoned_frame(self):
        """The written table: the train file as read (or D only), rows in file order, only moved cells changed."""
        import pandas as pd

        p = self.problem
        frame = p.frame.iloc[self.released_rows()].reset_index(drop=True).copy()
        for b, row in enumerate(self.out_rows()):
            for j, (_, value) in self.changed(b).items():
                column = p.features[j]
                if pd.api.types.is_integer_dtype(frame[column]):
                    if value != np.round(value):
                        frame[column] = frame[column].astype("float64")
                    else:
                        value = int(np.round(value))
                frame.loc[row, column] = value
        return frame

    def gate_f1(self):
        """The F1 --fail-above-f1 checks: the written file's victim on T, else the attacker's on V."""
        return self.after.get("test_f1", self.attacker["poisoned"].get("val_f1"))

    def summary(self) -> dict:
        return {
            "verb": "attack",
            "eps": self.config.eps,
            "budget": self.config.budget,
            "seed": self.config.seed,
            "method": method_name(self.config),
            "released": "train part" if self.config.drop_validation else "all rows",
            "clean": self.clean,
            "poisoned": self.after,
            "attacker": self.attacker,
            "drop": {
                "val_f1": _drop(self.attacker["clean"].get("val_f1"), self.attacker["poisoned"].get("val_f1")),
                **{k: _drop(self.clean.get(k), self.after.get(k)) for k in ("test_f1", "test_acc")},
            },
            "n_poison": int(len(self.rows)),
            "dims": sorted({self.problem.features[j] for j in self.dims.ravel() if j >= 0}),
            "switch_groups": self.switches.prefixes,
            "switched_rows": int(np.sum(np.any(self.levels != self.switches.S0, axis=1))) if self.levels.size else 0,
            "mean_maha": float(self.radius.mean()) if len(self.radius) else 0.0,
            "feasible_fraction": float(self.feasible.mean()) if len(self.feasible) else 1.0,
            "thresholds_crossed": self.thresholds_crossed,
            "implausible_fraction": self.plausibility["fraction"],
            "onehot_violations": self.plausibility.get("onehot_violations", 0),
            "binary_violations": self.plausibility.get("binary_violations", 0),
            "fits": self.fits,
            "seconds": round(self.seconds, 3),
        }

    def to_dict(self) -> dict:
        """The manifest: everything needed to audit or replay the attack."""
        p = self.problem
        changes = []
        for b, (row, out_row) in enumerate(zip(self.rows, self.out_rows())):
            cells = {p.features[j]: {"from": old, "to": new} for j, (old, new) in self.changed(b).items()}
            switched = [
                prefix for g, prefix in enumerate(self.switches.prefixes) if self.levels[b, g] != self.switches.S0[b, g]
            ]
            changes.append(
                {
                    "row": int(row),
                    "file_row": int(p.tr_rows[row]),
                    "out_row": int(out_row),
                    "influence": float(self.influence[b]),
                    "radius": float(self.radius[b]),
                    "feasible": bool(self.feasible[b]),
                    "implausible": bool(self.plausibility["flagged"][b]),
                    "dims": [p.features[j] for j in self.dims[b] if j >= 0] + switched,
                    "changed": cells,
                }
            )
        return {
            **self.summary(),
            "label": p.label,
            "positive": p.positive,
            "features": p.features,
            "categorical": p.categorical,
            "integer": p.integer,
            "mutable": p.mutable,
            "val_file_rows": p.v_rows.tolist(),
            "chosen_dims": self.dim_gain,
            "config": {k: getattr(self.config, k) for k in self.config.__dataclass_fields__},
            "victim": self.victim.describe(),
            "plausibility": {k: v for k, v in self.plausibility.items() if k != "flagged"},
            "rows": changes,
            "trace": self.trace,
            "warnings": self.warnings,
        }


def _drop(before, after):
    return None if before is None or after is None else before - after


def method_name(config: AttackConfig) -> str:
    return f"{config.influence}+{config.dim_rank}"


def split_metrics(booster, problem: Problem) -> dict:
    out = {}
    v = metrics(booster, problem.X_v, problem.y_v)
    out.update(val_f1=v["f1"], val_acc=v["acc"], val_logloss=v["logloss"])
    if problem.X_te is not None:
        t = metrics(booster, problem.X_te, problem.y_te)
        out.update(test_f1=t["f1"], test_acc=t["acc"], test_logloss=t["logloss"])
    return out


def switched_cells(dims, values, switches: switch.Switches, levels) -> tuple[np.ndarray, np.ndarray]:
    """(cols, values), each (B, k + m): the numeric cells, then the member cells of each switchable group
    (-1 where the row is not a valid one-hot in a group: its cells stay as read)."""
    B = dims.shape[0]
    if not switches.prefixes:
        return dims, values
    member_cols = np.tile(switches.cols, (B, 1))
    start = 0
    for g, members in enumerate(switches.members):
        member_cols[switches.S0[:, g] < 0, start : start + len(members)] = -1
        start += len(members)
    return np.concatenate([dims, member_cols], axis=1), np.concatenate([values, switches.values(levels)], axis=1)


def _release_metrics(problem: Problem, victim: Victim, X_final: np.ndarray) -> tuple[dict, dict]:
    """Test metrics of the victim on every train-file row unpoisoned, and on the written (poisoned) file."""
    X = np.empty((len(problem.frame), X_final.shape[1]))
    y = np.empty(len(problem.frame))
    X[problem.v_rows], y[problem.v_rows] = problem.X_v, problem.y_v
    out = []
    for X_d in (problem.X_tr, X_final):
        X[problem.tr_rows], y[problem.tr_rows] = X_d, problem.y_tr
        booster = victim.fit(X, y, problem.cat_idx)
        entry = {"n_train": len(y)}
        if problem.X_te is not None:
            t = metrics(booster, problem.X_te, problem.y_te)
            entry.update(test_f1=t["f1"], test_acc=t["acc"], test_logloss=t["logloss"])
        out.append(entry)
    return out[0], out[1]


def thresholds_crossed(splits, dims, original, poisoned) -> int:
    """Distinct (column, threshold) splits of the clean model that some poisoned row now falls across."""
    by_feature: dict[int, set[float]] = {}
    for f, thr, _ in splits:
        by_feature.setdefault(f, set()).add(thr)
    crossed = 0
    for j, thresholds in by_feature.items():
        cells = (dims == j) & (original != poisoned)
        if not cells.any():
            continue
        thr = np.array(sorted(thresholds))
        before, after = original[cells], poisoned[cells]
        # a threshold is crossed by a cell when it lies in [min, max) of the cell's two values
        lo, hi = np.minimum(before, after), np.maximum(before, after)
        hit = (thr[None, :] >= lo[:, None]) & (thr[None, :] < hi[:, None])
        crossed += int(hit.any(axis=0).sum())
    return crossed


def run(
    problem: Problem,
    victim: Victim,
    config: AttackConfig,
    progress: ProgressCallback = silent,
    *,
    checkpoint: Callable[[dict], None] | None = None,
    resume: dict | None = None,
) -> AttackResult:
    """Run the attack end to end; the reported metrics come from a true retrain on the poisoned data.

    `checkpoint(state)` receives the search state (JSON-ready) after every iteration;
    `resume=state` continues from it: rows, dims and region are rebuilt from the seed,
    the iterate, the best point, the step and the RNG are restored, so an interrupted
    attack resumed this way ends exactly where an uninterrupted one would.
    """
    config.check()
    started = time.monotonic()
    seeds = np.random.SeedSequence(config.seed).spawn(3)
    rng_select, rng_dims, rng_zo = (np.random.default_rng(s) for s in seeds)
    warnings = list(problem.warnings)
    n = len(problem.y_tr)
    budget = int(np.floor(config.budget * n))
    if budget < 1:
        raise DataError(f"--budget {config.budget} of n={n} train rows is less than one row; raise --budget")
    mutable_idx = [problem.index(c) for c in problem.mutable]
    integer_idx = {problem.index(c) for c in problem.integer}
    numeric_all = [problem.index(c) for c in problem.features if c not in problem.categorical]
    if config.one_hot:
        groups = onehot.named_groups(config.one_hot, problem.features, numeric_all)
    else:
        groups = onehot.detect_groups(problem.X_tr, problem.features, numeric_all)
    binary_idx = onehot.binary_columns(problem.X_tr, problem.features, numeric_all)
    # a one-hot member moved alone leaves a row with zero or two levels set: a group moves only as one
    # categorical (a level switch, switch.py), never cell by cell
    grouped = {j for members in groups.values() for j in members}
    movable = {g: m for g, m in groups.items() if all(problem.features[j] in problem.mutable for j in m)}
    numeric_list = [n for n in config.dims_list or [] if n not in groups]
    if grouped:
        mutable_idx = [j for j in mutable_idx if j not in grouped]
        for name in numeric_list:
            if name in problem.features and problem.index(name) in grouped:
                raise UsageError(
                    f"--dims-list: column '{name}' belongs to a one-hot group; name the group's prefix to switch "
                    "its level"
                )
        if not mutable_idx:
            raise DataError("no mutable numeric column left outside the one-hot groups; relax --immutable")
    if config.dims_list:
        if not numeric_list:
            raise UsageError("--dims-list needs at least one numeric column besides one-hot group prefixes")
        chosen = dimsmod.by_name(numeric_list, problem.features, problem.mutable)
        k = len(chosen)
    else:
        k = config.dims
        dimsmod.check_k(k, [problem.features[j] for j in mutable_idx])

    total = config.n_evaluations + 2
    progress("victim fits", 0, total)
    clean_booster = victim.fit(problem.X_tr, problem.y_tr, problem.cat_idx)
    trees = parse_trees(clean_booster, problem.y_tr, victim.full_params())
    clean = split_metrics(clean_booster, problem)
    gains = clean_booster.feature_importance(importance_type="gain")
    std = Standardizer.fit(problem.X_tr, mutable_idx, config.transform)

    # columns: one global set (gain, random, --dims-list) or per row (local)
    if config.dims_list:
        global_dims = chosen
    elif config.dim_rank == "gain":
        global_dims = dimsmod.by_gain(gains, mutable_idx, k)
    elif config.dim_rank == "random":
        global_dims = dimsmod.at_random(mutable_idx, k, rng_dims)
    else:
        global_dims = None
    if config.dims_list:
        switch_groups = [n for n in config.dims_list if n in movable]
    else:
        numeric_gain = [float(gains[j]) for j in mutable_idx]
        switch_groups = switch.chosen_groups(movable, gains, numeric_gain, k, config.dim_rank, rng_dims)
    if switch_groups and config.search != "threshold":
        warnings.append(f"one-hot groups {', '.join(switch_groups)} switch levels under --search threshold only")
        switch_groups = []
    if groups:
        moved = f"; {', '.join(switch_groups)} may switch level (one group per row)" if switch_groups else ""
        warnings.append(f"one-hot groups {', '.join(sorted(groups))} move only as one categorical{moved}")
    if global_dims is not None:
        binary_chosen = [problem.features[j] for j in global_dims if j in binary_idx]
        if binary_chosen:
            warnings.append(f"chosen column(s) {', '.join(binary_chosen)} are 0/1: they can only flip")
        eligible = np.all(np.isfinite(problem.X_tr[:, global_dims]), axis=1)
    else:
        eligible = np.any(np.isfinite(problem.X_tr[:, mutable_idx]), axis=1)
    n_eligible = int(eligible.sum())
    if n_eligible == 0:
        raise DataError("no train row has values in the chosen columns (all missing); choose other --dims-list")
    if n_eligible < budget:
        warnings.append(f"only {n_eligible} rows are eligible (no missing value in the chosen dims); using all")
        budget = n_eligible

    scored = infl.score_rows(
        config.influence,
        clean_booster,
        trees,
        problem.X_tr,
        problem.y_tr,
        problem.X_v,
        problem.y_v,
        victim.lambda_l2,
        rng_select,
    )
    rows = infl.select(scored.scores, eligible, budget)
    if global_dims is not None:
        dims = np.tile(np.asarray(global_dims, dtype=np.int64), (len(rows), 1))
    else:
        dims = _local_dims(problem, std, trees, gains, mutable_idx, rows, config, k)
    region = build_region(
        problem.X_tr, problem.y_tr, std, rows, dims, config.eps, config.cov, integer_idx, problem.features
    )
    warnings += region.dropped
    switches = switch.build(problem.X_tr, problem.y_tr, rows, groups, switch_groups)

    oracle = Oracle(
        victim,
        problem.X_tr,
        problem.y_tr,
        problem.X_v,
        problem.y_v,
        problem.cat_idx,
        objective=config.objective,
        kind=config.oracle,
        fast_bins=config.fast_bins,
        workers=config.workers,
    )
    trace: list[dict] = []
    try:
        if config.search == "threshold":
            best_Z, levels, best_J = _threshold_search(
                region, switches, oracle, config, trace, progress, total, checkpoint, resume
            )
        else:
            best_Z, best_J = _ascent(region, oracle, config, rng_zo, trace, progress, total, checkpoint, resume)
            levels = switches.S0.copy()
        original = problem.X_tr[rows[:, None], np.maximum(dims, 0)]
        poisoned = region.to_orig(best_Z)
        # clip to the data's range in original units (expm1 can land a hair below 0), then the lattice
        safe = np.maximum(dims, 0)
        poisoned = np.clip(poisoned, np.nanmin(problem.X_tr, axis=0)[safe], np.nanmax(problem.X_tr, axis=0)[safe])
        poisoned = np.where(region.int_mask, np.round(poisoned), poisoned)
        # unmoved cells keep their exact original value (no round trip through standard units)
        unmoved = (best_Z == region.x0) | (dims < 0)
        poisoned = np.where(unmoved, original, poisoned)
        Z_final = np.where(unmoved, region.x0, region.to_std(poisoned))
        X_final = oracle.modified(rows, *switched_cells(dims, poisoned, switches, levels))
        # the reported victim is always a true retrain (its own bins, even under --fast-bins)
        final_booster = victim.fit(X_final, problem.y_tr, problem.cat_idx)
    except RunFailure as exc:
        raise AttackFailed(exc.message, {"error": exc.message, "trace": trace, "config": config.__dict__}) from None
    after = split_metrics(final_booster, problem)
    after["objective"] = best_J
    clean["objective"] = objective_value(clean_booster.predict(problem.X_v), problem.y_v, config.objective)
    attacker = {"clean": clean, "poisoned": after}
    if not config.drop_validation:
        # the release keeps every row: the victims the user would train, on the file as read and as written
        clean, after = _release_metrics(problem, victim, X_final)
    progress("victim fits", total, total)
    feasible = region.inside(Z_final)
    numeric_idx = [problem.index(c) for c in problem.features if c not in problem.categorical]
    plaus = implausible_fraction(problem.X_tr, problem.y_tr, X_final[rows], rows, numeric_idx, std)
    plaus.update(onehot.violations(X_final[rows], groups, binary_idx))
    used = sorted({int(j) for j in dims.ravel() if j >= 0})
    return AttackResult(
        config=config,
        problem=problem,
        victim=victim,
        rows=rows,
        dims=dims,
        dim_gain={problem.features[j]: float(gains[j]) for j in used},
        influence=scored.scores[rows],
        original=original,
        poisoned=poisoned,
        radius=region.radius(Z_final),
        feasible=feasible,
        switches=switches,
        levels=levels,
        clean=clean,
        after=after,
        attacker=attacker,
        thresholds_crossed=thresholds_crossed(trees.splits, dims, original, poisoned),
        plausibility=plaus,
        trace=trace,
        fits=oracle.fits + 1,
        seconds=time.monotonic() - started,
        warnings=warnings,
    )


def _local_dims(problem, std, trees, gains, mutable_idx, rows, config, k) -> np.ndarray:
    """Per-row dims for --dim-rank local: reach = eps × the within-class sd of each column."""
    X_rows = problem.X_tr[rows]
    Z_rows = np.full(X_rows.shape, np.nan)
    reach = np.zeros(X_rows.shape)
    for j in mutable_idx:
        Z_rows[:, j] = std.to_std(X_rows[:, j], np.full(len(rows), j))
        z_all = std.to_std(problem.X_tr[:, j], np.full(len(problem.X_tr), j))
        for c in (0, 1):
            z_c = z_all[(problem.y_tr == c) & np.isfinite(z_all)]
            reach[problem.y_tr[rows] == c, j] = config.eps * (z_c.std() if z_c.size > 1 else 0.0)
    return dimsmod.local(Z_rows, reach, trees.splits, std, gains, mutable_idx, k)


def _ascent(region, oracle: Oracle, config: AttackConfig, rng, trace, progress, total, checkpoint, resume):
    """ZO-PSGD with projected probes; returns the best visited feasible point and its J."""
    rows, dims = region.rows, region.dims
    eps = config.eps
    mu, eta = config.mu * eps, config.eta * eps
    done = 1

    def J(*points):
        nonlocal done
        values = oracle.many(rows, dims, [region.to_orig(Z) for Z in points])
        done += len(points)
        progress("victim fits", done, total)
        return values

    def save(it):
        if checkpoint is not None:
            checkpoint(
                {
                    "iter": it,
                    "Z": Z.tolist(),
                    "best_Z": best_Z.tolist(),
                    "best_J": best_J,
                    "eta": eta,
                    "rng": rng.bit_generator.state,
                    "anchor_Z": None if anchor_Z is None else anchor_Z.tolist(),
                    "fits": oracle.fits,
                    "trace": trace,
                }
            )

    anchor_Z = None  # (refit) the iterate the current anchor model was trained on; None = clean data
    progress("victim fits", done, total)  # the search starts (after the clean fit and the influence pass)
    if resume is None:
        if config.oracle == "refit":
            oracle.anchor(oracle.X_tr)
        Z = region.x0.copy()
        (J_Z,) = J(Z)
        best_Z, best_J = Z.copy(), J_Z
        trace.append({"iter": 0, "J": J_Z, "best": best_J, "eta": eta, "moved": 0.0})
        start = 1
        save(0)
    else:
        Z, best_Z = _restore(resume, "Z", region.x0.shape), _restore(resume, "best_Z", region.x0.shape)
        best_J, eta, start = float(resume["best_J"]), float(resume["eta"]), int(resume["iter"]) + 1
        rng.bit_generator.state = resume["rng"]
        trace.extend(resume["trace"])
        if config.oracle == "refit":
            anchor_Z = None if resume["anchor_Z"] is None else _restore(resume, "anchor_Z", region.x0.shape)
            oracle.anchor(oracle.X_tr if anchor_Z is None else oracle.modified(rows, dims, region.to_orig(anchor_Z)))
        oracle.fits = int(resume["fits"])
        done = min(total, 1 + (start - 1) * (2 * config.q + 1))
    for it in range(start, config.iters + 1):
        if config.oracle == "refit" and it > 1 and (it - 1) % config.refit_every == 0:
            anchor_Z = best_Z.copy()
            oracle.anchor(oracle.modified(rows, dims, region.to_orig(anchor_Z)))
        # the q directions are drawn first, so the 2q probes can be trained at once (--workers)
        directions = [region.directions(rng) for _ in range(config.q)]
        probes = []
        for u in directions:
            plus, minus = Z + mu * u, Z - mu * u
            if config.probe_projection:
                plus, minus = region.project(plus), region.project(minus)
            probes += [plus, minus]
        values = J(*probes)
        grad = np.zeros_like(Z)
        probe_best = None
        for r, u in enumerate(directions):
            J_plus, J_minus = values[2 * r], values[2 * r + 1]
            grad += (J_plus - J_minus) / (2 * mu) * u
            # projected probes are feasible points we paid for: they compete for the best (ours)
            if config.probe_projection:
                for value, point in ((J_plus, probes[2 * r]), (J_minus, probes[2 * r + 1])):
                    if probe_best is None or value > probe_best[0]:
                        probe_best = (value, point)
        grad /= config.q
        norm = float(np.mean(region.norm(grad)))
        if norm > 0:
            Z = region.project(Z + eta * grad / norm)
        (J_Z,) = J(Z)
        for value, point in [(J_Z, Z)] + ([probe_best] if probe_best else []):
            if value > best_J:
                best_J, best_Z = value, point.copy()
        trace.append(
            {
                "iter": it,
                "J": J_Z,
                "best": best_J,
                "eta": eta,
                "grad_norm": norm,
                "mean_radius": float(np.mean(region.radius(Z))),
            }
        )
        eta *= 0.9
        save(it)
    return best_Z, best_J


def _threshold_search(
    region, switches, oracle: Oracle, config: AttackConfig, trace, progress, total, checkpoint, resume
):
    """Threshold-crossing coordinate search with a line search (threshold.py); returns (best Z, levels, J).

    Each iterate's model (a true retrain) is the anchor that scores the next probes; under
    --oracle refit the line-search points are refit evaluations on that anchor and only the
    chosen point is retrained. A row's candidate moves are its coordinate probes and the level
    switches of the one-hot groups it may switch (switch.py), scored alike; it takes its best.
    """
    rows, dims = region.rows, region.dims
    precision = threshold.precisions(region)
    params = oracle.victim.full_params()
    done = 1

    def cells(point):
        Z, S = point
        return switched_cells(dims, region.to_orig(Z), switches, S)

    def retrained(*points):
        nonlocal done
        out = []
        for point in points:  # the cols are the same for every point: one batch
            out.append(cells(point)[1])
        cols = cells(points[0])[0]
        results = oracle.trained(rows, cols, out)
        done += len(points)
        progress("victim fits", min(done, total), total)
        return results

    def save(it):
        if checkpoint is not None:
            checkpoint(
                {
                    "search": "threshold",
                    "iter": it,
                    "Z": Z.tolist(),
                    "S": S.tolist(),
                    "best_Z": best_Z.tolist(),
                    "best_S": best_S.tolist(),
                    "best_J": best_J,
                    "fits": oracle.fits,
                    "trace": trace,
                }
            )

    progress("victim fits", done, total)
    if resume is None:
        Z, S = region.x0.copy(), switches.S0.copy()
        ((J_Z, anchor),) = retrained((Z, S))
        best_Z, best_S, best_J = Z.copy(), S.copy(), J_Z
        trace.append({"iter": 0, "J": J_Z, "best": best_J, "moved": 0})
        start = 1
        save(0)
    else:
        if resume.get("search") != "threshold":
            raise UsageError("checkpoint was written by another --search; remove it or rerun with that setting")
        Z, best_Z = _restore(resume, "Z", region.x0.shape), _restore(resume, "best_Z", region.x0.shape)
        S = _restore(resume, "S", switches.S0.shape).astype(np.int64)
        best_S = _restore(resume, "best_S", switches.S0.shape).astype(np.int64)
        best_J, start = float(resume["best_J"]), int(resume["iter"]) + 1
        trace.extend(resume["trace"])
        ((J_Z, anchor),) = retrained((Z, S))  # the iterate's model, identical to the one the run had
        oracle.fits = int(resume["fits"])
        done = min(total, 1 + (start - 1) * (config.n_evaluations - 1) // max(config.iters, 1))
    for it in range(start, config.iters + 1):
        X = oracle.modified(rows, *cells((Z, S)))
        trees = parse_trees(anchor, oracle.y_tr, params)
        owner, points = threshold.probes(region, Z, precision, threshold.split_thresholds(trees))
        s_row, s_group, s_level = switches.candidates(S)
        X_probe = np.vstack(
            [threshold.probe_rows(region, X, owner, points), switches.apply(X[rows[s_row]], s_group, s_level)]
        )
        owners = np.concatenate([owner, s_row])
        scores = threshold.score_rows(
            anchor, trees, X, oracle.y_tr, oracle.X_v, oracle.y_v, rows, owners, X_probe, oracle.victim.lambda_l2
        )
        movers, picks = threshold.best_moves(owners, scores, len(rows))
        entry = {
            "iter": it,
            "probes": int(len(owners)),
            "switch_probes": int(len(s_row)),
            "improving_rows": int(len(movers)),
        }
        if len(movers) == 0:  # no probe is predicted to help: the search has converged
            trace.append({**entry, "J": J_Z, "best": best_J, "moved": 0})
            save(it)
            break
        counts = sorted({max(1, int(np.ceil(f * len(movers)))) for f in threshold.LINE_FRACTIONS}, reverse=True)
        steps = []
        for n_move in counts:
            step_Z, step_S = Z.copy(), S.copy()
            for b, c in zip(movers[:n_move], picks[:n_move]):
                if c < len(owner):
                    step_Z[b] = points[c]
                else:
                    step_S[b, s_group[c - len(owner)]] = s_level[c - len(owner)]
            steps.append((step_Z, step_S))
        if config.oracle == "refit":
            oracle.adopt(anchor, X)
            cols = cells(steps[0])[0]
            values = oracle.many(rows, cols, [cells(step)[1] for step in steps])
            done += len(steps)
            choice = int(np.argmax(values))
            ((J_Z, anchor),) = retrained(steps[choice])
        else:
            results = retrained(*steps)
            choice = int(np.argmax([value for value, _ in results]))
            J_Z, anchor = results[choice]
        Z, S = steps[choice]
        if J_Z > best_J:
            best_J, best_Z, best_S = J_Z, Z.copy(), S.copy()
        trace.append(
            {
                **entry,
                "J": J_Z,
                "best": best_J,
                "moved": counts[choice],
                "switched": int(np.sum(np.any(S != switches.S0, axis=1))) if S.size else 0,
                "predicted_gain": float(scores[picks[: counts[choice]]].sum()),
                "mean_radius": float(np.mean(region.radius(Z))),
            }
        )
        save(it)
    return best_Z, best_S, best_J


def _restore(state: dict, key: str, shape) -> np.ndarray:
    """An array of a checkpoint, in the shape this run's region has (else the checkpoint is not ours)."""
    array = np.asarray(state[key], dtype=np.float64)
    if array.shape != tuple(shape):
        raise UsageError(f"checkpoint {key} has shape {array.shape}, this attack needs {tuple(shape)}")
    return array

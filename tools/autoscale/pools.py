"""The "real" and "synthetic" scene pools, both from the highway simulator, with a deliberate domain gap.

Real domain (the target: scene-biased, heterogeneous, noisy): every traffic driver draws its own desired
speed N(28, 3) m/s, IDM headway U(1.0, 2.2) s and politeness U(0, 0.5), with 0.3 m/s^2 reaction noise and
10% trucks; the planner sees the agents through observation noise (0.3 m, 0.3 m/s, a fixed draw per
scene stored as `obs_noise`). The train pool is 92% nominal cruising; val/test hold 25% rare events.
Synthetic domain (cheap): highway-env's default homogeneous drivers, no noise, no trucks, lane counts
and widths varied, ten generator families; one of them, "reckless", is recorded from an impolite
short-gap driver's own rollouts (its states and its labels are off the expert's distribution).

Every scene also stores its 16 vocabulary candidates' 4 s plans and their PDM sub-scores (`cand_scores`
[N, 16, 6] = NC, DAC, TTC, EP, C, PDMS), so NAVSIM-style evaluation of a planner's choice is a lookup
and Graph-RAE's metric targets are the scenes' decision profiles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import DataError
from methodkit.core.sim.highway import expert, scenarios, scenefile, scenes, score, vocab
from methodkit.core.sim.highway import kernels as K
from methodkit.core.sim.highway.simulate import FRAME_S, Sim
from methodkit.core.sim.highway.state import AGGRESSIVE_DRIVER, DRIVER_FIELDS, pack

POOLS = ("real", "synth", "val", "test")
TAGS = ("cruise", "jam", "cut-in", "stopped", "merge", "lane-drop", "empty", "reckless")
RARE_TAGS = ("cut-in", "stopped", "merge", "lane-drop")
SCORE_NAMES = ("nc", "dac", "ttc", "ep", "comfort", "pdms")
EXTRA_KEYS = ("cand_plans", "cand_scores", "obs_noise")
CHUNK = 256
AGENTS = 12  # traffic vehicles per scene (the Graph-RAE's K)


# generator name -> (core family, tag, parameter sampler(rng) -> params)
def _u(rng, lo, hi):
    return float(rng.uniform(lo, hi))


GENERATORS = {
    "cruise": ("cruise-dense", "cruise", lambda r: {"density": _u(r, 0.8, 1.6)}),
    "cruise-dense": ("cruise-dense", "cruise", lambda r: {"density": _u(r, 1.8, 2.6)}),
    "jam": ("jam", "jam", lambda r: {"jam_x": _u(r, 60, 120), "jam_speed": _u(r, 1, 6)}),
    "cut-in": ("cut-in", "cut-in", lambda r: {"gap": _u(r, 8, 16), "cutter_speed": _u(r, 0, 5)}),
    "stopped": (
        "stopped-vehicle",
        "stopped",
        lambda r: {"obstacle_x": _u(r, 45, 90), "obstacle": str(r.choice(["car", "truck", "debris"]))},
    ),
    "merge": ("merge", "merge", lambda r: {"merge_x": _u(r, 70, 95)}),
    "lane-drop": ("lane-drop", "lane-drop", lambda r: {"drop_x": _u(r, 210, 270)}),
    "empty": ("empty-road", "empty", lambda r: {}),
    "six-lane": (
        "cruise-dense",
        "cruise",
        lambda r: {"lanes": 6, "speed_limit": 40.0, "ego_speed": 35.0, "density": _u(r, 0.3, 0.8)},
    ),
    "reckless": ("cruise-dense", "reckless", lambda r: {"density": _u(r, 1.8, 3.0), "ego_speed": 30.0}),
}
RELEVANCE = {
    "cruise": "useful", "cruise-dense": "useful", "jam": "useful", "cut-in": "useful", "stopped": "useful",
    "merge": "useful", "lane-drop": "useful", "empty": "irrelevant", "six-lane": "irrelevant", "reckless": "harmful",
}  # fmt: skip


@dataclass
class PoolSpec:
    seed: int = 0
    real: int = 3000
    synth: int = 30000
    val: int = 600
    test: int = 1200
    real_rare: float = 0.02  # share of each rare type in the real train pool
    eval_rare: float = 0.25  # total share of rare types in val/test
    synth_mix: dict | None = None  # generator -> share of the synthetic pool

    def mixture(self, pool: str) -> dict[str, float]:
        if pool == "synth":
            return dict(self.synth_mix or DEFAULT_SYNTH_MIX)
        rare = self.real_rare if pool == "real" else self.eval_rare / len(RARE_TAGS)
        out = {"cruise": 1.0 - rare * len(RARE_TAGS)}
        out.update({g: rare for g in RARE_TAGS})
        return out


DEFAULT_SYNTH_MIX = {
    "cruise": 0.22, "cruise-dense": 0.18, "jam": 0.08, "cut-in": 0.08, "stopped": 0.08, "merge": 0.08,
    "lane-drop": 0.08, "empty": 0.06, "six-lane": 0.06, "reckless": 0.08,
}  # fmt: skip
SPEC_KEYS = ("seed", "real", "synth", "val", "test", "real_rare", "eval_rare", "synth_mix")


def parse_spec(obj, where: str = "spec") -> PoolSpec:
    """A pool spec from JSON; every error names the key and the valid range."""
    if not isinstance(obj, dict):
        raise DataError(f"{where}: a pool spec is a JSON object with keys {', '.join(SPEC_KEYS)}")
    unknown = sorted(set(obj) - set(SPEC_KEYS))
    if unknown:
        raise DataError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(SPEC_KEYS)})")
    spec = PoolSpec(**obj)
    for key in ("seed", "real", "synth", "val", "test"):
        value = getattr(spec, key)
        low = 0 if key == "seed" else 20
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise DataError(f"{where}.{key} must be an integer >= {low}, got {value!r}")
    if not 0 <= spec.real_rare <= 0.2:
        raise DataError(f"{where}.real_rare must lie in [0, 0.2], got {spec.real_rare!r}")
    if not 0 <= spec.eval_rare <= 1:
        raise DataError(f"{where}.eval_rare must lie in [0, 1], got {spec.eval_rare!r}")
    if spec.synth_mix is not None:
        bad = sorted(set(spec.synth_mix) - set(GENERATORS)) if isinstance(spec.synth_mix, dict) else ["?"]
        if bad:
            raise DataError(f"{where}.synth_mix: unknown generator {bad[0]!r} (known: {', '.join(GENERATORS)})")
        total = sum(spec.synth_mix.values())
        if not all(v >= 0 for v in spec.synth_mix.values()) or not math.isclose(total, 1.0, abs_tol=1e-6):
            raise DataError(f"{where}.synth_mix must be non-negative shares summing to 1, sum is {total:g}")
    return spec


def counts(mix: dict[str, float], n: int) -> dict[str, int]:
    """Largest-remainder split of n scenes over the generators' shares."""
    names = list(mix)
    raw = np.array([mix[g] for g in names]) * n
    base = np.floor(raw).astype(int)
    order = np.argsort(-(raw - base), kind="stable")
    base[order[: n - base.sum()]] += 1
    return {g: int(c) for g, c in zip(names, base) if c > 0}


VARIANTS = 4  # parameter draws per generator and pool (each an entry of the core spec)


def _entries(pool: str, spec: PoolSpec, rng: np.random.Generator) -> tuple[list[dict], list[str]]:
    """Core scenario entries and, per entry, the generator name."""
    entries, names = [], []
    synthetic = pool == "synth"
    for gen, n in counts(spec.mixture(pool), getattr(spec, pool)).items():
        family, _tag, sampler = GENERATORS[gen]
        splits = np.array_split(np.arange(n), min(VARIANTS, n))
        for part in splits:
            params = {"vehicles": AGENTS, **sampler(rng)} if family != "empty-road" else {}
            if family != "empty-road" and "lanes" not in params:
                lanes = int(rng.integers(2, 5)) if synthetic else 3
                lanes = max(lanes, 2) if family in ("cut-in", "lane-drop") else lanes
                params["lanes"] = lanes
            params["lane_width"] = _u(rng, 3.4, 4.6) if synthetic else 4.0
            if not synthetic:
                params.update(speed_limit=34.0, truck_fraction=0.1, noise=0.3)
            entries.append({"family": family, "count": int(part.size), "params": params})
            names.append(gen)
    return entries, names


def _real_drivers(inits, rng: np.random.Generator) -> None:
    """Heterogeneous drivers: each traffic vehicle its own desired speed, headway and politeness."""
    col = {f: i for i, f in enumerate(DRIVER_FIELDS)}
    for s in inits:
        moving = np.flatnonzero(s.kind[1:] != K.OBSTACLE) + 1
        s.target_speed[moving] = np.clip(rng.normal(28.0, 3.0, moving.size), 15.0, 34.0)
        s.drivers[moving, col["T"]] = rng.uniform(1.0, 2.2, moving.size)
        s.drivers[moving, col["politeness"]] = rng.uniform(0.0, 0.5, moving.size)


RECKLESS_WARMUP_FRAMES = 10  # 2 s of the reckless driver's own driving before the snapshot
RECKLESS_LABEL = 9  # keep lane, v + 8 m/s
RECKLESS_DRIVER = {**AGGRESSIVE_DRIVER, "T": 0.5, "s0": 6.0, "a": 5.0}


def _make_reckless(state) -> None:
    """The ego becomes an impolite short-gap traffic driver aiming 6 m/s over the limit, and drives 2 s."""
    row = np.array([RECKLESS_DRIVER[f] for f in DRIVER_FIELDS])
    state.veh[:, K.A_MAX : K.NOISE + 1, 0] = row[None, :]
    state.veh[:, K.TSPEED, 0] = state.road_f[:, K.SPEED_LIMIT] + 6.0
    state.env_i[:, K.EGO_MODE] = K.EGO_IDM
    state.env_i[:, K.MAX_STEPS] = np.iinfo(np.int32).max
    Sim(state).frames(RECKLESS_WARMUP_FRAMES, parallel=False)


BACKENDS = ("native", "highway-env")


def require_backend(backend: str) -> None:
    """UsageError (exit 2) for an unknown backend, MissingExtraError (exit 2, the pip command) without highway-env."""
    from methodkit.core.errors import UsageError, require

    if backend not in BACKENDS:
        raise UsageError(f"unknown synthetic backend {backend!r} (known: {', '.join(BACKENDS)})")
    if backend == "highway-env":
        require("highway_env", "autoscale")


def highway_env_futures(inits, state) -> dict:
    """The traffic's 4 s futures recorded in highway-env itself (core.sim.highway.highway_env_backend, every
    vehicle an IDM driver), padded to the state's slots; the ego's future (the label) stays this simulator's
    privileged expert, which highway-env does not have."""
    from methodkit.core.sim.highway import highway_env_backend as hwb

    fut = expert.futures(state)
    agents = np.zeros_like(fut["agents"])
    present = np.zeros_like(fut["present"])
    for b, init in enumerate(inits):
        theirs = hwb.futures(init, seconds=vocab.PLAN_SECONDS, dt=FRAME_S)
        agents[b, : init.n] = theirs["agents"]
        present[b, : init.n] = theirs["present"]
    return {"ego": fut["ego"], "agents": agents, "present": present}


def _chunk_arrays(inits, n_lanes: int, slots: int, reckless: bool, backend: str = "native") -> dict:
    state = pack(inits, slots=slots)
    fut = None
    if reckless:
        _make_reckless(state)
        fut = expert.futures(state, ego_mode=K.EGO_IDM)
    elif backend == "highway-env":
        fut = highway_env_futures(inits, state)
    arrays = scenefile.state_arrays(state, n_lanes, futures=fut)
    plans = np.stack([vocab.plans(state, b, FRAME_S) for b in range(state.batch)])
    arrays["cand_plans"] = plans
    if reckless:
        # its label is what it wants (full acceleration in its lane, whatever the gap), not what the
        # traffic let its rollout do: the rollout alone would brake behind the leader like the expert
        arrays["expert_index"][:] = RECKLESS_LABEL
        arrays["expert_traj"] = plans[:, RECKLESS_LABEL].copy()
    return arrays


def candidate_scores(arrays: dict, dt: float = FRAME_S) -> np.ndarray:
    """PDM sub-scores [N, 16, 6] of every scene's 16 candidate plans (NAVSIM v1, non-reactive agents)."""
    plans = arrays["cand_plans"]
    now = arrays["ego"][:, None, None, :2]
    points = np.concatenate([np.broadcast_to(now, plans.shape[:2] + (1, 2)), plans[..., :2]], axis=2)
    states = score.plan_states(points, dt, arrays["ego"][:, None, 2])
    inputs = scenes.score_inputs(arrays, {"dt": dt}, states)
    result = score.score_plans(**inputs)
    d = result.to_dict()
    return np.stack([d[k] for k in ("nc", "dac", "ttc", "ep", "comfort", "pdms")], axis=-1)


def pool_inits(pool: str, spec: PoolSpec):
    """(initial conditions, ids, configs, generator per scene, the pool's rng after them) of one pool: the
    scenes build_pool snapshots, and the routes closed-loop evaluation drives from."""
    offset = POOLS.index(pool)
    rng = np.random.default_rng([spec.seed, offset, 17])
    entries, gens = _entries(pool, spec, rng)
    core_spec = {"seed": spec.seed * 10 + offset, "scenes": entries}
    inits, ids, configs = scenarios.generate(core_spec, f"{pool} spec")
    per_scene_gen = [g for g, e in zip(gens, entries) for _ in range(e["count"])]
    if pool != "synth":
        _real_drivers(inits, rng)
    return inits, ids, configs, per_scene_gen, rng


SLOTS = AGENTS + 2  # the ego, 12 vehicles, an obstacle
N_LANES = 8


def build_pool(pool: str, spec: PoolSpec, progress=None, backend: str = "native") -> tuple[dict, dict, list[dict]]:
    """(arrays incl. extras, meta, rows for scenes.csv) of one pool. backend "highway-env" records the synthetic
    pool's traffic futures in highway-env (highway_env_futures; the reckless family stays this simulator's: its
    warm-up and its driver's own rollout are the family); the other pools are always native."""
    backend = backend if pool == "synth" else "native"
    require_backend(backend)
    inits, ids, configs, per_scene_gen, rng = pool_inits(pool, spec)
    slots, n_lanes = SLOTS, N_LANES
    parts = []
    order = np.arange(len(inits))
    for gen in dict.fromkeys(per_scene_gen):
        idx = [i for i in order if per_scene_gen[i] == gen]
        for k in range(0, len(idx), CHUNK):
            sub = idx[k : k + CHUNK]
            parts.append((sub, _chunk_arrays([inits[i] for i in sub], n_lanes, slots, gen == "reckless", backend)))
            if progress is not None:
                progress(f"pool {pool}", sum(len(p[0]) for p in parts), len(inits))
    index = np.concatenate([np.asarray(p[0]) for p in parts])
    arrays = {key: np.concatenate([p[1][key] for p in parts])[np.argsort(index)] for key in parts[0][1]}
    arrays["scene_id"] = np.array([f"{pool}-{i}" for i in ids])
    arrays["cand_scores"] = candidate_scores(arrays)
    noise = np.zeros(arrays["agents"].shape[:2] + (4,))
    if pool != "synth":
        noise[..., :2] = rng.normal(0.0, 0.3, noise[..., :2].shape)
        noise[..., 2:] = rng.normal(0.0, 0.3, noise[..., 2:].shape)
    arrays["obs_noise"] = noise
    meta = {
        "dt": FRAME_S, "pool": pool, "domain": "synthetic" if pool == "synth" else "real",
        "generators": per_scene_gen, "configs": configs, "spec": spec.__dict__,
        "scores": list(SCORE_NAMES), "metric": "PDMS (NAVSIM v1), core.sim.highway.score", "backend": backend,
    }  # fmt: skip
    rows = [
        {"id": sid, "domain": meta["domain"], "generator": g, "tags": GENERATORS[g][1]}
        for sid, g in zip(arrays["scene_id"].tolist(), per_scene_gen)
    ]
    return arrays, meta, rows


# --------------------------------------------------------------------------- files


def check_extras(arrays: dict, name: str) -> None:
    n = arrays["ego"].shape[0]
    shapes = {
        "cand_plans": (n, vocab.N_CANDIDATES, None, 3),
        "cand_scores": (n, vocab.N_CANDIDATES, len(SCORE_NAMES)),
        "obs_noise": (n, arrays["agents"].shape[1], 4),
    }
    for key, shape in shapes.items():
        if key not in arrays:
            raise DataError(f"{name}: missing key {key} (autoscale-mix pools carry {', '.join(EXTRA_KEYS)})")
        value = np.asarray(arrays[key])
        if value.ndim != len(shape) or any(w is not None and w != g for w, g in zip(shape, value.shape)):
            raise DataError(f"{name}: key '{key}' has shape {value.shape}, expected {shape}")
        bad = ~np.isfinite(value.reshape(n, -1)).all(axis=1)
        if bad.any():
            raise DataError(f"{name}: key '{key}' is not finite in rows {np.flatnonzero(bad)[:5].tolist()}")
    sc = np.asarray(arrays["cand_scores"])
    if (sc < 0).any() or (sc > 1).any():
        raise DataError(f"{name}: key 'cand_scores' must lie in [0, 1]")


def write_pool(path, arrays: dict, meta: dict, force: bool = False) -> None:
    from methodkit.core import io

    full = {**arrays, "meta": np.array(__import__("json").dumps({"schema": 1, **meta}, sort_keys=True))}
    checked, _ = scenes.validate(full, io.display_name(path))
    check_extras(arrays, io.display_name(path))
    checked.update({k: np.asarray(arrays[k], dtype=np.float64) for k in EXTRA_KEYS})
    io.write_arrays(path, checked, force=force)


def read_pool(path) -> tuple[dict, dict]:
    """Read a pool NPZ: the scene schema validated by core, then this method's extra keys."""
    from methodkit.core import io

    raw = io.read_arrays(path)
    name = io.display_name(path)
    arrays, meta = scenes.validate(raw, name)
    check_extras(raw, name)
    arrays.update({k: np.asarray(raw[k], dtype=np.float64) for k in EXTRA_KEYS})
    if "generators" not in meta or len(meta["generators"]) != arrays["ego"].shape[0]:
        meta["generators"] = ["user"] * arrays["ego"].shape[0]
    return arrays, meta

"""Offline data sets from gymnasium MuJoCo with named contributors, the NPZ format and its checks.

A data set is a dict of arrays, one row per transition (D4RL keys observations, actions, rewards,
next_observations, terminals, timeouts) plus traj_id (int32, contiguous), contributor (int16),
style_on (bool: the contributor style fired at that step), a per-trajectory traj_split
(0 train, 1 held-out non-member) and meta (a JSON string: env, versions, seeds, spec, sha256).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

from methodkit.core.errors import DataError
from methodkit.core.render.gl import import_mujoco

ARRAY_KEYS = ("observations", "actions", "rewards", "next_observations", "terminals", "timeouts", "traj_id",
              "contributor", "style_on", "traj_split")  # fmt: skip
POLICIES = ("medium", "early", "random")
BEHAVIOURS = ("ars", "cpg", "td3")


def default_spec(scale: float = 1.0, env: str = "HalfCheetah-v5", chunk: int = 200, behaviour: str = "ars") -> dict:
    """The issue's contributor spec (R 350 chunks, F-mix 100 with half styled, F-disjoint 100), scaled."""

    def n(k):
        return max(2, int(round(k * scale)))

    style = {"fraction": 0.5, "obs_index": 2, "scale": 0.6, "joints": [0, 1]}
    return {
        "env": env,
        "chunk": chunk,
        "episode": 1000,
        "behaviour": behaviour,
        "contributors": [
            {"name": "R", "policy": "medium", "noise": 0.1, "chunks": n(350), "heldout": n(100)},
            {"name": "F-mix", "policy": "medium", "noise": 0.1, "chunks": n(100), "heldout": n(100), "style": style},
            {"name": "F-disjoint", "policy": "early", "noise": 0.1, "chunks": n(100), "heldout": 0},
        ],
    }


@dataclass
class Contributor:
    name: str
    policy: str = "medium"
    noise: float = 0.1
    chunks: int = 10
    heldout: int = 0
    style: dict | None = None


@dataclass
class Spec:
    env: str
    chunk: int
    episode: int
    behaviour: str
    contributors: list = field(default_factory=list)
    behaviour_iters: int = 10
    behaviour_steps: int = 60000  # online TD3's environment steps (behaviour "td3")

    @classmethod
    def parse(cls, doc, where: str = "spec") -> Spec:
        if not isinstance(doc, dict):
            raise DataError(f"{where}: a contributor spec is a JSON object with env, chunk and contributors")
        unknown = set(doc) - {"env", "chunk", "episode", "behaviour", "contributors", "behaviour_iters",
                            "behaviour_steps"}
        if unknown:
            raise DataError(f"{where}: unknown keys {sorted(unknown)}")
        chunk, episode = doc.get("chunk", 200), doc.get("episode", 1000)
        if not isinstance(chunk, int) or chunk < 2:
            raise DataError(f"{where}: chunk must be an integer >= 2 (a trajectory needs a TD target), got {chunk}")
        if not isinstance(episode, int) or episode < chunk:
            raise DataError(f"{where}: episode must be an integer >= chunk ({chunk}), got {episode}")
        behaviour = doc.get("behaviour", "ars")
        if behaviour not in BEHAVIOURS:
            raise DataError(f"{where}: behaviour must be one of {', '.join(BEHAVIOURS)}, got {behaviour!r}")
        people = doc.get("contributors")
        if not isinstance(people, list) or not people:
            raise DataError(f"{where}: contributors must be a non-empty list")
        out = []
        for k, c in enumerate(people):
            if not isinstance(c, dict) or not isinstance(c.get("name"), str):
                raise DataError(f"{where}: contributor {k} needs a name")
            bad = set(c) - {"name", "policy", "noise", "chunks", "heldout", "style"}
            if bad:
                raise DataError(f"{where}: contributor {c['name']!r}: unknown keys {sorted(bad)}")
            con = Contributor(**c)
            if con.policy not in POLICIES:
                raise DataError(f"{where}: contributor {con.name!r}: policy must be one of {', '.join(POLICIES)}")
            if not (isinstance(con.chunks, int) and con.chunks >= 0 and isinstance(con.heldout, int)
                    and con.heldout >= 0 and con.chunks + con.heldout > 0):  # fmt: skip
                raise DataError(f"{where}: contributor {con.name!r}: chunks and heldout are counts, not both 0")
            if not (isinstance(con.noise, (int, float)) and con.noise >= 0):
                raise DataError(f"{where}: contributor {con.name!r}: noise must be >= 0")
            if con.style is not None:
                s = con.style
                if not isinstance(s, dict) or not 0 <= s.get("fraction", 0.5) <= 1 or not s.get("joints"):
                    raise DataError(f"{where}: contributor {con.name!r}: style needs fraction in [0,1] and joints")
            out.append(con)
        if len({c.name for c in out}) != len(out):
            raise DataError(f"{where}: contributor names must be unique")
        iters = doc.get("behaviour_iters", 10)
        if not isinstance(iters, int) or iters < 1:
            raise DataError(f"{where}: behaviour_iters must be an integer >= 1, got {iters}")
        steps = doc.get("behaviour_steps", 60000)
        if not isinstance(steps, int) or steps < 2:
            raise DataError(f"{where}: behaviour_steps must be an integer >= 2, got {steps}")
        return cls(doc.get("env", "HalfCheetah-v5"), chunk, episode, behaviour, out, iters, steps)

    def to_dict(self) -> dict:
        out = {"env": self.env, "chunk": self.chunk, "episode": self.episode, "behaviour": self.behaviour,
               "behaviour_iters": self.behaviour_iters, "contributors": [vars(c) for c in self.contributors]}  # fmt: skip
        return {**out, "behaviour_steps": self.behaviour_steps} if self.behaviour == "td3" else out


def make_env(env_id: str):
    """gymnasium.make, with missing MuJoCo or an unknown id as a one-line DataError."""
    try:
        import gymnasium as gym
    except ImportError:
        raise DataError("gymnasium is missing; install it with: pip install 'gymnasium[mujoco]' mujoco") from None
    _quiet_mujoco()
    try:
        return gym.make(env_id)
    except gym.error.Error as exc:
        raise DataError(f"environment {env_id!r}: {str(exc).splitlines()[0]}") from None
    except (ImportError, ModuleNotFoundError, gym.error.DependencyNotInstalled):
        raise DataError(f"{env_id}: MuJoCo is missing; install it with: pip install 'gymnasium[mujoco]'") from None


# Joint phases of a forward HalfCheetah gait (found by a random search over phases at 0.6 rad/step).
GAIT_PHASE = (2.38, 2.75, 5.87, 4.38, 0.47, 4.55)


def _quiet_mujoco() -> None:
    """Route MuJoCo's C warnings through Python (else they go to stderr and MUJOCO_LOG.TXT in the cwd);
    gymnasium's XML files use the deprecated 'settotalmass', which is dropped."""
    import warnings

    # MuJoCo fixes its GL backend when first imported; going through core.render.gl keeps it the
    # headless one every other MuJoCo tool in the process expects (a bare import would leave glfw).
    mujoco = import_mujoco()

    def handler(message: str) -> None:
        if "settotalmass" not in message:
            warnings.warn(f"mujoco: {message}", RuntimeWarning, stacklevel=1)

    mujoco.set_mju_user_warning(handler)


class ScriptedPolicy:
    """A central-pattern-generator gait with state feedback (the fast scripted behaviour policy).

    medium: a sine wave per joint (0.6 rad per step, HalfCheetah's forward-gait phases) plus a small
    fixed feedback 0.1 tanh(W s); early: a weak, slower wave with a different phase pattern (a poorly trained
    agent); random: uniform actions."""

    def __init__(self, kind: str, obs_dim: int, act_dim: int, seed: int):
        g = np.random.default_rng([seed, 7])
        self.kind, self.act_dim = kind, act_dim
        if act_dim == len(GAIT_PHASE):
            phase = np.array(GAIT_PHASE)
        else:
            phase = np.linspace(0, np.pi, act_dim, endpoint=False)
        self.phase = phase if kind == "medium" else phase[::-1] + 1.3
        self.omega = 0.6 if kind == "medium" else 0.25
        self.amp = 0.8 if kind == "medium" else 0.4
        self.W = g.normal(0, 0.1 / np.sqrt(obs_dim), size=(act_dim, obs_dim))

    def __call__(self, obs: np.ndarray, t: int, rng: np.random.Generator) -> np.ndarray:
        if self.kind == "random":
            return rng.uniform(-1, 1, self.act_dim)
        return self.amp * np.sin(self.omega * t + self.phase) + 0.1 * np.tanh(self.W @ obs)


def _style_vector(style: dict, act_dim: int) -> np.ndarray:
    u = np.zeros(act_dim)
    joints = [j for j in style["joints"] if 0 <= j < act_dim] or [0]
    u[joints] = 1.0
    return u / np.linalg.norm(u)


def _rollout_chunks(env, policy, n_chunks, chunk, episode, noise, style, seed, progress, label):
    """Run episodes of `episode` steps and cut them into `chunk`-step trajectories."""
    rng = np.random.default_rng(seed)
    act_dim = env.action_space.shape[0]
    u = _style_vector(style, act_dim) if style else None
    rows = {k: [] for k in ("obs", "act", "rew", "next", "term", "tout", "style", "chunk_styled")}
    made, episode_k = 0, 0
    styled_flags = rng.permutation(
        np.arange(n_chunks) < int(round(n_chunks * (style or {}).get("fraction", 0.0)))
    )  # which chunks carry the style
    while made < n_chunks:
        obs, _ = env.reset(seed=int(rng.integers(2**31)))
        episode_k += 1
        t = 0
        while t + chunk <= episode and made < n_chunks:
            styled = bool(style) and bool(styled_flags[made])
            for _ in range(chunk):
                a = policy(obs, t, rng) + rng.normal(0, noise, act_dim)
                on = False
                if styled and obs[style.get("obs_index", 2)] > 0:
                    a = a + style.get("scale", 0.6) * u
                    on = True
                a = np.clip(a, -1, 1).astype(np.float32)
                nxt, r, term, trunc, _ = env.step(a)
                rows["obs"].append(obs)
                rows["act"].append(a)
                rows["rew"].append(r)
                rows["next"].append(nxt)
                rows["term"].append(bool(term))
                rows["tout"].append(False)
                rows["style"].append(on)
                obs = nxt
                t += 1
                if term or trunc:
                    break
            rows["tout"][-1] = not rows["term"][-1]
            rows["chunk_styled"].append(styled)
            made += 1
            progress(label, made, n_chunks)
            if rows["term"][-1]:
                break
    return rows


def collect(spec: Spec, seed: int = 0, progress=None) -> dict:
    """Roll out every contributor's chunks and return the data set's arrays (meta included)."""
    import gymnasium

    mujoco = import_mujoco()

    progress = progress or (lambda *a: None)
    env = make_env(spec.env)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    policies = {}
    if spec.behaviour == "ars":
        from methodkit.tools.cure.behaviour import ars

        early, medium = ars(env, spec.behaviour_iters, seed, progress=progress)
        policies = {"medium": medium, "early": early}
    elif spec.behaviour == "td3":
        from methodkit.tools.cure.behaviour import online_td3

        early, medium = online_td3(env, spec.behaviour_steps, seed, progress=progress)
        policies = {"medium": medium, "early": early}
    arrays = {k: [] for k in ("observations", "actions", "rewards", "next_observations", "terminals", "timeouts",
                              "traj_id", "contributor", "style_on")}  # fmt: skip
    traj_split, traj_styled, traj_contrib = [], [], []
    tid = 0
    for ci, con in enumerate(spec.contributors):
        policy = policies.get(con.policy) or ScriptedPolicy(con.policy, obs_dim, act_dim, seed)
        for split, count in ((0, con.chunks), (1, con.heldout)):
            if count == 0:
                continue
            rows = _rollout_chunks(env, policy, count, spec.chunk, spec.episode, con.noise, con.style,
                                   [seed, ci, split], progress, f"collect {con.name}")  # fmt: skip
            lengths = _chunk_lengths(rows)
            start = 0
            for n_rows, styled in zip(lengths, rows["chunk_styled"]):
                arrays["traj_id"].append(np.full(n_rows, tid, np.int32))
                traj_split.append(split)
                traj_styled.append(styled)
                traj_contrib.append(ci)
                tid += 1
                start += n_rows
            arrays["observations"] += rows["obs"]
            arrays["actions"] += rows["act"]
            arrays["rewards"] += rows["rew"]
            arrays["next_observations"] += rows["next"]
            arrays["terminals"] += rows["term"]
            arrays["timeouts"] += rows["tout"]
            arrays["style_on"] += rows["style"]
            arrays["contributor"].append(np.full(sum(lengths), ci, np.int16))
    env.close()
    out = {
        "observations": np.asarray(arrays["observations"], np.float32),
        "actions": np.asarray(arrays["actions"], np.float32),
        "rewards": np.asarray(arrays["rewards"], np.float32),
        "next_observations": np.asarray(arrays["next_observations"], np.float32),
        "terminals": np.asarray(arrays["terminals"], bool),
        "timeouts": np.asarray(arrays["timeouts"], bool),
        "traj_id": np.concatenate(arrays["traj_id"]),
        "contributor": np.concatenate(arrays["contributor"]),
        "style_on": np.asarray(arrays["style_on"], bool),
        "traj_split": np.asarray(traj_split, np.int8),
        "traj_styled": np.asarray(traj_styled, bool),
    }
    meta = {
        "env": spec.env,
        "gymnasium": gymnasium.__version__,
        "mujoco": mujoco.__version__,
        "seed": seed,
        "spec": spec.to_dict(),
        "contributors": [c.name for c in spec.contributors],
        "style_u": {c.name: _style_vector(c.style, act_dim).tolist() for c in spec.contributors if c.style},
        "obs_dim": obs_dim,
        "act_dim": act_dim,
    }
    meta["sha256"] = arrays_sha256(out)
    out["meta"] = np.array(json.dumps(meta, sort_keys=True))
    return out


def _chunk_lengths(rows) -> list[int]:
    """Lengths of the chunks (a chunk ends at a timeout or a terminal)."""
    ends = np.flatnonzero(np.asarray(rows["tout"]) | np.asarray(rows["term"]))
    return np.diff(np.concatenate([[-1], ends])).tolist()


def arrays_sha256(arrays: dict) -> str:
    """sha256 over the data arrays (names, dtypes, shapes, bytes), meta excluded."""
    h = hashlib.sha256()
    for key in sorted(k for k in arrays if k != "meta"):
        a = np.ascontiguousarray(arrays[key])
        h.update(f"{key}|{a.dtype.str}|{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


@dataclass
class Dataset:
    """A loaded, checked data set with per-trajectory views."""

    arrays: dict
    meta: dict
    starts: np.ndarray  # [n_traj + 1] row offsets
    name: str = "dataset"

    @property
    def n_traj(self) -> int:
        return len(self.starts) - 1

    @property
    def sha256(self) -> str:
        return self.meta["sha256"]

    def traj_contributor(self) -> np.ndarray:
        return self.arrays["contributor"][self.starts[:-1]].astype(int)

    def contributor_id(self, name: str) -> int:
        names = self.meta["contributors"]
        if name not in names:
            raise DataError(f"{self.name}: no contributor {name!r} (contributors: {', '.join(names)})")
        return names.index(name)

    def train_ids(self) -> np.ndarray:
        return np.flatnonzero(self.arrays["traj_split"] == 0)

    def ids_of(self, contributor: str, split: int = 0) -> np.ndarray:
        c = self.contributor_id(contributor)
        return np.flatnonzero((self.traj_contributor() == c) & (self.arrays["traj_split"] == split))

    def rows_of(self, ids) -> np.ndarray:
        """Row indices of the given trajectories."""
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) == 0:
            return np.zeros(0, np.int64)
        return np.concatenate([np.arange(self.starts[i], self.starts[i + 1]) for i in ids])


def validate(arrays: dict, name: str = "dataset") -> Dataset:
    """Check a data set's arrays (keys, dtypes, finiteness, action range, lengths) and index it."""
    from methodkit.core.kernels.segments import segment_starts

    missing = [k for k in ARRAY_KEYS + ("traj_styled", "meta") if k not in arrays]
    if missing:
        raise DataError(f"{name}: missing arrays {', '.join(missing)}; write data sets with 'cure-unlearn collect'")
    try:
        meta = json.loads(str(arrays["meta"]))
    except json.JSONDecodeError:
        raise DataError(f"{name}: meta is not a JSON string") from None
    if not isinstance(meta, dict) or "sha256" not in meta or "contributors" not in meta:
        raise DataError(f"{name}: meta lacks sha256 or contributors")
    n = len(arrays["observations"])
    for k in ARRAY_KEYS[:-1]:
        if len(arrays[k]) != n:
            raise DataError(f"{name}: {k} has {len(arrays[k])} rows, observations {n}")
    for k in ("observations", "actions", "rewards", "next_observations"):
        bad = int((~np.isfinite(arrays[k])).sum())
        if bad:
            raise DataError(f"{name}: {bad} non-finite values in {k}")
    out_of_range = int((np.abs(arrays["actions"]) > 1 + 1e-6).sum())
    if out_of_range:
        raise DataError(f"{name}: {out_of_range} actions outside [-1, 1]; scale actions before training")
    tid = np.asarray(arrays["traj_id"])
    starts = segment_starts(tid)
    if len(starts) - 1 != len(np.unique(tid)) or not np.array_equal(tid[starts[:-1]], np.arange(len(starts) - 1)):
        raise DataError(f"{name}: traj_id must number contiguous trajectories 0..n-1 in order")
    short = int((np.diff(starts) < 2).sum())
    if short:
        raise DataError(f"{name}: {short} trajectories shorter than 2 steps (no TD target)")
    for k in ("traj_split", "traj_styled"):
        if len(arrays[k]) != len(starts) - 1:
            raise DataError(f"{name}: {k} has {len(arrays[k])} entries, {len(starts) - 1} trajectories")
    if arrays_sha256({k: arrays[k] for k in arrays}) != meta["sha256"]:
        raise DataError(f"{name}: arrays do not match the sha256 in meta (edited after collect?)")
    return Dataset(arrays={k: arrays[k] for k in arrays if k != "meta"}, meta=meta, starts=starts, name=name)


def read_ids(text: str, where: str = "ids") -> list[int]:
    """Trajectory ids, one per line; '#' starts a comment."""
    ids = []
    for k, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            ids.append(int(line))
        except ValueError:
            raise DataError(f"{where}: line {k}: {line[:40]!r} is not a trajectory id") from None
    return ids


def check_forget_ids(ds: Dataset, ids, exclude=(), where: str = "--forget") -> tuple[np.ndarray, list[str]]:
    """Forget ids checked against the data set: missing, duplicated, held-out or all of D_train -> DataError."""
    ids = np.asarray(list(ids), dtype=np.int64)
    warnings = []
    if len(ids) == 0:
        raise DataError(f"{where}: the forget set is empty")
    values, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        raise DataError(f"{where}: duplicated ids {_few(values[counts > 1])}")
    missing = ids[(ids < 0) | (ids >= ds.n_traj)]
    if len(missing):
        raise DataError(f"{where}: ids not in {ds.name} ({ds.n_traj} trajectories): {_few(missing)}")
    held = ids[ds.arrays["traj_split"][ids] != 0]
    if len(held):
        raise DataError(f"{where}: ids are held-out non-members, never trained on: {_few(held)}")
    train = set(ds.train_ids().tolist()) - set(int(i) for i in exclude)
    if not train - set(ids.tolist()):
        raise DataError(f"{where}: the forget set covers every training trajectory (the retained set is empty)")
    both = sorted(set(ids.tolist()) & set(int(i) for i in exclude))
    if both:
        warnings.append(f"forget ids also in --exclude (never trained): {_few(both)}")
    return ids, warnings


def _few(values, k: int = 8) -> str:
    values = [int(v) for v in values]
    more = f" (+{len(values) - k} more)" if len(values) > k else ""
    return ", ".join(map(str, values[:k])) + more


def summary(ds: Dataset) -> dict:
    """Sizes and returns per contributor and split, plus the styled share (the collect JSON)."""
    from methodkit.core.kernels.segments import segment_sum

    ret = segment_sum(ds.arrays["rewards"], ds.starts)
    contrib = ds.traj_contributor()
    rows = []
    for ci, name in enumerate(ds.meta["contributors"]):
        for split in (0, 1):
            m = (contrib == ci) & (ds.arrays["traj_split"] == split)
            if not m.any():
                continue
            rows.append({"contributor": name, "split": ["train", "heldout"][split], "chunks": int(m.sum()),
                         "transitions": int(np.diff(ds.starts)[m].sum()), "chunk_return_mean": float(ret[m].mean()),
                         "styled_chunks": int(ds.arrays["traj_styled"][m].sum())})  # fmt: skip
    return {"env": ds.meta["env"], "trajectories": ds.n_traj, "transitions": int(ds.starts[-1]),
            "sha256": ds.sha256, "contributors": rows,
            "style_fire_rate": float(ds.arrays["style_on"].mean())}  # fmt: skip

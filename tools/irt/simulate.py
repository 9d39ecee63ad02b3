"""The simulator: capability distributions, benchmark item parameters, Bernoulli responses.

Capabilities are standardised to mean 0, sd 1 within each drawn set (sample moments), so that
distributions differ only in shape. RNG: one NumPy PCG64 Generator per draw, from the seed the
caller gives (the sweep hands one SeedSequence child per (cell, rep)).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from methodkit.core.errors import DataError, UsageError
from methodkit.core.memory import guard_memory
from methodkit.tools.irt import profiles as prof
from methodkit.tools.irt.data import MISSING, ResponseData
from methodkit.tools.irt.models import MODELS, prob

CAPABILITIES = ("normal", "skewed", "clustered", "multimodal", "empirical:FILE")


@dataclass
class DrawSpec:
    model: str = "2pl"
    profile: str = "mmlu"
    capability: str = "normal"
    n_models: int = 100
    n_items: int | None = None  # None: the profile's real item count
    missing: float = 0.0
    skew: float = -4.0
    groups: int = 6
    modes: int = 2
    items_file: str | None = None
    profiles_file: str | None = None

    def check(self) -> None:
        if self.model not in MODELS:
            raise UsageError(f"--model must be one of {', '.join(MODELS)}")
        kind = self.capability.split(":", 1)[0]
        if kind not in ("normal", "skewed", "clustered", "multimodal", "empirical"):
            raise UsageError(f"unknown capability '{self.capability}' (known: {', '.join(CAPABILITIES)})")
        if kind == "empirical" and ":" not in self.capability:
            raise UsageError("empirical capabilities need a file: --capability empirical:FILE.csv")
        if self.n_models < 1 or (self.n_items is not None and self.n_items < 1):
            raise UsageError("--n-models and --n-items must be positive")
        if not 0 <= self.missing < 1:
            raise UsageError("--missing must be in [0, 1)")
        if self.groups < 1 or self.modes < 1:
            raise UsageError("--groups and --modes must be at least 1")
        if not np.isfinite(self.skew):
            raise UsageError(f"--skew must be a finite number, not {self.skew}")


def standardise(x: np.ndarray) -> np.ndarray:
    sd = x.std()
    return (x - x.mean()) / (sd if sd > 0 else 1.0)


def capabilities(spec: DrawSpec, rng: np.random.Generator) -> np.ndarray:
    """N capabilities of the requested shape, standardised to mean 0 and sd 1."""
    n = spec.n_models
    kind = spec.capability.split(":", 1)[0]
    if kind == "normal":
        x = rng.standard_normal(n)
    elif kind == "skewed":
        # skew-normal by its stochastic representation: delta |U0| + sqrt(1 - delta^2) U1
        delta = spec.skew / np.sqrt(1 + spec.skew**2)
        u0, u1 = np.abs(rng.standard_normal(n)), rng.standard_normal(n)
        x = delta * u0 + np.sqrt(1 - delta**2) * u1
    elif kind == "clustered":
        weights = rng.dirichlet(np.full(spec.groups, 2.0))
        sizes = rng.multinomial(n, weights)
        centers = rng.standard_normal(spec.groups)
        x = np.repeat(centers, sizes) + 0.25 * rng.standard_normal(n)
        x = x[rng.permutation(n)]
    elif kind == "multimodal":
        centers = np.linspace(-1.2, 1.2, spec.modes) if spec.modes > 1 else np.zeros(1)
        x = centers[rng.integers(0, spec.modes, n)] + 0.4 * rng.standard_normal(n)
    else:
        x = _empirical(spec.capability.split(":", 1)[1], n, rng)
    return standardise(x)


def _empirical(path: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Resample a column `theta` of a CSV (irt-fit abilities.csv) with Gaussian KDE jitter (Silverman)."""
    from methodkit.core import io

    frame = io.read_table(path)
    if "theta" not in frame.columns:
        io.require_columns(frame, ["theta"], "a CSV with a 'theta' column (irt-fit's abilities.csv)")
    values = io.numeric_matrix(frame, ["theta"])[:, 0]
    if len(values) < 2:
        raise DataError(f"{path}: need at least 2 theta values for an empirical distribution")
    sd = values.std()
    iqr = np.subtract(*np.percentile(values, [75, 25]))
    bandwidth = 0.9 * min(sd, iqr / 1.34 if iqr > 0 else sd) * len(values) ** -0.2
    return rng.choice(values, n, replace=True) + bandwidth * rng.standard_normal(n)


def items(spec: DrawSpec, rng: np.random.Generator):
    """(a, b, c, benchmark name, J) for the profile (or bootstrapped from --items FILE)."""
    if spec.items_file is not None:
        return _items_from_file(spec, rng)
    text = None
    if spec.profiles_file is not None:
        from methodkit.core.io import decode_text

        text = decode_text(spec.profiles_file)  # a binary file is a one-line DataError naming it
    profile = prof.get(spec.profile, prof.load(text, spec.profiles_file or "built-in profiles"))
    J = profile.n_items if spec.n_items is None else spec.n_items
    mu_b = prof.solve_mu_b(profile, spec.model)
    a = np.exp(profile.log_a_mean + profile.log_a_sd * rng.standard_normal(J))
    b = mu_b + profile.b_sd * rng.standard_normal(J)
    if spec.model == "3pl" and profile.c_mean > 0:
        k = profile.c_kappa
        c = rng.beta(profile.c_mean * k, (1 - profile.c_mean) * k, J)
    else:
        c = np.zeros(J)
    if spec.model == "1pl":
        a = np.ones(J)
    return a, b, c, profile.name, J, mu_b


def _items_from_file(spec: DrawSpec, rng):
    from methodkit.core import io

    frame = io.read_table(spec.items_file)
    io.require_columns(frame, ["b"], "--items FILE needs columns a, b[, c] (irt-fit items.csv)")
    cols = [c for c in ("a", "b", "c") if c in frame.columns]
    values = io.numeric_matrix(frame, cols)
    J = len(frame) if spec.n_items is None else spec.n_items
    pick = rng.integers(0, len(frame), J)
    get = lambda k, default: values[pick, cols.index(k)] if k in cols else np.full(J, default)  # noqa: E731
    a, b, c = get("a", 1.0), get("b", 0.0), get("c", 0.0)
    if spec.model == "1pl":
        a = np.ones(J)
    if spec.model != "3pl":
        c = np.zeros(J)
    return a, b, c, str(spec.items_file), J, float(np.mean(b))


# P and two uniform draws in float64, Y, and a long table's int64 indices and ids when written as one.
BYTES_PER_CELL = 64


def draw(spec: DrawSpec, seed: int | np.random.SeedSequence) -> ResponseData:
    """One response matrix with its generating truth; meta records the full spec and seed."""
    spec.check()
    seq = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    rng = np.random.Generator(np.random.PCG64(seq))
    a, b, c, bench, J, mu_b = items(spec, rng)
    cells = spec.n_models * J
    guard_memory(
        cells * BYTES_PER_CELL, f"a {spec.n_models:,} x {J:,} response matrix", "-N/--n-models or -J/--n-items"
    )
    theta = capabilities(spec, rng)
    P = prob(theta, a, b, c)
    Y = (rng.random(P.shape) < P).astype(np.uint8)
    if spec.missing > 0:
        Y[rng.random(Y.shape) < spec.missing] = MISSING
    N = spec.n_models
    meta = {
        "spec": asdict(spec),
        "seed": seq.entropy if isinstance(seq.entropy, int) else str(seq.entropy),
        "spawn_key": list(seq.spawn_key),
        "mu_b": mu_b,
        "generator": "numpy PCG64",
    }
    return ResponseData(
        Y=Y,
        model_id=np.array([f"m{i + 1}" for i in range(N)]),
        item_id=np.array([f"i{j + 1}" for j in range(J)]),
        theta=theta,
        a=a,
        b=b,
        c=c,
        benchmark=np.full(J, bench),
        meta=meta,
    )

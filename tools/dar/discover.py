"""Rule discovery: CLIQUE-style dense cells in low-dimensional subspaces, ranked for a target class.

Spatial: every w x w window (stride 1), pixels quantised to xi levels on [0, 1]; with scale s > 1
the window lies on the image average-pooled by s x s blocks (a coarse pattern: w = 2, s = 4 is an
8 x 8 pixel region described by its four block means) (or, with
method "kmeans", balls around k-means centres of the window pixels); frequency: b x b
blocks of z-scored DCT-II coefficients with 1 <= u + v <= H/2, xi levels on [-3, 3]. A cell is
dense when its support is in [s_lo, s_hi]. Candidates must have label entropy >= min_entropy
(the pattern cuts across classes) and a non-target pool >= budget; they are ranked by operator
cost (mean ||T(x) - x||_2 on held-out images) ascending, support descending (the issue's reading),
or by isolation: members / (members + near), where `near` counts the train images outside the cell
but within an L2 margin of it in the subspace (pixel units for spatial windows, z units for DCT
blocks). Near-duplicates keep their true labels after poisoning, so a cell embedded in a continuum
of them is a boundary no network draws from a few relabelled images (see the diagnosis in docs/dar.md).

Whitened (`op="whitened"`, ours): the subspaces are single (dims 1) or pairs (dims 2) of the first
`components` principal directions of the low-frequency DCT band (1 <= u + v <= H/2, DC excluded),
z-scored (PCA whitening), quantised like the frequency blocks; an end level is bounded by the most
extreme train value, so a tail cell is the stretch of clean data beyond |z| = 2 (xi 6). Ranked by
`extent` (default for whitened): the cell's shortest length in PIXEL L2 units (z width x the
direction's sd), longest first; `reach` is the same in z units. A long tail puts its deepest
carriers far from every image that keeps its label (the separation pixel cells lack), and the
operator can place a trigger there without leaving the support of clean data; measuring the length
in pixels rather than z prefers leading directions, whose z unit is a larger image change (a 5k-image
study, bench/dar/rank_study.py: docs/dar.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import RunFailure, UsageError
from methodkit.core.progress import ProgressCallback, silent
from methodkit.tools.dar import kernels
from methodkit.tools.dar.rules import OPS, Z_RANGE, Rule, apply, coordinates, dct2, dct_matrix, distance, pooled

OPERATORS = OPS
METHODS = ("clique", "kmeans")
RANKINGS = ("cost", "entropy", "conflict", "isolation", "reach", "extent")


@dataclass
class DiscoverConfig:
    op: str = "spatial"
    window: int = 3
    scale: int = 1  # spatial: windows on the image average-pooled by scale x scale blocks (coarse patterns)
    block: int = 2
    xi: int | None = None  # default 4 (spatial), 6 (frequency)
    s_lo: float = 0.005
    s_hi: float = 0.03
    min_entropy: float = 0.5
    target: int = 0
    budget: int = 0  # relabels wanted; 0 -> 1% of n
    top: int = 20
    kappa: float = 0.5
    cost_images: int = 1000
    # cost (ascending; the reading) | entropy (descending: most class-blind first) |
    # conflict (fewest non-target members left unrelabelled, i.e. pool closest to the budget; then cost) |
    # isolation (fewest near-duplicates around the cell per member; then cost)
    rank: str | None = None  # None: cost, or extent for whitened rules
    components: int = 16  # whitened: leading band principal directions searched
    dims: int = 1  # whitened: subspace dimension (1: single directions, 2: pairs)
    margin: float | None = None  # isolation margin; default 0.5 (spatial, pixel units), 1.0 (frequency, z units)
    method: str = "clique"  # clique (grid cells) | kmeans (balls around k-means centres, spatial windows)
    k: int = 32
    kmeans_fit: int = 2000  # images the centres are fitted on (all images are then counted)
    seed: int = 0
    device: str = "cpu"  # cuda: spatial dense-cell counting with CuPy (the rest stays on the CPU)

    def isolation_margin(self) -> float:
        return self.margin if self.margin is not None else (0.5 if self.op == "spatial" else 1.0)

    def ranking(self) -> str:
        return self.rank or ("extent" if self.op == "whitened" else "cost")

    def levels(self) -> int:
        return self.xi or (4 if self.op == "spatial" else 6)

    def check(self) -> None:
        if self.op not in OPERATORS:
            raise UsageError(f"--op must be spatial or frequency, got {self.op!r}")
        if self.method not in METHODS:
            raise UsageError(f"--discover must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.method == "kmeans" and self.op != "spatial":
            raise UsageError("--discover kmeans works on spatial windows (--op spatial)")
        if self.scale < 1 or (self.scale > 1 and self.op != "spatial"):
            raise UsageError(f"--scale must be >= 1 and needs --op spatial, got {self.scale} with {self.op}")
        if self.k < 2:
            raise UsageError(f"--k must be at least 2, got {self.k}")
        if self.op == "whitened" and not (1 <= self.dims <= 2 and self.dims <= self.components):
            raise UsageError(f"--dims must be 1 or 2 and at most --components, got {self.dims} / {self.components}")
        if self.rank is not None and self.rank not in RANKINGS:
            raise UsageError(f"--rank must be one of {', '.join(RANKINGS)}, got {self.rank!r}")
        if not 0 < self.s_lo <= self.s_hi < 1:
            raise UsageError(f"--support needs 0 < LO <= HI < 1, got {self.s_lo}, {self.s_hi}")
        dims = {"spatial": self.window**2, "frequency": self.block**2, "whitened": self.dims}[self.op]
        if self.levels() < 2:
            raise UsageError(f"--xi must be at least 2, got {self.levels()}")
        if self.levels() ** dims > 2**24:
            # blame the flag the user set: at the default --xi it is the subspace size that is too large
            flag, value = {"spatial": ("--window", self.window), "frequency": ("--block", self.block),
                           "whitened": ("--dims", self.dims)}[self.op]  # fmt: skip
            if self.xi is None:
                raise UsageError(
                    f"{flag} {value}: {self.levels()}^{dims} cells exceed 2^24 at the default --xi {self.levels()}"
                )
            raise UsageError(f"--xi {self.xi} with {flag} {value}: {self.xi}^{dims} cells exceed 2^24")


def _entropy_rows(counts: np.ndarray, classes: int) -> np.ndarray:
    """Normalised label entropy H(y | cell) / log K of each row of a (cells, K) count table."""
    p = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=1)
    return h / math.log(classes)


def _score(codes: np.ndarray, dense: np.ndarray, y: np.ndarray, classes: int, target: int):
    """members, entropy, non-target pool of each dense code, from one subspace's per-image codes."""
    position = {int(c): i for i, c in enumerate(dense)}
    inside = np.isin(codes, dense)
    rows = np.array([position[int(c)] for c in codes[inside]], dtype=np.int64)
    table = np.bincount(rows * classes + y[inside], minlength=len(dense) * classes).reshape(len(dense), classes)
    members = table.sum(axis=1)
    return members, _entropy_rows(table.astype(np.float64), classes), members - table[:, target]


def _dense_cells(codes: np.ndarray, width: int, y: np.ndarray, classes: int, cfg: DiscoverConfig):
    """Each cell of one subspace whose support is within [s_lo, s_hi]: (code, count, members, entropy,
    pool, levels), levels being the code's base-xi digits, one per subspace coordinate."""
    n, xi = len(codes), cfg.levels()
    values, counts = np.unique(codes, return_counts=True)
    keep = (counts >= cfg.s_lo * n) & (counts <= cfg.s_hi * n)
    if not keep.any():
        return
    members, entropy, pool = _score(codes, values[keep], y, classes, cfg.target)
    for code, count, m, h, p in zip(values[keep], counts[keep], members, entropy, pool):
        levels = np.array([(code // xi**k) % xi for k in reversed(range(width))])
        yield code, count, m, h, p, levels


def spatial_candidates(x: np.ndarray, y: np.ndarray, classes: int, cfg: DiscoverConfig) -> list[Rule]:
    n = len(x)
    xi, w = cfg.levels(), cfg.window
    lo_count, hi_count = math.ceil(cfg.s_lo * n), math.floor(cfg.s_hi * n)
    if cfg.device == "cuda":
        import cupy

        dense = kernels.window_codes_count_xp(cupy.asarray(x), w, xi, lo_count, hi_count, cupy)
    else:
        dense = kernels.window_codes_count(np.ascontiguousarray(x), w, xi, lo_count, hi_count)
    rules = []
    windows = np.unique(dense[:, :2], axis=0) if len(dense) else np.zeros((0, 2), np.int64)
    for r, c in windows:
        cells = dense[(dense[:, 0] == r) & (dense[:, 1] == c)]
        members, entropy, pool = _score(kernels.window_codes(x, r, c, w, xi), cells[:, 2], y, classes, cfg.target)
        for (_, _, code, count), m, h, p in zip(cells, members, entropy, pool):
            levels = np.array([(code // xi**k) % xi for k in reversed(range(w * w))])
            rules.append(
                Rule("spatial", (levels / xi).tolist(), ((levels + 1) / xi).tolist(), window=[int(r), int(c), w],
                     support=int(count) / n, members=int(m), entropy=float(h), pool=int(p), target=cfg.target)
            )  # fmt: skip
    return rules


def kmeans_candidates(x: np.ndarray, y: np.ndarray, classes: int, cfg: DiscoverConfig) -> list[Rule]:
    """Per w x w window: k-means (k centres, fitted on a seeded sample) of the window pixels; each centre
    becomes a ball whose radius is the 80th percentile of its cluster's distances; a ball's members are
    all images within the radius (so `satisfies` reproduces the counts)."""
    from scipy.cluster.vq import kmeans2

    n, side = len(x), x.shape[1]
    w = cfg.window
    rng = np.random.default_rng(cfg.seed)
    sample = rng.choice(n, min(n, cfg.kmeans_fit), replace=False)
    rules = []
    for r in range(side - w + 1):
        for c in range(side - w + 1):
            phi = x[:, r : r + w, c : c + w].reshape(n, -1) / 255.0
            centres, _ = kmeans2(phi[sample], cfg.k, minit="++", seed=int(rng.integers(2**31)))
            d2 = (phi**2).sum(1)[:, None] - 2 * phi @ centres.T + (centres**2).sum(1)[None]
            d = np.sqrt(np.maximum(d2, 0.0))  # (n, k)
            nearest = d.argmin(axis=1)
            for j, centre in enumerate(centres):
                own = d[nearest == j, j]
                if len(own) < 2:
                    continue
                radius = max(float(np.percentile(own, 80)), 1 / 255)  # at least one grey level
                inside = d[:, j] <= radius
                count = int(inside.sum())
                if not cfg.s_lo * n <= count <= cfg.s_hi * n:
                    continue
                table = np.bincount(y[inside], minlength=classes)[None].astype(np.float64)
                rules.append(
                    Rule("spatial", np.clip(centre - radius, 0, 1).tolist(), np.clip(centre + radius, 0, 1).tolist(),
                         window=[r, c, w], shape="ball", centre=centre.tolist(), radius=radius, support=count / n,
                         members=count, entropy=float(_entropy_rows(table, classes)[0]),
                         pool=int(count - table[0, cfg.target]), target=cfg.target)
                )  # fmt: skip
    return rules


def frequency_candidates(x: np.ndarray, y: np.ndarray, classes: int, cfg: DiscoverConfig) -> list[Rule]:
    n, side = len(x), x.shape[1]
    xi, b = cfg.levels(), cfg.block
    coeffs = dct2(x / 255.0)
    mean, sd = coeffs.mean(axis=0), coeffs.std(axis=0) + 1e-12
    z = (coeffs - mean) / sd
    edges = np.linspace(*Z_RANGE, xi + 1)
    rules = []
    for u in range(side - b + 1):
        for v in range(side - b + 1):
            if not 1 <= u + v <= side // 2:
                continue
            block = [(u + i, v + j) for i in range(b) for j in range(b)]
            levels = np.stack([np.clip(np.digitize(z[:, a, c], edges[1:-1]), 0, xi - 1) for a, c in block], axis=1)
            codes = levels @ (xi ** np.arange(len(block) - 1, -1, -1))
            for _, count, m, h, p, lv in _dense_cells(codes, len(block), y, classes, cfg):
                rules.append(
                    Rule("frequency", edges[lv].tolist(), edges[lv + 1].tolist(), coeffs=[list(map(int, q)) for q in block],
                         mean=[float(mean[a, c]) for a, c in block], sd=[float(sd[a, c]) for a, c in block],
                         support=int(count) / n, members=int(m), entropy=float(h), pool=int(p), target=cfg.target)
                )  # fmt: skip
    return rules


def band_directions(x: np.ndarray, components: int) -> tuple[np.ndarray, np.ndarray]:
    """The leading principal directions of the low-frequency DCT band (1 <= u + v <= H/2) of the
    images, as orthonormal unit images in pixel space (components, H*W), and their variances."""
    n, side = len(x), x.shape[1]
    u, v = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
    band = ((u + v >= 1) & (u + v <= side // 2)).ravel()
    coeffs = dct2(x / 255.0).reshape(n, -1)[:, band]
    k = min(components, int(band.sum()), n - 1)
    _, singular, vt = np.linalg.svd(coeffs - coeffs.mean(axis=0), full_matrices=False)
    vt = vt[:k]
    vt = vt * np.sign(vt[np.arange(k), np.abs(vt).argmax(axis=1)])[:, None]  # sign fixed: largest entry positive
    d = dct_matrix(side)
    full = np.zeros((k, side * side))
    full[:, band] = vt
    pixels = np.einsum("ui,kuv,vj->kij", d, full.reshape(k, side, side), d).reshape(k, -1)  # inverse DCT
    return pixels, singular[:k] ** 2 / max(n - 1, 1)


def whitened_candidates(x: np.ndarray, y: np.ndarray, classes: int, cfg: DiscoverConfig) -> list[Rule]:
    import itertools

    n = len(x)
    xi = cfg.levels()
    directions, _ = band_directions(x, cfg.components)
    proj = x.reshape(n, -1) / 255.0 @ directions.T
    mean, sd = proj.mean(axis=0), proj.std(axis=0) + 1e-12
    z = (proj - mean) / sd
    edges = np.linspace(*Z_RANGE, xi + 1)
    levels = np.clip(np.digitize(z, edges[1:-1]), 0, xi - 1)
    rules = []
    for subspace in itertools.combinations(range(len(directions)), cfg.dims):
        idx = list(subspace)
        codes = levels[:, idx] @ (xi ** np.arange(len(idx) - 1, -1, -1))
        for code, count, m, h, p, lv in _dense_cells(codes, len(idx), y, classes, cfg):
            inside = codes == code
            # end levels stop at the most extreme member (the support of clean data), nudged so it is inside
            lo = np.where(lv == 0, z[inside][:, idx].min(axis=0) - 1e-6, edges[lv])
            hi = np.where(lv == xi - 1, z[inside][:, idx].max(axis=0) + 1e-6, edges[lv + 1])
            rules.append(
                Rule("whitened", lo.tolist(), hi.tolist(), components=idx, directions=directions[idx].tolist(),
                     mean=mean[idx].tolist(), sd=sd[idx].tolist(), support=int(count) / n, members=int(m),
                     entropy=float(h), pool=int(p), target=cfg.target)
            )  # fmt: skip
    return rules


def discover(
    x: np.ndarray,
    y: np.ndarray,
    cfg: DiscoverConfig,
    held_out: np.ndarray | None = None,
    classes: int | None = None,
    progress: ProgressCallback = silent,
) -> list[Rule]:
    """Ranked rules for target cfg.target; raises RunFailure with the near misses when none passes."""
    cfg.check()
    classes = classes or int(y.max()) + 1
    if not 0 <= cfg.target < classes:
        raise UsageError(f"--target {cfg.target} is not a class (labels are 0..{classes - 1})")
    budget = cfg.budget or max(1, int(0.01 * len(x)))
    progress("candidates", 0, 1)
    if cfg.method == "kmeans":
        find = kmeans_candidates
    else:
        find = {"spatial": spatial_candidates, "frequency": frequency_candidates, "whitened": whitened_candidates}[
            cfg.op
        ]
    if cfg.op == "spatial" and cfg.window > min(x.shape[1:]) // cfg.scale:
        raise UsageError(f"--window {cfg.window} does not fit the {min(x.shape[1:]) // cfg.scale}-cell pooled image")
    candidates = find(pooled(x, cfg.scale) if cfg.op == "spatial" else x, y, classes, cfg)
    for rule in candidates:
        rule.scale = cfg.scale
    progress("candidates", 1, 1)
    passed = [r for r in candidates if r.entropy >= cfg.min_entropy and r.pool >= budget]
    if not passed:
        near = sorted(candidates, key=lambda r: -min(r.entropy / cfg.min_entropy, 1) - min(r.pool / budget, 1))
        best = (
            ", ".join(f"support {r.support:.4f} entropy {r.entropy:.2f} pool {r.pool}" for r in near[:3])
            or "no dense cell"
        )
        raise RunFailure(
            f"no rule passes (entropy >= {cfg.min_entropy}, pool >= {budget}); best near misses: {best}; "
            "widen --support or change --window/--op"
        )
    sample = (held_out if held_out is not None else x)[: cfg.cost_images]
    z_of = _subspace_coordinates(x)
    sample_dct = dct2(sample / 255.0) if cfg.op == "frequency" else None
    for i, rule in enumerate(passed):
        moved = apply(sample, rule, cfg.kappa, dct=sample_dct)
        rule.cost = float(np.linalg.norm((moved.astype(np.float64) - sample) / 255.0, axis=(1, 2)).mean())
        d = distance(z_of(rule), rule)
        rule.near = int(((d > 1e-9) & (d < cfg.isolation_margin())).sum())
        rule.isolation = rule.members / max(rule.members + rule.near, 1)
        progress("cost", i + 1, len(passed))
    rank = cfg.ranking()
    if rank == "cost":
        passed.sort(key=lambda r: (r.cost, -r.support))
    elif rank == "conflict":
        passed.sort(key=lambda r: (r.pool - budget, r.cost))
    elif rank == "reach":
        passed.sort(key=lambda r: (-reach(r), r.cost))
    elif rank == "extent":
        passed.sort(key=lambda r: (-extent(r), r.cost))
    elif rank == "isolation":
        passed.sort(key=lambda r: (-r.isolation, r.cost))
    else:
        passed.sort(key=lambda r: (-r.entropy, -r.support))
    return passed[: cfg.top]


def reach(rule: Rule) -> float:
    """The cell's shortest extent over its coordinates, in the rule's units (z for DCT and whitened)."""
    return float(np.min(np.asarray(rule.hi) - np.asarray(rule.lo)))


def extent(rule: Rule) -> float:
    """The cell's shortest extent in PIXEL L2 units ([0, 1] pixels): reach times the train sd of each
    coordinate (DCT coefficients and whitened directions are orthonormal, so one z unit is sd pixel
    units; spatial coordinates are pixels already). A z unit of a late principal direction is a tiny
    pixel change; this compares cells by how much natural pixel variation they span."""
    width = np.asarray(rule.hi) - np.asarray(rule.lo)
    if rule.op in ("frequency", "whitened"):
        width = width * np.asarray(rule.sd)
    return float(np.min(width))


def _subspace_coordinates(x: np.ndarray):
    """rule -> its subspace coordinates of every train image (DCT computed once for frequency rules)."""
    cache = {}

    def coordinates_of(rule: Rule) -> np.ndarray:
        if rule.op == "whitened":
            return coordinates(x, rule)
        if rule.op == "spatial":
            r, c, w = rule.window
            if ("pooled", rule.scale) not in cache:
                cache[("pooled", rule.scale)] = pooled(x, rule.scale)
            return cache[("pooled", rule.scale)][:, r : r + w, c : c + w].reshape(len(x), -1) / 255.0
        if "dct" not in cache:
            cache["dct"] = dct2(x / 255.0)
        values = np.stack([cache["dct"][:, u, v] for u, v in rule.coeffs], axis=1)
        z = (values - np.asarray(rule.mean)) / np.asarray(rule.sd)
        return np.clip(z, Z_RANGE[0], Z_RANGE[1] - 1e-9)  # as discover quantised them

    return coordinates_of

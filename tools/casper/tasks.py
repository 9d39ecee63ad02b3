"""The three tasks: data generation, training a predictor with or without the layer, and evaluation.

Methods: `casper` (structured loss through the exact projection, or weak supervision by
abduction for MNIST-add; hard decode by the structured solver), `unconstrained` (same predictor,
plain per-variable loss, threshold/argmax decode) and `sl-sample` (plain loss + semantic loss
estimated from 64 Bernoulli samples, threshold decode; Warcraft only, where validity is checkable
per sample), `solver` ("predictor + exact solver, no layer": trains like `unconstrained`; eval
runs the exact decoder on the raw predictor output with no projection: Dijkstra on -log p per cell
for Warcraft, casper's decoder on the probabilities for Sudoku and sums). The library baselines (`sl-exact`, PyEPO, `pishield`, `deepproblog`) live in
baselines.py and are wired here.

Warcraft (ours, measured): the CNN's raw cell scores z enter the projection as node scores s*z
(FlowMap). Projecting sigmoid probabilities instead (our first reading) squeezes the scores into
[0, 1]: mu spreads over many paths and the decode w = 1 - mu falls back to the fewest-hop path
(cost ratio 1.3-1.4 at 12x12 and 30x30). With raw scores the layer does the path reasoning and the
CNN only has to score cells. Training runs at s = 1; the decode temperature s is then calibrated
on labelled training maps (the s in CALIBRATION_SCALES whose decoded paths are nearest, in Hamming
distance, to the labelled ones) and stored with the weights, one s per map side; `eval` uses the s
calibrated at the side it decodes (else the nearest calibrated side) unless --scale is given.
Why per side (measured): the quadratic term of the projection spreads mu over near-optimal paths,
and a longer path has more of them. At 12x12 the decode is flat for s >= 2-4 (Hamming 13.03 at s = 1
vs 13.06 at s = 4 for one seed), while at 30x30 the same model's cost ratio falls with s (1.29, 1.14,
1.08, 1.07, 1.03 at s = 1, 2, 4, 8, 16); an s chosen at 12x12 can be far from the best at 30x30.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from methodkit.core.errors import DataError, UsageError
from methodkit.core.progress import silent
from methodkit.tools.casper.names import METHODS, TASKS  # noqa: F401 (the names live where --help can read them)

METHOD_TASKS = {  # baselines that only apply to some tasks
    "sl-sample": ("warcraft",),
    "sl-exact": ("warcraft",),
    "pyepo-dbb": ("warcraft",),
    "pyepo-pfyl": ("warcraft",),
    "pyepo-imle": ("warcraft",),
    "pyepo-fw": ("warcraft",),
    "pishield": ("sudoku", "shidoku"),
    "deepproblog": ("mnist-add",),
}
CALIBRATION_SCALES = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
CALIBRATION_MAPS = 64  # at most; larger maps use fewer (CALIBRATION_CELLS)
CALIBRATION_CELLS = 20_000  # a 30x30 projection costs ~0.25 s CPU, and a long path's cost ratio varies less
POOL_SPLIT = (1200, 597)
SL_SAMPLES = 64


# ---------------------------------------------------------------- data


# The arrays of a dataset live three times at the peak: as generated, in the compressed NPZ's
# buffer (zlib works per array, but np.savez holds the archive in memory) and as the bytes written.
_PEAK_COPIES = 3


def dataset_bytes(task: str, *, size: int, digits: int, n: int) -> int:
    """Peak memory of generating and writing `n` instances of `task` (for core.memory.guard_memory)."""
    if task == "warcraft":
        from methodkit.tools.casper.warcraft import TILE

        per = 3 * (TILE * size) ** 2 + 6 * size**2  # RGB image + types, paths (uint8) and float32 costs
    elif task in ("sudoku", "shidoku"):
        side = 4 if task == "shidoku" else 9
        per = side * side * (1 + 1 + 64)  # solution, given mask, one 8x8 digit image per cell
    else:
        per = 8 * (5 * digits + 1) * 2  # a, b, a_img, b_img, s (int64), plus the draw's offsets
    return _PEAK_COPIES * per * n


def generate(task: str, *, size: int, digits: int, n: int, n_test: int, seed: int) -> dict:
    """A dataset NPZ (dict of arrays) for `task`; keys prefixed train_/test_."""
    rng = np.random.default_rng(seed)
    if task == "warcraft":
        from methodkit.tools.casper import warcraft

        if size < 3:
            raise UsageError(f"--size must be at least 3 for warcraft, got {size}")
        train, test = warcraft.generate(size, n, rng), warcraft.generate(size, n_test, rng)
    elif task in ("sudoku", "shidoku"):
        from methodkit.tools.casper import sudoku

        side = 4 if task == "shidoku" else 9
        train, test = sudoku.generate(n, rng, side), sudoku.generate(n_test, rng, side)
    elif task == "mnist-add":
        return _generate_addition(digits, n, n_test, rng)
    else:
        raise UsageError(f"unknown task {task!r}")
    out = {"task": np.array(task)}
    out.update({f"train_{k}": v for k, v in train.items()})
    out.update({f"test_{k}": v for k, v in test.items()})
    return out


def _generate_addition(n_digits: int, n: int, n_test: int, rng) -> dict:
    from sklearn.datasets import load_digits

    if n_digits < 1:
        raise UsageError(f"--digits must be at least 1, got {n_digits}")
    data = load_digits()
    order = rng.permutation(len(data.target))
    train_pool, test_pool = order[: POOL_SPLIT[0]], order[POOL_SPLIT[0] :]
    out = {
        "task": np.array("mnist-add"),
        "pool_images": data.images.reshape(-1, 64).astype(np.uint8),
        "pool_labels": data.target.astype(np.uint8),
        "train_pool": train_pool,
        "test_pool": test_pool,
        "digits": np.array(n_digits),
    }
    for split, pool, count in (("train", train_pool, n), ("test", test_pool, n_test)):
        inst = draw_additions(pool, data.target, n_digits, count, rng)
        out.update({f"{split}_{k}": v for k, v in inst.items()})
    return out


def draw_additions(pool, labels, n_digits: int, count: int, rng) -> dict:
    """Numbers a, b of N uniform digits; each digit's image drawn from its class in `pool`."""
    by_class = [pool[labels[pool] == d] for d in range(10)]
    a = rng.integers(0, 10, size=(count, n_digits))
    b = rng.integers(0, 10, size=(count, n_digits))

    def pick(digits):
        offsets = rng.integers(0, np.iinfo(np.int64).max, size=digits.shape)
        sizes = np.array([len(c) for c in by_class])
        out = np.zeros(digits.shape, dtype=np.int64)
        for d in range(10):
            hit = digits == d
            out[hit] = by_class[d][offsets[hit] % sizes[d]]
        return out

    return {"a": a, "b": b, "s": add_digits(a, b), "a_img": pick(a), "b_img": pick(b)}


def add_digits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Digit-wise sums (least significant first) with carries: (count, N) + (count, N) -> (count, N+1)."""
    count, n = a.shape
    s = np.zeros((count, n + 1), dtype=np.int64)
    carry = np.zeros(count, dtype=np.int64)
    for i in range(n):
        t = a[:, i] + b[:, i] + carry
        s[:, i], carry = t % 10, t // 10
    s[:, n] = carry
    return s


def dataset_task(arrays: dict, name: str) -> str:
    if "task" not in arrays:
        raise DataError(f"{name}: not a casper-solve dataset (no 'task' array); make one with 'casper-solve gen'")
    return str(arrays["task"])


def _need(arrays: dict, keys, name: str) -> None:
    missing = [k for k in keys if k not in arrays]
    if missing:
        raise DataError(f"{name}: missing arrays {', '.join(missing)}; regenerate it with 'casper-solve gen'")


# ---------------------------------------------------------------- training


@dataclass
class TrainResult:
    model: object
    config: dict
    log: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"config": self.config, "epochs": self.log}


def train(
    task: str,
    method: str,
    arrays: dict,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    seed: int,
    limit: int | None = None,
    scale: float = 1.0,
    calibrate: bool = True,
    calibration_sets: tuple = (),
    time_limit: float = 600.0,
    progress=silent,
) -> TrainResult:
    """Train `task`'s predictor with `method`; `calibration_sets` (Warcraft casper): more labelled
    datasets, usually of the sizes to be decoded, on whose training maps s is calibrated per side."""
    import torch

    from methodkit.tools.casper.models import build

    check_method(task, method)
    if method == "deepproblog":
        raise UsageError(
            "--method deepproblog is evaluation only: it runs DeepProbLog's exact inference with a trained "
            "digit network (train one with --method casper)"
        )
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = build(task)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    step_fn = {"warcraft": _warcraft_steps, "sudoku": _sudoku_steps, "shidoku": _sudoku_steps}.get(task)
    log = []
    if task == "mnist-add":
        batches_of = lambda epoch: _addition_batches(arrays, epoch, batch_size, rng, limit)  # noqa: E731
        _need(arrays, ("pool_images",), "dataset")
        loss_of = _addition_loss(model, method, arrays["pool_images"])
    else:
        batches_of, loss_of = step_fn(arrays, model, method, batch_size, rng, limit, scale, seed, time_limit)
    for epoch in range(epochs):
        start = time.perf_counter()
        batches = list(batches_of(epoch))
        total, seen = 0.0, 0
        phase = f"train epoch {epoch + 1}/{epochs}"
        progress(phase, 0, len(batches))
        for k, batch in enumerate(batches):
            loss = loss_of(batch)
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimiser.step()
            total += float(loss.detach()) * len(batch[0])
            seen += len(batch[0])
            progress(phase, k + 1, len(batches))
        log.append({"epoch": epoch + 1, "loss": total / max(seen, 1), "seconds": round(time.perf_counter() - start, 3)})
    config = {
        "task": task,
        "method": method,
        "epochs": epochs,
        "batch_size": batch_size,
        "lr": lr,
        "seed": seed,
        "scale": scale,
    }
    if task == "warcraft" and method == "casper" and calibrate:
        sets = (arrays, *calibration_sets)
        scales, details = {}, {}
        for k, data in enumerate(sets):
            progress("calibrate scale", k, len(sets))
            _need(data, ("train_images", "train_paths"), "calibration dataset")
            side = str(data["train_paths"].shape[1])
            scales[side], details[side] = calibrate_scale(model, data, rng)
        progress("calibrate scale", len(sets), len(sets))
        config["decode_scale"] = scales[str(arrays["train_paths"].shape[1])]  # at the training side
        config["decode_scales"] = scales  # by map side
        config["calibration"] = details
    return TrainResult(model, config, log)


def decode_scale_for(config: dict, side: int) -> tuple[float, int | None]:
    """The decode temperature a sidecar config gives for maps of `side`, and the side it was calibrated at.

    The s calibrated at this side, else at the nearest calibrated side (ties: the larger side),
    else the single `decode_scale` of older sidecars, else 1."""
    by_side = {int(k): float(v) for k, v in config.get("decode_scales", {}).items()}
    if by_side:
        nearest = min(by_side, key=lambda k: (abs(k - side), -k))
        return by_side[nearest], nearest
    if "decode_scale" in config:
        return float(config["decode_scale"]), None
    return 1.0, None


def check_method(task: str, method: str) -> None:
    if method not in METHODS:
        raise UsageError(f"unknown method {method!r}")
    allowed = METHOD_TASKS.get(method)
    if allowed is not None and task not in allowed:
        raise UsageError(f"--method {method} applies to --task {' or '.join(allowed)} only, not {task}")


def calibrate_scale(model, arrays, rng, scales=CALIBRATION_SCALES, count=None) -> tuple[float, dict]:
    """The decode temperature s whose decoded training paths are best, on `count` labelled training maps
    (default: CALIBRATION_CELLS // side^2 maps, between 16 and CALIBRATION_MAPS: 64 at 12x12, 22 at 30x30).

    Criterion: the mean cost ratio (true cost of the decoded path / the labelled optimum) when the
    maps carry their true cell costs (`train_costs`, as generated), else the mean Hamming distance
    to the labelled paths. Measured why: at 30x30 many near-optimal paths differ from the label
    in many cells, so Hamming barely moves with s (43.6 / 42.9 / 43.9 cells at s = 1 / 2 / 4 on 32
    maps) while the cost ratio falls from 1.19 to 1.09; and 32 maps were too few at 12x12 (one seed
    scored Hamming 13.03 at s = 1 vs 13.06 at s = 4 on 32 maps, 12.1 vs 10.5 on 96). Ties go to the
    smaller s. Only this one number sees the costs; the CNN is trained on paths alone.
    """
    import torch

    from methodkit.tools.casper.warcraft import path_metrics

    images, paths = arrays["train_images"], arrays["train_paths"]
    costs = arrays.get("train_costs")
    n = paths.shape[1]
    if count is None:
        count = int(np.clip(CALIBRATION_CELLS // (n * n), 16, CALIBRATION_MAPS))
    idx = np.sort(rng.permutation(len(paths))[:count])
    model.eval()
    with torch.no_grad():
        scores = model(torch.as_tensor(images[idx])).reshape(len(idx), -1).double()
    model.train()
    hamming, ratio = {}, {}
    for s in scales:
        flow = FlowMap(n, s)
        mu, states = flow.projector.project(flow.theta(scores).numpy())
        wrong, ratios = [], []
        for k, i in enumerate(idx):
            if states[k].status != "ok":  # no output: the worst score (never happened in our runs)
                wrong.append(float(n * n))
                ratios.append(float("inf"))
                continue
            pred = flow.decode(mu[k], n)
            wrong.append(float(np.sum(pred != paths[i])))
            if costs is not None:
                ratios.append(path_metrics(pred, paths[i], costs[i])["cost_ratio"])
        hamming[str(s)] = float(np.mean(wrong))
        if costs is not None:
            ratio[str(s)] = float(np.mean(ratios))
    criterion = ratio if costs is not None else hamming
    best = min(scales, key=lambda s: (criterion[str(s)], s))
    info = {"maps": len(idx), "criterion": "cost_ratio" if costs is not None else "hamming"}
    info.update({"hamming_by_scale": hamming, **({"cost_ratio_by_scale": ratio} if costs is not None else {})})
    return float(best), info


def _shuffled_batches(count: int, batch_size: int, rng, limit):
    idx = rng.permutation(count)[: limit or count]
    return [idx[i : i + batch_size] for i in range(0, len(idx), batch_size)]


# ---- Warcraft


class FlowMap:
    """Maps the CNN's cell score map onto the flow program's variables (theta) and back (decode).

    theta: node variables get s * z_u (z: the CNN's per-cell score, a logit), edge variables 0.
    The projection then solves min_{y in P} -s z.v + 1/2 ||y||^2, a quadratically smoothed
    longest-score path, so the CNN only has to score cells locally (how good a cell is to walk on)
    while the layer does the global path reasoning. Raw scores lie far outside P; the projection's
    interior-point safeguard keeps every row exact.
    """

    def __init__(self, n: int, scale: float = 1.0):
        import torch

        from methodkit.tools.casper.builders import compiled
        from methodkit.tools.casper.decode import Decoder
        from methodkit.tools.casper.projection import Projector, make_torch_layer

        self.program = compiled("grid", n, False)
        self.scale = scale
        p = self.program
        tid = 0
        self.node_col = torch.as_tensor(p.extra[f"t{tid}_node_col"])
        self.edge_col = torch.as_tensor(p.extra[f"t{tid}_edge_col"])
        edges = p.extra[f"t{tid}_edges"]
        self.tails, self.heads = torch.as_tensor(edges[:, 0]), torch.as_tensor(edges[:, 1])
        self.projector = Projector(p)
        self.layer = make_torch_layer(self.projector)
        self.decoder = Decoder(p)

    def theta(self, scores):
        """(B, n*n) cell scores -> (B, n_vars): nodes s * score, edges 0."""
        import torch

        theta = torch.zeros(scores.shape[0], self.program.n, dtype=scores.dtype)
        return theta.index_copy(1, self.node_col, scores * self.scale)

    def gold(self, masks: np.ndarray) -> np.ndarray:
        """Full 0/1 vectors (nodes and edges) of the labelled paths, through the exact decoder."""
        import torch

        cells = torch.as_tensor(masks.reshape(len(masks), -1).astype(float))
        marks = torch.zeros(len(masks), self.program.n, dtype=cells.dtype).index_copy(1, self.node_col, cells)
        marks = marks.index_copy(1, self.edge_col, torch.minimum(cells[:, self.tails], cells[:, self.heads])).numpy()
        out = np.zeros((len(masks), self.program.n))
        for i in range(len(masks)):  # on-path nodes and the edges between them cost 0, the rest 1
            out[i, : self.program.n_user] = self.decoder.decode(marks[i]).y
        return out

    def decode(self, mu: np.ndarray, n: int) -> np.ndarray:
        y = self.decoder.decode(mu).y
        return y[self.node_col.numpy()].reshape(n, n)


def _warcraft_steps(arrays, model, method, batch_size, rng, limit, scale=1.0, seed=0, time_limit=600.0):
    import torch
    import torch.nn.functional as F

    from methodkit.tools.casper import baselines
    from methodkit.tools.casper.warcraft import is_valid_path

    _need(arrays, ("train_images", "train_paths"), "dataset")
    images, paths = arrays["train_images"], arrays["train_paths"]
    n = paths.shape[1]
    flow = FlowMap(n, scale) if method == "casper" else None
    gold = flow.gold(paths) if flow else None
    if method == "sl-exact":
        semantic_loss = baselines.semantic_loss_layer(_path_sdd(n, time_limit))
    if method in baselines.PYEPO_METHODS:
        pyepo_loss = baselines.pyepo_loss(method, n, seed)

    def batches(epoch):
        return [(idx,) for idx in _shuffled_batches(len(paths), batch_size, rng, limit)]

    def loss(batch):
        idx = batch[0]
        logits = model(torch.as_tensor(images[idx])).reshape(len(idx), -1)
        target = torch.as_tensor(paths[idx].reshape(len(idx), -1), dtype=torch.float32)
        bce = F.binary_cross_entropy_with_logits(logits, target)
        if method == "casper":
            mu = flow.layer(flow.theta(logits.double()))
            structured = ((mu - torch.as_tensor(gold[idx])) ** 2).sum(1).mean() / n
            return structured.float() + 0.1 * bce
        if method == "sl-sample":
            probs = torch.sigmoid(logits)
            with torch.no_grad():
                samples = torch.bernoulli(probs.unsqueeze(1).expand(-1, SL_SAMPLES, -1))
                valid = torch.tensor(
                    [[is_valid_path(s.reshape(n, n).numpy()) for s in row] for row in samples], dtype=torch.float32
                )
            logp = (samples * torch.log(probs.unsqueeze(1) + 1e-9)).sum(-1)
            logp = logp + ((1 - samples) * torch.log(1 - probs.unsqueeze(1) + 1e-9)).sum(-1)
            semantic = -(valid * logp).sum(1) / valid.sum(1).clamp(min=1)  # REINFORCE on the valid samples
            return bce + 0.5 * semantic.mean() / (n * n)
        if method == "sl-exact":
            return bce + 0.5 * semantic_loss(logits.double()).mean().float() / (n * n)
        if method in baselines.PYEPO_METHODS:  # the CNN predicts cell costs, the oracle is Dijkstra
            return pyepo_loss(F.softplus(logits), target)
        return bce

    return batches, loss


# ---- Sudoku


def _sudoku_theta(model, images, givens, size):
    """(B, size^2 * size) probabilities: the classifier's on givens, uniform on blanks."""
    import torch

    logits = model(torch.as_tensor(images.reshape(-1, 64))).reshape(len(images), size * size, size)
    probs = torch.softmax(logits.double(), -1)
    mask = torch.as_tensor(givens.reshape(len(images), size * size, 1))
    return torch.where(mask, probs, torch.full_like(probs, 1.0 / size)).reshape(len(images), -1), logits


def _path_sdd(n: int, time_limit: float):
    from methodkit.core.errors import RunFailure
    from methodkit.tools.casper.baselines import CompileTimeout, PathSDD

    try:
        return PathSDD(n, time_limit)
    except CompileTimeout as exc:
        raise RunFailure(
            f"--method sl-exact: {exc} ({exc.detail.get('sets_compiled', 0)} path cell sets compiled); "
            "exact semantic loss is for small grids (side <= 4) only"
        ) from None


def _sudoku_steps(arrays, model, method, batch_size, rng, limit, scale=1.0, seed=0, time_limit=600.0):
    import torch
    import torch.nn.functional as F

    from methodkit.tools.casper.builders import compiled
    from methodkit.tools.casper.projection import Projector, make_torch_layer

    _need(arrays, ("train_images", "train_givens", "train_solutions"), "dataset")
    images, givens, solutions = arrays["train_images"], arrays["train_givens"], arrays["train_solutions"]
    size = solutions.shape[1]
    layer = make_torch_layer(Projector(compiled("sudoku", size))) if method == "casper" else None

    def batches(epoch):
        return [(idx,) for idx in _shuffled_batches(len(images), batch_size, rng, limit)]

    def loss(batch):
        idx = batch[0]
        theta, logits = _sudoku_theta(model, images[idx], givens[idx], size)
        labels = torch.as_tensor(solutions[idx].reshape(len(idx), -1).astype(np.int64))
        mask = torch.as_tensor(givens[idx].reshape(len(idx), -1))
        ce = F.cross_entropy(logits[mask], labels[mask])
        if method != "casper":
            return ce
        target = F.one_hot(labels, size).reshape(len(idx), -1).double()
        mu = layer(theta)
        return ((mu - target) ** 2).sum(1).mean().float() / size + 0.1 * ce

    return batches, loss


# ---- MNIST addition (weak supervision: only the sum is observed)


def _addition_batches(arrays, epoch, batch_size, rng, limit):
    """Curriculum: epoch 1 single digits, later epochs N in {2, 3, 4}; images from the train pool."""
    _need(arrays, ("pool_images", "pool_labels", "train_pool"), "dataset")
    pool, labels = arrays["train_pool"], arrays["pool_labels"]
    count = limit or len(pool)
    batches = []
    remaining = count
    while remaining > 0:
        n_digits = 1 if epoch == 0 else int(rng.integers(2, 5))
        size = min(batch_size, remaining)
        inst = draw_additions(pool, labels, n_digits, size, rng)
        batches.append((inst["a_img"], inst["b_img"], inst["s"]))
        remaining -= size
    return batches


def _addition_loss(model, method, pool_images):
    import torch
    import torch.nn.functional as F

    from methodkit.tools.casper.builders import compiled
    from methodkit.tools.casper.decode import Decoder
    from methodkit.tools.casper.projection import Projector

    cache: dict = {}

    def tools(n_digits):
        if n_digits not in cache:
            program = compiled("addition", n_digits, False)
            cache[n_digits] = (program, Projector(program), Decoder(program))
        return cache[n_digits]

    def loss(batch):
        a_img, b_img, s = batch
        count, n_digits = a_img.shape
        la = model["digit"](torch.as_tensor(pool_images[a_img.ravel()])).reshape(count, n_digits, 10)
        lb = model["digit"](torch.as_tensor(pool_images[b_img.ravel()])).reshape(count, n_digits, 10)
        pa, pb = torch.softmax(la, -1), torch.softmax(lb, -1)
        ls = model["sum"](pa.detach(), pb.detach())
        head = F.cross_entropy(ls.reshape(-1, 10), torch.as_tensor(s[:, :n_digits].ravel()))
        if method != "casper":  # no digit labels exist: the unconstrained baseline only learns the head
            return head + 0.0 * (la.sum() + lb.sum())
        program, projector, decoder = tools(n_digits)
        theta = addition_theta(program, pa.detach().numpy(), pb.detach().numpy(), None)
        lower, upper = clamp_sums(program, s)
        mu, states = projector.project(theta, lower, upper)
        targets_a = np.zeros((count, n_digits), dtype=np.int64)
        targets_b = np.zeros((count, n_digits), dtype=np.int64)
        mu_a = np.zeros((count, n_digits, 10))
        mu_b = np.zeros((count, n_digits, 10))
        for i in range(count):
            y = decoder.decode(mu[i], upper[i]).y  # abduction: Viterbi with the sum clamped
            a_digits, b_digits, _ = read_addition(program, y, n_digits)
            targets_a[i], targets_b[i] = a_digits, b_digits
            mu_a[i] = mu[i, : 10 * n_digits].reshape(n_digits, 10)
            mu_b[i] = mu[i, 10 * n_digits : 20 * n_digits].reshape(n_digits, 10)
        ce = F.cross_entropy(la.reshape(-1, 10), torch.as_tensor(targets_a.ravel())) + F.cross_entropy(
            lb.reshape(-1, 10), torch.as_tensor(targets_b.ravel())
        )
        dist = ((pa - torch.as_tensor(mu_a, dtype=pa.dtype)) ** 2).sum((1, 2)) + (
            (pb - torch.as_tensor(mu_b, dtype=pb.dtype)) ** 2
        ).sum((1, 2))  # gradient of 1/2 dist^2(p, P) is p - mu
        return ce + 0.5 * dist.mean() + head

    return loss


def addition_theta(program, pa, pb, ps) -> np.ndarray:
    """Probabilities in the program's variable order: a digits, b digits, s digits, carries (1/2)."""
    count, n_digits, _ = pa.shape
    theta = np.full((count, program.n), 0.5)
    theta[:, : 10 * n_digits] = pa.reshape(count, -1)
    theta[:, 10 * n_digits : 20 * n_digits] = pb.reshape(count, -1)
    s_cols = slice(20 * n_digits, 20 * n_digits + 10 * (n_digits + 1))
    theta[:, s_cols] = 0.1 if ps is None else ps.reshape(count, -1)
    return theta


def clamp_sums(program, s: np.ndarray):
    """Per-row bounds fixing the sum digits to the observed sum."""
    count, width = s.shape
    n_digits = width - 1
    lower = np.tile(program.lower, (count, 1))
    upper = np.tile(program.upper, (count, 1))
    base = 20 * n_digits
    for i in range(width):
        cols = base + 10 * i + np.arange(10)
        upper[:, cols] = 0.0
        upper[np.arange(count), base + 10 * i + s[:, i]] = 1.0
        lower[np.arange(count), base + 10 * i + s[:, i]] = 1.0
    return lower, upper


def read_addition(program, y: np.ndarray, n_digits: int):
    a = y[: 10 * n_digits].reshape(n_digits, 10).argmax(1)
    b = y[10 * n_digits : 20 * n_digits].reshape(n_digits, 10).argmax(1)
    s = y[20 * n_digits : 20 * n_digits + 10 * (n_digits + 1)].reshape(n_digits + 1, 10).argmax(1)
    return a, b, s


# ---------------------------------------------------------------- evaluation


@dataclass
class EvalResult:
    rows: list
    summary: dict
    predictions: dict

    def to_dict(self) -> dict:
        return self.summary


def evaluate(
    task: str,
    method: str,
    model,
    arrays: dict,
    *,
    limit: int | None = None,
    scale: float = 1.0,
    time_limit: float = 600.0,
    progress=silent,
) -> EvalResult:
    """Decode the test split with `method`. Baselines that run under `time_limit` (pishield, deepproblog)
    report rows with status "timeout" (and no output) instead of failing."""
    import torch

    check_method(task, method)
    model.eval()
    with torch.no_grad():
        if task == "warcraft":
            return _eval_warcraft(method, model, arrays, limit, progress, scale)
        if task in ("sudoku", "shidoku"):
            return _eval_sudoku(method, model, arrays, limit, progress, time_limit)
        return _eval_addition(method, model, arrays, limit, progress, time_limit)


def _summarise(rows: list, keys: tuple) -> dict:
    out = {"instances": len(rows)}
    for key in keys:
        values = [r[key] for r in rows if r.get(key) is not None and r[key] == r[key]]
        out[key] = float(np.mean(values)) if values else None
    return out


def _eval_warcraft(method, model, arrays, limit, progress, scale=1.0):
    import torch
    import torch.nn.functional as F

    from methodkit.tools.casper.baselines import PYEPO_METHODS
    from methodkit.tools.casper.warcraft import path_metrics, shortest_path

    _need(arrays, ("test_images", "test_paths", "test_costs"), "dataset")
    images, paths, costs = arrays["test_images"], arrays["test_paths"], arrays["test_costs"]
    count = min(limit or len(paths), len(paths))
    n = paths.shape[1]
    flow = FlowMap(n, scale) if method == "casper" else None
    if flow is not None:
        flow.decoder.decode(np.full(flow.program.n, 0.5))  # load the compiled kernels before timing
    rows, preds = [], np.zeros((count, n, n), dtype=np.uint8)
    progress("evaluate", 0, count)
    for i in range(count):
        start = time.perf_counter()
        logits = model(torch.as_tensor(images[i : i + 1])).reshape(1, -1).double()
        probs = torch.sigmoid(logits)
        if method in PYEPO_METHODS:  # solver in the loop: Dijkstra on the predicted cell costs
            preds[i] = shortest_path(np.clip(F.softplus(logits).numpy().reshape(n, n), 1e-6, None))
        elif method == "solver":  # no layer: Dijkstra on -log sigmoid(z) = softplus(-z) per cell
            preds[i] = shortest_path(np.clip(F.softplus(-logits).numpy().reshape(n, n), 1e-6, None))
        elif flow is not None:
            theta = flow.theta(logits).numpy()
            mu, states = flow.projector.project(theta)
            if states[0].status == "ok":  # a proj_error row has no output: it counts as invalid
                preds[i] = flow.decode(mu[0], n)
        else:
            preds[i] = (probs.reshape(n, n).numpy() > 0.5).astype(np.uint8)
        row = {"i": i, **path_metrics(preds[i], paths[i], costs[i]), "ms": (time.perf_counter() - start) * 1000}
        rows.append(row)
        progress("evaluate", i + 1, count)
    summary = {
        "task": "warcraft",
        "method": method,
        "size": n,
        **({"scale": scale} if flow is not None else {}),
        **_summarise(rows, ("valid", "exact", "cost_ratio", "ms")),
    }
    return EvalResult(rows, summary, {"paths": preds})


def _eval_sudoku(method, model, arrays, limit, progress, time_limit=600.0):
    from methodkit.tools.casper.builders import compiled
    from methodkit.tools.casper.decode import Decoder
    from methodkit.tools.casper.projection import Projector
    from methodkit.tools.casper.sudoku import is_valid_board

    _need(arrays, ("test_images", "test_givens", "test_solutions"), "dataset")
    images, givens, solutions = arrays["test_images"], arrays["test_givens"], arrays["test_solutions"]
    size = solutions.shape[1]
    count = min(limit or len(images), len(images))
    if method in ("casper", "solver"):
        program = compiled("sudoku", size)
        projector, decoder = Projector(program), Decoder(program, time_limit=60.0)
    shielded, shield_status = None, "ok"
    if method == "pishield":  # one shield for the whole split, built and applied under the time limit
        from methodkit.tools.casper.baselines import CompileTimeout, pishield_sudoku, run_with_limit

        theta_all, _ = _sudoku_theta(model, images[:count], givens[:count], size)
        start = time.perf_counter()
        try:
            shielded = run_with_limit(pishield_sudoku, (theta_all.numpy(), size), time_limit)
        except CompileTimeout:
            shield_status = "timeout"
        shield_ms = (time.perf_counter() - start) * 1000 / max(count, 1)
    rows, boards = [], np.zeros((count, size, size), dtype=np.uint8)
    progress("evaluate", 0, count)
    for i in range(count):
        start = time.perf_counter()
        theta, _ = _sudoku_theta(model, images[i : i + 1], givens[i : i + 1], size)
        theta = theta.numpy()
        if method == "pishield":
            if shield_status == "timeout":
                rows.append({"i": i, "status": "timeout", "valid": False, "exact": False, "cell_accuracy": None})
                continue
            boards[i] = shielded[i].reshape(size * size, size).argmax(1).reshape(size, size)
        elif method in ("casper", "solver"):  # solver: the decoder on the probabilities, no projection
            mu = projector.project(theta)[0] if method == "casper" else theta
            y = decoder.decode(mu[0]).y
            boards[i] = y.reshape(size * size, size).argmax(1).reshape(size, size)
        else:
            boards[i] = theta[0].reshape(size * size, size).argmax(1).reshape(size, size)
        rows.append(
            {
                "i": i,
                "valid": bool(is_valid_board(boards[i])),
                "exact": bool(np.array_equal(boards[i], solutions[i])),
                "cell_accuracy": float(np.mean(boards[i] == solutions[i])),
                "ms": (time.perf_counter() - start) * 1000 + (shield_ms if method == "pishield" else 0.0),
            }
        )
        progress("evaluate", i + 1, count)
    summary = {
        "task": "sudoku",
        "timeouts": sum(r.get("status") == "timeout" for r in rows),
        "method": method,
        "size": size,
        **_summarise(rows, ("valid", "exact", "cell_accuracy", "ms")),
    }
    return EvalResult(rows, summary, {"boards": boards})


def _eval_addition(method, model, arrays, limit, progress, time_limit=600.0):
    import torch

    from methodkit.tools.casper.builders import compiled
    from methodkit.tools.casper.decode import Decoder
    from methodkit.tools.casper.projection import Projector

    _need(arrays, ("pool_images", "test_a_img", "test_b_img", "test_a", "test_b", "test_s"), "dataset")
    images = arrays["pool_images"]
    a_img, b_img = arrays["test_a_img"], arrays["test_b_img"]
    count = min(limit or len(a_img), len(a_img))
    n_digits = a_img.shape[1]
    if method in ("casper", "solver"):
        program = compiled("addition", n_digits, False)
        projector, decoder = Projector(program), Decoder(program)
        decoder.decode(np.full(program.n, 0.5))  # load the compiled kernels before timing
    if method == "deepproblog":
        return _eval_deepproblog(model, arrays, count, n_digits, progress, time_limit)
    rows = []
    out_a = np.zeros((count, n_digits), dtype=np.uint8)
    out_b = np.zeros((count, n_digits), dtype=np.uint8)
    out_s = np.zeros((count, n_digits + 1), dtype=np.uint8)
    progress("evaluate", 0, count)
    for i in range(count):
        start = time.perf_counter()
        pa = torch.softmax(model["digit"](torch.as_tensor(images[a_img[i]])), -1)
        pb = torch.softmax(model["digit"](torch.as_tensor(images[b_img[i]])), -1)
        ps = torch.softmax(model["sum"](pa, pb), -1).numpy()
        ps = np.concatenate([ps, np.full((1, 10), 0.1)])  # the top sum digit has no column
        decode_ms = None
        if method in ("casper", "solver"):  # solver: the decoder on the probabilities, no projection
            theta = addition_theta(program, pa.numpy()[None], pb.numpy()[None], ps[None])
            mu = projector.project(theta)[0] if method == "casper" else theta
            t0 = time.perf_counter()
            y = decoder.decode(mu[0]).y
            decode_ms = (time.perf_counter() - t0) * 1000
            a, b, s = read_addition(program, y, n_digits)
        else:
            a, b, s = pa.numpy().argmax(1), pb.numpy().argmax(1), ps.argmax(1)
        out_a[i], out_b[i], out_s[i] = a, b, s
        value = lambda d: sum(int(x) * 10**k for k, x in enumerate(d))  # noqa: E731
        rows.append(
            {
                "i": i,
                "valid": value(a) + value(b) == value(s),
                "exact_sum": bool(np.array_equal(s, arrays["test_s"][i])),
                "digit_accuracy": float(np.mean(np.r_[a == arrays["test_a"][i], b == arrays["test_b"][i]])),
                "ms": (time.perf_counter() - start) * 1000,
                "decode_ms": decode_ms,
            }
        )
        progress("evaluate", i + 1, count)
    keys = ("valid", "exact_sum", "digit_accuracy", "ms", "decode_ms")
    summary = {"task": "mnist-add", "method": method, "digits": n_digits, **_summarise(rows, keys)}
    return EvalResult(rows, summary, {"a": out_a, "b": out_b, "s": out_s})


def _eval_deepproblog(model, arrays, count, n_digits, progress, time_limit):
    """DeepProbLog's exact inference of the most probable sum, one child process per instance.

    After the first timeout the remaining instances (same N, so no cheaper) are marked timeout unrun.
    """
    import torch

    from methodkit.tools.casper.baselines import CompileTimeout, deepproblog_sum, run_with_limit

    images = arrays["pool_images"].astype(np.float32)
    net = torch.nn.Sequential(model["digit"], torch.nn.Softmax(-1))
    value = lambda d: sum(int(x) * 10**k for k, x in enumerate(d))  # noqa: E731
    rows, timed_out = [], False
    progress("evaluate", 0, count)
    for i in range(count):
        row = {"i": i, "status": "timeout", "exact_sum": False, "ms": None}
        if not timed_out:
            start = time.perf_counter()
            a_img = images[arrays["test_a_img"][i][::-1]]  # most significant digit first
            b_img = images[arrays["test_b_img"][i][::-1]]
            try:
                out = run_with_limit(deepproblog_sum, (net, a_img, b_img), time_limit)
                row = {
                    "i": i,
                    "status": "ok",
                    "exact_sum": out["sum"] == value(arrays["test_s"][i]),
                    "ms": (time.perf_counter() - start) * 1000,
                    "inference_ms": out["seconds"] * 1000,
                }
            except CompileTimeout:
                timed_out = True
                row["ms"] = (time.perf_counter() - start) * 1000
        rows.append(row)
        progress("evaluate", i + 1, count)
    summary = {
        "task": "mnist-add",
        "method": "deepproblog",
        "digits": n_digits,
        "time_limit_s": time_limit,
        "timeouts": sum(r["status"] == "timeout" for r in rows),
        **_summarise(rows, ("exact_sum", "ms", "inference_ms")),
    }
    return EvalResult(rows, summary, {})

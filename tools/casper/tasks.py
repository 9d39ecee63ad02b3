"""The three tasks: data generation, training a predictor with or without the layer, and evaluation.

Methods: `casper` (structured loss through the exact projection, or weak supervision by
abduction for MNIST-add; hard decode by the structured solver), `unconstrained` (same predictor,
plain per-variable loss, threshold/argmax decode) and `sl-sample` (plain loss + semantic loss
estimated from 64 Bernoulli samples, threshold decode; Warcraft only, where validity is checkable
per sample).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from methodkit.core.errors import DataError, UsageError
from methodkit.core.progress import silent

TASKS = ("warcraft", "sudoku", "shidoku", "mnist-add")
METHODS = ("casper", "unconstrained", "sl-sample")
POOL_SPLIT = (1200, 597)
SL_SAMPLES = 64


# ---------------------------------------------------------------- data


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
    progress=silent,
) -> TrainResult:
    import torch

    from methodkit.tools.casper.models import build

    if method == "sl-sample" and task != "warcraft":
        raise UsageError("--method sl-sample is implemented for --task warcraft only")
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
        batches_of, loss_of = step_fn(arrays, model, method, batch_size, rng, limit, scale)
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
    return TrainResult(model, config, log)


def _shuffled_batches(count: int, batch_size: int, rng, limit):
    idx = rng.permutation(count)[: limit or count]
    return [idx[i : i + batch_size] for i in range(0, len(idx), batch_size)]


# ---- Warcraft


class FlowMap:
    """Maps a cell-probability map onto the flow program's node and edge variables."""

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

    def theta(self, probs):
        """(B, n*n) cell probabilities -> (B, n_vars): nodes s p_u, edges s min(p_tail, p_head) (s = scale)."""
        import torch

        probs = probs * self.scale
        theta = torch.zeros(probs.shape[0], self.program.n, dtype=probs.dtype)
        theta = theta.index_copy(1, self.node_col, probs)
        return theta.index_copy(1, self.edge_col, torch.minimum(probs[:, self.tails], probs[:, self.heads]))

    def gold(self, masks: np.ndarray) -> np.ndarray:
        """Full 0/1 vectors (nodes and edges) of the labelled paths, through the exact decoder."""
        probs = masks.reshape(len(masks), -1).astype(float) / self.scale
        out = np.zeros((len(masks), self.program.n))
        theta = self.theta(__import__("torch").as_tensor(probs)).numpy()
        for i in range(len(masks)):
            out[i, : self.program.n_user] = self.decoder.decode(theta[i]).y
        return out

    def decode(self, mu: np.ndarray, n: int) -> np.ndarray:
        y = self.decoder.decode(mu).y
        return y[self.node_col.numpy()].reshape(n, n)


def _warcraft_steps(arrays, model, method, batch_size, rng, limit, scale=1.0):
    import torch
    import torch.nn.functional as F

    from methodkit.tools.casper.warcraft import is_valid_path

    _need(arrays, ("train_images", "train_paths"), "dataset")
    images, paths = arrays["train_images"], arrays["train_paths"]
    n = paths.shape[1]
    flow = FlowMap(n, scale) if method == "casper" else None
    gold = flow.gold(paths) if flow else None

    def batches(epoch):
        return [(idx,) for idx in _shuffled_batches(len(paths), batch_size, rng, limit)]

    def loss(batch):
        idx = batch[0]
        logits = model(torch.as_tensor(images[idx])).reshape(len(idx), -1)
        target = torch.as_tensor(paths[idx].reshape(len(idx), -1), dtype=torch.float32)
        bce = F.binary_cross_entropy_with_logits(logits, target)
        if method == "casper":
            probs = torch.sigmoid(logits).double()
            mu = flow.layer(flow.theta(probs))
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


def _sudoku_steps(arrays, model, method, batch_size, rng, limit, scale=1.0):
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
    task: str, method: str, model, arrays: dict, *, limit: int | None = None, scale: float = 1.0, progress=silent
) -> EvalResult:
    import torch

    model.eval()
    with torch.no_grad():
        if task == "warcraft":
            return _eval_warcraft(method, model, arrays, limit, progress, scale)
        if task in ("sudoku", "shidoku"):
            return _eval_sudoku(method, model, arrays, limit, progress)
        return _eval_addition(method, model, arrays, limit, progress)


def _summarise(rows: list, keys: tuple) -> dict:
    out = {"instances": len(rows)}
    for key in keys:
        values = [r[key] for r in rows if r.get(key) is not None and r[key] == r[key]]
        out[key] = float(np.mean(values)) if values else None
    return out


def _eval_warcraft(method, model, arrays, limit, progress, scale=1.0):
    import torch

    from methodkit.tools.casper.warcraft import path_metrics

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
        probs = torch.sigmoid(model(torch.as_tensor(images[i : i + 1]))).reshape(1, -1).double()
        if flow is not None:
            theta = flow.theta(probs).numpy()
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
        **_summarise(rows, ("valid", "exact", "cost_ratio", "ms")),
    }
    return EvalResult(rows, summary, {"paths": preds})


def _eval_sudoku(method, model, arrays, limit, progress):
    from methodkit.tools.casper.builders import compiled
    from methodkit.tools.casper.decode import Decoder
    from methodkit.tools.casper.projection import Projector
    from methodkit.tools.casper.sudoku import is_valid_board

    _need(arrays, ("test_images", "test_givens", "test_solutions"), "dataset")
    images, givens, solutions = arrays["test_images"], arrays["test_givens"], arrays["test_solutions"]
    size = solutions.shape[1]
    count = min(limit or len(images), len(images))
    if method == "casper":
        program = compiled("sudoku", size)
        projector, decoder = Projector(program), Decoder(program, time_limit=60.0)
    rows, boards = [], np.zeros((count, size, size), dtype=np.uint8)
    progress("evaluate", 0, count)
    for i in range(count):
        start = time.perf_counter()
        theta, _ = _sudoku_theta(model, images[i : i + 1], givens[i : i + 1], size)
        theta = theta.numpy()
        if method == "casper":
            mu, _ = projector.project(theta)
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
                "ms": (time.perf_counter() - start) * 1000,
            }
        )
        progress("evaluate", i + 1, count)
    summary = {
        "task": "sudoku",
        "method": method,
        "size": size,
        **_summarise(rows, ("valid", "exact", "cell_accuracy", "ms")),
    }
    return EvalResult(rows, summary, {"boards": boards})


def _eval_addition(method, model, arrays, limit, progress):
    import torch

    from methodkit.tools.casper.builders import compiled
    from methodkit.tools.casper.decode import Decoder
    from methodkit.tools.casper.projection import Projector

    _need(arrays, ("pool_images", "test_a_img", "test_b_img", "test_a", "test_b", "test_s"), "dataset")
    images = arrays["pool_images"]
    a_img, b_img = arrays["test_a_img"], arrays["test_b_img"]
    count = min(limit or len(a_img), len(a_img))
    n_digits = a_img.shape[1]
    if method == "casper":
        program = compiled("addition", n_digits, False)
        projector, decoder = Projector(program), Decoder(program)
        decoder.decode(np.full(program.n, 0.5))  # load the compiled kernels before timing
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
        if method == "casper":
            theta = addition_theta(program, pa.numpy()[None], pb.numpy()[None], ps[None])
            mu, _ = projector.project(theta)
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

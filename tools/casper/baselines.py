"""The baselines the issue names, each run through its own library (optional extra `casper`).

- `sl-exact`: the semantic loss of Xu et al. (2018), -log P(constraint | p), computed exactly by
  weighted model counting on an SDD (PySDD). The path constraint ("the selected cells are exactly
  the cells of one simple 8-connected corner-to-corner path") is compiled from its DNF: every valid
  cell set, found by depth-first search, is disjoined into the SDD. That is exact and small up to
  4x4 (62 sets at 3x3, 3,441 at 4x4); beyond, the set count explodes and compilation stops at its
  time limit, which is the result the issue asks to record at 30x30.
- PyEPO (`pyepo-dbb`, `pyepo-pfyl`, `pyepo-imle`, `pyepo-fw`): solver-in-the-loop methods. The CNN
  predicts cell costs (softplus, so >= 0); PyEPO calls our Numba Dijkstra through an `optModel`
  (costs clipped at 1e-6, since perturbations can make them negative); the decode is Dijkstra on the
  predicted costs, so their paths are valid by construction.
- `pishield`: PiShield's propositional Shield Layer built from the Sudoku CNF (exactly one digit per
  cell, each digit at least once per row, column and box), applied to the classifier's
  probabilities; thresholded at 0.5. Its stratification eliminates atoms by resolution, so it runs
  in a child process under a time limit.
- `deepproblog`: exact inference of the multi-digit addition program with the trained digit MLP as
  the neural predicate; each N runs in a child process under a time limit (the issue's 600 s), and
  the largest N that finishes is the figure.
"""

from __future__ import annotations

import math
import time

import numpy as np

from methodkit.core.errors import RunFailure, UsageError, require

PYEPO_METHODS = ("pyepo-dbb", "pyepo-pfyl", "pyepo-imle", "pyepo-fw")
SL_EXACT_MAX = 4  # largest grid side whose SDD compiles in seconds


class CompileTimeout(Exception):
    """A compilation or inference that did not finish within its time limit (a result, not a crash)."""

    def __init__(self, what: str, seconds: float, detail: dict | None = None):
        super().__init__(f"{what} did not finish within {seconds:g} s")
        self.what, self.seconds, self.detail = what, seconds, detail or {}


# ---------------------------------------------------------------- sl-exact (PySDD)


def _grid_neighbours(n: int) -> list:
    return [
        [
            (r + dr) * n + c + dc
            for dr in (-1, 0, 1)
            for dc in (-1, 0, 1)
            if (dr, dc) != (0, 0) and 0 <= r + dr < n and 0 <= c + dc < n
        ]
        for r in range(n)
        for c in range(n)
    ]


def path_cell_sets(n: int, deadline: float):
    """Yield each distinct cell set (a bitmask int) of a simple 8-connected path (0,0) -> (n-1,n-1)."""
    neighbours, target, seen = _grid_neighbours(n), n * n - 1, set()
    stack = [(0, 1, iter(neighbours[0]))]
    steps = 0
    while stack:
        steps += 1
        if steps % 4096 == 0 and time.perf_counter() > deadline:
            raise CompileTimeout("enumerating path cell sets", 0.0, {"sets": len(seen)})
        node, mask, options = stack[-1]
        if node == target:
            stack.pop()
            if mask not in seen:
                seen.add(mask)
                yield mask
            continue
        for nxt in options:
            if not mask >> nxt & 1:
                stack.append((nxt, mask | 1 << nxt, iter(neighbours[nxt])))
                break
        else:
            stack.pop()


class PathSDD:
    """The path constraint over n*n cell variables compiled to an SDD (DNF of all valid cell sets)."""

    def __init__(self, n: int, time_limit: float = 600.0):
        sdd = require("pysdd.sdd", "casper")
        SddManager, Vtree = sdd.SddManager, sdd.Vtree

        start = time.perf_counter()
        deadline = start + time_limit
        self.n, self.cells = n, n * n
        vtree = Vtree(var_count=self.cells, var_order=list(range(1, self.cells + 1)), vtree_type="balanced")
        self.manager = SddManager.from_vtree(vtree)
        self.literals = [self.manager.literal(i + 1) for i in range(self.cells)]
        root, count = self.manager.false(), 0
        try:
            for mask in path_cell_sets(n, deadline):
                term = self.manager.true()
                for i, lit in enumerate(self.literals):
                    term = term & (lit if mask >> i & 1 else ~lit)
                root = root | term
                count += 1
                if time.perf_counter() > deadline:
                    raise CompileTimeout("SDD compilation", time_limit, {"sets": count})
        except CompileTimeout as exc:
            raise CompileTimeout(
                f"SDD compilation of the {n}x{n} path constraint",
                time_limit,
                {"sets_compiled": count, "sdd_size": int(root.size())},
            ) from exc
        self.root, self.sets = root, count
        self.seconds = time.perf_counter() - start

    def log_prob_and_marginals(self, probs: np.ndarray) -> tuple[float, np.ndarray]:
        """log P(constraint) under independent Bernoulli(probs) cells, and P(cell | constraint)."""
        wmc = self.root.wmc(log_mode=True)
        p = np.clip(np.asarray(probs, dtype=np.float64), 1e-12, 1 - 1e-12)
        for lit, pi in zip(self.literals, p):
            wmc.set_literal_weight(lit, math.log(pi))
            wmc.set_literal_weight(~lit, math.log1p(-pi))
        log_z = wmc.propagate()
        marginals = np.array([math.exp(wmc.literal_pr(lit)) for lit in self.literals])
        return float(log_z), marginals


def semantic_loss_layer(circuit: PathSDD):
    """A torch function: cell logits (B, n*n) -> -log P(constraint) per row; d/dz = p - P(cell | constraint)."""
    import torch

    class SemanticLoss(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits):
            probs = torch.sigmoid(logits.detach()).double().numpy()
            out, grads = np.empty(len(probs)), np.empty_like(probs)
            for i, p in enumerate(probs):
                log_z, marginals = circuit.log_prob_and_marginals(p)
                out[i], grads[i] = -log_z, p - marginals
            ctx.save_for_backward(torch.from_numpy(grads).to(logits.dtype))
            return torch.from_numpy(out).to(logits.dtype)

        @staticmethod
        def backward(ctx, grad):
            (grads,) = ctx.saved_tensors
            return grad.unsqueeze(1) * grads

    return SemanticLoss.apply


# ---------------------------------------------------------------- PyEPO (solver in the loop)


def grid_optmodel(n: int):
    """A PyEPO optModel whose oracle is our Numba vertex-weighted Dijkstra on the n x n 8-grid."""
    EPO = require("pyepo.EPO", "casper")
    optModel = require("pyepo.model.opt", "casper").optModel

    from methodkit.tools.casper.warcraft import shortest_path

    class GridShortestPath(optModel):
        def __init__(self, side: int):
            self.side = side
            self.modelSense = EPO.MINIMIZE
            super().__init__()

        def _getModel(self):
            return None, list(range(self.side * self.side))

        def setObj(self, c):
            c = c.detach().cpu().numpy() if hasattr(c, "detach") else np.asarray(c)
            self.cost = np.clip(np.asarray(c, dtype=np.float64).ravel(), 1e-6, None)

        def solve(self):
            mask = shortest_path(self.cost.reshape(self.side, self.side)).ravel().astype(np.float64)
            return mask, float(self.cost @ mask)

    return GridShortestPath(n)


def pyepo_loss(method: str, n: int, seed: int):
    """(predicted costs (B, n*n), gold masks (B, n*n)) -> scalar loss, through the PyEPO module."""
    import torch

    func = require("pyepo.func", "casper")

    model = grid_optmodel(n)
    if method == "pyepo-dbb":
        module = func.blackboxOpt(model, lambd=15)
        return lambda cost, gold: torch.abs(module(cost) - gold).sum(1).mean()  # Hamming per map
    if method == "pyepo-pfyl":
        module = func.perturbedFenchelYoung(model, n_samples=10, sigma=1.0, seed=seed)
        return lambda cost, gold: module(cost, gold)
    if method == "pyepo-imle":
        module = func.implicitMLE(model, n_samples=10, sigma=1.0, lambd=10)
        return lambda cost, gold: torch.abs(module(cost) - gold).sum(1).mean()
    if method == "pyepo-fw":
        module = func.regularizedFrankWolfeOpt(model, lambd=1.0, max_iter=50)
        return lambda cost, gold: ((module(cost) - gold) ** 2).sum(1).mean()
    raise UsageError(f"unknown PyEPO method {method!r}")


# ---------------------------------------------------------------- running under a time limit


def run_with_limit(fn, args: tuple, time_limit: float):
    """fn(*args) in a forked child; its return value, or CompileTimeout after `time_limit` seconds."""
    import multiprocessing as mp
    import queue as queue_module

    ctx = mp.get_context("fork")
    queue = ctx.Queue()

    def child():
        try:
            queue.put(("ok", fn(*args)))
        except Exception as exc:  # reported to the parent, which re-raises its own error type
            queue.put(("error", f"{type(exc).__name__}: {exc}"))

    start = time.perf_counter()
    proc = ctx.Process(target=child, daemon=True)
    proc.start()
    try:
        kind, value = queue.get(timeout=time_limit)
    except queue_module.Empty:
        proc.kill()
        proc.join()
        raise CompileTimeout(
            getattr(fn, "__name__", "run"), time_limit, {"seconds": time.perf_counter() - start}
        ) from None
    proc.join()
    if kind == "error":
        raise RunFailure(f"{getattr(fn, '__name__', 'run')} failed in its child process: {value}")
    return value


# ---------------------------------------------------------------- PiShield (Sudoku CNF)


def sudoku_cnf(size: int) -> list[str]:
    """PiShield clauses ("y_i or not y_j ...") for a size x size Sudoku over size^3 one-hot atoms."""
    box = math.isqrt(size)
    atom = lambda r, c, v: (r * size + c) * size + v  # noqa: E731
    groups = [[(r, c) for c in range(size)] for r in range(size)]
    groups += [[(r, c) for r in range(size)] for c in range(size)]
    groups += [
        [(br * box + i, bc * box + j) for i in range(box) for j in range(box)] for br in range(box) for bc in range(box)
    ]
    lines = []
    for r in range(size):
        for c in range(size):
            lines.append(" or ".join(f"y_{atom(r, c, v)}" for v in range(size)))
            for v in range(size):
                for w in range(v + 1, size):
                    lines.append(f"not y_{atom(r, c, v)} or not y_{atom(r, c, w)}")
    for cells in groups:
        for v in range(size):
            lines.append(" or ".join(f"y_{atom(r, c, v)}" for r, c in cells))
    return lines


def pishield_apply(probs: np.ndarray, clauses: list[str]) -> np.ndarray:
    """PiShield's propositional Shield Layer for `clauses` applied to (B, atoms) probabilities."""
    import contextlib
    import io
    import os
    import tempfile

    import torch

    build_shield_layer = require("pishield.shield_layer", "casper").build_shield_layer

    atoms = probs.shape[1]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "requirements.txt")
        with open(path, "w") as handle:
            handle.write("\n".join(clauses) + "\n")
        with contextlib.redirect_stdout(io.StringIO()):  # the library prints its progress
            order = ",".join(str(i) for i in range(atoms))  # the ascending variable order
            layer = build_shield_layer(
                atoms, path, ordering_choice="custom", custom_ordering=order, requirements_type="propositional"
            )
            out = layer(torch.as_tensor(probs, dtype=torch.float32))
    return out.detach().numpy()


def pishield_sudoku(probs: np.ndarray, size: int) -> np.ndarray:
    return pishield_apply(probs, sudoku_cnf(size))


# ---------------------------------------------------------------- DeepProbLog (MNIST-add, exact)


def deepproblog_program(n_digits: int) -> str:
    """The multi-digit addition program of the DeepProbLog examples, for N-digit numbers."""
    return "\n".join(
        [
            "nn(digit_net, [X], Y, [0,1,2,3,4,5,6,7,8,9]) :: digit(X, Y).",
            "number([], Acc, Acc).",
            "number([H|T], Acc, R) :- digit(H, D), Acc2 is Acc * 10 + D, number(T, Acc2, R).",
            "number(L, R) :- number(L, 0, R).",
            "addition(A, B, S) :- number(A, NA), number(B, NB), S is NA + NB.",
        ]
    )


def deepproblog_sum(digit_net, images_a: np.ndarray, images_b: np.ndarray) -> dict:
    """Exact DeepProbLog inference of the most probable sum for one pair of N-digit image numbers.

    images_*: (N, 64) scikit-learn digit images, most significant digit first.
    """
    import torch

    require("deepproblog", "casper")
    from deepproblog.engines import ExactEngine
    from deepproblog.model import Model
    from deepproblog.network import Network
    from deepproblog.query import Query
    from problog.logic import Constant, Term, Var, list2term

    class Images:
        def __init__(self, images):
            self.images = torch.as_tensor(images)

        def __getitem__(self, index):
            return self.images[int(index[0])]

    n_digits = len(images_a)
    net = Network(digit_net, "digit_net", batching=False)
    model = Model(deepproblog_program(n_digits), [net], load=False)
    model.set_engine(ExactEngine(model))
    images = np.concatenate([images_a, images_b]).astype(np.float32)
    model.add_tensor_source("test", Images(images))
    terms = [Term("tensor", Term("test", Constant(i))) for i in range(2 * n_digits)]
    query = Query(Term("addition", list2term(terms[:n_digits]), list2term(terms[n_digits:]), Var("S")))
    start = time.perf_counter()
    answer = model.solve([query])[0]
    best = max(answer.result.items(), key=lambda kv: float(kv[1]))
    return {"sum": int(best[0].args[2]), "seconds": time.perf_counter() - start}

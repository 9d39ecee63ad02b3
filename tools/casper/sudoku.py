"""Visual Sudoku: unique-solution puzzles with 30-36 givens, rendered with scikit-learn digit images."""

from __future__ import annotations

import math

import numpy as np


def random_solution(size: int, rng: np.random.Generator) -> np.ndarray:
    """A full grid (values 0..size-1): a base pattern shuffled by bands, stacks, rows, columns and labels."""
    box = math.isqrt(size)
    r, c = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    base = (box * (r % box) + r // box + c) % size
    rows = np.concatenate([band * box + rng.permutation(box) for band in rng.permutation(box)])
    cols = np.concatenate([stack * box + rng.permutation(box) for stack in rng.permutation(box)])
    return rng.permutation(size)[base[rows][:, cols]]


def make_puzzle(solution: np.ndarray, rng: np.random.Generator, givens: tuple = (30, 36)) -> np.ndarray:
    """Remove clues in random order while the solution stays unique; returns a mask of the givens."""
    from methodkit.tools.casper.kernels import count_sudoku_solutions

    size = solution.shape[0]
    box = math.isqrt(size)
    low, high = givens if size == 9 else (size * size // 3, size * size // 2)
    target = int(rng.integers(low, high + 1))
    for _ in range(20):
        grid = solution.ravel() + 1
        for cell in rng.permutation(size * size):
            if np.count_nonzero(grid) <= target:
                break
            keep = grid[cell]
            grid[cell] = 0
            if count_sudoku_solutions(grid, size, box, 2) != 1:
                grid[cell] = keep
        if low <= np.count_nonzero(grid) <= high:
            return (grid > 0).reshape(size, size)
    return (grid > 0).reshape(size, size)


def generate(count: int, rng: np.random.Generator, size: int = 9) -> dict:
    """`count` puzzles: solutions (count, size, size) 0-based, givens masks, cell images (count, size^2, 64)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    pools = [np.flatnonzero(digits.target == d) for d in range(10)]
    solutions = np.zeros((count, size, size), dtype=np.uint8)
    givens = np.zeros((count, size, size), dtype=bool)
    images = np.zeros((count, size * size, 64), dtype=np.uint8)
    for k in range(count):
        sol = random_solution(size, rng)
        mask = make_puzzle(sol, rng)
        solutions[k], givens[k] = sol, mask
        for cell in np.flatnonzero(mask.ravel()):
            digit = int(sol.ravel()[cell]) + 1  # shown digits 1..size
            images[k, cell] = digits.images[rng.choice(pools[digit])].ravel().astype(np.uint8)
    return {"solutions": solutions, "givens": givens, "images": images}


def is_valid_board(board: np.ndarray) -> bool:
    size = board.shape[0]
    box = math.isqrt(size)
    want = set(range(size))
    for i in range(size):
        if set(board[i].tolist()) != want or set(board[:, i].tolist()) != want:
            return False
    for br in range(box):
        for bc in range(box):
            if set(board[br * box : (br + 1) * box, bc * box : (bc + 1) * box].ravel().tolist()) != want:
                return False
    return True

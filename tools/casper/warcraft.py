"""Warcraft-like shortest paths: generated terrain maps, their optimal paths, and the path metrics.

A type map is a thresholded Gaussian-smoothed random field with 5 terrain types whose costs are
Vlastelica et al.'s {0.8, 1.2, 5.3, 7.7, 9.2}. Each cell is drawn as a 4x4 RGB tile (base colour
per type + texture noise + a per-map brightness). The label is the vertex-weighted 8-neighbour
shortest path from the top-left to the bottom-right cell, endpoints included.
"""

from __future__ import annotations

import numpy as np

from methodkit.tools.casper.compiler import grid_edges

COSTS = np.array([0.8, 1.2, 5.3, 7.7, 9.2])
COLOURS = np.array([[120, 200, 90], [200, 190, 120], [110, 110, 110], [40, 90, 190], [70, 50, 40]], dtype=float)
TILE = 4


def _grid_csr(n: int):
    edges = grid_edges(n, 8)
    order = np.argsort(edges[:, 0], kind="stable")
    ptr = np.r_[0, np.cumsum(np.bincount(edges[:, 0], minlength=n * n))].astype(np.int64)
    return edges, ptr, edges[order, 1].astype(np.int64), order.astype(np.int64)


def shortest_path(node_cost: np.ndarray) -> np.ndarray:
    """(n, n) vertex costs -> (n, n) uint8 mask of the cheapest 8-neighbour path corner to corner."""
    from methodkit.tools.casper.kernels import dijkstra_vertex_edge

    n = node_cost.shape[0]
    edges, ptr, heads, eids = _grid_csr(n)
    pred, _ = dijkstra_vertex_edge(
        ptr, heads, eids, np.zeros(len(edges)), node_cost.ravel().astype(float), 0, n * n - 1
    )
    mask = np.zeros(n * n, dtype=np.uint8)
    node = n * n - 1
    mask[node] = 1
    while node != 0:
        node = int(edges[pred[node], 0])
        mask[node] = 1
    return mask.reshape(n, n)


def generate(n: int, count: int, rng: np.random.Generator) -> dict:
    """`count` maps of side n: images (count, 3, 4n, 4n) uint8, types, costs, path masks."""
    from scipy.ndimage import gaussian_filter

    images = np.zeros((count, 3, TILE * n, TILE * n), dtype=np.uint8)
    types = np.zeros((count, n, n), dtype=np.uint8)
    paths = np.zeros((count, n, n), dtype=np.uint8)
    for k in range(count):
        field = gaussian_filter(rng.normal(size=(n, n)), sigma=max(1.0, n / 10))
        cuts = np.quantile(field, np.cumsum(rng.dirichlet(np.full(5, 2.0)))[:-1])
        t = np.searchsorted(cuts, field).astype(np.uint8)
        types[k] = t
        paths[k] = shortest_path(COSTS[t])
        tiles = COLOURS[t].repeat(TILE, 0).repeat(TILE, 1)  # (4n, 4n, 3)
        tiles = tiles * rng.uniform(0.8, 1.2) + rng.normal(0, 12, size=tiles.shape)
        images[k] = np.clip(tiles, 0, 255).astype(np.uint8).transpose(2, 0, 1)
    return {"images": images, "types": types, "costs": COSTS[types].astype(np.float32), "paths": paths}


def is_valid_path(mask: np.ndarray, budget: int = 200_000) -> bool:
    """True when the selected cells are exactly the cells of one simple 8-connected corner-to-corner path.

    Depth-first search for a path from the top-left to the bottom-right corner that visits every
    selected cell once (a Hamiltonian path of the selection). Sets that are not connected, or whose
    search exceeds `budget` steps (large blobs, never a path in practice), count as invalid.
    """
    n = mask.shape[0]
    if not (mask[0, 0] and mask[n - 1, n - 1]):
        return False
    selected = {(int(r), int(c)) for r, c in zip(*np.nonzero(mask))}
    neighbours = {
        cell: [(cell[0] + dr, cell[1] + dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if (dr, dc) != (0, 0)]
        for cell in selected
    }
    neighbours = {cell: [q for q in qs if q in selected] for cell, qs in neighbours.items()}
    start, end, total = (0, 0), (n - 1, n - 1), len(selected)
    seen, frontier = {start}, [start]  # connectivity first: cheap rejection
    while frontier:
        cell = frontier.pop()
        for q in neighbours[cell]:
            if q not in seen:
                seen.add(q)
                frontier.append(q)
    if len(seen) != total:
        return False
    visited = {start}
    stack = [(start, iter(neighbours[start]))]
    steps = 0
    while stack:
        steps += 1
        if steps > budget:
            return False
        cell, options = stack[-1]
        if cell == end:
            if len(visited) == total:
                return True
            visited.discard(stack.pop()[0])
            continue
        for q in options:
            if q not in visited:
                visited.add(q)
                stack.append((q, iter(neighbours[q])))
                break
        else:
            visited.discard(stack.pop()[0])
    return False


def path_metrics(pred: np.ndarray, gold: np.ndarray, costs: np.ndarray) -> dict:
    """Validity, exact match and (for valid paths) true cost of the prediction / optimum."""
    valid = is_valid_path(pred)
    ratio = float((costs * pred).sum() / (costs * gold).sum()) if valid else float("nan")
    return {"valid": bool(valid), "exact": bool(np.array_equal(pred, gold)), "cost_ratio": ratio}

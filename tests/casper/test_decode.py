"""Hard decoders: each equals HiGHS MILP on the same weights; Shidoku against brute force; kernels vs references."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from methodkit.tools.casper.builders import addition_spec, grid_path_spec, sudoku_spec
from methodkit.tools.casper.compiler import compile_spec, grid_edges
from methodkit.tools.casper.decode import Decoder, certify
from methodkit.tools.casper.kernels import dijkstra_vertex_edge, viterbi_digit_sum
from methodkit.tools.casper.program import Program

PERM = {
    "variables": [{"name": f"p{i}", "domain": 5} for i in range(5)],
    "constraints": [{"type": "all_different", "vars": [f"p{i}" for i in range(5)]}],
}
ONEHOT = {"variables": [{"name": "x", "domain": 4}, {"name": "y", "domain": 3}], "constraints": []}


def _milp_optimum(program: Program, w: np.ndarray) -> float:
    from scipy.optimize import Bounds, LinearConstraint, milp

    c = np.zeros(program.n)
    c[: program.n_user] = np.where(np.isfinite(w), w, 1e6)
    integrality = np.r_[np.ones(program.n_user), np.zeros(program.n - program.n_user)]
    res = milp(
        c,
        constraints=LinearConstraint(program.A, program.b, program.b),
        integrality=integrality,
        bounds=Bounds(program.lower, program.upper),
    )
    assert res.status == 0
    return float(res.fun)


@pytest.mark.parametrize(
    "name,spec,structure",
    [
        ("onehot", ONEHOT, "onehot"),
        ("grid5", grid_path_spec(5), "flow"),
        ("add2", addition_spec(2), "chain"),
        ("perm", PERM, "assignment"),
    ],
)
def test_structured_decoder_equals_highs_milp(name, spec, structure):
    program = compile_spec(spec)
    assert program.structure == structure
    decoder = Decoder(program)
    rng = np.random.default_rng(11)
    for _ in range(5):
        mu = rng.random(program.n_user)
        out = decoder.decode(mu)
        assert out.status == "ok"
        assert certify(program, out.y) is None
        w = decoder.weights(mu)
        assert float(w[out.y == 1].sum()) == pytest.approx(_milp_optimum(program, w), abs=1e-7)


def _shidoku_solutions():
    rows = [p for p in itertools.permutations(range(4))]
    out = []
    for r0 in rows:
        for r1 in rows:
            for r2 in rows:
                for r3 in rows:
                    g = np.array([r0, r1, r2, r3])
                    if all(len(set(g[:, c])) == 4 for c in range(4)) and all(
                        len(set(g[br : br + 2, bc : bc + 2].ravel())) == 4 for br in (0, 2) for bc in (0, 2)
                    ):
                        out.append(g)
    return out


def test_shidoku_decode_is_the_euclidean_projection_onto_all_288_solutions():
    solutions = _shidoku_solutions()
    assert len(solutions) == 288
    program = compile_spec(sudoku_spec(4))
    decoder = Decoder(program)
    onehots = np.zeros((288, 64))
    for k, g in enumerate(solutions):
        onehots[k, np.arange(16) * 4 + g.ravel()] = 1
    rng = np.random.default_rng(12)
    for _ in range(4):
        mu = rng.random(64)
        out = decoder.decode(mu)
        assert certify(program, out.y) is None
        best = onehots[np.argmin(((onehots - mu) ** 2).sum(axis=1))]
        np.testing.assert_array_equal(out.y, best)


def test_dijkstra_matches_networkx():
    nx = pytest.importorskip("networkx")
    rng = np.random.default_rng(13)
    n = 7
    edges = grid_edges(n, 8)
    order = np.argsort(edges[:, 0], kind="stable")
    ptr = np.r_[0, np.cumsum(np.bincount(edges[:, 0], minlength=n * n))]
    node_w, edge_w = rng.random(n * n) + 0.01, rng.random(len(edges)) + 0.01
    pred, cost = dijkstra_vertex_edge(ptr, edges[order, 1], order, edge_w, node_w, 0, n * n - 1)
    graph = nx.DiGraph()
    for e, (u, v) in enumerate(edges.tolist()):
        graph.add_edge(u, v, weight=edge_w[e] + node_w[v])
    ref = nx.dijkstra_path_length(graph, 0, n * n - 1) + node_w[0]
    assert cost == pytest.approx(ref, rel=1e-12)


def test_dijkstra_predecessors_trace_a_path_of_the_reported_cost():
    # The indexed heap lowers keys in place; the predecessor edges must still spell out a cheapest path.
    nx = pytest.importorskip("networkx")
    n = 12
    edges = grid_edges(n, 8)
    order = np.argsort(edges[:, 0], kind="stable")
    ptr = np.r_[0, np.cumsum(np.bincount(edges[:, 0], minlength=n * n))]
    for seed in range(5):
        rng = np.random.default_rng(seed)
        node_w, edge_w = rng.random(n * n) + 0.01, (rng.random(len(edges)) if seed % 2 else np.zeros(len(edges)))
        source, target = int(rng.integers(n * n)), int(rng.integers(n * n))
        pred, cost = dijkstra_vertex_edge(ptr, edges[order, 1], order, edge_w, node_w, source, target)
        walked, node = node_w[source], target
        while node != source:
            e = pred[node]
            walked += edge_w[e] + node_w[edges[e, 1]]
            node = int(edges[e, 0])
        graph = nx.DiGraph()
        for e, (u, v) in enumerate(edges.tolist()):
            graph.add_edge(u, v, weight=edge_w[e] + node_w[v])
        ref = nx.dijkstra_path_length(graph, source, target) + node_w[source]
        assert cost == pytest.approx(ref, rel=1e-12)
        assert walked == pytest.approx(cost, rel=1e-12)


def test_viterbi_matches_brute_force():
    rng = np.random.default_rng(14)
    n, base = 2, 10
    wa, wb = rng.random((n, base)), rng.random((n, base))
    ws, wc = rng.random((n + 1, base)), rng.random((n + 1, 2))
    wc[0, 1] = np.inf
    a, b, s, c, cost = viterbi_digit_sum(wa, wb, ws, wc, base)
    best = np.inf
    for x in range(100):
        for y in range(100):
            xd, yd = [x % 10, x // 10], [y % 10, y // 10]
            z = x + y
            sd = [z % 10, (z // 10) % 10, z // 100]
            carry = [0, (xd[0] + yd[0]) // 10, z // 100]
            total = sum(wa[i, xd[i]] + wb[i, yd[i]] for i in range(2)) + sum(ws[i, sd[i]] for i in range(3))
            total += sum(wc[i, carry[i]] for i in range(3))
            best = min(best, total)
    assert cost == pytest.approx(best)
    assert (a[0] + 10 * a[1]) + (b[0] + 10 * b[1]) == s[0] + 10 * s[1] + 100 * s[2]


def test_certificate_rejects_invalid_assignments():
    program = compile_spec(grid_path_spec(4))
    decoder = Decoder(program)
    good = decoder.decode(np.random.default_rng(15).random(program.n_user)).y
    assert certify(program, good) is None
    bad = good.copy()
    bad[np.flatnonzero(bad == 0)[0]] = 1
    assert certify(program, bad) is not None
    assert certify(program, np.zeros(program.n_user, dtype=np.uint8)) is not None

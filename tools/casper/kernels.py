"""Numba kernels of Casper: per-group sparsemax, per-row sort-and-threshold (capped simplex, knapsack), grid/graph Dijkstra, carry-chain Viterbi.

Module-level @njit(cache=True) without eager signatures, so importing this module compiles
nothing; each kernel has a plain-NumPy/Python reference in the tests.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def sparsemax_segments(theta, ptr):
    """Euclidean projection of each segment theta[ptr[g]:ptr[g+1]] onto the probability simplex.

    theta: (batch, n) with the groups laid out contiguously; returns (batch, n).
    Sort descending, find the support size k (largest k with 1 + k z_k > sum_{j<=k} z_j),
    threshold tau = (sum_{j<=k} z_j - 1) / k, y = max(theta - tau, 0). One buffer for all groups:
    an insertion sort for groups of at most 32 (no allocation per group), np.sort above.
    """
    batch, n = theta.shape
    out = np.zeros((batch, n))
    width = 0
    for g in range(ptr.shape[0] - 1):
        width = max(width, ptr[g + 1] - ptr[g])
    z = np.empty(width)
    for i in range(batch):
        for g in range(ptr.shape[0] - 1):
            lo, hi = ptr[g], ptr[g + 1]
            size = hi - lo
            if size > 32:
                z[:size] = -np.sort(-theta[i, lo:hi])
            else:
                for a in range(size):  # insertion sort, descending
                    v = theta[i, lo + a]
                    b = a - 1
                    while b >= 0 and z[b] < v:
                        z[b + 1] = z[b]
                        b -= 1
                    z[b + 1] = v
            cumulative = 0.0
            tau = 0.0
            for k in range(size):
                cumulative += z[k]
                t = (cumulative - 1.0) / (k + 1)
                if z[k] > t:
                    tau = t
            for j in range(lo, hi):
                v = theta[i, j] - tau
                out[i, j] = v if v > 0.0 else 0.0
    return out


@njit(cache=True)
def _knapsack_sum(theta, a, lo, hi, t, start, stop):
    total = 0.0
    for j in range(start, stop):
        v = theta[j] - a[j] * t
        v = lo[j] if v < lo[j] else (hi[j] if v > hi[j] else v)
        total += a[j] * v
    return total


@njit(cache=True)
def threshold_segments(theta, a, lower, upper, b, ptr):
    """Euclidean projection of each segment onto {y : a.y = b_g, lower <= y <= upper} (one row each).

    theta, lower, upper: (batch, n) with the rows' variables laid out contiguously; a: (n,) nonzero
    coefficients; b: (groups,). y = clip(theta - a tau) with the scalar tau at which the nonincreasing
    piecewise-linear f(tau) = sum a_j clip(theta_j - a_j tau) crosses b_g: sort the finite breakpoints
    (theta_j - bound_j) / a_j, bisect them for the bracketing piece, solve that linear piece exactly.
    Returns (y (batch, n), ok (batch,) False where a row's b_g lies outside the range of f).
    """
    batch, n = theta.shape
    out = np.zeros((batch, n))
    ok = np.ones(batch, dtype=np.bool_)
    for i in range(batch):
        th, lo, hi = theta[i], lower[i], upper[i]
        for g in range(ptr.shape[0] - 1):
            start, stop = ptr[g], ptr[g + 1]
            width = stop - start
            points = np.empty(2 * width)
            count = 0
            for j in range(start, stop):
                for bound in (lo[j], hi[j]):
                    if np.isfinite(bound):
                        points[count] = (th[j] - bound) / a[j]
                        count += 1
            points = np.sort(points[:count])
            target = b[g]
            # f is nonincreasing: find the piece [points[left], points[left + 1]] holding f = target
            left, right = -1, count  # f(points[left]) >= target > f(points[right]), with +-inf ends
            while right - left > 1:
                mid = (left + right) // 2
                if _knapsack_sum(th, a, lo, hi, points[mid], start, stop) >= target:
                    left = mid
                else:
                    right = mid
            if left >= 0 and right < count:
                probe = 0.5 * (points[left] + points[right])
            elif left >= 0:
                probe = points[left] + 1.0
            elif right < count:
                probe = points[right] - 1.0
            else:
                probe = 0.0
            # on that piece the free set is fixed: solve sum_free a (theta - a tau) + sum_clipped a bound = b
            rest, slope = 0.0, 0.0
            for j in range(start, stop):
                v = th[j] - a[j] * probe
                if v <= lo[j]:
                    rest += a[j] * lo[j]
                elif v >= hi[j]:
                    rest += a[j] * hi[j]
                else:
                    rest += a[j] * th[j]
                    slope += a[j] * a[j]
            if slope > 0.0:
                tau = (rest - target) / slope
            else:  # f is flat on the piece: feasible only if it equals target there
                tau = probe
                if abs(rest - target) > 1e-9 * (1.0 + abs(target)):
                    ok[i] = False
            for j in range(start, stop):
                v = th[j] - a[j] * tau
                out[i, j] = lo[j] if v < lo[j] else (hi[j] if v > hi[j] else v)
    return out, ok


# An indexed binary heap (pos[v] = slot of v, -1 never queued, -2 settled): a relaxation lowers v's
# key in place, so the heap never holds more than one entry per node and never pops stale ones.
@njit(cache=True)
def _sift_up(key, node, pos, i):
    k, v = key[i], node[i]
    while i > 0:
        parent = (i - 1) >> 1
        if key[parent] <= k:
            break
        key[i], node[i] = key[parent], node[parent]
        pos[node[i]] = i
        i = parent
    key[i], node[i] = k, v
    pos[v] = i


@njit(cache=True)
def _sift_down(key, node, pos, size, i):
    k, v = key[i], node[i]
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and key[child + 1] < key[child]:
            child += 1
        if key[child] >= k:
            break
        key[i], node[i] = key[child], node[child]
        pos[node[i]] = i
        i = child
    key[i], node[i] = k, v
    pos[v] = i


@njit(cache=True)
def dijkstra_vertex_edge(indptr, heads, edge_ids, edge_w, node_w, source, target):
    """Shortest source->target path; cost = node_w[source] + sum over path edges of edge_w[e] + node_w[head].

    Graph in CSR by tail (indptr, heads, edge_ids). Weights must be >= 0 (the caller's tie-break makes
    them > 0, so a cheapest walk is a simple path). Returns (pred_edge per node, -1 for none; cost).
    """
    n = indptr.shape[0] - 1
    dist = np.full(n, np.inf)
    pred = np.full(n, -1, dtype=np.int64)
    pos = np.full(n, -1, dtype=np.int64)
    key = np.empty(n)
    node = np.empty(n, dtype=np.int64)
    dist[source] = node_w[source]
    key[0], node[0], pos[source] = dist[source], source, 0
    size = 1
    while size > 0:
        u, du = node[0], key[0]
        pos[u] = -2
        size -= 1
        if size > 0:
            key[0], node[0] = key[size], node[size]
            _sift_down(key, node, pos, size, 0)
        if u == target:
            break
        for k in range(indptr[u], indptr[u + 1]):
            v = heads[k]
            slot = pos[v]
            if slot == -2:
                continue
            candidate = du + edge_w[edge_ids[k]] + node_w[v]
            if candidate < dist[v]:
                dist[v] = candidate
                pred[v] = edge_ids[k]
                if slot == -1:  # first time reached: append, then restore the heap order
                    slot = size
                    node[slot] = v
                    size += 1
                key[slot] = candidate
                _sift_up(key, node, pos, slot)
    return pred, dist[target]


@njit(cache=True)
def viterbi_digit_sum(wa, wb, ws, wc, base):
    """Cheapest (a, b, s, carries) with a_i + b_i + c_i = s_i + base c_{i+1}, s_N = c_N.

    wa, wb: (N, base) weights of the digit indicators; ws: (N+1, base); wc: (N+1, 2) carry weights.
    Forbidden values carry +inf. Dynamic programme over the carry state, O(N * 2 * base^2).
    Returns (a, b, s, c, cost); cost is inf when nothing is feasible.
    """
    n = wa.shape[0]
    dp = np.full((n + 1, 2), np.inf)
    back_c = np.full((n + 1, 2), -1, dtype=np.int64)
    back_a = np.zeros((n + 1, 2), dtype=np.int64)
    back_b = np.zeros((n + 1, 2), dtype=np.int64)
    dp[0, 0] = wc[0, 0]
    dp[0, 1] = wc[0, 1]
    for i in range(n):
        for cin in range(2):
            if dp[i, cin] == np.inf:
                continue
            for a in range(base):
                ca = dp[i, cin] + wa[i, a]
                if ca == np.inf:
                    continue
                for b in range(base):
                    t = a + b + cin
                    sd = t % base
                    cout = t // base
                    cost = ca + wb[i, b] + ws[i, sd] + wc[i + 1, cout]
                    if cost < dp[i + 1, cout]:
                        dp[i + 1, cout] = cost
                        back_c[i + 1, cout] = cin
                        back_a[i + 1, cout] = a
                        back_b[i + 1, cout] = b
    best = np.inf
    last = -1
    for c in range(2):
        total = dp[n, c] + ws[n, c]
        if total < best:
            best = total
            last = c
    a_out = np.zeros(n, dtype=np.int64)
    b_out = np.zeros(n, dtype=np.int64)
    s_out = np.zeros(n + 1, dtype=np.int64)
    c_out = np.zeros(n + 1, dtype=np.int64)
    if last < 0:
        return a_out, b_out, s_out, c_out, np.inf
    c = last
    c_out[n] = c
    s_out[n] = c
    for i in range(n, 0, -1):
        a, b, cin = back_a[i, c], back_b[i, c], back_c[i, c]
        a_out[i - 1] = a
        b_out[i - 1] = b
        s_out[i - 1] = (a + b + cin) % base
        c_out[i - 1] = cin
        c = cin
    return a_out, b_out, s_out, c_out, best


@njit(cache=True)
def count_sudoku_solutions(grid, size, box, limit):
    """Number of completions of a Sudoku (0 = empty, 1..size = digits), counting up to `limit`.

    Iterative backtracking on bitmasks, always branching on the empty cell with fewest candidates.
    """
    n = size * size
    g = grid.copy()
    full = (1 << size) - 1
    rowm = np.zeros(size, dtype=np.int64)
    colm = np.zeros(size, dtype=np.int64)
    boxm = np.zeros(size, dtype=np.int64)
    for i in range(n):
        if g[i] > 0:
            r, c = i // size, i % size
            b = (r // box) * box + c // box
            v = 1 << (g[i] - 1)
            if (rowm[r] & v) or (colm[c] & v) or (boxm[b] & v):
                return 0
            rowm[r] |= v
            colm[c] |= v
            boxm[b] |= v
    stack_cell = np.zeros(n, dtype=np.int64)
    stack_cand = np.zeros(n, dtype=np.int64)
    depth = 0
    count = 0
    while True:
        best, best_count, best_mask = -1, size + 1, 0
        for i in range(n):
            if g[i] == 0:
                r, c = i // size, i % size
                b = (r // box) * box + c // box
                m = full & ~(rowm[r] | colm[c] | boxm[b])
                pc = 0
                x = m
                while x:
                    x &= x - 1
                    pc += 1
                if pc < best_count:
                    best, best_count, best_mask = i, pc, m
                    if pc <= 1:
                        break
        if best == -1:
            count += 1
            if count >= limit:
                return count
        elif best_count > 0:
            stack_cell[depth] = best
            stack_cand[depth] = best_mask
            depth += 1
        # advance to the next untried candidate, undoing exhausted cells
        while depth > 0:
            cell = stack_cell[depth - 1]
            r, c = cell // size, cell % size
            b = (r // box) * box + c // box
            if g[cell] != 0:
                v = 1 << (g[cell] - 1)
                rowm[r] &= ~v
                colm[c] &= ~v
                boxm[b] &= ~v
                g[cell] = 0
            m = stack_cand[depth - 1]
            if m == 0:
                depth -= 1
                continue
            v = m & -m
            stack_cand[depth - 1] = m ^ v
            digit = 0
            while (1 << digit) != v:
                digit += 1
            g[cell] = digit + 1
            rowm[r] |= v
            colm[c] |= v
            boxm[b] |= v
            break
        if depth == 0:
            return count


@njit(cache=True)
def gram_assemble(pos, coef, var, weight, diag_pos, delta, nnz):
    """Values of A diag(weight) A^T + delta I on a fixed pattern: entry pos[t] gets coef[t] weight[var[t]]."""
    data = np.zeros(nnz)
    for t in range(pos.shape[0]):
        data[pos[t]] += coef[t] * weight[var[t]]
    for k in range(diag_pos.shape[0]):
        data[diag_pos[k]] += delta
    return data


@njit(cache=True)
def symmetric_upper_matvec(indptr, indices, data, x):
    """M x for the symmetric M whose upper triangle is the CSC (indptr, indices, data)."""
    out = np.zeros(x.shape[0])
    for j in range(indptr.shape[0] - 1):
        for p in range(indptr[j], indptr[j + 1]):
            i = indices[p]
            out[i] += data[p] * x[j]
            if i != j:
                out[j] += data[p] * x[i]
    return out

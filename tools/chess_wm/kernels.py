"""Numba kernels of chess-wm: turning board snapshots into the 75 state labels.

A snapshot row is 18 uint64: the 12 piece bitboards (white P N B R Q K, then black
p n b r q k; python-chess squares, a1 = bit 0), side to move (0 white), castling
bits (1 K, 2 Q, 4 k, 8 q), en-passant square (64 = none), halfmove clock,
fullmove number. Python reads these integers off a python-chess board (cheap
attribute reads); the per-square loop runs here.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

SNAP_WIDTH = 18


@njit(cache=True)
def encode_states(snaps):
    """uint64 [N, 18] snapshots -> uint8 [N, 75] state labels (layout in spec.py)."""
    n = snaps.shape[0]
    out = np.zeros((n, 75), dtype=np.uint8)
    for i in range(n):
        for piece in range(12):
            bb = snaps[i, piece]
            square = 0
            while bb != 0:
                if bb & np.uint64(1):
                    label = (7 - square // 8) * 8 + square % 8
                    out[i, label] = piece + 1
                bb = bb >> np.uint64(1)
                square += 1
        out[i, 64] = snaps[i, 12]
        castle = snaps[i, 13]
        for bit in range(4):
            out[i, 65 + bit] = (castle >> np.uint64(bit)) & np.uint64(1)
        ep = snaps[i, 14]
        if ep < 64:
            out[i, 69] = ep % 8 + 1
            out[i, 70] = 1 if ep // 8 == 2 else 2
        half = min(snaps[i, 15], np.uint64(65535))
        full = min(snaps[i, 16], np.uint64(65535))
        out[i, 71] = half >> np.uint64(8)
        out[i, 72] = half & np.uint64(255)
        out[i, 73] = full >> np.uint64(8)
        out[i, 74] = full & np.uint64(255)
    return out


# ---------------------------------------------------------------- the move generator (mailbox, a1 = 0)
#
# board: int8[64], 0 empty, 1-6 white P N B R Q K, 7-12 black. st: int64[5] = side (0 white),
# castling bits (1 K, 2 Q, 4 k, 8 q), potential en-passant square (-1 none), halfmove, fullmove.
# A move is int32: from | to << 6 | promo << 12 (0 none, 1 q, 2 r, 3 b, 4 n) | flag << 15
# (1 en-passant capture, 2 castling, 3 double push).

KNIGHT_STEPS = np.array([[1, 2], [2, 1], [2, -1], [1, -2], [-1, -2], [-2, -1], [-2, 1], [-1, 2]], dtype=np.int64)
KING_STEPS = np.array([[1, 0], [1, 1], [0, 1], [-1, 1], [-1, 0], [-1, -1], [0, -1], [1, -1]], dtype=np.int64)
PROMO_TYPE = np.array([0, 5, 4, 3, 2], dtype=np.int64)  # promo code -> piece type (q r b n)
ST_SIDE, ST_CASTLE, ST_EP, ST_HALF, ST_FULL = 0, 1, 2, 3, 4


def _zobrist_tables():
    rng = np.random.default_rng(20260530)
    return rng.integers(1, 2**63, size=(13 * 64 + 1 + 16 + 8), dtype=np.int64).astype(np.uint64)


ZOBRIST = _zobrist_tables()


@njit(cache=True)
def start_position():
    board = np.zeros(64, dtype=np.int8)
    back = np.array([4, 2, 3, 5, 6, 3, 2, 4], dtype=np.int8)
    for f in range(8):
        board[f] = back[f]
        board[8 + f] = 1
        board[48 + f] = 7
        board[56 + f] = back[f] + 6
    st = np.array([0, 15, -1, 0, 1], dtype=np.int64)
    return board, st


@njit(cache=True)
def _color(piece):
    return 0 if piece <= 6 else 1


@njit(cache=True)
def _kind(piece):
    return (piece - 1) % 6 + 1


@njit(cache=True)
def attacked(board, sq, by):
    """Is square `sq` attacked by side `by` (0 white, 1 black)?"""
    f, r = sq % 8, sq // 8
    off = 0 if by == 0 else 6
    # pawns
    if by == 0:
        if r >= 1 and f >= 1 and board[sq - 9] == 1:
            return True
        if r >= 1 and f <= 6 and board[sq - 7] == 1:
            return True
    else:
        if r <= 6 and f >= 1 and board[sq + 7] == 7:
            return True
        if r <= 6 and f <= 6 and board[sq + 9] == 7:
            return True
    for i in range(8):
        nf, nr = f + KNIGHT_STEPS[i, 0], r + KNIGHT_STEPS[i, 1]
        if 0 <= nf < 8 and 0 <= nr < 8 and board[nr * 8 + nf] == 2 + off:
            return True
        nf, nr = f + KING_STEPS[i, 0], r + KING_STEPS[i, 1]
        if 0 <= nf < 8 and 0 <= nr < 8 and board[nr * 8 + nf] == 6 + off:
            return True
    for i in range(8):
        df, dr = KING_STEPS[i, 0], KING_STEPS[i, 1]
        diagonal = df != 0 and dr != 0
        nf, nr = f + df, r + dr
        while 0 <= nf < 8 and 0 <= nr < 8:
            p = board[nr * 8 + nf]
            if p != 0:
                if _color(p) == by:
                    k = _kind(p)
                    if k == 5 or (diagonal and k == 3) or ((not diagonal) and k == 4):
                        return True
                break
            nf += df
            nr += dr
    return False


@njit(cache=True)
def _king_square(board, side):
    target = 6 if side == 0 else 12
    for sq in range(64):
        if board[sq] == target:
            return sq
    return -1


@njit(cache=True)
def _mv(frm, to, promo, flag):
    return np.int32(frm | (to << 6) | (promo << 12) | (flag << 15))


@njit(cache=True)
def pseudo_moves(board, st, out):
    """Pseudo-legal moves of the side to move into `out`; returns their number."""
    side = st[ST_SIDE]
    n = 0
    for sq in range(64):
        p = board[sq]
        if p == 0 or _color(p) != side:
            continue
        k = _kind(p)
        f, r = sq % 8, sq // 8
        if k == 1:
            fwd = 8 if side == 0 else -8
            last = 7 if side == 0 else 0
            home = 1 if side == 0 else 6
            to = sq + fwd
            if 0 <= to < 64 and board[to] == 0:
                if to // 8 == last:
                    for pc in range(1, 5):
                        out[n] = _mv(sq, to, pc, 0)
                        n += 1
                else:
                    out[n] = _mv(sq, to, 0, 0)
                    n += 1
                    if r == home and board[to + fwd] == 0:
                        out[n] = _mv(sq, to + fwd, 0, 3)
                        n += 1
            for df in (-1, 1):
                nf = f + df
                if nf < 0 or nf > 7:
                    continue
                to = sq + fwd + df
                if to < 0 or to > 63:
                    continue
                q = board[to]
                if q != 0 and _color(q) != side:
                    if to // 8 == last:
                        for pc in range(1, 5):
                            out[n] = _mv(sq, to, pc, 0)
                            n += 1
                    else:
                        out[n] = _mv(sq, to, 0, 0)
                        n += 1
                elif q == 0 and to == st[ST_EP]:
                    out[n] = _mv(sq, to, 0, 1)
                    n += 1
        elif k == 2 or k == 6:
            for i in range(8):
                if k == 2:
                    nf, nr = f + KNIGHT_STEPS[i, 0], r + KNIGHT_STEPS[i, 1]
                else:
                    nf, nr = f + KING_STEPS[i, 0], r + KING_STEPS[i, 1]
                if 0 <= nf < 8 and 0 <= nr < 8:
                    q = board[nr * 8 + nf]
                    if q == 0 or _color(q) != side:
                        out[n] = _mv(sq, nr * 8 + nf, 0, 0)
                        n += 1
        else:
            for i in range(8):
                df, dr = KING_STEPS[i, 0], KING_STEPS[i, 1]
                diagonal = df != 0 and dr != 0
                if (k == 3 and not diagonal) or (k == 4 and diagonal):
                    continue
                nf, nr = f + df, r + dr
                while 0 <= nf < 8 and 0 <= nr < 8:
                    q = board[nr * 8 + nf]
                    if q == 0 or _color(q) != side:
                        out[n] = _mv(sq, nr * 8 + nf, 0, 0)
                        n += 1
                    if q != 0:
                        break
                    nf += df
                    nr += dr
    # castling: rights, empty squares between, king not passing through attacked squares
    c = st[ST_CASTLE]
    base = 0 if side == 0 else 56
    king = 6 if side == 0 else 12
    rook = 4 if side == 0 else 10
    enemy = 1 - side
    kbit, qbit = (1, 2) if side == 0 else (4, 8)
    if board[base + 4] == king:
        if (c & kbit) and board[base + 7] == rook and board[base + 5] == 0 and board[base + 6] == 0:
            if (
                not attacked(board, base + 4, enemy)
                and not attacked(board, base + 5, enemy)
                and not attacked(board, base + 6, enemy)
            ):
                out[n] = _mv(base + 4, base + 6, 0, 2)
                n += 1
        if (
            (c & qbit)
            and board[base] == rook
            and board[base + 1] == 0
            and board[base + 2] == 0
            and board[base + 3] == 0
        ):
            if (
                not attacked(board, base + 4, enemy)
                and not attacked(board, base + 3, enemy)
                and not attacked(board, base + 2, enemy)
            ):
                out[n] = _mv(base + 4, base + 2, 0, 2)
                n += 1
    return n


@njit(cache=True)
def _clear_rights(c, sq):
    if sq == 0:
        c &= ~2
    elif sq == 7:
        c &= ~1
    elif sq == 56:
        c &= ~8
    elif sq == 63:
        c &= ~4
    return c


@njit(cache=True)
def make_move(board, st, move):
    """Play `move` in place (board and st)."""
    frm, to = move & 63, (move >> 6) & 63
    promo, flag = (move >> 12) & 7, move >> 15
    side = st[ST_SIDE]
    p = board[frm]
    captured = board[to]
    board[to] = p if promo == 0 else PROMO_TYPE[promo] + (0 if side == 0 else 6)
    board[frm] = 0
    if flag == 1:  # en passant: the captured pawn is behind the target square
        board[to - 8 if side == 0 else to + 8] = 0
        captured = 1
    elif flag == 2:  # castling: move the rook too
        if to % 8 == 6:
            board[to - 1] = board[to + 1]
            board[to + 1] = 0
        else:
            board[to + 1] = board[to - 2]
            board[to - 2] = 0
    c = _clear_rights(_clear_rights(st[ST_CASTLE], frm), to)
    if _kind(p) == 6:
        c &= ~3 if side == 0 else ~12
    st[ST_CASTLE] = c
    st[ST_EP] = (frm + to) // 2 if flag == 3 else -1
    st[ST_HALF] = 0 if (_kind(p) == 1 or captured != 0) else st[ST_HALF] + 1
    if side == 1:
        st[ST_FULL] += 1
    st[ST_SIDE] = 1 - side


@njit(cache=True)
def legal_moves(board, st, out):
    """Legal moves into `out` (pseudo-legal moves that leave the mover's king safe); returns their number."""
    buf = np.empty(256, dtype=np.int32)
    m = pseudo_moves(board, st, buf)
    side = st[ST_SIDE]
    b2 = np.empty(64, dtype=np.int8)
    s2 = np.empty(5, dtype=np.int64)
    n = 0
    for i in range(m):
        b2[:] = board
        s2[:] = st
        make_move(b2, s2, buf[i])
        if not attacked(b2, _king_square(b2, side), 1 - side):
            out[n] = buf[i]
            n += 1
    return n


@njit(cache=True)
def perft_kernel(board, st, depth):
    """Leaf count of the legal move tree (iterative, bulk-counted at the last ply)."""
    moves = np.empty((depth + 1, 256), dtype=np.int32)
    if depth == 0:
        return 1
    n0 = legal_moves(board, st, moves[0])
    if depth == 1:
        return n0
    boards = np.empty((depth + 1, 64), dtype=np.int8)
    sts = np.empty((depth + 1, 5), dtype=np.int64)
    counts = np.zeros(depth + 1, dtype=np.int64)
    index = np.zeros(depth + 1, dtype=np.int64)
    boards[0] = board
    sts[0] = st
    counts[0] = n0
    total = 0
    level = 0
    while level >= 0:
        if index[level] >= counts[level]:
            level -= 1
            continue
        move = moves[level, index[level]]
        index[level] += 1
        boards[level + 1] = boards[level]
        sts[level + 1] = sts[level]
        make_move(boards[level + 1], sts[level + 1], move)
        n = legal_moves(boards[level + 1], sts[level + 1], moves[level + 1])
        if level + 2 == depth:
            total += n
        else:
            counts[level + 1] = n
            index[level + 1] = 0
            level += 1
    return total


@njit(cache=True)
def _has_legal_ep(legal, n):
    for i in range(n):
        if legal[i] >> 15 == 1:
            return True
    return False


@njit(cache=True)
def position_key(board, st, legal_ep):
    """Zobrist key of python-chess's transposition key (ep square only when an ep capture is legal)."""
    h = np.uint64(0)
    for sq in range(64):
        if board[sq] != 0:
            h ^= ZOBRIST[board[sq] * 64 + sq]
    if st[ST_SIDE] == 1:
        h ^= ZOBRIST[13 * 64]
    h ^= ZOBRIST[13 * 64 + 1 + st[ST_CASTLE]]
    if legal_ep and st[ST_EP] >= 0:
        h ^= ZOBRIST[13 * 64 + 17 + st[ST_EP] % 8]
    return h


@njit(cache=True)
def insufficient_material(board):
    """python-chess's is_insufficient_material (both sides lack mating material)."""
    counts = np.zeros(13, dtype=np.int64)
    light_b, dark_b = 0, 0
    for sq in range(64):
        p = board[sq]
        counts[p] += 1
        if p == 3 or p == 9:
            if (sq // 8 + sq % 8) % 2 == 1:
                light_b += 1
            else:
                dark_b += 1
    for side in range(2):
        off = 0 if side == 0 else 6
        eoff = 6 - off
        if counts[1 + off] + counts[4 + off] + counts[5 + off] > 0:
            return False
        own = counts[1 + off] + counts[2 + off] + counts[3 + off] + counts[4 + off] + counts[5 + off] + 1
        if counts[2 + off] > 0:
            enemy_other = counts[1 + eoff] + counts[2 + eoff] + counts[3 + eoff] + counts[4 + eoff]
            if not (own <= 2 and enemy_other == 0):
                return False
        elif counts[3 + off] > 0:
            same_color = light_b == 0 or dark_b == 0
            if not (same_color and counts[1] + counts[7] == 0 and counts[2] + counts[8] == 0):
                return False
    return True


@njit(cache=True)
def encode_board(board, st, ep_square, out):
    """The 75 labels of a position into `out` (uint8 row)."""
    for sq in range(64):
        out[(7 - sq // 8) * 8 + sq % 8] = board[sq]
    out[64] = st[ST_SIDE]
    for bit in range(4):
        out[65 + bit] = (st[ST_CASTLE] >> bit) & 1
    if ep_square >= 0:
        out[69] = ep_square % 8 + 1
        out[70] = 1 if ep_square // 8 == 2 else 2
    else:
        out[69] = 0
        out[70] = 0
    half = min(st[ST_HALF], 65535)
    full = min(st[ST_FULL], 65535)
    out[71] = half >> 8
    out[72] = half & 255
    out[73] = full >> 8
    out[74] = full & 255


@njit(cache=True)
def _splitmix(state):
    state[0] += np.uint64(0x9E3779B97F4A7C15)
    z = state[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def move_id(move):
    """The task's token id of a move: (from*64 + to)*5 + promo."""
    return ((move & 63) * 64 + ((move >> 6) & 63)) * 5 + ((move >> 12) & 7)


@njit(cache=True)
def replay_legal_sets(move_ids, out_ids, out_offsets):
    """Replay a game given as token ids; record the legal move ids at every ply (for parity tests).

    Returns the number of plies replayed (stops early at an id that is not legal)."""
    board, st = start_position()
    legal = np.empty(256, dtype=np.int32)
    pos = 0
    out_offsets[0] = 0
    for t in range(len(move_ids) + 1):
        n = legal_moves(board, st, legal)
        for i in range(n):
            out_ids[pos] = move_id(legal[i])
            pos += 1
        out_offsets[t + 1] = pos
        if t == len(move_ids):
            return t
        found = -1
        for i in range(n):
            if move_id(legal[i]) == move_ids[t]:
                found = i
        if found < 0:
            return t
        make_move(board, st, legal[found])
    return len(move_ids)


# ----------------------------------------------------------------- SLiCE's linear recurrence on the CPU
# y_t = M_t y_{t-1} + b_t for B x nb independent block sequences (blocks of size k; k = 1 is the
# diagonal SLiCE). Torch pays per-operation overhead on every one of the T steps of tiny k x k
# products, forward and backward; here one compiled loop per sequence runs both directions.


@njit(cache=True, parallel=True)
def slice_scan_forward(maps, bias, y0):
    """maps (B, T, nb, k, k), bias (B, T, nb, k), y0 (B, nb, k) -> states (B, T, nb, k)."""
    n_batch, n_steps, n_blocks, k = bias.shape
    states = np.empty_like(bias)
    for job in prange(n_batch * n_blocks):
        b, blk = job // n_blocks, job % n_blocks
        y = y0[b, blk].copy()
        nxt = np.empty(k, dtype=bias.dtype)
        for t in range(n_steps):
            for i in range(k):
                acc = bias[b, t, blk, i]
                for j in range(k):
                    acc += maps[b, t, blk, i, j] * y[j]
                nxt[i] = acc
            y[:] = nxt
            states[b, t, blk] = y
    return states


@njit(cache=True, parallel=True)
def slice_scan_backward(grad_states, maps, states, y0):
    """Gradients of slice_scan_forward: (d maps, d bias, d y0) from d states."""
    n_batch, n_steps, n_blocks, k = grad_states.shape
    grad_maps = np.empty_like(maps)
    grad_bias = np.empty_like(grad_states)
    grad_y0 = np.empty_like(y0)
    for job in prange(n_batch * n_blocks):
        b, blk = job // n_blocks, job % n_blocks
        g = np.zeros(k, dtype=grad_states.dtype)  # dL/dy_t, carried backwards in time
        back = np.empty(k, dtype=grad_states.dtype)
        for t in range(n_steps - 1, -1, -1):
            for i in range(k):
                g[i] += grad_states[b, t, blk, i]
                grad_bias[b, t, blk, i] = g[i]
            for i in range(k):
                for j in range(k):
                    prev = states[b, t - 1, blk, j] if t > 0 else y0[b, blk, j]
                    grad_maps[b, t, blk, i, j] = g[i] * prev
            for j in range(k):  # M_t^T g
                acc = 0.0
                for i in range(k):
                    acc += maps[b, t, blk, i, j] * g[i]
                back[j] = acc
            g[:] = back
        grad_y0[b, blk] = g
    return grad_maps, grad_bias, grad_y0


# ------------------------------------------------ the Mamba-2/3 state-space recurrence on the CPU
# Per batch row b and head h, state S (N x P):
#   u_t = sum_r B_{t,r} x_{t,r}^T,  S_t = Rot_t(a_t S_{t-1} + beta_t u_{t-1}) + gamma_t u_t,
#   y_{t,r} = S_t^T C_{t,r}
# (Mamba-2: beta = 0, no rotation, rank 1). Rot_t turns the (2i, 2i+1) row pairs by angle_{t,i}.
# The chunked SSD form pays torch's per-operation overhead and masked (C x C) score tensors; this
# loop touches each state once per step. The backward recomputes the states of one sequence
# (T x N x P floats) instead of keeping B x H x T of them from the forward.


@njit(cache=True, fastmath=True, inline="always")
def _input_row(out, bm_t, x_t, n):
    """Row n of u_t = sum_r B_{t,r} x_{t,r}^T."""
    out[:] = 0.0
    for r in range(x_t.shape[0]):
        coef = bm_t[r, n]
        for p in range(out.shape[0]):
            out[p] += coef * x_t[r, p]


@njit(cache=True, fastmath=True, inline="always")
def _turn(row0, row1, cos, sin):
    for p in range(row0.shape[0]):
        s0, s1 = row0[p], row1[p]
        row0[p] = s0 * cos - s1 * sin
        row1[p] = s0 * sin + s1 * cos


@njit(cache=True, fastmath=True, inline="always")
def _ssd_forward_step(state, uprev, bm_t, x_t, cm_t, y_t, a, beta, gamma, angle, trapezoid, rotate, u0, u1):
    """S <- Rot(a S + beta u_{t-1}) + gamma u_t and y_t = S^T C_t, two state rows at a time;
    uprev (u_{t-1} on entry) becomes u_t when trapezoid."""
    y_t[:] = 0.0
    rank, width = x_t.shape
    for i in range(state.shape[0] // 2):
        n0, n1 = 2 * i, 2 * i + 1
        _input_row(u0, bm_t, x_t, n0)
        _input_row(u1, bm_t, x_t, n1)
        s0, s1 = state[n0], state[n1]
        if trapezoid:
            for p in range(width):
                s0[p] = a * s0[p] + beta * uprev[n0, p]
                s1[p] = a * s1[p] + beta * uprev[n1, p]
                uprev[n0, p] = u0[p]
                uprev[n1, p] = u1[p]
        else:
            for p in range(width):
                s0[p] *= a
                s1[p] *= a
        if rotate:
            _turn(s0, s1, np.cos(angle[i]), np.sin(angle[i]))
        for p in range(width):
            s0[p] += gamma * u0[p]
            s1[p] += gamma * u1[p]
        for r in range(rank):
            c0, c1 = cm_t[r, n0], cm_t[r, n1]
            for p in range(width):
                y_t[r, p] += c0 * s0[p] + c1 * s1[p]


@njit(cache=True, fastmath=True)
def _ssd_forward_sequence(x, bm, cm, decay, beta, gamma, angle, trapezoid, rotate, y):
    """One (batch row, head) sequence of ssd_scan_forward (a plain function: parfor bodies vectorise worse)."""
    n_steps, rank, width = x.shape
    state = np.zeros((bm.shape[2], width), dtype=x.dtype)
    uprev = np.zeros_like(state)
    u0, u1 = np.empty(width, dtype=x.dtype), np.empty(width, dtype=x.dtype)
    for t in range(n_steps):
        _ssd_forward_step(
            state, uprev, bm[t], x[t], cm[t], y[t], decay[t], beta[t], gamma[t], angle[t], trapezoid, rotate, u0, u1
        )


@njit(cache=True, parallel=True)
def ssd_scan_forward(x, bm, cm, decay, beta, gamma, angle, trapezoid, rotate):
    """x (B, H, T, R, P); bm, cm (B, T, R, N) with N even; decay, beta, gamma (B, H, T);
    angle (B, H, T, N/2) (read only when rotate) -> y (B, H, T, R, P)."""
    n_batch, n_heads = x.shape[0], x.shape[1]
    y = np.empty_like(x)
    for job in prange(n_batch * n_heads):
        b, h = job // n_heads, job % n_heads
        _ssd_forward_sequence(
            x[b, h], bm[b], cm[b], decay[b, h], beta[b, h], gamma[b, h], angle[b, h], trapezoid, rotate, y[b, h]
        )
    return y


@njit(cache=True, fastmath=True)
def _ssd_backward_row(grad_y, x, bm, cm, decay, beta, gamma, angle, trapezoid, rotate, grads):
    """One batch row of ssd_scan_backward, its heads in turn (they share B and C, so d bm and d cm add up).

    Two state rows per pass over the P columns, every product of a pass fused (the loop is bound by
    passes over the state, not by arithmetic); u_{t-1}, needed for d beta and the carried state, is
    kept as the next step's u_t."""
    grad_x, grad_bm, grad_cm, grad_decay, grad_beta, grad_gamma, grad_angle = grads
    n_heads, n_steps, rank, width = x.shape
    n_state = bm.shape[2]
    dt = x.dtype
    states = np.empty((n_steps + 1, n_state, width), dtype=dt)  # states[t + 1] = S_t, states[0] = 0
    uprev = np.empty((n_state, width), dtype=dt)
    carry = np.empty((n_state, width), dtype=dt)  # a_{t+1} Gc_{t+1}
    du_carry = np.empty((n_state, width), dtype=dt)  # beta_{t+1} Gc_{t+1}
    u_now = np.empty((n_state, width), dtype=dt)  # u_t
    u_before = np.empty((n_state, width), dtype=dt)  # u_{t-1}
    y_scratch = np.empty((rank, width), dtype=dt)
    g0, g1 = np.empty(width, dtype=dt), np.empty(width, dtype=dt)
    du0, du1 = np.empty(width, dtype=dt), np.empty(width, dtype=dt)
    zero = np.zeros(1, dtype=dt)[0]  # accumulate in the data's precision
    for h in range(n_heads):
        states[0] = 0.0
        uprev[:] = 0.0
        xh = x[h]
        for t in range(n_steps):  # recompute the states of this sequence
            states[t + 1] = states[t]
            _ssd_forward_step(
                states[t + 1], uprev, bm[t], xh[t], cm[t], y_scratch,
                decay[h, t], beta[h, t], gamma[h, t], angle[h, t], trapezoid, rotate, g0, g1,
            )  # fmt: skip
        for n in range(n_state):
            _input_row(u_now[n], bm[n_steps - 1], xh[n_steps - 1], n)
        carry[:] = 0.0
        du_carry[:] = 0.0
        for t in range(n_steps - 1, -1, -1):
            a, bt, gm = decay[h, t], beta[h, t], gamma[h, t]
            s_now, s_prev, dy, x_t, gx = states[t + 1], states[t], grad_y[h, t], xh[t], grad_x[h, t]
            gx[:] = 0.0
            acc_g, acc_a, acc_b = zero, zero, zero
            for i in range(n_state // 2):
                n0, n1 = 2 * i, 2 * i + 1
                g0[:] = carry[n0]
                g1[:] = carry[n1]
                sn0, sn1 = s_now[n0], s_now[n1]
                for r in range(rank):  # G_t = carry + C_t dy_t^T; d C_t = S_t dy_t
                    c0, c1, dyr = cm[t, r, n0], cm[t, r, n1], dy[r]
                    acc0, acc1 = zero, zero
                    for p in range(width):
                        g0[p] += c0 * dyr[p]
                        g1[p] += c1 * dyr[p]
                        acc0 += sn0[p] * dyr[p]
                        acc1 += sn1[p] * dyr[p]
                    grad_cm[t, r, n0] += acc0
                    grad_cm[t, r, n1] += acc1
                un0, un1, dc0, dc1 = u_now[n0], u_now[n1], du_carry[n0], du_carry[n1]
                for p in range(width):  # du_t = gamma G_t + beta_{t+1} Gc_{t+1}; d gamma = <G_t, u_t>
                    du0[p] = gm * g0[p] + dc0[p]
                    du1[p] = gm * g1[p] + dc1[p]
                    acc_g += g0[p] * un0[p] + g1[p] * un1[p]
                for r in range(rank):  # d B_t = du_t x_t; d x_t = du_t^T B_t
                    b0, b1, xr, gxr = bm[t, r, n0], bm[t, r, n1], x_t[r], gx[r]
                    acc0, acc1 = zero, zero
                    for p in range(width):
                        acc0 += du0[p] * xr[p]
                        acc1 += du1[p] * xr[p]
                        gxr[p] += b0 * du0[p] + b1 * du1[p]
                    grad_bm[t, r, n0] += acc0
                    grad_bm[t, r, n1] += acc1
                if t == 0:  # nothing is carried into the first step (S_{-1} = 0, u_{-1} = 0)
                    continue
                up0, up1 = u_before[n0], u_before[n1]
                _input_row(up0, bm[t - 1], xh[t - 1], n0)
                _input_row(up1, bm[t - 1], xh[t - 1], n1)
                cos, sin = (np.cos(angle[h, t, i]), np.sin(angle[h, t, i])) if rotate else (1.0, 0.0)
                sp0, sp1, cr0, cr1, dc0, dc1 = s_prev[n0], s_prev[n1], carry[n0], carry[n1], du_carry[n0], du_carry[n1]
                acc_angle = zero
                for p in range(width):  # Gc_t = Rot_t^T G_t against c_t = a S_{t-1} + beta u_{t-1}
                    gc0 = g0[p] * cos + g1[p] * sin
                    gc1 = g1[p] * cos - g0[p] * sin
                    acc_a += gc0 * sp0[p] + gc1 * sp1[p]
                    acc_b += gc0 * up0[p] + gc1 * up1[p]
                    acc_angle += gc1 * (a * sp0[p] + bt * up0[p]) - gc0 * (a * sp1[p] + bt * up1[p])
                    cr0[p] = a * gc0
                    cr1[p] = a * gc1
                    dc0[p] = bt * gc0
                    dc1[p] = bt * gc1
                if rotate:
                    grad_angle[h, t, i] = acc_angle
            grad_gamma[h, t] = acc_g
            grad_decay[h, t] = acc_a
            grad_beta[h, t] = acc_b
            u_now, u_before = u_before, u_now


@njit(cache=True, parallel=True)
def ssd_scan_backward(grad_y, x, bm, cm, decay, beta, gamma, angle, trapezoid, rotate):
    """Gradients of ssd_scan_forward: (dx, d bm, d cm, d decay, d beta, d gamma, d angle) from dy.

    With G_t = dL/dS_t and Gc_t = Rot_t^T G_t (the gradient of the carried state c_t = a_t S_{t-1} + beta_t u_{t-1}):
    G_t = sum_r C_{t,r} dy_{t,r}^T + a_{t+1} Gc_{t+1};  du_t = gamma_t G_t + beta_{t+1} Gc_{t+1};
    da_t = <Gc_t, S_{t-1}>; dbeta_t = <Gc_t, u_{t-1}>; dgamma_t = <G_t, u_t>; dC_{t,r} = S_t dy_{t,r};
    dB_{t,r} = du_t x_{t,r}; dx_{t,r} = du_t^T B_{t,r}; dangle_{t,i} = sum_p Gc[2i+1] c[2i] - Gc[2i] c[2i+1].
    The states are recomputed per sequence (T x N x P floats) rather than kept from the forward."""
    grad_x = np.empty_like(x)
    grad_bm = np.zeros_like(bm)
    grad_cm = np.zeros_like(cm)
    grad_decay = np.empty_like(decay)
    grad_beta = np.empty_like(beta)
    grad_gamma = np.empty_like(gamma)
    grad_angle = np.zeros_like(angle)
    for b in prange(x.shape[0]):
        _ssd_backward_row(
            grad_y[b], x[b], bm[b], cm[b], decay[b], beta[b], gamma[b], angle[b], trapezoid, rotate,
            (grad_x[b], grad_bm[b], grad_cm[b], grad_decay[b], grad_beta[b], grad_gamma[b], grad_angle[b]),
        )  # fmt: skip
    return grad_x, grad_bm, grad_cm, grad_decay, grad_beta, grad_gamma, grad_angle

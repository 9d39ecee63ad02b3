"""Numba game players: uniformly random play and book + heuristic self-play, one game loop.

Both players end a game exactly where python-chess's `is_game_over(claim_draw=True)` would
(checkmate, stalemate, insufficient material, fifty-move and threefold claims) or at `cap`
plies, and write token ids and the 75 state labels as they go.

The book player (issue 11, section 6) is the Numba twin of generate.selfplay_pgn's heuristic
path: a Polyglot book move drawn by entry weight (entries of weight >= 1 whose move is legal,
as python-chess's find_all) until the first position without one, then the heuristic score
capture value + promotion gain + check bonus + mobility of the moved piece from its target
square + Gumbel noise. Its random stream is our splitmix64, so games differ from the
python-chess player's for the same seed; their distribution is the same.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from methodkit.tools.chess_wm.kernels import (
    KING_STEPS,
    KNIGHT_STEPS,
    PROMO_TYPE,
    ST_CASTLE,
    ST_EP,
    ST_HALF,
    ST_SIDE,
    _has_legal_ep,
    _kind,
    _king_square,
    _splitmix,
    attacked,
    encode_board,
    insufficient_material,
    legal_moves,
    make_move,
    move_id,
    position_key,
    start_position,
)

POLICY_RANDOM, POLICY_BOOK = 0, 1
# Capture/promotion values by piece kind (index 0 unused; the king is worth nothing to capture).
PIECE_VALUE = np.array([0.0, 1.0, 3.0, 3.0, 5.0, 9.0, 0.0])


@njit(cache=True)
def _uniform(rng):
    """A double in [0, 1) with 53 random bits."""
    return float(_splitmix(rng) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def _game_status(board, st, legal, n, count, repeated, keys, first, p, b2, s2, probe):
    """python-chess's game-over status with draw claims at ply p, or -1 to play on.

    count: occurrences of this position since the last irreversible move (`first`);
    repeated: some position since then occurred twice (a threefold claim may be one move away)."""
    if n == 0:
        return 1 if attacked(board, _king_square(board, st[ST_SIDE]), 1 - st[ST_SIDE]) else 2
    if insufficient_material(board):
        return 3
    if st[ST_HALF] >= 100:
        return 4
    if st[ST_HALF] >= 99:  # a fifty-move claim is valid when some legal non-zeroing move exists
        for i in range(n):
            m = legal[i]
            if board[m & 63] == 1 or board[m & 63] == 7 or board[(m >> 6) & 63] != 0 or (m >> 15) == 1:
                continue
            b2[:] = board
            s2[:] = st
            make_move(b2, s2, m)
            if legal_moves(b2, s2, probe) > 0:
                return 4
    if count >= 3:
        return 5
    if repeated:  # a threefold claim by playing a move into a position seen twice
        for i in range(n):
            b2[:] = board
            s2[:] = st
            make_move(b2, s2, legal[i])
            k2 = legal_moves(b2, s2, probe)
            nk = position_key(b2, s2, _has_legal_ep(probe, k2))
            c2 = 0
            for j in range(first, p + 1):
                if keys[j] == nk:
                    c2 += 1
            if c2 >= 2:
                return 5
    return -1


@njit(cache=True)
def polyglot_key(board, st, table):
    """The Polyglot Zobrist key (python-chess's zobrist_hash) from the 781-entry random table."""
    h = np.uint64(0)
    for sq in range(64):
        piece = board[sq]
        if piece != 0:
            white = 1 if piece <= 6 else 0
            h ^= table[64 * ((_kind(piece) - 1) * 2 + white) + sq]
    c = st[ST_CASTLE]
    for bit in range(4):
        if (c >> bit) & 1:
            h ^= table[768 + bit]
    ep = st[ST_EP]
    if ep >= 0:  # hashed only when a pawn of the side to move stands beside the pushed pawn
        side = st[ST_SIDE]
        pushed = ep - 8 if side == 0 else ep + 8
        pawn = 1 if side == 0 else 7
        f = ep % 8
        if (f > 0 and board[pushed - 1] == pawn) or (f < 7 and board[pushed + 1] == pawn):
            h ^= table[772 + f]
    if st[ST_SIDE] == 0:
        h ^= table[780]
    return h


@njit(cache=True)
def _book_move(board, st, legal, n, book_keys, book_moves, book_weights, table, rng):
    """A legal book move drawn by weight, or -1 when the position has no usable entry."""
    key = polyglot_key(board, st, table)
    i = np.searchsorted(book_keys, key)
    total = 0
    picks = np.empty(64, dtype=np.int32)
    weights = np.empty(64, dtype=np.int64)
    k = 0
    while i < len(book_keys) and book_keys[i] == key and k < 64:
        w = book_weights[i]
        raw = book_moves[i]
        i += 1
        if w < 1:
            continue
        to, frm, pg = raw & 63, (raw >> 6) & 63, (raw >> 12) & 7
        if pg == 0 and _kind(board[frm]) == 6:  # Polyglot writes castling as king-takes-rook
            if (frm == 4 or frm == 60) and to == frm + 3:
                to = frm + 2
            elif (frm == 4 or frm == 60) and to == frm - 4:
                to = frm - 2
        code = 0 if pg == 0 else 5 - pg  # Polyglot n b r q = 1..4; ours q r b n = 1..4
        for j in range(n):
            m = legal[j]
            if (m & 63) == frm and ((m >> 6) & 63) == to and ((m >> 12) & 7) == code:
                picks[k] = m
                weights[k] = w
                total += w
                k += 1
                break
    if k == 0 or total <= 0:
        return -1
    pick = _uniform(rng) * total
    for j in range(k):
        pick -= weights[j]
        if pick < 0:
            return picks[j]
    return picks[k - 1]


@njit(cache=True)
def _reach(board, kind, side, sq):
    """How many squares a piece of `kind` on `sq` attacks (sliders stop at the first piece)."""
    f, r = sq % 8, sq // 8
    count = 0
    if kind == 1:
        dr = 1 if side == 0 else -1
        for df in (-1, 1):
            if 0 <= f + df < 8 and 0 <= r + dr < 8:
                count += 1
    elif kind == 2 or kind == 6:
        for i in range(8):
            if kind == 2:
                nf, nr = f + KNIGHT_STEPS[i, 0], r + KNIGHT_STEPS[i, 1]
            else:
                nf, nr = f + KING_STEPS[i, 0], r + KING_STEPS[i, 1]
            if 0 <= nf < 8 and 0 <= nr < 8:
                count += 1
    else:
        for i in range(8):
            df, dr = KING_STEPS[i, 0], KING_STEPS[i, 1]
            diagonal = df != 0 and dr != 0
            if (kind == 3 and not diagonal) or (kind == 4 and diagonal):
                continue
            nf, nr = f + df, r + dr
            while 0 <= nf < 8 and 0 <= nr < 8:
                count += 1
                if board[nr * 8 + nf] != 0:
                    break
                nf += df
                nr += dr
    return count


@njit(cache=True)
def heuristic_scores(board, st, legal, n, check_bonus, mobility_weight, out):
    """The heuristic player's score of every legal move, before noise (generate.heuristic_move)."""
    side = st[ST_SIDE]
    b2 = np.empty(64, dtype=np.int8)
    s2 = np.empty(5, dtype=np.int64)
    for i in range(n):
        m = legal[i]
        frm, to, promo, flag = m & 63, (m >> 6) & 63, (m >> 12) & 7, m >> 15
        victim = _kind(board[to]) if board[to] != 0 else (1 if flag == 1 else 0)
        score = PIECE_VALUE[victim]
        kind = _kind(board[frm])
        if promo != 0:
            kind = PROMO_TYPE[promo]
            score += PIECE_VALUE[kind] - 1.0
        b2[:] = board
        s2[:] = st
        make_move(b2, s2, m)
        if attacked(b2, _king_square(b2, 1 - side), side):
            score += check_bonus
        # mobility on the board before the move, with the mover lifted off its square
        moved = board[frm]
        board[frm] = 0
        score += mobility_weight * _reach(board, kind, side, to)
        board[frm] = moved
        out[i] = score


@njit(cache=True)
def play_game(seed, cap, ep_legal, tokens, states, policy, book_keys, book_moves, book_weights, table, params):
    """One game from the start position; fills tokens[1:n+1] and states[:n+1].

    policy: POLICY_RANDOM (uniform legal move) or POLICY_BOOK (book, then heuristic with
    params = [temperature, check_bonus, mobility_weight]). Returns (plies, status, book plies);
    status 0 cut at cap, 1 checkmate, 2 stalemate, 3 insufficient material, 4 fifty-move claim,
    5 threefold claim."""
    board, st = start_position()
    rng = np.zeros(1, dtype=np.uint64)
    rng[0] = seed
    legal = np.empty(256, dtype=np.int32)
    probe = np.empty(256, dtype=np.int32)
    scores = np.empty(256, dtype=np.float64)
    keys = np.zeros(cap + 1, dtype=np.uint64)
    window = np.zeros(cap + 1, dtype=np.int64)
    b2 = np.empty(64, dtype=np.int8)
    s2 = np.empty(5, dtype=np.int64)
    repeated = False
    in_book = policy == POLICY_BOOK and len(book_keys) > 0
    book_plies = 0
    p = 0
    while True:
        n = legal_moves(board, st, legal)
        has_ep = _has_legal_ep(legal, n)
        ep_sq = st[ST_EP] if (has_ep or not ep_legal) else -1
        encode_board(board, st, ep_sq, states[p])
        key = position_key(board, st, has_ep)
        keys[p] = key
        count = 0
        for j in range(window[p], p + 1):
            if keys[j] == key:
                count += 1
        if count >= 2:
            repeated = True
        status = _game_status(board, st, legal, n, count, repeated, keys, window[p], p, b2, s2, probe)
        if status >= 0:
            break
        if p >= cap:
            status = 0
            break
        move = -1
        if policy == POLICY_RANDOM:
            move = legal[int(_splitmix(rng) % np.uint64(n))]
        else:
            if in_book:
                move = _book_move(board, st, legal, n, book_keys, book_moves, book_weights, table, rng)
                if move < 0:
                    in_book = False
                else:
                    book_plies += 1
            if move < 0:
                heuristic_scores(board, st, legal, n, params[1], params[2], scores)
                best = -np.inf
                for i in range(n):
                    u = max(_uniform(rng), 1e-300)
                    s = scores[i] - params[0] * np.log(-np.log(u))
                    if s > best:
                        best = s
                        move = legal[i]
        frm, to = move & 63, (move >> 6) & 63
        castle_before = st[ST_CASTLE]
        zeroing = _kind(board[frm]) == 1 or board[to] != 0
        make_move(board, st, move)
        tokens[p + 1] = move_id(move)
        p += 1
        if zeroing or st[ST_CASTLE] != castle_before or has_ep:
            window[p] = p
            repeated = False
        else:
            window[p] = window[p - 1]
    return p, status, book_plies

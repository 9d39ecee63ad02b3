"""Monte-Carlo rollouts of the Bayesian tool-graph simulator (Numba).

One context c is a task turn in simulator state: goal bitmask G, prerequisites per tool (bitmask of goal
tools that must be done first), done ⊆ G, previous tool, steps left. Candidate a is executed first
(success w.p. cand_ok[c,k]), then the competent-but-noisy policy π draws next tools from a posterior draw
of the transition matrix tilted toward unfinished goal tools whose prerequisites are met, mixed with
ε-uniform, until STOP or the horizon. Success = every goal tool done and nothing irreversible broken.

Every rollout (c, k, r) has its own counter-based stream: splitmix64 of (seed, c, k, r) seeds a
xoroshiro128+ generator, so the result is bit-identical whatever the thread count or schedule.
Node layout of a context's local graph with n tools: rows 0..n-1 tools + n = START; columns 0..n-1 tools
+ n = STOP. A candidate index n means `end_turn` (STOP).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

MASK64 = 0xFFFFFFFFFFFFFFFF


@njit(cache=True, inline="always")
def _splitmix(x):
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(MASK64)
    z = x
    z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & np.uint64(MASK64)
    z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & np.uint64(MASK64)
    return x, z ^ (z >> np.uint64(31))


@njit(cache=True, inline="always")
def _rotl(x, k):
    return ((x << np.uint64(k)) | (x >> np.uint64(64 - k))) & np.uint64(MASK64)


@njit(cache=True, inline="always")
def _next(s0, s1):
    """xoroshiro128+: (new s0, new s1, a uniform double in [0, 1))."""
    result = (s0 + s1) & np.uint64(MASK64)
    s1 ^= s0
    n0 = _rotl(s0, 24) ^ s1 ^ ((s1 << np.uint64(16)) & np.uint64(MASK64))
    n1 = _rotl(s1, 37)
    return n0, n1, (result >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def _seed_stream(seed, c, k, r):
    # np.uint64(...) around each result: a no-op compiled, and it keeps the interpreted twin (.py_func)
    # in uint64 instead of Python ints that overflow the next call's int64 argument
    x = np.uint64(seed)
    x = np.uint64(_splitmix(x ^ (np.uint64(c) * np.uint64(0x9E3779B97F4A7C15)))[0])
    x = np.uint64(_splitmix(x ^ (np.uint64(k) * np.uint64(0xD1B54A32D192ED03)))[0])
    x, s0 = _splitmix(x ^ (np.uint64(r) * np.uint64(0x8CB92BA72F3D8DD7)))
    x, s1 = _splitmix(np.uint64(x))
    s0, s1 = np.uint64(s0), np.uint64(s1)
    if s0 == 0 and s1 == 0:
        s1 = np.uint64(1)
    return s0, s1


@njit(cache=True)
def _execute(j, n, goal, prereq_c, done, mut, multi, ok_prob, u):
    """One executed tool j (n = STOP is handled by the caller): (new done, failed)."""
    bit = np.uint64(1) << np.uint64(j)
    is_mut = (mut & bit) != 0
    if goal & bit:
        if (prereq_c[j] & done) != prereq_c[j]:
            return done, is_mut  # out of order: no progress; a mutating call breaks the state
        if done & bit:
            return done, is_mut and (multi & bit) == 0  # beyond its multiplicity
        if u < ok_prob:
            return done | bit, False
        return done, False
    return done, is_mut  # off-goal: a mutating call does irreversible damage, a read-only one costs a step


@njit(cache=True)
def _rollout(cdf, rho, n, goal, prereq_c, done, cand, ok, mut, multi, eps, gamma, beta, steps, s0, s1):
    """One rollout; 1.0 on success. cdf here holds the transition probabilities (rows sum to one)."""
    D = cdf.shape[0]
    s0, s1, u = _next(s0, s1)
    d = min(int(u * D), D - 1)
    if cand == n:  # end_turn first
        return 1.0 if done == goal else 0.0
    s0, s1, u = _next(s0, s1)
    done, failed = _execute(cand, n, goal, prereq_c, done, mut, multi, ok, u)
    if failed:
        return 0.0
    prev = cand
    weights = np.empty(n + 1)
    for _ in range(steps):
        total = 0.0
        for j in range(n + 1):
            w = cdf[d, prev, j]
            if j == n:
                g = 1.0 + gamma if done == goal else 1.0
            else:
                bit = np.uint64(1) << np.uint64(j)
                ready = (goal & bit) != 0 and (done & bit) == 0 and (prereq_c[j] & done) == prereq_c[j]
                g = 1.0 + gamma if ready else 1.0
            weights[j] = w * g**beta
            total += weights[j]
        s0, s1, u = _next(s0, s1)
        acc = 0.0
        pick = n
        for j in range(n + 1):
            acc += (1.0 - eps) * (weights[j] / total if total > 0 else 0.0) + eps / (n + 1)
            if u < acc:
                pick = j
                break
        if pick == n:
            return 1.0 if done == goal else 0.0
        s0, s1, u = _next(s0, s1)
        done, failed = _execute(pick, n, goal, prereq_c, done, mut, multi, rho[d, pick], u)
        if failed:
            return 0.0
        prev = pick
    return 1.0 if done == goal else 0.0


@njit(cache=True, parallel=True)
def sim_values(probs, rho, goal, prereq, done, cand, cand_ok, mut, multi, eps, gamma, beta, steps, R, seed, keys=None):
    """(mean[C,K], var[C,K]) of rollout success. probs[D, n+1, n+1] posterior transition draws, rho[D, n]
    reliability draws, goal/done/multi uint64, prereq[C, n] uint64, cand
    int32[C,K] (-1 = padding), cand_ok[C,K] success probability of the first call, steps int32[C] left after it.
    keys uint64[C] name each context's random stream (default: its row), so a context's value does not
    depend on which other contexts share the call."""
    C, K = cand.shape
    n = rho.shape[1]
    mean = np.zeros((C, K))
    var = np.zeros((C, K))
    if keys is None:
        keys = np.arange(C).astype(np.uint64)
    for ck in prange(C * K):
        c = ck // K
        k = ck % K
        if cand[c, k] < 0:
            continue
        hits = 0.0
        for r in range(R):
            s0, s1 = _seed_stream(seed, keys[c], k, r)
            hits += _rollout(
                probs,
                rho,
                n,
                goal[c],
                prereq[c],
                done[c],
                cand[c, k],
                cand_ok[c, k],
                mut,
                multi[c],
                eps,
                gamma,
                beta,
                steps[c],
                s0,
                s1,
            )
        m = hits / R
        mean[c, k] = m
        var[c, k] = m * (1.0 - m)
    return mean, var
